"""The `lifetime-lint` command line.

`lifetime-lint [check] [PATHS]...` lints (and with `--fix` rewrites) files;
`lifetime-lint rule CODE` prints a rule's documentation.

Exit codes, as Ruff's: 0 nothing left to report; 1 diagnostics remain (also after `--fix`),
or `--diff` found something to fix; 2 bad usage, bad configuration, or a file that could
not be read or parsed (the other files are still checked).
"""

from __future__ import annotations

import sys
from typing import List, Optional, Sequence, Tuple

import click

from lifetime_lint import __version__
from lifetime_lint.config import (
    ConfigError,
    Settings,
    load_settings,
    parse_torch_version,
    validate_selectors,
)
from lifetime_lint.diagnostics import Diagnostic, Location
from lifetime_lint.engine import IO_ERROR, FileResult, FixMode, Linter
from lifetime_lint.files import discover
from lifetime_lint.registry import all_rules, rule_by_selector
from lifetime_lint.reporters import REPORTERS, RunSummary, format_line

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


class _DefaultToCheck(click.Group):
    """Route `lifetime-lint --fix .` to `lifetime-lint check --fix .`."""

    def parse_args(self, ctx: click.Context, args: List[str]) -> List[str]:
        if not args or (
            args[0] not in self.commands and args[0] not in ("--help", "-h", "--version")
        ):
            args = ["check"] + list(args)
        return super().parse_args(ctx, args)


@click.group(cls=_DefaultToCheck, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="lifetime-lint")
def main() -> None:
    """Find and fix GPU-memory lifetime bugs in PyTorch code."""


def _split(values: Sequence[str]) -> List[str]:
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


@main.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--fix", is_flag=True, help="Apply safe fixes in place.")
@click.option("--unsafe-fixes", is_flag=True, help="Also apply fixes that may change behaviour.")
@click.option("--diff", "diff_only", is_flag=True,
              help="Print the diff of the fixes instead of writing; exit 1 if there is any.")
@click.option("--select", multiple=True, metavar="CODES",
              help="Rules to enable (codes, prefixes or ALL), replacing the config's.")
@click.option("--extend-select", multiple=True, metavar="CODES", help="Rules to enable as well.")
@click.option("--ignore", multiple=True, metavar="CODES", help="Rules to disable.")
@click.option("--format", "output_format", type=click.Choice(sorted(REPORTERS)), default="text",
              show_default=True, help="Output format.")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even if diagnostics remain.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False),
              help="Config file (pyproject.toml or a file of top-level keys).")
@click.option("--target-torch-version", metavar="X.Y",
              help="Oldest torch the code must run on (decides which fixes exist).")
@click.option("--force-exclude", is_flag=True,
              help="Apply excludes to paths named on the command line too (for pre-commit).")
@click.option("-q", "--quiet", is_flag=True, help="Print diagnostics, nothing else.")
@click.option("--statistics", is_flag=True, help="Count diagnostics per rule.")
def check(
    paths: Tuple[str, ...],
    fix: bool,
    unsafe_fixes: bool,
    diff_only: bool,
    select: Tuple[str, ...],
    extend_select: Tuple[str, ...],
    ignore: Tuple[str, ...],
    output_format: str,
    exit_zero: bool,
    config_path: Optional[str],
    target_torch_version: Optional[str],
    force_exclude: bool,
    quiet: bool,
    statistics: bool,
) -> None:
    """Check PATHS (default: the current folder) for GPU-memory lifetime bugs."""
    rules = all_rules()
    try:
        settings = load_settings(config_path, rules)
        _apply_cli_selection(settings, rules, select, extend_select, ignore)
        if target_torch_version:
            settings.target_torch_version = parse_torch_version(
                target_torch_version, "--target-torch-version"
            )
    except ConfigError as error:
        click.echo(f"lifetime-lint: error: {error}", err=True)
        sys.exit(EXIT_ERROR)

    linter = Linter(settings, rules)
    mode = FixMode(apply=fix and not diff_only, unsafe=unsafe_fixes, diff_only=diff_only)
    files, missing = discover(paths or ["."], settings, force_exclude=force_exclude)
    results: List[FileResult] = [_missing(path) for path in missing]
    results.extend(linter.check_file(path, mode) for path in files)
    sys.exit(_report(results, settings, mode, output_format, quiet, statistics, exit_zero))


def _apply_cli_selection(
    settings: Settings,
    rules: Sequence,
    select: Tuple[str, ...],
    extend_select: Tuple[str, ...],
    ignore: Tuple[str, ...],
) -> None:
    known = [rule.code for rule in rules]
    if select:
        settings.select = _split(select)
        validate_selectors(settings.select, known, "--select")
    if extend_select:
        extra = _split(extend_select)
        validate_selectors(extra, known, "--extend-select")
        settings.extend_select = settings.extend_select + extra
    if ignore:
        extra = _split(ignore)
        validate_selectors(extra, known, "--ignore")
        settings.ignore = settings.ignore + extra


def _missing(path: str) -> FileResult:
    return FileResult(
        path,
        [
            Diagnostic(
                code=IO_ERROR,
                name="io-error",
                message=f"Failed to read {path}: No such file or directory",
                path=path,
                start=Location(1, 1),
                end=Location(1, 1),
                is_error=True,
            )
        ],
    )


def _report(
    results: List[FileResult],
    settings: Settings,
    mode: FixMode,
    output_format: str,
    quiet: bool,
    statistics: bool,
    exit_zero: bool,
) -> int:
    diagnostics = sorted((d for r in results for d in r.diagnostics), key=Diagnostic.sort_key)
    summary = RunSummary(
        fix_enabled=mode.apply,
        unsafe_fixes=mode.unsafe,
        fixed=sum(r.fixes_applied for r in results) if mode.apply else 0,
        files_checked=len(results),
        show_statistics=statistics,
        quiet=quiet,
        rule_names={rule.code: rule.name for rule in all_rules()},
    )
    for r in results:
        for code, count in r.fixed_by_code.items():
            summary.fixed_by_code[code] = summary.fixed_by_code.get(code, 0) + count
    has_error = any(d.is_error for d in diagnostics)

    if mode.diff_only:
        diffs = [r.diff for r in results if r.diff]
        for diff in diffs:
            click.echo(diff, nl=False)
        fixable = sum(r.fixes_applied for r in results)
        errors = [d for d in diagnostics if d.is_error]
        for error in errors:
            click.echo(format_line(error, summary), err=True)
        if not quiet:
            if fixable:
                noun = "fix" if fixable == 1 else "fixes"
                click.echo(f"Would apply {fixable} {noun}.", err=True)
            else:
                click.echo("No fixes available.", err=True)
        if has_error:
            return EXIT_ERROR
        return EXIT_FINDINGS if diffs else EXIT_CLEAN

    output = REPORTERS[output_format](diagnostics, summary)
    click.echo(output, nl=False)
    if has_error:
        return EXIT_ERROR
    if diagnostics and not exit_zero:
        return EXIT_FINDINGS
    return EXIT_CLEAN


@main.command()
@click.argument("code", required=False)
@click.option("--all", "show_all", is_flag=True, help="Print every rule's documentation.")
def rule(code: Optional[str], show_all: bool) -> None:
    """Print the documentation of rule CODE (or of every rule with --all)."""
    if show_all:
        chosen = all_rules()
    elif code:
        chosen = rule_by_selector(code)
        if not chosen:
            click.echo(f"lifetime-lint: error: unknown rule {code!r}", err=True)
            sys.exit(EXIT_ERROR)
    else:
        click.echo("lifetime-lint: error: give a rule code or --all", err=True)
        sys.exit(EXIT_ERROR)
    click.echo("\n\n".join(render_rule_doc(r) for r in chosen))


def render_rule_doc(rule_class) -> str:
    lines = [f"# {rule_class.name} ({rule_class.code})", ""]
    lines.append(f"Fix is {rule_class.fix_availability} available.")
    lines.append("")
    lines.append(rule_class.documentation())
    if rule_class.options:
        lines.append("")
        lines.append(f"## Settings (`[tool.lifetime-lint.{rule_class.name}]`)")
        for option in rule_class.options:
            lines.append(f"- `{option.name}` (default {option.default!r}): {option.doc}")
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover
    main()
