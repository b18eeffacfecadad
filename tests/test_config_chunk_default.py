"""LL002's chunk size read from a configuration (`self.chunk_size =
config.outer_product_chunk_size`, `chunk = self.chunk_size or seq_len`): its default lies in
the configuration module beside the file (`project.config_field_default`). At None the loop
runs once (`low`, "chunking is off by default"); at 64 it chunks (`medium`). The real command
with the cache on: editing only the configuration module changes the next run's finding (the
cache key, the stat index and the run memo all watch it)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from lifetime_lint import cache as cache_module

MODEL = """import torch
from torch import nn


class OuterProductMean(nn.Module):
    def __init__(self, config, hidden_size, outer_size, pair_size):
        super().__init__()
        self.chunk_size = config.outer_product_chunk_size
        self.input_proj = nn.Linear(hidden_size, 2 * outer_size)
        self.output_proj = nn.Linear(outer_size**2, pair_size)

    def forward(self, msa_states):
        left, right = self.input_proj(msa_states).chunk(2, dim=-1)
        seq_len = left.shape[1]
        chunk_size = self.chunk_size or seq_len
        right_flat = right.permute(0, 2, 1, 3).flatten(2, 3)
        out_chunks = []
        for start in range(0, seq_len, chunk_size):
            window = slice(start, start + chunk_size)
            outer = left[:, window].transpose(2, 3).flatten(1, 2) @ right_flat
            out_chunks.append(self.output_proj(outer.flatten(-2)))
        return torch.cat(out_chunks, dim=1)
"""
CONFIG = """class DemoConfig:
    def __init__(self, outer_product_chunk_size={default}):
        self.outer_product_chunk_size = outer_product_chunk_size
"""


def _settle() -> None:
    time.sleep(cache_module.RACY_NANOSECONDS / 1e9 + 0.2)


def _significance(root: Path, cache: Path) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-m", "lifetime_lint", "check", "--cache-dir", str(cache), "--select",
         "LL002", "--exit-zero", "--output-format", "json", "modeling_demo.py"],
        cwd=root, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return [d["significance"] for d in json.loads(done.stdout)]


def test_the_configured_default_decides_and_an_edit_there_is_seen(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.lifetime-lint]\nmin-significance = "low"\n')
    (tmp_path / "modeling_demo.py").write_text(MODEL)
    config = tmp_path / "configuration_demo.py"
    config.write_text(CONFIG.format(default="None"))
    cache = tmp_path / "cache"
    _settle()
    assert _significance(tmp_path, cache) == ["low"]
    _settle()
    assert _significance(tmp_path, cache) == ["low"]  # warm: replayed
    config.write_text(CONFIG.format(default="64"))
    _settle()
    assert _significance(tmp_path, cache) == ["medium"]
    _settle()
    assert _significance(tmp_path, cache) == ["medium"]
