"""The pre-commit hooks, run by the real `pre-commit` from a plain .pre-commit-config.yaml.

The hook repository is a committed copy of this project's tracked files (pre-commit clones a
repo at a rev, so uncommitted work must be committed somewhere); pre-commit builds its own
virtual environment for it and pip-installs it (libcst and click, no torch), exactly as a
model repository's developers would get it. PRE_COMMIT_HOME is a temporary folder, so
nothing outside the test is read or written. Takes ~30-60 s (the environment install, built
once for the module's tests: they share one hook repository and one PRE_COMMIT_HOME).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pre_commit = pytest.importorskip("pre_commit", reason="pre-commit is not installed")

VIOLATING = """\
import torch


def decode(vae, latents):
    video = vae.decode(latents).sample
    torch.cuda.empty_cache()
    return video
"""

CLEAN = """\
import torch


def decode(vae, latents):
    with torch.no_grad():
        return vae.decode(latents).sample
"""


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True,
    ).stdout  # fmt: skip


def _environ(tmp_path: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "PRE_COMMIT"))}
    env.update(
        PRE_COMMIT_HOME=str(tmp_path / "pre-commit-home"),
        GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
        GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com",
        GIT_CONFIG_NOSYSTEM="1", HOME=str(tmp_path / "home"),
    )  # fmt: skip
    (tmp_path / "home").mkdir()
    return env


def _hook_repository(tmp_path: Path) -> tuple:
    """A git repository holding the project as it is now; returns (path, rev)."""
    repo = tmp_path / "lifetime-lint"
    # The files git tracks (as they are in the working tree): what a clone would hold, so
    # a module missing from pyproject's package list fails here as it would for users.
    tracked = _git(ROOT, "ls-files", "-z", "--", "lifetime_lint", "rules", "runtime",
                   "pyproject.toml", "README.md", ".pre-commit-hooks.yaml").split("\0")  # fmt: skip
    for name in filter(None, tracked):
        if (ROOT / name).is_file():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, repo / name)
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "hook repository")
    return repo, _git(repo, "rev-parse", "HEAD").strip()


def _release_tag() -> str:
    version = next(line.split('"')[1] for line in (ROOT / "pyproject.toml").read_text().splitlines()
                   if line.startswith("version = "))  # fmt: skip
    return f"v{version}"


@pytest.fixture(scope="module")
def hook_setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path, str]:
    """One hook repository, tagged with the release as the README's snippet names it, and one
    PRE_COMMIT_HOME for both tests: pre-commit clones the repository and builds the hook's
    environment once (keyed by repository and rev), and each test's own project runs on it.
    Returns (environment, hook repository, rev)."""
    base = tmp_path_factory.mktemp("pre-commit")
    env = _environ(base)
    hook_repo, _ = _hook_repository(base)
    rev = _release_tag()
    _git(hook_repo, "tag", rev)
    return env, hook_repo, rev


def _run_hook(project: Path, env: dict, hook: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "run", hook, "--all-files", "--color", "never"],
        cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        timeout=540,
    )  # fmt: skip


def test_check_and_fix_hooks_under_real_pre_commit(
    tmp_path: Path, hook_setup: tuple[dict, Path, str]
) -> None:
    env, hook_repo, rev = hook_setup

    project = tmp_path / "model-repo"
    (project / "pipelines").mkdir(parents=True)
    (project / "pipelines" / "decode.py").write_text(VIOLATING)
    (project / "pipelines" / "clean.py").write_text(CLEAN)
    (project / ".pre-commit-config.yaml").write_text(
        "repos:\n"
        f"  - repo: {hook_repo}\n"
        f"    rev: {rev}\n"
        "    hooks:\n"
        "      - id: lifetime-lint\n"
        "      - id: lifetime-lint-fix\n"
        "        stages: [manual]\n"
    )
    _git(project, "init", "-q")
    _git(project, "add", ".")

    check = _run_hook(project, env, "lifetime-lint")
    assert check.returncode == 1, check.stdout
    assert "pipelines/decode.py:6:5: LL004 [*]" in check.stdout, check.stdout
    assert "clean.py" not in check.stdout
    assert (project / "pipelines" / "decode.py").read_text() == VIOLATING  # check never writes

    fix = subprocess.run(
        [sys.executable, "-m", "pre_commit", "run", "lifetime-lint-fix", "--all-files",
         "--hook-stage", "manual", "--color", "never"],
        cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        timeout=300,
    )  # fmt: skip
    # pre-commit fails a hook that modified files, so the developer sees the change.
    assert fix.returncode == 1, fix.stdout
    assert "files were modified by this hook" in fix.stdout, fix.stdout
    fixed = (project / "pipelines" / "decode.py").read_text()
    assert "from lifetime_lint.runtime import reclaim" in fixed
    assert "    reclaim()\n" in fixed and "empty_cache" not in fixed
    assert (project / "pipelines" / "clean.py").read_text() == CLEAN

    again = _run_hook(project, env, "lifetime-lint")
    assert again.returncode == 0, again.stdout
    assert "Passed" in again.stdout


def _readme_snippet() -> str:
    readme = (ROOT / "README.md").read_text()
    start = readme.index("# .pre-commit-config.yaml\n")
    return readme[start : readme.index("```", start)]


def test_readme_snippet_works_as_written(
    tmp_path: Path, hook_setup: tuple[dict, Path, str]
) -> None:
    """The README's .pre-commit-config.yaml, byte for byte except the repository URL (no
    network here): its `rev` is the release tag, which must be the project's version."""
    snippet = _readme_snippet()
    rev = snippet.split("rev: ", 1)[1].split()[0]
    assert rev == _release_tag(), "the README must document the release in pyproject.toml"

    env, hook_repo, tagged = hook_setup
    assert tagged == rev
    url = snippet.split("- repo: ", 1)[1].split()[0]
    project = tmp_path / "model-repo"
    (project / "pipelines").mkdir(parents=True)
    (project / "pipelines" / "decode.py").write_text(VIOLATING)
    (project / ".pre-commit-config.yaml").write_text(snippet.replace(url, str(hook_repo)))
    _git(project, "init", "-q")
    _git(project, "add", ".")

    fix = _run_hook(project, env, "lifetime-lint-fix")
    assert fix.returncode == 1, fix.stdout
    assert "files were modified by this hook" in fix.stdout, fix.stdout
    assert "    reclaim()\n" in (project / "pipelines" / "decode.py").read_text()
    again = _run_hook(project, env, "lifetime-lint-fix")
    assert again.returncode == 0 and "Passed" in again.stdout, again.stdout
