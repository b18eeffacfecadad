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
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, Optional

from lifetime_lint.cache import Cache, FixEntry
from lifetime_lint.config import Settings
from lifetime_lint.fastpath import content_digest
from lifetime_lint.file_errors import (
    INTERNAL_ERROR,
    file_error,
    internal_error,
    read_error,
    write_error,
)
from lifetime_lint.results import FileResult, FixMode
from lifetime_lint.source import SourceError, SourceFile, read_source_bytes

if TYPE_CHECKING:  # pragma: no cover - the engine imports LibCST: only when a file is parsed
    from lifetime_lint.engine import Linter

# Allocations between young-generation collections in a pool worker (Python's default: 700).
WORKER_GC_THRESHOLD = 50_000
# Below this many files to lint, a process pool is not worth starting.
PARALLEL_MIN_FILES = 32


def default_jobs(file_count: int, environ: Mapping[str, str] | None = None) -> int:
    """The CPU count; 1 under pre-commit (which parallelises itself) for small file lists."""
    variables: Mapping[str, str] = os.environ if environ is None else environ
    if variables.get("PRE_COMMIT") == "1" and file_count < 4 * PARALLEL_MIN_FILES:
        return 1
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - macOS, Windows
        return max(1, os.cpu_count() or 1)


@dataclass(frozen=True)
class _Stat:
    """A file's stat, taken before it was read, and when it was taken."""

    info: os.stat_result
    taken_ns: int


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
    # Absolute path -> `fastpath.content_digest` of the bytes each result was computed
    # from, when the run memo records (None: not kept).
    digests: dict[str, bytes] | None = None
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
        return self.check_keyed(path)[0]

    def indexed(self, path: str) -> tuple[FileResult | None, _Stat | None]:
        """The result from the cache's index, by `stat` alone (the file is not read), and
        the stat taken (None: no cache, a notebook, or no such file)."""
        if self.cache is None or path.endswith(".ipynb"):
            return None, None
        now = time.time_ns()
        try:
            info = os.stat(path)
        except OSError:
            return None, None
        found = self.cache.cached_result(path, info)
        stat = _Stat(info, now)
        if found is None:
            return None, stat
        diagnostics, left_out = found
        if self.mode.fixing and any(
            d.fix is not None and self.mode.allows(d.fix) for d in diagnostics
        ):
            return None, stat  # a fix mode with something to fix: the stored fix is keyed
        return FileResult(path, diagnostics, left_out=left_out), stat

    def check_keyed(
        self, path: str, stat: _Stat | None = None, use_index: bool = True
    ) -> tuple[FileResult, str]:
        """The result and the content key it is cached under ("": not cached). With a
        cache, a file is answered from its index entry when its stat is unchanged; `stat`:
        one the caller took already (before this reads the file); `use_index=False`: a
        pool worker (the parent looked the file up and indexes the result)."""
        if stat is None and use_index:
            hit, stat = self.indexed(path)
            if hit is not None:
                return hit, ""
        data = _read(path)
        if isinstance(data, FileResult):
            return data, ""
        self.read(path, data)
        if path.endswith(".ipynb"):  # not cached: cell positions are not kept there
            from lifetime_lint.notebook import check_notebook

            try:
                return check_notebook(self.linter, path, data, self.mode), ""
            except Exception as error:
                return FileResult(path, [internal_error(path, error)]), ""
        key = self.cache.key(path, data) if self.cache is not None else ""
        result = self._check_data(path, data, key)
        if stat is not None:
            self.remember(path, stat, key, result)
        return result, key

    def read(self, path: str, data: bytes) -> None:
        """Note the bytes a result is computed from (for a racily-clean file's memo)."""
        if self.digests is not None:
            self.digests[os.path.abspath(path)] = content_digest(data)

    def remember(self, path: str, stat: _Stat, key: str, result: FileResult) -> None:
        """Index a result computed (or loaded) from the content read after `stat`."""
        if self.cache is None or not key or result.written or result.has_error:
            return
        self.cache.remember(path, stat.info, key, result.original_diagnostics,
                            result.left_out, stat.taken_ns)  # fmt: skip

    def _check_data(self, path: str, data: bytes, key: str) -> FileResult:
        cached = self.lookup(path, data, key)
        if cached is not None:
            return cached
        result = FileResult(path)
        try:
            source = SourceFile.from_bytes(path, data)
        except SourceError as error:
            result.diagnostics.append(read_error(path, str(error)))
            return result
        try:
            result = self.linter.check_source(source, self.mode, result)
        except Exception as error:  # a bug in a rule must not abort a run over 4,000 files
            return FileResult(path, [internal_error(path, error)])
        if self.cache is not None:
            self._store(path, key, source, result)
        return result

    def _store(self, path: str, key: str, source: SourceFile, result: FileResult) -> None:
        assert self.cache is not None
        if result.fixed_text is None:
            self.cache.store(key, result.diagnostics, result.left_out)
            return
        # What the file held before fixing serves a later `check`; what this mode computed
        # serves the same mode on the same content (a second --diff, --fix after --diff).
        self.cache.store(key, result.original_diagnostics, result.left_out)
        self.cache.store_fix(
            self.cache.fix_key(key, path, self.mode.unsafe),
            FixEntry(result.original_diagnostics, result.diagnostics, result.fixed_text,
                     result.diff, result.fixes_applied, dict(result.fixed_by_code),
                     list(result.added_imports)),
        )  # fmt: skip
        if (
            result.written
            and not result.left_out
            and not any(d.fix is not None and self.mode.allows(d.fix) for d in result.diagnostics)
        ):
            new_key = self.cache.key(path, source.encode(result.fixed_text))
            self.cache.store(new_key, result.diagnostics)

    def lookup(self, path: str, data: bytes, key: str = "") -> FileResult | None:
        """The cached result, if there is one that this fix mode can use."""
        if self.cache is None:
            return None
        key = key or self.cache.key(path, data)
        loaded = self.cache.load_with_counts(key, path)
        if loaded is None:
            return None
        diagnostics, left_out = loaded
        if not self.mode.fixing or not any(
            d.fix is not None and self.mode.allows(d.fix) for d in diagnostics
        ):
            return FileResult(path, diagnostics, left_out=left_out)
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
            left_out=left_out,
            added_imports=list(entry.added_imports),
        )
        if self.mode.diff_only:
            result.diff = entry.diff
        else:
            try:
                source = SourceFile.from_bytes(path, data)
            except SourceError:
                return None
            try:
                source.write(entry.fixed_text)
            except OSError as failure:  # the file is as it was: its findings stand, unfixed
                return FileResult(
                    path, [write_error(path, failure.strerror or str(failure)), *entry.found]
                )
            result.written = True
            if not left_out and not any(
                d.fix is not None and self.mode.allows(d.fix) for d in entry.diagnostics
            ):
                self.cache.store(self.cache.key(path, source.encode(entry.fixed_text)),
                                 entry.diagnostics)  # fmt: skip
        return result


def _read(path: str) -> bytes | FileResult:
    try:
        return read_source_bytes(path)
    except SourceError as error:
        return FileResult(path, [read_error(path, str(error))])


# -- the process pool -------------------------------------------------------------------

_WORKER: Checker | None = None


def _init_worker(
    settings: Settings,
    rules: Sequence[Any],
    mode: FixMode,
    cache_dir: str | None,
    keep_digests: bool = False,
) -> None:
    global _WORKER
    _exit_with_parent()
    import gc

    # A worker builds one file's tree (10^5 nodes) after another: the default threshold
    # of 700 allocations runs a young collection every few hundred nodes and full ones
    # over every tree still alive; trees become garbage a whole file at a time.
    gc.set_threshold(WORKER_GC_THRESHOLD, 10, 10)
    cache = Cache(cache_dir, settings, rules) if cache_dir else None
    _WORKER = Checker(settings, rules, mode, cache, {} if keep_digests else None)


def _exit_with_parent(poll_seconds: float = 1.0) -> None:
    """Make this worker exit as soon as the process that started the pool dies.

    A worker waiting for its next chunk does not notice on its own (after `kill -9` of the
    parent, ProcessPoolExecutor's workers were left running). On Linux the kernel is asked
    to kill it with its parent (PR_SET_PDEATHSIG); everywhere a daemon thread watches the
    parent's sentinel (closed when the parent dies) and whether this process was re-parented.
    """
    parent_pid = os.getppid()
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            import signal

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):  # pragma: no cover - no libc
            pass
    import multiprocessing

    parent = multiprocessing.parent_process()
    sentinel = parent.sentinel if parent is not None else None

    def watch() -> None:
        from multiprocessing.connection import wait

        while True:
            if sentinel is not None:
                if wait([sentinel], timeout=poll_seconds):
                    os._exit(1)
            else:  # pragma: no cover - a start method without a parent sentinel
                time.sleep(poll_seconds)
            if os.getppid() != parent_pid:
                os._exit(1)

    if os.getppid() != parent_pid:  # pragma: no cover - it died before we looked
        os._exit(1)
    threading.Thread(target=watch, name="lifetime-lint-parent-watch", daemon=True).start()


_Done = tuple[int, FileResult, str, Optional[bytes]]  # index, result, content key, digest


def _check_chunk(chunk: Sequence[tuple[int, str]]) -> list[_Done]:
    """Each file's result, content key (the parent indexes it under the stat it took) and
    the digest of the bytes it was computed from (None: not kept, or not read)."""
    assert _WORKER is not None
    digests = _WORKER.digests
    done = []
    for index, path in chunk:
        result, key = _WORKER.check_keyed(path, use_index=False)
        digest = digests.pop(os.path.abspath(path), None) if digests is not None else None
        done.append((index, result, key, digest))
    return done


def run_files(
    paths: Sequence[str],
    settings: Settings,
    rules: Sequence[Any],
    mode: FixMode,
    jobs: int = 1,
    cache_dir: str | None = None,
    progress: Progress | None = None,
    digests: dict[str, bytes] | None = None,
) -> list[FileResult]:
    """Check every path with one set of settings; results in the order of `paths`.

    `rules`: every known rule, as classes or `catalog.RuleInfo`s (the settings select);
    `digests`: filled with the digest of the bytes each file read was checked from.
    """
    enabled = settings.enabled_rules(rules)
    cache = Cache(cache_dir, settings, enabled) if cache_dir else None
    checker = Checker(settings, enabled, mode, cache, digests)
    progress = progress or Progress(len(paths), enabled=False)
    results: list[FileResult | None] = [None] * len(paths)

    pending: list[tuple[int, str]] = []
    stats: dict[int, _Stat] = {}
    if cache is not None and jobs > 1:
        # Answer what the cache knows here (the index by stat, then the content key), so
        # a warm run starts no pool; the stat is taken before any process reads the file.
        for index, path in enumerate(paths):
            hit, stat = checker.indexed(path)
            if hit is None and stat is not None:
                data = _read(path)
                if not isinstance(data, FileResult):
                    key = cache.key(path, data)
                    hit = checker.lookup(path, data, key)
                    if hit is not None:
                        checker.read(path, data)
                        checker.remember(path, stat, key, hit)
            if hit is not None:
                results[index] = hit
                progress.advance()
            else:
                pending.append((index, path))
                if stat is not None:
                    stats[index] = stat
    else:
        pending = list(enumerate(paths))

    if jobs > 1 and len(pending) >= PARALLEL_MIN_FILES:
        workers = min(jobs, len(pending) // (PARALLEL_MIN_FILES // 2))
        # Small chunks keep the workers evenly loaded (file sizes vary 1000x); large
        # enough ones keep the pickling overhead negligible.
        size = max(1, min(16, len(pending) // (workers * 8)))
        chunks = [pending[i : i + size] for i in range(0, len(pending), size)]
        initargs = (settings, list(enabled), mode, cache_dir, digests is not None)
        _preload_for_workers()
        for index, result, key, digest in _run_pool(chunks, workers, initargs):
            results[index] = result
            if digests is not None and digest is not None:
                digests[os.path.abspath(result.path)] = digest
            if index in stats:
                checker.remember(result.path, stats[index], key, result)
            progress.advance()
    else:
        for index, path in pending:
            results[index] = checker.check_keyed(path, stats.get(index))[0]
            progress.advance()
    if cache is not None:
        cache.index.save()
    progress.close()
    return [result for result in results if result is not None]


def _preload_for_workers() -> None:
    """Import the engine and the rules, and read LibCST's child orders, once in this
    process before the pool forks: each worker then starts with them instead of importing
    them itself (about 0.5 s of CPU per worker, on a run that parses anything at all).
    Under another start method (spawn, forkserver) the workers import as before."""
    import multiprocessing

    if multiprocessing.get_start_method() != "fork":
        return
    import lifetime_lint.engine  # noqa: F401  (what `Checker.linter` imports in a worker)
    from lifetime_lint.registry import all_rules
    from lifetime_lint.traversal import read_child_fields

    all_rules()
    read_child_fields()
    # What the workers inherit is never garbage: out of the collector's sight, their
    # collections neither walk it nor copy its pages by touching it.
    import gc

    gc.freeze()


_POOL_STARTED = False


def pool_started_without_fork() -> bool:
    """Whether this process ran a pool whose workers did not inherit its streams."""
    if not _POOL_STARTED:
        return False
    import multiprocessing

    return multiprocessing.get_start_method() != "fork"


def _run_pool(chunks: list[list[tuple[int, str]]], workers: int, initargs: tuple) -> list[_Done]:
    """Every chunk's results. A worker that dies (a crash in a native library: LibCST's
    parser has segfaulted on deep expressions) breaks the pool; the chunks it left undone
    are then checked one file per fresh process, so the file that kills its process is
    reported by name and every other file is still checked."""
    # Imported here: a run answered from the cache starts no pool and skips their import.
    from concurrent.futures import Future, ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    global _POOL_STARTED
    _POOL_STARTED = True
    done: list[_Done] = []
    unfinished: list[list[tuple[int, str]]] = []
    with ProcessPoolExecutor(
        max_workers=workers, initializer=_init_worker, initargs=initargs
    ) as pool:
        futures: list[tuple[Future, list[tuple[int, str]]]] = [
            (pool.submit(_check_chunk, chunk), chunk) for chunk in chunks
        ]
        for future, chunk in futures:
            try:
                done.extend(future.result())
            except BrokenProcessPool:
                unfinished.append(chunk)
    for chunk in unfinished:
        for index, path in chunk:
            done.append((index, _check_alone(path, initargs), "", None))
    return done


def _check_alone(path: str, initargs: tuple) -> FileResult:
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    with ProcessPoolExecutor(max_workers=1, initializer=_init_worker, initargs=initargs) as pool:
        try:
            return pool.submit(_check_chunk, [(0, path)]).result()[0][1]
        except BrokenProcessPool:
            return FileResult(
                path,
                [
                    file_error(
                        path,
                        INTERNAL_ERROR,
                        f"Internal error while checking {path}: the process checking it "
                        "crashed (in LibCST's native parser, most likely); the file was not "
                        "checked (nor changed). Please report this.",
                    )
                ],
            )


# -- progress -----------------------------------------------------------------------------


class Progress:
    """A one-line progress bar on stderr, drawn only on a terminal and only for long runs.

    Nothing is drawn during the first `delay` seconds, so a quick run never flickers; the
    line is erased at the end, so it never mixes with the report.
    """

    # Whether any bar was drawn in this process: a run whose stderr depended on timing is
    # not recorded as a run memo (`fastpath`).
    drawn_in_process = False

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
        Progress.drawn_in_process = True

    def close(self) -> None:
        if self._drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._drawn = False
