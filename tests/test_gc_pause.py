"""The engine lints each file with the cyclic garbage collector paused (speed), and leaves
the collector as it found it, with the lint's cyclic garbage freed."""

from __future__ import annotations

import gc
import weakref
from typing import ClassVar

import libcst as cst

from lifetime_lint.config import Settings
from lifetime_lint.engine import Linter
from lifetime_lint.rule import Rule


class _Node:
    def __init__(self) -> None:
        self.partner: _Node | None = None


class _Probe(Rule):
    """Records whether the collector runs during the lint and leaves a reference cycle."""

    code = "LL990"
    name = "gc-probe"
    seen_enabled: ClassVar[list[bool]] = []
    cycle: ClassVar[list[weakref.ref[_Node]]] = []

    def visit_Module(self, node: cst.Module) -> None:
        _Probe.seen_enabled.append(gc.isenabled())
        a, b = _Node(), _Node()
        a.partner, b.partner = b, a
        _Probe.cycle.append(weakref.ref(a))


def _lint() -> None:
    _Probe.seen_enabled.clear()
    _Probe.cycle.clear()
    Linter(Settings(), rules=[_Probe]).lint_text("x.py", "import torch\nx = 1\n")


def test_collector_paused_during_lint_and_restored() -> None:
    assert gc.isenabled()
    _lint()
    assert _Probe.seen_enabled == [False]
    assert gc.isenabled()
    # The cycle made during the lint was collected by the lint's own young collection.
    assert _Probe.cycle[0]() is None


def test_collector_left_off_when_caller_paused_it() -> None:
    gc.disable()
    try:
        _lint()
        assert _Probe.seen_enabled == [False]
        assert not gc.isenabled()
    finally:
        gc.enable()
