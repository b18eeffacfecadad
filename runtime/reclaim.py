"""`reclaim()`: a platform-neutral `torch.cuda.empty_cache()`.

Returns the caching allocator's unused blocks to the device on whatever accelerator is
active (CUDA and ROCm, XPU, NPU, MPS, HPU, ...), so memory that other processes or a later
allocation pattern need is no longer held in reserve. It frees no live tensor: drop the
references first (`del x`), then reclaim.

Why not `torch.accelerator.empty_cache()` alone: on torch 2.13 CPU-only builds it raises
"Cannot access accelerator device when none is available", and on torch_npu 2.9/2.10 and MPS
it asserts "Allocator for npu is not a DeviceAllocator". `torch.cuda.empty_cache()` is wrong
on every non-CUDA device. So: find the active accelerator, call its own device module's
`empty_cache`, fall back to `torch.accelerator.empty_cache` if that fails, and do nothing at
all where there is no accelerator (or no torch).
"""

from __future__ import annotations

import gc
import sys
from types import ModuleType
from typing import Any

# Probed in this order on torch releases without `torch.accelerator` (< 2.6).
_LEGACY_DEVICE_TYPES = ("cuda", "xpu", "npu", "mps", "hpu", "mlu", "musa", "mtia")

# What the device modules raise when their backend is unusable.
_BACKEND_ERRORS = (RuntimeError, AssertionError, AttributeError, NotImplementedError)


def _torch() -> ModuleType | None:
    module = sys.modules.get("torch")
    if module is not None:
        return module
    try:
        import torch
    except ImportError:
        return None
    return torch


def active_device_type(torch: Any = None) -> str | None:
    """The type of the current accelerator ("cuda", "xpu", "npu", "mps", ...), or None.

    Uses `torch.accelerator.current_accelerator()` where it exists (torch >= 2.6; it returns
    None on CPU-only builds without raising) and probes device modules on older torch.
    """
    torch = torch if torch is not None else _torch()
    if torch is None:
        return None
    accelerator = getattr(torch, "accelerator", None)
    current = getattr(accelerator, "current_accelerator", None)
    if callable(current):
        try:
            device = current()
        except _BACKEND_ERRORS:
            device = None
        return getattr(device, "type", None)
    for name in _LEGACY_DEVICE_TYPES:
        is_available = getattr(getattr(torch, name, None), "is_available", None)
        try:
            if callable(is_available) and is_available():
                return name
        except _BACKEND_ERRORS:
            continue
    return None


def _device_module(torch: Any, device_type: str) -> Any:
    get_device_module = getattr(torch, "get_device_module", None)
    if callable(get_device_module):
        try:
            return get_device_module(device_type)
        except _BACKEND_ERRORS + (ValueError,):
            pass
    return getattr(torch, device_type, None)


def reclaim(collect_garbage: bool = False, *, torch: Any = None) -> None:
    """Release cached, unused accelerator memory on the active device; no-op without one.

    Args:
        collect_garbage: run `gc.collect()` first, so tensors held only by reference
            cycles are freed before the cache is emptied.
        torch: the torch module to use (tests pass a stand-in); default: the real one.

    Never raises on CPU-only builds or where torch is not installed. On an accelerator, an
    error from both the device module's `empty_cache` and the `torch.accelerator` fallback
    is raised, since it means the device is unusable.
    """
    if collect_garbage:
        gc.collect()
    torch = torch if torch is not None else _torch()
    if torch is None:
        return
    device_type = active_device_type(torch)
    if device_type is None:
        return
    module = _device_module(torch, device_type)
    empty_cache = getattr(module, "empty_cache", None)
    first_error: BaseException | None = None
    if callable(empty_cache):
        try:
            empty_cache()
            return
        except _BACKEND_ERRORS as error:
            first_error = error
    fallback = getattr(getattr(torch, "accelerator", None), "empty_cache", None)
    if callable(fallback):
        try:
            fallback()
            return
        except _BACKEND_ERRORS:
            pass
    if first_error is not None:
        raise first_error
