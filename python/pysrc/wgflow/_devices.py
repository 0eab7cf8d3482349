"""Devices, TensorFlow style: ``list_physical_devices``, ``set_visible_devices``, and the
PyTorch idiom ``best_device()``."""

from . import _wgflow

_visible = None  # GPU indices set by set_visible_devices; None: WGFLOW_VISIBLE_DEVICES


class PhysicalDevice:
    """One device: ``device`` (``"gpu:0"``, ``"cpu:0"``), ``name`` (the adapter),
    ``device_type`` (``"GPU"``/``"CPU"``), ``kind`` (discrete, integrated, virtual,
    software, cpu), ``backend`` (vulkan, gl, metal, dx12, cpu), ``driver``, ``limits``."""

    def __init__(self, info):
        self.device = info["device"]
        self.name = info["name"]
        self.kind = info["kind"]
        self.backend = info["backend"]
        self.driver = info["driver"]
        self.limits = dict(info["limits"])
        self.device_type = "CPU" if self.device.startswith("cpu") else "GPU"

    @property
    def index(self):
        return int(self.device.split(":")[1])

    def __repr__(self):
        return (
            f"PhysicalDevice(device={self.device!r}, name={self.name!r}, kind={self.kind!r}, "
            f"backend={self.backend!r})"
        )

    def __eq__(self, other):
        return isinstance(other, PhysicalDevice) and other.device == self.device

    def __hash__(self):
        return hash(self.device)


def _visible_gpus():
    if _visible is not None:
        return list(_visible)
    return _wgflow.visible_from_env()


def list_physical_devices(device_type=None):
    """Every visible device (GPUs in preference order, then ``cpu:0``); ``device_type``
    ``"GPU"`` or ``"CPU"`` filters."""
    visible = _visible_gpus()
    out = []
    for info in _wgflow.physical_devices():
        d = PhysicalDevice(info)
        if d.device_type == "GPU" and visible is not None and d.index not in visible:
            continue
        if device_type is not None and d.device_type != device_type.upper():
            continue
        out.append(d)
    return out


def set_visible_devices(devices, device_type=None):
    """Restrict the GPUs later sessions may use (``cpu:0`` is always visible). ``devices``
    is a list of ``PhysicalDevice`` objects, specs (``"gpu:1"``) or indices; an empty list
    hides every GPU. ``None`` returns to ``WGFLOW_VISIBLE_DEVICES``."""
    global _visible
    if devices is None:
        _visible = None
        return
    if isinstance(devices, (PhysicalDevice, str, int)):
        devices = [devices]
    gpus = {
        int(info["device"].split(":")[1])
        for info in _wgflow.physical_devices()
        if info["device"].startswith("gpu")
    }
    chosen = []
    for d in devices:
        if isinstance(d, PhysicalDevice):
            spec = d.device
        elif isinstance(d, int):
            spec = f"gpu:{d}"
        else:
            spec = _wgflow.parse_device(d)
        if spec.startswith("cpu"):
            continue
        i = int(spec.split(":")[1])
        if i not in gpus:
            raise ValueError(f"set_visible_devices: {spec} does not exist (GPUs: {sorted(gpus)})")
        chosen.append(i)
    _visible = sorted(set(chosen))


def get_visible_devices(device_type=None):
    """The devices ``list_physical_devices`` shows (the visible ones)."""
    return list_physical_devices(device_type)


def best_device():
    """The best visible device as a spec: a hardware GPU if there is one, else ``"cpu:0"``
    (software GPUs such as lavapipe rank below ``cpu:0``)."""
    return _wgflow.best_device(_visible)


def is_gpu_available():
    """Whether a hardware GPU is visible (``torch.cuda.is_available()``)."""
    return best_device().startswith("gpu")
