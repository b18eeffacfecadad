"""The engine: from a file's bytes to diagnostics, and to a fixed file.

Cost model (see docs/architecture.md): a file is read once; each enabled rule's trigger
words are searched in the text and a file that contains none is never parsed; the others
are parsed once with LibCST and visited once by all their rules together; positions and
suppression comments are computed only for files that have findings.

Every offset is an offset into the file's exact text (see lifetime_lint.parsing for where
LibCST's own round trip is not exact), and a file LibCST must not parse (too large, too
deeply nested) or cannot reproduce byte for byte is reported, never guessed at. A file over
the size limit whose bulk is literal data is parsed without the data's interiors
(`parsing.data_cuts`); no fix that would edit or copy that data is offered.

Fixing repeats lint -> apply non-overlapping fixes -> re-parse, to a fixed point (bounded).
Nothing is written unless the result parses, and then keeping encoding, BOM, line endings,
mode, owner, links and extended attributes (lifetime_lint.source.write_file).
"""

from __future__ import annotations

import ast
import difflib
import gc
import os
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Callable

import libcst as cst

from lifetime_lint.config import Settings, code_matches
from lifetime_lint.diagnostics import Applicability, Diagnostic, Location
from lifetime_lint.fastpath import on_roomy_stack
from lifetime_lint.file_errors import (
    INTERNAL_ERROR,
    file_error,
    read_error,
    write_error,
)
from lifetime_lint.fixes import (
    added_imports,
    apply_edits,
    orphan_import_edits,
    select_non_overlapping,
)
from lifetime_lint.noqa import Suppressions, parse_suppressions
from lifetime_lint.parsing import (
    DataCut,
    ParsedSource,
    ParseRefused,
    RoundTripError,
    TabExpansion,
    expand_leading_tabs,
    parse_exact,
    python_syntax_error,
)
from lifetime_lint.registry import all_rules

# FileResult, FixMode and the error codes live in `results` (no LibCST there, so a run
# answered from the cache never imports it); re-exported here for existing callers.
from lifetime_lint.results import IO_ERROR, SYNTAX_ERROR, FileResult, FixMode, left_out_key
from lifetime_lint.rule import FileContext, RawReport, Rule
from lifetime_lint.source import SourceError, SourceFile, detect_newline
from lifetime_lint.traversal import LEAF_TYPES, NodeOffsets, children_memo, walk_dispatching

if TYPE_CHECKING:
    from lifetime_lint.incremental import DocumentParser

MAX_FIX_ROUNDS = 10


def _subscriptions(rule: type[Rule]) -> tuple[tuple[str, str], ...]:
    names = []
    for attribute in dir(rule):
        if attribute.startswith(("visit_", "leave_")) and callable(getattr(rule, attribute)):
            _kind, _, node_type = attribute.partition("_")
            if node_type and "_" not in node_type:
                names.append((attribute, node_type))
    return tuple(names)


class Linter:
    """Lints and fixes files with one set of settings. Cheap to build; reuse it."""

    def __init__(self, settings: Settings, rules: Sequence[type[Rule]] | None = None) -> None:
        self.settings = settings
        self.rules = settings.enabled_rules(rules if rules is not None else all_rules())
        self.options = {rule.code: settings.options_for(rule) for rule in self.rules}
        self._subscriptions = {rule: _subscriptions(rule) for rule in self.rules}
        self.last_left_out: dict[str, int] = {}  # of the latest `lint_text`

    # -- one file --------------------------------------------------------------------
    def check_file(self, path: str, mode: FixMode = FixMode()) -> FileResult:
        result = FileResult(path)
        try:
            source = SourceFile.read(path)
        except SourceError as error:
            result.diagnostics.append(read_error(path, str(error)))
            return result
        return self.check_source(source, mode, result)

    def check_source(
        self, source: SourceFile, mode: FixMode = FixMode(), result: FileResult | None = None
    ) -> FileResult:
        path = source.path
        result = result or FileResult(path)
        diagnostics, error = self.lint_text(path, source.text, source.newline)
        if error is not None:
            result.diagnostics.append(error)
            return result
        result.found = list(diagnostics)
        result.left_out = dict(self.last_left_out)  # as found, like `found`
        if mode.fixing and any(d.fix and mode.allows(d.fix) for d in diagnostics):
            text, diagnostics = self._fix_loop(path, source, diagnostics, mode, result)
            if text != source.text:
                result.added_imports = added_imports(source.text, text)
                if mode.diff_only:
                    result.fixed_text = text
                    result.diff = unified_diff(
                        path, source.encode(source.text), source.encode(text)
                    )
                else:
                    try:
                        source.write(text)
                    except OSError as failure:
                        # The file is as it was: report its findings as unfixed.
                        result.diagnostics.append(write_error(path, _os_reason(failure)))
                        result.fixes_applied = 0
                        result.fixed_by_code = {}
                        diagnostics, _ = self.lint_text(path, source.text, source.newline)
                    else:
                        result.fixed_text = text
                        result.written = True
        result.diagnostics.extend(diagnostics)
        return result

    def fix_source(
        self, source: SourceFile, mode: FixMode, only: Diagnostic | None = None
    ) -> FileResult:
        """What fixing `source` gives, without writing it (`result.fixed_text`).

        With `only` (a diagnostic from an earlier lint of this text), just that finding's fix
        is applied, with the same re-parse and orphaned-import clean-up as `--fix`: an
        editor's quick fix for one finding.
        """
        result = FileResult(source.path)
        diagnostics, error = self.lint_text(source.path, source.text, source.newline)
        if error is not None:
            result.diagnostics.append(error)
            return result
        text, diagnostics = self._fix_loop(source.path, source, diagnostics, mode, result, only)
        if text != source.text:
            result.fixed_text = text
        result.diagnostics.extend(diagnostics)
        return result

    def lint_text(
        self,
        path: str,
        text: str,
        newline: str | None = None,
        parser: DocumentParser | None = None,
    ) -> tuple[list[Diagnostic], Diagnostic | None]:
        """Diagnostics for one source text, or a file-level error diagnostic.

        `parser`: the document's incremental parser (the language server's), which gives
        the same tree as a full parse while re-parsing only what changed since its last text.
        """
        with _cyclic_gc_paused(), children_memo():
            return on_roomy_stack(self._lint_text, path, text, newline, parser)

    def _lint_text(
        self,
        path: str,
        text: str,
        newline: str | None,
        parser: DocumentParser | None,
    ) -> tuple[list[Diagnostic], Diagnostic | None]:
        self.last_left_out = {}
        ignored = self.settings.ignored_codes(path)
        rules = [
            rule
            for rule in self.rules
            if not any(code_matches(rule.code, selector) for selector in ignored)
            and (not rule.triggers or any(trigger in text for trigger in rule.triggers))
        ]
        if not rules:
            return [], None
        offsets: NodeOffsets | None = None
        try:
            try:
                if parser is None:
                    parsed = parse_exact(text)
                else:
                    parsed, offsets = parser.parse(text)
            except cst.ParserSyntaxError as error:
                python_error = python_syntax_error(text, path)
                expansion = None if python_error else expand_leading_tabs(text)
                if expansion is None:
                    return [], _syntax_error(path, error, python_error)
                try:
                    return self._lint_expanded(path, expansion, newline, rules), None
                except cst.ParserSyntaxError as still:
                    return [], _syntax_error(path, still, None)
            return self._lint_parsed(path, text, parsed, newline, rules, offsets), None
        except ParseRefused as refused:
            return [], file_error(path, IO_ERROR, f"Failed to parse {path}: {refused}")
        except RoundTripError as error:
            return [], file_error(path, IO_ERROR, f"Failed to parse {path}: {error}; not checked")

    def _lint_expanded(
        self,
        path: str,
        expansion: TabExpansion,
        newline: str | None,
        rules: Sequence[type[Rule]],
    ) -> list[Diagnostic]:
        """Lint the copy with leading tabs expanded; findings at the original's positions,
        with no fix (edits computed on the copy do not apply to the file), and one note."""
        parsed = parse_exact(expansion.text)
        diagnostics = self._lint_parsed(path, expansion.text, parsed, newline, rules)
        self.last_left_out[TABS_NOTE] = self.last_left_out.get(TABS_NOTE, 0) + 1
        for diagnostic in diagnostics:
            diagnostic.fix = None
            diagnostic.extra.pop("edit_locations", None)
            for name in ("start", "end"):
                at = getattr(diagnostic, name)
                column = expansion.column(at.row, at.column - 1) + 1
                setattr(diagnostic, name, Location(at.row, column))
            diagnostic.span = (
                expansion.offset(diagnostic.span[0]),
                expansion.offset(diagnostic.span[1]),
            )
        return diagnostics

    def _lint_parsed(
        self,
        path: str,
        text: str,
        parsed: ParsedSource,
        newline: str | None,
        rules: Sequence[type[Rule]],
        offsets: NodeOffsets | None = None,
    ) -> list[Diagnostic]:
        context = self._context(path, text, parsed, newline, offsets)
        instances = [rule(context, self.options[rule.code]) for rule in rules]
        visits: dict[str, list[Callable]] = {}
        leaves: dict[str, list[Callable]] = {}
        for instance in instances:
            for attribute, node_type in self._subscriptions[type(instance)]:
                table = visits if attribute.startswith("visit_") else leaves
                table.setdefault(node_type, []).append(getattr(instance, attribute))
        # One traversal for all rules (`traversal.walk_dispatching`: LibCST's visiting order
        # without its node rebuilding, about 3x cheaper than `module.visit`): each node type
        # goes to the rules that subscribe; a rule's `visit_*` return value is ignored, every
        # rule sees every node. A leaf no rule listens to changes nothing (it is nobody's
        # ancestor): not visited.
        unheard = frozenset(
            leaf
            for leaf in LEAF_TYPES
            if leaf.__name__ not in visits and leaf.__name__ not in leaves
        )
        walk_dispatching(context.module, context.ancestors, visits, leaves, unheard)
        for instance in instances:
            instance.finish()
        self.last_left_out = context.left_out
        if not context.reports:
            return []
        diagnostics = self._to_diagnostics(context, context.reports)
        if parsed.data:
            self._keep_data_intact(diagnostics, parsed.data)
        return diagnostics

    def _keep_data_intact(self, diagnostics: list[Diagnostic], data: Sequence[DataCut]) -> None:
        """Drop the fix of a finding that would edit literal data LibCST did not see (a large
        file's tables, `parsing.data_cuts`), or write code generated from a node that holds
        some (it holds the cut-down copy): reported, not fixed, with one note per finding."""
        starts = [cut.start for cut in data]
        for diagnostic in diagnostics:
            fix = diagnostic.fix
            if fix is None:
                continue
            if any(
                _touches(starts, data, edit.start, edit.end)
                or any(cut.remnant in edit.content for cut in data)
                for edit in fix.edits
            ):
                diagnostic.fix = None
                diagnostic.extra.pop("edit_locations", None)
                self.last_left_out[DATA_NOTE] = self.last_left_out.get(DATA_NOTE, 0) + 1

    def _context(
        self,
        path: str,
        text: str,
        parsed: ParsedSource,
        newline: str | None,
        offsets: NodeOffsets | None = None,
    ) -> FileContext:
        return FileContext(
            path,
            text,
            parsed.module,
            newline or detect_newline(text),
            self.settings,
            parsed.parse_text,
            parsed.offsets,
            offsets,
        )

    # -- reports -> diagnostics ------------------------------------------------------
    def _to_diagnostics(self, context: FileContext, reports: list[RawReport]) -> list[Diagnostic]:
        suppressions: Suppressions | None = None
        if "noqa" in context.source:
            suppressions = parse_suppressions(context.source)
        diagnostics: list[Diagnostic] = []
        seen: set[tuple[str, int, int, str]] = set()
        for report in reports:
            code = report.rule.code
            position = context.position(report.node)
            start = Location(position.start.line, position.start.column + 1)
            end = Location(position.end.line, position.end.column + 1)
            key = (code, start.row, start.column, report.message)
            if key in seen:
                continue
            seen.add(key)
            rows = {start.row, end.row}
            if report.statement is not None:
                statement_range = context.position(report.statement)
                rows.add(statement_range.start.line)
                if isinstance(report.statement, cst.SimpleStatementLine):
                    rows.add(statement_range.end.line)
            if suppressions is not None and (
                suppressions.file_suppresses(code)
                or any(suppressions.row_suppresses(row, code) for row in rows)
            ):
                continue
            diagnostic = Diagnostic(
                code=code,
                name=report.rule.name,
                message=report.message,
                path=context.path,
                start=start,
                end=end,
                fix=report.fix,
                noqa_row=start.row,
                span=context.span(report.node),
                significance=report.significance,
            )
            if report.fix is not None:
                diagnostic.extra["edit_locations"] = [
                    (edit.content, _location(context, edit.start), _location(context, edit.end))
                    for edit in sorted(report.fix.edits)
                ]
            diagnostics.append(diagnostic)
        diagnostics.sort(key=Diagnostic.sort_key)
        return diagnostics

    # -- fixing ----------------------------------------------------------------------
    def _fix_loop(
        self,
        path: str,
        source: SourceFile,
        diagnostics: list[Diagnostic],
        mode: FixMode,
        result: FileResult,
        only: Diagnostic | None = None,
    ) -> tuple[str, list[Diagnostic]]:
        text = source.text
        for _ in range(1 if only is not None else MAX_FIX_ROUNDS):
            candidates = [
                d
                for d in diagnostics
                if d.fix is not None
                and mode.allows(d.fix)
                and (only is None or _same_finding(d, only))
            ]
            if not candidates:
                break
            chosen = select_non_overlapping(d.fix for d in candidates)  # type: ignore[misc]
            chosen_ids = {id(fix) for fix in chosen}
            new_text = apply_edits(text, [edit for fix in chosen for edit in fix.edits])
            orphans = {name for fix in chosen for name in fix.orphan_import_candidates}
            try:
                parsed = parse_exact(new_text)
                if orphans:
                    context = self._context(path, new_text, parsed, source.newline)
                    removal = orphan_import_edits(context, orphans)
                    if removal:
                        new_text = apply_edits(new_text, removal)
                        parse_exact(new_text)
                _python_compiles(new_text, path, source.text)
            except (ParseRefused, RoundTripError) as error:
                # The fixed text is one LibCST must not or cannot handle exactly: keep the
                # file as it was, and say why.
                return source.text, diagnostics + [
                    file_error(path, IO_ERROR, f"Not fixed: after the fixes, {error}")
                ]
            except (cst.ParserSyntaxError, SyntaxError, ValueError) as error:
                # A fix that breaks the file is a bug in a rule: keep the file as it was.
                diagnostics = diagnostics + [
                    file_error(
                        path,
                        INTERNAL_ERROR,
                        f"Internal error: a fix would leave {path} unparsable ({error}); "
                        "no fix applied. Please report this.",
                    )
                ]
                return source.text, diagnostics
            for d in candidates:
                if d.fix is not None and id(d.fix) in chosen_ids:
                    result.fixes_applied += 1
                    result.fixed_by_code[d.code] = result.fixed_by_code.get(d.code, 0) + 1
            text = new_text
            diagnostics, lint_error = self.lint_text(path, text, source.newline)
            if lint_error is not None:  # cannot happen after the parse above; be safe anyway
                return source.text, [lint_error]
        return text, diagnostics


@contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """Run one file's lint without the cyclic garbage collector, then collect once.

    Parsing and analysing a file allocates 10^5 objects that stay alive until the lint ends:
    with the collector on, each few hundred allocations start a young collection and every
    tenth of those an older one, all scanning trees that are not garbage (14-16% of the CPU
    time of linting diffusers' largest files, benchmarks/RESULTS.md). Objects allocated while
    it is paused stay in the young generation, so one `gc.collect(0)` afterwards frees this
    lint's cycles. A caller that already paused it (a pool worker's own policy) is left alone.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.collect(0)


def _touches(starts: list[int], data: Sequence[DataCut], start: int, end: int) -> bool:
    """Whether the edit [start, end) overlaps a cut's characters (or inserts inside them)."""
    index = bisect_right(starts, end)  # the cuts starting at or before `end`
    for cut in data[max(index - 2, 0) : index]:
        if start < cut.end and end > cut.start and (start != end or cut.start < start):
            return True
    return False


def _same_finding(a: Diagnostic, b: Diagnostic) -> bool:
    return (a.code, a.start, a.end, a.message) == (b.code, b.start, b.end, b.message)


def _python_compiles(new_text: str, path: str, original: str) -> None:
    """Raise SyntaxError if this Python rejects the fixed text but accepted the original.

    A file in syntax newer than the running interpreter (`match` under Python 3.9) is
    checked by LibCST's parse alone: this interpreter could not judge it before the fix
    either.
    """
    try:
        compile(new_text, path, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError:
        try:
            compile(original, path, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
        except SyntaxError:
            return
        raise


def _location(context: FileContext, offset: int) -> Location:
    row = context.row_of(offset)
    return Location(row, offset - context.line_starts[row - 1] + 1)


def unified_diff(path: str, before: bytes, after: bytes) -> bytes:
    """A unified diff of two versions of a file's bytes that `patch -p0` and `git apply -p0`
    accept: lines are what they count as lines (ended by `\\n` only, a `\\r` stays part of
    its line; not `str.splitlines`, which also splits at form feeds and U+2028), in the
    file's own encoding, with the `\\ No newline at end of file` marker they expect."""
    name = os.fsencode(path)
    lines = difflib.diff_bytes(
        difflib.unified_diff,
        _lines(before),
        _lines(after),
        name,
        name,
    )
    pieces = []
    for line in lines:
        pieces.append(line)
        if not line.endswith(b"\n"):
            pieces.append(b"\n\\ No newline at end of file\n")
    return b"".join(pieces)


def _lines(data: bytes) -> list[bytes]:
    lines = data.split(b"\n")
    ended = [line + b"\n" for line in lines[:-1]]
    return ended + ([lines[-1]] if lines[-1] else [])


def _os_reason(error: OSError) -> str:
    return error.strerror or str(error)


def _syntax_error(
    path: str, error: cst.ParserSyntaxError, python_error: SyntaxError | None
) -> Diagnostic:
    """Describe a syntax error the way Python would (LibCST's positions can be a line off):
    at Python's own line and column when Python rejects the text too, else LibCST's reason
    and line (its tokenizer's errors carry none: said so, at 1:1)."""
    if python_error is not None:
        row = python_error.lineno or 1
        column = python_error.offset or 1
        reason = python_error.msg
    else:  # Python accepts it but LibCST cannot parse it (very new syntax)
        libcst_reason = error.message.splitlines()[0] if error.message else "invalid syntax"
        if libcst_reason.startswith("tokenizer error"):
            row, column = 1, 1
            where = "LibCST's tokenizer gives no line"
            reason = (
                f"Python accepts this file but LibCST cannot parse it: {libcst_reason} ({where})"
            )
        else:
            row, column = max(error.raw_line, 1), error.raw_column + 1
            reason = (
                f"Python accepts this file but LibCST cannot parse it: {libcst_reason} "
                f"at line {row}"
            )
    return file_error(
        path, SYNTAX_ERROR, f"Failed to parse {path}:{row}:{column}: {reason}", row, column
    )


# The note on a file linted through `TabExpansion` (`FileResult.left_out`, shown by
# `--statistics`): its findings are reported, its fixes are not offered.
TABS_NOTE = left_out_key(
    SYNTAX_ERROR,
    "no fixes offered: indentation mixes tabs and spaces, which LibCST cannot parse "
    "(a copy with the tabs expanded was checked; the file is never changed)",
    "",
)

# The note on a finding whose fix is not offered because it would edit or copy literal data
# of a large file that LibCST did not see (`Linter._keep_data_intact`).
DATA_NOTE = left_out_key(
    IO_ERROR,
    "no fix offered: it would edit literal data of a file over 1 MB, which the parser did "
    "not see (the finding is reported; the data is never changed)",
    "",
)


__all__ = [
    "IO_ERROR",
    "SYNTAX_ERROR",
    "Applicability",
    "FileResult",
    "FixMode",
    "Linter",
]
