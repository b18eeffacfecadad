"""What the parser guards cost next to the parse they protect.

    python benchmarks/parse_guard_cost.py /work/main/.corpus/diffusers [--limit N]

For every `.py` file under the folder (the first N, sorted), in one process: the time of
`parsing.nesting_problem` (the regular-expression screen, plus Python's own parse and a
depth walk for the files the screen flags) and of the view LibCST gets (`libcst_view`),
against `libcst.parse_module` of the same text. Prints files, flagged files, the deepest
syntax tree among the flagged, and the seconds of each, with the guard as a share of the
parse. Run it with `nice` on a shared machine; the share is what matters.
"""

from __future__ import annotations

import argparse
import ast
import os
import sys
import time

import libcst

from lifetime_lint import parsing
from lifetime_lint.source import SourceError, SourceFile


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder")
    parser.add_argument("--limit", type=int, default=0)
    args = parser.parse_args(argv)
    paths = sorted(
        os.path.join(d, n)
        for d, _, names in os.walk(args.folder)
        for n in names
        if n.endswith(".py")
    )
    if args.limit:
        paths = paths[: args.limit]
    guard = view = parse = 0.0
    flagged, deepest, files, size = 0, 0, 0, 0
    for path in paths:
        try:
            text = SourceFile.read(path).text
        except SourceError:
            continue
        files += 1
        size += len(text)
        started = time.perf_counter()
        problem = parsing.nesting_problem(text)
        guard += time.perf_counter() - started
        if parsing.could_be_deeply_nested(text):
            flagged += 1
            deepest = max(deepest, parsing.tree_depth(ast.parse(text)))
        started = time.perf_counter()
        parse_text, _ = parsing.libcst_view(text)
        view += time.perf_counter() - started
        if problem is None:
            started = time.perf_counter()
            libcst.parse_module(parse_text)
            parse += time.perf_counter() - started
    print(f"files {files} ({size / 1e6:.1f} MB), flagged by the screen {flagged}, "
          f"deepest flagged tree {deepest}")  # fmt: skip
    print(f"guard {guard:.2f} s + view {view:.2f} s vs libcst.parse_module {parse:.2f} s: "
          f"{100 * (guard + view) / parse:.1f}% of the parse")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
