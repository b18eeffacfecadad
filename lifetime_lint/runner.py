"""Running the linter over many files: cache look-ups, a process pool, a progress bar.

`run_files` returns one `FileResult` per path, in the order of the paths, whatever the
number of processes: output never depends on scheduling.

Work is split in chunks over a `ProcessPoolExecutor`; each worker builds its `Linter` once
(rules are instantiated per file anyway). Cache hits are answered in the parent before
anything is dispatched, so a warm run starts no pool at all. Small lists run in-process: a
pool costs more than it saves below a few dozen files, and under pre-commit, which already
splits the file list across one process per CPU, a second pool per chunk only
oversubscribes the CPU (design notes section 1: 5.5x slower).
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

from lifetime_lint.cache import Cache, FixEntry
from lifetime_lint.config import Settings
from lifetime_lint.diagnostics import Diagnostic, Location
from lifetime_lint.results import IO_ERROR, FileResult, FixMode
from lifetime_lint.source import SourceError, SourceFile

if TYPE_CHECKING:  # pragma: no cover - the engine imports LibCST: only when a file is parsed
    from lifetime_lint.engine import Linter

# Below this many files to lint, a process pool is not worth starting.
PARALLEL_MIN_FILES = 32


def default_jobs(file_count: int, environ: dict[str, str] | None = None) -> int:
    """The CPU count; 1 under pre-commit (which parallelises itself) for small file lists."""
    environ = os.environ if environ is None else environ
    if environ.get("PRE_COMMIT") == "1" and file_count < 4 * PARALLEL_MIN_FILES:
        return 1
    try:
        return max(1, len(os.sched_getaffinity(0)))  # type: ignore[attr-defined]
    except AttributeError:  # pragma: no cover - macOS, Windows
        return max(1, os.cpu_count() or 1)


@dataclass
class Checker:
    """Checks one file: read once, answer from the cache or lint (and fix) and store.

    The linter (and with it LibCST and the rules) is built on the first file the cache
    cannot answer: a warm run imports neither.
    """

    settings: Settings
    rules: Sequence[Any]  # the enabled rules: classes or `catalog.RuleInfo`s
    mode: FixMode
    cache: Cache | None = None
    _linter: Linter | None = None

    @property
    def linter(self) -> Linter:
        if self._linter is None:
            from lifetime_lint.catalog import RuleInfo, rule_classes
            from lifetime_lint.engine import Linter

            classes = list(self.rules)
            if any(isinstance(rule, RuleInfo) for rule in classes):
                classes = rule_classes([rule.code for rule in classes])
            self._linter = Linter(self.settings, classes)
        return self._linter

    def check(self, path: str) -> FileResult:
        data = _read(path)
        if isinstance(data, FileResult):
            return data
        key = self.cache.key(path, data) if self.cache is not None else ""
        cached = self.lookup(path, data, key)
        if cached is not None:
            return cached
        result = FileResult(path)
        try:
            source = SourceFile.from_bytes(path, data)
        except SourceError as error:
            result.diagnostics.append(_io_error(path, f"Failed to read {path}: {error}"))
            return result
        try:
            result = self.linter.check_source(source, self.mode, result)
        except Exception as error:  # a bug in a rule must not abort a run over 4,000 files
            return FileResult(path, [_internal_error(path, error)])
        if self.cache is not None and not result.left_out:  # the cache keeps no counts
            self._store(path, key, source, result)
        return result

    def _store(self, path: str, key: str, source: SourceFile, result: FileResult) -> None:
        assert self.cache is not None
        if result.fixed_text is None:
            self.cache.store(key, result.diagnostics)
            return
        # What the file held before fixing serves a later `check`; what this mode computed
        # serves the same mode on the same content (a second --diff, --fix after --diff).
        self.cache.store(key, result.original_diagnostics)
        self.cache.store_fix(
            self.cache.fix_key(key, path, self.mode.unsafe),
            FixEntry(result.original_diagnostics, result.diagnostics, result.fixed_text,
                     result.diff, result.fixes_applied, dict(result.fixed_by_code)),
        )  # fmt: skip
        if result.written and not any(
            d.fix is not None and self.mode.allows(d.fix) for d in result.diagnostics
        ):
            new_key = self.cache.key(path, source.encode(result.fixed_text))
            self.cache.store(new_key, result.diagnostics)

    def lookup(self, path: str, data: bytes, key: str = "") -> FileResult | None:
        """The cached result, if there is one that this fix mode can use."""
        if self.cache is None:
            return None
        key = key or self.cache.key(path, data)
        diagnostics = self.cache.load(key, path)
        if diagnostics is None:
            return None
        if not self.mode.fixing or not any(
            d.fix is not None and self.mode.allows(d.fix) for d in diagnostics
        ):
            return FileResult(path, diagnostics)
        entry = self.cache.load_fix(self.cache.fix_key(key, path, self.mode.unsafe), path)
        if entry is None:
            return None  # there is something to fix and it was never computed: do the work
        result = FileResult(
            path,
            entry.diagnostics,
            fixes_applied=entry.fixes_applied,
            fixed_by_code=dict(entry.fixed_by_code),
            fixed_text=entry.fixed_text,
            found=entry.found,
        )
        if self.mode.diff_only:
            result.diff = entry.diff
        else:
            try:
                source = SourceFile.from_bytes(path, data)
            except SourceError:
                return None
            source.write(entry.fixed_text)
            result.written = True
            if not any(d.fix is not None and self.mode.allows(d.fix) for d in entry.diagnostics):
                self.cache.store(self.cache.key(path, source.encode(entry.fixed_text)),
                                 entry.diagnostics)  # fmt: skip
        return result


def _read(path: str):
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        reason = "No such file or directory"
    except IsADirectoryError:
        reason = "Is a directory"
    except OSError as error:
        reason = error.strerror or str(error)
    return FileResult(path, [_io_error(path, f"Failed to read {path}: {reason}")])


def _internal_error(path: str, error: Exception) -> Diagnostic:
    """`LL000` for an exception raised while checking a file: reported, exit code 2."""
    where = ""
    trace = traceback.extract_tb(error.__traceback__)
    if trace:
        frame = trace[-1]
        where = f" at {os.path.basename(frame.filename)}:{frame.lineno}"
    return Diagnostic(
        code="LL000",
        name="internal-error",
        message=f"Internal error while checking {path}: {type(error).__name__}: {error}{where}; "
        "the file was not checked (nor changed). Please report this.",
        path=path,
        start=Location(1, 1),
        end=Location(1, 1),
        is_error=True,
    )


def _io_error(path: str, message: str) -> Diagnostic:
    return Diagnostic(
        code=IO_ERROR,
        name="io-error",
        message=message,
        path=path,
        start=Location(1, 1),
        end=Location(1, 1),
        is_error=True,
    )


# -- the process pool -------------------------------------------------------------------

_WORKER: Checker | None = None


def _init_worker(
    settings: Settings, rules: Sequence[Any], mode: FixMode, cache_dir: str | None
) -> None:
    global _WORKER
    cache = Cache(cache_dir, settings, rules) if cache_dir else None
    _WORKER = Checker(settings, rules, mode, cache)


def _check_chunk(chunk: Sequence[tuple[int, str]]) -> list[tuple[int, FileResult]]:
    assert _WORKER is not None
    return [(index, _WORKER.check(path)) for index, path in chunk]


def run_files(
    paths: Sequence[str],
    settings: Settings,
    rules: Sequence[Any],
    mode: FixMode,
    jobs: int = 1,
    cache_dir: str | None = None,
    progress: Progress | None = None,
) -> list[FileResult]:
    """Check every path with one set of settings; results in the order of `paths`.

    `rules`: every known rule, as classes or `catalog.RuleInfo`s (the settings select).
    """
    enabled = settings.enabled_rules(rules)
    cache = Cache(cache_dir, settings, enabled) if cache_dir else None
    checker = Checker(settings, enabled, mode, cache)
    progress = progress or Progress(len(paths), enabled=False)
    results: list[FileResult | None] = [None] * len(paths)

    pending: list[tuple[int, str]] = []
    if cache is not None and jobs > 1:
        for index, path in enumerate(paths):
            data = _read(path)
            hit = None if isinstance(data, FileResult) else checker.lookup(path, data)
            if hit is not None:
                results[index] = hit
                progress.advance()
            else:
                pending.append((index, path))
    else:
        pending = list(enumerate(paths))

    if jobs > 1 and len(pending) >= PARALLEL_MIN_FILES:
        workers = min(jobs, len(pending) // (PARALLEL_MIN_FILES // 2))
        # Small chunks keep the workers evenly loaded (file sizes vary 1000x); large
        # enough ones keep the pickling overhead negligible.
        size = max(1, min(16, len(pending) // (workers * 8)))
        chunks = [pending[i : i + size] for i in range(0, len(pending), size)]
        with ProcessPoolExecutor(
            max_workers=workers,
            initializer=_init_worker,
            initargs=(settings, list(enabled), mode, cache_dir),
        ) as pool:
            for done in pool.map(_check_chunk, chunks):
                for index, result in done:
                    results[index] = result
                    progress.advance()
    else:
        for index, path in pending:
            results[index] = checker.check(path)
            progress.advance()
    progress.close()
    return [result for result in results if result is not None]


# -- progress -----------------------------------------------------------------------------


class Progress:
    """A one-line progress bar on stderr, drawn only on a terminal and only for long runs.

    Nothing is drawn during the first `delay` seconds, so a quick run never flickers; the
    line is erased at the end, so it never mixes with the report.
    """

    def __init__(
        self,
        total: int,
        enabled: bool,
        stream: IO[str] | None = None,
        delay: float = 0.5,
    ) -> None:
        self.total = total
        self.enabled = enabled and total > 0
        self.stream = stream or sys.stderr
        self.done = 0
        self._start = time.monotonic()
        self._delay = delay
        self._last_draw = 0.0
        self._drawn = False

    @classmethod
    def for_terminal(cls, total: int, quiet: bool, stream: IO[str] | None = None) -> Progress:
        stream = stream or sys.stderr
        interactive = hasattr(stream, "isatty") and stream.isatty()
        return cls(total, enabled=interactive and not quiet and os.environ.get("TERM") != "dumb",
                   stream=stream)  # fmt: skip

    def advance(self, count: int = 1) -> None:
        self.done += count
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._start < self._delay or (
            now - self._last_draw < 0.1 and self.done < self.total
        ):
            return
        self._last_draw = now
        width = 30
        filled = width * self.done // self.total
        bar = "#" * filled + "-" * (width - filled)
        self.stream.write(f"\r\x1b[K[{bar}] {self.done}/{self.total} files")
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        if self._drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._drawn = False
