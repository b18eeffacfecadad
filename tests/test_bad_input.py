"""Bad input gets a clear message naming the file; the run goes on; nothing is modified."""

from __future__ import annotations

import os

import pytest
from click.testing import CliRunner

from lifetime_lint.cli import main

VIOLATION = b"import torch\n\n\ndef f():\n    torch.cuda.empty_cache()\n"
FIXED_LINE = b"    reclaim()"


@pytest.fixture
def tree(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    files = {
        "good.py": VIOLATION,
        "syntax.py": b"import torch\ndef f(:\n    torch.cuda.empty_cache()\n",
        "latin1.py": b"import torch\nname = '\xe9'\ntorch.cuda.empty_cache()\n",
        "binary.py": b"\x00\x01\x02torch.cuda.empty_cache\x00",
        "empty.py": b"",
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    return tmp_path, files


def run(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_each_bad_file_is_named_and_others_are_checked(tree):
    tmp_path, files = tree
    result = run("--fix", ".", "missing.py")
    out = result.output
    assert result.exit_code == 2
    assert "syntax.py:2:7: E999 Failed to parse syntax.py:2:7: invalid syntax" in out
    assert "latin1.py:1:1: E902 Failed to read latin1.py: not valid UTF-8 (byte 0xe9" in out
    assert "binary.py:1:1: E902 Failed to read binary.py: binary file" in out
    assert "missing.py:1:1: E902 Failed to read missing.py: No such file or directory" in out
    # The good file was still fixed; the bad ones are byte-for-byte untouched.
    assert FIXED_LINE in (tmp_path / "good.py").read_bytes()
    for name in ("syntax.py", "latin1.py", "binary.py", "empty.py"):
        assert (tmp_path / name).read_bytes() == files[name]


def test_json_output_carries_errors(tree):
    import json

    data = json.loads(run("--format", "json", "syntax.py", "good.py").output)
    codes = sorted(d["code"] for d in data)
    assert codes == ["E999", "LL004"]


def test_bom_crlf_and_cookie_survive_a_fix(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    bom = tmp_path / "bom.py"
    bom.write_bytes(b"\xef\xbb\xbf" + VIOLATION.replace(b"\n", b"\r\n"))
    cookie = tmp_path / "cookie.py"
    cookie.write_bytes(
        b"# -*- coding: latin-1 -*-\nimport torch\nname = '\xe9'\ntorch.cuda.empty_cache()\n"
    )
    assert run("--fix", ".").exit_code == 0
    data = bom.read_bytes()
    assert data.startswith(b"\xef\xbb\xbf")
    assert data.count(b"\r\n") == data.count(b"\n"), "every line ending stays CRLF"
    assert b"from lifetime_lint.runtime import reclaim\r\n" in data
    assert FIXED_LINE + b"\r\n" in data
    latin = cookie.read_bytes()
    assert b"name = '\xe9'" in latin and b"reclaim()" in latin


def test_empty_and_whitespace_files_are_fine(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty.py").write_bytes(b"")
    (tmp_path / "blank.py").write_bytes(b"\n\n# torch.cuda.empty_cache()\n")
    result = run(".")
    assert result.exit_code == 0, result.output


def test_symlink_target_is_fixed_and_link_kept(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    real = tmp_path / "real.py"
    real.write_bytes(VIOLATION)
    link = tmp_path / "link.py"
    os.symlink(real, link)
    run("--fix", "link.py")
    assert os.path.islink(link)
    assert FIXED_LINE in real.read_bytes()


def test_directory_without_python_files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("torch.cuda.empty_cache()")
    result = run(".")
    assert result.exit_code == 0
    assert "All checks passed!" in result.output
