"""Read-only tree walks and node positions, without LibCST's rebuilding costs.

LibCST's `node.visit(visitor)` rebuilds every node it passes (a new dataclass per node, with
validation) even when the visitor changes nothing, and `PositionProvider` re-generates the
code while splitting every token with a regular expression and allocating two position
objects per node. On torch/nn (136 files) those cost 0.4x and 2x the parse. The two
mechanisms here give the same answers for a fraction of that:

- `walk(node, enter, leave)` calls `enter`/`leave` on every node in exactly the order
  `node.visit` would (pre-order enter, post-order leave, children in lexical order). The
  child order of each node type is read once from the type's own
  `_visit_and_replace_children` (which names each field it visits, in order): from its
  byte code where each visit call reads plainly there (a few microseconds), else from
  its source (milliseconds per type: `inspect` tokenizes, `ast` parses); a type whose
  order cannot be read falls back to `node.children`.
- `NodeOffsets(module)` runs LibCST's code generation once with a state that records, per
  node, the indices of its first and last generated token (syntactic range where the node
  declares one, whitespace-inclusive otherwise, exactly as `PositionProvider` chooses);
  with the token lengths' prefix sums these are character offsets into the source.
"""

from __future__ import annotations

import ast
import dis
import inspect
import marshal
import os
import textwrap
from hashlib import blake2b
from itertools import accumulate
from types import CodeType
from typing import Any, Callable

import libcst as cst
from libcst._nodes.internal import CodegenState

from lifetime_lint.lazy_regex import compile_lazily

# The helpers `_visit_and_replace_children` uses; their second argument names the field.
_VISIT_HELPERS = frozenset(
    {
        "visit_required",
        "visit_optional",
        "visit_sentinel",
        "visit_sequence",
        "visit_body_sequence",
        "visit_iterable",
        "visit_body_iterable",
    }
)

# None: the order could not be read; use `node.children` for that type.
_CHILD_FIELDS: dict[type, tuple[str, ...] | None] = {}
_UNKNOWN = ("<unknown>",)


def child_fields(node_type: type[cst.CSTNode]) -> tuple[str, ...] | None:
    """The fields LibCST visits for this node type, in visiting order (cached)."""
    try:
        return _CHILD_FIELDS[node_type]
    except KeyError:
        pass
    fields = _child_fields_from_code(node_type)
    if fields is None:
        fields = child_fields_from_source(node_type)
    _CHILD_FIELDS[node_type] = fields
    return fields


# -- the orders read from byte code, kept across processes -----------------------------------
# Reading one type's order from its byte code costs ~0.3 ms (`dis` builds an object per
# instruction); a one-file run reads ~70 types, a cold run's parent all ~250. The answer
# depends only on what `_child_fields_from_code` reads (the instructions and the names and
# string constants they refer to), so it is kept under a digest of exactly that, beside this
# module's byte code, in a file named by the interpreter's cache tag and magic number (the
# opcodes' meaning). A changed LibCST changes the digest: a miss, read afresh.

_KEPT_FORMAT = 1
_MAX_KEPT = 4096
_kept: dict[bytes, tuple[str, ...]] | None = None  # read on first use
_kept_used: set[bytes] = set()
_kept_added = False


def _kept_path() -> str:
    import sys
    from importlib.util import MAGIC_NUMBER, cache_from_source

    folder = os.path.dirname(cache_from_source(__file__))
    tag = f"{sys.implementation.cache_tag}-{MAGIC_NUMBER.hex()}"
    return os.path.join(folder, f"child-fields.{tag}.marshal")


def _code_digest(code: CodeType) -> bytes:
    """A digest of everything `_child_fields_from_code` reads of `code` (non-string
    constants by type only: the reading asks of a constant only whether it is a string)."""
    constants = tuple(c if isinstance(c, str) else type(c).__name__ for c in code.co_consts)
    material = (code.co_code, code.co_names, code.co_varnames, code.co_cellvars,
                code.co_freevars, constants)  # fmt: skip
    return blake2b(repr(material).encode("utf-8", "surrogatepass"), digest_size=20).digest()


def _load_kept() -> dict[bytes, tuple[str, ...]]:
    try:
        with open(_kept_path(), "rb") as handle:
            fmt, entries = marshal.loads(handle.read())  # one read: load(file) reads piecewise
    except (OSError, EOFError, ValueError, TypeError, ImportError, NotImplementedError):
        return {}
    return entries if fmt == _KEPT_FORMAT and isinstance(entries, dict) else {}


def save_child_fields() -> None:
    """Write the orders read in this process, if any were new (atomically; nothing under
    `PYTHONDONTWRITEBYTECODE`, as for byte code). An unwritable place is only a slower start."""
    global _kept_added
    import sys

    if _kept is None or not _kept_added or sys.dont_write_bytecode:
        return
    _kept_added = False
    entries = _kept
    if len(entries) > _MAX_KEPT:
        entries = {key: value for key, value in entries.items() if key in _kept_used}
    try:
        path = _kept_path()
    except (ImportError, NotImplementedError, ValueError):
        return
    temporary = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(temporary, "wb") as handle:
            marshal.dump((_KEPT_FORMAT, entries), handle)
        os.replace(temporary, path)
    except OSError:
        try:
            os.unlink(temporary)
        except OSError:
            pass


def _child_fields_from_code(node_type: type[cst.CSTNode]) -> tuple[str, ...] | None:
    """`child_fields_from_source`'s answer read from the byte code: each load of a visit
    helper, then of its first argument (a local), then its second, a string constant: the
    field (calls in the order the source has them; no call: no field). None where any
    helper call reads otherwise: the source decides then."""
    global _kept, _kept_added
    code = getattr(node_type._visit_and_replace_children, "__code__", None)
    if code is None:
        return None
    if _kept is None:
        _kept = _load_kept()
    key = _code_digest(code)
    _kept_used.add(key)
    kept = _kept.get(key)
    if isinstance(kept, tuple) and all(isinstance(name, str) for name in kept):
        return kept
    fields = _read_child_fields_from_code(code)
    if fields is not None:
        _kept[key] = fields
        _kept_added = True
    return fields


def _read_child_fields_from_code(code: CodeType) -> tuple[str, ...] | None:
    names: list[str] = []
    instructions = list(dis.get_instructions(code))
    for index, instruction in enumerate(instructions):
        if instruction.opname not in ("LOAD_GLOBAL", "LOAD_NAME", "LOAD_DEREF"):
            continue
        if instruction.argval not in _VISIT_HELPERS:
            continue
        following = instructions[index + 1 : index + 3]
        if (
            len(following) < 2
            or not following[0].opname.startswith("LOAD_FAST")
            or following[1].opname != "LOAD_CONST"
            or not isinstance(following[1].argval, str)
        ):
            return None
        if following[1].argval not in names:
            names.append(following[1].argval)
    return tuple(names)


def child_fields_from_source(node_type: type[cst.CSTNode]) -> tuple[str, ...] | None:
    """The visited fields as the source of `_visit_and_replace_children` names them: the
    second argument of each visit helper call, in source order (None: unreadable)."""
    fields: tuple[str, ...] | None
    try:
        source = textwrap.dedent(inspect.getsource(node_type._visit_and_replace_children))
        calls = [
            call
            for call in ast.walk(ast.parse(source))
            if isinstance(call, ast.Call)
            and isinstance(call.func, ast.Name)
            and call.func.id in _VISIT_HELPERS
        ]
        calls.sort(key=lambda call: (call.lineno, call.col_offset))
        names: list[str] = []
        for call in calls:
            argument = call.args[1] if len(call.args) > 1 else None
            if not (isinstance(argument, ast.Constant) and isinstance(argument.value, str)):
                raise ValueError("field name is not a literal")
            if argument.value not in names:
                names.append(argument.value)
        fields = tuple(names)
    except (OSError, TypeError, ValueError, SyntaxError, IndexError):
        fields = None  # no source to read (a compiled install): fall back, still correct
    return fields


def read_child_fields() -> None:
    """Read the child order of every LibCST node type now (a parent process does this
    before forking its workers, which then share the table)."""
    for value in vars(cst).values():
        if (
            isinstance(value, type)
            and issubclass(value, cst.CSTNode)
            and not inspect.isabstract(value)
        ):
            child_fields(value)


def walk(
    node: cst.CSTNode,
    enter: Callable[[cst.CSTNode], object],
    leave: Callable[[cst.CSTNode], object],
    descend: Callable[[cst.CSTNode], bool] | None = None,
) -> None:
    """Visit `node` and its descendants in `node.visit` order, changing nothing.

    `descend(node)`, if given, decides whether the children of an entered node are walked.
    """
    enter(node)
    if descend is None or descend(node):
        memo = _MEMO
        if memo is None:
            children = _node_children(node)
        else:
            entry = memo.get(id(node))
            if entry is not None and entry[0] is node:
                children = entry[1]
            else:
                children = _node_children(node)
                if children is not None:
                    memo[id(node)] = (node, children)
        if children is None:
            for child in node.children:
                walk(child, enter, leave, descend)
        else:
            for item in children:
                if type(item) in _LEAVES:  # the same calls, without a recursion
                    enter(item)
                    leave(item)
                else:
                    walk(item, enter, leave, descend)
    leave(node)


def _node_children(node: cst.CSTNode) -> list[cst.CSTNode] | None:
    """The child nodes `walk` passes, in order: the nodes in the node's child fields (a
    field holding a tuple or list gives its items that are nodes). None for a node type
    whose fields are not known (walked through LibCST's `children`)."""
    node_type = type(node)
    fields = _CHILD_FIELDS.get(node_type, _UNKNOWN)
    if fields is _UNKNOWN:
        fields = child_fields(node_type)
    if fields is None:
        return None
    result: list[cst.CSTNode] = []
    for name in fields:
        value = getattr(node, name)
        kind = type(value)
        if kind is tuple or kind is list:
            for item in value:
                if _is_node(type(item)):
                    result.append(item)
        elif _is_node(kind):
            result.append(value)
    return result


# id(node) -> (node, its `_node_children`) while a `children_memo` block runs: a file's lint
# walks its tree (or parts of it) a dozen times, each analysis for its own facts; the child
# lists are read from the fields once. The node is kept beside its list so that an id reused
# by a node made later (a fix's new nodes) can never find another node's children. LibCST
# nodes are immutable, so a list never goes stale.
_MEMO: dict[int, tuple[cst.CSTNode, list[cst.CSTNode]]] | None = None


class children_memo:
    """Remember each node's children for the walks inside this block (one file's lint);
    forgotten at its end. Nested blocks share the outermost one's memo."""

    def __enter__(self) -> None:
        global _MEMO
        self._outermost = _MEMO is None
        if self._outermost:
            _MEMO = {}

    def __exit__(self, *exc_info: object) -> None:
        global _MEMO
        if self._outermost:
            _MEMO = None


# Node types that never have children; half of a tree's nodes are SimpleWhitespace or
# Newline.
LEAF_TYPES: tuple[type[cst.CSTNode], ...] = (cst.SimpleWhitespace, cst.Newline, cst.Comment)
_LEAVES = frozenset(LEAF_TYPES)


def walk_skipping(
    node: cst.CSTNode,
    enter: Callable[[cst.CSTNode], object],
    leave: Callable[[cst.CSTNode], object],
    skipped: frozenset[type],
) -> None:
    """`walk(node, enter, leave)`, except that descendants whose type is in `skipped` (leaf
    types nobody listens to, see `LEAF_TYPES`) are passed over without a call."""
    enter(node)
    memo = _MEMO
    if memo is None:
        children = _node_children(node)
    else:
        entry = memo.get(id(node))
        if entry is not None and entry[0] is node:
            children = entry[1]
        else:
            children = _node_children(node)
            if children is not None:
                memo[id(node)] = (node, children)
    for child in node.children if children is None else children:
        if type(child) not in skipped:
            walk_skipping(child, enter, leave, skipped)
    leave(node)


def walk_dispatching(
    node: cst.CSTNode,
    ancestors: list[cst.CSTNode],
    visits: dict[str, list[Callable[[cst.CSTNode], object]]],
    leaves: dict[str, list[Callable[[cst.CSTNode], object]]],
    skipped: frozenset[type],
) -> None:
    """`walk_skipping(node, enter, leave, skipped)` with the engine's dispatch inlined.

    Entering a node pushes it on `ancestors` and calls `visits[type name]`'s callbacks in
    order; leaving it calls `leaves[type name]`'s, then pops it. The same calls in the same
    order as `walk_skipping` driving a dispatcher object, without two Python calls and a
    type-name look-up per node (a file's tree has ~10^4-10^5 nodes); the callbacks of a
    type are looked up by name once per type and walk.
    """
    tables: dict[type, tuple[Any, Any]] = {}
    push = ancestors.append
    pop = ancestors.pop
    memo = _MEMO

    def step(node: cst.CSTNode) -> None:
        node_type = type(node)
        table = tables.get(node_type)
        if table is None:
            name = node_type.__name__
            table = tables[node_type] = (visits.get(name) or None, leaves.get(name) or None)
        push(node)
        on_visit, on_leave = table
        if on_visit is not None:
            for callback in on_visit:
                callback(node)
        if memo is None:
            children = _node_children(node)
        else:
            entry = memo.get(id(node))
            if entry is not None and entry[0] is node:
                children = entry[1]
            else:
                children = _node_children(node)
                if children is not None:
                    memo[id(node)] = (node, children)
        for child in node.children if children is None else children:
            if type(child) not in skipped:
                step(child)  # noqa: F821 (deleted only after the walk, below)
        if on_leave is not None:
            for callback in on_leave:
                callback(node)
        pop()

    try:
        step(node)
    finally:
        del step  # `step` refers to itself: a cycle that would keep the memo for the collector


def visit(node: cst.CSTNode, visitor: cst.CSTVisitor) -> None:
    """`node.visit(visitor)` for a read-only `CSTVisitor`, without LibCST's node rebuilding.

    The same `visit_<Type>`/`leave_<Type>` calls in the same order; a `visit_*` returning
    False skips the node's children, as in LibCST. A visitor with attribute hooks
    (`visit_<Type>_<field>`, e.g. `visit_If_body` to know which branch a node is in) gets
    them around each field, as LibCST calls them, still without rebuilding.
    """
    hooks = _field_hooks(type(visitor))
    if hooks is None or hooks:
        _visit_fields(node, visitor, hooks)
    else:
        _visit(node, visitor.on_visit, visitor.on_leave)


# Optional fields LibCST does not visit at all (no field hooks) when they hold None: an
# f-string or t-string expression's `format_spec` (every other None field gets its hooks).
_UNHOOKED_WHEN_NONE = frozenset({"format_spec"})


def _visit_fields(
    node: cst.CSTNode, visitor: cst.CSTVisitor, hooks: frozenset[tuple[str, str]] | None
) -> None:
    """`_visit` that also calls the visitor's field hooks: `on_visit_attribute(node, field)`
    before a field's children (a field holding None or a sentinel included, as in LibCST)
    and `on_leave_attribute` after them, for the (type, field) pairs in `hooks` (None: every
    field). A node type whose fields are not known is walked by LibCST itself."""
    if not visitor.on_visit(node):
        visitor.on_leave(node)
        return
    node_type = type(node)
    fields = _CHILD_FIELDS.get(node_type, _UNKNOWN)
    if fields is _UNKNOWN:
        fields = child_fields(node_type)
    if fields is None:
        for child in node.children:
            child.visit(visitor)
    else:
        type_name = node_type.__name__
        for name in fields:
            value = getattr(node, name)
            if value is None and name in _UNHOOKED_WHEN_NONE:
                continue
            hooked = hooks is None or (type_name, name) in hooks
            if hooked:
                visitor.on_visit_attribute(node, name)
            kind = type(value)
            if kind is tuple or kind is list:
                for item in value:
                    if _is_node(type(item)):
                        _visit_fields(item, visitor, hooks)
            elif _is_node(kind):
                _visit_fields(value, visitor, hooks)
            if hooked:
                visitor.on_leave_attribute(node, name)
    visitor.on_leave(node)


_ATTRIBUTE_HOOK = compile_lazily(r"^(visit|leave)_[A-Za-z]+_[a-z_]+$")
_FIELD_HOOKS: dict[type, frozenset[tuple[str, str]] | None] = {}


def _field_hooks(visitor_type: type[cst.CSTVisitor]) -> frozenset[tuple[str, str]] | None:
    """The (node type, field) pairs the visitor has a `visit_`/`leave_` hook for, or None
    when it overrides `on_visit_attribute`/`on_leave_attribute` (then every field is
    announced). Calling LibCST's dispatch for fields without a hook would only look them up."""
    try:
        return _FIELD_HOOKS[visitor_type]
    except KeyError:
        pass
    answer: frozenset[tuple[str, str]] | None
    if (
        visitor_type.on_visit_attribute is not cst.CSTVisitor.on_visit_attribute
        or visitor_type.on_leave_attribute is not cst.CSTVisitor.on_leave_attribute
    ):
        answer = None
    else:
        pairs = set()
        for klass in visitor_type.__mro__:
            if klass.__module__.startswith("libcst"):
                continue
            for attribute in vars(klass):
                if _ATTRIBUTE_HOOK.match(attribute):
                    _, node_type, field = attribute.split("_", 2)
                    pairs.add((node_type, field))
        answer = frozenset(pairs)
    _FIELD_HOOKS[visitor_type] = answer
    return answer


def _visit(
    node: cst.CSTNode,
    on_visit: Callable[[cst.CSTNode], bool],
    on_leave: Callable[[cst.CSTNode], object],
) -> None:
    if on_visit(node):
        node_type = type(node)
        fields = _CHILD_FIELDS.get(node_type, _UNKNOWN)
        if fields is _UNKNOWN:
            fields = child_fields(node_type)
        if fields is None:
            for child in node.children:
                _visit(child, on_visit, on_leave)
        else:
            for name in fields:
                value = getattr(node, name)
                kind = type(value)
                if kind is tuple or kind is list:
                    for item in value:
                        if _is_node(type(item)):
                            _visit(item, on_visit, on_leave)
                elif _is_node(kind):
                    _visit(value, on_visit, on_leave)
    on_leave(node)


# isinstance() against LibCST's abstract base classes is slow; the answer per type is not.
_NODE_TYPES: dict[type, bool] = {}


def _is_node(kind: type) -> bool:
    try:
        return _NODE_TYPES[kind]
    except KeyError:
        answer = _NODE_TYPES[kind] = issubclass(kind, cst.CSTNode)
        return answer


# What a field's value is, by its type: 2 a sequence of values, 1 a node, 0 neither.
_VALUE_KINDS: dict[type, int] = {}


def _value_kind(kind: type) -> int:
    answer = _VALUE_KINDS[kind] = (
        2 if issubclass(kind, (tuple, list)) else 1 if issubclass(kind, cst.CSTNode) else 0
    )
    return answer


def child_nodes(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The child nodes of `node` in `node.visit` order, without LibCST's rebuilding
    `children` (the analyses' tree scans call this once per node they pass)."""
    node_type = type(node)
    fields = _CHILD_FIELDS.get(node_type, _UNKNOWN)
    if fields is _UNKNOWN:
        fields = child_fields(node_type)
    if fields is None:
        return list(node.children)
    kinds = _VALUE_KINDS
    result: list[cst.CSTNode] = []
    for name in fields:
        value = getattr(node, name)
        kind = type(value)
        value_kind = kinds.get(kind)
        if value_kind is None:
            value_kind = _value_kind(kind)
        if value_kind == 1:
            result.append(value)
        elif value_kind == 2:
            for item in value:
                item_type = type(item)
                item_kind = kinds.get(item_type)
                if item_kind is None:
                    item_kind = _value_kind(item_type)
                if item_kind == 1:
                    result.append(item)
    return result


def subclass_test(*types: type) -> Callable[[cst.CSTNode], bool]:
    """A fast `isinstance(node, types)` for nodes: the answer is cached per node type."""
    answers: dict[type, bool] = {}

    def test(node: cst.CSTNode) -> bool:
        kind = type(node)
        try:
            return answers[kind]
        except KeyError:
            answer = answers[kind] = issubclass(kind, types)
            return answer

    return test


class _SyntacticRange:
    """What `record_syntactic_position` returns: records a node's token range on exit."""

    __slots__ = ("end_node", "node", "start", "start_node", "state")

    def __init__(
        self,
        state: _TokenRangeState,
        node: cst.CSTNode,
        start_node: cst.CSTNode | None,
        end_node: cst.CSTNode | None,
    ) -> None:
        self.state = state
        self.node = node
        self.start_node = start_node
        self.end_node = end_node
        self.start = 0

    def __enter__(self) -> None:
        self.start = len(self.state.tokens)

    def __exit__(self, *exc_info: object) -> None:
        ranges = self.state.ranges
        start = ranges[self.start_node][0] if self.start_node is not None else self.start
        end = ranges[self.end_node][1] if self.end_node is not None else len(self.state.tokens)
        ranges[self.node] = (start, end)


class _TokenRangeState(CodegenState):
    """Code generation that records token-index ranges where PositionProvider records
    line/column ranges (same nodes, same choice of syntactic vs whitespace-inclusive)."""

    def __init__(self, module: cst.Module) -> None:
        super().__init__(
            default_indent=module.default_indent, default_newline=module.default_newline
        )
        self.ranges: dict[cst.CSTNode, tuple[int, int]] = {}
        self._stack: list[int] = []

    def before_codegen(self, node: cst.CSTNode) -> None:
        self._stack.append(len(self.tokens))

    def after_codegen(self, node: cst.CSTNode) -> None:
        # A syntactic range, recorded first (on leaving `record_syntactic_position`), wins.
        self.ranges.setdefault(node, (self._stack.pop(), len(self.tokens)))

    def pop_trailing_newline(self) -> None:
        # PositionProvider keeps counting the dropped newline (it never rewinds); so do we.
        pass

    def record_syntactic_position(  # type: ignore[override]
        self,
        node: cst.CSTNode,
        *,
        start_node: cst.CSTNode | None = None,
        end_node: cst.CSTNode | None = None,
    ) -> _SyntacticRange:
        return _SyntacticRange(self, node, start_node, end_node)


class NodeOffsets:
    """Each node's (start, end) character offsets in `module.code`, placed as PositionProvider
    places them (the syntactic range where the node has one). Build once per module."""

    def __init__(self, module: cst.Module) -> None:
        state = _TokenRangeState(module)
        module._codegen(state)
        self._ranges = state.ranges
        self._offsets = list(accumulate(map(len, state.tokens), initial=0))
        self._tokens = state.tokens

    def reproduces(self, text: str) -> bool:
        """Whether the generated code is `text` (plus the final newline LibCST may add to a
        file without one): only then are these offsets offsets into `text`."""
        code = "".join(self._tokens)
        return code.startswith(text) and code[len(text) :] in ("", "\n", "\r\n", "\r")

    def __getitem__(self, node: cst.CSTNode) -> tuple[int, int]:
        start, end = self._ranges[node]  # KeyError for a node not in the module
        return self._offsets[start], self._offsets[end]

    def __contains__(self, node: object) -> bool:
        return node in self._ranges
