"""`lifetime_lint.runtime.reclaim`: no-op on CPU, dispatch to each backend's own module."""

from __future__ import annotations

import subprocess
import sys
import types

import pytest
import torch

from lifetime_lint.runtime import active_device_type, reclaim


class FakeDeviceModule:
    def __init__(self, fail=False):
        self.calls = 0
        self.fail = fail

    def empty_cache(self):
        self.calls += 1
        if self.fail:
            raise AssertionError("Allocator for npu is not a DeviceAllocator")


def fake_torch(device_type, module, accelerator_empty=None, with_accelerator_api=True):
    """A stand-in for the torch module with one active backend."""
    fake = types.SimpleNamespace()
    setattr(fake, device_type, module)
    fake.get_device_module = lambda name: getattr(fake, name)
    if with_accelerator_api:
        fake.accelerator = types.SimpleNamespace(
            current_accelerator=lambda: types.SimpleNamespace(type=device_type)
        )
        if accelerator_empty is not None:
            fake.accelerator.empty_cache = accelerator_empty
    else:
        module.is_available = lambda: True
    return fake


def test_cpu_only_build_is_a_silent_no_op():
    assert torch.accelerator.current_accelerator() is None  # the CI machine
    assert active_device_type() is None
    reclaim()  # must not raise, unlike torch.accelerator.empty_cache() here
    reclaim(collect_garbage=True)
    with pytest.raises(RuntimeError):
        torch.accelerator.empty_cache()


@pytest.mark.parametrize("device_type", ["cuda", "xpu", "npu", "mps", "hpu"])
def test_dispatches_to_the_active_backend_module(device_type):
    module = FakeDeviceModule()
    reclaim(torch=fake_torch(device_type, module))
    assert module.calls == 1


def test_falls_back_to_torch_accelerator_when_the_module_asserts():
    module = FakeDeviceModule(fail=True)
    fallback_calls = []
    fake = fake_torch("npu", module, accelerator_empty=lambda: fallback_calls.append(1))
    reclaim(torch=fake)
    assert module.calls == 1 and fallback_calls == [1]


def test_raises_when_every_path_fails():
    def broken():
        raise RuntimeError("device lost")

    with pytest.raises(AssertionError, match="DeviceAllocator"):
        reclaim(torch=fake_torch("npu", FakeDeviceModule(fail=True), accelerator_empty=broken))


def test_older_torch_without_accelerator_api_probes_modules():
    module = FakeDeviceModule()
    fake = fake_torch("xpu", module, with_accelerator_api=False)
    assert active_device_type(fake) == "xpu"
    reclaim(torch=fake)
    assert module.calls == 1


def test_importing_the_runtime_does_not_import_torch():
    code = "import sys, lifetime_lint.runtime; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_linter_never_imports_torch(tmp_path):
    (tmp_path / "a.py").write_text("import torch\ntorch.cuda.empty_cache()\n")
    code = (
        "import sys; from click.testing import CliRunner; from lifetime_lint.cli import main;"
        f"CliRunner().invoke(main, ['--fix', {str(tmp_path)!r}]);"
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_reserved_memory_falls_after_reclaim():
    torch.cuda.synchronize()
    block = torch.empty(512 * 1024 * 1024, dtype=torch.uint8, device="cuda")
    del block
    reserved_before = torch.cuda.memory_reserved()
    reclaim()
    reserved_after = torch.cuda.memory_reserved()
    print(f"reserved before reclaim {reserved_before} after {reserved_after}")
    assert reserved_before - reserved_after >= 512 * 1024 * 1024
