"""The project's own checks, as `.pre-commit-config.yaml` runs them: the mypy hook reads
pyproject.toml's [tool.mypy] (its files, its settings), not the staged file list.

Run with the real `pre-commit` in a scratch git repository that holds the project's own
.pre-commit-config.yaml and pyproject.toml and a tiny `lifetime_lint` package: a type error
fails the hook, the corrected module passes it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = os.path.dirname(sys.executable)
pytest.importorskip("pre_commit", reason="pre-commit is not installed")
pytestmark = pytest.mark.skipif(
    not os.path.exists(os.path.join(BIN, "mypy")), reason="needs mypy (dev extra)"
)


def _pre_commit(repo: Path, hook: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "PRE_COMMIT"))}
    env.update(PRE_COMMIT_HOME=str(repo.parent / "pre-commit-home"),
               PATH=BIN + os.pathsep + env.get("PATH", ""), MYPY_CACHE_DIR=str(repo / ".mc"))  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "run", hook, "--all-files", "--color", "never"],
        cwd=repo, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_mypy_hook_checks_the_configured_tree(tmp_path: Path) -> None:
    repo = tmp_path / "project"
    for package in ("lifetime_lint", "rules", "runtime"):  # [tool.mypy] files
        (repo / package).mkdir(parents=True)
        (repo / package / "__init__.py").write_text("")
    for name in (".pre-commit-config.yaml", "pyproject.toml"):
        shutil.copy2(ROOT / name, repo / name)
    module = repo / "lifetime_lint" / "sizes.py"
    module.write_text("def megabytes(count: int) -> int:\n    return count / 2**20\n")
    (repo / "notes.txt").write_text("not Python\n")
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "add", "."], cwd=repo, check=True)

    failing = _pre_commit(repo, "mypy")
    assert failing.returncode == 1, failing.stdout + failing.stderr
    assert "lifetime_lint/sizes.py:2: error: Incompatible return value type" in failing.stdout

    module.write_text("def megabytes(count: int) -> int:\n    return count // 2**20\n")
    passing = _pre_commit(repo, "mypy")
    assert passing.returncode == 0, passing.stdout + passing.stderr
    assert "Passed" in passing.stdout
