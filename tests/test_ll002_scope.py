"""LL002 in non-library paths: tests, examples, benchmarks and scripts are another audience.

A real project on disk, linted by the CLI in a subprocess: the same tiled video-decode merge (a
causal decoder, one latent frame per call: the merge sets the peak) is
reported in the library, left out in `tests/` (and counted by `--statistics`), and shown at
`low` when the project asks for every significance.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

TILED_MERGE = """import torch


def tiled_decode(self, z, tile, blend_extent, row_limit):
    rows = []
    for i in range(0, z.shape[-2], tile):
        row = []
        for j in range(0, z.shape[-1], tile):
            frames = [z[:, :, k : k + 1, i : i + tile, j : j + tile] for k in range(z.shape[2])]
            row.append(torch.cat([self.decoder(frame) for frame in frames], dim=2))
        rows.append(row)
    result_rows = []
    for i, row in enumerate(rows):
        for j, decoded in enumerate(row):
            if i > 0:
                decoded = self.blend_v(rows[i - 1][j], decoded, blend_extent)
            result_rows.append(decoded[:, :, :, :row_limit, :row_limit])
    return torch.cat(result_rows, dim=-1)
"""


def _project(root: Path, settings: str = "") -> None:
    (root / "pyproject.toml").write_text(
        f'[project]\nname = "pkg"\nversion = "0"\n\n[tool.lifetime-lint]\n{settings}'
    )
    for relative in ("pkg/vae.py", "tests/test_vae.py", "examples/decode.py"):
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(TILED_MERGE)


def _lint(root: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "lifetime_lint", "check", "--no-cache", "--exit-zero"]
    command += ["--select", "LL002", *extra, "."]
    return subprocess.run(command, cwd=root, capture_output=True, text=True, check=True)


def _findings(root: Path) -> dict[str, str]:
    done = _lint(root, "--output-format", "json")
    return {d["filename"].replace("\\", "/"): d["message"] for d in json.loads(done.stdout)}


def test_default_run_reports_library_code_only(tmp_path: Path) -> None:
    _project(tmp_path)
    found = _findings(tmp_path)
    assert [name for name in found if name.endswith("pkg/vae.py")] == list(found)
    assert "(significance: high)" in next(iter(found.values()))
    # (two per non-library file: the merge and the per-frame concatenation of each tile)
    statistics = _lint(tmp_path, "--statistics").stdout
    assert (
        '4\tLL002 \t    left out: non-library path (min-significance = "low" reports them)'
        in statistics
    )


def test_low_bar_shows_non_library_findings_at_low(tmp_path: Path) -> None:
    _project(tmp_path, 'min-significance = "low"\n')
    found = _findings(tmp_path)
    assert len(found) == 3
    for name, message in found.items():
        if name.endswith("pkg/vae.py"):
            assert message.endswith("(significance: high)")
        else:
            assert "in a non-library path" in message and message.endswith("(significance: low)")


def test_non_library_globs_are_the_users(tmp_path: Path) -> None:
    _project(tmp_path, 'non-library = ["examples"]\n')
    found = _findings(tmp_path)
    assert sorted(Path(name).parent.name for name in found) == ["pkg", "tests"]
