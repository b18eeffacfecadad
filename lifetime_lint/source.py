"""Reading and writing Python source files without losing a byte.

A file is decoded the way Python itself would (BOM, PEP 263 coding cookie, UTF-8 default)
and written back with the same encoding, BOM, line endings and file mode, atomically: a
crash mid-write leaves either the old file or the new one, never half of each.
"""

from __future__ import annotations

import errno
import io
import os
import re
import stat
import tokenize
from dataclasses import dataclass

_BINARY_SNIFF = 8192
# Never read more than this: a file this large is no source anyone wrote (and LibCST is
# kept to far less, see lifetime_lint.parsing).
MAX_READ_BYTES = 64 << 20
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


class SourceError(Exception):
    """The file cannot be read as Python source; the message says why."""


@dataclass
class SourceFile:
    path: str
    text: str  # decoded, without BOM, line endings untouched
    encoding: str  # codec name to write back with ("utf-8", "latin-1", ...)
    bom: bool
    newline: str  # the file's first line ending, for inserted lines

    @classmethod
    def read(cls, path: str) -> SourceFile:
        return cls.from_bytes(path, read_source_bytes(path))

    @classmethod
    def from_bytes(cls, path: str, data: bytes) -> SourceFile:
        if b"\x00" in data[:_BINARY_SNIFF]:
            raise SourceError("binary file (contains NUL bytes), not Python source")
        try:
            encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        except SyntaxError as error:
            raise SourceError(f"bad encoding declaration: {error}") from None
        bom = encoding == "utf-8-sig"
        codec = "utf-8" if bom else encoding
        payload = data[3:] if bom else data
        try:
            text = payload.decode(codec)
        except UnicodeDecodeError as error:
            raise SourceError(
                f"not valid {codec.upper() if codec == 'utf-8' else codec} "
                f"(byte 0x{payload[error.start]:02x} at offset {error.start + (3 if bom else 0)})"
            ) from None
        except LookupError:
            raise SourceError(f"unknown encoding {encoding!r}") from None
        return cls(path, text, codec, bom, detect_newline(text))

    def encode(self, text: str) -> bytes:
        body = text.encode(self.encoding)
        return (b"\xef\xbb\xbf" + body) if self.bom else body

    def write(self, text: str) -> None:
        """Replace the file's content with `text` in its encoding and BOM (see `write_file`)."""
        write_file(self.path, self.encode(text))


class SourceLines:
    """The lines of files, each read once (for reporters and baselines that quote source).

    A file that can no longer be read has no lines, rather than failing the report.
    """

    def __init__(self) -> None:
        self._files: dict[str, list[str]] = {}

    def get(self, path: str) -> list[str]:
        if path not in self._files:
            try:
                self._files[path] = split_lines(SourceFile.read(path).text)
            except SourceError:
                self._files[path] = []
        return self._files[path]


def detect_newline(text: str) -> str:
    index = text.find("\n")
    if index > 0 and text[index - 1] == "\r":
        return "\r\n"
    if index < 0 and "\r" in text:
        return "\r"
    return "\n"


def split_lines(text: str) -> list[str]:
    """The lines as Python counts them (\\n, \\r\\n, \\r), without their line breaks.

    Not `str.splitlines`, which also breaks at form feeds, U+2028 and other characters that
    are no line break to Python, `patch` or an editor's line numbers.
    """
    lines = _LINE_BREAK.split(text)
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def read_source_bytes(path: str) -> bytes:
    """The bytes of a regular file, or SourceError saying why not.

    Opened without blocking and checked before reading: a FIFO named `x.py` would block the
    run forever and a link to `/dev/zero` fill the memory; both are "not a regular file".
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise SourceError("No such file or directory") from None
    except IsADirectoryError:
        raise SourceError("Is a directory") from None
    except OSError as error:
        raise SourceError(error.strerror or str(error)) from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise SourceError("Is a directory")
        if not stat.S_ISREG(info.st_mode):
            raise SourceError(f"not a regular file ({_file_kind(info.st_mode)}); not checked")
        if info.st_size > MAX_READ_BYTES:
            raise SourceError(f"larger than {MAX_READ_BYTES >> 20} MB; not checked")
        data = handle.read(MAX_READ_BYTES + 1)
        if len(data) > MAX_READ_BYTES:  # it grew while we looked
            raise SourceError(f"larger than {MAX_READ_BYTES >> 20} MB; not checked")
    return data


def _file_kind(mode: int) -> str:
    for test, kind in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return kind
    return "a special file"


def may_write(path: str) -> bool:
    """Whether the invoking user may change this file's content.

    `os.access` answers for everyone but root, who may write anything: a file nobody may
    write (no write bit at all, as `chmod a-w` leaves it) is read-only for root too, as for
    `git` and editors that ask before overwriting it. Being able to rename a new file over
    it (a writable folder) is not permission to change it.
    """
    try:
        info = os.stat(path)
    except OSError:
        return False
    if not os.access(path, os.W_OK):
        return False
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return bool(info.st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    return True


def write_file(path: str, data: bytes) -> None:
    """Replace the content of `path` with `data`, keeping everything else about the file.

    A symbolic link is followed (the link stays, its target changes). The new content goes
    to a temporary file beside it that takes the file's mode, owner, group and extended
    attributes, then is renamed over it: a crash leaves the old file or the new one, never
    half of each. Where that copy cannot be exact (the file has other hard links, which a
    rename would split from it; its owner or an attribute cannot be given to a new file by
    this user; the folder is not writable), the file is rewritten in place instead, so every
    name and all metadata see the new content. Raises PermissionError for a file the user
    may not write (see `may_write`), and OSError for any failure; the file is then unchanged
    (in place: a failure after truncation is reported, as an OSError).
    """
    path = os.path.realpath(path)
    if not may_write(path):
        raise PermissionError(errno.EACCES, "Permission denied (the file is read-only)", path)
    info = os.stat(path)
    if info.st_nlink > 1 or not _replace_keeping_metadata(path, data, info):
        _rewrite_in_place(path, data)


def _replace_keeping_metadata(path: str, data: bytes, info: os.stat_result) -> bool:
    """Atomic replacement; False (nothing changed) where the metadata could not be copied."""
    directory = os.path.dirname(path)
    try:
        fd, temp = _temporary_beside(directory)
    except PermissionError:
        return False  # a read-only folder with a writable file: rewrite it in place
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        created = os.stat(temp)
        try:
            if (created.st_uid, created.st_gid) != (info.st_uid, info.st_gid):
                os.chown(temp, info.st_uid, info.st_gid)
            os.chmod(temp, stat.S_IMODE(info.st_mode))  # after chown, which clears set-id bits
            _copy_extended_attributes(path, temp)
        except PermissionError:
            os.unlink(temp)
            return False
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except FileNotFoundError:
            pass
        raise
    return True


def _copy_extended_attributes(source: str, target: str) -> None:
    if not hasattr(os, "listxattr"):  # pragma: no cover - not Linux
        return
    try:
        names = os.listxattr(source)
    except OSError as error:
        if error.errno in (errno.ENOTSUP, errno.EOPNOTSUPP):
            return  # the file system has none
        raise
    for name in names:
        try:
            os.setxattr(target, name, os.getxattr(source, name))
        except OSError as error:
            raise PermissionError(error.errno, f"cannot copy attribute {name}") from error


def _rewrite_in_place(path: str, data: bytes) -> None:
    with open(path, "r+b") as handle:
        handle.write(data)
        handle.truncate()
        handle.flush()
        os.fsync(handle.fileno())


def write_atomic(path: str, data: bytes) -> None:
    """Write a file the tool owns (a baseline, a cache entry): `write_file` for new files too."""
    if os.path.lexists(path):
        write_file(path, data)
        return
    directory = os.path.dirname(os.path.abspath(path))
    fd, temp = _temporary_beside(directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp, 0o666 & ~_umask())
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except FileNotFoundError:
            pass
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _temporary_beside(directory: str) -> tuple[int, str]:
    """A new temporary file in `directory` (for an atomic replace). `tempfile` is imported
    here: it pulls in `shutil`, `random` and the compression modules, which a run that
    writes nothing (every `check`, the one-file gate) has no use for."""
    import tempfile

    return tempfile.mkstemp(prefix=".lifetime-lint-", suffix=".tmp", dir=directory)
