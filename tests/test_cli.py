"""The command line, end to end on real files: output, exit codes, --fix, --diff, selection."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap

import pytest
from click.testing import CliRunner

from lifetime_lint.cli import main

VIOLATION = textwrap.dedent(
    """\
    import torch


    def decode(vae, latents):
        video = vae.decode(latents).sample
        torch.cuda.empty_cache()
        torch.cuda.synchronize()
        return video
    """
)

CLEAN = "import torch\n\n\ndef f(x):\n    return torch.relu(x)\n"


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "decode.py").write_text(VIOLATION)
    (tmp_path / "pkg" / "clean.py").write_text(CLEAN)
    return tmp_path


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_check_reports_and_exits_1(project):
    result = run("check", "pkg")
    assert result.exit_code == 1
    assert "pkg/decode.py:6:5: LL004 [*] `torch.cuda.empty_cache()` is CUDA-only" in result.output
    assert "pkg/decode.py:7:5: LL005 [*]" in result.output
    assert "Found 2 errors." in result.output
    assert "[*] 2 fixable with the `--fix` option." in result.output


def test_default_command_is_check(project):
    assert run("pkg").exit_code == 1
    assert run("pkg/clean.py").exit_code == 0
    assert "All checks passed!" in run("pkg/clean.py").output


def test_fix_rewrites_then_exit_0(project):
    result = run("--fix", "pkg")
    assert result.exit_code == 0, result.output
    assert "Found 2 errors (2 fixed, 0 remaining)." in result.output
    text = (project / "pkg" / "decode.py").read_text()
    assert "from lifetime_lint.runtime import reclaim" in text
    assert "reclaim()" in text and "torch.accelerator.synchronize()" in text
    assert (project / "pkg" / "clean.py").read_text() == CLEAN
    # Idempotent: a second run finds and changes nothing.
    assert run("--fix", "pkg").exit_code == 0
    assert (project / "pkg" / "decode.py").read_text() == text


def test_fix_exit_1_when_unfixable_remain(project):
    (project / "pkg" / "seed.py").write_text("import torch\ntorch.cuda.manual_seed(0)\n")
    result = run("--fix", "pkg")
    assert result.exit_code == 1
    assert "(2 fixed, 1 remaining)" in result.output


def test_diff_writes_nothing(project):
    before = (project / "pkg" / "decode.py").read_text()
    result = run("--diff", "pkg")
    assert result.exit_code == 1
    assert "-    torch.cuda.empty_cache()" in result.output
    assert "+    reclaim()" in result.output
    assert (project / "pkg" / "decode.py").read_text() == before
    assert run("--diff", "pkg/clean.py").exit_code == 0


def test_unsafe_fixes_need_the_flag(project):
    path = project / "pkg" / "stats.py"
    path.write_text("import torch\npeak = torch.cuda.max_memory_allocated()\n")
    result = run("--target-torch-version", "2.9", str(path))
    assert "1 hidden fix can be enabled with the `--unsafe-fixes` option." in result.output
    run("--fix", "--target-torch-version", "2.9", str(path))
    assert "torch.cuda.max_memory_allocated" in path.read_text()
    run("--fix", "--unsafe-fixes", "--target-torch-version", "2.9", str(path))
    assert "torch.accelerator.max_memory_allocated()" in path.read_text()


def test_select_ignore_and_prefixes(project):
    assert "LL005" not in run("--select", "LL004", "pkg").output
    assert "LL004" not in run("--ignore", "LL004", "pkg").output
    out = run("--select", "LL00", "--ignore", "LL005", "pkg").output
    assert "LL004" in out and "LL005" not in out
    out = run("--select", "LL004", "--extend-select", "LL005", "pkg").output
    assert "LL004" in out and "LL005" in out
    result = run("--select", "XX1", "pkg")
    assert result.exit_code == 2
    assert "unknown rule selector 'XX1'" in result.output


def test_exit_zero_and_quiet_and_statistics(project):
    assert run("--exit-zero", "pkg").exit_code == 0
    quiet = run("-q", "pkg").output
    assert "Found" not in quiet and "LL004" in quiet
    stats = run("--statistics", "pkg").output
    assert "1\tLL004 \t[*] raw-empty-cache" in stats


def test_json_format_is_ruff_shaped(project):
    result = run("--format", "json", "pkg")
    data = json.loads(result.output)
    assert [d["code"] for d in data] == ["LL004", "LL005"]
    first = data[0]
    assert set(first) >= {"code", "message", "filename", "location", "end_location", "fix",
                          "url", "noqa_row"}  # fmt: skip
    assert os.path.isabs(first["filename"])
    assert first["location"] == {"row": 6, "column": 5}
    assert first["end_location"] == {"row": 6, "column": 29}
    assert first["noqa_row"] == 6
    assert first["fix"]["applicability"] == "safe"
    contents = sorted(edit["content"] for edit in first["fix"]["edits"])
    assert contents == ["from lifetime_lint.runtime import reclaim\n", "reclaim"]


def test_rule_docs(project):
    result = run("rule", "LL004")
    assert result.exit_code == 0
    assert "# raw-empty-cache (LL004)" in result.output
    assert "## Why is this bad?" in result.output and "reclaim-call" in result.output
    assert "raw-empty-cache" in run("rule", "raw-empty-cache").output
    everything = run("rule", "--all").output
    assert "(LL004)" in everything and "(LL005)" in everything
    assert run("rule", "LL999").exit_code == 2


def test_excludes_and_force_exclude(project):
    (project / "build").mkdir()
    (project / "build" / "gen.py").write_text(VIOLATION)
    (project / ".venv").mkdir()
    (project / ".venv" / "lib.py").write_text(VIOLATION)
    out = run(".").output
    assert "build/gen.py" not in out and ".venv" not in out and "pkg/decode.py" in out
    assert "build/gen.py" in run("build/gen.py").output  # named explicitly
    assert run("--force-exclude", "build/gen.py").exit_code == 0


def test_python_dash_m_and_console_script(project):
    result = subprocess.run(
        [sys.executable, "-m", "lifetime_lint", "pkg/decode.py"],
        capture_output=True, text=True, cwd=project,
    )  # fmt: skip
    assert result.returncode == 1
    assert "LL004" in result.stdout


def test_fix_keeps_file_mode(project):
    path = project / "pkg" / "decode.py"
    os.chmod(path, 0o755)
    run("--fix", str(path))
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o755
    assert not [p for p in (project / "pkg").iterdir() if p.name.startswith(".lifetime-lint-")]
