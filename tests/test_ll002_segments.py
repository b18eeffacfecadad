"""LL002's generated-segments fixture, executed on CPU torch: the unsafe `ChunkWriter`
rewrite of a segment-by-segment video pipeline returns the same video as the original,
and the findings of the new forms (generated segments, sequence chunks, buffers filled in
place) clear the default bar where their negatives do not."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from lifetime_lint.config import Settings  # noqa: E402
from lifetime_lint.engine import FixMode, Linter  # noqa: E402
from lifetime_lint.source import SourceFile  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures" / "LL002"


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem.replace(".", "_"), path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _levels(stem: str) -> list[str]:
    settings = Settings()
    settings.root = str(FIXTURES)
    settings.select = ["LL002"]
    path = FIXTURES / f"{stem}.py"
    source = SourceFile.from_bytes(str(path), path.read_bytes())
    result = Linter(settings).check_source(source, FixMode(diff_only=True, unsafe=False))
    return [d.message.rsplit("(significance: ", 1)[1].rstrip(")") for d in result.diagnostics]


class _Transformer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Conv3d(4, 4, 1)

    def forward(self, latents, t, prompt_embeds):
        return self.proj(latents) * t + prompt_embeds.mean()


class _Scheduler:
    def step(self, noise_pred, t, latents):
        return latents - 0.1 * noise_pred


class _Vae(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = torch.nn.Upsample(scale_factor=(2, 4, 4))
        self.out = torch.nn.Conv3d(4, 3, 1)

    def decode(self, latents):
        return self.out(self.up(latents))


def _pipeline(module):
    torch.manual_seed(0)
    return module.LongVideoPipeline(_Transformer(), _Vae(), _Scheduler()).eval()


def test_segment_writer_rewrite_returns_the_same_video() -> None:
    original = _load(FIXTURES / "positive_generated_segments.py")
    rewritten = _load(FIXTURES / "positive_generated_segments.unsafe.py")
    noise = [torch.randn(1, 4, 3, 4, 4) for _ in range(3)]
    timesteps = [1.0, 0.5]
    prompt = torch.randn(2, 8)
    with torch.no_grad():
        before = _pipeline(original).generate(noise, timesteps, prompt, overlap=2)
        after = _pipeline(rewritten).generate(noise, timesteps, prompt, overlap=2)
        history = _pipeline(original).generate_history(noise, timesteps, prompt)
    assert before.shape == (1, 3, 6 + 4 + 4, 16, 16)
    assert torch.equal(before, after)
    assert history.shape == (1, 3, 18, 16, 16)


def test_new_forms_clear_the_bar_and_their_negatives_do_not() -> None:
    assert _levels("positive_generated_segments") == ["medium", "medium"]
    assert _levels("positive_sequence_chunks") == ["medium", "medium"]
    assert _levels("negative_segments_decoded_only") == []
    assert _levels("negative_sequence_chunks") == []


def _loop(source: str):
    import libcst as cst

    module = cst.parse_module(source)
    statement = module.body[0]
    assert isinstance(statement, cst.For)
    return statement


@pytest.mark.parametrize(
    ("source", "walks"),
    [
        ("for i in range(num_chunks):\n    out[i] = f(x[i])\n", True),
        ("for start in range(0, n, chunk_size):\n    out.append(f(x[start:]))\n", True),
        ("for piece in x.chunk(4, dim=1):\n    out.append(f(piece))\n", True),
        ("for i in range(n):\n    out.append(f(x[:c]))\n    x = x[c:]\n", True),
        # a window of neighbours, one sample per step, items of an unbind, slices by index
        ("for i in range(-num_chunks_before, num_chunks_after + 1):\n    out.append(x)\n", False),
        ("for i, n in enumerate(lengths):\n    out.append(f(k[i : i + 1, :n]))\n", False),
        ("for item in x.unbind(0):\n    out.append(f(item))\n", False),
        ("for g in range(o.shape[1]):\n    out.append(f(w[g * r : (g + 1) * r]))\n", False),
    ],
)
def test_sequence_chunks_needs_a_walk_from_the_start(source: str, walks: bool) -> None:
    from lifetime_lint.analysis import chunks

    assert chunks.sequence_chunks(_loop(source)) is walks
