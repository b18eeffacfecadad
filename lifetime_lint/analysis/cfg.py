"""A statement-level control-flow graph of one LibCST function, with uses and definitions.

Nodes are small statements plus synthetic headers (an `if` test, a `for` iterator and its
target, a `while` test, a `with` entry and exit, a `try` handler dispatch, a `match`
subject and each case pattern) and a no-op `after` join for every compound statement, so
"the point right after statement S" is always one node. Edges are normal successors and
exceptional successors: a node inside a `try` body may raise into the handler dispatch, a
node inside a `with` into its exit, and uncaught exceptions go on to the enclosing one.
A `finally` block is built once with the targets of every jump that crosses it merged,
which over-approximates liveness (the safe direction for inserting `del`).

Per node the scan records: the names read (Name nodes, in source order), the definitions
(`DefSite`s, with the expression that produced the value), the names deleted, the calls
made (so rules can classify heavy work without re-walking), names stored into containers
or attributes (`escapes`), names tested for truth, and whether the node reads every local
dynamically (`locals()`, `vars()`, `eval`, `exec`, frame inspection; `facts.py` may narrow
a `locals()[k]` to the names `k` can take, `dynamic_names`). Names read inside
lambdas, generator expressions and nested functions or classes are `captured` (closures);
eager comprehensions are ordinary reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from lifetime_lint.imports import dotted_name
from lifetime_lint.traversal import child_nodes, subclass_test

# Calls that read every local of the calling frame.
_DYNAMIC_NAMES = frozenset({"locals", "vars", "eval", "exec", "dir"})
_DYNAMIC_DOTTED = frozenset(
    {"sys._getframe", "inspect.currentframe", "inspect.stack", "inspect.getouterframes"}
)
# Methods that store their arguments in the receiver.
_STORING_METHODS = frozenset(
    {
        "append",
        "appendleft",
        "extend",
        "insert",
        "add",
        "update",
        "setdefault",
        "put",
        "put_nowait",
        "push",
        "register_buffer",
        "register_parameter",
        "__setitem__",
        "setattr",
    }
)
# Methods whose result may share the receiver's storage: storing the result stores the
# receiver too.
VIEW_METHODS = frozenset(
    [
        "view",
        "view_as",
        "reshape",
        "reshape_as",
        "expand",
        "expand_as",
        "transpose",
        "permute",
        "squeeze",
        "unsqueeze",
        "narrow",
        "chunk",
        "split",
        "tensor_split",
        "unbind",
        "t",
        "movedim",
        "moveaxis",
        "swapaxes",
        "unflatten",
        "flatten",
        "diagonal",
        "select",
        "unfold",
        "as_strided",
        "detach",
        "contiguous",
        "to",
        "type",
        "type_as",
        "float",
        "half",
        "double",
        "bfloat16",
        "int",
        "long",
        "bool",
        "cpu",
        "cuda",
        "requires_grad_",
        "share_memory_",
        "pin_memory",
    ]
)
_LITERALS = (
    cst.Integer,
    cst.Float,
    cst.Imaginary,
    cst.SimpleString,
    cst.Ellipsis,
)
_DISPLAYS = (cst.List, cst.Tuple, cst.Set, cst.Dict)
_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.DictComp)
# The same, as sets of exact types for `scan` (none of these classes has a subclass, and a
# failing isinstance() against LibCST's ABC-based classes is slow).
_LITERAL_TYPES = frozenset(_LITERALS)
_DISPLAY_TYPES = frozenset(_DISPLAYS)
_COMPREHENSION_TYPES = frozenset(_COMPREHENSIONS)
_is_whitespace_or_paren = subclass_test(
    cst.BaseParenthesizableWhitespace, cst.LeftParen, cst.RightParen
)


@dataclass(eq=False)
class DefSite:
    """One binding of a name: where, how, and from what value."""

    name: str
    index: int  # position in CFG.defs
    node: Node | None  # None for the pseudo-definitions at entry
    kind: str  # assign, augassign, annassign, walrus, param, for, with, except, import,
    # def, class, match, starred, unbound (entry of a non-parameter), deleted (a `del`)
    value: cst.BaseExpression | None = None
    unpacked: bool = False  # one element of a tuple/list unpacking of `value`
    annotation: cst.BaseExpression | None = None
    target: cst.Name | None = None


@dataclass(eq=False)
class Node:
    index: int
    kind: str  # small, if, for-iter, for, while, with, with-exit, dispatch, handler,
    # match, case, after, entry, exit, finally
    statement: cst.CSTNode | None  # the small statement or compound statement
    succ: list[Node] = field(default_factory=list)
    esucc: list[Node] = field(default_factory=list)
    preds: list[Node] = field(default_factory=list)
    loads: list[cst.Name] = field(default_factory=list)
    defs: list[DefSite] = field(default_factory=list)
    kills: list[DefSite] = field(default_factory=list)
    calls: list[cst.Call] = field(default_factory=list)
    escapes: set[str] = field(default_factory=set)
    truth: set[str] = field(default_factory=set)
    dynamic: bool = False  # reads every local
    dynamic_call: cst.Call | None = None  # the `locals()`-like call that reads them
    # A `locals()[k]` proven to read only these names (facts.py narrows it: diffusers'
    # callback loop over `_callback_tensor_inputs`); then `dynamic` is False and
    # `dynamic_call` is the `locals()` call.
    dynamic_names: frozenset[str] = frozenset()
    jump: bool = False  # return/raise/break/continue: no fall-through
    loop_body: list[Node] | None = None  # for loop headers: the nodes of the body

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"<Node {self.index} {self.kind}>"


@dataclass(eq=False)
class StatementInfo:
    """A statement of the function, and the nodes around it."""

    statement: cst.CSTNode  # SimpleStatementLine or compound statement
    parent: StatementInfo | None
    entry: Node  # the first node of the statement
    exit: Node | None  # the node whose normal out-state is "right after" it
    insertable: bool  # sits in an indented block, where a new line can follow it
    block: tuple[cst.CSTNode, ...] = ()


class TooLarge(Exception):
    """The function exceeds the node budget; callers skip it."""


@dataclass
class CFG:
    function: cst.FunctionDef
    nodes: list[Node]
    entry: Node
    exit: Node
    defs: list[DefSite]
    statements: list[StatementInfo]
    parameters: set[str]
    declared: set[str]  # global / nonlocal names
    captured: set[str]  # read from a closure, lambda or generator expression
    names: list[str]  # every local name, indexed for bitsets
    name_index: dict[str, int]


class _Acc:
    """What a scan of one node's expressions finds."""

    __slots__ = ("builder", "node")

    def __init__(self, node: Node, builder: _Builder) -> None:
        self.node = node
        self.builder = builder


@dataclass
class _Frame:
    kind: str  # loop, finally, handler, with
    header: Node | None = None  # loop: the continue target
    breaks: list[Node] = field(default_factory=list)  # loop: nodes that break
    target: Node | None = None  # finally entry / handler dispatch / with exit
    pending: set[str] = field(default_factory=set)  # finally: jump kinds crossing it
    pending_loops: list[_Frame] = field(default_factory=list)


class _Builder:
    def __init__(self, function: cst.FunctionDef, max_nodes: int) -> None:
        self.function = function
        self.max_nodes = max_nodes
        self.nodes: list[Node] = []
        self.defs: list[DefSite] = []
        self.statements: list[StatementInfo] = []
        self.frames: list[_Frame] = []
        self.declared: set[str] = set()
        self.captured: set[str] = set()
        self.local_names: dict[str, int] = {}
        self.exit = Node(-1, "exit", None)
        self.current_loop_nodes: list[list[Node]] = []

    # -- nodes and edges -------------------------------------------------------------
    def new(self, kind: str, statement: cst.CSTNode | None) -> Node:
        if len(self.nodes) >= self.max_nodes:
            raise TooLarge()
        node = Node(len(self.nodes), kind, statement)
        self.nodes.append(node)
        for collector in self.current_loop_nodes:
            collector.append(node)
        raising = self._raise_target()
        if raising is not None:
            node.esucc.append(raising)
        return node

    @staticmethod
    def link(sources: list[Node], target: Node) -> None:
        for source in sources:
            if target not in source.succ:
                source.succ.append(target)

    def _raise_target(self) -> Node | None:
        for frame in reversed(self.frames):
            if frame.kind in ("handler", "with"):
                return frame.target
            if frame.kind == "finally":
                frame.pending.add("raise")
                return frame.target
        return None

    def jump(self, kind: str, sources: list[Node]) -> None:
        """Connect `sources` to where a return/break/continue goes, through finallies."""
        for frame in reversed(self.frames):
            if frame.kind == "finally":
                frame.pending.add(kind)
                self.link(sources, frame.target)  # type: ignore[arg-type]
                return
            if frame.kind == "loop" and kind in ("break", "continue"):
                if kind == "break":
                    frame.breaks.extend(sources)
                else:
                    self.link(sources, frame.header)  # type: ignore[arg-type]
                return
        if kind == "return":
            self.link(sources, self.exit)

    # -- definitions -----------------------------------------------------------------
    def define(self, node: Node | None, name: cst.Name, kind: str, **extra) -> DefSite:
        site = DefSite(name.value, len(self.defs), node, kind, target=name, **extra)
        self.defs.append(site)
        self.local_names.setdefault(name.value, len(self.local_names))
        if node is not None:
            node.defs.append(site)
        return site

    def bind_target(
        self,
        node: Node,
        target: cst.BaseExpression,
        kind: str,
        value: cst.BaseExpression | None,
        unpacked: bool = False,
        annotation: cst.BaseExpression | None = None,
    ) -> None:
        if isinstance(target, cst.Name):
            self.define(node, target, kind, value=value, unpacked=unpacked, annotation=annotation)
        elif isinstance(target, (cst.Tuple, cst.List)):
            paired = _paired_elements(target, value) if kind == "assign" else None
            if paired is not None:
                # `q, k = (rope(q), rope(k))`: each name gets its own element, not a piece of
                # one value.
                for part, item in paired:
                    self.bind_target(node, part, kind, item, unpacked)
                return
            for target_element in target.elements:
                self.bind_target(node, target_element.value, kind, value, True)
        elif isinstance(target, cst.StarredElement):
            self.bind_target(node, target.value, "starred", value, True)
        elif isinstance(target, cst.Attribute):
            self.scan(target.value, node)
        elif isinstance(target, cst.Subscript):
            self.scan(target.value, node)
            self._scan_slices(target, node)
        else:
            self.scan(target, node)

    # -- expression scan -------------------------------------------------------------
    def scan(self, expr: cst.CSTNode | None, node: Node, call_arg: bool = False) -> None:
        if expr is None:
            return
        kind = type(expr)
        if kind is cst.Name:
            node.loads.append(expr)  # type: ignore[arg-type]
            return
        if kind is cst.Attribute:
            self.scan(expr.value, node)  # type: ignore[attr-defined]
            return
        if kind is cst.Call:
            self._scan_call(expr, node)  # type: ignore[arg-type]
            return
        if kind in _LITERAL_TYPES:
            return
        if kind is cst.Subscript:
            self.scan(expr.value, node)  # type: ignore[attr-defined]
            self._scan_slices(expr, node)  # type: ignore[arg-type]
            return
        if kind is cst.BinaryOperation:
            self.scan(expr.left, node)  # type: ignore[attr-defined]
            self.scan(expr.right, node)  # type: ignore[attr-defined]
            return
        if kind is cst.UnaryOperation:
            operand = expr.expression  # type: ignore[attr-defined]
            if isinstance(expr.operator, cst.Not) and isinstance(operand, cst.Name):  # type: ignore[attr-defined]
                node.truth.add(operand.value)
            self.scan(operand, node)
            return
        if kind is cst.BooleanOperation:
            for side in (expr.left, expr.right):  # type: ignore[attr-defined]
                if isinstance(side, cst.Name):
                    node.truth.add(side.value)
                self.scan(side, node)
            return
        if kind is cst.Comparison:
            self.scan(expr.left, node)  # type: ignore[attr-defined]
            for comparison in expr.comparisons:  # type: ignore[attr-defined]
                self.scan(comparison.comparator, node)
            return
        if kind is cst.IfExp:
            if isinstance(expr.test, cst.Name):  # type: ignore[attr-defined]
                node.truth.add(expr.test.value)  # type: ignore[attr-defined]
            self.scan(expr.test, node)  # type: ignore[attr-defined]
            self.scan(expr.body, node)  # type: ignore[attr-defined]
            self.scan(expr.orelse, node)  # type: ignore[attr-defined]
            return
        if kind in _DISPLAY_TYPES:
            if not call_arg:
                self.escape_value(expr, node)  # type: ignore[arg-type]
            if kind is cst.Dict:
                for element in expr.elements:  # type: ignore[attr-defined]
                    if isinstance(element, cst.DictElement):
                        self.scan(element.key, node)
                    self.scan(element.value, node)
            else:
                for item in expr.elements:  # type: ignore[attr-defined]
                    self.scan(item.value, node)
            return
        if kind is cst.NamedExpr:
            self.scan(expr.value, node)  # type: ignore[attr-defined]
            self.bind_target(node, expr.target, "walrus", expr.value)  # type: ignore[attr-defined]
            return
        if kind is cst.Lambda:
            for param in _all_params(expr.params):  # type: ignore[attr-defined]
                if param.default is not None:
                    self.scan(param.default, node)
            self.captured.update(_names_in(expr.body))  # type: ignore[attr-defined]
            return
        if kind is cst.GeneratorExp:
            # The first iterable is evaluated now; everything else runs later.
            self.scan(expr.for_in.iter, node)  # type: ignore[attr-defined]
            self.captured.update(_names_in(expr.elt))  # type: ignore[attr-defined]
            inner = expr.for_in  # type: ignore[attr-defined]
            for condition in inner.ifs:
                self.captured.update(_names_in(condition))
            if inner.inner_for_in is not None:
                self.captured.update(_names_in(inner.inner_for_in))
            return
        if kind in _COMPREHENSION_TYPES:
            self._scan_comprehension(expr, node, call_arg)
            return
        if kind is cst.Await:
            self.scan(expr.expression, node)  # type: ignore[attr-defined]
            return
        if kind is cst.Yield:
            value = expr.value  # type: ignore[attr-defined]
            if isinstance(value, cst.From):
                value = value.item
            self.scan(value, node)
            return
        if kind in (cst.StarredElement, cst.Element, cst.Arg):
            self.scan(expr.value, node, call_arg)  # type: ignore[attr-defined]
            return
        for child in iter_children(expr):
            if not _is_whitespace_or_paren(child):
                self.scan(child, node)

    def _scan_slices(self, subscript: cst.Subscript, node: Node) -> None:
        for element in subscript.slice:
            inner = element.slice
            if isinstance(inner, cst.Index):
                self.scan(inner.value, node)
            elif isinstance(inner, cst.Slice):
                self.scan(inner.lower, node)
                self.scan(inner.upper, node)
                self.scan(inner.step, node)

    def _scan_call(self, call: cst.Call, node: Node) -> None:
        node.calls.append(call)
        func = call.func
        self.scan(func, node)
        if isinstance(func, cst.Name):
            if func.value in _DYNAMIC_NAMES and (func.value != "vars" or not call.args):
                node.dynamic = True
                node.dynamic_call = node.dynamic_call or call
            if func.value == "setattr" and len(call.args) >= 3:
                self.escape_value(call.args[2].value, node)
        elif isinstance(func, cst.Attribute):
            if func.attr.value in _STORING_METHODS:
                for arg in call.args:
                    self.escape_value(arg.value, node)
            elif dotted_name(func) in _DYNAMIC_DOTTED:
                node.dynamic = True
                node.dynamic_call = node.dynamic_call or call
        for arg in call.args:
            self.scan(arg.value, node, call_arg=True)

    def _scan_comprehension(self, expr: cst.CSTNode, node: Node, call_arg: bool) -> None:
        local: set[str] = set()
        scratch = Node(-2, "scratch", None)
        for_in: cst.CompFor | None = expr.for_in  # type: ignore[attr-defined]
        first = True
        while for_in is not None:
            if first:
                self.scan(for_in.iter, node)  # evaluated in the enclosing scope
                first = False
            else:
                self.scan(for_in.iter, scratch)
            local.update(_target_names(for_in.target))
            for condition in for_in.ifs:
                self.scan(condition.test, scratch)
            for_in = for_in.inner_for_in
        if isinstance(expr, cst.DictComp):
            self.scan(expr.key, scratch)
            self.scan(expr.value, scratch)
        else:
            self.scan(expr.elt, scratch)  # type: ignore[attr-defined]
            if not call_arg and isinstance(expr.elt, cst.Name):  # type: ignore[attr-defined]
                node.escapes.add(expr.elt.value)  # type: ignore[attr-defined]
        node.loads.extend(name for name in scratch.loads if name.value not in local)
        node.calls.extend(scratch.calls)
        node.dynamic = node.dynamic or scratch.dynamic
        node.dynamic_call = node.dynamic_call or scratch.dynamic_call
        node.escapes.update(name for name in scratch.escapes if name not in local)
        for site in scratch.defs:  # walrus inside a comprehension binds in the function
            site.node = node
            node.defs.append(site)

    def escape_value(self, value: cst.BaseExpression, node: Node) -> None:
        """Names whose object `value` stores somewhere that outlives the expression."""
        if isinstance(value, cst.Name):
            node.escapes.add(value.value)
        elif isinstance(value, _DISPLAYS):
            if isinstance(value, cst.Dict):
                for entry in value.elements:
                    self.escape_value(entry.value, node)
            else:
                for item in value.elements:
                    self.escape_value(item.value, node)
        elif isinstance(value, cst.IfExp):
            self.escape_value(value.body, node)
            self.escape_value(value.orelse, node)
        elif isinstance(value, cst.BooleanOperation):
            self.escape_value(value.left, node)
            self.escape_value(value.right, node)
        elif isinstance(value, (cst.StarredElement, cst.Element)):
            self.escape_value(value.value, node)
        elif isinstance(value, (cst.Subscript, cst.Attribute)):
            self.escape_value(value.value, node)  # `obj.a = x[:, :n]` stores a view of x
        elif (
            isinstance(value, cst.Call)
            and isinstance(value.func, cst.Attribute)
            and value.func.attr.value in VIEW_METHODS
        ):
            self.escape_value(value.func.value, node)

    # -- statements ------------------------------------------------------------------
    def block(
        self,
        statements: list[cst.CSTNode],
        preds: list[Node],
        parent: StatementInfo | None,
        insertable: bool,
    ) -> list[Node]:
        block = tuple(statements)
        for statement in statements:
            if isinstance(statement, cst.SimpleStatementLine):
                preds = self.simple_line(statement, preds, parent, insertable, block)
            else:
                preds = self.compound(statement, preds, parent, insertable, block)
        return preds

    def suite(
        self, body: cst.BaseSuite, preds: list[Node], parent: StatementInfo | None
    ) -> list[Node]:
        if isinstance(body, cst.IndentedBlock):
            return self.block(list(body.body), preds, parent, True)
        assert isinstance(body, cst.SimpleStatementSuite)
        # `if x: a; b` on one line: its statements cannot be followed by a new line.
        return self.small_statements(list(body.body), preds, parent, body, False, ())

    def simple_line(
        self,
        line: cst.SimpleStatementLine,
        preds: list[Node],
        parent: StatementInfo | None,
        insertable: bool,
        block: tuple[cst.CSTNode, ...],
    ) -> list[Node]:
        return self.small_statements(list(line.body), preds, parent, line, insertable, block)

    def small_statements(
        self,
        smalls: list[cst.BaseSmallStatement],
        preds: list[Node],
        parent: StatementInfo | None,
        line: cst.CSTNode,
        insertable: bool,
        block: tuple[cst.CSTNode, ...],
    ) -> list[Node]:
        first: Node | None = None
        last: Node | None = None
        for small in smalls:
            node = self.new("small", small)
            self.link(preds, node)
            if first is None:
                first = node
            last = node
            preds = self.small(small, node)
        if first is not None and not isinstance(line, cst.SimpleStatementSuite):
            exit_node = last if preds else None
            self.statements.append(StatementInfo(line, parent, first, exit_node, insertable, block))
        return preds

    def small(self, small: cst.BaseSmallStatement, node: Node) -> list[Node]:
        if isinstance(small, cst.Assign):
            self.scan(small.value, node)
            for target in small.targets:
                if isinstance(target.target, (cst.Attribute, cst.Subscript)):
                    self.escape_value(small.value, node)
                self.bind_target(node, target.target, "assign", small.value)
        elif isinstance(small, cst.AnnAssign):
            if small.value is not None:
                self.scan(small.value, node)
                if isinstance(small.target, (cst.Attribute, cst.Subscript)):
                    self.escape_value(small.value, node)
                self.bind_target(
                    node,
                    small.target,
                    "annassign",
                    small.value,
                    annotation=small.annotation.annotation,
                )
        elif isinstance(small, cst.AugAssign):
            self.scan(small.value, node)
            self.scan(small.target, node)
            if not isinstance(small.value, cst.Name):  # `items += [x]` stores x
                self.escape_value(small.value, node)
            if isinstance(small.target, cst.Name):
                self.define(node, small.target, "augassign", value=small.value)
            else:
                self.escape_value(small.value, node)
        elif isinstance(small, cst.Expr):
            self.scan(small.value, node)
        elif isinstance(small, cst.Return):
            self.scan(small.value, node)
            node.jump = True
            self.jump("return", [node])
            return []
        elif isinstance(small, cst.Raise):
            self.scan(small.exc, node)
            self.scan(small.cause, node)
            node.jump = True
            return []
        elif isinstance(small, cst.Del):
            self._delete(small.target, node)
        elif isinstance(small, cst.Assert):
            if isinstance(small.test, cst.Name):
                node.truth.add(small.test.value)
            self.scan(small.test, node)
            self.scan(small.msg, node)
        elif isinstance(small, cst.Break):
            node.jump = True
            self.jump("break", [node])
            return []
        elif isinstance(small, cst.Continue):
            node.jump = True
            self.jump("continue", [node])
            return []
        elif isinstance(small, (cst.Global, cst.Nonlocal)):
            self.declared.update(item.name.value for item in small.names)
        elif isinstance(small, cst.Import):
            for alias in small.names:
                bound: cst.BaseExpression = (
                    alias.asname.name if alias.asname is not None else alias.name
                )
                while isinstance(bound, cst.Attribute):
                    bound = bound.value
                if isinstance(bound, cst.Name):
                    self.define(node, bound, "import")
        elif isinstance(small, cst.ImportFrom):
            if not isinstance(small.names, cst.ImportStar):
                for alias in small.names:
                    bound = alias.asname.name if alias.asname is not None else alias.name
                    if isinstance(bound, cst.Name):
                        self.define(node, bound, "import")
        return [node]

    def _delete(self, target: cst.BaseExpression, node: Node) -> None:
        if isinstance(target, cst.Name):
            node.loads.append(target)  # `del x` needs x bound: a use
            site = DefSite(target.value, len(self.defs), node, "deleted", target=target)
            self.defs.append(site)
            self.local_names.setdefault(target.value, len(self.local_names))
            node.kills.append(site)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._delete(element.value, node)
        else:
            self.scan(target, node)

    def compound(
        self,
        statement: cst.CSTNode,
        preds: list[Node],
        parent: StatementInfo | None,
        insertable: bool,
        block: tuple[cst.CSTNode, ...],
    ) -> list[Node]:
        if isinstance(statement, cst.If):
            return self._if(statement, preds, parent, insertable, block)
        if isinstance(statement, (cst.For,)):
            return self._for(statement, preds, parent, insertable, block)
        if isinstance(statement, cst.While):
            return self._while(statement, preds, parent, insertable, block)
        if isinstance(statement, (cst.Try, cst.TryStar)):
            return self._try(statement, preds, parent, insertable, block)
        if isinstance(statement, cst.With):
            return self._with(statement, preds, parent, insertable, block)
        if isinstance(statement, cst.Match):
            return self._match(statement, preds, parent, insertable, block)
        if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            return self._definition(statement, preds, parent, insertable, block)
        # Unknown compound statement: one opaque node that reads everything it mentions.
        node = self.new("small", statement)
        self.link(preds, node)
        self.captured.update(_names_in(statement))
        self.statements.append(StatementInfo(statement, parent, node, node, insertable, block))
        return [node]

    def _info(
        self,
        statement: cst.CSTNode,
        parent: StatementInfo | None,
        entry: Node,
        insertable: bool,
        block: tuple[cst.CSTNode, ...],
    ) -> StatementInfo:
        info = StatementInfo(statement, parent, entry, None, insertable, block)
        self.statements.append(info)
        return info

    def _finish(self, info: StatementInfo, exits: list[Node]) -> list[Node]:
        after = self.new("after", info.statement)
        after.esucc.clear()
        self.link(exits, after)
        info.exit = after
        return [after]

    def _if(self, statement, preds, parent, insertable, block) -> list[Node]:
        test = self.new("if", statement)
        self.link(preds, test)
        if isinstance(statement.test, cst.Name):
            test.truth.add(statement.test.value)
        self.scan(statement.test, test)
        info = self._info(statement, parent, test, insertable, block)
        exits = self.suite(statement.body, [test], info)
        orelse = statement.orelse
        if orelse is None:
            exits = exits + [test]
        elif isinstance(orelse, cst.If):
            exits = exits + self._if(orelse, [test], info, False, ())
        else:
            exits = exits + self.suite(orelse.body, [test], info)
        return self._finish(info, exits)

    def _loop_body(self, header: Node, body: cst.BaseSuite, info: StatementInfo) -> list[Node]:
        frame = _Frame("loop", header=header)
        self.frames.append(frame)
        collected: list[Node] = []
        self.current_loop_nodes.append(collected)
        try:
            exits = self.suite(body, [header], info)
        finally:
            self.current_loop_nodes.pop()
            self.frames.pop()
        self.link(exits, header)
        header.loop_body = collected
        return frame.breaks

    def _for(self, statement: cst.For, preds, parent, insertable, block) -> list[Node]:
        iterate = self.new("for-iter", statement)
        self.link(preds, iterate)
        self.scan(statement.iter, iterate)
        info = self._info(statement, parent, iterate, insertable, block)
        header = self.new("for", statement)
        self.link([iterate], header)
        self.bind_target(header, statement.target, "for", statement.iter)
        breaks = self._loop_body(header, statement.body, info)
        exits = [header]
        if statement.orelse is not None:
            exits = self.suite(statement.orelse.body, [header], info)
        return self._finish(info, exits + breaks)

    def _while(self, statement: cst.While, preds, parent, insertable, block) -> list[Node]:
        header = self.new("while", statement)
        self.link(preds, header)
        if isinstance(statement.test, cst.Name):
            header.truth.add(statement.test.value)
        self.scan(statement.test, header)
        info = self._info(statement, parent, header, insertable, block)
        breaks = self._loop_body(header, statement.body, info)
        exits = [header]
        if _is_true(statement.test):
            exits = []
        if statement.orelse is not None:
            exits = self.suite(statement.orelse.body, exits, info)
        return self._finish(info, exits + breaks)

    def _try(self, statement, preds, parent, insertable, block) -> list[Node]:
        entry = self.new("try", statement)
        self.link(preds, entry)
        info = self._info(statement, parent, entry, insertable, block)
        final: _Frame | None = None
        if statement.finalbody is not None:
            final = _Frame("finally", target=Node(-3, "finally", statement))
            # Built for real below; the placeholder collects edges until then.
            self.frames.append(final)
        dispatch: Node | None = None
        if statement.handlers:
            dispatch = Node(-4, "dispatch", statement)
            self.frames.append(_Frame("handler", target=dispatch))
        body_exits = self.suite(statement.body, [entry], info)
        if statement.handlers:
            self.frames.pop()
            # The dispatch node itself may re-raise to the enclosing target.
            dispatch = self._materialize(dispatch)  # type: ignore[arg-type]
        if statement.orelse is not None:
            body_exits = self.suite(statement.orelse.body, body_exits, info)
        exits = list(body_exits)
        if dispatch is not None:
            for handler in statement.handlers:
                node = self.new("handler", handler)
                self.link([dispatch], node)
                self.scan(handler.type, node)
                if handler.name is not None:
                    self.bind_target(node, handler.name.name, "except", None)
                exits += self.suite(handler.body, [node], info)
        if final is not None:
            self.frames.pop()
            entry_node = self._materialize(final.target)  # type: ignore[arg-type]
            self.link(exits, entry_node)
            final_exits = self.suite(statement.finalbody.body, [entry_node], info)
            for kind in sorted(final.pending):
                if kind == "raise":
                    target = self._raise_target()
                    if target is not None:
                        self.link(final_exits, target)
                else:
                    self.jump(kind, final_exits)
            exits = final_exits
        return self._finish(info, exits)

    def _materialize(self, placeholder: Node) -> Node:
        """Turn a placeholder target into a real node, moving the edges that point at it."""
        node = self.new(placeholder.kind, placeholder.statement)
        for other in self.nodes:
            if placeholder in other.succ:
                other.succ = [node if s is placeholder else s for s in other.succ]
            if placeholder in other.esucc:
                other.esucc = [node if s is placeholder else s for s in other.esucc]
        return node

    def _with(self, statement: cst.With, preds, parent, insertable, block) -> list[Node]:
        enter = self.new("with", statement)
        self.link(preds, enter)
        for item in statement.items:
            self.scan(item.item, enter)
        for item in statement.items:
            if item.asname is not None:
                self.bind_target(enter, item.asname.name, "with", item.item)
        info = self._info(statement, parent, enter, insertable, block)
        placeholder = Node(-5, "with-exit", statement)
        self.frames.append(_Frame("with", target=placeholder))
        body_exits = self.suite(statement.body, [enter], info)
        self.frames.pop()
        exit_node = self._materialize(placeholder)
        self.link(body_exits, exit_node)
        return self._finish(info, [exit_node])

    def _match(self, statement: cst.Match, preds, parent, insertable, block) -> list[Node]:
        subject = self.new("match", statement)
        self.link(preds, subject)
        self.scan(statement.subject, subject)
        info = self._info(statement, parent, subject, insertable, block)
        exits: list[Node] = []
        previous = subject
        for case in statement.cases:
            node = self.new("case", case)
            self.link([previous], node)
            self._pattern(case.pattern, node)
            self.scan(case.guard, node)
            exits += self.suite(case.body, [node], info)
            previous = node
        exits.append(previous)  # no case matched
        return self._finish(info, exits)

    def _pattern(self, pattern: cst.CSTNode, node: Node) -> None:
        if isinstance(pattern, cst.MatchAs):
            if pattern.pattern is not None:
                self._pattern(pattern.pattern, node)
            if pattern.name is not None:
                self.define(node, pattern.name, "match")
        elif isinstance(pattern, cst.MatchStar):
            if pattern.name is not None:
                self.define(node, pattern.name, "match")
        elif isinstance(pattern, cst.MatchMapping):
            for element in pattern.elements:
                self.scan(element.key, node)
                self._pattern(element.pattern, node)
            if pattern.rest is not None:
                self.define(node, pattern.rest, "match")
        elif isinstance(pattern, cst.MatchClass):
            self.scan(pattern.cls, node)
            for positional in pattern.patterns:
                self._pattern(positional.value, node)
            for keyword in pattern.kwds:  # `Point(x=b)`: x is an attribute, not a read
                self._pattern(keyword.pattern, node)
        elif isinstance(pattern, (cst.MatchSequence, cst.MatchList, cst.MatchTuple)):
            for item in pattern.patterns:
                self._pattern(
                    item.value if isinstance(item, cst.MatchSequenceElement) else item, node
                )
        elif isinstance(pattern, cst.MatchOr):
            for choice in pattern.patterns:
                self._pattern(choice.pattern, node)
        elif isinstance(pattern, cst.MatchValue):
            self.scan(pattern.value, node)
        elif isinstance(pattern, cst.MatchSingleton):
            return
        elif isinstance(pattern, cst.MatchSequenceElement):
            self._pattern(pattern.value, node)

    def _definition(self, statement, preds, parent, insertable, block) -> list[Node]:
        node = self.new("small", statement)
        self.link(preds, node)
        for decorator in statement.decorators:
            self.scan(decorator.decorator, node)
        if isinstance(statement, cst.FunctionDef):
            for param in _all_params(statement.params):
                self.scan(param.default, node)
                if param.annotation is not None:
                    self.scan(param.annotation.annotation, node)
            kind = "def"
        else:
            for arg in statement.bases + statement.keywords:
                self.scan(arg.value, node)
            kind = "class"
        self.captured.update(_names_in(statement.body))
        self.define(node, statement.name, kind)
        self.statements.append(StatementInfo(statement, parent, node, node, insertable, block))
        return [node]


def build(function: cst.FunctionDef, max_nodes: int = 4000) -> CFG:
    """The CFG of one function. Raises `TooLarge` past `max_nodes` nodes."""
    builder = _Builder(function, max_nodes)
    entry = builder.new("entry", function)
    parameters: set[str] = set()
    for param in _all_params(function.params):
        builder.define(
            entry,
            param.name,
            "param",
            annotation=(param.annotation.annotation if param.annotation is not None else None),
        )
        parameters.add(param.name.value)
    exits = builder.suite(function.body, [entry], None)
    exit_node = builder.exit
    exit_node.index = len(builder.nodes)
    builder.nodes.append(exit_node)
    builder.link(exits, exit_node)
    for node in builder.nodes:
        for successor in node.succ:
            successor.preds.append(node)
    # Every local that is not a parameter starts unbound.
    for name in list(builder.local_names):
        if name not in parameters:
            site = DefSite(name, len(builder.defs), None, "unbound")
            builder.defs.append(site)
            entry.defs.append(site)
    names = sorted(builder.local_names, key=builder.local_names.__getitem__)
    return CFG(
        function=function,
        nodes=builder.nodes,
        entry=entry,
        exit=exit_node,
        defs=builder.defs,
        statements=builder.statements,
        parameters=parameters,
        declared=builder.declared,
        captured=builder.captured,
        names=names,
        name_index={name: i for i, name in enumerate(names)},
    )


# -- helpers ---------------------------------------------------------------------------


def _all_params(params: cst.Parameters) -> list[cst.Param]:
    result = list(params.posonly_params) + list(params.params) + list(params.kwonly_params)
    if isinstance(params.star_arg, cst.Param):
        result.append(params.star_arg)
    if params.star_kwarg is not None:
        result.append(params.star_kwarg)
    return result


def _is_true(test: cst.BaseExpression) -> bool:
    return (isinstance(test, cst.Name) and test.value == "True") or (
        isinstance(test, cst.Integer) and test.value not in ("0",)
    )


def _target_names(target: cst.CSTNode) -> set[str]:
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        names: set[str] = set()
        for element in target.elements:
            names |= _target_names(element.value)
        return names
    if isinstance(target, cst.StarredElement):
        return _target_names(target.value)
    return set()


def iter_children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The child nodes of `node` in source order, without LibCST's rebuilding `children`."""
    return child_nodes(node)


def _names_in(node: cst.CSTNode | None) -> set[str]:
    """Every name read below a node (over-approximates what a closure reads)."""
    names: set[str] = set()
    if node is None:
        return names
    stack = [node]
    while stack:
        current = stack.pop()
        kind = type(current)
        if kind is cst.Name:
            names.add(current.value)  # type: ignore[attr-defined]
        elif kind is cst.Attribute:
            stack.append(current.value)  # type: ignore[attr-defined]
        elif not _is_skipped(current):
            stack.extend(iter_children(current))
    return names


_SKIP_TYPES = (
    cst.BaseParenthesizableWhitespace,
    cst.LeftParen,
    cst.RightParen,
    cst.Integer,
    cst.Float,
    cst.SimpleString,
    cst.BaseBinaryOp,
    cst.BaseBooleanOp,
    cst.BaseCompOp,
    cst.BaseUnaryOp,
    cst.BaseAugOp,
    cst.Newline,
    cst.EmptyLine,
    cst.Comment,
)
_is_skipped = subclass_test(*_SKIP_TYPES)  # isinstance(node, _SKIP_TYPES), cached per type


def _paired_elements(
    target: cst.Tuple | cst.List, value: cst.BaseExpression | None
) -> list[tuple[cst.BaseExpression, cst.BaseExpression]] | None:
    """`a, b = x, y`: the (target, value) pairs when both sides are displays of the same
    length without starred elements (None otherwise)."""
    if not isinstance(value, (cst.Tuple, cst.List)) or len(value.elements) != len(target.elements):
        return None
    pairs = []
    for element, item in zip(target.elements, value.elements):
        if isinstance(element, cst.StarredElement) or isinstance(item, cst.StarredElement):
            return None
        pairs.append((element.value, item.value))
    return pairs
