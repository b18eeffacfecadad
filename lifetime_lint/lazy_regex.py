"""Module-level regular expressions compiled on first use, not at import.

Compiling the tool's module-level patterns at import cost a noticeable share of the one-file
`--diff-base` gate's start-up (about 40 ms of `re` compilation in devices.py, chunks.py and
the rules, most of it for patterns that a given file never reaches). `compile_lazily` takes
the place of `re.compile` in a module-level assignment: the pattern is compiled (once, by
`re`'s own cache) the first time any attribute of it is used, and that attribute is then
kept on the object, so a later `PATTERN.search` is a plain attribute look-up, as it is on a
compiled pattern.

What it is not: a `re.Pattern` for `isinstance` or for the `re` module's functions
(`re.sub(PATTERN, ...)`); use its methods (`PATTERN.sub(...)`), as the tool does.
"""

from __future__ import annotations

import re
from typing import Any, cast


class _LazyPattern:
    """A pattern compiled on first attribute use; `.pattern` is known without compiling."""

    def __init__(self, pattern: str, flags: int) -> None:
        self.pattern = pattern
        self._flags = flags

    def __getattr__(self, name: str) -> Any:
        # Only reached for attributes not yet kept on the object (after the first use of
        # `search`, `search` is in the instance dictionary and this is not called).
        if name.startswith("__"):
            raise AttributeError(name)
        value = getattr(re.compile(self.pattern, self._flags), name)
        setattr(self, name, value)
        return value

    def __repr__(self) -> str:
        return repr(re.compile(self.pattern, self._flags))


def compile_lazily(pattern: str, flags: int | re.RegexFlag = 0) -> re.Pattern[str]:
    """`re.compile(pattern, flags)`, deferred until the pattern is first used."""
    return cast("re.Pattern[str]", _LazyPattern(pattern, int(flags)))
