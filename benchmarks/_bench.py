"""Helpers the GPU benchmarks share: loading a module from a file, and one timed, peak-
measured call. Imports nothing but the standard library (torch is passed in), so the
benchmarks run on a GPU machine that has torch and no libcst."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import statistics
import time
from pathlib import Path
from types import ModuleType
from typing import Any, Callable


def linter_config_args() -> list[str]:
    """`--config FILE` for the linter when `LIFETIME_LINT_BENCH_CONFIG` names one: the
    vendored-runtime runs fix the benchmarks with `runtime-module` set."""
    config = os.environ.get("LIFETIME_LINT_BENCH_CONFIG")
    return ["--config", config] if config else []


def load_module(path: Path, name: str) -> ModuleType:
    """Import the Python file at `path` as a module called `name`."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_outside_package(source: str, name: str, stub: str) -> ModuleType:
    """Execute a model file of a package (diffusers' autoencoders) as a module called `name`,
    its package-relative imports (`from ..x import y`, `from .vae import ...`) replaced by
    `stub`, code defining what they provided (placed after `import torch.nn.functional as
    F`, so it may use `nn`): the module's classes then need only torch."""
    lines = [
        line
        for line in source.splitlines()
        if not line.startswith("from ..") and not line.startswith("from .vae")
    ]
    text = "\n".join(lines).replace(
        "import torch.nn.functional as F",
        "import torch.nn.functional as F\nimport logging as _lg\n" + stub,
        1,
    )
    module = ModuleType(name)
    exec(compile(text, name, "exec"), module.__dict__)
    return module


def digest(tensor: Any) -> str:
    """A short hash of a tensor's values (as float32 on the CPU): equal outputs, equal hash."""
    return hashlib.sha256(tensor.float().cpu().numpy().tobytes()).hexdigest()[:16]


def measure(torch: Any, fn: Callable[[], Any], cuda: bool, repeats: int) -> dict[str, Any]:
    """Call `fn` `repeats` times: the last output, the median seconds, every time, and on CUDA
    the peak bytes allocated above what was allocated before each call (the cache emptied and
    the peak reset first, so every repeat starts alike) and what was allocated before it."""
    times = []
    peak = None
    base = None
    output = None
    for _ in range(repeats):
        output = None
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            base = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        output = fn()
        if cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
        if cuda:
            peak = torch.cuda.max_memory_allocated() - base
    return {"output": output, "seconds": statistics.median(times), "peak": peak, "base": base,
            "times": times}  # fmt: skip


def write_results(filename: str, results: Any) -> None:
    """Write `results` as JSON to `$OUT/filename` when `$OUT` is set (the device tool's
    folder of files to bring back); otherwise do nothing."""
    out = os.environ.get("OUT")
    if out:
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, filename), "w", encoding="utf-8") as handle:
            json.dump(results, handle, indent=2)
