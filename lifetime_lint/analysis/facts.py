"""The tensor-facts layer: what each binding of a function holds, which calls are heavy work,
and how the function flows, built once per function and shared by every rule.

Three kinds of facts, all from one CFG walk (`cfg.build`) and one dataflow solve
(`dataflow.solve`), memoised on the file context (`facts_for`):

- flow facts: the CFG, liveness and reaching definitions, uses, parameters, declarations,
  loop targets (`FunctionFacts.cfg`, `.flow`);
- value facts, per binding (a `DefSite`, not a name): a fresh tensor, a view or alias of
  other bindings, metadata, a container of tensors, or unknown (`FunctionFacts.value`),
  with where the value comes from (`ValueFact.origin`, for significance). Tensor-ness is
  dataflow: a value is a tensor when it comes from torch, a tensor method on a tensor, a
  module call, or an operator over tensors; `len(...)`, `a // b` over ints, `.shape[i]`,
  strings, paths, JSON decodes and unknown functions are not;
- work facts, per call (`FunctionFacts.work`): whether a call is heavy and how heavy (a
  model-level module, a layer-level submodule, an allocating torch op, a concatenation
  building an output, a collective or a helper that wraps one, a nested function that runs
  sublayers, a call through a module parameter).

Rules ask; they never re-walk the function or keep private tables (`tables.py` is the one
place that knows torch).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import libcst as cst

from lifetime_lint.analysis import tables as T
from lifetime_lint.analysis.cfg import CFG, DefSite, Node, TooLarge, build, iter_children
from lifetime_lint.analysis.dataflow import Dataflow, solve
from lifetime_lint.analysis.domain import (
    SMALL_DOMAIN,
    UNKNOWN_DOMAIN,
    file_domain,
    parameter_streams,
)
from lifetime_lint.globs import glob_matcher
from lifetime_lint.imports import dotted_name
from lifetime_lint.lazy_regex import compile_lazily
from lifetime_lint.traversal import walk

# -- value facts ---------------------------------------------------------------------------

TENSOR = "tensor"  # a tensor this binding owns (freshly produced)
VIEW = "view"  # shares storage with (or is) the values of `sources`
METADATA = "metadata"  # shapes, sizes, dtypes, devices, numbers, strings, paths
CONTAINER = "container"  # a list/tuple/dict holding tensors
UNKNOWN = "unknown"

# Where a tensor comes from: the first word of its size class (see significance.py).
DECODED = "decoded"  # decoded tiles, frames, images (a VAE or decoder output)
LOGITS = "logits"  # language-model logits
MODEL_OUTPUT = "model-output"  # the output of a model-level call
CONDITIONING = "conditioning"  # prompt/text/image embeddings, encoder outputs
LATENTS = "latents"  # latents, noise, predictions in latent space
ACTIVATION = "activation"  # a layer activation: submodule output, operator result
CONCATENATION = "concatenation"  # torch.cat of activations
ALLOCATION = "allocation"  # torch.empty/zeros(...) of a computed shape
CACHE_ENTRY = "cache-entry"  # an element taken out of a container (a cache slot)
IMAGE = "image"  # one preprocessed image (pixels of a single frame)
DECODED_IMAGE = "decoded-image"  # decoded tiles or images of an image model (one frame)
SMALL_MODEL = "small-model"  # an activation of a small model family (audio, detection)
SMALL = "small"  # reductions, ids, masks, positions: never worth a finding


@dataclass(frozen=True)
class ValueFact:
    kind: str
    origin: str = ACTIVATION
    # VIEW: the bindings whose storage this value shares (empty: a piece of a temporary
    # that several bindings share, `a, b = f(x).chunk(2)`).
    sources: tuple[DefSite, ...] = ()
    # VIEW: whether the sources are tensors (False: unknown receivers).
    tensor: bool = False
    # `x = c[k]`: the container name and the index's source text (ownership transfer).
    borrowed: tuple[str, str] | None = None
    # An element of these container bindings (or a view of one): `c[i]`, a loop target
    # over `c`. It keeps that element alive, not the container.
    element_of: tuple[DefSite, ...] = ()
    # In host (CPU) memory: a torch factory called without a device in a file that sets no
    # default device, an image or video processor's output before it is moved. It holds no
    # GPU memory; moving it (`.to(device)`, `.cuda()`) makes a value that is not host.
    host: bool = False

    @property
    def is_tensor(self) -> bool:
        return self.kind == TENSOR or (self.kind == VIEW and self.tensor)


_UNKNOWN = ValueFact(UNKNOWN)
_METADATA = ValueFact(METADATA)


# -- work facts ----------------------------------------------------------------------------

NONE, LIGHT, LAYER, PEAK, MODEL = range(5)
LEVEL_NAMES = ("none", "light", "layer", "peak", "model")


@dataclass(frozen=True)
class Work:
    """How heavy one call (or loop) is: `level` (NONE..MODEL) and what kind of work."""

    level: int
    kind: str  # model, decode, encoder, collective, concatenation, torch-op, submodule,
    # closure, module-parameter, loop, none
    by_pattern: bool = False  # model-level only because its name matches MODEL_CALLS
    parts: tuple[str, ...] = ()  # the callee's dotted name, split
    # What sized it down from its callee's name (`_sized_by_inputs`): "conditioning" (its
    # input is the text/conditioning stream), "tiny" (its inputs are ids, sizes, masks),
    # "in-place" (a collective that reduces into its input), "large" (sized up: its input
    # is decoded frames or logits); "" when nothing did.
    sized_by: str = ""


_NO_WORK = Work(NONE, "none")


# -- per-file facts ------------------------------------------------------------------------


@dataclass
class ClassFacts:
    submodules: frozenset[str]  # attributes assigned in __init__ (minus methods)
    registered: frozenset[str]  # diffusers' register_modules(...) components
    light: bool  # a tokenizer/processor/scheduler class that is not a network
    methods: dict[str, cst.FunctionDef] = field(default_factory=dict)
    # Submodules built for the latent's channels (`_latent_channel_modules`): those whose
    # output is latent-sized (an unpatchifying `proj_out`) and those whose input is.
    latent_outputs: frozenset[str] = frozenset()
    latent_inputs: frozenset[str] = frozenset()
    # Pointwise convolutions that keep the channel count (`Conv3d(c, c, kernel_size=1)`):
    # a per-pixel projection, light work like a linear projection.
    pointwise: frozenset[str] = frozenset()


@dataclass
class FileFacts:
    """Facts about the module around the functions (classes, module-level aliases)."""

    module: cst.Module
    classes: dict[int, ClassFacts] = field(default_factory=dict)
    owners: dict[int, cst.ClassDef | None] = field(default_factory=dict)
    dynamic_aliases: frozenset[str] = frozenset()
    functions: dict[int, FunctionFacts | None] = field(default_factory=dict)
    # Helpers defined in this file: what they return and the heaviest work they do
    # (one level deep: a helper's own helpers are not followed).
    module_functions: dict[str, cst.FunctionDef] | None = None
    returns: dict[int, ValueFact] = field(default_factory=dict)
    helper_work: dict[int, Work] = field(default_factory=dict)
    return_items: dict[int, tuple[ValueFact, ...] | None] = field(default_factory=dict)
    returns_pieces: dict[int, bool] = field(default_factory=dict)
    returned_parameters: dict[int, str | None] = field(default_factory=dict)
    resolving: set[int] = field(default_factory=set)


MEMO_KEY = "analysis.facts"


def file_facts(context) -> FileFacts:
    facts = context.memo.get(MEMO_KEY)
    if facts is None:
        facts = FileFacts(context.module, dynamic_aliases=_dynamic_aliases(context.module.body))
        _index_owners(context.module, facts.owners)
        context.memo[MEMO_KEY] = facts
    return facts


def is_split_call(value: cst.BaseExpression | None) -> bool:
    """`x.chunk(6, dim=1)`, `torch.split(x, n)`, `x.unbind(2)`: a tuple of views of one
    storage."""
    if not isinstance(value, cst.Call):
        return False
    func = value.func
    if isinstance(func, cst.Attribute):
        return func.attr.value in T.SPLITTING
    return isinstance(func, cst.Name) and func.value in T.SPLITTING


def facts_for(context, function: cst.FunctionDef, max_nodes: int = 4000) -> FunctionFacts | None:
    """The facts of one function, built on first request (None: too large to analyse)."""
    shared = file_facts(context)
    key = id(function)
    if key in shared.functions:
        return shared.functions[key]
    try:
        cfg = build(function, max_nodes)
    except (TooLarge, RecursionError):
        shared.functions[key] = None
        return None
    facts = FunctionFacts(context, shared, cfg)
    shared.functions[key] = facts
    return facts


_STATEMENT_CONTAINERS = (
    cst.Module,
    cst.BaseSuite,
    cst.BaseCompoundStatement,
    cst.Else,
    cst.ExceptHandler,
    cst.Finally,
)
# Per node type: whether statements (and so functions) can be below it. isinstance()
# against LibCST's abstract base classes is slow, and a module has tens of thousands of
# nodes; the answer per type is not.
_HOLDS_STATEMENTS: dict[type, bool] = {}


def _index_owners(module: cst.Module, owners: dict[int, cst.ClassDef | None]) -> None:
    """The class each function is (directly or through nesting) defined in."""
    holds = _HOLDS_STATEMENTS
    stack: list[tuple[cst.CSTNode, cst.ClassDef | None]] = [(module, None)]
    while stack:
        node, owner = stack.pop()
        node_type = type(node)
        if node_type is cst.ClassDef:
            owner = node  # type: ignore[assignment]
        elif node_type is cst.FunctionDef:
            owners[id(node)] = owner
        container = holds.get(node_type)
        if container is None:
            container = holds[node_type] = issubclass(node_type, _STATEMENT_CONTAINERS)
        if container:
            stack.extend((child, owner) for child in iter_children(node))


def _dynamic_aliases(body: Iterable[cst.CSTNode]) -> frozenset[str]:
    """Names bound to `eval`, `locals`, ... (`ev = eval`): calling them reads every local."""
    names: set[str] = set()
    for statement in body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, cst.Assign) and _is_dynamic_callee(small.value):
                for target in small.targets:
                    if isinstance(target.target, cst.Name):
                        names.add(target.target.value)
    return frozenset(names)


_DYNAMIC_CALLEES = frozenset({"locals", "vars", "eval", "exec"})
_DYNAMIC_DOTTED = frozenset({"sys._getframe", "inspect.currentframe"})


def _is_dynamic_callee(value: cst.BaseExpression) -> bool:
    if isinstance(value, cst.Name):
        return value.value in _DYNAMIC_CALLEES
    return dotted_name(value) in _DYNAMIC_DOTTED


# -- `locals()[k]` in diffusers' step-end callback loop -------------------------------------
#     for k in callback_on_step_end_tensor_inputs:
#         callback_kwargs[k] = locals()[k]
# where `self.check_inputs(..., callback_on_step_end_tensor_inputs)` raises unless every
# name is in the class-level `_callback_tensor_inputs = ["latents", ...]`: the call reads
# only those names, not every local.


def _narrow_callback_locals(facts: FunctionFacts) -> None:
    cfg = facts.cfg
    assert facts.owner is not None
    allowed_of: dict[str, frozenset[str] | None] = {}
    aliases = set(facts.shared.dynamic_aliases)
    aliases.update(
        site.name
        for site in cfg.defs
        if site.value is not None and site.kind == "assign" and _is_dynamic_callee(site.value)
    )
    for header in cfg.nodes:
        if header.kind != "for" or not header.loop_body:
            continue
        statement = header.statement
        if not isinstance(statement, cst.For) or not isinstance(statement.target, cst.Name):
            continue
        key = statement.target.value
        parameter = _iterated_parameter(statement.iter)
        if parameter is None or parameter not in cfg.parameters:
            continue
        body = header.loop_body
        if any(site.name == key for node in body for site in (*node.defs, *node.kills)):
            continue  # `k` is rebound inside the loop
        narrowed = [node for node in body if node.dynamic and _reads_locals_at(node, key, aliases)]
        if not narrowed:
            continue
        if parameter not in allowed_of:
            allowed_of[parameter] = _checked_names(facts, parameter, statement)
        allowed = allowed_of[parameter]
        if allowed is None:
            continue
        for node in narrowed:
            node.dynamic = False
            node.dynamic_names = node.dynamic_names | allowed


def _iterated_parameter(iterable: cst.BaseExpression) -> str | None:
    """`for k in names` or `for k in names or []`: the name iterated."""
    if (
        isinstance(iterable, cst.BooleanOperation)
        and isinstance(iterable.operator, cst.Or)
        and isinstance(iterable.right, (cst.List, cst.Tuple))
        and not iterable.right.elements
    ):
        iterable = iterable.left
    return iterable.value if isinstance(iterable, cst.Name) else None


def _reads_locals_at(node: Node, key: str, aliases: set[str]) -> bool:
    """Whether every dynamic call of the node (`aliases`: names bound to `eval`, ...) is a
    `locals()[key]` or `locals().get(key)`."""
    if node.statement is None:
        return False
    narrow: set[int] = set()
    dynamic: list[cst.Call] = []

    def enter(current: cst.CSTNode) -> None:
        if isinstance(current, cst.Call):
            func = current.func
            name = func.value if isinstance(func, cst.Name) else None
            if name is None:
                name = dotted_name(func) if isinstance(func, cst.Attribute) else None
            if name in _DYNAMIC_NAMES_ANY or name in aliases:
                dynamic.append(current)
            if (
                isinstance(func, cst.Attribute)
                and func.attr.value == "get"
                and _is_locals_call(func.value)
                and current.args
                and _is_name(current.args[0].value, key)
                and current.args[0].keyword is None
                and not current.args[0].star
            ):
                narrow.add(id(func.value))
        elif isinstance(current, cst.Subscript) and _is_locals_call(current.value):
            if len(current.slice) == 1:
                inner = current.slice[0].slice
                if isinstance(inner, cst.Index) and _is_name(inner.value, key):
                    narrow.add(id(current.value))

    walk(node.statement, enter, _no_leave)
    return bool(dynamic) and all(id(call) in narrow for call in dynamic)


_DYNAMIC_NAMES_ANY = frozenset(
    {"locals", "vars", "eval", "exec", "dir", "globals"}
    | {"sys._getframe", "inspect.currentframe", "inspect.stack", "inspect.getouterframes"}
)


def _no_leave(node: cst.CSTNode) -> None:
    return None


def _is_locals_call(value: cst.BaseExpression) -> bool:
    return (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Name)
        and value.func.value == "locals"
        and not value.args
    )


def _is_name(value: cst.BaseExpression, name: str) -> bool:
    return isinstance(value, cst.Name) and value.value == name


def _checked_names(facts: FunctionFacts, parameter: str, loop: cst.For) -> frozenset[str] | None:
    """The names `parameter` can hold at `loop`: a top-level `self.check_inputs(...)` of
    the function, before the loop and after every rebinding of the parameter, passes it to
    a `check_inputs` of the same class that raises unless each is in a class-level list of
    string literals (`_callback_tensor_inputs`) or a literal list; or the function has
    that guard itself, at top level. None: not provable."""
    owner = facts.owner
    assert owner is not None
    statements = list(facts.function.body.body)
    check_at = None
    allowed: frozenset[str] | None = None
    for position, statement in enumerate(statements):
        if isinstance(statement, cst.If) and statement.orelse is None:
            # The same guard inline (Kandinsky 2.2: `if p is not None and not all(...)`).
            allowed = _guard_names(statement.test, parameter, owner)
            if allowed is not None and _raises(statement.body):
                check_at = position
                break
            allowed = None
        checked = _check_inputs_argument(statement, parameter, owner)
        if checked is not None:
            check = _method(owner, "check_inputs")
            allowed = _raises_unless_in(check, checked, owner) if check is not None else None
            check_at = position
            break
    if check_at is None or allowed is None:
        return None
    loop_at = next((i for i, s in enumerate(statements) if _contains(s, loop)), None)
    if loop_at is None or loop_at <= check_at:
        return None
    # No rebinding (or `del`) of the parameter at or after the check.
    rebound: set[int] = set()
    for node in facts.cfg.nodes:
        if node.statement is not None and any(
            site.name == parameter for site in (*node.defs, *node.kills)
        ):
            rebound.add(id(node.statement))
    for statement in statements[check_at:]:
        if rebound and _contains_any(statement, rebound):
            return None
    return allowed


def _check_inputs_argument(
    statement: cst.CSTNode, parameter: str, owner: cst.ClassDef
) -> str | None:
    """`self.check_inputs(a, names, ...)` as a statement: the check_inputs parameter that
    receives `parameter`."""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return None
    small = statement.body[0]
    if not isinstance(small, cst.Expr) or not isinstance(small.value, cst.Call):
        return None
    call = small.value
    func = call.func
    if not (
        isinstance(func, cst.Attribute)
        and func.attr.value == "check_inputs"
        and _is_name(func.value, "self")
    ):
        return None
    check = _method(owner, "check_inputs")
    if check is None:
        return None
    names = [p.name.value for p in (*check.params.posonly_params, *check.params.params)]
    if names and names[0] in ("self", "cls"):
        names = names[1:]
    keywords = {p.name.value for p in check.params.kwonly_params} | set(names)
    for position, arg in enumerate(call.args):
        if arg.star:
            return None
        if not _is_name(arg.value, parameter):
            continue
        if arg.keyword is not None:
            return arg.keyword.value if arg.keyword.value in keywords else None
        if any(a.keyword is not None for a in call.args[:position]):
            return None
        return names[position] if position < len(names) else None
    return None


def _method(owner: cst.ClassDef, name: str) -> cst.FunctionDef | None:
    found = [s for s in owner.body.body if isinstance(s, cst.FunctionDef) and s.name.value == name]
    return found[0] if len(found) == 1 else None


def _raises_unless_in(
    check: cst.FunctionDef, parameter: str, owner: cst.ClassDef
) -> frozenset[str] | None:
    """A top-level `if [parameter is not None and] not all(k in ALLOWED for k in
    parameter): raise ...` of `check`, before any `return`: the strings of ALLOWED."""
    body = check.body.body
    for statement in body:
        if isinstance(statement, cst.If) and statement.orelse is None:
            allowed = _guard_names(statement.test, parameter, owner)
            if allowed is not None and _raises(statement.body):
                return allowed
        if _contains_return(statement):
            return None
    return None


def _guard_names(
    test: cst.BaseExpression, parameter: str, owner: cst.ClassDef
) -> frozenset[str] | None:
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        left = test.left
        if not (
            isinstance(left, cst.Comparison)
            and _is_name(left.left, parameter)
            and len(left.comparisons) == 1
            and isinstance(left.comparisons[0].operator, cst.IsNot)
            and _is_name(left.comparisons[0].comparator, "None")
        ):
            return None
        test = test.right
    if not (isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not)):
        return None
    call = test.expression
    if not (
        isinstance(call, cst.Call)
        and _is_name(call.func, "all")
        and len(call.args) == 1
        and isinstance(call.args[0].value, (cst.GeneratorExp, cst.ListComp))
    ):
        return None
    comprehension = call.args[0].value
    for_in = comprehension.for_in
    if (
        for_in.inner_for_in is not None
        or for_in.ifs
        or not isinstance(for_in.target, cst.Name)
        or not _is_name(for_in.iter, parameter)
    ):
        return None
    element = comprehension.elt
    if not (
        isinstance(element, cst.Comparison)
        and _is_name(element.left, for_in.target.value)
        and len(element.comparisons) == 1
        and isinstance(element.comparisons[0].operator, cst.In)
    ):
        return None
    allowed = element.comparisons[0].comparator
    if (
        isinstance(allowed, cst.Attribute)
        and isinstance(allowed.value, cst.Name)
        and allowed.value.value in ("self", "cls")
    ):
        return _class_strings(owner, allowed.attr.value)
    return _strings(allowed)


def _strings(value: cst.BaseExpression) -> frozenset[str] | None:
    if not isinstance(value, (cst.List, cst.Tuple, cst.Set)):
        return None
    names: set[str] = set()
    for element in value.elements:
        if not isinstance(element, cst.Element) or not isinstance(element.value, cst.SimpleString):
            return None
        text = element.value.evaluated_value
        if not isinstance(text, str):
            return None
        names.add(text)
    return frozenset(names)


def _class_strings(owner: cst.ClassDef, attribute: str) -> frozenset[str] | None:
    """A class-level `attribute = [strings]` never assigned through `self.` in the class."""
    values: list[cst.BaseExpression] = []
    for statement in owner.body.body:
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Assign):
                    if any(_is_name(t.target, attribute) for t in small.targets):
                        values.append(small.value)
                elif isinstance(small, cst.AnnAssign) and _is_name(small.target, attribute):
                    if small.value is None:
                        return None
                    values.append(small.value)
    if len(values) != 1:
        return None
    stored = False

    def enter(node: cst.CSTNode) -> None:
        nonlocal stored
        if isinstance(node, (cst.AssignTarget, cst.AnnAssign, cst.AugAssign)):
            target = node.target
            if isinstance(target, cst.Attribute) and target.attr.value == attribute:
                stored = True

    walk(owner, enter, _no_leave)
    return None if stored else _strings(values[0])


def _raises(body: cst.BaseSuite) -> bool:
    if not isinstance(body, cst.IndentedBlock):
        return isinstance(body, cst.SimpleStatementSuite) and any(
            isinstance(s, cst.Raise) for s in body.body
        )
    return any(
        isinstance(line, cst.SimpleStatementLine)
        and any(isinstance(s, cst.Raise) for s in line.body)
        for line in body.body
    )


def _contains(root: cst.CSTNode, target: cst.CSTNode) -> bool:
    return _contains_any(root, {id(target)})


def _contains_any(root: cst.CSTNode, targets: set[int]) -> bool:
    found = False

    def enter(node: cst.CSTNode) -> None:
        nonlocal found
        found = found or id(node) in targets

    walk(root, enter, _no_leave)
    return found


def _contains_return(root: cst.CSTNode) -> bool:
    found = False

    def enter(node: cst.CSTNode) -> None:
        nonlocal found
        found = found or isinstance(node, cst.Return)

    walk(root, enter, _no_leave)
    return found


def class_facts(context, owner: cst.ClassDef | None) -> ClassFacts | None:
    if owner is None:
        return None
    shared = file_facts(context)
    facts = shared.classes.get(id(owner))
    if facts is None:
        submodules: set[str] = set()
        registered: set[str] = set()
        for statement in owner.body.body:
            if isinstance(statement, cst.FunctionDef) and statement.name.value == "__init__":
                _assigned_submodules(statement, submodules, registered)
        method_defs = {s.name.value: s for s in owner.body.body if isinstance(s, cst.FunctionDef)}
        methods = set(method_defs)
        bases = [(dotted_name(base.value) or "").rsplit(".", 1)[-1] for base in owner.bases]
        names = [owner.name.value] + bases
        light = any(_glob_any(n.lower(), T.LIGHT_OWNERS) for n in names) and not any(
            n.endswith(("Module", "Model", "Mixin")) for n in names
        )
        outputs, inputs, pointwise = _channel_modules(method_defs.get("__init__"))
        facts = ClassFacts(
            frozenset((submodules | registered) - methods),
            frozenset(registered),
            light,
            method_defs,
            outputs,
            inputs,
            pointwise,
        )
        shared.classes[id(owner)] = facts
    return facts


def _channel_modules(
    init: cst.FunctionDef | None,
) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """The submodules `__init__` builds, read from their channel arguments: those whose
    output is latent-sized (`self.proj_out = nn.Linear(inner_dim, patch_size * patch_size *
    out_channels)` unpatchifies tokens back to latent channels: the latent's elements, not
    the hidden width's), those whose input is (`self.conv_in = Conv3d(z_channels, block_in,
    3)` takes a latent), and pointwise convolutions that keep the channel count
    (`self.conv3 = Conv3d(c, c, kernel_size=(1, 1, 1))`)."""
    if init is None:
        return frozenset(), frozenset(), frozenset()
    outputs: set[str] = set()
    inputs: set[str] = set()
    pointwise: set[str] = set()
    assigns: list[cst.Assign] = []
    walk(init.body, lambda n: assigns.append(n) if type(n) is cst.Assign else None, _ignore)
    for assign in assigns:
        if len(assign.targets) != 1:
            continue
        target = assign.targets[0].target
        value = assign.value
        if not (
            isinstance(target, cst.Attribute)
            and isinstance(target.value, cst.Name)
            and target.value.value == "self"
            and isinstance(value, cst.Call)
        ):
            continue
        positional = [a.value for a in value.args if a.keyword is None and not a.star]
        if len(positional) < 2:
            continue
        name = target.attr.value
        texts = [_source_words(c) for c in positional[:2]]
        if _LATENT_CHANNEL_WORDS & texts[0]:
            inputs.add(name)
        out = texts[1]
        if _LATENT_CHANNEL_WORDS & out or (
            any("patch" in word for word in out)
            and out & {"out_channels", "in_channels", "channels"}
        ):
            outputs.add(name)
        kernel = next(
            (
                a.value
                for a in value.args
                if a.keyword is not None and a.keyword.value == "kernel_size"
            ),
            positional[2] if len(positional) > 2 else None,
        )
        if (
            kernel is not None
            and _all_ones(kernel)
            and _EMPTY_MODULE.code_for_node(positional[0])
            == _EMPTY_MODULE.code_for_node(positional[1])
        ):
            pointwise.add(name)
    return frozenset(outputs), frozenset(inputs), frozenset(pointwise)


_EMPTY_MODULE = cst.Module(body=[])
_MODEL_KINDS = frozenset(["model", "decode", "encode", "encoder"])


def _all_ones(expr: cst.BaseExpression) -> bool:
    """`1`, `(1, 1, 1)`: a kernel of one pixel."""
    if isinstance(expr, cst.Integer):
        return expr.value == "1"
    if isinstance(expr, cst.Tuple) and expr.elements:
        return all(_all_ones(e.value) for e in expr.elements)
    return False


_LATENT_CHANNEL_WORDS = frozenset(["z_channels", "z_dim", "latent_channels", "latent_dim"])


def _source_words(expr: cst.BaseExpression) -> set[str]:
    """The names an expression reads (`config.z_channels` -> {"config", "z_channels"})."""
    words: set[str] = set()

    def enter(node: cst.CSTNode) -> None:
        if type(node) is cst.Name:
            words.add(node.value.lower())

    walk(expr, enter, _ignore)
    return words


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


def _assigned_submodules(init: cst.FunctionDef, names: set[str], registered: set[str]) -> None:
    """`self.x = <not a literal>` and `register_modules(x=...)` in an `__init__`."""
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
                    and not _is_tensor_constructor(node.value)
                ):
                    names.add(t.attr.value)
        elif isinstance(node, cst.Expr) and isinstance(node.value, cst.Call):
            name = dotted_name(node.value.func)
            if name is not None and name.endswith("register_modules"):
                registered.update(a.keyword.value for a in node.value.args if a.keyword is not None)
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


def _is_tensor_constructor(value: cst.BaseExpression) -> bool:
    """`nn.Parameter(...)`, `torch.zeros(...)`: a parameter or buffer, not a submodule."""
    if not isinstance(value, cst.Call):
        return False
    name = dotted_name(value.func) or ""
    parts = name.split(".")
    if parts[-1] in ("Parameter", "Buffer", "tensor", "as_tensor"):
        return True
    return parts[0] == "torch" and len(parts) > 1 and parts[1] != "nn"


def _glob_any(name: str, patterns: tuple[str, ...]) -> bool:
    """Whether `name` matches any of the glob `patterns` (`fnmatchcase`'s answer; matched
    by string tests, see `lifetime_lint.globs`)."""
    return glob_matcher(patterns)(name)


# -- the facts of one function ---------------------------------------------------------------


@dataclass(frozen=True)
class Store:
    """`container[index] = value` (or one element of a tuple target)."""

    node: Node
    container: str
    index: str
    value: cst.BaseExpression | None  # None: an element of an unpacking


class FunctionFacts:
    """Everything the rules ask about one function. Cheap to create: the dataflow, the value
    facts and the work facts are computed on first request."""

    def __init__(self, context, shared: FileFacts, cfg: CFG) -> None:
        self.context = context
        self.shared = shared
        self.cfg = cfg
        self.function = cfg.function
        self.owner = shared.owners.get(id(cfg.function))
        self.owner_facts = class_facts(context, self.owner)
        self._flow: Dataflow | None = None
        self._values: dict[int, ValueFact] = {}
        self._in_progress: set[int] = set()
        self._work: dict[int, Work] = {}
        self._node_work: dict[int, Work] = {}
        self._stores: list[Store] | None = None
        self._aliases: dict[int, list[DefSite]] | None = None
        self._contents: dict[int, list[ValueFact]] | None = None
        self._shared_elements: set[int] = set()
        # What each container binding is given after it is bound (`append`, `c[k] = v`):
        # the expressions and where they run (`element_holders`).
        self._puts: dict[int, list[tuple[cst.BaseExpression, Node]]] = {}
        self._call_nodes: dict[int, Node] | None = None
        self._comprehension: dict[str, ValueFact] = {}  # targets of the comprehension in scan
        self._escaped: set[int] | None = None
        self._truth_tested: set[int] | None = None
        self._nested: dict[str, cst.FunctionDef] = {}
        self._module_params: set[str] | None = None
        self._loop_modules: dict[str, Work] | None = None
        self._kernel_dsl: bool | None = None
        self._decoder_inputs: set[int] | None = None
        self._mark_dynamic_aliases()
        if self.owner is not None and any(node.dynamic for node in cfg.nodes):
            _narrow_callback_locals(self)

    def _text_stream_parameter(self, name: str) -> bool:
        """Whether `name` is a parameter of a `forward` that every call in this file passes
        the text stream (`domain.parameter_streams`)."""
        if self.owner is None or self.function.name.value != "forward":
            return False
        streams = parameter_streams(self.context.module, self.context.memo)
        return (self.owner.name.value, name) in streams

    def _reads_text(self, call: cst.Call, node: Node) -> bool:
        """A module call over strings (`self.byte5(byte5_texts)`): a text encoder."""
        first = next((a.value for a in call.args if a.keyword is None and not a.star), None)
        if first is None:
            return False
        if isinstance(first, (cst.SimpleString, cst.FormattedString)):
            return True
        if isinstance(first, cst.Name):
            words = set(first.value.lower().split("_"))
            return bool(words & {"text", "texts", "prompt", "prompts", "caption", "captions"}) and (
                self.expression(first, node).kind in (METADATA, UNKNOWN)
            )
        return False

    @property
    def _in_autoencoder(self) -> bool:
        name = self.owner.name.value.lower() if self.owner is not None else ""
        return "autoencoder" in name or "vae" in name

    @property
    def kernel_dsl(self) -> bool:
        """A kernel-DSL body (Triton, Helion, TileLang, CuTe...): its "tensors" are per-tile
        values in registers or shared memory, not tensors a `del` could free. Known by a
        decorator from such a package (`@triton.jit`, `@helion.kernel`) or by calls into
        its language module (`hl.tile(...)`, `tl.load(...)`) in the body."""
        if self._kernel_dsl is None and not _imports_a_kernel_package(self.context):
            self._kernel_dsl = False  # every name below resolves through an import
        if self._kernel_dsl is None:
            found = any(
                _is_kernel_dsl_name(self.context.qualified_name(_decorator_callee(d)) or "")
                for d in self.function.decorators
            )
            if not found:
                found = any(
                    _is_kernel_language(self.context.qualified_name(call.func) or "")
                    for node in self.cfg.nodes
                    for call in node.calls
                    if isinstance(call.func, cst.Attribute)
                )
            self._kernel_dsl = found
        return self._kernel_dsl

    # -- flow facts ----------------------------------------------------------------------
    @property
    def flow(self) -> Dataflow:
        if self._flow is None:
            self._flow = solve(self.cfg)
        return self._flow

    def reaching(self, node: Node, name: str, real: bool = True) -> list[DefSite]:
        """The bindings of `name` that may be current when `node` runs."""
        flow = self.flow
        sites = flow.reaching(flow.reach_in[node.index], name)
        if real:
            sites = [s for s in sites if s.kind not in ("unbound", "deleted")]
        return sites

    def _mark_dynamic_aliases(self) -> None:
        """`ev = eval; ev(...)` reads every local like `eval(...)` does (issue 10)."""
        aliases = set(self.shared.dynamic_aliases)
        for site in self.cfg.defs:
            if site.kind == "assign" and site.value is not None and not site.unpacked:
                if _is_dynamic_callee(site.value):
                    aliases.add(site.name)
        if not aliases:
            return
        for node in self.cfg.nodes:
            for call in node.calls:
                if isinstance(call.func, cst.Name) and call.func.value in aliases:
                    node.dynamic = True
                    node.dynamic_call = node.dynamic_call or call

    # -- value facts ---------------------------------------------------------------------
    def value(self, site: DefSite) -> ValueFact:
        """What a binding holds."""
        cached = self._values.get(site.index)
        if cached is not None:
            return cached
        if self._contents is None:
            self._fill_contents()  # first, from a clean state (`_fill_contents`)
            cached = self._values.get(site.index)
            if cached is not None:
                return cached
        if site.index in self._in_progress:
            return _UNKNOWN  # a cycle (`x = x + 1` in a loop): no evidence from itself
        self._in_progress.add(site.index)
        try:
            fact = self._site_value(site)
        finally:
            self._in_progress.discard(site.index)
        self._values[site.index] = fact
        return fact

    def feeds_decoder(self, site: DefSite) -> bool:
        """Whether the binding, or a slice or view of it, is the main input of a decoder
        call (`self.decoder(x[:, :, i : i + 1])`, `self.vae.decode(z)`) or of a submodule
        built to take the latent's channels (`self.conv_in = Conv3d(z_channels, ...)`): a
        decoder's input is a latent, z_dim channels at 1/8 of the spatial and 1/4 of the
        temporal resolution of the video it decodes (about 1/50 of it), whatever op made it
        (`x = self.post_quant_conv(z)`, one latent frame, one tile's latents)."""
        if self._decoder_inputs is None:
            self._decoder_inputs = set()
            for node in self.cfg.nodes:
                for call in node.calls:
                    if not self._latent_channel_call(call, outputs=False):
                        if not _names_a_decoder(call.func):
                            continue
                        work = self.work(call)
                        if work.level != MODEL or work.kind != "decode":
                            continue
                    name = _base_name(_main_argument(call))
                    if name is not None:
                        self._decoder_inputs.update(s.index for s in self.reaching(node, name))
        return site.index in self._decoder_inputs

    def read_by_model(self, name: str) -> bool:
        """Whether a model-level call of the function (not a collective, not a helper of the
        file) reads `name` in
        its arguments (`self.vae.encode(control_video)`): the value is on the model's
        device, whatever made it."""
        for node in self.cfg.nodes:
            for call in node.calls:
                if not any(_reads_name(a.value, name) for a in call.args):
                    continue
                work = self.work(call)
                if work.level == MODEL and work.kind in _MODEL_KINDS:
                    return True  # (a helper may move it first: `prepare_latents(video)`)
        return False

    def _latent_channel_call(self, call: cst.Call, outputs: bool) -> bool:
        """`self.proj_out(x)` (`outputs`) or `self.conv_in(z)`: a call of a submodule that
        `__init__` built for the latent's channels (`_latent_channel_modules`)."""
        owner = self.owner_facts
        func = call.func
        if owner is None or not isinstance(func, cst.Attribute):
            return False
        if not (isinstance(func.value, cst.Name) and func.value.value == "self"):
            return False
        built = owner.latent_outputs if outputs else owner.latent_inputs
        return func.attr.value in built

    def _site_value(self, site: DefSite) -> ValueFact:
        kind = site.kind
        if kind == "param":
            if site.annotation is not None and _annotation_is_tensor(site.annotation):
                return ValueFact(VIEW, ACTIVATION, (), tensor=True)  # the caller owns it
            if site.annotation is not None and _annotation_is_scalar(site.annotation):
                return _METADATA  # `stage_axis: int`: the signature's word
            if self._text_stream_parameter(site.name):
                # `y` of `CrossAttention.forward(self, x, y)`, called only as
                # `self.cross_attn(x, context)`: the caller's text context.
                return ValueFact(VIEW, CONDITIONING, (), tensor=True)
            return _UNKNOWN
        if kind in ("unbound", "deleted", "import", "def", "class", "except", "match"):
            return _UNKNOWN
        node = site.node
        assert node is not None
        if kind == "for":
            if _is_range_call(site.value):
                return _METADATA  # `for start in range(0, n, step)`: an int
            # A loop target borrows an element of the iterable (never owns it).
            element = self.element_of(site.value, node)
            return ValueFact(
                VIEW,
                element.origin,
                (),
                tensor=element.is_tensor,
                element_of=self._containers_iterated(site.value, node),
            )
        if kind == "with":
            return _UNKNOWN
        if kind == "augassign":
            previous = self.reaching(node, site.name)
            facts = [self.value(s) for s in previous]
            other = self.expression(site.value, node) if site.value is not None else _UNKNOWN
            if previous and all(f.kind == TENSOR for f in facts):
                return ValueFact(TENSOR, facts[0].origin)  # in place: still the same owner
            if (previous and any(f.is_tensor for f in facts)) or other.is_tensor:
                return ValueFact(VIEW, ACTIVATION, tuple(previous), tensor=True)
            if facts and all(f.kind == METADATA for f in facts):
                return _METADATA
            return _UNKNOWN
        if isinstance(site.value, cst.Call) and not site.unpacked:
            given = self._argument_returned_as_given(site.value)
            if given is not None:
                # `tile = self.blend_v(above, tile, extent)` where the helper writes into
                # `tile` and returns it: the same tensor, not a fresh one.
                return self.expression(given, node)
        fact = self.expression(site.value, node, unpacked=site.unpacked)
        if fact.kind == UNKNOWN and isinstance(site.value, cst.Call):
            rebound = self._rebound_through_call(site, site.value, node)
            if rebound is not None:
                return rebound
        if (
            site.annotation is not None
            and fact.kind == UNKNOWN
            and isinstance(site.value, (cst.Call, cst.Await))
            and _annotation_is_tensor(site.annotation)
        ):
            return ValueFact(TENSOR, ACTIVATION)  # `x: torch.Tensor = helper(...)`
        if site.annotation is not None and fact.kind in (TENSOR, VIEW, CONTAINER, UNKNOWN):
            if _annotation_is_scalar(site.annotation):
                return _METADATA  # `backend: str = decode_backend(config)`: the author's word
            if (
                fact.kind == TENSOR
                and isinstance(site.value, cst.Call)
                and self.work(site.value).by_pattern
                and _annotation_is_object(site.annotation)
            ):
                # `req: EngineCoreRequest = add_request_decoder.decode(frames)`: a call named
                # like a decoder whose result the author annotates as a non-tensor class.
                return _UNKNOWN
        if site.unpacked and isinstance(site.value, cst.Call):
            callee = self.local_callee(site.value)
            if callee is not None and self.helper_returns_pieces(callee):
                # `shift, scale, gate = self.get_ada_values(...)`, a helper returning
                # `values.unbind(dim=2)`: pieces of one storage, whatever it is annotated
                return ValueFact(VIEW, ACTIVATION, (), tensor=True)
            item = self._returned_item(site, site.value)
            if item is not None:
                return item
        if site.unpacked and fact.kind == CONTAINER:
            element = self._container_element(fact)
            return ValueFact(VIEW, element.origin, fact.sources, tensor=element.is_tensor)
        if site.unpacked and fact.kind == TENSOR and isinstance(site.value, (cst.Tuple, cst.List)):
            return fact
        if site.unpacked and fact.kind == TENSOR:
            # `a, b = model(x)`: elements of one output; each may own its own tensor.
            return fact
        return fact

    def _conditioning_input(self, call: cst.Call, node: Node) -> str | None:
        """`k = self.to_k(encoder_hidden_states)`: a sublayer keeps its input's token
        count, so a projection of conditioning (text tokens) is conditioning-sized, and so is
        one of a noise level (`self.time_in(timestep)`)."""
        from lifetime_lint.analysis.significance import name_origin  # (it imports this module)

        first = next((a.value for a in call.args if a.keyword is None and not a.star), None)
        if isinstance(first, (cst.Call, cst.Subscript, cst.Attribute)):
            # `self.norm_k(self.add_k_proj(context_img)[0])`: the inner sublayer's output
            # keeps the conditioning's token count too.
            inner = self.expression(first, node)
            return CONDITIONING if inner.is_tensor and inner.origin == CONDITIONING else None
        if not isinstance(first, cst.Name):
            return None
        if _is_denoiser_keyword(first.value):
            # `vec = self.time_in(timestep)`, `self.time_embedder(timesteps_proj)`: an
            # embedding of the noise level, one vector per sample (or per token), not tokens
            # x hidden of the stream.
            return CONDITIONING
        fact = self._name_value(first.value, node)  # (tensor-ness is the call's; size the input's)
        origin = name_origin(first.value, fact.origin if fact.is_tensor else ACTIVATION)
        return CONDITIONING if origin == CONDITIONING else None

    def _rebound_through_call(self, site: DefSite, call: cst.Call, node: Node) -> ValueFact | None:
        """`query = apply_rotary_emb(query, cos, sin)`, `q, k = rope_inplace(q, k, cache)`:
        a tensor name rebound to an unknown function that takes it still holds a tensor
        (the function's result, or the same tensor changed in place). It owns what the
        previous binding owned: a view chain to it, so a parameter stays the caller's."""
        for arg in call.args:
            if arg.keyword is not None or arg.star:
                continue
            value = arg.value
            if isinstance(value, cst.Name) and value.value == site.name:
                previous = self._name_value(site.name, node)
                if (
                    previous.kind == VIEW
                    and previous.tensor
                    and previous.sources
                    and not previous.element_of  # (an element stays its container's)
                    and all(
                        s.kind in ("assign", "annassign", "augassign") for s in previous.sources
                    )
                ):
                    return ValueFact(VIEW, previous.origin, previous.sources, tensor=True)
                return None
        return None

    def expression(
        self, expr: cst.BaseExpression | None, node: Node, unpacked: bool = False
    ) -> ValueFact:
        """What an expression evaluated at `node` produces."""
        if expr is None:
            return _UNKNOWN
        if self._contents is None:
            self._fill_contents()  # first, from a clean state (`_fill_contents`)
        kind = type(expr)
        if kind is cst.Name:
            return self._name_value(expr.value, node)  # type: ignore[attr-defined]
        if kind is cst.Call:
            return self._call_value(expr, node, unpacked)  # type: ignore[arg-type]
        if kind is cst.Attribute:
            return self._attribute_value(expr, node, unpacked)  # type: ignore[arg-type]
        if kind is cst.Subscript:
            return self._subscript_value(expr, node, unpacked)  # type: ignore[arg-type]
        if kind is cst.BinaryOperation:
            return self._operator_value(expr, node)  # type: ignore[arg-type]
        if kind is cst.UnaryOperation:
            if isinstance(expr.operator, cst.Not):  # type: ignore[attr-defined]
                return _METADATA
            operand = self.expression(expr.expression, node)  # type: ignore[attr-defined]
            if operand.is_tensor:
                return ValueFact(TENSOR, operand.origin)
            return operand if operand.kind == METADATA else _UNKNOWN
        if isinstance(expr, cst.Await):
            inner = self.expression(expr.expression, node, unpacked)
            # An awaited RPC or queue result is data from elsewhere, not a local tensor.
            if inner.kind == TENSOR and self._is_module_call(expr.expression):
                return inner
            return _METADATA if inner.kind == METADATA else _UNKNOWN
        if kind in (cst.IfExp, cst.BooleanOperation):
            return self._choice_value(expr, node)
        if kind is cst.NamedExpr:
            return self.expression(expr.value, node, unpacked)  # type: ignore[attr-defined]
        if isinstance(
            expr,
            (
                cst.Integer,
                cst.Float,
                cst.Imaginary,
                cst.SimpleString,
                cst.ConcatenatedString,
                cst.FormattedString,
                cst.Comparison,
                cst.Ellipsis,
            ),
        ):
            return _METADATA
        if isinstance(expr, (cst.List, cst.Tuple, cst.Set)):
            elements = [self.expression(e.value, node) for e in expr.elements]
            return self._container_of(elements, expr)
        if isinstance(expr, cst.Dict):
            values = [
                self.expression(e.value, node)
                for e in expr.elements
                if isinstance(e, cst.DictElement)
            ]
            return self._container_of(values, expr)
        if isinstance(expr, cst.GeneratorExp):
            return _UNKNOWN  # lazy: it holds its closure, not its elements
        if isinstance(expr, (cst.ListComp, cst.SetComp, cst.DictComp)):
            saved = dict(self._comprehension)
            try:
                self._bind_comprehension_targets(expr, node)
                value = expr.value if isinstance(expr, cst.DictComp) else expr.elt
                element = self.expression(value, node)
            finally:
                self._comprehension = saved
            if element.is_tensor or element.kind == CONTAINER:
                return ValueFact(CONTAINER, element.origin)
            return _METADATA if element.kind == METADATA else _UNKNOWN
        return _UNKNOWN

    def _fresh(self, fact: ValueFact) -> bool:
        """An element a container would own: a new tensor, or a local that holds one (not a
        parameter, loop target or view the container merely borrows)."""
        if fact.kind in (TENSOR, CONTAINER):
            return True
        return (
            fact.kind == VIEW
            and bool(fact.sources)
            and all(self.value(s).kind in (TENSOR, CONTAINER) for s in fact.sources)
        )

    def _container_of(self, elements: list[ValueFact], display: cst.CSTNode) -> ValueFact:
        tensors = [e for e in elements if (e.is_tensor or e.kind == CONTAINER) and self._fresh(e)]
        if not tensors and any(e.is_tensor for e in elements):
            return _UNKNOWN  # `(query, key, value)` of parameters: borrowed, owns nothing
        if tensors:
            return ValueFact(CONTAINER, _largest(e.origin for e in tensors))
        if elements and all(e.kind == METADATA for e in elements):
            return _METADATA
        if not elements and isinstance(display, (cst.List, cst.Dict)):
            return ValueFact(CONTAINER, SMALL)  # empty: what is put in decides (contents)
        return _UNKNOWN

    def _container_element(self, fact: ValueFact) -> ValueFact:
        if fact.origin == SMALL and fact.sources:
            return self.contents_fact(fact.sources[0])
        return ValueFact(TENSOR, fact.origin)

    def _name_value(self, name: str, node: Node) -> ValueFact:
        if name in ("None", "True", "False"):
            return _METADATA
        if name in self._comprehension:
            return self._comprehension[name]
        if name not in self.cfg.name_index:
            return _UNKNOWN  # a global or builtin
        sites = self.reaching(node, name)
        if not sites:
            return _UNKNOWN
        facts = [self.value(s) for s in sites]
        if all(f.kind == METADATA for f in facts):
            return _METADATA
        if all(f.kind == CONTAINER for f in facts):
            contents = [self.contents_fact(s) for s in sites]
            # Contents known to be plain values give the container no size: a list of
            # `(start, stop)` pairs is not activation-sized.
            origin = _largest(c.origin for c in contents if c.kind != METADATA)
            return ValueFact(CONTAINER, origin, tuple(sites))
        tensor = any(f.is_tensor for f in facts)
        origin = _largest(f.origin for f in facts if f.is_tensor) if tensor else ACTIVATION
        element_of = tuple(c for f in facts for c in f.element_of)
        host = tensor and all(f.host for f in facts if f.is_tensor)
        return ValueFact(
            VIEW, origin, tuple(sites), tensor=tensor, element_of=element_of, host=host
        )

    def _choice_value(self, expr: cst.BaseExpression, node: Node) -> ValueFact:
        branches = (
            (expr.body, expr.orelse) if isinstance(expr, cst.IfExp) else (expr.left, expr.right)  # type: ignore[attr-defined]
        )
        facts = [
            self.expression(b, node)
            for b in branches
            if not (isinstance(b, cst.Name) and b.value == "None")
        ]
        if not facts:
            return _METADATA
        if all(f.kind == TENSOR for f in facts):
            return ValueFact(TENSOR, _largest(f.origin for f in facts))
        if all(f.kind == METADATA for f in facts):
            return _METADATA
        sources = tuple(s for f in facts for s in f.sources)
        tensor = any(f.is_tensor for f in facts)
        return ValueFact(VIEW, _largest(f.origin for f in facts), sources, tensor=tensor)

    def _operator_value(self, expr: cst.BinaryOperation, node: Node) -> ValueFact:
        if isinstance(expr.operator, cst.MatrixMultiply):
            return ValueFact(TENSOR, ACTIVATION)
        left = self.expression(expr.left, node)
        right = self.expression(expr.right, node)
        if isinstance(expr.operator, cst.Multiply) and (
            isinstance(expr.left, cst.List) or isinstance(expr.right, cst.List)
        ):
            return ValueFact(CONTAINER, SMALL)  # `[None] * n`
        if left.is_tensor or right.is_tensor:
            origins = [f.origin for f in (left, right) if f.is_tensor]
            return ValueFact(TENSOR, _largest(origins))
        if left.kind == METADATA and right.kind == METADATA:
            return _METADATA  # `a // b`, `h * w`, string formatting
        if isinstance(expr.operator, cst.Modulo) and isinstance(
            expr.left, (cst.SimpleString, cst.ConcatenatedString)
        ):
            return _METADATA
        return _UNKNOWN

    def _attribute_value(self, expr: cst.Attribute, node: Node, unpacked: bool) -> ValueFact:
        if expr.attr.value in T.METADATA_ATTRIBUTES:
            return _METADATA
        base = expr.value
        if isinstance(base, cst.Name):
            if base.value == "self":
                return _UNKNOWN  # a parameter, buffer or attribute: owned by the module
            inner = self._name_value(base.value, node)
            if inner.kind == METADATA:
                return _METADATA
            return ValueFact(
                VIEW, inner.origin, inner.sources, tensor=inner.is_tensor, host=inner.host
            )
        inner = self.expression(base, node)
        if inner.kind == TENSOR and not unpacked:
            if "latent" in expr.attr.value:
                return ValueFact(TENSOR, LATENTS)  # `self.vae.encode(x).latent_dist`
            return inner  # `self.vae.decode(z).sample`
        if inner.kind == METADATA:
            return _METADATA
        if inner.kind == VIEW:
            return inner
        return _UNKNOWN

    def _subscript_value(self, expr: cst.Subscript, node: Node, unpacked: bool) -> ValueFact:
        base = expr.value
        if isinstance(base, cst.Attribute) and base.attr.value in T.METADATA_ATTRIBUTES:
            return _METADATA  # `x.shape[2]`
        if isinstance(base, cst.Name):
            inner = self._name_value(base.value, node)
            if inner.kind == METADATA:
                return _METADATA
            index = _index_text(self.context, expr)
            if inner.kind == CONTAINER or (not inner.is_tensor and index is not None):
                element = self.contents_of_name(base.value, node)
                borrowed = (base.value, index) if index is not None else None
                return ValueFact(
                    VIEW,
                    CACHE_ENTRY if element.origin in (ACTIVATION, SMALL) else element.origin,
                    () if inner.kind == CONTAINER else inner.sources,
                    tensor=element.is_tensor,
                    borrowed=borrowed,
                    element_of=inner.sources,
                )
            origin = inner.origin
            if inner.is_tensor and _edge_slice(expr):
                origin = SMALL
            elif inner.is_tensor and origin in _UNSIZED_ORIGINS:
                from lifetime_lint.analysis.significance import name_origin

                if name_origin(base.value, origin) == LATENTS:
                    # `tile_video_latents[:, :, i : i + 1]`: a slice of latents is latent-sized
                    # wherever it goes (a concatenation of such slices too).
                    origin = LATENTS
            return ValueFact(
                VIEW,
                origin,
                inner.sources,
                tensor=inner.is_tensor,
                element_of=inner.element_of,
                host=inner.host,
            )
        inner = self.expression(base, node)
        if inner.kind == TENSOR and not unpacked:
            return inner  # `self.text_encoder(ids)[0]`
        if inner.kind == METADATA:
            return _METADATA
        if inner.kind == CONTAINER:
            return ValueFact(VIEW, inner.origin, (), tensor=True, element_of=inner.sources)
        if inner.kind == VIEW:
            return inner
        return _UNKNOWN

    def _call_value(self, call: cst.Call, node: Node, unpacked: bool) -> ValueFact:
        func = call.func
        context = self.context
        if isinstance(func, cst.Name):
            if func.value in T.METADATA_BUILTINS and func.value not in self.cfg.name_index:
                return _METADATA
            qualified = context.qualified_name(func)
            if qualified is not None:
                if qualified == "torch" or qualified.startswith("torch."):
                    return self._torch_value(qualified, call, node, unpacked)
                if qualified.startswith(T.METADATA_MODULES):
                    return _METADATA
                if qualified in T.RESHAPING_FUNCTIONS:
                    return self._view_of_first_argument(call, node, False)
        elif isinstance(func, cst.Attribute):
            qualified = context.qualified_name(func)
            if qualified is not None:
                if qualified == "torch" or qualified.startswith("torch."):
                    return self._torch_value(qualified, call, node, unpacked)
                if qualified.startswith(T.METADATA_MODULES):
                    return _METADATA
            method = func.attr.value
            if method == "pop" and len(call.args) == 2 and isinstance(call.args[1].value, cst.Name):
                # `x = callback_outputs.pop("x", x)`: the callback's replacement or x itself.
                return self._name_value(call.args[1].value.value, node)
        if _is_string_codec(call) or _payload_codec_call(context, call):
            return _METADATA  # `text = blob.decode("utf-8")`: a str, not decoded frames
        if _asks_host_output(call):
            return _METADATA  # `self._decode_latents(z, output_type="np")`: numpy or PIL
        work = self.work(call)
        if work.level >= LIGHT and work.kind not in ("collective", "none", "helper"):
            origin = _origin_of_work(work)
            if origin == DECODED and file_domain(self.context) in _UNVISUAL_DOMAINS:
                origin = MODEL_OUTPUT  # a seq2seq or speech decoder's hidden states
            if origin in (MODEL_OUTPUT, ACTIVATION) and self._reads_text(call, node):
                origin = CONDITIONING  # `self.byte5(texts)`: a text encoder's features
            elif origin == ACTIVATION and self._latent_channel_call(call, outputs=True):
                origin = LATENTS  # `self.proj_out(x)` back to patches of latent channels
            elif origin == ACTIVATION and work.kind in ("submodule", "module-parameter"):
                origin = self._conditioning_input(call, node) or origin
            elif origin == MODEL_OUTPUT and work.kind == "encode" and self._in_autoencoder:
                origin = LATENTS  # `self.encoder(tile)` of an autoencoder: latent moments
            elif origin == MODEL_OUTPUT and any(
                a.keyword is not None and _is_denoiser_keyword(a.keyword.value) for a in call.args
            ):
                origin = LATENTS  # `self.transformer(x, timestep=t)`: a latent-space prediction
            return ValueFact(TENSOR, origin)
        callee = self.local_callee(call)
        if callee is not None:
            returned = self.helper_return(callee)
            if returned.kind != UNKNOWN:
                return returned
        pixels = _pixel_preprocess(func)
        if pixels is not None:
            # An image/video processor's pixel tensor, made on the host from images, arrays
            # or the caller's frames (a tensor made here on the device keeps its device).
            first = _main_argument(call)
            made_here = first is not None and self.expression(first, node).kind == TENSOR
            return ValueFact(TENSOR, pixels, host=not made_here)
        if not isinstance(func, cst.Attribute):
            return _UNKNOWN
        method = func.attr.value
        if method in T.METADATA_METHODS:
            return _METADATA
        if method not in ("to", "type", "cuda", "view") and any(
            a.keyword is None and isinstance(a.value, (cst.SimpleString, cst.FormattedString))
            for a in call.args[:1]
        ):
            return _METADATA  # `address.split(":")`: a string method, not a tensor's
        receiver = func.value
        if isinstance(receiver, cst.Name) and receiver.value == "self":
            return _UNKNOWN
        inner = self.expression(receiver, node)
        if inner.kind == METADATA:
            return _METADATA
        if method in T.REDUCTIONS:
            return ValueFact(TENSOR, SMALL) if inner.is_tensor else _UNKNOWN
        if (
            method in T.VIEW_METHODS
            or method in T.MAYBE_COPY_METHODS
            or (method.endswith("_") and not method.startswith("_"))
        ):
            host = inner.host and not _moves_to_device(method, call)
            if inner.kind == TENSOR:
                if method in T.SPLITTING and unpacked:
                    return ValueFact(VIEW, inner.origin, (), tensor=True)  # shared pieces
                return inner if host == inner.host else replace(inner, host=host)
            return ValueFact(
                VIEW,
                inner.origin,
                inner.sources,
                tensor=inner.is_tensor,
                element_of=inner.element_of,
                host=host,
            )
        if method in T.TENSOR_ONLY_METHODS:
            if inner.kind == TENSOR and inner.origin == SMALL:
                return inner  # `torch.tensor(scale).repeat(n)`: as small as its source
            if method.startswith("new_") and inner.is_tensor and _edge_shape(call):
                return ValueFact(TENSOR, SMALL)  # `x.new_zeros((b, c, 1, w))`: a halo
            if isinstance(receiver, cst.Call) and not inner.is_tensor:
                return _UNKNOWN
            return ValueFact(TENSOR, inner.origin if inner.is_tensor else ACTIVATION)
        if method in T.TENSOR_METHODS_ON_TENSORS and inner.is_tensor:
            return ValueFact(TENSOR, inner.origin)
        return _UNKNOWN

    def _torch_value(self, qualified: str, call: cst.Call, node: Node, unpacked: bool) -> ValueFact:
        if qualified.startswith(T.TORCH_NOT_TENSOR_PREFIXES):
            return _METADATA
        parts = qualified.split(".")
        last = parts[-1]
        if last in T.TORCH_NOT_TENSOR_FUNCTIONS or last.startswith(("is_", "get_", "set_")):
            return _METADATA
        if len(parts) >= 2 and parts[1] == "nn" and (len(parts) < 3 or parts[2] != "functional"):
            return _UNKNOWN  # module constructors and helpers
        if last[:1].isupper() and last not in T.TORCH_SMALL_FUNCTIONS:
            return _METADATA  # classes: torch.Size, torch.Generator, ...
        if last in T.TORCH_SMALL_FUNCTIONS or last in T.REDUCTIONS or last in T.INDEX_FUNCTIONS:
            return ValueFact(TENSOR, SMALL)
        if last == "where" and len(call.args) == 1:
            return ValueFact(TENSOR, SMALL)  # `torch.where(mask)`: the indices of a mask
        if qualified in T.CONCATENATIONS:
            inputs = self.expression(call.args[0].value, node) if call.args else _UNKNOWN
            origin = inputs.origin if inputs.kind == CONTAINER else CONCATENATION
            if origin in (ACTIVATION, CACHE_ENTRY):
                origin = CONCATENATION
            return ValueFact(TENSOR, origin)
        if last in T.TORCH_VIEW_FUNCTIONS or last in T.TORCH_MAYBE_COPY_FUNCTIONS:
            return self._view_of_first_argument(call, node, last in T.SPLITTING and unpacked)
        if last in T.ALLOCATORS:
            fact = self._allocation_value(last, call, node)
            if fact.is_tensor and not last.endswith("_like") and self._factory_on_host(call):
                return replace(fact, host=True)
            return fact
        # Element-wise and allocating ops: as large as their largest tensor input.
        origins = []
        for arg in call.args[:2]:
            fact = self.expression(arg.value, node)
            if fact.is_tensor:
                origins.append(fact.origin)
        return ValueFact(TENSOR, _largest(origins) if origins else ACTIVATION)

    def _factory_on_host(self, call: cst.Call) -> bool:
        """`torch.zeros(shape, dtype=dtype)`: a factory given no device (nor `out=`, nor
        `**kwargs` that may carry one) makes a CPU tensor, unless the file sets a default
        device (`torch.set_default_device`, `with torch.device(...)`)."""
        for arg in call.args:
            if arg.star or (arg.keyword is not None and arg.keyword.value in ("device", "out")):
                return False
        memo = self.context.memo
        if _DEFAULT_DEVICE_KEY not in memo:
            memo[_DEFAULT_DEVICE_KEY] = bool(_SETS_DEFAULT_DEVICE.search(self.context.source))
        return not memo[_DEFAULT_DEVICE_KEY]

    def _allocation_value(self, last: str, call: cst.Call, node: Node) -> ValueFact:
        """A torch factory's tensor: sized like its template, small, or of unknown shape."""
        if last.endswith("_like") and call.args:
            template = call.args[0].value
            like = self.expression(template, node)
            if like.is_tensor and isinstance(template, cst.Subscript):
                # `torch.ones_like(tile[:1, :1])`: a slice's size is not its base's.
                return ValueFact(TENSOR, ALLOCATION)
            origin = like.origin if like.is_tensor else ALLOCATION
            if isinstance(template, cst.Name):
                from lifetime_lint.analysis.significance import name_origin

                origin = name_origin(template.value, origin)
            if like.is_tensor or isinstance(template, cst.Name):
                return ValueFact(TENSOR, origin)  # exactly its template's size
        if _small_shape(call) or _small_literal_shape(call) or _edge_shape(call):
            # `torch.ones(batch, 1)`, `torch.zeros(n, 4)`, a warm-up's dummy input
            # `torch.zeros(1, 3, 1, 180, 320)`: its size is stated, and it is small.
            return ValueFact(TENSOR, SMALL)
        template_name = _shape_template(call)
        if template_name is not None:
            # `torch.zeros(cond.shape[0], pad, *cond.shape[2:])`: sized like `cond`.
            from lifetime_lint.analysis.significance import name_origin

            like = self._name_value(template_name, node)
            return ValueFact(
                TENSOR,
                name_origin(template_name, like.origin if like.is_tensor else ALLOCATION),
            )
        if last in ("randn", "rand", "randint", "normal"):
            return ValueFact(TENSOR, LATENTS)
        return ValueFact(TENSOR, ALLOCATION)

    def _view_of_first_argument(self, call: cst.Call, node: Node, pieces: bool) -> ValueFact:
        """`torch.reshape(x, ...)`, `rearrange(x, "b l (h d) -> b l h d")`: the storage of the
        first argument (a view where the layout allows; `pieces`: shared split pieces)."""
        first = self.expression(call.args[0].value, node) if call.args else _UNKNOWN
        if first.kind == TENSOR:
            if pieces:
                return ValueFact(VIEW, first.origin, (), tensor=True)
            return first
        if first.kind == METADATA:
            return _METADATA
        return ValueFact(VIEW, first.origin, first.sources, tensor=True)

    # -- helpers defined in this file ---------------------------------------------------
    def local_callee(self, call: cst.Call) -> cst.FunctionDef | None:
        """The function a call runs when it is defined in this file: `self.method(...)` of
        the enclosing class, or a module-level `helper(...)`."""
        func = call.func
        if isinstance(func, cst.Name):
            if func.value in self.cfg.name_index:
                return None  # a local (nested functions are closures, handled apart)
            functions = self.shared.module_functions
            if functions is None:
                functions = {
                    s.name.value: s
                    for s in self.shared.module.body
                    if isinstance(s, cst.FunctionDef)
                }
                self.shared.module_functions = functions
            return functions.get(func.value)
        if (
            isinstance(func, cst.Attribute)
            and isinstance(func.value, cst.Name)
            and func.value.value in ("self", "cls")
            and self.owner_facts is not None
        ):
            return self.owner_facts.methods.get(func.attr.value)
        return None

    def _argument_returned_as_given(self, call: cst.Call) -> cst.BaseExpression | None:
        """The argument of `call` that a helper of this file returns as it was given (it
        may write into it: diffusers' `blend_v(a, b, extent)` assigns `b[...]` and returns
        `b`), or None."""
        callee = self.local_callee(call)
        if callee is None:
            return None
        parameter = self._returned_parameter(callee)
        if parameter is None:
            return None
        return _argument_for(call, callee, parameter)

    def _returned_parameter(self, callee: cst.FunctionDef, depth: int = 1) -> str | None:
        """The parameter `callee` returns as given: directly (`return b`), or through a
        one-statement wrapper that hands it to such a helper of this file (sglang's `def
        blend_t(self, a, b, n): return self._blend(a, b, n, dim=-3)`), one level deep."""
        memo = self.shared.returned_parameters
        if id(callee) not in memo:
            memo[id(callee)] = _parameter_returned_as_given(callee)
        parameter = memo[id(callee)]
        if parameter is not None or depth == 0:
            return parameter
        statements = [
            s
            for s in callee.body.body
            if not (
                isinstance(s, cst.SimpleStatementLine)
                and len(s.body) == 1
                and isinstance(s.body[0], cst.Expr)
                and isinstance(s.body[0].value, cst.SimpleString)
            )
        ]  # a docstring aside
        if len(statements) != 1 or not isinstance(statements[0], cst.SimpleStatementLine):
            return None
        line = statements[0].body
        if len(line) != 1 or not isinstance(line[0], cst.Return):
            return None
        forwarded = line[0].value
        if not isinstance(forwarded, cst.Call):
            return None
        inner = self.local_callee(forwarded)
        if inner is None or inner is callee:
            return None
        inner_parameter = self._returned_parameter(inner, depth - 1)
        if inner_parameter is None:
            return None
        argument = _argument_for(forwarded, inner, inner_parameter)
        own = {p.name.value for p in callee.params.params}
        if isinstance(argument, cst.Name) and argument.value in own:
            return argument.value
        return None

    def _helper_facts(self, function: cst.FunctionDef, depth: int = 1) -> FunctionFacts | None:
        """The facts of a helper of this file, when it is at most `depth` calls deep (work
        is followed one call deep; returned values two, so a cached wrapper around a helper
        that builds an index tensor, `order, _ = _permutation(...)`, is still seen)."""
        resolving = self.shared.resolving
        if function is self.function or id(function) in resolving or len(resolving) >= depth:
            return None  # no recursion
        return facts_for(self.context, function)

    def helper_return(self, function: cst.FunctionDef) -> ValueFact:
        """What a helper of this file returns (all its `return` values together)."""
        key = id(function)
        cached = self.shared.returns.get(key)
        if cached is not None:
            return cached
        if function.name.value.lstrip("_").startswith(_LOADERS):
            return _UNKNOWN  # `self._load_audio_encoder()`: modules, not tensors
        helper = self._helper_facts(function, depth=2)
        if helper is None:
            return _UNKNOWN
        self.shared.resolving.add(key)
        try:
            values = [
                (node.statement.value, helper.returned(node.statement.value, node))
                for node in helper.cfg.nodes
                if isinstance(node.statement, cst.Return) and node.statement.value is not None
            ]
        finally:
            self.shared.resolving.discard(key)
        facts = [fact for _, fact in values]
        result = _combined_returns(facts)
        if function.returns is not None and _annotation_is_scalar(function.returns.annotation):
            result = _METADATA  # `-> list[tuple[int, int]]`: the helper's word, not a tensor
        unseen = [fact.kind == UNKNOWN or (fact.kind == VIEW and not fact.tensor) for fact in facts]
        opaque = any(unseen) and all(  # only calls the analysis cannot see into are unknown
            not blind or _from_calls(value, fact) for (value, fact), blind in zip(values, unseen)
        )
        if result.kind == UNKNOWN and opaque and function.returns is not None:
            annotation = function.returns.annotation
            if _annotation_is_tensor(annotation) or _annotation_is_tensor_tuple(annotation):
                # `-> tuple[torch.Tensor, torch.Tensor, torch.Tensor]` over an opaque kernel:
                # the helper's own word that it returns tensors.
                result = ValueFact(TENSOR, ACTIVATION)
        self.shared.returns[key] = result
        return result

    def helper_returns_pieces(self, function: cst.FunctionDef) -> bool:
        """Whether every `return` of a helper of this file hands back split views of one
        storage (`return x.unbind(dim=2)`, or a local bound only to such a call): unpacking
        the result gives names that share it, so deleting one frees nothing."""
        key = id(function)
        known = self.shared.returns_pieces.get(key)
        if known is not None:
            return known
        self.shared.returns_pieces[key] = False  # (recursion)
        helper = self._helper_facts(function)
        result = False
        if helper is not None:
            returns = [
                (node.statement.value, node)
                for node in helper.cfg.nodes
                if isinstance(node.statement, cst.Return)
            ]
            result = bool(returns) and all(
                value is not None and helper._splits(value, node) for value, node in returns
            )
        self.shared.returns_pieces[key] = result
        return result

    def _splits(self, value: cst.BaseExpression, node: Node) -> bool:
        """`x.chunk(3)`, `torch.unbind(x, 1)`, or a name every reaching binding of which is
        one of those."""
        if isinstance(value, cst.Call):
            return is_split_call(value)
        if isinstance(value, cst.Name):
            sites = self.reaching(node, value.value)
            return bool(sites) and all(
                s.kind == "assign" and not s.unpacked and s.value is not None
                and isinstance(s.value, cst.Call) and self._splits(s.value, node)
                for s in sites
            )  # fmt: skip
        return False

    def helper_return_items(self, function: cst.FunctionDef) -> tuple[ValueFact, ...] | None:
        """What each position of a helper's returned tuple holds, when every `return` is a
        display of one length (`return video, mask, reference_images`): unpacking it gives
        each name its own value, not a piece of one."""
        key = id(function)
        if key in self.shared.return_items:
            return self.shared.return_items[key]
        helper = None
        if not function.name.value.lstrip("_").startswith(_LOADERS):
            helper = self._helper_facts(function, depth=2)
        items: tuple[ValueFact, ...] | None = None
        if helper is not None:
            returns = [
                (node.statement.value, node)
                for node in helper.cfg.nodes
                if isinstance(node.statement, cst.Return)
            ]
            displays = [value for value, _ in returns if isinstance(value, cst.Tuple)]
            if returns and len(displays) == len(returns):
                length = len(displays[0].elements)
                if all(
                    len(d.elements) == length
                    and not any(isinstance(e, cst.StarredElement) for e in d.elements)
                    for d in displays
                ):
                    self.shared.resolving.add(key)
                    try:
                        items = tuple(
                            _combined_returns(
                                [
                                    helper.returned(value.elements[i].value, node)  # type: ignore[union-attr]
                                    for value, node in returns
                                ],
                                keep_views=True,
                            )
                            for i in range(length)
                        )
                    finally:
                        self.shared.resolving.discard(key)
        self.shared.return_items[key] = items
        return items

    def returned(self, expr: cst.BaseExpression, node: Node) -> ValueFact:
        """What a `return` hands the caller: a local that alone owns a tensor
        (`video = video.to(dtype)`; `return video`) is a fresh tensor to the caller."""
        fact = self.expression(expr, node)
        if (
            fact.kind == VIEW
            and fact.tensor
            and fact.sources
            and isinstance(expr, cst.Name)
            and all(
                s.kind not in ("param", "for") and self.owner_of_storage(s) for s in fact.sources
            )
        ):
            return ValueFact(TENSOR, fact.origin)
        return fact

    def _returned_item(self, site: DefSite, call: cst.Call) -> ValueFact | None:
        """`video, mask, refs = self.preprocess_conditions(...)`: the fact of this name's
        position in the tuple a helper of this file returns."""
        callee = self.local_callee(call)
        if callee is None or site.node is None:
            return None
        items = self.helper_return_items(callee)
        statement = site.node.statement
        if items is None or not isinstance(statement, cst.Assign) or len(statement.targets) != 1:
            return None
        target = statement.targets[0].target
        if not isinstance(target, (cst.Tuple, cst.List)) or len(target.elements) != len(items):
            return None
        for element, item in zip(target.elements, items):
            if element.value is site.target:
                if item.kind in (TENSOR, CONTAINER):
                    return ValueFact(item.kind, item.origin)
                if item.kind == VIEW and item.tensor:
                    return self._view_of_argument(item, callee, call, site.node)
                return _METADATA if item.kind == METADATA else None
        return None

    def _view_of_argument(
        self, item: ValueFact, callee: cst.FunctionDef, call: cst.Call, node: Node
    ) -> ValueFact | None:
        """`q, k, v, z = self.split_qkvz(projected)` where the helper returns
        `torch.split(mixed.view(...))` pieces of its parameter: each name is a view of the
        caller's argument (deleting the argument frees nothing while `z` lives)."""
        helper = self._helper_facts(callee)
        if helper is None:
            return None
        roots: set[str] = set()
        pending = list(item.sources)
        seen: set[int] = set()
        while pending:
            source = pending.pop()
            if source.index in seen:
                continue
            seen.add(source.index)
            if source.kind == "param":
                roots.add(source.name)
                continue
            fact = helper.value(source)
            if fact.kind != VIEW or not fact.sources:
                return None  # a fresh tensor somewhere along the chain: not a view
            pending.extend(fact.sources)
        if not roots:
            return None
        params = [p.name.value for p in callee.params.params]
        if params and params[0] in ("self", "cls") and isinstance(call.func, cst.Attribute):
            params = params[1:]
        sites: list[DefSite] = []
        for root in roots:
            argument = None
            for index, arg in enumerate(call.args):
                if arg.star:
                    return None
                if (arg.keyword is None and index < len(params) and params[index] == root) or (
                    arg.keyword is not None and arg.keyword.value == root
                ):
                    argument = arg.value
            if not isinstance(argument, cst.Name):
                return None
            sites.extend(self.reaching(node, argument.value))
        if not sites:
            return None
        return ValueFact(VIEW, item.origin, tuple(sites), tensor=True)

    def helper_work(self, function: cst.FunctionDef) -> Work:
        """The heaviest work a helper of this file does (its own calls, one level deep)."""
        key = id(function)
        cached = self.shared.helper_work.get(key)
        if cached is not None:
            return cached
        helper = self._helper_facts(function)
        if helper is None:
            return _NO_WORK
        self.shared.resolving.add(key)
        try:
            best = _NO_WORK
            for node in helper.cfg.nodes:
                for call in node.calls:
                    work = helper.work(call)
                    if work.level > best.level:
                        best = work
        finally:
            self.shared.resolving.discard(key)
        result = (
            Work(best.level, "helper", best.by_pattern, best.parts)
            if best.level >= LAYER
            else _NO_WORK
        )
        self.shared.helper_work[key] = result
        return result

    def _is_module_call(self, expr: cst.BaseExpression) -> bool:
        """An awaited module itself (`await self.encoder(x)`), not a method of a client or
        engine (`await self.client.call(...)`: an RPC reply, data from elsewhere)."""
        if not isinstance(expr, cst.Call):
            return False
        work = self.work(expr)
        owner = self.owner_facts
        if (
            owner is not None
            and len(work.parts) == 2
            and work.parts[0] == "self"
            and work.parts[1] not in owner.submodules
        ):
            return False  # `await self._check_model(request)`: a coroutine, not a module
        if work.kind in ("model", "decode", "encode", "encoder"):
            return work.parts[-1:] != ("call",)
        return work.kind == "submodule" and len(work.parts) == 2

    # -- containers, stores, aliases -----------------------------------------------------
    @property
    def stores(self) -> list[Store]:
        """Every `c[k] = v` of the function (also as one element of a tuple target)."""
        if self._stores is None:
            stores: list[Store] = []
            for node in self.cfg.nodes:
                small = node.statement
                if node.kind != "small" or not isinstance(small, (cst.Assign, cst.AnnAssign)):
                    continue
                targets = (
                    [t.target for t in small.targets]
                    if isinstance(small, cst.Assign)
                    else [small.target]
                )
                for target in targets:
                    if isinstance(target, cst.Subscript):
                        stores.extend(self._store(node, target, small.value))
                    elif isinstance(target, (cst.Tuple, cst.List)):
                        for element in target.elements:
                            if isinstance(element.value, cst.Subscript):
                                stores.extend(self._store(node, element.value, None))
            self._stores = stores
        return self._stores

    def _store(
        self, node: Node, target: cst.Subscript, value: cst.BaseExpression | None
    ) -> Iterator[Store]:
        if isinstance(target.value, cst.Name):
            index = _index_text(self.context, target)
            if index is not None:
                yield Store(node, target.value.value, index, value)

    def _fill_contents(self) -> None:
        """What each container binding is given: `append`/`extend`/`insert` arguments and
        `c[k] = v` stores, by the bindings of `c` that reach the call.

        Filled once per function, before any value fact is computed (`value` and
        `expression` call it first): the value facts it computes on the way see the
        contents it has filled so far, and are memoised, so where it starts must not
        depend on which rule asked first (it did: LL001's level of a tiled decode's `rows`
        depended on whether LL002 was selected, whose first query came from inside another
        value fact); they are scratch, dropped after the fill."""
        contents: dict[int, list[ValueFact]] = {}
        self._contents = contents
        # The value and work facts computed on the way saw part of the contents: scratch,
        # recomputed with all of them after the fill.
        kept = self._values, self._work
        self._values, self._work = {}, {}
        try:
            self._fill_contents_into(contents)
        finally:
            self._values, self._work = kept

    def _fill_contents_into(self, contents: dict[int, list[ValueFact]]) -> None:
        for node in self.cfg.nodes:
            for call in node.calls:
                func = call.func
                if (
                    isinstance(func, cst.Attribute)
                    and isinstance(func.value, cst.Name)
                    and func.attr.value in ("append", "extend", "insert", "appendleft")
                    and call.args
                ):
                    fact = self.expression(call.args[-1].value, node)
                    if func.attr.value == "extend" and fact.kind == CONTAINER:
                        fact = ValueFact(TENSOR, fact.origin)
                    receivers = self.reaching(node, func.value.value)
                    for site in receivers:
                        contents.setdefault(site.index, []).append(fact)
                        self._puts.setdefault(site.index, []).append((call.args[-1].value, node))
                    self._note_shared(fact, receivers)
        for store in self.stores:
            if store.value is None:
                continue
            fact = self.expression(store.value, store.node)
            receivers = self.reaching(store.node, store.container, real=False)
            for site in receivers:
                contents.setdefault(site.index, []).append(fact)
                self._puts.setdefault(site.index, []).append((store.value, store.node))
            self._note_shared(fact, receivers)
        for site in self.cfg.defs:
            # `rows = [[decoded[i * n + j].to(z.device) for j ...] for i ...]`: a
            # comprehension over another container's elements (or views of them) holds the
            # same tensors; deleting that container frees none of them while it lives.
            if site.kind not in ("assign", "annassign") or site.unpacked or site.node is None:
                continue
            if isinstance(site.value, (cst.ListComp, cst.SetComp, cst.DictComp)):
                element = self._comprehension_element(site.value, site.node)
                if element.is_tensor:
                    self._note_shared(element, [site])

    def _comprehension_element(
        self, expr: cst.ListComp | cst.SetComp | cst.DictComp, node: Node
    ) -> ValueFact:
        """What one innermost element of a (nested) comprehension is, its targets bound."""
        saved = dict(self._comprehension)
        try:
            self._bind_comprehension_targets(expr, node)
            value = expr.value if isinstance(expr, cst.DictComp) else expr.elt
            if isinstance(value, (cst.ListComp, cst.SetComp, cst.DictComp)):
                return self._comprehension_element(value, node)
            return self.expression(value, node)
        finally:
            self._comprehension = saved

    def _bind_comprehension_targets(
        self, expr: cst.ListComp | cst.SetComp | cst.DictComp, node: Node
    ) -> None:
        """Bind each `for` target of `expr` to a view of an element of what it iterates
        (`[t[..., :s] for t in row]`: `t` is an element of `row`); the caller restores."""
        for_in: cst.CompFor | None = expr.for_in
        while for_in is not None:
            element = self.element_of(for_in.iter, node)
            fact = ValueFact(VIEW, element.origin, (), tensor=element.is_tensor)
            for name in _target_names(for_in.target):
                self._comprehension[name] = fact
            for_in = for_in.inner_for_in

    def _note_shared(self, fact: ValueFact, receivers: list[DefSite]) -> None:
        """A container given an element (or a view of one) of another container shares
        that container's elements, unless it is rebuilt in the loop that walks it (a
        per-row list holds one row at a time)."""
        roots = self._element_roots(fact)
        for root in roots:
            for receiver in receivers:
                if receiver.index == root.index:
                    continue
                if self._rebuilt_while_walking(receiver, root):
                    continue
                self._shared_elements.add(root.index)

    def _element_roots(self, fact: ValueFact) -> set[DefSite]:
        roots: set[DefSite] = set()
        stack = list(fact.element_of)
        for source in fact.sources:
            stack.extend(self.value(source).element_of)
        seen: set[int] = set()
        while stack:
            site = stack.pop()
            if site.index in seen:
                continue
            seen.add(site.index)
            roots.add(site)
            stack.extend(self.value(site).element_of)
        return roots

    def _rebuilt_while_walking(self, receiver: DefSite, container: DefSite) -> bool:
        if receiver.node is None:
            return False
        for node in self.cfg.nodes:
            if node.kind != "for" or not node.loop_body or receiver.node not in node.loop_body:
                continue
            statement = node.statement
            if isinstance(statement, cst.For):
                iterable = _unwrap_iteration(statement.iter)
                if isinstance(iterable, cst.Name) and iterable.value == container.name:
                    return True
        return False

    def elements_shared(self, site: DefSite) -> bool:
        """Whether another container holds this container's elements (or views of them)."""
        if self._contents is None:
            self._fill_contents()
        return site.index in self._shared_elements

    def element_holders(self, site: DefSite) -> tuple[DefSite, ...] | None:
        """The other bindings that hold every element of a container binding, or None when
        the container alone holds some element (or what it holds is not known).
        An element that is a view of a binding (`cat_k.append(k_pad[:, i : i + n])`) is
        held by that binding: it shares its storage.

        `inputs = {"encoder_hidden_states": (prompt_embeds,)}` holds tensors that keep their
        own names; so does `features = self.extract(batch)` whose items the function takes
        out (`clip = features["clip"]`). While those bindings stay bound, deleting the
        container frees at most the container itself. An element appended in a loop that
        rebinds its name each pass (`tiles.append(tile)`) is the container's alone: the name
        holds only the last one."""
        if self.value(site).kind != CONTAINER or site.node is None:
            return None
        if self._contents is None:
            self._fill_contents()
        holders: list[DefSite] = []
        display = (
            site.value if isinstance(site.value, (cst.List, cst.Tuple, cst.Set, cst.Dict)) else None
        )
        puts = list(self._puts.get(site.index, ()))
        if display is not None:
            puts.append((display, site.node))
        for value, node in puts:
            if not self._held_by_names(value, node, site, holders):
                return None
        if display is None and not isinstance(
            site.value, (cst.ListComp, cst.DictComp, cst.SetComp)
        ):
            # An opaque container (a helper's or a call's result): what the function takes
            # out of it is all it knows of its elements.
            taken = [
                other
                for other in self.cfg.defs
                if other.kind in ("assign", "annassign")
                and not other.unpacked
                and isinstance(other.value, cst.Subscript)
                and any(c.index == site.index for c in self.value(other).element_of)
                and not self._per_iteration(other, site)
            ]
            if not taken and not puts:
                return None
            holders.extend(taken)
        elif display is None:
            return None  # a comprehension builds fresh elements
        return tuple(holders) if holders else None

    def _held_by_names(
        self, value: cst.BaseExpression, node: Node, container: DefSite, holders: list[DefSite]
    ) -> bool:
        """Whether every tensor element of `value` (a display, nested displays, or one
        element) is a name's binding; collects those bindings into `holders`."""
        if isinstance(value, (cst.List, cst.Tuple, cst.Set)):
            return all(
                self._held_by_names(e.value, node, container, holders) for e in value.elements
            )
        if isinstance(value, cst.Dict):
            return all(
                isinstance(e, cst.DictElement)
                and self._held_by_names(e.value, node, container, holders)
                for e in value.elements
            )
        fact = self.expression(value, node)
        if not (fact.is_tensor or fact.kind == CONTAINER):
            return True  # (a shape, a string, None: no storage to free)
        if isinstance(value, cst.Name):
            sites = [
                s for s in self.reaching(node, value.value) if s.kind not in ("unbound", "deleted")
            ]
        elif fact.kind == VIEW and fact.tensor and fact.sources:
            # `cat_k.append(k_pad[:, i : i + n])`: a view shares the storage of the bindings
            # it is a view of; while they stay bound, the container frees none of it.
            sites = [s for s in fact.sources if s.kind not in ("unbound", "deleted")]
        else:
            return False  # a fresh element: the container is its only holder
        if not sites or any(self._per_iteration(s, container, node) for s in sites):
            return False
        holders.extend(sites)
        return True

    def _per_iteration(self, element: DefSite, container: DefSite, put: Node | None = None) -> bool:
        """Whether `element` is rebound on each pass of a loop that does not rebind the
        container (the put, when given, runs in that loop too): the container collects one
        element a pass, and the name keeps only the last."""
        if element.node is None:
            return False
        for header in self.cfg.nodes:
            body = header.loop_body
            if not body or element.node not in body:
                continue
            if put is not None and put not in body:
                continue
            if container.node is None or container.node not in body:
                return True
        return False

    def contents_fact(self, site: DefSite) -> ValueFact:
        """What a container binding's elements are (a tensor fact when every element put
        into it is a tensor or a container of tensors)."""
        if self._contents is None:
            self._fill_contents()
        assert self._contents is not None
        given = self._contents.get(site.index, [])
        initial = self.value(site)
        if initial.kind == CONTAINER and (initial.origin != SMALL or _filled_display(site.value)):
            given = given + [ValueFact(TENSOR, initial.origin)]  # a display or comprehension
        if site.kind in ("annassign", "param") and site.annotation is not None:
            if _annotation_holds_tensors(site.annotation) and not any(
                f.is_tensor or f.kind == CONTAINER for f in given
            ):  # (its word that it holds tensors; their size is what is put in)
                given = given + [ValueFact(TENSOR, ACTIVATION)]
        if not given:
            return _UNKNOWN
        if all(f.kind == METADATA for f in given):
            return _METADATA  # `runs.append((start, stop))` of ints
        if all(f.is_tensor or f.kind == CONTAINER for f in given):
            origin = _largest(f.origin for f in given)
            if all(self._fresh(f) for f in given):
                return ValueFact(TENSOR, origin)  # the container owns its elements
            return ValueFact(VIEW, origin, (), tensor=True)  # it borrows them
        return _UNKNOWN

    def contents_of_name(self, name: str, node: Node) -> ValueFact:
        sites = self.reaching(node, name, real=False)
        facts = [self.contents_fact(s) for s in sites if s.kind not in ("unbound", "deleted")]
        if facts and all(f.is_tensor for f in facts):
            return ValueFact(TENSOR, _largest(f.origin for f in facts))
        return _UNKNOWN

    def _containers_iterated(
        self, iterable: cst.BaseExpression | None, node: Node
    ) -> tuple[DefSite, ...]:
        iterable = _unwrap_iteration(iterable)
        if iterable is None:
            return ()
        fact = self.expression(iterable, node)
        if fact.kind == CONTAINER:
            return fact.sources
        return fact.element_of

    def element_of(self, iterable: cst.BaseExpression | None, node: Node) -> ValueFact:
        """What a `for` target over `iterable` borrows."""
        iterable = _unwrap_iteration(iterable)
        if iterable is None:
            return _UNKNOWN
        if isinstance(iterable, cst.Name) and self._is_mapping(iterable.value, node):
            return _METADATA  # `[k for k in state_dict if ...]`: a dict iterates its keys
        fact = self.expression(iterable, node)
        if fact.kind == CONTAINER:
            if fact.sources:
                return self.contents_of_name(fact.sources[0].name, node)
            if fact.origin == SMALL:
                return _UNKNOWN  # a container whose contents are not known to be tensors
            return ValueFact(TENSOR, fact.origin)
        if fact.kind == VIEW and fact.element_of and fact.tensor:
            return ValueFact(TENSOR, fact.origin)  # a row of a list of rows
        return _METADATA if fact.kind == METADATA else _UNKNOWN

    def _is_mapping(self, name: str, node: Node) -> bool:
        """Whether `name` holds a dict where `node` reads it: a binding of it is a dict
        display, comprehension or `dict(...)`, or the function stores into it by a string key
        (`state_dict["head.weight"] = w`). Iterating it yields its keys, not its tensors."""
        if name in self._comprehension or name not in self.cfg.name_index:
            return False
        sites = self.reaching(node, name, real=False)
        if not sites:
            return False
        indices = {s.index for s in sites}
        for store in self.stores:
            if store.container == name and store.index[:1] in ("'", '"'):
                if indices & {s.index for s in self.reaching(store.node, name, real=False)}:
                    return True
        return any(
            isinstance(s.value, (cst.Dict, cst.DictComp))
            or (
                isinstance(s.value, cst.Call)
                and isinstance(s.value.func, cst.Name)
                and s.value.func.value in ("dict", "OrderedDict", "defaultdict")
            )
            for s in sites
            if s.kind in ("assign", "annassign") and not s.unpacked
        )

    def is_container_of_tensors(self, site: DefSite) -> bool:
        fact = self.value(site)
        return fact.kind == CONTAINER and self.contents_fact(site).is_tensor

    @property
    def aliases(self) -> dict[int, list[DefSite]]:
        """For each binding, the other bindings that share its storage (views, aliases,
        elements taken out of it), excluding its own rebinding (`x = x.float()`)."""
        if self._aliases is None:
            aliases: dict[int, list[DefSite]] = {}
            for site in self.cfg.defs:
                if site.kind in ("unbound", "deleted", "param"):
                    continue
                fact = self.value(site)
                if fact.kind not in (VIEW, CONTAINER):
                    continue
                for source in fact.sources:
                    if (
                        source.name == site.name
                        and fact.kind == VIEW
                        and (not site.unpacked or _passes_itself(site))
                    ):
                        continue  # its own rebinding: `x = x.float()`, `q, k = rope(q, k)`
                    aliases.setdefault(source.index, []).append(site)
            self._aliases = aliases
        return self._aliases

    def escaped(self, site: DefSite) -> bool:
        """Whether the binding's value is stored into a container or attribute."""
        if self._escaped is None:
            escaped: set[int] = set()
            truth: set[int] = set()
            for node in self.cfg.nodes:
                # (`return video, mask`: handed to the caller, which is the caller's business)
                names = set() if isinstance(node.statement, cst.Return) else set(node.escapes)
                for call in node.calls:
                    for arg in call.args:  # `load_state_dict({"weight": w}, assign=True)`
                        if isinstance(arg.value, cst.Dict):
                            names.update(
                                e.value.value
                                for e in arg.value.elements
                                if isinstance(e.value, cst.Name)
                            )
                for name in names:
                    escaped.update(s.index for s in self.reaching(node, name))
                for name in node.truth:
                    truth.update(s.index for s in self.reaching(node, name))
            self._escaped = escaped
            self._truth_tested = truth
        return site.index in self._escaped

    def truth_tested(self, site: DefSite) -> bool:
        """`if x:` on this binding: a tensor there would raise, so it is not one."""
        self.escaped(site)
        assert self._truth_tested is not None
        return site.index in self._truth_tested

    def owner_of_storage(self, site: DefSite) -> bool:
        """Whether deleting the binding can free a tensor: it holds a fresh tensor (or a
        rebinding chain rooted in one, `x = x.float()`), and no other binding, container or
        attribute shares it."""
        return self._owns(site, set(), None)

    def storage_partners(self, site: DefSite) -> frozenset[str] | None:
        """Like `owner_of_storage`, but a view chain may pass through other names
        (`q_sbhd = query.view(n, 1, h, d)` ... `query = q_sbhd.view(shape)`): the names of
        those bindings, which must be dead too where the binding is deleted (None: the
        binding does not own its storage)."""
        partners: set[str] = set()
        if not self._owns(site, set(), partners):
            return None
        partners.discard(site.name)
        return frozenset(partners)

    def _owns(self, site: DefSite, seen: set[int], partners: set[str] | None) -> bool:
        if site.index in seen:
            return True
        seen.add(site.index)
        fact = self.value(site)
        if self.escaped(site) or self.truth_tested(site):
            return False
        sharing = self.aliases.get(site.index)
        if sharing:
            if partners is None:
                return False
            for other in sharing:
                if other.index in seen:
                    continue  # the chain being followed
                if (
                    other.name == site.name
                    or self.escaped(other)
                    or any(  # a view of the view: only back under this name (`query = ...`)
                        further.name not in (site.name, other.name)
                        for further in self.aliases.get(other.index, ())
                    )
                ):
                    return False
                # A view under another name (on some path): it must be dead too.
                partners.add(other.name)
        if fact.kind == TENSOR:
            return True
        if fact.kind == VIEW and fact.tensor and fact.sources and not fact.borrowed:
            # `x = x.float()` / `x = x[:, :n]`: owns what the previous binding owned.
            for source in fact.sources:
                if source.kind in ("param", "for"):
                    return False
                if source.name != site.name:
                    if partners is None:
                        return False
                    partners.add(source.name)
                if not self._owns(source, seen, partners):
                    return False
            return True
        return False

    def transferred(self, site: DefSite) -> list[Store]:
        """`x = c[k]` ... `c[k] = new`: the stores after which `x` is the only owner."""
        fact = self.value(site)
        if fact.borrowed is None:
            return []
        container, index = fact.borrowed
        return [s for s in self.stores if s.container == container and s.index == index]

    # -- work facts --------------------------------------------------------------------------
    def work(self, call: cst.Call) -> Work:
        """How heavy a call is (memoised)."""
        cached = self._work.get(id(call))
        if cached is None:
            cached = self._sized_by_inputs(call, self._classify_work(call))
            self._work[id(call)] = cached
        return cached

    def _sized_by_inputs(self, call: cst.Call, work: Work) -> Work:
        """How heavy a piece of work is follows from the size of its inputs (dataflow), not
        only from its callee's name: a feed-forward over the text stream
        (`self.ff_context(norm_encoder_hidden_states)`) works on a few hundred tokens after
        the image stream's feed-forward set the block's peak, and a gather of per-tile
        metadata moves a few bytes. A collective that reduces into its input
        (`dist.all_reduce(x)`, `tensor_model_parallel_all_reduce(x)`) allocates nothing."""
        kind = work.kind
        if kind == "collective":
            last = work.parts[-1].lower() if work.parts else ""
            if (
                last in T.IN_PLACE_COLLECTIVES
                or last in T.OBJECT_COLLECTIVES
                or T.OBJECT_WORD in last
                or any(w in last for w in T.IN_PLACE_WORDS)
            ):
                return Work(LIGHT, kind, work.by_pattern, work.parts, "in-place")
            size = self._input_class(call, every=True)
            if size == SMALL:
                return Work(LIGHT, kind, work.by_pattern, work.parts, "tiny")
            if size == LATENTS:
                # `all_gather(self.proj_out(x))`: the output projection's patches of latent
                # channels, a fraction of one activation.
                return Work(LAYER, kind, work.by_pattern, work.parts, "small")
            return work
        if kind == "concatenation" and self._joins_small(call):
            # `torch.cat(image_latents)`: latent-sized, not an output-sized join.
            return Work(work.level, kind, work.by_pattern, work.parts, "small")
        if work.level in (LAYER, PEAK) and kind == "helper":
            # `_downsample_mask_to_latent(attention_mask, f, h, w)`: a helper whose every
            # tensor input is tiny (masks, ids, sizes) works at their size.
            if self._input_class(call, every=True) == SMALL:
                return Work(LIGHT, kind, work.by_pattern, work.parts, "tiny")
            return work
        if work.level not in (LAYER, PEAK) or kind not in _INPUT_SIZED_KINDS:
            return work
        size = self._input_class(call, every=False)
        if size in (DECODED, LOGITS) and work.level == LAYER:
            # `self.upsampler(video)` over decoded frames: output-resolution work.
            return Work(PEAK, kind, work.by_pattern, work.parts, "large")
        if size == SMALL:
            return Work(LIGHT, kind, work.by_pattern, work.parts, "tiny")
        if size == CONDITIONING:
            return Work(LAYER, kind, work.by_pattern, work.parts, "conditioning")
        return work

    def _input_class(self, call: cst.Call, every: bool) -> str | None:
        """SMALL when the call's main input (`every`: each of its tensor inputs) is tiny
        (ids, sizes, masks, reductions), CONDITIONING when it is conditioning-sized (the
        text/encoder stream), DECODED or LOGITS when it is large, None otherwise or when
        unknown."""
        from lifetime_lint.analysis.significance import name_origin  # (it imports this module)

        node = self._node_of_call(call)
        if node is None:
            return None
        args = [a for a in call.args if not a.star and (every or a.keyword is None)]
        if not every:
            args = args[:1]
        classes: set[str] = set()
        for arg in args:
            value = arg.value
            fact = self.expression(value, node)
            if fact.kind == METADATA or (
                arg.keyword is not None and not fact.is_tensor and fact.kind != CONTAINER
            ):
                continue  # (`group=self.group`: an option, not an input)
            if fact.kind == CONTAINER:
                origin = fact.origin
            elif isinstance(value, cst.Name):
                # The name may say conditioning (`norm_encoder_hidden_states`); tiny only
                # when dataflow agrees or knows nothing (`x_mod` may be a whole activation).
                origin = fact.origin if fact.is_tensor else ACTIVATION
                named = name_origin(value.value, origin)
                if named == CONDITIONING or (named == SMALL and not fact.is_tensor):
                    origin = named
            elif fact.is_tensor:
                origin = fact.origin
            else:
                return None
            classes.add(origin)
        if not classes:
            return None
        for large in (DECODED, LOGITS):
            if large in classes:
                return large
        if classes == {SMALL}:
            return SMALL
        if classes <= {SMALL, LATENTS}:
            return LATENTS
        if classes <= {SMALL, CONDITIONING}:
            return CONDITIONING
        return None

    def _joins_small(self, call: cst.Call) -> bool:
        """A concatenation whose inputs are known to be small-sized (latents, conditioning,
        ids): its result is no output-sized join."""
        from lifetime_lint.analysis.significance import SMALL_SIZED, TINY, name_origin, size_class

        node = self._node_of_call(call)
        if node is None or not call.args:
            return False
        first = call.args[0].value
        fact = self.expression(first, node)
        if not fact.is_tensor and fact.kind != CONTAINER:
            return False
        origin = fact.origin
        if isinstance(first, cst.Name):
            origin = name_origin(first.value, origin)
        return size_class(origin) in (SMALL_SIZED, TINY)

    def _node_of_call(self, call: cst.Call) -> Node | None:
        if self._call_nodes is None:
            self._call_nodes = {id(c): n for n in self.cfg.nodes for c in n.calls}
        return self._call_nodes.get(id(call))

    def _classify_work(self, call: cst.Call) -> Work:
        func = call.func
        owner = self.owner_facts
        if isinstance(func, cst.Subscript):
            # `self.blocks[i](x)`: one element of a submodule list.
            base = dotted_name(func.value)
            if base is not None and base.startswith("self.") and owner is not None:
                pieces = base.split(".")
                name = pieces[1]
                if name in owner.submodules:
                    if len(pieces) > 2:
                        # `self.attn1.to_out[0](x)`: one piece of a sublayer, not all of it.
                        last = pieces[-1].lower()
                        level = LIGHT if _glob_any(last, T.LIGHT_SUBMODULES) else LAYER
                        return Work(level, "submodule", parts=tuple(pieces))
                    return self._submodule_work(name, ("self", name), PEAK)
            return _NO_WORK
        dotted = dotted_name(func)
        if dotted is None:
            return _NO_WORK
        parts = tuple(dotted.split("."))
        last = parts[-1]
        if last[:1].isupper():
            return _NO_WORK  # a class: `DecoderOutput(...)`
        if _is_string_codec(call) or _payload_codec_call(self.context, call):
            return _NO_WORK  # `new_text.encode()`: bytes from a str, no model
        if last.lstrip("_").startswith(_LOADERS):
            return _NO_WORK  # `get_model()`, `load_vae(...)`: returns a module or config
        scalar_helper = self.local_callee(call) if len(parts) <= 2 else None
        if scalar_helper is not None and _returns_scalar(scalar_helper):
            # `decode_backend(vllm_config)` of a `def decode_backend(...) -> str` in this
            # file: it returns a string whatever its name says; its work is its body's.
            return self.helper_work(scalar_helper)
        lowered = [part.lower() for part in parts]
        if any(_glob_any(part, T.LIGHT_OWNERS) for part in lowered):
            return _NO_WORK
        qualified = self.context.qualified_name(func)
        if qualified is not None:
            if qualified.startswith("torch.distributed.") and last in T.COLLECTIVES:
                return Work(MODEL, "collective", parts=parts)
            if qualified == "torch" or qualified.startswith("torch."):
                if qualified in T.CONCATENATIONS:
                    # Output-sized when it joins decoded tiles or frames: its result sits
                    # beside all of its inputs.
                    level = PEAK if self._joins_large(call) else LAYER
                    return Work(level, "concatenation", parts=parts)
                if last in T.HEAVY_TORCH_OPS:
                    heavy = (last.startswith("conv") and not _grouped(call)) or last in (
                        "scaled_dot_product_attention",
                        "interpolate",
                        "grid_sample",
                    )
                    if heavy and last in _RESAMPLING_OPS and _resamples_a_mask(call):
                        heavy = False  # `F.interpolate(mask_.unsqueeze(0), size=...)`
                    return Work(PEAK if heavy else LAYER, "torch-op", parts=parts)
                return _NO_WORK
        if last in T.COLLECTIVES and len(parts) >= 2 and parts[-2] in ("dist", "distributed"):
            return Work(MODEL, "collective", parts=parts)
        if any(word in last.lower() for word in T.COLLECTIVE_WORDS):
            return Work(MODEL, "collective", parts=parts)  # a helper that wraps one
        if parts[0] == "self" and owner is not None and owner.light:
            return _NO_WORK  # `self._encode_plus(...)` in a tokenizer works on lists
        if _numeric_codec(last) or _measures_a_codec(last):
            # `decode_e8m0(scale)`, `decode_fp8(w)`: a number format's (de)quantization,
            # elementwise work on a weight or scale, not a model's decoder.
            callee = self.local_callee(call)
            return self.helper_work(callee) if callee is not None else Work(NONE, "none")
        if len(parts) <= 2 and not _glob_any(last.lower(), T.MODEL_CALLS):
            callee = self.local_callee(call)
            if callee is not None:
                return self.helper_work(callee)  # `self._cross_and_ffn(...)`
        name = last.lower()
        if len(parts) == 1:
            if last in self.nested_functions:
                return self._closure_work(last)
            loop_module = self.loop_modules.get(last)
            if loop_module is not None:
                return loop_module
            if last in self.module_parameters:
                return Work(LAYER, "module-parameter", parts=parts)
        if parts[0] == "self" and len(parts) == 2 and _is_residual_op(last, call):
            # `self.img_mlp_residual(residual, mlp_out, gate)`: a gated residual add after
            # the feed-forward ran, elementwise work, not the feed-forward again.
            return Work(LIGHT, "submodule", parts=parts)
        if parts[0] == "self" and len(parts) >= 2 and owner is not None:
            component = parts[1]
            if (
                component not in owner.submodules
                and component not in owner.methods
                and _is_sublayer_name(component)
            ):
                # `self.to_q(x)` in a block whose `__init__` is inherited: a sublayer's name.
                if len(parts) == 2:
                    return self._submodule_work(component, parts, LAYER)
            elif component in owner.submodules:
                if len(parts) == 2:
                    default = MODEL if component in owner.registered else LAYER
                    return self._submodule_work(component, parts, default)
                if name in T.MAYBE_COPY_METHODS or _is_bookkeeping(name):
                    return _NO_WORK  # `self.unet.to("cpu")`: moving a model is no tensor work
                if len(parts) >= 4 and _is_tensor_method(name):
                    return _NO_WORK  # `self.vae.latents_std.view(...)`: a buffer's method
                if _glob_any(name, T.MODEL_CALLS) or (
                    component in owner.registered and len(parts) == 3
                ):  # (`self.transformer.rope.prepare_video_coords(...)`: a part's method)
                    return Work(MODEL, _model_kind(parts), parts=parts)
                if _glob_any(component.lower(), T.MODEL_CALLS) and name in ("forward", "__call__"):
                    return Work(MODEL, _model_kind(parts), parts=parts)
                # `self.attn.to_out[0](x)`, `self.mlp.fc1(x)`: a piece of a sublayer.
                if name in T.METADATA_METHODS or _is_bookkeeping(name):
                    return _NO_WORK
                if len(parts) >= 3 and _is_tensor_method(name):
                    # `self.table.unsqueeze(0)`, `self.vae.latents_std.view(...)`: a
                    # parameter's or buffer's method, not the module's work.
                    return _NO_WORK
                return Work(
                    LIGHT if _glob_any(name, T.LIGHT_SUBMODULES) else LAYER,
                    "submodule",
                    parts=parts,
                )
        if len(parts) >= 2 and parts[0] in self.module_parameters:
            # `attn.linear2(x)`: a call through a module passed in.
            if name in T.METADATA_METHODS or _is_bookkeeping(name):
                return _NO_WORK  # `vae.clear_cache()`: resets the feature cache's lists
            if _glob_any(name, T.MODEL_CALLS):
                return Work(MODEL, _model_kind(parts), by_pattern=True, parts=parts)
            level = LIGHT if _glob_any(name, T.LIGHT_SUBMODULES) else LAYER
            if _glob_any(name, T.PEAK_SUBMODULES):
                level = PEAK
            return Work(level, "module-parameter", parts=parts)
        if _glob_any(name, T.MODEL_CALLS):
            return Work(MODEL, _model_kind(parts), by_pattern=True, parts=parts)
        return Work(NONE, "none", parts=parts)

    def _joins_large(self, call: cst.Call) -> bool:
        if not call.args:
            return False
        node = self._node_of_call(call)
        if node is None:
            return False
        inputs = self.expression(call.args[0].value, node)
        return inputs.kind == CONTAINER and inputs.origin in (DECODED, LOGITS)

    def _submodule_work(self, name: str, parts: tuple[str, ...], default: int) -> Work:
        lowered = name.lower()
        if _glob_any(lowered, T.MODEL_CALLS) or default == MODEL:
            return Work(MODEL, _model_kind(parts), parts=parts)
        if _glob_any(lowered, T.LIGHT_SUBMODULES):
            return Work(LIGHT, "submodule", parts=parts)  # `self_attn_norm`: a norm
        owner = self.owner_facts
        if owner is not None and name in owner.pointwise and len(parts) == 2:
            return Work(LIGHT, "submodule", parts=parts)  # a 1x1 conv: a projection
        if _glob_any(lowered, T.CROSS_ATTENTION):
            return Work(LAYER, "submodule", parts=parts)
        if _glob_any(lowered, T.PEAK_SUBMODULES) or "conv" in lowered:
            return Work(PEAK, "submodule", parts=parts)
        return Work(min(default, LAYER), "submodule", parts=parts)

    @property
    def nested_functions(self) -> dict[str, cst.FunctionDef]:
        if not self._nested:
            for site in self.cfg.defs:
                if site.kind == "def" and site.node is not None:
                    statement = site.node.statement
                    if isinstance(statement, cst.FunctionDef):
                        self._nested[site.name] = statement
            if not self._nested:
                self._nested[""] = self.function  # sentinel: computed, none found
        return self._nested

    def _closure_work(self, name: str) -> Work:
        """A nested function's heaviest call (a closure that runs sublayers is heavy)."""
        inner = self.nested_functions[name]
        calls: list[cst.Call] = []
        walk(inner.body, lambda n: calls.append(n) if type(n) is cst.Call else None, _ignore)
        best = _NO_WORK
        for call in calls:
            func = call.func
            if isinstance(func, cst.Name) and func.value == name:
                continue  # recursion
            work = (
                self.work(call)
                if not (isinstance(func, cst.Name) and func.value in self.nested_functions)
                else _NO_WORK
            )
            if work.level > best.level:
                best = work
        if best.level <= LIGHT:
            return Work(NONE, "none", parts=(name,))
        return Work(best.level, "closure", best.by_pattern, (name,))

    @property
    def module_parameters(self) -> set[str]:
        """Parameters the function calls (`conv(x)`) or that are annotated as modules."""
        if self._module_params is None:
            names: set[str] = set()
            annotated: dict[str, cst.BaseExpression | None] = {}
            for site in self.cfg.defs:
                if site.kind == "param":
                    annotated[site.name] = site.annotation
            for name, annotation in annotated.items():
                if annotation is not None and _annotation_is_module(annotation):
                    names.add(name)
            for node in self.cfg.nodes:
                for call in node.calls:
                    func = call.func
                    if isinstance(func, cst.Name) and func.value in annotated:
                        # `conv(x)`, `block(h)`: a module passed in (not a callback).
                        annotation = annotated[func.value]
                        if annotation is None and _is_module_name(func.value):
                            names.add(func.value)
                    elif (  # `attn.linear2(x)`, `block.ffn(x)`: a sublayer of a module
                        isinstance(func, cst.Attribute)
                        and isinstance(func.value, cst.Name)
                        and func.value.value in annotated
                        and annotated[func.value.value] is None
                        and _is_sublayer_name(func.attr.value)
                    ):
                        names.add(func.value.value)
            names.discard("self")
            names.discard("cls")  # `cls._get_sde_coeff(...)`: a classmethod's own class
            self._module_params = names
        return self._module_params

    @property
    def loop_modules(self) -> dict[str, Work]:
        """`for block in self.blocks:`: the loop target is a submodule (its work)."""
        if self._loop_modules is None:
            found: dict[str, Work] = {}
            owner = self.owner_facts
            if owner is not None:
                for site in self.cfg.defs:
                    if site.kind != "for" or site.value is None:
                        continue
                    iterable = site.value
                    if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name):
                        if (
                            iterable.func.value in ("enumerate", "zip", "reversed")
                            and iterable.args
                        ):
                            iterable = iterable.args[-1 if site.unpacked else 0].value
                    base = dotted_name(iterable)
                    if base is not None and base.startswith("self.") and base.count(".") == 1:
                        component = base.split(".")[1]
                        if component in owner.submodules:
                            found[site.name] = self._submodule_work(
                                component, ("self", component), PEAK
                            )
            self._loop_modules = found
        return self._loop_modules

    def node_work(self, node: Node) -> Work:
        """The heaviest work a CFG node does; a loop header counts its body's work."""
        cached = self._node_work.get(node.index)
        if cached is not None:
            return cached
        best = _NO_WORK
        for call in node.calls:
            work = self.work(call)
            if work.level > best.level:
                best = work
        self._node_work[node.index] = best
        return best

    def loop_work(self, header: Node) -> Work:
        """What one loop's body does at its heaviest (tensor ops count as layer work)."""
        assert header.loop_body is not None
        best = _NO_WORK
        computes = False
        for node in header.loop_body:
            work = self.node_work(node)
            if work.level > best.level:
                best = work
            if not computes and work.level <= LIGHT:
                computes = any(self._call_value(c, node, False).kind == TENSOR for c in node.calls)
        if best.level < LAYER and computes:
            return Work(LAYER, "loop")
        if best.level <= LIGHT:
            return _NO_WORK
        return Work(best.level, "loop", best.by_pattern, best.parts)


# Packages of kernel DSLs, and their language modules (whose calls mark a kernel body).
_KERNEL_PACKAGES = ("triton", "helion", "tilelang", "cutlass", "cuda.tile", "numba.cuda", "warp")
_KERNEL_LANGUAGES = (
    "triton.language.", "helion.language.", "tilelang.language.", "cutlass.cute.",
    "numba.cuda.", "warp.", "cuda.tile.",
)  # fmt: skip


def _small_shape(call: cst.Call) -> bool:
    """An allocation of at most two dimensions, one of them a small literal
    (`torch.ones(batch, 1)`, `torch.zeros(max_objs, 4)`): a vector or a few columns."""
    dims = [a.value for a in call.args if a.keyword is None and not a.star]
    if len(dims) == 1 and isinstance(dims[0], (cst.Tuple, cst.List)):
        dims = [e.value for e in dims[0].elements]
    if not 1 <= len(dims) <= 2:
        return False
    return any(isinstance(d, cst.Integer) and int(d.value, 0) <= 16 for d in dims)


def _edge_shape(call: cst.Call) -> bool:
    """`x.new_zeros((x.shape[0], x.shape[1], 1, x.shape[3]))`: one tensor's shape with an axis
    after the first replaced by a literal of at most two (a halo, an edge-frame pad): a
    fraction of that tensor, as an edge slice is."""
    dims = [a.value for a in call.args if a.keyword is None and not a.star]
    if len(dims) == 1 and isinstance(dims[0], (cst.Tuple, cst.List)):
        dims = [e.value for e in dims[0].elements]
    if len(dims) < 3:
        return False
    template: str | None = None
    edge = False
    for position, dim in enumerate(dims):
        literal = _literal_int(dim)
        if literal is not None and position > 0 and 0 < literal <= 2:
            edge = True
            continue
        name = _shape_dimension_of(dim, position)
        if name is None or (template is not None and name != template):
            return False
        template = name
    return edge and template is not None


def _shape_dimension_of(dim: cst.BaseExpression, position: int) -> str | None:
    """The tensor `dim` is dimension `position` of (`x.shape[2]`, `x.size(2)`), or None."""
    if isinstance(dim, cst.Subscript) and len(dim.slice) == 1:
        base, index = dim.value, dim.slice[0].slice
        if (
            isinstance(base, cst.Attribute)
            and base.attr.value == "shape"
            and isinstance(base.value, cst.Name)
            and isinstance(index, cst.Index)
            and _literal_int(index.value) == position
        ):
            return base.value.value
    if (
        isinstance(dim, cst.Call)
        and isinstance(dim.func, cst.Attribute)
        and dim.func.attr.value == "size"
        and isinstance(dim.func.value, cst.Name)
        and len(dim.args) == 1
        and _literal_int(dim.args[0].value) == position
    ):
        return dim.func.value.value
    return None


# At most this many elements (16 MiB at 4 bytes each) in a shape of integer literals.
_SMALL_LITERAL_ELEMENTS = 4 * 1024 * 1024


def _small_literal_shape(call: cst.Call) -> bool:
    """An allocation whose every dimension is an integer literal, of at most
    `_SMALL_LITERAL_ELEMENTS` elements (`torch.zeros(1, 1, 3, 180, 320)`: 0.7 MiB at fp32).
    A shape the code states outright is a dummy or a constant, not a model's activation."""
    dims = [a.value for a in call.args if a.keyword is None and not a.star]
    if len(dims) == 1 and isinstance(dims[0], (cst.Tuple, cst.List)):
        dims = [e.value for e in dims[0].elements]
    if not dims or not all(isinstance(d, cst.Integer) for d in dims):
        return False
    elements = 1
    for dim in dims:
        assert isinstance(dim, cst.Integer)
        elements *= int(dim.value, 0)
    return elements <= _SMALL_LITERAL_ELEMENTS


def _shape_template(call: cst.Call) -> str | None:
    """The one tensor whose dimensions (`x.shape[i]`, `x.size(i)`) give an allocation at
    least two of its sizes, or None."""
    names: set[str] = set()
    count = 0
    for arg in call.args:
        if arg.keyword is not None or arg.star:
            continue
        dims = arg.value.elements if isinstance(arg.value, (cst.Tuple, cst.List)) else [arg.value]
        for dim in dims:
            value = dim.value if isinstance(dim, cst.BaseElement) else dim
            name = _dimension_of(value)
            if name is not None:
                names.add(name)
                count += 1
    return names.pop() if len(names) == 1 and count >= 2 else None


def _dimension_of(value: cst.BaseExpression) -> str | None:
    """`x.shape[i]` or `x.size(i)`: the name `x`."""
    if isinstance(value, cst.Subscript) and isinstance(value.value, cst.Attribute):
        attribute = value.value
        if attribute.attr.value == "shape" and isinstance(attribute.value, cst.Name):
            return attribute.value.value
    if (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Attribute)
        and value.func.attr.value == "size"
        and isinstance(value.func.value, cst.Name)
        and value.args
    ):
        return value.func.value.value
    return None


def _decorator_callee(decorator: cst.Decorator) -> cst.BaseExpression:
    expr = decorator.decorator
    return expr.func if isinstance(expr, cst.Call) else expr


_KERNEL_ROOTS = frozenset(package.split(".")[0] for package in _KERNEL_PACKAGES)


def _imports_a_kernel_package(context) -> bool:
    """Whether an import of the file binds a name into a kernel package (`triton`, `numba`,
    `cuda`, ...), memoised per file. A qualified name starts with the first word of the
    import binding it resolves through, so without one no name here can be a kernel
    DSL's, and the functions' calls need not be resolved one by one."""
    found = context.memo.get(_KERNEL_IMPORTS_KEY)
    if found is None:
        found = context.memo[_KERNEL_IMPORTS_KEY] = any(
            binding.qualified.split(".")[0] in _KERNEL_ROOTS for binding in context.imports.bindings
        )
    return found


_KERNEL_IMPORTS_KEY = "facts.imports_a_kernel_package"


def _is_kernel_dsl_name(qualified: str) -> bool:
    return any(qualified == p or qualified.startswith(p + ".") for p in _KERNEL_PACKAGES)


def _is_kernel_language(qualified: str) -> bool:
    return qualified.startswith(_KERNEL_LANGUAGES)


def _grouped(call: cst.Call) -> bool:
    """A functional convolution with `groups=` other than a literal 1: one filter per group
    (depthwise when it is the channel count: `F.conv3d(x, w, groups=x.shape[1])`, Haar
    wavelet patchers, Mamba's causal `conv1d`). It keeps the channel count, and a stride
    shrinks it, so its output is at most about one input: one sublayer, not the wide
    channel expansion that sets a block's peak (measured: the Cosmos tokenizer's wavelet
    subbands held across such convolutions lower its peak by 0 MiB, benchmarks/RESULTS.md,
    VAE calibration)."""
    for argument in call.args:
        keyword = argument.keyword
        if keyword is not None and keyword.value == "groups":
            value = argument.value
            return not (isinstance(value, cst.Integer) and value.value == "1")
    return False


def _argument_for(
    call: cst.Call, callee: cst.FunctionDef, parameter: str
) -> cst.BaseExpression | None:
    """The argument of `call` bound to `callee`'s `parameter` (positional, then keyword;
    None where a starred argument hides it or none is given)."""
    names = [p.name.value for p in callee.params.params]
    if isinstance(call.func, cst.Attribute) and names and names[0] in ("self", "cls"):
        names = names[1:]
    position = 0
    for arg in call.args:
        if arg.star:
            return None
        if arg.keyword is not None:
            if arg.keyword.value == parameter:
                return arg.value
            continue
        if position < len(names) and names[position] == parameter:
            return arg.value
        position += 1
    return None


_REBINDING_STATEMENTS = frozenset((cst.AssignTarget, cst.AugAssign, cst.AnnAssign))
_REBINDING_LOOPS = frozenset((cst.For, cst.CompFor, cst.NamedExpr))
_NEW_SCOPES = frozenset((cst.FunctionDef, cst.Lambda, cst.ClassDef))


def _parameter_returned_as_given(function: cst.FunctionDef) -> str | None:
    """The parameter every `return` of `function` hands back unchanged (never rebound in
    it), or None."""
    parameters = {p.name.value for p in function.params.params}
    returned: set[str] = set()
    rebound: set[str] = set()
    others = False

    # Exact types (these LibCST classes have no subclasses): isinstance() against LibCST's
    # ABC-based classes is slow, and this runs on every node of every local callee.
    def enter(node: Any) -> None:
        nonlocal others
        kind = type(node)
        if kind is cst.Return:
            if type(node.value) is cst.Name and node.value.value in parameters:
                returned.add(node.value.value)
            else:
                others = True
        elif kind in _REBINDING_STATEMENTS:
            target = node.target
            if type(target) is cst.Name:
                rebound.add(target.value)
        elif kind in _REBINDING_LOOPS and type(node.target) is cst.Name:
            rebound.add(node.target.value)

    def descend(node: cst.CSTNode) -> bool:
        return type(node) not in _NEW_SCOPES

    for statement in function.body.body:
        walk(statement, enter, lambda node: None, descend)
    if len(returned) == 1 and not others and not returned & rebound:
        return next(iter(returned))
    return None


def _filled_display(value: cst.BaseExpression | None) -> bool:
    """A comprehension or a non-empty display (an empty `[]` is filled by what is put in)."""
    if isinstance(value, (cst.ListComp, cst.SetComp, cst.DictComp)):
        return True
    return isinstance(value, (cst.List, cst.Tuple, cst.Set, cst.Dict)) and bool(value.elements)


# Keywords of a denoiser's call: its output is a prediction the size of its latent input.
_DENOISER_WORDS = ("timestep", "sigma", "noise_level")


def _is_denoiser_keyword(keyword: str) -> bool:
    """`timestep=t`, `timesteps=`, `sigma_value=`: a noise level a denoiser conditions on."""
    lowered = keyword.lower()
    return any(word in lowered for word in _DENOISER_WORDS)


# Work whose weight follows its main input: sublayers, module parameters, torch ops.
_INPUT_SIZED_KINDS = frozenset({"submodule", "module-parameter", "torch-op"})


def _from_calls(value: cst.BaseExpression, fact: ValueFact) -> bool:
    """A call's result (`return kernel(x)`), or a local bound only to calls (`out =
    kernel(x)`; `return out`): not a value the analysis has seen to be borrowed."""
    if isinstance(value, cst.Call):
        return True
    return (
        isinstance(value, cst.Name)
        and bool(fact.sources)
        and all(s.kind == "assign" and isinstance(s.value, cst.Call) for s in fact.sources)
    )


def _combined_returns(facts: list[ValueFact], keep_views: bool = False) -> ValueFact:
    """One fact for all the values a helper may return. `keep_views`: views of the helper's
    own bindings stay views (their sources are the helper's: the caller must map them)."""
    facts = [f for f in facts if f != _METADATA] or facts
    if not facts:
        return _METADATA
    if all(f.kind == TENSOR for f in facts):
        return ValueFact(TENSOR, _largest(f.origin for f in facts))
    if all(f.kind == CONTAINER for f in facts):
        return ValueFact(CONTAINER, _largest(f.origin for f in facts))
    if all(f.kind in (TENSOR, CONTAINER) or f.is_tensor for f in facts) and any(
        f.kind in (TENSOR, CONTAINER) for f in facts
    ):
        return ValueFact(TENSOR, _largest(f.origin for f in facts))  # may be its input
    if keep_views and all(f.kind == VIEW and f.tensor and f.sources for f in facts):
        # Views of the helper's own bindings (of its parameters, `_view_of_argument`).
        sources = tuple(s for f in facts for s in f.sources)
        return ValueFact(VIEW, _largest(f.origin for f in facts), sources, tensor=True)
    if all(f.kind == METADATA for f in facts):
        return _METADATA
    return _UNKNOWN


def _passes_itself(site: DefSite) -> bool:
    """`q, k = rope_inplace(q, k, cache)`: the name is a positional argument of the call
    it is rebound to."""
    call = site.value
    return isinstance(call, cst.Call) and any(
        isinstance(arg.value, cst.Name)
        and arg.value.value == site.name
        and arg.keyword is None
        and not arg.star
        for arg in call.args
    )


_LOADERS = ("load", "build", "make", "create", "init", "get_model", "from_", "setup")


def _reads_name(expr: cst.BaseExpression, name: str) -> bool:
    found: list[bool] = []

    def enter(node: cst.CSTNode) -> None:
        if type(node) is cst.Name and node.value == name:
            found.append(True)

    walk(expr, enter, _ignore)
    return bool(found)


def _moves_to_device(method: str, call: cst.Call) -> bool:
    """`.to(device)`, `.to(x)`, `.cuda()`: a copy onto another device; `.to(dtype=...)`,
    `.to(torch.float32)`, `.float()`, `.contiguous()` keep the tensor where it is."""
    if method == "cuda":
        return True
    if method != "to":
        return False
    for arg in call.args:
        if arg.star:
            return True
        if arg.keyword is not None:
            if arg.keyword.value not in ("dtype", "non_blocking", "copy", "memory_format"):
                return True
            continue
        text = dotted_name(arg.value) or ""
        if not (text.startswith("torch.") or "dtype" in text.lower()):
            return True  # `.to(device)`, `.to(x)`, `.to("cuda")`
    return False


# A number format after `decode`/`encode` (`decode_e8m0`, `decode_fp8`, `encode_nvfp4`,
# `_decode_int4`): bits to values, not a model's decoder.
_NUMERIC_CODEC = compile_lazily(
    r"_?(?:de|en)code_(?:fp\d+|bf16|e\d+m\d+|mx\w*|nvfp\w*|u?int\d+|float\d*|nf4|f\d+)\w*"
)


def _numeric_codec(name: str) -> bool:
    return _NUMERIC_CODEC.fullmatch(name.lower()) is not None


# Words of a quantity (memory, a limit, a count) in a function named for decoding or
# encoding: `decode_mib_per_latent(...)`, `decode_platform_cap(vae, z)`, `decode_tile_budget`,
# `encode_memory_estimate` size a decode or encode (a number of MiB, a tile cap) and run none.
_QUANTITY_WORDS = frozenset(
    [
        "mib", "gib", "mb", "gb", "bytes", "cap", "caps", "budget", "budgets", "limit",
        "limits", "estimate", "estimates", "shortfall", "cost", "costs", "flops", "count",
        "counts", "ratio", "fraction", "overhead", "headroom",
    ]
)  # fmt: skip


def _measures_a_codec(name: str) -> bool:
    """Whether a function named for decoding or encoding is named for a quantity of it
    (`decode_mib_per_latent`, `decode_platform_cap`): it returns a number that sizes the
    work (an estimate, a cap), not decoded frames or latents, and runs no model."""
    words = set(name.lower().strip("_").split("_"))
    return bool(words & {"decode", "encode"}) and bool(words & _QUANTITY_WORDS)


def _names_a_decoder(func: cst.BaseExpression) -> bool:
    """`self.decoder(...)`, `vae.decode(...)`, `self._decode(...)`: the callee's last name."""
    name = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", "")
    return isinstance(name, str) and "decode" in name.lower()


# A decoder's latent input by keyword, where it is not the first positional argument.
_LATENT_KEYWORDS = frozenset(["z", "latent", "latents", "sample", "x"])


def _main_argument(call: cst.Call) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.star:
            return None
        if arg.keyword is None:
            return arg.value
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value in _LATENT_KEYWORDS:
            return arg.value
    return None


def _base_name(expr: cst.BaseExpression | None) -> str | None:
    """The local a slice or view chain reads (`x[:, :, i]`, `z.to(dtype)`, `tile.contiguous()`)."""
    while expr is not None:
        if isinstance(expr, cst.Name):
            return expr.value
        if isinstance(expr, cst.Subscript):
            expr = expr.value
        elif (
            isinstance(expr, cst.Call)
            and isinstance(expr.func, cst.Attribute)
            and (
                expr.func.attr.value in T.VIEW_METHODS
                or expr.func.attr.value in T.MAYBE_COPY_METHODS
            )
        ):
            expr = expr.func.value
        else:
            return None
    return None


def _pixel_preprocess(func: cst.BaseExpression) -> str | None:
    """`self.video_processor.preprocess_video(...)`: diffusers' image and video processors
    return pixel-space tensors: frames of a video (large) or one image (a few MiB)."""
    if not isinstance(func, cst.Attribute) or not func.attr.value.startswith("preprocess"):
        return None
    owner = dotted_name(func.value) or ""
    if not owner.rsplit(".", 1)[-1].endswith("processor"):
        return None
    return DECODED if "video" in func.attr.value else IMAGE


_HOST_OUTPUT_TYPES = frozenset(["np", "numpy", "pil"])


def _asks_host_output(call: cst.Call) -> bool:
    """A call given `output_type="np"` or `"pil"` (diffusers' decode and postprocess
    convention) returns numpy arrays or PIL images in host memory, not a device tensor."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "output_type":
            value = arg.value
            return (
                isinstance(value, cst.SimpleString)
                and value.evaluated_value.lower() in _HOST_OUTPUT_TYPES
            )
    return False


def _is_string_codec(call: cst.Call) -> bool:
    """`s.encode()`, `blob.decode("utf-8")`, `raw.decode(errors="replace")`: str/bytes
    conversion, not an encoder or decoder model. A model's `encode`/`decode` takes the
    tensor to work on; a codec takes nothing, an encoding name or `encoding=`/`errors=`."""
    func = call.func
    if _names_payload_codec(func):
        return True
    if not isinstance(func, cst.Attribute) or func.attr.value not in ("encode", "decode"):
        return False
    if isinstance(func.value, cst.Name) and func.value.value == "self":
        return False  # `self.decode()`: the class's own method
    if any(a.star for a in call.args):
        return False
    positional = [a for a in call.args if a.keyword is None]
    if any(
        a.keyword is not None and a.keyword.value not in ("encoding", "errors") for a in call.args
    ):
        return False
    if not positional:
        return True
    return len(positional) <= 2 and all(
        isinstance(a.value, (cst.SimpleString, cst.ConcatenatedString)) for a in positional
    )


# Words of a text payload (base64, JSON, a URL, hex, bytes) in a codec's name: what
# `decode_b64_image(data)`, `decode_json_payload(raw)` or `encode_base64(png)` turn into
# one another lives on the host (strings, bytes, a PIL image), whatever `decode` says.
_PAYLOAD_WORDS = frozenset(
    ["b64", "base64", "json", "url", "uri", "utf8", "hex", "bytes", "blob", "msgpack", "jwt"]
)


def _names_payload_codec(func: cst.BaseExpression) -> bool:
    """`decode_b64_image`, `utils.decode_base64(...)`, `self._encode_json(...)`: a function
    named for encoding or decoding a text payload, not for a model's encoder or decoder."""
    name = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", None)
    if not isinstance(name, str):
        return False
    words = set(name.lower().strip("_").split("_"))
    return bool(words & {"encode", "decode", "b64decode", "b64encode"}) and bool(
        words & _PAYLOAD_WORDS or words & {"b64decode", "b64encode"}
    )


def _is_tensor_method(name: str) -> bool:
    return (
        name in T.VIEW_METHODS
        or name in T.MAYBE_COPY_METHODS
        or name in T.TENSOR_ONLY_METHODS
        or name in T.TENSOR_METHODS_ON_TENSORS
        or name in T.REDUCTIONS
        or name in T.METADATA_METHODS
    )


_VERBS = (
    "add_", "get_", "set_", "make_", "build_", "load_", "_load", "register_", "init_",
    "create_", "prepare_", "check_", "update_", "apply_", "run_", "compute_", "from_",
)  # fmt: skip


def _is_sublayer_name(name: str) -> bool:
    """Attribute names that only modules have (`linear2`, `ffn`, `to_out`, `conv1`), not
    methods named by a verb (`add_stage`, `get_attention_mask`)."""
    lowered = name.lower()
    if lowered.startswith(_VERBS):
        return False
    if lowered in T.METADATA_METHODS or lowered in T.VIEW_METHODS or lowered in _MODULE_BOOKKEEPING:
        return False
    if lowered in T.TENSOR_ONLY_METHODS or lowered in T.TENSOR_METHODS_ON_TENSORS:
        return False
    return (
        _glob_any(lowered, T.LIGHT_SUBMODULES + T.PEAK_SUBMODULES + T.CROSS_ATTENTION)
        or lowered.startswith(("conv", "fc", "to_", "linear", "mlp", "attn"))
    ) and not lowered.startswith(("pad", "scale", "shift"))


# The last word of a submodule's name that says it adds a residual or applies a gate
# (`img_mlp_residual`, `attn_gate`, `ScaleResidual`, `MulAdd`): elementwise work whatever
# sublayer the earlier words name.
_RESIDUAL_WORDS = frozenset({"residual", "gate", "gated"})


def _is_residual_op(name: str, call: cst.Call) -> bool:
    """`self.img_mlp_residual(residual, mlp_out, gate)`: a module named by its last word as
    a residual add or a gate, called on two or more tensors (the residual and the update,
    maybe a gate). One argument (`self.residual(x)`, `self.mlp_gate(x)`) may be a shortcut
    convolution or a router's projection: not this fact."""
    words = [word for word in name.lower().split("_") if word]
    if not words or words[-1] not in _RESIDUAL_WORDS:
        return False
    positional = [arg for arg in call.args if arg.keyword is None and not arg.star]
    return len(positional) >= 2


_MODULE_WORDS = frozenset(
    {"module", "layer", "block", "net", "submodule", "model", "conv", "mlp", "attn", "ffn"}
)


def _is_module_name(name: str) -> bool:
    """A parameter name that says module (`conv`, `block`, `layer_module`), not callback."""
    lowered = name.lower()
    if lowered.startswith(("callback", "fn", "func", "hook", "get_", "make_")):
        return False
    words = set(lowered.split("_"))
    return bool(words & _MODULE_WORDS) or _is_sublayer_name(lowered)


def _ignore(node: cst.CSTNode) -> None:
    return None


# Module methods that do no tensor work.
_MODULE_BOOKKEEPING = frozenset(
    {
        "parameters", "named_parameters", "buffers", "named_buffers", "modules",
        "named_modules", "children", "named_children", "state_dict", "load_state_dict",
        "train", "eval", "requires_grad_", "zero_grad", "register_forward_hook",
        "register_forward_pre_hook", "apply", "extra_repr", "get", "set", "update",
        "reset", "clear", "keys", "values", "items", "copy", "append", "extend",
    }
)  # fmt: skip
# A method named for dropping state (`vae.clear_cache()`, `self.model.reset_kv_cache()`,
# `clear_feature_cache`): it rebinds or empties the module's caches and allocates nothing
# (a causal VAE's `clear_cache` sets `self._feat_map = [None] * n`), so what is held across
# it adds nothing to a peak; it lowers the peak, if anything.
_CLEARING_PREFIXES = ("clear_", "reset_", "_clear_", "_reset_")


# Resampling ops: their output is their input resized, with the input's channels.
_RESAMPLING_OPS = frozenset(["interpolate", "grid_sample"])


def _resamples_a_mask(call: cst.Call) -> bool:
    """Whether a resampling op's input is a mask (`F.interpolate(mask_.unsqueeze(0),
    size=(frames, h, w), mode="nearest-exact")`, `interpolate(attention_mask[None], ...)`):
    a mask has one value per position, one channel where an activation or a video has
    several (3 to hundreds), so the resized mask is a fraction of what sets the peak
    around it, and resizing it is not peak work."""
    name = _base_name(_main_argument(call))
    if name is None:
        return False
    return name.lower().strip("_").rstrip("0123456789").endswith(("mask", "masks"))


def _is_bookkeeping(name: str) -> bool:
    """A module method that does no tensor work (`state_dict`, `eval`, `clear_cache`)."""
    return name in _MODULE_BOOKKEEPING or name.startswith(_CLEARING_PREFIXES)


def _model_kind(parts: tuple[str, ...]) -> str:
    """decode / encoder / model, from the callee's name (for messages and origins)."""
    text = ".".join(parts).lower()
    if any(word in text for word in _CONDITIONING_ENCODERS):
        return "encoder"  # text/image conditioning
    if "encode" in text:
        return "encode"  # a VAE or feature encoder
    if "decode" in text or "vae" in text:
        return "decode"
    return "model"


_CONDITIONING_ENCODERS = (
    "text_encoder", "encode_prompt", "image_encoder", "encode_image", "clip", "t5",
    "text_model", "prompt", "caption",
)  # fmt: skip


# Domains of files that say they are not about images, video or latents (a speech model's,
# or a long file with none of their words): a decoder called there (ASR, seq2seq) returns
# hidden states, not decoded frames. A short file says too little (`unjudged`: a VAE helper).
_UNVISUAL_DOMAINS = (SMALL_DOMAIN, UNKNOWN_DOMAIN)


def _origin_of_work(work: Work) -> str:
    if work.level == MODEL:
        if work.kind == "decode":
            return DECODED
        if work.kind == "encoder":
            return CONDITIONING
        if work.kind == "encode" and "vae" in ".".join(work.parts).lower():
            return LATENTS
        last = work.parts[-1].lower() if work.parts else ""
        if "lm_head" in last or "logits" in last:
            return LOGITS
        if last == "generate":
            return SMALL  # `model.generate(...)` returns token ids: batch x new tokens
        return MODEL_OUTPUT
    if work.parts and "lm_head" in work.parts[-1].lower():
        return LOGITS
    return ACTIVATION


_DEFAULT_DEVICE_KEY = "facts.sets_default_device"
_SETS_DEFAULT_DEVICE = compile_lazily(
    r"set_default_device|set_default_tensor_type|with\s+torch\.device\(|default_device\("
)

# Origins that say nothing of a value's size beyond "a tensor of the model's activations".
_UNSIZED_ORIGINS = frozenset([ACTIVATION, CONCATENATION, MODEL_OUTPUT, CACHE_ENTRY, ALLOCATION])


# Larger first: combining origins keeps the largest.
_ORIGIN_RANK = {
    DECODED: 0,
    LOGITS: 1,
    CONCATENATION: 2,
    MODEL_OUTPUT: 3,
    ACTIVATION: 4,
    CACHE_ENTRY: 5,
    ALLOCATION: 6,
    CONDITIONING: 7,
    IMAGE: 8,
    SMALL_MODEL: 8,
    LATENTS: 9,
    SMALL: 10,
}


def _largest(origins: Iterable[str]) -> str:
    best = SMALL
    for origin in origins:
        if _ORIGIN_RANK.get(origin, 4) < _ORIGIN_RANK[best]:
            best = origin
    return best


def _target_names(target: cst.BaseExpression) -> list[str]:
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in _target_names(e.value)]
    return []


def _unwrap_iteration(iterable: cst.BaseExpression | None) -> cst.BaseExpression | None:
    """`enumerate(rows)`, `reversed(rows)`: the iterable whose elements the target gets."""
    if (
        isinstance(iterable, cst.Call)
        and isinstance(iterable.func, cst.Name)
        and iterable.func.value in ("enumerate", "reversed")
        and iterable.args
    ):
        return iterable.args[0].value
    if (
        isinstance(iterable, cst.Call)
        and isinstance(iterable.func, cst.Name)
        and iterable.func.value == "zip"
    ):
        return None
    return iterable


def _literal_int(value: cst.BaseExpression | None) -> int | None:
    if isinstance(value, cst.Integer):
        return int(value.value, 0)
    if (
        isinstance(value, cst.UnaryOperation)
        and isinstance(value.operator, cst.Minus)
        and isinstance(value.expression, cst.Integer)
    ):
        return -int(value.expression.value, 0)
    return None


def _edge_slice(subscript: cst.Subscript) -> bool:
    """`x[:, :, :1]`, `x[:, -1:]`, `x[..., 0:2]`: a slice of at most two along an axis
    after the first (the batch axis of a batch of one is all of it). It is a fraction of
    its source (one frame of T, the last token of N), not activation-sized."""
    for position, element in enumerate(subscript.slice):
        part = element.slice
        if position == 0 or not isinstance(part, cst.Slice) or part.step is not None:
            continue
        lower, upper = _literal_int(part.lower), _literal_int(part.upper)
        if part.lower is None and upper is not None and 0 < upper <= 2:
            return True  # `:1`, `:2`
        if part.upper is None and lower is not None and -2 <= lower < 0:
            return True  # `-1:`, `-2:`
        if lower is not None and upper is not None and (lower >= 0) == (upper > 0):
            if 0 < upper - lower <= 2:
                return True  # `0:1`, `-2:-1`
    return False


def _index_text(context, subscript: cst.Subscript) -> str | None:
    """The source text of a single plain index (`c[i]`, `c[idx]`, `c["k"]`), else None."""
    if len(subscript.slice) != 1:
        return None
    element = subscript.slice[0].slice
    if not isinstance(element, cst.Index):
        return None
    value = element.value
    if isinstance(value, cst.Name):
        return value.value
    if isinstance(value, (cst.Integer, cst.SimpleString)):
        return value.value
    text = dotted_name(value)
    return text


def _annotation_is_tensor(annotation: cst.BaseExpression) -> bool:
    """`Tensor`, `torch.FloatTensor`, `Optional[Tensor]`, `Tensor | None`: a tensor itself,
    not a container of tensors."""
    if isinstance(annotation, (cst.Name, cst.Attribute)):
        name = annotation.value if isinstance(annotation, cst.Name) else annotation.attr.value
        return name.endswith("Tensor")
    if isinstance(annotation, cst.SimpleString):
        text = annotation.evaluated_value
        return isinstance(text, str) and text.replace(" ", "").split(".")[-1] in (
            "Tensor",
            "Optional[Tensor]",
        )
    if isinstance(annotation, cst.BinaryOperation) and isinstance(annotation.operator, cst.BitOr):
        sides = (annotation.left, annotation.right)
        return any(_annotation_is_tensor(side) for side in sides) and all(
            _annotation_is_tensor(side) or (isinstance(side, cst.Name) and side.value == "None")
            for side in sides
        )
    if isinstance(annotation, cst.Subscript):
        outer = dotted_name(annotation.value) or ""
        if outer.split(".")[-1] == "Optional" and len(annotation.slice) == 1:
            inner = annotation.slice[0].slice
            return isinstance(inner, cst.Index) and _annotation_is_tensor(inner.value)
    return False


_SCALAR_TYPES = frozenset({"int", "float", "str", "bool", "bytes", "complex", "None", "Path"})
_SCALAR_CONTAINERS = frozenset(
    {"list", "tuple", "dict", "set", "frozenset", "sequence", "iterable", "iterator", "mapping",
     "optional", "union", "literal", "deque"}
)  # fmt: skip


def _returns_scalar(function: cst.FunctionDef | None) -> bool:
    """A function of this file annotated `-> str`, `-> int`, `-> list[str]`: never a tensor.
    (`-> None` says nothing of its work: it may run sublayers for their side effects.)"""
    if function is None or function.returns is None:
        return False
    annotation = function.returns.annotation
    if isinstance(annotation, cst.Name) and annotation.value == "None":
        return False
    return _annotation_is_scalar(annotation)


# Words in a class name that say it carries tensors (`DecoderOutput`, `TensorDict`,
# `DiagonalGaussianDistribution`, `KVCache`, `BaseModelOutput`, `Any`).
_TENSOR_CARRIER_WORDS = ("Tensor", "Output", "Any", "Array", "Parameter", "Dist", "Cache", "Latent")


def _annotation_is_object(annotation: cst.BaseExpression) -> bool:
    """`EngineCoreRequest`, `Optional[SchedulerOutput]`... a class that is not a tensor nor
    says it carries tensors (`_TENSOR_CARRIER_WORDS`)."""
    if isinstance(annotation, cst.Subscript):
        outer = (dotted_name(annotation.value) or "").split(".")[-1]
        if outer != "Optional" or len(annotation.slice) != 1:
            return False
        inner = annotation.slice[0].slice
        return isinstance(inner, cst.Index) and _annotation_is_object(inner.value)
    if isinstance(annotation, cst.BinaryOperation) and isinstance(annotation.operator, cst.BitOr):
        sides = [s for s in (annotation.left, annotation.right)
                 if not (isinstance(s, cst.Name) and s.value == "None")]  # fmt: skip
        return len(sides) == 1 and _annotation_is_object(sides[0])
    name = dotted_name(annotation)
    if name is None:
        return False
    last = name.split(".")[-1]
    return last[:1].isupper() and not any(word in last for word in _TENSOR_CARRIER_WORDS)


def _annotation_is_scalar(annotation: cst.BaseExpression) -> bool:
    """`int`, `list[tuple[int, int]]`, `Optional[str]`, `dict[str, float]`: numbers,
    strings and paths (and containers of only those), never a tensor."""
    if isinstance(annotation, cst.Name):
        return annotation.value in _SCALAR_TYPES
    if isinstance(annotation, cst.Attribute):
        return annotation.attr.value == "Path"
    if isinstance(annotation, cst.BinaryOperation) and isinstance(annotation.operator, cst.BitOr):
        return _annotation_is_scalar(annotation.left) and _annotation_is_scalar(annotation.right)
    if isinstance(annotation, cst.Subscript):
        outer = (dotted_name(annotation.value) or "").split(".")[-1].lower()
        if outer == "literal":
            return True
        if outer not in _SCALAR_CONTAINERS:
            return False
        return all(
            isinstance(e.slice, cst.Index)
            and (isinstance(e.slice.value, cst.Ellipsis) or _annotation_is_scalar(e.slice.value))
            for e in annotation.slice
        )
    return False


def _is_range_call(iterable: cst.BaseExpression | None) -> bool:
    return (
        isinstance(iterable, cst.Call)
        and isinstance(iterable.func, cst.Name)
        and iterable.func.value == "range"
    )


def _annotation_holds_tensors(annotation: cst.BaseExpression) -> bool:
    """`list[torch.Tensor]`, `List[Tensor]`, `tuple[Tensor, ...]`."""
    if isinstance(annotation, cst.Subscript):
        outer = (dotted_name(annotation.value) or "").split(".")[-1].lower()
        if outer in ("list", "tuple", "sequence", "deque"):
            return any(
                isinstance(e.slice, cst.Index) and _annotation_is_tensor(e.slice.value)
                for e in annotation.slice
            )
    return False


def _annotation_is_tensor_tuple(annotation: cst.BaseExpression) -> bool:
    """`tuple[torch.Tensor, torch.Tensor]`, `Tuple[Tensor, ...]`: a fixed tuple of tensors,
    the way a helper returning `q, k, v` is annotated."""
    if not isinstance(annotation, cst.Subscript):
        return False
    if (dotted_name(annotation.value) or "").split(".")[-1].lower() != "tuple":
        return False
    items = [e.slice for e in annotation.slice]
    return all(isinstance(item, cst.Index) for item in items) and all(
        _annotation_is_tensor(item.value) or isinstance(item.value, cst.Ellipsis)
        for item in items
        if isinstance(item, cst.Index)
    )


_MODULE_SUFFIXES = (
    "Module", "Layer", "Attention", "Conv1d", "Conv2d", "Conv3d", "Linear", "Block",
    "MLP", "Embedding", "Conv", "Encoder", "Decoder", "Transformer", "Model",
)  # fmt: skip


def _annotation_is_module(annotation: cst.BaseExpression) -> bool:
    name = dotted_name(annotation)
    if name is None and isinstance(annotation, cst.BinaryOperation):
        return _annotation_is_module(annotation.left)
    if name is None:
        return False
    last = name.split(".")[-1]
    return last.endswith(_MODULE_SUFFIXES) and not last.endswith("Tensor")


# -- values backpropagated as scalars (LL001) -------------------------------------------------


# Gaussian noise drawn like a tensor (`torch.randn_like(x)`, diffusers' `randn_tensor`).
_NOISE_CALLS = frozenset(["randn_like", "randn", "randn_tensor", "normal", "normal_like"])


def _noise_call(node: cst.CSTNode) -> bool:
    if not isinstance(node, cst.Call):
        return False
    name = dotted_name(node.func)
    return name is not None and name.rsplit(".", 1)[-1] in _NOISE_CALLS


def mixes_noise(function: cst.FunctionDef, value: cst.BaseExpression | None) -> bool:
    """Whether a value is arithmetic with Gaussian noise drawn in the function: a sample of
    diffusion's forward process (`(1 - sigma) * clean + sigma * noise`) or of a VAE
    posterior (`mean + std * torch.randn_like(mean)`), read directly or through a local
    bound to the draw (`noise = torch.randn_like(x)`). Both live in latent space: a
    training step or a sampler noises latents (pixel-space noise augmentation noises one
    conditioning image), so the value is latent-sized whatever it is called (`noisy_video`)."""
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
        if value.func.attr.value not in ("to", "type_as", "contiguous", "float", "half"):
            break
        value = value.func.value  # `(...).type_as(x)`, `(...).to(dtype)`
    if not isinstance(value, cst.BinaryOperation):
        return False
    drawn: set[str] = set()

    def collect(node: cst.CSTNode) -> None:
        if isinstance(node, cst.Assign) and len(node.targets) == 1:
            target = node.targets[0].target
            if isinstance(target, cst.Name) and _noise_call(node.value):
                drawn.add(target.value)

    walk(function, collect, lambda node: None)
    found = False

    def enter(node: cst.CSTNode) -> None:
        nonlocal found
        if _noise_call(node) or (isinstance(node, cst.Name) and node.value in drawn):
            found = True

    walk(value, enter, lambda node: None)
    return found


def torch_is_oneflow(context) -> bool:
    """Whether the file's `torch` is OneFlow (`import oneflow as torch`, at module level): a
    PyTorch module ported so that a graph compiler traces it (onediff compiles such ports
    into a OneFlow `nn.Graph`), and the compiled graph plans its own memory: a Python `del`
    of a local, which only drops a reference while tracing, does not change that plan."""
    return any(
        binding.scope is None and binding.qualified.split(".")[0] == "oneflow"
        for binding in context.imports.bindings_for("torch")
    )


def backpropagated_scalars(function: cst.FunctionDef) -> frozenset[str]:
    """The names a function backpropagates as scalars: the tensor of a `backward` call with
    no gradient (`loss.backward()`, `accelerator.backward(loss / k)`,
    `scaler.scale(loss).backward()`, `torch.autograd.backward(loss)`) must hold one element,
    and so must each name in it that is only scaled or summed there (`loss / k`, not
    `loss.mean()`). Such a name is a scalar whatever the call that made it (`loss =
    self.vae(img)`, a model that returns its loss), and `backward` has freed its graph."""
    names: set[str] = set()

    def enter(node: cst.CSTNode) -> None:
        if isinstance(node, cst.Call):
            tensor = _backpropagated(node)
            if tensor is not None:
                names.update(_scaled_names(tensor))

    walk(function, enter, _no_leave)
    return frozenset(names)


# The objects whose `backward(tensor)` backpropagates its argument (Accelerate, Fabric,
# DeepSpeed engines, `torch.autograd`), as opposed to `tensor.backward(gradient)`.
_BACKWARD_OWNERS = compile_lazily(r"accelerator|fabric|engine|autograd|trainer|manager", re.I)


def _backpropagated(call: cst.Call) -> cst.BaseExpression | None:
    """The tensor a gradient-free `backward` call backpropagates, or None."""
    func = call.func
    if any(a.keyword is not None and a.keyword.value in ("gradient", "grad_tensors")
           for a in call.args):  # fmt: skip
        return None
    positional = [a.value for a in call.args if a.keyword is None and not a.star]
    if isinstance(func, cst.Name) and func.value == "backward":
        return positional[0] if len(positional) == 1 else None  # `backward(loss)`
    if not isinstance(func, cst.Attribute) or func.attr.value != "backward":
        return None
    owner = func.value
    if positional:
        # `accelerator.backward(loss)`, `self.accelerator.backward(loss / k)`; a tensor's
        # `x.backward(grad)` passes a gradient (a non-scalar)
        owned = isinstance(owner, cst.Attribute) or (
            isinstance(owner, cst.Name) and bool(_BACKWARD_OWNERS.search(owner.value))
        )
        return positional[0] if owned and len(positional) == 1 else None
    if (
        isinstance(owner, cst.Call)
        and isinstance(owner.func, cst.Attribute)
        and owner.func.attr.value == "scale"
        and len(owner.args) == 1
    ):
        return owner.args[0].value  # `scaler.scale(loss).backward()`
    return owner  # `loss.backward()`, `(loss / k).backward()`


def backward_helpers(module: cst.Module) -> dict[str, tuple[int, str]]:
    """Module-level functions that run backward on one of their parameters: name ->
    (position, name) of that parameter (`def _backward_scalar_loss(loss): ...
    loss.backward()`). A call `_backward_scalar_loss(loss)` in the same file then
    backpropagates `loss` as surely as `loss.backward()` would: one shared notion of "this
    call runs backward through its argument", for the rules that ask (LL006). Only the
    function's own body counts (not a nested function's), and only a gradient-free backward
    (`_backpropagated`) whose tensor reads the parameter by name (`loss`, `loss / k`,
    `scaler.scale(loss)`)."""
    helpers: dict[str, tuple[int, str]] = {}
    for statement in module.body:
        if not isinstance(statement, cst.FunctionDef):
            continue
        ordered = [*statement.params.posonly_params, *statement.params.params]
        positions = {p.name.value: i for i, p in enumerate(ordered)}
        found: list[int] = []

        def enter(node: cst.CSTNode, positions: dict[str, int] = positions,
                  found: list[int] = found) -> bool | None:  # fmt: skip
            if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                return False  # a nested function's backward is not this function's
            if isinstance(node, cst.Call):
                tensor = _backpropagated(node)
                if tensor is not None:
                    found.extend(
                        positions[n.value] for n in _names_in(tensor) if n.value in positions
                    )
            return None

        for child in statement.body.body:
            _visit(child, enter)
        if found and statement.name.value not in helpers:
            position = min(found)
            helpers[statement.name.value] = (position, ordered[position].name.value)
    return helpers


def _visit(node: cst.CSTNode, enter) -> None:
    """Pre-order walk; `enter` returning False skips the node's children."""
    stack = [node]
    while stack:
        current = stack.pop()
        if enter(current) is False:
            continue
        stack.extend(iter_children(current))


def _names_in(expression: cst.CSTNode) -> Iterator[cst.Name]:
    """Name nodes of an expression, not attribute names or keywords (`scaler.scale(loss)`:
    `scaler`, `loss`)."""
    stack: list[cst.CSTNode] = [expression]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Name):
            yield current
        elif isinstance(current, (cst.Attribute, cst.Arg)):
            stack.append(current.value)
        else:
            stack.extend(iter_children(current))


def _scaled_names(expr: cst.BaseExpression) -> Iterator[str]:
    """The names of an expression reached only through arithmetic (`loss / k`, `-loss`,
    `loss_a + 0.1 * loss_b`), not through a call, attribute or subscript."""
    if isinstance(expr, cst.Name):
        yield expr.value
    elif isinstance(expr, cst.BinaryOperation):
        yield from _scaled_names(expr.left)
        yield from _scaled_names(expr.right)
    elif isinstance(expr, cst.UnaryOperation):
        yield from _scaled_names(expr.expression)


# -- serialization codecs bound to names (LL001, issue #12) -----------------------------------
# `self.decoder = MsgpackDecoder()` ... `hashes = self.decoder.decode(frames)`: the object is
# built from a class named for a serialization format, so its `decode`/`encode` turn bytes
# into Python objects (strings, lists, dicts) and back, on the host: no decoder network.
_CODEC_CLASS_WORDS = frozenset(
    ["msgpack", "msgspec", "json", "pickle", "protobuf", "proto", "cbor", "yaml", "bson",
     "base64", "b64", "orjson", "ujson", "serializer", "serialization", "deserializer"]
)  # fmt: skip
_CODEC_NAMES_KEY = "analysis.facts.codec_names"
_CAMEL_WORD = compile_lazily(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


def _payload_codec_call(context, call: cst.Call) -> bool:
    """`self.decoder.decode(frames)` or `decoder.encode(obj)` where the file binds that name
    (`self.decoder = MsgpackDecoder()`, `encoder = msgspec.msgpack.Encoder()`) to an object
    of a serialization codec (`payload_codec_names`)."""
    func = call.func
    if not isinstance(func, cst.Attribute) or func.attr.value not in ("encode", "decode"):
        return False
    bound = dotted_name(func.value)
    return bound is not None and bound in payload_codec_names(context)


def payload_codec_names(context) -> frozenset[str]:
    """The names (`decoder`, `self.decoder`) a file binds to a serialization codec object:
    an assignment from a call of a class whose name or module says a serialization format
    (`MsgpackDecoder()`, `msgspec.msgpack.Decoder(...)`, `json.JSONDecoder()`). Memoised."""
    names = context.memo.get(_CODEC_NAMES_KEY)
    if names is None:
        found: set[str] = set()

        def enter(node: cst.CSTNode) -> None:
            if isinstance(node, cst.Assign) and isinstance(node.value, cst.Call):
                if _names_codec_class(node.value.func):
                    for target in node.targets:
                        bound = dotted_name(target.target)
                        if bound is not None:
                            found.add(bound)

        walk(context.module, enter, _no_leave)
        names = context.memo[_CODEC_NAMES_KEY] = frozenset(found)
    return names


def _names_codec_class(func: cst.BaseExpression) -> bool:
    """A class (a capitalised last name) whose name or dotted module names a serialization
    format: `MsgpackDecoder`, `msgspec.msgpack.Decoder`, `json.JSONDecoder`."""
    dotted = dotted_name(func)
    if dotted is None:
        return False
    parts = dotted.split(".")
    if not parts[-1][:1].isupper():
        return False
    words = {part.lower() for part in parts[:-1]}
    words.update(w.lower() for w in _CAMEL_WORD.findall(parts[-1]))
    return bool(words & _CODEC_CLASS_WORDS)


# -- learned parameters tiled over the batch ---------------------------------------------------


def learned_parameters(owner: cst.ClassDef | None) -> frozenset[str]:
    """The attributes the class's `__init__` binds to a learned parameter
    (`self.token = nn.Parameter(torch.zeros(1, motion_token_num, dim))`,
    `self.query_tokens = torch.nn.Parameter(...)`): a fixed block of weights whose size the
    constructor sets, not something that scales with the input's tokens."""
    if owner is None:
        return frozenset()
    assigns: list[cst.Assign] = []
    for statement in owner.body.body:
        if isinstance(statement, cst.FunctionDef) and statement.name.value == "__init__":
            walk(
                statement.body,
                lambda n: assigns.append(n) if type(n) is cst.Assign else None,
                _ignore,
            )
    found: set[str] = set()
    for assign in assigns:
        value = assign.value
        if not isinstance(value, cst.Call):
            continue
        if (dotted_name(value.func) or "").rsplit(".", 1)[-1] != "Parameter":
            continue
        for target in assign.targets:
            attr = target.target
            if (
                isinstance(attr, cst.Attribute)
                and isinstance(attr.value, cst.Name)
                and attr.value.value == "self"
            ):
                found.add(attr.attr.value)
    return frozenset(found)


# Methods that tile a tensor (`repeat`, `expand`) and those that keep its elements.
_TILING_METHODS = frozenset(["repeat", "expand", "tile"])
_SAME_SIZE_METHODS = frozenset(["clone"]) | T.VIEW_METHODS | T.MAYBE_COPY_METHODS


def batch_tiled_parameter(expr: cst.BaseExpression | None, parameters: frozenset[str]) -> bool:
    """Whether `expr` is one of the class's learned `parameters`, copied or viewed, and tiled
    along the first (batch) axis only (`self.token.clone().repeat(batch_size, 1, 1)`,
    `self.latents.expand(b, -1, -1)`): the parameter's elements times the batch (a few
    hundred learned tokens), however long the input's own sequence is. A tiling along
    any other axis (`.repeat(1, num_frames, 1)`) may scale with the input, so is not."""
    tiled = False
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        method = expr.func.attr.value
        if method in _TILING_METHODS:
            args = [a for a in expr.args if a.keyword is None and not a.star]
            if len(args) != len(expr.args) or len(args) < 2:
                return False  # `repeat(sizes)`, `expand(*shape)`: axes not visible
            if not all(_unit_factor(a.value, method) for a in args[1:]):
                return False
            tiled = True
        elif method not in _SAME_SIZE_METHODS:
            return False
        expr = expr.func.value
    return (
        tiled
        and isinstance(expr, cst.Attribute)
        and isinstance(expr.value, cst.Name)
        and expr.value.value == "self"
        and expr.attr.value in parameters
    )


def _unit_factor(expr: cst.BaseExpression, method: str) -> bool:
    """`1` for `repeat`/`tile`; `-1` (keep the size) or `1` for `expand`."""
    if isinstance(expr, cst.Integer):
        return expr.value == "1"
    return (
        method == "expand"
        and isinstance(expr, cst.UnaryOperation)
        and isinstance(expr.operator, cst.Minus)
        and isinstance(expr.expression, cst.Integer)
        and expr.expression.value == "1"
    )
