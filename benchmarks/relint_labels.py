"""Which labelled findings does the linter still report? Re-lints the files of a labelled
sample (`score_corpus.py --sample` output, labels filled in) with the working tree's
lifetime-lint and prints, per rule, how many true and false findings are still reported.

A re-lint of a sample's files is not a new draw: it shows what a change did to findings
someone read, and misses new findings in those files (a new draw shows them).

    python benchmarks/relint_labels.py benchmarks/labelled/samples-s4.json --rules LL001
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
from pathlib import Path

CORPUS = Path(__file__).resolve().parent.parent / ".corpus"


def _name(message: str) -> str:
    """The held name or list a message is about (its first backticked word)."""
    parts = message.split("`")
    return parts[1] if len(parts) > 1 else message


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("samples", type=Path)
    parser.add_argument("--rules", default="", help="comma-separated rules (all)")
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("-v", "--verbose", action="store_true", help="list every finding")
    args = parser.parse_args()
    rules = {r for r in args.rules.split(",") if r}
    items = [x for x in json.loads(args.samples.read_text()) if not rules or x["rule"] in rules]
    key = lambda x: (x["rule"], x["repo"], x["path"], x["line"], _name(x["message"]))  # noqa: E731
    unique = list({key(x): x for x in items}.values())
    reported: set[tuple] = set()
    for repo, path in sorted({(x["repo"], x["path"]) for x in unique}):
        run = subprocess.run(
            [sys.executable, "-m", "lifetime_lint", "check", "--no-cache", "--exit-zero",
             "--output-format", "json", "--select", ",".join(sorted({x["rule"] for x in unique})),
             str(args.corpus / repo / path)],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        for finding in json.loads(run.stdout):
            reported.add(
                (finding["code"], repo, path, finding["location"]["row"], _name(finding["message"]))
            )
    counts: collections.Counter[tuple[str, str, object]] = collections.Counter()
    for item in unique:
        state = "reported" if key(item) in reported else "gone"
        counts[(item["rule"], state, item["label"])] += 1
        if args.verbose:
            print(state, item["label"], item["path"], item["line"], _name(item["message"]))
    print(
        "| rule | still reported: true | still reported: false | precision | gone: true | gone: false |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for rule in sorted({x["rule"] for x in unique}):
        t, f = counts[(rule, "reported", True)], counts[(rule, "reported", False)]
        share = f"{t / (t + f):.0%}" if t + f else "-"
        print(
            f"| {rule} | {t} | {f} | {share} | {counts[(rule, 'gone', True)]} | {counts[(rule, 'gone', False)]} |"
        )


if __name__ == "__main__":
    main()
