"""Fix safety at scale: fix everything in real code, then prove nothing was damaged.

    python benchmarks/fix_safety.py                      # all corpora (.corpus/, see corpus.py)
    python benchmarks/fix_safety.py torch-nn diffusers   # some of them
    python benchmarks/fix_safety.py --path some/folder   # any folder (it is copied first)
    python benchmarks/fix_safety.py --compare-imports PRISTINE FIXED   # check 5 alone

Each corpus is copied to `.bench/safety/<name>` (git-ignored; the original is never
touched) and isolated by a `pyproject.toml` of its own, then, through the real CLI
(`python -m lifetime_lint check --select ALL --no-cache`):

1. `--unsafe-fixes --format json` records every diagnostic and the edits of every fix, as
   reported on the original file (row/column, turned into character offsets).
2. `--fix --unsafe-fixes --show-fixes` fixes everything it can.
3. Checks, per file (each failed check is a failure; the run must report 0):
   - compiles: every changed file compiles (`compile(..., "exec")`, what `py_compile` runs),
     if its original did;
   - outside the spans: the text outside the reported edit ranges survives verbatim and in
     order (the fixed file is `g0 X1 g1 X2 ... gn`, where `g0..gn` are the original's
     stretches between the merged edit ranges and the `Xi` are anything). The fix loop may
     also remove an import that a fix left unused (the reported fixes name the candidates,
     not the statement), so whole lines of `import` statements, with the blank lines right
     after them, are allowed to change too; the run counts the files that needed that
     allowance. Fixes of later rounds of the fix
     loop are re-reported on the new text only, so a fix that exists only because an earlier
     one ran would show up here as a failure (none has so far);
   - encoding kept: the fixed file decodes with the original's encoding, keeps its BOM (or
     lack of one) and, if every line ending was the same, the same line ending;
   - unparsable files untouched: a file reported as E999/E902 is never written;
   - no stray writes: a file whose content did not change was not rewritten (same inode
     and mtime);
   - no internal errors: no `LL000` (a fix that would have broken a file) is reported;
4. A second `--fix --unsafe-fixes` must change no byte of any file and report 0 fixes.
5. Execution: every changed file that imports with CPU torch (its package's other
   dependencies installed or not: one that fails to import before the fix is counted and
   skipped) is imported from a pristine copy of the tree and from the fixed tree, each tree
   in one fresh process (`CUDA_VISIBLE_DEVICES=""`), as a module of its package; the
   module-level names and the type of each value must be the same, except names bound by
   import statements that the fix added or removed (`reclaim`, an orphaned `empty_cache`).
   A module that imports before the fix but not after is a failure.

Prints the counts (files, parse failures, findings and fixes per rule, failures) as a
Markdown table; `--json FILE` writes them. Exit status 1 if any check failed.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SAFETY = os.path.join(REPO, ".bench", "safety")

# A pyproject.toml of its own stops configuration discovery at the copy's root.
ISOLATING_PYPROJECT = "[tool.lifetime-lint]\n"

FILE_ERRORS = ("E902", "E999")
_SHOW_FIXES_LINE = re.compile(r"^\s+(\d+) × (\w+)")


@dataclass
class Snapshot:
    data: bytes
    inode: int
    mtime_ns: int


@dataclass
class SafetyReport:
    name: str
    files: int = 0
    parse_failures: int = 0  # E999/E902 files: must stay untouched
    findings: Counter = field(default_factory=Counter)  # code -> diagnostics
    fixable: Counter = field(default_factory=Counter)  # code -> diagnostics with a fix
    fixed: Counter = field(default_factory=Counter)  # code -> fixes applied
    changed_files: int = 0
    import_allowance_files: int = 0  # changes explained only by orphaned-import removal
    second_run_fixed: int = 0
    imported_files: int = 0  # changed files compared by importing them before and after
    not_importable: int = 0  # changed files that did not import before the fix either
    seconds: float = 0.0
    failures: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "files": self.files,
            "parse_failures": self.parse_failures,
            "findings": dict(sorted(self.findings.items())),
            "fixable": dict(sorted(self.fixable.items())),
            "fixed": dict(sorted(self.fixed.items())),
            "changed_files": self.changed_files,
            "import_allowance_files": self.import_allowance_files,
            "second_run_fixed": self.second_run_fixed,
            "imported_files": self.imported_files,
            "not_importable": self.not_importable,
            "seconds": round(self.seconds, 1),
            "failures": self.failures,
        }


# -- running the CLI ----------------------------------------------------------------------


def freeze_code(target: str) -> str:
    """Copy the lifetime_lint package as installed (rules and runtime included) into
    `target`, to run on PYTHONPATH: a long run then uses one version of the code even
    while the working tree changes under it. Returns the folder to put on PYTHONPATH."""
    import lifetime_lint

    package = os.path.join(target, "lifetime_lint")
    if os.path.exists(target):
        shutil.rmtree(target)
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(os.path.dirname(lifetime_lint.__file__), package, ignore=ignore)
    for sub in ("rules", "runtime"):
        module = __import__(f"lifetime_lint.{sub}", fromlist=["_"])
        destination = os.path.join(package, sub)
        if os.path.exists(destination):
            shutil.rmtree(destination)
        shutil.copytree(next(iter(module.__path__)), destination, ignore=ignore)
    return target


def run_cli(
    root: str, *args: str, jobs: int | None = None, code: str | None = None
) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "lifetime_lint", "check", "--select", "ALL", "--no-cache"]
    if jobs is not None:
        command += ["--jobs", str(jobs)]
    command += [*args, "--exit-zero", "."]
    env = dict(os.environ)
    if code is not None:
        env["PYTHONPATH"] = code + os.pathsep + env.get("PYTHONPATH", "")
    completed = subprocess.run(command, cwd=root, capture_output=True, text=True, env=env)
    if completed.returncode not in (0, 1, 2):  # 2: some file could not be read or parsed
        raise RuntimeError(
            f"{' '.join(command)} failed ({completed.returncode}):\n{completed.stderr}"
        )
    return completed


def python_files(root: str) -> list[str]:
    found = []
    for directory, subdirectories, names in os.walk(root):
        subdirectories[:] = sorted(d for d in subdirectories if not d.startswith("."))
        found.extend(
            os.path.join(directory, n) for n in sorted(names) if n.endswith((".py", ".pyi"))
        )
    return found


def snapshot(root: str) -> dict[str, Snapshot]:
    taken = {}
    for path in python_files(root):
        stat = os.stat(path)
        with open(path, "rb") as handle:
            taken[os.path.abspath(path)] = Snapshot(handle.read(), stat.st_ino, stat.st_mtime_ns)
    return taken


# -- text helpers ---------------------------------------------------------------------------


def decode(data: bytes) -> tuple[str | None, str, bool]:
    """(text, encoding, bom) the way lifetime-lint reads a file; text None if undecodable."""
    from lifetime_lint.source import SourceError, SourceFile

    try:
        source = SourceFile.from_bytes("<file>", data)
    except SourceError:
        return None, "", False
    return source.text, source.encoding, source.bom


def line_starts(text: str) -> list[int]:
    """Offsets where lines start; line breaks are \\n, \\r\\n and \\r, as Python counts them."""
    starts = [0]
    for match in re.finditer(r"\r\n|\r|\n", text):
        starts.append(match.end())
    return starts


def to_offset(starts: list[int], text: str, row: int, column: int) -> int:
    """Character offset of a 1-based row and 1-based (character) column."""
    if row - 1 >= len(starts):
        return len(text)
    return min(starts[row - 1] + column - 1, len(text))


def merge(ranges: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def outside_preserved(before: str, after: str, allowed: Sequence[tuple[int, int]]) -> bool:
    """Whether `after` is `g0 X1 g1 ... Xn gn` for the stretches `g` of `before` outside
    the (merged) allowed ranges: nothing outside them was changed, dropped or reordered.
    Leftmost placement of each stretch is optimal, so the greedy search decides it."""
    ranges = merge(allowed)
    gaps = []
    cursor = 0
    for start, end in ranges:
        gaps.append(before[cursor:start])
        cursor = end
    gaps.append(before[cursor:])
    if not ranges:
        return before == after
    if not after.startswith(gaps[0]) or not after.endswith(gaps[-1]):
        return False
    position = len(gaps[0])
    for gap in gaps[1:-1]:
        found = after.find(gap, position)
        if found < 0:
            return False
        position = found + len(gap)
    return position <= len(after) - len(gaps[-1])


def import_line_ranges(text: str) -> list[tuple[int, int]]:
    """Whole lines (line break included) of every import statement in `text`, with the
    blank lines right after it (a block that loses its first statement loses them too)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    starts = line_starts(text)
    ranges = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            row = node.end_lineno or node.lineno  # 1-based last row; starts[row] is after it
            while row + 1 < len(starts) and not text[starts[row] : starts[row + 1]].strip():
                row += 1
            end = starts[row] if row < len(starts) else len(text)
            ranges.append((starts[node.lineno - 1], end))
    return ranges


def line_ending_style(text: str) -> str | None:
    endings = set(re.findall(r"\r\n|\r|\n", text))
    return endings.pop() if len(endings) == 1 else None


def compiles(data: bytes, path: str) -> str | None:
    """None if the source compiles (what py_compile checks), else the error."""
    try:
        compile(data, path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as error:
        return f"{type(error).__name__}: {error}"
    return None


# -- the check ------------------------------------------------------------------------------


def check_tree(
    root: str,
    name: str = "",
    jobs: int | None = None,
    code: str | None = None,
    execute: bool = True,
) -> SafetyReport:
    """Fix everything under `root` (a scratch copy: it is modified) and check the result.

    `code`: a folder from `freeze_code` to run the linter from (default: as installed).
    `execute`: also import every changed file before and after (check 5)."""
    report = SafetyReport(name or os.path.basename(root))
    started = time.perf_counter()
    pristine = None
    if execute:
        pristine = os.path.abspath(root).rstrip(os.sep) + ".before"
        if os.path.exists(pristine):
            shutil.rmtree(pristine)
        shutil.copytree(root, pristine, symlinks=True)
    before = snapshot(root)
    report.files = len(before)

    # 1. Every diagnostic and fix edit, as reported on the original files.
    listed = json.loads(
        run_cli(root, "--unsafe-fixes", "--format", "json", jobs=jobs, code=code).stdout or "[]"
    )
    edits: dict[str, list[tuple[int, int, int, int]]] = {}
    unparsable = set()
    for item in listed:
        path = os.path.abspath(os.path.join(root, item["filename"]))
        code = item["code"]
        if code in FILE_ERRORS:
            unparsable.add(path)
            continue
        report.findings[code] += 1
        if item.get("fix"):
            report.fixable[code] += 1
            for edit in item["fix"]["edits"]:
                start, end = edit["location"], edit["end_location"]
                edits.setdefault(path, []).append(
                    (start["row"], start["column"], end["row"], end["column"])
                )
    report.parse_failures = len(unparsable)

    # 2. Fix everything.
    fixed_run = run_cli(root, "--fix", "--unsafe-fixes", "--show-fixes", jobs=jobs, code=code)
    for line in fixed_run.stdout.splitlines():
        match = _SHOW_FIXES_LINE.match(line)
        if match:
            report.fixed[match.group(2)] += int(match.group(1))
        if ": LL000 " in line:
            report.failures.append(f"internal error: {line.strip()}")
    after = snapshot(root)

    # 3. Per-file checks.
    for path, old in before.items():
        new = after.get(path)
        relative = os.path.relpath(path, root)
        if new is None:
            report.failures.append(f"{relative}: deleted by --fix")
            continue
        if new.data == old.data:
            if (new.inode, new.mtime_ns) != (old.inode, old.mtime_ns):
                report.failures.append(f"{relative}: rewritten although its content is unchanged")
            continue
        report.changed_files += 1
        if path in unparsable:
            report.failures.append(f"{relative}: could not be parsed but was written")
            continue
        failure = _check_changed_file(relative, old.data, new.data, edits.get(path, []), report)
        if failure:
            report.failures.append(failure)

    # 4. Fixing again changes nothing.
    second = run_cli(root, "--fix", "--unsafe-fixes", "--show-fixes", jobs=jobs, code=code)
    for line in second.stdout.splitlines():
        match = _SHOW_FIXES_LINE.match(line)
        if match:
            report.second_run_fixed += int(match.group(1))
    again = snapshot(root)
    for path, snap in after.items():
        # `again` holds file bytes in host memory, not a tensor (LL001 suppressed).
        if again.get(path) is None or again[path].data != snap.data:  # noqa: LL001
            report.failures.append(f"{os.path.relpath(path, root)}: a second --fix changed it")
    if report.second_run_fixed:
        report.failures.append(f"a second --fix applied {report.second_run_fixed} more fixes")

    # 5. The fixed modules import and define the same names.
    if pristine is not None:
        changed = sorted(
            os.path.relpath(path, root)
            for path, old in before.items()
            if path in after and after[path].data != old.data and path.endswith(".py")
        )
        compare_imports(pristine, root, changed, report, code)
        shutil.rmtree(pristine, ignore_errors=True)
    report.seconds = time.perf_counter() - started
    return report


# -- executing the fixed code ----------------------------------------------------------------

# Run in a fresh process per tree: import each listed file as a module of its package and
# print one JSON line per file: {"path", "names": {name: type name}} or {"path", "error"}.
_IMPORTER = r"""
import importlib, json, os, sys, tempfile, traceback
root, paths = sys.argv[1], sys.argv[2:]
sys.path[:0] = []
alias_dir = tempfile.mkdtemp()
if os.path.exists(os.path.join(root, "__init__.py")):
    os.symlink(root, os.path.join(alias_dir, "_ll_tree"))
    sys.path.insert(0, alias_dir)
    prefix = ["_ll_tree"]
else:
    sys.path.insert(0, root)
    prefix = []
for path in paths:
    parts = path[: -len(".py")].split(os.sep)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    name = ".".join(prefix + parts)
    try:
        module = importlib.import_module(name)
        names = {k: type(v).__name__ for k, v in vars(module).items()}
        print(json.dumps({"path": path, "names": names}), flush=True)
    except BaseException as error:
        text = f"{type(error).__name__}: {error}".splitlines()[0][:300]
        print(json.dumps({"path": path, "error": text}), flush=True)
"""


def import_names(tree: str, paths: Sequence[str], code: str | None, timeout: float) -> dict:
    """path -> {name: type name} or an error string, importing `paths` from `tree`."""
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", PYTHONDONTWRITEBYTECODE="1")
    if code is not None:
        env["PYTHONPATH"] = code + os.pathsep + env.get("PYTHONPATH", "")
    results: dict[str, object] = {}
    if not paths:
        return results
    try:
        completed = subprocess.run(
            [sys.executable, "-c", _IMPORTER, os.path.abspath(tree), *paths],
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
            cwd=os.path.dirname(os.path.abspath(tree)),
        )
        output = completed.stdout
    except subprocess.TimeoutExpired as expired:
        output = (
            (expired.stdout or b"").decode()
            if isinstance(expired.stdout, bytes)
            else (expired.stdout or "")
        )
    for line in output.splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict) and "path" in item:
            results[item["path"]] = item.get("names", item.get("error"))
    return results


def import_bound_names(text: str) -> set[str]:
    """Module-level names bound by import statements (anywhere at module level)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return set()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, ast.Import):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            names.update(a.asname or a.name for a in node.names if a.name != "*")
    return names


def compare_imports(
    pristine: str,
    fixed: str,
    paths: Sequence[str],
    report: SafetyReport,
    code: str | None,
    timeout: float = 1800,
) -> None:
    before = import_names(pristine, paths, code, timeout)
    after = import_names(fixed, paths, code, timeout)
    for path in paths:
        old, new = before.get(path), after.get(path)
        if not isinstance(old, dict):
            report.not_importable += 1
            continue
        if not isinstance(new, dict):
            report.failures.append(f"{path}: imported before the fix, not after: {new}")
            continue
        report.imported_files += 1
        with open(os.path.join(pristine, path), "rb") as handle:
            old_text = decode(handle.read())[0] or ""
        with open(os.path.join(fixed, path), "rb") as handle:
            new_text = decode(handle.read())[0] or ""
        old_imports, new_imports = import_bound_names(old_text), import_bound_names(new_text)
        allowed = old_imports ^ new_imports
        differing = {
            name
            for name in set(old) | set(new)
            if old.get(name) != new.get(name) and name not in allowed
        }
        if differing:
            shown = ", ".join(
                f"{n} ({old.get(n, 'absent')} -> {new.get(n, 'absent')})"
                for n in sorted(differing)[:5]
            )
            report.failures.append(f"{path}: module-level names differ after the fix: {shown}")


def _check_changed_file(
    relative: str,
    old_data: bytes,
    new_data: bytes,
    raw_edits: list[tuple[int, int, int, int]],
    report: SafetyReport,
) -> str | None:
    old_text, encoding, bom = decode(old_data)
    new_text, new_encoding, new_bom = decode(new_data)
    if old_text is None:
        return f"{relative}: undecodable before, yet written"
    if new_text is None or (new_encoding, new_bom) != (encoding, bom):
        return (
            f"{relative}: encoding changed ({encoding}, BOM {bom} -> {new_encoding}, BOM {new_bom})"
        )
    style = line_ending_style(old_text)
    if style is not None and line_ending_style(new_text) != style:
        return f"{relative}: line endings changed from {style!r}"
    if compiles(old_data, relative) is None:
        error = compiles(new_data, relative)
        if error is not None:
            return f"{relative}: does not compile after --fix: {error}"
    starts = line_starts(old_text)
    allowed = [
        (to_offset(starts, old_text, r1, c1), to_offset(starts, old_text, r2, c2))
        for r1, c1, r2, c2 in raw_edits
    ]
    if not raw_edits:
        return f"{relative}: changed although no fix was reported for it"
    if outside_preserved(old_text, new_text, allowed):
        return None
    if outside_preserved(old_text, new_text, allowed + import_line_ranges(old_text)):
        report.import_allowance_files += 1
        return None
    return f"{relative}: text outside the reported fix spans changed"


# -- the command ----------------------------------------------------------------------------


def scratch_copy(source: str, name: str, scratch: str = SAFETY) -> str:
    target = os.path.join(scratch, name)
    if os.path.exists(target):
        shutil.rmtree(target)
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
    with open(os.path.join(target, "pyproject.toml"), "w", encoding="utf-8") as handle:
        handle.write(ISOLATING_PYPROJECT)
    return target


def print_reports(reports: Sequence[SafetyReport]) -> None:
    codes = sorted({c for r in reports for c in (*r.findings, *r.fixed)})
    print("| corpus | files | unparsable | " + " | ".join(f"{c} found / fixed" for c in codes)
          + " | files changed | import allowance | 2nd run fixes | imported before/after "
          "(not importable) | failures | time s |")  # fmt: skip
    print("|---|---:|---:|" + "---:|" * len(codes) + "---:|---:|---:|---:|---:|---:|")
    for r in reports:
        cells = " | ".join(f"{r.findings[c]} / {r.fixed[c]}" for c in codes)
        print(
            f"| {r.name} | {r.files} | {r.parse_failures} | {cells} | {r.changed_files} | "
            f"{r.import_allowance_files} | {r.second_run_fixed} | "
            f"{r.imported_files} ({r.not_importable}) | {len(r.failures)} | {r.seconds:.0f} |"
        )
    for r in reports:
        for failure in r.failures[:50]:
            print(f"FAIL {r.name}: {failure}")


def compare_trees(pristine: str, fixed: str, scratch: str | None) -> int:
    """Check 5 alone: import the files that differ between two trees, before and after."""
    code = freeze_code(os.path.join(scratch, "_code")) if scratch else None
    changed = []
    for path in python_files(fixed):
        relative = os.path.relpath(path, fixed)
        original = os.path.join(pristine, relative)
        if os.path.exists(original):
            with open(original, "rb") as before, open(path, "rb") as after:
                if before.read() != after.read():
                    changed.append(relative)
    report = SafetyReport(os.path.basename(os.path.abspath(fixed)))
    started = time.perf_counter()
    compare_imports(pristine, fixed, changed, report, code)
    print(f"{report.name}: {len(changed)} changed files, {report.imported_files} imported "
          f"before and after, {report.not_importable} not importable before the fix, "
          f"{len(report.failures)} failures, {time.perf_counter() - started:.0f} s")  # fmt: skip
    for failure in report.failures[:50]:
        print(f"FAIL {report.name}: {failure}")
    return 1 if report.failures else 0


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("corpora", nargs="*", help="names from benchmarks/corpus.py (default: all)")
    parser.add_argument("--path", action="append", default=[], help="any folder to check (copied)")
    parser.add_argument("--jobs", type=int, help="passed to lifetime-lint (default: its own)")
    parser.add_argument("--json", help="write the counts here")
    parser.add_argument(
        "--scratch", default=SAFETY, help="where the copies go (default .bench/safety)"
    )
    parser.add_argument("--no-freeze", action="store_true",
                        help="run the installed code, not a frozen copy of it")  # fmt: skip
    parser.add_argument("--no-execute", action="store_true",
                        help="skip check 5 (importing changed files before and after)")  # fmt: skip
    parser.add_argument("--compare-imports", nargs=2, metavar=("PRISTINE", "FIXED"),
                        help="only check 5, on the files that differ between two trees")  # fmt: skip
    args = parser.parse_args(argv)
    if args.compare_imports:
        return compare_trees(*args.compare_imports, None if args.no_freeze else args.scratch)
    sys.path.insert(0, HERE)
    import corpus

    names = args.corpora or ([] if args.path else ["torch-nn", *corpus.PINNED])
    targets = [(name, corpus.prepare(name)) for name in names]
    targets += [(os.path.basename(os.path.abspath(p)), p) for p in args.path]
    code = None if args.no_freeze else freeze_code(os.path.join(args.scratch, "_code"))
    revision = subprocess.run(["git", "-C", REPO, "describe", "--always", "--dirty"],
                              capture_output=True, text=True).stdout.strip()  # fmt: skip
    print(f"lifetime-lint code: {'frozen copy in ' + code if code else 'as installed'}, "
          f"git {revision or 'unknown'}", flush=True)  # fmt: skip
    reports = []
    for name, source in targets:
        print(f"{name}: fixing a copy of {source} ...", flush=True)
        copy = scratch_copy(source, name, args.scratch)
        reports.append(
            check_tree(copy, name, jobs=args.jobs, code=code, execute=not args.no_execute)
        )
    print_reports(reports)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump([r.as_json() for r in reports], handle, indent=2)
    return 1 if any(r.failures for r in reports) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
