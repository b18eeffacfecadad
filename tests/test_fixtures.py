"""One harness for every rule's fixtures (see tests/fixtures/README.md)."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

from lifetime_lint.config import Settings, load_settings
from lifetime_lint.diagnostics import Diagnostic
from lifetime_lint.engine import FixMode, Linter
from lifetime_lint.registry import all_rules
from lifetime_lint.source import SourceFile

FIXTURES = Path(__file__).parent / "fixtures"
UPDATE = os.environ.get("LIFETIME_LINT_UPDATE_FIXTURES") == "1"
_SUFFIXES = (".fixed.py", ".unsafe.py")


def _cases() -> list[tuple[Path, str]]:
    """Each input once with its own settings, and again under each `<stem>@<variant>.toml`."""
    cases = []
    for path in sorted(FIXTURES.glob("*/*.py")):
        if path.name.endswith(_SUFFIXES):
            continue
        cases.append((path, path.stem))
        for variant in sorted(path.parent.glob(f"{path.stem}@*.toml")):
            cases.append((path, variant.stem))
    return cases


def _settings(case: Path, name: str) -> Settings:
    config = case.with_name(name + ".toml")
    settings = load_settings(str(config), all_rules()) if config.exists() else Settings()
    settings.root = str(case.parent)
    # A fixture folder tests its own rule only, so other rules' findings do not leak in.
    settings.select = [case.parent.name]
    return settings


def _render(diagnostics: list[Diagnostic]) -> str:
    lines = []
    for d in diagnostics:
        marker = ""
        if d.fix is not None:
            marker = "[fix] " if d.fix.is_safe else "[unsafe-fix] "
        lines.append(f"{d.start.row}:{d.start.column}: {d.code} {marker}{d.message}")
    return "".join(line + "\n" for line in lines)


def _python_parses(text: str) -> bool:
    try:
        ast.parse(text)
    except SyntaxError:
        return False
    return True


def _fix(linter: Linter, case: Path, text: str, unsafe: bool) -> str:
    source = SourceFile.from_bytes(str(case), text.encode("utf-8"))
    result = linter.check_source(source, FixMode(diff_only=True, unsafe=unsafe))
    assert not result.has_error, [d.message for d in result.diagnostics if d.is_error]
    return result.fixed_text if result.fixed_text is not None else text


def _compare(path: Path, actual: str, expected_default: str | None = None) -> None:
    if UPDATE:
        if expected_default is not None and actual == expected_default:
            if path.exists():
                path.unlink()
        else:
            path.write_text(actual, encoding="utf-8")
        return
    expected = path.read_text(encoding="utf-8") if path.exists() else expected_default
    assert expected is not None, f"missing {path.name}"
    assert actual == expected, f"{path.name} differs"


@pytest.mark.parametrize(
    ("case", "name"), _cases(), ids=[f"{p.parent.name}/{n}" for p, n in _cases()]
)
def test_fixture(case: Path, name: str) -> None:
    """`name` is the case's stem, or `<stem>@<variant>` for the input under another config;
    the expected files carry the same name."""
    assert case.parent.name in {rule.code for rule in all_rules()}, "folder must be a rule code"
    text = case.read_text(encoding="utf-8")
    linter = Linter(_settings(case, name))
    diagnostics, error = linter.lint_text(str(case), text)
    assert error is None, error.message
    _compare(case.with_name(name + ".expected"), _render(diagnostics))

    if case.stem.startswith("negative"):
        assert diagnostics == [], "a negative case must not report"
    if case.stem.startswith("positive"):
        assert diagnostics, "a positive case must report"

    safe = _fix(linter, case, text, unsafe=False)
    _compare(case.with_name(name + ".fixed.py"), safe, text)
    unsafe = _fix(linter, case, text, unsafe=True)
    _compare(case.with_name(name + ".unsafe.py"), unsafe, safe)

    for fixed, allow_unsafe in ((safe, False), (unsafe, True)):
        if _python_parses(text):  # newer syntax than this Python (match on 3.9): LibCST only
            ast.parse(fixed)
        assert _fix(linter, case, fixed, unsafe=allow_unsafe) == fixed, "fix is not idempotent"
