"""`--add-noqa`: a `# noqa: CODE` comment for every current finding (Ruff's flag).

The comment goes on the finding's reported row, where the suppression check looks first;
when a comment cannot end that row (it ends inside a multi-line string, or with a
backslash continuation) the finding's last row is used instead; when neither can take one
the finding is left as it is and counted. A row that already has `# noqa: A` gets the new
code merged in (`# noqa: A, B`); other comments are kept and the directive follows them.
Running it twice adds nothing the second time: the first run's comments suppress the
findings. The file is written atomically in its own encoding and line endings, and only
if it still compiles.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Sequence
from dataclasses import dataclass

from lifetime_lint.diagnostics import Diagnostic
from lifetime_lint.noqa import _LINE_NOQA
from lifetime_lint.source import SourceError, SourceFile


@dataclass
class NoqaResult:
    added: int = 0  # findings that got a directive
    skipped: int = 0  # findings on rows no comment can end
    error: str | None = None  # why the file was left untouched


def add_noqa(path: str, diagnostics: Sequence[Diagnostic]) -> NoqaResult:
    result = NoqaResult()
    findings = [d for d in diagnostics if not d.is_error]
    if not findings:
        return result
    try:
        source = SourceFile.read(path)
    except SourceError as error:
        return NoqaResult(error=f"Failed to read {path}: {error}")
    lines = source.text.splitlines(keepends=True)
    blocked, comments = _row_facts(source.text)
    wanted: dict[int, list[str]] = {}
    for d in findings:
        for row in (d.noqa_row or d.start.row, d.end.row):
            if 1 <= row <= len(lines) and row not in blocked:
                codes = wanted.setdefault(row, [])
                if d.code not in codes:
                    codes.append(d.code)
                result.added += 1
                break
        else:
            result.skipped += 1
    for row, codes in wanted.items():
        lines[row - 1] = _with_directive(lines[row - 1], codes, comments.get(row))
    text = "".join(lines)
    if text == source.text:
        return result
    try:
        compile(text, path, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except (SyntaxError, ValueError) as error:
        return NoqaResult(error=f"Failed to add noqa directives to {path}: {error}")
    source.write(text)
    return result


def _row_facts(text: str) -> tuple[set[int], dict[int, tuple[int, str]]]:
    """Rows a comment cannot end, and each row's comment (its column and text)."""
    blocked: set[int] = set()
    comments: dict[int, tuple[int, str]] = {}
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return blocked, comments
    for token in tokens:
        if token.type == tokenize.COMMENT:
            comments[token.start[0]] = (token.start[1], token.string)
        elif token.start[0] != token.end[0] and token.type != tokenize.NL:
            blocked.update(range(token.start[0], token.end[0]))  # a multi-line string
    for number, line in enumerate(text.splitlines(), start=1):
        if line.endswith("\\") and number not in comments:
            blocked.add(number)
    return blocked, comments


_CODES_IN_DIRECTIVE = re.compile(r"(#\s*noqa\s*:\s*)([A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*)", re.I)


def _with_directive(line: str, codes: list[str], comment: tuple[int, str] | None) -> str:
    body = line.rstrip("\r\n")
    ending = line[len(body) :]
    if comment is not None:
        column, text = comment
        existing = _LINE_NOQA.search(text)
        if existing is not None and existing.group("codes") is None:
            return line  # a bare noqa directive already covers every code
        if existing is not None:
            merged = _CODES_IN_DIRECTIVE.search(text)
            if merged is not None:
                present = [c.upper() for c in re.split(r"[,\s]+", merged.group(2)) if c]
                new = ", ".join(present + [c for c in codes if c not in present])
                updated = text[: merged.start(2)] + new + text[merged.end(2) :]
                return body[:column] + updated + body[column + len(text) :] + ending
    return f"{body.rstrip()}  # noqa: {', '.join(codes)}{ending}"
