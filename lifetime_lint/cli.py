"""The `lifetime-lint` command line.

`lifetime-lint [check] [PATHS]...` lints (and with `--fix` rewrites) files;
`lifetime-lint rule CODE` prints a rule's documentation.

Exit codes, as Ruff's: 0 nothing left to report; 1 diagnostics remain (also after `--fix`),
or `--diff` found something to fix; 2 bad usage, bad configuration, or a file that could
not be read or parsed (the other files are still checked).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence

import click

from lifetime_lint import __version__
from lifetime_lint.baseline import Baseline, BaselineError, write_baseline
from lifetime_lint.cache import DEFAULT_CACHE_DIR
from lifetime_lint.config import (
    ConfigError,
    Settings,
    load_settings,
    parse_torch_version,
    validate_selectors,
)
from lifetime_lint.diagnostics import Diagnostic, Location
from lifetime_lint.engine import IO_ERROR, FileResult, FixMode
from lifetime_lint.files import discover
from lifetime_lint.gitdiff import GitDiffError, changed_lines
from lifetime_lint.registry import all_rules, rule_by_selector
from lifetime_lint.reporters import (
    MACHINE_FORMATS,
    REPORTERS,
    RunSummary,
    format_line,
    render_fix_summary,
    render_statistics,
)
from lifetime_lint.runner import Progress, default_jobs, run_files

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


class _DefaultToCheck(click.Group):
    """Route `lifetime-lint --fix .` to `lifetime-lint check --fix .`."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or (
            args[0] not in self.commands and args[0] not in ("--help", "-h", "--version")
        ):
            args = ["check"] + list(args)
        return super().parse_args(ctx, args)


@click.group(cls=_DefaultToCheck, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="lifetime-lint")
def main() -> None:
    """Find and fix GPU-memory lifetime bugs in PyTorch code."""


def _split(values: Sequence[str]) -> list[str]:
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


@main.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--fix", is_flag=True, help="Apply safe fixes in place.")
@click.option("--unsafe-fixes", is_flag=True, help="Also apply fixes that may change behaviour.")
@click.option(
    "--diff",
    "diff_only",
    is_flag=True,
    help="Print the diff of the fixes instead of writing; exit 1 if there is any.",
)
@click.option(
    "--select",
    multiple=True,
    metavar="CODES",
    help="Rules to enable (codes, prefixes or ALL), replacing the config's.",
)
@click.option("--extend-select", multiple=True, metavar="CODES", help="Rules to enable as well.")
@click.option("--ignore", multiple=True, metavar="CODES", help="Rules to disable.")
@click.option(
    "--format",
    "output_format",
    type=click.Choice(sorted(REPORTERS)),
    default="text",
    show_default=True,
    help="Output format.",
)
@click.option("--exit-zero", is_flag=True, help="Exit 0 even if diagnostics remain.")
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    help="Config file (pyproject.toml or a file of top-level keys).",
)
@click.option(
    "--target-torch-version",
    metavar="X.Y",
    help="Oldest torch the code must run on (decides which fixes exist).",
)
@click.option(
    "--force-exclude",
    is_flag=True,
    help="Apply excludes to paths named on the command line too (for pre-commit).",
)
@click.option("-q", "--quiet", is_flag=True, help="Print diagnostics, nothing else.")
@click.option("--statistics", is_flag=True, help="Count diagnostics per rule.")
@click.option("--show-fixes", is_flag=True, help="After --fix, list the fixes applied per file.")
@click.option(
    "--diff-base",
    metavar="REV",
    help="Report only diagnostics on lines added or changed since git revision REV "
    "(for pull-request gates).",
)
@click.option(
    "--baseline",
    "baseline_path",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Report only diagnostics not recorded in FILE (see --write-baseline).",
)
@click.option(
    "--write-baseline",
    "write_baseline_path",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Record every current diagnostic in FILE and exit 0.",
)
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(min=1),
    metavar="N",
    help="Processes to check files with (default: the CPU count; 1 under "
    "pre-commit for small file lists).",
)
@click.option("--no-cache", is_flag=True, help="Do not read or write the result cache.")
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False),
    metavar="DIR",
    help=f"Where to keep the result cache (default: {DEFAULT_CACHE_DIR}/ in the "
    "project root, or the `cache-dir` setting).",
)
def check(
    paths: tuple[str, ...],
    fix: bool,
    unsafe_fixes: bool,
    diff_only: bool,
    select: tuple[str, ...],
    extend_select: tuple[str, ...],
    ignore: tuple[str, ...],
    output_format: str,
    exit_zero: bool,
    config_path: str | None,
    target_torch_version: str | None,
    force_exclude: bool,
    quiet: bool,
    statistics: bool,
    show_fixes: bool,
    diff_base: str | None,
    baseline_path: str | None,
    write_baseline_path: str | None,
    jobs: int | None,
    no_cache: bool,
    cache_dir: str | None,
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

    mode = FixMode(apply=fix and not diff_only, unsafe=unsafe_fixes, diff_only=diff_only)
    try:
        if diff_base and mode.fixing:
            raise ConfigError("--diff-base selects what to report; it cannot be combined with "
                              "--fix or --diff (which act on whole files)")  # fmt: skip
        changed = changed_lines(diff_base) if diff_base else None
        baseline = Baseline.load(baseline_path) if baseline_path else None
    except (ConfigError, GitDiffError, BaselineError) as error:
        click.echo(f"lifetime-lint: error: {error}", err=True)
        sys.exit(EXIT_ERROR)

    files, missing = discover(paths or ["."], settings, force_exclude=force_exclude)
    results: list[FileResult] = [_missing(path) for path in missing]
    results.extend(
        run_files(
            files,
            settings,
            rules,
            mode,
            jobs=jobs or default_jobs(len(files)),
            cache_dir=None if no_cache else _cache_dir(cache_dir, settings),
            progress=Progress.for_terminal(len(files), quiet),
        )
    )

    if write_baseline_path:
        diagnostics = [d for r in results for d in r.diagnostics]
        recorded = write_baseline(write_baseline_path, diagnostics)
        if not quiet:
            noun = "diagnostic" if recorded == 1 else "diagnostics"
            click.echo(f"Recorded {recorded} {noun} in {write_baseline_path}.", err=True)
        errors = [d for d in diagnostics if d.is_error]
        for error in errors:
            click.echo(format_line(error, RunSummary()), err=True)
        sys.exit(EXIT_ERROR if errors else EXIT_CLEAN)

    notes: list[str] = []
    if baseline is not None:
        kept, matched = baseline.filter(d for r in results for d in r.diagnostics)
        keep = {id(d) for d in kept}
        for r in results:
            r.diagnostics = [d for d in r.diagnostics if id(d) in keep]
        stale = baseline.stale(files, [rule.code for rule in settings.enabled_rules(rules)])
        if matched:
            notes.append(f"{matched} baselined {'diagnostic' if matched == 1 else 'diagnostics'}"
                         f" not shown ({baseline_path}).")  # fmt: skip
        if stale:
            notes.append(f"{stale} baselined {'diagnostic is' if stale == 1 else 'diagnostics are'}"
                         f" gone; run --write-baseline {baseline_path} to drop "
                         f"{'it' if stale == 1 else 'them'}.")  # fmt: skip
    if changed is not None:
        for r in results:
            r.diagnostics = [
                d
                for d in r.diagnostics
                if d.is_error or changed.touches(d.path, d.start.row, d.end.row)
            ]
    code = _report(results, settings, mode, output_format, quiet, statistics, exit_zero,
                   show_fixes)  # fmt: skip
    if notes and not quiet:
        for note in notes:
            click.echo(note, err=True)
    sys.exit(code)


def _cache_dir(option: str | None, settings: Settings) -> str:
    if option:
        return option
    configured = settings.extra.get("cache-dir")
    if configured:
        return os.path.join(settings.root, os.path.expanduser(configured))
    return os.path.join(settings.root, DEFAULT_CACHE_DIR)


def _apply_cli_selection(
    settings: Settings,
    rules: Sequence,
    select: tuple[str, ...],
    extend_select: tuple[str, ...],
    ignore: tuple[str, ...],
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
    results: list[FileResult],
    settings: Settings,
    mode: FixMode,
    output_format: str,
    quiet: bool,
    statistics: bool,
    exit_zero: bool,
    show_fixes: bool = False,
) -> int:
    diagnostics = sorted((d for r in results for d in r.diagnostics), key=Diagnostic.sort_key)
    summary = RunSummary(
        fix_enabled=mode.apply,
        unsafe_fixes=mode.unsafe,
        fixed=sum(r.fixes_applied for r in results) if mode.apply else 0,
        files_checked=len(results),
        show_statistics=statistics,
        quiet=quiet,
        show_fixes=show_fixes,
        rule_names={rule.code: rule.name for rule in all_rules()},
    )
    for r in results:
        for key, count in r.left_out.items():
            summary.left_out[key] = summary.left_out.get(key, 0) + count
        for code, count in r.fixed_by_code.items():
            summary.fixed_by_code[code] = summary.fixed_by_code.get(code, 0) + count
        if mode.apply and r.fixed_by_code:
            summary.fixed_by_path[r.path] = dict(r.fixed_by_code)
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
    if output_format in MACHINE_FORMATS:
        # Keep stdout parseable; the human summary goes to stderr.
        extra: list[str] = []
        if show_fixes and summary.fixed_by_path:
            extra.extend(render_fix_summary(summary))
        if statistics and (diagnostics or summary.left_out):
            extra.extend(render_statistics(diagnostics, summary))
        for line in extra:
            click.echo(line, err=True)
    if has_error:
        return EXIT_ERROR
    if diagnostics and not exit_zero:
        return EXIT_FINDINGS
    return EXIT_CLEAN


@main.command()
@click.argument("code", required=False)
@click.option("--all", "show_all", is_flag=True, help="Print every rule's documentation.")
def rule(code: str | None, show_all: bool) -> None:
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


@main.command()
def server() -> None:
    """Run the language server (LSP over stdio) for editors; needs `lifetime-lint[lsp]`."""
    from lifetime_lint.server import ServerUnavailable, serve

    try:
        serve()
    except ServerUnavailable as error:
        click.echo(f"error: {error}", err=True)
        sys.exit(2)


@main.command(
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
    short_help="Run a program and measure the bytes each finding holds.",
)
@click.option("-m", "module", metavar="MODULE", help="Run a module as `python -m MODULE` does.")
@click.option(
    "--include",
    multiple=True,
    metavar="GLOB",
    help="Trace only files matching these globs (default: files under the current folder).",
)
@click.option(
    "--exclude", "exclude_globs", multiple=True, metavar="GLOB", help="Never trace these."
)
@click.option(
    "--device",
    default="auto",
    show_default=True,
    help="Where to read allocated memory: auto (the accelerator, else CPU storages), cpu, cuda, ...",
)
@click.option(
    "--output-format",
    "--format",
    "output_format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
)
@click.option("--save", "save_path", metavar="FILE", help="Write the measurements as JSON.")
@click.option(
    "--html",
    "html_path",
    metavar="FILE",
    help="Write a self-contained page with a memory timeline per function.",
)
@click.option("--config", "config_path", metavar="FILE", help="Use this configuration file.")
@click.option("--isolated", is_flag=True, help="Ignore configuration files.")
@click.option(
    "--compare",
    is_flag=True,
    help="Run the program before and after --fix (on a temporary copy of the current folder) "
    "and report each traced function's peak both ways.",
)
@click.option("--unsafe-fixes", is_flag=True, help="With --compare: apply unsafe fixes too.")
@click.option(
    "--check-output",
    metavar="EXPR",
    help="With --compare: an expression over the program's globals (e.g. `video`) whose value "
    "must be bitwise equal before and after.",
)
@click.option("--dump-output", hidden=True, metavar="FILE")
@click.option("--watch-functions", hidden=True, metavar="FILE")
@click.argument("program", nargs=-1, type=click.UNPROCESSED)
def profile(
    module: str | None,
    include: tuple[str, ...],
    exclude_globs: tuple[str, ...],
    device: str,
    output_format: str,
    save_path: str | None,
    html_path: str | None,
    config_path: str | None,
    isolated: bool,
    compare: bool,
    unsafe_fixes: bool,
    check_output: str | None,
    dump_output: str | None,
    watch_functions: str | None,
    program: tuple[str, ...],
) -> None:
    """Run SCRIPT [ARGS]... (or -m MODULE [ARGS]...) and report each finding's measured bytes.

    Exit status: the program's own, or 2 when it cannot be started.
    """
    from lifetime_lint import profile as profiling

    if module is None and not program:
        raise click.UsageError("give a script to run, or -m MODULE")
    target, arguments = (module, list(program)) if module else (program[0], list(program[1:]))
    if module is None and not os.path.isfile(target):
        raise click.UsageError(f"no such script: {target}")
    scope = profiling.Scope(os.getcwd(), include, exclude_globs)
    if compare:
        passed = ["--device", device] + [f"--include={g}" for g in include]
        passed += [f"--exclude={g}" for g in exclude_globs]
        passed += ["--isolated"] if isolated else []
        passed += ["--config", os.path.abspath(config_path)] if config_path else []
        comparison = profiling.compare(
            target,
            arguments,
            module=module is not None,
            root=os.getcwd(),
            profile_args=passed,
            check_output=check_output,
            unsafe_fixes=unsafe_fixes,
        )
        click.echo(profiling.render_comparison(comparison), nl=False)
        sys.exit(1 if comparison.outputs_equal is False else 0)
    also_watch: list[tuple[str, str]] = []
    if watch_functions:
        with open(watch_functions, encoding="utf-8") as handle:
            also_watch = [(file, name) for file, name in json.load(handle)]
    try:
        result = profiling.run_program(
            target,
            arguments,
            module=module is not None,
            scope=scope,
            device=device,
            config=config_path,
            isolated=isolated,
            also_watch=also_watch,
        )
    except ImportError as error:
        click.echo(
            f"error: `lifetime-lint profile` needs torch to run the program: {error}", err=True
        )
        sys.exit(2)
    except ConfigError as error:
        click.echo(f"error: {error}", err=True)
        sys.exit(2)
    if save_path:
        profiling.save(result, save_path)
    if html_path:
        with open(html_path, "w", encoding="utf-8") as handle:
            handle.write(profiling.render_html(result, os.getcwd()))
    if check_output and dump_output:
        profiling.dump_output(result, check_output, dump_output)
    if output_format == "json":
        click.echo(json.dumps(profiling.to_json(result), indent=2))
    else:
        click.echo(profiling.render_text(result, os.getcwd()), nl=False, err=False)
    sys.exit(result.exit_status)
