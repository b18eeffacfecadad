"""Relint `benchmarks/labelled/LL006.json` (its own format): is each site read by hand reported?

    python benchmarks/score_ll006_labels.py --sources DIR [--wild DIR] [-v]

Each entry names a corpus and a path. The file is looked for under `DIR/<corpus>/` (pip
packages unzipped there: `torchtune-0.6.1/recipes/...`), under `.corpus/<name>/` for the
on-disk corpora (`fastvideo-0.2.1` -> `.corpus/fastvideo`), and, for transcribed public
functions (`public-github-sample (transcribed: /tmp/.../f.py)`), at that path or under
`--wild`. A site is reported when `lifetime-lint check --select LL006` (every significance)
gives a finding on its line. Prints instances reported / instances found, negatives
flagged / negatives found, the entries whose stored `rule_reports` differs from this run,
and the entries whose source is missing here, or whose line no longer holds the
labelled code (not counted).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LABELS = REPO / "benchmarks" / "labelled" / "LL006.json"
CONFIG = '[tool.lifetime-lint]\nselect = ["LL006"]\nmin-significance = "low"\n'


def locate(entry: dict, sources: Path | None, wild: Path | None) -> Path | None:
    corpus, path = entry.get("corpus", ""), entry.get("path", "")
    transcribed = re.search(r"transcribed: ([^)]+)\)", corpus)
    if transcribed:
        candidates = [Path(transcribed.group(1))]
        if wild is not None:
            candidates.append(wild / Path(transcribed.group(1)).name)
    else:
        name = corpus.split(" ")[0]
        candidates = [sources / name / path] if sources is not None else []
        candidates.append(REPO / ".corpus" / re.sub(r"-\d[\w.]*$", "", name) / path)
    return next((c for c in candidates if c.is_file()), None)


def _on_line(path: Path, entry: dict) -> bool:
    """Whether the labelled code is on the labelled line of this copy (another version of
    the package may have moved it): its first 30 characters, blanks collapsed."""
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    if not 0 < entry["line"] <= len(lines):
        return False
    code = " ".join(entry.get("code", "").split())[:30]
    return code in " ".join(lines[entry["line"] - 1].split())


def reported_lines(files: list[Path]) -> dict[Path, set[int]]:
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "pyproject.toml"
        config.write_text(CONFIG, encoding="utf-8")
        result = subprocess.run(
            [sys.executable, "-m", "lifetime_lint", "check", "--output-format", "json"]
            + ["--no-cache", "--exit-zero", "--config", str(config)]
            + [str(f) for f in files],
            capture_output=True,
            text=True,
            cwd=tmp,  # not the repository: PYTHONPATH picks the lifetime-lint that runs
        )
    lines: dict[Path, set[int]] = {f.resolve(): set() for f in files}
    for finding in json.loads(result.stdout or "[]"):
        if finding["code"] == "LL006":
            path = Path(finding["filename"]).resolve()
            lines.setdefault(path, set()).add(finding["location"]["row"])
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sources", type=Path, help="folder of unzipped NAME-VERSION packages")
    parser.add_argument("--wild", type=Path, help="folder of the transcribed public functions")
    parser.add_argument("-v", action="store_true", help="list every entry")
    args = parser.parse_args()
    entries = json.loads(LABELS.read_text(encoding="utf-8"))["instances"]
    located = [(e, locate(e, args.sources, args.wild)) for e in entries]
    files = sorted({p for _, p in located if p is not None})
    lines = reported_lines(files) if files else {}
    counts = {"instance": [0, 0], "negative": [0, 0]}
    changed, missing = [], []
    for entry, path in located:
        where = f"{entry.get('corpus', '').split(' ')[0]} {entry.get('path')}:{entry.get('line')}"
        if path is None or not entry.get("line") or not _on_line(path, entry):
            missing.append(where)
            continue
        reported = entry["line"] in lines.get(path.resolve(), set())
        counts[entry["label"]][0] += reported
        counts[entry["label"]][1] += 1
        if reported != entry.get("rule_reports"):
            changed.append(
                f"{where} ({entry['label']}): stored {entry.get('rule_reports')}, now {reported}"
            )
        if args.v:
            print(f"{entry['label']:9} {'reported' if reported else '-':9} {where}")
    print(f"instances reported: {counts['instance'][0]}/{counts['instance'][1]}")
    print(f"negatives flagged: {counts['negative'][0]}/{counts['negative'][1]}")
    for line in changed:
        print("differs:", line)
    print(f"sources missing here ({len(missing)}):", ", ".join(missing) if missing else "none")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
