"""The one place that builds diagnostics about a file itself rather than about its code.

`E902` the file could not be read, written or safely parsed (missing, unreadable, binary,
undecodable, not a regular file, too large, too deeply nested, not writable); `E999` it is
not Python this interpreter or LibCST can parse; `LL000` a bug in lifetime-lint stopped the
check of this file. Each is an error (exit code 2) naming the file; the other files are
still checked, and a file with such an error is never changed.
"""

from __future__ import annotations

import os

from lifetime_lint.diagnostics import Diagnostic, Location

IO_ERROR = "E902"
SYNTAX_ERROR = "E999"
INTERNAL_ERROR = "LL000"

_NAMES = {IO_ERROR: "io-error", SYNTAX_ERROR: "syntax-error", INTERNAL_ERROR: "internal-error"}


def file_error(path: str, code: str, message: str, row: int = 1, column: int = 1) -> Diagnostic:
    return Diagnostic(
        code=code,
        name=_NAMES[code],
        message=message,
        path=path,
        start=Location(row, column),
        end=Location(row, column),
        is_error=True,
    )


def read_error(path: str, reason: str) -> Diagnostic:
    return file_error(path, IO_ERROR, f"Failed to read {path}: {reason}")


def write_error(path: str, reason: str) -> Diagnostic:
    return file_error(path, IO_ERROR, f"Failed to write {path}: {reason}; the file was not changed")


def internal_error(path: str, error: BaseException) -> Diagnostic:
    """An exception raised while checking a file: reported, exit code 2."""
    import traceback  # only for an internal error: not on every run's start-up path

    where = ""
    trace = traceback.extract_tb(error.__traceback__)
    if trace:
        frame = trace[-1]
        where = f" at {os.path.basename(frame.filename)}:{frame.lineno}"
    return file_error(
        path,
        INTERNAL_ERROR,
        f"Internal error while checking {path}: {type(error).__name__}: {error}{where}; "
        "the file was not checked (nor changed). Please report this.",
    )
