"""Suppression comments, flake8/Ruff style.

- `# noqa` or `# noqa: LL004, LL005` on the reported line, or on the first or last line of
  the (multi-line) statement that holds the finding.
- `# lifetime-lint: noqa` on a line of its own suppresses the whole file;
  `# lifetime-lint: noqa: LL005` suppresses those codes in the whole file.

Comments are found with the tokenizer, so `"# noqa"` inside a string suppresses nothing.
Only files that have findings pay for this.
"""

from __future__ import annotations

import functools
import io
import re
import tokenize
from dataclasses import dataclass, field

from lifetime_lint.lazy_regex import compile_lazily

_LINE_NOQA = compile_lazily(
    r"#\s*noqa(?::[\s]?(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.IGNORECASE
)
_FILE_NOQA = compile_lazily(
    r"^#\s*lifetime-lint\s*:\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?\s*$",
    re.IGNORECASE,
)

ALL = None  # a suppression that covers every code


@dataclass
class Suppressions:
    by_row: dict[int, set[str] | None] = field(default_factory=dict)
    file_codes: set[str] | None = field(default_factory=set)  # None: whole file

    def file_suppresses(self, code: str) -> bool:
        return self.file_codes is None or code in self.file_codes

    def row_suppresses(self, row: int, code: str) -> bool:
        if row not in self.by_row:
            return False
        codes = self.by_row[row]
        return codes is None or code in codes


def _codes(text: str | None) -> set[str] | None:
    if not text:
        return None
    return {code.upper() for code in re.split(r"[,\s]+", text.strip()) if code}


def parse_suppressions(source: str) -> Suppressions:
    """The file's suppression comments. Tokenizing a file costs about its LibCST parse, so
    the answer for the last few sources is kept: the engine and any rule that asks about the
    same text share one tokenization. Treat the result as read-only."""
    return _parse_suppressions(source)


@functools.lru_cache(maxsize=8)
def _parse_suppressions(source: str) -> Suppressions:
    result = Suppressions()
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return result
    for token in tokens:
        if token.type != tokenize.COMMENT:
            continue
        row = token.start[0]
        comment = token.string
        file_match = _FILE_NOQA.match(comment)
        if file_match and token.line.strip() == comment.strip():
            codes = _codes(file_match.group("codes"))
            if codes is None:
                result.file_codes = None
            elif result.file_codes is not None:
                result.file_codes |= codes
            continue
        match = _LINE_NOQA.search(comment)
        if match:
            codes = _codes(match.group("codes"))
            previous = result.by_row.get(row, set())
            if codes is None or previous is None:
                result.by_row[row] = None
            else:
                result.by_row[row] = previous | codes
    return result


def finding_rows(context, node, statement) -> set[int]:
    """The rows whose `# noqa` covers a finding on `node` inside `statement`: the node's
    first and last rows, the statement's first row, and a simple statement's last row."""
    import libcst as cst

    position = context.position(node)
    rows = {position.start.line, position.end.line}
    if statement is not None:
        statement_range = context.position(statement)
        rows.add(statement_range.start.line)
        if isinstance(statement, cst.SimpleStatementLine):
            rows.add(statement_range.end.line)
    return rows


def is_suppressed(context, code: str, node, statement=None) -> bool:
    """Whether the engine will drop a finding of `code` on `node` (one answer for every
    rule: a rule that must not fix what is suppressed asks here)."""
    if "noqa" not in context.source:
        return False
    suppressions = parse_suppressions(context.source)
    if suppressions.file_suppresses(code):
        return True
    rows = finding_rows(context, node, statement)
    return any(suppressions.row_suppresses(row, code) for row in rows)


def add_noqa_to_line(source: str, row: int, code: str) -> str:
    """`source` with `# noqa: CODE` on the line that suppresses a finding reported at `row`.

    A row inside a multi-line string, or one that ends in a backslash continuation, cannot take
    a comment: the comment goes on the line where that construct ends (the same line the
    suppression check accepts as the statement's last line). An existing `# noqa` is extended
    (`# noqa: LL001, LL002`); a bare `# noqa` already covers every code. Idempotent.
    """
    lines = source.splitlines(keepends=True)
    if not lines:
        return source
    row = min(max(row, 1), len(lines))
    spans: list[tuple[int, int]] = []
    comments: dict[int, tuple[int, str]] = {}
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.start[0] != token.end[0] and token.type != tokenize.NL:
                spans.append((token.start[0], token.end[0]))
            if token.type == tokenize.COMMENT:
                comments[token.start[0]] = (token.start[1], token.string)
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return source
    moved = True
    while moved:
        moved = False
        for first, last in spans:
            if first <= row < last:
                row, moved = last, True
        body = lines[row - 1].rstrip("\r\n")
        if body.endswith("\\") and row < len(lines):
            row, moved = row + 1, True
    line = lines[row - 1]
    body = line.rstrip("\r\n")
    ending = line[len(body) :]
    existing = comments.get(row)
    if existing is not None:
        column, comment = existing
        match = _LINE_NOQA.search(comment)
        if match is not None:
            codes = _codes(match.group("codes"))
            if codes is None or code.upper() in codes:
                return source
            merged = f"{comment[: match.end()]}, {code}{comment[match.end() :]}"
            lines[row - 1] = body[:column] + merged + body[column + len(comment) :] + ending
            return "".join(lines)
    lines[row - 1] = f"{body}  # noqa: {code}{ending}"
    return "".join(lines)
