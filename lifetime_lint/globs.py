"""Glob tables matched without regular expressions where the globs allow it.

The name tables of the analysis (`analysis/tables.py`, the rules' `*-calls` options) are
globs such as `*norm*`, `encode_*` or `to_q`: literal text and `*` only. `fnmatch` compiles
each to a regular expression on first use, and a one-file run pays that compilation (about
a millisecond per table entry under load, more than matching them costs) for every table it
consults. A glob of literal text and stars is matched exactly as `fnmatchcase` matches it by
string tests: the first piece is a prefix, the last a suffix, the ones between are found in
order, each as early as possible (with only `*` between pieces, the earliest placement of
a piece never rules out a match that a later one allows). The common shapes (`x`, `x*`,
`*x`, `*x*`) are one set look-up, one `startswith`/`endswith` of a tuple and a few `in`
tests, which keeps a match about as cheap as the compiled alternation it replaces in a
long run. Globs with `?` or `[` go to `fnmatch`'s regular expression, so every table gives
`fnmatchcase`'s answers.
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
    prefixes: list[str] = []  # `ln*`
    suffixes: list[str] = []  # `*_ln`
    infixes: list[str] = []  # `*norm*`
    tests: list[Callable[[str], bool]] = []  # `a*b*c`, and the globs `re` must match
    regex: list[str] = []
    for pattern in patterns:
        stars = pattern.count("*")
        if "?" in pattern or "[" in pattern:
            regex.append(pattern)
        elif stars == 0:
            exact.add(pattern)
        elif stars == 1 and pattern.endswith("*"):
            prefixes.append(pattern[:-1])
        elif stars == 1 and pattern.startswith("*"):
            suffixes.append(pattern[1:])
        elif stars == 2 and pattern.startswith("*") and pattern.endswith("*"):
            infixes.append(pattern[1:-1])
        else:
            tests.append(_star_glob(pattern.split("*")))
    if regex:
        import re
        from fnmatch import translate

        match = re.compile("|".join(f"(?:{translate(p)})" for p in regex)).match
        tests.append(lambda name: match(name) is not None)
    starts, ends = tuple(prefixes), tuple(suffixes)  # str.startswith takes a tuple

    def matches(name: str) -> bool:
        if name in exact or name.startswith(starts) or name.endswith(ends):
            return True
        for infix in infixes:  # loops, not `any()`: no generator per call
            if infix in name:
                return True
        for test in tests:  # noqa: SIM110  (a loop: no generator per call)
            if test(name):
                return True
        return False

    return matches
