"""The engine's fast tree walk and node positions give exactly LibCST's answers.

`traversal.walk` must visit in `node.visit` order, and `FileContext.position` must equal
LibCST's PositionProvider for every node, on realistic code and on awkward text (CRLF, lone
CR, no final newline, tabs, form feeds, BOM-less Unicode, nested f-strings, `match`).
"""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from lifetime_lint import traversal
from lifetime_lint.config import Settings
from lifetime_lint.imports import ImportMap, _ImportCollector
from lifetime_lint.rule import FileContext

FIXTURES = Path(__file__).resolve().parent / "fixtures"

AWKWARD = {
    "crlf": "import torch\r\n\r\ndef f(x):\r\n    return x.cuda()\r\n",
    "lone_cr": "a = 1\rb = (2,\r     3)\r",
    "no_final_newline": "def f():\n    return 1",
    "empty": "",
    "only_newline": "\n",
    "comment_only": "# c",
    "tabs_formfeed": "class A:\n\tdef f(self):\n\t\treturn 1\n\x0c\nx = 1\n",
    "unicode": "s = 'd\u00e9j\u00e0 \U0001f600'\nt = f'{s!r:>{10}} {s}'\n",
    "match": "match p:\n    case Point(x=0, y=b) if b:\n        pass\n    case [1, *rest]:\n        pass\n",
    "nested_imports": (
        "import torch as t\n"
        "if t:\n    from a import b as c\n"
        "class A:\n    import x.y\n    def f(self):\n        from p.q import (r, s as u)\n"
        "try:\n    import z\nexcept ImportError:\n    z = None\n"
        "from . import rel\nfrom m import *\n"
    ),
    "decorators_lambda": "@d(lambda x: x + 1)\nasync def f(a, /, b=2, *c, d, **e) -> int:\n    await g()\n",
    "parenthesized": "def f(p):\n    if p:\n        (p).mkdir()\n    return ((g)(x), ('s'))\n",
}


def _texts():
    texts = dict(AWKWARD)
    for path in sorted(FIXTURES.rglob("*.py")):
        text = path.read_bytes().decode("utf-8")
        texts[str(path.relative_to(FIXTURES))] = text
    return texts


TEXTS = _texts()


class _Recorder(cst.CSTVisitor):
    def __init__(self) -> None:
        self.events = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.events.append(("enter", id(node)))
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.events.append(("leave", id(original_node)))


def _walk_events(module: cst.Module):
    events = []
    traversal.walk(
        module,
        lambda node: events.append(("enter", id(node))),
        lambda node: events.append(("leave", id(node))),
    )
    return events


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_walk_visits_in_libcst_order(name):
    module = cst.parse_module(TEXTS[name])
    recorder = _Recorder()
    module.visit(recorder)
    assert _walk_events(module) == recorder.events


def test_walk_falls_back_to_children_for_unreadable_types(monkeypatch):
    module = cst.parse_module(AWKWARD["nested_imports"] + AWKWARD["decorators_lambda"])
    expected = _walk_events(module)
    for node_type in list(traversal._CHILD_FIELDS):
        monkeypatch.setitem(traversal._CHILD_FIELDS, node_type, None)
    assert _walk_events(module) == expected


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_walks_inside_a_children_memo_visit_in_libcst_order(name):
    """The memo changes no walk: the first walk fills it, the later ones read it; the
    dispatching walk gives the same enters and leaves, with the ancestors pushed and popped."""
    module = cst.parse_module(TEXTS[name])
    recorder = _Recorder()
    module.visit(recorder)
    with traversal.children_memo():
        for _ in range(2):
            assert _walk_events(module) == recorder.events
            assert _walk_skipping_events(module) == recorder.events
        ancestors: list[cst.CSTNode] = []
        events: list[tuple[str, int]] = []
        depths: list[int] = []

        def enter(node: cst.CSTNode) -> None:
            assert ancestors[-1] is node
            events.append(("enter", id(node)))
            depths.append(len(ancestors))

        def leave(node: cst.CSTNode) -> None:
            assert ancestors[-1] is node
            events.append(("leave", id(node)))

        names = {type(node).__name__ for node in _all_nodes(module)}
        table = {name: [enter] for name in names}
        traversal.walk_dispatching(module, ancestors, table, {n: [leave] for n in names},
                                   frozenset())  # fmt: skip
        assert events == recorder.events and ancestors == []
    assert traversal._MEMO is None


def _walk_skipping_events(module: cst.Module) -> list[tuple[str, int]]:
    events: list[tuple[str, int]] = []
    traversal.walk_skipping(
        module,
        lambda node: events.append(("enter", id(node))),
        lambda node: events.append(("leave", id(node))),
        frozenset(),
    )
    return events


def _all_nodes(module: cst.Module) -> list[cst.CSTNode]:
    nodes: list[cst.CSTNode] = []
    traversal.walk(module, nodes.append, lambda node: None)
    return nodes


def test_children_memo_never_gives_a_node_another_nodes_children():
    """An entry is used only for the very node it was made for (an id can be reused by a
    node made later in the same lint)."""
    with traversal.children_memo():
        first = cst.parse_expression("f(a, b)")
        _ = _walk_ids(first)
        other = cst.parse_expression("g(c)")
        assert traversal._MEMO is not None
        traversal._MEMO[id(other)] = (first, traversal._node_children(first) or [])
        assert _walk_ids(other) == _walk_ids_outside(other)
        with traversal.children_memo():  # nested: the outer memo stays
            assert traversal._MEMO is not None
        assert traversal._MEMO is not None
    assert traversal._MEMO is None


def _walk_ids(node: cst.CSTNode) -> list[int]:
    seen: list[int] = []
    traversal.walk(node, lambda n: seen.append(id(n)), lambda n: None)
    return seen


def _walk_ids_outside(node: cst.CSTNode) -> list[int]:
    memo, traversal._MEMO = traversal._MEMO, None
    try:
        return _walk_ids(node)
    finally:
        traversal._MEMO = memo


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_positions_equal_position_provider(name):
    text = TEXTS[name]
    module = cst.parse_module(text)
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    context = FileContext(name, text, module, "\n", Settings())
    for node, code_range in expected.items():
        assert context.position(node) == code_range, type(node).__name__
        start, end = context.span(node)
        assert 0 <= start <= end <= len(text)
    # span() is the node's own text (one-line nodes: code_for_node drops indentation),
    # without its own parentheses, as PositionProvider's range: `(p).mkdir()` spans `p`.
    for node in expected:
        if isinstance(node, (cst.Name, cst.Call, cst.SimpleString)):
            code = module.code_for_node(node.with_changes(lpar=[], rpar=[]))
            if "\n" not in code and "\r" not in code:
                start, end = context.span(node)
                assert text[start:end] == code


def test_position_of_a_foreign_node_is_an_error():
    module = cst.parse_module("x = 1\n")
    context = FileContext("t.py", "x = 1\n", module, "\n", Settings())
    with pytest.raises(KeyError):
        context.position(cst.Name("x"))


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_import_map_equals_a_full_visit(name):
    module = cst.parse_module(TEXTS[name])
    visitor = _ImportCollector()
    module.visit(visitor)
    fast = ImportMap.from_module(module).bindings

    def key(b):
        return (b.local, b.qualified, id(b.statement), id(b.alias), id(b.scope))

    assert [key(b) for b in fast] == [key(b) for b in visitor.bindings]


class _Pruning(cst.CSTVisitor):
    """Records visits; skips what is below a `Call` (its visit_ returns False)."""

    def __init__(self) -> None:
        self.events = []

    def visit_Call(self, node: cst.Call) -> bool:
        self.events.append(("call", id(node)))
        return False

    def visit_Name(self, node: cst.Name) -> None:
        self.events.append(("name", node.value))

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.events.append(("left", original_node.name.value))


class _WithAttributeHook(_Pruning):
    def visit_Call_func(self, node: cst.Call) -> None:
        self.events.append(("func", id(node)))


@pytest.mark.parametrize("visitor_type", [_Pruning, _WithAttributeHook])
@pytest.mark.parametrize("name", ["nested_imports", "decorators_lambda", "match", "unicode"])
def test_visit_equals_libcst_visit(name, visitor_type):
    module = cst.parse_module(AWKWARD[name] + "def g():\n    h(pruned)(y)\n    return kept\n")
    expected = visitor_type()
    module.visit(expected)
    fast = visitor_type()
    traversal.visit(module, fast)
    assert fast.events == expected.events
    assert ("name", "kept") in fast.events and ("name", "pruned") not in fast.events


class _AttributeRecorder(_Recorder):
    """Records node and field events (`visit_If_body` makes it a field-hook visitor)."""

    def visit_If_body(self, node: cst.If) -> None:
        self.events.append(("if-body", id(node)))

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        self.events.append(("field", id(node), attribute))
        super().on_visit_attribute(node, attribute)

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        self.events.append(("left-field", id(original_node), attribute))


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_visit_with_field_hooks_equals_libcst_visit(name):
    module = cst.parse_module(TEXTS[name])
    expected = _AttributeRecorder()
    module.visit(expected)
    fast = _AttributeRecorder()
    traversal.visit(module, fast)
    assert fast.events == expected.events


class _BranchHooks(_Recorder):
    """Field hooks only (no on_visit_attribute override): the fast walk calls just these."""

    def visit_If_body(self, node: cst.If) -> None:
        self.events.append(("if-body", id(node)))

    def leave_If_body(self, node: cst.If) -> None:
        self.events.append(("left-if-body", id(node)))

    def visit_If_orelse(self, node: cst.If) -> None:
        self.events.append(("if-orelse", id(node)))

    def leave_FormattedStringExpression_format_spec(self, node) -> None:
        self.events.append(("format-spec", id(node)))


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_visit_with_some_field_hooks_equals_libcst_visit(name):
    module = cst.parse_module(TEXTS[name])
    expected = _BranchHooks()
    module.visit(expected)
    fast = _BranchHooks()
    traversal.visit(module, fast)
    assert fast.events == expected.events
