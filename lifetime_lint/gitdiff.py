"""Which lines changed since a git revision, for `--diff-base REV`.

A pull-request gate should fail on what the pull request adds, not on the code it touches
in passing. `changed_lines(REV)` compares the working tree with the point where the current
branch left REV (their merge base, as `git diff REV...` does; REV itself if there is no
common history), with `git diff -U0`, renames followed so a moved file is not "all new";
files git does not track yet count as entirely new. A diagnostic is kept if any row of its
span was added or changed. Lines that were only deleted leave nothing to flag.

It also says which paths can hold a changed line (`ChangedLines.paths`: the files git names,
and tracked links to them), so file discovery looks only at those instead of walking the
tree. Three git processes in all: the top level and the revision in one `rev-parse`, the
diff from the merge base (`--merge-base`; the merge base asked first where that fails),
and one `ls-files` (untracked files, and the index's links).

`start_changed_lines(REV)` runs all of them in a background thread (they wait on git, not on
the interpreter), so a one-file gate's git work overlaps its imports of LibCST and the rules
and the caller does not wait for any git process. `ls-files` then lists the untracked
files earlier in the run than the plain call does. What the run itself creates meanwhile
is only its cache folder, whose own `.gitignore` (`*`, its first file) keeps it out of that
listing; any file there is no Python file, which discovery drops whether listed or not.
"""

from __future__ import annotations

import os
import subprocess

from lifetime_lint.lazy_regex import compile_lazily

_HUNK = compile_lazily(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@")
# An index entry as `ls-files --stage` prints it: mode, object name, stage, a tab, the name.
_STAGED = compile_lazily(r"(\d{6}) [0-9a-f]{40,64} \d\t")
ALL_LINES = None  # marks an untracked file: every line is new
_DIFF = ["diff", "--no-color", "--no-ext-diff", "--no-textconv", "--src-prefix=a/",
         "--dst-prefix=b/", "-U0", "-M"]  # fmt: skip


class GitDiffError(Exception):
    """git is missing, the folder is not a repository, or the revision is unknown."""


def _git(args: list[str], cwd: str) -> str:
    try:
        completed = subprocess.run(
            ["git", "-c", "core.quotepath=off", *args],
            cwd=cwd,
            capture_output=True,
            check=False,
        )
    except FileNotFoundError:
        raise GitDiffError("git is not installed") from None
    if completed.returncode != 0:
        message = completed.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GitDiffError(message[-1] if message else f"git {' '.join(args)} failed")
    return completed.stdout.decode("utf-8", "surrogateescape")


class ChangedLines:
    """Changed rows per file (absolute, normalised paths) since a revision."""

    def __init__(self, changed: dict[str, set[int] | None], paths: list[str] | None = None) -> None:
        self._changed = changed
        self._paths = paths

    def paths(self) -> list[str] | None:
        """Absolute paths, as git names them from the top level, of every file that can
        have a changed row (its real path is a key here): the changed and untracked files
        and the tracked links to them. None: not known (every file must be looked at)."""
        return self._paths

    def rows(self, path: str) -> set[int] | None:
        """The changed rows of `path`; None if every row is new; empty if nothing changed."""
        key = os.path.normcase(os.path.realpath(path))
        if key not in self._changed:
            return set()
        return self._changed[key]

    def touches(self, path: str, first_row: int, last_row: int) -> bool:
        rows = self.rows(path)
        if rows is None:
            return True
        return any(row in rows for row in range(first_row, last_row + 1))


def changed_lines(base: str, cwd: str | None = None) -> ChangedLines:
    """Lines added or modified in the working tree since `base` (a commit, branch or tag)."""
    top, by_name = _tracked_changes(base, cwd or os.getcwd())
    return _with_untracked(top, by_name, _untracked_and_staged(top))


class PendingChangedLines:
    """`changed_lines(base)` under way: the tracked part in a thread, `result()` the rest."""

    def __init__(self, base: str, cwd: str | None = None) -> None:
        import threading

        self._cwd = cwd or os.getcwd()
        self._base = base
        self._found: tuple[str, dict[str, set[int]], str] | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="git-diff", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            top, by_name = _tracked_changes(self._base, self._cwd)
            self._found = top, by_name, _untracked_and_staged(top)
        except BaseException as error:  # re-raised in the caller's thread by `result`
            self._error = error

    def result(self) -> ChangedLines:
        """What `changed_lines(base, cwd)` returns (or raises)."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._found is not None
        return _with_untracked(*self._found)


def start_changed_lines(base: str, cwd: str | None = None) -> PendingChangedLines:
    """Start `changed_lines(base, cwd)`: its git processes run while the caller works on."""
    return PendingChangedLines(base, cwd)


def _tracked_changes(base: str, cwd: str) -> tuple[str, dict[str, set[int]]]:
    """The top level, and the changed rows of each tracked file as the diff names it
    (from the top level) since the merge base of `base` and HEAD."""
    top, commit = _top_and_commit(base, cwd)
    try:
        # Changes since the branch left `base` (what `base` gained meanwhile is not ours),
        # in one process: `diff --merge-base C` is `diff $(git merge-base C HEAD)`.
        diff = _git([*_DIFF, "--merge-base", commit, "--"], top)
    except GitDiffError:
        # git before 2.30, no common history, several merge bases, a shallow clone: the
        # two steps, as `--merge-base` would take them where it can.
        try:
            commit = _git(["merge-base", commit, "HEAD"], top).strip() or commit
        except GitDiffError:
            pass  # no common history (or a shallow clone): compare with `base` itself
        diff = _git([*_DIFF, commit, "--"], top)
    by_name: dict[str, set[int]] = {}  # as the diff names them, from the top level
    current: set[int] | None = None
    for line in diff.splitlines():
        if line.startswith("+++ "):
            target = line[4:].rstrip("\t")  # git appends a tab to names with spaces
            if target == "/dev/null":
                current = None
                continue
            name = _unquote(target)
            name = name[2:] if name.startswith("b/") else name
            current = by_name.setdefault(name, set())
        elif line.startswith("@@") and current is not None:
            match = _HUNK.match(line)
            if match:
                start = int(match.group(1))
                count = int(match.group(2)) if match.group(2) is not None else 1
                current.update(range(start, start + count))
    return top, by_name


def _untracked_and_staged(top: str) -> str:
    """`ls-files`: the untracked files (no mode) and the index's entries, NUL-separated."""
    return _git(["ls-files", "--others", "--exclude-standard", "--stage", "-z"], top)


def _with_untracked(top: str, by_name: dict[str, set[int]], listing: str) -> ChangedLines:
    """The tracked changes, with the untracked files (all rows new) and the links to a
    changed file that the index holds (`listing`: `_untracked_and_staged`)."""
    named = [os.path.join(top, name) for name in by_name]
    changed: dict[str, set[int] | None] = {}
    for name, rows in by_name.items():  # names of one file (a link and its target) merge
        found = changed.setdefault(_key(top, name), set())
        assert found is not None
        found.update(rows)
    # Untracked files (no mode) and, from the index, tracked links (mode 120000): a link
    # to a changed file is a path discovery would find and the diff does not name.
    links = []
    for entry in listing.split("\0"):
        if not entry:
            continue
        staged = _STAGED.match(entry)
        if staged is None:
            changed[_key(top, entry)] = ALL_LINES
            named.append(os.path.join(top, entry))
        elif staged.group(1) == "120000":
            links.append(os.path.join(top, entry[staged.end() :]))
    named += [link for link in links if _key(top, link) in changed]
    return ChangedLines(changed, named)


def _top_and_commit(base: str, cwd: str) -> tuple[str, str]:
    """The repository's top level and `base`'s commit, asked of one `git rev-parse`."""
    try:
        completed = subprocess.run(
            ["git", "-c", "core.quotepath=off", "rev-parse", "--show-toplevel", "--verify",
             "--quiet", f"{base}^{{commit}}"],
            cwd=cwd, capture_output=True, check=False,
        )  # fmt: skip
    except FileNotFoundError:
        raise GitDiffError("git is not installed") from None
    lines = completed.stdout.decode("utf-8", "surrogateescape").splitlines()
    if completed.returncode == 0 and len(lines) == 2:
        return lines[0], lines[1]
    if lines:  # the top level was printed: the revision is what git did not know
        raise GitDiffError(f"unknown git revision {base!r}")
    message = completed.stderr.decode("utf-8", "replace").strip().splitlines()
    raise GitDiffError(message[-1] if message else "git rev-parse failed")


def _key(top: str, name: str) -> str:
    return os.path.normcase(os.path.realpath(os.path.join(top, name)))


def _unquote(name: str) -> str:
    """Undo git's C-style quoting of unusual paths (`"a\\tb.py"`, octal UTF-8 bytes)."""
    if not (len(name) >= 2 and name[0] == '"' and name[-1] == '"'):
        return name
    body = name[1:-1]
    out = bytearray()
    simple = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}
    i = 0
    while i < len(body):
        char = body[i]
        if char == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt in simple:
                out.append(simple[nxt])
                i += 2
                continue
            if body[i + 1 : i + 4].isdigit():
                out.append(int(body[i + 1 : i + 4], 8))
                i += 4
                continue
        out.extend(char.encode("utf-8", "surrogateescape"))
        i += 1
    return out.decode("utf-8", "surrogateescape")
