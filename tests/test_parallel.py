"""`--jobs`: checking across processes gives exactly the serial output; progress bar rules."""

from __future__ import annotations

import io
import json

import pytest
from click.testing import CliRunner

from lifetime_lint.cli import main
from lifetime_lint.runner import PARALLEL_MIN_FILES, Progress, default_jobs

STAGES = [
    "torch.cuda.empty_cache()",
    "torch.cuda.synchronize()",
    "peak = torch.cuda.max_memory_allocated()",
    "torch.cuda.set_device(rank)",
    "return torch.relu(x)",
]


def _module(index: int) -> str:
    body = "".join(
        f"    {STAGES[(index + k) % len(STAGES)]}\n" for k in range(index % 4 + 1)
    ).replace("    return torch.relu(x)\n", "    y = torch.relu(x)\n")
    return f"import torch\n\n\ndef stage_{index}(x, rank):\n{body}    return x\n"


@pytest.fixture
def tree(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    count = 2 * PARALLEL_MIN_FILES + 7
    for index in range(count):
        folder = tmp_path / "models" / f"part{index % 5}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"stage_{index:03}.py").write_text(_module(index))
    (tmp_path / "models" / "part0" / "broken.py").write_text(
        "import torch\ntorch.cuda.synchronize(\n"
    )
    return tmp_path


@pytest.fixture
def pools(monkeypatch):
    started = []
    import concurrent.futures

    real = concurrent.futures.ProcessPoolExecutor

    def spy(*args, **kwargs):
        started.append(kwargs.get("max_workers"))
        return real(*args, **kwargs)

    # The runner imports the pool when it starts one (a cached run never does).
    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", spy)
    return started


def run(*args):
    return CliRunner().invoke(main, ["check", "--no-cache", *args], catch_exceptions=False)


@pytest.mark.parametrize("output_format", ["text", "json"])
def test_parallel_output_is_the_serial_output(tree, pools, output_format):
    serial = run("--jobs", "1", "--format", output_format, "models")
    assert pools == []
    parallel = run("--jobs", "2", "--format", output_format, "models")
    assert pools == [2]
    assert parallel.stdout == serial.stdout
    assert parallel.exit_code == serial.exit_code == 2  # broken.py
    assert parallel.stdout.count("E999") == 1  # only broken.py
    if output_format == "json":
        assert len(json.loads(parallel.stdout)) > 2 * PARALLEL_MIN_FILES


def test_parallel_fix_matches_serial_fix(tree, tmp_path_factory, pools):
    copy = tmp_path_factory.mktemp("copy")
    import shutil

    shutil.copytree(tree / "models", copy / "models")
    parallel = run("--jobs", "2", "--fix", "--unsafe-fixes", "models")
    assert pools == [2]
    serial = CliRunner().invoke(
        main,
        ["check", "--no-cache", "--jobs", "1", "--fix", "--unsafe-fixes", str(copy / "models")],
    )
    assert parallel.stdout.splitlines()[-1] == serial.stdout.splitlines()[-1]
    for path in sorted((tree / "models").rglob("*.py")):
        fixed = path.read_text()
        assert fixed == (copy / path.relative_to(tree)).read_text()
    assert "reclaim()" in (tree / "models" / "part0" / "stage_000.py").read_text()


def test_parallel_with_the_cache(tree, pools):
    cold = CliRunner().invoke(main, ["check", "--jobs", "2", "models"])
    assert pools == [2]
    warm = CliRunner().invoke(main, ["check", "--jobs", "2", "models"])
    assert pools == [2]  # every file but broken.py answered from the cache: no pool
    assert warm.stdout == cold.stdout


def test_small_lists_run_in_process(tree, pools):
    run("--jobs", "8", "models/part1")
    assert pools == []


def test_default_jobs():
    assert default_jobs(10, {"PRE_COMMIT": "1"}) == 1
    assert default_jobs(10, {}) >= 1
    assert default_jobs(10_000, {"PRE_COMMIT": "1"}) == default_jobs(10_000, {})


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_drawn_on_a_terminal_and_erased():
    stream = _Terminal()
    progress = Progress(200, enabled=True, stream=stream, delay=0.0)
    for _ in range(200):
        progress.advance()
    progress.close()
    text = stream.getvalue()
    assert "200/200 files" in text
    assert text.endswith("\r\x1b[K")


def test_progress_waits_before_drawing_and_is_silent_otherwise(monkeypatch):
    stream = _Terminal()
    quick = Progress(5, enabled=True, stream=stream, delay=60.0)
    for _ in range(5):
        quick.advance()
    quick.close()
    assert stream.getvalue() == ""

    monkeypatch.delenv("TERM", raising=False)
    assert Progress.for_terminal(100, quiet=False, stream=_Terminal()).enabled
    assert not Progress.for_terminal(100, quiet=True, stream=_Terminal()).enabled
    assert not Progress.for_terminal(100, quiet=False, stream=io.StringIO()).enabled
    monkeypatch.setenv("TERM", "dumb")
    assert not Progress.for_terminal(100, quiet=False, stream=_Terminal()).enabled


def test_no_progress_when_not_a_terminal(tree):
    result = run("--jobs", "1", "models")
    assert "\r" not in result.stderr and "files" not in result.stderr


def test_a_crashing_rule_is_reported_and_the_run_goes_on(tree, monkeypatch):
    from lifetime_lint.registry import all_rules

    rule = next(r for r in all_rules() if r.code == "LL004")

    def crash(self, node):
        raise AttributeError("'Attribute' object has no attribute 'lower'")

    monkeypatch.setattr(rule, "visit_Call", crash, raising=False)
    for jobs in ("1", "2"):
        result = run("--jobs", jobs, "--select", "LL004,LL005", "models")
        assert result.exit_code == 2
        errors = [line for line in result.stdout.splitlines() if ": LL000 " in line]
        assert errors and all("AttributeError" in line and "not checked" in line for line in errors)
        assert ": LL005 " in result.stdout  # files the rule did not crash on are still reported
