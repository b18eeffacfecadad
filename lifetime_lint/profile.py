"""`lifetime-lint profile`: run a program once and put a measured byte count on each finding.

The static rules know which names are dead and what they are held across; they cannot know
whether a name holds 4 MiB or 4 GiB. This runs the program in-process (like `python SCRIPT`
or `python -m MODULE`), lints each in-scope file the first time one of its functions runs,
line-traces only the functions that have findings (`lifetime_lint.runtime.profiling`), and
reports each finding with what the run measured:

- `bytes`: what the finding's names held, at the start of the line that was running, when the
  outermost traced call that ran the finding's function reached its peak (`program_peak_bytes`,
  the largest such call): what the finding's fix alone lowers that peak by. Only storages
  nothing outside the finding's own names (and the containers they bind) kept alive count,
  each finding measured on its own; 0 where its fix frees nothing at that line (a `del`
  whose names are still read later, a chunk list before its concatenation: `held_bytes`
  keeps what they held). `own_bytes` is what they held at the function's own peak, and
  `largest_bytes` the most over all its runs;
- `peak_bytes` and `peak_row`: the function's own peak of allocated memory and its line;
- `calls`: how many times the function ran.

Findings in functions that never ran are listed as not executed. torch is imported only here,
when the program runs; the linter itself still never needs it.
"""

from __future__ import annotations

import ast
import dataclasses
import fnmatch
import json
import os
import re
import runpy
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import CodeType
from typing import Any

from lifetime_lint.config import ConfigError, Settings, find_config, load_settings
from lifetime_lint.diagnostics import Diagnostic
from lifetime_lint.engine import Linter
from lifetime_lint.registry import all_rules
from lifetime_lint.source import SourceError, SourceFile

PROFILE_FORMAT_VERSION = 1
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1000, "kib": 1024, "m": 1024**2, "mb": 1000**2}
_UNITS.update({"mib": 1024**2, "g": 1024**3, "gb": 1000**3, "gib": 1024**3})


# Rules whose fix replaces the held chunks by one preallocated output of the same size
# (LL002's ChunkWriter): the fix frees the chunks' bytes where chunks and result are alive
# together, at the concatenation, and, for a list of chunks bound to a name, wherever that
# list is dead but still bound after it (past the loops: the writer kept none). Before the
# concatenation (inside the loop's decoder call) the output buffer holds what the chunks held,
# or more: the finding's `bytes` is 0 there, and `held_bytes` says what its names held
# (measured on an H200: benchmarks/RESULTS.md, "profile against the fix alone").
FREED_AT_THE_CONCATENATION = frozenset({"LL002"})
# Rules whose fix releases the names after their last use (`del`): it frees nothing on a line
# where a name is still read later (`rows` while the tiles are being decoded).
RELEASED_AFTER_THE_LAST_USE = frozenset({"LL001"})


@dataclass(frozen=True)
class FreedWhere:
    """Where a finding's fix releases what its names hold: anywhere (`rows` None and not
    `where_dead`: a fix that changes the allocation itself, LL003's), on its own lines (`rows`,
    a concatenation's), and (`where_dead`) on any line where all its names are dead."""

    rows: tuple[int, int] | None
    where_dead: bool

    def frees_on(self, row: int, live: frozenset[str] | None, names: Sequence[str]) -> bool:
        if self.rows is None and not self.where_dead:
            return True
        if self.rows is not None and self.rows[0] <= row <= self.rows[1]:
            return True
        if not self.where_dead:
            return False
        # A name still read later is kept by the fix too (`del` goes after its last use).
        return live is None or not any(name in live for name in names)


def freed_where(diagnostic: Diagnostic, text: str) -> FreedWhere:
    """For a concatenation finding: its own lines, and wherever its names are dead when the
    chunks are a list bound to a name (`torch.cat(tiles)`: the list outlives the call), not
    when they are the running result (`torch.cat([out, x])`: past it, `out` is the result,
    which the writer's output replaces byte for byte) or a comprehension that dies with the
    call. A `del` after the last use (LL001) frees wherever its names are dead; the fixes of
    other rules, anywhere."""
    if diagnostic.code in RELEASED_AFTER_THE_LAST_USE:
        return FreedWhere(None, True)
    if diagnostic.code not in FREED_AT_THE_CONCATENATION:
        return FreedWhere(None, False)
    rows = (diagnostic.start.row, diagnostic.end.row)
    start, end = diagnostic.span
    try:
        call = ast.parse(text[start:end].strip(), mode="eval").body
    except (SyntaxError, ValueError):
        return FreedWhere(rows, False)
    named_list = (
        isinstance(call, ast.Call) and bool(call.args) and isinstance(call.args[0], ast.Name)
    )
    return FreedWhere(rows, named_list)


def parse_size(text: str) -> int:
    """`64MiB`, `1.5 GiB`, `512k`, `1000000` -> bytes (binary units for k/m/g)."""
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*", text)
    if match is None or match.group(2).lower() not in _UNITS:
        raise ValueError(f"not a size: {text!r} (use e.g. 64MiB, 1GiB, 512KiB or a byte count)")
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


def format_bytes(count: int) -> str:
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"  # pragma: no cover


# -- scope and findings ---------------------------------------------------------------------------


@dataclass
class Scope:
    """Which files are linted and traced: under the working folder by default, never the
    interpreter's own library or installed packages unless `--include` names them."""

    root: str
    include: Sequence[str] = ()
    exclude: Sequence[str] = ()

    def __post_init__(self) -> None:
        import sysconfig

        paths = sysconfig.get_paths()
        self._system = tuple(
            os.path.realpath(p) + os.sep
            for p in {paths.get("stdlib"), paths.get("purelib"), paths.get("platlib")}
            if p
        )
        self._root = os.path.realpath(self.root) + os.sep
        # The linter and its tracer are never the program being profiled.
        self._own = os.path.realpath(os.path.dirname(os.path.abspath(__file__))) + os.sep

    def wants(self, filename: str) -> bool:
        if not filename.endswith(".py"):
            return False
        path = os.path.realpath(filename)
        if path.startswith(self._own):
            return False
        if any(fnmatch.fnmatch(path, pattern) for pattern in self.exclude):
            return False
        if self.include:
            return any(fnmatch.fnmatch(path, pattern) for pattern in self.include)
        if path.startswith(self._system) or f"{os.sep}site-packages{os.sep}" in path:
            return False
        return path.startswith(self._root)


@dataclass
class FunctionSpan:
    first_line: int  # the code object's co_firstlineno (the first decorator's line)
    start: int
    end: int
    qualname: str


@dataclass
class Finding:
    """A static finding and what the run measured for it."""

    diagnostic: Diagnostic
    function: FunctionSpan | None
    names: tuple[str, ...]
    measured: dict[str, Any] | None = None  # None: its function never ran
    freed: FreedWhere = FreedWhere(None, False)  # where its fix releases what it holds

    @property
    def key(self) -> str:
        d = self.diagnostic
        return f"{os.path.abspath(d.path)}:{d.start.row}:{d.start.column}:{d.code}"


def _functions(module: Any) -> list[Any]:
    """Every FunctionDef in a LibCST module, outer ones first."""
    import libcst as cst

    found: list[Any] = []

    class Collect(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
            found.append(node)

    module.visit(Collect())
    return found


def function_spans(text: str) -> list[FunctionSpan]:
    """Every function of a module with the line its code object starts at."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    spans: list[FunctionSpan] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([child.lineno] + [d.lineno for d in child.decorator_list])
                qualname = f"{prefix}{child.name}"
                spans.append(
                    FunctionSpan(first, child.lineno, child.end_lineno or child.lineno, qualname)
                )
                visit(child, qualname + ".<locals>.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(tree, "")
    return spans


def innermost(spans: Sequence[FunctionSpan], row: int) -> FunctionSpan | None:
    best = None
    for span in spans:
        if span.start <= row <= span.end and (best is None or span.start >= best.start):
            best = span
    return best


def held_names(diagnostic: Diagnostic, text: str, local_names: set[str] | None) -> tuple[str, ...]:
    """The local names a finding is about: its rule's own list when it gives one, else the
    identifiers of the flagged code that are locals of its function."""
    given = diagnostic.extra.get("held_names")
    if given:
        return tuple(given)
    start, end = diagnostic.span
    words = _IDENTIFIER.findall(text[start:end]) if end > start else []
    words += deleted_by_fix(diagnostic)
    names = [w for w in dict.fromkeys(words) if local_names is None or w in local_names]
    return tuple(names)


_DEL_STATEMENT = re.compile(r"^[ \t]*del[ \t]+([A-Za-z_][A-Za-z0-9_ \t,]*?)[ \t]*(?:#.*)?$", re.M)


def deleted_by_fix(diagnostic: Diagnostic) -> list[str]:
    """The names the finding's fix `del`s: its fix releases them too (LL002's writer fix
    deletes the chunk after copying it, so the chunk's bytes are the finding's as well)."""
    if diagnostic.fix is None:
        return []
    names: list[str] = []
    for edit in diagnostic.fix.edits:
        for match in _DEL_STATEMENT.finditer(edit.content):
            names += [name.strip() for name in match.group(1).split(",") if name.strip()]
    return names


class FindingIndex:
    """Lints in-scope files on first use and answers, per code object, which findings to watch."""

    def __init__(
        self,
        scope: Scope,
        config: str | None,
        isolated: bool,
        also_watch: Sequence[tuple[str, str]] = (),
    ) -> None:
        """`also_watch`: (file relative to the scope's root, qualified name) of functions to
        trace even without findings (`--compare` traces the same functions after `--fix`)."""
        self.scope = scope
        self.also_watch = {
            (os.path.realpath(os.path.join(scope.root, file)), name) for file, name in also_watch
        }
        self.config = config
        self.isolated = isolated
        self.files: dict[str, list[Finding]] = {}
        self._spans: dict[str, list[FunctionSpan]] = {}
        self._linters: dict[str | None, Linter] = {}
        self._liveness: dict[tuple[str, int], Any] = {}
        self.errors: list[Diagnostic] = []

    def _linter_for(self, path: str) -> Linter:
        config = None
        if not self.isolated:
            config = self.config or find_config(os.path.dirname(path))
        linter = self._linters.get(config)
        if linter is None:
            settings = load_settings(config, all_rules()) if config else Settings()
            # The run, not the static significance bar, decides what a finding is worth:
            # profile every finding, down to the lowest level.
            from lifetime_lint.analysis.significance import SETTING

            settings = dataclasses.replace(settings, extra={**settings.extra, SETTING: "low"})
            linter = self._linters[config] = Linter(settings)
        return linter

    def findings_in(self, path: str, code: CodeType | None = None) -> list[Finding]:
        path = os.path.realpath(path)
        if path in self.files:
            return self.files[path]
        findings: list[Finding] = []
        self.files[path] = findings
        try:
            source = SourceFile.read(path)
            linter = self._linter_for(path)
        except (SourceError, ConfigError, OSError):
            return findings
        spans = function_spans(source.text)
        self._spans[path] = spans
        diagnostics, error = linter.lint_text(path, source.text, source.newline)
        if error is not None:
            self.errors.append(error)
            return findings
        for diagnostic in diagnostics:
            span = innermost(spans, diagnostic.start.row)
            names = held_names(diagnostic, source.text, None)
            freed = freed_where(diagnostic, source.text)
            findings.append(Finding(diagnostic, span, names, freed=freed))
        return findings

    def dead_names(
        self, path: str, first_line: int, covered: set[str]
    ) -> dict[int, tuple[str, ...]]:
        """Row -> locals that may be bound there but are dead (read on no path from there),
        other than `covered`: what a run can show the rules missed. Empty when the function
        cannot be analysed."""
        liveness = self.liveness(path, first_line)
        if liveness is None:
            return {}
        dead_by_row = {}
        for row, (_, dead) in liveness.items():
            names = tuple(name for name in dead if name not in covered)
            if names:
                dead_by_row[row] = names
        return dead_by_row

    def liveness(
        self, path: str, first_line: int
    ) -> dict[int, tuple[frozenset[str], tuple[str, ...]]] | None:
        """Row -> (the locals live at the start of that line, the locals dead there that may be
        bound), from the dataflow the rules use; None when the function cannot be analysed.
        Every line of a simple statement maps to it (a call's continuation lines are the lines
        a trace reports inside it); a compound statement, its first line only."""
        key = (path, first_line)
        if key in self._liveness:
            return self._liveness[key]
        self._liveness[key] = None
        import libcst as cst

        from lifetime_lint.analysis import build, solve
        from lifetime_lint.analysis.cfg import TooLarge
        from lifetime_lint.rule import FileContext

        try:
            source = SourceFile.read(path)
            module = cst.parse_module(source.text)
        except (SourceError, cst.ParserSyntaxError, RecursionError):
            return None
        context = FileContext(path, source.text, module, source.newline, Settings())
        target = None
        for node in _functions(module):
            position = context.position(node)
            first = min(
                [position.start.line] + [context.position(d).start.line for d in node.decorators]
            )
            if first == first_line:
                target = node
                break
        if target is None:
            return None
        try:
            graph = build(target)
        except TooLarge:
            return None
        flow = solve(graph)
        by_row: dict[int, tuple[frozenset[str], tuple[str, ...]]] = {}
        for node in graph.nodes:
            if node.statement is None or node.kind not in ("small", "if", "for", "while", "with"):
                continue
            position = context.position(node.statement)
            rows = range(position.start.line, position.end.line + 1)
            if node.kind != "small":
                rows = range(position.start.line, position.start.line + 1)
            if position.start.line in by_row:
                continue
            live_in = flow.live_in[node.index]
            live, dead = set(), []
            for name in graph.names:
                if flow.name_bit(name) & live_in:
                    live.add(name)
                    continue
                if name in graph.parameters:
                    continue
                bound = [
                    site
                    for site in flow.reaching(flow.reach_in[node.index], name)
                    if site.kind not in ("unbound", "deleted")
                ]
                if bound:
                    dead.append(name)
            for row in rows:
                by_row.setdefault(row, (frozenset(live), tuple(dead)))
        self._liveness[key] = by_row
        return by_row

    def watch_for(self, code: CodeType) -> Any:
        """A FunctionWatch for this code object, or None when it has no findings."""
        from lifetime_lint.runtime.profiling import FunctionWatch, Watch

        if not self.scope.wants(code.co_filename):
            return None
        findings = self.findings_in(code.co_filename)
        local_names = set(code.co_varnames) | set(code.co_cellvars)
        watches = []
        qualname = None
        for finding in findings:
            span = finding.function
            if span is None or span.first_line != code.co_firstlineno:
                continue
            if code.co_name != span.qualname.rsplit(".", 1)[-1]:
                continue  # a lambda or comprehension starting on the same line
            qualname = span.qualname
            names = tuple(n for n in finding.names if n in local_names)
            finding.names = names
            watches.append(Watch(finding.key, names))
        if watches:
            path = os.path.realpath(code.co_filename)
            covered = {name for watch in watches for name in watch.names}
            dead = self.dead_names(path, code.co_firstlineno, covered)
            return FunctionWatch(path, code.co_firstlineno, qualname or code.co_name, watches, dead)
        if not watches:
            if not self.also_watch:
                return None
            path = os.path.realpath(code.co_filename)
            for span in self._spans.get(path, ()):
                if (
                    span.first_line == code.co_firstlineno
                    and (path, span.qualname) in self.also_watch
                ):
                    return FunctionWatch(path, code.co_firstlineno, span.qualname, [])
            return None
        return FunctionWatch(
            os.path.realpath(code.co_filename),
            code.co_firstlineno,
            qualname or code.co_name,
            watches,
        )


# -- running ---------------------------------------------------------------------------------------


@dataclass
class ProfileResult:
    findings: list[Finding] = field(default_factory=list)
    functions: list[dict[str, Any]] = field(default_factory=list)
    device: str = "cpu"
    exit_status: int = 0
    error: str | None = None
    seconds: float = 0.0
    namespace: dict[str, Any] = field(default_factory=dict)  # the program's __main__ globals
    missed: list[dict[str, Any]] = field(default_factory=list)  # dead, no finding, measured
    executed_files: list[str] = field(default_factory=list)  # in scope, linted because they ran


def run_program(
    target: str,
    arguments: Sequence[str],
    *,
    module: bool = False,
    scope: Scope,
    device: str = "auto",
    config: str | None = None,
    isolated: bool = False,
    also_watch: Sequence[tuple[str, str]] = (),
) -> ProfileResult:
    """Run `target` (a script path, or a module with `module=True`) with tracing on."""
    import torch

    from lifetime_lint.runtime.profiling import MISSED_PREFIX, Tracer, make_meter

    index = FindingIndex(scope, config, isolated, also_watch)
    meter = make_meter(torch, device)
    tracer = Tracer(torch, meter, (), resolve=index.watch_for)
    result = ProfileResult(device=getattr(meter, "device_type", "cpu"))
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    started = time.perf_counter()
    if module:
        sys.argv = [target, *arguments]
    else:
        sys.argv = [target, *arguments]
        sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
    tracer.start()
    try:
        if module:
            result.namespace = runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            result.namespace = runpy.run_path(target, run_name="__main__")
    except SystemExit as stop:
        code = stop.code
        result.exit_status = code if isinstance(code, int) else (0 if code is None else 1)
    except BaseException as error:  # the program's own failure: still report what ran
        result.exit_status = 1
        result.error = f"{type(error).__name__}: {error}"
    finally:
        tracer.stop()
        sys.argv, sys.path[:] = saved_argv, saved_path
    result.seconds = time.perf_counter() - started
    records = {key[0:2]: record for key, record in tracer.records.items()}
    by_key: dict[str, tuple[dict[str, Any], int, int]] = {}
    for record in records.values():
        best = record.best
        function = {
            "filename": record.watch.filename,
            "function": record.watch.qualname,
            "calls": record.calls,
            "peak_bytes": best.peak_bytes if best else 0,
            "entry_bytes": best.entry_bytes if best else 0,
            "peak_row": best.peak_row if best else 0,
            "timeline": record.timeline,
        }
        result.functions.append(function)
        for watch in record.watch.watches:
            size = best.held.get(watch.key, 0) if best else 0
            by_key[watch.key] = (function, size, record.largest_held.get(watch.key, 0))
        for key, size in (best.held if best else {}).items():
            if key.startswith(MISSED_PREFIX) and size:
                result.missed.append(
                    {
                        "filename": record.watch.filename,
                        "function": record.watch.qualname,
                        "name": key[len(MISSED_PREFIX) :],
                        "row": best.peak_row if best else 0,
                        "bytes": size,
                    }
                )
    result.executed_files = sorted(index.files)
    for findings in index.files.values():
        for finding in findings:
            measured = by_key.get(finding.key)
            if measured is not None:
                function, own, largest = measured
                held, program_peak, outermost, row_at_peak = tracer.roots.get(
                    finding.key, (own, function["peak_bytes"], function["function"], 0)
                )
                size = held
                if finding.function is not None and row_at_peak:
                    liveness = index.liveness(
                        os.path.realpath(finding.diagnostic.path), finding.function.first_line
                    )
                    live = None if liveness is None else liveness.get(row_at_peak, (None,))[0]
                    if not finding.freed.frees_on(row_at_peak, live, finding.names):
                        size = 0  # the fix leaves these bytes alive at the peak
                finding.measured = {
                    "bytes": size,
                    "held_bytes": held,
                    "own_bytes": own,
                    "largest_bytes": largest,
                    "program_peak_bytes": program_peak,
                    "outermost": outermost,
                    "row_at_program_peak": row_at_peak,
                    "peak_bytes": function["peak_bytes"],
                    "peak_row": function["peak_row"],
                    "calls": function["calls"],
                    "names": list(finding.names),
                }
                finding.diagnostic.extra["measured"] = finding.measured
            else:
                finding.diagnostic.extra["measured"] = None
                finding.diagnostic.extra["measured_status"] = "not executed"
            result.findings.append(finding)
    result.findings.sort(
        key=lambda f: (
            f.measured is None,
            -(f.measured or {}).get("bytes", 0),
            f.diagnostic.sort_key(),
        )
    )
    return result


# -- reports -----------------------------------------------------------------------------------


def render_text(result: ProfileResult, root: str) -> str:
    lines = []
    measured = [f for f in result.findings if f.measured is not None]
    missing = [f for f in result.findings if f.measured is None]
    lines.append(
        f"Profiled on {result.device} in {result.seconds:.1f} s: {len(measured)} findings ran, "
        f"{len(missing)} did not."
    )
    if measured:
        lines.append("")
        lines.append(f"{'bytes':>12}  {'of peak':>7}  {'calls':>5}  finding")
        for finding in measured:
            m = finding.measured or {}
            peak = m.get("program_peak_bytes") or m["peak_bytes"]
            share = (m["bytes"] / peak * 100) if peak else 0.0
            d = finding.diagnostic
            where = f"{os.path.relpath(d.path, root)}:{d.start.row}:{d.start.column}"
            lines.append(
                f"{format_bytes(m['bytes']):>12}  {share:6.1f}%  {m['calls']:>5}  "
                f"{where}: {d.code} {d.message}"
            )
            lines.append(
                f"{'':>12}  {'':>7}  {'':>5}  peak {format_bytes(peak)} in {m['outermost']} "
                f"(the function's own: {format_bytes(m['peak_bytes'])} at line {m['peak_row']}, "
                f"{format_bytes(m['own_bytes'])} held there); "
                f"held: {', '.join(m['names']) or '(no local names)'}"
            )
    if result.missed:
        lines.append("")
        lines.append("Dead at a function's peak with no finding (what the rules missed):")
        for item in sorted(result.missed, key=lambda m: -m["bytes"]):
            lines.append(
                f"{format_bytes(item['bytes']):>12}  {os.path.relpath(item['filename'], root)}:"
                f"{item['row']}: `{item['name']}` in {item['function']} is dead here and still bound"
            )
    if missing:
        lines.append("")
        lines.append("Not executed:")
        for finding in missing:
            d = finding.diagnostic
            lines.append(
                f"  {os.path.relpath(d.path, root)}:{d.start.row}:{d.start.column}: {d.code} {d.message}"
            )
    if result.error:
        lines.append("")
        lines.append(f"The program raised {result.error}; the report covers what ran before.")
    return "\n".join(lines) + "\n"


def to_json(result: ProfileResult, root: str | None = None) -> dict[str, Any]:
    """The saved profile. Each finding carries the fingerprint `--baseline` uses (rule, file
    relative to `root`, the flagged line and its neighbours; no line numbers), so that
    `check --profile` matches it to the current findings after code moves."""
    from lifetime_lint.baseline import _relative, fingerprint
    from lifetime_lint.reporters import diagnostic_to_json
    from lifetime_lint.source import SourceLines

    root = os.path.abspath(root or os.getcwd())
    lines = SourceLines()
    items = []
    for finding in result.findings:
        d = finding.diagnostic
        relative = _relative(d.path, root)
        item = diagnostic_to_json(d)
        item["measured"] = finding.measured
        item["path"] = relative
        item["fingerprint"] = fingerprint(d, relative, lines.get(d.path))
        items.append(item)
    return {
        "version": PROFILE_FORMAT_VERSION,
        "device": result.device,
        "exit_status": result.exit_status,
        "error": result.error,
        "seconds": round(result.seconds, 3),
        # Every file linted because it ran (relative to `root`): a finding of another file
        # never ran in this workload.
        "files": sorted({_relative(f, root) for f in result.executed_files}),
        "findings": items,
        "functions": result.functions,
        "missed": result.missed,
    }


def save(result: ProfileResult, path: str) -> None:
    """Write the profile atomically; paths and fingerprints are relative to its folder, so
    the file stays valid in another checkout (as a baseline does)."""
    from lifetime_lint.source import write_atomic

    document = to_json(result, os.path.dirname(os.path.abspath(path)))
    write_atomic(path, (json.dumps(document, indent=2) + "\n").encode("utf-8"))


class ProfileError(Exception):
    """The saved profile is missing, unreadable or not a profile."""


@dataclass
class SavedProfile:
    """A saved profile, read for `check --profile`: measurements by fingerprint."""

    path: str
    root: str  # the folder the saved paths are relative to (the profile's)
    files: set[str]  # relative paths of the files the profiled run executed
    measured: dict[str, list[dict[str, Any] | None]]  # fingerprint -> measurements, by row

    @classmethod
    def load(cls, path: str) -> SavedProfile:
        try:
            with open(path, encoding="utf-8") as handle:
                data = json.load(handle)
        except FileNotFoundError:
            raise ProfileError(
                f"{path}: profile not found (write one with `lifetime-lint profile --save`)"
            ) from None
        except (OSError, ValueError) as error:
            raise ProfileError(f"{path}: cannot read the profile: {error}") from None
        if not isinstance(data, dict) or data.get("version") != PROFILE_FORMAT_VERSION:
            raise ProfileError(
                f"{path}: not a saved lifetime-lint profile (version "
                f"{PROFILE_FORMAT_VERSION}, from `lifetime-lint profile --save`)"
            )
        measured: dict[str, list[dict[str, Any] | None]] = {}
        try:
            files = {str(name) for name in data["files"]}
            items = sorted(data["findings"], key=lambda item: item["location"]["row"])
            for item in items:
                value = item["measured"]
                if value is not None and not isinstance(value.get("bytes"), int):
                    raise TypeError("measured bytes")
                measured.setdefault(str(item["fingerprint"]), []).append(value)
        except (KeyError, TypeError, AttributeError):
            raise ProfileError(
                f"{path}: malformed profile (saved by an older lifetime-lint? "
                "save it again with `lifetime-lint profile --save`)"
            ) from None
        return cls(path, os.path.dirname(os.path.abspath(path)), files, measured)


@dataclass
class ProfileFilter:
    """What `check --profile` did: counts for the note it prints."""

    below: int = 0  # measured under --min-bytes
    not_run: int = 0  # in code the profiled run never executed
    unmeasured: int = 0  # kept: in a file that ran, but new or edited since the profile


def apply_profile(
    diagnostics_by_file: Sequence[list[Diagnostic]],
    saved: SavedProfile,
    min_bytes: int | None,
) -> tuple[list[list[Diagnostic]], ProfileFilter]:
    """Attach the saved measurement to each current finding (`extra["measured"]`, None when
    there is none) and, with `min_bytes`, keep only the findings the run proved to matter.

    A finding is matched by its fingerprint (identical snippets in order of their rows), so
    code added above it does not break the match. With `min_bytes`:
    - measured: kept when its `bytes` (held at the peak, see `run_program`) reach `min_bytes`;
    - never executed (its function or its whole file did not run in the profiled
      workload): dropped and counted, since nothing shows it matters there;
    - in a file that ran but not in the profile (new or edited code): kept, marked
      unmeasured: the profile is stale for it, and a gate must not hide new code.
    File errors are always kept.
    """
    from lifetime_lint.baseline import _relative, fingerprint
    from lifetime_lint.source import SourceLines

    lines = SourceLines()
    remaining = {key: list(values) for key, values in saved.measured.items()}
    counts = ProfileFilter()
    kept_by_file: list[list[Diagnostic]] = []
    for diagnostics in diagnostics_by_file:
        kept: list[Diagnostic] = []
        for d in sorted(diagnostics, key=Diagnostic.sort_key):
            if d.is_error:
                kept.append(d)
                continue
            relative = _relative(d.path, saved.root)
            key = fingerprint(d, relative, lines.get(d.path))
            candidates = remaining.get(key)
            if candidates:
                measurement = candidates.pop(0)
                d.extra["measured"] = measurement
                if measurement is None:
                    d.extra["measured_status"] = "not executed"
                    if min_bytes is None:
                        kept.append(d)
                    else:
                        counts.not_run += 1
                elif min_bytes is None or measurement["bytes"] >= min_bytes:
                    kept.append(d)
                else:
                    counts.below += 1
                continue
            d.extra["measured"] = None
            if relative in saved.files:
                d.extra["measured_status"] = "not in the profile"
                counts.unmeasured += 1
                kept.append(d)
            else:
                d.extra["measured_status"] = "not executed"
                if min_bytes is None:
                    kept.append(d)
                else:
                    counts.not_run += 1
        kept_by_file.append(kept)
    return kept_by_file, counts


# -- before and after --fix ------------------------------------------------------------------------


def dump_output(result: ProfileResult, expression: str, path: str) -> None:
    """Evaluate `expression` in the finished program's globals and save it with torch."""
    import torch

    value = eval(expression, result.namespace)  # the user's own expression over their program
    torch.save(value, path)


def outputs_equal(before: Any, after: Any) -> bool:
    """Bitwise equality of saved outputs: tensors by value, dtype and shape; containers item by item."""
    import torch

    if isinstance(before, torch.Tensor) or isinstance(after, torch.Tensor):
        return (
            isinstance(before, torch.Tensor)
            and isinstance(after, torch.Tensor)
            and before.dtype == after.dtype
            and before.shape == after.shape
            and bool(torch.equal(before, after))
        )
    if isinstance(before, (list, tuple)) and isinstance(after, (list, tuple)):
        return len(before) == len(after) and all(map(outputs_equal, before, after))
    if isinstance(before, dict) and isinstance(after, dict):
        return before.keys() == after.keys() and all(
            outputs_equal(before[k], after[k]) for k in before
        )
    return bool(before == after)


@dataclass
class Comparison:
    before: dict[str, Any]
    after: dict[str, Any]
    fixed_files: list[str]
    fixes_applied: int
    outputs_equal: bool | None  # None: no --check-output given


def compare(
    target: str,
    arguments: Sequence[str],
    *,
    module: bool,
    root: str,
    profile_args: Sequence[str],
    check_output: str | None,
    unsafe_fixes: bool = False,
) -> Comparison:
    """Run the program as it is and after `--fix` of the files it ran, each in a fresh
    interpreter, on a temporary copy of `root`; the original tree is never written."""
    import shutil
    import subprocess
    import tempfile

    import torch

    from lifetime_lint.engine import FixMode

    work = tempfile.mkdtemp(prefix="lifetime-lint-compare-")
    try:
        runs = {}
        copies = {}
        for label in ("before", "after"):
            copy = os.path.join(work, label)
            shutil.copytree(
                root, copy, symlinks=True, ignore=shutil.ignore_patterns(".git", "__pycache__")
            )
            copies[label] = copy
        saved = {label: os.path.join(work, f"{label}.json") for label in copies}
        outputs = {label: os.path.join(work, f"{label}.pt") for label in copies}

        def run(label: str) -> dict[str, Any]:
            copy = copies[label]
            relative_target = target if module else os.path.relpath(os.path.abspath(target), root)
            command = [sys.executable, "-m", "lifetime_lint", "profile", *profile_args]
            command += ["--save", saved[label]]
            if label == "after":
                command += ["--watch-functions", watch_file]
            if check_output:
                command += ["--check-output", check_output, "--dump-output", outputs[label]]
            command += ["-m", relative_target] if module else [relative_target]
            command += list(arguments)
            subprocess.run(command, cwd=copy, check=False, stdout=subprocess.DEVNULL)
            with open(saved[label], encoding="utf-8") as handle:
                return json.load(handle)

        watch_file = os.path.join(work, "watch.json")
        runs["before"] = run("before")
        with open(watch_file, "w", encoding="utf-8") as handle:
            json.dump(
                [
                    [os.path.relpath(f["filename"], copies["before"]), f["function"]]
                    for f in runs["before"]["functions"]
                ],
                handle,
            )
        executed = sorted({item["filename"] for item in runs["before"]["findings"]})
        fixed_files, fixes_applied = [], 0
        mode = FixMode(apply=True, unsafe=unsafe_fixes)
        for original in executed:
            relative = os.path.relpath(original, copies["before"])
            if relative.startswith(os.pardir):
                continue  # outside the copied tree (an --include of installed code)
            path = os.path.join(copies["after"], relative)
            index = FindingIndex(Scope(copies["after"]), None, False)
            result = index._linter_for(path).check_file(path, mode)
            if result.fixes_applied:
                fixed_files.append(relative)
                fixes_applied += result.fixes_applied
        runs["after"] = run("after")
        equal = None
        if check_output:
            before = torch.load(outputs["before"], weights_only=False)
            after = torch.load(outputs["after"], weights_only=False)
            equal = outputs_equal(before, after)
        return Comparison(runs["before"], runs["after"], fixed_files, fixes_applied, equal)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def render_comparison(comparison: Comparison) -> str:
    def by_function(run: dict[str, Any], root: str) -> dict[tuple[str, str], int]:
        return {
            (os.path.relpath(f["filename"], root), f["function"]): f["peak_bytes"]
            - f["entry_bytes"]
            for f in run["functions"]
            if f["calls"]
        }

    before = by_function(comparison.before, _common_root(comparison.before))
    after = by_function(comparison.after, _common_root(comparison.after))
    lines = [
        f"--fix applied {comparison.fixes_applied} fixes in {len(comparison.fixed_files)} files: "
        + (", ".join(comparison.fixed_files) or "none"),
        "",
        f"{'peak before':>12}  {'peak after':>12}  {'change':>8}  function (peak above its entry)",
    ]
    for key in sorted(before.keys() | after.keys()):
        old, new = before.get(key), after.get(key)
        if old is None or new is None:
            change = "n/a"
        else:
            change = f"{(new - old) / old * 100:+.1f}%" if old else f"{new - old:+d} B"
        lines.append(
            f"{format_bytes(old) if old is not None else '-':>12}  "
            f"{format_bytes(new) if new is not None else '-':>12}  {change:>8}  {key[0]}: {key[1]}"
        )
    if comparison.outputs_equal is not None:
        lines.append("")
        lines.append(
            "Outputs are bitwise equal."
            if comparison.outputs_equal
            else "Outputs DIFFER between the run before and the run after --fix."
        )
    return "\n".join(lines) + "\n"


def _common_root(run: dict[str, Any]) -> str:
    folders = [os.path.dirname(f["filename"]) for f in run["functions"]]
    return os.path.commonpath(folders) if folders else os.getcwd()


# -- the picture -------------------------------------------------------------------------------

_CHART_WIDTH, _CHART_HEIGHT, _MARGIN = 720, 220, 56


def render_html(result: ProfileResult, root: str) -> str:
    """One self-contained page: per profiled function, allocated memory over the lines of its
    largest run, the peak marked, and each finding's bytes stacked at that peak, linked to the
    source line and the rule's documentation. No script, no network."""
    import html

    from lifetime_lint.reporters import rule_url

    by_function: dict[tuple[str, int], list[Finding]] = {}
    for finding in result.findings:
        if finding.measured is not None and finding.function is not None:
            key = (os.path.realpath(finding.diagnostic.path), finding.function.first_line)
            by_function.setdefault(key, []).append(finding)
    sections = []
    palette = ["#d62728", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"]
    for function in sorted(result.functions, key=lambda f: -f["peak_bytes"]):
        timeline = function["timeline"]
        if not function["calls"] or not timeline:
            continue
        path = os.path.realpath(function["filename"])
        findings = [
            f
            for (file, _), items in by_function.items()
            if file == path
            for f in items
            if f.function is not None and f.function.qualname == function["function"]
        ]
        top = max(max(b for _, b in timeline), 1)
        step = (_CHART_WIDTH - 2 * _MARGIN) / max(len(timeline) - 1, 1)

        def x(index: int, step: float = step) -> float:
            return _MARGIN + index * step

        def y(value: float, top: float = top) -> float:
            return _CHART_HEIGHT - 24 - (value / top) * (_CHART_HEIGHT - 48)

        points = " ".join(f"{x(i):.1f},{y(b):.1f}" for i, (_, b) in enumerate(timeline))
        peak_index = max(range(len(timeline)), key=lambda i: timeline[i][1])
        bars = []
        base = 0.0
        legend = []
        for number, finding in enumerate(findings):
            size = (finding.measured or {}).get("bytes", 0)
            color = palette[number % len(palette)]
            if size:
                bars.append(
                    f'<rect class="held" data-finding="{html.escape(finding.key)}" '
                    f'x="{x(peak_index) - 7:.1f}" y="{y(base + size):.1f}" width="14" '
                    f'height="{max(y(base) - y(base + size), 1):.1f}" fill="{color}">'
                    f"<title>{html.escape(finding.diagnostic.code)}: {format_bytes(size)}</title></rect>"
                )
                base += size
            d = finding.diagnostic
            location = f"{os.path.relpath(d.path, root)}:{d.start.row}"
            legend.append(
                f'<li><span class="swatch" style="background:{color}"></span>'
                f'<a href="file://{html.escape(os.path.realpath(d.path))}#L{d.start.row}">'
                f"{html.escape(location)}</a> "
                f'<a href="{html.escape(rule_url(d.code, d.name))}">{html.escape(d.code)}</a> '
                f"<b>{format_bytes(size)}</b> held at the peak: {html.escape(d.message)}</li>"
            )
        labels = "".join(
            f'<text x="{x(i):.1f}" y="{_CHART_HEIGHT - 6}" class="tick">{row}</text>'
            for i, (row, _) in enumerate(timeline)
            if len(timeline) <= 40 or i % max(len(timeline) // 40, 1) == 0
        )
        title = f"{os.path.relpath(path, root)}: {function['function']}"
        sections.append(
            f"<section><h2>{html.escape(title)}</h2>"
            f"<p>{function['calls']} call(s); largest run's peak "
            f"<b>{format_bytes(function['peak_bytes'])}</b> at line {function['peak_row']} "
            f"(entered at {format_bytes(function['entry_bytes'])}).</p>"
            f'<svg width="{_CHART_WIDTH}" height="{_CHART_HEIGHT}" role="img" '
            f'aria-label="allocated memory over the lines of {html.escape(title)}">'
            f'<text x="4" y="16" class="tick">{format_bytes(top)}</text>'
            f'<line x1="{_MARGIN}" y1="{y(0):.1f}" x2="{_CHART_WIDTH - _MARGIN}" y2="{y(0):.1f}" class="axis"/>'
            f'<polyline class="timeline" points="{points}"/>'
            f'<circle class="peak" cx="{x(peak_index):.1f}" cy="{y(timeline[peak_index][1]):.1f}" r="5">'
            f"<title>peak {format_bytes(function['peak_bytes'])} at line {function['peak_row']}</title></circle>"
            + "".join(bars)
            + labels
            + "</svg><ul>"
            + "".join(legend)
            + "</ul></section>"
        )
    not_run = [f for f in result.findings if f.measured is None]
    if not_run:
        items = "".join(
            f"<li>{html.escape(os.path.relpath(f.diagnostic.path, root))}:{f.diagnostic.start.row} "
            f"{html.escape(f.diagnostic.code)} {html.escape(f.diagnostic.message)}</li>"
            for f in not_run
        )
        sections.append(f"<section><h2>Not executed</h2><ul>{items}</ul></section>")
    style = (
        "body{font:14px system-ui,sans-serif;margin:24px;color:#222}"
        "h1{font-size:20px}h2{font-size:16px;margin-top:28px}"
        ".timeline{fill:none;stroke:#1f77b4;stroke-width:2}.axis{stroke:#999}"
        ".peak{fill:#1f77b4}.tick{font-size:10px;fill:#555}"
        ".swatch{display:inline-block;width:10px;height:10px;margin-right:6px}"
        "ul{padding-left:18px}li{margin:4px 0}"
    )
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        "<title>lifetime-lint profile</title>"
        f"<style>{style}</style></head><body><h1>lifetime-lint profile</h1>"
        f"<p>Measured on {html.escape(result.device)} in {result.seconds:.1f} s. Each chart is the "
        "peak of allocated memory during each line of the function's largest run (the calls a line "
        "makes included), from zero at the axis; the bars at the peak are the bytes each "
        "finding's fix alone frees there (two findings about the same tensor each show it).</p>"
        + "".join(sections)
        + "</body></html>\n"
    )
