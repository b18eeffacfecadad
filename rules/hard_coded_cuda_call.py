"""LL005 hard-coded-cuda-call: device calls that only work on CUDA."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from lifetime_lint.devices import (
    CUDA_MODULE,
    GUARD_NOTE,
    LEFT_OUT_NO_DEVICE_LAYER,
    SHOWS_LEFT_OUT,
    Portability,
    cuda_guard,
    describe_ladder,
    resolve_cuda_call,
    under_cuda_availability_test,
)
from lifetime_lint.diagnostics import Applicability, Edit, Fix
from lifetime_lint.fixes import (
    Target,
    import_bindings_under,
    module_reference,
    reference_to,
    target_problem,
)
from lifetime_lint.lazy_regex import compile_lazily
from lifetime_lint.project import missing_device_layer
from lifetime_lint.rule import Option, Rule


@dataclass(frozen=True)
class AcceleratorEquivalent:
    """The `torch.accelerator` function that replaces a `torch.cuda` one."""

    name: str
    since: tuple[int, int]
    safe: bool
    caveat: str = ""  # why the fix is unsafe, when it is


_UNSAFE_STATS = (
    "on a build or machine without an accelerator `torch.cuda` returns 0 (or an empty dict) "
    "while `torch.accelerator` raises RuntimeError"
)

# What torch.accelerator offers, by release (design notes §3; checked against torch 2.13).
ACCELERATOR_EQUIVALENTS: dict[str, AcceleratorEquivalent] = {
    "device_count": AcceleratorEquivalent("device_count", (2, 6), True),
    "synchronize": AcceleratorEquivalent("synchronize", (2, 6), True),
    "current_device": AcceleratorEquivalent("current_device_index", (2, 6), True),
    "set_device": AcceleratorEquivalent("set_device_index", (2, 6), True),
    "device": AcceleratorEquivalent(
        "device_index", (2, 8), False,
        "`torch.accelerator.device_index` takes only an int or None, where "
        "`torch.cuda.device` also takes a `torch.device` or a string",
    ),
    "memory_allocated": AcceleratorEquivalent("memory_allocated", (2, 9), False, _UNSAFE_STATS),
    "max_memory_allocated": AcceleratorEquivalent("max_memory_allocated", (2, 9), False, _UNSAFE_STATS),
    "memory_reserved": AcceleratorEquivalent("memory_reserved", (2, 9), False, _UNSAFE_STATS),
    "max_memory_reserved": AcceleratorEquivalent("max_memory_reserved", (2, 9), False, _UNSAFE_STATS),
    "memory_stats": AcceleratorEquivalent("memory_stats", (2, 9), False, _UNSAFE_STATS),
    "reset_peak_memory_stats": AcceleratorEquivalent("reset_peak_memory_stats", (2, 9), True),
    "mem_get_info": AcceleratorEquivalent("get_memory_info", (2, 10), True),
}  # fmt: skip

# Advice where no torch.accelerator equivalent exists (up to torch 2.14).
NO_EQUIVALENT_ADVICE: dict[str, str] = {
    "manual_seed": "`torch.manual_seed` seeds every device",
    "manual_seed_all": "`torch.manual_seed` seeds every device",
}

# What each call does wrong away from CUDA (what the message says).
_STATISTICS = "reads the CUDA allocator's statistics only (0 on other accelerators)"
CUDA_ONLY_EFFECT: dict[str, str] = {
    "synchronize": "waits for CUDA streams only (and raises where CUDA is missing)",
    "device_count": "counts CUDA devices only (0 on other accelerators)",
    "current_device": "returns the CUDA device index (and raises where CUDA is missing)",
    "set_device": "selects a CUDA device (and raises where CUDA is missing)",
    "device": "selects a CUDA device (and raises where CUDA is missing)",
    "memory_allocated": _STATISTICS,
    "max_memory_allocated": _STATISTICS,
    "memory_reserved": _STATISTICS,
    "max_memory_reserved": _STATISTICS,
    "memory_stats": _STATISTICS,
    "reset_peak_memory_stats": "resets the CUDA allocator's statistics only",
    "mem_get_info": "queries CUDA memory only (and raises where CUDA is missing)",
    "manual_seed": "seeds the CUDA generators only",
    "manual_seed_all": "seeds the CUDA generators only",
}

SEEDING = frozenset({"manual_seed", "manual_seed_all"})
# Calls that only read state: in a function named for logging they feed its message.
QUERIES = frozenset({
    "device_count", "current_device", "memory_allocated", "max_memory_allocated",
    "memory_reserved", "max_memory_reserved", "memory_stats", "mem_get_info",
})  # fmt: skip
_TORCH_SEED = compile_lazily(r"(?<![\w.])torch\.manual_seed\(")
LEFT_OUT_REDUNDANT_SEED = "seeding beside torch.manual_seed"

DEFAULT_BANNED = (
    "synchronize", "device_count", "current_device", "set_device", "device",
    "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
    "reset_peak_memory_stats", "memory_stats", "mem_get_info", "manual_seed",
    "manual_seed_all",
)  # fmt: skip


# Every public function of `torch.cuda` (torch 2.13): the names LL005's options may hold, so
# `allowed-calls = ["synchronise"]` is an error naming the typo, not a silent no-op.
TORCH_CUDA_FUNCTIONS = frozenset((
    "caching_allocator_alloc", "caching_allocator_delete", "caching_allocator_disabled",
    "caching_allocator_enable", "can_device_access_peer", "change_current_allocator",
    "check_error", "clock_rate", "cudart", "current_blas_handle", "current_device",
    "current_solver_handle", "current_stream", "default_stream", "device", "device_count",
    "device_memory_used", "device_of", "empty_cache", "get_allocator_backend",
    "get_arch_list", "get_device_capability", "get_device_name", "get_device_properties",
    "get_gencode_flags", "get_per_process_memory_fraction", "get_rng_state",
    "get_rng_state_all", "get_stream_from_external", "get_sync_debug_mode", "graph",
    "graph_pool_handle", "host_memory_stats", "host_memory_stats_as_nested_dict", "init",
    "initial_seed", "ipc_collect", "is_available", "is_bf16_supported",
    "is_current_stream_capturing", "is_initialized", "is_tf32_supported",
    "list_gpu_processes", "make_graphed_callables", "manual_seed", "manual_seed_all",
    "max_memory_allocated", "max_memory_cached", "max_memory_reserved", "mem_get_info",
    "memory_allocated", "memory_cached", "memory_reserved", "memory_snapshot",
    "memory_stats", "memory_stats_as_nested_dict", "memory_summary", "memory_usage",
    "power_draw", "reset_accumulated_host_memory_stats", "reset_accumulated_memory_stats",
    "reset_max_memory_allocated", "reset_max_memory_cached", "reset_peak_host_memory_stats",
    "reset_peak_memory_stats", "seed", "seed_all", "set_device",
    "set_per_process_memory_fraction", "set_rng_state", "set_rng_state_all", "set_stream",
    "set_sync_debug_mode", "stream", "synchronize", "temperature", "use_mem_pool",
    "utilization",
))  # fmt: skip


def _validate_replacements(value: dict[str, str]) -> str | None:
    for name, spec in value.items():
        problem = target_problem(spec)
        if problem:
            return f"{name}: {problem}"
    return None


class HardCodedCudaCall(Rule):
    """
    ## What it does
    Flags calls of `torch.cuda` device functions that real serving repos ban in pre-commit
    (vLLM's `check_torch_cuda.py`): `synchronize`, `device_count`, `current_device`,
    `set_device`, `device(...)` (also as a context manager), `memory_allocated`,
    `max_memory_allocated`, `memory_reserved`, `max_memory_reserved`,
    `reset_peak_memory_stats`, `memory_stats`, `mem_get_info`, `manual_seed`,
    `manual_seed_all`, through any import form (`import torch as t`, `from torch import
    cuda`, `from torch.cuda import synchronize`, imports inside functions), which a regex
    gate misses. `torch.cuda.empty_cache()` is LL004's.

    ## Why is this bad?
    Each hard-codes CUDA: on NPU, XPU, MPS or HPU it raises or silently reports zero, so
    memory accounting, synchronisation before a timing, or device placement is wrong or
    crashes there. The `torch.accelerator` API does the same on whichever accelerator is
    active.

    Not flagged: `is_available`, streams, events, graphs, `get_device_name`/`capability`;
    references that are not called (dispatch tables); calls in a branch of a multi-backend
    dispatch (an `if`/`elif` chain, conditional expression or `match` that also tests or
    handles mps, npu, xpu, hpu, ...; or a CUDA guard among one guard per backend in a row),
    a call within three statements of the same function of another backend
    (`torch.cuda.synchronize()` then `if torch.xpu.is_available(): torch.xpu.synchronize()`),
    or past an earlier `if <another backend>: return`
    in the same function, which is the platform abstraction itself.

    What the default run reports: LL005 is in the default rule set, and reports calls in
    library code that may run on another accelerator. Left out by default, counted by
    `--statistics` with the reason, and reported under `portability = "strict"`: the same
    platform layer, CUDA-bound code (also what the module proves: exit guards before the
    call, validators, a class factory that raises when its validator returns a reason
    (also one read from a table of `(condition, reason)` pairs), private helpers called
    only from CUDA-bound code, CUDA-only capability declarations, ROCm-only classes, code
    past an early exit unless a ROCm, HIP or AMD probe holds, CUDA-only subsystems, branches on a
    same-module predicate that is true only on CUDA, branches a test of the device itself
    selects (the right of `x.is_cuda and ...` or of `dev.type != "cuda" or ...`, either arm
    of `... if x.is_cuda else ...`, the `else` of `if dev.type != "cuda":`, `if DEVICE_TYPE
    in ("cuda", "hip"):`), the rest of a loop body past `if p.device.type != "cuda":
    continue`, a loop over, test of or comprehension over a collection filtered to CUDA
    devices (`{p.device for p in params if p.device.type == "cuda"}`) or named for ROCm's,
    a call through a name a backend ladder binds (`if DEVICE_TYPE == "xpu": current_device
    = torch.xpu.device` / `else: current_device = torch.cuda.device`: the project's
    dispatch, only incomplete for the backends it does not name), a module of a CUDA-only package read
    from the package's other files, a module named for CUDA's memory subsystem or importing
    CUDA IPC or allocator primitives, a module of custom ops registered for CUDA only
    (`device_types="cuda"`), a kernel launcher its module's `can_use_<name>()` keeps to CUDA
    tensors, a function that raises unless a CUDA-only or ROCm-only library loaded, a device
    index handed to a same-module helper that calls the CUDA driver API or makes it a CUDA
    device, `torch.device("cuda", index)`; a class whose method creates its process group
    with the literal `backend="nccl"` outside any `if`; a class whose own code binds
    `self.device` only to literal CUDA devices; code on the module's own
    CUDA-or-CPU device; code past a `try` left only through a handler that needs CUDA, or
    past a test of a helper's answer that is None unless `torch.cuda.mem_get_info`
    answered, or past an exit unless lists filled only under a CUDA test), a CUDA-only
    project or package folder, a model the
    project keeps off every other backend it names (iopaint's `MPS_UNSUPPORT_MODELS`), a
    branch on an optional attribute of `self` that the project sets only on CUDA (as LL004),
    scripts and non-library paths as LL004 (see its documentation); a debugging branch (under `if
    <debug or trace flag>:`, past `if not trace_e2e: return`, or in a function whose
    docstring opens "Debug-only" or "For debugging"); a saved `torch.cuda`
    original called inside the function the module installs in its place (`torch.cuda.
    synchronize = _cuda_synchronize`, a monkeypatch wrapper: not a finding at all);
    a call whose result only feeds a log message (also through locals that only log
    messages read: `before_mb = torch.cuda.memory_reserved() / 2**20`, then
    `logger.info(f"... {before_mb:.1f} MB")`, or extended into one: `vram += f" {a:.2f}GB"`),
    a device count bounding a loop whose every statement only reads figures into such
    locals or logs (a periodic metrics line), or a query (memory statistics, device
    index or count) in a function named for logging (`log_memory_stats`); a query past
    the function's own "unknown" answer without CUDA (`if _is_hip or not
    torch.cuda.is_available(): return None`, or `... if torch.cuda.is_available() else
    None` as a value, or a local left `None` unless `torch.cuda.is_available()` that the
    function then tests against `None`; not `return 0`, `return False` or `else "cpu"`, which answer for
    every other accelerator, nor a `None` the function hands to a `torch.cuda` call such as
    `torch.cuda.set_device(current_device)`, where off CUDA the work is silently skipped); seeding beside a `torch.manual_seed` in the same function
    (redundant, not wrong); a `main()` beside `if __name__ == "__main__":`; and every call
    in a project without a device layer of its own: a package whose project tree has no
    `platforms/`, `platform/`, `hardware_backend/` or `device_backends/` folder (a file
    outside any package is judged by itself). Such a project has not chosen to run on
    another accelerator: on held-out projects nobody tuned on, 0 of 41 and 8 of 130 default
    LL005 findings were worth fixing, and every labelled instance of the pinned corpora but
    one lies in a project with a platform folder (vLLM-Omni, SGLang, FastVideo). Configured
    `replacements` count as a device layer; a project whose device layer is named otherwise
    sets `require-device-layer = false`. A CUDA-only project turns the rule off with one
    line, `ignore = ["LL005"]`.

    ## Example
    ```python
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated(device=rank)
    ```

    ## Use instead
    ```python
    torch.accelerator.synchronize()
    peak = torch.accelerator.max_memory_allocated(rank)
    ```

    ## Fix safety
    A fix exists only where `torch.accelerator` has the function in the configured
    `target-torch-version` (default 2.6): `device_count`, `synchronize`,
    `current_device` -> `current_device_index`, `set_device` -> `set_device_index` from 2.6;
    `device(i)` -> `device_index(i)` from 2.8; the memory statistics from 2.9;
    `mem_get_info` -> `get_memory_info` from 2.10. A `device=` keyword becomes positional
    (the `torch.accelerator` functions take it positionally only).

    Safe (same result on CUDA, same behaviour on the active accelerator elsewhere):
    `device_count` (0 without an accelerator either way), `synchronize`, `current_device`,
    `set_device`, `reset_peak_memory_stats`, `mem_get_info`; where no accelerator exists
    both forms raise, though the exception type may differ (AssertionError vs
    RuntimeError). Unsafe: the memory statistics (`torch.cuda` returns 0 or `{}` on a
    machine without CUDA, `torch.accelerator` raises) and `device(...)` (takes only an int
    or None). `manual_seed`/`manual_seed_all` have no equivalent: the diagnostic advises
    `torch.manual_seed` (which seeds every device) or a project helper. A call that is the
    whole body of an `if torch.cuda.is_available():` guard gets the guard rewritten too
    (`torch.accelerator.is_available()`), since keeping it would still skip other
    accelerators. These fixes import only `torch`, never the runtime.

    ## Options
    - `banned-calls`: the `torch.cuda` function names to flag (default: the list above).
    - `extend-banned-calls`: more names to flag.
    - `allowed-calls`: names to stop flagging (narrows either list).
    - `require-device-layer`: report only in a project with a device layer of its own
      (default true; see above); false reports in every project.
    - `replacements`: `{name = "package.module:object.method"}` rewrites that call to a
      project helper instead, e.g. `synchronize = "vllm.platforms:current_platform.synchronize"`;
      applied as a safe fix (you declare it equivalent) whatever the torch version.

    What is checked is set by the top-level `portability` and `non-library` settings
    (shared with LL004; see the README): `portability = "strict"` reports every call above.
    """

    code = "LL005"
    name = "hard-coded-cuda-call"
    summary = "`torch.cuda` device call is CUDA-only; use `torch.accelerator` or a platform helper"
    triggers = ("cuda",)
    fix_availability = "sometimes"
    options = (
        Option(
            "banned-calls",
            list,
            list(DEFAULT_BANNED),
            "`torch.cuda` functions to flag",
            names=TORCH_CUDA_FUNCTIONS,
        ),
        Option(
            "extend-banned-calls",
            list,
            [],
            "more `torch.cuda` functions to flag",
            names=TORCH_CUDA_FUNCTIONS,
        ),
        Option(
            "allowed-calls",
            list,
            [],
            "`torch.cuda` functions never to flag",
            names=TORCH_CUDA_FUNCTIONS,
        ),
        Option(
            "require-device-layer",
            bool,
            True,
            "report only in projects with a device layer of their own (a `platforms/`-style "
            "folder); false reports in every project",
        ),
        Option(
            "replacements",
            dict,
            {},
            "function name -> project helper (`package.module:object.method`) to rewrite to",
            validate=_validate_replacements,
            names=TORCH_CUDA_FUNCTIONS,
        ),
    )

    def __init__(self, context, options) -> None:
        super().__init__(context, options)
        allowed = set(options["allowed-calls"]) | {"empty_cache"}
        self.banned = (set(options["banned-calls"]) | set(options["extend-banned-calls"])) - allowed
        self.replacements: dict[str, str] = dict(options["replacements"])
        self.require_device_layer: bool = options["require-device-layer"]
        self.portability = Portability.of(context)

    def visit_Call(self, node: cst.Call) -> None:
        ancestors = self.context.ancestors
        call = resolve_cuda_call(self.context, node, ancestors, self.banned)
        if call is None:
            return
        left_out = self.portability.leaves_out(
            self.context, ancestors, query=call.function in QUERIES, function=call.function
        )
        if left_out is not None:
            if left_out:  # "" is a multi-backend dispatch: not a finding at all
                self.leave_out(left_out, SHOWS_LEFT_OUT)
            return
        ladder_reason = self.portability.leaves_out_ladder(self.context, call)
        if ladder_reason:
            self.leave_out(ladder_reason, SHOWS_LEFT_OUT)
            return
        function = call.function
        if function in SEEDING and not self.portability.strict and self._seeds_torch(ancestors):
            self.leave_out(LEFT_OUT_REDUNDANT_SEED, SHOWS_LEFT_OUT)
            return
        if self._no_device_layer():
            self.leave_out(LEFT_OUT_NO_DEVICE_LAYER, SHOWS_LEFT_OUT)
            return
        written = self.context.source_of(node.func)
        effect = CUDA_ONLY_EFFECT.get(function, "works on CUDA only")
        if not call.certain:
            ladder = describe_ladder(self.context, call)
            self.report(
                node,
                f"`{written}()` is `torch.cuda.{function}` {ladder}: there it {effect}; "
                "route it through the project's platform layer or `torch.accelerator` (no "
                "fix: the ladder is the project's choice)",
            )
            return
        fix, advice = self._fix(node, function, ancestors)
        if "torch.accelerator.is_available()" not in advice and under_cuda_availability_test(
            self.context, ancestors
        ):
            advice += GUARD_NOTE
        self.report(node, f"`{written}()` is CUDA-only: it {effect}; {advice}", fix)

    def _no_device_layer(self) -> bool:
        """The file's project has no device layer of its own (`project.missing_device_layer`)
        and the user named no helper to route calls to (`replacements` is one): its CUDA
        calls are CUDA-first code, not slips past a platform abstraction."""
        if self.portability.strict or self.replacements or not self.require_device_layer:
            return False
        return missing_device_layer(self.context.path) is not None

    def _seeds_torch(self, ancestors) -> bool:
        """Whether the enclosing function also calls `torch.manual_seed`, which seeds every
        device: the CUDA-only seeding beside it is redundant, not wrong, elsewhere."""
        function = next((n for n in reversed(ancestors) if isinstance(n, cst.FunctionDef)), None)
        if function is None:
            return False
        return _TORCH_SEED.search(self.context.code_for(function.body)) is not None

    def _fix(self, node: cst.Call, function: str, ancestors) -> tuple[Fix | None, str]:
        if function in self.replacements:
            target = Target.parse(self.replacements[function])
            reference, imports = reference_to(self.context, target, ancestors)
            fix = self._rewrite(node, reference, imports, Applicability.SAFE, keep_arguments=True)
            return fix, f"use `{reference}()`"
        equivalent = ACCELERATOR_EQUIVALENTS.get(function)
        if equivalent is None:
            advice = NO_EQUIVALENT_ADVICE.get(function, "no `torch.accelerator` equivalent")
            return None, f"no `torch.accelerator` equivalent: use a platform helper ({advice})"
        replacement = f"torch.accelerator.{equivalent.name}"
        if self.context.settings.target_torch_version < equivalent.since:
            since = ".".join(map(str, equivalent.since))
            return None, f"use `{replacement}()` (torch >= {since}; raise `target-torch-version`)"
        if function == "device" and not self._is_with_item(node, ancestors):
            return None, f"use `{replacement}()` as a context manager"
        torch_name, imports = module_reference(self.context, "torch", ancestors)
        reference = f"{torch_name}.accelerator.{equivalent.name}"
        applicability = Applicability.SAFE if equivalent.safe else Applicability.UNSAFE
        guard = cuda_guard(self.context, node, ancestors)
        if guard is not None:
            # `if torch.cuda.is_available(): torch.cuda.synchronize()` would still skip
            # other accelerators: the guard becomes `torch.accelerator.is_available()`.
            test = guard.test
            assert isinstance(test, cst.Call)
            span = self.context.span(test.func)
            imports += (Edit(*span, f"{torch_name}.accelerator.is_available"),)
            advice = f"use `{replacement}()` under `torch.accelerator.is_available()`"
        else:
            advice = f"use `{replacement}()`, which does the same on the active accelerator"
        return self._rewrite(node, reference, imports, applicability), advice

    def _rewrite(
        self,
        node: cst.Call,
        reference: str,
        imports: tuple[Edit, ...],
        applicability: Applicability,
        keep_arguments: bool = False,
    ) -> Fix | None:
        edits = [Edit(*self.context.span(node.func), reference)]
        if not keep_arguments:  # a project helper keeps the call's arguments as written
            keyword_edit = self._device_keyword_to_positional(node)
            if keyword_edit is False:
                return None
            if keyword_edit is not None:
                edits.append(keyword_edit)
        return Fix(
            message=f"Replace with `{reference}()`",
            edits=tuple(edits) + imports,
            applicability=applicability,
            orphan_import_candidates=import_bindings_under(self.context, node.func, CUDA_MODULE),
        )

    def _device_keyword_to_positional(self, node: cst.Call):
        """`f(device=x)` -> `f(x)`; False when the arguments cannot be carried over."""
        if not node.args:
            return None
        if len(node.args) > 1:
            return False
        arg = node.args[0]
        if arg.star:
            return False
        if arg.keyword is None:
            return None
        if arg.keyword.value != "device":
            return False
        start, _ = self.context.span(arg.keyword)
        value_start, _ = self.context.span(arg.value)
        return Edit(start, value_start, "")

    @staticmethod
    def _is_with_item(node: cst.Call, ancestors) -> bool:
        return (
            len(ancestors) >= 2
            and isinstance(ancestors[-2], cst.WithItem)
            and ancestors[-2].item is node
        )
