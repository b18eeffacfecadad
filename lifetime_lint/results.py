"""What checking a file produces, and how a run fixes: plain data, no LibCST.

Kept apart from the engine so that a run answered entirely from the cache (and the
reporters, the cache and the command line) never imports LibCST, whose import alone costs
about as much as a warm run over a mid-sized tree.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lifetime_lint.diagnostics import Diagnostic, Fix

# A key of `FileResult.left_out`: "CODE reason | setting that shows them" (one string, so
# the counts add up across files and processes as plain dict entries).
LEFT_OUT_SEPARATOR = " | "


def left_out_key(code: str, reason: str, shown_by: str) -> str:
    return f"{code} {reason}{LEFT_OUT_SEPARATOR}{shown_by}"


def split_left_out_key(key: str) -> tuple[str, str, str]:
    """(code, reason, the setting that shows them) of a `left_out` key."""
    head, _, shown_by = key.partition(LEFT_OUT_SEPARATOR)
    code, _, reason = head.partition(" ")
    return code, reason, shown_by


IO_ERROR = "E902"  # unreadable, undecodable or binary file
SYNTAX_ERROR = "E999"  # not parseable Python


@dataclass(frozen=True)
class FixMode:
    apply: bool = False  # --fix
    unsafe: bool = False  # --unsafe-fixes
    diff_only: bool = False  # --diff: compute fixes, write nothing

    @property
    def fixing(self) -> bool:
        return self.apply or self.diff_only

    def allows(self, fix: Fix) -> bool:
        return fix.is_safe or self.unsafe


@dataclass
class FileResult:
    path: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    fixes_applied: int = 0
    fixed_by_code: dict[str, int] = field(default_factory=dict)
    diff: bytes | None = None  # a patch in the file's own encoding (`patch -p0` applies it)
    fixed_text: str | None = None  # the new source, when fixes changed it
    added_imports: list[str] = field(default_factory=list)  # imports the fixes added
    written: bool = False
    # The findings in the file as it was before any fix (None: same as `diagnostics`).
    # `--statistics` counts these, so check, --fix and --diff agree on the same tree.
    found: list[Diagnostic] | None = None
    # Findings the rules left out by design or below the significance bar (`left_out_key`:
    # 'LL005 non-library path | portability = "strict"' -> count), for `--statistics`.
    left_out: dict[str, int] = field(default_factory=dict)

    @property
    def has_error(self) -> bool:
        return any(d.is_error for d in self.diagnostics)

    @property
    def original_diagnostics(self) -> list[Diagnostic]:
        return self.diagnostics if self.found is None else self.found
