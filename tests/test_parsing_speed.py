"""`parsing.parse_exact` builds the parser's nodes without LibCST's per-node validation:
the trees must be the ones a validating parse gives, and validation must be back on after."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from lifetime_lint.parsing import parse_exact

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted(
    [*(ROOT / "lifetime_lint").rglob("*.py"), *(ROOT / "rules").rglob("*.py"),
     *(ROOT / "tests" / "fixtures").rglob("*.py")]
)  # fmt: skip


def test_trees_equal_validated_parses() -> None:
    checked = 0
    for path in SOURCES:
        text = path.read_text(encoding="utf-8")
        try:
            validated = cst.parse_module(text)
        except cst.ParserSyntaxError:
            with pytest.raises(cst.ParserSyntaxError):
                parse_exact(text)
            continue
        parsed = parse_exact(text)
        if parsed.parse_text == text:  # (form feeds aside: see parsing.libcst_view)
            assert parsed.module.deep_equals(validated), path
            assert parsed.module.code == text
            checked += 1
    assert checked > 100


def test_validation_is_on_again_after_a_parse_and_after_a_syntax_error() -> None:
    parse_exact("x = 1\n")
    with pytest.raises(cst.CSTValidationError):
        cst.SimpleWhitespace("not whitespace")
    with pytest.raises(cst.ParserSyntaxError):
        parse_exact("def (:\n")
    with pytest.raises(cst.CSTValidationError):
        cst.SimpleWhitespace("x")
