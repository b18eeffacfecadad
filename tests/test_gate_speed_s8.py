"""Session 8's gate-speed changes keep their answers: globs without regular expressions,
and `--diff-base` with its git work started early (real git repositories, the real CLI)."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from fnmatch import fnmatchcase

from lifetime_lint.analysis import tables as T
from lifetime_lint.globs import glob_matcher

TABLES = [T.LIGHT_OWNERS, T.MODEL_CALLS, T.LIGHT_SUBMODULES, T.PEAK_SUBMODULES, T.CROSS_ATTENTION]
AWKWARD = ("a*b*a", "*aa*", "ab*ba", "*", "**", "a**", "x", "", "*a?b*", "[ab]*", "*_[0-9]")


def _names(rng: random.Random) -> list[str]:
    words = [p.replace("*", "") for table in TABLES for p in table] + ["a", "b", "ab", "_", "9"]
    names = ["", "a", "aa", "aba", "abba", "abab", "ab_ba", "x"]
    for _ in range(3000):
        names.append("".join(rng.choice(words) for _ in range(rng.randint(1, 4))))
    return names


def test_glob_matcher_gives_fnmatchcase_answers() -> None:
    rng = random.Random(20261202)
    names = _names(rng)
    tables = [*TABLES, AWKWARD, *((pattern,) for pattern in AWKWARD)]
    for table in tables:
        matcher = glob_matcher(tuple(table))
        for name in names:
            expected = any(fnmatchcase(name, pattern) for pattern in table)
            assert matcher(name) is expected, (table, name)


def _git(cwd: str, *args: str) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com")  # fmt: skip
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True,
                          text=True).stdout  # fmt: skip


def _lint(cwd: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lifetime_lint", "check", "--no-cache", *args],
        cwd=cwd, capture_output=True, text=True,
    )  # fmt: skip


def test_diff_base_reports_changed_and_untracked_files_only(tmp_path) -> None:
    repo = str(tmp_path)
    old = "import torch\n\n\ndef old():\n    torch.cuda.synchronize()\n"
    (tmp_path / "kept.py").write_text(old)
    (tmp_path / "edited.py").write_text(old)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")
    (tmp_path / "edited.py").write_text(old + "\n\ndef new():\n    torch.cuda.synchronize()\n")
    (tmp_path / "untracked.py").write_text(old)
    done = _lint(repo, "--diff-base", "HEAD", "--output-format", "concise", ".")
    lines = [line for line in done.stdout.splitlines() if "LL005" in line]
    assert done.returncode == 1, done.stderr
    assert sorted(line.split(":")[0:2] for line in lines) == [
        ["edited.py", "9"],
        ["untracked.py", "5"],
    ]


def test_diff_base_errors_still_exit_2(tmp_path) -> None:
    repo = str(tmp_path)
    (tmp_path / "a.py").write_text("import torch\n")
    outside = _lint(repo, "--diff-base", "HEAD", ".")
    assert outside.returncode == 2
    assert "not a git repository" in outside.stderr
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")
    unknown = _lint(repo, "--diff-base", "no-such-revision", ".")
    assert unknown.returncode == 2
    assert "unknown git revision 'no-such-revision'" in unknown.stderr
    # A usage error found after the git work started is still the one reported.
    both = _lint(repo, "--diff-base", "no-such-revision", "--select", "LL999", ".")
    assert both.returncode == 2
    assert "LL999" in both.stderr and "unknown git revision" not in both.stderr


def test_importing_for_good_pauses_then_freezes_and_restores_the_collector() -> None:
    import gc

    from lifetime_lint.fastpath import importing_for_good

    assert gc.isenabled()
    try:
        with importing_for_good():
            assert not gc.isenabled()
            kept = [[] for _ in range(100)]
        assert gc.isenabled()
        assert gc.get_freeze_count() >= len(kept)
        assert gc.get_count()[0] < 100  # the allocation count restarted with the freeze
        gc.unfreeze()
        gc.disable()  # a caller that had paused the collector keeps it paused, unfrozen
        with importing_for_good():
            pass
        assert not gc.isenabled() and gc.get_freeze_count() == 0
    finally:
        gc.unfreeze()
        gc.enable()
