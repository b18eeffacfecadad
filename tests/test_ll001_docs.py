"""LL001's documented Example, fixed by the rule, is exactly its documented Use instead."""

from __future__ import annotations

import re

from lifetime_lint.config import Settings
from lifetime_lint.engine import FixMode, Linter
from lifetime_lint.registry import rule_by_selector
from lifetime_lint.source import SourceFile


def _as_method(block: str) -> str:
    indented = "".join("    " + line if line.strip() else line for line in block.splitlines(True))
    return "import torch\n\n\nclass Pipeline:\n" + indented


def test_documented_example_fixes_to_documented_use_instead():
    (rule,) = rule_by_selector("LL001")
    example, use_instead = re.findall(r"```python\n(.*?)```", rule.documentation(), re.S)
    settings = Settings()
    settings.select = ["LL001"]
    linter = Linter(settings)
    source = _as_method(example)
    diagnostics, error = linter.lint_text("example.py", source)
    assert error is None
    assert {d.message.split("`")[1] for d in diagnostics} == {"rows"}
    assert all(d.significance == "high" for d in diagnostics)
    result = linter.check_source(
        SourceFile.from_bytes("example.py", source.encode()), FixMode(diff_only=True)
    )
    assert result.fixed_text == _as_method(use_instead)
