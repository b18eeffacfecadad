"""A minimal LSP client over a subprocess's stdio, for tests and the latency benchmark.

It frames JSON-RPC messages with Content-Length headers, reads the server's messages on a
thread, and lets the caller wait for a response or a notification that matches.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Callable


class LspClient:
    def __init__(self, command: Sequence[str] | None = None, cwd: str | None = None) -> None:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.process = subprocess.Popen(
            list(command or [sys.executable, "-m", "lifetime_lint", "server"]),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
        )
        self._next_id = 0
        self._messages: queue.Queue[dict[str, Any]] = queue.Queue()
        self._seen: list[dict[str, Any]] = []
        self._reader = threading.Thread(target=self._read_loop, daemon=True)
        self._reader.start()

    # -- wire ----------------------------------------------------------------------------
    def _send(self, message: dict[str, Any]) -> None:
        body = json.dumps(message).encode("utf-8")
        assert self.process.stdin is not None
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.process.stdin.flush()

    def _read_loop(self) -> None:
        stream = self.process.stdout
        assert stream is not None
        while True:
            headers: dict[str, str] = {}
            while True:
                line = stream.readline()
                if not line:
                    return
                line = line.strip()
                if not line:
                    break
                name, _, value = line.decode("ascii").partition(":")
                headers[name.strip().lower()] = value.strip()
            length = int(headers.get("content-length", "0"))
            body = stream.read(length)
            self._messages.put(json.loads(body))

    # -- calls ---------------------------------------------------------------------------
    def notify(self, method: str, params: Any) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def request(self, method: str, params: Any, timeout: float = 30.0) -> Any:
        self._next_id += 1
        request_id = self._next_id
        self._send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        message = self.wait_for(lambda m: m.get("id") == request_id and "method" not in m, timeout)
        if "error" in message:
            raise RuntimeError(f"{method} failed: {message['error']}")
        return message.get("result")

    def wait_for(self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 30.0) -> dict:
        """The first message (already received or still to come) that matches; consumes it."""
        for index, message in enumerate(self._seen):
            if predicate(message):
                return self._seen.pop(index)
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(
                    f"no matching message within {timeout} s; stderr:\n{self.stderr_tail()}"
                )
            try:
                message = self._messages.get(timeout=remaining)
            except queue.Empty:
                continue
            if message.get("method") and "id" in message:  # a request from the server
                self._send({"jsonrpc": "2.0", "id": message["id"], "result": None})
                continue
            if predicate(message):
                return message
            self._seen.append(message)

    def diagnostics(
        self, uri: str, timeout: float = 30.0, version: int | None = None
    ) -> list[dict]:
        message = self.wait_for(
            lambda m: (
                m.get("method") == "textDocument/publishDiagnostics"
                and m["params"]["uri"] == uri
                and (version is None or m["params"].get("version") == version)
            ),
            timeout,
        )
        return message["params"]["diagnostics"]

    def drop_pending(self) -> None:
        """Forget messages received so far (stale publishes of earlier versions)."""
        while True:
            try:
                self._seen.append(self._messages.get_nowait())
            except queue.Empty:
                break
        self._seen.clear()

    def stderr_tail(self) -> str:
        if self.process.poll() is None:
            return "(server still running)"
        assert self.process.stderr is not None
        return self.process.stderr.read().decode("utf-8", "replace")[-4000:]

    # -- lifecycle -----------------------------------------------------------------------
    def initialize(self, root: Path, options: Any = None) -> dict:
        result = self.request(
            "initialize",
            {
                "processId": os.getpid(),
                "rootUri": root.as_uri(),
                "capabilities": {"textDocument": {"publishDiagnostics": {"versionSupport": True}}},
                "initializationOptions": options,
            },
        )
        self.notify("initialized", {})
        return result

    def close(self, timeout: float = 20.0) -> int:
        if self.process.poll() is None:
            try:
                self.request("shutdown", None, timeout=timeout)
                self.notify("exit", None)
            except (OSError, TimeoutError, RuntimeError):
                pass
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            return -9


def apply_text_edits(text: str, edits: Sequence[dict]) -> str:
    """Apply LSP TextEdits (UTF-16 positions) to `text`, last first."""

    def offset(position: dict) -> int:
        lines = text.splitlines(keepends=True)
        start = sum(len(line) for line in lines[: position["line"]])
        if position["line"] >= len(lines):
            return len(text)
        line = lines[position["line"]]
        units = 0
        for index, char in enumerate(line):
            if units >= position["character"]:
                return start + index
            units += 2 if ord(char) > 0xFFFF else 1
        return start + len(line)

    spans = sorted(
        ((offset(e["range"]["start"]), offset(e["range"]["end"]), e["newText"]) for e in edits),
        reverse=True,
    )
    for start, end, new in spans:
        text = text[:start] + new + text[end:]
    return text
