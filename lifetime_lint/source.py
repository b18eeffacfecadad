"""Reading and writing Python source files without losing a byte.

A file is decoded the way Python itself would (BOM, PEP 263 coding cookie, UTF-8 default)
and written back with the same encoding, BOM, line endings and file mode, atomically: a
crash mid-write leaves either the old file or the new one, never half of each.
"""

from __future__ import annotations

import io
import os
import stat
import tempfile
import tokenize
from dataclasses import dataclass

_BINARY_SNIFF = 8192


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
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except FileNotFoundError:
            raise SourceError("No such file or directory") from None
        except IsADirectoryError:
            raise SourceError("Is a directory") from None
        except OSError as error:
            raise SourceError(error.strerror or str(error)) from None
        return cls.from_bytes(path, data)

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
        """Atomically replace the file with `text`, keeping its encoding, BOM and mode."""
        write_atomic(self.path, self.encode(text))


class SourceLines:
    """The lines of files, each read once (for reporters and baselines that quote source).

    A file that can no longer be read has no lines, rather than failing the report.
    """

    def __init__(self) -> None:
        self._files: dict[str, list[str]] = {}

    def get(self, path: str) -> list[str]:
        if path not in self._files:
            try:
                self._files[path] = SourceFile.read(path).text.splitlines()
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


def write_atomic(path: str, data: bytes) -> None:
    """Write `data` to a temporary file beside `path`, then rename it over `path`.

    A symbolic link is followed, so the link survives and its target is updated.
    """
    path = os.path.realpath(path)
    directory = os.path.dirname(os.path.abspath(path))
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        mode = None
    fd, temp = tempfile.mkstemp(prefix=".lifetime-lint-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except FileNotFoundError:
            pass
        raise
