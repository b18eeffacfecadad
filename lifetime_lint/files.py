"""Finding the files to check.

Folders are walked in sorted order, skipping excluded paths (Ruff's default excludes plus
`exclude`/`extend-exclude`) and files git ignores (`.gitignore` at any level,
`.git/info/exclude`, the global excludes file; `respect-gitignore = false` turns this off),
and descending into no excluded folder. Each folder is judged by the settings of its own
nearest config, so a nested project's excludes apply inside it. A path named on the
command line is checked even if excluded or ignored (a named folder is walked, with the
rules applied to what is inside it), unless `--force-exclude` (what pre-commit, which
names every changed file, needs).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from lifetime_lint import fastpath
from lifetime_lint.cache import CACHEDIR_SIGNATURE
from lifetime_lint.config import Settings
from lifetime_lint.fastpath import listing_of

PYTHON_SUFFIXES = (".py", ".pyi")

SettingsFor = Callable[[str], Settings]


@dataclass
class Seen:
    """What a discovery looked at (for the run memo, `fastpath`): each walked folder's
    listing as the walk saw it, the CACHEDIR.TAG of each folder skipped as a cache, and
    the repositories git was asked about."""

    listings: dict[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)
    cache_tags: list[str] = field(default_factory=list)
    ignored: GitIgnored | None = None


def discover(
    paths: Iterable[str],
    settings: Settings | SettingsFor,
    force_exclude: bool = False,
    record: Seen | None = None,
    only: Iterable[str] | None = None,
) -> tuple[list[str], list[str]]:
    """The files to check, and the named paths that do not exist.

    `settings`: one Settings for every path, or a function giving a path's settings;
    `record`: filled with what the walk looked at; `only`: absolute paths (`--diff-base`'s
    changed files): of what a named folder holds, only the ones among these are found,
    exactly those the walk would find, without walking it.
    """
    settings_for: SettingsFor = (
        (lambda _path: settings) if isinstance(settings, Settings) else settings
    )
    ignored = GitIgnored(keep_digests=record is not None)
    if record is not None:
        record.ignored = ignored
    found: list[str] = []
    missing: list[str] = []
    seen = set()
    for path in paths:
        path = os.path.normpath(path)
        if not os.path.lexists(path):
            missing.append(path)
            continue
        if os.path.isdir(path) and only is not None and record is None:
            candidates: Iterable[str] = _found_among(path, only, settings_for)
        elif os.path.isdir(path):
            candidates = _walk(path, settings_for, ignored, record)
        elif force_exclude and _skipped(path, settings_for(path), ignored):
            candidates = ()
        else:
            candidates = (path,)
        for candidate in candidates:
            key = os.path.normcase(os.path.abspath(candidate))
            if key not in seen:
                seen.add(key)
                found.append(os.path.normpath(candidate))
    return found, missing


def _skipped(path: str, settings: Settings, ignored: GitIgnored, base: str | None = None) -> bool:
    if settings.is_excluded(path, base=base):
        return True
    return settings.respect_gitignore and ignored(path, below=base)


def _walk(
    root: str, settings_for: SettingsFor, ignored: GitIgnored, seen: Seen | None = None
) -> Iterator[str]:
    for directory, subdirectories, filenames in os.walk(root):
        if seen is not None:
            seen.listings[os.path.abspath(directory)] = listing_of(
                [(name, True, os.path.islink(os.path.join(directory, name)))
                 for name in subdirectories] + [(name, False, False) for name in filenames]
            )  # fmt: skip
        settings = settings_for(directory)
        kept = []
        for name in sorted(subdirectories):
            child = os.path.join(directory, name)
            # A nested project's own config decides about its folder's contents, but whether
            # the folder itself is entered is the enclosing settings' call (Ruff's rule).
            if _skipped(child, settings, ignored, base=root):
                continue
            if is_cache_folder(child):
                if seen is not None:
                    seen.cache_tags.append(os.path.abspath(os.path.join(child, CACHEDIR_TAG)))
                continue
            kept.append(name)
        subdirectories[:] = kept
        for name in sorted(filenames):
            if name.endswith(PYTHON_SUFFIXES):
                path = os.path.join(directory, name)
                if not _skipped(path, settings, ignored, base=root):
                    yield path


def _found_among(root: str, paths: Iterable[str], settings_for: SettingsFor) -> list[str]:
    """Which of `paths` (files git reports changed or untracked) `_walk(root)` would yield,
    in its order, judged as it judges them: each folder on the way entered (a real folder,
    not a link; not excluded by the settings of the folder holding it; not a cache), the
    file a Python file its own folder's settings keep. Looks at these paths only: the cost
    of a pull request's files, not of the tree's. Git is not asked what it ignores: it
    never ignores a file it tracks or lists as untracked, nor a folder above one (it lists
    an ignored folder whole only when nothing in it is tracked or unignored)."""
    real_root = os.path.realpath(root)
    kept: list[tuple[tuple[str, ...], str, str]] = []
    entered: dict[str, bool] = {}
    for path in dict.fromkeys(paths):
        relative = os.path.relpath(path, real_root)
        parts = relative.split(os.sep)
        if (
            relative == os.curdir
            or parts[0] == os.pardir
            or not parts[-1].endswith(PYTHON_SUFFIXES)
        ):
            continue
        directory = root
        for name in parts[:-1]:
            child = os.path.join(directory, name)
            if child not in entered:
                entered[child] = (
                    os.path.isdir(child)
                    and not os.path.islink(child)
                    and not settings_for(directory).is_excluded(child, base=root)
                    and not is_cache_folder(child)
                )
            if not entered[child]:
                break
            directory = child
        else:
            candidate = os.path.join(directory, parts[-1])
            if (
                os.path.lexists(candidate)
                and not os.path.isdir(candidate)
                and not settings_for(directory).is_excluded(candidate, base=root)
            ):
                kept.append((tuple(parts[:-1]), parts[-1], candidate))
    return [candidate for _, _, candidate in sorted(kept)]


CACHEDIR_TAG = "CACHEDIR.TAG"


def is_cache_folder(folder: str) -> bool:
    """Whether `folder` is marked as a cache by a CACHEDIR.TAG (bford.info/cachedir: ours,
    wherever `cache-dir` puts it, and other tools'): never walked, since the result cache
    of a warm run holds one folder per key prefix, as many folders as the tree it lints."""
    try:
        with open(os.path.join(folder, CACHEDIR_TAG), "rb") as handle:
            return handle.read(len(CACHEDIR_SIGNATURE)) == CACHEDIR_SIGNATURE
    except OSError:
        return False


class GitIgnored:
    """Whether git ignores a path, asking git once per repository.

    `git ls-files --others --ignored --exclude-standard --directory` lists what git's own
    rules ignore (every .gitignore, info/exclude, core.excludesFile), whole ignored folders
    as one entry; tracked files are never ignored, as in git. Outside a repository, or
    without git, nothing is ignored.
    """

    def __init__(self, keep_digests: bool = False) -> None:
        self._top_of: dict[str, str | None] = {}
        self._ignored: dict[str, frozenset[str]] = {}
        self._inputs: dict[str, list[str]] = {}  # repository -> its files (`inputs`)
        # With `keep_digests` (the run memo records), the digest of each input file as it
        # was just before git read it (`fastpath.file_digests`): a racily-clean index, as
        # a fresh clone's is, can then be recorded.
        self.digests: dict[str, bytes] | None = {} if keep_digests else None

    def __call__(self, path: str, below: str | None = None) -> bool:
        """Whether git ignores `path`, or a folder above it up to (not including) `below`.

        A folder named on the command line is walked even if git ignores it (as Ruff
        does): `lifetime-lint .corpus/pkg` checks what is in it; only ignore rules for
        what lies inside apply.
        """
        absolute = os.path.abspath(path)
        top = self._toplevel(os.path.dirname(absolute))
        if top is None:
            return False
        ignored = self._ignored_in(top)
        if not ignored:
            return False
        stop = max(len(top), len(os.path.abspath(below)) if below else 0)
        probe = absolute
        while len(probe) > stop:
            if probe in ignored:
                return True
            probe = os.path.dirname(probe)
        return False

    def _toplevel(self, directory: str) -> str | None:
        chain = []
        probe = directory
        top: str | None = None
        while True:
            if probe in self._top_of:
                top = self._top_of[probe]
                break
            chain.append(probe)
            if os.path.exists(os.path.join(probe, ".git")):
                top = probe
                break
            parent = os.path.dirname(probe)
            if parent == probe:
                break
            probe = parent
        for folder in chain:
            self._top_of[folder] = top
        return top

    def inputs(self) -> list[str]:
        """The files whose contents decided what git ignored in the repositories asked
        about (besides each folder's .gitignore): the index (tracked files are never
        ignored), info/exclude, the repository's, user's and system's config and excludes."""
        if not self._ignored:
            return []
        files = _global_git_files()
        for top in self._ignored:
            files += self._repository_files(top)
        return files

    def _repository_files(self, top: str) -> list[str]:
        """A repository's own files that decide what git ignores there (`inputs`)."""
        if top not in self._inputs:
            files: list[str] = []
            git_dir = common_dir = os.path.join(top, ".git")
            if os.path.isfile(git_dir):  # a worktree or submodule: `gitdir: PATH`
                try:
                    with open(git_dir, encoding="utf-8") as handle:
                        pointer = handle.read().strip()
                except OSError:
                    pointer = ""
                git_dir = common_dir = os.path.join(top, pointer.partition("gitdir:")[2].strip())
                files.append(os.path.join(git_dir, "commondir"))
                try:
                    with open(os.path.join(git_dir, "commondir"), encoding="utf-8") as handle:
                        common_dir = os.path.join(git_dir, handle.read().strip())
                except OSError:
                    pass
            files += [os.path.join(git_dir, "index"), os.path.join(git_dir, "config.worktree"),
                      os.path.join(common_dir, "config"),
                      os.path.join(common_dir, "info", "exclude")]  # fmt: skip
            excludes = _git_output(top, ["config", "--path", "--get", "core.excludesFile"])
            if excludes:
                files.append(os.path.join(top, excludes.strip()))
            self._inputs[top] = files
        return list(self._inputs[top])

    def _ignored_in(self, top: str) -> frozenset[str]:
        if top not in self._ignored:
            if self.digests is not None:
                inputs = [*_global_git_files(), *self._repository_files(top)]
                self.digests.update(fastpath.file_digests(inputs))
            self._ignored[top] = frozenset(_git_ignored(top))
        return self._ignored[top]


def _global_git_files() -> list[str]:
    """The user's and the system's git config and excludes files."""
    home = os.path.expanduser("~")
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    return [
        os.environ.get("GIT_CONFIG_GLOBAL") or os.path.join(home, ".gitconfig"),
        os.path.join(xdg, "git", "config"),
        os.path.join(xdg, "git", "ignore"),
        os.environ.get("GIT_CONFIG_SYSTEM") or "/etc/gitconfig",
    ]


def _git_output(top: str, args: list[str]) -> str:
    try:
        completed = subprocess.run(["git", *args], cwd=top, capture_output=True, check=False)
    except OSError:
        return ""
    return completed.stdout.decode("utf-8", "surrogateescape") if completed.returncode == 0 else ""


def _git_ignored(top: str) -> list[str]:
    try:
        completed = subprocess.run(
            ["git", "-c", "core.quotepath=off", "ls-files", "-z", "--others", "--ignored",
             "--exclude-standard", "--directory"],
            cwd=top, capture_output=True, check=False,
        )  # fmt: skip
    except OSError:
        return []
    if completed.returncode != 0:
        return []
    names = completed.stdout.decode("utf-8", "surrogateescape").split("\0")
    return [os.path.join(top, os.path.normpath(name.rstrip("/"))) for name in names if name]
