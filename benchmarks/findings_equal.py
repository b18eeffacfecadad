"""Do two lifetime-lints give the same findings? The working tree against a git revision.

    python benchmarks/findings_equal.py                      # against 4d98ff8, 160 files
    python benchmarks/findings_equal.py --base main --per-corpus 50 --seed 7
    python benchmarks/findings_equal.py --containing backward     # files LL006 may scan

Draws `--per-corpus` files from each corpus under `.corpus/` (a seeded random draw of its
`.py` files, sorted first so that the draw is the same on every machine), and lints them,
from a temporary folder, with each tree's `python -m lifetime_lint check --output-format
json --no-cache --exit-zero --config CFG` in two configurations: every rule at every
significance (`select = ["ALL"]`, `min-significance = "low"`) and the default one. The base
revision runs from `git archive` laid out as installed (`benchmarks/lint_speed.py
extract_revision`), with PYTHONPATH pointing at it; each run checks that it imported the
tree it was meant to. Findings are compared on (code, filename, location, end_location,
message, fix), exactly; exit status 1 on any difference, which is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lint_speed import extract_revision
from score_corpus import python_path_for

REPO = Path(__file__).resolve().parent.parent
CORPORA = ("diffusers", "transformers", "vllm-omni", "torch-nn")
CONFIGS = {
    "all rules, low": '[tool.lifetime-lint]\nselect = ["ALL"]\nmin-significance = "low"\n',
    "default": "[tool.lifetime-lint]\n",
}
_KEYS = ("code", "filename", "location", "end_location", "message", "fix")


def corpus_root() -> Path:
    local = REPO / ".corpus"
    return local if local.is_dir() else Path("/work/main/.corpus")


def draw(per_corpus: int, seed: int, containing: str | None = None) -> list[str]:
    rng = random.Random(seed)
    chosen: list[str] = []
    for name in CORPORA:
        files = sorted(str(p) for p in (corpus_root() / name).rglob("*.py"))
        if containing is not None:
            files = [f for f in files if containing in Path(f).read_text(errors="replace")]
        chosen.extend(rng.sample(files, min(per_corpus, len(files))))
    return chosen


def lint(
    code_root: str, files: list[str], config: str, workdir: str, tree: str | None = None
) -> list[dict]:
    """Findings of the lifetime-lint importable from `code_root`, whose files must lie in
    `tree` (default: `code_root` itself)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = code_root
    expected = os.path.realpath(tree or code_root)
    probe = (
        "import lifetime_lint, lifetime_lint.rules as r, os, sys;"
        "print(os.path.realpath(lifetime_lint.__file__));print(os.path.realpath(r.__file__))"
    )
    where = subprocess.run(
        [sys.executable, "-c", probe], env=env, cwd=workdir, capture_output=True, text=True
    ).stdout.split()
    if not where or not all(path.startswith(expected + os.sep) for path in where):
        raise SystemExit(f"imported {where}, not the tree under {expected}")
    command = [sys.executable, "-m", "lifetime_lint", "check", "--output-format", "json"]
    command += ["--no-cache", "--exit-zero", "--config", config, *files]
    done = subprocess.run(command, env=env, cwd=workdir, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"lint failed ({done.returncode}): {done.stderr[-2000:]}")
    return json.loads(done.stdout)


def key(finding: dict) -> str:
    return json.dumps({k: finding.get(k) for k in _KEYS}, sort_keys=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="4d98ff8", help="git revision to compare with")
    parser.add_argument("--per-corpus", type=int, default=40)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--containing", help="draw only files whose text contains this")
    args = parser.parse_args()
    files = draw(args.per_corpus, args.seed, args.containing)
    base_root = extract_revision(args.base)
    differences = 0
    with tempfile.TemporaryDirectory() as workdir:
        # The working tree through an installed-layout view (`rules/` as `lifetime_lint.rules`):
        # right from a git worktree too, where the venv's editable install points elsewhere.
        head_root = python_path_for(str(REPO), os.path.join(workdir, "head"))
        for label, text in CONFIGS.items():
            config = os.path.join(workdir, "pyproject.toml")
            Path(config).write_text(text)
            base = sorted(key(f) for f in lint(base_root, files, config, workdir))
            head = sorted(key(f) for f in lint(head_root, files, config, workdir, str(REPO)))
            only_base = sorted(set(base) - set(head))
            only_head = sorted(set(head) - set(base))
            same_multiset = base == head
            print(
                f"{label}: {len(files)} files; {len(base)} findings at {args.base}, "
                f"{len(head)} in the working tree; "
                + ("identical" if same_multiset else "DIFFERENT")
            )
            for finding in only_base:
                print(f"  only at {args.base}: {finding}")
            for finding in only_head:
                print(f"  only in the working tree: {finding}")
            differences += 0 if same_multiset else max(1, len(only_base) + len(only_head))
    print(f"{differences} differences")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
