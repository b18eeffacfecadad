"""LL004 raw-empty-cache: `torch.cuda.empty_cache()` called directly."""

from __future__ import annotations

import libcst as cst

from lifetime_lint.devices import (
    CUDA_MODULE,
    GUARD_NOTE,
    SHOWS_LEFT_OUT,
    Portability,
    cuda_guard,
    describe_ladder,
    resolve_cuda_call,
    under_cuda_availability_test,
)
from lifetime_lint.diagnostics import Applicability, Edit, Fix
from lifetime_lint.fixes import Target, import_bindings_under, reference_to, target_problem
from lifetime_lint.rule import Option, Rule

DEFAULT_RECLAIM = "lifetime_lint.runtime.reclaim"
WHY = "it empties only CUDA's caching allocator, and does nothing on XPU, NPU, MPS or HPU"


class RawEmptyCache(Rule):
    """
    ## What it does
    Flags calls that run `torch.cuda.empty_cache()`, whatever the import form (`import torch
    as t`, `from torch import cuda`, `from torch.cuda import empty_cache as free`, `from
    torch.cuda import *`, imports inside functions, `free = torch.cuda.empty_cache`).
    Names are resolved with Python's scoping: a parameter, local, loop target or class
    attribute named `torch` (or `cuda`, or `empty_cache`) is not the module, and a name
    that is rebound to something the linter cannot follow is not reported.

    ## Why is this bad?
    `empty_cache()` returns the caching allocator's unused blocks to the device; it frees no
    live tensor. Called through `torch.cuda` it does nothing on NPU, XPU, MPS or HPU, where
    the same model code then keeps its whole cache reserved, and serving repos (vLLM,
    vllm-omni) ban it in pre-commit for that reason. A platform-neutral reclaim does the
    right thing on every backend and nothing on CPU.

    A name bound by a backend ladder (`try: from torch_npu.npu import empty_cache` /
    `except ImportError: from torch.cuda import empty_cache`, or an `if is_npu(): ... else:`
    assignment) is the project's own dispatch: left out by default (counted by
    `--statistics`); under `portability = "strict"` it is reported, with the ladder's line,
    since it is still `torch.cuda.empty_cache` on every backend the ladder does not name,
    and not fixed.

    What the default run reports: LL004 is in the default rule set, and reports calls in
    library code that may run on another accelerator. Never a finding: a reference that is
    not called (`{"cuda": torch.cuda.empty_cache}`) and a call inside a branch of a
    multi-backend dispatch (an `if`/`elif` chain, conditional expression or `match` that
    also tests or handles mps, npu, xpu, hpu, ...; or a CUDA guard among one guard per
    backend in a row: `if mps: ...` / `if cuda: ...` / `if xpu: ...`), a call within three
    statements of the same release for another backend (`torch.cuda.empty_cache()` then
    `if torch.xpu.is_available(): torch.xpu.empty_cache()`: a dispatch written as a
    sequence), or past an earlier `if <another backend>: return`. Left out by default, counted by
    `--statistics` with the reason, and reported under `portability = "strict"`: the
    project's own platform layer (a `platforms/` package, a `CudaPlatform`-style class, a
    base-class method that the module's classes for other backends override, such as
    `BaseEnv.get_device_info` beside `NPUEnv.get_device_info`);
    code already bound to CUDA (`device="cuda"`, `.cuda()`, `autocast("cuda")`,
    `.type(torch.cuda.HalfTensor)`, but not a
    CUDA device that is only the default for callers who pass none, such as `if device is
    None: device = torch.device("cuda")`, which stays reported; CUDA
    graphs, a raw `cuda_stream` or `torch.cuda.MemPool`, work the function runs on a CUDA
    stream outside any `if` (`with torch.cuda.stream(decode_stream):` in its loop), a branch that picks a CUDA-only
    kernel, code past `if x.device.type != "cuda": return` or past a `raise` that names
    CUDA, a class named for CUDA or built
    on a CUDA-only object, a class whose own code binds `self.device` only to literal
    CUDA devices (`self.device = torch.device(f"cuda:{self.local_rank}")`, `self.device =
    "cuda"`; None aside; a device from a parameter or a pick between backends keeps it
    reported), a function that imports a CUDA-only library, a CUDA-only kernel
    module, a ROCm/AMD-only path where `torch.cuda` is HIP (also a module that imports a
    ROCm-only library such as `aiter` or `mori`, unconditionally or for its types), a
    test skipped without CUDA);
    code that the module proves CUDA-bound: past an exit guard anywhere before the call
    (`if dev.type != "cuda": raise`, `if not _is_hip: raise`), past a `try` whose body
    returns and whose every handler that goes on does so only past such a guard (`except
    ValueError: if not spilled or not torch.cuda.is_available(): raise`), past or under a
    test of a local that is None unless CUDA (`if not fits: return ...` where `fits = free
    is not None and ...`, and `free` is the answer of a same-module helper that returns
    None from `except Exception:` around `torch.cuda.mem_get_info`), past `if not states
    and not grads: return` where each list starts empty and gets items only under a test
    that proves CUDA (`if _is_parkable(value): states.append(...)`), code that works on
    the module's own CUDA-or-CPU device (`face_restore_device = torch.device("cuda" if
    torch.cuda.is_available() else "cpu")` at module level, in a module that names no
    other backend), a class whose method creates its process group with the literal
    `backend="nccl"` outside any `if`, or a validator that raises
    off CUDA, defined in the module or imported from a module of the same folder (`from
    .qknorm_rope import _validate_rope`; that module's text is part of the cache key), a
    class that hands its kernels raw CUDA stream handles (`.cuda_stream`) and names no
    other backend, a private helper the module calls only from CUDA-bound code, a
    class whose capability declaration names only CUDA (and HIP) or whose `__init__`
    raises without its backend, a function calling what only a CUDA-only or ROCm-only
    library binds (`shuffle_weight` from `aiter`) or what a same-module accessor of one
    returns (`_api()[1](...)`, every `return` `None` or the library's names), CUDA's driver API, IPC or VMM
    subsystems, or a CUDA stream of its own, a module that JIT-builds CUDA kernel sources
    (`cuda_files=["gemm/tiny_gemm.cuh"]`, `load_inline(cuda_sources=...)`), a module
    named for CUDA's memory subsystem (`cumem.py`) or importing torch's CUDA IPC or
    allocator primitives at top level (`rebuild_cuda_tensor`, `CUDAPluggableAllocator`), a
    module whose custom ops are all registered for CUDA only (`device_types="cuda"`), a
    kernel launcher gated by its module's `can_use_<name>()` that returns False unless the
    tensors are CUDA's (`or not q.is_cuda`), a function that raises where a name only a
    CUDA-only or ROCm-only library binds is None (`if dynamic_mxfp4_quant is None: raise`),
    a value handed to a same-module helper that calls the CUDA driver API
    (`_sorted_host_reads(torch.cuda.current_device())`, which calls
    `driver.cuDeviceGetAttribute`), a module of
    a CUDA-only package, read from the package's other files (the nearest package at or
    above the module ships CUDA sources, a `csrc/` folder or `*.cu` files, or is named
    for a CUDA-only kernel library: `exllamav3/`, `marlin/`, `machete/`, `bitblas/`; or a module
    beside it imports CUDA's driver or a CUDA-only kernel library at top level, `from
    cuda.bindings import driver`, `import cutlass`; only while none of the modules read,
    nor a file or folder name there, names another backend such as npu, xpu or mps), code past a
    loop that returns unless each item is on CUDA, past `if not _enable_splitk: return`
    where the module sets that flag only once a CUDA-only library loaded, under a local
    that is None unless the device is CUDA, in a branch on a same-module predicate whose
    every `return` needs a CUDA device (`if self._offload_enabled():`, or a local bound to
    it, where the method returns `... and self.device.type == "cuda"`; an AMD
    architecture probe such as `is_gfx95_supported()` counts as ROCm), or in a branch for a CUDA-only subsystem
    (`if item.has_cuda_ipc_proxy():`); a CUDA-only project (20 or more modules in its
    package, or its repository beside the package's `pyproject.toml`/`setup.py`, none of
    which names another backend, `torch.accelerator` or a platform layer in its code;
    comments and prose strings do not count, one torch module that only reacts to a
    backend (a copied `is_mps` test) does not either, though one that chooses one
    (`return "xpu"`) does; ROCm, where `torch.cuda` is HIP, and Meta's in-house MTIA do
    not count: audiocraft, stable-audio-tools, xformers; a smaller project when one of its
    modules picks the device between CUDA and the CPU alone, `"cuda" if
    torch.cuda.is_available() else "cpu"`: gfpgan, whisperx; a folder without
    `__init__.py` inside the package, such as exllamav2's `conversion/`, is in its
    project); a project that imports `torch_npu.contrib.transfer_to_npu` (each
    `torch.cuda` function becomes its `torch.npu` twin) and chooses no third backend; a model the project keeps off every
    other backend it names (a class with `name = "ldm"` on the project's
    `MPS_UNSUPPORT_MODELS`-style list, `<BACKEND>_UNSUPPORT*`, `..._EXCLUDE*`,
    `..._BLACKLIST` or `..._DENYLIST` in a `const.py`/`constants.py`/`settings.py`,
    while every backend but CUDA that the project names, outside URLs, has such a list:
    iopaint runs those models on the CPU when MPS is asked for; a shared helper, or a
    model off the list, stays reported); a branch on an optional attribute of `self`
    that the project sets only on CUDA (`if hasattr(self, "final_offload_hook") and
    self.final_offload_hook is not None:` or `if getattr(self, "hook", None) is not
    None:` in pipelines copied from older diffusers, where no module of the project sets
    the attribute to anything but None, or each write sits in a function that binds a
    literal CUDA device outside any `if`, `device = torch.device(f"cuda:{gpu_id}")`; a
    write the project's text does not show plainly, `setattr(self, "hook", h)`, a method
    or import of that name, keeps it reported); a module in a `cuda/` package folder or a (vendored)
    CUDA-only library's folder (`vllm_flash_attn/`); tests, examples, benchmarks, scripts and notebooks (the
    `non-library` globs, also `parallel_examples/`-style folders), `test_*`/`benchmark_*`
    functions, and a script's `main()`, `__main__` block, module-level code and the
    helpers only they call (not a public function another module of the project imports:
    a library module with a demo at the bottom keeps its API reported); a debugging branch (under `if <debug or trace flag>:`, past
    `if not trace_e2e: return`, or in a function whose docstring opens "Debug-only" or
    "For debugging"); a CUDA-only measurement utility (a function named or documented as a
    profiler, benchmark or latency measurement, `def profile(...)`: "Speed/memory/FLOPs
    profiler", that measures with CUDA's memory statistics or timing events,
    `torch.cuda.memory_reserved()`, `torch.cuda.Event(enable_timing=True)`: its
    `empty_cache()` resets CUDA's cache between measured runs; a profiler timing with the
    wall clock alone stays reported). `--statistics` names each reason (`CUDA-bound code`,
    `ROCm-only code`, `called only from CUDA-bound code`, `CUDA-only project`,
    `platform layer`, `non-library path`, `script entry point`, `debugging branch`,
    `CUDA-only measurement utility`, `model the project keeps off other backends`,
    `branch on an attribute the project sets only on CUDA`).

    ## Example
    ```python
    import torch

    def decode(self, latents):
        video = self.vae.decode(latents).sample
        torch.cuda.empty_cache()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        return video
    ```

    ## Use instead
    ```python
    import torch
    from lifetime_lint.runtime import reclaim

    def decode(self, latents):
        video = self.vae.decode(latents).sample
        reclaim()
        reclaim()
        return video
    ```

    ## Fix safety
    Safe: on CUDA (and ROCm) `reclaim()` calls `torch.cuda.empty_cache()`; elsewhere it
    calls the active backend's own `empty_cache`, and on a machine without an accelerator it
    does nothing (where `torch.cuda.empty_cache()` did nothing either). A call that is the
    whole body of an `if torch.cuda.is_available():` guard (no `else`, no comment) is
    rewritten with its guard, since keeping the guard would still skip other accelerators.
    The import is added once, merged into an existing `from ... import`; an import the fix
    leaves unused (`from torch.cuda import empty_cache`) is removed. No fix where the name
    comes from a backend ladder.

    The default `reclaim-call` imports `lifetime_lint.runtime`: in a project that neither
    declares lifetime-lint as a dependency nor sets `runtime-module` (the helpers vendored
    with `lifetime-lint vendor-runtime`), the fix is offered as unsafe, since the import
    would fail wherever the linter is not installed; the message says so.

    ## Options
    `reclaim-call` names the callable to rewrite to: `"package.module:object.method"`
    imports `object` from `package.module` and calls `object.method()`, e.g.
    `reclaim-call = "vllm_omni.platforms:current_omni_platform.empty_cache"`; a plain dotted
    path (`"lifetime_lint.runtime.reclaim"`, the default) imports its last component.

    What is checked is set by the top-level `portability` and `non-library` settings
    (shared with LL005; see the README): `portability = "strict"` also reports the
    platform layer, CUDA-bound code and non-library paths.
    """

    code = "LL004"
    name = "raw-empty-cache"
    summary = "`torch.cuda.empty_cache()` is CUDA-only; use a platform-neutral reclaim"
    triggers = ("empty_cache",)
    fix_availability = "sometimes"
    options = (
        Option(
            "reclaim-call",
            str,
            DEFAULT_RECLAIM,
            "the callable that replaces `torch.cuda.empty_cache`",
            validate=target_problem,
        ),
    )

    def __init__(self, context, options) -> None:
        super().__init__(context, options)
        self.portability = Portability.of(context)
        self._default_target = options["reclaim-call"] == DEFAULT_RECLAIM

    def visit_Call(self, node: cst.Call) -> None:
        ancestors = self.context.ancestors
        call = resolve_cuda_call(self.context, node, ancestors, ("empty_cache",))
        if call is None:
            return
        left_out = self.portability.leaves_out(self.context, ancestors)
        if left_out is not None:
            if left_out:  # "" is a multi-backend dispatch: not a finding at all
                self.leave_out(left_out, SHOWS_LEFT_OUT)
            return
        ladder_reason = self.portability.leaves_out_ladder(self.context, call)
        if ladder_reason:
            self.leave_out(ladder_reason, SHOWS_LEFT_OUT)
            return
        written = self.context.source_of(node.func)
        if not call.certain:
            ladder = describe_ladder(self.context, call)
            self.report(
                node,
                f"`{written}()` is `torch.cuda.empty_cache` {ladder}: there it empties "
                "only CUDA's caching allocator, so the other accelerators keep their cache "
                "reserved; route it through the project's platform layer or a "
                "platform-neutral reclaim (no fix: the ladder is the project's choice)",
            )
            return
        target = Target.parse(self.settings["reclaim-call"])
        reference, import_edits = reference_to(self.context, target, ancestors)
        # The guard goes with the call only for the default reclaim, which is known to do
        # nothing without an accelerator; a configured helper keeps the guard.
        guard = cuda_guard(self.context, node, ancestors) if self._default_target else None
        replaced = guard if guard is not None else node.func
        start, end = self.context.span(replaced)
        content = f"{reference}()" if guard is not None else reference
        fix = Fix(
            message=f"Replace {'the guarded call ' if guard is not None else ''}with "
            f"`{reference}()`",
            edits=(Edit(start, end, content),) + import_edits,
            applicability=Applicability.SAFE,
            orphan_import_candidates=import_bindings_under(self.context, node.func, CUDA_MODULE),
        )
        if guard is not None:
            message = (
                f"`{written}()` under a CUDA-only guard runs only on CUDA: other "
                f"accelerators keep their cache reserved; `{reference}()` (replacing the "
                "guard and the call) empties the active accelerator's cache and does "
                "nothing without one"
            )
        else:
            message = (
                f"`{written}()` is CUDA-only: {WHY}; `{reference}()` empties the active "
                "accelerator's cache and does nothing without one"
            )
            if under_cuda_availability_test(self.context, ancestors):
                message += GUARD_NOTE
        self.report(node, message, fix)
