"""`--write-baseline` / `--baseline`: adopt the linter on old code, fail only on new code."""

from __future__ import annotations

import json
import os
import textwrap

import pytest
from click.testing import CliRunner

from lifetime_lint.cli import main

CODE = textwrap.dedent(
    """\
    import torch


    def decode(vae, latents):
        video = vae.decode(latents).sample
        torch.cuda.empty_cache()
        return video


    def offload(model):
        model.to("cpu")
        torch.cuda.empty_cache()
    """
)


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pipe").mkdir()
    (tmp_path / "pipe" / "decode.py").write_text(CODE)
    return tmp_path


def run(*args):
    return CliRunner().invoke(main, ["check", "--no-cache", *args], catch_exceptions=False)


def test_write_then_check_against_baseline(project):
    result = run("--write-baseline", "lint-baseline.json", "pipe")
    assert result.exit_code == 0
    assert "Recorded 2 diagnostics in lint-baseline.json." in result.stderr
    data = json.loads((project / "lint-baseline.json").read_text())
    assert data["version"] == 1
    assert [(f["code"], f["path"], f["line"]) for f in data["findings"]] == [
        ("LL004", "pipe/decode.py", 6),
        ("LL004", "pipe/decode.py", 12),
    ]
    assert oct(os.stat(project / "lint-baseline.json").st_mode & 0o777) != oct(0o600)

    result = run("--baseline", "lint-baseline.json", "pipe")
    assert result.exit_code == 0, result.output
    assert "All checks passed!" in result.stdout
    assert "2 baselined diagnostics not shown" in result.stderr


def test_line_shifts_and_reindentation_keep_findings_known(project):
    run("--write-baseline", "b.json", "pipe")
    shifted = "# Copyright header\n\n" + CODE.replace(
        "def decode(vae, latents):\n", "def decode(vae, latents):\n    '''Decode.'''\n\n"
    )
    (project / "pipe" / "decode.py").write_text(shifted)
    assert run("--baseline", "b.json", "pipe").exit_code == 0
    # Moved into a class: re-indented, still the same findings.
    indented = "class Pipeline:\n" + textwrap.indent(CODE.replace("import torch\n", ""), "    ")
    (project / "pipe" / "decode.py").write_text("import torch\n" + indented)
    assert run("--baseline", "b.json", "pipe").exit_code == 0


def test_new_findings_are_reported(project):
    run("--write-baseline", "b.json", "pipe")
    (project / "pipe" / "decode.py").write_text(
        CODE + "\n\ndef unload(pipe):\n    del pipe\n    torch.cuda.empty_cache()\n"
    )
    (project / "pipe" / "other.py").write_text(CODE)
    result = run("--baseline", "b.json", "pipe")
    assert result.exit_code == 1
    reported = [line.split(": LL")[0] for line in result.stdout.splitlines() if ": LL" in line]
    assert reported == ["pipe/decode.py:17:5", "pipe/other.py:6:5", "pipe/other.py:12:5"]


def test_identical_snippets_are_counted(project):
    body = "import torch\n\nfor step in range(3):\n    torch.cuda.empty_cache()\n"
    (project / "pipe" / "decode.py").write_text(body)
    run("--write-baseline", "b.json", "pipe")
    (project / "pipe" / "decode.py").write_text(
        body + "\n\nfor step in range(3):\n    torch.cuda.empty_cache()\n"
    )
    result = run("--baseline", "b.json", "pipe")
    assert result.exit_code == 1
    assert "Found 1 error." in result.stdout


def test_editing_the_flagged_line_makes_it_new(project):
    run("--write-baseline", "b.json", "pipe")
    (project / "pipe" / "decode.py").write_text(
        CODE.replace('        model.to("cpu")\n', "").replace(
            '    model.to("cpu")\n', '    model.to("meta")\n'
        )
    )
    result = run("--baseline", "b.json", "pipe")
    assert result.exit_code == 1
    assert "pipe/decode.py:12:5: LL004" in result.stdout


def test_fixed_findings_are_reported_as_stale(project):
    run("--write-baseline", "b.json", "pipe")
    (project / "pipe" / "decode.py").write_text(CODE.split("\n\ndef offload")[0] + "\n")
    result = run("--baseline", "b.json", "pipe")
    assert result.exit_code == 0
    assert (
        "1 baselined diagnostic is gone; run --write-baseline b.json to drop it." in result.stderr
    )
    # Not stale: findings of rules this run does not check, or in files it does not check.
    (project / "pipe" / "decode.py").write_text(CODE)
    (project / "pipe" / "extra.py").write_text("import torch\n\ntorch.cuda.synchronize()\n")
    run("--write-baseline", "b.json", "pipe")
    assert "gone" not in run("--baseline", "b.json", "--select", "LL004", "pipe").stderr
    assert "gone" not in run("--baseline", "b.json", "pipe/extra.py").stderr


def test_baseline_and_diff_base_together(project, monkeypatch):
    import subprocess

    for key, value in (("GIT_AUTHOR_NAME", "t"), ("GIT_AUTHOR_EMAIL", "t@example.com"),
                       ("GIT_COMMITTER_NAME", "t"), ("GIT_COMMITTER_EMAIL", "t@example.com"),
                       ("GIT_CONFIG_NOSYSTEM", "1"), ("HOME", str(project))):  # fmt: skip
        monkeypatch.setenv(key, value)
    run("--write-baseline", "b.json", "pipe")
    for args in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "x"]):
        subprocess.run(["git", *args], cwd=project, check=True, capture_output=True)
    result = run("--baseline", "b.json", "--diff-base", "HEAD", "pipe")
    assert result.exit_code == 0
    assert "gone" not in result.stderr


def test_baseline_is_relative_to_its_own_folder(project, monkeypatch):
    (project / "ci").mkdir()
    run("--write-baseline", "ci/b.json", "pipe")
    assert (
        json.loads((project / "ci" / "b.json").read_text())["findings"][0]["path"]
        == "../pipe/decode.py"
    )
    monkeypatch.chdir(project / "pipe")
    assert run("--baseline", "../ci/b.json", ".").exit_code == 0


def test_bad_baseline_files(project):
    result = run("--baseline", "missing.json", "pipe")
    assert result.exit_code == 2
    assert "baseline file not found (create it with --write-baseline)" in result.stderr
    (project / "junk.json").write_text('{"findings": []}')
    result = run("--baseline", "junk.json", "pipe")
    assert result.exit_code == 2
    assert "not a lifetime-lint baseline" in result.stderr


def test_errors_are_never_baselined(project):
    (project / "pipe" / "broken.py").write_text("import torch\ntorch.cuda.synchronize()\ndef f(:\n")
    result = run("--write-baseline", "b.json", "pipe")
    assert result.exit_code == 2
    assert all(
        f["code"] == "LL004" for f in json.loads((project / "b.json").read_text())["findings"]
    )
    result = run("--baseline", "b.json", "pipe")
    assert result.exit_code == 2
    assert "E999" in result.stdout
