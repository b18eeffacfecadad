"""A content-hash cache of lint results, so a second run on an unchanged tree parses nothing.

One entry per checked file, named by a hash of everything that decides the file's
diagnostics: its bytes, its path relative to the project root (per-file-ignores depend on
it), the facts a fix reads from the file's project (whether its pyproject, setup.cfg,
setup.py or requirements files declare lifetime-lint, which makes a runtime-importing fix
safe or unsafe, and its import-sorter settings, which place the imports a fix adds), for
a file that names `cuda` the CUDA fact of its package that LL004/LL005 read from its
sibling files (`project.cuda_package`), the tool's code (version plus a fingerprint of the installed modules, so an editable
install under development never serves stale results), the settings fingerprint and the
enabled rules with their options. Entries live in a folder named by the tool and settings
fingerprint, so a settings change starts a fresh folder instead of growing one.

Lint results do not depend on the fix mode, so one entry serves `check`, `--fix` and
`--diff`. What a fix mode computes from a file with fixable findings (the fixed text, the
diff, the findings left and how many fixes were applied) is a second entry, keyed by the
content, the path as named and the mode (safe or unsafe fixes): a second `--diff` over an
unchanged tree parses nothing, and `--fix` after `--diff` writes the stored text. A `--fix`
run that rewrote a file stores the entry of the new content. Files whose check failed
(unreadable, unparsable) are never cached.

Entries are written to a temporary file and renamed into place, so concurrent runs (two
pre-commit chunks, CI jobs sharing a workspace) can only ever read a whole entry; a corrupt
or unreadable entry is a miss.

Above the entries sits one index file per folder (`StatIndex`): for each file checked, its
`stat` (size, modification and change times, inode) when it was read, a stamp of its
project's files (`project.project_stamp`), its content key, its findings and, when its key
read its package's fact, a stamp of the sibling files and folders that fact read
(`project.cuda_package_stamp`). A warm run answers a file whose stat and stamps are
unchanged from the index alone: it neither
reads nor hashes the file, nor reads its project's files. Anything else (a touched file, an
edit, a file modified within the timestamp granularity of its last reading) goes the
content-key way, and the index learns the new stat.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lifetime_lint import __version__
from lifetime_lint.config import Settings
from lifetime_lint.diagnostics import Applicability, Diagnostic, Edit, Fix, Location

DEFAULT_CACHE_DIR = ".lifetime_lint_cache"
# The first line of a CACHEDIR.TAG (bford.info/cachedir): backup tools, and file discovery
# (`files.is_cache_folder`), pass over a folder holding one.
CACHEDIR_SIGNATURE = b"Signature: 8a477f597d28d172789f06886806bc55"
# Bump when the entry layout changes (3: fix entries keep the added imports; 4: index
# entries keep the stamp of the package fact their file's key read).
_FORMAT = 4


@dataclass
class FixEntry:
    """What a fix mode computed for one file with fixable findings."""

    found: list[Diagnostic]  # the findings before fixing
    diagnostics: list[Diagnostic]  # the findings left after fixing
    fixed_text: str
    diff: bytes | None
    fixes_applied: int
    fixed_by_code: dict[str, int]
    # The imports the fixes added (`--fix`/`--diff` name them in the closing summary).
    added_imports: list[str]


@functools.cache
def code_fingerprint() -> str:
    """The tool's version plus size and mtime of every module of the installed package
    (subpackages included), so editing a rule invalidates the cache."""
    import lifetime_lint
    import lifetime_lint.rules

    digest = hashlib.sha256(f"{__version__}/{_FORMAT}".encode())
    for package in (lifetime_lint, lifetime_lint.rules):
        for top in package.__path__:
            for folder, subfolders, names in os.walk(top):
                subfolders.sort()
                for name in sorted(names):
                    if name.endswith(".py"):
                        stat = os.stat(os.path.join(folder, name))
                        digest.update(
                            f"{folder}/{name}:{stat.st_size}:{stat.st_mtime_ns};".encode()
                        )
    return digest.hexdigest()


class Cache:
    """Reads and writes the entries of one (tool, settings, rules) combination."""

    def __init__(self, directory: str, settings: Settings, rules: Sequence[Any]) -> None:
        """`rules`: the enabled rules (classes, or `catalog.RuleInfo`s: same key)."""
        self.root = os.path.abspath(directory)
        self.settings = settings
        rule_part = json.dumps(sorted([rule.code, settings.options_for(rule)] for rule in rules),
                               sort_keys=True, default=repr)  # fmt: skip
        # Keys other modules add to the config land in `extra`; any of them may change results.
        extra = repr(sorted((k, repr(v)) for k, v in settings.extra.items() if k != "cache-dir"))
        fingerprint = hashlib.sha256(
            "\0".join((code_fingerprint(), settings.fingerprint(), rule_part, extra)).encode()
        ).hexdigest()
        self.folder = os.path.join(self.root, fingerprint[:16])
        self._project_facts: dict[str, bytes] = {}
        # Absolute paths whose key read their package's CUDA fact (`_package_part`).
        self._package_readers: set[str] = set()
        self._config_parts: dict[str, bytes] = {}
        self.index = StatIndex(self.folder, self.root)

    def cached_result(
        self, path: str, info: os.stat_result
    ) -> tuple[list[Diagnostic], dict[str, int]] | None:
        """The findings of `path` from the index, by its stat alone (None: not known)."""
        found = self.index.lookup(os.path.abspath(path), self.settings.root, info)
        if found is None:
            return None
        items, left_out = found
        try:
            return (
                [_diagnostic_from_json(item, path) for item in items],
                {str(k): int(v) for k, v in left_out.items()},
            )
        except Exception:  # an entry of the wrong shape is a miss
            return None

    def remember(
        self,
        path: str,
        info: os.stat_result,
        key: str,
        diagnostics: Sequence[Diagnostic],
        left_out: dict[str, int],
        now_ns: int,
    ) -> None:
        """Index the findings of `path` read after `info` was taken, at `now_ns`."""
        absolute = os.path.abspath(path)
        self.index.record(absolute, self.settings.root, info, key, diagnostics, left_out,
                          now_ns, absolute in self._package_readers)  # fmt: skip

    def key(self, path: str, data: bytes) -> str:
        digest = hashlib.sha256(self.settings.relative(path).encode() + b"\0")
        digest.update(self._project_part(path))
        digest.update(self._package_part(path, data))
        digest.update(self._config_part(path, data))
        digest.update(data)
        return digest.hexdigest()

    def _package_part(self, path: str, data: bytes) -> bytes:
        """The CUDA fact of the file's package (`project.cuda_package`), its project's
        device-layer fact (`project.missing_device_layer`) and backend exclusion lists
        (`project.backend_exclusion`) and the same-folder modules it imports from
        (`project.sibling_imports_digest`) and the names the project imports from a module with
        a `__main__` block (`project.imported_names`), read from other files, for a
        file that names CUDA (only such a file has a `torch.cuda` call the facts can
        excuse): an edit elsewhere that changes a fact is a new key."""
        if b"cuda" not in data:
            return b""
        from lifetime_lint.project import (
            backend_exclusion,
            cuda_package,
            imported_names,
            missing_device_layer,
            optional_attribute_writes,
            sibling_imports_digest,
        )

        self._package_readers.add(os.path.abspath(path))
        exclusion = backend_exclusion(path)  # the names a project keeps off other backends
        kept_off = None if exclusion is None else (sorted(exclusion.names), exclusion.lists)
        # The same-folder modules it imports from (a validator there: `devices`).
        siblings = sibling_imports_digest(path, data.decode("utf-8", "replace"))
        # Who sets the attributes its gates read by name (`hasattr(self, "hook")`).
        text = data.decode("utf-8", "replace")
        gated = (
            optional_attribute_writes(path, text) if "hasattr" in text or "getattr" in text else []
        )
        # What the rest of the project imports from a module with a `__main__` demo (its
        # public functions imported elsewhere are library code, `devices._script_only`).
        imported = sorted(imported_names(path)) if "__main__" in text else None
        facts = (
            cuda_package(path).reason, missing_device_layer(path), kept_off, siblings, gated,
            imported,
        )  # fmt: skip
        return repr(facts).encode() + b"\0"

    def _config_part(self, path: str, data: bytes) -> bytes:
        """The configuration modules beside a file that reads a config (LL002's chunk-size
        default, `project.config_field_default`): a default changed there is a new key.
        Their contents, hashed once per folder and run."""
        if b"config" not in data:
            return b""
        folder = os.path.dirname(os.path.abspath(path))
        part = self._config_parts.get(folder)
        if part is None:
            from lifetime_lint.project import config_files

            digest = hashlib.sha256()
            for config in config_files(folder):
                digest.update(config.encode() + b"\0")
                try:
                    with open(config, "rb") as handle:
                        digest.update(handle.read())
                except OSError:
                    digest.update(b"unreadable")
            part = digest.digest()
            self._config_parts[folder] = part
        return part

    def _project_part(self, path: str) -> bytes:
        """What the file's project says that can change its fixes (read once per folder,
        without LibCST): a dependency declaration added or dropped, or new isort settings,
        is a different key."""
        folder = os.path.dirname(os.path.abspath(path))
        part = self._project_facts.get(folder)
        if part is None:
            from lifetime_lint.project import project_for

            project = project_for(path)
            part = repr((project.declares_lifetime_lint, project.style)).encode() + b"\0"
            self._project_facts[folder] = part
        return part

    def _entry_path(self, key: str) -> str:
        return os.path.join(self.folder, key[:2], key[2:] + ".json")

    def fix_key(self, key: str, path: str, unsafe: bool) -> str:
        """The key of a fix entry: the content key, the path as named (the diff shows it)
        and whether unsafe fixes were applied."""
        mode = "unsafe" if unsafe else "safe"
        return hashlib.sha256(f"{key}\0{path}\0{mode}".encode()).hexdigest()

    def load(self, key: str, path: str) -> list[Diagnostic] | None:
        """The cached diagnostics (with `path` filled in), or None on a miss."""
        loaded = self.load_with_counts(key, path)
        return None if loaded is None else loaded[0]

    def load_with_counts(
        self, key: str, path: str
    ) -> tuple[list[Diagnostic], dict[str, int]] | None:
        """The cached diagnostics and the file's left-out counts (`FileResult.left_out`)."""
        payload = self._read(key)
        try:
            diagnostics = [_diagnostic_from_json(item, path) for item in payload["diagnostics"]]
            left_out = {str(k): int(v) for k, v in payload.get("left_out", {}).items()}
        except Exception:  # any unreadable entry (wrong shape, absurd values) is a miss
            return None
        return diagnostics, left_out

    def store(
        self, key: str, diagnostics: Sequence[Diagnostic], left_out: dict[str, int] | None = None
    ) -> None:
        """Record a file's diagnostics (and the counts of what its rules left out, which
        `--statistics` prints); failures to write are ignored (the cache is optional)."""
        if any(d.is_error for d in diagnostics):
            return
        payload: dict[str, Any] = {"diagnostics": [_diagnostic_to_json(d) for d in diagnostics]}
        if left_out:
            payload["left_out"] = dict(left_out)
        self._write(key, payload)

    def load_fix(self, key: str, path: str) -> FixEntry | None:
        payload = self._read(key)
        try:
            return FixEntry(
                found=[_diagnostic_from_json(item, path) for item in payload["found"]],
                diagnostics=[_diagnostic_from_json(item, path) for item in payload["left"]],
                fixed_text=_string(payload["fixed_text"]),
                # The diff is bytes in the file's own encoding, kept as a latin-1 string.
                diff=None
                if payload["diff"] is None
                else _string(payload["diff"]).encode("latin-1"),
                fixes_applied=int(payload["fixes_applied"]),
                fixed_by_code={str(k): int(v) for k, v in payload["fixed_by_code"].items()},
                added_imports=[_string(item) for item in payload["added_imports"]],
            )
        except Exception:  # any unreadable entry is a miss
            return None

    def store_fix(self, key: str, entry: FixEntry) -> None:
        if any(d.is_error for d in entry.diagnostics):
            return
        self._write(key, {
            "found": [_diagnostic_to_json(d) for d in entry.found],
            "left": [_diagnostic_to_json(d) for d in entry.diagnostics],
            "fixed_text": entry.fixed_text,
            "diff": None if entry.diff is None else entry.diff.decode("latin-1"),
            "fixes_applied": entry.fixes_applied,
            "fixed_by_code": entry.fixed_by_code,
            "added_imports": entry.added_imports,
        })  # fmt: skip

    def _read(self, key: str) -> Any:
        try:
            with open(self._entry_path(key), "rb") as handle:
                return json.load(handle)
        except (OSError, ValueError, RecursionError):  # RecursionError: absurdly nested JSON
            return None

    def _write(self, key: str, payload: dict[str, Any]) -> None:
        try:
            data = json.dumps(payload, separators=(",", ":")).encode()
        except (TypeError, ValueError):
            return
        write_file_atomic(self._entry_path(key), data, cache_root=self.root)


# A file whose modification or change time is this close to the moment it was read may
# change again within the file system's timestamp granularity (FAT: 2 s; ext4: a clock
# tick) with the same size and times: its index entry is not trusted (the next run hashes).
RACY_NANOSECONDS = 2_000_000_000
_INDEX_NAME = "index.json"


def stat_signature(info: os.stat_result) -> list[int]:
    """What identifies a file's content without reading it (git's index uses the same):
    an edit changes the size or the modification time, a restored modification time still
    changes the change time, a replace-by-rename changes the inode."""
    return [info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino, info.st_dev]


class StatIndex:
    """One file mapping each checked path to (stat signature, project stamp, settings root,
    content key, findings, left-out counts, package stamp): a warm run stats files instead
    of reading and hashing them. The package stamp (`project.cuda_package_stamp`, "" for a
    file whose key did not read its package's fact) covers the sibling files that fact read.

    Written whole, by rename, at the end of a run that learnt something; before writing,
    the file on disk is read again and this run's entries are laid over it, so concurrent
    runs over different files keep each other's entries (two runs over the same file: the
    last one's entry stands, and both are right). An unreadable, partial or corrupt index,
    or an entry of the wrong shape, is a miss, never an error.
    """

    def __init__(self, folder: str, cache_root: str) -> None:
        self.path = os.path.join(folder, _INDEX_NAME)
        self.cache_root = cache_root
        self._entries: dict[str, Any] | None = None
        self._learnt: dict[str, list[Any]] = {}
        self._stamps: dict[str, str | None] = {}  # folder -> project stamp, this run
        self._folder_stamps: dict[str, str | None] = {}  # memo of `project_stamp`
        self._package_stamps: dict[str, str | None] = {}  # folder -> package stamp, this run
        self._package_parts: dict[str, str | None] = {}  # memo of `cuda_package_stamp`

    def _load(self) -> dict[str, Any]:
        if self._entries is None:
            self._entries = _read_index(self.path)
        return self._entries

    def project_stamp(self, path: str) -> str | None:
        folder = os.path.dirname(path)
        if folder not in self._stamps:
            from lifetime_lint.project import project_stamp

            self._stamps[folder] = project_stamp(folder, self._folder_stamps)
        return self._stamps[folder]

    def package_stamp(self, path: str) -> str | None:
        folder = os.path.dirname(path)
        if folder not in self._package_stamps:
            from lifetime_lint.project import cuda_package_stamp

            stamp = cuda_package_stamp(folder, memo=self._package_parts)
            self._package_stamps[folder] = None if stamp is None else _short(stamp)
        return self._package_stamps[folder]

    def _package_stamp_as_read(self, path: str) -> str | None:
        """The package stamp taken when the fact the file's key holds was read (not now:
        a sibling edited since then must not be stamped as what the fact saw)."""
        from lifetime_lint.project import cuda_package_read_stamp

        stamp = cuda_package_read_stamp(path)
        return None if stamp is None else _short(stamp)

    def lookup(
        self, path: str, root: str, info: os.stat_result
    ) -> tuple[list[Any], dict[str, int]] | None:
        """The stored findings (as JSON items) and left-out counts of the file at the
        absolute `path`, if its stat and project are as they were when it was indexed and
        its settings have the same root (paths relative to it decide per-file-ignores)."""
        entry = self._load().get(path)
        if not isinstance(entry, list) or len(entry) != 7:
            return None
        signature, stamp, indexed_root, _key, items, left_out, package = entry
        if signature != stat_signature(info) or indexed_root != root:
            return None
        current = self.project_stamp(path)
        if current is None or stamp != _short(current):
            return None
        if package and package != self.package_stamp(path):
            return None
        if not isinstance(items, list) or not isinstance(left_out, dict):
            return None
        return items, left_out

    def record(
        self,
        path: str,
        root: str,
        info: os.stat_result,
        key: str,
        diagnostics: Sequence[Diagnostic],
        left_out: dict[str, int],
        now_ns: int,
        reads_package: bool = False,
    ) -> None:
        """Remember a file's findings under the stat taken before it was read (`info`);
        `now_ns`: when it was read; `reads_package`: its key read its package's CUDA fact.
        Racily clean files and unstable projects or packages are skipped."""
        if now_ns - max(info.st_mtime_ns, info.st_ctime_ns) < RACY_NANOSECONDS:
            self._forget(path)
            return
        stamp = self.project_stamp(path)
        if stamp is None or any(d.is_error for d in diagnostics):
            self._forget(path)
            return
        package = self._package_stamp_as_read(path) if reads_package else ""
        if package is None:
            self._forget(path)
            return
        entry = [stat_signature(info), _short(stamp), root, key,
                 [_diagnostic_to_json(d) for d in diagnostics], dict(left_out), package]  # fmt: skip
        if self._load().get(path) != entry:
            self._learnt[path] = entry

    def _forget(self, path: str) -> None:
        if path in self._load():
            self._learnt[path] = []  # an empty entry: dropped when the index is saved

    def save(self) -> None:
        """Write what this run learnt, over the index as it is on disk now."""
        if not self._learnt:
            return
        merged = _read_index(self.path)
        for path, entry in self._learnt.items():
            if entry:
                merged[path] = entry
            else:
                merged.pop(path, None)
        merged = {path: entry for path, entry in merged.items() if os.path.exists(path)}
        try:
            data = json.dumps({"format": _FORMAT, "entries": merged}, separators=(",", ":"))
        except (TypeError, ValueError):
            return
        write_file_atomic(self.path, data.encode(), cache_root=self.cache_root)
        self._entries = merged
        self._learnt = {}


def _read_index(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as handle:
            payload = json.load(handle)
    except (OSError, ValueError, RecursionError):
        return {}
    if not isinstance(payload, dict) or payload.get("format") != _FORMAT:
        return {}
    entries = payload.get("entries")
    return entries if isinstance(entries, dict) else {}


def _short(stamp: str) -> str:
    return hashlib.sha256(stamp.encode()).hexdigest()[:24]


def _string(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError("not a string")
    return value


def prepare_cache_root(root: str) -> None:
    """Create the cache folder, marked so that git and backup tools leave it alone."""
    os.makedirs(root, exist_ok=True)
    for name, text in (
        (".gitignore", "# Created by lifetime-lint.\n*\n"),
        ("CACHEDIR.TAG", CACHEDIR_SIGNATURE.decode() + "\n"
                         "# This is a cache directory created by lifetime-lint.\n"),
    ):  # fmt: skip
        marker = os.path.join(root, name)
        if not os.path.exists(marker):
            try:
                with open(marker, "x") as handle:
                    handle.write(text)
            except FileExistsError:
                pass


_PREPARED: set[str] = set()


def write_file_atomic(target: str, data: bytes, cache_root: str | None = None) -> None:
    """Write a cache file by rename, so a concurrent reader sees all of it or nothing;
    failures are ignored (the cache is optional). `cache_root` defaults to the parent."""
    root = cache_root or os.path.dirname(target)
    try:
        if root not in _PREPARED:
            prepare_cache_root(root)
            _PREPARED.add(root)
        folder = os.path.dirname(target)
        os.makedirs(folder, exist_ok=True)
        import tempfile  # only when writing: a warm run reads and skips the import

        fd, temp = tempfile.mkstemp(prefix=".tmp-", dir=folder)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(temp, target)
        except BaseException:
            _unlink(temp)
            raise
    except OSError:
        pass


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


# -- (de)serialising diagnostics --------------------------------------------------------


def _location(value: Location) -> list[int]:
    return [value.row, value.column]


def _diagnostic_to_json(d: Diagnostic) -> dict[str, Any]:
    item: dict[str, Any] = {
        "code": d.code,
        "name": d.name,
        "message": d.message,
        "start": _location(d.start),
        "end": _location(d.end),
        "noqa_row": d.noqa_row,
        "span": list(d.span),
    }
    if d.fix is not None:
        item["fix"] = {
            "message": d.fix.message,
            "applicability": d.fix.applicability.value,
            "edits": [[e.start, e.end, e.content] for e in d.fix.edits],
            "orphans": list(d.fix.orphan_import_candidates),
        }
    if d.significance is not None:
        item["significance"] = d.significance
    locations = d.extra.get("edit_locations")
    if locations is not None:
        item["edit_locations"] = [
            [content, _location(start), _location(end)] for content, start, end in locations
        ]
    return item


def _diagnostic_from_json(item: dict[str, Any], path: str) -> Diagnostic:
    fix = None
    if item.get("fix") is not None:
        raw = item["fix"]
        fix = Fix(
            message=raw["message"],
            edits=tuple(Edit(start, end, content) for start, end, content in raw["edits"]),
            applicability=Applicability(raw["applicability"]),
            orphan_import_candidates=tuple(raw["orphans"]),
        )
    diagnostic = Diagnostic(
        code=item["code"],
        name=item["name"],
        message=item["message"],
        path=path,
        start=Location(*item["start"]),
        end=Location(*item["end"]),
        fix=fix,
        noqa_row=item["noqa_row"],
        span=(item["span"][0], item["span"][1]),
        significance=item.get("significance"),
    )
    if "edit_locations" in item:
        diagnostic.extra["edit_locations"] = [
            (content, Location(*start), Location(*end))
            for content, start, end in item["edit_locations"]
        ]
    return diagnostic
