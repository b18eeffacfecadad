"""The pull-request gate's cost, side by side: this lifetime-lint, an earlier one, and Ruff.

    python benchmarks/pr_gate.py                         # vllm-omni and torch-nn, 5 repeats
    python benchmarks/pr_gate.py --corpus torch-nn --repeats 3
    python benchmarks/pr_gate.py --baseline-rev b7dcd50  # the "today" to compare with
    python benchmarks/pr_gate.py --make-sites .gate/sites   # snapshots for another machine
    python benchmarks/pr_gate.py --sites .gate/sites ...    # ... run there (no git history)

Each corpus (pinned, from `.corpus/`, see `benchmarks/corpus.py`) is copied into a temporary
folder that is made its own git repository (one commit), so `--diff-base` has history and
no enclosing repository's ignore rules apply. Two snapshots of the linter are installed
side by side with `pip install --target` (never the working tree, whose edits would
invalidate the cache mid-run): `new` (HEAD, or `--new-rev`) and `old` (`--baseline-rev`,
the code before the gate work). Every command is a fresh process, timed as a whole
(start-up included), with the default `--jobs` (the CPU count); all tools and steps run in
turn inside each repeat, so a burst of load on a shared machine hits them all. Reported:
the median of the repeats and the spread (min-max), and beside it the median CPU time
(user + system of the command and the processes it waited for, its pool workers included).

Steps, per tool, in this order inside a repeat:
- `cold`: `check` with an empty cache folder.
- `warm`: the same again (the unchanged tree, the cache the cold run left).
- `diff 1`: `--diff` with an empty cache folder.
- `diff 2`: `--diff` again.
- `diff-base 1 file`: one file edited (a function calling `torch.cuda.synchronize()`
  appended to the median-sized file among those importing torch), `--diff-base HEAD` with
  no cache (`--no-cache`), then the edit undone.
- Ruff (`ruff check --isolated`, its default rules): cold (`--no-cache`), warm (its
  cache), `--diff` twice; Ruff has no `--diff-base`.

The ratios checked are the issue's targets: `diff-base 1 file` / `cold` <= 1/10,
`diff 2` / `diff 1` <= 1/20, `warm` / `cold` <= 1/50 (torch/nn). Prints a Markdown table;
writes JSON to `$OUT/pr_gate.json` if `$OUT` is set, else `.bench/results/pr_gate.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import corpus  # noqa: E402  (benchmarks/corpus.py)

RUFF = shutil.which("ruff") or os.path.join(os.path.dirname(sys.executable), "ruff")
EDIT = "\n\ndef _pr_gate_edit():\n    import torch\n\n    torch.cuda.synchronize()\n"


def _git(cwd: str, *args: str) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="b", GIT_AUTHOR_EMAIL="b@example.com",
               GIT_COMMITTER_NAME="b", GIT_COMMITTER_EMAIL="b@example.com")  # fmt: skip
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
                          env=env).stdout  # fmt: skip


def snapshot(rev: str, target: str) -> str:
    """Install the linter as of git revision `rev` into `target` (a PYTHONPATH folder)."""
    source = os.path.join(target, "src")
    os.makedirs(source)
    archive = subprocess.run(["git", "archive", rev], cwd=REPO, check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", source], input=archive.stdout, check=True)
    site = os.path.join(target, "site")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
         "--target", site, source],
        check=True, capture_output=True,
    )  # fmt: skip
    return site


def working_copy(name: str, parent: str) -> str:
    target = os.path.join(parent, name)
    shutil.copytree(corpus.prepare(name), target, ignore=shutil.ignore_patterns("__pycache__"))
    _git(target, "init", "-q")
    _git(target, "add", "-A")
    _git(target, "commit", "-q", "-m", "corpus")
    return target


def typical_torch_file(tree: str) -> str:
    """The median-sized file among those that import torch: what a pull request touches."""
    sized = []
    for folder, subfolders, names in os.walk(tree):
        subfolders[:] = sorted(d for d in subfolders if d != ".git")
        for name in sorted(names):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                with open(path, "rb") as handle:
                    if b"import torch" in handle.read():
                        sized.append((os.path.getsize(path), path))
    sized.sort()
    return sized[len(sized) // 2][1]


# CPU seconds (user + system) of the latest `timed` command and every process it waited
# for (the cold run's pool workers included): wall time on a loaded machine counts the
# waits for a core, CPU time mostly does not.
LAST_CPU = [0.0]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(command: list[str], cwd: str, env: dict[str, str], ok: tuple[int, ...]) -> float:
    cpu = _children_cpu()
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True)
    seconds = time.perf_counter() - start
    LAST_CPU[0] = _children_cpu() - cpu
    if done.returncode not in ok:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n"
                         f"{done.stderr.decode()[-3000:]}")  # fmt: skip
    return seconds


def _timed_both(command: list[str], cwd: str, env: dict[str, str], ok: tuple[int, ...],
                times: dict[str, float], step: str) -> None:  # fmt: skip
    """`times[step]` the wall time, `times[step + CPU]` the CPU time."""
    times[step] = timed(command, cwd, env, ok)
    times[step + CPU] = LAST_CPU[0]


CPU = " (CPU)"  # the suffix of a step's CPU-time samples


ALL_STEPS = ("cold", "warm", "diff 1", "diff 2", "diff-base 1 file")


def lifetime_lint_steps(
    site: str, tree: str, scratch: str, steps: tuple[str, ...] = ALL_STEPS
) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LIFETIME_LINT_")}
    # The snapshot first; then whatever gives LibCST and click where they are not installed.
    env["PYTHONPATH"] = os.pathsep.join([site, *filter(None, [os.environ.get("PYTHONPATH")])])
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    base = [sys.executable, "-m", "lifetime_lint", "check", "--exit-zero"]
    ok = (0, 1, 2)  # 1: --diff found fixes; 2: a corpus file does not parse (E999)
    times: dict[str, float] = {}
    if "cold" in steps or "warm" in steps:
        folder = tempfile.mkdtemp(prefix="cache-", dir=scratch)
        _timed_both(base + ["--cache-dir", folder, "."], tree, env, ok, times, "cold")
        if "warm" in steps:
            _timed_both(base + ["--cache-dir", folder, "."], tree, env, ok, times, "warm")
        shutil.rmtree(folder)
    if "diff 1" in steps or "diff 2" in steps:
        folder = tempfile.mkdtemp(prefix="cache-", dir=scratch)
        diff = base + ["--diff", "--cache-dir", folder, "."]
        _timed_both(diff, tree, env, ok, times, "diff 1")
        if "diff 2" in steps:
            _timed_both(diff, tree, env, ok, times, "diff 2")
        shutil.rmtree(folder)
    if "diff-base 1 file" not in steps:
        return times
    edited = typical_torch_file(tree)
    with open(edited, "rb") as handle:
        original = handle.read()
    try:
        with open(edited, "ab") as handle:
            handle.write(EDIT.encode())
        one_file = base + ["--no-cache", "--diff-base", "HEAD", "."]
        _timed_both(one_file, tree, env, ok, times, "diff-base 1 file")
    finally:
        with open(edited, "wb") as handle:
            handle.write(original)
    return times


def ruff_steps(tree: str, scratch: str) -> dict[str, float]:
    base = [RUFF, "check", "--isolated", "--exit-zero"]
    folder = tempfile.mkdtemp(prefix="ruff-cache-", dir=scratch)
    env = dict(os.environ, RUFF_CACHE_DIR=folder)
    times = {
        "cold": timed(base + ["--no-cache", "."], tree, env, (0, 1)),
        "warm (cache)": 0.0,
    }
    timed(base + ["."], tree, env, (0, 1))  # fill the cache
    times["warm (cache)"] = timed(base + ["."], tree, env, (0, 1))
    shutil.rmtree(folder, ignore_errors=True)
    folder = tempfile.mkdtemp(prefix="ruff-cache-", dir=scratch)
    env["RUFF_CACHE_DIR"] = folder
    times["diff 1"] = timed(base + ["--diff", "."], tree, env, (0, 1))
    times["diff 2"] = timed(base + ["--diff", "."], tree, env, (0, 1))
    return times


def _stats(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def make_sites(new_rev: str, old_rev: str, target: str) -> None:
    """Install both snapshots under `target` (pure Python: they run on any CPython 3.10+)."""
    revs = {}
    for tool, rev in (("new", new_rev), ("old", old_rev)):
        folder = os.path.join(target, tool)
        shutil.rmtree(folder, ignore_errors=True)
        snapshot(rev, folder)
        shutil.rmtree(os.path.join(folder, "src"))
        revs[tool] = _git(REPO, "rev-parse", "--short", rev).strip()
    with open(os.path.join(target, "revs.json"), "w", encoding="utf-8") as handle:
        json.dump(revs, handle)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", action="append", help="default: vllm-omni, torch-nn")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--baseline-rev", default="b7dcd50", help="the earlier linter")
    parser.add_argument("--new-rev", default="HEAD", help="the linter under test")
    parser.add_argument("--tools", default="new,old,ruff", help="which of new,old,ruff to run")
    parser.add_argument("--steps", default=",".join(ALL_STEPS),
                        help="which lifetime-lint steps to run (comma-separated)")  # fmt: skip
    parser.add_argument("--make-sites", metavar="DIR",
                        help="only install the two snapshots into DIR (for --sites), then exit")  # fmt: skip
    parser.add_argument("--sites", metavar="DIR",
                        help="use the snapshots --make-sites left in DIR (a machine without the "
                             "repository's history, such as the device machine)")  # fmt: skip
    args = parser.parse_args()
    if args.make_sites:
        make_sites(args.new_rev, args.baseline_rev, args.make_sites)
        return
    tools = [t for t in args.tools.split(",") if t]
    steps = tuple(s for s in args.steps.split(",") if s)
    corpora = args.corpus or ["vllm-omni", "torch-nn"]
    scratch = tempfile.mkdtemp(prefix="pr-gate-")
    try:
        if args.sites:
            with open(os.path.join(args.sites, "revs.json"), encoding="utf-8") as handle:
                revs = json.load(handle)
            sites = {tool: os.path.abspath(os.path.join(args.sites, tool, "site"))
                     for tool in ("new", "old")}  # fmt: skip
        else:
            sites = {
                "new": snapshot(args.new_rev, os.path.join(scratch, "new")),
                "old": snapshot(args.baseline_rev, os.path.join(scratch, "old")),
            }
            revs = {
                "new": _git(REPO, "rev-parse", "--short", args.new_rev).strip(),
                "old": _git(REPO, "rev-parse", "--short", args.baseline_rev).strip(),
            }
        report: dict[str, object] = {
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "machine": f"{platform.node()}, {os.cpu_count()} CPUs",
            "load_average_start": os.getloadavg(),
            "revisions": revs,
            "repeats": args.repeats,
            "corpora": {},
        }
        for name in corpora:
            tree = working_copy(name, scratch)
            files = sum(1 for _, _, n in os.walk(tree) for f in n if f.endswith((".py", ".pyi")))
            edited = os.path.relpath(typical_torch_file(tree), tree)
            samples: dict[str, dict[str, list[float]]] = {tool: {} for tool in tools}
            loads = []
            for _ in range(args.repeats):
                loads.append(os.getloadavg()[0])
                for tool in ("new", "old"):
                    if tool in tools:
                        found = lifetime_lint_steps(sites[tool], tree, scratch, steps)
                        for step, seconds in found.items():
                            samples[tool].setdefault(step, []).append(seconds)
                if "ruff" in tools:
                    for step, seconds in ruff_steps(tree, scratch).items():
                        samples["ruff"].setdefault(step, []).append(seconds)
                print(f"{name}: repeat done, load {loads[-1]:.1f}: {samples}", file=sys.stderr)
            result = {tool: {step: _stats(v) for step, v in steps.items()}
                      for tool, steps in samples.items()}  # fmt: skip
            report["corpora"][name] = {"files": files, "edited": edited, "load_average": loads,
                                       "times": result, "samples": samples}  # fmt: skip
            print(render(name, files, result, revs, loads))
            print(f"(diff-base edit: {edited})\n")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    out = os.environ.get("OUT") or os.path.join(REPO, ".bench", "results")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "pr_gate.json"), "w", encoding="utf-8") as handle:
        json.dump(report, handle, indent=2)


def render(name: str, files: int, result: dict, revs: dict[str, str], loads: list[float]) -> str:
    def cell(tool: str, step: str) -> str:
        value = result.get(tool, {}).get(step)
        if value is None:
            return "n/a"
        text = f"{value['median']:.2f} s ({value['min']:.2f}-{value['max']:.2f})"
        cpu = result.get(tool, {}).get(step + CPU)
        if cpu is not None:
            text += f"; CPU {cpu['median']:.2f} s"
        return text

    steps = list(ALL_STEPS)
    lines = [
        f"### {name} ({files} files; load average {min(loads):.1f}-{max(loads):.1f})",
        "",
        f"| step | lifetime-lint new ({revs['new']}) | lifetime-lint old ({revs['old']}) | Ruff |",
        "| --- | ---: | ---: | ---: |",
    ]
    for step in steps:
        ruff_step = "warm (cache)" if step == "warm" else step
        lines.append(f"| {step} | {cell('new', step)} | {cell('old', step)} | "
                     f"{cell('ruff', ruff_step)} |")  # fmt: skip
    new = result.get("new", {})
    cold = new["cold"]["median"] if "cold" in new else float("nan")

    def ratio(a: str, b: str) -> str:
        if a not in new or b not in new:
            return "n/a"
        return f"1/{new[b]['median'] / new[a]['median']:.1f}"

    def versus(step: str) -> str:
        old = result.get("old", {})
        if step not in new or step not in old:
            return "n/a"
        return f"{new[step]['median'] / old[step]['median']:.2f}x"

    lines += [
        "",
        f"Targets (new): diff-base 1 file / cold = {ratio('diff-base 1 file', 'cold')} "
        f"(<= 1/10); diff 2 / diff 1 = {ratio('diff 2', 'diff 1')} (<= 1/20); "
        f"warm / cold = {ratio('warm', 'cold')} (<= 1/50 on torch-nn); cold {cold:.2f} s.",
        f"The same in CPU time (medians): diff-base 1 file / cold = "
        f"{ratio('diff-base 1 file' + CPU, 'cold' + CPU)}; new / old cold = {versus('cold')}, "
        f"in CPU time {versus('cold' + CPU)}.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
