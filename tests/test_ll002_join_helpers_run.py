"""LL002's joining-helper and conditional-join shapes (`positive_split_join_helpers`), run on
CPU torch: at the device join every kept piece is memory of its own (fp32 groups of an fp16
input, convolution outputs of each slab: no storage shared with the input or with each
other) and still alive when the joined result exists, so the join holds the pieces and the
result together (about twice the output); the linter reports both, without a fix (the
conditional's other arm and the helper's host path need the list)."""

from __future__ import annotations

import importlib.util
import weakref
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from lifetime_lint.config import Settings  # noqa: E402
from lifetime_lint.engine import FixMode, Linter  # noqa: E402
from lifetime_lint.source import SourceFile  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures" / "LL002"
STEM = "positive_split_join_helpers"


def _load():
    spec = importlib.util.spec_from_file_location(STEM, FIXTURES / f"{STEM}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _RecordingTorch:
    """The fixture's `torch` with `cat` recording, at each list join, its pieces (weakly)
    and the bytes of the result: what is alive together at the join."""

    def __init__(self) -> None:
        self.joins: list[tuple[list[weakref.ref], list[int], int, int]] = []

    def __getattr__(self, name: str):
        return getattr(torch, name)

    def cat(self, tensors, *args, **kwargs):
        result = torch.cat(tensors, *args, **kwargs)
        pieces = list(tensors)
        self.joins.append(
            (
                [weakref.ref(t) for t in pieces],
                [t.untyped_storage().data_ptr() for t in pieces],
                sum(t.untyped_storage().nbytes() for t in pieces),
                result.untyped_storage().nbytes(),
            )
        )
        return result


def _findings() -> list:
    settings = Settings()
    settings.root = str(FIXTURES)
    settings.select = ["LL002"]
    path = FIXTURES / f"{STEM}.py"
    source = SourceFile.from_bytes(str(path), path.read_bytes())
    result = Linter(settings).check_source(source, FixMode(diff_only=True, unsafe=False))
    return [d for d in result.diagnostics if d.code == "LL002"]


def test_group_norm_keeps_fp32_groups_alive_at_the_conditional_join(monkeypatch) -> None:
    module = _load()
    recording = _RecordingTorch()
    monkeypatch.setattr(module, "torch", recording)
    norm = module.GroupwiseNorm3D(4, 8).to(torch.float16)
    x = torch.randn(1, 8, 3, 4, 4, dtype=torch.float16)
    out = norm(x)
    assert torch.allclose(
        out.float(), torch.nn.functional.group_norm(x.float(), 4, eps=norm.eps), atol=1e-3
    )  # the device arm ran (small volume) and normalises as GroupNorm does
    assert len(recording.joins) == 1
    refs, pointers, piece_bytes, result_bytes = recording.joins[0]
    assert len(refs) == 4
    assert len(set(pointers)) == 4  # one allocation per group
    assert x.untyped_storage().data_ptr() not in pointers  # not views of the input
    # fp32 groups of an fp16 input: the pieces are the result's bytes, twice the input's.
    assert piece_bytes == result_bytes == 2 * x.untyped_storage().nbytes()


def test_slab_conv_outputs_stay_alive_across_the_helper_join(monkeypatch) -> None:
    module = _load()
    recording = _RecordingTorch()
    monkeypatch.setattr(module, "torch", recording)
    torch.manual_seed(0)
    conv = module.SlabConv3d(2, 3)
    alive_after_join: list[bool] = []
    join = conv._join

    def spying_join(outputs, dim):
        result = join(outputs, dim)
        # Back in `forward`, `outputs` (the comprehension) still holds every piece: the
        # caller's `del outputs` comes after the join returns.
        alive_after_join.extend(ref() is not None for ref in recording.joins[-1][0])
        return result

    monkeypatch.setattr(conv, "_join", spying_join)
    monkeypatch.setattr("builtins.print", lambda *a, **k: None)
    x = torch.randn(1, 2, 9, 4, 4)
    with torch.no_grad():
        out = conv.forward(x)
    assert out.shape[2] == 3  # each 3-frame slab keeps its middle frame
    refs, pointers, piece_bytes, result_bytes = recording.joins[-1]
    assert len(refs) == 3 and len(set(pointers)) == 3
    assert x.untyped_storage().data_ptr() not in pointers
    assert alive_after_join == [True, True, True]
    # The trimmed pieces are views of each slab's whole conv output: the join holds all of
    # them (3x the result here) next to the result.
    assert piece_bytes >= result_bytes


def test_both_shapes_reported_without_a_fix() -> None:
    found = _findings()
    assert len(found) == 2
    assert all(d.fix is None for d in found)
    assert all(d.message.endswith("(significance: medium)") for d in found)
