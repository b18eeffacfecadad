"""The cold-lint shortcuts (issue 11) answer exactly what the long way does."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from lifetime_lint.config import Settings
from lifetime_lint.engine import Linter
from lifetime_lint.parsing import parse_exact
from lifetime_lint.traversal import LEAF_TYPES, child_fields, child_nodes, walk, walk_skipping
from rules.autograd_history_kept import AutogradHistoryKept, _may_call_backward

_SOURCES = sorted((Path(__file__).resolve().parent.parent / "lifetime_lint").glob("*.py"))


@pytest.mark.parametrize("path", _SOURCES[:8], ids=lambda p: p.name)
def test_child_nodes_and_walk_skipping_match_libcst(path: Path) -> None:
    module = cst.parse_module(path.read_text())
    full: list[cst.CSTNode] = []
    walk(module, full.append, lambda node: None)
    for node in full:
        assert [id(c) for c in child_nodes(node)] == [id(c) for c in node.children]
    skipped = frozenset(LEAF_TYPES)
    entered: list[int] = []
    left: list[int] = []
    walk_skipping(module, lambda n: entered.append(id(n)), lambda n: left.append(id(n)), skipped)
    kept = [id(n) for n in full if type(n) not in skipped]
    assert entered == kept
    assert sorted(left) == sorted(kept)


def test_leaf_types_have_no_children() -> None:
    assert all(child_fields(leaf) == () for leaf in LEAF_TYPES)


def _may_call_backward_in(text: str) -> bool:
    linter = Linter(Settings(select=["LL006"]))
    context = linter._context("x.py", text, parse_exact(text), None)
    return _may_call_backward(context)


@pytest.mark.parametrize(
    "text",
    [
        "loss.backward()\n",
        "(loss.  # why\n    backward())\n",
        "loss.\\\n    backward()\n",
        "self.manual_backward(loss)\n",
        "import torch\ntorch.autograd.grad(y, x)\n",
        "from torch import autograd as ag\nag.grad(y, x)\n",
        "from torch.autograd import grad as g\ng(y, x)\n",
        "import torch.autograd as ag\nag.grad(y, x)\n",
    ],
)
def test_every_spelling_of_a_backward_call_is_scanned(text: str) -> None:
    assert _may_call_backward_in(text)


@pytest.mark.parametrize(
    "text",
    [
        "# kept for backward compatibility\nx = 1\n",
        "import torch\nclass F(torch.autograd.Function):\n    pass\n",
        "m.register_full_backward_hook(h)\n",
    ],
)
def test_text_without_a_backward_call_is_not_scanned(text: str) -> None:
    assert any(trigger in text for trigger in AutogradHistoryKept.triggers + ("backward",))
    assert not _may_call_backward_in(text)


def test_assigned_names_answer_as_the_per_name_search_did() -> None:
    """LL004/LL005's filter for renamed device functions reads one memoised set of assigned
    names instead of searching the whole text for `name =` at every bare call; on random
    text over the characters that matter it answers exactly as that search did."""
    import random
    import re

    from lifetime_lint.devices import _ASSIGNED_NAME

    rng = random.Random(7)
    alphabet = "ab1_ =\n.()\u00e9"
    names = ["a", "b", "ab", "a1", "_", "\u00e9", "ba", "a_b", "a\u00e9"]
    for _ in range(5000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 24)))
        assigned = set(_ASSIGNED_NAME.findall(text))
        for name in names:
            searched = re.search(rf"\b{re.escape(name)}\s*=[^=]", text) is not None
            assert searched == (name in assigned), (text, name)
