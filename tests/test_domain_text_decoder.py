"""A decoder called in a file that is not about images, video or latents (a seq2seq or speech
recognizer's attention decoder whose layers hand the encoder `memory` back) returns hidden
states, not decoded frames (`facts._UNVISUAL_DOMAINS`): LL001 does not call what it returns
"decoded tiles, frames or images: large" and the default run leaves it out. Found on funasr
1.4.16 (held-out set 7: six such findings, all false). The same decoder in a file about a
VAE's latent video keeps the decoded-output reading. Real files, the real command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

# As in funasr: the base class leaves `self.decoders` to a subclass, which builds it with a
# project helper (`repeat`), not an `nn.ModuleList`.
DECODER = """
import torch
from torch import nn

from .repeat import repeat


class BaseAttentionDecoder(nn.Module):
    def __init__(self, vocab_size, size):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, size)
        self.decoders = None  # built by the subclass
        self.after_norm = nn.LayerNorm(size)
        self.output_layer = nn.Linear(size, vocab_size)

    def forward_one_step(self, tgt, tgt_mask, memory, cache=None):
        x = self.embed(tgt)
        if cache is None:
            cache = [None] * len(self.decoders)
        new_cache = []
        for c, decoder in zip(cache, self.decoders):
            x, tgt_mask, memory, memory_mask = decoder(x, tgt_mask, memory, None, cache=c)
            new_cache.append(x)
        y = self.after_norm(x[:, -1])
        y = torch.log_softmax(self.output_layer(y), dim=-1)
        return y, new_cache


class AttentionDecoder(BaseAttentionDecoder):
    def __init__(self, vocab_size, size, num_blocks, make_layer):
        super().__init__(vocab_size, size)
        self.decoders = repeat(num_blocks, lambda index: make_layer(index))
"""
# A long module: a long file with no domain word is judged `unknown`, not `unjudged`.
HELPERS = "".join(
    f"\n\ndef read_field_{i}(record, key, default=None):\n"
    f"    value = record.get(key, default)\n"
    f"    text = str(value).strip()\n"
    f"    return text or default\n"
    for i in range(160)
)
VISUAL = "\n\nVAE_LATENT_CHANNELS = 16  # the vae decodes latent video frames to images\n"


def _messages(tmp_path: Path, source: str, low: bool) -> list[str]:
    (tmp_path / "decoder.py").write_text(source)
    flags = ["--isolated"]
    if low:
        (tmp_path / "low.toml").write_text('[tool.lifetime-lint]\nmin-significance = "low"\n')
        flags = ["--config", str(tmp_path / "low.toml")]
    done = subprocess.run(
        [sys.executable, "-m", "lifetime_lint", "check", *flags, "--no-cache", "--select",
         "LL001", "--exit-zero", "--output-format", "json", str(tmp_path / "decoder.py")],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return [d["message"] for d in json.loads(done.stdout)]


def test_a_text_decoders_outputs_are_not_decoded_frames(tmp_path: Path) -> None:
    source = DECODER + HELPERS
    assert _messages(tmp_path, source, low=False) == []
    shown = _messages(tmp_path, source, low=True)
    assert shown and all("decoded tiles" not in message for message in shown), shown


def test_the_same_decoder_beside_a_vae_keeps_decoded_output(tmp_path: Path) -> None:
    shown = _messages(tmp_path, DECODER + HELPERS + VISUAL * 12, low=True)
    assert any("decoded tiles" in message for message in shown), shown
