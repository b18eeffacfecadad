"""Output formats. Each reporter turns the run's diagnostics into text on stdout.

`text` is Ruff's concise format (`path:row:col: CODE [*] message`, `[*]` when `--fix` would
fix it); `json` is Ruff's JSON shape, which editors and review bots already read.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence

from lifetime_lint.diagnostics import Diagnostic


@dataclass
class RunSummary:
    """What a reporter needs to know about the run besides the diagnostics."""

    fix_enabled: bool = False
    unsafe_fixes: bool = False
    fixed: int = 0
    fixed_by_code: Dict[str, int] = field(default_factory=dict)
    files_checked: int = 0
    show_statistics: bool = False
    rule_names: Dict[str, str] = field(default_factory=dict)
    quiet: bool = False  # diagnostics only, no closing summary


def display_path(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith(".." + os.sep + "..") else rel


def fix_marker(diagnostic: Diagnostic, summary: RunSummary) -> str:
    fix = diagnostic.fix
    if fix is None:
        return ""
    if fix.is_safe or summary.unsafe_fixes:
        return "[*] "
    return ""


def format_line(d: Diagnostic, summary: RunSummary) -> str:
    return (
        f"{display_path(d.path)}:{d.start.row}:{d.start.column}: "
        f"{d.code} {fix_marker(d, summary)}{d.message}"
    )


def render_text(diagnostics: Sequence[Diagnostic], summary: RunSummary) -> str:
    lines: List[str] = [format_line(d, summary) for d in diagnostics]
    if summary.show_statistics:
        if lines:
            lines.append("")
        lines.extend(render_statistics(diagnostics, summary))
    if not summary.quiet:
        lines.extend(_closing_lines(diagnostics, summary, leading_blank=bool(lines)))
    return "\n".join(lines) + ("\n" if lines else "")


def render_statistics(diagnostics: Sequence[Diagnostic], summary: RunSummary) -> List[str]:
    counts = Counter(d.code for d in diagnostics)
    fixable = Counter(d.code for d in diagnostics if fix_marker(d, summary))
    rows = []
    for code, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        name = summary.rule_names.get(code, "")
        marker = "[*]" if fixable[code] else "   "
        rows.append(f"{count:>5}\t{code:<6}\t{marker} {name}")
    return rows


def _closing_lines(
    diagnostics: Sequence[Diagnostic], summary: RunSummary, leading_blank: bool
) -> List[str]:
    remaining = len(diagnostics)
    lines: List[str] = []
    if remaining == 0 and summary.fixed == 0:
        return ["All checks passed!"]
    if leading_blank:
        lines.append("")
    noun = "error" if remaining + summary.fixed == 1 else "errors"
    if summary.fixed:
        lines.append(
            f"Found {remaining + summary.fixed} {noun} ({summary.fixed} fixed, {remaining} remaining)."
        )
    else:
        lines.append(f"Found {remaining} {noun}.")
    safe = sum(1 for d in diagnostics if d.fix is not None and d.fix.is_safe)
    unsafe = sum(1 for d in diagnostics if d.fix is not None and not d.fix.is_safe)
    if not summary.fix_enabled and (safe or (unsafe and summary.unsafe_fixes)):
        fixable = safe + (unsafe if summary.unsafe_fixes else 0)
        flags = "`--fix --unsafe-fixes`" if summary.unsafe_fixes else "`--fix`"
        lines.append(f"[*] {fixable} fixable with the {flags} option.")
    if unsafe and not summary.unsafe_fixes:
        plural = "fixes" if unsafe > 1 else "fix"
        lines.append(
            f"{unsafe} hidden {plural} can be enabled with the `--unsafe-fixes` option."
        )
    return lines


def _json_location(location) -> Dict[str, int]:
    return {"row": location.row, "column": location.column}


def diagnostic_to_json(d: Diagnostic) -> Dict[str, object]:
    fix: Optional[Dict[str, object]] = None
    if d.fix is not None:
        fix = {
            "applicability": d.fix.applicability.value,
            "message": d.fix.message,
            "edits": [
                {
                    "content": content,
                    "location": _json_location(start),
                    "end_location": _json_location(end),
                }
                for content, start, end in d.extra.get("edit_locations", ())
            ],
        }
    return {
        "cell": None,
        "code": d.code,
        "end_location": _json_location(d.end),
        "filename": os.path.abspath(d.path),
        "fix": fix,
        "location": _json_location(d.start),
        "message": d.message,
        "noqa_row": d.noqa_row,
        "url": d.extra.get("url"),
    }


def render_json(diagnostics: Sequence[Diagnostic], summary: RunSummary) -> str:
    return json.dumps([diagnostic_to_json(d) for d in diagnostics], indent=2) + "\n"


Reporter = Callable[[Sequence[Diagnostic], RunSummary], str]

REPORTERS: Dict[str, Reporter] = {
    "text": render_text,
    "json": render_json,
}
