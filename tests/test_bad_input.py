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


# -- form feeds and lone carriage returns: offsets are offsets into the exact text ---------


def _run_module(path, call=None):
    """Execute a fixed file in a fresh interpreter (CPU torch); optionally call a function."""
    import subprocess
    import sys

    code = "import runpy, sys\nns = runpy.run_path(sys.argv[1])\n"
    if call:
        code += f"print(repr(eval({call!r}, ns)))\n"
    completed = subprocess.run(
        [sys.executable, "-c", code, str(path)],
        capture_output=True,
        text=True,
        env=dict(os.environ, CUDA_VISIBLE_DEVICES=""),
    )
    assert completed.returncode == 0, completed.stderr
    return completed.stdout


def test_form_feed_starting_the_file_does_not_shift_the_fix(tmp_path, monkeypatch):
    # The reproducer of issue 10: the fix used to write `   reclaime()`.
    monkeypatch.chdir(tmp_path)
    original = b"\x0cimport torch\ndef f():\n    torch.cuda.empty_cache()\n"
    (tmp_path / "t.py").write_bytes(original)
    report = run("t.py")
    assert "t.py:3:5: LL004" in report.output
    assert "`torch.cuda.empty_cache()`" in report.output  # the span quoted is the call
    assert run("--fix", "t.py").exit_code == 0
    fixed = (tmp_path / "t.py").read_bytes()
    # `import torch`, unused after the fix, goes; the form feed before it stays.
    assert fixed == b"\x0cfrom lifetime_lint.runtime import reclaim\ndef f():\n    reclaim()\n"
    assert _run_module(tmp_path / "t.py", "f()") == "None\n"


def test_form_feeds_before_each_def_do_not_accumulate_a_shift(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    body = "import torch\n" + "".join(
        f"\x0c\ndef f{i}(x):\n    torch.cuda.synchronize()\n    return x + {i}\n" for i in range(4)
    )
    (tmp_path / "t.py").write_bytes(body.encode())
    result = run("--select", "LL005", "--target-torch-version", "2.6", "--fix", "t.py")
    assert result.exit_code == 0, result.output
    fixed = (tmp_path / "t.py").read_text()
    assert fixed.count("torch.accelerator.synchronize()") == 4
    assert fixed.replace("torch.accelerator.synchronize()", "torch.cuda.synchronize()") == body
    # (Calling them needs an accelerator; defining them all is what the shift broke.)
    assert _run_module(tmp_path / "t.py", "[f.__name__ for f in (f0, f1, f2, f3)]")


def test_import_removal_keeps_form_feeds_and_a_final_lone_carriage_return(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    original = (
        b"import torch\nfrom torch.cuda import empty_cache\n\x0c\x0cdef g():\n"
        b"    empty_cache()\n    return 7\r"
    )
    (tmp_path / "t.py").write_bytes(original)
    assert run("--fix", "t.py").exit_code == 0
    fixed = (tmp_path / "t.py").read_bytes()
    assert fixed == (
        b"import torch\nfrom lifetime_lint.runtime import reclaim\n\x0c\x0cdef g():\n"
        b"    reclaim()\n    return 7\r"
    )
    assert _run_module(tmp_path / "t.py", "g()") == "7\n"


def test_form_feed_opening_a_method_body_line_is_not_a_syntax_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    original = (
        b"import torch\n\n\nclass A:\n    def f(self):\n\x0c        torch.cuda.empty_cache()\n"
        b"\x0c        return 3\n"
    )
    (tmp_path / "t.py").write_bytes(original)
    report = run("t.py")
    assert "E999" not in report.output
    assert "t.py:6:10: LL004" in report.output  # the column counts the form feed
    assert run("--fix", "t.py").exit_code == 0
    fixed = (tmp_path / "t.py").read_bytes()
    assert b"\x0c        reclaim()\n\x0c        return 3\n" in fixed
    assert _run_module(tmp_path / "t.py", "A().f()") == "3\n"


def test_form_feeds_inside_strings_and_brackets_are_left_alone(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    original = (
        b'import torch\nDOC = """\n\x0cpage two\n"""\nPAIR = (1,\n\x0c2)\n\n\n'
        b"def f():\n    torch.cuda.empty_cache()\n    return DOC, PAIR\n"
    )
    (tmp_path / "t.py").write_bytes(original)
    assert run("--fix", "t.py").exit_code == 0
    assert _run_module(tmp_path / "t.py", "f()") == repr(("\n\x0cpage two\n", (1, 2))) + "\n"


def test_a_file_libcst_cannot_reproduce_is_refused_and_untouched(tmp_path, monkeypatch):
    from lifetime_lint import parsing

    # Without its view of the file, LibCST drops the form feed: a round trip that is not
    # exact, as any other LibCST quirk would be. The file must not be fixed on its offsets.
    monkeypatch.setattr(parsing, "libcst_view", lambda text, data=(): (text, parsing.IDENTITY))
    monkeypatch.chdir(tmp_path)
    original = b"\x0cimport torch\n\n\ndef f():\n    torch.cuda.empty_cache()\n"
    (tmp_path / "t.py").write_bytes(original)
    result = run("--fix", "t.py")
    assert result.exit_code == 2
    assert (
        "t.py:1:1: E902 Failed to parse t.py: LibCST does not reproduce this file" in result.output
    )
    assert (tmp_path / "t.py").read_bytes() == original


# -- files that must not reach the parser --------------------------------------------------


def _guarded_tree(root):
    files = {
        "deep_sum.py": ("import torch\nx = " + "+".join(["1"] * 8000) + "\n").encode(),
        "long_sum.py": ("import torch\nx = " + " + ".join(["1"] * 10000) + "\n").encode(),
        "attributes.py": ("import torch\nx = torch" + ".a" * 20000 + "\n").encode(),
        "chain.py": ("import torch\nx = (1\n" + "     + 1\n" * 3000 + ")\n").encode(),
        "big.py": ("import torch\n" + "x = 1\n" * 200_000 + "torch.cuda.empty_cache()\n").encode(),
    }
    for name, data in files.items():
        (root / name).write_bytes(data)
    return files


def test_parser_guards_report_each_file_and_check_the_rest(tmp_path, monkeypatch):
    import time

    monkeypatch.chdir(tmp_path)
    files = _guarded_tree(tmp_path)
    (tmp_path / "good.py").write_bytes(VIOLATION)
    os.mkfifo(tmp_path / "fifo.py")
    os.symlink("/dev/zero", tmp_path / "zero.py")
    started = time.monotonic()
    result = run("--fix", ".")
    assert time.monotonic() - started < 60
    out = result.output
    assert result.exit_code == 2
    for name in ("deep_sum.py", "long_sum.py", "attributes.py", "chain.py"):
        assert f"{name}:1:1: E902 Failed to parse {name}: too deeply nested for the parser" in out
    assert "big.py:1:1: E902 Failed to parse big.py: larger than 1 MB" in out
    assert "fifo.py:1:1: E902 Failed to read fifo.py: not a regular file (a FIFO)" in out
    assert (
        "zero.py:1:1: E902 Failed to read zero.py: not a regular file (a character device)" in out
    )
    assert FIXED_LINE in (tmp_path / "good.py").read_bytes()
    for name, data in files.items():
        assert (tmp_path / name).read_bytes() == data


def test_parser_guards_under_a_process_pool(tmp_path, monkeypatch):
    """With `--jobs 2` (a pool: 32 files or more) no BrokenProcessPool escapes."""
    import subprocess
    import sys

    _guarded_tree(tmp_path)
    for i in range(40):
        (tmp_path / f"good{i}.py").write_bytes(VIOLATION)
    completed = subprocess.run(
        [sys.executable, "-m", "lifetime_lint", "check", "--no-cache", "--jobs", "2", "--fix", "."],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 2, completed.stderr
    assert "Traceback" not in completed.stderr + completed.stdout
    assert completed.stdout.count("too deeply nested for the parser") == 4
    for i in range(40):
        assert FIXED_LINE in (tmp_path / f"good{i}.py").read_bytes()


def test_a_crashing_worker_is_reported_by_name(tmp_path, monkeypatch):
    """A file that kills the process checking it (a native crash) breaks the pool: it is
    named as an internal error and every other file is still checked."""
    import multiprocessing
    import signal

    from lifetime_lint import engine
    from lifetime_lint.config import Settings
    from lifetime_lint.engine import FixMode
    from lifetime_lint.registry import all_rules
    from lifetime_lint.runner import run_files

    if multiprocessing.get_start_method() != "fork":
        pytest.skip("the crash is injected by patching the forked workers")
    real = engine.parse_exact

    def crash_on_poison(text):
        if "POISON" in text:
            os.kill(os.getpid(), signal.SIGSEGV)
        return real(text)

    monkeypatch.setattr(engine, "parse_exact", crash_on_poison)
    paths = []
    for i in range(40):
        path = tmp_path / f"f{i:02}.py"
        path.write_bytes(VIOLATION + (b"# POISON\n" if i == 17 else b""))
        paths.append(str(path))
    results = run_files(paths, Settings(), all_rules(), FixMode(), jobs=2)
    by_path = {r.path: r for r in results}
    assert len(results) == 40
    crashed = by_path[paths[17]].diagnostics
    assert [d.code for d in crashed] == ["LL000"]
    assert "the process checking it crashed" in crashed[0].message
    for path in paths[:17] + paths[18:]:
        assert [d.code for d in by_path[path].diagnostics] == ["LL004"]
