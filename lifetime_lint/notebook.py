"""Jupyter notebooks: checked cell by cell, fixed back into their JSON without reformatting.

The code cells are joined into one module (so an `import torch` in one cell is known in the
next), each opened by a marker comment line; positions are reported as `cell N:row:column`
with N counting every cell of the notebook (markdown ones too) from 1, rows within the cell.
IPython syntax is not Python: a cell magic cell (`%%bash`) is skipped, and a line magic,
shell escape or help query (`%time x`, `!pip ...`, `x?`) becomes a comment of the same
length for the check and is put back verbatim afterwards.

Fixes are written only where that is exact: the notebook must be written back byte for byte
as it was read except for the changed cell sources (the JSON layout is recognised among the
ones Jupyter and common tools write, else the notebook is reported and left as it is), and
every marker and neutralised magic must survive the fix unchanged.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from lifetime_lint.diagnostics import Diagnostic, Location
from lifetime_lint.engine import FileResult, FixMode, Linter, unified_diff
from lifetime_lint.file_errors import IO_ERROR, SYNTAX_ERROR, file_error, read_error, write_error
from lifetime_lint.source import SourceFile, write_file

NOTEBOOK_SUFFIX = ".ipynb"
_MARKER = "# %% lifetime-lint cell {}"
_MARKER_LINE = re.compile(r"^# %% lifetime-lint cell (\d+)\n", re.MULTILINE)
_MAGIC = re.compile(r"^([ \t]*)([%!]|.*\?$)")


class NotebookError(Exception):
    """Not a notebook this tool can read; the message says why."""


@dataclass
class _Cell:
    index: int  # 1-based, over all cells of the notebook
    marker_row: int  # row of its marker line in the joined text
    rows: int  # rows of code
    magics: list[tuple[str, str]] = field(default_factory=list)  # (as checked, original)


@dataclass
class Notebook:
    path: str
    document: dict
    text: str  # the code cells joined, magics neutralised
    cells: list[_Cell]
    layout: dict | None  # json.dumps arguments that reproduce the file, if any

    @classmethod
    def parse(cls, path: str, data: bytes) -> Notebook:
        try:
            document = json.loads(data.decode("utf-8-sig"))
        except (UnicodeDecodeError, ValueError) as error:
            raise NotebookError(f"not a Jupyter notebook (invalid JSON: {error})") from None
        if not isinstance(document, dict) or not isinstance(document.get("cells"), list):
            raise NotebookError("not a Jupyter notebook (no list of cells)")
        pieces: list[str] = []
        cells: list[_Cell] = []
        row = 1
        for index, cell in enumerate(document["cells"], start=1):
            if not isinstance(cell, dict) or cell.get("cell_type") != "code":
                continue
            source = _cell_source(cell)
            if source is None:
                raise NotebookError(f"cell {index} has no readable source")
            if source.lstrip().startswith("%%"):
                continue  # a cell magic: not Python
            lines = source.split("\n")
            entry = _Cell(index, row, len(lines))
            for number, line in enumerate(lines):
                match = _MAGIC.match(line)
                if match and not line.lstrip().startswith("#"):
                    indent = match.group(1)
                    checked = indent + "#" + line[len(indent) + 1 :]
                    entry.magics.append((checked, line))
                    lines[number] = checked
            pieces.append(_MARKER.format(index) + "\n" + "\n".join(lines) + "\n")
            cells.append(entry)
            row += 1 + len(lines)
        layout = _layout_of(document, data)
        return cls(path, document, "".join(pieces), cells, layout)

    def locate(self, row: int) -> tuple[int | None, int]:
        """(cell index, row within the cell) of a row of the joined text."""
        for cell in self.cells:
            if cell.marker_row < row <= cell.marker_row + cell.rows:
                return cell.index, row - cell.marker_row
        return None, row

    def rewritten(self, fixed_text: str) -> bytes:
        """The notebook with its cells' sources from `fixed_text`; NotebookError if that
        cannot be written exactly."""
        if self.layout is None:
            raise NotebookError(
                "its JSON layout is not one this tool can write back unchanged; not fixed"
            )
        parts = _MARKER_LINE.split(fixed_text)
        if parts[0] or [int(n) for n in parts[1::2]] != [c.index for c in self.cells]:
            raise NotebookError("a fix moved a cell boundary; not fixed")
        by_index = {cell.index: cell for cell in self.cells}
        document = json.loads(json.dumps(self.document))
        for number, body in zip(parts[1::2], parts[2::2]):
            cell = by_index[int(number)]
            if not body.endswith("\n"):
                raise NotebookError("a fix moved a cell boundary; not fixed")
            body = _restore_magics(body[:-1], cell.magics)
            target = document["cells"][cell.index - 1]
            if body != _cell_source(target):
                original = target["source"]
                target["source"] = (
                    re.findall(r"[^\n]*\n|[^\n]+$", body) if isinstance(original, list) else body
                )
        return _dump(document, self.layout)


def _cell_source(cell: dict) -> str | None:
    source = cell.get("source", "")
    if isinstance(source, list) and all(isinstance(line, str) for line in source):
        return "".join(source)
    return source if isinstance(source, str) else None


def _restore_magics(body: str, magics: list[tuple[str, str]]) -> str:
    if not magics:
        return body
    lines = body.split("\n")
    pending = list(magics)
    for number, line in enumerate(lines):
        if pending and line == pending[0][0]:
            lines[number] = pending.pop(0)[1]
    if pending:
        raise NotebookError("a fix changed an IPython magic line; not fixed")
    return "\n".join(lines)


_LAYOUTS = [
    {"indent": indent, "sort_keys": sort_keys, "ensure_ascii": ascii_only, "newline": newline}
    for indent in (1, 2, 4, None)
    for sort_keys in (True, False)
    for ascii_only in (False, True)
    for newline in (True, False)
]


def _dump(document: dict, layout: dict) -> bytes:
    text = json.dumps(
        document,
        indent=layout["indent"],
        sort_keys=layout["sort_keys"],
        ensure_ascii=layout["ensure_ascii"],
    )
    return (text + ("\n" if layout["newline"] else "")).encode("utf-8")


def _layout_of(document: dict, data: bytes) -> dict | None:
    for layout in _LAYOUTS:
        if _dump(document, layout) == data:
            return layout
    return None


def check_notebook(linter: Linter, path: str, data: bytes, mode: FixMode) -> FileResult:
    """Check (and fix) a notebook; the result's positions are cell positions."""
    try:
        notebook = Notebook.parse(path, data)
    except NotebookError as error:
        return FileResult(path, [read_error(path, str(error))])
    virtual = SourceFile(path, notebook.text, "utf-8", False, "\n")
    # Compute the fixes without writing: the notebook, not the joined text, is written.
    compute = FixMode(apply=False, unsafe=mode.unsafe, diff_only=mode.fixing)
    result = linter.check_source(virtual, compute, FileResult(path))
    result.diff = None
    fixed_text, result.fixed_text = result.fixed_text, None
    if fixed_text is not None:
        try:
            new_data = notebook.rewritten(fixed_text)
        except NotebookError as error:
            result.diagnostics.append(file_error(path, IO_ERROR, f"Not fixed {path}: {error}"))
            result.fixes_applied, result.fixed_by_code = 0, {}
            unfixed, _ = linter.lint_text(path, notebook.text, "\n")
            result.diagnostics = [d for d in result.diagnostics if d.is_error] + unfixed
        else:
            if mode.diff_only:
                result.diff = unified_diff(path, data, new_data)
                result.fixed_text = fixed_text
            elif mode.apply:
                try:
                    write_file(path, new_data)
                except OSError as error:
                    result.diagnostics.append(write_error(path, error.strerror or str(error)))
                    result.fixes_applied, result.fixed_by_code = 0, {}
                else:
                    result.fixed_text, result.written = fixed_text, True
    result.diagnostics = [_in_cells(notebook, d) for d in result.diagnostics]
    return result


def _in_cells(notebook: Notebook, diagnostic: Diagnostic) -> Diagnostic:
    cell, row = notebook.locate(diagnostic.start.row)
    if cell is None:
        return diagnostic
    _, end_row = notebook.locate(diagnostic.end.row)
    if diagnostic.code == SYNTAX_ERROR:
        prefix = (
            f"Failed to parse {notebook.path}:{diagnostic.start.row}:{diagnostic.start.column}:"
        )
        if diagnostic.message.startswith(prefix):
            diagnostic.message = (
                f"Failed to parse {notebook.path}:cell {cell}:{row}:{diagnostic.start.column}:"
                + diagnostic.message[len(prefix) :]
            )
    diagnostic.start = Location(row, diagnostic.start.column)
    diagnostic.end = Location(end_row, diagnostic.end.column)
    diagnostic.noqa_row = row
    diagnostic.extra["cell"] = cell
    if "edit_locations" in diagnostic.extra:
        diagnostic.extra["edit_locations"] = [
            (
                content,
                Location(notebook.locate(start.row)[1], start.column),
                Location(notebook.locate(end.row)[1], end.column),
            )
            for content, start, end in diagnostic.extra["edit_locations"]
        ]
    return diagnostic
