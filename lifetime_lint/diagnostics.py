"""The data a check produces: diagnostics, fixes and text edits.

Edits are character offsets into the decoded source text, so fixes from different rules can
be checked for overlap and applied together without re-parsing in between (Ruff's model).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class Applicability(str, enum.Enum):
    """How far a fix can be trusted. `safe` keeps behaviour; `unsafe` may change it."""

    SAFE = "safe"
    UNSAFE = "unsafe"


@dataclass(frozen=True, order=True)
class Location:
    """A 1-based row and 1-based column (in characters), as Ruff reports them."""

    row: int
    column: int


@dataclass(frozen=True, order=True)
class Edit:
    """Replace source[start:end] with `content` (an insertion when start == end)."""

    start: int
    end: int
    content: str

    def overlaps(self, other: Edit) -> bool:
        if self == other:
            return False
        if self.start == self.end == other.start == other.end:
            # Two different insertions at one point: order would be ambiguous.
            return True
        return self.start < other.end and other.start < self.end


@dataclass(frozen=True)
class Fix:
    """One fix: a set of edits applied together or not at all.

    `orphan_import_candidates` names local import bindings that the fix may leave unused
    (`from torch.cuda import empty_cache` once every call is rewritten); the engine removes
    them after applying the fix if nothing references them any more.
    """

    message: str
    edits: tuple[Edit, ...]
    applicability: Applicability = Applicability.SAFE
    orphan_import_candidates: tuple[str, ...] = ()

    @property
    def is_safe(self) -> bool:
        return self.applicability is Applicability.SAFE


@dataclass
class Diagnostic:
    """One finding in one file."""

    code: str
    name: str
    message: str
    path: str
    start: Location
    end: Location
    fix: Fix | None = None
    noqa_row: int | None = None
    # Character offsets of the flagged node: used to map fixes and baselines.
    span: tuple[int, int] = (0, 0)
    # Set for diagnostics about the file itself (unreadable, unparsable): exit code 2.
    is_error: bool = False
    extra: dict = field(default_factory=dict)
    # How much the finding likely matters ("low", "medium", "high"), for rules that rate
    # their findings (see lifetime_lint.analysis.significance); None for the others.
    significance: str | None = None

    def sort_key(self):
        return (self.path, self.start.row, self.start.column, self.code, self.message)
