"""Running the real `lifetime-lint check --select RULE` over a project tree, for the tests of
the project facts that decide LL004 and LL005 (one copy instead of one per test module)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def rule_rows(
    root: Path, rule: str, *flags: str, target: str = "."
) -> tuple[list[tuple[str, int]], str]:
    """((file name, row) of each `rule` finding under `target`, the `--statistics` text) of
    the real command run in `root`."""
    args = [sys.executable, "-m", "lifetime_lint", "check", "--jobs", "1", "--select", rule,
            "--exit-zero", *flags, target]  # fmt: skip
    found = subprocess.run([*args, "--output-format", "json"], cwd=root, capture_output=True,
                           text=True, check=True)  # fmt: skip
    statistics = subprocess.run([*args, "--statistics"], cwd=root, capture_output=True,
                                text=True, check=True)  # fmt: skip
    rows = [(Path(d["filename"]).name, d["location"]["row"]) for d in json.loads(found.stdout)]
    return sorted(rows), statistics.stdout


def ll004_rows(root: Path, *flags: str) -> tuple[list[tuple[str, int]], str]:
    """`rule_rows` of LL004 over the whole tree."""
    return rule_rows(root, "LL004", *flags)
