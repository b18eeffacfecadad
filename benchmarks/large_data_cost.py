"""What linting a module over the parser's 1 MB limit costs when its size is literal data.

    python benchmarks/large_data_cost.py [--megabytes 2] [--repeat 3]

Generates a module of Hadamard-style tables (`torch.FloatTensor([[+1, -1, ...], ...])` in
small functions, as spinquant's `known_hadamard.py`) plus one function with an LL004
finding, then times, in one process: Python's parse, finding the data (`data_cuts`), the
LibCST parse of what remains (each with the cyclic garbage collector paused, as the engine
runs a lint), and a whole `Linter.lint_text`. Prints the best of the runs.
Run it with `nice` on a shared machine.
"""

from __future__ import annotations

import argparse
import ast
import gc
import random
import sys
import time

import libcst

from lifetime_lint import parsing
from lifetime_lint.config import Settings
from lifetime_lint.engine import Linter


def table_module(megabytes: float) -> str:
    pick = random.Random(0).choice
    parts = ['"""Known Hadamard matrices."""\nimport torch\n\n\n']
    size, index = 0, 0
    while size < megabytes * (1 << 20):
        rows = ["[" + ", ".join(pick(("+1", "-1")) for _ in range(172)) + "]" for _ in range(172)]
        part = f"def get_had{index}():\n    return torch.FloatTensor([\n        "
        part += ",\n        ".join(rows) + ",\n    ])\n\n\n"
        parts.append(part)
        size += len(part)
        index += 1
    parts.append(
        "def offload(pipe):\n    pipe.to('cpu')\n"
        "    if torch.cuda.is_available():\n        torch.cuda.empty_cache()\n"
    )
    return "".join(parts)


def best(repeat: int, work) -> float:
    times = []
    for _ in range(repeat):
        gc.disable()
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
        gc.enable()
        gc.collect()
    return min(times)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=2.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    text = table_module(args.megabytes)
    tree = ast.parse(text)
    cuts = parsing.data_cuts(text, tree)
    view, _ = parsing.libcst_view(text, cuts)
    linter = Linter(Settings())
    diagnostics, error = linter.lint_text("tables.py", text)
    assert error is None and len(diagnostics) == 1, (diagnostics, error)
    print(f"module {len(text) / (1 << 20):.2f} MB, {len(cuts)} cuts, view {len(view)} chars")
    timings = {
        "ast.parse": best(args.repeat, lambda: ast.parse(text)),
        "data_cuts": best(args.repeat, lambda: parsing.data_cuts(text, tree)),
        "libcst.parse_module(view)": best(args.repeat, lambda: libcst.parse_module(view)),
        "parse_exact": best(args.repeat, lambda: parsing.parse_exact(text)),
        "Linter.lint_text": best(args.repeat, lambda: linter.lint_text("tables.py", text)),
    }
    for name, seconds in timings.items():
        print(f"{name:28} {seconds:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
