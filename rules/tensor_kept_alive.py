"""LL001 tensor-kept-alive: a dead tensor stays bound across heavy work."""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Sequence
from fnmatch import fnmatchcase

import libcst as cst

from lifetime_lint.analysis.cfg import (
    CFG,
    VIEW_METHODS,
    DefSite,
    Node,
    StatementInfo,
    TooLarge,
    build,
    iter_children,
)
from lifetime_lint.analysis.dataflow import Dataflow, solve
from lifetime_lint.diagnostics import Applicability, Edit, Fix
from lifetime_lint.fixes import Target, reference_to, target_problem
from lifetime_lint.imports import dotted_name
from lifetime_lint.noqa import Suppressions, parse_suppressions
from lifetime_lint.rule import Option, Rule


def _validate_patterns(value: list[str]) -> str | None:
    for pattern in value:
        if not pattern or pattern.strip() != pattern:
            return f"not a callee pattern: {pattern!r}"
    return None


# -- tensor-likeness evidence -----------------------------------------------------------

# Methods whose result is a new tensor (not a view of the receiver).
_FRESH_METHODS = frozenset(
    [
        "clone",
        "matmul",
        "mm",
        "bmm",
        "baddbmm",
        "addmm",
        "softmax",
        "log_softmax",
        "exp",
        "log",
        "sqrt",
        "rsqrt",
        "pow",
        "abs",
        "neg",
        "sigmoid",
        "tanh",
        "relu",
        "gelu",
        "silu",
        "clamp",
        "clip",
        "add",
        "sub",
        "mul",
        "div",
        "masked_fill",
        "where",
        "gather",
        "scatter",
        "index_select",
        "cumsum",
        "cumprod",
        "repeat",
        "repeat_interleave",
        "tile",
        "roll",
        "flip",
        "round",
        "floor",
        "ceil",
        "lerp",
        "new_zeros",
        "new_ones",
        "new_empty",
        "new_full",
        "new_tensor",
        "sample",
        "mode",
        "square",
        "reciprocal",
        "einsum",
    ]
)
# Reductions: their results are a fraction of their input (often a scalar); not worth a
# finding, with or without `dim`.
_REDUCTIONS = frozenset(
    [
        "sum",
        "mean",
        "std",
        "var",
        "norm",
        "vector_norm",
        "matrix_norm",
        "amax",
        "amin",
        "max",
        "min",
        "prod",
        "logsumexp",
        "all",
        "any",
        "count_nonzero",
        "argmax",
        "argmin",
        "median",
        "nansum",
        "nanmean",
    ]
)
_VIEW_METHODS = VIEW_METHODS
# Views that hand out several pieces of one storage: none of them owns it alone.
_SPLITTING = frozenset({"chunk", "split", "tensor_split", "unbind", "split_with_sizes"})
# Results that are not tensors.
_SCALAR_METHODS = frozenset(
    [
        "item",
        "tolist",
        "size",
        "dim",
        "numel",
        "ndimension",
        "nelement",
        "element_size",
        "data_ptr",
        "stride",
        "get_device",
        "is_contiguous",
        "is_floating_point",
        "is_complex",
        "keys",
        "values",
        "items",
        "format",
        "join",
        "startswith",
        "endswith",
        "lower",
        "upper",
        "strip",
        "replace",
        "encode_plus",
        "count",
        "index",
    ]
)
_SCALAR_ATTRIBUTES = frozenset(
    [
        "shape",
        "dtype",
        "device",
        "ndim",
        "is_cuda",
        "requires_grad",
        "layout",
        "config",
        "grad_fn",
        "is_leaf",
        "names",
    ]
)
_SCALAR_BUILTINS = frozenset(
    [
        "len",
        "int",
        "float",
        "str",
        "bool",
        "range",
        "list",
        "dict",
        "tuple",
        "set",
        "frozenset",
        "isinstance",
        "issubclass",
        "getattr",
        "hasattr",
        "enumerate",
        "zip",
        "sorted",
        "reversed",
        "round",
        "repr",
        "type",
        "id",
        "hash",
        "print",
        "format",
        "open",
        "any",
        "all",
        "min",
        "max",
        "divmod",
        "iter",
        "next",
        "map",
        "filter",
        "callable",
        "object",
        "super",
    ]
)
_TORCH_VIEW_FUNCTIONS = frozenset(
    [
        "chunk",
        "split",
        "tensor_split",
        "unbind",
        "narrow",
        "transpose",
        "permute",
        "squeeze",
        "unsqueeze",
        "flatten",
        "reshape",
        "t",
        "movedim",
        "moveaxis",
        "swapaxes",
        "select",
        "view_as_real",
        "view_as_complex",
        "as_strided",
        "diagonal",
        "broadcast_to",
        "atleast_1d",
        "atleast_2d",
        "atleast_3d",
    ]
)
_TORCH_NOT_TENSORS = (
    "torch.cuda.",
    "torch.backends.",
    "torch.distributed.",
    "torch.jit.",
    "torch.compile",
    "torch.amp.",
    "torch.autograd.",
    "torch.utils.",
    "torch.hub.",
    "torch.nn.init.",
    "torch.nn.utils.",
    "torch.nn.parallel.",
    "torch.library.",
    "torch.fx.",
    "torch.onnx.",
    "torch._dynamo.",
    "torch.compiler.",
    "torch.profiler.",
    "torch.accelerator.",
    "torch.xpu.",
    "torch.mps.",
    "torch.npu.",
    "torch.distributions.",
    "torch.testing.",
    "torch.export.",
    "torch.cpu.",
)
_TORCH_NOT_TENSOR_FUNCTIONS = frozenset(
    [
        "device",
        "dtype",
        "manual_seed",
        "seed",
        "initial_seed",
        "no_grad",
        "inference_mode",
        "enable_grad",
        "set_grad_enabled",
        "autocast",
        "finfo",
        "iinfo",
        "load",
        "save",
        "numel",
        "use_deterministic_algorithms",
        "typename",
        "is_tensor",
        "is_storage",
        "is_floating_point",
        "is_complex",
        "is_nonzero",
        "is_grad_enabled",
        "is_inference_mode_enabled",
        "get_default_dtype",
        "set_default_dtype",
        "get_rng_state",
        "set_rng_state",
    ]
)

_COLLECTIVES = frozenset(
    [
        "all_reduce",
        "all_gather",
        "all_gather_into_tensor",
        "all_gather_object",
        "reduce_scatter",
        "reduce_scatter_tensor",
        "all_to_all",
        "all_to_all_single",
        "broadcast",
        "broadcast_object_list",
        "reduce",
        "gather",
        "scatter",
        "send",
        "recv",
        "isend",
        "irecv",
        "batch_isend_irecv",
    ]
)
_DEFAULT_HEAVY = (
    "*encoder",
    "*decoder",
    "encode",
    "decode",
    "encode_*",
    "decode_*",
    "_encode*",
    "_decode*",
    "vae",
    "*transformer",
    "unet",
    "controlnet",
    "forward",
    "generate",
    "model",
    "*_model",
)
# Components that make a call light whatever its method is called (`self.tokenizer.encode`).
_LIGHT_OWNERS = (
    "*tokenizer*",
    "*processor*",
    "*scheduler*",
    "logger",
    "*progress*",
    "json",
    "guider",
    "*feature_extractor*",
)
# Submodules whose call allocates about one activation (normalisations, projections,
# activations, embeddings): holding a tensor across them is not worth a finding.
_LIGHT_SUBMODULES = (
    "*norm*",
    "ln*",
    "*_ln",
    "dropout*",
    "drop*",
    "act*",
    "*_act",
    "activation*",
    "nonlinearity",
    "*proj*",
    "linear*",
    "*embed*",
    "*embedder*",
    "time_*",
    "*pos_*",
    "rope*",
    "*rotary*",
    "pad*",
    "*pool*",
    "scale*",
    "shift*",
    "gate*",
    "*quant*",
)
# Values that hold metadata rather than activations (ids, masks, timesteps, statistics):
# small tensors whose `del` saves nothing worth a finding.
_SMALL_NAMES = re.compile(
    r"(^|_)(t|ts|timesteps?|sigmas?|ids|mask|masks|scales?|idx|indices|index|lens?|lengths?"
    r"|mean|std|steps?|shift|temb|seed|generator)$"
)
# torch functions that build small tensors from Python data.
_TORCH_SMALL = frozenset({"tensor", "as_tensor", "arange", "linspace", "logspace", "from_numpy"})


class TensorKeptAlive(Rule):
    """
    ## What it does
    Flags a local variable that holds a tensor no longer needed (nothing reads it again)
    while heavy work still runs before the function returns or the name is rebound: a model
    or submodule call, an encoder/decoder/VAE/transformer/UNet call, `forward`/`generate`,
    a collective, a loop that computes, or a call matching `heavy-calls`. It names the
    variable, the line of its last use and the heavy call it is held across.

    ## Why is this bad?
    A tensor is freed when its last reference goes away; a local variable is a reference
    until the function returns. Each flagged tensor adds its full size to the peak memory
    of the heavy call it is held across: the prompt embeddings of a text-to-video pipeline
    (often gigabytes with classifier-free guidance) held through the VAE decode, the old
    cache entry of a cached convolution held while the convolution allocates, the padded
    send buffer of a tiled decoder held through the merge. A name rebound in a loop keeps
    the previous iteration's value alive during this iteration's heavy call: one more copy
    of it at the loop's peak. (The saving is in inference and under `torch.no_grad()`; while
    training, autograd may keep the same tensor for the backward pass, and `del` then frees
    nothing, at no cost.)

    The analysis is a per-function control-flow graph (if/elif/else, for/while with else,
    break/continue, try/except/else/finally, with, match, return, raise, async forms) with
    backward liveness and forward reaching definitions, so:
    - a use in a later loop iteration keeps a name alive; names that die after the loop
      are flagged before what follows it;
    - `locals()`, `vars()`, `eval`, `exec` and frame inspection read every local where they
      are called (diffusers' step callbacks), but do not hide what dies afterwards;
    - nothing is reported for names read by a closure, lambda or generator expression,
      declared `global`/`nonlocal`, stored into a container or attribute, aliased by
      another name or view (`a, b = x.chunk(2)`, `y = x`, `x[0]`): there `del` frees
      nothing; nor in TorchScript or `torch.compile`d functions, nor in functions too large
      to analyse within the cost budget.

    Tensor-likeness without type inference: a binding counts only if it holds a freshly
    produced tensor-like value: the result of a `torch.*` function, of a tensor method that
    allocates (`clone`, `matmul`, `softmax`, `sum`, ...), of a model or submodule call, an
    operator on a tensor-like operand, a subscript or attribute of such a call
    (`self.text_encoder(ids)[0]`, `self.vae.decode(z).sample`), or an assignment annotated
    `torch.Tensor`. Never a parameter, loop target, literal, `len(...)`, `.item()`,
    `.shape`, `.size()`, `.dim()`, a value tested for truth (`if x:`), or the result of an
    unknown function.

    ## Example
    ```python
    def __call__(self, prompt, timesteps):
        prompt_embeds = self.text_encoder(self.tokenize(prompt))[0]
        latents = torch.randn(self.latent_shape, device=prompt_embeds.device)
        for t in timesteps:
            noise_pred = self.transformer(latents, t, prompt_embeds)
            latents = self.scheduler.step(noise_pred, t, latents).prev_sample
        return self.vae.decode(latents).sample
    ```

    ## Use instead
    ```python
    def __call__(self, prompt, timesteps):
        prompt_embeds = self.text_encoder(self.tokenize(prompt))[0]
        latents = torch.randn(self.latent_shape, device=prompt_embeds.device)
        for t in timesteps:
            noise_pred = self.transformer(latents, t, prompt_embeds)
            latents = self.scheduler.step(noise_pred, t, latents).prev_sample
            del noise_pred
        del prompt_embeds
        return self.vae.decode(latents).sample
    ```

    ## Fix safety
    Safe: `del name` is inserted right after the outermost statement after which the name
    is dead on every path and definitely bound (so the `del` can never raise), with the
    block's indentation and the file's newline; names that die at the same point share one
    `del a, b`. Deleting a local that nothing reads again cannot change what the function
    computes. (Code that reads its caller's frame, `sys._getframe(1).f_locals`, is the one
    thing the analysis cannot see.) No fix when the name may be unbound or already deleted
    on some path, or when the statement sits on one line with its `if`/`for` header. A
    `break` or `continue` inside that statement that jumps past the `del` gets its own
    `del` right before it where the name is dead at the jump's target (not across a
    `finally`, where the fix frees the name on the other paths only).

    A list of tensors consumed by a loop and not used afterwards keeps every item alive
    until the loop ends. The unsafe fix rewrites `for tile in tiles:` to
    `for tile in release(tiles):`, which drops the list's reference to each item as the
    loop takes it and empties the list at the end: unsafe because another reference to the
    same list would see it emptied.

    ## Options
    - `heavy-calls`: glob patterns matched (case-insensitively) against each part of a
      callee's dotted name, after `self.`, that make a call heavy work (default: encoders,
      decoders, `encode*`/`decode*`, `vae`, transformers, `unet`, `controlnet`, `forward`,
      `generate`, `model`, `*_model`). Calls through a tokenizer, processor, scheduler,
      logger or progress bar are never heavy, nor are `self.` calls inside a tokenizer,
      processor, scheduler or feature-extractor class (by its name or a base's name), unless
      that class is a network (a name or base ending in `Module`, `Model` or `Mixin`). Submodules assigned in `__init__`
      (`self.mlp = ...`, diffusers' `register_modules(vae=...)`) and collectives are always
      heavy.
    - `extend-heavy-calls`: patterns added to `heavy-calls`.
    - `submodules-are-heavy` (default true): set it to false to keep only findings held
      across calls that match `heavy-calls` (decodes, encoders, language models, UNets,
      `generate`, ...) and loops, dropping those held across one layer (`self.mlp(x)`),
      which free one activation at inference and little in training.
    - `release-call`: the helper of the list fix (default
      `lifetime_lint.runtime.release`), as `package.module:object.method` or a dotted path.
    """

    code = "LL001"
    name = "tensor-kept-alive"
    summary = "A dead tensor stays bound across heavy work; `del` it after its last use"
    triggers = ("torch",)
    fix_availability = "sometimes"
    options = (
        Option(
            "heavy-calls",
            list,
            list(_DEFAULT_HEAVY),
            "glob patterns of callee name parts that make a call heavy work",
            validate=_validate_patterns,
        ),
        Option(
            "extend-heavy-calls",
            list,
            [],
            "patterns added to `heavy-calls`",
            validate=_validate_patterns,
        ),
        Option(
            "submodules-are-heavy",
            bool,
            True,
            "whether a call of any submodule assigned in `__init__` (`self.mlp(x)`) is heavy "
            "work; false keeps only calls matching `heavy-calls` (model-level findings)",
        ),
        Option(
            "release-call",
            str,
            "lifetime_lint.runtime.release",
            "the helper that yields a list's items while dropping the list's references",
            validate=target_problem,
        ),
    )

    # Functions with more CFG nodes than this are skipped (bounded cost).
    max_nodes = 4000

    def __init__(self, context, options) -> None:  # type: ignore[no-untyped-def]
        super().__init__(context, options)
        patterns = list(options["heavy-calls"]) + list(options["extend-heavy-calls"])
        self._heavy_patterns = tuple(p.lower() for p in patterns)
        self._submodules_are_heavy: bool = options["submodules-are-heavy"]
        self._submodules: dict[int, frozenset[str]] = {}

    # -- visitor ---------------------------------------------------------------------
    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        if _is_compiled(node):
            return
        try:
            cfg = build(node, self.max_nodes)
        except (TooLarge, RecursionError):
            return
        _Analysis(self, cfg).run()

    # -- heavy work --------------------------------------------------------------------
    def submodules(self) -> frozenset[str]:
        """Attributes the enclosing class assigns in `__init__` or registers as modules."""
        owner = self.context.inside((cst.ClassDef,))
        if owner is None:
            return frozenset()
        key = id(owner)
        if key not in self._submodules:
            names: set[str] = set()
            for statement in owner.body.body:
                if isinstance(statement, cst.FunctionDef) and statement.name.value == "__init__":
                    names |= _assigned_submodules(statement)
            methods = {s.name.value for s in owner.body.body if isinstance(s, cst.FunctionDef)}
            self._submodules[key] = frozenset(names - methods)
        return self._submodules[key]

    def _in_light_class(self) -> bool:
        """Inside a tokenizer, processor, scheduler or feature extractor class: its own
        methods (`encode`, `decode`, `_encode_plus`) are not model work."""
        owner = self.context.inside((cst.ClassDef,))
        if owner is None:
            return False
        bases = [(dotted_name(base.value) or "").rsplit(".", 1)[-1] for base in owner.bases]
        names = [owner.name.value] + bases
        if not any(fnmatchcase(n.lower(), light) for n in names for light in _LIGHT_OWNERS):
            return False
        # An audio or video "tokenizer" that is a network (`...TokenizerModel(nn.Module)`,
        # `ModelMixin`, `PreTrainedModel`) does real model work.
        return not any(n.endswith(("Module", "Model", "Mixin")) for n in names)

    def heavy_call(self, call: cst.Call, submodules: frozenset[str]) -> bool:
        """A model, encoder/decoder, submodule or collective call, or a `heavy-calls` match.

        Judged on the called name (the last part of the dotted callee), so
        `self.vae.decode(...)` is heavy and `self.vae.post_quant_conv.parameters()` is not.
        """
        dotted = dotted_name(call.func)
        if dotted is None:
            # `self.vae.encode(x).latent_dist.sample()`: the inner call is judged on its own.
            return False
        parts = dotted.split(".")
        last = parts[-1]
        if last[:1].isupper():
            return False  # a class: `DecoderOutput(...)`
        lowered = [part.lower() for part in parts]
        if any(fnmatchcase(part, light) for part in lowered for light in _LIGHT_OWNERS):
            return False
        qualified = self.context.qualified_name(call.func)
        if qualified is not None:
            if qualified.startswith("torch.distributed.") and last in _COLLECTIVES:
                return True
            if qualified == "torch" or qualified.startswith("torch."):
                return False
        if last in _COLLECTIVES and len(parts) >= 2 and parts[-2] in ("dist", "distributed"):
            return True
        if parts[0] == "self" and self._in_light_class():
            return False  # `self._encode_plus(...)` in a tokenizer works on lists and ints
        name = last.lower()
        if (
            self._submodules_are_heavy
            and len(parts) == 2
            and parts[0] == "self"
            and last in submodules
        ):
            return not any(fnmatchcase(name, light) for light in _LIGHT_SUBMODULES)
        return any(fnmatchcase(name, pattern) for pattern in self._heavy_patterns)


def _assigned_submodules(init: cst.FunctionDef) -> set[str]:
    """`self.x = <not a literal>` and `register_modules(x=...)` in an `__init__`."""
    names: set[str] = set()
    stack: list[cst.CSTNode] = [init.body]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Assign):
            for target in node.targets:
                t = target.target
                if (
                    isinstance(t, cst.Attribute)
                    and isinstance(t.value, cst.Name)
                    and t.value.value == "self"
                    and not isinstance(node.value, _LITERAL_VALUES)
                    and not (
                        isinstance(node.value, cst.Name)
                        and node.value.value in ("True", "False", "None")
                    )
                ):
                    names.add(t.attr.value)
        elif isinstance(node, cst.Expr) and isinstance(node.value, cst.Call):
            name = dotted_name(node.value.func)
            if name is not None and name.endswith("register_modules"):
                names.update(a.keyword.value for a in node.value.args if a.keyword is not None)
        elif isinstance(
            node,
            (
                cst.BaseSuite,
                cst.SimpleStatementLine,
                cst.BaseCompoundStatement,
                cst.Else,
                cst.ExceptHandler,
                cst.Finally,
            ),
        ):
            stack.extend(iter_children(node))
    return names


_LITERAL_VALUES = (
    cst.Integer,
    cst.Float,
    cst.SimpleString,
    cst.ConcatenatedString,
    cst.FormattedString,
    cst.Comparison,
    cst.List,
    cst.Dict,
    cst.Tuple,
)


def _is_compiled(function: cst.FunctionDef) -> bool:
    for decorator in function.decorators:
        name = dotted_name(
            decorator.decorator.func
            if isinstance(decorator.decorator, cst.Call)
            else decorator.decorator
        )
        if name is not None and any(
            part in ("jit", "script", "compile", "script_method", "trace")
            for part in name.split(".")
        ):
            return True
    return False


# -- the analysis of one function -------------------------------------------------------

_FRESH = "tensor"
_OTHER = "other"


class _Analysis:
    def __init__(self, rule: TensorKeptAlive, cfg: CFG) -> None:
        self.rule = rule
        self.context = rule.context
        self.cfg = cfg
        self._submodules: frozenset[str] | None = None
        self._heavy: dict[int, tuple[str, cst.CSTNode] | None] = {}
        self.kinds: dict[int, str] = {}  # DefSite.index -> _FRESH / _OTHER / view / pending
        self._pending_reports: list[tuple[str, StatementInfo, int, tuple[str, cst.CSTNode]]] = []
        self.flow: Dataflow | None = None

    @property
    def submodules(self) -> frozenset[str]:
        if self._submodules is None:
            self._submodules = self.rule.submodules()
        return self._submodules

    def run(self) -> None:
        cfg = self.cfg
        candidates = self._candidate_names()
        if not candidates:
            return
        flow = solve(cfg)
        self.flow = flow
        self._resolve_kinds(flow, candidates)
        groups: dict[int, list[tuple[str, StatementInfo, int]]] = {}
        for info, name in self._dead_points(flow, candidates):
            sites = flow.reaching(flow.reach_out[info.exit.index], name)  # type: ignore[union-attr]
            real = [s for s in sites if s.kind not in ("unbound", "deleted")]
            if not real or any(self.kinds.get(s.index) not in (_FRESH, "list") for s in real):
                continue
            heavy = self._heavy_after(info, name)
            if heavy is None:
                continue
            status = 0
            if any(s.kind == "deleted" for s in sites):
                status = 1
            elif any(s.kind == "unbound" for s in sites):
                status = 2
            elif not info.insertable:
                status = 3
            groups.setdefault(id(info), []).append((name, info, status))
            self._pending_reports.append((name, info, status, heavy))
        self._report(groups)
        self._consumed_lists(flow)

    # -- which names can be findings ---------------------------------------------------
    def _candidate_names(self) -> set[str]:
        cfg = self.cfg
        excluded: set[str] = set(cfg.declared) | set(cfg.captured)
        self.excluded = excluded
        fresh_sites: set[str] = set()
        for node in cfg.nodes:
            excluded |= node.escapes
            excluded |= node.truth
        tensorish: set[str] = set()
        for site in cfg.defs:
            if site.kind in ("param", "annassign") and site.annotation is not None:
                if _mentions_tensor(site.annotation):
                    tensorish.add(site.name)
        views: list[tuple[DefSite, tuple[str, ...]]] = []
        binops: list[tuple[DefSite, tuple[str, ...]]] = []
        for site in cfg.defs:
            if site.kind in ("assign", "annassign", "walrus", "augassign"):
                kind, names = self._classify(site.value, site.unpacked)
                if site.kind == "augassign":
                    kind, names = "inherit", (site.name,)
                elif (
                    site.kind == "annassign"
                    and kind == _OTHER
                    and site.annotation is not None
                    and isinstance(site.value, (cst.Call, cst.Await))
                    and _mentions_tensor(site.annotation)
                ):
                    kind = _FRESH  # `x: torch.Tensor = helper(...)`
                if kind == "view":
                    if names == (site.name,) and not site.unpacked:
                        kind = "inherit"
                    else:
                        excluded.update(names)
                        views.append((site, names))
                elif kind == "binop":
                    binops.append((site, names))
                self.kinds[site.index] = kind
                if kind == _FRESH:
                    fresh_sites.add(site.name)
                    tensorish.add(site.name)
            elif site.kind in ("unbound", "deleted"):
                continue
            else:
                self.kinds[site.index] = _OTHER
        # Operators on tensor-like operands produce fresh tensors; views of tensor-like
        # names are tensor-like (for operator evidence) but never fresh.
        changed = True
        while changed:
            changed = False
            for site, names in views:
                if site.name not in tensorish and any(n in tensorish for n in names):
                    tensorish.add(site.name)
                    changed = True
            for site, names in binops:
                if self.kinds[site.index] != _FRESH and any(n in tensorish for n in names):
                    self.kinds[site.index] = _FRESH
                    fresh_sites.add(site.name)
                    tensorish.add(site.name)
                    changed = True
        for site, _ in binops:
            if self.kinds[site.index] != _FRESH:
                self.kinds[site.index] = _OTHER
        for site, _ in views:
            self.kinds[site.index] = _OTHER
        self.tensorish = tensorish
        self.lists = self._tensor_lists(excluded, tensorish)
        return {
            name
            for name in fresh_sites
            if name not in excluded and not _SMALL_NAMES.search(name.lower().rstrip("_0123456789"))
        } | self.lists

    def _tensor_lists(self, excluded: set[str], tensorish: set[str]) -> set[str]:
        """Local lists that hold fresh tensors: `[f(x) for ...]`, or `[]` filled by
        `.append(t)`/`.extend(...)` of tensor-like values, and nothing else."""
        filled: dict[str, bool] = {}
        for node in self.cfg.nodes:
            for call in node.calls:
                func = call.func
                if (
                    isinstance(func, cst.Attribute)
                    and isinstance(func.value, cst.Name)
                    and func.attr.value in ("append", "extend", "insert")
                    and call.args
                ):
                    value = call.args[-1].value
                    fresh = (
                        isinstance(value, cst.Name) and value.value in tensorish
                    ) or self._classify(value, False)[0] == _FRESH
                    name = func.value.value
                    filled[name] = filled.get(name, True) and fresh
        lists: set[str] = set()
        for site in self.cfg.defs:
            if site.kind not in ("assign", "annassign") or site.unpacked:
                continue
            value = site.value
            if isinstance(value, cst.ListComp):
                element = value.elt
                if (isinstance(element, cst.Name) and element.value in tensorish) or self._classify(
                    element, False
                )[0] == _FRESH:
                    self.kinds[site.index] = "list"
                    lists.add(site.name)
            elif isinstance(value, cst.List) and not value.elements and filled.get(site.name):
                self.kinds[site.index] = "list"
                lists.add(site.name)
        return {name for name in lists if name not in excluded}

    def _resolve_kinds(self, flow: Dataflow, candidates: set[str]) -> None:
        """`x = x.to(...)`, `x += y`: the new binding is fresh iff the old one was."""
        pending = [
            site
            for site in self.cfg.defs
            if self.kinds.get(site.index) == "inherit" and site.name in candidates
        ]
        for _ in range(len(pending) + 1):
            progress = False
            for site in pending:
                if self.kinds[site.index] != "inherit":
                    continue
                previous = flow.reaching(flow.reach_in[site.node.index], site.name)  # type: ignore[union-attr]
                previous = [s for s in previous if s.kind not in ("unbound", "deleted")]
                states = {self.kinds.get(s.index, _OTHER) for s in previous}
                if not previous or states - {_FRESH, "inherit"}:
                    self.kinds[site.index] = _OTHER
                    progress = True
                elif states == {_FRESH}:
                    self.kinds[site.index] = _FRESH
                    progress = True
            if not progress:
                break
        for site in pending:
            if self.kinds[site.index] == "inherit":
                # A cycle of in-place updates rooted only in fresh values.
                self.kinds[site.index] = _FRESH

    def _classify(
        self, value: cst.BaseExpression | None, unpacked: bool
    ) -> tuple[str, tuple[str, ...]]:
        """What a value is: fresh tensor, a view of names, an operator, or something else."""
        if value is None:
            return _OTHER, ()
        if isinstance(value, cst.Name):
            return "view", (value.value,)
        if isinstance(value, cst.Await):
            return self._classify(value.expression, unpacked)
        if isinstance(value, cst.Subscript):
            inner, names = self._classify(value.value, False)
            if isinstance(value.value, cst.Name):
                return "view", (value.value.value,)
            if inner == _FRESH and not unpacked:
                return _FRESH, ()
            return ("view", names) if inner == "view" else (_OTHER, ())
        if isinstance(value, cst.Attribute):
            if value.attr.value in _SCALAR_ATTRIBUTES:
                return _OTHER, ()
            base = value.value
            if isinstance(base, cst.Name):
                return (_OTHER, ()) if base.value == "self" else ("view", (base.value,))
            inner, names = self._classify(base, False)
            if inner == _FRESH and not unpacked:
                return _FRESH, ()
            return ("view", names) if inner == "view" else (_OTHER, ())
        if isinstance(value, cst.Call):
            return self._classify_call(value, unpacked)
        if isinstance(value, cst.BinaryOperation):
            if isinstance(value.operator, (cst.MatrixMultiply,)):
                return _FRESH, ()
            return "binop", _operand_names(value)
        if isinstance(value, cst.UnaryOperation) and isinstance(
            value.operator, (cst.Minus, cst.BitInvert)
        ):
            return "binop", _operand_names(value.expression)
        if isinstance(value, (cst.IfExp, cst.BooleanOperation)):
            return "view", tuple(sorted(_value_names(value)))
        return _OTHER, ()

    def _classify_call(self, call: cst.Call, unpacked: bool) -> tuple[str, tuple[str, ...]]:
        func = call.func
        if isinstance(func, cst.Name):
            if func.value in _SCALAR_BUILTINS:
                return _OTHER, ()
            qualified = self.context.qualified_name(func)
            if qualified is not None and qualified.startswith("torch."):
                return self._classify_torch(qualified, call, unpacked)
            if self.rule.heavy_call(call, self.submodules):
                return _FRESH, ()
            return _OTHER, ()
        if not isinstance(func, cst.Attribute):
            return _OTHER, ()
        qualified = self.context.qualified_name(func)
        if qualified is not None and (qualified == "torch" or qualified.startswith("torch.")):
            return self._classify_torch(qualified, call, unpacked)
        method = func.attr.value
        if method == "pop" and len(call.args) == 2 and isinstance(call.args[1].value, cst.Name):
            # `x = callback_outputs.pop("x", x)`: the callback's replacement or x itself.
            return "view", (call.args[1].value.value,)
        if self.rule.heavy_call(call, self.submodules):
            return _FRESH, ()
        if method in _SCALAR_METHODS or method in _REDUCTIONS:
            return _OTHER, ()
        receiver = func.value
        if method in _VIEW_METHODS or (method.endswith("_") and not method.startswith("_")):
            if isinstance(receiver, cst.Name):
                return "view", (receiver.value,)
            inner, names = self._classify(receiver, False)
            if inner == _FRESH:
                if method in _SPLITTING and unpacked:
                    return _OTHER, ()
                return _FRESH, ()
            return ("view", names) if inner == "view" else (_OTHER, ())
        if method in _FRESH_METHODS:
            if isinstance(receiver, cst.Name) and receiver.value == "self":
                return _OTHER, ()
            if isinstance(receiver, cst.Call) and self._classify(receiver, False)[0] != _FRESH:
                return _OTHER, ()  # `torch.tensor(scale).repeat(n)`: as small as its source
            return _FRESH, ()
        return _OTHER, ()

    def _classify_torch(
        self, qualified: str, call: cst.Call, unpacked: bool
    ) -> tuple[str, tuple[str, ...]]:
        if any(qualified.startswith(prefix) for prefix in _TORCH_NOT_TENSORS):
            return _OTHER, ()
        parts = qualified.split(".")
        last = parts[-1]
        if last in _TORCH_NOT_TENSOR_FUNCTIONS or last.startswith(("is_", "get_", "set_")):
            return _OTHER, ()
        if last in _TORCH_SMALL or last in _REDUCTIONS:
            return _OTHER, ()
        if len(parts) >= 2 and parts[1] == "nn" and (len(parts) < 3 or parts[2] != "functional"):
            return _OTHER, ()  # module constructors and helpers
        if last[:1].isupper():
            return _OTHER, ()  # classes: torch.Size, torch.Generator, ...
        if last in _TORCH_VIEW_FUNCTIONS:
            names = tuple(sorted(_value_names(call.args[0].value))) if call.args else ()
            if names:
                return "view", names
            if last in _SPLITTING and unpacked:
                return _OTHER, ()
            return _FRESH, ()
        return _FRESH, ()

    # -- where names die -------------------------------------------------------------
    def _dead_points(self, flow: Dataflow, candidates: set[str]):
        """(statement, name) for the outermost statements after which a live name dies."""
        mask = 0
        for name in candidates:
            mask |= flow.name_bit(name)
        found: dict[str, list[StatementInfo]] = {}
        for info in self.cfg.statements:
            if info.exit is None or (info.exit.kind == "after" and not info.exit.preds):
                continue
            before = flow.live_in[info.entry.index]
            after = flow.live_out[info.exit.index]
            dying = before & ~after & mask
            while dying:
                low = dying & -dying
                dying ^= low
                name = self.cfg.names[low.bit_length() - 1]
                found.setdefault(name, []).append(info)
        for name, infos in found.items():
            chosen = set(map(id, infos))
            for info in infos:
                parent = info.parent
                outer = False
                while parent is not None:
                    if id(parent) in chosen:
                        outer = True
                        break
                    parent = parent.parent
                if not outer:
                    yield info, name

    # -- heavy work while the name is bound -------------------------------------------
    def _node_heavy(self, node: Node, inside: set[int]) -> tuple[str, cst.CSTNode] | None:
        if node.index in self._heavy:
            result = self._heavy[node.index]
        else:
            result = None
            for call in node.calls:
                if self.rule.heavy_call(call, self.submodules):
                    result = ("call", call)
                    break
            if result is None and node.kind in ("for", "while") and node.loop_body:
                if any(self._computes(n) for n in node.loop_body):
                    result = ("loop", node.statement)  # type: ignore[assignment]
            self._heavy[node.index] = result
        if result is not None and result[0] == "loop" and node.index in inside:
            return None  # the loop the name dies in: its own body's calls are what count
        return result

    def _computes(self, node: Node) -> bool:
        for call in node.calls:
            if self.rule.heavy_call(call, self.submodules):
                return True
            kind, _ = self._classify_call(call, False)
            if kind == _FRESH:
                return True
        return False

    def _heavy_after(self, info: StatementInfo, name: str) -> tuple[str, cst.CSTNode] | None:
        start = info.exit
        assert start is not None
        loops = {n.index for n in self.cfg.nodes if n.loop_body and start in n.loop_body}
        seen = {start.index}
        queue = deque(start.succ)
        while queue:
            node = queue.popleft()
            if node.index in seen:
                continue
            seen.add(node.index)
            heavy = self._node_heavy(node, loops)
            if heavy is not None:
                return heavy
            if any(site.name == name for site in node.defs) or any(
                site.name == name for site in node.kills
            ):
                continue
            queue.extend(node.succ)
        return None

    # -- lists consumed by a loop -----------------------------------------------------
    def _consumed_lists(self, flow: Dataflow) -> None:
        """`for tile in tiles:` over a local list of fresh tensors that nothing reads after
        the loop starts: every consumed tile stays referenced by the list until the loop
        ends. Unsafe fix: `for tile in release(tiles):`."""
        if not self.lists:
            return
        for info in self.cfg.statements:
            statement = info.statement
            if not isinstance(statement, cst.For):
                continue
            iterable = statement.iter
            if (  # `enumerate(tiles)`: release the list inside it
                isinstance(iterable, cst.Call)
                and isinstance(iterable.func, cst.Name)
                and iterable.func.value == "enumerate"
                and iterable.args
                and iterable.args[0].keyword is None
                and not iterable.args[0].star
            ):
                iterable = iterable.args[0].value
            if not isinstance(iterable, cst.Name):
                continue
            name = iterable.value
            if name not in self.lists:
                continue
            iterate = info.entry
            header = iterate.succ[0] if iterate.succ else None
            if header is None or header.kind != "for" or not header.loop_body:
                continue
            if flow.live_in[header.index] & flow.name_bit(name):
                continue  # read again in the loop, its `else` or after it
            if any(node.dynamic for node in header.loop_body):
                continue
            sites = flow.reaching(flow.reach_in[iterate.index], name)
            if not sites or any(self.kinds.get(s.index) != "list" for s in sites):
                continue
            if not any(self._computes(node) for node in header.loop_body):
                continue
            target = Target.parse(self.rule.settings["release-call"])
            reference, imports = reference_to(self.context, target, self.context.ancestors)
            start, end = self.context.span(iterable)
            fix = Fix(
                message=f"Iterate over `{reference}({name})`",
                edits=(Edit(start, end, f"{reference}({name})"),) + imports,
                applicability=Applicability.UNSAFE,
            )
            row = self.context.position(statement).start.line
            self.rule.report(
                iterable,
                f"`{name}` keeps every item alive until the loop at line {row} ends; iterate "
                f"with `{reference}({name})` to free each item once it is consumed",
                fix,
                statement=statement,
            )

    # -- reporting ---------------------------------------------------------------------
    def _report(self, groups: dict[int, list[tuple[str, StatementInfo, int]]]) -> None:
        context = self.context
        prepared = []
        suppressed: set[tuple[int, str]] = set()
        suppressions = parse_suppressions(context.source) if "noqa" in context.source else None
        for name, info, status, heavy in self._pending_reports:
            last_use, dynamic = self._last_use(info, name)
            if last_use is None:
                continue
            prepared.append((name, info, status, heavy, last_use, dynamic))
            if suppressions is not None and self._suppressed(suppressions, last_use, info):
                suppressed.add((id(info), name))
        for name, info, status, heavy, last_use, dynamic in prepared:
            last_row = context.position(last_use).start.line
            if dynamic:
                reader = context.source_of(last_use.func)  # type: ignore[attr-defined]
                last = f"last read by `{reader}()` at line {last_row}"
            else:
                last = f"last used at line {last_row}"
            kind, heavy_node = heavy
            heavy_row = context.position(heavy_node).start.line
            if kind == "loop":
                across = f"the loop at line {heavy_row}"
            else:
                callee = context.source_of(heavy_node.func)  # type: ignore[attr-defined]
                callee = " ".join(callee.split())
                if len(callee) > 40:
                    callee = callee[:37] + "..."
                across = f"`{callee}(...)` at line {heavy_row}"
            statement_row = context.position(info.statement).start.line
            if heavy_row <= statement_row:
                subject = f"`{name}` from the previous iteration ({last})"
                until = " until it is rebound"
            else:
                subject = f"`{name}` ({last})"
                until = ""
            message = f"{subject} stays alive across {across}{until}; `del` it after its last use"
            fix = None
            if status == 1:
                message += " (no fix: it is already deleted on some path)"
            elif status == 2:
                message += " (no fix: it may be unbound there)"
            elif status == 0:
                # One `del` for every name that dies here, except names whose finding is
                # suppressed by a noqa comment (their fix must not run either).
                names = [
                    n for n, _, s in groups[id(info)] if s == 0 and (id(info), n) not in suppressed
                ]
                if name not in names:
                    names = [name]
                fix = self._fix(info, names)
            self.rule.report(last_use, message, fix, statement=info.statement)

    def _suppressed(
        self, suppressions: Suppressions, node: cst.CSTNode, info: StatementInfo
    ) -> bool:
        """Whether the engine will drop this finding (the rows it checks for `# noqa`)."""
        code = self.rule.code
        if suppressions.file_suppresses(code):
            return True
        position = self.context.position(node)
        rows = {position.start.line, position.end.line}
        statement = self.context.position(info.statement)
        rows.add(statement.start.line)
        if isinstance(info.statement, cst.SimpleStatementLine):
            rows.add(statement.end.line)
        return any(suppressions.row_suppresses(row, code) for row in rows)

    def _last_use(self, info: StatementInfo, name: str) -> tuple[cst.CSTNode | None, bool]:
        """The last read of `name` inside the statement: a Name, or a `locals()`-like call
        (then the flag is True) when the name is only read dynamically."""
        context = self.context
        span = context.position(info.statement)
        low = (span.start.line, span.start.column)
        high = (span.end.line, span.end.column)
        best: cst.CSTNode | None = None
        best_key = None
        dynamic = False
        for node in self.cfg.nodes:
            reads: list[tuple[cst.CSTNode, bool]] = [
                (load, False) for load in node.loads if load.value == name
            ]
            if node.dynamic_call is not None:
                reads.append((node.dynamic_call, True))
            for read, is_dynamic in reads:
                position = context.position(read).start
                key = (position.line, position.column)
                if low <= key <= high and (best_key is None or key > best_key):
                    best, best_key, dynamic = read, key, is_dynamic
        return best, dynamic

    def _fix(self, info: StatementInfo, names: Sequence[str]) -> Fix:
        context = self.context
        offset = context.line_after(info.statement)
        prefix = ""
        if (
            offset == len(context.source)
            and context.source
            and not context.source.endswith(("\n", "\r"))
        ):
            prefix = context.newline
        indentation = context.indentation_of(info.statement)
        listed = ", ".join(names)
        code = f"{prefix}{indentation}del {listed}{context.newline}"
        edits = [Edit(offset, offset, code)]
        edits.extend(self._jump_edits(info, names))
        return Fix(
            message=f"Insert `del {listed}` after line {context.position(info.statement).end.line}",
            edits=tuple(edits),
            applicability=Applicability.SAFE,
        )

    def _jump_edits(self, info: StatementInfo, names: Sequence[str]) -> list[Edit]:
        """`break`/`continue` lines inside the statement that leave it without passing the
        `del` after it: the names dead at the jump's target get their own `del` before it."""
        assert self.flow is not None and info.exit is not None
        flow = self.flow
        low, high = info.entry.index, info.exit.index
        lines = {id(line.entry): line for line in self.cfg.statements}
        edits: list[Edit] = []
        for node in self.cfg.nodes[low : high + 1]:
            if not node.jump or not isinstance(node.statement, (cst.Break, cst.Continue)):
                continue
            if len(node.succ) != 1:
                continue
            target = node.succ[0]
            if low <= target.index <= high or target.kind not in ("after", "for", "while"):
                continue  # stays inside the statement, or crosses a `finally`
            line = lines.get(id(node))
            if (
                line is None
                or not line.insertable
                or not isinstance(line.statement, cst.SimpleStatementLine)
                or len(line.statement.body) != 1
            ):
                continue
            dead_here = []
            for name in names:
                bit = flow.name_bit(name)
                if flow.live_in[target.index] & bit:
                    continue
                sites = flow.reaching(flow.reach_in[node.index], name)
                if not sites or any(s.kind in ("unbound", "deleted") for s in sites):
                    continue
                dead_here.append(name)
            if dead_here:
                start = self.context.line_start_of(line.statement)
                indentation = self.context.indentation_of(line.statement)
                code = f"{indentation}del {', '.join(dead_here)}{self.context.newline}"
                edits.append(Edit(start, start, code))
        return edits


# -- small helpers -----------------------------------------------------------------------


def _mentions_tensor(annotation: cst.BaseExpression) -> bool:
    """`Tensor`, `torch.FloatTensor`, `Optional[Tensor]`, `Tensor | None`: a tensor itself,
    not a container of tensors (`dict[str, Tensor]` usually holds existing parameters)."""
    if isinstance(annotation, (cst.Name, cst.Attribute)):
        name = annotation.value if isinstance(annotation, cst.Name) else annotation.attr.value
        return name.endswith("Tensor")
    if isinstance(annotation, (cst.SimpleString, cst.ConcatenatedString)):
        text = annotation.evaluated_value if isinstance(annotation, cst.SimpleString) else None
        return isinstance(text, str) and text.replace(" ", "").split(".")[-1] in (
            "Tensor",
            "Optional[Tensor]",
        )
    if isinstance(annotation, cst.BinaryOperation) and isinstance(annotation.operator, cst.BitOr):
        sides = (annotation.left, annotation.right)
        return any(_mentions_tensor(side) for side in sides) and all(
            _mentions_tensor(side) or (isinstance(side, cst.Name) and side.value == "None")
            for side in sides
        )
    if isinstance(annotation, cst.Subscript):
        outer = dotted_name(annotation.value) or ""
        if outer.split(".")[-1] == "Optional" and len(annotation.slice) == 1:
            inner = annotation.slice[0].slice
            return isinstance(inner, cst.Index) and _mentions_tensor(inner.value)
    return False


def _operand_names(expr: cst.BaseExpression) -> tuple[str, ...]:
    """Names whose values an arithmetic expression combines (its direct operands)."""
    if isinstance(expr, cst.Name):
        return (expr.value,)
    if isinstance(expr, cst.BinaryOperation):
        return _operand_names(expr.left) + _operand_names(expr.right)
    if isinstance(expr, cst.UnaryOperation):
        return _operand_names(expr.expression)
    if isinstance(expr, (cst.Attribute, cst.Subscript)) and isinstance(expr.value, cst.Name):
        return (
            (expr.value.value,)
            if not (isinstance(expr, cst.Attribute) and expr.attr.value in _SCALAR_ATTRIBUTES)
            else ()
        )
    return ()


def _value_names(expr: cst.BaseExpression) -> set[str]:
    """Names an expression's value may be (the branches of `a if c else b`, `a or b`)."""
    if isinstance(expr, cst.Name):
        return {expr.value}
    if isinstance(expr, cst.IfExp):
        return _value_names(expr.body) | _value_names(expr.orelse)
    if isinstance(expr, cst.BooleanOperation):
        return _value_names(expr.left) | _value_names(expr.right)
    if isinstance(expr, (cst.Attribute, cst.Subscript)):
        return _value_names(expr.value)
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        if expr.func.attr.value in _VIEW_METHODS:
            return _value_names(expr.func.value)
    return set()
