"""``@vectorize``, the Numba way: a restricted Python function compiled (from its AST) into
wgflow's elementwise expression, callable on NumPy arrays and usable inside a graph."""

import ast
import inspect
import math
import textwrap

import numpy as np

from . import _devices
from ._graph import Graph, Tensor
from ._util import as_feed, dtype_name, placeholder_shapes

_MATH = {
    "exp": "exp", "log": "log", "sqrt": "sqrt", "tanh": "tanh", "sin": "sin", "cos": "cos",
    "asin": "asin", "acos": "acos", "atan": "atan", "asinh": "asinh", "acosh": "acosh",
    "atanh": "atanh", "erf": "erf", "log1p": "log1p", "expm1": "expm1", "floor": "floor",
    "ceil": "ceil", "fabs": "abs", "isnan": "isnan", "isinf": "isinf", "isfinite": "isfinite",
}
_BIN = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.Pow: "pow",
        ast.FloorDiv: "floor_divide", ast.Mod: "remainder"}
_CMP = {ast.Lt: "less", ast.LtE: "less_equal", ast.Gt: "greater", ast.GtE: "greater_equal",
        ast.Eq: "equal", ast.NotEq: "not_equal"}
_PREDICATES = {"isnan", "isinf", "isfinite"}


def _parse_signature(sig):
    sig = sig.replace(" ", "")
    if "(" not in sig or not sig.endswith(")"):
        raise TypeError(f"vectorize: signature {sig!r} is not of the form 'float32(float32, float32)'")
    ret, args = sig[:-1].split("(", 1)
    return dtype_name(ret), tuple(dtype_name(a) for a in args.split(",") if a)


class _Compiler:
    """Walks one function's AST and emits expression nodes ``(kind, ...)`` in topological
    order; each value is ``(node index, dtype)`` or, for a literal not yet typed,
    ``(None, python number)``."""

    def __init__(self, fn_name, where, arg_names, arg_dtypes):
        self.name = fn_name
        self.file, self.line0 = where
        self.nodes = []
        self.env = {n: (self._emit(("in", i)), d) for i, (n, d) in enumerate(zip(arg_names, arg_dtypes))}

    def fail(self, node, what):
        line = self.line0 + getattr(node, "lineno", 1) - 1
        raise TypeError(
            f"vectorize: {what} at {self.file}:{line} (in '{self.name}') is not supported; "
            "use arithmetic, comparisons, math.* functions, min/max/abs and x if c else y"
        )

    def _emit(self, node):
        self.nodes.append(node)
        return len(self.nodes) - 1

    def typed(self, v, dtype):
        i, d = v
        if i is None:
            return (self._emit(("lit", dtype, float(d))), dtype)
        return v

    @staticmethod
    def _float(d):
        return d if d in ("float32", "float16") else "float32"

    def cast(self, v, dtype):
        i, d = v
        if i is None or d == dtype:
            return self.typed(v, dtype)
        return (self._emit(("cast", dtype, i)), dtype)

    def pair(self, a, b):
        if a[0] is None and b[0] is None:
            d = "float32" if isinstance(a[1], float) or isinstance(b[1], float) else "int32"
            return self.typed(a, d), self.typed(b, d)
        if a[0] is None:
            a = self.typed(a, b[1])
        if b[0] is None:
            b = self.typed(b, a[1])
        return a, b

    def binary(self, op, a, b):
        a, b = self.pair(a, b)
        if a[1] != b[1]:
            # Python mixes int and float freely: an int operand goes to the float dtype.
            if a[1] in ("float32", "float16") and b[1] not in ("float32", "float16"):
                b = self.cast(b, a[1])
            elif b[1] in ("float32", "float16") and a[1] not in ("float32", "float16"):
                a = self.cast(a, b[1])
        out = "bool" if op in _CMP.values() or op.startswith("logical") else a[1]
        return (self._emit(("bin", op, a[0], b[0])), out)

    def unary(self, op, a, node):
        if a[0] is None:
            a = self.typed(a, "float32")
        if op not in ("neg", "abs", "logical_not", "floor", "ceil") and a[1] not in ("float32", "float16"):
            a = self.cast(a, "float32")
        out = "bool" if op in _PREDICATES or op == "logical_not" else a[1]
        return (self._emit(("un", op, a[0])), out)

    def expr(self, e):
        if isinstance(e, ast.Constant) and isinstance(e.value, (int, float)) and not isinstance(e.value, complex):
            return (None, e.value)
        if isinstance(e, ast.Name):
            if e.id in self.env:
                return self.env[e.id]
            if e.id in ("True", "False"):
                return (None, e.id == "True")
            self.fail(e, f"the name '{e.id}' (only arguments and local variables can be read)")
        if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "math":
            if e.attr in ("pi", "e", "inf", "tau"):
                return (None, getattr(math, e.attr))
            self.fail(e, f"math.{e.attr} as a value")
        if isinstance(e, ast.BinOp) and type(e.op) in _BIN:
            a, b = self.expr(e.left), self.expr(e.right)
            if a[0] is None and b[0] is None:
                return (None, _fold(e.op, a[1], b[1]))
            if isinstance(e.op, ast.Div):
                a, b = self.pair(a, b)
                a, b = self.cast(a, self._float(a[1])), self.cast(b, self._float(b[1]))
            return self.binary(_BIN[type(e.op)], a, b)
        if isinstance(e, ast.UnaryOp):
            v = self.expr(e.operand)
            if isinstance(e.op, ast.UAdd):
                return v
            if isinstance(e.op, ast.USub):
                return (None, -v[1]) if v[0] is None else self.unary("neg", v, e)
            if isinstance(e.op, ast.Not):
                return self.unary("logical_not", self.typed(v, "bool"), e)
            self.fail(e, f"the operator {type(e.op).__name__}")
        if isinstance(e, ast.Compare):
            out, left = None, self.expr(e.left)
            for op, right in zip(e.ops, e.comparators):
                if type(op) not in _CMP:
                    self.fail(e, f"the comparison {type(op).__name__}")
                r = self.expr(right)
                c = self.binary(_CMP[type(op)], left, r)
                out = c if out is None else self.binary("logical_and", out, c)
                left = r
            return out
        if isinstance(e, ast.BoolOp):
            op = "logical_and" if isinstance(e.op, ast.And) else "logical_or"
            vals = [self.typed(self.expr(v), "bool") for v in e.values]
            out = vals[0]
            for v in vals[1:]:
                out = self.binary(op, out, v)
            return out
        if isinstance(e, ast.IfExp):
            c = self.typed(self.expr(e.test), "bool")
            if c[1] != "bool":
                self.fail(e.test, "a condition that is not a comparison")
            a, b = self.pair(self.expr(e.body), self.expr(e.orelse))
            return (self._emit(("sel", c[0], a[0], b[0])), a[1])
        if isinstance(e, ast.Call):
            return self.call(e)
        self.fail(e, f"the construct {type(e).__name__}")

    def call(self, e):
        if e.keywords:
            self.fail(e, "keyword arguments")
        f = e.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "math":
            name = f.attr
        elif isinstance(f, ast.Name):
            name = f.id
        else:
            self.fail(e, "a call of something other than a math function, min, max or abs")
        args = [self.expr(a) for a in e.args]
        if name in ("min", "max") and len(args) >= 2:
            out = args[0]
            for a in args[1:]:
                out = self.binary("minimum" if name == "min" else "maximum", out, a)
            return out
        if name in ("pow",) and len(args) == 2:
            a, b = self.pair(*args)
            return self.binary("pow", a, b)
        if name in ("abs", "fabs") and len(args) == 1:
            return self.unary("abs", args[0], e)
        if name in ("float", "int", "bool") and len(args) == 1:
            return self.cast(args[0], {"float": "float32", "int": "int32", "bool": "bool"}[name])
        if name in _MATH and len(args) == 1:
            return self.unary(_MATH[name], args[0], e)
        self.fail(e, f"the call {name}() with {len(args)} argument(s)")

    def body(self, fn):
        stmts = fn.body
        if stmts and isinstance(stmts[0], ast.Expr) and isinstance(getattr(stmts[0], "value", None), ast.Constant):
            stmts = stmts[1:]
        for s in stmts:
            if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
                self.env[s.targets[0].id] = self.expr(s.value)
            elif isinstance(s, ast.Return) and s.value is not None:
                return self.expr(s.value)
            else:
                self.fail(s, f"the statement {type(s).__name__}")
        self.fail(fn, "a function without a final return")


_FOLD = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.Pow: lambda a, b: a ** b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
}


def _fold(op, a, b):
    """Two Python literals combined at compile time, as Python would."""
    return _FOLD[type(op)](a, b)


class Vectorized:
    """A function compiled by ``@vectorize``: call it on arrays (a cached one-op graph per
    signature and rank runs it) or on graph tensors (it becomes one elementwise node that
    fuses with its neighbours and is differentiable)."""

    def __init__(self, fn, signatures, target):
        if isinstance(signatures, str):
            signatures = [signatures]
        if not signatures:
            raise TypeError("vectorize: give at least one signature, e.g. 'float32(float32, float32)'")
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn
        self.target = target
        self.signatures = [_parse_signature(s) for s in signatures]
        try:
            source = textwrap.dedent(inspect.getsource(fn))
            line0 = inspect.getsourcelines(fn)[1]
        except (OSError, TypeError) as e:
            raise TypeError(f"vectorize: the source of '{fn.__name__}' is not available: {e}") from e
        tree = ast.parse(source)
        fdef = next((n for n in tree.body if isinstance(n, ast.FunctionDef)), None)
        if fdef is None:
            raise TypeError(f"vectorize: '{fn.__name__}' is not a plain function")
        if fdef.args.vararg or fdef.args.kwarg or fdef.args.kwonlyargs or fdef.args.defaults:
            raise TypeError(f"vectorize: '{fn.__name__}' must take plain positional arguments")
        self._args = [a.arg for a in fdef.args.args]
        where = (inspect.getsourcefile(fn) or "<unknown>", line0)
        self._exprs = {}
        for ret, args in self.signatures:
            if len(args) != len(self._args):
                raise TypeError(f"vectorize: signature {ret}({', '.join(args)}) has {len(args)} arguments; '{fn.__name__}' takes {len(self._args)}")
            c = _Compiler(fn.__name__, where, self._args, args)
            out = c.cast(c.body(fdef), ret)
            if out[0] is None:
                out = c.typed(out, ret)
            self._exprs[args] = c.nodes
        self._cache = {}

    def _device(self, device):
        if device is not None:
            return device
        if self.target == "cpu":
            return "cpu:0"
        if self.target in ("gpu", "cuda"):
            gpus = _devices.list_physical_devices("GPU")
            return gpus[0].device if gpus else "cpu:0"
        return _devices.best_device()

    def _signature(self, dtypes):
        for ret, args in self.signatures:
            if dtypes is None or tuple(dtypes) == args:
                return args
        raise TypeError(
            f"'{self.__name__}' has no signature for ({', '.join(dtypes)}); it has "
            + ", ".join(f"{r}({', '.join(a)})" for r, a in self.signatures)
        )

    def __call__(self, *args, device=None):
        if len(args) != len(self._args):
            raise TypeError(f"'{self.__name__}' takes {len(self._args)} arguments, {len(args)} given")
        tensors = [a for a in args if isinstance(a, Tensor)]
        if tensors:
            g = tensors[0].graph
            sig = self._signature([a.dtype for a in args] if len(tensors) == len(args) else None)
            ins = [a if isinstance(a, Tensor) else g.constant(as_feed(a, d)) for a, d in zip(args, sig)]
            return g._wrap(g._g.apply_expr(self.__name__, self._exprs[sig], [t._t for t in ins]))
        given = [a.dtype.name for a in args if isinstance(a, np.ndarray)]
        sig = self._signature(None if len(given) != len(args) else given)
        arrays = [as_feed(a, d, f"argument {i} of '{self.__name__}'") for i, (a, d) in enumerate(zip(args, sig))]
        dev = self._device(device)
        shapes, layout = placeholder_shapes(arrays)
        key = (sig, layout, dev)
        entry = self._cache.get(key)
        if entry is None:
            from ._session import Session

            g = Graph()
            xs = [g.placeholder(f"x{i}", s, d) for i, (s, d) in enumerate(zip(shapes, sig))]
            y = self(*xs)
            entry = (Session(g, device=dev), xs, y)
            self._cache[key] = entry
        sess, xs, y = entry
        return sess.run(y, feed_dict=dict(zip(xs, arrays)))


def vectorize(signatures, target="gpu"):
    """``@vectorize(["float32(float32, float32)"], target="gpu")``: compile the decorated
    function (arithmetic, comparisons, ``math.*``, ``min``/``max``/``abs``, ``x if c else
    y``, local assignments) into an elementwise kernel. ``target`` is ``"gpu"`` (the first
    visible GPU, else ``cpu:0``), ``"cpu"`` or ``"best"``; a call may pass ``device=``."""
    def wrap(fn):
        return Vectorized(fn, signatures, target)

    return wrap
