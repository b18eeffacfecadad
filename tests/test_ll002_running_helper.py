"""LL002's running form through a local helper (FramePack's `_soft_append`): the fixture's
helper, run on CPU torch, does concatenate both arguments (the whole history and the new
section, cross-faded), so the old and new video are alive together at each append; both
call sites clear the default bar, and the helpers of the negative fixture are not taken
for running appends."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from lifetime_lint.config import Settings  # noqa: E402
from lifetime_lint.engine import FixMode, Linter  # noqa: E402
from lifetime_lint.source import SourceFile  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures" / "LL002"


def _findings(stem: str, min_significance: str | None = None) -> list[str]:
    settings = Settings()
    settings.root = str(FIXTURES)
    settings.select = ["LL002"]
    if min_significance is not None:
        settings.extra = {
            **(getattr(settings, "extra", None) or {}),
            "min-significance": min_significance,
        }
    path = FIXTURES / f"{stem}.py"
    source = SourceFile.from_bytes(str(path), path.read_bytes())
    result = Linter(settings).check_source(source, FixMode(diff_only=True, unsafe=False))
    return [d.message for d in result.diagnostics]


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_soft_append_keeps_the_whole_history():
    module = _load(FIXTURES / "positive_running_append_helper.py")
    pipeline = module.SectionVideoPipeline(None, None, None)
    history = torch.randn(1, 3, 9, 4, 4)
    current = torch.randn(1, 3, 9, 4, 4)
    out = pipeline._soft_append(history, current, 3)
    assert out.shape[2] == 9 + 9 - 3
    assert torch.equal(out[:, :, :6], history[:, :, :6])
    assert torch.equal(out[:, :, 9:], current[:, :, 3:])


def test_both_call_sites_reported_without_a_fix():
    messages = _findings("positive_running_append_helper")
    assert len(messages) == 2
    assert all("`_soft_append` returns a concatenation" in m for m in messages)
    assert all(m.endswith("(significance: medium)") for m in messages)


def test_padding_and_other_helpers_not_reported():
    assert len(_findings("positive_running_append_helper", "low")) == 2
    assert _findings("negative_helper_pads_one_argument", "low") == []
