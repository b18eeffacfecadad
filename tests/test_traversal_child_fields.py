"""The child order of every LibCST node type, as read from byte code (the fast way), is
the one its source names (the reference, `child_fields_from_source`)."""

from __future__ import annotations

import inspect

import libcst as cst

from lifetime_lint import traversal


def _node_types() -> list[type[cst.CSTNode]]:
    return [
        value
        for value in vars(cst).values()
        if isinstance(value, type)
        and issubclass(value, cst.CSTNode)
        and not inspect.isabstract(value)
    ]


def test_byte_code_and_source_name_the_same_fields_in_the_same_order():
    types = _node_types()
    assert len(types) > 100
    read = 0
    for node_type in types:
        from_code = traversal._child_fields_from_code(node_type)
        if from_code is not None:
            read += 1
            assert from_code == traversal.child_fields_from_source(node_type), node_type
    assert read == len(types)  # every type of the installed LibCST reads plainly


def test_a_walk_visits_what_node_visit_visits():
    module = cst.parse_module(
        "def f(a, *b, c=1, **d):\n    return [x async for x in a if x] + f'{b!r:>{c}}'\n"
    )
    seen: list[cst.CSTNode] = []
    traversal.walk(module, seen.append, lambda node: None)

    class Recorder(cst.CSTVisitor):
        def __init__(self) -> None:
            self.nodes: list[cst.CSTNode] = []

        def on_visit(self, node: cst.CSTNode) -> bool:
            self.nodes.append(node)
            return True

    recorder = Recorder()
    module.visit(recorder)
    assert [type(n) for n in seen] == [type(n) for n in recorder.nodes]
