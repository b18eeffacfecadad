"""LL002's fixes, run: the `--fix`ed code returns what the original returned, bit for bit."""

from __future__ import annotations

import textwrap
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from lifetime_lint.config import Settings  # noqa: E402
from lifetime_lint.engine import FixMode, Linter  # noqa: E402
from lifetime_lint.source import SourceFile  # noqa: E402

SOURCE = textwrap.dedent(
    '''
    import torch
    from torch import nn


    class Decoder(nn.Module):
        """A causal decoder: the first latent frame gives one frame, later ones four."""

        def __init__(self):
            super().__init__()
            self.conv = nn.Conv3d(4, 3, 1)

        def forward(self, z, first_chunk=False):
            x = self.conv(z)
            return x if first_chunk else x.repeat_interleave(4, dim=2)


    class VAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.decoder = Decoder()

        def running(self, z):
            num_frame = z.shape[2]
            for i in range(num_frame):
                if i == 0:
                    out = self.decoder(z[:, :, i : i + 1], first_chunk=True)
                else:
                    out_ = self.decoder(z[:, :, i : i + 1])
                    out = torch.cat([out, out_], 2)
            return torch.clamp(out, min=-1.0, max=1.0)

        def accumulate(self, z, stride):
            rows = []
            for i in range(0, z.shape[3], stride):
                time = []
                for k in range(z.shape[2]):
                    decoded = self.decoder(z[:, :, k : k + 1, i : i + stride], first_chunk=(k == 0))
                    time.append(decoded)
                rows.append(torch.cat(time, dim=2))
            result_rows = []
            for i, row in enumerate(rows):
                result_rows.append(row * 0.5)
            return torch.cat(result_rows, dim=3)

        def stacked(self, z):
            views = []
            for k in range(z.shape[0]):
                views.append(self.decoder(z[k : k + 1], first_chunk=True)[0])
            return torch.stack(views, dim=-1)
    '''
)


def _fixed(source: str) -> str:
    settings = Settings()
    settings.select = ["LL002"]
    # Per-chunk decodes are `low` (the decoder's activations set the peak): fix them anyway.
    settings.extra["min-significance"] = "low"
    linter = Linter(settings)
    result = linter.check_source(
        SourceFile.from_bytes("vae.py", source.encode()), FixMode(diff_only=True, unsafe=False)
    )
    assert result.fixed_text is not None
    return result.fixed_text


def _load(source: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(compile(source, "vae.py", "exec"), namespace)
    return namespace


def test_every_fix_applies() -> None:
    fixed = _fixed(SOURCE)
    assert "torch.cat" not in fixed and "torch.stack" not in fixed
    assert fixed.count("ChunkWriter(") == 4
    assert "del decoded" in fixed


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fixed_code_is_bitwise_equal(dtype) -> None:
    original, fixed = _load(SOURCE), _load(_fixed(SOURCE))
    torch.manual_seed(0)
    before = original["VAE"]().to(dtype)
    after = fixed["VAE"]().to(dtype)
    after.load_state_dict(before.state_dict())
    z = torch.randn(2, 4, 5, 7, 6, dtype=dtype)
    with torch.no_grad():
        for method, args in (("running", ()), ("accumulate", (3,)), ("stacked", ())):
            expected = getattr(before, method)(z, *args)
            actual = getattr(after, method)(z, *args)
            assert actual.dtype == expected.dtype and actual.shape == expected.shape
            assert actual.is_contiguous() == expected.is_contiguous()
            assert torch.equal(actual, expected), method


def test_fixed_code_keeps_gradients() -> None:
    original, fixed = _load(SOURCE), _load(_fixed(SOURCE))
    torch.manual_seed(0)
    before, after = original["VAE"](), fixed["VAE"]()
    after.load_state_dict(before.state_dict())
    z = torch.randn(1, 4, 3, 4, 4)
    before.accumulate(z, 2).square().sum().backward()
    after.accumulate(z, 2).square().sum().backward()
    for (name, a), (_, b) in zip(before.named_parameters(), after.named_parameters()):
        assert torch.allclose(a.grad, b.grad, rtol=0, atol=1e-6), name


def test_list_forms_fixture_runs_the_same() -> None:
    """The committed `--fix` output of positive_list_forms returns what the input returns."""
    import importlib.util
    from pathlib import Path

    folder = Path(__file__).parent / "fixtures" / "LL002"

    def load(name: str):
        spec = importlib.util.spec_from_file_location(name.replace(".", "_"), folder / name)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)  # type: ignore[union-attr]
        return module

    original, fixed = load("positive_list_forms.py"), load("positive_list_forms.fixed.py")
    assert "ChunkWriter" in (folder / "positive_list_forms.fixed.py").read_text()
    torch.manual_seed(0)
    conv = torch.nn.Conv3d(4, 3, 1)
    before, after = original.ChunkedVideoDecoder(conv), fixed.ChunkedVideoDecoder(conv)
    z = torch.randn(1, 4, 5, 6, 6)
    calls = [
        ("annotated", ()),
        ("two_branches", (True,)),
        ("two_branches", (False,)),
        ("rebound_to_its_result", ()),
        ("measured_and_checked", ()),
        ("element_shape_read", ()),
        ("dynamic_read_before_the_list", ()),
    ]
    with torch.no_grad():
        for method, args in calls:
            expected = getattr(before, method)(z, *args)
            actual = getattr(after, method)(z, *args)
            assert actual.shape == expected.shape and torch.equal(actual, expected), method
