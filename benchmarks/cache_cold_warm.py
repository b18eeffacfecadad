"""Cold and warm runs of `lifetime-lint` over a large real tree: what the cache saves.

    python benchmarks/cache_cold_warm.py                      # diffusers + transformers
    python benchmarks/cache_cold_warm.py --jobs 1 --jobs 2    # job counts to measure
    python benchmarks/cache_cold_warm.py --corpus torch-nn    # a smaller tree

For each job count: a cold run into an empty cache folder, then a warm run on the unchanged
tree, and a run with `--no-cache` for reference; the warm run's report must be identical
to the cold one's (checked).

The cache key includes the modification times of the linter's own modules, so in a working
tree that is being edited a "warm" run may be cold again. For a stable measurement, run a
snapshot of a commit:

    git archive HEAD | tar -x -C /tmp/ll-src && \
      python -m pip install --no-deps --no-build-isolation --target /tmp/ll-site /tmp/ll-src
    PYTHONPATH=/tmp/ll-site python benchmarks/cache_cold_warm.py Runs the installed CLI in a subprocess, as users do. Prints a
table and, if `$OUT` is set, writes `$OUT/cache_cold_warm.json`. CPU only (the linter never
touches a GPU).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from corpus import prepare

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _lint(paths: list[str], jobs: int, cache: list[str]) -> dict[str, object]:
    command = [sys.executable, "-m", "lifetime_lint", "check", "--exit-zero", "--format", "json",
               "--jobs", str(jobs), *cache, *paths]  # fmt: skip
    start = time.perf_counter()
    # Outside the repository, so `-m lifetime_lint` imports the installed package (or the
    # snapshot on PYTHONPATH), never the working tree by accident.
    done = subprocess.run(command, cwd=tempfile.gettempdir(), capture_output=True)  # fmt: skip
    seconds = time.perf_counter() - start
    if done.returncode not in (0, 2):  # 2: some corpus file does not parse (reported, E999)
        raise SystemExit(f"lint failed ({done.returncode}): {done.stderr.decode()[-2000:]}")
    return {"seconds": round(seconds, 2), "report": done.stdout}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--corpus", action="append", help="corpus name (default: diffusers, transformers)"
    )
    parser.add_argument(
        "--jobs", action="append", type=int, help="job counts (default: 1 and the CPU count)"
    )
    args = parser.parse_args()
    corpora = args.corpus or ["diffusers", "transformers"]
    jobs_list = args.jobs or sorted({1, len(os.sched_getaffinity(0))})
    paths = [prepare(name) for name in corpora]
    files = sum(1 for p in paths for _, _, names in os.walk(p) for n in names if n.endswith(".py"))
    size = sum(os.path.getsize(os.path.join(d, n)) for p in paths for d, _, names in os.walk(p)
               for n in names if n.endswith(".py"))  # fmt: skip

    from lifetime_lint import __version__
    from lifetime_lint.registry import all_rules

    rows = []
    for jobs in jobs_list:
        folder = tempfile.mkdtemp(prefix="lifetime-lint-cache-")
        try:
            cold = _lint(paths, jobs, ["--cache-dir", folder])
            warm = _lint(paths, jobs, ["--cache-dir", folder])
            plain = _lint(paths, jobs, ["--no-cache"])
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        if warm["report"] != cold["report"] or plain["report"] != cold["report"]:
            raise SystemExit("the cached report differs from the uncached one")
        findings = len(json.loads(cold["report"]))
        rows.append({
            "jobs": jobs,
            "no_cache_s": plain["seconds"],
            "cold_s": cold["seconds"],
            "warm_s": warm["seconds"],
            "warm_speedup_vs_no_cache": round(plain["seconds"] / warm["seconds"], 1),
            "diagnostics": findings,
        })  # fmt: skip
        print(f"jobs {jobs}: --no-cache {plain['seconds']} s, cold {cold['seconds']} s, "
              f"warm {warm['seconds']} s", flush=True)  # fmt: skip

    result = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "corpora": corpora,
        "files": files,
        "megabytes": round(size / 1e6, 1),
        "version": __version__,
        "rules": [rule.code for rule in all_rules()],
        "cpus": len(os.sched_getaffinity(0)),
        "runs": rows,
    }
    print(f"{files} files, {result['megabytes']} MB; rules {', '.join(result['rules'])}")
    print(
        f"{'jobs':>4} {'--no-cache':>11} {'cold':>8} {'warm':>8} {'warm speedup':>13} {'diagnostics':>12}"
    )
    for row in rows:
        print(f"{row['jobs']:>4} {row['no_cache_s']:>10.2f}s {row['cold_s']:>7.2f}s "
              f"{row['warm_s']:>7.2f}s {row['warm_speedup_vs_no_cache']:>12.1f}x {row['diagnostics']:>12}")  # fmt: skip
    out = os.environ.get("OUT")
    if out:
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "cache_cold_warm.json"), "w") as handle:
            json.dump(result, handle, indent=2)


if __name__ == "__main__":
    main()
