"""`--add-noqa`: a `# noqa: CODE` comment for every current finding (Ruff's flag).

Each directive goes where `noqa.add_noqa_to_line` puts it (the reported row, or the end of
the multi-line string or backslash continuation it sits in; merged into an existing
`# noqa: X`). Running it twice adds nothing the second time: the first run's comments
suppress the findings. The file is written atomically in its own encoding and line
endings, and only if it still compiles.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass

from lifetime_lint.diagnostics import Diagnostic
from lifetime_lint.noqa import add_noqa_to_line
from lifetime_lint.source import SourceError, SourceFile


@dataclass
class NoqaResult:
    added: int = 0  # findings that got a directive
    error: str | None = None  # why the file was left untouched


def add_noqa(path: str, diagnostics: Sequence[Diagnostic]) -> NoqaResult:
    findings = [d for d in diagnostics if not d.is_error]
    if not findings:
        return NoqaResult()
    try:
        source = SourceFile.read(path)
    except SourceError as error:
        return NoqaResult(error=f"Failed to read {path}: {error}")
    text = source.text
    for d in findings:
        text = add_noqa_to_line(text, d.noqa_row or d.start.row, d.code)
    if text == source.text:
        return NoqaResult()
    try:
        compile(text, path, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except (SyntaxError, ValueError) as error:
        return NoqaResult(error=f"Failed to add noqa directives to {path}: {error}")
    source.write(text)
    return NoqaResult(added=len(findings))
