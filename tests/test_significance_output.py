"""Significance end to end: the bar in `[tool.lifetime-lint]`, the property in JSON and SARIF,
and the cache keeping it (real files, a real subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

BLOCK = textwrap.dedent(
    """
    import torch
    from torch import nn


    class VideoBlock(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.norm1 = nn.LayerNorm(dim)
            self.attn1 = nn.Linear(dim, dim)
            self.norm2 = nn.LayerNorm(dim)
            self.attn2 = nn.Linear(dim, dim)
            self.ffn = nn.Linear(dim, dim)

        def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
            attn_output = self.attn1(self.norm1(hidden_states))
            hidden_states = hidden_states + attn_output
            attn_output = self.attn2(self.norm2(hidden_states))
            hidden_states = hidden_states + attn_output
            return self.ffn(hidden_states)


    def patchify_video_latents(latents: torch.Tensor, patch_size=(1, 2, 2)) -> torch.Tensor:
        # Video latents (batch, channels, frames, height, width) to the block's tokens: the
        # file shows a video model, so its activations hold tens of thousands of tokens.
        batch_size, num_channels, num_frames, height, width = latents.shape
        p_t, p_h, p_w = patch_size
        latents = latents.reshape(
            batch_size, num_channels, num_frames // p_t, p_t, height // p_h, p_h, width // p_w, p_w
        )
        return latents.permute(0, 2, 4, 6, 1, 3, 5, 7).flatten(4).flatten(1, 3)
    """
)


def _run(tmp_path: Path, *args: str, config: str = "") -> subprocess.CompletedProcess:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.lifetime-lint]\nselect = ["LL001"]\n' + config, encoding="utf-8"
    )
    (tmp_path / "block.py").write_text(BLOCK, encoding="utf-8")
    return subprocess.run(
        [sys.executable, "-m", "lifetime_lint", "check", "--exit-zero", *args, "block.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )


def test_default_bar_reports_medium_and_json_carries_it(tmp_path: Path) -> None:
    done = _run(tmp_path, "--format", "json", "--no-cache")
    findings = json.loads(done.stdout)
    # The second attention output is held across the feed-forward (medium); the first is
    # held across cross-attention only (low): left out by default.
    assert [(f["location"]["row"], f["significance"]) for f in findings] == [(19, "medium")]
    assert "(significance: medium)" in findings[0]["message"]


def test_min_significance_low_shows_the_rest_and_sarif_has_the_property(tmp_path: Path) -> None:
    done = _run(tmp_path, "--format", "sarif", "--no-cache", config='min-significance = "low"\n')
    results = json.loads(done.stdout)["runs"][0]["results"]
    levels = sorted(r["properties"]["significance"] for r in results)
    assert levels == ["low", "medium"]


def test_cached_findings_keep_their_significance(tmp_path: Path) -> None:
    first = json.loads(_run(tmp_path, "--format", "json").stdout)
    second = json.loads(_run(tmp_path, "--format", "json").stdout)  # from the cache
    assert first == second
    assert second[0]["significance"] == "medium"


def test_a_bad_bar_is_a_config_error(tmp_path: Path) -> None:
    done = _run(tmp_path, config='min-significance = "huge"\n')
    assert done.returncode == 2
    assert "min-significance" in done.stderr
