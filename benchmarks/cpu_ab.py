"""CPU time (user + system) of lint runs of several checkouts, interleaved, as medians.

    python benchmarks/cpu_ab.py new=. main=/tmp/main b7=/tmp/old-b7 --repeats 7
    python benchmarks/cpu_ab.py new=. main=/tmp/main --corpus torch-nn --steps cold,gate

Each `NAME=FOLDER` is a checkout of this repository (its `lifetime_lint/rules` and
`lifetime_lint/runtime` links in place), run as `python -m lifetime_lint` with
`PYTHONPATH=FOLDER`. On a shared machine wall time mostly measures the other processes;
CPU time (of the command and every process it waited for, from `getrusage`) is disturbed
much less, so that is what is reported, with wall time beside it. Inside each repeat every
step of every checkout runs once, in turn, so a burst of load hits them all alike.

Steps (the corpus, pinned, from `.corpus/`, is copied once into a temporary git repository
with one commit; byte code is written, as an installed linter's would be):
- `cold`: `check --no-cache --exit-zero -j JOBS .`
- `warm`: `check --exit-zero .` with a cache folder the checkout's first run filled, timed
  after one untimed run of the same command (the unchanged tree, a memo to replay).
- `gate`: the one-file pull-request gate of `pr_gate.py`: the median-sized file importing
  torch gets a function calling `torch.cuda.synchronize()`, then
  `check --no-cache --exit-zero --diff-base HEAD .`; the edit is undone after each run.
"""

from __future__ import annotations

import argparse
import os
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

from pr_gate import EDIT, typical_torch_file  # noqa: E402  (benchmarks/pr_gate.py)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(command: list[str], cwd: str, env: dict[str, str]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one command, which must exit 0."""
    cpu = _children_cpu()
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n"
                         f"{done.stderr.decode()[-3000:]}")  # fmt: skip
    return _children_cpu() - cpu, wall


def _tree(corpus: str, scratch: str) -> str:
    source = os.path.join(REPO, ".corpus", corpus)
    tree = os.path.join(scratch, corpus)
    shutil.copytree(source, tree, symlinks=False)
    env = dict(os.environ, GIT_AUTHOR_NAME="b", GIT_AUTHOR_EMAIL="b@example.com",
               GIT_COMMITTER_NAME="b", GIT_COMMITTER_EMAIL="b@example.com")  # fmt: skip
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "pinned"]):
        subprocess.run(["git", *args], cwd=tree, check=True, env=env, capture_output=True)
    return tree


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkouts", nargs="+", help="NAME=FOLDER")
    parser.add_argument("--corpus", default="torch-nn")
    parser.add_argument("--steps", default="cold,gate,warm")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args()
    checkouts = [item.split("=", 1) for item in args.checkouts]
    steps = args.steps.split(",")
    scratch = tempfile.mkdtemp(prefix="cpu-ab-")
    try:
        tree = _tree(args.corpus, scratch)
        edited = typical_torch_file(tree)
        with open(edited, "rb") as handle:
            original = handle.read()
        envs = {}
        caches = {}
        for name, folder in checkouts:
            env = {k: v for k, v in os.environ.items() if not k.startswith("LIFETIME_LINT_")}
            env["PYTHONPATH"] = os.path.abspath(folder)
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            envs[name] = env
            caches[name] = os.path.join(scratch, f"cache-{name}")
        base = [sys.executable, "-m", "lifetime_lint", "check", "--exit-zero"]
        commands = {
            "cold": base + ["--no-cache", "-j", str(args.jobs), "."],
            "gate": base + ["--no-cache", "--diff-base", "HEAD", "."],
        }
        # One untimed run of each first: byte code written, the warm cache filled.
        for name, _ in checkouts:
            _run(base + ["--cache-dir", caches[name], "."], tree, envs[name])
        samples: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for _ in range(args.repeats):
            for step in steps:
                for name, _folder in checkouts:
                    if step == "warm":
                        command = base + ["--cache-dir", caches[name], "."]
                        # Untimed first: a gate step's edit, undone, still changed a file's
                        # stamp, so this run re-checks it and records the memo again.
                        _run(command, tree, envs[name])
                    else:
                        command = commands[step]
                    if step == "gate":
                        with open(edited, "ab") as handle:
                            handle.write(EDIT.encode())
                    try:
                        sample = _run(command, tree, envs[name])
                    finally:
                        if step == "gate":
                            with open(edited, "wb") as handle:
                                handle.write(original)
                    samples.setdefault((step, name), []).append(sample)
        print(f"{args.corpus}, {args.repeats} interleaved repeats, -j {args.jobs} for cold; "
              "medians: CPU s (min-max) / wall s")  # fmt: skip
        first = checkouts[0][0]
        for step in steps:
            reference = statistics.median(cpu for cpu, _ in samples[(step, first)])
            for name, _folder in checkouts:
                cpus = [cpu for cpu, _ in samples[(step, name)]]
                walls = [wall for _, wall in samples[(step, name)]]
                cpu = statistics.median(cpus)
                print(f"{step:5} {name:8} CPU {cpu:.3f} s ({min(cpus):.3f}-{max(cpus):.3f})"
                      f"  wall {statistics.median(walls):.3f} s"
                      f"  {first}/{name} {reference / cpu:.3f}")  # fmt: skip
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
