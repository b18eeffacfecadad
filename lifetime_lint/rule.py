"""What a rule is, and the per-file context it works in.

A rule is one class in one file of `rules/`: a LibCST-style visitor (`visit_Call`,
`leave_FunctionDef`, ...) plus its identity (code, kebab-case name, summary), the substrings
a file must contain for the rule to possibly match (`triggers`: files without them are never
parsed for it), its options, and its documentation as the class docstring with Ruff's
sections (What it does / Why is this bad? / Example / Use instead / Fix safety / Options).

All enabled rules share one traversal of the tree (see `traversal.walk_dispatching`), so a
rule pays only for the node types it subscribes to.
"""

from __future__ import annotations

import inspect
from bisect import bisect_right
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    ClassVar,
)

import libcst as cst
from libcst.metadata import CodePosition, CodeRange

from lifetime_lint.diagnostics import Fix
from lifetime_lint.imports import ImportMap
from lifetime_lint.lazy_regex import compile_lazily
from lifetime_lint.parsing import IDENTITY, OffsetMap, RoundTripError
from lifetime_lint.results import left_out_key
from lifetime_lint.traversal import NodeOffsets

if TYPE_CHECKING:  # pragma: no cover
    from lifetime_lint.config import Settings


# A finding rated below `min-significance` is counted, not reported, under this reason.
BELOW_BAR = "below min-significance"
SHOWS_BELOW_BAR = 'min-significance = "low"'


@dataclass(frozen=True)
class Option:
    """One per-rule setting, read from `[tool.lifetime-lint.<rule-name>]`."""

    name: str
    kind: type  # str, bool, int, list (of str) or dict (str -> str)
    default: Any
    doc: str
    # Returns an error message for a value of the right type that is still wrong.
    validate: Callable[[Any], str | None] | None = None
    # The names the value may hold (a list's items, a table's keys), when they form a known
    # set: any other name is a configuration error that names it and the nearest valid one.
    names: Collection[str] | None = None


class Rule:
    """Base class of every rule. Subclasses define visitor methods and call `report`."""

    code: ClassVar[str] = ""
    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    triggers: ClassVar[tuple[str, ...]] = ()
    options: ClassVar[tuple[Option, ...]] = ()
    # In the default rule set (what runs when `select` is not given); a rule that is off by
    # default runs with `extend-select = ["CODE"]` or `select = ["ALL"]`.
    default_enabled: ClassVar[bool] = True
    # "always", "sometimes" or "never": shown in the rules table and `lifetime-lint rule`.
    fix_availability: ClassVar[str] = "sometimes"

    def __init__(self, context: FileContext, options: Mapping[str, Any]) -> None:
        self.context = context
        self.settings = options

    def report(
        self,
        node: cst.CSTNode,
        message: str,
        fix: Fix | None = None,
        *,
        statement: cst.CSTNode | None = None,
        significance: str | None = None,
    ) -> None:
        """Report a finding. `significance` ("low", "medium", "high"; see
        `lifetime_lint.analysis.significance`) rates it: findings below the configured
        `min-significance` are counted in `FileContext.below_bar`, not reported."""
        self.context.report(self, node, message, fix, statement, significance)

    def leave_out(self, reason: str, shown_by: str) -> None:
        """Count a finding this run does not report by design (outside the configured
        scope, CUDA-bound code, ...): `--statistics` shows the count with `shown_by`, the
        setting that reports them, so nothing is hidden silently."""
        self.context.count_left_out(left_out_key(self.code, reason, shown_by))

    def finish(self) -> None:
        """Called once after the traversal, for rules that analyse whole functions."""

    @classmethod
    def documentation(cls) -> str:
        return inspect.cleandoc(cls.__doc__ or cls.summary)

    @classmethod
    def option_defaults(cls) -> dict[str, Any]:
        return {option.name: option.default for option in cls.options}


@dataclass
class RawReport:
    rule: Rule
    node: cst.CSTNode
    message: str
    fix: Fix | None
    statement: cst.CSTNode | None
    significance: str | None = None


_STATEMENT_TYPES = (cst.SimpleStatementLine, cst.BaseCompoundStatement)


class FileContext:
    """Everything a rule may ask about the file it is checking.

    Expensive facts are computed on first use only: the import map when a rule resolves a
    name, positions when a rule reports (most files report nothing and never pay for them).
    """

    def __init__(
        self,
        path: str,
        source: str,
        module: cst.Module,
        newline: str,
        settings: Settings,
        parsed_text: str | None = None,
        offset_map: OffsetMap = IDENTITY,
        offsets: NodeOffsets | None = None,
    ) -> None:
        self.path = path
        self.source = source  # the file's text, exactly; every offset a rule sees is into it
        self.module = module
        # What LibCST parsed, when it is not `source` (see lifetime_lint.parsing).
        self.parsed_text = source if parsed_text is None else parsed_text
        self.offset_map = offset_map
        self.newline = newline
        self.settings = settings
        # The live ancestor chain during the traversal; the last element is the node
        # being visited. Rules read it instead of paying for ParentNodeProvider.
        self.ancestors: list[cst.CSTNode] = []
        self.reports: list[RawReport] = []
        # Findings left out because they are below `min-significance`.
        self.below_bar = 0
        # Findings left out by design or below the bar, by `results.left_out_key`.
        self.left_out: dict[str, int] = {}
        # Facts about this file that a rule or fix helper computes once and reuses, keyed
        # by a name of the helper's choosing (e.g. "fixes.taken_names").
        self.memo: dict[str, Any] = {}
        self._imports: ImportMap | None = None
        # Node offsets the caller already knows (the language server's incremental parse);
        # None: computed on first use.
        self._offsets: NodeOffsets | None = offsets
        self._line_starts: list[int] | None = None

    # -- names ----------------------------------------------------------------------
    @property
    def imports(self) -> ImportMap:
        if self._imports is None:
            self._imports = ImportMap.from_module(self.module)
        return self._imports

    def qualified_name(self, node: cst.BaseExpression) -> str | None:
        return self.imports.qualified_name(node)

    # -- positions -----------------------------------------------------------------
    def position(self, node: cst.CSTNode) -> CodeRange:
        """The node's range as LibCST's PositionProvider gives it (1-based lines)."""
        start, end = self._raw_span(node)
        return CodeRange(self._code_position(start), self._code_position(end))

    def _code_position(self, offset: int) -> CodePosition:
        if offset > len(self.source):
            # Past the end: LibCST counts a newline it adds to a file that lacks a final one.
            return CodePosition(len(self.line_starts) + 1, 0)
        row = self.row_of(offset)
        return CodePosition(row, offset - self.line_starts[row - 1])

    @property
    def line_starts(self) -> list[int]:
        if self._line_starts is None:
            # One scan (finding `\r` from each line start was quadratic in a file without
            # one: 2 s of a 1.8 MB module's lint).
            starts = [0]
            starts.extend(match.end() for match in _LINE_BREAK.finditer(self.source))
            self._line_starts = starts
        return self._line_starts

    def offset(self, row: int, column: int) -> int:
        """Character offset of a 1-based row and 0-based column."""
        starts = self.line_starts
        if row - 1 >= len(starts):
            return len(self.source)
        return starts[row - 1] + column

    def row_of(self, offset: int) -> int:
        return bisect_right(self.line_starts, offset)

    def span(self, node: cst.CSTNode) -> tuple[int, int]:
        """The node's (start, end) character offsets in the source (syntactic range)."""
        return self._raw_span(node, clamp=True)

    def _raw_span(self, node: cst.CSTNode, clamp: bool = False) -> tuple[int, int]:
        if self._offsets is None:
            # One code generation for all of the file's nodes (see lifetime_lint.traversal).
            offsets = NodeOffsets(self.module)
            if not offsets.reproduces(self.parsed_text):
                raise RoundTripError(
                    "LibCST does not reproduce this file byte for byte, so no position or "
                    "fix in it can be trusted"
                )
            self._offsets = offsets
        start, end = self._offsets[node]
        if self.offset_map.cuts:
            start, end = self.offset_map.start(start), self.offset_map.end(end)
            end = max(start, end)  # an empty range at a cut
        if clamp:  # LibCST's added final newline is not in the source
            size = len(self.source)
            return min(start, size), min(end, size)
        return start, end

    def line_after(self, node: cst.CSTNode) -> int:
        """Offset of the start of the line after the node's last line."""
        row = self.position(node).end.line
        starts = self.line_starts
        return starts[row] if row < len(starts) else len(self.source)

    def line_start_of(self, node: cst.CSTNode) -> int:
        return self.line_starts[self.position(node).start.line - 1]

    def indentation_of(self, node: cst.CSTNode) -> str:
        """The indentation of the node's line, as Python counts it: a form feed among the
        leading whitespace resets the count, so only what follows the last one is kept."""
        start = self.line_start_of(node)
        end = start
        while end < len(self.source) and self.source[end] in " \t\f":
            end += 1
        return self.source[start:end].rpartition("\f")[2]

    def code_for(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)

    def source_of(self, node: cst.CSTNode) -> str:
        """The exact source text of a node, as written in the file."""
        start, end = self.span(node)
        return self.source[start:end]

    # -- reporting -----------------------------------------------------------------
    def current_statement(self) -> cst.CSTNode | None:
        for node in reversed(self.ancestors):
            if isinstance(node, _STATEMENT_TYPES):
                return node
        return None

    def report(
        self,
        rule: Rule,
        node: cst.CSTNode,
        message: str,
        fix: Fix | None,
        statement: cst.CSTNode | None,
        significance: str | None = None,
    ) -> None:
        if significance is not None:
            from lifetime_lint.analysis.significance import at_least, bar_of

            if not at_least(significance, bar_of(self.settings)):
                self.below_bar += 1
                self.count_left_out(left_out_key(rule.code, BELOW_BAR, SHOWS_BELOW_BAR))
                return
        if statement is None and any(ancestor is node for ancestor in self.ancestors):
            statement = self.current_statement()
        if fix is not None:
            from lifetime_lint.fixes import review_fix  # fixes imports this module

            message, fix = review_fix(self, rule, message, fix)
        self.reports.append(RawReport(rule, node, message, fix, statement, significance))

    def count_left_out(self, key: str) -> None:
        self.left_out[key] = self.left_out.get(key, 0) + 1

    def is_suppressed(
        self, code: str, node: cst.CSTNode, statement: cst.CSTNode | None = None
    ) -> bool:
        """Whether a `# noqa` comment (or a file-level one) drops a finding of `code` on
        `node`: the same rows the engine checks (`lifetime_lint.noqa.is_suppressed`)."""
        from lifetime_lint.noqa import is_suppressed

        return is_suppressed(self, code, node, statement)

    def inside(self, types: Sequence[type]) -> cst.CSTNode | None:
        """The innermost ancestor of one of these types, if any."""
        types = tuple(types)
        for node in reversed(self.ancestors):
            if isinstance(node, types):
                return node
        return None


_LINE_BREAK = compile_lazily(r"\r\n|\r|\n")  # a line ending: `\r\n` is one
