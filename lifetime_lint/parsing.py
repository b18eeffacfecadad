"""Parsing a file with LibCST, safely and with offsets that are exact in the original text.

Two things stand between a file's text and a tree whose offsets can be trusted:

- LibCST's round trip is not exact everywhere. Where a form feed starts a statement line it
  drops the form feed (and whatever whitespace came before it on the line), it drops a final
  lone `\\r`, and a form feed opening a method body's line makes its native parser fail
  (Python accepts all three). Offsets computed on LibCST's regenerated code and applied to
  the original bytes then land a character off per form feed. So the text LibCST parses is
  the original with exactly those characters taken out (a final lone `\\r` becomes `\\n`),
  found with Python's own tokenizer; an `OffsetMap` turns offsets in the parsed text back into
  offsets in the original. Whether LibCST regenerates the parsed text byte for byte is checked
  where offsets are first needed (`traversal.NodeOffsets`): a file it does not is refused
  (`RoundTripError`), never fixed on guessed offsets.
- LibCST's parser is slow and recursive: an 8,000-term expression crashes it (segfault), a
  10,000-term sum or a 20,000-deep attribute chain takes minutes, a 5 MB file minutes and GBs.
  `nesting_problem` is a cheap screen (regular expressions, C speed) for the text shapes that
  can nest that deep, then, only for the files it flags, Python's own parser (fast, and it
  fails cleanly) measures the real depth. Sizes are capped before a file is even read
  (`source.read_source_bytes`).
- A file over MAX_SOURCE_BYTES is parsed only without its literal data (`data_cuts`): the
  interiors of large displays of constants (Hadamard matrices, lookup tables) are taken out
  of LibCST's view like the form feeds, through the same `OffsetMap`, when what remains is
  within the limit. Constants are nothing a lifetime rule reads, so only the displays' sizes
  change; the engine offers no fix that would edit or copy the data (`ParsedSource.data`).
"""

from __future__ import annotations

import ast
import contextlib
import io
import re
import threading
import tokenize
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from lifetime_lint.lazy_regex import compile_lazily

# LibCST takes about 10 s and 300 MB per MB of source (design notes), superlinearly more
# beyond; the largest file in the six pinned corpora is 0.33 MB.
MAX_SOURCE_BYTES = 1 << 20
# Deepest syntax tree (Python's `ast`) a file may have. LibCST's cost grows with the cube of
# the depth: 0.15 s at 500, 0.8 s at 1,000, 40 s at 4,000, a crash at 8,000. The deepest
# file in the pinned corpora is 54.
MAX_NESTING = 500
# On a file over MAX_SOURCE_BYTES, a display of constants at least this long (characters)
# is literal data whose interior LibCST does not see (`data_cuts`); shorter ones (a list of
# device names, a shape) are code a rule may read and are kept.
MIN_DATA_DISPLAY = 256
# Largest file whose literal data is looked for: Python's `ast` of a dense table module takes
# about 400 MB per MB of text (2 MB of `+1, -1, ...`: 0.9 s, 830 MB peak), so beyond this a
# file stays refused for its size. The table modules seen in real packages are 1.8-2.3 MB.
MAX_DATA_SOURCE_BYTES = 4 << 20

# The screen: text that could hold an expression deeper than MAX_NESTING.
_LONG_LINE = compile_lazily(r"^[^\r\n]{" + str(2 * MAX_NESTING) + ",}", re.MULTILINE)
# A run of lines that each begin like the middle of an expression (an operator, a dot, a
# bracket, a keyword operator)...
_RUN_OF_LINES_STARTING_MID_EXPRESSION = compile_lazily(
    r"^(?:[ \t\f]*(?:[-+*/%&|^@.~<>=(\[{}\])]|and\b|or\b|not\b|if\b|else\b|lambda\b)"
    r"[^\r\n]*(?:\r\n|\r|\n)){" + str(MAX_NESTING // 2) + "}",
    re.MULTILINE,
)
# ... or that each end like it (or with a backslash), searched in the reversed text, where
# they begin with it: a pattern that fails at the first character of most lines is what
# keeps the screen at a small fraction of the parse.
_REVERSED_RUN_OF_LINES_ENDING_MID_EXPRESSION = compile_lazily(
    r"^(?:[ \t\f]*(?:[-+*/%&|^@.~<>=(\[{\\]|dna\b|ro\b|ton\b)[^\r\n]*(?:\n\r|\r|\n)){"
    + str(MAX_NESTING // 2)
    + "}",
    re.MULTILINE,
)

_LINE_BREAK = compile_lazily(r"\r\n|\r|\n")
_LONE_CR = compile_lazily(r"\r(?!\n)")


class ParseRefused(Exception):
    """LibCST must not see this text (too large or too deeply nested); the message says why."""


class RoundTripError(Exception):
    """LibCST does not regenerate this file byte for byte, so its offsets cannot be trusted."""


@dataclass(frozen=True)
class OffsetMap:
    """Offsets in the parsed text -> offsets in the original, for characters taken out.

    `cuts` are (offset in the parsed text, characters removed there), in order. A range that
    touches a cut at one of its ends does not include the removed characters: a start offset
    at a cut maps past them, an end offset before them.
    """

    cuts: tuple[tuple[int, int], ...] = ()

    def __post_init__(self) -> None:
        totals, running = [], 0
        for _, size in self.cuts:
            running += size
            totals.append(running)
        object.__setattr__(self, "_positions", [offset for offset, _ in self.cuts])
        object.__setattr__(self, "_totals", totals)

    def start(self, offset: int) -> int:
        index = bisect_right(self._positions, offset)  # type: ignore[attr-defined]
        return offset + (self._totals[index - 1] if index else 0)  # type: ignore[attr-defined]

    def end(self, offset: int) -> int:
        index = bisect_left(self._positions, offset)  # type: ignore[attr-defined]
        return offset + (self._totals[index - 1] if index else 0)  # type: ignore[attr-defined]


IDENTITY = OffsetMap()


@dataclass(frozen=True)
class DataCut:
    """The interior of a display of literal data, taken out of LibCST's view.

    `start`, `end`: the characters removed, as offsets in the original text (from just after
    the comma that follows the first element to the closing bracket). `remnant`: the
    display as LibCST sees it (`[[+1,],]`); code generated from a node that holds the
    cut holds this text, which is how a fix copying cut-down data is recognised.
    """

    start: int
    end: int
    remnant: str


@dataclass(frozen=True)
class ParsedSource:
    module: cst.Module
    parse_text: str  # what LibCST parsed (the original unless characters had to go)
    offsets: OffsetMap
    data: tuple[DataCut, ...] = ()  # literal data LibCST did not see (large files only)


def parse_exact(text: str) -> ParsedSource:
    """Parse `text` with LibCST after the guards; raises ParseRefused, ParserSyntaxError."""
    data: tuple[DataCut, ...] = ()
    if len(text) > MAX_DATA_SOURCE_BYTES:
        raise ParseRefused(size_problem(len(text)))
    if len(text) > MAX_SOURCE_BYTES:
        data = large_file_data(text)
    else:
        problem = nesting_problem(text)
        if problem:
            raise ParseRefused(problem)
    parse_text, offsets = libcst_view(text, data)
    try:
        with _parser_built_nodes():
            module = cst.parse_module(parse_text)
    except RecursionError:
        raise ParseRefused("too deeply nested for the parser") from None
    return ParsedSource(module, parse_text, offsets, data)


_VALIDATING_POST_INIT = cst.CSTNode.__post_init__
_UNVALIDATED_PARSES = 0
_UNVALIDATED_LOCK = threading.Lock()


def _skip_validation(self: cst.CSTNode) -> None:
    """Nothing: see `_parser_built_nodes`."""


@contextlib.contextmanager
def _parser_built_nodes() -> Iterator[None]:
    """Build the parser's nodes without LibCST's per-node `_validate`.

    Every node LibCST constructs runs `_validate` (whitespace is only whitespace,
    parentheses pair up, an operator has the spacing it needs): a check on nodes built by
    hand, which the parser's nodes pass by construction (they come from text that parsed),
    and a quarter of the time of a parse (a `re.fullmatch` per whitespace node). Trees
    built this way are `deep_equals` to validated ones (tests/test_parsing_speed.py).
    Nodes built while this is on in another thread skip the check too; what fixes build
    is re-parsed before it is written, so a malformed node still cannot reach a file.
    """
    global _UNVALIDATED_PARSES
    with _UNVALIDATED_LOCK:
        _UNVALIDATED_PARSES += 1
        cst.CSTNode.__post_init__ = _skip_validation  # type: ignore[method-assign]
    try:
        yield
    finally:
        with _UNVALIDATED_LOCK:
            _UNVALIDATED_PARSES -= 1
            if _UNVALIDATED_PARSES == 0:
                cst.CSTNode.__post_init__ = _VALIDATING_POST_INIT  # type: ignore[method-assign]


def size_problem(size: int, without_data: int | None = None) -> str:
    """Why a text of `size` characters is refused (`without_data`: what is left once its
    literal data is set aside), or "" (within the limit)."""
    if size > MAX_SOURCE_BYTES and (without_data is None or without_data > MAX_SOURCE_BYTES):
        limit = MAX_SOURCE_BYTES >> 20
        left = ""
        sizes = f"{size / (1 << 20):.1f} MB"
        if without_data is not None and f"{without_data / (1 << 20):.1f} MB" != sizes:
            left = f"; {without_data / (1 << 20):.1f} MB without its literal data"
        return f"larger than {limit} MB ({sizes}{left}), too large for the parser; not checked"
    return ""


def large_file_data(text: str) -> tuple[DataCut, ...]:
    """The literal data to take out of a text over MAX_SOURCE_BYTES so LibCST may parse it.

    Raises ParseRefused (the reason) when what remains is still over the limit, when the
    text is nested too deeply, or when Python's parser rejects it (a syntax error in a file
    this large is not worth LibCST's time: reported as too large, as before).
    """
    try:
        tree = ast.parse(text)
    except (RecursionError, MemoryError):
        raise ParseRefused(
            "too deeply nested for the parser (deeper than Python's own limit); not checked"
        ) from None
    except (SyntaxError, ValueError):
        raise ParseRefused(size_problem(len(text))) from None
    data = data_cuts(text, tree)
    del tree  # a table module's tree is millions of nodes
    problem = size_problem(len(text), len(text) - sum(cut.end - cut.start for cut in data))
    if problem:
        raise ParseRefused(problem)
    view, _ = libcst_view(text, data)
    try:  # a wrong cut would be a bug here: refuse the file rather than report on it
        view_tree = ast.parse(view)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise ParseRefused(size_problem(len(text))) from None
    # The depth that matters is that of what LibCST parses: the view.
    if could_be_deeply_nested(view):
        depth = tree_depth(view_tree)
        if depth > MAX_NESTING:
            raise ParseRefused(
                f"too deeply nested for the parser (depth {depth} > {MAX_NESTING}); not checked"
            )
    return data


_DISPLAYS = (ast.List, ast.Tuple, ast.Set, ast.Dict)
_SIGNS = (ast.UAdd, ast.USub)


def data_cuts(text: str, tree: ast.AST) -> tuple[DataCut, ...]:
    """Interiors of the displays of constants in `tree` at least MIN_DATA_DISPLAY long.

    A display of constants: a list, set, dict or parenthesized tuple whose elements are all
    numbers, strings, bytes, None/True/False, a sign before a number, or such displays. Its
    first element (itself cut down when it is such a display) and the comma after it stay,
    so the display keeps its type and LibCST's tree its shape: `[[+1, -1], [-1, +1]]` is
    seen as `[[+1,],]`.
    """
    positions = _Positions(text)
    cuts: list[DataCut] = []
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, _DISPLAYS) and _all_constant(node):
            _cut_display(text, positions, node, cuts)
            continue
        stack.extend(ast.iter_child_nodes(node))
    cuts.sort(key=lambda cut: cut.start)
    return tuple(cuts)


def _all_constant(display: ast.AST) -> bool:
    stack = [display]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Constant):
            continue
        if isinstance(node, ast.UnaryOp):
            if not (isinstance(node.op, _SIGNS) and isinstance(node.operand, ast.Constant)):
                return False
        elif isinstance(node, ast.Dict):
            if any(key is None for key in node.keys):  # `**mapping`
                return False
            stack.extend(node.keys)  # type: ignore[arg-type]
            stack.extend(node.values)
        elif isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            stack.extend(node.elts)
        else:
            return False
    return True


def _cut_display(text: str, positions: _Positions, node: ast.expr, cuts: list[DataCut]) -> None:
    """Cut `node`'s interior after its first element (and that element's, recursively)."""
    start = positions.offset(node.lineno, node.col_offset)
    end = positions.offset(node.end_lineno or node.lineno, node.end_col_offset or 0)
    if end - start < MIN_DATA_DISPLAY:
        return
    if isinstance(node, ast.Dict):
        if len(node.keys) < 2 or node.keys[0] is None:
            return
        first, head = node.values[0], node.keys[0]
    elif isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        if len(node.elts) < 2:
            return
        first = head = node.elts[0]
    else:
        return
    first_end = positions.offset(first.end_lineno or first.lineno, first.end_col_offset or 0)
    before = _significant(text, start, positions.offset(head.lineno, head.col_offset))
    after, comma = _through_comma(text, first_end)
    if comma < 0 or before is None or after is None:
        return
    if isinstance(node, ast.Tuple) and not (before.count("(") > after.count(")")):
        return  # no parentheses of its own (`x = (1), (2)`): no bracket to keep
    if text[end - 1] not in ")]}" or comma + 1 >= end - 1:
        return
    inner: list[DataCut] = []
    if isinstance(first, _DISPLAYS):
        _cut_display(text, positions, first, inner)
    kept = text[start : comma + 1]
    for cut in reversed(inner):
        kept = kept[: cut.start - start] + kept[cut.end - start :]
    cuts.extend(inner)
    cuts.append(DataCut(comma + 1, end - 1, kept + text[end - 1]))


def _significant(text: str, start: int, end: int) -> str | None:
    """The characters of `text[start:end]` that are not whitespace, line continuations or
    comments; None if a string or anything but brackets is there."""
    out: list[str] = []
    index = start
    while index < end:
        character = text[index]
        if character == "#":
            newline = _LINE_BREAK.search(text, index)
            index = newline.start() if newline else len(text)
            continue
        if character in " \t\f\r\n\\":
            index += 1
            continue
        if character not in "([{":
            return None
        out.append(character)
        index += 1
    return "".join(out)


def _through_comma(text: str, index: int) -> tuple[str | None, int]:
    """From the end of an element: the closing parentheses before the comma that follows,
    and the comma's offset (-1: no comma, or something else first)."""
    out: list[str] = []
    while index < len(text):
        character = text[index]
        if character == "#":
            newline = _LINE_BREAK.search(text, index)
            index = newline.start() if newline else len(text)
            continue
        if character in " \t\f\r\n\\":
            index += 1
            continue
        if character == ",":
            return "".join(out), index
        if character != ")":
            return None, -1
        out.append(character)
        index += 1
    return None, -1


class _Positions:
    """`ast` positions (1-based line, UTF-8 byte column) -> character offsets in a text."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = [0] + [match.end() for match in _LINE_BREAK.finditer(text)]
        self.ascii = text.isascii()

    def offset(self, row: int, column: int) -> int:
        line_start = self.starts[row - 1]
        if self.ascii:
            return line_start + column
        line_end = self.starts[row] if row < len(self.starts) else len(self.text)
        line = self.text[line_start:line_end]
        if line.isascii():
            return line_start + column
        return line_start + len(line.encode("utf-8")[:column].decode("utf-8", "replace"))


def nesting_problem(text: str) -> str | None:
    """Why LibCST must not parse `text` (nested deeper than it copes with), or None."""
    if not could_be_deeply_nested(text):
        return None
    try:
        tree = ast.parse(text)
    except (RecursionError, MemoryError):
        return "too deeply nested for the parser (deeper than Python's own limit); not checked"
    except (SyntaxError, ValueError):
        return None  # LibCST reports the syntax error itself
    depth = tree_depth(tree)
    if depth > MAX_NESTING:
        return f"too deeply nested for the parser (depth {depth} > {MAX_NESTING}); not checked"
    return None


def could_be_deeply_nested(text: str) -> bool:
    """The cheap screen: False when no expression in `text` can be deeper than MAX_NESTING.

    Such depth needs that many operators, dots or brackets in one logical line: on one long
    physical line, or on a long run of lines that each begin (or each end) like the middle
    of an expression, as generated or hand-formatted chains are written.
    """
    return bool(
        _LONG_LINE.search(text)
        or _RUN_OF_LINES_STARTING_MID_EXPRESSION.search(text)
        or _REVERSED_RUN_OF_LINES_ENDING_MID_EXPRESSION.search(text[::-1])
    )


def tree_depth(tree: ast.AST) -> int:
    deepest = 0
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


def libcst_view(text: str, data: tuple[DataCut, ...] = ()) -> tuple[str, OffsetMap]:
    """The text LibCST can parse and regenerate exactly, and the map back to `text`
    (`data`: interiors of literal data to leave out as well, see `data_cuts`)."""
    if "\f" not in text and not (text.endswith("\r")) and not data:
        return text, IDENTITY
    cuts: list[tuple[int, int]] = []  # (offset in the original, size)
    if "\f" in text:
        cuts = _form_feed_cuts(text)
    if data:  # form feeds are cut at statement starts, never inside brackets: disjoint
        cuts = sorted(cuts + [(cut.start, cut.end - cut.start) for cut in data])
    pieces, cursor, mapped = [], 0, []
    removed = 0
    for offset, size in cuts:
        pieces.append(text[cursor:offset])
        mapped.append((offset - removed, size))
        removed += size
        cursor = offset + size
    pieces.append(text[cursor:])
    view = "".join(pieces)
    if view.endswith("\r"):  # a final lone CR: LibCST drops it; as "\n" it is kept
        view = view[:-1] + "\n"
    return view, OffsetMap(tuple(mapped))


def _form_feed_cuts(text: str) -> list[tuple[int, int]]:
    """The whitespace up to the last form feed before each statement's first token.

    Python ignores it (a form feed resets the indentation count); LibCST drops it. Lines
    inside strings, brackets or continuations are not statement starts and keep theirs.
    """
    starts = [0] + [match.end() for match in _LINE_BREAK.finditer(text)]
    cuts = []
    at_statement_start = True
    skip = (
        tokenize.NL,
        tokenize.COMMENT,
        tokenize.INDENT,
        tokenize.DEDENT,
        tokenize.ENCODING,
        tokenize.ENDMARKER,
    )
    # Python's tokenize module takes a lone CR for no line end (Python's parser does): as
    # LF, which keeps every offset, it tokenizes as Python parses.
    readable = _LONE_CR.sub("\n", text) if "\r" in text else text
    try:
        for token in tokenize.generate_tokens(io.StringIO(readable, newline="").readline):
            if token.type == tokenize.NEWLINE:
                at_statement_start = True
            elif at_statement_start and token.type not in skip:
                at_statement_start = False
                row, column = token.start
                if row > len(starts):
                    break
                line_start = starts[row - 1]
                last = text.rfind("\f", line_start, line_start + column)
                if last >= 0:
                    cuts.append((line_start, last + 1 - line_start))
    except (tokenize.TokenError, SyntaxError):
        return []  # LibCST will report the error, or the round-trip check refuses the file
    return cuts


@dataclass(frozen=True)
class TabExpansion:
    """A copy of a text whose leading tabs are expanded as Python's tokenizer reads them.

    LibCST's tokenizer rejects some indentation that mixes tabs and spaces and that Python
    accepts ("no matching outer block for dedent"). Python reads a tab in a line's leading
    whitespace as a move to the next multiple of 8 columns (a form feed restarts the count),
    so the copy with those tabs replaced by spaces has the same blocks; it has the same lines,
    only columns on changed lines differ. The copy is for reading: never written, never fixed.
    """

    text: str
    original_starts: tuple[int, ...]
    expanded_starts: tuple[int, ...]
    changed: dict[int, tuple[str, str]]  # row (1-based) -> (leading whitespace, expanded)

    def column(self, row: int, column: int) -> int:
        """0-based `column` on `row` of the copy -> the column in the original line."""
        change = self.changed.get(row)
        if change is None:
            return column
        original, expanded = change
        if column >= len(expanded):
            return column - len(expanded) + len(original)
        for index in range(len(original)):
            if column < len(_expand_leading(original[: index + 1])):
                return index
        return len(original)

    def offset(self, offset: int) -> int:
        """An offset in the copy -> the offset in the original text."""
        row = bisect_right(self.expanded_starts, offset)
        column = offset - self.expanded_starts[row - 1]
        return self.original_starts[row - 1] + self.column(row, column)


_LEADING_WHITESPACE = compile_lazily(r"[ \t\f]*")


def _expand_leading(whitespace: str) -> str:
    pieces, column = [], 0
    for character in whitespace:
        if character == "\t":
            width = 8 - column % 8
            pieces.append(" " * width)
            column += width
        elif character == "\f":
            pieces.append(character)
            column = 0
        else:
            pieces.append(character)
            column += 1
    return "".join(pieces)


def expand_leading_tabs(text: str) -> TabExpansion | None:
    """The copy of `text` with leading tabs expanded, or None unless its indentation mixes
    tabs and spaces (then there is nothing to expand, or expanding cannot help)."""
    if "\t" not in text:
        return None
    starts = [0] + [match.end() for match in _LINE_BREAK.finditer(text)]
    if starts[-1] == len(text):
        starts.pop()
    ends = starts[1:] + [len(text)]
    pieces, expanded_starts, changed = [], [], {}
    has_spaces = has_tabs = False
    length = 0
    for row, (start, end) in enumerate(zip(starts, ends), 1):
        line = text[start:end]
        match = _LEADING_WHITESPACE.match(line)
        leading = match.group() if match else ""
        expanded_starts.append(length)
        if "\t" in leading:
            has_tabs = True
            wide = _expand_leading(leading)
            changed[row] = (leading, wide)
            line = wide + line[len(leading) :]
        if " " in leading:
            has_spaces = True
        pieces.append(line)
        length += len(line)
    if not (has_tabs and has_spaces):
        return None
    return TabExpansion("".join(pieces), tuple(starts), tuple(expanded_starts), changed)


def python_syntax_error(text: str, path: str = "<unknown>") -> SyntaxError | None:
    """Python's own SyntaxError for `text`, or None when this interpreter accepts it."""
    try:
        compile(text, path, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as error:
        return error
    except ValueError as error:  # null bytes, on some versions
        return SyntaxError(str(error))
    except (RecursionError, MemoryError):
        return None
    return None
