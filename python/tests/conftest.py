"""Every test that takes ``device`` runs on each visible device: the GPU adapters (in CI,
lavapipe's Vulkan and llvmpipe's GL) and cpu:0, as the Rust tests do.
``WGFLOW_VISIBLE_DEVICES`` narrows the GPUs; ``WGFLOW_REQUIRE_GPU=1`` makes "no GPU" a
failure instead of a cpu-only run."""

import os
import tempfile

if not os.environ.get("XDG_RUNTIME_DIR"):
    # Mesa's EGL probes Wayland and complains without a runtime dir.
    os.environ["XDG_RUNTIME_DIR"] = tempfile.mkdtemp()
    os.chmod(os.environ["XDG_RUNTIME_DIR"], 0o700)

import pytest  # noqa: E402

import wgflow  # noqa: E402

DEVICES = [d.device for d in wgflow.list_physical_devices()]

if os.environ.get("WGFLOW_REQUIRE_GPU") == "1" and not any(d.startswith("gpu") for d in DEVICES):
    raise RuntimeError("WGFLOW_REQUIRE_GPU=1 but wgflow sees no GPU adapter")


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param
