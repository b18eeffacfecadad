"""`--diff-base REV`: a pull-request gate reports only what the pull request added."""

from __future__ import annotations

import subprocess
import textwrap

import pytest
from click.testing import CliRunner

from lifetime_lint.cli import main
from lifetime_lint.gitdiff import _unquote, changed_lines

OLD = textwrap.dedent(
    """\
    import torch


    def decode(vae, latents):
        video = vae.decode(latents).sample
        torch.cuda.empty_cache()
        return video
    """
)


def git(cwd, *args):
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout  # fmt: skip


@pytest.fixture
def repo(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for key, value in (("GIT_AUTHOR_NAME", "t"), ("GIT_AUTHOR_EMAIL", "t@example.com"),
                       ("GIT_COMMITTER_NAME", "t"), ("GIT_COMMITTER_EMAIL", "t@example.com"),
                       ("GIT_CONFIG_NOSYSTEM", "1"), ("HOME", str(tmp_path))):  # fmt: skip
        monkeypatch.setenv(key, value)
    git(tmp_path, "init", "-q", "-b", "main")
    (tmp_path / "pipe").mkdir()
    (tmp_path / "pipe" / "decode.py").write_text(OLD)
    (tmp_path / "pipe" / "moved_later.py").write_text(OLD)
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-q", "-m", "old code")
    return tmp_path


def run(*args):
    return CliRunner().invoke(main, ["check", "--no-cache", *args], catch_exceptions=False)


def test_old_findings_pass_new_ones_fail(repo):
    assert run("pipe").exit_code == 1  # the old code has findings
    assert run("--diff-base", "main", "pipe").exit_code == 0

    # The pull request adds lines above the old finding (shifting it) and a new call.
    text = OLD.replace(
        "def decode(vae, latents):\n",
        "def decode(vae, latents):\n    latents = latents.half()\n",
    ).replace("    return video\n", "    torch.cuda.synchronize()\n    return video\n")
    (repo / "pipe" / "decode.py").write_text(text)
    result = run("--diff-base", "main", "pipe")
    assert result.exit_code == 1
    assert result.stdout.splitlines()[0] == (
        "pipe/decode.py:8:5: LL005 [*] `torch.cuda.synchronize()` is CUDA-only: it waits "
        "for CUDA streams only (and raises where CUDA is missing); use "
        "`torch.accelerator.synchronize()`, which does the same on the active accelerator"
    )
    assert "LL004" not in result.stdout  # old, only moved down a line
    assert "Found 1 error." in result.stdout


def test_changed_line_is_reported(repo):
    (repo / "pipe" / "decode.py").write_text(
        OLD.replace(
            "    torch.cuda.empty_cache()\n", "    torch.cuda.empty_cache()  # after decode\n"
        )
    )
    result = run("--diff-base", "HEAD", "pipe")
    assert result.exit_code == 1
    assert "pipe/decode.py:6:5: LL004" in result.stdout


def test_untracked_and_committed_changes_since_base(repo):
    git(repo, "checkout", "-q", "-b", "feature")
    (repo / "pipe" / "new_stage.py").write_text(OLD)  # untracked: every line is new
    git(repo, "mv", "pipe/moved_later.py", "pipe/renamed.py")  # a rename adds nothing
    (repo / "pipe" / "committed.py").write_text("import torch\n\ntorch.cuda.synchronize()\n")
    git(repo, "add", "pipe/committed.py")
    git(repo, "commit", "-q", "-m", "feature work")
    result = run("--diff-base", "main", "pipe")
    assert result.exit_code == 1
    reported = sorted({line.split(":")[0] for line in result.stdout.splitlines() if ": LL" in line})
    assert reported == ["pipe/committed.py", "pipe/new_stage.py"]


def test_changes_on_the_base_branch_since_branching_are_not_ours(repo):
    git(repo, "checkout", "-q", "-b", "feature")
    git(repo, "checkout", "-q", "main")
    # main rewrites the old call after the feature branch left it ...
    (repo / "pipe" / "decode.py").write_text(OLD.replace("torch.cuda.empty_cache()", "reclaim()"))
    git(repo, "commit", "-q", "-am", "main moves on")
    git(repo, "checkout", "-q", "feature")
    # ... so against main's tip the feature's untouched old line looks "added"; it is not.
    assert run("--diff-base", "main", "pipe").exit_code == 0
    (repo / "pipe" / "decode.py").write_text(OLD + "torch.cuda.synchronize()\n")
    result = run("--diff-base", "main", "pipe")
    assert [line.split(": ")[0] for line in result.stdout.splitlines() if ": LL" in line] == [
        "pipe/decode.py:8:1"
    ]


def test_multiline_finding_reported_when_any_of_its_rows_changed(repo):
    (repo / "pipe" / "span.py").write_text("import torch\n\ntorch.cuda.synchronize(\n)\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "span")
    (repo / "pipe" / "span.py").write_text("import torch\n\ntorch.cuda.synchronize(\n    )\n")
    result = run("--diff-base", "HEAD", "--select", "LL005", "pipe/span.py")
    assert "pipe/span.py:3:1: LL005" in result.stdout


def test_file_errors_in_changed_files_are_reported(repo):
    (repo / "pipe" / "decode.py").write_text("import torch\ntorch.cuda.synchronize()\ndef f(:\n")
    result = run("--diff-base", "HEAD", "pipe")
    assert result.exit_code == 2
    assert "E999" in result.output


def test_only_changed_files_are_parsed(repo):
    """A file without a changed line cannot carry a reportable diagnostic: it is not
    checked at all (not even for parse errors), so a one-file pull request costs one file."""
    (repo / "pipe" / "decode.py").write_text("import torch\ntorch.cuda.synchronize()\ndef f(:\n")
    git(repo, "commit", "-q", "-am", "broken, committed")
    (repo / "pipe" / "moved_later.py").write_text(OLD + "torch.cuda.synchronize()\n")
    result = run("--diff-base", "HEAD", "--statistics", "pipe")
    assert result.exit_code == 1, result.output
    assert result.stdout == "    1\tLL005 \t[*] hard-coded-cuda-call\n"
    assert "E999" not in result.output


def test_bad_revision_and_no_repository(repo, tmp_path_factory, monkeypatch):
    result = run("--diff-base", "no-such-branch", "pipe")
    assert result.exit_code == 2
    assert "unknown git revision 'no-such-branch'" in result.stderr

    assert run("--diff-base", "main", "--fix", "pipe").exit_code == 2

    elsewhere = tmp_path_factory.mktemp("not-a-repo")
    monkeypatch.chdir(elsewhere)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(elsewhere.parent))
    (elsewhere / "a.py").write_text(OLD)
    result = run("--diff-base", "main", "a.py")
    assert result.exit_code == 2
    assert "lifetime-lint: error:" in result.stderr


def test_paths_git_quotes(repo):
    (repo / "pipe" / "tab\tname ü.py").write_text(OLD)
    changed = changed_lines("HEAD")
    assert changed.rows(str(repo / "pipe" / "tab\tname ü.py")) is None  # untracked
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "odd name")
    (repo / "pipe" / "tab\tname ü.py").write_text(OLD + "x = 1\n")
    changed = changed_lines("HEAD")
    assert changed.rows(str(repo / "pipe" / "tab\tname ü.py")) == {8}
    assert changed.rows(str(repo / "pipe" / "decode.py")) == set()
    assert _unquote('"a\\tb \\303\\274.py"') == "a\tb \u00fc.py"
