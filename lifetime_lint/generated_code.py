"""Byte code of the methods `dataclasses` generates, kept across processes.

Importing LibCST defines its ~250 node classes as dataclasses, and `dataclasses` writes
each class's `__init__`, `__repr__`, `__eq__`, ... as source text that it compiles with
`exec`: about 600 compilations, half of LibCST's import (kept, the import took 0.17 s
instead of 0.31 s; benchmarks/RESULTS.md, "Gate speed, session 6"), paid by every process
that parses. The text depends only on the class, so the code it compiles to can be kept,
as Python keeps a module's byte code in `__pycache__`.

`install()` gives the `dataclasses` module an `exec` of its own: for a source string it
runs the code compiled earlier from that same string (looked up by the string's digest,
compiled exactly as the built-in `exec` compiles it: no inherited `__future__` flags,
file name `<string>`), and compiles and remembers any string it has not seen. Nothing
else changes: the same globals and namespace are used, so the functions, their defaults
and annotations are those of an uncached run. `save()` writes what was compiled, once,
beside this module's byte code (honouring `sys.pycache_prefix` and
`PYTHONDONTWRITEBYTECODE`), atomically; a missing, foreign (another interpreter's magic
number) or unreadable file is only a slower start.
"""

from __future__ import annotations

import builtins
import marshal
import os
import sys

TYPE_CHECKING = False  # typing is not imported on the start-up path
if TYPE_CHECKING:
    from types import CodeType
    from typing import Any

FORMAT = 2
# Entries kept from an earlier file when saving (a LibCST upgrade adds new ones); past
# this, only what this process used is written.
MAX_ENTRIES = 4096

# digest of a source string -> its code, marshalled (unmarshalled on use: loading every
# entry up front would cost a quarter of what the cache saves)
_stored: dict[bytes, bytes] = {}
_compiled: dict[bytes, CodeType] = {}
_used: set[bytes] = set()
_added = False
_loaded = False
_path: str | None = None
_dataclasses_globals: dict[str, Any] | None = None


def _cache_path() -> str:
    from importlib.util import MAGIC_NUMBER, cache_from_source

    folder = os.path.dirname(cache_from_source(__file__))
    magic = MAGIC_NUMBER.hex()
    return os.path.join(folder, f"dataclass-code.{sys.implementation.cache_tag}-{magic}.marshal")


def _load(path: str) -> dict[bytes, bytes]:
    try:
        with open(path, "rb") as handle:
            fmt, entries = marshal.loads(handle.read())  # one read: load(file) reads piecewise
    except (OSError, EOFError, ValueError, TypeError):
        return {}
    return entries if fmt == FORMAT and isinstance(entries, dict) else {}


def _digest(source: str) -> bytes:
    from hashlib import blake2b

    return blake2b(source.encode("utf-8", "surrogatepass"), digest_size=20).digest()


def _exec(source: Any, globals: Any = None, locals: Any = None, /) -> None:
    """`exec` for `dataclasses`: byte code of a source string compiled at most once."""
    global _added, _loaded
    if not _loaded:  # read on first use: a run that defines no dataclass never reads it
        _loaded = True
        if _path is not None:
            _stored.update(_load(_path))
    if globals is None:  # the built-in would use its caller's (dataclasses') globals
        globals = _dataclasses_globals
    if isinstance(source, str):
        key = _digest(source)
        _used.add(key)
        code = _compiled.get(key)
        if code is None and key in _stored:
            code = _compiled[key] = marshal.loads(_stored[key])
        if code is None:
            # What the built-in does with a string from a module without `__future__`
            # imports (`install` checks that dataclasses has none): no inherited flags.
            code = _compiled[key] = compile(source, "<string>", "exec", dont_inherit=True)
            _added = True
        source = code
    builtins.exec(source, globals, locals)


def _has_future_imports(namespace: dict[str, Any]) -> bool:
    import __future__

    features = [getattr(__future__, name) for name in __future__.all_feature_names]
    return any(value is feature for value in namespace.values() for feature in features)


def install() -> None:
    """Use (and add to) the kept byte code for every dataclass defined from now on."""
    global _path, _dataclasses_globals
    if _path is not None:
        return
    import dataclasses

    if "exec" in vars(dataclasses):  # someone else's `exec` there: leave it alone
        return
    if _has_future_imports(vars(dataclasses)):  # its strings compile with other flags
        return
    try:
        _path = _cache_path()
    except (ImportError, NotImplementedError, ValueError):
        return
    _dataclasses_globals = vars(dataclasses)
    dataclasses.exec = _exec  # type: ignore[attr-defined]


def save() -> None:
    """Write the byte code compiled in this process, if any was new (atomically)."""
    global _added
    if _path is None or not _added or sys.dont_write_bytecode:
        return
    _added = False
    entries = dict(_stored)
    entries.update((key, marshal.dumps(code)) for key, code in _compiled.items())
    if len(entries) > MAX_ENTRIES:
        entries = {key: code for key, code in entries.items() if key in _used}
    temporary = f"{_path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(_path), exist_ok=True)
        with open(temporary, "wb") as handle:
            marshal.dump((FORMAT, entries), handle)
        os.replace(temporary, _path)
    except OSError:
        try:
            os.unlink(temporary)
        except OSError:
            pass
