"""The language server's incremental parse: the same tree, positions and findings as a full
lint after every kind of edit, while re-parsing only the statements around the edit."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import libcst as cst
import pytest

from lifetime_lint.config import Settings
from lifetime_lint.engine import Linter
from lifetime_lint.incremental import DocumentParser
from lifetime_lint.server import LintService
from lifetime_lint.traversal import NodeOffsets, walk

FIXTURES = Path(__file__).parent / "fixtures"

HEAD = textwrap.dedent(
    """\
    # A model file.
    import torch
    import torch.nn as nn


    class Block(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.proj = nn.Linear(dim, dim)

        def forward(self, x):
            return self.proj(x)


    def decode(vae, latents):
        video = vae.decode(latents).sample
        torch.cuda.empty_cache()
        return video
    """
)


def _module_text() -> str:
    """A long module made of real fixture code (findings of several rules)."""
    pieces = [HEAD]
    for code in ("LL001", "LL004", "LL005", "LL006"):
        for path in sorted((FIXTURES / code).glob("*.py"))[:4]:
            if not path.name.endswith(".fixed.py"):
                pieces.append(path.read_text())
    return "\n\n".join(pieces)


def _edits(text: str) -> list[tuple[str, str]]:
    """(label, new text): each applied to the text before it."""
    edits = []
    lines = text.splitlines(keepends=True)
    inside = lines.index("        return self.proj(x)\n")
    empty_cache = lines.index("    torch.cuda.empty_cache()\n")

    def with_lines(new: list[str]) -> str:
        return "".join(new)

    current = list(lines)
    current[inside] = "        return self.proj(x) * 2  # scaled\n"
    edits.append(("edit inside a method", with_lines(current)))
    current.insert(empty_cache + 1, "    torch.cuda.synchronize()\n")
    edits.append(("new finding inside a function", with_lines(current)))
    current.insert(3, "import torch.distributed as dist\n")
    edits.append(("import added", with_lines(current)))

    def top_level_boundary() -> int:  # a top-level `def` in the middle of the module
        starts = [i for i, line in enumerate(current) if line.startswith(("def ", "class "))]
        return starts[len(starts) // 2]

    current.insert(top_level_boundary(), "CONSTANT = 3  # outside functions\n\n\n")
    edits.append(("statement between functions", with_lines(current)))
    current.insert(top_level_boundary(), "    # an indented comment between top-level code\n")
    edits.append(("indented comment at top level", with_lines(current)))
    broken = list(current)
    broken[empty_cache] = "    torch.cuda.empty_cache(\n"
    edits.append(("syntax error", with_lines(broken)))
    edits.append(("syntax error fixed", with_lines(current)))
    del current[empty_cache]
    edits.append(("finding removed", with_lines(current)))
    current.append("\n# a trailing comment\n")
    edits.append(("comment appended", with_lines(current)))
    current[1] = "import torch  # the header's neighbour changes\n"
    edits.append(("first statement edited", with_lines(current)))
    edits.append(("CRLF", with_lines(current).replace("\n", "\r\n")))
    edits.append(("back to LF", with_lines(current)))
    edits.append(("no final newline", with_lines(current).rstrip("\n")))
    edits.append(("final newline back", with_lines(current)))
    return edits


def _full_parse(text: str) -> cst.Module | None:
    try:
        return cst.parse_module(text)
    except cst.ParserSyntaxError:
        return None


def test_every_edit_gives_the_tree_and_positions_of_a_full_parse() -> None:
    parser = DocumentParser()
    original = _module_text()
    parser.parse(original)
    reused = 0
    for label, text in _edits(original):
        full = _full_parse(text)
        if full is None:
            with pytest.raises(cst.ParserSyntaxError):
                parser.parse(text)
            continue
        parsed, offsets = parser.parse(text)
        assert parsed.module.deep_equals(full), label
        assert parsed.module.code == text, label
        # deep_equals covers header and footer; the detected settings are plain values.
        for attribute in ("default_indent", "default_newline", "has_trailing_newline"):
            assert getattr(parsed.module, attribute) == getattr(full, attribute), label
        if offsets is not None:
            reference = NodeOffsets(parsed.module)
            nodes: list[cst.CSTNode] = []
            walk(parsed.module, nodes.append, lambda node: None)
            assert all(offsets[node] == reference[node] for node in nodes), label
        if parser.reparsed_statements < len(full.body) // 2:
            reused += 1
    assert reused >= 6  # local edits re-parse only a few statements


def _as_dicts(diagnostics: list) -> list[tuple]:
    return [
        (d.code, d.start, d.end, d.message, d.span, d.fix and (d.fix.applicability, d.fix.edits))
        for d in diagnostics
    ]


def test_the_server_lints_each_edit_exactly_as_a_full_lint(tmp_path: Path) -> None:
    path = str(tmp_path / "model.py")
    service = LintService()
    full_linter = Linter(Settings())
    original = _module_text()
    assert service.lint(path, original)  # the module has findings
    errors = 0
    for label, text in _edits(original):
        incremental = service.lint(path, text)
        full, error = full_linter.lint_text(path, text)
        expected = [error] if error is not None else full
        assert _as_dicts(incremental) == _as_dicts(expected), label
        errors += any(d.is_error for d in incremental)
    assert errors == 1  # the syntax error, reported as a full lint reports it


def test_server_result_equals_check_of_the_same_text(tmp_path: Path) -> None:
    """Against the real command line, after a series of edits."""
    path = tmp_path / "model.py"
    service = LintService()
    original = _module_text()
    service.lint(str(path), original)
    text, incremental = original, []
    for _, text in _edits(original):
        incremental = service.lint(str(path), text)
    path.write_text(text)
    completed = subprocess.run(
        [sys.executable, "-m", "lifetime_lint", "check", "--isolated", "--no-cache",
         "--output-format", "json", "--exit-zero", str(path)],
        capture_output=True, text=True, check=True, cwd=tmp_path,
    )  # fmt: skip
    reported = json.loads(completed.stdout)
    assert [(d["code"], d["location"]["row"], d["message"]) for d in reported] == [
        (d.code, d.start.row, d.message) for d in incremental
    ]
    assert incremental
