"""`--diff-base REV` compares the working tree with the merge base of REV and HEAD, asked of
one `git diff --merge-base`; where git cannot answer that way (no common history, several
merge bases, a git before 2.30) the merge base is asked first, as before, and the rows are
the same as the two steps give."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from lifetime_lint.gitdiff import changed_lines


def git(cwd: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@example.com", GIT_CONFIG_NOSYSTEM="1")  # fmt: skip
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True, env=env).stdout  # fmt: skip


def _two_step_rows(root: Path, base: str, name: str) -> set[int]:
    """The rows `git diff $(git merge-base BASE HEAD)` (or BASE alone) reports for `name`."""
    try:
        commit = git(root, "merge-base", base, "HEAD").splitlines()[0]
    except subprocess.CalledProcessError:
        commit = base
    diff = git(root, "diff", "-U0", commit, "--", name)
    rows: set[int] = set()
    for line in diff.splitlines():
        if line.startswith("@@"):
            added = line.split(" ")[2][1:].split(",")
            start, count = int(added[0]), int(added[1]) if len(added) > 1 else 1
            rows.update(range(start, start + count))
    return rows


def _repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "a.py").write_text("".join(f"x{i} = {i}\n" for i in range(10)))
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "first")
    return root


def test_changes_the_base_gained_after_the_branch_left_it_are_not_ours(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    git(root, "checkout", "-q", "-b", "topic")
    lines = (root / "a.py").read_text().splitlines(keepends=True)
    lines[7] = "x7 = 'topic'\n"
    (root / "a.py").write_text("".join(lines))
    git(root, "commit", "-q", "-am", "topic")
    git(root, "checkout", "-q", "main")
    lines = (root / "a.py").read_text().splitlines(keepends=True)
    lines[1] = "x1 = 'main'\n"
    (root / "a.py").write_text("".join(lines))
    git(root, "commit", "-q", "-am", "main moves on")
    git(root, "checkout", "-q", "topic")
    with open(root / "a.py", "a") as handle:
        handle.write("y = 1\n")
    rows = changed_lines("main", str(root)).rows(str(root / "a.py"))
    assert rows == {8, 11} == _two_step_rows(root, "main", "a.py")


def test_no_common_history_compares_with_the_base_itself(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    git(root, "checkout", "-q", "--orphan", "other")
    (root / "a.py").write_text("x0 = 0\nnew = 1\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "unrelated")
    (root / "a.py").write_text("x0 = 0\nnew = 1\nmore = 2\n")
    rows = changed_lines("main", str(root)).rows(str(root / "a.py"))
    assert rows == {2, 3} == _two_step_rows(root, "main", "a.py")


def test_several_merge_bases_take_the_one_git_merge_base_names(tmp_path: Path) -> None:
    """A criss-cross history: `diff --merge-base` refuses; the first merge base is used."""
    root = _repo(tmp_path)
    git(root, "checkout", "-q", "-b", "topic")
    (root / "b.py").write_text("b = 1\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "topic 1")
    git(root, "checkout", "-q", "main")
    (root / "c.py").write_text("c = 1\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "main 1")
    main_1 = git(root, "rev-parse", "HEAD").strip()
    git(root, "merge", "-q", "--no-edit", "topic")
    git(root, "checkout", "-q", "topic")
    git(root, "merge", "-q", "--no-edit", main_1)
    (root / "a.py").write_text("changed = 0\n" + (root / "a.py").read_text())
    git(root, "commit", "-q", "-am", "topic 2")
    assert len(git(root, "merge-base", "--all", "main", "HEAD").split()) == 2
    with pytest.raises(subprocess.CalledProcessError):  # the fallback is what answers
        git(root, "diff", "--merge-base", "main", "--")
    (root / "c.py").write_text("c = 2\n")
    found = changed_lines("main", str(root))
    for name in ("a.py", "c.py"):
        assert found.rows(str(root / name)) == _two_step_rows(root, "main", name), name
    assert found.rows(str(root / "a.py")) == {1}
