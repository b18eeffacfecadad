"""Every rule documents itself the way Ruff's rules do, and docs/rules.md matches the code."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from lifetime_lint.cli import main
from lifetime_lint.registry import all_rules

DOCS = Path(__file__).parent.parent / "docs" / "rules.md"
SECTIONS = ("## What it does", "## Why is this bad?", "## Example", "## Fix safety", "## Options")


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.code)
def test_rule_doc_has_ruff_sections(rule):
    doc = rule.documentation()
    for section in SECTIONS:
        assert section in doc, f"{rule.code} lacks {section!r}"
    assert rule.name == rule.name.lower() and " " not in rule.name
    assert (Path(__file__).parent / "fixtures" / rule.code).is_dir()


def test_published_rule_docs_are_current():
    rendered = CliRunner().invoke(main, ["rule", "--all"]).output
    assert DOCS.read_text(encoding="utf-8") == rendered, (
        "docs/rules.md is stale: regenerate it with `lifetime-lint rule --all > docs/rules.md`"
    )
