"""A file Python accepts but LibCST cannot parse: indentation mixing tabs and spaces is
checked through a copy with the tabs expanded (findings at the file's own lines, no fix,
the file never changed); other parse failures are E999 at Python's or LibCST's line."""

from __future__ import annotations

import ast

import libcst as cst
import pytest
from click.testing import CliRunner

from lifetime_lint.cli import main
from lifetime_lint.parsing import expand_leading_tabs

# A method body indented with two tabs and four spaces (column 20 for Python), the next
# method with spaces: LibCST's tokenizer finds "no matching outer block for dedent".
TABS = (
    b"import torch\n"
    b"\n"
    b"\n"
    b"class Trainer:\n"
    b"    def step(self):\n"
    b"\t\t    x = 1\n"
    b"\t\t    torch.cuda.empty_cache()\n"
    b"\n"
    b"    def other(self):\n"
    b"        return 2\n"
)


def run(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_the_sample_is_python_that_libcst_rejects():
    ast.parse(TABS.decode())
    with pytest.raises(cst.ParserSyntaxError):
        cst.parse_module(TABS.decode())


@pytest.mark.parametrize("cache", [True, False])
def test_tab_indented_code_is_checked_at_its_own_line(tmp_path, monkeypatch, cache):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_bytes(TABS)
    extra = [] if cache else ["--no-cache"]
    for _ in range(2):  # the second run is answered from the cache when it is on
        result = run(*extra, "--statistics", "train.py")
        assert "E999" in result.output and "no fixes offered" in result.output
        plain = run(*extra, "train.py")
        assert "E999" not in plain.output
        assert "train.py:7:7: LL004" in plain.output, plain.output
        assert plain.exit_code == 1


@pytest.mark.parametrize("cache", [True, False])
def test_fix_leaves_a_tab_indented_file_byte_identical(tmp_path, monkeypatch, cache):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_bytes(TABS)
    extra = [] if cache else ["--no-cache"]
    result = run(*extra, "--fix", "train.py")
    assert (tmp_path / "train.py").read_bytes() == TABS
    assert "train.py:7:7: LL004" in result.output
    assert result.exit_code == 1  # findings left, nothing fixed
    diff = run(*extra, "--diff", "train.py")
    assert (tmp_path / "train.py").read_bytes() == TABS
    assert "+++" not in diff.output


def test_a_plain_syntax_error_points_at_pythons_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.py").write_bytes(b"import torch\n\n\nx = 1\ndef f(:\n    pass\n")
    result = run("--no-cache", "bad.py")
    assert result.exit_code == 2
    assert "bad.py:5:7: E999 Failed to parse bad.py:5:7: invalid syntax" in result.output


def test_a_tab_and_space_mix_python_rejects_is_pythons_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    data = b"import torch\nif True:\n\tif True:\n\t\tx = 1\n        else:\n\t\t\tpass\n"
    (tmp_path / "mixed.py").write_bytes(data)
    result = run("--no-cache", "mixed.py")
    assert result.exit_code == 2
    assert "mixed.py:5:" in result.output and "E999" in result.output
    assert (tmp_path / "mixed.py").read_bytes() == data


def test_python_accepts_but_libcst_cannot_names_libcst_and_its_line(tmp_path, monkeypatch):
    """No such file is known for this LibCST outside tabs: its parser is made to fail."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "new.py").write_bytes(b"import torch\n\nx = 1\ntorch.cuda.empty_cache()\n")
    real = cst.parse_module

    def failing(text, *args, **kwargs):
        if "x = 1" in text:
            raise cst.ParserSyntaxError(
                "parser error: error at 3:2: expected NAME",
                lines=text.splitlines(True),
                raw_line=3,
                raw_column=2,
            )
        return real(text, *args, **kwargs)

    monkeypatch.setattr(cst, "parse_module", failing)
    result = run("--no-cache", "new.py")
    assert result.exit_code == 2
    assert (
        "new.py:3:3: E999 Failed to parse new.py:3:3: Python accepts this file but LibCST "
        "cannot parse it: parser error: error at 3:2: expected NAME at line 3"
    ) in result.output


def test_columns_map_back_through_expanded_tabs():
    text = "if 1:\n\tif 2:\n\t    a = 1\n        b = 2\n"
    expansion = expand_leading_tabs(text)
    assert expansion is not None
    assert expansion.text == "if 1:\n        if 2:\n            a = 1\n        b = 2\n"
    row3 = expansion.text.split("\n")[2]
    assert expansion.column(3, row3.index("a")) == text.split("\n")[2].index("a")
    assert expansion.column(3, 3) == 0  # inside the tab's width: the tab itself
    assert expansion.offset(expansion.text.index("a")) == text.index("a")
    assert expansion.offset(expansion.text.index("b")) == text.index("b")
    assert expand_leading_tabs("if 1:\n\tpass\n") is None  # tabs only: nothing mixes
    assert expand_leading_tabs("x = '\\t'\n") is None
