"""Re-parsing an edited buffer without re-parsing what did not change (the language server).

An editor sends the whole buffer after every keystroke; most of it is what the last lint
parsed. `DocumentParser.parse(text)` gives exactly the tree `cst.parse_module(text)` gives,
re-parsing only a window of top-level statements around the edit and reusing the other
statement nodes of the previous tree (the same objects, so their positions are reused too).

Why the result equals a full parse: Python's tokenizer and parser are at a clean top-level
state at the boundary between two top-level statements, so a statement's tree is decided by
its own text and by where its neighbours' trivia (comment and blank lines) end. The window
is the changed text plus one unchanged statement on each side (the seams); it is parsed
after a dummy prefix that sets the module's own default newline and indentation and owns
no trailing lines. The splice is used only if each seam parses to a tree equal
(`deep_equals`) to the old one, the window's detected newline and indentation are those of
the whole text, and the generated code of every re-parsed statement is exactly its text;
otherwise, and for text LibCST sees differently (form feeds, a final lone CR), it is a full
parse. Guards (size, nesting depth) run on the whole text every time, as in
`parsing.parse_exact`.
"""

from __future__ import annotations

import io
import threading
import tokenize
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate

import libcst as cst

from lifetime_lint.lazy_regex import compile_lazily
from lifetime_lint.parsing import (
    IDENTITY,
    ParsedSource,
    ParseRefused,
    nesting_problem,
    parse_exact,
    size_problem,
)
from lifetime_lint.traversal import NodeOffsets, _TokenRangeState

_FIRST_NEWLINE = compile_lazily(r"\r\n?|\n")


@dataclass
class _Chunk:
    """One top-level statement's (or the header's/footer's) node ranges, relative to its
    own start: token ranges and the prefix sums of the token lengths."""

    ranges: dict[cst.CSTNode, tuple[int, int]]
    offsets: list[int]
    code: str

    @property
    def length(self) -> int:
        return self.offsets[-1]

    @classmethod
    def of(cls, nodes: Sequence[cst.CSTNode], module: cst.Module) -> _Chunk:
        state = _TokenRangeState(module)
        for node in nodes:
            node._codegen(state)
        return cls(
            state.ranges,
            list(accumulate(map(len, state.tokens), initial=0)),
            "".join(state.tokens),
        )


class ChunkedOffsets(NodeOffsets):
    """`traversal.NodeOffsets` of a module assembled from chunks (same answers), without a
    code generation of the whole module."""

    def __init__(self, module: cst.Module, chunks: list[_Chunk]) -> None:
        self._chunks = chunks
        self._bases = list(accumulate((chunk.length for chunk in chunks), initial=0))
        self._module = module

    def reproduces(self, text: str) -> bool:
        return True  # checked chunk by chunk when the module was assembled

    def __getitem__(self, node: cst.CSTNode) -> tuple[int, int]:
        if node is self._module:
            return 0, self._bases[-1]
        for base, chunk in zip(self._bases, self._chunks):
            found = chunk.ranges.get(node)
            if found is not None:
                return base + chunk.offsets[found[0]], base + chunk.offsets[found[1]]
        raise KeyError(node)

    def __contains__(self, node: object) -> bool:
        return node is self._module or any(node in chunk.ranges for chunk in self._chunks)


@dataclass
class _Document:
    text: str
    module: cst.Module
    header: _Chunk
    statements: list[_Chunk]  # one per top-level statement
    footer: _Chunk

    def ends(self) -> list[int]:
        """End offset of each top-level statement in `text`."""
        return list(
            accumulate((chunk.length for chunk in self.statements), initial=self.header.length)
        )[1:]

    def offsets(self) -> ChunkedOffsets:
        return ChunkedOffsets(self.module, [self.header, *self.statements, self.footer])


class DocumentParser:
    """Parses successive versions of one document, reusing the unchanged statements."""

    def __init__(self) -> None:
        self._last: _Document | None = None
        self._lock = threading.Lock()
        self.reparsed_statements = 0  # of the latest parse (for tests and benchmarks)

    def parse(self, text: str) -> tuple[ParsedSource, ChunkedOffsets | None]:
        """What `parsing.parse_exact(text)` gives, and the node offsets when they are known
        (None: let the caller compute them as for any parse). Raises as parse_exact does."""
        with self._lock:
            problem = size_problem(len(text)) or nesting_problem(text)
            if problem:
                self._last = None
                raise ParseRefused(problem)
            if "\f" in text or text.endswith("\r") or not text.endswith(("\n", "\r\n")):
                # LibCST's view differs from the text, or a final newline is missing (which
                # LibCST's code generation treats specially): no reuse, a plain parse.
                self._last = None
                return parse_exact(text), None
            document = None
            if self._last is not None:
                document = self._splice(self._last, text)
            if document is None:
                parsed = parse_exact(text)  # raises on a syntax error, as a full lint does
                self.reparsed_statements = len(parsed.module.body)
                self._last = _whole(text, parsed.module)
                return parsed, self._last.offsets() if self._last is not None else None
            self._last = document
            return ParsedSource(document.module, text, IDENTITY), document.offsets()

    def _splice(self, old: _Document, text: str) -> _Document | None:
        before = old.text
        if text == before:
            self.reparsed_statements = 0
            return old
        limit = min(len(before), len(text))
        prefix = _common_prefix(before, text, limit)
        suffix = _common_suffix(before, text, limit - prefix)
        ends = old.ends()
        starts = [old.header.length, *ends[:-1]]
        count = len(ends)
        first_changed = bisect_right(ends, prefix)  # statements before it are unchanged
        left = first_changed - 1  # the left seam (-1: the window starts the file)
        right = bisect_left(starts, len(before) - suffix)  # the right seam (count: none)
        if left < 0 and right >= count:
            return None  # the edit spans the file: a full parse is no more work
        delta = len(text) - len(before)
        window_start = 0 if left < 0 else starts[left]
        window_end = len(text) if right >= count else ends[right] + delta
        newline = _first_newline(text)
        indent = _first_indent(text)
        if indent is None or newline is None:
            return None
        dummy = f"if 1:{newline}{indent}pass{newline}pass{newline}" if left >= 0 else ""
        try:
            window = cst.parse_module(dummy + text[window_start:window_end])
        except (cst.ParserSyntaxError, RecursionError):
            return None  # the full parse reports it as a full lint would
        if window.default_newline != newline or window.default_indent != indent:
            return None
        body = list(window.body)
        if left >= 0:
            if (
                len(body) < 3
                or window.header
                or not isinstance(body[0], cst.If)
                or not isinstance(body[1], cst.SimpleStatementLine)
                or not body[2].deep_equals(old.module.body[left])
            ):
                return None
            body = body[2:]
            body[0] = old.module.body[left]
        if right < count:
            if not body or not body[-1].deep_equals(old.module.body[right]):
                return None
            body[-1] = old.module.body[right]
        if left >= 0 and right < count and len(body) < 2:
            return None  # the seams overlap: not a split this parse would make
        middle = body[(1 if left >= 0 else 0) : (len(body) - 1 if right < count else len(body))]
        reused_before = list(old.module.body[: max(left, 0)]) + ([body[0]] if left >= 0 else [])
        reused_after = ([body[-1]] if right < count else []) + list(old.module.body[right + 1 :])
        module = cst.Module(
            body=[*reused_before, *middle, *reused_after],
            header=old.module.header if left >= 0 else window.header,
            footer=old.module.footer if right < count else window.footer,
            encoding=old.module.encoding,
            default_indent=indent,
            default_newline=newline,
            has_trailing_newline=True,
        )
        header = old.header if left >= 0 else _Chunk.of(module.header, module)
        footer = old.footer if right < count else _Chunk.of(module.footer, module)
        fresh = [_Chunk.of([statement], module) for statement in middle]
        statements = (
            old.statements[: max(left, 0)]
            + ([old.statements[left]] if left >= 0 else [])
            + fresh
            + ([old.statements[right]] if right < count else [])
            + old.statements[right + 1 :]
        )
        document = _Document(text, module, header, statements, footer)
        # Every re-parsed statement (and a new header or footer) must be exactly its text.
        if left < 0 and not text.startswith(header.code):
            return None
        cursor = header.length
        first_fresh = len(reused_before)
        for index, chunk in enumerate(statements):
            if first_fresh <= index < first_fresh + len(middle) and not text.startswith(
                chunk.code, cursor
            ):
                return None
            cursor += chunk.length
        if right >= count and not text.startswith(footer.code, cursor):
            return None
        if cursor + footer.length != len(text):
            return None
        self.reparsed_statements = len(middle) + (left >= 0) + (right < count)
        return document


def _whole(text: str, module: cst.Module) -> _Document | None:
    """The chunks of a fully parsed module, or None unless their code is exactly the text."""
    header = _Chunk.of(module.header, module)
    statements = [_Chunk.of([statement], module) for statement in module.body]
    footer = _Chunk.of(module.footer, module)
    code = header.code + "".join(chunk.code for chunk in statements) + footer.code
    if code != text or not module.has_trailing_newline:
        return None  # LibCST does not reproduce it: positions as a full lint finds them
    return _Document(text, module, header, statements, footer)


def _common_prefix(a: str, b: str, limit: int) -> int:
    low, high = 0, limit
    while low < high:  # binary search on slice equality (C speed)
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def _common_suffix(a: str, b: str, limit: int) -> int:
    low, high = 0, limit
    while low < high:
        middle = (low + high + 1) // 2
        if a[len(a) - middle :] == b[len(b) - middle :]:
            low = middle
        else:
            high = middle - 1
    return low


def _first_newline(text: str) -> str | None:
    match = _FIRST_NEWLINE.search(text)
    return match.group(0) if match else None


def _first_indent(text: str) -> str | None:
    """The whitespace of the first INDENT token (LibCST's default indent), "    " if there is
    none; None if the text does not tokenize (the full parse then reports the error)."""
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.INDENT:
                return token.string
    except (tokenize.TokenError, SyntaxError):
        return None
    return "    "
