"""LL003 over subgroups, on a real 4-rank gloo world: one group without global rank 0
([1, 3]) and one with it ([0, 2]).

- `gather_to_root(..., group_dst=0)` gives the group's root what `all_gather` over the group
  gave it, and every other rank None.
- The fixture's safe fixes (the destination is group rank 0, provably a member) return what
  the original returned, on every member of the group (the group's code runs on its
  members; a non-member gets None from the helper).
- The fix that compares a global rank (`dist.get_rank() == 0`) is unsafe for a reason: over
  the group without global rank 0 its members raise ValueError where the original returned
  None.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

from lifetime_lint.runtime import gather_to_root  # noqa: E402
from test_runtime_gather import _all_gather, _contribution, run_gloo  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures" / "LL003"
STEM = "fix_subgroup_destination"
GROUPS = {"without global rank 0": [1, 3], "with global rank 0": [0, 2]}


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name.replace(".", "_"), FIXTURES / name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    return a is None and b is None


def _check(rank: int, world_size: int) -> None:
    original = _load(f"{STEM}.py")
    fixed = _load(f"{STEM}.fixed.py")
    unsafe = _load(f"{STEM}.unsafe.py")
    groups = {label: (members, dist.new_group(members)) for label, members in GROUPS.items()}
    x = _contribution(rank)
    for label, (members, group) in groups.items():
        member = rank in members
        # The runtime: gather_to_root == all_gather read on the group's root.
        expected = _all_gather(x, group=group) if member else None  # a collective: all members
        result = gather_to_root(x, group=group, group_dst=0)
        if member and dist.get_rank(group) == 0:
            assert expected is not None
            assert len(result) == len(expected), label
            assert all(torch.equal(a, b) for a, b in zip(result, expected)), label
        else:
            assert result is None, (label, rank)
        if not member:
            continue
        # The safe fixes: the same value on every rank.
        for function in ("group_root", "group_root_through_helper"):
            before = getattr(original, function)(x, group)
            after = getattr(fixed, function)(x, group)
            assert _same(after, before), (label, function, rank)
            if dist.get_rank(group) == 0:
                assert before is not None
        # Left alone by --fix; the unsafe rewrite differs where global rank 0 is no member.
        assert _same(fixed.global_root(x, group), original.global_root(x, group))
        before = original.global_root(x, group)
        if 0 not in members:
            assert before is None
            with pytest.raises(ValueError):
                unsafe.global_root(x, group)
        else:
            assert _same(unsafe.global_root(x, group), before), (label, rank)


def test_subgroup_fixes_on_gloo() -> None:
    run_gloo(_check, 4, timeout=120)
