"""LL001's fixes change no result: the original and the fixed code run on real tensors and
produce bitwise-equal outputs, and the fixed code frees what the finding said it holds."""

from __future__ import annotations

import textwrap
import weakref
from typing import Any

import torch

from lifetime_lint.config import Settings
from lifetime_lint.engine import FixMode, Linter
from lifetime_lint.source import SourceFile

PIPELINE = textwrap.dedent(
    """
    import torch


    class Pipeline:
        def __init__(self, text_encoder, transformer, vae, probe):
            self.text_encoder = text_encoder
            self.transformer = transformer
            self.vae = vae
            self.probe = probe

        def __call__(self, ids, steps, callback=None, tensor_inputs=("latents",)):
            prompt_embeds = self.text_encoder(ids)
            negative_prompt_embeds = torch.zeros_like(prompt_embeds)
            prompt_embeds = torch.cat([negative_prompt_embeds, prompt_embeds])
            self.probe["prompt_embeds"] = weakref.ref(prompt_embeds)
            latents = torch.ones(2, 8)
            for i in range(steps):
                latent_model_input = torch.cat([latents] * 2)
                noise_pred = self.transformer(latent_model_input, prompt_embeds)
                uncond, cond = noise_pred.chunk(2)
                latents = latents - 0.1 * (uncond + 2.0 * (cond - uncond))
                if callback is not None:
                    kwargs = {}
                    for k in tensor_inputs:
                        kwargs[k] = locals()[k]
                    outputs = callback(i, kwargs)
                    latents = outputs.pop("latents", latents)
            try:
                scaled = latents * 2.0
                latents = scaled + 1.0
            finally:
                pass
            return self.vae.decode(latents)

        def tiles(self, z, tile):
            pieces = [self.vae.decode(z[:, i : i + tile]) for i in range(0, z.shape[1], tile)]
            total = torch.zeros_like(pieces[0])
            for piece in pieces:
                total = total + torch.tanh(piece)
            return total
    """
)


class _Vae:
    def __init__(self, probe: dict[str, Any]) -> None:
        self.probe = probe

    def decode(self, latents: torch.Tensor) -> torch.Tensor:
        self.probe["alive_at_decode"] = self.probe["prompt_embeds"]() is not None
        return torch.sin(latents) * 3.0


def _fixed(source: str, unsafe: bool) -> str:
    settings = Settings()
    settings.select = ["LL001"]
    # Embeddings and latents of this toy pipeline are low-significance findings (hidden by
    # default); the behaviour under test is the fix itself.
    settings.extra["min-significance"] = "low"
    result = Linter(settings).check_source(
        SourceFile.from_bytes("pipeline.py", source.encode()),
        FixMode(diff_only=True, unsafe=unsafe),
    )
    assert not result.has_error
    assert result.fixed_text is not None
    return result.fixed_text


def _run(source: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"weakref": weakref}
    exec(compile(source, "pipeline.py", "exec"), namespace)
    probe: dict[str, Any] = {}
    torch.manual_seed(0)
    weight = torch.randn(8, 8)
    pipeline = namespace["Pipeline"](
        lambda ids: torch.nn.functional.embedding(ids, torch.randn(10, 8)),
        lambda x, ctx: x @ weight + ctx.mean(),
        _Vae(probe),
        probe,
    )
    seen = []
    torch.manual_seed(1)
    out = pipeline(torch.tensor([[1, 2]]), steps=3)
    alive_at_decode = probe["alive_at_decode"]
    torch.manual_seed(1)
    out_callback = pipeline(
        torch.tensor([[1, 2]]),
        steps=3,
        callback=lambda i, kw: seen.append(sorted(kw)) or {"latents": kw["latents"] * 0.5},
        tensor_inputs=("latents", "latent_model_input", "prompt_embeds"),
    )
    tiles = pipeline.tiles(torch.randn(2, 12), 4)
    return {
        "out": out,
        "out_callback": out_callback,
        "seen": seen,
        "tiles": tiles,
        "alive_at_decode": alive_at_decode,
    }


def test_safe_fix_keeps_results_and_frees_the_embeddings_before_decode():
    fixed = _fixed(PIPELINE, unsafe=False)
    assert "del prompt_embeds, negative_prompt_embeds" in fixed or "del prompt_embeds" in fixed
    before, after = _run(PIPELINE), _run(fixed)
    assert torch.equal(before["out"], after["out"])
    assert torch.equal(before["out_callback"], after["out_callback"])
    assert before["seen"] == after["seen"]  # locals() still sees every requested tensor
    assert torch.equal(before["tiles"], after["tiles"])
    assert before["alive_at_decode"] is True
    assert after["alive_at_decode"] is False


def test_unsafe_fix_releases_tiles_and_keeps_results():
    fixed = _fixed(PIPELINE, unsafe=True)
    assert "for piece in release(pieces):" in fixed
    before, after = _run(PIPELINE), _run(fixed)
    assert torch.equal(before["tiles"], after["tiles"])
    assert torch.equal(before["out"], after["out"])


def test_fixing_twice_changes_nothing():
    once = _fixed(PIPELINE, unsafe=True)
    settings = Settings()
    settings.select = ["LL001"]
    again = Linter(settings).check_source(
        SourceFile.from_bytes("pipeline.py", once.encode()), FixMode(diff_only=True, unsafe=True)
    )
    assert again.fixed_text is None
