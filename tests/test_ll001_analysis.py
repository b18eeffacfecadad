"""The CFG, liveness and reaching-definitions analysis behind LL001, on small functions."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from lifetime_lint.analysis import build, solve
from lifetime_lint.analysis.cfg import CFG, StatementInfo, TooLarge
from lifetime_lint.analysis.dataflow import Dataflow


def _function(source: str) -> cst.FunctionDef:
    module = cst.parse_module(textwrap.dedent(source))
    function = module.body[0]
    assert isinstance(function, cst.FunctionDef)
    return function


def _analyse(source: str):
    function = _function(source)
    cfg = build(function)
    return function, cfg, solve(cfg)


def _statement(cfg: CFG, text: str) -> StatementInfo:
    module = cst.Module(body=[])
    for info in cfg.statements:
        code = module.code_for_node(info.statement).strip()
        if code.splitlines()[0].strip() == text:
            return info
    raise AssertionError(f"no statement {text!r}")


def _live_after(cfg: CFG, flow: Dataflow, text: str) -> set[str]:
    info = _statement(cfg, text)
    assert info.exit is not None
    bits = flow.live_out[info.exit.index]
    return {name for i, name in enumerate(cfg.names) if bits >> i & 1}


def _reaching_kinds(cfg: CFG, flow: Dataflow, text: str, name: str) -> list[str]:
    info = _statement(cfg, text)
    assert info.exit is not None
    return sorted(site.kind for site in flow.reaching(flow.reach_out[info.exit.index], name))


def test_use_in_a_later_iteration_keeps_a_name_alive():
    _, cfg, flow = _analyse(
        """
        def f(xs):
            previous = start()
            for x in xs:
                use(previous)
                previous = g(x)
            return 0
        """
    )
    # Read by the next iteration's `use(previous)`: live after its own rebinding.
    assert "previous" in _live_after(cfg, flow, "previous = g(x)")
    assert "previous" not in _live_after(cfg, flow, "use(previous)")
    assert _live_after(cfg, flow, "for x in xs:") == set()


def test_break_skips_the_loop_else():
    _, cfg, flow = _analyse(
        """
        def f(xs, a):
            for x in xs:
                if x:
                    break
            else:
                return a
            return 0
        """
    )
    # `a` is read only in the else branch, which `break` skips but normal exhaustion runs.
    assert "a" in _live_after(cfg, flow, "if x:")
    assert _live_after(cfg, flow, "for x in xs:") == set()


def test_finally_and_handlers_see_names_from_the_try_body():
    _, cfg, flow = _analyse(
        """
        def f(a, b):
            try:
                x = a()
                y = b()
            except ValueError:
                return x
            finally:
                print(b)
            return y
        """
    )
    # The handler may run after any statement of the body: x is live after `x = a()`.
    assert {"x", "b"} <= _live_after(cfg, flow, "x = a()")
    # After the whole try statement only y is read.
    assert _live_after(cfg, flow, "try:") == {"y"}


def test_dynamic_reads_keep_every_local_alive_at_that_point_only():
    _, cfg, flow = _analyse(
        """
        def f(ts, cb):
            embeds = make()
            for t in ts:
                latents = step(t)
                cb(locals())
            return decode(latents)
        """
    )
    assert "embeds" in _live_after(cfg, flow, "latents = step(t)")
    assert "embeds" not in _live_after(cfg, flow, "for t in ts:")


def test_definitely_bound_through_reaching_definitions():
    _, cfg, flow = _analyse(
        """
        def f(ts, flag):
            for t in ts:
                out = g(t)
            use(out)
            x = g(1)
            if flag:
                del x
            done()
        """
    )
    assert _reaching_kinds(cfg, flow, "use(out)", "out") == ["assign", "unbound"]
    assert _reaching_kinds(cfg, flow, "if flag:", "x") == ["assign", "deleted"]


def test_match_captures_are_definitions_and_keywords_are_not_reads():
    _, cfg, _flow = _analyse(
        """
        def f(subject, x):
            match subject:
                case Point(x=b):
                    out = b
                case [first, *rest]:
                    out = rest
                case {"k": v, **others}:
                    out = others
                case _:
                    out = None
            return out
        """
    )
    defined = {site.name for site in cfg.defs if site.kind == "match"}
    assert defined == {"b", "first", "rest", "v", "others"}
    # `Point(x=b)` names an attribute: the parameter x is never read.
    assert not any(load.value == "x" for node in cfg.nodes for load in node.loads)


def test_closures_lambdas_and_generators_capture_but_comprehensions_read():
    _, cfg, _ = _analyse(
        """
        def f(a, b, c, d):
            g = lambda: a
            h = (b for _ in range(3))
            k = [c for _ in range(3)]

            def inner():
                return d

            return g, h, k, inner
        """
    )
    assert {"a", "b", "d"} <= cfg.captured
    assert "c" not in cfg.captured


def test_escapes_and_truth_tests_are_recorded():
    _, cfg, _ = _analyse(
        """
        def f(a, b, c, d, e):
            store.append(a)
            self.cache = b
            out = [c, 1]
            self.views = e[:, 0]
            if d:
                pass
        """
    )
    escapes = set().union(*(node.escapes for node in cfg.nodes))
    truth = set().union(*(node.truth for node in cfg.nodes))
    assert {"a", "b", "c", "e"} <= escapes
    assert truth == {"d"}


def test_statements_after_a_jump_have_no_fall_through():
    _, cfg, _ = _analyse(
        """
        def f(x):
            if x:
                return 1
            else:
                raise ValueError
        """
    )
    info = _statement(cfg, "if x:")
    assert info.exit is not None and not info.exit.preds


def test_nested_finally_routes_returns_through_both():
    _, cfg, flow = _analyse(
        """
        def f(a, b):
            try:
                try:
                    return g()
                finally:
                    print(a)
            finally:
                print(b)
        """
    )
    entry_live = flow.live_in[cfg.entry.index]
    assert {cfg.names[i] for i in range(len(cfg.names)) if entry_live >> i & 1} == {"a", "b"}


def test_oversized_functions_are_refused():
    body = "\n".join(f"    x{i} = {i}" for i in range(60))
    with pytest.raises(TooLarge):
        build(_function(f"def f():\n{body}\n"), max_nodes=50)
