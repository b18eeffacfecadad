"""Finding the files to check.

Folders are walked in sorted order, skipping excluded paths (Ruff's default excludes plus
`exclude`/`extend-exclude`) and descending into no excluded folder. A path named on the
command line is checked even if excluded, unless `--force-exclude` (what pre-commit, which
names every changed file, needs).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

from lifetime_lint.config import Settings

PYTHON_SUFFIXES = (".py", ".pyi")


def discover(
    paths: Iterable[str], settings: Settings, force_exclude: bool = False
) -> tuple[list[str], list[str]]:
    """The files to check, and the named paths that do not exist."""
    found: list[str] = []
    missing: list[str] = []
    seen = set()
    for path in paths:
        path = os.path.normpath(path)
        if not os.path.lexists(path):
            missing.append(path)
            continue
        if os.path.isdir(path):
            candidates: Iterable[str] = _walk(path, settings)
        elif force_exclude and settings.is_excluded(path):
            candidates = ()
        else:
            candidates = (path,)
        for candidate in candidates:
            key = os.path.normcase(os.path.abspath(candidate))
            if key not in seen:
                seen.add(key)
                found.append(os.path.normpath(candidate))
    return found, missing


def _walk(root: str, settings: Settings) -> Iterator[str]:
    for directory, subdirectories, filenames in os.walk(root):
        subdirectories[:] = sorted(
            name
            for name in subdirectories
            if not settings.is_excluded(os.path.join(directory, name), base=root)
        )
        for name in sorted(filenames):
            if name.endswith(PYTHON_SUFFIXES):
                path = os.path.join(directory, name)
                if not settings.is_excluded(path, base=root):
                    yield path
