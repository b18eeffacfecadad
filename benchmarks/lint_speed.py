"""Lint speed, side by side: lifetime-lint against Fixit, TorchFix, Ruff and raw LibCST parsing.

    python benchmarks/lint_speed.py setup                  # tool venvs under .bench/venvs/
    python benchmarks/lint_speed.py run                    # torch-nn, all tools
    python benchmarks/lint_speed.py run --corpus diffusers --corpus transformers --fast-only
    python benchmarks/lint_speed.py run --repeats 5 --slow-repeats 2 --json out.json
    python benchmarks/lint_speed.py run --fast-only --before b7dcd50   # before/after, one run

Every tool runs as a fresh process over the same working copy of a corpus
(`.bench/work/<corpus>`, copied from `.corpus/` by `benchmarks/corpus.py`), and the wall
time of the whole process is measured, start-up included. The tools run in turn inside each
repeat (A B C, A B C, ...), so a burst of load on the shared machine hits all of them; the
table shows the median of the repeats (and the spread, min-max). One untimed round of the
fast tools comes first (bytecode and OS file caches), and `PYTHONDONTWRITEBYTECODE` is
dropped from the tools' environment, so each runs as an installed tool does.

What is measured:
- `lifetime-lint cold`: all rules (`--select ALL`), with the cache emptied first (or
  `--no-cache` where the cache exists); `--jobs 1` as well where `--jobs` exists.
- `lifetime-lint warm`: the same command again, with the cache the cold run left.
- `lifetime-lint 10 changed (cache)`: 10 files edited (a comment appended), the whole tree.
- `lifetime-lint 10 named files`: the 10 edited files named on the command line, no cache
  (what pre-commit runs).
- `libcst parse (all)`: `libcst.parse_module` of every file, in one process (decoding as
  lifetime-lint does, start-up and `import libcst` included).
- `libcst parse (triggered)`: the same over the files lifetime-lint must parse, those where
  some enabled rule's trigger words occur (computed with lifetime_lint itself).
- `ruff check` (default rules, `--isolated --no-cache`), `fixit lint` (Fixit 2.2.1, default
  rules), `torchfix` (TorchFix 0.7.0, default rules), each from its own venv; the last two
  are slow (about a minute on torch/nn), so they get `--slow-repeats` runs (default 2) and
  are skipped with `--fast-only`.

With `--before REV`, the lifetime-lint of that git revision (its `lifetime_lint/`, `rules/`
and `runtime/`, extracted under `.bench/before_code/`) is timed too, cold and warm, in the
same rounds as the working tree's: `before: lifetime-lint cold` / `before: lifetime-lint
warm` (with several `--before`, `before REV: ...` each), so a change's speed is compared
under the same load.

Tools that are not installed are reported as missing, not timed. Results are printed as a
Markdown table with ratios, and written as JSON (`--json`, default
`.bench/results/lint_speed.json`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
BENCH = os.path.join(REPO, ".bench")
VENVS = os.path.join(BENCH, "venvs")
WORK = os.path.join(BENCH, "work")
sys.path.insert(0, HERE)

import corpus  # noqa: E402  (benchmarks/corpus.py)

LIFETIME_LINT = os.path.join(os.path.dirname(sys.executable), "lifetime-lint")

TOOL_VENVS = {
    "ruff": ["ruff"],
    "fixit": ["fixit==2.2.1"],
    # TorchFix declares torch as a dependency but never imports it: skip the (CUDA) wheel.
    "torchfix": ["--no-deps", "torchfix==0.7.0", "libcst>=1.1", "PyYAML", "flake8"],
}

# Makes each working copy its own project: no tool reads the repository's configuration.
WORK_PYPROJECT = """\
[tool.fixit]
root = true
"""

CHANGED = 10

# Tools run as users run them: bytecode caches written and used. (An environment with
# PYTHONDONTWRITEBYTECODE would make an editable install recompile every module per run.)
TOOL_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
CACHE_DIR = ".lifetime_lint_cache"


# -- preparing -------------------------------------------------------------------------------


def setup_venvs() -> None:
    """One venv per comparison tool, under .bench/venvs/ (git-ignored)."""
    for name, requirements in TOOL_VENVS.items():
        venv = os.path.join(VENVS, name)
        if not os.path.exists(os.path.join(venv, "bin", "python")):
            subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        no_deps = [r for r in requirements if r == "--no-deps"]
        packages = [r for r in requirements if r != "--no-deps"]
        pip = [os.path.join(venv, "bin", "python"), "-m", "pip", "install", "-q"]
        # `--no-deps` applies to the tool itself; its listed non-torch deps come after.
        subprocess.run(pip + no_deps + packages[:1], check=True)
        if packages[1:]:
            subprocess.run(pip + packages[1:], check=True)
        print(f"{name}: {venv}")


def tool_binary(name: str) -> str | None:
    path = os.path.join(VENVS, name, "bin", name)
    return path if os.path.exists(path) else None


def working_copy(name: str) -> str:
    """A fresh copy of corpus `name` that the benchmark may edit."""
    source = corpus.prepare(name)
    target = os.path.join(WORK, name)
    if os.path.exists(target):
        shutil.rmtree(target)
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
    with open(os.path.join(target, "pyproject.toml"), "w", encoding="utf-8") as handle:
        handle.write(WORK_PYPROJECT)
    # Its own git repository: .bench/ is git-ignored here, and tools that respect
    # .gitignore (Ruff, lifetime-lint) would otherwise skip the whole copy.
    subprocess.run(["git", "init", "-q", target], check=True)
    return target


def cli_supports(flag: str) -> bool:
    help_text = subprocess.run(
        [LIFETIME_LINT, "check", "--help"], capture_output=True, text=True
    ).stdout
    return flag in help_text


def triggered_files(files: Sequence[str]) -> list[str]:
    """The files lifetime-lint parses: those where an enabled rule's trigger occurs."""
    from lifetime_lint.config import Settings
    from lifetime_lint.engine import Linter
    from lifetime_lint.source import SourceError, SourceFile

    settings = Settings()
    settings.select = ["ALL"]
    rules = Linter(settings).rules
    chosen = []
    for path in files:
        try:
            text = SourceFile.read(path).text
        except SourceError:
            continue
        if any(not rule.triggers or any(t in text for t in rule.triggers) for rule in rules):
            chosen.append(path)
    return chosen


def code_fingerprint() -> str | None:
    """The cache's fingerprint of the code the tools run (None: a build without a cache)."""
    probe = "from lifetime_lint.cache import code_fingerprint as f; print(f())"
    completed = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=TOOL_ENV
    )
    return completed.stdout.strip() or None


def enabled_rules() -> list[str]:
    from lifetime_lint.config import Settings
    from lifetime_lint.engine import Linter

    settings = Settings()
    settings.select = ["ALL"]
    return [rule.code for rule in Linter(settings).rules]


def parse_files(list_file: str) -> None:
    """`_parse LIST`: what the raw-parse baseline runs (in its own process)."""
    import libcst

    from lifetime_lint.source import SourceError, SourceFile

    with open(list_file, encoding="utf-8") as handle:
        paths = [line.rstrip("\n") for line in handle if line.strip()]
    errors = 0
    for path in paths:
        try:
            libcst.parse_module(SourceFile.read(path).text)
        except (SourceError, libcst.ParserSyntaxError, RecursionError):
            errors += 1
    print(f"parsed {len(paths) - errors} files, {errors} errors")


# -- measuring -------------------------------------------------------------------------------


@dataclass
class Measure:
    label: str
    command: list[str]
    slow: bool = False
    before: callable | None = None  # type: ignore[valid-type]
    after: callable | None = None  # type: ignore[valid-type]
    env: dict | None = None  # overrides TOOL_ENV (the `--before` revision's PYTHONPATH)
    times: list[float] = field(default_factory=list)
    # CPU seconds (user + system) of the process and every process it waited for (the
    # pool's workers): on a loaded shared machine far steadier than the wall time.
    cpu_times: list[float] = field(default_factory=list)
    exit_codes: list[int] = field(default_factory=list)

    def run(self, cwd: str) -> None:
        if self.before is not None:
            self.before()
        used = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        completed = subprocess.run(
            self.command,
            cwd=cwd,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=self.env or TOOL_ENV,
        )
        self.times.append(time.perf_counter() - started)
        now = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.cpu_times.append(now.ru_utime + now.ru_stime - used.ru_utime - used.ru_stime)
        self.exit_codes.append(completed.returncode)
        if completed.returncode not in (0, 1):
            tail = completed.stderr.decode(errors="replace")[-400:]
            print(f"  ! {self.label}: exit {completed.returncode}: {tail}", file=sys.stderr)
        if self.after is not None:
            self.after()

    @property
    def median(self) -> float | None:
        return statistics.median(self.times) if self.times else None

    @property
    def cpu_median(self) -> float | None:
        return statistics.median(self.cpu_times) if self.cpu_times else None


def measure_corpus(
    name: str,
    repeats: int,
    slow_repeats: int,
    fast_only: bool,
    warmup: bool = True,
    before_codes: Sequence[tuple[str, str]] = (),
) -> dict:
    root = working_copy(name)
    files = corpus.python_files(root)
    lines = 0
    for path in files:
        with open(path, "rb") as handle:
            lines += handle.read().count(b"\n")
    triggered = triggered_files(files)
    lists = {}
    for label, chosen in (("all", files), ("triggered", triggered)):
        lists[label] = os.path.join(BENCH, f"{name}-{label}.txt")
        with open(lists[label], "w", encoding="utf-8") as handle:
            handle.write("\n".join(chosen) + "\n")

    # The 10 edited files: spread evenly over the files lifetime-lint parses.
    pool = triggered or files
    step = max(len(pool) // CHANGED, 1)
    changed = pool[::step][:CHANGED]
    originals = {}
    for path in changed:
        with open(path, "rb") as handle:
            originals[path] = handle.read()

    def edit_changed() -> None:
        for index, path in enumerate(changed):
            with open(path, "ab") as handle:
                handle.write(f"\n# lint_speed edit {time.time_ns()} {index}\n".encode())

    def restore_changed() -> None:
        for path, data in originals.items():
            with open(path, "wb") as handle:
                handle.write(data)

    def empty_cache() -> None:
        shutil.rmtree(os.path.join(root, CACHE_DIR), ignore_errors=True)

    has_cache = cli_supports("--no-cache")
    has_jobs = cli_supports("--jobs")
    base = [LIFETIME_LINT, "check", "--select", "ALL", "--exit-zero", "-q"]
    measures: list[Measure] = []
    measures.append(Measure("lifetime-lint cold", base + ["."], before=empty_cache))
    if has_cache:
        measures.append(Measure("lifetime-lint warm", base + ["."]))
        measures.append(
            Measure(
                f"lifetime-lint {CHANGED} changed (cache)",
                base + ["."],
                before=edit_changed,
                after=restore_changed,
            )
        )
    if has_jobs:
        measures.append(
            Measure("lifetime-lint cold --jobs 1", base + ["--jobs", "1", "."], before=empty_cache)
        )
    for label, before_code in before_codes:
        env = dict(TOOL_ENV, PYTHONPATH=before_code)
        old = [sys.executable, "-m", "lifetime_lint", "check", "--select", "ALL", "--exit-zero"]
        old += ["-q", "."]
        measures.append(Measure(f"{label}: lifetime-lint cold", old, before=empty_cache, env=env))
        measures.append(Measure(f"{label}: lifetime-lint warm", old, env=env))
    named = (
        base + (["--no-cache"] if has_cache else []) + [os.path.relpath(p, root) for p in changed]
    )
    measures.append(Measure(f"lifetime-lint {CHANGED} named files", named))
    parse = [sys.executable, os.path.abspath(__file__), "_parse"]
    measures.append(Measure("libcst parse (all)", parse + [lists["all"]]))
    measures.append(Measure("libcst parse (triggered)", parse + [lists["triggered"]]))
    ruff = tool_binary("ruff")
    if ruff:
        measures.append(
            Measure("ruff check", [ruff, "check", "--isolated", "--no-cache", "--exit-zero", "."])
        )
    if not fast_only:
        fixit = tool_binary("fixit")
        if fixit:
            measures.append(Measure("fixit lint", [fixit, "lint", "."], slow=True))
        torchfix = tool_binary("torchfix")
        if torchfix:
            measures.append(Measure("torchfix", [torchfix, "."], slow=True))

    fingerprint = code_fingerprint()
    print(
        f"\n## {name}: {len(files)} files, {lines} lines; rules {', '.join(enabled_rules())}; "
        f"lifetime-lint parses "
        f"{len(triggered)} of them (cache: {'yes' if has_cache else 'no'}, "
        f"--jobs: {'yes' if has_jobs else 'no'})",
        flush=True,
    )
    # One untimed round of the fast tools: bytecode caches and the OS file cache warm for all.
    for m in measures:
        if warmup and not m.slow:
            m.run(root)
            m.times.clear()
            m.cpu_times.clear()
            m.exit_codes.clear()
    for repeat in range(repeats):
        for m in measures:
            if m.slow and repeat >= slow_repeats:
                continue
            m.run(root)
            print(f"  [{repeat + 1}/{repeats}] {m.label}: {m.times[-1]:.2f} s", flush=True)
    empty_cache()
    code_changed = fingerprint != code_fingerprint()
    if code_changed:
        print("  ! lifetime-lint's code changed during the run (edits in the working tree): "
              "the cache was invalidated, so warm/changed timings may be cold ones.")  # fmt: skip

    results = {m.label: m for m in measures}
    report = {
        "corpus": name,
        "files": len(files),
        "lines": lines,
        "triggered_files": len(triggered),
        "rules": enabled_rules(),
        "code_changed_during_run": code_changed,
        "cache": has_cache,
        "jobs": has_jobs,
        "tools": {
            m.label: {
                "median_s": m.median,
                "cpu_median_s": m.cpu_median,
                "cpu_times_s": m.cpu_times,
                "times_s": m.times,
                "exit_codes": m.exit_codes,
                "command": " ".join(
                    os.path.basename(c) if i == 0 else c for i, c in enumerate(m.command[:8])
                ),
            }
            for m in measures
        },
    }
    print_table(report, results)
    return report


def _ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b == 0:
        return "n/a"
    return f"{a / b:.2f}x"


def print_table(report: dict, results: dict[str, Measure]) -> None:
    cold = results.get("lifetime-lint cold")
    cold_median = cold.median if cold else None
    parse_all = results["libcst parse (all)"].median
    parse_triggered = results["libcst parse (triggered)"].median
    print()
    print("| tool | median s | min-max s | runs | vs lifetime-lint cold | median CPU s |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, m in results.items():
        if not m.times:
            continue
        print(
            f"| {label} | {m.median:.2f} | {min(m.times):.2f}-{max(m.times):.2f} | "
            f"{len(m.times)} | {_ratio(m.median, cold_median)} | {m.cpu_median:.2f} |"
        )
    print()
    print(f"- cold / parse(triggered): {_ratio(cold_median, parse_triggered)} (target <= 1.5x)")
    print(f"- cold / parse(all): {_ratio(cold_median, parse_all)}")
    for slow in ("fixit lint", "torchfix"):
        if slow in results and results[slow].times:
            print(f"- cold / {slow}: {_ratio(cold_median, results[slow].median)} (target <= 0.05x)")
    warm = results.get("lifetime-lint warm")
    if warm is not None and warm.times:
        print(f"- warm / cold: {_ratio(warm.median, cold_median)} (target <= 0.02x); "
              f"in CPU time: {_ratio(warm.cpu_median, cold.cpu_median if cold else None)}")  # fmt: skip
    for label in results:
        if not label.endswith(": lifetime-lint cold"):
            continue
        before = label[: -len(" lifetime-lint cold")]
        for kind, now in (("cold", cold), ("warm", warm)):
            then = results.get(f"{before} lifetime-lint {kind}")
            if now is not None and then is not None and now.times and then.times:
                print(f"- {kind}, after / {before[:-1]}: {_ratio(now.median, then.median)}")
    for label in (
        f"lifetime-lint {CHANGED} changed (cache)",
        f"lifetime-lint {CHANGED} named files",
    ):
        if label in results and results[label].times:
            print(f"- {label}: {results[label].median:.2f} s (target < 2 s)")


def freeze_code() -> str:
    """Run lifetime-lint from a frozen copy of its code (see fix_safety.freeze_code): the
    cache is keyed by the code, and edits in a shared working tree would turn warm runs
    into cold ones mid-measurement."""
    from fix_safety import freeze_code as freeze

    target = freeze(os.path.join(BENCH, "speed_code"))
    TOOL_ENV["PYTHONPATH"] = target + os.pathsep + TOOL_ENV.get("PYTHONPATH", "")
    return target


def extract_revision(revision: str) -> str:
    """The lifetime-lint of a git revision, laid out as installed (`lifetime_lint/rules`,
    `lifetime_lint/runtime`), for `--before`; returns the folder to put on PYTHONPATH."""
    import io
    import tarfile

    target = os.path.join(BENCH, "before_code", re.sub(r"[^A-Za-z0-9_.-]", "_", revision))
    shutil.rmtree(target, ignore_errors=True)
    os.makedirs(target)
    archive = subprocess.run(
        ["git", "-C", REPO, "archive", revision, "lifetime_lint", "rules", "runtime"],
        capture_output=True,
        check=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(target, filter="data")
    package = os.path.join(target, "lifetime_lint")
    for sub in ("rules", "runtime"):
        os.replace(os.path.join(target, sub), os.path.join(package, sub))
    return target


def main(argv: Sequence[str]) -> None:
    if argv[:1] == ["_parse"]:
        parse_files(argv[1])
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("setup", help="create the tool venvs under .bench/venvs/")
    run = sub.add_parser("run", help="measure")
    run.add_argument("--corpus", action="append", choices=["torch-nn", *corpus.PINNED])
    run.add_argument("--repeats", type=int, default=5)
    run.add_argument("--slow-repeats", type=int, default=2, help="runs of Fixit and TorchFix")
    run.add_argument("--fast-only", action="store_true", help="skip Fixit and TorchFix")
    run.add_argument("--no-warmup", action="store_true", help="skip the untimed first round")
    run.add_argument("--no-freeze", action="store_true",
                     help="run the working tree's code, not a frozen copy of it")  # fmt: skip
    run.add_argument("--json", default=os.path.join(BENCH, "results", "lint_speed.json"))
    run.add_argument("--before", metavar="REV", action="append", default=[],
                     help="also time the lifetime-lint of this git revision (cold and warm); "
                          "repeatable")  # fmt: skip
    args = parser.parse_args(argv)
    if args.command == "setup":
        setup_venvs()
        return
    frozen = None if args.no_freeze else freeze_code()
    revision = subprocess.run(["git", "-C", REPO, "describe", "--always", "--dirty"],
                              capture_output=True, text=True).stdout.strip()  # fmt: skip
    print(f"# lifetime-lint code: {'frozen copy in ' + frozen if frozen else 'working tree'}, "
          f"git {revision}")  # fmt: skip
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"# lint speed: {platform.python_implementation()} {platform.python_version()}, "
        f"{os.cpu_count()} CPUs, load average {load:.2f} at start, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
    )
    before_codes = []
    for revision in args.before:
        before_code = extract_revision(revision)
        print(f"# before: git {revision}, extracted to {before_code}")
        before_codes.append((f"before {revision}" if len(args.before) > 1 else "before",
                             before_code))  # fmt: skip
    reports = [
        measure_corpus(
            name, args.repeats, args.slow_repeats, args.fast_only, not args.no_warmup, before_codes
        )
        for name in (args.corpus or ["torch-nn"])
    ]
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w", encoding="utf-8") as handle:
        json.dump({"load_average_at_start": load, "corpora": reports}, handle, indent=2)
    print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main(sys.argv[1:])
