"""Fix safety, CI-sized: `--fix --unsafe-fixes` over every fixture input plus awkward files.

The same checks as `benchmarks/fix_safety.py` runs over real corpora (see its docstring):
changed files compile, text outside the reported fix spans survives, encodings and line
endings are kept, unparsable files are never written, unchanged files are not rewritten,
and a second `--fix` changes nothing. The corpora are not available in CI, so the sample is
the repository's own fixture inputs, copied to a temporary folder, plus synthetic files.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"


def _load_fix_safety():
    spec = importlib.util.spec_from_file_location(
        "benchmarks_fix_safety", ROOT / "benchmarks" / "fix_safety.py"
    )
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


fix_safety = _load_fix_safety()

OFFLOAD = 'import torch\n\n\ndef offload(pipe):\n    pipe.to("cpu")\n    torch.cuda.empty_cache()\n'

SYNTHETIC = {
    # CRLF line endings throughout: the inserted import must use them too.
    "crlf.py": OFFLOAD.replace("\n", "\r\n").encode(),
    # A UTF-8 byte-order mark, kept.
    "bom.py": b"\xef\xbb\xbf" + ("# caf\u00e9\n" + OFFLOAD).encode(),
    # A PEP 263 cookie: written back in Latin-1.
    "latin1.py": ("# -*- coding: latin-1 -*-\n# d\u00e9j\u00e0 vu\n" + OFFLOAD).encode("latin-1"),
    # No final newline, tab indentation, a form feed between definitions.
    "no_final_newline.py": OFFLOAD.rstrip("\n").replace("    ", "\t").encode() + b"\n\x0c\nx = 1",
    # Fixes that need the import added next to an existing `from` import and a docstring.
    "docstring.py": (
        '"""A pipeline."""\nfrom __future__ import annotations\n\n' + OFFLOAD
    ).encode(),
    # Nothing to fix: must not be rewritten.
    "clean.py": b"import torch\n\n\ndef f(x):\n    return torch.relu(x)\n",
    # Suppressed: nothing to fix either.
    "noqa.py": OFFLOAD.replace("empty_cache()", "empty_cache()  # noqa: LL004").encode(),
    # Unparsable and binary files: reported, never written.
    "broken.py": b"import torch\n\ndef f(:\n    torch.cuda.empty_cache()\n",
    "binary.py": b"\x00\x01torch.cuda.empty_cache()\x00",
}


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("fix_safety")
    inputs = [
        path
        for path in FIXTURES.rglob("*.py")
        if not path.name.endswith((".fixed.py", ".unsafe.py"))
    ]
    assert len(inputs) >= 10, "the fixture inputs are the sample"
    for path in inputs:
        target = root / path.relative_to(FIXTURES)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    for name, data in SYNTHETIC.items():
        (root / "synthetic").mkdir(exist_ok=True)
        (root / "synthetic" / name).write_bytes(data)
    (root / "pyproject.toml").write_text(fix_safety.ISOLATING_PYPROJECT)
    return fix_safety.check_tree(str(root), "fixtures", jobs=1), root


def test_fix_everything_damages_nothing(report):
    result, _ = report
    assert result.failures == []


def test_the_run_really_fixed_things(report):
    # Guard against a vacuous pass: fixes were found and applied, in several rules, and in
    # the synthetic files that exercise encodings and line endings.
    result, root = report
    assert sum(result.fixed.values()) >= 10
    assert len([code for code, count in result.fixed.items() if count]) >= 2
    assert result.changed_files >= 10
    assert result.parse_failures == 2  # broken.py and binary.py
    assert result.second_run_fixed == 0
    for name in ("crlf.py", "bom.py", "latin1.py", "no_final_newline.py", "docstring.py"):
        assert (root / "synthetic" / name).read_bytes() != SYNTHETIC[name], name
    for name in ("clean.py", "noqa.py", "broken.py", "binary.py"):
        assert (root / "synthetic" / name).read_bytes() == SYNTHETIC[name], name


def test_encodings_and_line_endings_survive(report):
    _, root = report
    crlf = (root / "synthetic" / "crlf.py").read_bytes()
    assert b"reclaim" in crlf and crlf.count(b"\n") == crlf.count(b"\r\n")
    assert (root / "synthetic" / "bom.py").read_bytes().startswith(b"\xef\xbb\xbf")
    latin1 = (root / "synthetic" / "latin1.py").read_bytes()
    assert "d\u00e9j\u00e0".encode("latin-1") in latin1 and b"reclaim" in latin1


# -- the checks themselves must be able to fail -------------------------------------------


def test_outside_preserved_detects_changes_outside_the_spans():
    before = "a = 1\nb = torch.cuda.empty_cache()\nc = 3\n"
    span = (before.index("torch"), before.index("()"))
    good = before.replace("torch.cuda.empty_cache", "reclaim")
    assert fix_safety.outside_preserved(before, good, [span])
    assert not fix_safety.outside_preserved(before, good.replace("c = 3", "c = 4"), [span])
    assert not fix_safety.outside_preserved(before, good.replace("a = 1\n", ""), [span])
    assert not fix_safety.outside_preserved(before, "c = 3\n" + good[:-6], [span])  # reordered
    assert fix_safety.outside_preserved(before, before, [])
    assert not fix_safety.outside_preserved(before, before + "\n", [])
    # An insertion is allowed exactly at its point.
    assert fix_safety.outside_preserved("ab", "aXb", [(1, 1)])
    assert not fix_safety.outside_preserved("ab", "Xab", [(1, 1)])


def test_import_allowance_covers_the_statement_and_following_blank_lines():
    text = "import os\nfrom torch.cuda import (\n    empty_cache,\n)\n\n\nx = 1\n"
    ranges = fix_safety.import_line_ranges(text)
    assert [text[s:e] for s, e in ranges] == [
        "import os\n",
        "from torch.cuda import (\n    empty_cache,\n)\n\n\n",
    ]


def test_a_damaging_change_is_reported(tmp_path):
    report = fix_safety.SafetyReport("t")
    before = b"import torch\n\n\ndef f(p):\n    torch.cuda.empty_cache()\n    return p\n"
    row_edit = [(5, 5, 5, 27)]  # torch.cuda.empty_cache -> reclaim
    fixed = before.replace(b"torch.cuda.empty_cache", b"reclaim")
    assert fix_safety._check_changed_file("f.py", before, fixed, row_edit, report) is None
    damaged = fixed.replace(b"return p", b"return q")
    assert "outside" in fix_safety._check_changed_file("f.py", before, damaged, row_edit, report)
    broken = fixed.replace(b"reclaim()", b"reclaim(")
    assert "compile" in fix_safety._check_changed_file("f.py", before, broken, row_edit, report)
    crlf = before.replace(b"\n", b"\r\n")
    mixed = crlf.replace(b"torch.cuda.empty_cache", b"reclaim").replace(b"\r\n", b"\n", 1)
    assert "line endings" in fix_safety._check_changed_file("f.py", crlf, mixed, row_edit, report)
    assert "no fix" in fix_safety._check_changed_file("f.py", before, fixed, [], report)


def test_script_cli_on_a_folder(tmp_path, capsys):
    folder = tmp_path / "pkg"
    folder.mkdir()
    (folder / "offload.py").write_text(OFFLOAD)
    status = fix_safety.main(["--path", str(folder), "--jobs", "1", "--scratch",
                              str(tmp_path / "scratch"), "--json", str(tmp_path / "out.json")])  # fmt: skip
    output = capsys.readouterr().out
    assert status == 0, output
    assert "| pkg | 1 | 0 |" in output
    assert (tmp_path / "out.json").exists()
    assert (folder / "offload.py").read_text() == OFFLOAD  # the script works on a copy


# -- fuzz: awkward bytes around known findings, fixed through the CLI, executed ------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_NEWLINES = st.sampled_from(["\n", "\r\n", "\r"])


@st.composite
def awkward_module(draw):
    """A module with `torch.cuda.empty_cache()` calls in a function and a method, wrapped in
    random form feeds, CR/CRLF/LF endings, tab or space indentation, comments, backslash
    continuations, a BOM and no final newline; the functions return a value to compare."""
    indent = draw(st.sampled_from(["    ", "\t", "  "]))
    lines: list[tuple[str, str]] = []  # (indentation level text, code)

    def feed():
        return draw(st.sampled_from(["", "", "\x0c", "\x0c\x0c", " \x0c"]))

    def decorated(level: str, code: str) -> None:
        if draw(st.booleans()):
            lines.append(("", draw(st.sampled_from(["", "\x0c", "# note", "\x0c# page"]))))
        lines.append((feed() + level, code + draw(st.sampled_from(["", "  # why", "\t#x"]))))

    decorated("", "import torch")
    if draw(st.booleans()):
        decorated("", "from torch.cuda import empty_cache")
        call = "empty_cache()"
    else:
        call = "torch.cuda.empty_cache()"
    for owner in ("def f(x):", "class A:"):
        decorated("", owner)
        level = indent
        if owner.startswith("class"):
            decorated(level, "def g(self, x):")
            level = indent * 2
        steps = draw(st.lists(st.sampled_from(["add", "cont", "call", "comment"]), max_size=5))
        for step in [*steps, "call"]:
            if step == "add":
                decorated(level, "x = x + 2")
            elif step == "cont":
                lines.append((feed() + level, "x = x * \\"))
                lines.append((level + indent, "3"))
            elif step == "call":
                decorated(level, call)
            else:
                lines.append(
                    (level, "# " + draw(st.sampled_from(["c", "torch.cuda.empty_cache()"])))
                )
        decorated(level, "return x")
    text = "".join(prefix + code + draw(_NEWLINES) for prefix, code in lines)
    if draw(st.booleans()):
        text = text.rstrip("\r\n")
    data = text.encode()
    return b"\xef\xbb\xbf" + data if draw(st.booleans()) else data


def _results(data: bytes) -> tuple[int, int]:
    namespace: dict = {"__name__": "fuzzed"}
    exec(compile(data, "fuzzed.py", "exec", dont_inherit=True), namespace)
    return namespace["f"](1), namespace["A"]().g(5)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=awkward_module())
def test_fuzzed_files_fix_to_code_that_behaves_the_same(data, tmp_path_factory):
    from click.testing import CliRunner

    from lifetime_lint.cli import main

    folder = tmp_path_factory.mktemp("fuzz")
    path = folder / "fuzzed.py"
    path.write_bytes(data)
    expected = _results(data)
    runner = CliRunner()
    result = runner.invoke(main, ["--no-cache", "--fix", str(path)], catch_exceptions=False)
    fixed = path.read_bytes()
    # Every such file is valid Python that LibCST parses once the form feeds it drops are
    # taken out: none may be refused, and each must be fixed.
    assert result.exit_code == 0, result.output
    assert fixed != data
    assert b"torch.cuda.empty_cache()\n" not in fixed.replace(b"# torch.cuda.empty_cache()", b"")
    assert _results(fixed) == expected
    assert fixed.startswith(b"\xef\xbb\xbf") == data.startswith(b"\xef\xbb\xbf")
    assert fixed.count(b"\x0c") == data.count(b"\x0c")  # no form feed lost
    again = runner.invoke(main, ["--no-cache", "--fix", str(path)], catch_exceptions=False)
    assert again.exit_code == 0 and path.read_bytes() == fixed


def test_the_execution_check_compares_module_level_names(tmp_path):
    """Check 5 imports both trees: names the fix's imports add or remove are allowed, any
    other change (a name lost, a value of another type) or a failing import is reported."""
    before, after = tmp_path / "before", tmp_path / "after"
    original = (
        "import torch\nfrom torch.cuda import empty_cache\nA = 1\n\n\ndef f():\n    empty_cache()\n"
    )
    fixed = {
        "good.py": original.replace(
            "from torch.cuda import empty_cache", "from lifetime_lint.runtime import reclaim"
        ).replace("empty_cache()", "reclaim()"),
        "lost.py": original.replace("A = 1\n", ""),
        "retyped.py": original.replace("A = 1", "A = 'one'"),
        "broken.py": original + "raise RuntimeError('at import')\n",
    }
    for tree in (before, after):
        (tree / "pkg").mkdir(parents=True)
        (tree / "pkg" / "__init__.py").write_text("")
    for name, text in fixed.items():
        (before / "pkg" / name).write_text(original)
        (after / "pkg" / name).write_text(text)
    report = fix_safety.SafetyReport("t")
    paths = [f"pkg/{name}" for name in fixed]
    fix_safety.compare_imports(str(before), str(after), paths, report, code=None)
    assert report.imported_files == 3
    failures = sorted(report.failures)
    assert len(failures) == 3, failures
    assert failures[0].startswith("pkg/broken.py: imported before the fix, not after: RuntimeError")
    assert failures[1] == "pkg/lost.py: module-level names differ after the fix: A (int -> absent)"
    assert failures[2] == "pkg/retyped.py: module-level names differ after the fix: A (int -> str)"
