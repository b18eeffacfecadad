"""The `lifetime-lint` entry point, and its fast path: a repeated `check` replayed.

A plain `check`, or a `--diff` (which writes nothing; not `--fix`), without stdin, an
output file, a diff base, a baseline or a profile, whose inputs are unchanged prints what
the last identical run printed: this module keeps
a *run memo* per invocation (the arguments, the folder, the environment, which streams
are terminals, the interpreter) in the cache folder, holding the output that run wrote
(stdout and stderr chunks, in order), its exit status, and everything its result depended
on, each as `stat` sees it:

- every checked file and named path, every config, project, `.gitignore` and git file the
  run could have consulted (in each folder walked and each folder above), and every
  module of the code that ran (a module edited, or a rule added, is a miss);
- the listing of each folder discovery walked, as the walk saw it (sub-folders, Python
  files and the names above), so a file added, removed or renamed is a miss;
- the time of each folder above the walked ones (an entry added or removed there).

The memo is written by the full run itself, after it reported. A file modified within 2 s
of the run's start is *racily clean* (the rule of git's index and of the stat index,
`cache.StatIndex`): an edit in the same timestamp tick could keep its stat. As git does,
such a file is recorded with the digest of the content the run read (a checked file as it
was linted; git's files and the configs from here up as they were before anything read
them), provided the file still holds that content; its replay re-hashes it. A racily
clean input whose read content is not known (a nested config, a module of the tool) means
no memo: a file edited during the run is never trusted. Nothing here
renders a report: a hit writes the recorded bytes, so its output is the full path's by
construction, and any difference, unreadable or foreign memo is a miss that runs the full
command line (which records a fresh memo). A hit imports neither click nor LibCST nor the
rules; its cost is the interpreter's start and a few hundred `stat` calls.
"""

from __future__ import annotations

import io
import marshal
import os
import sys
import time
import zlib

TYPE_CHECKING = False  # typing is not imported on the fast path (it costs milliseconds)
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from typing import Any

FORMAT = 2
CACHE_FOLDER = ".lifetime_lint_cache"  # cache.DEFAULT_CACHE_DIR (not imported: a hit stays light)
RUNS_FOLDER = "runs"
MAX_MEMOS = 64  # per cache folder; the oldest are dropped
RACY_NS = 2_000_000_000  # cache.RACY_NANOSECONDS
# Names in a folder that a run may read besides Python files: configs, project files,
# ignore files, repository and cache markers.
SPECIAL_NAMES = frozenset(
    {
        ".lifetime-lint.toml",
        "lifetime-lint.toml",
        "pyproject.toml",
        "setup.cfg",
        "setup.py",
        "ruff.toml",
        ".ruff.toml",
        ".isort.cfg",
        ".gitignore",
        ".git",
        "CACHEDIR.TAG",
    }
)
PYTHON_SUFFIXES = (".py", ".pyi")
# Variables no part of a run reads, which shells change between identical commands.
_UNREAD_ENV = frozenset({"_", "OLDPWD", "SHLVL"})
# Words after which argv is not a `check` this module can record.
_OTHER_COMMANDS = frozenset({"rule", "server", "profile", "vendor-runtime"})
_NEVER_RECORDED = frozenset({"-", "-h", "--help", "--version"})

_RECORDER: _Recorder | None = None


def main(prog_name: str | None = None) -> None:
    """The `lifetime-lint` command: a run memo's output if it still holds, else the CLI."""
    global _RECORDER
    started_ns = time.time_ns()
    args = sys.argv[1:]
    program = prog_name or os.path.basename(sys.argv[0])
    try:
        material = _key_material(args, program)
    except OSError:  # the current folder is gone: let the CLI say so
        material = None
    if material is not None and os.name == "posix":
        memo = _find_memo(args, material)
        if memo is not None:
            raise SystemExit(_replay(memo))
        if _may_record(args):
            _RECORDER = _Recorder(material, started_ns)
    from lifetime_lint import generated_code

    if args[:1] != ["profile"]:  # `profile` runs the user's program here: leave it stock
        generated_code.install()  # before LibCST's node classes are defined
        with importing_for_good():
            from lifetime_lint.cli import main as cli_main
    else:
        from lifetime_lint.cli import main as cli_main

    try:
        if args[:1] != ["profile"]:
            on_roomy_stack(cli_main, prog_name=prog_name)
        else:
            cli_main(prog_name=prog_name)
    except SystemExit as exit:
        if _RECORDER is not None:
            _RECORDER.finish(exit.code)
        raise
    finally:
        generated_code.save()
        traversal = sys.modules.get("lifetime_lint.traversal")
        if traversal is not None:  # the run walked a tree: keep the child orders it read
            traversal.save_child_fields()


def program(prog_name: str | None = None) -> None:
    """`main` as the whole of a process (`python -m lifetime_lint`, the `lifetime-lint`
    script), which then ends as soon as the run is done (`_end_process`)."""
    try:
        main(prog_name)
    except SystemExit as exit:
        if not (sys.argv[1:2] and sys.argv[1] in _OTHER_COMMANDS):
            _end_process(exit.code)
        raise


def _end_process(code: Any) -> None:
    """Leave at once with `code`, when what the interpreter's shutdown would still do has
    no effect outside this process.

    After a `check` has reported, written its cache and memo and closed its output file,
    the interpreter's shutdown frees every object one by one (the module tables, LibCST's
    classes, the trees; ~5% of a one-file `--diff-base` gate's CPU) and then exits. What
    it would do besides, and what rules this out here: `atexit` callbacks (registered by
    `logging`, `multiprocessing`, `weakref.finalize`, ...: any one means a normal exit),
    waiting for other threads (any one alive), a process pool's shutdown (its modules
    imported), flushing the standard streams (done here first; a failure is left to the
    normal exit, which reports it as it always does), and an exit status other than an
    int or None (a message to print). Only for the CLI's `check`: never for `profile`,
    which runs the user's program in this process, or the language server.
    """
    if not (code is None or isinstance(code, int)) or sys.flags.inspect:
        return
    if "multiprocessing" in sys.modules or "concurrent.futures" in sys.modules:
        return
    import atexit

    pending = getattr(atexit, "_ncallbacks", None)
    if pending is None or pending():
        return
    threading = sys.modules.get("threading")
    if threading is not None and threading.active_count() != 1:
        return
    try:
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            if stream is not None:
                stream.flush()
    except Exception:
        return
    os._exit(code or 0)


# Slots of value stack the frame of `on_roomy_stack` reserves on CPython 3.11+: 512 KiB,
# so the interpreter gives it a 1 MiB chunk of its frame stack and ~512 KiB stay free
# above it (thousands of frames, past the default recursion limit of 1000).
ROOMY_STACK_SLOTS = 65536
_roomy_thread: int | None = None  # the thread running on a roomy stack (one per process)
_roomy_call: Any = None


def on_roomy_stack(function: Any, /, *args: Any, **kwargs: Any) -> Any:
    """`function(*args, **kwargs)`, run on top of one large frame-stack chunk.

    CPython 3.11+ keeps its Python frames in a per-thread stack of 16 KiB chunks, and
    frees a chunk (`munmap`) as soon as the frame at its base returns. A deep recursion
    whose depth keeps crossing a chunk boundary, as walking a LibCST tree does (the
    traversal, codegen for positions, the rules' recursive facts), then maps and unmaps
    16 KiB at every crossing: 800-2,300 mmap/munmap pairs in one 326-line file's lint,
    ~8 us each (page faults included), depending only on where the boundaries happen to
    fall. Here `function` runs above a frame whose code claims a 512 KiB value stack: the
    interpreter gives that frame a chunk of its own, 1 MiB, and the frames above it fill
    the free half, so no boundary is crossed until the recursion is thousands of frames
    deep (and then the interpreter simply adds chunks, as always). The stack part of the
    large frame is never initialised or touched; only the pages the frames above it use
    are. Nested calls on the same thread (and a forked pool worker, which inherits the
    caller's stack) call `function` directly. Elsewhere (CPython 3.10 and older, which
    would zero the whole frame, and other interpreters) it is a plain call.
    """
    global _roomy_thread, _roomy_call
    import threading

    me = threading.get_ident()
    if _roomy_thread == me or not _has_chunked_frame_stack():
        return function(*args, **kwargs)
    if _roomy_call is None:

        def call(function: Any, args: Any, kwargs: Any) -> Any:
            return function(*args, **kwargs)

        call.__code__ = call.__code__.replace(co_stacksize=ROOMY_STACK_SLOTS)
        _roomy_call = call
    if _roomy_thread is not None:  # another thread holds it: its stack is not this one's
        return _roomy_call(function, args, kwargs)
    _roomy_thread = me
    try:
        return _roomy_call(function, args, kwargs)
    finally:
        _roomy_thread = None


def _has_chunked_frame_stack() -> bool:
    return sys.implementation.name == "cpython" and sys.version_info >= (3, 11)


class importing_for_good:
    """Imports whose objects live as long as the process, kept out of the cyclic collector.

    Importing click, LibCST and the rules allocates about 10^5 objects (modules, classes,
    functions) that are never garbage; with the collector on, the default threshold runs a
    hundred collections over them, full ones included: ~8% of a one-file `--diff-base`
    gate's CPU. Inside this block the collector is paused; at its end every object alive is
    moved to the permanent generation (`gc.freeze`, which also restarts the allocation
    count), so later collections neither walk them nor start because of them. The pool
    workers' own policy is `runner._init_worker`'s. Not for `profile`, which runs the
    user's program in this process (its garbage must stay collectable)."""

    def __enter__(self) -> None:
        import gc

        self._was_enabled = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc_info: object) -> None:
        import gc

        if self._was_enabled:
            gc.freeze()
            gc.enable()


# -- the key and where memos live ------------------------------------------------------------


def _key_material(args: Sequence[str], program: str) -> bytes:
    env = tuple(sorted((k, v) for k, v in os.environ.items() if k not in _UNREAD_ENV))
    ttys = tuple(_isatty(fd) for fd in (0, 1, 2))
    return marshal.dumps(
        (FORMAT, sys.version, sys.executable, __file__, os.getcwd(), program, tuple(args),
         env, ttys)
    )  # fmt: skip


def _isatty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


def memo_name(material: bytes) -> str:
    return f"{zlib.crc32(material):08x}{zlib.adler32(material):08x}-{len(material)}"


def _cache_dir_option(args: Sequence[str]) -> str | None:
    value = None
    for index, arg in enumerate(args):
        if arg == "--cache-dir" and index + 1 < len(args):
            value = args[index + 1]
        elif arg.startswith("--cache-dir="):
            value = arg.split("=", 1)[1]
    return value


def _memo_paths(args: Sequence[str], name: str) -> list[str]:
    """Where a memo of this invocation may be: the `--cache-dir`, or the default cache
    folder beside any folder from here up (beside the config file that governs it)."""
    option = _cache_dir_option(args)
    if option is not None:
        return [os.path.join(os.path.abspath(option), RUNS_FOLDER, name)]
    paths = []
    folder = os.getcwd()
    while True:
        paths.append(os.path.join(folder, CACHE_FOLDER, RUNS_FOLDER, name))
        parent = os.path.dirname(folder)
        if parent == folder:
            return paths
        folder = parent


def _may_record(args: Sequence[str]) -> bool:
    if args and args[0] in _OTHER_COMMANDS:
        return False
    return not any(arg in _NEVER_RECORDED for arg in args)


# -- looking up and replaying -----------------------------------------------------------------


def _find_memo(args: Sequence[str], material: bytes) -> Any:
    name = memo_name(material)
    for path in _memo_paths(args, name):
        try:
            with open(path, "rb") as handle:
                # One read, then `loads`: `marshal.load` on a file reads each object through
                # the file's methods, ~15x slower for a memo of several hundred watches.
                memo = marshal.loads(handle.read())
        except FileNotFoundError:
            continue
        except (OSError, EOFError, ValueError, TypeError):
            return None
        try:
            fmt, recorded, watches, chunks, code = memo
        except (TypeError, ValueError):
            return None
        if fmt != FORMAT or recorded != material or not _holds(watches):
            return None
        return chunks, code
    return None


def _holds(watches: Any) -> bool:
    """Whether every recorded input is as it was (any doubt is a miss)."""
    try:
        for kind, path, value in watches:
            if kind == "f":
                if file_signature(path) != value:
                    return False
            elif kind == "d":
                if folder_listing(path) != value:
                    return False
            elif kind == "m":
                if folder_signature(path) != value:
                    return False
            elif kind == "s":
                if special_listing(path) != value:
                    return False
            elif kind == "c":
                if cache_tag(path) != value:
                    return False
            elif kind == "t":
                if path_kind(path) != value:
                    return False
            elif kind == "h":  # racily clean when recorded: its stat and its content
                signature, digest = value
                if file_signature(path) != signature or file_digest(path) != digest:
                    return False
            else:
                return False
    except (TypeError, ValueError):
        return False
    return True


def _replay(memo: Any) -> int:
    chunks, code = memo
    try:
        for fd, data in chunks:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
    except BrokenPipeError:
        return 1  # what click does when the reader of its output goes away
    return code if isinstance(code, int) else 0


# -- what a run depends on, as stat sees it ---------------------------------------------------


def file_signature(path: str) -> tuple[int, ...] | None:
    """A file's size, times, inode and device (None: missing): any edit, rename or
    replacement changes one of them (the stat index's signature, `cache.stat_signature`)."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino, info.st_dev,
            info.st_mode)  # fmt: skip


def content_digest(data: bytes) -> bytes:
    """A digest of a file's bytes, for a racily-clean input (`_blake2` directly: importing
    hashlib loads OpenSSL, several milliseconds of a replay)."""
    try:
        from _blake2 import blake2b
    except ImportError:  # pragma: no cover - an interpreter built without it
        from hashlib import blake2b
    return blake2b(data, digest_size=20).digest()


def file_digest(path: str) -> bytes | None:
    """`content_digest` of a file's bytes now (None: unreadable or missing)."""
    try:
        with open(path, "rb") as handle:
            return content_digest(handle.read())
    except OSError:
        return None


def file_digests(paths: Iterable[str]) -> dict[str, bytes]:
    """The digest of each of `paths` that is a readable file, keyed by its absolute path."""
    found = {}
    for path in paths:
        if os.path.isfile(path):
            digest = file_digest(path)
            if digest is not None:
                found[os.path.abspath(path)] = digest
    return found


# The first line of a CACHEDIR.TAG (`cache.CACHEDIR_SIGNATURE`; not imported, as above).
CACHEDIR_SIGNATURE = b"Signature: 8a477f597d28d172789f06886806bc55"


def cache_tag(path: str) -> bool | None:
    """Whether a CACHEDIR.TAG marks its folder as a cache (None: missing); what
    `files.is_cache_folder` reads, so its times (the cache's own, fresh) do not count."""
    try:
        with open(path, "rb") as handle:
            return handle.read(len(CACHEDIR_SIGNATURE)) == CACHEDIR_SIGNATURE
    except FileNotFoundError:
        return None
    except OSError:
        return False


def path_kind(path: str) -> str:
    """`d` folder, `f` file, `-` missing (a `.git` folder's own times change with git's work)."""
    if os.path.isdir(path):
        return "d"
    return "f" if os.path.lexists(path) else "-"


def folder_signature(path: str) -> tuple[int, ...] | None:
    """A folder's modification time and inode: an entry added, removed or renamed."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_mtime_ns, info.st_ctime_ns, info.st_ino)


def folder_listing(path: str) -> tuple[tuple[str, str], ...] | None:
    """What file discovery sees in a folder: sub-folders (and links to folders), Python
    files and the special names, classified as `os.walk` does."""
    try:
        entries = list(os.scandir(path))
    except OSError:
        return None
    return listing_of((entry.name, _is_dir(entry), entry.is_symlink()) for entry in entries)


def listing_of(entries: Iterable[tuple[str, bool, bool]]) -> tuple[tuple[str, str], ...]:
    """(name, kind) sorted; kind `d` folder, `l` link to a folder, `f` a file that counts."""
    kept = []
    for name, is_dir, is_link in entries:
        if is_dir:
            kept.append((name, "l" if is_link else "d"))
        elif name.endswith(PYTHON_SUFFIXES) or name in SPECIAL_NAMES or _is_requirements(name):
            kept.append((name, "f"))
    return tuple(sorted(kept))


def special_listing(folder: str) -> tuple[str, ...] | None:
    """The names in a folder above the walked ones that a run may read (configs, project
    and ignore files, a repository marker); sub-folders such as the cache do not count."""
    try:
        names = os.listdir(folder)
    except OSError:
        return None
    return tuple(sorted(n for n in names if n in SPECIAL_NAMES or n.startswith("requirements")))


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def _is_requirements(name: str) -> bool:
    return name.startswith("requirements") and name.endswith((".txt", ".in"))


# -- recording ----------------------------------------------------------------------------


class _Tee(io.RawIOBase):
    """A stream's bytes, written through to it and kept, in order with the other stream."""

    def __init__(self, target: Any, fd: int, chunks: list[tuple[int, bytes]], marker: str) -> None:
        self.target = target
        self.fd = fd
        self.chunks = chunks
        self.marker = marker
        self.pid = os.getpid()

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return self.target.isatty()

    def fileno(self) -> int:
        return self.target.fileno()

    def write(self, data: Any) -> int:
        data = bytes(data)
        self.target.write(data)
        self.target.flush()
        if os.getpid() == self.pid:
            self.chunks.append((self.fd, data))
        elif data:  # a forked worker wrote: the recording process must not keep a memo
            try:
                os.close(os.open(self.marker, os.O_CREAT | os.O_WRONLY, 0o600))
            except OSError:
                pass
        return len(data)


def _teed(stream: Any, fd: int, chunks: list[tuple[int, bytes]], marker: str) -> Any:
    buffer = getattr(stream, "buffer", None)
    if buffer is None:
        return None
    wrapper = io.TextIOWrapper(
        io.BufferedWriter(_Tee(buffer, fd, chunks, marker)),
        encoding=stream.encoding,
        errors=stream.errors,
        line_buffering=stream.line_buffering,
        write_through=True,
    )
    return wrapper


class _Recorder:
    """Keeps what this run writes; `offer` (from `check`) says what it depended on."""

    def __init__(self, material: bytes, started_ns: int) -> None:
        self.material = material
        self.started_ns = started_ns
        self.chunks: list[tuple[int, bytes]] = []
        self.inputs: RunInputs | None = None
        # Created by a forked worker that writes to the inherited streams.
        self.marker = os.path.join(
            os.environ.get("TMPDIR") or "/tmp", f".lifetime-lint-memo-{os.getpid()}-{started_ns}"
        )
        out = _teed(sys.stdout, 1, self.chunks, self.marker)
        err = _teed(sys.stderr, 2, self.chunks, self.marker)
        self.active = out is not None and err is not None
        if self.active:
            sys.stdout, sys.stderr = out, err

    def finish(self, code: Any) -> None:
        if not self.active:
            return
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                return
        inputs, self.inputs = self.inputs, None
        if os.path.lexists(self.marker):
            try:
                os.unlink(self.marker)
            except OSError:
                pass
            return
        if inputs is None or not isinstance(code, int):
            return
        name = memo_name(self.material)
        if os.path.join(inputs.cache_root, RUNS_FOLDER, name) not in _memo_paths(
            sys.argv[1:], name
        ):
            return  # a `cache-dir` setting elsewhere: a memo there would never be looked up
        watches = inputs.watches(self.started_ns)
        if watches is None:
            return
        memo = (FORMAT, self.material, watches, [(fd, data) for fd, data in self.chunks], code)
        inputs.write(name, marshal.dumps(memo))


def recording() -> bool:
    """Whether this process records a run memo (checked by `check` before gathering)."""
    return _RECORDER is not None and _RECORDER.active


def offer(inputs: RunInputs) -> None:
    """`check` reported and may be replayed: what its report depended on."""
    if _RECORDER is not None:
        _RECORDER.inputs = inputs


def folders_up(paths: Iterable[str]) -> list[str]:
    """Each path's folder (itself if a folder) and every folder above, each once."""
    folders: dict[str, None] = {}
    for path in paths:
        folder = os.path.abspath(path)
        if not os.path.isdir(folder):
            folder = os.path.dirname(folder)
        while folder not in folders:
            folders[folder] = None
            parent = os.path.dirname(folder)
            if parent == folder:
                break
            folder = parent
    return list(folders)


class RunInputs:
    """What one `check` read: filled in by the CLI, turned into watches after it reported."""

    def __init__(self, cache_root: str) -> None:
        self.cache_root = cache_root
        self.files: list[str] = []  # checked files and named paths
        self.walked: dict[str, tuple[tuple[str, str], ...]] = {}  # folder -> listing seen
        self.folders: set[str] = set()  # folders whose config/project/ignore files count
        self.extra_files: list[str] = []  # --config, git's files
        self.required: list[str] = []  # files the run found and read (must still exist)
        self.cache_tags: list[str] = []  # CACHEDIR.TAGs of folders skipped as caches
        self.above: dict[str, tuple[str, ...] | None] = {}  # folder -> names, at the start
        # Absolute path -> `content_digest` of the bytes the run read (or, for files read
        # by others, before anything read them): what lets a racily-clean input be recorded.
        self.digests: dict[str, bytes] = {}

    def watches(self, started_ns: int) -> list[tuple[str, str, Any]] | None:
        """Every input's current stat, or None when one changed too recently to trust and
        its content as read is unknown or has changed since."""
        racy = started_ns - RACY_NS
        watches: list[tuple[str, str, Any]] = []
        files = dict.fromkeys(self.files)
        listed = set(self.folders)  # folders above the walked ones: their times count
        for folder in sorted(self.folders):
            for name in _special_names_to_watch(self.walked.get(folder), self.above.get(folder)):
                files[os.path.join(folder, name)] = None
            requirements = os.path.join(folder, "requirements")
            if os.path.isdir(requirements):
                listed.add(requirements)
                for name in _names(requirements):
                    files[os.path.join(requirements, name)] = None
            if folder not in self.walked:
                for name in _names(folder):
                    if _is_requirements(name):
                        files[os.path.join(folder, name)] = None
        files.update(dict.fromkeys(self.extra_files))
        for tag in self.cache_tags:
            files.pop(tag, None)
            watches.append(("c", tag, cache_tag(tag)))
        files.update(dict.fromkeys(_code_files()))
        for path in files:
            if os.path.basename(path) == ".git":  # a repository's marker: its kind counts
                watches.append(("t", path, path_kind(path)))
                continue
            signature = file_signature(path)
            if signature is not None and max(signature[1], signature[2]) >= racy:
                watch = self._racily_clean(path, signature)
                if watch is None:
                    return None
                watches.append(watch)
                continue
            watches.append(("f", path, signature))
        present = {path for kind, path, value in watches
                   if kind == "h" or (kind == "f" and value is not None)}  # fmt: skip
        if any(path not in present for path in self.required):
            return None  # read by the run, gone now
        for folder, seen in self.walked.items():
            for name, kind in seen:
                path = os.path.join(folder, name)
                if kind == "f" and name in SPECIAL_NAMES and name != ".git" and path not in present:
                    return None  # seen by discovery, removed since
            watches.append(("d", folder, seen))
        for folder in sorted(listed - set(self.walked)):
            if folder in self.above:  # listed before anything was read: exact
                watches.append(("s", folder, self.above[folder]))
                listed.discard(folder)
        for folder in sorted(listed - set(self.walked)) + _code_folders():
            signature = folder_signature(folder)
            if signature is not None and max(signature[0], signature[1]) >= racy:
                return None
            watches.append(("m", folder, signature))
        return watches

    def _racily_clean(self, path: str, signature: tuple[int, ...]) -> tuple[str, str, Any] | None:
        """The watch of a file modified within the racy window: its stat and the digest
        of the content the run read, if it still holds exactly that (else None)."""
        read = self.digests.get(path)
        if read is None or file_digest(path) != read or file_signature(path) != signature:
            return None
        return ("h", path, (signature, read))

    def write(self, name: str, data: bytes) -> None:
        from lifetime_lint.cache import write_file_atomic

        folder = os.path.join(self.cache_root, RUNS_FOLDER)
        write_file_atomic(os.path.join(folder, name), data, cache_root=self.cache_root)
        names = _names(folder)
        if len(names) > MAX_MEMOS:
            aged = sorted(
                names, key=lambda n: (file_signature(os.path.join(folder, n)) or (0, 0))[1]
            )
            for old in aged[: len(names) - MAX_MEMOS]:
                try:
                    os.unlink(os.path.join(folder, old))
                except OSError:
                    pass


def _special_names_to_watch(
    walked: tuple[tuple[str, str], ...] | None, above: tuple[str, ...] | None
) -> list[str]:
    """The special names of a folder whose own stat needs a watch: all of them, unless the
    folder has a listing watch that names every special entry (discovery's walk, `d`, or
    the listing taken before the run read anything, `s`). Then only the names present in
    it: one absent then that appears later changes that listing, so the replay misses
    without a `stat` of each absent name (a walked folder typically has none of the 11)."""
    if walked is not None:
        present = {name for name, _ in walked}
    elif above is not None:
        present = set(above)
    else:
        return sorted(SPECIAL_NAMES)
    return sorted(SPECIAL_NAMES & present)


def _names(folder: str) -> list[str]:
    try:
        return os.listdir(folder)
    except OSError:
        return []


def _code_files() -> list[str]:
    """The file of every module this run imported (a hit imports few of them)."""
    files = []
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str):
            files.append(path)
    return sorted(set(files))


def _code_folders() -> list[str]:
    """The folders of lifetime-lint's packages: a module added to one (a new rule) is a miss."""
    import importlib.util

    folders = []
    for package in ("lifetime_lint", "lifetime_lint.rules"):
        spec = importlib.util.find_spec(package)
        for top in (spec.submodule_search_locations or []) if spec else []:
            for folder, subfolders, _ in os.walk(top):
                subfolders[:] = sorted(n for n in subfolders if n != "__pycache__")
                folders.append(folder)
    return folders
