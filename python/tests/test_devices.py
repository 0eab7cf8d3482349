"""Device listing, visibility and the best device."""

import numpy as np
import pytest

import wgflow


def test_list_and_best():
    devs = wgflow.list_physical_devices()
    assert devs[-1].device == "cpu:0" and devs[-1].device_type == "CPU"
    for d in devs:
        assert d.name and d.kind and d.backend
        assert d.limits["max_storage_buffer_binding_size"] > 0
    assert wgflow.best_device() in [d.device for d in devs]
    assert all(d.device_type == "GPU" for d in wgflow.list_physical_devices("GPU"))


def test_set_visible_devices_hides_gpus():
    try:
        wgflow.set_visible_devices([])
        assert [d.device for d in wgflow.list_physical_devices()] == ["cpu:0"]
        assert wgflow.best_device() == "cpu:0"
        g = wgflow.Graph()
        with g.device("gpu:0"):
            y = g.constant(np.ones(2, np.float32)) * 2.0
        s = wgflow.Session(g, soft_placement=True)
        assert s.device == "cpu:0"
        np.testing.assert_array_equal(s.run(y), [2.0, 2.0])
        with pytest.raises(ValueError):
            wgflow.set_visible_devices(["gpu:99"])
    finally:
        wgflow.set_visible_devices(None)


def test_env_visibility_is_honoured(monkeypatch):
    monkeypatch.setenv("WGFLOW_VISIBLE_DEVICES", "")
    assert [d.device for d in wgflow.list_physical_devices()] == ["cpu:0"]
    monkeypatch.setenv("WGFLOW_VISIBLE_DEVICES", "99")
    with pytest.raises(RuntimeError, match="WGFLOW_VISIBLE_DEVICES"):
        wgflow.list_physical_devices()
