"""Glob tables matched without regular expressions where the globs allow it.

The name tables of the analysis (`analysis/tables.py`, the rules' `*-calls` options) are
globs such as `*norm*`, `encode_*` or `to_q`: literal text and `*` only. `fnmatch` compiles
each to a regular expression on first use, and a one-file run pays that compilation (about
a millisecond per table entry under load, more than matching them costs) for every table it
consults. A glob of literal text and stars is matched exactly as `fnmatchcase` matches it by
string tests: the first piece is a prefix, the last a suffix, the ones between are found in
order, each as early as possible (with only `*` between pieces, the earliest placement of
a piece never rules out a match that a later one allows). Globs with `?` or `[` go to
`fnmatch`'s regular expression, so every table gives `fnmatchcase`'s answers.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence


def _star_glob(pieces: Sequence[str]) -> Callable[[str], bool]:
    """A matcher for the glob `'*'.join(pieces)` (at least one star, so two pieces or more)."""
    first, middle, last = pieces[0], pieces[1:-1], pieces[-1]
    fixed = len(first) + len(last)

    def matches(name: str) -> bool:
        if len(name) < fixed or not name.startswith(first) or not name.endswith(last):
            return False
        position, end = len(first), len(name) - len(last)
        for piece in middle:
            found = name.find(piece, position, end)
            if found < 0:
                return False
            position = found + len(piece)
        return True

    return matches


@functools.cache
def glob_matcher(patterns: tuple[str, ...]) -> Callable[[str], bool]:
    """Whether a name matches any of `patterns`, as `any(fnmatchcase(name, p) ...)` says."""
    exact: set[str] = set()
    tests: list[Callable[[str], bool]] = []
    regex: list[str] = []
    for pattern in patterns:
        if "?" in pattern or "[" in pattern:
            regex.append(pattern)
        elif "*" not in pattern:
            exact.add(pattern)
        else:
            tests.append(_star_glob(pattern.split("*")))
    if regex:
        import re
        from fnmatch import translate

        match = re.compile("|".join(f"(?:{translate(p)})" for p in regex)).match
        tests.append(lambda name: match(name) is not None)

    def matches(name: str) -> bool:
        return name in exact or any(test(name) for test in tests)

    return matches
