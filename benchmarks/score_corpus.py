"""Score lifetime-lint against the labelled real-code corpus (benchmarks/labelled/).

    python benchmarks/score_corpus.py                      # recall and negatives flagged, per rule
    python benchmarks/score_corpus.py --tree /work/wt/x    # the linter of another source tree
    python benchmarks/score_corpus.py --select LL001 --set 'min-significance = "low"'
    python benchmarks/score_corpus.py --sample 25 --seed 1 --out samples.json
    python benchmarks/score_corpus.py --precision benchmarks/labelled/samples-before.json

Labels are read from `benchmarks/labelled/LL*.json` (format in benchmarks/labelled/README.md).
The default mode lints only the labelled files (fast), then matches findings to labels by rule,
file and the labelled function's line span (from `ast`; an optional `match` string must also
appear in the message). An instance is found when at least one finding matches it; a negative
is flagged when any finding matches it.

`--sample N` lints whole corpora with the default run, draws N findings per rule at random
(reproducible with `--seed`) and writes them for labelling; `--precision FILE` reads such a
file once labelled (`"label": true|false`, `"cause"`) and prints precision per rule.

The linter runs as `python -m lifetime_lint check --format json --exit-zero --no-cache` in a
subprocess, from the source tree given by `--tree` (default: the tree this file lives in),
with each corpus seen through a scratch folder of links so that relative paths, config
discovery and scope globs see the corpus folder as the project root, and nothing above it.
"""

from __future__ import annotations

import argparse
import ast
import glob
import json
import os
import random
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # the project's own dependency on older Pythons
    import tomli as tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_TREE = os.path.dirname(HERE)
DEFAULT_LABELS = os.path.join(HERE, "labelled")
REPOS = ("diffusers", "transformers", "vllm-omni", "fastvideo", "sglang")
LABELS = ("instance", "negative")


def default_corpus(tree: str) -> str:
    """`.corpus/` of `tree`, or of the main checkout when `tree` is a git worktree of it."""
    own = os.path.join(tree, ".corpus")
    if os.path.isdir(own):
        return own
    done = subprocess.run(
        ["git", "-C", tree, "rev-parse", "--path-format=absolute", "--git-common-dir"],
        capture_output=True,
        text=True,
    )
    if done.returncode == 0:
        main_checkout = os.path.dirname(done.stdout.strip())
        if os.path.isdir(os.path.join(main_checkout, ".corpus")):
            return os.path.join(main_checkout, ".corpus")
    return own


# -- labels ----------------------------------------------------------------------------------


@dataclass
class Label:
    """One labelled function of one rule: a real instance or a hard negative."""

    rule: str
    repo: str
    path: str
    function: str
    line: int
    label: str
    why: str
    match: str | None = None
    lines: tuple[int, int] | None = None  # narrows the span (first and last line)
    span: tuple[int, int] | None = None  # filled in from the source
    error: str | None = None  # why the label could not be placed in its source
    findings: list[dict[str, Any]] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{self.repo}/{self.path}:{self.line} {self.function}"


def load_labels(folder: str, rules: Sequence[str] | None = None) -> list[Label]:
    """Every label in `folder`/LL*.json (the rule is the file's name), checked for shape."""
    labels = []
    for filename in sorted(glob.glob(os.path.join(folder, "LL*.json"))):
        rule = os.path.splitext(os.path.basename(filename))[0]
        if rules and rule not in rules:
            continue
        with open(filename, encoding="utf-8") as handle:
            entries = json.load(handle)
        if isinstance(entries, dict) and "instances" in entries:
            # LL006.json keeps its own format; benchmarks/score_ll006_labels.py scores it.
            print(f"{filename}: own format, scored by score_ll006_labels.py", file=sys.stderr)
            continue
        if not isinstance(entries, list):
            raise SystemExit(f"{filename}: expected a list of labels")
        for index, entry in enumerate(entries):
            missing = {"repo", "path", "function", "line", "label", "why"} - set(entry)
            if missing:
                raise SystemExit(f"{filename}[{index}]: missing {sorted(missing)}")
            if entry["label"] not in LABELS:
                raise SystemExit(f"{filename}[{index}]: label must be one of {LABELS}")
            labels.append(
                Label(
                    rule=rule,
                    repo=entry["repo"],
                    path=entry["path"],
                    function=entry["function"],
                    line=int(entry["line"]),
                    label=entry["label"],
                    why=entry["why"],
                    match=entry.get("match"),
                    lines=tuple(entry["lines"]) if "lines" in entry else None,
                )
            )
    return labels


def function_spans(source: str) -> dict[str, list[tuple[int, int]]]:
    """Qualified name (`Class.method`, `outer.inner`) -> line spans of each definition.

    `<module>` spans the whole file (a label there is matched on its own line only).
    """
    spans: dict[str, list[tuple[int, int]]] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    start = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                    spans.setdefault(name, []).append((start, child.end_lineno or start))
                visit(child, name + ".")
            else:
                visit(child, prefix)

    tree = ast.parse(source)
    spans["<module>"] = [(1, max(1, len(source.splitlines())))]
    visit(tree, "")
    return spans


def place_labels(labels: Iterable[Label], corpus: str) -> None:
    """Give each label the span of its function; record an error where that fails."""
    cache: dict[str, dict[str, list[tuple[int, int]]] | str] = {}
    for label in labels:
        filename = os.path.join(corpus, label.repo, label.path)
        if filename not in cache:
            try:
                with open(filename, encoding="utf-8") as handle:
                    cache[filename] = function_spans(handle.read())
            except (OSError, SyntaxError, ValueError) as error:
                cache[filename] = f"cannot read {filename}: {error}"
        spans = cache[filename]
        if isinstance(spans, str):
            label.error = spans
            continue
        if label.function == "<module>":  # module-level code: the labelled line only
            label.span = (label.line, label.line)
            continue
        candidates = [s for s in spans.get(label.function, []) if s[0] <= label.line <= s[1]]
        if not candidates:
            label.error = f"no function {label.function} spanning line {label.line}"
            continue
        span = min(candidates, key=lambda s: s[1] - s[0])
        if label.lines is not None:
            if not span[0] <= label.lines[0] <= label.lines[1] <= span[1]:
                label.error = f"lines {label.lines} are not inside {label.function} {span}"
                continue
            span = label.lines
        label.span = span


# -- running the linter ----------------------------------------------------------------------


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"
    raise SystemExit(f"cannot write {value!r} as TOML")


def config_text(config: str | None, settings: Sequence[str]) -> str | None:
    """A dedicated config file (top-level keys): the `--config` table plus `--set` lines."""
    if config is None and not settings:
        return None
    table: dict[str, Any] = {}
    if config is not None:
        with open(config, "rb") as handle:
            data = tomllib.load(handle)
        table = data.get("tool", {}).get("lifetime-lint", data) if "tool" in data else data
    for setting in settings:
        try:
            parsed = tomllib.loads(setting)
        except tomllib.TOMLDecodeError as error:
            raise SystemExit(f"--set {setting!r}: not a TOML `key = value`: {error}") from None
        table.update(parsed)
    return "".join(f"{_toml_key(k)} = {_toml_value(v)}\n" for k, v in table.items())


def python_path_for(tree: str, scratch: str) -> str:
    """A folder where `import lifetime_lint` gives `tree`'s code in its installed layout.

    The package maps `rules/` and `runtime/` into `lifetime_lint.rules` / `.runtime`
    (pyproject's package-dir), so a tree is importable only through such a view.
    """
    package = os.path.join(scratch, "site", "lifetime_lint")
    os.makedirs(package, exist_ok=True)
    for name in os.listdir(os.path.join(tree, "lifetime_lint")):
        if name in ("rules", "runtime"):
            continue  # a worktree's own `lifetime_lint/rules -> ../rules` view: made below
        os.symlink(os.path.join(tree, "lifetime_lint", name), os.path.join(package, name))
    for name in ("rules", "runtime"):
        os.symlink(os.path.join(tree, name), os.path.join(package, name))
    return os.path.dirname(package)


def run_linter(
    tree: str,
    corpus: str,
    repo: str,
    paths: Sequence[str],
    extra_args: Sequence[str],
    config: str | None,
    jobs: int,
) -> list[dict[str, Any]]:
    """Findings (JSON dicts, `path` relative to the repo's corpus folder) for `paths`."""
    with tempfile.TemporaryDirectory(prefix="score-corpus-") as scratch:
        site = python_path_for(tree, scratch)
        root = os.path.join(scratch, repo)  # the project root the linter sees
        os.makedirs(root)
        source = os.path.join(corpus, repo)
        for name in os.listdir(source):
            os.symlink(os.path.join(source, name), os.path.join(root, name))
        command = [sys.executable, "-m", "lifetime_lint", "check", "--format", "json"]
        command += ["--exit-zero", "--no-cache", "-j", str(jobs), "-q"]
        if config is not None:
            config_file = os.path.join(root, "lifetime-lint.toml")
            with open(config_file, "w", encoding="utf-8") as handle:
                handle.write(config)
            command += ["--config", config_file]
        command += [*extra_args, "--", *paths]
        env = dict(os.environ, PYTHONPATH=site)
        done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"linter failed on {repo} (rc {done.returncode}):\n{done.stderr}")
        findings = json.loads(done.stdout or "[]")
        for finding in findings:
            finding["repo"] = repo
            finding["path"] = os.path.relpath(finding["filename"], root).replace(os.sep, "/")
        return findings


def draw_files(corpus: str, repo: str, fraction: float, seed: int) -> set[str] | None:
    """A seeded random `fraction` of the repo's Python files (None: all of them)."""
    if fraction >= 1.0:
        return None
    root = os.path.join(corpus, repo)
    files = []
    for directory, subdirectories, names in os.walk(root):
        subdirectories.sort()
        for name in sorted(names):
            if name.endswith(".py"):
                files.append(os.path.relpath(os.path.join(directory, name), root))
    files = [f.replace(os.sep, "/") for f in files]
    rng = random.Random(f"{seed}:{repo}")
    return set(rng.sample(files, round(len(files) * fraction)))


def load_findings(filename: str, corpus: str, repo: str) -> list[dict[str, Any]]:
    """Findings from a saved `--format json` run over `corpus`/`repo`, paths made relative."""
    root = os.path.realpath(os.path.join(corpus, repo))
    with open(filename, encoding="utf-8") as handle:
        findings = json.load(handle)
    for finding in findings:
        finding["repo"] = repo
        path = os.path.relpath(os.path.realpath(finding["filename"]), root)
        finding["path"] = path.replace(os.sep, "/")
    return findings


# -- scoring ---------------------------------------------------------------------------------


def match_findings(labels: Iterable[Label], findings: Iterable[dict[str, Any]]) -> None:
    """Attach to each placed label the findings of its rule inside its function's span."""
    by_file: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for finding in findings:
        key = (finding["code"], finding["repo"], finding["path"])
        by_file.setdefault(key, []).append(finding)
    for label in labels:
        label.findings = []
        if label.span is None:
            continue
        for finding in by_file.get((label.rule, label.repo, label.path), []):
            row = finding["location"]["row"]
            if not label.span[0] <= row <= label.span[1]:
                continue
            if label.match is not None and label.match not in finding["message"]:
                continue
            label.findings.append(finding)


@dataclass
class RuleScore:
    rule: str
    instances: int = 0
    found: int = 0
    negatives: int = 0
    flagged: int = 0
    misses: list[Label] = field(default_factory=list)
    false_alarms: list[Label] = field(default_factory=list)
    errors: list[Label] = field(default_factory=list)

    @property
    def recall(self) -> float | None:
        return self.found / self.instances if self.instances else None


def score(labels: Iterable[Label]) -> dict[str, RuleScore]:
    scores: dict[str, RuleScore] = {}
    for label in labels:
        entry = scores.setdefault(label.rule, RuleScore(label.rule))
        if label.error is not None:
            entry.errors.append(label)
            continue
        if label.label == "instance":
            entry.instances += 1
            if label.findings:
                entry.found += 1
            else:
                entry.misses.append(label)
        else:
            entry.negatives += 1
            if label.findings:
                entry.flagged += 1
                entry.false_alarms.append(label)
    return dict(sorted(scores.items()))


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "n/a"


def render_scores(scores: dict[str, RuleScore], verbose: bool = True) -> str:
    lines = [
        "| rule | instances found | recall | negatives flagged | share flagged |",
        "| --- | --- | --- | --- | --- |",
    ]
    total = RuleScore("all")
    for s in scores.values():
        lines.append(
            f"| {s.rule} | {s.found}/{s.instances} | {_percent(s.found, s.instances)} | "
            f"{s.flagged}/{s.negatives} | {_percent(s.flagged, s.negatives)} |"
        )
        total.found += s.found
        total.instances += s.instances
        total.flagged += s.flagged
        total.negatives += s.negatives
    lines.append(
        f"| all | {total.found}/{total.instances} | {_percent(total.found, total.instances)} | "
        f"{total.flagged}/{total.negatives} | {_percent(total.flagged, total.negatives)} |"
    )
    if verbose:
        for s in scores.values():
            for title, items in (
                ("missed instances", s.misses),
                ("flagged negatives", s.false_alarms),
                ("labels not placed (fix the label)", s.errors),
            ):
                if not items:
                    continue
                lines.append(f"\n{s.rule} {title}:")
                for label in items:
                    note = label.error or label.why
                    lines.append(f"  {label.where}  -- {note}")
    return "\n".join(lines)


# -- samples and precision -------------------------------------------------------------------


def draw_sample(findings: Sequence[dict[str, Any]], per_rule: int, seed: int) -> list[dict]:
    """Up to `per_rule` findings per rule, drawn reproducibly, in a stable order."""
    rng = random.Random(seed)
    by_rule: dict[str, list[dict[str, Any]]] = {}
    for finding in sorted(findings, key=finding_key):
        by_rule.setdefault(finding["code"], []).append(finding)
    sample = []
    for rule in sorted(by_rule):
        pool = by_rule[rule]
        chosen = rng.sample(pool, min(per_rule, len(pool)))
        for finding in sorted(chosen, key=finding_key):
            sample.append(
                {
                    "rule": rule,
                    "repo": finding["repo"],
                    "path": finding["path"],
                    "line": finding["location"]["row"],
                    "message": finding["message"],
                    "properties": {
                        k: v for k, v in finding.items() if k not in _KNOWN_FINDING_KEYS
                    },
                    "label": None,
                    "cause": None,
                }
            )
    return sample


_KNOWN_FINDING_KEYS = {
    "cell", "code", "end_location", "filename", "fix", "location", "message", "noqa_row",
    "url", "repo", "path",
}  # fmt: skip


def finding_key(finding: dict[str, Any]) -> tuple[str, str, str, int, str]:
    return (
        finding["code"],
        finding["repo"],
        finding["path"],
        finding["location"]["row"],
        finding["message"],
    )


def sample_key(item: dict[str, Any]) -> tuple[str, str, str, int, str]:
    return (item["rule"], item["repo"], item["path"], item["line"], item["message"])


def reuse_labels(sample: list[dict], previous: Sequence[dict]) -> int:
    """Copy labels from `previous` samples onto the same findings; return how many.

    The same finding is the same rule, file, line and message; a finding whose message
    changed but whose rule, file and line did not gets the old label too, marked
    `reused_from_message` so that the labeller can check it.
    """
    exact = {sample_key(p): p for p in previous if p.get("label") is not None}
    loose = {sample_key(p)[:4]: p for p in previous if p.get("label") is not None}
    reused = 0
    for item in sample:
        old = exact.get(sample_key(item))
        if old is None and sample_key(item)[:4] in loose:
            old = loose[sample_key(item)[:4]]
            item["reused_from_message"] = old["message"]
        if old is not None:
            item["label"] = old["label"]
            item["cause"] = old.get("cause")
            reused += 1
    return reused


def render_precision(samples: Sequence[dict]) -> str:
    per_rule: dict[str, list[dict]] = {}
    for item in samples:
        per_rule.setdefault(item["rule"], []).append(item)
    lines = ["| rule | sampled | labelled | true | precision |", "| --- | --- | --- | --- | --- |"]
    all_labelled = all_true = 0
    causes: dict[str, dict[str, int]] = {}
    for rule, items in sorted(per_rule.items()):
        labelled = [i for i in items if i.get("label") is not None]
        true = sum(1 for i in labelled if i["label"] is True)
        all_labelled += len(labelled)
        all_true += true
        for item in labelled:
            if item["label"] is False:
                cause = item.get("cause") or "(no cause given)"
                causes.setdefault(rule, {}).setdefault(cause, 0)
                causes[rule][cause] += 1
        lines.append(
            f"| {rule} | {len(items)} | {len(labelled)} | {true} | {_percent(true, len(labelled))} |"
        )
    lines.append(
        f"| all | {len(samples)} | {all_labelled} | {all_true} | "
        f"{_percent(all_true, all_labelled)} |"
    )
    for rule, counts in sorted(causes.items()):
        lines.append(f"\n{rule} false-positive causes:")
        for cause, count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
            lines.append(f"  {count:3d}  {cause}")
    return "\n".join(lines)


# -- command line ----------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", default=DEFAULT_TREE, help="source tree of lifetime-lint to run")
    parser.add_argument(
        "--corpus", help="folder holding the corpora (default: .corpus/ of the main checkout)"
    )
    parser.add_argument("--labels", default=DEFAULT_LABELS, help="folder of LL00N.json labels")
    parser.add_argument("--rules", default="", help="comma-separated rules to score (all)")
    parser.add_argument(
        "--config", help="a lifetime-lint config (pyproject.toml or top-level keys)"
    )
    parser.add_argument(
        "--set",
        dest="settings",
        action="append",
        default=[],
        metavar="'KEY = VALUE'",
        help="a config setting in TOML, e.g. 'min-significance = \"low\"' (repeatable)",
    )
    parser.add_argument("-j", "--jobs", type=int, default=2, help="linter processes")
    parser.add_argument("-q", "--quiet", action="store_true", help="tables only, no lists")
    parser.add_argument("--json", dest="json_out", help="also write per-label results here")
    parser.add_argument("--sample", type=int, metavar="N", help="draw N findings per rule")
    parser.add_argument("--seed", type=int, default=0, help="seed for --sample")
    parser.add_argument("--repos", default=",".join(REPOS), help="corpora for --sample")
    parser.add_argument(
        "--file-fraction",
        type=float,
        default=1.0,
        metavar="F",
        help="for --sample: lint a seeded random fraction F of each corpus's files (a cluster "
        "sample: every finding of a drawn file is in the pool)",
    )
    parser.add_argument("--out", help="where --sample writes (default: stdout)")
    parser.add_argument(
        "--findings",
        action="append",
        default=[],
        metavar="REPO=FILE",
        help="for --sample: use this linter JSON output for REPO instead of running the linter",
    )
    parser.add_argument("--reuse", help="labelled samples whose labels --sample copies over")
    parser.add_argument("--precision", metavar="FILE", help="print precision of labelled samples")
    parser.epilog = "Any other option (e.g. --select LL001, --ignore LL005) goes to the linter."
    args, unknown = parser.parse_known_args(argv)
    args.linter_args = unknown  # in their order, values included
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.precision:
        with open(args.precision, encoding="utf-8") as handle:
            print(render_precision(json.load(handle)))
        return 0
    config = config_text(args.config, args.settings)
    tree = os.path.abspath(args.tree)
    if args.corpus is None:
        args.corpus = default_corpus(DEFAULT_TREE)
    if args.sample is not None:
        given = dict(item.split("=", 1) for item in args.findings)
        findings = []
        for repo in [r for r in args.repos.split(",") if r]:
            drawn = draw_files(args.corpus, repo, args.file_fraction, args.seed)
            if repo in given:
                saved = load_findings(given[repo], args.corpus, repo)
                findings += [f for f in saved if drawn is None or f["path"] in drawn]
                continue
            paths = (
                sorted(drawn)
                if drawn is not None
                else sorted(os.listdir(os.path.join(args.corpus, repo)))
            )
            findings += run_linter(
                tree, args.corpus, repo, paths, args.linter_args, config, args.jobs
            )
        sample = draw_sample(findings, args.sample, args.seed)
        counts: dict[str, int] = {}
        for finding in findings:
            counts[finding["code"]] = counts.get(finding["code"], 0) + 1
        reused = 0
        if args.reuse:
            with open(args.reuse, encoding="utf-8") as handle:
                reused = reuse_labels(sample, json.load(handle))
        text = json.dumps(sample, indent=2) + "\n"
        if args.out:
            with open(args.out, "w", encoding="utf-8") as handle:
                handle.write(text)
        else:
            sys.stdout.write(text)
        summary = ", ".join(f"{rule} {n}" for rule, n in sorted(counts.items()))
        print(
            f"findings in the run: {summary}; sampled {len(sample)} (seed {args.seed}); "
            f"labels reused: {reused}",
            file=sys.stderr,
        )
        return 0
    rules = [r.strip() for r in args.rules.split(",") if r.strip()]
    labels = load_labels(args.labels, rules)
    place_labels(labels, args.corpus)
    findings = []
    for repo in sorted({label.repo for label in labels}):
        paths = sorted({label.path for label in labels if label.repo == repo})
        findings += run_linter(tree, args.corpus, repo, paths, args.linter_args, config, args.jobs)
    match_findings(labels, findings)
    print(render_scores(score(labels), verbose=not args.quiet))
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as handle:
            json.dump(
                [
                    {
                        "rule": label.rule,
                        "where": label.where,
                        "label": label.label,
                        "matched": [f["message"] for f in label.findings],
                        "error": label.error,
                    }
                    for label in labels
                ],
                handle,
                indent=2,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
