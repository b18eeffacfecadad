"""Shared knowledge about device APIs, for the rules that flag hard-coded CUDA calls.

- `resolve_cuda_call`: which `torch.cuda` function a call runs, through any import form,
  alias or star import, with Python's scoping (a parameter or local named `torch` is not the
  module), and whether it is certain or comes from a backend ladder that covers only some
  accelerators (`try: from torch_npu... except ImportError: from torch.cuda import ...`).
- `in_multi_backend_dispatch`: whether a node sits in a branch of code that chooses between
  CUDA and another backend (`if cuda ... elif mps ... elif npu ...`, or one `if` per backend
  in a row): that code *is* the platform abstraction and is left alone.
- `platform_layer`: whether a node is in the project's own platform layer (a `platforms/`
  package, a `CudaPlatform`-style class, a module that dispatches between backends).
- `cuda_bound`: why the code around a node is already CUDA-only by intent (`device="cuda"`,
  `.cuda()`, `autocast("cuda")`, a CUDA-only kernel module, a test skipped without CUDA).
- `cuda_guard`: the `if torch.cuda.is_available():` statement a call is the whole body of.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import libcst as cst

from lifetime_lint.imports import dotted_name
from lifetime_lint.lazy_regex import compile_lazily
from lifetime_lint.project import (
    CUDA_OR_CPU_PICK,
    CUDA_PROJECT,
    EVERY_NAME,
    REDIRECTED_PROJECT,
    attribute_writes,
    backend_exclusion,
    cuda_package,
    imported_names,
    may_have_device_layer,
    project_relative_path,
    read_text,
    sibling_module_file,
)
from lifetime_lint.rule import FileContext
from lifetime_lint.scopes import IMPORT, NONE, Binding, ScopeTable
from lifetime_lint.traversal import walk

CUDA_MODULE = "torch.cuda"

# Backends other than CUDA that a dispatch might name. CPU is deliberately absent: a CUDA
# branch with a CPU fallback is still CUDA-only code on every other accelerator.
_OTHER_BACKEND = compile_lazily(
    r"(?<![A-Za-z0-9])(mps|npu|xpu|hpu|mlu|musa|mtia|tpu|xla|neuron|habana|ascend|gaudi|"
    r"privateuse1|intel_extension_for_pytorch|ipex|hip|rocm)(?![A-Za-z0-9])",
    re.IGNORECASE,
)  # `_` separates words here: `is_npu()`, `torch_npu`, `npu_format_cast` all name NPU

# What `from torch.cuda import *` binds among the names these rules ask about.
TORCH_CUDA_EXPORTS = frozenset(
    {
        "empty_cache", "synchronize", "device_count", "current_device", "set_device",
        "device", "memory_allocated", "max_memory_allocated", "memory_reserved",
        "max_memory_reserved", "reset_peak_memory_stats", "memory_stats", "mem_get_info",
        "manual_seed", "manual_seed_all", "is_available",
    }
)  # fmt: skip


def scope_table(context: FileContext) -> ScopeTable:
    """The file's scope table, built once."""
    table: ScopeTable = context.imports.scope_table
    return table


@dataclass(frozen=True)
class CudaCall:
    """A call that runs `torch.cuda.<function>` on at least one path."""

    function: str
    # The bindings that make it another backend's function on other paths (a ladder);
    # empty when the call is `torch.cuda.<function>` wherever it runs.
    ladder: tuple[Binding, ...] = ()

    @property
    def certain(self) -> bool:
        return not self.ladder


def resolve_cuda_call(
    context: FileContext,
    call: cst.Call,
    ancestors: Sequence[cst.CSTNode],
    functions: Iterable[str],
) -> CudaCall | None:
    """The `torch.cuda` function among `functions` that `call` runs, or None.

    None also when a name on the way is rebound to something this cannot follow (a
    parameter named `torch`, `torch = make_stub()`, a loop target): then it cannot tell,
    and a rewrite could change what the program does.
    """
    dotted = dotted_name(call.func)
    if dotted is None:
        return None
    wanted = set(functions)
    if not _may_name_a_device_function(context, call.func, wanted):
        return None
    table = scope_table(context)
    values = table.values_of(call.func, table.scope_at(ancestors))
    cuda: set[str] = set()
    ladder: list[Binding] = []
    for value in values:
        qualified = value.qualified
        if qualified is None:
            return None
        if value.star is not None:
            module, _, name = qualified.rpartition(".")
            if module != CUDA_MODULE or name not in TORCH_CUDA_EXPORTS:
                return None  # another star import may provide it
        if qualified.startswith(CUDA_MODULE + "."):
            cuda.add(qualified[len(CUDA_MODULE) + 1 :])
        elif value.via is not None and _OTHER_BACKEND.search(qualified):
            ladder.append(value.via)
        else:
            return None
    if len(cuda) != 1:
        return None
    (function,) = cuda
    if function not in wanted:
        return None
    if isinstance(call.func, cst.Name) and _calls_the_original_it_replaces(
        context, function, ancestors
    ):
        return None
    return CudaCall(function, tuple(ladder))


def _calls_the_original_it_replaces(
    context: FileContext, function: str, ancestors: Sequence[cst.CSTNode]
) -> bool:
    """The call runs a saved `torch.cuda.<function>` (`_orig_sync = torch.cuda.synchronize`)
    inside the function the module installs in its place (`torch.cuda.synchronize =
    _synchronize`): a monkeypatch that wraps the CUDA original, which it must call (a
    portable spelling would call the patch again, or another backend's function)."""
    for node in reversed(ancestors):
        if isinstance(node, cst.FunctionDef):
            name = re.escape(node.name.value)
            installs = rf"\btorch\.cuda\.{re.escape(function)}\s*=\s*{name}\b"
            return re.search(installs, context.source) is not None
    return False


def _may_name_a_device_function(
    context: FileContext, func: cst.BaseExpression, wanted: set[str]
) -> bool:
    """A cheap filter before the scope table: most calls stop here."""
    if isinstance(func, cst.Attribute):
        return func.attr.value in wanted  # only a bare name can be renamed
    if not isinstance(func, cst.Name):
        return False
    name = func.value
    if name in wanted or context.imports.is_bound_locally(name):
        return True
    return _has_star_import_text(context) or name in _assigned_names(context)


def _has_star_import_text(context: FileContext) -> bool:
    """Whether the file's text has `import *`, searched once per file (memoised), not once
    per call of a bare name."""
    found = context.memo.get("devices.star_import_text")
    if found is None:
        found = context.memo["devices.star_import_text"] = "import *" in context.source
    return found


# A name followed by `=` (not `==`): where a bare name may be bound to a device function.
_ASSIGNED_NAME = compile_lazily(r"\b((?!\d)\w+)(?=\s*=[^=])")


def _assigned_names(context: FileContext) -> frozenset[str]:
    """Every name the file's text assigns with `=`, found in one pass and memoised: a
    search of the whole text per call made this filter cost calls x file size."""
    names = context.memo.get("devices.assigned_names")
    if names is None:
        names = context.memo["devices.assigned_names"] = frozenset(
            _ASSIGNED_NAME.findall(context.source)
        )
    return names


def ladder_backends(context: FileContext, call: CudaCall) -> list[str]:
    """The other backends a call's ladder binds (`["npu", "xpu"]`), sorted."""
    return sorted(
        {
            match.group(1).lower()
            for b in call.ladder
            for match in [_OTHER_BACKEND.search(context.code_for(b.line_node))]
            if match
        }
    )


def describe_ladder(context: FileContext, call: CudaCall) -> str:
    """`on every backend but npu (the ladder at line 3)`: what a ladder covers."""
    rows = sorted({context.position(b.line_node).start.line for b in call.ladder})
    names = ladder_backends(context, call)
    lines = ", ".join(str(row) for row in rows)
    plural = "s" if len(rows) > 1 else ""
    backends = ", ".join(names) if names else "the one it names"
    return f"on every backend but {backends} (the ladder at line{plural} {lines})"


def in_multi_backend_dispatch(context: FileContext, ancestors: Sequence[cst.CSTNode]) -> bool:
    """True when an enclosing if/elif/else chain, conditional expression or `match` tests
    or handles another backend besides CUDA in its conditions or its other branches, or
    when a sibling `if` of the enclosing guard tests another backend."""
    chain = list(ancestors)
    for index in range(len(chain) - 1, -1, -1):
        node = chain[index]
        if isinstance(node, cst.If):
            head = index
            while head > 0 and _is_elif_of(chain[head - 1], chain[head]):
                head -= 1
            head_if = chain[head]
            assert isinstance(head_if, cst.If)
            if _mentions_other_backend(context, _if_chain_parts(head_if, chain)):
                return True
            if (
                head > 0
                and _CUDA_WORD.search(context.code_for(head_if.test))
                and _sibling_tests_other_backend(context, chain[head - 1], head_if)
            ):
                return True
        elif isinstance(node, cst.IfExp):
            parts: list[cst.CSTNode] = [node.test]
            parts += [b for b in (node.body, node.orelse) if not _contains(chain, b)]
            if _mentions_other_backend(context, parts):
                return True
        elif isinstance(node, cst.Match):
            parts = [node.subject]
            for case in node.cases:
                parts.append(case.pattern)
                if not _contains(chain, case):
                    parts.append(case.body)
            if _mentions_other_backend(context, parts):
                return True
    return False


# Another backend's module of the same device function (`torch.xpu.empty_cache(`,
# `torch.npu.synchronize(`, `torch_npu.npu.empty_cache(`); `{}` is the function name.
_TWIN_CALL = r"\btorch(?:_npu)?\.(?:xpu|npu|mps|hpu|mlu|musa)\.{}\s*\("
# How many statements before and after the call's own a twin may stand.
_TWIN_REACH = 3


def beside_other_backend_twin(
    context: FileContext, ancestors: Sequence[cst.CSTNode], function: str
) -> bool:
    """A statement near the call's own in its block calls the same function of another
    backend (`torch.cuda.empty_cache()` followed by `if torch.xpu.is_available():
    torch.xpu.empty_cache()`): a dispatch written as a sequence, which already covers the
    backends the code supports (optimum's GPTQ quantizer, ipex-llm's workers)."""
    chain = list(ancestors)
    for index in range(len(chain) - 2, -1, -1):
        block = chain[index]
        body = getattr(block, "body", None)
        if not isinstance(body, (list, tuple)) or not isinstance(
            block, (cst.IndentedBlock, cst.Module)
        ):
            continue
        statement = chain[index + 1]
        position = next((i for i, s in enumerate(body) if s is statement), None)
        if position is None:
            continue
        twin = re.compile(_TWIN_CALL.format(re.escape(function)))
        near = [*body[max(0, position - _TWIN_REACH) : position],
                *body[position + 1 : position + 1 + _TWIN_REACH]]  # fmt: skip
        return any(twin.search(context.code_for(sibling)) for sibling in near)
    return False


def past_other_backend_exit(context: FileContext, ancestors: Sequence[cst.CSTNode]) -> bool:
    """An enclosing block runs `if <another backend>: return/raise` (no `else`) before the
    node (`if current_platform.is_npu() or current_platform.is_mps(): return False`): the
    code that follows is the remaining branch of that dispatch."""
    chain = list(ancestors)
    for index in range(len(chain) - 1):
        block, child = chain[index], chain[index + 1]
        if not isinstance(block, cst.IndentedBlock):
            continue
        for statement in block.body:
            if statement is child:
                break
            if (
                isinstance(statement, cst.If)
                and statement.orelse is None
                and _OTHER_BACKEND.search(context.code_for(statement.test))
                and _how_body_exits(statement.body) is not None
                # `if not _is_hip: return` keeps that backend, not sends it away: the
                # code past it is ROCm-only (`cuda_bound` says so).
                and not (
                    isinstance(statement.test, cst.UnaryOperation)
                    and isinstance(statement.test.operator, cst.Not)
                )
                and _backend_when_false(statement.test, context) is None
            ):
                return True
    return False


_CUDA_WORD = compile_lazily(r"(?<![A-Za-z0-9])cuda(?![A-Za-z0-9])", re.IGNORECASE)


def _sibling_tests_other_backend(context: FileContext, block: cst.CSTNode, guard: cst.If) -> bool:
    """A sequence of per-backend guards in one block (`if mps: ...` / `if cuda: ...` /
    `if xpu: ...`, invokeai's `empty_cache`): the dispatch written as separate `if`s. The
    caller checks that `guard` itself tests CUDA: a CUDA call under `if batch_eval_metrics:`
    beside an unrelated `if is_torch_xla_available():` is no dispatch."""
    if not isinstance(block, (cst.IndentedBlock, cst.Module)):
        return False
    for statement in block.body:
        branch: cst.CSTNode | None = statement
        while statement is not guard and isinstance(branch, cst.If):
            if _OTHER_BACKEND.search(context.code_for(branch.test)):
                return True
            branch = branch.orelse
    return False


def _is_elif_of(parent: cst.CSTNode, child: cst.CSTNode) -> bool:
    return isinstance(parent, cst.If) and parent.orelse is child


def _if_chain_parts(head: cst.If, ancestors: Sequence[cst.CSTNode]) -> list[cst.CSTNode]:
    """The tests of every branch, and the bodies of the branches the node is not in."""
    parts: list[cst.CSTNode] = []
    branch: cst.CSTNode | None = head
    while branch is not None:
        if isinstance(branch, cst.If):
            parts.append(branch.test)
            if not _contains(ancestors, branch.body):
                parts.append(branch.body)
            branch = branch.orelse
        else:  # Else
            assert isinstance(branch, cst.Else)
            if not _contains(ancestors, branch):
                parts.append(branch.body)
            branch = None
    return parts


def _contains(ancestors: Sequence[cst.CSTNode], node: cst.CSTNode) -> bool:
    return any(ancestor is node for ancestor in ancestors)


def _mentions_other_backend(context: FileContext, parts: Sequence[cst.CSTNode]) -> bool:
    return any(_OTHER_BACKEND.search(context.code_for(part)) for part in parts)


# -- the project's own platform layer ------------------------------------------------------

# Folders that hold a project's device abstraction (`vllm_omni/platforms/cuda/platform.py`,
# `fastvideo/platforms/cuda.py`): the one place that is meant to call `torch.cuda`.
PLATFORM_FOLDERS = frozenset({"platforms", "platform", "hardware_backend", "device_backends"})
_PLATFORM_CLASS = compile_lazily(r"Platform|DeviceInterface|Accelerator(Backend|Interface)")


def platform_layer(context: FileContext, ancestors: Sequence[cst.CSTNode]) -> str | None:
    """Why the node is part of the project's platform layer, or None.

    That layer implements one backend's side of a device interface (a `CudaPlatform`
    class, a `platforms/` package), so calling that backend's API is its job.
    """
    folders = _layout_path(context).split("/")[:-1]
    for folder in folders:
        if folder.lower() in PLATFORM_FOLDERS:
            return f"the platform package `{folder}/`"
    for index, node in enumerate(ancestors):
        if isinstance(node, cst.ClassDef):
            names = [node.name.value] + [dotted_name(arg.value) or "" for arg in node.bases]
            if any(_PLATFORM_CLASS.search(name) for name in names):
                return f"the platform class `{node.name.value}`"
            method = next(
                (n for n in ancestors[index + 1 :] if isinstance(n, cst.FunctionDef)), None
            )
            if method is not None:
                backend = _overridden_for_other_backend(context, node, method.name.value)
                if backend:
                    return f"the CUDA default of `{method.name.value}`, which `{backend}` overrides"
    return None


def _overridden_for_other_backend(
    context: FileContext, base: cst.ClassDef, method: str
) -> str | None:
    """A class of the module, named for another backend and derived from `base`
    (`class NPUEnv(BaseEnv)`), that defines `method` itself: `base` is a per-backend
    hierarchy's root, and its `method` the CUDA default the others replace."""
    for statement in context.module.body:
        if not isinstance(statement, cst.ClassDef) or statement is base:
            continue
        if not _OTHER_BACKEND.search(_camel_words(statement.name.value)):
            continue
        if not any(dotted_name(arg.value) == base.name.value for arg in statement.bases):
            continue
        if any(
            isinstance(member, cst.FunctionDef) and member.name.value == method
            for member in _class_body(statement)
        ):
            return statement.name.value
    return None


def _camel_words(name: str) -> str:
    """`NPUEnv` -> `NPU Env`, `XpuWorker` -> `Xpu Worker`: CamelCase humps as words."""
    return re.sub(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", " ", name)


# -- code that is CUDA-only by intent ------------------------------------------------------

# A CUDA device pinned somewhere in a function: evidence about that function's own code
# (often one generator or tensor of a long one), too weak to bind the helpers it calls.
_PINNED_DEVICE = "code bound to CUDA by a pinned device"
_NCCL_BRANCH = "an NCCL branch"
# Work a function runs on a CUDA stream: evidence about its own code, not about the helpers
# it calls or hands on (vllm-omni's async output starts a thread whose `set_device` serves
# every backend).
_ON_CUDA_STREAMS = "code bound to CUDA by work it runs on CUDA streams"
# CUDA's own driver API and IPC: `driver.cuMemMap(...)` (virtual memory management),
# `reductions.rebuild_cuda_tensor` (sharing CUDA tensors between processes).
_CUDA_DRIVER_API = compile_lazily(
    r"""\bcu(Mem|Device|Ctx|Stream|Event|Graph|Launch|Module|Init)[A-Z]\w*\(|"""
    r"""\bcuda\.bindings\b|\bcudart\.|rebuild_cuda_tensor"""
)
_CUDA_BOUND_CODE = (
    (compile_lazily(r"""\bdevice(_type)?\s*=\s*(f?["'])cuda"""), 'an explicit `device="cuda"`'),
    (compile_lazily(r"""torch\.device\(\s*(f?["'])cuda"""), '`torch.device("cuda")`'),
    (compile_lazily(r"""\.to\(\s*(f?["'])cuda"""), '`.to("cuda")`'),
    (compile_lazily(r"""\.cuda\(\s*\)|\.cuda\(\s*(non_blocking|device)"""), "`.cuda()`"),
    # A legacy CUDA tensor type: `x.type(torch.cuda.HalfTensor)`, `torch.cuda.FloatTensor(n)`.
    (
        compile_lazily(
            r"""\.type\(\s*torch\.cuda\.[A-Z]\w*Tensor\b|\btorch\.cuda\.[A-Z]\w*Tensor\("""
        ),
        "a `torch.cuda.*Tensor` type",
    ),
    (compile_lazily(r"""autocast\(\s*(f?["'])cuda|torch\.cuda\.amp\b"""), '`autocast("cuda")`'),
    (
        compile_lazily(
            r"""CUDAGraph\b|torch\.cuda\.(graph|graphs|graph_pool_handle)\b|"""
            r"""cuda\.is_current_stream_capturing\("""
        ),
        "CUDA graphs",
    ),
    # A raw CUDA stream handle, a CUDA memory pool or pluggable allocator: CUDA's own objects.
    (
        compile_lazily(
            r"""\.cuda_stream\b|cuda\.(MemPool|use_mem_pool)\b|CUDAPluggableAllocator"""
        ),
        "a CUDA stream handle or memory pool",
    ),
    (_CUDA_DRIVER_API, "the CUDA driver API or CUDA IPC"),
    # Symmetric memory (`torch.distributed._symmetric_memory`): CUDA peer-mapped buffers.
    (compile_lazily(r"""SymmetricMemory\b|\bsymmetric_memory\b"""), "CUDA symmetric memory"),
    # A CUDA stream or event object of the function's own: its work is ordered on CUDA.
    (compile_lazily(r"""\bcuda\.(Stream|Event|ExternalStream)\("""), "a CUDA stream or event"),
    # The author's own message says so: `logger.info("Expert-pack CUDA extension ...")`.
    (compile_lazily(r"""["'][^"'\n]*\bCUDA (extension|kernel)s?\b"""), "a CUDA extension"),
    # Saving or restoring the CUDA generators' state has no device-neutral form: such code
    # is CUDA's half of an RNG checkpoint (the CPU state is handled beside it).
    (
        compile_lazily(r"""cuda\.(get_rng_state|set_rng_state|default_generators)\b"""),
        "CUDA RNG state bookkeeping",
    ),
)
_PINNED_DEVICE_REASONS = frozenset(reason for _, reason in _CUDA_BOUND_CODE[:6])
# A decorator or marker that skips a test without CUDA (`@require_torch_gpu`,
# `@pytest.mark.skipif(not torch.cuda.is_available(), ...)`, `@unittest.skipUnless(
# torch.cuda.device_count() > 1, ...)`, `pytestmark = pytest.mark.cuda`).
_CUDA_SKIP = compile_lazily(
    r"(skip|require|needs|only)\w*\W[^\n]*\b(cuda|gpu|gpus)\b|"
    r"\b(requires?|needs)_(torch_)?(multi_)?(cuda|gpu)\w*|\bmark\.(cuda|gpu)\b|"
    r"\b(cuda|gpu)_only\b",
    re.IGNORECASE,
)
# Only a raise or a skip makes the rest CUDA-only: an early `return` is a fallback path.
_EARLY_EXIT = compile_lazily(r"\b(skip|skipTest|SkipTest|raise)\b")
# Libraries that exist only for NVIDIA GPUs: a module that imports one is CUDA-only
# (DeepEP's expert-parallel all-to-all and NVSHMEM run over NVLink/InfiniBand GPU memory;
# Mamba's selective-scan and causal-conv1d kernels are CUDA (and HIP) builds).
CUDA_ONLY_LIBRARIES = frozenset(
    {"cupy", "pycuda", "pynvml", "nvidia", "cuda", "flash_attn", "flashinfer", "cutlass",
     "deep_gemm", "tensorrt", "apex", "nvtx", "transformer_engine", "deep_ep", "nvshmem",
     "mamba_ssm", "causal_conv1d"}
)  # fmt: skip
# Names of CUDA-only kernels and libraries, in a folder, file or function name
# (`flashinfer_autotune.py`, `deep_gemm_wrapper/`, `_process_weights_for_sm90_cutlass`).
_CUDA_ONLY_NAME = compile_lazily(
    r"(?<![A-Za-z0-9])(cudagraph|cuda_graph|nccl|pynccl|graph_runner|flashinfer|cutlass|cute|"
    r"deep_gemm|deepgemm|trtllm|tensorrt|cudnn|nvshmem|symm_mem|nunchaku|nvfp4|nvjpeg|nvidia|vmm|"
    r"mscclpp|pymscclpp|custom_all_reduce|sm\d{2,3})"
    r"(?![A-Za-z])",
    re.IGNORECASE,
)
# The same for function names, less NCCL (a `_prewarm_nccl` often serves RCCL/HCCL too).
_CUDA_ONLY_FUNCTION = compile_lazily(_CUDA_ONLY_NAME.pattern.replace("nccl|pynccl|", ""), re.I)
# A module named for CUDA itself (`cuda_graph_wrapper.py`, `custom_cuda_ops.py`).
_CUDA_MODULE_NAME = compile_lazily(r"(?<![A-Za-z0-9])cuda(?![A-Za-z])", re.IGNORECASE)
# A class named for CUDA (`CUDAGraphRunner`, `CudaGraphWrapper`, `Cuda_IPC`): snake_case
# words and CamelCase humps, not `barracuda`.
_CUDA_IDENTIFIER = compile_lazily(
    r"(?:^|_)[cC]uda(?=_|\d|$)|(?:^|_|[a-z])(?:CUDA|Cuda)(?=[A-Z_\d]|$)"
)


def _names_cuda_class(test: str) -> bool:
    """A test naming a class its author named for CUDA (`isinstance(f,
    CudaIpcTensorTransportProxy)`): CamelCase names only, so `torch.cuda.is_available()`
    is not one."""
    return any(
        word[0].isupper() and not word.isupper() and _CUDA_IDENTIFIER.search(word)
        for word in re.findall(r"[A-Za-z_]\w*", test)
    )


# A class named for a CUDA graph memory pool (`GraphPoolPrecarve`, `CudaGraphPool`).
_CUDA_GRAPH_POOL = compile_lazily(r"GraphPool|graph_pool")
# ROCm runs the `torch.cuda` API: code written only for it is already right there.
_ROCM = compile_lazily(r"(?<![A-Za-z0-9])(hip|rocm|amd|aiter|gfx\d+)(?![A-Za-z0-9])", re.IGNORECASE)
# Branch tests that pick CUDA (or ROCm) specifically, beyond "is an accelerator there".
_CUDA_SPECIFIC_TEST = compile_lazily(
    r"is_cuda|==\s*[\"']cuda[\"':]|get_device_capability|version\.cuda|is_sm\d+|"
    r"is_blackwell|is_hopper|is_ampere|startswith\(\s*[\"']cuda|[\"']cuda[\"']\s+in\b",
    re.IGNORECASE,
)


UNSET_GATE = "a branch on an optional attribute"  # how its reason starts


def _optional_attribute_gate(context: FileContext, test: cst.BaseExpression) -> str | None:
    """Why a branch on an optional attribute (`if hasattr(self, "hook") and self.hook is
    not None:`, `if getattr(self, "hook", None) is not None:`) runs only on CUDA, or None:
    no module of the project sets the attribute to anything but None, or each one that
    does sets it in a function that binds a literal CUDA device outside any `if`
    (`project.attribute_writes`). The gate says the class does not define the attribute
    itself; a write the project's text does not show plainly keeps the branch reported."""
    attribute = _gated_attribute(test)
    if attribute is None:
        return None
    writes = attribute_writes(context.path, attribute)
    if writes is None or writes.unjudged:
        return None
    if not writes.cuda_bound:
        return (
            f"{UNSET_GATE} (`{attribute}`) that no module of {writes.project} sets to "
            "anything but None"
        )
    return (
        f"{UNSET_GATE} (`{attribute}`) that {writes.project} sets only in functions bound "
        f"to a CUDA device ({', '.join(writes.cuda_bound[:3])})"
    )


def _gated_attribute(test: cst.BaseExpression) -> str | None:
    """The attribute of `self` that `test` requires to be set, read by name: a conjunct
    `getattr(self, "x", None)` (or `... is not None`), or `hasattr(self, "x")` beside a
    conjunct `self.x is not None` (or `self.x`). None otherwise."""
    conjuncts: list[cst.BaseExpression] = []

    def split(node: cst.BaseExpression) -> None:
        if isinstance(node, cst.BooleanOperation) and isinstance(node.operator, cst.And):
            split(node.left)
            split(node.right)
        else:
            conjuncts.append(node)

    split(test)
    checked: set[str] = set()
    probed: set[str] = set()
    for conjunct in conjuncts:
        inner = _not_none_operand(conjunct)
        if (
            isinstance(inner, cst.Attribute)
            and isinstance(inner.value, cst.Name)
            and inner.value.value == "self"
        ):
            checked.add(inner.attr.value)
            continue
        if not isinstance(inner, cst.Call) or not isinstance(inner.func, cst.Name):
            continue
        args = inner.args
        if not args or not (isinstance(args[0].value, cst.Name) and args[0].value.value == "self"):
            continue
        if len(args) < 2 or any(a.keyword is not None or a.star for a in args):
            continue
        name = args[1].value
        value = name.evaluated_value if isinstance(name, cst.SimpleString) else None
        if not isinstance(value, str) or not value.isidentifier():
            continue
        if inner.func.value == "hasattr" and len(args) == 2:
            probed.add(value)
        elif (
            inner.func.value == "getattr"
            and len(args) == 3
            and isinstance(args[2].value, cst.Name)
            and args[2].value.value == "None"
        ):
            return value
    both = sorted(probed & checked)
    return both[0] if both else None


def _not_none_operand(node: cst.BaseExpression) -> cst.BaseExpression:
    """`x` of `x is not None`; any other node as it is."""
    if (
        isinstance(node, cst.Comparison)
        and len(node.comparisons) == 1
        and isinstance(node.comparisons[0].operator, cst.IsNot)
        and isinstance(node.comparisons[0].comparator, cst.Name)
        and node.comparisons[0].comparator.value == "None"
    ):
        return node.left
    return node


def cuda_bound(context: FileContext, ancestors: Sequence[cst.CSTNode]) -> str | None:
    """Why the code around a node is CUDA-only by intent, or None.

    Checked, innermost first: the enclosing functions (an explicit CUDA device, `.cuda()`,
    CUDA autocast or graphs in their code; a skip-without-CUDA decorator, or an early
    `if not torch.cuda.is_available(): skip/return`), the enclosing classes' decorators,
    and the module (a CUDA-only kernel module: a file named for CUDA or NCCL, an import of
    a CUDA-only library, a module-level `pytestmark` that needs CUDA).
    """
    chain = list(ancestors)
    helper = _handed_to_cuda_driver_helper(context, chain)
    if helper:
        return f"a value handed to `{helper}`, which calls the CUDA driver API"
    helper = _index_of_pinned_cuda_device(context, chain)
    if helper:
        return f"a device index handed to `{helper}`, which makes it a CUDA device"
    for index in range(len(chain) - 1, -1, -1):
        node = chain[index]
        if isinstance(node, cst.IndentedBlock) and index + 1 < len(chain):
            reason = _past_cuda_exit(context, node, chain[index + 1], chain[:index])
            if reason:
                return reason
        if index + 1 < len(chain):
            reason = _branch_proves_backend(context, node, chain[index + 1], chain[:index])
            if reason:
                return reason
        if isinstance(node, cst.If) and index + 1 < len(chain) and chain[index + 1] is node.body:
            test = context.code_for(node.test)
            if _ROCM.search(test):
                return f"a ROCm-only branch (`{test.strip()[:60]}`), where torch.cuda is right"
            reason = _optional_attribute_gate(context, node.test)
            if reason:
                return reason
            local = _none_unless_cuda(context, node.test, chain[:index])
            if local:
                return f"CUDA-only code (`{local}` is false or None unless the device is CUDA)"
            if isinstance(node.test, cst.Call) and _proves_cuda(context, node.test, chain[:index]):
                # `if self._offload_enabled():`, a same-module predicate false off CUDA
                return f"a branch on a predicate true only on CUDA (`{test.strip()[:60]}`)"
            flag = node.test.value if isinstance(node.test, cst.Name) else None
            library = _cuda_library_flags(context).get(flag) if flag else None
            if library:
                return f"a branch on `{flag}`, a flag set only once `{library}` loaded"
            if _CUDA_SPECIFIC_TEST.search(test) or _names_cuda_class(test):
                return f"a CUDA-only branch (`{test.strip()[:60]}`)"
            if _CUDA_SUBSYSTEM_MODULE.search(test):
                # `if mm_item.has_cuda_ipc_proxy():`, `if self.use_vmm:`
                return f"a branch for a CUDA-only subsystem (`{test.strip()[:60]}`)"
            if _CUDA_ONLY_NAME.search(test) and not _OTHER_BACKEND.search(test):
                # `if attention_backend == "flashinfer_cudnn":` picks a CUDA-only kernel; a
                # test naming only NCCL (`pre_warm_nccl`) is weaker: HCCL/RCCL mirror it.
                weak = "" if _CUDA_ONLY_FUNCTION.search(test) else f"{_NCCL_BRANCH}: "
                return f"{weak}a branch for a CUDA-only kernel (`{test.strip()[:60]}`)"
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            if _ROCM.search(node.name.value):
                return f"ROCm-only code (`{node.name.value}`), where torch.cuda is right"
            if _CUDA_ONLY_FUNCTION.search(node.name.value):
                return f"code for a CUDA-only kernel (`{node.name.value}`)"
            if isinstance(node, cst.ClassDef) and _CUDA_GRAPH_POOL.search(node.name.value):
                return f"a CUDA graph memory pool (`{node.name.value}`)"
            if isinstance(node, cst.ClassDef) and _CUDA_IDENTIFIER.search(node.name.value):
                # `CUDAGraphRunner`, `CudaIpcBuffer`: a class its author named for CUDA. (Not
                # functions: a `_empty_cuda_cache()` helper in shared code runs everywhere.)
                return f"a class named for CUDA (`{node.name.value}`)"
            reason = _memo(context, node, _scope_binding)
            if reason:
                return reason
            if isinstance(node, cst.FunctionDef):
                reason = _device_evidence(context, node, _own_statement_span(context, chain))
                if reason:
                    return reason
                reason = _caller_gated(context, node)
                if reason:
                    return reason
    return _memo(context, context.module, _module_binding)


def _handed_to_cuda_driver_helper(context: FileContext, chain: Sequence[cst.CSTNode]) -> str | None:
    """The same-module function the node is an argument of, where that function's body
    calls the CUDA driver API or CUDA runtime (`_sorted_host_reads(torch.cuda.current_device())`,
    whose body asks `driver.cuDeviceGetAttribute(attr, device)`): the value must be CUDA's,
    so the `torch.cuda` call that makes it is right. None otherwise."""
    for index in range(len(chain) - 1, 0, -1):
        node = chain[index]
        if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            return None
        if isinstance(node, cst.Arg):
            call = chain[index - 1]
            if not isinstance(call, cst.Call):
                return None
            function = _same_module_function(context, call.func, chain[: index - 1])
            if function is not None and _CUDA_DRIVER_API.search(context.code_for(function.body)):
                return function.name.value
            return None
    return None


def _index_of_pinned_cuda_device(context: FileContext, chain: Sequence[cst.CSTNode]) -> str | None:
    """The same-module helper that turns the value into a CUDA device: the node is the
    value assigned to a local (`device_index = torch.cuda.current_device()`) that the
    enclosing function hands to a same-module function whose parameter in that place
    becomes `torch.device("cuda", device_index)` (or `f"cuda:{device_index}"`). The index
    names a CUDA device by the helper's own code, so asking `torch.cuda` for it is right
    there: the code around it works only on CUDA. None otherwise."""
    assign = None
    for index in range(len(chain) - 2, 0, -1):
        node, child = chain[index], chain[index + 1]
        if isinstance(node, cst.Assign) and child is node.value:
            assign = node
            break
        if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            return None
    if (
        assign is None
        or len(assign.targets) != 1
        or not isinstance(assign.targets[0].target, cst.Name)
    ):
        return None
    name = assign.targets[0].target.value
    function = next((n for n in reversed(chain) if isinstance(n, cst.FunctionDef)), None)
    if function is None:
        return None
    outer = chain[: chain.index(function) + 1]
    found: list[str] = []

    def enter(node: cst.CSTNode) -> None:
        if found or not isinstance(node, cst.Call):
            return
        for position, arg in enumerate(node.args):
            if not (isinstance(arg.value, cst.Name) and arg.value.value == name):
                continue
            if arg.star:
                return
            helper = _same_module_function(context, node.func, outer)
            parameter = _parameter_for(helper, position, arg) if helper else None
            if helper is not None and parameter and _makes_cuda_device(context, helper, parameter):
                found.append(helper.name.value)
                return

    walk(function.body, enter, lambda _: None, _outside_nested_scopes)
    return found[0] if found else None


def _parameter_for(function: cst.FunctionDef, position: int, arg: cst.Arg) -> str | None:
    """The name of `function`'s parameter that `arg` (the `position`th argument) binds."""
    if arg.keyword is not None:
        return arg.keyword.value
    positional = [*function.params.posonly_params, *function.params.params]
    if positional and positional[0].name.value in ("self", "cls"):
        return None  # a method called through its instance: positions shift
    return positional[position].name.value if position < len(positional) else None


def _makes_cuda_device(context: FileContext, function: cst.FunctionDef, parameter: str) -> bool:
    """`function`'s body builds a CUDA device from `parameter` (`torch.device("cuda",
    parameter)`, `torch.device(f"cuda:{parameter}")`), and does not rebind it."""
    name = re.escape(parameter)
    text = context.code_for(function.body)
    pinned = re.search(
        rf"""torch\.device\(\s*(["'])cuda\1\s*,\s*{name}\s*\)|f(["'])cuda:\{{{name}\}}\2""",
        text,
    )
    return pinned is not None and not any(
        value is not None for value, _ in _bindings_of(function, parameter)
    )


def _branch_proves_backend(
    context: FileContext, node: cst.CSTNode, child: cst.CSTNode, outer: Sequence[cst.CSTNode]
) -> str | None:
    """Why `child`, a branch of `node`, runs only on one backend: the right operand of
    `x.is_cuda and ...` (or of `not x.is_cuda or ...`, `dev.type != "cuda" or ...`), an arm
    of `... if x.is_cuda else ...` on the side its test proves, the `else` or `elif` of
    `if dev.type != "cuda":`, the body of `if DEVICE_TYPE in ("cuda", "hip"):`. Only tests
    of the device itself count: `torch.cuda.is_available()` leaves other accelerators."""
    found: BackendTest | None = None
    if isinstance(node, cst.BooleanOperation) and child is node.right:
        if isinstance(node.operator, cst.And):
            found = _backend_when_true(node.left, context, outer)
            where = f"right of `{context.code_for(node.left).strip()[:60]} and`"
        else:
            found = _backend_when_false(node.left, context, outer)
            where = f"right of `{context.code_for(node.left).strip()[:60]} or`"
    elif isinstance(node, (cst.If, cst.IfExp)) and (child is node.body or child is node.orelse):
        test = context.code_for(node.test).strip()[:60]
        if child is node.body:
            found = _backend_when_true(node.test, context, outer)
            where = f"under `{test}`"
            if found is None and isinstance(node, cst.If):
                # `if cuda_devices:`, a collection filtered to CUDA, is true only with one
                found = _items_backend(context, node.test, outer)
                where = f"under `{test}`, whose items are all on it"
        else:
            found = _backend_when_false(node.test, context, outer)
            where = f"the other branch of `{test}`"
    elif isinstance(node, cst.For) and child is node.body:
        # `for d in {p.device for p in params if p.device.type == "cuda"}:`
        found = _items_backend(context, node.iter, outer)
        items = context.code_for(node.iter).strip()[:60]
        where = f"a loop over `{items}`, whose items are all on it"
        if found is None and _ROCM.search(items):
            # `for device_id in self._torch_rocm_memory_devices:`: named for ROCm's devices
            found = BackendTest("ROCm", True)
            where = f"a loop over `{items}`"
    elif isinstance(node, _COMPREHENSIONS) and child is not node.for_in:
        # `{t.device: torch.cuda.memory_allocated(t.device) for t in ts if t.is_cuda}`
        found = _items_backend(context, node, outer)
        where = "a comprehension filtered to it"
    if found is None or not found.identity:
        return None
    return _bound_reason(found.backend, where)


_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)


def _items_backend(
    context: FileContext, expression: cst.BaseExpression, outer: Sequence[cst.CSTNode]
) -> BackendTest | None:
    """The backend every item of `expression` is on: a comprehension filtered by a device
    test (`{p.device for p in model.parameters() if p.device.type == "cuda"}`), or a local
    of the enclosing function bound only to such comprehensions (`|=` included)."""
    if isinstance(expression, _COMPREHENSIONS):
        comp: cst.CompFor | None = expression.for_in
        while comp is not None:
            for condition in comp.ifs:
                found = _backend_when_true(condition.test, context, outer)
                if found is not None and found.identity:
                    return found
            comp = comp.inner_for_in
        return None
    if not isinstance(expression, cst.Name):
        return None
    function = next((n for n in reversed(outer) if isinstance(n, cst.FunctionDef)), None)
    bindings = _bindings_of(function, expression.value) if function is not None else []
    backends = set()
    for value, chain in bindings:
        if isinstance(chain[-1], cst.AugAssign):
            value = chain[-1].value
        if not isinstance(value, _COMPREHENSIONS):
            return None
        found = _items_backend(context, value, outer)
        if found is None:
            return None
        backends.add(found.backend)
    if len(backends) != 1:
        return None
    return BackendTest(backends.pop(), True)


def _own_statement_span(context: FileContext, chain: Sequence[cst.CSTNode]) -> tuple[int, int]:
    """The call's own statement (a compound statement's header only): a hard-coded device
    there is the finding itself (`torch.device(f"cuda:{torch.cuda.current_device()}")`),
    not evidence that the code around it is CUDA-only."""
    for node in reversed(chain):
        if isinstance(node, cst.SimpleStatementLine):
            return context.span(node)
        if isinstance(node, cst.BaseCompoundStatement):
            start, _ = context.span(node)
            body_start, _ = context.span(node.body)
            return start, body_start
    return 0, 0


def _device_evidence(
    context: FileContext, function: cst.FunctionDef, excluded: tuple[int, int]
) -> str | None:
    cache = context.memo.setdefault("devices.device_evidence", {})
    matches = cache.get(id(function))
    if matches is None:
        start, _ = context.span(function)
        text = context.source_of(function)
        matches = cache[id(function)] = [
            (start + match.start(), reason)
            for pattern, reason in _CUDA_BOUND_CODE
            for match in pattern.finditer(text)
        ]
    fallbacks: list[tuple[int, int]] | None = None
    for offset, reason in matches:
        if not excluded[0] <= offset < excluded[1]:
            if reason in _PINNED_DEVICE_REASONS:
                if fallbacks is None:
                    fallbacks = _fallback_default_spans(context, function)
                if any(start <= offset < end for start, end in fallbacks):
                    continue
                return f"{_PINNED_DEVICE} ({reason})"
            return f"code bound to CUDA by {reason}"
    if _runs_on_cuda_streams(function):
        return f"{_ON_CUDA_STREAMS} (`with torch.cuda.stream(...)`)"
    for statement in _body_statements(function):
        # An unconditional import of a CUDA-only library in the function's own body (kernel
        # wrappers import lazily); one under an `if` is a choice among backends.
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                root = _imported_root(small)
                if root in CUDA_ONLY_LIBRARIES:
                    return f"code that imports a CUDA-only library (`{root}`)"
                module = _imported_module(small)
                if module and any(_CUDA_ONLY_FUNCTION.search(p) for p in module.split(".")):
                    return f"code that imports a CUDA-only kernel module (`{module}`)"
    return None


def _fallback_default_spans(
    context: FileContext, function: cst.FunctionDef
) -> list[tuple[int, int]]:
    """Where the function's code picks a device only when it was given none: the `else` of
    `x.device if x is not None else torch.device("cuda")`, the right side of `device or
    "cuda"`, the body of `if device is None: device = torch.device("cuda")`. A CUDA
    device there is a default for callers that pass nothing (itself the portability bug),
    not evidence that the code around it runs only on CUDA: the device it is given rules."""
    spans: list[tuple[int, int]] = []

    def enter(node: cst.CSTNode) -> None:
        if isinstance(node, cst.IfExp) and _tests_for_given_value(node.test):
            spans.append(context.span(node.orelse))
        elif isinstance(node, cst.BooleanOperation) and isinstance(node.operator, cst.Or):
            spans.append(context.span(node.right))
        elif isinstance(node, cst.If) and node.orelse is None and _tests_for_none(node.test):
            if all(_only_assigns(line) for line in _suite(node.body)):
                spans.append(context.span(node.body))

    walk(function.body, enter, lambda _: None)
    return spans


def _tests_for_none(test: cst.BaseExpression) -> bool:
    """`x is None` (one comparison)."""
    return _compared_with_none(test, cst.Is) is not None


def _compared_with_none(
    test: cst.BaseExpression, operator: type[cst.Is] | type[cst.IsNot]
) -> cst.BaseExpression | None:
    """`x` of `x is None` (operator `cst.Is`) or `x is not None` (`cst.IsNot`), else None."""
    if (
        isinstance(test, cst.Comparison)
        and len(test.comparisons) == 1
        and isinstance(test.comparisons[0].operator, operator)
        and isinstance(test.comparisons[0].comparator, cst.Name)
        and test.comparisons[0].comparator.value == "None"
    ):
        return test.left
    return None


def _tests_for_given_value(test: cst.BaseExpression) -> bool:
    """A test of whether a value was given (`x is not None`, `hasattr(batch, "latents")`,
    a bare `device`), alone or joined by `and`: not a choice between devices (`"cuda" if
    use_gpu else "cpu"` picks one)."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return _tests_for_given_value(test.left) and _tests_for_given_value(test.right)
    if isinstance(test, cst.Comparison):
        return (
            len(test.comparisons) == 1
            and isinstance(test.comparisons[0].operator, cst.IsNot)
            and isinstance(test.comparisons[0].comparator, cst.Name)
            and test.comparisons[0].comparator.value == "None"
        )
    if isinstance(test, cst.Call):
        return dotted_name(test.func) == "hasattr"
    return (
        isinstance(test, (cst.Name, cst.Attribute))
        and "cuda" not in (dotted_name(test) or "cuda").lower()
    )


def _only_assigns(line: cst.CSTNode) -> bool:
    return isinstance(line, (cst.SimpleStatementLine, cst.SimpleStatementSuite)) and all(
        isinstance(small, (cst.Assign, cst.AnnAssign)) for small in line.body
    )


def _runs_on_cuda_streams(function: cst.FunctionDef) -> bool:
    """The function's own code, outside any `if`, enters `with torch.cuda.stream(s):`
    (also inside its loops, `with` and `try` blocks): an event loop written against CUDA's
    stream API. One under an `if` is a branch of a function that may serve other backends
    (`if enable_cuda_overlap: with torch.cuda.stream(self.alt_stream): ...`)."""
    pending: list[cst.CSTNode] = list(_body_statements(function))
    while pending:
        statement = pending.pop()
        if isinstance(statement, cst.With):
            for item in statement.items:
                call = item.item
                if isinstance(call, cst.Call) and (dotted_name(call.func) or "").endswith(
                    "cuda.stream"
                ):
                    return True
        if isinstance(statement, (cst.For, cst.While, cst.With, cst.Try)):
            pending.extend(_suite(statement.body))
            if isinstance(statement, cst.Try):
                for handler in statement.handlers:
                    pending.extend(_suite(handler.body))
    return False


def _memo(context: FileContext, node: cst.CSTNode, compute) -> str | None:
    cache = context.memo.setdefault("devices.cuda_bound", {})
    key = id(node)
    if key not in cache:
        cache[key] = compute(context, node)
    return cache[key]


def _scope_binding(context: FileContext, node: cst.FunctionDef | cst.ClassDef) -> str | None:
    for decorator in node.decorators:
        text = context.code_for(decorator.decorator)
        if _CUDA_SKIP.search(text) and not _OTHER_BACKEND.search(text):
            return f"a test skipped without CUDA (`@{text.strip()[:60]}`)"
    if isinstance(node, cst.ClassDef):
        text = context.code_for(node)
        if _CUDA_DRIVER.search(text):
            return f"a class on the CUDA driver API (`{node.name.value}`)"
        if _RAW_CUDA_STREAM.search(text) and not _OTHER_BACKEND.search(text):
            # A class that hands its kernels `torch.cuda.current_stream(x.device).cuda_stream`
            # (a raw `cudaStream_t`) is built on an extension that runs on CUDA streams:
            # its other methods (weight loading, syncs) serve that extension. Not where the
            # class names another backend (the handle is then one branch's).
            return f"a class whose kernels take raw CUDA stream handles (`{node.name.value}`)"
        if _creates_nccl_group(node) and not _OTHER_BACKEND.search(text):
            return f"{_NCCL_BRANCH}: a class whose process group is NCCL's (`{node.name.value}`)"
        return (
            _built_on_cuda_only_object(node)
            or _declares_cuda_only_capabilities(context, node)
            or _constructor_refuses_other_backends(context, node)
            or _factory_refuses_other_backends(context, node)
            or _module_factory_gives_up_off_backend(context, node)
            or _own_device_only_cuda(context, node)
        )
    for statement in _body_statements(node):
        if isinstance(statement, cst.If) and _is_cuda_skip_guard(context, statement):
            return "code that raises or skips without CUDA"
    pinned = _reads_module_cuda_or_cpu_device(context, node)
    if pinned:
        return f"{_PINNED_DEVICE} (the module's `{pinned}`, CUDA or the CPU)"
    backend = _raises_off_backend(context, node)
    if backend:
        return _bound_reason(backend, f"`{node.name.value}` raises without it")
    return (
        _registered_cuda_kernel(node)
        or _documented_cuda_kernel(node)
        or _uses_cuda_only_library(context, node)
        or _probes_cuda_capability(context, node)
        or _gated_by_cuda_validator(context, node)
        or _raises_without_backend_library(context, node)
    )


def _own_device_only_cuda(context: FileContext, node: cst.ClassDef) -> str | None:
    """Why a class runs on CUDA alone, or None: every value its own code binds to
    `self.device` is a literal CUDA device (`torch.device(f"cuda:{self.local_rank}")`,
    `"cuda"`; None aside), at least one. Its methods work on that device, so its raw
    `torch.cuda` calls serve the only accelerator it uses (vLLM-derived workers;
    a pipeline that loads only under `torch.cuda.is_available()`). A `self.device` bound
    from a parameter, a pick between backends, or any other value keeps the class
    reported; so does any class of a project with a device layer of its own (vLLM-Omni's
    workers): there the literal CUDA device is itself the slip its platform layer exists
    to avoid."""
    if may_have_device_layer(context.path):
        return None
    values: list[cst.BaseExpression] = []

    def enter(child: cst.CSTNode) -> None:
        if isinstance(child, cst.Assign):
            for target in child.targets:
                if _is_self_device(target.target):
                    values.append(child.value)
        elif isinstance(child, (cst.AnnAssign, cst.AugAssign)):
            if _is_self_device(child.target):
                values.append(child.value if child.value is not None else cst.Name("None"))
        elif isinstance(child, cst.NamedExpr) and _is_self_device(child.target):
            values.append(child.value)

    walk(node, enter, lambda _: None, lambda c: not isinstance(c, cst.ClassDef) or c is node)
    cuda = [v for v in values if not (isinstance(v, cst.Name) and v.value == "None")]
    if cuda and all(_literal_cuda_device(v) for v in cuda):
        return f"a class whose own device is only ever CUDA (`{node.name.value}.device`)"
    return None


def _is_self_device(target: cst.BaseExpression) -> bool:
    return (
        isinstance(target, cst.Attribute)
        and isinstance(target.value, cst.Name)
        and target.value.value == "self"
        and target.attr.value == "device"
    )


def _literal_cuda_device(value: cst.BaseExpression) -> bool:
    """`"cuda"`, `"cuda:0"`, `f"cuda:{rank}"`, or `torch.device(...)` of one of those."""
    if isinstance(value, cst.Call) and dotted_name(value.func) in ("torch.device", "device"):
        if not value.args or value.args[0].keyword is not None:
            return False
        value = value.args[0].value
    if isinstance(value, cst.SimpleString):
        text = value.evaluated_value
        return isinstance(text, str) and (text == "cuda" or text.startswith("cuda:"))
    if isinstance(value, cst.FormattedString) and value.parts:
        first = value.parts[0]
        return isinstance(first, cst.FormattedStringText) and first.value.startswith("cuda:")
    return False


def _module_cuda_or_cpu_devices(context: FileContext) -> frozenset[str]:
    """Module-level names bound once, at the module's top level, to a device picked between
    CUDA and the CPU alone (`face_restore_device = torch.device("cuda" if
    torch.cuda.is_available() else "cpu")`), in a module that names no other backend and
    rebinds none of them (`global`). Code on such a device runs on CUDA or on the CPU,
    never on another accelerator: on MPS or XPU this module's work goes to the CPU."""
    found = context.memo.get("devices.cuda_or_cpu_devices")
    if found is not None:
        return found
    names: dict[str, int] = {}
    picked: set[str] = set()
    if not _OTHER_BACKEND.search(context.source):
        for statement in context.module.body:
            for small in statement.body if isinstance(statement, cst.SimpleStatementLine) else ():
                targets = small.targets if isinstance(small, cst.Assign) else ()
                for target in targets:
                    for name in _names_bound_by_target(target.target):
                        names[name] = names.get(name, 0) + 1
                if (
                    isinstance(small, cst.Assign)
                    and len(targets) == 1
                    and isinstance(targets[0].target, cst.Name)
                    and CUDA_OR_CPU_PICK.search(context.code_for(small.value))
                ):
                    picked.add(targets[0].target.value)
    found = frozenset(
        name
        for name in picked
        if names.get(name) == 1
        and not re.search(rf"\bglobal\b[^\n]*\b{re.escape(name)}\b", context.source)
    )
    context.memo["devices.cuda_or_cpu_devices"] = found
    return found


def _names_bound_by_target(target: cst.BaseExpression) -> list[str]:
    names: list[str] = []
    walk(target, lambda n: names.append(n.value) if isinstance(n, cst.Name) else None,
         lambda _: None)  # fmt: skip
    return names


def _reads_module_cuda_or_cpu_device(context: FileContext, function: cst.FunctionDef) -> str | None:
    """The module-level CUDA-or-CPU device (`_module_cuda_or_cpu_devices`) the function's
    code uses without binding the name itself (`tensor.to(face_restore_device)`): its work
    is on that device, so its `torch.cuda` calls are right where they run. The name."""
    devices = _module_cuda_or_cpu_devices(context)
    if not devices:
        return None
    used: list[str] = []
    not_reads: set[int] = set()  # `self.device`, `f(device=...)`: an attribute, a keyword

    def enter(node: cst.CSTNode) -> None:
        if isinstance(node, cst.Attribute):
            not_reads.add(id(node.attr))
        elif isinstance(node, cst.Arg) and node.keyword is not None:
            not_reads.add(id(node.keyword))
        elif (
            isinstance(node, cst.Name)
            and node.value in devices
            and id(node) not in not_reads
            and not used
        ):
            used.append(node.value)

    walk(function.body, enter, lambda _: None)
    if not used or _bindings_of(function, used[0]):
        return None
    return used[0]


def _creates_nccl_group(node: cst.ClassDef) -> bool:
    """A method of the class creates a process group with the literal `backend="nccl"`
    outside any `if` (`create_custom_parallel_group(group_ranks=ranks, backend="nccl")` in
    its `build`): its collectives run on NCCL, which exists for CUDA (and as RCCL for ROCm,
    where `torch.cuda` is HIP) and nowhere else, so the class works only there. One under
    an `if` (`if backend_supports_cuda(): ... backend="nccl"`) is one branch of a class
    that serves other backends, and a pick (`"nccl" if is_cuda() else "hccl"`) is no
    literal: neither counts."""
    found: list[bool] = []

    def enter(child: cst.CSTNode) -> None:
        if (
            not found
            and isinstance(child, cst.Arg)
            and child.keyword is not None
            and child.keyword.value == "backend"
            and isinstance(child.value, cst.SimpleString)
            and child.value.evaluated_value == "nccl"
        ):
            found.append(True)

    for method in _class_body(node):
        if not isinstance(method, cst.FunctionDef):
            continue
        pending: list[cst.CSTNode] = list(_body_statements(method))
        while pending and not found:
            statement = pending.pop()
            if isinstance(statement, cst.SimpleStatementLine):
                walk(statement, enter, lambda _: None, _outside_nested_scopes)
            elif isinstance(statement, (cst.For, cst.While, cst.With, cst.Try)):
                pending.extend(_suite(statement.body))
    return bool(found)


def _raises_without_backend_library(context: FileContext, function: cst.FunctionDef) -> str | None:
    """A function that raises where a name only a CUDA-only or ROCm-only library binds is
    `None` (`if _is_hip: from aiter... import dynamic_mxfp4_quant` / `else:
    dynamic_mxfp4_quant = None`, then `if dynamic_mxfp4_quant is None: raise ...`): its
    work is for that library's backend and fails on every other."""
    imported = _backend_only_imports(context)
    if not imported:
        return None
    found: list[str] = []

    def enter(node: cst.CSTNode) -> None:
        if found or not isinstance(node, cst.If) or _how_body_exits(node.body) != "raise":
            return
        test = node.test
        if (
            isinstance(test, cst.Comparison)
            and isinstance(test.left, cst.Name)
            and test.left.value in imported
            and len(test.comparisons) == 1
            and isinstance(test.comparisons[0].operator, cst.Is)
            and isinstance(test.comparisons[0].comparator, cst.Name)
            and test.comparisons[0].comparator.value == "None"
        ):
            found.append(test.left.value)

    walk(function.body, enter, lambda _: None, _outside_nested_scopes)
    if not found:
        return None
    library, module = imported[found[0]]
    if library == SUBSYSTEM:
        return None
    backend = "ROCm" if library in ROCM_ONLY_LIBRARIES else "CUDA"
    return _bound_reason(backend, f"raises unless `{found[0]}` from `{module}` is loaded")


def _gated_by_cuda_validator(context: FileContext, function: cst.FunctionDef) -> str | None:
    """A kernel launcher whose module defines its own gate, `can_use_<name>()` (or
    `<name>_supported()`), that answers False unless the tensors are CUDA's (`if ... or not
    q.is_cuda or ...: return False`): callers launch it only where the gate passed."""
    name = function.name.value.lstrip("_")
    functions = _module_functions(context)
    for gate in (
        f"can_use_{name}",
        f"_can_use_{name}",
        f"{name}_supported",
        f"is_{name}_supported",
    ):
        found = functions.get(gate, [])
        if len(found) != 1:
            continue
        for statement in _body_statements(found[0]):
            if not isinstance(statement, cst.If) or _how_body_exits(statement.body) != "return":
                continue
            returns = [s for s in _suite(statement.body) if isinstance(s, cst.SimpleStatementLine)]
            if not any(
                isinstance(small, cst.Return)
                and isinstance(small.value, cst.Name)
                and small.value.value == "False"
                for line in returns
                for small in line.body
            ):
                continue
            test = _backend_when_false(statement.test, context)
            if test is not None and test.identity and test.backend == "CUDA":
                return f"a kernel launcher gated by `{gate}`, which requires CUDA tensors"
    return None


def _probes_cuda_capability(context: FileContext, function: cst.FunctionDef) -> str | None:
    """A function that reads the CUDA compute capability (`get_device_capability`) and
    only asks CUDA when `torch.cuda.is_available()`: an architecture probe for tuning
    that already has its own answer off CUDA."""
    text = context.code_for(function.body)
    if "get_device_capability(" in text and _AVAILABILITY.search(text):
        return "a CUDA capability probe with its own fallback"
    return None


# What a docstring says a function wraps: a CUDA-only kernel library or a CUDA kernel.
_CUDA_KERNEL_DOC = compile_lazily(
    _CUDA_ONLY_FUNCTION.pattern + r"|\bCUDA (extension|kernel)s?\b|\bCuTe\b", re.IGNORECASE
)


# The registrations that make a function one dispatch key's kernel of a custom op
# (`@torch.library.impl("ns::op", "CUDA")`, `@torch.library.register_kernel("ns::op",
# "cuda")`, `@op.register_kernel("cuda")`), and the device keys they may name.
_KERNEL_REGISTRATIONS = frozenset(["impl", "register_kernel"])
_DISPATCH_DEVICE_KEYS = frozenset(
    ["cuda", "cpu", "xpu", "mps", "npu", "hpu", "mtia", "meta", "privateuseone", "default"]
)


def _registered_cuda_kernel(function: cst.FunctionDef) -> str | None:
    """A function registered as a custom op's kernel for the CUDA dispatch key alone
    (`@torch.library.impl("ns::op", "CUDA")`): the dispatcher calls it only with CUDA
    tensors, so its device calls serve CUDA (another backend gets its own kernel, or none).
    Not where the registration names another device key too (`("cpu", "cuda")`), or a
    composite key (then it runs on every backend)."""
    for decorator in function.decorators:
        call = decorator.decorator
        if not isinstance(call, cst.Call):
            continue
        name = dotted_name(call.func) or ""
        if name.rsplit(".", 1)[-1] not in _KERNEL_REGISTRATIONS:
            continue
        keys: set[str] = set()
        for arg in call.args:
            values = (
                [element.value for element in arg.value.elements]
                if isinstance(arg.value, (cst.Tuple, cst.List))
                else [arg.value]
            )
            for value in values:
                if isinstance(value, cst.SimpleString):
                    keys.add(
                        value.evaluated_value.lower()
                        if isinstance(value.evaluated_value, str)
                        else ""
                    )
        named = {key for key in keys if key in _DISPATCH_DEVICE_KEYS or key.startswith("composite")}
        if named == {"cuda"}:
            return f'a custom op\'s kernel registered for CUDA alone (`@{name}(..., "CUDA")`)'
    return None


def _documented_cuda_kernel(function: cst.FunctionDef) -> str | None:
    """A function whose own docstring says it wraps a CUDA-only kernel ("Opaque wrapper
    around the CuTe-DSL kernel", "FlashInfer autotune"): its author's word."""
    docstring = function.get_docstring()
    match = _CUDA_KERNEL_DOC.search(docstring) if docstring else None
    if match is None:
        return None
    return f"a function documented as a CUDA-only kernel wrapper (`{match.group(0)}`)"


def _built_on_cuda_only_object(node: cst.ClassDef) -> str | None:
    """A class whose constructor takes a CUDA-only library object (`pynccl_comm`, a
    `flashinfer_workspace`, a `cutlass_plan`): every method works on that object."""
    for statement in node.body.body if isinstance(node.body, cst.IndentedBlock) else ():
        if isinstance(statement, cst.FunctionDef) and statement.name.value == "__init__":
            params = statement.params
            for param in [*params.posonly_params, *params.params, *params.kwonly_params]:
                name = param.name.value
                # Not a bare `nccl_*` (`nccl_port` names a rendezvous that HCCL uses too).
                if _CUDA_ONLY_FUNCTION.search(name) or name.startswith("pynccl"):
                    return f"a class built on a CUDA-only object (`{name}`)"
    return None


def _body_statements(node: cst.FunctionDef | cst.For | cst.While) -> Sequence[cst.CSTNode]:
    body = node.body
    return body.body if isinstance(body, cst.IndentedBlock) else ()


def _is_cuda_skip_guard(context: FileContext, statement: cst.If) -> bool:
    test = context.code_for(statement.test)
    body = context.code_for(statement.body)
    if _CUDA_IDENTITY_EXIT.search(test) and " and " not in test:
        # `if x.device.type != "cuda": return ...`, `if ... or not platform.is_cuda(): return`,
        # `if ... or torch.version.cuda is None: return False` (a CUDA build): past it the
        # device *is* CUDA (a tensor's, the platform's, the build's), so even an early
        # `return` leaves CUDA-only code behind, unlike a bare availability test.
        return bool(_EARLY_EXIT.search(body) or re.search(r"\breturn\b", body))
    if test.lstrip().startswith("not") and re.search(
        r"\braise\b[^\n]*\n?[^\n]*\b(CUDA|Blackwell|Hopper|NVIDIA)\b", body
    ):
        # `if not can_use_kernel(q): raise ValueError("Expected contiguous CUDA ...")`.
        return True
    negated = test.lstrip().startswith("not") and "cuda" in test
    if not (negated or re.search(r"!=\s*[\"']cuda", test)):
        return False
    return bool(_EARLY_EXIT.search(body))


# A test that fails unless the device in hand is CUDA (not merely available).
_CUDA_IDENTITY_EXIT = compile_lazily(
    r"\bnot\s+[\w.]*\bis_cuda\b|\.type\s*!=\s*[\"']cuda[\"']|version\.cuda\s+is\s+None\b"
)


def _layout_path(context: FileContext) -> str:
    """The file's path from its project's root (`project.project_relative_path`), or from
    the settings' folder for a loose file: what folder- and file-name facts read."""
    path = context.memo.get("devices.layout_path")
    if path is None:
        path = project_relative_path(context.path) or context.settings.relative(context.path)
        context.memo["devices.layout_path"] = path
    return path


def _module_binding(context: FileContext, module: cst.Module) -> str | None:
    relative = _layout_path(context)
    name = relative.rsplit("/", 1)[-1]
    if _CUDA_MODULE_NAME.search(name.rsplit(".", 1)[0]):
        return f"a CUDA-only module (`{name}`)"
    if _CUDA_SUBSYSTEM_MODULE.search(name.rsplit(".", 1)[0]):
        # `device_allocator/cumem.py`, `kv_vmm.py`: named for a memory subsystem only CUDA has.
        return f"a module of a CUDA-only memory subsystem (`{name}`)"
    for part in relative.split("/"):
        if _CUDA_ONLY_NAME.search(part.rsplit(".", 1)[0] if part == name else part):
            return f"a CUDA-only kernel module (`{part}`)"
    for part in relative.split("/")[:-1]:
        if _cuda_package_folder(part):
            return f"a module of a CUDA-only package (in `{part}/`)"
    if _ROCM.search(name.rsplit(".", 1)[0]):
        return f"a ROCm-only module (`{name}`), where torch.cuda is right"
    for part in relative.split("/")[:-1]:
        if _ROCM.search(part):  # `kernels/ops/attention/vattn_asm_gfx950/__init__.py`
            return f"a ROCm-only module (in `{part}/`), where torch.cuda is right"
    source = _compiled_cuda_source(context)
    if source:
        return f"a module that builds CUDA kernel sources (`{source}`)"
    for statement in module.body:
        if isinstance(statement, cst.If):
            backend = _exit_guard(context, statement, raise_only=True)
            if backend:
                return f"a {backend}-only module (raises at import without {backend})"
            if dotted_name(statement.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
                # The module's own types come from a ROCm-only library (`import mori`).
                for line in _suite(statement.body):
                    for small in line.body if isinstance(line, cst.SimpleStatementLine) else ():
                        if _imported_root(small) in ROCM_ONLY_LIBRARIES:
                            root = _imported_root(small)
                            return f"a ROCm-only module (types from `{root}`), where torch.cuda is right"
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if _imported_root(small) in ROCM_ONLY_LIBRARIES:
                root = _imported_root(small)
                return f"a ROCm-only module (imports `{root}`), where torch.cuda is right"
            if isinstance(small, cst.Assign) and _keyed_by_cuda_devices(small.value):
                return "a module whose device tables are keyed `cuda:N`"
            root = _imported_root(small)
            if root in CUDA_ONLY_LIBRARIES:
                return f"a CUDA-only kernel module (imports `{root}`)"
            primitive = _torch_cuda_primitive(small)
            if primitive:
                return f"a module built on CUDA IPC or CUDA's allocator (imports `{primitive}`)"
            if (
                isinstance(small, cst.Assign)
                and any(
                    isinstance(t.target, cst.Name) and t.target.value == "pytestmark"
                    for t in small.targets
                )
                and _CUDA_SKIP.search(context.code_for(small.value))
            ):
                return "a test module skipped without CUDA (`pytestmark`)"
    if _registers_cuda_only_ops(context, module):
        return 'a module of custom ops registered for CUDA only (`device_types="cuda"`)'
    # Read from the package's other files: the cache keys the file by this fact's reason
    # (`cache.Cache.key`) and the stat index by what it read (`project.cuda_package_stamp`).
    return cuda_package(context.path).reason


# torch's CUDA-only primitives a module may build on: CUDA IPC (`rebuild_cuda_tensor` maps
# another process's CUDA allocation) and CUDA's pluggable allocator and memory pools.
_TORCH_CUDA_PRIMITIVES = {
    "torch.multiprocessing.reductions": frozenset({"rebuild_cuda_tensor"}),
    "torch.cuda": frozenset({"CUDAPluggableAllocator", "MemPool", "use_mem_pool"}),
    "torch.cuda.memory": frozenset({"CUDAPluggableAllocator", "MemPool", "use_mem_pool"}),
}


def _torch_cuda_primitive(small: cst.BaseSmallStatement) -> str | None:
    """The CUDA-only torch primitive a top-level `from torch... import ...` names, or None."""
    names = _TORCH_CUDA_PRIMITIVES.get(_imported_module(small) or "")
    if (
        not names
        or not isinstance(small, cst.ImportFrom)
        or isinstance(small.names, cst.ImportStar)
    ):
        return None
    for alias in small.names:
        if isinstance(alias.name, cst.Name) and alias.name.value in names:
            return alias.name.value
    return None


# A custom op's registration that names its device types (`@torch.library.custom_op(
# "ns::gemm", mutates_args=(), device_types="cuda")`), and one that names CUDA only.
_OP_DEVICE_TYPES = compile_lazily(r"\bdevice_types\s*=")
_CUDA_ONLY_OP_DEVICE_TYPES = compile_lazily(
    r"""\bdevice_types\s*=\s*(?:["']cuda["']\s*[,)]|[(\[]\s*["']cuda["']\s*,?\s*[)\]])"""
)


def _registers_cuda_only_ops(context: FileContext, module: cst.Module) -> bool:
    """The module's top-level functions include custom ops registered for CUDA only, and
    none registered for another device type: its kernels exist on CUDA alone (exllamav3's
    ops in vLLM-style engines), so the module's device calls serve those kernels."""
    if "device_types" not in context.source:
        return False
    found = False
    for statement in module.body:
        if not isinstance(statement, cst.FunctionDef):
            continue
        for decorator in statement.decorators:
            text = context.code_for(decorator.decorator)
            if not _OP_DEVICE_TYPES.search(text):
                continue
            if not _CUDA_ONLY_OP_DEVICE_TYPES.search(text):
                return False
            found = True
    return found


# Folders that hold one backend's or one CUDA library's code: a `cuda/` package beside its
# `mps/`, `hip/` and `cpp/` siblings (quanto's `library/extensions/cuda/`), or a (vendored)
# copy of a CUDA-only kernel library (`flash_attn/`, vLLM's `vllm_flash_attn/`).
_CUDA_PACKAGE_LIBRARIES = frozenset({"flash_attn", "cupy", "pycuda", "transformer_engine"})


def _cuda_package_folder(part: str) -> bool:
    name = part.lower()
    return name == "cuda" or any(
        name == library or name.endswith("_" + library) for library in _CUDA_PACKAGE_LIBRARIES
    )


# A CUDA source file named in the module's code (`cuda_files=["gemm/tiny_gemm.cuh"]`,
# `_cuda_source("diffusion/residual_gate_add.cuh")`, `load(sources=["ops.cu"])`), or an
# inline CUDA build (`load_inline(..., cuda_sources=...)`): the module JIT-compiles CUDA
# kernels, which run where `torch.cuda` is the device API (CUDA, or ROCm through hipify).
_CUDA_SOURCE_FILE = compile_lazily(r"""["']([\w./-]*\w\.cuh?)["']""")
_INLINE_CUDA_BUILD = compile_lazily(r"""\bcuda_sources\s*=|\bload_inline\(""")


def _compiled_cuda_source(context: FileContext) -> str | None:
    """The CUDA source the module's code builds, or None. Only string literals in calls
    count (not docstrings or comments that mention a `.cu` file)."""
    if ".cu" not in context.source and "cuda_sources" not in context.source:
        return None
    # Each call's text is a piece of the module's text: none can match where the whole
    # text does not (`torch.cuda` holds ".cu"; this spares a code generation per call).
    text = context.parsed_text
    if not (_CUDA_SOURCE_FILE.search(text) or _INLINE_CUDA_BUILD.search(text)):
        return None
    found: list[str] = []

    def enter(node: cst.CSTNode) -> None:
        if found or not isinstance(node, cst.Call):
            return
        text = context.code_for(node)
        if _INLINE_CUDA_BUILD.search(text):
            found.append("an inline CUDA build")
            return
        for arg in node.args:
            match = _CUDA_SOURCE_FILE.search(context.code_for(arg.value))
            if match:
                found.append(match.group(1))
                return

    walk(context.module, enter, lambda _: None)
    return found[0] if found else None


# A class that loads or imports the CUDA driver or runtime itself (`ctypes.CDLL(
# "libcuda.so.1")`, `from cuda.bindings import driver`): its streams, mappings and handles
# are CUDA's. (Per class: a utility module may use the driver in one helper only.)
_CUDA_DRIVER = compile_lazily(r"libcuda(rt)?\.so|\bcuda\.bindings\b")
# A raw CUDA stream handle handed on (`torch.cuda.current_stream(dev).cuda_stream`).
_RAW_CUDA_STREAM = compile_lazily(r"\.cuda_stream\b")


def _keyed_by_cuda_devices(value: cst.BaseExpression) -> bool:
    """A dict literal of two or more entries whose keys are all `"cuda:N"` (a NIC or NUMA
    affinity table per CUDA device): the module addresses CUDA devices by name."""
    if not isinstance(value, cst.Dict) or len(value.elements) < 2:
        return False
    return all(
        isinstance(element, cst.DictElement)
        and isinstance(element.key, cst.SimpleString)
        and isinstance(element.key.evaluated_value, str)
        and re.fullmatch(r"cuda:\d+", element.key.evaluated_value) is not None
        for element in value.elements
    )


def _imported_module(small: cst.BaseSmallStatement) -> str | None:
    """The module an absolute `from m import ...` names."""
    if isinstance(small, cst.ImportFrom) and not small.relative and small.module is not None:
        return dotted_name(small.module)
    return None


def _imported_root(small: cst.BaseSmallStatement) -> str | None:
    if isinstance(small, cst.Import):
        for alias in small.names:
            name = dotted_name(alias.name)
            if name:
                return name.split(".")[0]
    if isinstance(small, cst.ImportFrom) and not small.relative and small.module is not None:
        name = dotted_name(small.module)
        if name:
            return name.split(".")[0]
    return None


# -- what a condition says about the backend ----------------------------------------------

# A flag or platform probe named for one backend (`_is_hip`, `is_hip()`, `is_cuda()`,
# `current_platform.is_rocm()`, `IS_CUDA`): true only on that backend. Availability
# (`torch.cuda.is_available()`) is weaker: other accelerators may still be there.
_BACKEND_FLAG = compile_lazily(r"^_*is_(cuda|hip|rocm)(_alike|_runtime|_platform)?$", re.IGNORECASE)
# A flag or probe for an AMD GPU architecture (`is_gfx95_supported()`, `_is_gfx950`,
# `is_gfx942`, a `gfx950` parameter): true only on ROCm, where `torch.cuda` is HIP.
_ROCM_ARCH_FLAG = compile_lazily(r"^_*(is_)?gfx\d+\w*$", re.IGNORECASE)
# Libraries that exist only for AMD GPUs: code that needs one runs on ROCm, where
# `torch.cuda` is HIP and right.
# (`mori`: ROCm's MoE dispatch/combine and RDMA library.)
ROCM_ONLY_LIBRARIES = frozenset({"aiter", "amdsmi", "pyrsmi", "rocm_smi", "hip", "mori"})
# A predicate on NVIDIA architectures (`_blackwell_or_newer(dev)`, `is_sm100_supported()`).
_ARCH_PREDICATE = compile_lazily(
    r"(?<![A-Za-z0-9])(blackwell|hopper|ampere|sm\d{2,3})(?![A-Za-z])", re.IGNORECASE
)


@dataclass(frozen=True)
class BackendTest:
    """What a condition being true (or false) says: the code runs on `backend`; `identity`
    when it tests the device or platform itself, not only that CUDA is available."""

    backend: str  # "CUDA" or "ROCm"
    identity: bool


def _backend_when_true(
    expression: cst.BaseExpression,
    context: FileContext | None = None,
    outer: Sequence[cst.CSTNode] = (),
) -> BackendTest | None:
    """The backend `expression` being true proves (`x.is_cuda`, `dev.type == "cuda"`,
    `device.startswith("cuda")`, `is_hip()`, `is_gfx95_supported()`, `not a or b.is_cuda`
    does not, `a and b.is_cuda` does). `outer`: the enclosing nodes, so `self._check()`
    finds the method of the enclosing class."""
    if isinstance(expression, cst.BooleanOperation):
        left = _backend_when_true(expression.left, context, outer)
        right = _backend_when_true(expression.right, context, outer)
        if isinstance(expression.operator, cst.And):
            return _stronger(left, right)
        if left and right:  # `is_cuda() or is_hip()`: torch.cuda is right on either
            return BackendTest("CUDA", left.identity and right.identity)
        return None
    if isinstance(expression, cst.Attribute) and expression.attr.value == "is_cuda":
        return BackendTest("CUDA", True)
    if isinstance(expression, cst.Name):
        return _flag_backend(expression.value)
    if isinstance(expression, cst.Call):
        dotted = dotted_name(expression.func) or ""
        if _ARCH_PREDICATE.search(dotted.rpartition(".")[2]):
            return BackendTest("CUDA", True)  # `_blackwell_or_newer(device)`, `is_sm90()`
        if not expression.args:
            if dotted.endswith("cuda.is_available"):
                return BackendTest("CUDA", False)
            flag = _flag_backend(dotted.rpartition(".")[2])
            if flag is not None:
                return flag
        elif dotted.endswith(".startswith") and _names_cuda(expression.args[0].value):
            return BackendTest("CUDA", True)
        if context is not None:  # `_is_bf16_cuda(x)`, `self._offload_enabled()`
            predicate = _same_module_function(context, expression.func, outer)
            backend = _predicate_backend(context, predicate) if predicate else None
            return BackendTest(backend, True) if backend else None
        return None
    if isinstance(expression, cst.Comparison) and len(expression.comparisons) == 1:
        target = expression.comparisons[0]
        if isinstance(target.operator, cst.Equal) and (
            _names_cuda(target.comparator) or _names_cuda(expression.left)
        ):
            return BackendTest("CUDA", True)
        if isinstance(target.operator, cst.In) and _names_cuda(expression.left):
            return BackendTest("CUDA", True)
        if isinstance(target.operator, cst.In):
            return _backend_of_names(target.comparator)  # `DEVICE_TYPE in ("cuda", "hip")`
        if (
            context is not None
            and isinstance(target.operator, cst.IsNot)
            and isinstance(target.comparator, cst.Name)
            and target.comparator.value == "None"
            and isinstance(expression.left, cst.Name)
            and _local_none_unless_cuda(context, expression.left.value, False, outer)
        ):
            # `free is not None`, where `free = _free_bytes(dev)` is None unless CUDA's
            # `mem_get_info` answered
            return BackendTest("CUDA", True)
    return None


_ROCM_NAME = frozenset({"hip", "rocm"})


def _backend_of_names(expression: cst.BaseExpression) -> BackendTest | None:
    """A tuple, list or set of device-type literals that are all CUDA's or ROCm's (`("cuda",
    "hip")`): a value in it is on a backend where `torch.cuda` is right."""
    if not isinstance(expression, (cst.Tuple, cst.List, cst.Set)) or not expression.elements:
        return None
    names = []
    for element in expression.elements:
        value = element.value
        if _names_cuda(value):
            names.append("cuda")
        elif isinstance(value, cst.SimpleString) and value.evaluated_value in _ROCM_NAME:
            names.append("rocm")
        else:
            return None
    return BackendTest("CUDA" if "cuda" in names else "ROCm", True)


def _backend_when_false(
    expression: cst.BaseExpression,
    context: FileContext | None = None,
    outer: Sequence[cst.CSTNode] = (),
) -> BackendTest | None:
    """The backend `expression` being false proves (`not x.is_cuda`, `dev.type !=
    "cuda"`, `not (is_cuda() and x.is_contiguous())`, `a or not _is_hip`)."""
    if isinstance(expression, cst.UnaryOperation) and isinstance(expression.operator, cst.Not):
        return _backend_when_true(expression.expression, context, outer)
    if isinstance(expression, cst.BooleanOperation) and isinstance(expression.operator, cst.Or):
        return _stronger(
            _backend_when_false(expression.left, context, outer),
            _backend_when_false(expression.right, context, outer),
        )
    if isinstance(expression, cst.Comparison) and len(expression.comparisons) == 1:
        target = expression.comparisons[0]
        if isinstance(target.operator, cst.NotEqual) and (
            _names_cuda(target.comparator) or _names_cuda(expression.left)
        ):
            return BackendTest("CUDA", True)
        if isinstance(target.operator, cst.NotIn):
            return _backend_of_names(target.comparator)  # `DEVICE_TYPE not in ("cuda", "hip")`
    return None


def _stronger(first: BackendTest | None, second: BackendTest | None) -> BackendTest | None:
    if first is None or (second is not None and second.identity and not first.identity):
        return second
    return first


def _flag_backend(name: str) -> BackendTest | None:
    if _ROCM_ARCH_FLAG.match(name):
        return BackendTest("ROCm", True)
    match = _BACKEND_FLAG.match(name)
    if match is None:
        return None
    return BackendTest("CUDA" if match.group(1).lower() == "cuda" else "ROCm", True)


def _names_cuda(expression: cst.BaseExpression) -> bool:
    """A string literal `"cuda"` or `"cuda:N"`."""
    if isinstance(expression, cst.SimpleString):
        value = expression.evaluated_value
        return isinstance(value, str) and (value == "cuda" or value.startswith("cuda:"))
    return False


def _exit_guard(
    context: FileContext, statement: cst.If, raise_only: bool, continues: bool = False
) -> str | None:
    """The backend past `statement`, when it is `if <not that backend>: raise` (or skip; or
    `return` when it tests the device itself and `raise_only` is False) with no `else`.
    `continues`: the code in question follows the `if` in the same loop body, so a
    `continue` also leaves it (`for p in params: if p.device.type != "cuda": continue`)."""
    if statement.orelse is not None:
        return None
    test = _backend_when_false(statement.test, context)
    if test is None:
        return None
    exits = _how_body_exits(statement.body, loop=continues)
    if exits == "raise" or (exits in ("return", "continue") and test.identity and not raise_only):
        return test.backend
    return None


_SKIP_CALL = compile_lazily(r"(^|\.)(skip|skipTest)$")


def _how_body_exits(body: cst.BaseSuite, loop: bool = False) -> str | None:
    """How the block always leaves: "raise" (also a test skip), "return", or None; with
    `loop`, also "continue" (it leaves the rest of the loop body)."""
    statements = body.body if isinstance(body, cst.IndentedBlock) else [body]
    for statement in statements:
        smalls = statement.body if isinstance(statement, cst.SimpleStatementLine) else ()
        if isinstance(statement, cst.SimpleStatementSuite):
            smalls = statement.body
        for small in smalls:
            if isinstance(small, cst.Raise):
                return "raise"
            if isinstance(small, cst.Return):
                return "return"
            if loop and isinstance(small, cst.Continue):
                return "continue"
            if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
                if _SKIP_CALL.search(dotted_name(small.value.func) or ""):
                    return "raise"
    return None


def _past_cuda_exit(
    context: FileContext,
    block: cst.IndentedBlock,
    child: cst.CSTNode,
    outer: Sequence[cst.CSTNode],
) -> str | None:
    """Why the code from `child` on is bound to one backend by a statement before it in
    `block`: `if dev.type != "cuda": raise ...`, `if not _is_hip: return`, or a call of a
    same-module validator that raises off CUDA (`_validate(x)`, whose body is `if not
    x.is_cuda: raise ...`)."""
    for statement in block.body:
        if statement is child:
            return None
        if isinstance(statement, cst.If):
            backend = _exit_guard(context, statement, raise_only=False, continues=True)
            if backend:
                return _bound_reason(backend, f"past `{_header(context, statement)}`")
            if _exits_unless_rocm_probe(context, statement):
                return _bound_reason("ROCm", f"past `{_header(context, statement)}`")
            local = _exits_unless_cuda_value(context, statement, outer)
            if local:
                return (
                    f"CUDA-only code (past `{_header(context, statement)}`: `{local}` is "
                    "false or None unless the device is CUDA)"
                )
            filled = _exits_unless_filled_on_cuda(context, statement, outer)
            if filled:
                return (
                    f"CUDA-only code (past `{_header(context, statement)}`: {filled} filled "
                    "only under a test that proves CUDA)"
                )
            if _answers_without_cuda(context, statement, outer):
                return f"{OWN_FALLBACK} (past `{_header(context, statement)}`)"
            library = _exits_unless_library_flag(context, statement)
            if library:
                return _bound_reason(
                    "CUDA",
                    f"past `{_header(context, statement)}`, a flag set only once `{library}` loaded",
                )
        elif isinstance(statement, cst.Try):
            reason = _past_try_only_through_guarded_handler(context, statement, outer)
            if reason:
                return reason
        elif isinstance(statement, (cst.For, cst.While)):
            # `for video in videos: if video.device.type != "cuda": return None`: past the
            # loop every item it checked is on CUDA (or the function has returned).
            for inner in _body_statements(statement):
                if isinstance(inner, cst.If):
                    backend = _exit_guard(context, inner, raise_only=False)
                    if backend:
                        return _bound_reason(
                            backend, f"past a loop that exits unless each item is on {backend}"
                        )
        elif isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Assert):
                    backend = _asserted_backend(context, small.test, outer)
                    if backend:
                        return _bound_reason(backend, "past an assertion that it is")
                    continue
                value = small.value if isinstance(small, (cst.Expr, cst.Assign)) else None
                if isinstance(value, cst.Call):
                    validator = _same_module_function(context, value.func, outer)
                    backend = _raises_off_backend(context, validator) if validator else None
                    if validator is not None and backend:
                        return _bound_reason(
                            backend, f"past `{validator.name.value}()`, which raises without it"
                        )
                    imported = _imported_validator_backend(context, value.func, outer)
                    if imported:
                        backend, name, module = imported
                        return _bound_reason(
                            backend,
                            f"past `{name}()` from `{module}`, which raises without it",
                        )
    return None


def _exits_unless_filled_on_cuda(
    context: FileContext, statement: cst.If, outer: Sequence[cst.CSTNode]
) -> str | None:
    """`if not states and not grads: return None` (no `else`), where every local tested is
    a list the function creates empty and fills only under a test that proves CUDA (`if
    _is_parkable_tensor(value): states.append(...)`, whose `return ... and value.is_cuda`):
    past the exit some item came from CUDA tensors, so the code runs where CUDA is. The
    locals' names, quoted, or None."""
    if statement.orelse is not None or _how_body_exits(statement.body) is None:
        return None
    names: list[str] = []
    tests: list[cst.BaseExpression] = [statement.test]
    while tests:
        test = tests.pop()
        if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
            tests += [test.left, test.right]
        elif (
            isinstance(test, cst.UnaryOperation)
            and isinstance(test.operator, cst.Not)
            and isinstance(test.expression, cst.Name)
        ):
            names.append(test.expression.value)
        else:
            return None  # `if not states and retry:`: the exit needs more than empty lists
    function = next((n for n in reversed(outer) if isinstance(n, cst.FunctionDef)), None)
    if not names or function is None:
        return None
    for name in names:
        if not _filled_only_on_cuda(context, function, name, outer):
            return None
    return ", ".join(f"`{name}`" for name in reversed(names))


_FILLING_METHODS = frozenset({"append", "extend", "insert"})


def _filled_only_on_cuda(
    context: FileContext, function: cst.FunctionDef, name: str, outer: Sequence[cst.CSTNode]
) -> bool:
    """`name` is bound once in `function`, to an empty list (`[]`), and every other use of
    it is a read (a test, `len(...)`, a loop over it, a `return`) or an `append`/`extend`/
    `insert` under an `if` whose test proves CUDA: the list has items only on CUDA. Any
    other use (handed to a call, stored, indexed) might fill it elsewhere."""
    bindings = _bindings_of(function, name)
    if len(bindings) != 1:
        return False
    value = bindings[0][0]
    if not (isinstance(value, cst.List) and not value.elements):
        return False
    target = bindings[0][1][-1]
    ok = [True]
    stack: list[cst.CSTNode] = []

    def enter(node: cst.CSTNode) -> None:
        stack.append(node)
        if not ok[0] or not isinstance(node, cst.Name) or node.value != name:
            return
        parent = stack[-2] if len(stack) > 1 else None
        grandparent = stack[-3] if len(stack) > 2 else None
        if isinstance(parent, cst.AssignTarget) and stack[-3] is target:
            return  # the binding itself
        if isinstance(parent, cst.Attribute) and node is parent.value:
            if (
                parent.attr.value in _FILLING_METHODS
                and isinstance(grandparent, cst.Call)
                and grandparent.func is parent
                and _under_cuda_test(context, tuple(stack), outer)
            ):
                return
            ok[0] = False
            return
        if isinstance(parent, cst.Attribute):
            return  # `x.states`: another name
        if isinstance(parent, (cst.UnaryOperation, cst.BooleanOperation)) or (
            isinstance(parent, (cst.If, cst.While)) and node is parent.test
        ):
            return
        if isinstance(parent, cst.For) and node is parent.iter:
            return
        if isinstance(parent, cst.Arg) and isinstance(grandparent, cst.Call):
            if dotted_name(grandparent.func) == "len":
                return
        if any(isinstance(n, cst.Return) for n in stack):
            return  # handed back as the function ends
        ok[0] = False

    walk(function.body, enter, lambda _: stack.pop())
    return ok[0]


# Stands for "no statement of the block": `_past_cuda_exit` then reads the whole block.
_WHOLE_BLOCK = cst.Pass()


def _past_try_only_through_guarded_handler(
    context: FileContext, statement: cst.Try, outer: Sequence[cst.CSTNode]
) -> str | None:
    """Why the code after `statement` is bound to one backend, when the `try` body always
    leaves (`return load(**kwargs)`) and every handler that does not itself leave goes on
    only past an exit guard of that backend (`except ValueError: if not spilled or not
    torch.cuda.is_available(): raise`): the code after the `try` runs only through such a
    handler, so only where that backend is. (The `else` block never runs after a body that
    returns or raises; a `finally` block does not change where control goes next.)"""
    if _how_body_exits(statement.body) is None:
        return None
    reasons = []
    for handler in statement.handlers:
        if _how_body_exits(handler.body) is not None:
            continue  # this handler never reaches the code after the `try`
        if not isinstance(handler.body, cst.IndentedBlock):
            return None
        reason = _past_cuda_exit(context, handler.body, _WHOLE_BLOCK, outer)
        if reason is None:
            return None
        reasons.append(reason)
    if not reasons:
        return None
    return f"{reasons[0]}, in the `except` handler that is the only way past the `try`"


def _imported_validator_backend(
    context: FileContext, func: cst.BaseExpression, outer: Sequence[cst.CSTNode]
) -> tuple[str, str, str] | None:
    """(backend, name, module) when `func` names a function the module imports at top
    level from a module beside it (`from .rope import _validate_rope`, or the same
    module by its absolute name) whose own top-level code raises without that backend
    (`if not (x.is_cuda and torch.version.hip is None and ...): raise ...`). Kernel
    packages keep one validator per kernel family in one module and call it from each
    launcher module: past the call the tensors are CUDA's, as with a same-module
    validator. Only a module of the same folder is read (its stat is in the package
    stamp and its text in the cache key: `project.sibling_imports_digest`), and only
    where the name is not shadowed by a local binding."""
    if not isinstance(func, cst.Name) or _module_functions(context).get(func.value):
        return None
    binding = _top_level_from_imports(context).get(func.value)
    if binding is None:
        return None
    module, original = binding
    table = scope_table(context)
    owner, bindings = table.bindings_of(func.value, table.scope_at(outer))
    if owner is not table.module_scope or any(
        b.kind not in (IMPORT, "relative import") for b in bindings
    ):
        return None
    path = sibling_module_file(context.path, module)
    if path is None:
        return None
    found = _sibling_module_context(context, path)
    if found is None:
        return None
    functions = [
        s for s in found.module.body if isinstance(s, cst.FunctionDef) and s.name.value == original
    ]
    if len(functions) != 1:
        return None
    backend = _raises_off_backend(found, functions[0])
    return (backend, func.value, module) if backend else None


def _top_level_from_imports(context: FileContext) -> dict[str, tuple[str, str]]:
    """Local name -> (module as written, imported name) of the module's top-level `from
    ... import` statements (`from .rope import _check as check`: "check" -> (".rope",
    "_check"))."""
    found = context.memo.get("devices.top_level_from_imports")
    if found is not None:
        return found
    found = context.memo["devices.top_level_from_imports"] = {}
    for statement in context.module.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if not isinstance(small, cst.ImportFrom) or isinstance(small.names, cst.ImportStar):
                continue
            module = "." * len(small.relative) + (
                dotted_name(small.module) or "" if small.module is not None else ""
            )
            for alias in small.names:
                if not isinstance(alias.name, cst.Name):
                    continue
                local = alias.name.value
                if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                    local = alias.asname.name.value
                found[local] = (module, alias.name.value)
    return found


def _sibling_module_context(context: FileContext, path: str) -> FileContext | None:
    """A context for the module at `path` (parsed once per process and text; None:
    unreadable or unparsable), with the settings of the module reading it."""
    text = read_text(path)
    if text is None:
        return None
    key = (path, text)
    if key in _SIBLING_CONTEXTS:
        return _SIBLING_CONTEXTS[key]
    try:
        module = cst.parse_module(text)
    except Exception:  # a module LibCST cannot parse: no fact
        found = None
    else:
        found = FileContext(path, text, module, module.default_newline, context.settings)
    if len(_SIBLING_CONTEXTS) >= 64:
        _SIBLING_CONTEXTS.pop(next(iter(_SIBLING_CONTEXTS)))
    _SIBLING_CONTEXTS[key] = found
    return found


# (path, text) -> the parsed sibling module's context; bounded, oldest dropped first.
_SIBLING_CONTEXTS: dict[tuple[str, str], FileContext | None] = {}


def _exits_unless_rocm_probe(context: FileContext, statement: cst.If) -> bool:
    """`if not hasattr(amd_knobs, "use_async_copy"): return False`, `if not
    is_hip_runtime(): raise ...`, `if rocm_info is None: return`: an early exit (no
    `else`) unless a probe named for ROCm, HIP or AMD holds or exists. Past it the code
    runs on ROCm only, where `torch.cuda` is HIP and right."""
    if statement.orelse is not None or _how_body_exits(statement.body) is None:
        return False
    return _fails_unless_rocm_probe(context, statement.test)


def _fails_unless_rocm_probe(context: FileContext, test: cst.BaseExpression) -> bool:
    """`test` is true whenever a ROCm-named probe is false or None (`not probe`, `probe is
    None`, or either side of an `or`)."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.Or):
        return _fails_unless_rocm_probe(context, test.left) or _fails_unless_rocm_probe(
            context, test.right
        )
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        probe = test.expression
        if isinstance(probe, cst.BooleanOperation) and isinstance(probe.operator, cst.Or):
            return False  # `not (a or rocm)`: past it either may hold
    elif (
        isinstance(test, cst.Comparison)
        and len(test.comparisons) == 1
        and isinstance(test.comparisons[0].operator, cst.Is)
        and isinstance(test.comparisons[0].comparator, cst.Name)
        and test.comparisons[0].comparator.value == "None"
    ):
        probe = test.left
    else:
        return False
    return _ROCM.search(context.code_for(probe)) is not None


def _none_unless_cuda(
    context: FileContext, test: cst.BaseExpression, outer: Sequence[cst.CSTNode]
) -> str | None:
    """`if ptr_fn is not None:` (or `if ptr_fn:`) where every binding of the local is
    `None`, `... if <the device is CUDA> else None`, or an assignment under `if <the device
    is CUDA>:` (`cuda_device = None; if kwargs.get("device") == "cuda": cuda_device =
    torch.cuda.current_device()`, also read from a nested function); for `if flag:` also
    `False`, or a test true only on CUDA (`flag = self._offload_enabled()`, whose return
    is `... and self.device.type == "cuda"`): the branch runs on CUDA only. The local's
    name, or None."""
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        target = test.comparisons[0]
        if not (
            isinstance(target.operator, cst.IsNot)
            and isinstance(target.comparator, cst.Name)
            and target.comparator.value == "None"
        ):
            return None
        test = test.left
        truthiness = False
    else:
        truthiness = True  # `if flag:`: a `False` binding skips the branch as `None` does
    if not isinstance(test, cst.Name):
        return None
    return _local_none_unless_cuda(context, test.value, truthiness, outer)


def _local_none_unless_cuda(
    context: FileContext, name: str, truthiness: bool, outer: Sequence[cst.CSTNode]
) -> str | None:
    """`name` when every binding of the local in the enclosing functions is None (or False,
    with `truthiness`) or a CUDA-only value (see `_none_unless_cuda`)."""
    functions = [n for n in outer if isinstance(n, cst.FunctionDef)]
    key = (name, truthiness, id(functions[-1]) if functions else 0)
    pending = context.memo.setdefault("devices.local_none_pending", set())
    if key in pending:
        return None  # a binding that depends on itself proves nothing
    pending.add(key)
    try:
        return _local_none_unless_cuda_in(context, name, truthiness, outer, functions)
    finally:
        pending.discard(key)


def _local_none_unless_cuda_in(
    context: FileContext,
    name: str,
    truthiness: bool,
    outer: Sequence[cst.CSTNode],
    functions: list[cst.FunctionDef],
) -> str | None:
    skipped = ("None", "False") if truthiness else ("None",)
    for function in reversed(functions):
        bindings = _bindings_of(function, name)
        if not bindings:
            continue  # a free variable here: the enclosing function binds it
        cuda_values = 0
        for value, chain in bindings:
            if isinstance(value, cst.Name) and value.value in skipped:
                continue
            if (
                _cuda_value_else_none(context, value, outer)
                # `offload = self._offload_enabled()`, whose `return ... and
                # self.device.type == "cuda"` is false off CUDA
                or (truthiness and value is not None and _proves_cuda(context, value, outer))
                or _under_cuda_test(context, chain, outer)
                # `dev = resident_cuda_device(module)`, None unless the weights are on CUDA
                or (
                    isinstance(value, cst.Call) and _returns_none_unless_cuda(context, value, outer)
                )
            ):
                cuda_values += 1
                continue
            return None
        return name if cuda_values else None
    return None


# A function named for the CUDA devices it returns (`resident_cuda_device`,
# `resolve_selected_cuda_ordinals`): tested against None, its answer is None off CUDA.
_CUDA_DEVICE_GETTER = compile_lazily(
    r"(?:^|_)cuda_(device|devices|ordinal|ordinals|index|card|cards)$", re.IGNORECASE
)


def _returns_none_unless_cuda(
    context: FileContext, call: cst.Call, outer: Sequence[cst.CSTNode]
) -> bool:
    """A call of a function that answers None unless the device is CUDA: one named for
    the CUDA devices it returns, or a same-module one whose every `return` gives None or
    `... if <the device is CUDA> else None` (`return dev if dev.type == "cuda" else None`)."""
    dotted = dotted_name(call.func) or ""
    if _CUDA_DEVICE_GETTER.search(dotted.rpartition(".")[2]):
        return True
    function = _same_module_function(context, call.func, outer)
    if function is None:
        return False
    returns: list[tuple[cst.Return, tuple[cst.CSTNode, ...]]] = []
    stack: list[cst.CSTNode] = []

    def enter(node: cst.CSTNode) -> None:
        stack.append(node)
        if isinstance(node, cst.Return):
            returns.append((node, tuple(stack)))

    walk(function.body, enter, lambda _: stack.pop())
    cuda_values = 0
    for statement, chain in returns:
        value = statement.value
        if value is None or (isinstance(value, cst.Name) and value.value == "None"):
            continue
        if _cuda_value_else_none(context, value, outer) or _answered_by_cuda_query(
            context, statement, chain
        ):
            cuda_values += 1
            continue
        return False
    return cuda_values > 0


# `torch.cuda` queries that raise where CUDA is missing (they initialise CUDA first), unlike
# the memory statistics (`memory_reserved()` answers 0 before CUDA is initialised).
_RAISING_CUDA_QUERY = compile_lazily(
    r"\bcuda\.(mem_get_info|get_device_properties|current_device|get_device_name|"
    r"get_device_capability)\("
)


def _answered_by_cuda_query(
    context: FileContext, statement: cst.Return, chain: Sequence[cst.CSTNode]
) -> bool:
    """`return` is in a `try` body past a `torch.cuda` query that raises without CUDA
    (`free, total = torch.cuda.mem_get_info(device)`), and every handler of that `try`
    catches any exception (`except Exception:`) and answers None (`return None`): off
    CUDA the query raises, so the function answers None there, and a value only on CUDA.
    (A handler for some exceptions only would let the no-CUDA error through.)"""
    for index in range(len(chain) - 1, -1, -1):
        node = chain[index]
        if not isinstance(node, cst.Try):
            continue
        if index + 1 >= len(chain) or chain[index + 1] is not node.body:
            return False  # in a handler, `else` or `finally`: no query guards it
        if not node.handlers:
            return False
        for handler in node.handlers:
            caught = dotted_name(handler.type) if handler.type is not None else "Exception"
            if caught not in ("Exception", "BaseException"):
                return False
            if _how_body_exits(handler.body) != "return":
                return False
            for line in _suite(handler.body):
                for small in line.body if isinstance(line, cst.SimpleStatementLine) else ():
                    if isinstance(small, cst.Return) and not (
                        isinstance(small.value, cst.Name) and small.value.value == "None"
                    ):
                        return False
        body_start, _ = context.span(node.body)
        return_start, _ = context.span(statement)
        return _RAISING_CUDA_QUERY.search(context.source[body_start:return_start]) is not None
    return False


def _cuda_value_else_none(
    context: FileContext, value: cst.BaseExpression | None, outer: Sequence[cst.CSTNode]
) -> bool:
    """`x if <the device is CUDA> else None` (`dev if dev.type == "cuda" else None`)."""
    return (
        isinstance(value, cst.IfExp)
        and isinstance(value.orelse, cst.Name)
        and value.orelse.value == "None"
        and _proves_cuda(context, value.test, outer)
    )


def _exits_unless_cuda_value(
    context: FileContext, statement: cst.If, outer: Sequence[cst.CSTNode]
) -> str | None:
    """`if dev is None or moss_fused_disabled(): return` (no `else`) where `dev` is None
    unless the device is CUDA: past it the local holds a CUDA value. The local's name."""
    if statement.orelse is not None or _how_body_exits(statement.body) is None:
        return None
    tests: list[cst.BaseExpression] = [statement.test]
    names = []
    while tests:
        test = tests.pop()
        if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.Or):
            tests += [test.left, test.right]
        elif (
            isinstance(test, cst.Comparison)
            and len(test.comparisons) == 1
            and isinstance(test.comparisons[0].operator, cst.Is)
            and isinstance(test.comparisons[0].comparator, cst.Name)
            and test.comparisons[0].comparator.value == "None"
            and isinstance(test.left, cst.Name)
        ):
            names.append((test.left.value, False))
        elif (
            isinstance(test, cst.UnaryOperation)
            and isinstance(test.operator, cst.Not)
            and isinstance(test.expression, cst.Name)
        ):
            names.append((test.expression.value, True))
    for name, truthiness in names:
        if _local_none_unless_cuda(context, name, truthiness, outer):
            return name
    return None


def _proves_cuda(
    context: FileContext, test: cst.BaseExpression, outer: Sequence[cst.CSTNode] = ()
) -> bool:
    found = _backend_when_true(test, context, outer)
    return found is not None and found.identity and found.backend == "CUDA"


def _under_cuda_test(
    context: FileContext, chain: Sequence[cst.CSTNode], outer: Sequence[cst.CSTNode] = ()
) -> bool:
    """Some `if` of the chain runs the last node only when its test proves CUDA. `outer`:
    the enclosing nodes, so a test of a local (`free is not None`) finds its bindings."""
    for parent, child in zip(chain, chain[1:]):
        if isinstance(parent, cst.If) and child is parent.body:
            if _proves_cuda(context, parent.test, outer):
                return True
    return False


def _bindings_of(
    function: cst.FunctionDef, name: str
) -> list[tuple[cst.BaseExpression | None, tuple[cst.CSTNode, ...]]]:
    """Every binding of `name` in the function's own code (not nested functions): the value
    assigned (None for a loop target, `with ... as`, `:=`, a parameter or an augmented
    assignment) and the chain of nodes from the function down to the binding."""
    found: list[tuple[cst.BaseExpression | None, tuple[cst.CSTNode, ...]]] = []
    stack: list[cst.CSTNode] = []

    def enter(node: cst.CSTNode) -> None:
        stack.append(node)
        if isinstance(node, cst.Assign):
            if any(isinstance(t.target, cst.Name) and t.target.value == name for t in node.targets):
                found.append((node.value, tuple(stack)))
        elif isinstance(node, (cst.AnnAssign, cst.AugAssign)):
            if isinstance(node.target, cst.Name) and node.target.value == name:
                value = node.value if isinstance(node, cst.AnnAssign) else None
                found.append((value, tuple(stack)))
        elif name in _names_bound_by(node):
            found.append((None, tuple(stack)))

    def descend(node: cst.CSTNode) -> bool:
        return node is function or not isinstance(node, (cst.FunctionDef, cst.Lambda))

    walk(function, enter, lambda _: stack.pop(), descend)
    return found


def _names_bound_by(node: cst.CSTNode) -> set[str]:
    """The names a loop target, `with ... as`, `:=` or parameter binds."""
    targets: list[cst.CSTNode] = []
    if isinstance(node, (cst.For, cst.CompFor)):
        targets.append(node.target)
    elif isinstance(node, cst.WithItem) and node.asname is not None:
        targets.append(node.asname.name)
    elif isinstance(node, cst.NamedExpr):
        targets.append(node.target)
    elif isinstance(node, cst.Param):
        targets.append(node.name)
    names: set[str] = set()
    for target in targets:
        walk(
            target,
            lambda n: names.add(n.value) if isinstance(n, cst.Name) else None,
            lambda _: None,
        )
    return names


def _exits_unless_library_flag(context: FileContext, statement: cst.If) -> str | None:
    """`if not _enable_splitk: return False` (no `else`), where the module sets the flag
    only once a CUDA-only library loaded: the library the flag stands for, or None."""
    test = statement.test
    if not (
        statement.orelse is None
        and isinstance(test, cst.UnaryOperation)
        and isinstance(test.operator, cst.Not)
        and isinstance(test.expression, cst.Name)
        and _how_body_exits(statement.body) is not None
    ):
        return None
    return _cuda_library_flags(context).get(test.expression.value)


def _cuda_library_flags(context: FileContext) -> dict[str, str]:
    """Module-level flags set `True` only in blocks that first import a CUDA-only library
    (`from flashinfer.gemm import run_splitk_dense` ... `_enable_splitk = True`; `try:
    import flash_attn; HAS_FLASH_ATTN = True`), and otherwise only `False` or `None`: a
    flag that says the CUDA-only library is in use. Maps each to that library."""
    flags = context.memo.get("devices.cuda_library_flags")
    if flags is not None:
        return flags
    truthy: dict[str, set[str | None]] = {}
    spoiled: set[str] = set()

    def scan(statements: Sequence[cst.CSTNode], library: str | None) -> None:
        for statement in statements:
            if isinstance(statement, cst.SimpleStatementLine):
                for small in statement.body:
                    root = _imported_root(small)
                    module = _imported_module(small) or ""
                    if root in CUDA_ONLY_LIBRARIES or any(
                        _CUDA_ONLY_FUNCTION.search(part) for part in module.split(".")
                    ):
                        library = root
                    if isinstance(small, cst.Assign):
                        _record(small, library)
            elif isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
                scan(_suite(statement.body), None)  # runs later, under its own imports
            elif isinstance(statement, cst.BaseCompoundStatement):
                for suite in _suites(statement):
                    scan(_suite(suite), library)

    def _record(assign: cst.Assign, library: str | None) -> None:
        value = assign.value
        for target in assign.targets:
            if not isinstance(target.target, cst.Name):
                continue
            name = target.target.value
            if isinstance(value, cst.Name) and value.value in ("False", "None"):
                continue
            if isinstance(value, cst.Name) and value.value == "True":
                truthy.setdefault(name, set()).add(library)
            else:
                spoiled.add(name)

    scan(context.module.body, None)
    module_names = scope_table(context).module_scope.bindings
    flags = {}
    for name, libraries in truthy.items():
        if name in spoiled or None in libraries or name not in module_names:
            continue
        flags[name] = sorted(lib for lib in libraries if lib)[0]
    context.memo["devices.cuda_library_flags"] = flags
    return flags


def _suite(body: cst.BaseSuite) -> Sequence[cst.CSTNode]:
    return body.body if isinstance(body, cst.IndentedBlock) else (body,)


def _suites(statement: cst.BaseCompoundStatement) -> list[cst.BaseSuite]:
    """Every block of a compound statement (if/elif/else, try/except/else/finally, loops)."""
    suites: list[cst.BaseSuite] = [statement.body]
    branch = getattr(statement, "orelse", None)
    while branch is not None:
        suites.append(branch.body)
        branch = branch.orelse if isinstance(branch, cst.If) else None
    for handler in getattr(statement, "handlers", ()):
        suites.append(handler.body)
    final = getattr(statement, "finalbody", None)
    if final is not None:
        suites.append(final.body)
    return suites


# What a function answers where CUDA is missing: "unknown", which its callers must handle.
# (Not `False` or `0`: "do not use the memory-saving path" or "0 bytes free" is a decision
# or a measurement that is wrong on another accelerator.)
_NO_ANSWER = frozenset({"None"})
OWN_FALLBACK = "a query with its own answer without CUDA"


def _answers_without_cuda(
    context: FileContext, statement: cst.If, outer: Sequence[cst.CSTNode]
) -> bool:
    """`if _is_hip or not torch.cuda.is_available(): return None`, in a function that
    otherwise returns a value it computed: off CUDA the function answers "unknown" itself,
    and the `torch.cuda` calls past the test never run there."""
    if statement.orelse is not None or not _true_without_cuda(statement.test):
        return False
    body = _body_statements_of(statement.body)
    if len(body) != 1 or not isinstance(body[0], cst.SimpleStatementLine):
        return False
    if len(body[0].body) != 1:
        return False
    small = body[0].body[0]
    if not (
        isinstance(small, cst.Return)
        and isinstance(small.value, cst.Name)
        and small.value.value in _NO_ANSWER
    ):
        return False
    function = next((n for n in reversed(outer) if isinstance(n, cst.FunctionDef)), None)
    return function is not None and _returns_a_computed_value(function)


def answers_none_without_cuda(context: FileContext, ancestors: Sequence[cst.CSTNode]) -> bool:
    """The node is inside `... if torch.cuda.is_available() else None` whose value is used
    (`device_index = torch.cuda.current_device() if torch.cuda.is_available() else None`):
    a query that answers "unknown" itself off CUDA. (A bare statement of that form is a
    guarded action: the guarded-call fix rewrites it.)"""
    chain = list(ancestors)
    for index in range(len(chain) - 2, 0, -1):
        node, child = chain[index], chain[index + 1]
        if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            return False
        if isinstance(node, cst.IfExp) and child is node.body:
            return (
                isinstance(node.orelse, cst.Name)
                and node.orelse.value == "None"
                and not isinstance(chain[index - 1], cst.Expr)
                and _is_cuda_availability(context, node.test, chain[:index])
                and not _feeds_a_cuda_call(context, chain[: index + 1])
            )
    return False


def _feeds_a_cuda_call(context: FileContext, chain: Sequence[cst.CSTNode]) -> bool:
    """The value `chain` ends in is assigned to a local that the enclosing function (or a
    function nested in it) hands to a `torch.cuda` call (`current = torch.cuda.current_device()
    if torch.cuda.is_available() else None`, then `torch.cuda.set_device(current)` in a
    worker): the "unknown" off CUDA is no answer of its own but the input of CUDA-only work,
    which off CUDA is silently skipped."""
    assign = chain[-2] if len(chain) >= 2 else None
    if not (
        isinstance(assign, cst.Assign)
        and len(assign.targets) == 1
        and isinstance(assign.targets[0].target, cst.Name)
    ):
        return False
    function = next((n for n in reversed(chain) if isinstance(n, cst.FunctionDef)), None)
    if function is None:
        return False
    name = re.escape(assign.targets[0].target.value)
    handed = re.compile(rf"\bcuda\.\w+\(\s*{name}\s*[,)]")
    return handed.search(context.code_for(function.body)) is not None


def local_none_without_cuda(context: FileContext, ancestors: Sequence[cst.CSTNode]) -> bool:
    """The node is in the value assigned to a local that is otherwise only `None`, under
    `if torch.cuda.is_available():` (also in a `try` there), and the function tests the
    local against `None`: `free_gb = None`, `if torch.cuda.is_available(): free_gb =
    get_free(torch.cuda.current_device())`, then `if free_gb is None: ...`. The statement
    form of `... if torch.cuda.is_available() else None`: off CUDA the query is "unknown",
    which the function handles itself."""
    chain = list(ancestors)
    assign_at = None
    for index in range(len(chain) - 2, 0, -1):
        node, child = chain[index], chain[index + 1]
        if isinstance(node, cst.Assign) and child is node.value:
            assign_at = index
            break
        if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement, cst.Lambda)):
            return False
    if assign_at is None:
        return False
    assign = chain[assign_at]
    assert isinstance(assign, cst.Assign)
    if len(assign.targets) != 1 or not isinstance(assign.targets[0].target, cst.Name):
        return False
    name = assign.targets[0].target.value
    guard = None
    for index in range(assign_at - 1, 0, -1):
        node, child = chain[index], chain[index + 1]
        if isinstance(node, (cst.SimpleStatementLine, cst.IndentedBlock, cst.Try)):
            continue
        if (
            isinstance(node, cst.If)
            and child is node.body
            and node.orelse is None
            and _is_cuda_availability(context, node.test, chain[:index])
        ):
            guard = node
        break
    function = next((n for n in reversed(chain) if isinstance(n, cst.FunctionDef)), None)
    if guard is None or function is None:
        return False
    for value, binding_chain in _bindings_of(function, name):
        if isinstance(value, cst.Name) and value.value == "None":
            continue
        if not _contains(binding_chain, guard):
            return False
    tested = re.compile(rf"\b{re.escape(name)}\s+is\s+(not\s+)?None\b")
    return tested.search(context.code_for(function.body)) is not None


def _true_without_cuda(test: cst.BaseExpression) -> bool:
    """`not torch.cuda.is_available()`, alone or as one side of an `or`."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.Or):
        return _true_without_cuda(test.left) or _true_without_cuda(test.right)
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = test.expression
        return (
            isinstance(inner, cst.Call)
            and not inner.args
            and (dotted_name(inner.func) or "").endswith("cuda.is_available")
        )
    return False


def _body_statements_of(body: cst.BaseSuite) -> Sequence[cst.CSTNode]:
    return body.body if isinstance(body, cst.IndentedBlock) else (body,)


def _returns_a_computed_value(function: cst.FunctionDef) -> bool:
    """Some `return` of the function (not of a nested one) gives more than a constant."""
    found = False

    def enter(node: cst.CSTNode) -> None:
        nonlocal found
        if isinstance(node, cst.Return) and node.value is not None:
            value = node.value
            if not (isinstance(value, cst.Name) and value.value in ("None", "True", "False")):
                found = True

    walk(
        function.body,
        enter,
        lambda _: None,
        lambda node: not isinstance(node, (cst.FunctionDef, cst.Lambda, cst.ClassDef)),
    )
    return found


def _asserted_backend(
    context: FileContext, test: cst.BaseExpression, outer: Sequence[cst.CSTNode]
) -> str | None:
    """The backend `assert test` requires: `assert x.is_cuda and ...`, or `assert
    can_use_kernel(x)` where the same-module predicate is false off that backend."""
    found = _backend_when_true(test, context)
    if found is not None and found.identity:
        return found.backend
    if isinstance(test, cst.Call):
        predicate = _same_module_function(context, test.func, outer)
        if predicate is not None:
            return _predicate_backend(context, predicate)
    return None


def _predicate_backend(context: FileContext, function: cst.FunctionDef) -> str | None:
    """The backend a same-module predicate requires: every `return` gives `False` or an
    expression true only on that backend (`return x.is_cuda and x.dtype == torch.bf16`)."""
    cache = context.memo.setdefault("devices.predicate_backend", {})
    if id(function) in cache:
        return cache[id(function)]
    cache[id(function)] = None
    returns: list[cst.Return] = []
    walk(function.body, lambda n: returns.append(n) if isinstance(n, cst.Return) else None,
         lambda _: None)  # fmt: skip
    backends = set()
    for statement in returns:
        value = statement.value
        if isinstance(value, cst.Name) and value.value == "False":
            continue
        found = _backend_when_true(value, context) if value is not None else None
        if found is None or not found.identity:
            return None
        backends.add(found.backend)
    result = "CUDA" if backends == {"CUDA"} else None
    cache[id(function)] = result
    return result


def _bound_reason(backend: str, where: str) -> str:
    if backend == "ROCm":
        return f"ROCm-only code ({where}), where torch.cuda is right"
    return f"CUDA-only code ({where})"


def _header(context: FileContext, statement: cst.If) -> str:
    return "if " + context.code_for(statement.test).strip()[:60] + ":"


def _raises_off_backend(context: FileContext, function: cst.FunctionDef) -> str | None:
    """The backend a function requires by raising without it in its own top-level code."""
    cache = context.memo.setdefault("devices.raises_off_backend", {})
    if id(function) not in cache:
        cache[id(function)] = next(
            (
                backend
                for statement in _body_statements(function)
                if isinstance(statement, cst.If)
                for backend in [_exit_guard(context, statement, raise_only=True)]
                if backend
            ),
            None,
        )
    return cache[id(function)]


def _same_module_function(
    context: FileContext, func: cst.BaseExpression, outer: Sequence[cst.CSTNode]
) -> cst.FunctionDef | None:
    """The module-level function (`_check(x)`) or method of the enclosing class
    (`self._check(x)`) a call names, when the module defines it exactly once."""
    if isinstance(func, cst.Name):
        found = _module_functions(context).get(func.value, [])
        return found[0] if len(found) == 1 else None
    if (
        isinstance(func, cst.Attribute)
        and isinstance(func.value, cst.Name)
        and func.value.value in ("self", "cls")
    ):
        owner = next((n for n in reversed(outer) if isinstance(n, cst.ClassDef)), None)
        if owner is not None:
            found = [
                s
                for s in _class_body(owner)
                if isinstance(s, cst.FunctionDef) and s.name.value == func.attr.value
            ]
            return found[0] if len(found) == 1 else None
    return None


def _module_functions(context: FileContext) -> dict[str, list[cst.FunctionDef]]:
    functions = context.memo.get("devices.module_functions")
    if functions is None:
        functions = context.memo["devices.module_functions"] = {}
        for statement in context.module.body:
            if isinstance(statement, cst.FunctionDef):
                functions.setdefault(statement.name.value, []).append(statement)
    return functions


def _class_body(node: cst.ClassDef) -> Sequence[cst.CSTNode]:
    return node.body.body if isinstance(node.body, cst.IndentedBlock) else ()


# -- classes and functions bound to one backend by what they declare or use --------------

# Class attributes that declare where the class's code runs (`capabilities = {
# KernelBackend.TRITON: {CapabilityRequirement.CUDA}}`, `supported_devices = ("cuda",)`).
_CAPABILITY_ATTRIBUTE = compile_lazily(
    r"capabilit|supported_(devices|platforms|backends|device_types)|device_types?$|"
    r"^_*(requires?|required)_(device|platform)s?$",
    re.IGNORECASE,
)
_DEVICE_WORD = compile_lazily(
    r"(?<![A-Za-z0-9])(cuda|hip|rocm|cpu|mps|npu|xpu|hpu|mlu|musa|mtia|tpu|xla|neuron|"
    r"privateuse1|any|all)(?![A-Za-z0-9])",
    re.IGNORECASE,
)


def _declares_cuda_only_capabilities(context: FileContext, node: cst.ClassDef) -> str | None:
    """A class whose own capability declaration names CUDA (or CUDA and ROCm) and no other
    device for every entry: its code runs only where `torch.cuda` is right."""
    for statement in _class_body(node):
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, cst.Assign):
                targets = [t.target for t in small.targets]
            elif isinstance(small, cst.AnnAssign) and small.value is not None:
                targets = [small.target]
            else:
                continue
            names = [t.value for t in targets if isinstance(t, cst.Name)]
            if not any(_CAPABILITY_ATTRIBUTE.search(name) for name in names):
                continue
            assert small.value is not None
            words = {w.lower() for w in _DEVICE_WORD.findall(context.code_for(small.value))}
            if "cuda" in words and words <= {"cuda", "hip", "rocm"}:
                return f"a class declared CUDA-only (`{names[0]}` names only CUDA)"
    return None


def _constructor_refuses_other_backends(context: FileContext, node: cst.ClassDef) -> str | None:
    """A class whose `__init__` raises without one backend (`if not _is_hip: raise
    NotImplementedError(...)`): none of its methods runs elsewhere."""
    for statement in _class_body(node):
        if isinstance(statement, cst.FunctionDef) and statement.name.value == "__init__":
            backend = _raises_off_backend(context, statement)
            if backend:
                return _bound_reason(backend, f"`{node.name.value}.__init__` raises without it")
    return None


def _factory_refuses_other_backends(context: FileContext, node: cst.ClassDef) -> str | None:
    """A class whose factory (a classmethod that returns `cls(...)`) raises without one
    backend: in its own code (`if not is_cuda(): raise ...`), or when a validator of the
    class it calls returns a reason for a failed backend test (`reason = cls._why_not(...)`;
    `if reason is not None: raise ValueError(reason)`). The factory is how the class is
    built, so its methods run on that backend only."""
    for method in _class_body(node):
        if not (isinstance(method, cst.FunctionDef) and _is_factory(method, node)):
            continue
        backend = _raises_off_backend(context, method) or _raises_on_validator_reason(
            context, method, node
        )
        if backend:
            return _bound_reason(
                backend, f"`{node.name.value}.{method.name.value}()` raises without it"
            )
    return None


def _reason_tested(test: cst.BaseExpression) -> cst.BaseExpression:
    """`reason` of `if reason is not None:` (the test itself for `if reason:`)."""
    return _compared_with_none(test, cst.IsNot) or test


def _module_factory_gives_up_off_backend(context: FileContext, node: cst.ClassDef) -> str | None:
    """A class the module builds only in module-level factories, each of which first gives
    up when a same-module validator returns a reason for a failed backend test (sglang's
    `make_indexer_cp`: `reason = unsupported_reason(gfx950=...)`; `if reason is not None:
    return None`; `return MiniMaxIndexerCP(...)`): its methods run on that backend only."""
    name = node.name.value
    factories: list[cst.FunctionDef] = []
    elsewhere = False
    for statement in context.module.body:
        if statement is node:
            continue
        if _constructs(statement, name):
            if isinstance(statement, cst.FunctionDef):
                factories.append(statement)
            else:
                elsewhere = True
    if elsewhere or not factories or _constructs(node, name):
        return None
    backends = {_gives_up_before_constructing(context, f, name) for f in factories}
    if len(backends) != 1:
        return None
    backend = backends.pop()
    if backend is None:
        return None
    return _bound_reason(backend, f"`{factories[0].name.value}()` gives up without it")


def _constructs(scope: cst.CSTNode, name: str) -> bool:
    found: list[bool] = []

    def enter(child: cst.CSTNode) -> None:
        if isinstance(child, cst.Call) and isinstance(child.func, cst.Name):
            if child.func.value == name:
                found.append(True)

    walk(scope, enter, lambda _: None)
    return bool(found)


def _gives_up_before_constructing(
    context: FileContext, factory: cst.FunctionDef, name: str
) -> str | None:
    """The backend `factory` insists on: a top-level `if reason [is not None]: return/raise`
    on a same-module validator's reason comes before the statement that builds `name`."""
    reasons: dict[str, str] = {}  # local name -> backend its validator requires
    for statement in _body_statements(factory):
        if _constructs(statement, name):
            return None
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if (
                    isinstance(small, cst.Assign)
                    and len(small.targets) == 1
                    and isinstance(small.targets[0].target, cst.Name)
                    and isinstance(small.value, cst.Call)
                ):
                    validator = _same_module_function(context, small.value.func, ())
                    backend = _validator_backend(context, validator) if validator else None
                    if backend:
                        reasons[small.targets[0].target.value] = backend
            continue
        if not isinstance(statement, cst.If) or statement.orelse is not None:
            continue
        if _how_body_exits(statement.body) is None:
            continue
        test = _reason_tested(statement.test)
        if isinstance(test, cst.Name) and test.value in reasons:
            return reasons[test.value]
    return None


def _is_factory(method: cst.FunctionDef, owner: cst.ClassDef) -> bool:
    """A classmethod with a `return cls(...)` (or `return Owner(...)`) of its own."""
    if not any(dotted_name(d.decorator) == "classmethod" for d in method.decorators):
        return False
    builders = {"cls", owner.name.value}
    found: list[bool] = []

    def enter(child: cst.CSTNode) -> None:
        if (
            isinstance(child, cst.Return)
            and isinstance(child.value, cst.Call)
            and dotted_name(child.value.func) in builders
        ):
            found.append(True)

    walk(method.body, enter, lambda _: None, _outside_nested_scopes)
    return bool(found)


def _outside_nested_scopes(node: cst.CSTNode) -> bool:
    return not isinstance(node, (cst.FunctionDef, cst.Lambda, cst.ClassDef))


def _raises_on_validator_reason(
    context: FileContext, method: cst.FunctionDef, owner: cst.ClassDef
) -> str | None:
    """The backend `method` requires by raising when a validator of `owner` returns a
    reason: `reason = cls._unsupported_reason(...)` then `if reason is not None: raise`
    (or `if reason: raise`), or `if cls._unsupported_reason(...) is not None: raise`."""
    validators: dict[str, cst.FunctionDef] = {}
    for statement in _body_statements(method):
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if (
                    isinstance(small, cst.Assign)
                    and len(small.targets) == 1
                    and isinstance(small.targets[0].target, cst.Name)
                ):
                    validator = _class_validator(small.value, owner)
                    if validator is not None:
                        validators[small.targets[0].target.value] = validator
            continue
        if not isinstance(statement, cst.If) or statement.orelse is not None:
            continue
        if _how_body_exits(statement.body) != "raise":
            continue
        test = _reason_tested(statement.test)
        if isinstance(test, cst.Name):
            validator = validators.get(test.value)
        else:
            validator = _class_validator(test, owner)
        backend = _validator_backend(context, validator) if validator is not None else None
        if backend:
            return backend
    return None


def _class_validator(value: cst.BaseExpression, owner: cst.ClassDef) -> cst.FunctionDef | None:
    """The method of `owner` that `cls.name(...)`, `self.name(...)` or `Owner.name(...)`
    calls, when the class defines it once."""
    if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)):
        return None
    receiver = value.func.value
    if not (isinstance(receiver, cst.Name) and receiver.value in ("cls", "self", owner.name.value)):
        return None
    found = [
        s
        for s in _class_body(owner)
        if isinstance(s, cst.FunctionDef) and s.name.value == value.func.attr.value
    ]
    return found[0] if len(found) == 1 else None


def _validator_backend(context: FileContext, validator: cst.FunctionDef) -> str | None:
    """The backend a reason-returning validator insists on: it returns a reason when a
    test of the device or platform fails (`if device.type != "cuda": return "CUDA
    only"`), or it scans a table of `(condition, reason)` pairs (`for failed, reason in
    rules`, also in a generator) one of which fails off that backend (`(not
    opts.is_cuda_platform or opts.device != "cuda", "CUDA only")`)."""
    cache = context.memo.setdefault("devices.validator_backend", {})
    if id(validator) in cache:
        return cache[id(validator)]
    tables: dict[str, str] = {}  # table name -> backend of one of its conditions
    scanned: set[str] = set()  # names iterated as `(condition, reason)` pairs
    found: list[str] = []

    def enter(node: cst.CSTNode) -> None:
        if isinstance(node, cst.If):
            test = _backend_when_false(node.test, context)
            if test is not None and test.identity and _returns_a_reason(node.body):
                found.append(test.backend)
        elif (
            isinstance(node, cst.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0].target, cst.Name)
        ):
            backend = _table_backend(context, node.value)
            if backend:
                tables[node.targets[0].target.value] = backend
        elif isinstance(node, (cst.For, cst.CompFor)):
            if (
                isinstance(node.target, cst.Tuple)
                and len(node.target.elements) == 2
                and isinstance(node.iter, cst.Name)
            ):
                scanned.add(node.iter.value)

    walk(validator.body, enter, lambda _: None, _outside_nested_scopes)
    result = (
        found[0]
        if found
        else next((backend for name, backend in tables.items() if name in scanned), None)
    )
    cache[id(validator)] = result
    return result


def _returns_a_reason(body: cst.BaseSuite) -> bool:
    """The block returns something other than None (a reason string, a message)."""
    statements = body.body if isinstance(body, cst.IndentedBlock) else [body]
    for statement in statements:
        smalls = (
            statement.body
            if isinstance(statement, (cst.SimpleStatementLine, cst.SimpleStatementSuite))
            else ()
        )
        for small in smalls:
            if isinstance(small, cst.Return):
                value = small.value
                return value is not None and not (
                    isinstance(value, cst.Name) and value.value in ("None", "True", "False")
                )
    return False


def _table_backend(context: FileContext, value: cst.BaseExpression) -> str | None:
    """A tuple or list literal of `(condition, reason)` pairs, one condition of which is
    true off one backend: that backend."""
    if not isinstance(value, (cst.Tuple, cst.List)):
        return None
    for element in value.elements:
        pair = element.value
        if not (isinstance(pair, cst.Tuple) and len(pair.elements) == 2):
            return None
        test = _backend_when_false(pair.elements[0].value, context)
        if test is not None and test.identity:
            return test.backend
    return None


# A project module named for a memory subsystem that only CUDA has (virtual memory
# management, CUDA IPC, NVSHMEM): what it exports works on CUDA devices only.
_CUDA_SUBSYSTEM_MODULE = compile_lazily(
    r"(?<![A-Za-z0-9])(vmm|cumem|cuda_ipc|nvshmem)(?![A-Za-z0-9])", re.IGNORECASE
)


SUBSYSTEM = "<CUDA memory subsystem>"


def _backend_only_imports(context: FileContext) -> dict[str, tuple[str, str]]:
    """Module-level names bound only by imports from CUDA-only or ROCm-only libraries
    (also conditional ones: `if _is_hip: from aiter.ops.shuffle import shuffle_weight`),
    with the library: code that calls one needs that library's backend."""
    names = context.memo.get("devices.backend_only_imports")
    if names is None:
        names = context.memo["devices.backend_only_imports"] = {}
        for name, bindings in scope_table(context).module_scope.bindings.items():
            roots: set[str] = set()
            sources: set[str] = set()
            for binding in bindings:
                if binding.kind == NONE:
                    continue
                if binding.kind != IMPORT or binding.imported is None:
                    roots = set()
                    break
                module, _, _ = binding.imported.qualified.rpartition(".")
                if _CUDA_SUBSYSTEM_MODULE.search(module):
                    roots.add(SUBSYSTEM)  # `from pkg.kv_vmm_backing import KvVmmOwner`
                else:
                    roots.add(binding.imported.qualified.split(".")[0])
                    sources.add(module or binding.imported.qualified)
            if roots and roots <= CUDA_ONLY_LIBRARIES | ROCM_ONLY_LIBRARIES | {SUBSYSTEM}:
                root = sorted(roots)[0]
                names[name] = (root, sorted(sources)[0] if sources else root)
    return names


def _uses_cuda_only_library(context: FileContext, function: cst.FunctionDef) -> str | None:
    """A function whose own unconditional statements call a name that only a CUDA-only or
    ROCm-only library binds (`shuffle_weight` from `aiter`, `driver` from `cuda.bindings`)."""
    imported = dict(_backend_only_imports(context))
    imported.update(_backend_only_accessors(context))
    if not imported:
        return None
    for statement in _body_statements(function):
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for name in _called_names(statement):
            if name not in imported:
                continue
            library, module = imported[name]
            if library == SUBSYSTEM:
                return _bound_reason("CUDA", f"calls `{name}` from a CUDA memory subsystem")
            backend = "ROCm" if library in ROCM_ONLY_LIBRARIES else "CUDA"
            return _bound_reason(backend, f"calls `{name}` from `{module}`")
    return None


def _backend_only_accessors(context: FileContext) -> dict[str, tuple[str, str]]:
    """Module-level functions that hand out a backend-only library's API and nothing else
    (`def _api(): try: from aiter.mla import ws, decode / except ImportError: return None /
    return ws, decode`): every `return` gives `None` or names the function imports from one
    CUDA-only or ROCm-only library. Calling what one returns (`_api()[1](q, ...)`) needs
    that library's backend, as calling the imported name itself does."""
    found = context.memo.get("devices.backend_only_accessors")
    if found is not None:
        return found
    found = context.memo["devices.backend_only_accessors"] = {}
    for name, functions in _module_functions(context).items():
        if len(functions) != 1:
            continue
        imported, returns = _library_imports_and_returns(functions[0])
        if not imported or not returns:
            continue
        given: list[str] = []
        for statement in returns:
            value = statement.value
            if isinstance(value, cst.Name) and value.value == "None":
                continue
            items = value.elements if isinstance(value, cst.Tuple) else [value]
            names = [getattr(item, "value", item) for item in items]
            if not names or not all(isinstance(n, cst.Name) and n.value in imported for n in names):
                given = []
                break
            given += [n.value for n in names if isinstance(n, cst.Name)]
        if given:
            found[name] = imported[given[0]]
    return found


def _library_imports_and_returns(
    function: cst.FunctionDef,
) -> tuple[dict[str, tuple[str, str]], list[cst.Return]]:
    """The names a function imports from CUDA-only or ROCm-only libraries (with the
    library and module), and its `return` statements."""
    imported: dict[str, tuple[str, str]] = {}
    returns: list[cst.Return] = []

    def enter(node: cst.CSTNode) -> None:
        if isinstance(node, cst.ImportFrom) and not node.relative and node.module:
            module = dotted_name(node.module) or ""
            root = module.split(".")[0]
            if root in CUDA_ONLY_LIBRARIES | ROCM_ONLY_LIBRARIES and not isinstance(
                node.names, cst.ImportStar
            ):
                for alias in node.names:
                    bound = alias.asname.name if alias.asname else alias.name
                    if isinstance(bound, cst.Name):
                        imported[bound.value] = (root, module)
        elif isinstance(node, cst.Return):
            returns.append(node)

    walk(function.body, enter, lambda _: None)
    return imported, returns


def _called_names(node: cst.CSTNode) -> Iterator[str]:
    """The root names of the calls in `node` (`f` of `f(x)`, `driver` of `driver.cuMemMap()`)."""
    found: list[str] = []

    def enter(child: cst.CSTNode) -> None:
        if isinstance(child, cst.Call):
            root = dotted_name(child.func)
            if root:
                found.append(root.split(".")[0])

    walk(node, enter, lambda _: None)
    return iter(found)


# -- functions reached only from code that is left out -------------------------------------


CALLED_ONLY_FROM = "called only from CUDA-bound code"
# Evidence about a caller's own code that does not carry over to the helpers it calls.
_WEAK_REASONS = (_PINNED_DEVICE, _NCCL_BRANCH, _ON_CUDA_STREAMS)


def _caller_gated(context: FileContext, function: cst.FunctionDef) -> str | None:
    """A private function (`_helper`, `self._helper`) that the module calls or passes on
    only from CUDA-bound code (`if x.is_cuda: return _fused(x)`): the caller decided.
    A public one may be called from anywhere, so only its own code counts."""
    name = function.name.value
    if not name.startswith("_") or name.endswith("__"):
        return None
    cache = context.memo.setdefault("devices.caller_gated", {})
    key = id(function)
    if key in cache:
        return cache[key]
    cache[key] = None  # a recursive call on the way is no evidence either way
    sites = _reference_sites(context).get(key, [])
    reasons = [cuda_bound(context, site) for site in sites]
    reason = None
    if sites and all(r and not r.startswith(_WEAK_REASONS) for r in reasons):
        caller = next(
            (n.name.value for n in reversed(sites[0]) if isinstance(n, cst.FunctionDef)),
            "<module>",
        )
        reason = f"{CALLED_ONLY_FROM} (`{caller}`: {reasons[0]})"
    cache[key] = reason
    return reason


def reached_only_from_script(context: FileContext, ancestors: Sequence[cst.CSTNode]) -> bool:
    """The node is in a module-level function of a script (a module with an `if __name__
    == "__main__":` block) that the module calls only from that block, from `main()`, or
    from other such functions: a preprocessing CLI's helpers, not a library API. A public
    function another module of the project imports (`project.imported_names`) is that
    module's library API, demo block or not."""
    function = next((n for n in ancestors[1:2] if isinstance(n, cst.FunctionDef)), None)
    if function is None or not _has_main_guard(context.module):
        return False
    return _script_only(context, function)


def _imported_elsewhere(context: FileContext, function: cst.FunctionDef) -> bool:
    name = function.name.value
    if name.startswith("_") or not any(s is function for s in context.module.body):
        return False
    names = context.memo.get("devices.imported_names")
    if names is None:
        names = context.memo["devices.imported_names"] = imported_names(context.path)
    return name in names or EVERY_NAME in names


def _script_only(context: FileContext, function: cst.FunctionDef) -> bool:
    cache = context.memo.setdefault("devices.script_only", {})
    key = id(function)
    if key in cache:
        return cache[key]
    cache[key] = False
    if _imported_elsewhere(context, function):
        return False
    sites = _reference_sites(context).get(key, [])
    result = bool(sites) and all(
        _in_script_entry_point(site)
        or (
            isinstance(site[1], cst.FunctionDef)
            and site[1] is not function
            and _script_only(context, site[1])
        )
        for site in sites
        if len(site) > 1
    )
    cache[key] = result
    return result


def _has_main_guard(module: cst.Module) -> bool:
    return any(isinstance(s, cst.If) and _is_main_guard(s) for s in module.body)


def _reference_sites(context: FileContext) -> dict[int, list[tuple[cst.CSTNode, ...]]]:
    """For each private function or method of the module, the ancestor chains of the
    places that name it (`_f(...)`, `self._m`, `callback=_f`), found in one walk."""
    sites = context.memo.get("devices.reference_sites")
    if sites is not None:
        return sites
    functions: dict[str, list[cst.FunctionDef]] = {}
    methods: dict[str, list[cst.FunctionDef]] = {}
    for statement in context.module.body:
        if isinstance(statement, cst.FunctionDef):
            functions.setdefault(statement.name.value, []).append(statement)
        elif isinstance(statement, cst.ClassDef):
            for member in _class_body(statement):
                if isinstance(member, cst.FunctionDef):
                    methods.setdefault(member.name.value, []).append(member)
    sites = {}
    stack: list[cst.CSTNode] = []
    # A script's public functions serve its `__main__` block: their callers count too.
    script = _has_main_guard(context.module)

    def enter(node: cst.CSTNode) -> None:
        if isinstance(node, cst.Name) and stack:
            parent = stack[-1]
            name = node.value
            if isinstance(parent, cst.Attribute) and parent.attr is node:
                targets = methods.get(name, ()) if name.startswith("_") else ()
            elif isinstance(parent, (cst.FunctionDef, cst.ClassDef)) and parent.name is node:
                targets = ()
            else:
                wanted = script or name.startswith("_")
                targets = functions.get(name, ()) if wanted else ()
            for target in targets:
                sites.setdefault(id(target), []).append(tuple(stack) + (node,))
        stack.append(node)

    walk(context.module, enter, lambda _: stack.pop())
    context.memo["devices.reference_sites"] = sites
    return sites


# -- calls under a CUDA-only guard ----------------------------------------------------------


def cuda_guard(
    context: FileContext, call: cst.Call, ancestors: Sequence[cst.CSTNode]
) -> cst.If | cst.IfExp | None:
    """The guard a call is the whole of, when that guard only tests for CUDA.

    `if torch.cuda.is_available(): torch.cuda.empty_cache()` (no `else`, nothing else in
    the body, not an `elif`) gives the `If`; `torch.cuda.empty_cache() if
    torch.cuda.is_available() else None` as a statement gives the `IfExp`.
    """
    chain = list(ancestors)
    if len(chain) < 3 or chain[-1] is not call:
        return None
    parent = chain[-2]
    if isinstance(parent, cst.IfExp) and parent.body is call:
        if (
            isinstance(parent.orelse, cst.Name)
            and parent.orelse.value == "None"
            and isinstance(chain[-3], cst.Expr)
            and _is_cuda_availability(context, parent.test, chain)
        ):
            return parent
        return None
    if not (isinstance(parent, cst.Expr) and len(chain) >= 5):
        return None
    line, block, guard = chain[-3], chain[-4], chain[-5]
    if not (
        isinstance(line, cst.SimpleStatementLine)
        and len(line.body) == 1
        and isinstance(block, (cst.IndentedBlock, cst.SimpleStatementSuite))
        and isinstance(guard, cst.If)
        and guard.body is block
        and guard.orelse is None
        and len(block.body) == 1
    ):
        return None
    if len(chain) >= 6 and isinstance(chain[-6], cst.If) and chain[-6].orelse is guard:
        return None  # an `elif`: the statement is the chain, not this branch
    if "#" in context.source_of(guard):
        return None  # a comment in the guard would be lost
    return guard if _is_cuda_availability(context, guard.test, chain) else None


def under_cuda_availability_test(context: FileContext, ancestors: Sequence[cst.CSTNode]) -> bool:
    """Whether an enclosing `if` (or conditional expression) only runs the node when
    `torch.cuda.is_available()` / `is_initialized()` says so, in a compound test the
    guarded-call fix does not rewrite."""
    chain = list(ancestors)
    for index in range(len(chain) - 1):
        node, child = chain[index], chain[index + 1]
        if (isinstance(node, cst.If) and child is node.body) or (
            isinstance(node, cst.IfExp) and child is node.body
        ):
            if _AVAILABILITY.search(context.code_for(node.test)):
                return True
    return False


GUARD_NOTE = (
    " (the enclosing `torch.cuda` availability test still skips other accelerators: "
    "drop it from the condition)"
)
_AVAILABILITY = compile_lazily(r"cuda\.(is_available|is_initialized)\(")


def _is_cuda_availability(
    context: FileContext, test: cst.BaseExpression, ancestors: Sequence[cst.CSTNode]
) -> bool:
    if not (isinstance(test, cst.Call) and not test.args):
        return False
    table = scope_table(context)
    values = table.values_of(test.func, table.scope_at(ancestors))
    return bool(values) and all(
        value.qualified == CUDA_MODULE + ".is_available" for value in values
    )


# -- what the portability rules check ------------------------------------------------------

# Code written for a different audience than the library: tests, examples, benchmarks,
# scripts and notebooks are CUDA-only by design (they run on the developers' GPUs) and
# portability findings there are rarely worth a maintainer's time. A bare name matches any
# folder or file name in the path; a pattern with a `/` matches the path from the config's
# folder.
# Folder globs name the kind (`parallel_examples/`, `unit_tests/`, `gpu-benchmarks/`); not a
# singular `*_example`, which names library packages (diffusers' `paint_by_example/`).
DEFAULT_NON_LIBRARY = (
    "tests", "test", "testing", "examples", "example", "benchmarks", "benchmark", "scripts",
    "notebooks", "docs", "tools", "*[_-]examples", "*[_-]tests", "*[_-]benchmarks",
    "*[_-]scripts", "test_*.py", "*_test.py", "tests.py", "conftest.py", "*.ipynb",
    "testing_utils.py", "testing.py",
)  # fmt: skip
# Why a finding in such code is `low`, as the significance-rated rules' messages say it.
NON_LIBRARY_NOTE = "in a non-library path (tests, examples, benchmarks, scripts)"

PORTABILITY_LEVELS = ("library", "strict")

# Why a call was left out (the `--statistics` labels).
LEFT_OUT_PLATFORM = "platform layer"
LEFT_OUT_CUDA_BOUND = "CUDA-bound code"
LEFT_OUT_ROCM = "ROCm-only code (torch.cuda is HIP there)"
LEFT_OUT_CALLER_GATED = "called only from CUDA-bound code"
LEFT_OUT_SCOPE = "non-library path"
LEFT_OUT_SCRIPT = "script entry point"
LEFT_OUT_LOGGING = "logging only"
LEFT_OUT_DEBUG = "debugging branch"
LEFT_OUT_MEASUREMENT = "CUDA-only measurement utility"
LEFT_OUT_KEPT_OFF = "model the project keeps off other backends"
LEFT_OUT_OWN_FALLBACK = "past its own answer without CUDA"
LEFT_OUT_CUDA_PROJECT = "CUDA-only project"
LEFT_OUT_REDIRECTED = "torch.cuda redirected to the NPU (transfer_to_npu)"
LEFT_OUT_UNSET_GATE = "branch on an attribute the project sets only on CUDA"
LEFT_OUT_LADDER = "CUDA arm of a backend ladder"
LEFT_OUT_NO_DEVICE_LAYER = "project without a device layer"  # LL005 only
# The setting that reports every one of them (what `--statistics` prints beside the counts).
SHOWS_LEFT_OUT = 'portability = "strict"'

_LOGGING_CALL = compile_lazily(
    r"^(logger|logging|log|_logger|LOGGER)\.\w+$|^(print|warnings\.warn|print_rank_0|"
    r"log_info_on_rank0|logger\.\w+_once)$"
)


# A function whose name says it logs or prints (`log_torch_cuda_memory`, `print_memory`).
_LOGGING_FUNCTION = compile_lazily(r"^_*(log|print|report|dump)(_|$)", re.IGNORECASE)


def in_logging_function(ancestors: Sequence[cst.CSTNode]) -> bool:
    """The innermost enclosing function is named for logging (`log_torch_cuda_memory`): a
    query there (memory statistics, the device index) feeds its message. Not for calls
    that act (`synchronize`, `empty_cache`): `_log_validation` also runs the validation."""
    function = next((n for n in reversed(ancestors) if isinstance(n, cst.FunctionDef)), None)
    return function is not None and _LOGGING_FUNCTION.match(function.name.value) is not None


# Words of a flag that turns on debugging or tracing (`envs.SGLANG_TRACE_LOGITS_SYNC.get()`,
# `self.debug`, `DEBUG_SYNC`); whole words only (not `debugger`, `traceback`).
_DEBUG_WORDS = frozenset({"debug", "trace"})
# A docstring that opens by saying the function exists for debugging only.
_DEBUG_ONLY_DOCSTRING = compile_lazily(
    r"(?:debug(?:ging)?[- ]only|for debugging(?: only)?|debugging (?:aid|helper|tool))\b",
    re.IGNORECASE,
)


def in_debugging_branch(context: FileContext, ancestors: Sequence[cst.CSTNode]) -> bool:
    """The node runs only when a debugging or tracing flag is set (`if
    envs.SGLANG_TRACE_LOGITS_E2E_SYNC.get(): torch.cuda.synchronize()`), or in a function
    whose docstring opens by declaring it debug-only (`Debug-only (DSV4_TRUNCATE_LAYERS=N):
    truncate the decoder stack ...`): a developer's switch for their own machine, not what
    the library does."""
    chain = list(ancestors)
    for node in chain:
        if isinstance(node, cst.FunctionDef) and _DEBUG_ONLY_DOCSTRING.match(
            node.get_docstring() or ""
        ):
            return True
    for index in range(len(chain) - 1):
        node, child = chain[index], chain[index + 1]
        if isinstance(node, cst.If) and child is node.body:
            if _names_debug_flag(context, node.test):
                return True
        if isinstance(node, cst.IndentedBlock):
            # Past `if not trace_e2e: return` (or `if not os.environ.get("X_DEBUG"):
            # return`) in an enclosing block: the rest runs only with the flag set.
            for statement in node.body:
                if statement is child:
                    break
                if (
                    isinstance(statement, cst.If)
                    and statement.orelse is None
                    and isinstance(statement.test, cst.UnaryOperation)
                    and isinstance(statement.test.operator, cst.Not)
                    and _names_debug_flag(context, statement.test.expression)
                    and _how_body_exits(statement.body) is not None
                ):
                    return True
    return False


# A profiler or benchmark helper: its name (`profile`, `benchmark_step`, `measure_latency`)
# or its docstring's first line (`YOLOv5 speed/memory/FLOPs profiler`) says it measures.
_MEASUREMENT_WORDS = compile_lazily(
    r"(?<![A-Za-z])(profil(?:e|er|ing)|bench(?:mark)?s?|measur(?:e|es|ing|ement)|timings?|"
    r"timeit|latency)(?![a-z])",
    re.IGNORECASE,
)
# What it measures with is CUDA's: its memory statistics or timing events.
_CUDA_MEASUREMENT = compile_lazily(
    r"\bcuda\.(?:memory_reserved|memory_allocated|max_memory_allocated|max_memory_reserved|"
    r"memory_stats|memory_summary|reset_peak_memory_stats|reset_max_memory_allocated|"
    r"Event)\s*\("
)


def in_cuda_measurement_utility(context: FileContext, ancestors: Sequence[cst.CSTNode]) -> bool:
    """The node is in a profiling or benchmarking function (named or documented so) that
    measures with CUDA's own statistics or events (`torch.cuda.memory_reserved()`,
    `torch.cuda.Event(enable_timing=True)`): there `torch.cuda.empty_cache()` resets the
    CUDA cache between measured runs, part of a CUDA-only measurement, not the library's
    memory handling."""
    for node in ancestors:
        if not isinstance(node, cst.FunctionDef):
            continue
        docstring = (node.get_docstring() or "").strip().split("\n", 1)[0]
        if not (
            _MEASUREMENT_WORDS.search(node.name.value.replace("_", " "))
            or _MEASUREMENT_WORDS.search(docstring)
        ):
            continue
        if _CUDA_MEASUREMENT.search(context.code_for(node)):
            return True
    return False


_MODEL_NAME_ATTRIBUTES = frozenset({"name", "model_name"})


def kept_off_other_backends(context: FileContext, ancestors: Sequence[cst.CSTNode]) -> str | None:
    """Why the node's class never runs on an accelerator but CUDA, or None: the class is
    named (`name = "ldm"`) on the project's exclusion list of every other backend the
    project names (iopaint: `MPS_UNSUPPORT_MODELS`, whose models its device switch runs
    on the CPU when MPS is asked for; it names no npu, xpu or platform layer)."""
    classes = [node for node in ancestors if isinstance(node, cst.ClassDef)]
    if not classes:
        return None
    names = [n for n in (_class_model_name(c) for c in classes) if n is not None]
    if not names:
        return None
    exclusion = backend_exclusion(context.path)
    if exclusion is None:
        return None
    for name in names:
        if name in exclusion.names:
            return (
                f"`{name}` is on {exclusion.project}'s {exclusion.lists}, and the project "
                f"names no backend but CUDA, {exclusion.backends} and the CPU"
            )
    return None


def _class_model_name(node: cst.ClassDef) -> str | None:
    """The string a class binds to `name` (or `model_name`) in its own body, or None."""
    for line in _class_body(node):
        if not isinstance(line, cst.SimpleStatementLine):
            continue
        for small in line.body:
            if isinstance(small, cst.Assign) and len(small.targets) == 1:
                target, value = small.targets[0].target, small.value
            elif isinstance(small, cst.AnnAssign) and small.value is not None:
                target, value = small.target, small.value
            else:
                continue
            if (
                isinstance(target, cst.Name)
                and target.value in _MODEL_NAME_ATTRIBUTES
                and isinstance(value, cst.SimpleString)
            ):
                evaluated = value.evaluated_value
                return evaluated if isinstance(evaluated, str) else None
    return None


def _names_debug_flag(context: FileContext, test: cst.BaseExpression) -> bool:
    words = re.split(r"[^A-Za-z0-9]+", context.code_for(test).lower())
    return bool(_DEBUG_WORDS.intersection(words))


def only_for_logging(context: FileContext, ancestors: Sequence[cst.CSTNode]) -> bool:
    """The call feeds a log message only: an argument of `logger.info(...)`/`print(...)`,
    the test of an `if` whose body only logs or warns, or the value of a local that only
    log messages read (`before = torch.cuda.memory_reserved() / 2**20`, then
    `logger.info(f"... {before:.1f} MB")`). Wrong off CUDA, it changes a message, not what
    the program does."""
    return _feeds_only_logging(context, list(ancestors), depth=0)


# How many locals a value may pass through on its way to a log message (`before` ->
# `freed = before - after` -> `logger.info(...)`).
_LOG_CHAIN_DEPTH = 3


def _feeds_only_logging(context: FileContext, chain: list[cst.CSTNode], depth: int) -> bool:
    for index in range(len(chain) - 2, -1, -1):
        node, child = chain[index], chain[index + 1]
        if isinstance(node, cst.Call) and child is not node.func:
            if _LOGGING_CALL.match(dotted_name(node.func) or ""):
                return True
        if isinstance(node, cst.If) and child is node.test:
            return node.orelse is None and _only_logs(node.body)
        if isinstance(node, (cst.Assign, cst.AugAssign)) and child is node.value:
            return depth < _LOG_CHAIN_DEPTH and _local_read_only_by_logging(
                context, chain[: index + 1], node, depth
            )
        if isinstance(node, cst.For) and child is node.iter:
            return depth < _LOG_CHAIN_DEPTH and _loop_only_logs(
                context, chain[: index + 1], node, depth
            )
        if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            if not (isinstance(node, cst.If) and child is node.test):
                return False
    return False


def _local_read_only_by_logging(
    context: FileContext,
    chain: list[cst.CSTNode],
    assign: cst.Assign | cst.AugAssign,
    depth: int,
) -> bool:
    """`assign` binds (or extends: `vram += f"..."`) one local of a function, and every
    place the function reads that name (at least one) feeds a log message only; a read
    that only extends the same local (`vram +=`'s own target) feeds nothing else."""
    name = _single_local_target(assign)
    if name is None:
        return False
    where = next(
        (i for i in range(len(chain) - 1, -1, -1) if isinstance(chain[i], cst.FunctionDef)),
        None,
    )
    if where is None:
        return False  # a module-level name may be read from anywhere
    function = chain[where]
    assert isinstance(function, cst.FunctionDef)
    if _declares_nonlocal(function, name):
        return False
    reads = _name_reads(context, function, tuple(chain[:where])).get(name, [])
    reads = [read for read in reads if not _contains(read, assign) and not _extends_itself(read)]
    return bool(reads) and all(
        _feeds_only_logging(context, list(read), depth + 1) for read in reads
    )


def _single_local_target(assign: cst.Assign | cst.AugAssign) -> str | None:
    if isinstance(assign, cst.AugAssign):
        return assign.target.value if isinstance(assign.target, cst.Name) else None
    if len(assign.targets) != 1 or not isinstance(assign.targets[0].target, cst.Name):
        return None
    return assign.targets[0].target.value


def _extends_itself(read: tuple[cst.CSTNode, ...]) -> bool:
    """The read is the target of an augmented assignment (`vram += ...`) or of a `for`
    (`for i in ...`): it names the local being bound, it hands its value nowhere else."""
    parent = read[-2] if len(read) > 1 else None
    return isinstance(parent, (cst.AugAssign, cst.For)) and parent.target is read[-1]


# Calls that only compute or read a value (`round`, `f"{x:.2f}"`'s `format`, a memory or
# device-property query): a loop body made of them and of log-only locals does nothing
# else. `torch.cuda.` names are reads (their `QUERIES` and device properties).
_QUIET_CALLS = frozenset({
    "round", "int", "float", "str", "len", "min", "max", "sum", "abs", "format", "range",
    "enumerate", "torch.cuda.device_count", "torch.cuda.current_device",
    "torch.cuda.memory_allocated", "torch.cuda.max_memory_allocated",
    "torch.cuda.memory_reserved", "torch.cuda.max_memory_reserved",
    "torch.cuda.memory_stats", "torch.cuda.mem_get_info", "torch.cuda.get_device_name",
    "torch.cuda.get_device_properties", "torch.cuda.get_device_capability",
    "torch.cuda.is_available", "torch.cuda.memory_summary", "torch.cuda.utilization",
})  # fmt: skip


def _loop_only_logs(
    context: FileContext, chain: list[cst.CSTNode], loop: cst.For, depth: int
) -> bool:
    """A `for` whose iterator is the call (`for i in range(torch.cuda.device_count()):`)
    feeds log messages only when the loop's every statement does: log calls, and
    locals bound from reads (`_QUIET_CALLS`) that only log messages read (`a =
    torch.cuda.memory_allocated(i) / 2**30`, `vram += f" gpu{i}={a:.2f}GB"`, then
    `logger.info(f"...{vram}")`), also inside `try`/`if`; no `else`, no `break`. How
    many times it runs then changes a message, not what the program does."""
    if loop.orelse is not None or _calls_other_than_quiet(context, loop.iter):
        return False
    return _statements_only_log(context, chain, _suite(loop.body), depth)


def _statements_only_log(
    context: FileContext, chain: list[cst.CSTNode], statements: Sequence[cst.CSTNode], depth: int
) -> bool:
    for statement in statements:
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Pass):
                    continue
                if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
                    call = small.value
                    if _LOGGING_CALL.match(dotted_name(call.func) or "") and not any(
                        _calls_other_than_quiet(context, arg.value) for arg in call.args
                    ):
                        continue
                    return False
                if not isinstance(small, (cst.Assign, cst.AugAssign)):
                    return False
                if _calls_other_than_quiet(context, small.value):
                    return False
                if not _local_read_only_by_logging(
                    context, chain + [statement, small], small, depth + 1
                ):
                    return False
        elif isinstance(statement, cst.Try):
            parts = [statement.body] + [handler.body for handler in statement.handlers]
            parts += [p.body for p in (statement.orelse, statement.finalbody) if p is not None]
            if not all(
                _statements_only_log(context, chain + [statement], _suite(part), depth)
                for part in parts
            ):
                return False
        elif isinstance(statement, cst.If):
            if _calls_other_than_quiet(context, statement.test):
                return False
            parts = [statement.body]
            orelse = statement.orelse
            if isinstance(orelse, cst.Else):
                parts.append(orelse.body)
            elif orelse is not None:
                return False  # an `elif`: judged as its own `if` would need its chain
            if not all(
                _statements_only_log(context, chain + [statement], _suite(part), depth)
                for part in parts
            ):
                return False
        else:
            return False  # a nested loop, `with`, `break`, `return`: it may act
    return True


def _calls_other_than_quiet(context: FileContext, node: cst.CSTNode) -> bool:
    """Whether `node` calls anything but `_QUIET_CALLS` (or awaits, or yields)."""
    found = False

    def enter(child: cst.CSTNode) -> None:
        nonlocal found
        if isinstance(child, cst.Call):
            name = dotted_name(child.func) or ""
            found = found or (name not in _QUIET_CALLS and not name.endswith(".format"))
        elif isinstance(child, (cst.Await, cst.Yield, cst.NamedExpr, cst.Lambda)):
            found = True

    walk(node, enter, lambda _: None)
    return found


def _declares_nonlocal(function: cst.FunctionDef, name: str) -> bool:
    found = False

    def enter(node: cst.CSTNode) -> None:
        nonlocal found
        if isinstance(node, (cst.Global, cst.Nonlocal)):
            found = found or any(item.name.value == name for item in node.names)

    walk(function.body, enter, lambda _: None)
    return found


def _name_reads(
    context: FileContext, function: cst.FunctionDef, outer: tuple[cst.CSTNode, ...]
) -> dict[str, list[tuple[cst.CSTNode, ...]]]:
    """The ancestor chains of every `Name` the function's body reads (not the targets of
    plain assignments, attribute names or keyword names), by name; memoised per function."""
    cache: dict[int, dict[str, list[tuple[cst.CSTNode, ...]]]]
    cache = context.memo.setdefault("devices.name_reads", {})
    cached = cache.get(id(function))
    if cached is not None:
        return cached
    found: dict[str, list[tuple[cst.CSTNode, ...]]] = {}
    cache[id(function)] = found
    stack: list[cst.CSTNode] = list(outer) + [function]

    def enter(node: cst.CSTNode) -> None:
        if isinstance(node, cst.Name) and stack:
            parent = stack[-1]
            bound = (
                (isinstance(parent, cst.AssignTarget) and parent.target is node)
                or (isinstance(parent, cst.Attribute) and parent.attr is node)
                or (isinstance(parent, cst.Arg) and parent.keyword is node)
            )
            if not bound:
                found.setdefault(node.value, []).append(tuple(stack) + (node,))
        stack.append(node)

    walk(function.body, enter, lambda _: stack.pop())
    return found


def _only_logs(body: cst.BaseSuite) -> bool:
    statements = body.body if isinstance(body, cst.IndentedBlock) else [body]
    for statement in statements:
        smalls = (
            statement.body
            if isinstance(statement, (cst.SimpleStatementLine, cst.SimpleStatementSuite))
            else None
        )
        if not smalls:
            return False
        for small in smalls:
            if not (
                isinstance(small, cst.Expr)
                and isinstance(small.value, cst.Call)
                and _LOGGING_CALL.match(dotted_name(small.value.func) or "")
            ):
                return False
    return True


@dataclass(frozen=True)
class Portability:
    """What LL004 and LL005 check in one file, from `portability` and `non-library`."""

    strict: bool
    library: bool  # the file is library code (not a test, example, script, ...)

    @classmethod
    def of(cls, context: FileContext) -> Portability:
        cached = context.memo.get("devices.portability")
        if cached is None:
            extra = context.settings.extra
            patterns = list(extra.get("non-library", DEFAULT_NON_LIBRARY))
            patterns += list(extra.get("extend-non-library", ()))
            strict = extra.get("portability", "library") == "strict"
            library = not is_non_library(context.settings, context.path, patterns)
            cached = context.memo["devices.portability"] = cls(strict, library)
        return cached

    def leaves_out(
        self,
        context: FileContext,
        ancestors: Sequence[cst.CSTNode],
        query: bool = False,
        function: str = "empty_cache",
    ) -> str | None:
        """None: report the call. "": not a finding at all (a multi-backend dispatch
        branch, or a sequence that calls the same `function` of another backend beside
        it). Otherwise the reason it is left out (counted by `--statistics`). `query`:
        the call only reads state (memory statistics, the device index or count)."""
        if (
            in_multi_backend_dispatch(context, ancestors)
            or past_other_backend_exit(context, ancestors)
            or beside_other_backend_twin(context, ancestors, function)
        ):
            return ""
        if self.strict:
            return None
        if platform_layer(context, ancestors):
            return LEFT_OUT_PLATFORM
        if not self.library or _in_test_function(ancestors):
            return LEFT_OUT_SCOPE
        if _in_script_entry_point(ancestors, module_level=True) or reached_only_from_script(
            context, ancestors
        ):
            return LEFT_OUT_SCRIPT
        if only_for_logging(context, ancestors) or (query and in_logging_function(ancestors)):
            return LEFT_OUT_LOGGING
        if query and (
            answers_none_without_cuda(context, ancestors)
            or local_none_without_cuda(context, ancestors)
        ):
            return LEFT_OUT_OWN_FALLBACK
        if in_debugging_branch(context, ancestors):
            return LEFT_OUT_DEBUG
        if function == "empty_cache" and in_cuda_measurement_utility(context, ancestors):
            return LEFT_OUT_MEASUREMENT
        if kept_off_other_backends(context, ancestors):
            return LEFT_OUT_KEPT_OFF
        reason = cuda_bound(context, ancestors)
        if reason:
            return left_out_label(reason)
        return None

    def leaves_out_ladder(self, context: FileContext, call: CudaCall) -> str | None:
        """The reason to leave out a call through a name a backend ladder binds (`if
        DEVICE_TYPE == "xpu": current_device = torch.xpu.device` / `elif ... npu` / `else:
        current_device = torch.cuda.device`), or None. Such a ladder is the project's own
        dispatch: its CUDA arm is not hard-coded, only incomplete for the backends it does
        not name, which `portability = "strict"` still reports. A ladder naming no other
        backend stays a finding."""
        if self.strict or call.certain or not ladder_backends(context, call):
            return None
        return LEFT_OUT_LADDER


def left_out_label(reason: str) -> str:
    """The `--statistics` row a `cuda_bound` reason is counted under."""
    if reason.startswith(UNSET_GATE):
        return LEFT_OUT_UNSET_GATE
    if reason.startswith(CALLED_ONLY_FROM):
        return LEFT_OUT_CALLER_GATED
    if reason.startswith(OWN_FALLBACK):
        return LEFT_OUT_OWN_FALLBACK
    if reason.startswith(CUDA_PROJECT):
        return LEFT_OUT_CUDA_PROJECT
    if reason.startswith(REDIRECTED_PROJECT):
        return LEFT_OUT_REDIRECTED
    if "ROCm" in reason:
        return LEFT_OUT_ROCM
    return LEFT_OUT_CUDA_BOUND


def _in_test_function(ancestors: Sequence[cst.CSTNode]) -> bool:
    """A `test_*` or `benchmark_*` function (pytest collects the former wherever it lives):
    test code, also when it sits in a library file."""
    return any(
        isinstance(node, cst.FunctionDef) and node.name.value.startswith(("test_", "benchmark_"))
        for node in ancestors
    )


def _in_script_entry_point(ancestors: Sequence[cst.CSTNode], module_level: bool = False) -> bool:
    """Code under `if __name__ == "__main__":`, or in a top-level `main()` of a module that
    has such a block: a script, whatever folder it lives in; with `module_level`, also
    the module-level code of such a file."""
    if not ancestors or not isinstance(ancestors[0], cst.Module):
        return False
    module = ancestors[0]
    top = ancestors[1] if len(ancestors) > 1 else None
    if isinstance(top, cst.If) and _is_main_guard(top):
        return True
    if isinstance(top, cst.FunctionDef) and top.name.value == "main":
        return any(isinstance(s, cst.If) and _is_main_guard(s) for s in module.body)
    if module_level and top is not None and not isinstance(top, (cst.FunctionDef, cst.ClassDef)):
        # Module-level code of a script file (one with a `__main__` block): it runs when
        # the script does (`torch.cuda.set_device(rank)` beside `dist.init_process_group()`).
        # Not for the callers of a function (a module-level table may export it).
        return any(isinstance(s, cst.If) and _is_main_guard(s) for s in module.body)
    return False


def _is_main_guard(statement: cst.If) -> bool:
    test = statement.test
    return (
        isinstance(test, cst.Comparison)
        and isinstance(test.left, cst.Name)
        and test.left.value == "__name__"
        and len(test.comparisons) == 1
        and isinstance(test.comparisons[0].operator, cst.Equal)
        and isinstance(test.comparisons[0].comparator, cst.SimpleString)
        and test.comparisons[0].comparator.evaluated_value == "__main__"
    )


def is_non_library(settings, path: str, patterns: Sequence[str]) -> bool:
    rel = settings.relative(path)
    parts = [part for part in rel.split("/") if part not in ("..", ".")]
    for pattern in patterns:
        pattern = pattern.strip()
        if not pattern:
            continue
        if "/" in pattern.rstrip("/"):
            if fnmatch.fnmatchcase(rel, pattern.replace("**/", "*").replace("/**", "/*")):
                return True
            if rel.startswith(pattern.rstrip("/*") + "/"):
                return True
        elif any(fnmatch.fnmatchcase(part, pattern.rstrip("/")) for part in parts):
            return True
    return False
