"""Latency of `lifetime-lint server`: didChange -> publishDiagnostics on a large model file.

    python benchmarks/lsp_latency.py [FILE] [--changes 20] [--debounce 0] [--pythonpath DIR]

FILE defaults to the largest diffusers pipeline in .corpus/ (benchmarks/corpus.py prepares it)
over 1,500 lines. Each round edits one line of the buffer (a comment that changes the text, so
no cache can answer) and times from sending didChange to receiving the publishDiagnostics of
that version, with the server's debounce set as given (default 0: the debounce is a choice of
the editor's, not the linter's cost). Prints the median, min and max in milliseconds and the
number of diagnostics, as JSON. `--pythonpath DIR` runs the server from another checkout
(e.g. a `git archive` of an earlier commit, with `rules/` and `runtime/` copied under
`lifetime_lint/`), for a before/after pair on the same machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from lsp_client import LspClient  # noqa: E402


def default_file() -> Path:
    root = HERE.parent / ".corpus" / "diffusers" / "diffusers" / "pipelines"
    candidates = []
    for directory, _, names in os.walk(root):
        for name in names:
            if name.endswith(".py"):
                path = Path(directory) / name
                lines = path.read_bytes().count(b"\n")
                if 1500 <= lines <= 2500:
                    candidates.append((lines, str(path)))
    if not candidates:
        raise SystemExit("no corpus file: run `python benchmarks/corpus.py diffusers` or pass FILE")
    return Path(max(candidates)[1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("file", nargs="?", type=Path)
    parser.add_argument("--changes", type=int, default=20)
    parser.add_argument("--debounce", type=float, default=0.0)
    parser.add_argument("--pythonpath", help="import lifetime_lint from here (a snapshot)")
    args = parser.parse_args()
    if args.pythonpath:
        os.environ["PYTHONPATH"] = os.path.abspath(args.pythonpath)
    path = (args.file or default_file()).resolve()
    text = path.read_text(encoding="utf-8")
    client = LspClient(cwd=str(path.parent))
    try:
        client.initialize(path.parent, {"lifetime-lint": {"debounce": args.debounce}})
        uri = path.as_uri()
        client.notify(
            "textDocument/didOpen",
            {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}},
        )
        first = client.diagnostics(uri, version=1, timeout=120)
        timings = []
        for round_number in range(args.changes):
            version = round_number + 2
            edited = text + f"\n# edit {round_number}\n"
            started = time.perf_counter()
            client.notify(
                "textDocument/didChange",
                {
                    "textDocument": {"uri": uri, "version": version},
                    "contentChanges": [{"text": edited}],
                },
            )
            client.diagnostics(uri, version=version, timeout=120)
            timings.append((time.perf_counter() - started) * 1000)
    finally:
        client.close()
    print(
        json.dumps(
            {
                "file": str(path),
                "lines": text.count("\n"),
                "diagnostics": len(first),
                "changes": args.changes,
                "debounce_s": args.debounce,
                "server_from": args.pythonpath or "this checkout",
                "median_ms": round(statistics.median(timings), 1),
                "min_ms": round(min(timings), 1),
                "max_ms": round(max(timings), 1),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
