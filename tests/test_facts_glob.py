"""`facts._glob_any` (one compiled alternation per table) answers as `fnmatchcase` over
the table's patterns does, on names made from the patterns themselves and on others."""

from __future__ import annotations

from fnmatch import fnmatchcase

import pytest

from lifetime_lint.analysis import facts
from lifetime_lint.analysis import tables as T


def _names(patterns: tuple[str, ...]) -> list[str]:
    names = ["", "x", "forward", "a.b", "norm\n", "Encoder", "text_encoder", "vae_2"]
    for pattern in patterns:
        for fill in ("", "a", "_x_", "."):
            names.append(pattern.replace("*", fill).replace("?", "q"))
        names.append(pattern)  # the pattern's own characters, `*` included
    return names


@pytest.mark.parametrize("table", ["LIGHT_OWNERS", "MODEL_CALLS", "LIGHT_SUBMODULES"])
def test_glob_any_is_fnmatchcase_over_the_table(table):
    patterns = getattr(T, table)
    for name in _names(patterns):
        assert facts._glob_any(name, patterns) == any(fnmatchcase(name, p) for p in patterns)
