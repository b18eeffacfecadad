"""Output formats. Each reporter turns the run's diagnostics into text on stdout.

- `text` (alias `concise`): Ruff's concise format, `path:row:col: CODE [*] message`, `[*]`
  when `--fix` would fix it, then a summary.
- `full`: the same line followed by the source around the finding, the flagged span
  underlined, and the fix's description (Ruff's full format).
- `json`: Ruff's JSON shape, which editors and review bots already read.
- `github`: GitHub Actions workflow commands; each finding becomes an annotation on the
  pull request's diff.
- `sarif`: SARIF 2.1.0 for GitHub code scanning and other SARIF viewers: one run, every rule
  described (summary, documentation, help URI), results with regions, fixes and a
  line-shift-robust fingerprint (the one `--baseline` uses), paths relative to `%SRCROOT%`.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable
from urllib.parse import quote

from lifetime_lint import __version__
from lifetime_lint.diagnostics import Diagnostic
from lifetime_lint.results import split_left_out_key
from lifetime_lint.source import SourceLines

# The published rule documentation: `lifetime-lint rule --all` rendered as Markdown, one
# `# name (CODE)` heading per rule, which is the anchor `rule_url` points at.
DOCS_URL = "https://github.com/lifetime-lint/lifetime-lint/blob/main/docs/rules.md"


def rule_url(code: str, name: str) -> str:
    return f"{DOCS_URL}#{name}-{code.lower()}"


@dataclass
class RunSummary:
    """What a reporter needs to know about the run besides the diagnostics."""

    fix_enabled: bool = False
    unsafe_fixes: bool = False
    fixed: int = 0
    fixed_by_code: dict[str, int] = field(default_factory=dict)
    files_checked: int = 0
    show_statistics: bool = False
    rule_names: dict[str, str] = field(default_factory=dict)
    quiet: bool = False  # diagnostics only, no closing summary
    show_fixes: bool = False  # list the fixes applied, per file and rule
    fixed_by_path: dict[str, dict[str, int]] = field(default_factory=dict)
    color: bool = False  # ANSI colours, as Ruff's on a terminal (see `--color`)
    # Findings left out by design or below the significance bar, by
    # `results.left_out_key` -> count (shown by --statistics).
    left_out: dict[str, int] = field(default_factory=dict)
    # Rules that did not run only because they are off by default (shown by --statistics).
    off_by_default: list[str] = field(default_factory=list)


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


def _style(text: str, summary: RunSummary, **style: bool | str) -> str:
    if not summary.color or not text:
        return text
    import click

    return click.style(text, **style)  # type: ignore[arg-type]


def format_line(d: Diagnostic, summary: RunSummary) -> str:
    colon = _style(":", summary, fg="cyan")
    marker = fix_marker(d, summary)
    cell = f"cell {d.extra['cell']}{colon}" if d.extra.get("cell") else ""  # a notebook's
    return (
        f"{_style(display_path(d.path), summary, bold=True)}{colon}{cell}{d.start.row}{colon}"
        f"{d.start.column}{colon} {_style(d.code, summary, fg='red', bold=True)} "
        f"{_style(marker.strip(), summary, fg='cyan')}{' ' if marker else ''}{d.message}"
        f"{_style(measured_suffix(d), summary, fg='yellow')}"
    )


def measured_suffix(d: Diagnostic) -> str:
    """` [measured: 64.0 MiB, 16.7% of the peak]` for a finding a profile
    measured (`profile`, `check --profile`); empty when no profile was given."""
    if "measured" not in d.extra:
        return ""
    measured = d.extra["measured"]
    if measured is None:
        return f" [measured: {d.extra.get('measured_status', 'not executed')}]"
    from lifetime_lint.profile import format_bytes

    peak = measured.get("program_peak_bytes") or measured.get("peak_bytes") or 0
    share = f", {measured['bytes'] / peak * 100:.1f}% of the peak" if peak else ""
    return f" [measured: {format_bytes(measured['bytes'])}{share}]"


def measured_json(d: Diagnostic) -> dict[str, object] | None:
    """The `measured` object of JSON and SARIF output: bytes held at the function's peak,
    that peak, the line it was on, and how many times the function ran."""
    measured = d.extra.get("measured")
    if measured is None:
        return None
    keys = (
        "bytes",
        "peak_bytes",
        "peak_row",
        "calls",
        "largest_bytes",
        "held_bytes",
        "own_bytes",
        "program_peak_bytes",
        "outermost",
        "row_at_program_peak",
        "names",
    )
    return {key: measured[key] for key in keys if key in measured}


def render_text(diagnostics: Sequence[Diagnostic], summary: RunSummary) -> str:
    lines: list[str] = [format_line(d, summary) for d in diagnostics]
    return _finish_text(lines, diagnostics, summary)


def _finish_text(lines: list[str], diagnostics: Sequence[Diagnostic], summary: RunSummary) -> str:
    if summary.show_fixes and summary.fixed_by_path:
        if lines:
            lines.append("")
        lines.extend(render_fix_summary(summary))
    if summary.show_statistics:
        if lines:
            lines.append("")
        lines.extend(render_statistics(diagnostics, summary))
    if not summary.quiet:
        lines.extend(_closing_lines(diagnostics, summary, leading_blank=bool(lines)))
    return "\n".join(lines) + ("\n" if lines else "")


def statistics_rows(
    diagnostics: Sequence[Diagnostic], summary: RunSummary
) -> list[tuple[str, int, bool]]:
    """(code, count, fixable) per rule, most frequent first (Ruff's `--statistics` order)."""
    counts = Counter(d.code for d in diagnostics)
    fixable = Counter(d.code for d in diagnostics if fix_marker(d, summary))
    return [(code, count, bool(fixable[code]))
            for code, count in sorted(counts.items(), key=lambda item: (-item[1], item[0]))]  # fmt: skip


def _left_out_rows(summary: RunSummary) -> list[tuple[str, str, int, str]]:
    """(code, reason, count, the setting that shows them), by code and reason."""
    rows = [(*split_left_out_key(key), count) for key, count in summary.left_out.items()]
    return sorted((code, reason, count, shown_by) for code, reason, shown_by, count in rows)


def turn_on_setting(code: str) -> str:
    return f'extend-select = ["{code}"]'


def render_statistics_json(diagnostics: Sequence[Diagnostic], summary: RunSummary) -> str:
    """`--statistics --output-format json`: Ruff's shape, one object per rule; a rule with
    findings left out (by scope or below the significance bar) also has `left_out`, a list
    of `{"reason", "count", "shown_by"}`, and a rule off by default is listed with `"count":
    0, "off_by_default": true` and the `shown_by` line that turns it on."""
    rows: list[dict[str, Any]] = [
        {"code": code, "name": summary.rule_names.get(code, ""), "count": count,
         "fixable": fixable} for code, count, fixable in statistics_rows(diagnostics, summary)
    ]  # fmt: skip
    by_code = {row["code"]: row for row in rows}

    def row_of(code: str) -> dict[str, Any]:
        if code not in by_code:
            by_code[code] = {"code": code, "name": summary.rule_names.get(code, ""),
                             "count": 0, "fixable": False}  # fmt: skip
            rows.append(by_code[code])
        return by_code[code]

    for code, reason, count, shown_by in _left_out_rows(summary):
        row_of(code).setdefault("left_out", []).append(
            {"reason": reason, "count": count, "shown_by": shown_by}
        )
    for code in summary.off_by_default:
        row_of(code).update(off_by_default=True, shown_by=turn_on_setting(code))
    return json.dumps(rows, indent=2) + "\n"


def render_statistics(diagnostics: Sequence[Diagnostic], summary: RunSummary) -> list[str]:
    """Ruff's rows (count, code, fixable, name), then one row per reason findings were left
    out (by scope, CUDA-bound code, below the significance bar) with the setting that
    reports them, then one row per rule off by default with the line that turns it on."""
    counts = Counter(d.code for d in diagnostics)
    fixable = Counter(d.code for d in diagnostics if fix_marker(d, summary))
    rows = []
    for code, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        name = summary.rule_names.get(code, "")
        marker = "[*]" if fixable[code] else "   "
        rows.append(f"{count:>5}\t{code:<6}\t{marker} {name}")
    for code, reason, count, shown_by in _left_out_rows(summary):
        shows = f" ({shown_by} reports them)" if shown_by else ""
        rows.append(f"{count:>5}\t{code:<6}\t    left out: {reason}{shows}")
    for code in summary.off_by_default:
        rows.append(
            f"{'-':>5}\t{code:<6}\t    off by default ({turn_on_setting(code)} turns it on)"
        )
    return rows


def render_fix_summary(summary: RunSummary) -> list[str]:
    """What `--fix` changed, per file and rule (`--show-fixes`)."""
    total = sum(sum(codes.values()) for codes in summary.fixed_by_path.values())
    lines = [f"Fixed {total} {'error' if total == 1 else 'errors'}:"]
    for path in sorted(summary.fixed_by_path):
        lines.append(f"- {display_path(path)}:")
        for code, count in sorted(summary.fixed_by_path[path].items()):
            name = summary.rule_names.get(code, "")
            lines.append(
                f"    {count} \u00d7 {code} ({name})" if name else f"    {count} \u00d7 {code}"
            )
    return lines


def _closing_lines(
    diagnostics: Sequence[Diagnostic], summary: RunSummary, leading_blank: bool
) -> list[str]:
    remaining = len(diagnostics)
    lines: list[str] = []
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
        lines.append(f"{unsafe} hidden {plural} can be enabled with the `--unsafe-fixes` option.")
    return lines


def _json_location(location) -> dict[str, int]:
    return {"row": location.row, "column": location.column}


def diagnostic_to_json(d: Diagnostic) -> dict[str, object]:
    fix: dict[str, object] | None = None
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
        "cell": d.extra.get("cell"),
        "code": d.code,
        "end_location": _json_location(d.end),
        "filename": os.path.abspath(d.path),
        "fix": fix,
        "location": _json_location(d.start),
        "message": d.message,
        "noqa_row": d.noqa_row,
        "url": d.extra.get("url"),
        **({"significance": d.significance} if d.significance is not None else {}),
        **({"measured": measured_json(d)} if "measured" in d.extra else {}),
    }


def render_json(diagnostics: Sequence[Diagnostic], summary: RunSummary) -> str:
    items = []
    for d in diagnostics:
        item = diagnostic_to_json(d)
        if item["url"] is None and d.code in summary.rule_names:
            item["url"] = rule_url(d.code, summary.rule_names[d.code])
        items.append(item)
    return json.dumps(items, indent=2) + "\n"


# -- full: source context ------------------------------------------------------------------

_MAX_SPAN_LINES = 6  # longer spans show their first lines and an ellipsis


def render_full(diagnostics: Sequence[Diagnostic], summary: RunSummary) -> str:
    sources = SourceLines()
    lines: list[str] = []
    for d in diagnostics:
        lines.append(format_line(d, summary))
        lines.extend(_snippet(d, sources.get(d.path)))
        if d.fix is not None:
            applicable = d.fix.is_safe or summary.unsafe_fixes
            label = "help" if applicable else "help (unsafe fix, needs --unsafe-fixes)"
            lines.append(f"  = {label}: {d.fix.message}")
        lines.append("")
    if lines:
        lines.pop()
    return _finish_text(lines, diagnostics, summary)


def _snippet(d: Diagnostic, source: list[str]) -> list[str]:
    if not source or not 0 < d.start.row <= len(source):
        return []
    first = max(1, d.start.row - 1)
    last_flagged = min(max(d.end.row, d.start.row), len(source))
    shown_flagged = min(last_flagged, d.start.row + _MAX_SPAN_LINES - 1)
    last = min(len(source), shown_flagged + 1) if shown_flagged == last_flagged else shown_flagged
    width = len(str(last))
    gutter = " " * width
    out = [f"{gutter} |"]
    for row in range(first, last + 1):
        text = source[row - 1]
        out.append(f"{row:>{width}} | {text}".rstrip())
        if row == d.start.row:
            start = d.start.column - 1
            stop = d.end.column - 1 if d.end.row == d.start.row else len(text)
            stop = max(stop, start + 1)
            # Keep tabs in the prefix so the carets line up under the flagged characters.
            prefix = "".join(c if c == "\t" else " " for c in text[:start])
            out.append(f"{gutter} | {prefix}{'^' * (stop - start)} {d.code}")
        if row == shown_flagged and shown_flagged < last_flagged:
            out.append(f"{gutter} | ...")
            break
    out.append(f"{gutter} |")
    return out


# -- github: workflow-command annotations -------------------------------------------------


def _escape_data(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(value: str) -> str:
    return _escape_data(value).replace(":", "%3A").replace(",", "%2C")


def render_github(diagnostics: Sequence[Diagnostic], summary: RunSummary) -> str:
    lines = []
    for d in diagnostics:
        path = display_path(d.path).replace(os.sep, "/")
        properties = ",".join(
            f"{key}={_escape_property(str(value))}"
            for key, value in (
                ("title", f"lifetime-lint ({d.code})"),
                ("file", path),
                ("line", d.start.row),
                ("col", d.start.column),
                ("endLine", d.end.row),
                ("endColumn", d.end.column),
            )
        )
        message = f"{path}:{d.start.row}:{d.start.column}: {d.code} {d.message}"
        lines.append(f"::error {properties}::{_escape_data(message)}")
    return "".join(line + "\n" for line in lines)


# -- sarif ------------------------------------------------------------------------------

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_FILE_ERRORS = {
    "E902": ("io-error", "The file could not be read as Python source."),
    "E999": ("syntax-error", "The file is not valid Python; nothing in it was checked."),
    "LL000": ("internal-error", "A fix would have broken the file; no fix was applied."),
}


def _first_paragraph(text: str) -> str:
    """The first paragraph under the first heading (`## What it does`)."""
    for paragraph in text.split("\n\n"):
        lines = paragraph.strip().splitlines()
        while lines and lines[0].startswith("#"):
            lines = lines[1:]
        if lines:
            return " ".join(" ".join(lines).split())
    return ""


def _rule_descriptors(codes: Sequence[str]) -> list[dict[str, object]]:
    from lifetime_lint.registry import all_rules

    descriptors: list[dict[str, object]] = []
    for rule in all_rules():
        documentation = rule.documentation()
        descriptors.append({
            "id": rule.code,
            "name": rule.name,
            "shortDescription": {"text": rule.summary or rule.name},
            "fullDescription": {"text": _first_paragraph(documentation) or rule.summary},
            "help": {"text": documentation, "markdown": documentation},
            "helpUri": rule_url(rule.code, rule.name),
            "defaultConfiguration": {"level": "error"},
            "properties": {"fixAvailability": rule.fix_availability},
        })  # fmt: skip
    known = {rule.code for rule in all_rules()}
    for code in sorted(set(codes) - known):
        name, text = _FILE_ERRORS.get(code, (code.lower(), code))
        descriptors.append({
            "id": code,
            "name": name,
            "shortDescription": {"text": text},
            "help": {"text": text},
            "defaultConfiguration": {"level": "error"},
        })  # fmt: skip
    return descriptors


def _artifact(path: str, root: str) -> dict[str, str]:
    absolute = os.path.abspath(path)
    try:
        rel = os.path.relpath(absolute, root)
    except ValueError:
        rel = ".."
    if rel == ".." or rel.startswith(".." + os.sep):
        return {"uri": Path(absolute).as_uri()}
    return {"uri": quote(rel.replace(os.sep, "/")), "uriBaseId": "%SRCROOT%"}


def _region(start, end) -> dict[str, int]:
    return {"startLine": start.row, "startColumn": start.column,
            "endLine": end.row, "endColumn": end.column}  # fmt: skip


def render_sarif(diagnostics: Sequence[Diagnostic], summary: RunSummary) -> str:
    from lifetime_lint.baseline import fingerprint

    root = os.getcwd()
    rules = _rule_descriptors([d.code for d in diagnostics])
    index = {rule["id"]: position for position, rule in enumerate(rules)}
    sources = SourceLines()
    results = []
    for d in diagnostics:
        artifact = _artifact(d.path, root)
        result: dict[str, object] = {
            "ruleId": d.code,
            "ruleIndex": index[d.code],
            "level": "error",
            "message": {"text": d.message},
            "locations": [{"physicalLocation": {
                "artifactLocation": artifact, "region": _region(d.start, d.end)}}],
        }  # fmt: skip
        if not d.is_error:
            rel = os.path.relpath(os.path.abspath(d.path), root).replace(os.sep, "/")
            result["partialFingerprints"] = {
                "lifetimeLint/v1": fingerprint(d, rel, sources.get(d.path))
            }
        locations = d.extra.get("edit_locations")
        if d.fix is not None and locations:
            result["fixes"] = [{
                "description": {"text": d.fix.message},
                "artifactChanges": [{
                    "artifactLocation": artifact,
                    "replacements": [
                        {"deletedRegion": _region(start, end), "insertedContent": {"text": content}}
                        for content, start, end in locations
                    ],
                }],
            }]  # fmt: skip
        properties: dict[str, object] = {}
        if d.fix is not None and locations and not d.fix.is_safe:
            properties["fixApplicability"] = "unsafe"
        if d.significance is not None:
            properties["significance"] = d.significance
        if "measured" in d.extra:  # from `profile` or `check --profile`
            properties["measured"] = measured_json(d)
        if properties:
            result["properties"] = properties
        results.append(result)
    log = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "lifetime-lint",
                "version": __version__,
                "semanticVersion": __version__,
                "informationUri": DOCS_URL,
                "rules": rules,
            }},
            "originalUriBaseIds": {"%SRCROOT%": {"uri": Path(root).as_uri() + "/"}},
            "columnKind": "unicodeCodePoints",
            "results": results,
        }],
    }  # fmt: skip
    return json.dumps(log, indent=2) + "\n"


Reporter = Callable[[Sequence[Diagnostic], RunSummary], str]

REPORTERS: dict[str, Reporter] = {
    "text": render_text,
    "concise": render_text,
    "full": render_full,
    "json": render_json,
    "github": render_github,
    "sarif": render_sarif,
}

# Formats read by programs: the human summary (statistics, fixes) goes to stderr instead.
MACHINE_FORMATS = frozenset({"json", "github", "sarif"})
