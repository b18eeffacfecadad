"""Baselines: record today's findings, then report only new ones (`--write-baseline`,
`--baseline`).

A finding is identified by a fingerprint that survives unrelated edits: its rule code, its
file (relative to the baseline file's folder, so the baseline is valid in every checkout)
and the source of the flagged line with its neighbours (`context_rows`: the nearest
non-blank line above, and below within the same block), each stripped of indentation and
with runs of whitespace collapsed. Line numbers are not part of it, so
code added above a finding does not make it "new"; re-indenting a block does not either.
Editing the flagged line or a neighbour does: that code was touched, so it is reviewed.

Identical snippets (the same call pasted twice) share a fingerprint; the baseline keeps a
count for each, and only occurrences beyond the recorded count are new.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from lifetime_lint.diagnostics import Diagnostic
from lifetime_lint.source import SourceLines, write_atomic

BASELINE_VERSION = 1


class BaselineError(Exception):
    """The baseline file is missing or not a baseline."""


def _normalise(line: str) -> str:
    return " ".join(line.split())


def _relative(path: str, root: str) -> str:
    try:
        rel = os.path.relpath(os.path.abspath(path), root)
    except ValueError:  # another drive on Windows
        rel = os.path.abspath(path)
    return rel.replace(os.sep, "/")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def context_rows(row: int, lines: Sequence[str]) -> list[int]:
    """The flagged row and its neighbours: the nearest non-blank line above, and the nearest
    non-blank line below if it is in the same block (indented at least as deep).

    Blank lines never count, and neither does code that merely follows the block (a
    function appended after the one with the finding).
    """
    if not 0 < row <= len(lines):
        return []
    rows = [row]
    above = row - 1
    while above >= 1 and not lines[above - 1].strip():
        above -= 1
    if above >= 1:
        rows.insert(0, above)
    below = row + 1
    while below <= len(lines) and not lines[below - 1].strip():
        below += 1
    if below <= len(lines) and _indent(lines[below - 1]) >= _indent(lines[row - 1]):
        rows.append(below)
    return rows


def fingerprint(d: Diagnostic, rel_path: str, lines: Sequence[str]) -> str:
    rows = context_rows(d.start.row, lines)
    snippet = "\n".join(
        (">" if row == d.start.row else " ") + _normalise(lines[row - 1]) for row in rows
    )
    payload = "\0".join((d.code, rel_path, snippet))
    return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()[:20]


@dataclass
class Baseline:
    """Recorded fingerprints (with counts) of one baseline file."""

    root: str  # the folder paths are relative to
    counts: Counter
    paths: dict[str, str]  # fingerprint -> relative path, to tell which files were checked
    codes: dict[str, str]  # fingerprint -> rule code, to tell which rules were enabled
    unmatched: Counter | None = None  # what the last `filter` did not see

    @classmethod
    def load(cls, path: str) -> Baseline:
        try:
            with open(path, "rb") as handle:
                data = json.load(handle)
        except FileNotFoundError:
            raise BaselineError(f"{path}: baseline file not found "
                                "(create it with --write-baseline)") from None  # fmt: skip
        except (OSError, ValueError) as error:
            raise BaselineError(f"{path}: cannot read baseline: {error}") from None
        if not isinstance(data, dict) or data.get("version") != BASELINE_VERSION:
            raise BaselineError(f"{path}: not a lifetime-lint baseline (version "
                                f"{BASELINE_VERSION} expected)")  # fmt: skip
        counts: Counter = Counter()
        paths: dict[str, str] = {}
        codes: dict[str, str] = {}
        try:
            for item in data["findings"]:
                counts[item["fingerprint"]] += int(item.get("count", 1))
                paths[item["fingerprint"]] = item["path"]
                codes[item["fingerprint"]] = item["code"]
        except (KeyError, TypeError, ValueError):
            raise BaselineError(f"{path}: malformed baseline entry") from None
        return cls(os.path.dirname(os.path.abspath(path)), counts, paths, codes)

    def filter(self, diagnostics: Iterable[Diagnostic]) -> tuple[list[Diagnostic], int]:
        """The diagnostics not in the baseline, and how many baselined ones were matched.

        Errors about files (unreadable, unparsable) are never baselined.
        """
        lines = SourceLines()
        remaining = Counter(self.counts)
        new: list[Diagnostic] = []
        matched = 0
        self.unmatched = remaining
        for d in sorted(diagnostics, key=Diagnostic.sort_key):
            if d.is_error:
                new.append(d)
                continue
            key = fingerprint(d, _relative(d.path, self.root), lines.get(d.path))
            if remaining[key] > 0:
                remaining[key] -= 1
                matched += 1
            else:
                new.append(d)
        return new, matched

    def stale(self, checked_paths: Iterable[str], enabled_codes: Iterable[str]) -> int:
        """Baselined findings of the enabled rules in the checked files that `filter` no
        longer saw: they were fixed (or their code was edited)."""
        checked = {_relative(path, self.root) for path in checked_paths}
        enabled = set(enabled_codes)
        unmatched = self.counts if self.unmatched is None else self.unmatched
        return sum(count for key, count in unmatched.items()
                   if self.paths.get(key) in checked and self.codes.get(key) in enabled)  # fmt: skip


def write_baseline(path: str, diagnostics: Iterable[Diagnostic]) -> int:
    """Write every (non-error) finding to `path`; returns the number recorded."""
    root = os.path.dirname(os.path.abspath(path))
    lines = SourceLines()
    entries: dict[str, dict[str, object]] = {}
    total = 0
    for d in sorted(diagnostics, key=Diagnostic.sort_key):
        if d.is_error:
            continue
        rel = _relative(d.path, root)
        key = fingerprint(d, rel, lines.get(d.path))
        total += 1
        if key in entries:
            entries[key]["count"] = int(entries[key]["count"]) + 1  # type: ignore[call-overload]
            continue
        # `line` and `message` are for people reading the file; matching ignores them.
        entries[key] = {"fingerprint": key, "code": d.code, "path": rel,
                        "line": d.start.row, "message": d.message, "count": 1}  # fmt: skip
    findings = sorted(entries.values(), key=lambda e: (e["path"], e["line"], e["code"]))
    document = {"version": BASELINE_VERSION, "tool": "lifetime-lint", "findings": findings}
    existed = os.path.exists(path)
    write_atomic(path, (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode())
    if not existed:  # a temporary file is private (0600); a new baseline is a normal file
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(path, 0o666 & ~umask)
    return total
