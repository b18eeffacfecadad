"""A module over the parser's 1 MB limit whose size is literal data (Hadamard matrices,
lookup tables) is linted without the data's interiors, at the file's own positions; its
fixes never touch the data. One whose size is code is still refused, saying why."""

from __future__ import annotations

import ast
import os
import random
import subprocess
import sys

import libcst as cst
import pytest
from click.testing import CliRunner

from lifetime_lint import parsing
from lifetime_lint.cli import main
from lifetime_lint.diagnostics import Diagnostic, Edit, Fix, Location
from lifetime_lint.engine import DATA_NOTE, Linter
from lifetime_lint.parsing import DataCut, data_cuts, libcst_view, parse_exact

GUARDED = (
    "def offload(pipe):\n"
    '    pipe.text_encoder.to("cpu")\n'
    "    if torch.cuda.is_available():\n"
    "        torch.cuda.empty_cache()\n"
    "    return pipe\n"
)


def _table(name: str, size: int, seed: int) -> str:
    pick = random.Random(seed).choice
    rows = ["[" + ", ".join(pick(("+1", "-1")) for _ in range(size)) + "]" for _ in range(size)]
    return (
        f"def {name}():\n"
        "    # a known Hadamard matrix\n"
        "    return torch.FloatTensor([\n        " + ",\n        ".join(rows) + ",\n    ])\n\n\n"
    )


def _module(size: int, tables: int = 10) -> str:
    head = '"""Known Hadamard matrices (généré)."""\nimport torch\n\nSCALES = {"a": (1, 2), "b": [3]}\n\n\n'
    body = "".join(_table(f"get_had{i}", size, i) for i in range(tables))
    return head + body + GUARDED


def run(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def _tables(text: str) -> list[str]:
    return [text[a:b] for a, b in _table_spans(text)]


def _table_spans(text: str) -> list[tuple[int, int]]:
    spans, start = [], 0
    while True:
        start = text.find("torch.FloatTensor([", start)
        if start < 0:
            return spans
        end = text.index("])", start) + 2
        spans.append((start, end))
        start = end


def test_a_large_table_module_is_linted_at_the_right_place_and_fixed_like_a_small_one(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    big, small = _module(200), _module(2)
    assert len(big) > 1.5 * (1 << 20) > parsing.MAX_SOURCE_BYTES > len(small)
    (tmp_path / "big.py").write_text(big)
    (tmp_path / "small.py").write_text(small)
    lines = big.splitlines()
    row = next(i for i, line in enumerate(lines, 1) if "empty_cache" in line)
    result = run("check", "big.py")
    assert result.exit_code == 1, result.output
    assert f"big.py:{row}:9: LL004 " in result.output
    assert "E902" not in result.output

    assert run("check", "--fix", "big.py").exit_code == 0
    assert run("check", "--fix", "small.py").exit_code == 0
    fixed_big = (tmp_path / "big.py").read_text()
    fixed_small = (tmp_path / "small.py").read_text()
    assert "reclaim()" in fixed_big
    # The data bytes are unchanged, and with the small tables put back where the large
    # ones were, the fixed file is the fixed small module.
    assert _tables(fixed_big) == _tables(big)
    restored = fixed_big
    for (start, end), table in reversed(list(zip(_table_spans(fixed_big), _tables(fixed_small)))):
        restored = restored[:start] + table + restored[end:]
    assert restored == fixed_small
    # Idempotent; and the fixed file runs.
    assert run("check", "--fix", "big.py").exit_code == 0
    assert (tmp_path / "big.py").read_text() == fixed_big
    code = (
        "import runpy, sys\nns = runpy.run_path(sys.argv[1])\n"
        "print(ns['get_had9']().shape, ns['offload'].__name__)\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code, "big.py"],
        capture_output=True,
        text=True,
        env=dict(os.environ, CUDA_VISIBLE_DEVICES=""),
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == "torch.Size([200, 200]) offload\n"


def test_a_large_data_file_no_longer_fails_the_run(tmp_path):
    """The real command line, as a pre-commit hook runs it: exit 0, nothing refused."""
    text = _module(200).replace(GUARDED, "")
    (tmp_path / "tables.py").write_text(text)
    completed = subprocess.run(
        [sys.executable, "-m", "lifetime_lint", "check", "--statistics", "tables.py"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "E902" not in completed.stdout + completed.stderr


def test_a_module_large_with_code_is_still_refused_and_says_why(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = "".join(
        f"def step{i}(model, batch):\n    out = model(batch)\n    return out.sum() + {i}\n\n\n"
        for i in range(20_000)
    )
    text = "import torch\n\n\n" + code + "torch.cuda.empty_cache()\n" + _table("t", 300, 1)
    assert len(text) > parsing.MAX_SOURCE_BYTES
    (tmp_path / "big.py").write_text(text)
    result = run("check", "--fix", "big.py")
    assert result.exit_code == 2
    assert (
        "big.py:1:1: E902 Failed to parse big.py: larger than 1 MB (1.9 MB; 1.6 MB without its "
        "literal data), too large for the parser; not checked" in result.output
    )
    (tmp_path / "code.py").write_text(text.replace(_table("t", 300, 1), ""))
    result = run("check", "code.py")
    assert result.exit_code == 2
    assert (
        "code.py:1:1: E902 Failed to parse code.py: larger than 1 MB (1.6 MB), too large for "
        "the parser; not checked" in result.output
    )
    assert (tmp_path / "big.py").read_text() == text


def test_cuts_keep_each_display_its_first_element_and_map_back_exactly():
    rows = ", ".join("[" + ", ".join(["+1", "-1"] * 40) + "]" for _ in range(4))
    text = (
        "T = (  # comment, with (parens)\n    (1), " + ", ".join(["2"] * 200) + ",\n)\n"
        f"M = [{rows}]\n"
        'D = {"k": 0, ' + ", ".join([f'"v{i}": -{i}.5' for i in range(60)]) + "}\n"
        "S = {b'x', " + ", ".join(["b'yy'"] * 80) + "}\n"
        "U = (1), " + ", ".join(["(2)"] * 150) + "\n"  # no parentheses of its own: kept
        "small = ['cuda', 'cpu']\n"
        "f(x, [" + ", ".join(["'é'"] * 100) + "])\n"
    )
    cuts = data_cuts(text, ast.parse(text))
    view, offsets = libcst_view(text, cuts)
    assert view == (
        "T = (  # comment, with (parens)\n    (1),)\n"
        "M = [[+1,],]\n"
        'D = {"k": 0,}\n'
        "S = {b'x',}\n"
        "U = (1), " + ", ".join(["(2)"] * 150) + "\n"
        "small = ['cuda', 'cpu']\n"
        "f(x, ['é',])\n"
    )
    assert [cut.remnant for cut in cuts] == [
        "(  # comment, with (parens)\n    (1),)",
        "[+1,]",
        "[[+1,],]",
        '{"k": 0,}',
        "{b'x',}",
        "['é',]",
    ]
    module = cst.parse_module(view)
    assert module.code == view
    # Every character kept maps back to the same character of the original.
    for index, character in enumerate(view):
        assert text[offsets.start(index)] == character


def test_parse_exact_sets_the_data_aside_only_over_the_limit():
    small = "X = [" + ", ".join(["1"] * 500) + "]\n"
    assert parse_exact(small).data == ()
    assert parse_exact(small).parse_text == small
    big = small * (parsing.MAX_SOURCE_BYTES // len(small) + 1)
    parsed = parse_exact(big)
    assert len(parsed.data) == big.count("X = ")
    assert parsed.parse_text == "X = [1,]\n" * big.count("X = ")


def _finding(edit: Edit) -> Diagnostic:
    return Diagnostic(
        code="LL004",
        name="x",
        message="m",
        path="p.py",
        start=Location(1, 1),
        end=Location(1, 1),
        fix=Fix("f", (edit,)),
    )


def test_no_fix_edits_or_copies_the_data():
    cut = DataCut(10, 20, "[1, ]")
    kept = [
        _finding(Edit(0, 5, "x")),
        _finding(Edit(5, 10, "x")),  # ends where the cut starts
        _finding(Edit(20, 21, "x")),  # starts where it ends
        _finding(Edit(10, 10, "x")),  # insertions at its ends
        _finding(Edit(20, 20, "x")),
    ]
    dropped = [
        _finding(Edit(5, 11, "x")),
        _finding(Edit(19, 25, "x")),
        _finding(Edit(0, 30, "x")),
        _finding(Edit(15, 15, "x")),
        _finding(Edit(40, 41, "y = [1, ]")),  # a copy of the cut-down display
    ]
    linter = Linter.__new__(Linter)
    linter.last_left_out = {}
    linter._keep_data_intact(kept + dropped, (cut,))
    assert all(d.fix is not None for d in kept)
    assert all(d.fix is None for d in dropped)
    assert linter.last_left_out == {DATA_NOTE: len(dropped)}


def test_a_large_data_file_with_deeply_nested_code_is_still_refused(tmp_path, monkeypatch):
    """The depth that matters is that of what LibCST would parse; the data does not hide it."""
    monkeypatch.chdir(tmp_path)
    text = _module(200) + "x = " + "+".join(["1"] * 8000) + "\n"
    (tmp_path / "big.py").write_text(text)
    result = run("check", "big.py")
    assert result.exit_code == 2
    assert "big.py:1:1: E902 Failed to parse big.py: too deeply nested for the parser" in (
        result.output
    )


def test_beyond_four_megabytes_a_data_file_is_refused_before_any_parse(monkeypatch):
    """Python's own tree of a dense table takes ~400 MB per MB: not built past the cap."""

    def never(text):
        raise AssertionError("looked for data")

    monkeypatch.setattr(parsing, "large_file_data", never)
    text = "X = [" + ", ".join(["1"] * (parsing.MAX_DATA_SOURCE_BYTES // 3 + 40_000)) + "]\n"
    assert 4.1 * (1 << 20) < len(text) < 4.2 * (1 << 20)
    with pytest.raises(parsing.ParseRefused) as refused:
        parse_exact(text)
    assert str(refused.value) == "larger than 1 MB (4.1 MB), too large for the parser; not checked"
