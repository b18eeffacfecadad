"""`--diff-base REV` looks only at the files git reports changed (no walk of the tree, no
question to git about what it ignores), and finds exactly what the walk found: the same
files, in the same order, and through the real command line the same bytes and exit status,
on a repository with a changed, a renamed, a deleted and an untracked file, an ignored one,
excluded folders (the root's and a nested project's settings), a cache folder, a tracked
link to a changed file, a linked folder, and a tracked file inside an ignored folder."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lifetime_lint.catalog import load_config
from lifetime_lint.config import Overrides, SettingsResolver
from lifetime_lint.files import discover
from lifetime_lint.gitdiff import changed_lines

FINDING = textwrap.dedent(
    """\
    import torch


    def decode(vae, latents):
        video = vae.decode(latents).sample
        torch.cuda.empty_cache()
        return video
    """
)
ADDED = "\n\ndef added():\n    import torch\n\n    torch.cuda.synchronize()\n"
CACHEDIR_TAG = "Signature: 8a477f597d28d172789f06886806bc55\n"


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True, env=_env()).stdout  # fmt: skip


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LIFETIME_LINT_")}
    env.update(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@example.com", GIT_CONFIG_NOSYSTEM="1")  # fmt: skip
    env.pop("NO_COLOR", None)
    env.pop("FORCE_COLOR", None)
    return env


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "pyproject.toml").write_text('[tool.lifetime-lint]\nextend-exclude = ["skipped"]\n')
    (root / ".gitignore").write_text("generated/\n*.tmp.py\n")
    files = {
        "pkg/edited.py": FINDING,
        "pkg/renamed_from.py": FINDING,
        "pkg/deleted.py": FINDING,
        "pkg/deep/er/edited.py": FINDING,
        "skipped/edited.py": FINDING,  # excluded by the root's settings
        "nested/pyproject.toml": '[tool.lifetime-lint]\nextend-exclude = ["inner"]\n',
        "nested/inner/edited.py": FINDING,  # excluded by the nested project's settings
        "nested/kept.py": FINDING,
        "cached/edited.py": FINDING,
        "generated/tracked.py": FINDING,  # tracked, in a folder git ignores
        "real/target.py": FINDING,
        "notes.txt": "text\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (root / "cached" / "CACHEDIR.TAG").write_text(CACHEDIR_TAG)
    os.symlink("real/target.py", root / "link.py")  # a tracked link to a file
    os.symlink("real", root / "linked_dir")  # a linked folder: the walk does not enter it
    git(root, "add", "-A")
    git(root, "add", "-f", "generated/tracked.py")
    git(root, "commit", "-q", "-m", "old")
    for name in ("pkg/edited.py", "pkg/deep/er/edited.py", "skipped/edited.py",
                 "nested/inner/edited.py", "nested/kept.py", "cached/edited.py",
                 "generated/tracked.py", "real/target.py"):  # fmt: skip
        with open(root / name, "a") as handle:
            handle.write(ADDED)
    git(root, "mv", "pkg/renamed_from.py", "pkg/renamed_to.py")
    with open(root / "pkg" / "renamed_to.py", "a") as handle:
        handle.write(ADDED)  # moved and edited: only the added lines are new
    (root / "pkg" / "deleted.py").unlink()
    (root / "pkg" / "untracked.py").write_text(FINDING)
    (root / "pkg" / "ignored.tmp.py").write_text(FINDING)
    (root / "generated" / "untracked.py").write_text(FINDING)
    return root


@pytest.mark.parametrize("named", [["."], ["pkg"], ["./pkg/"], ["nested", "pkg/deep"], ["real"]])
def test_changed_files_are_found_exactly_as_the_walk_finds_them(repo, monkeypatch, named):
    monkeypatch.chdir(repo)
    changed = changed_lines("HEAD")
    resolver = SettingsResolver(lambda path: load_config(path, None), Overrides())
    walked, missing = discover(named, resolver.for_path)
    expected = [path for path in walked if changed.rows(path) != set()]
    found, missing_too = discover(named, resolver.for_path, only=changed.paths())
    assert found == expected and missing_too == missing
    if named == ["."]:
        assert {"pkg/edited.py", "pkg/renamed_to.py", "pkg/untracked.py", "link.py",
                "real/target.py", "nested/kept.py", "generated/tracked.py"} <= set(found)  # fmt: skip
        assert not {"skipped/edited.py", "nested/inner/edited.py", "cached/edited.py",
                    "pkg/ignored.tmp.py", "generated/untracked.py"} & set(found)  # fmt: skip


# The command line with discovery walking the tree, as before `only` (what it replaces).
WALKING = """
import sys
from lifetime_lint import cli, files

real = files.discover


def walking(paths, settings, force_exclude=False, record=None, only=None):
    return real(paths, settings, force_exclude=force_exclude, record=record)


cli.discover = walking
sys.argv[0] = "lifetime-lint"
cli.main()
"""


def _cli(cwd: Path, *args: str, walking: bool = False, env: dict | None = None):
    command = [sys.executable, "-c", WALKING] if walking else [sys.executable, "-m",
                                                               "lifetime_lint"]  # fmt: skip
    done = subprocess.run([*command, *args], cwd=cwd, capture_output=True, env=env or _env())
    return done.stdout, done.stderr, done.returncode


@pytest.mark.parametrize(
    "args",
    [
        ("check", "--no-cache", "--diff-base", "HEAD", "."),
        ("check", "--no-cache", "--diff-base", "HEAD", "--output-format", "json", "pkg", "nested"),
        ("check", "--no-cache", "--diff-base", "HEAD", "--statistics", "."),
        ("check", "--no-cache", "--diff-base", "HEAD", "pkg/deleted.py", "skipped/edited.py"),
        ("check", "--no-cache", "--diff-base", "HEAD", "--force-exclude", "skipped/edited.py"),
        ("check", "--diff-base", "HEAD", "--show-files", "."),
        ("check", "--no-cache", "--diff-base", "no-such-rev", "."),
    ],
)
def test_the_command_line_prints_what_the_walk_printed(repo, args):
    out = _cli(repo, *args)
    assert out == _cli(repo, *args, walking=True)
    assert out[2] == (2 if "no-such-rev" in args or "pkg/deleted.py" in args else
                      0 if "--show-files" in args or "--force-exclude" in args else 1)  # fmt: skip


def test_nothing_changed_exits_0_and_asks_git_three_times(repo, tmp_path):
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "new")
    # A `git` in front of the real one that logs each invocation's arguments.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "git.log"
    real_git = subprocess.run(["which", "git"], capture_output=True, text=True).stdout.strip()
    wrapper = bin_dir / "git"
    wrapper.write_text(f'#!/bin/sh\necho "$@" >> {log}\nexec {real_git} "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    env = dict(_env(), PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    out, err, code = _cli(repo, "check", "--no-cache", "--diff-base", "HEAD", ".", env=env)
    assert code == 0, err
    calls = log.read_text().splitlines()
    assert len(calls) == 3, calls  # rev-parse, diff --merge-base, ls-files
    assert not any("--ignored" in call for call in calls)
    with open(repo / "pkg" / "edited.py", "a") as handle:
        handle.write(ADDED.replace("added", "added_again"))
    log.unlink()
    out, err, code = _cli(repo, "check", "--no-cache", "--diff-base", "HEAD", ".", env=env)
    assert code == 1 and b"pkg/edited.py" in out and b"synchronize" in out
    assert len(log.read_text().splitlines()) == 3
