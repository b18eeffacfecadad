"""The fact behind LL002's delegated-blend fixtures, checked by running them on CPU torch:
a one-line `blend_t` that forwards to an in-place `_blend` returns its second argument
itself (so `result_row` holds views of tiles `row` keeps alive), while the fresh variant
returns a new tensor; and the linter says so for each."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from lifetime_lint.config import Settings  # noqa: E402
from lifetime_lint.engine import FixMode, Linter  # noqa: E402
from lifetime_lint.source import SourceFile  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures" / "LL002"


def _load(stem: str):
    spec = importlib.util.spec_from_file_location(stem, FIXTURES / f"{stem}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _ll002(stem: str) -> list[str]:
    settings = Settings()
    settings.root = str(FIXTURES)
    settings.select = ["LL002"]
    linter = Linter(settings)
    path = FIXTURES / f"{stem}.py"
    source = SourceFile.from_bytes(str(path), path.read_bytes())
    result = linter.check_source(source, FixMode(diff_only=True, unsafe=False))
    return [d.message for d in result.diagnostics if d.code == "LL002"]


def _vae(module):
    decoder = torch.nn.Upsample(scale_factor=(1, 4, 4))
    return module.ParallelTiledVAE(decoder, stride=2, overlap=1)


def test_in_place_wrapper_returns_its_argument_and_is_not_reported() -> None:
    module = _load("negative_delegated_in_place_blend")
    vae = _vae(module)
    a, b = torch.randn(1, 3, 4, 8, 8), torch.randn(1, 3, 4, 8, 8)
    before = b.clone()
    blended = vae.blend_t(a, b, 2)
    assert blended is b and not torch.equal(b, before)  # written in place, handed back
    video = vae.temporal_tiled_decode(torch.randn(1, 3, 7, 2, 2))
    assert video.shape[2] > 0
    assert _ll002("negative_delegated_in_place_blend") == []


def test_fresh_wrapper_returns_a_new_tensor_and_is_reported() -> None:
    module = _load("positive_delegated_fresh_blend")
    vae = _vae(module)
    a, b = torch.randn(1, 3, 4, 8, 8), torch.randn(1, 3, 4, 8, 8)
    before = b.clone()
    blended = vae.blend_t(a, b, 2)
    assert blended is not b and torch.equal(b, before)  # b untouched, a new tensor made
    assert blended.untyped_storage().data_ptr() != b.untyped_storage().data_ptr()
    messages = _ll002("positive_delegated_fresh_blend")
    assert len(messages) == 1 and "`result_row`" in messages[0]
