"""Checking text from Python: what `-` with `--stdin-filename` does, for editors and the
language server.

    from lifetime_lint.api import check_text, settings_for

    settings = settings_for("pkg/pipeline.py")      # its nearest config, as the CLI finds it
    result = check_text(buffer, "pkg/pipeline.py", settings, fix=True)
    result.diagnostics    # what remains (all findings when fix=False)
    result.fixed_text     # the fixed source, or None when no fix applies

Nothing is read from or written to disk besides the config files; the filename decides the
per-file settings (`per-file-ignores`, relative paths) and appears in the diagnostics.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lifetime_lint.config import ConfigError, Settings, SettingsResolver
from lifetime_lint.diagnostics import Diagnostic
from lifetime_lint.results import IO_ERROR, FixMode
from lifetime_lint.source import detect_newline


@dataclass
class TextResult:
    diagnostics: list[Diagnostic]  # after fixing, when fixes were asked for
    fixed_text: str | None = None  # None: nothing was fixed
    found: list[Diagnostic] = field(default_factory=list)  # before any fix
    fixes_applied: int = 0
    fixed_by_code: dict[str, int] = field(default_factory=dict)
    diff: str | None = None


def settings_for(filename: str, config: str | None = None, isolated: bool = False) -> Settings:
    """The settings the command line would use for `filename` (raises ConfigError)."""
    from lifetime_lint.catalog import load_config

    resolver = SettingsResolver(lambda path: load_config(path, None), config=config,
                                isolated=isolated)  # fmt: skip
    return resolver.for_path(filename)


def check_text(
    text: str,
    filename: str,
    settings: Settings | None = None,
    *,
    fix: bool = False,
    unsafe_fixes: bool = False,
) -> TextResult:
    """Lint (and with `fix`, fix) one source text as if it were the file `filename`."""
    from lifetime_lint.engine import Linter
    from lifetime_lint.source import SourceFile

    settings = settings if settings is not None else Settings()
    source = SourceFile(filename, text, "utf-8", False, detect_newline(text))
    mode = FixMode(diff_only=fix, unsafe=unsafe_fixes)  # compute fixes, never write
    result = Linter(settings).check_source(source, mode)
    return TextResult(
        diagnostics=result.diagnostics,
        fixed_text=result.fixed_text,
        found=result.original_diagnostics,
        fixes_applied=result.fixes_applied,
        fixed_by_code=dict(result.fixed_by_code),
        diff=result.diff,
    )


__all__ = ["IO_ERROR", "ConfigError", "TextResult", "check_text", "settings_for"]
