"""The content-hash cache: a warm run parses nothing and reports exactly what a cold one does."""

from __future__ import annotations

import json
import multiprocessing
import os
import textwrap
from pathlib import Path

import libcst
import pytest
from click.testing import CliRunner

from lifetime_lint import engine
from lifetime_lint.cache import Cache
from lifetime_lint.cli import main
from lifetime_lint.config import Settings
from lifetime_lint.engine import FixMode
from lifetime_lint.registry import all_rules
from lifetime_lint.runner import run_files

DECODE = textwrap.dedent(
    """\
    import torch


    def decode(vae, latents):
        video = vae.decode(latents).sample
        torch.cuda.empty_cache()
        peak = torch.cuda.max_memory_allocated()
        return video, peak
    """
)
CLEAN = "import torch\n\n\ndef f(x):\n    return torch.relu(x)\n"


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "decode.py").write_text(DECODE)
    (tmp_path / "pkg" / "clean.py").write_text(CLEAN)
    (tmp_path / "pkg" / "other.py").write_text(DECODE.replace("decode", "render"))
    return tmp_path


@pytest.fixture
def parses(monkeypatch):
    """Counts the files the engine parses."""
    calls = []
    real = libcst.parse_module

    def counting(source, *args, **kwargs):
        calls.append(source)
        return real(source, *args, **kwargs)

    monkeypatch.setattr(engine.cst, "parse_module", counting)
    return calls


def run(*args):
    return CliRunner().invoke(main, ["check", "--jobs", "1", *args], catch_exceptions=False)


def test_warm_run_parses_nothing_and_reports_the_same(project, parses):
    cold = run("--format", "json", "pkg")
    assert DECODE in parses
    assert (project / ".lifetime_lint_cache" / "CACHEDIR.TAG").is_file()
    assert (project / ".lifetime_lint_cache" / ".gitignore").read_text().endswith("*\n")
    parses.clear()
    warm = run("--format", "json", "pkg")
    assert parses == []
    assert warm.stdout == cold.stdout  # including the fixes' edits
    assert warm.exit_code == cold.exit_code == 1
    assert json.loads(warm.stdout)[0]["fix"]["edits"]
    assert (
        run("--format", "sarif", "pkg").stdout
        == run("--format", "sarif", "--no-cache", "pkg").stdout
    )


def test_only_changed_files_are_parsed_again(project, parses):
    run("pkg")
    parses.clear()
    (project / "pkg" / "other.py").write_text(DECODE + "\n# touched\n")
    run("pkg")
    assert len(parses) == 1 and parses[0].endswith("# touched\n")


def test_settings_and_rule_options_are_part_of_the_key(project, parses):
    run("pkg")
    parses.clear()
    result = run("--select", "LL004", "pkg")
    assert DECODE in parses
    assert "LL005" not in result.stdout
    parses.clear()
    run("--target-torch-version", "2.10", "pkg")
    assert DECODE in parses
    parses.clear()
    (project / "pyproject.toml").write_text(
        '[tool.lifetime-lint.raw-empty-cache]\nreclaim-call = "myproj.memory.free"\n'
    )
    result = run("--format", "json", "pkg")
    assert DECODE in parses
    assert any("myproj" in edit["content"] for item in json.loads(result.stdout)
               if item["fix"] for edit in item["fix"]["edits"])  # fmt: skip


def test_no_cache_reads_and_writes_nothing(project, parses):
    run("--no-cache", "pkg")
    assert not (project / ".lifetime_lint_cache").exists()
    cold = len(parses)
    run("pkg")
    parses.clear()
    run("--no-cache", "pkg")
    assert len(parses) == cold > 0


def test_cache_location_option_and_setting(project, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("cache")
    run("--cache-dir", str(elsewhere / "c"), "pkg")
    assert (elsewhere / "c" / "CACHEDIR.TAG").is_file()
    assert not (project / ".lifetime_lint_cache").exists()
    (project / "pyproject.toml").write_text('[tool.lifetime-lint]\ncache-dir = "build/.lint"\n')
    run("pkg")
    assert (project / "build" / ".lint" / "CACHEDIR.TAG").is_file()
    (project / "pyproject.toml").write_text("[tool.lifetime-lint]\ncache-dir = 3\n")
    result = run("pkg")
    assert result.exit_code == 2 and "cache-dir" in result.stderr


def test_fix_after_a_cached_check_still_fixes_and_caches_the_result(project, parses):
    run("pkg/decode.py")
    run("pkg/clean.py")
    parses.clear()
    result = run("--fix", "pkg/decode.py")
    assert "reclaim()" in (project / "pkg" / "decode.py").read_text()
    assert "1 fixed" in result.stdout
    parses.clear()
    after = run("pkg/decode.py")  # the fixed content's entry was stored by the fix run
    assert parses == []
    assert after.stdout == run("--no-cache", "pkg/decode.py").stdout
    # A cached entry with nothing to fix serves --fix and --diff too.
    parses.clear()
    assert run("--diff", "pkg/clean.py").exit_code == 0
    assert run("--fix", "pkg/clean.py").exit_code == 0
    assert parses == []


def test_corrupt_entries_are_misses(project, parses):
    run("pkg")
    cold = len(parses)
    for entry in (project / ".lifetime_lint_cache").rglob("*.json"):
        entry.write_text('{"diagnostics": [{"code": ')
    parses.clear()
    result = run("pkg")
    assert len(parses) == cold > 0
    assert result.stdout == run("--no-cache", "pkg").stdout


def test_errors_are_not_cached(project, parses):
    (project / "pkg" / "broken.py").write_text("import torch\ntorch.cuda.synchronize(\n")
    run("pkg")
    parses.clear()
    result = run("pkg")
    assert "import torch\ntorch.cuda.synchronize(\n" in parses  # parsed again
    assert result.exit_code == 2 and "E999" in result.stdout


def test_path_is_part_of_the_key(project, parses):
    """per-file-ignores depend on the path: the same bytes elsewhere are another entry."""
    (project / "pyproject.toml").write_text(
        '[tool.lifetime-lint.per-file-ignores]\n"pkg/other.py" = ["LL004"]\n'
    )
    (project / "pkg" / "other.py").write_text(DECODE)
    result = run("pkg")
    assert "pkg/decode.py:6:5: LL004" in result.stdout
    assert "pkg/other.py:6:5: LL004" not in result.stdout
    assert run("pkg").stdout == result.stdout


def _hammer(args):
    root, _index = args
    settings = Settings(root=root)
    rules = all_rules()
    cache_dir = os.path.join(root, "shared-cache")
    paths = sorted(str(p) for p in Path(root, "pkg").glob("*.py"))
    for _ in range(5):
        results = run_files(paths, settings, rules, FixMode(), jobs=1, cache_dir=cache_dir)
    return [(r.path, [(d.code, d.start.row) for d in r.diagnostics]) for r in results]


def test_concurrent_runs_share_one_cache_safely(project):
    for i in range(12):
        (project / "pkg" / f"stage_{i}.py").write_text(DECODE.replace("decode", f"stage_{i}"))
    context = multiprocessing.get_context("fork")
    with context.Pool(4) as pool:
        outcomes = pool.map(_hammer, [(str(project), i) for i in range(4)])
    assert all(outcome == outcomes[0] for outcome in outcomes)
    entries = [p for p in (project / "shared-cache").rglob("*.json") if p.name != "index.json"]
    assert len(entries) == 15
    for entry in entries:
        json.loads(entry.read_text())  # every entry whole
    assert not [p for p in (project / "shared-cache").rglob("*") if p.name.startswith(".tmp-")]


def test_unwritable_cache_is_ignored(project):
    blocker = project / "not-a-folder"
    blocker.write_text("")
    result = run("--cache-dir", str(blocker / "cache"), "pkg")
    assert result.exit_code == 1
    assert "pkg/decode.py:6:5: LL004" in result.stdout


def test_entries_round_trip_every_field(project):
    settings = Settings(root=str(project))
    rules = all_rules()
    path = str(project / "pkg" / "decode.py")
    fresh = run_files([path], settings, rules, FixMode(), cache_dir=None)[0].diagnostics
    run_files([path], settings, rules, FixMode(), cache_dir=str(project / "c"))
    cache = Cache(str(project / "c"), settings, settings.enabled_rules(rules))
    cached = cache.load(cache.key(path, Path(path).read_bytes()), path)
    assert cached == fresh


@pytest.mark.parametrize(
    "garbage",
    [
        b"[" * 100_000 + b"]" * 100_000,  # json raises RecursionError
        b'{"diagnostics": [{"code": 1}]}',  # the wrong shape
        b'{"diagnostics": [{"start": [1]}]}',
        b"\xff\xfe not json",
        b'{"found": "x", "left": 3}',
    ],
)
def test_any_unreadable_entry_is_a_miss(project, garbage):
    settings = Settings(root=str(project))
    rules = all_rules()
    path = str(project / "pkg" / "decode.py")
    fresh = run_files([path], settings, rules, FixMode(), cache_dir=None)[0].diagnostics
    cache = Cache(str(project / "c"), settings, settings.enabled_rules(rules))
    key = cache.key(path, Path(path).read_bytes())
    entry = Path(cache._entry_path(key))
    entry.parent.mkdir(parents=True)
    entry.write_bytes(garbage)
    assert cache.load(key, path) is None
    assert cache.load_fix(key, path) is None
    again = run_files([path], settings, rules, FixMode(), cache_dir=str(project / "c"))
    assert again[0].diagnostics == fresh  # linted, not served from the bad entry
    result = run("--diff", "--cache-dir", "c", "pkg/decode.py")
    assert result.exit_code == 1 and "+    reclaim()" in result.stdout


def _check_json(root: Path, *extra: str) -> list[dict]:
    import subprocess
    import sys

    completed = subprocess.run(
        [sys.executable, "-m", "lifetime_lint", "check", "--output-format", "json",
         "--exit-zero", *extra, "demo"],
        cwd=root, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return json.loads(completed.stdout)


@pytest.mark.parametrize(
    "declaration",
    [
        ("requirements.txt", "torch\nlifetime-lint==0.1.0\n"),
        ("setup.cfg", "[options]\ninstall_requires =\n    lifetime_lint>=0.1\n"),
        ("pyproject.toml", '[project]\nname = "demo"\ndependencies = ["lifetime-lint"]\n'),
    ],
)
def test_dependency_declarations_are_part_of_the_key(tmp_path, declaration):
    """Issue 13: whether a fix importing `lifetime_lint.runtime` is safe depends on the
    project's dependency declarations; a cached verdict must not survive a change of them."""
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\ndependencies = []\n')
    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / "__init__.py").write_text("")
    (tmp_path / "demo" / "free.py").write_text(
        "import torch\n\n\ndef free():\n    torch.cuda.empty_cache()\n"
    )

    def applicabilities(findings: list[dict]) -> list[str]:
        return [f["fix"]["applicability"] for f in findings if f.get("fix")]

    undeclared = _check_json(tmp_path)
    assert applicabilities(undeclared) == ["unsafe"]
    assert _check_json(tmp_path) == undeclared  # answered from the cache
    name, text = declaration
    (tmp_path / name).write_text(text)
    declared = _check_json(tmp_path)
    assert declared == _check_json(tmp_path, "--no-cache")
    assert applicabilities(declared) == ["safe"]
    (tmp_path / name).unlink()
    if name == "pyproject.toml":
        (tmp_path / name).write_text('[project]\nname = "demo"\ndependencies = []\n')
    assert _check_json(tmp_path) == undeclared


def test_a_cached_fix_reports_the_imports_it_adds(tmp_path):
    """A second `--diff` (and a `--fix` after a `--diff`) served from the cache prints the
    same closing summary as the run that computed the fixes, the added imports included."""
    import subprocess
    import sys

    (tmp_path / "decode.py").write_text(DECODE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LIFETIME_LINT_")}
    full = "import sys; from lifetime_lint.cli import main; sys.argv[0] = 'lifetime-lint'; main()"

    def run(*args):
        done = subprocess.run([sys.executable, "-c", full, "check", "--unsafe-fixes",
                               "--cache-dir", str(tmp_path / "cache"), *args, "."],
                              cwd=tmp_path, capture_output=True, text=True, env=env)  # fmt: skip
        return done.returncode, done.stdout, done.stderr

    first, second = run("--diff"), run("--diff")
    assert first == second
    assert first[0] == 1 and "+from lifetime_lint.runtime import reclaim" in first[1]
    assert "decode.py: added `from lifetime_lint.runtime import reclaim`" in first[2]
    fixed = run("--fix")  # served from the `--diff` entry
    assert "decode.py: added `from lifetime_lint.runtime import reclaim`" in fixed[2]
    assert "reclaim()" in (tmp_path / "decode.py").read_text()
