"""`lifetime-lint server`: the Language Server Protocol over stdio.

Editors see findings as people type, from the unsaved buffer, with the settings that apply to
that file (its nearest configuration, per-file-ignores, scope), and get each finding's fix as a
quick fix. pygls is an optional dependency (`pip install 'lifetime-lint[lsp]'`): the linter's
base install stays libcst + click, and this module imports pygls only when the server starts.

Design:
- Linting runs in a worker thread, debounced per document: a burst of `didChange`s lints once,
  and a result is published only if the document has not changed since (stale results would
  flicker).
- Settings are loaded per configuration file and reloaded when that file's modification time
  changes, or when the client sends `workspace/didChangeConfiguration` or watched-file changes:
  no restart is needed after editing `pyproject.toml`.
- A quick fix's edit is computed by the same engine code that `--fix` runs, and sent as one
  minimal replacement of the changed region, so applying it gives exactly what `--fix` writes.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lifetime_lint import __version__
from lifetime_lint.config import ConfigError, Settings, find_config, load_settings
from lifetime_lint.diagnostics import Diagnostic
from lifetime_lint.engine import FixMode, Linter
from lifetime_lint.noqa import add_noqa_to_line
from lifetime_lint.project import forget_changed_projects
from lifetime_lint.registry import all_rules
from lifetime_lint.reporters import rule_url
from lifetime_lint.source import SourceFile, detect_newline

if TYPE_CHECKING:
    from lifetime_lint.incremental import DocumentParser

logger = logging.getLogger("lifetime_lint.server")

SOURCE = "lifetime-lint"
DEFAULT_DEBOUNCE_SECONDS = 0.1


class ServerUnavailable(Exception):
    """pygls is not installed; the message says how to install it."""


@dataclass
class WorkspaceOptions:
    """What the client may set (initializationOptions or didChangeConfiguration).

    `{"lifetime-lint": {"config": "path/to/pyproject.toml", "unsafeFixes": false,
    "debounce": 0.1, "isolated": false}}` (the outer key is optional).
    """

    config: str | None = None
    isolated: bool = False
    unsafe_fixes: bool = False
    debounce: float = DEFAULT_DEBOUNCE_SECONDS

    @classmethod
    def from_client(cls, raw: Any) -> WorkspaceOptions:
        if isinstance(raw, dict) and isinstance(raw.get("lifetime-lint"), dict):
            raw = raw["lifetime-lint"]
        if not isinstance(raw, dict):
            return cls()
        options = cls()
        if isinstance(raw.get("config"), str) and raw["config"]:
            options.config = raw["config"]
        if isinstance(raw.get("isolated"), bool):
            options.isolated = raw["isolated"]
        if isinstance(raw.get("unsafeFixes"), bool):
            options.unsafe_fixes = raw["unsafeFixes"]
        debounce = raw.get("debounce")
        if isinstance(debounce, (int, float)) and not isinstance(debounce, bool) and debounce >= 0:
            options.debounce = float(debounce)
        return options


class SettingsCache:
    """Settings per configuration file, reloaded when the file changes on disk."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_config: dict[str | None, tuple[float | None, Settings | ConfigError]] = {}
        self.options = WorkspaceOptions()

    def clear(self) -> None:
        with self._lock:
            self._by_config.clear()

    def for_path(self, path: str) -> Settings:
        """The settings that apply to `path`; raises ConfigError for a broken config."""
        if self.options.isolated:
            return Settings()
        config = self.options.config or find_config(os.path.dirname(os.path.abspath(path)))
        mtime = _mtime(config)
        with self._lock:
            cached = self._by_config.get(config)
            if cached is None or cached[0] != mtime:
                try:
                    loaded: Settings | ConfigError = (
                        load_settings(config, all_rules()) if config else Settings()
                    )
                except ConfigError as error:
                    loaded = error
                cached = (mtime, loaded)
                self._by_config[config] = cached
        if isinstance(cached[1], ConfigError):
            raise cached[1]
        return cached[1]


def _mtime(path: str | None) -> float | None:
    if path is None:
        return None
    try:
        return os.stat(path).st_mtime_ns / 1e9
    except OSError:
        return None


@dataclass
class DocumentState:
    """The last lint of one document: which text it saw and what it found."""

    version: int | None = None
    text: str = ""
    diagnostics: list[Diagnostic] = field(default_factory=list)
    pending: asyncio.Task | None = None


class LintService:
    """Everything the server does that does not depend on pygls (tested directly too)."""

    def __init__(self) -> None:
        self.settings = SettingsCache()
        self._linters: dict[int, tuple[Settings, Linter]] = {}
        # One incremental parser per open document: a change re-parses only the top-level
        # statements around the edit (the tree is the one a full parse gives).
        self._parsers: dict[str, DocumentParser] = {}

    def parser_for(self, path: str) -> DocumentParser:
        parser = self._parsers.get(path)
        if parser is None:
            from lifetime_lint.incremental import DocumentParser

            parser = self._parsers[path] = DocumentParser()
        return parser

    def forget(self, path: str) -> None:
        """The document was closed: drop what its parser kept."""
        self._parsers.pop(path, None)

    def _linter(self, settings: Settings) -> Linter:
        key = id(settings)
        cached = self._linters.get(key)
        if cached is None or cached[0] is not settings:
            cached = (settings, Linter(settings))
            self._linters[key] = cached
        return cached[1]

    def lint(self, path: str, text: str) -> list[Diagnostic]:
        """Diagnostics for an unsaved buffer, with the settings that apply to `path`."""
        forget_changed_projects()  # an edited pyproject.toml may change what a fix does
        try:
            settings = self.settings.for_path(path)
        except ConfigError as config_error:
            return [_config_error(path, str(config_error))]
        if settings.is_excluded(os.path.abspath(path)):
            return []
        linter = self._linter(settings)
        diagnostics, error = linter.lint_text(
            path, text, detect_newline(text), parser=self.parser_for(path)
        )
        return [error] if error is not None else diagnostics

    def fixed_text(
        self, path: str, text: str, unsafe: bool, only: Diagnostic | None = None
    ) -> str | None:
        """What `--fix` (or one finding's fix, with `only`) makes of the buffer; None: nothing."""
        forget_changed_projects()
        try:
            settings = self.settings.for_path(path)
        except ConfigError:
            return None
        linter = self._linter(settings)
        source = SourceFile(path, text, "utf-8", False, detect_newline(text))
        mode = FixMode(diff_only=True, unsafe=unsafe)
        result = linter.fix_source(source, mode, only=only)
        return result.fixed_text


def _config_error(path: str, message: str) -> Diagnostic:
    from lifetime_lint.file_errors import IO_ERROR, file_error

    return file_error(path, IO_ERROR, f"Configuration error: {message}")


def minimal_replacement(before: str, after: str) -> tuple[int, int, str]:
    """The smallest `before[start:end] -> replacement` that turns `before` into `after`."""
    limit = min(len(before), len(after))
    start = 0
    while start < limit and before[start] == after[start]:
        start += 1
    end_before, end_after = len(before), len(after)
    while (
        end_before > start and end_after > start and before[end_before - 1] == after[end_after - 1]
    ):
        end_before -= 1
        end_after -= 1
    return start, end_before, after[start:end_after]


def create_server() -> Any:
    """Build the pygls server; raises ServerUnavailable when pygls is not installed."""
    try:
        from lsprotocol import types
        from pygls.lsp.server import LanguageServer
    except ImportError:  # pragma: no cover - exercised through the CLI's message
        raise ServerUnavailable(
            "`lifetime-lint server` needs pygls: pip install 'lifetime-lint[lsp]'"
        ) from None

    service = LintService()
    documents: dict[str, DocumentState] = {}
    server = LanguageServer(SOURCE, __version__)

    def path_of(uri: str) -> str:
        document = server.workspace.get_text_document(uri)
        return document.path or uri

    def lines_of(text: str) -> list[str]:
        return text.splitlines(keepends=True) or [""]

    def to_position(lines: Sequence[str], row: int, column: int) -> Any:
        # Diagnostics carry 1-based rows and 1-based character columns.
        codec = server.workspace.position_codec
        line = max(row - 1, 0)
        if line >= len(lines):
            return types.Position(line=len(lines), character=0)
        return codec.position_to_client_units(
            lines, types.Position(line=line, character=max(column - 1, 0))
        )

    def offset_position(text: str, lines: Sequence[str], offset: int) -> Any:
        line = text.count("\n", 0, offset)
        line_start = text.rfind("\n", 0, offset) + 1
        return to_position(lines, line + 1, offset - line_start + 1)

    def to_lsp(diagnostic: Diagnostic, lines: Sequence[str]) -> Any:
        severity = (
            types.DiagnosticSeverity.Error
            if diagnostic.is_error
            else types.DiagnosticSeverity.Warning
        )
        href = None
        if not diagnostic.is_error:
            href = types.CodeDescription(href=rule_url(diagnostic.code, diagnostic.name))
        return types.Diagnostic(
            range=types.Range(
                start=to_position(lines, diagnostic.start.row, diagnostic.start.column),
                end=to_position(lines, diagnostic.end.row, diagnostic.end.column),
            ),
            message=diagnostic.message,
            severity=severity,
            code=diagnostic.code,
            code_description=href,
            source=SOURCE,
            data={"name": diagnostic.name, "fixable": diagnostic.fix is not None},
        )

    def publish(uri: str, state: DocumentState) -> None:
        lines = lines_of(state.text)
        server.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(
                uri=uri,
                version=state.version,
                diagnostics=[to_lsp(d, lines) for d in state.diagnostics],
            )
        )

    async def lint_now(uri: str, delay: float) -> None:
        if delay:
            await asyncio.sleep(delay)
        document = server.workspace.get_text_document(uri)
        version, text = document.version, document.source
        path = path_of(uri)
        loop = asyncio.get_running_loop()
        try:
            diagnostics = await loop.run_in_executor(None, service.lint, path, text)
        except Exception as error:  # a bug in a rule must not take the editor's server down
            logger.exception("lint of %s failed", path)
            diagnostics = [_config_error(path, f"internal error while linting: {error}")]
            diagnostics[0].code, diagnostics[0].name = "LL000", "internal-error"
            diagnostics[0].message = f"Internal error while linting {path}: {error}"
        current = server.workspace.get_text_document(uri)
        if current.version != version or current.source != text:
            return  # superseded by a newer change: its own lint will publish
        state = documents.setdefault(uri, DocumentState())
        state.version, state.text, state.diagnostics = version, text, diagnostics
        publish(uri, state)

    def schedule(uri: str, delay: float) -> None:
        state = documents.setdefault(uri, DocumentState())
        if state.pending is not None and not state.pending.done():
            state.pending.cancel()
        state.pending = asyncio.ensure_future(lint_now(uri, delay))

    def relint_all() -> None:
        for uri in list(documents):
            schedule(uri, 0.0)

    @server.feature(types.INITIALIZE)
    def initialize(params: types.InitializeParams) -> None:
        service.settings.options = WorkspaceOptions.from_client(params.initialization_options)

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(params: types.DidOpenTextDocumentParams) -> None:
        schedule(params.text_document.uri, 0.0)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(params: types.DidChangeTextDocumentParams) -> None:
        schedule(params.text_document.uri, service.settings.options.debounce)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(params: types.DidSaveTextDocumentParams) -> None:
        schedule(params.text_document.uri, 0.0)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(params: types.DidCloseTextDocumentParams) -> None:
        state = documents.pop(params.text_document.uri, None)
        if state is not None and state.pending is not None:
            state.pending.cancel()
        service.forget(path_of(params.text_document.uri))
        server.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[])
        )

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    def did_change_configuration(params: types.DidChangeConfigurationParams) -> None:
        if params.settings is not None:
            service.settings.options = WorkspaceOptions.from_client(params.settings)
        service.settings.clear()
        relint_all()

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def did_change_watched_files(params: types.DidChangeWatchedFilesParams) -> None:
        service.settings.clear()
        relint_all()

    def text_edit(uri: str, before: str, after: str) -> Any:
        start, end, replacement = minimal_replacement(before, after)
        lines = lines_of(before)
        edit = types.TextEdit(
            range=types.Range(
                start=offset_position(before, lines, start),
                end=offset_position(before, lines, end),
            ),
            new_text=replacement,
        )
        return types.WorkspaceEdit(changes={uri: [edit]})

    def findings_in(uri: str, wanted: types.Range | None) -> tuple[DocumentState, list[Diagnostic]]:
        document = server.workspace.get_text_document(uri)
        state = documents.get(uri)
        if state is None or state.text != document.source:
            state = documents.setdefault(uri, DocumentState())
            state.text = document.source
            state.version = document.version
            state.diagnostics = service.lint(path_of(uri), document.source)
        if wanted is None:
            return state, list(state.diagnostics)
        first, last = wanted.start.line + 1, wanted.end.line + 1
        return state, [d for d in state.diagnostics if d.start.row <= last and d.end.row >= first]

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(
            code_action_kinds=[
                types.CodeActionKind.QuickFix,
                types.CodeActionKind.SourceFixAll,
            ],
            resolve_provider=False,
        ),
    )
    def code_action(params: types.CodeActionParams) -> list[types.CodeAction]:
        uri = params.text_document.uri
        state, findings = findings_in(uri, params.range)
        text, path = state.text, path_of(uri)
        only = params.context.only
        actions: list[types.CodeAction] = []
        wants_quick = not only or any(kind.startswith("quickfix") for kind in only)
        wants_fix_all = not only or any(
            kind.startswith("source.fixAll") or kind == "source" for kind in only
        )
        if wants_quick:
            lines = lines_of(text)
            for diagnostic in findings:
                if diagnostic.is_error:
                    continue
                lsp_diagnostic = to_lsp(diagnostic, lines)
                if diagnostic.fix is not None:
                    unsafe = not diagnostic.fix.is_safe
                    after = service.fixed_text(path, text, unsafe=unsafe, only=diagnostic)
                    if after is not None and after != text:
                        label = f"{diagnostic.code}: {diagnostic.fix.message}"
                        actions.append(
                            types.CodeAction(
                                title=label + (" (unsafe: may change behaviour)" if unsafe else ""),
                                kind=types.CodeActionKind.QuickFix,
                                diagnostics=[lsp_diagnostic],
                                edit=text_edit(uri, text, after),
                                is_preferred=not unsafe,
                            )
                        )
                noqa_text = add_noqa_to_line(
                    text, diagnostic.noqa_row or diagnostic.start.row, diagnostic.code
                )
                if noqa_text != text:
                    actions.append(
                        types.CodeAction(
                            title=f"{diagnostic.code}: disable for this line",
                            kind=types.CodeActionKind.QuickFix,
                            diagnostics=[lsp_diagnostic],
                            edit=text_edit(uri, text, noqa_text),
                        )
                    )
        if wants_fix_all:
            after = service.fixed_text(path, text, unsafe=service.settings.options.unsafe_fixes)
            if after is not None and after != text:
                actions.append(
                    types.CodeAction(
                        title="lifetime-lint: fix all "
                        + (
                            "fixable findings"
                            if service.settings.options.unsafe_fixes
                            else "safe findings"
                        ),
                        kind=types.CodeActionKind.SourceFixAll + ".lifetime-lint",
                        edit=text_edit(uri, text, after),
                    )
                )
        return actions

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    def hover(params: types.HoverParams) -> types.Hover | None:
        uri = params.text_document.uri
        row = params.position.line + 1
        _, findings = findings_in(uri, types.Range(start=params.position, end=params.position))
        parts = []
        for diagnostic in findings:
            if diagnostic.is_error or not (diagnostic.start.row <= row <= diagnostic.end.row):
                continue
            rule = _rule(diagnostic.code)
            summary = rule.summary if rule is not None else ""
            parts.append(
                f"**{diagnostic.code} `{diagnostic.name}`**: {summary}\n\n{diagnostic.message}\n\n"
                f"[Rule documentation]({rule_url(diagnostic.code, diagnostic.name)})"
            )
        if not parts:
            return None
        return types.Hover(
            contents=types.MarkupContent(
                kind=types.MarkupKind.Markdown, value="\n\n---\n\n".join(parts)
            )
        )

    return server


def _rule(code: str) -> Any:
    for rule in all_rules():
        if rule.code == code:
            return rule
    return None


def serve() -> None:
    """Run the server over stdio until the client says exit."""
    server = create_server()
    server.start_io()
