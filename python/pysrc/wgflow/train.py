"""Optimizers, TensorFlow 1 style: ``train_op = wgflow.train.Adam(0.01).minimize(g, loss)``,
then ``sess.run(train_op, feed_dict=...)`` in a loop."""

from ._graph import Tensor


class Optimizer:
    """Builds the update of variables from the gradients of a loss (as graph nodes)."""

    _kind = None

    def __init__(self, learning_rate, **extra):
        self.learning_rate = float(learning_rate)
        self._extra = extra

    def minimize(self, graph, loss, var_list=None):
        """One train target updating ``var_list`` (default: every variable of ``graph``
        so far) to reduce ``sum(loss)``."""
        if not isinstance(loss, Tensor):
            raise TypeError("minimize: loss must be a wgflow.Tensor")
        vs = graph.variables() if var_list is None else list(var_list)
        op = graph._g.minimize(self._kind, self.learning_rate, loss._t, [v._t for v in vs], **self._extra)
        return graph._wrap(op, target=True)


class SGD(Optimizer):
    """Plain gradient descent; ``momentum > 0`` keeps a velocity (``nesterov`` too)."""

    def __init__(self, learning_rate, momentum=0.0, nesterov=False):
        if momentum:
            super().__init__(learning_rate, momentum=float(momentum))
            self._kind = "nesterov" if nesterov else "momentum"
        else:
            super().__init__(learning_rate)
            self._kind = "sgd"


GradientDescentOptimizer = SGD


class Adam(Optimizer):
    """Adam (β1 = 0.9, β2 = 0.999, ε = 1e-8), as ``torch.optim.Adam``."""

    _kind = "adam"


AdamOptimizer = Adam


class AdamW(Optimizer):
    """Adam with decoupled weight decay."""

    _kind = "adamw"

    def __init__(self, learning_rate, weight_decay=0.01):
        super().__init__(learning_rate, weight_decay=float(weight_decay))
