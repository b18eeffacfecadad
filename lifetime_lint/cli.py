"""The `lifetime-lint` command line.

`lifetime-lint [check] [PATHS]...` lints (and with `--fix` rewrites) files;
`lifetime-lint rule CODE` prints a rule's documentation.

Exit codes, as Ruff's: 0 nothing left to report; 1 diagnostics remain (also after `--fix`),
or `--diff` found something to fix; 2 bad usage, bad configuration, or a file that could
not be read or parsed (the other files are still checked).

A run answered entirely from the cache imports neither LibCST nor the rules (see
`catalog`): the modules imported here at the top must stay free of both.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, Optional

import click

from lifetime_lint import __version__
from lifetime_lint.cache import DEFAULT_CACHE_DIR
from lifetime_lint.catalog import RuleInfo, configured_cache_dir, load_config, rule_infos
from lifetime_lint.config import (
    DEFAULT_SELECTION,
    ConfigError,
    Overrides,
    SettingsResolver,
    parse_torch_version,
)
from lifetime_lint.diagnostics import Diagnostic
from lifetime_lint.fastpath import importing_for_good
from lifetime_lint.file_errors import file_error, read_error
from lifetime_lint.files import discover
from lifetime_lint.reporters import (
    MACHINE_FORMATS,
    REPORTERS,
    RunSummary,
    format_line,
    render_fix_summary,
    render_statistics,
    render_statistics_json,
)
from lifetime_lint.results import IO_ERROR, FileResult, FixMode
from lifetime_lint.runner import Progress, default_jobs, run_files

if TYPE_CHECKING:  # imported where used: a warm `check` has no baseline, diff or fixes
    from lifetime_lint.baseline import Baseline
    from lifetime_lint.gitdiff import ChangedLines, PendingChangedLines

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2

OUTPUT_FORMAT_ENV = "LIFETIME_LINT_OUTPUT_FORMAT"


class _DefaultToCheck(click.Group):
    """Route `lifetime-lint --fix .` to `lifetime-lint check --fix .`.

    A first word that is neither a command nor an existing path, and looks like a command
    (no `/`, no `.`), is a usage error naming the nearest command: `lifetime-lint chek .`
    must not lint `.` after an E902 about a file named `chek`.
    """

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h", "--version"):
            word = args[0]
            if _looks_like_command(word) and not os.path.lexists(word):
                import difflib  # only for this message: not on every run's import path

                close = difflib.get_close_matches(word, list(self.commands), n=1, cutoff=0.5)
                if not close and word.rstrip("s") in self.commands:
                    close = [word.rstrip("s")]
                hint = (
                    f" Did you mean `{close[0]}`?"
                    if close
                    else f" Commands: {', '.join(sorted(self.commands))}; or name a path."
                )
                raise click.UsageError(f"unknown command or path {word!r}.{hint}", ctx)
        if not args or (
            args[0] not in self.commands and args[0] not in ("--help", "-h", "--version")
        ):
            args = ["check"] + list(args)
        return super().parse_args(ctx, args)


def _looks_like_command(word: str) -> bool:
    return (
        bool(word)
        and not word.startswith("-")
        and "/" not in word
        and os.sep not in word
        and "." not in word
    )


@click.group(cls=_DefaultToCheck, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="lifetime-lint")
def main() -> None:
    """Find and fix GPU-memory lifetime bugs in PyTorch code."""


def _split(values: Sequence[str]) -> list[str]:
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


@dataclass
class Run:
    """The resolved command line of one `check`: what to run and how to report it."""

    mode: FixMode
    output_format: str
    quiet: bool
    statistics: bool
    exit_zero: bool
    show_fixes: bool
    fix_only: bool
    exit_non_zero_on_fix: bool
    color: bool
    output: IO[str]


@main.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--fix/--no-fix", default=None, help="Apply safe fixes in place (--no-fix: don't).")
@click.option("--unsafe-fixes", is_flag=True, help="Also apply fixes that may change behaviour.")
@click.option(
    "--fix-only",
    is_flag=True,
    help="Apply fixes, but report neither leftover diagnostics nor exit 1 for them.",
)
@click.option(
    "--exit-non-zero-on-fix",
    is_flag=True,
    help="Exit 1 if any file was fixed, even if no diagnostics remain.",
)
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
    "--output-format",
    "output_format",
    type=click.Choice(sorted(REPORTERS)),
    help=f"Output format (default: text; also ${OUTPUT_FORMAT_ENV}).",
)
@click.option(
    "--format", "format_alias", type=click.Choice(sorted(REPORTERS)), hidden=True,
    help="Alias of --output-format.",
)  # fmt: skip
@click.option(
    "-o",
    "--output-file",
    type=click.Path(dir_okay=False, writable=True),
    metavar="FILE",
    help="Write the report to FILE instead of stdout.",
)
@click.option("--exit-zero", is_flag=True, help="Exit 0 even if diagnostics remain.")
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    help="Config file for every file (pyproject.toml or a file of top-level keys).",
)
@click.option("--isolated", is_flag=True, help="Ignore every config file; use the defaults.")
@click.option(
    "--target-torch-version",
    metavar="X.Y",
    help="Oldest torch the code must run on (decides which fixes exist).",
)
@click.option(
    "--extend-exclude",
    multiple=True,
    metavar="PATTERNS",
    help="Glob patterns of paths to skip, besides the configured excludes.",
)
@click.option(
    "--respect-gitignore/--no-respect-gitignore",
    default=None,
    help="Skip files git ignores (default: the `respect-gitignore` setting, true).",
)
@click.option(
    "--force-exclude",
    is_flag=True,
    help="Apply excludes to paths named on the command line too (for pre-commit).",
)
@click.option(
    "--stdin-filename",
    metavar="PATH",
    help="With `-` as the path: the name of the file read from stdin (settings follow it).",
)
@click.option("--show-settings", is_flag=True, help="Print the settings for the first file; exit.")
@click.option("--show-files", is_flag=True, help="Print the files that would be checked; exit.")
@click.option("--add-noqa", is_flag=True, help="Add `# noqa: CODE` to every current finding.")
@click.option("-q", "--quiet", is_flag=True, help="Print diagnostics, nothing else.")
@click.option("--statistics", is_flag=True, help="Print only the count of diagnostics per rule.")
@click.option("--show-fixes", is_flag=True, help="After --fix, list the fixes applied per file.")
@click.option(
    "--color",
    type=click.Choice(["auto", "always", "never"]),
    default="auto",
    show_default=True,
    help="Colour the report (auto: on a terminal, unless NO_COLOR is set).",
)
@click.option(
    "--diff-base",
    metavar="REV",
    help="Check only files changed since git revision REV and report only diagnostics "
    "on changed lines (for pull-request gates).",
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
@click.option(
    "--profile",
    "profile_path",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Show each finding's bytes measured by `lifetime-lint profile --save FILE`.",
)
@click.option(
    "--min-bytes",
    metavar="SIZE",
    help="With --profile: report only findings measured to hold at least SIZE (64MiB, 1GiB, "
    "bytes); findings of code the profiled run never executed are left out and counted.",
)
@click.option("--no-cache", is_flag=True, help="Do not read or write the result cache.")
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False),
    metavar="DIR",
    help=f"Where to keep the result cache (default: {DEFAULT_CACHE_DIR}/ beside each "
    "config file, or the `cache-dir` setting).",
)
def check(
    paths: tuple[str, ...],
    fix: bool | None,
    unsafe_fixes: bool,
    fix_only: bool,
    exit_non_zero_on_fix: bool,
    diff_only: bool,
    select: tuple[str, ...],
    extend_select: tuple[str, ...],
    ignore: tuple[str, ...],
    output_format: str | None,
    format_alias: str | None,
    output_file: str | None,
    exit_zero: bool,
    config_path: str | None,
    isolated: bool,
    target_torch_version: str | None,
    extend_exclude: tuple[str, ...],
    respect_gitignore: bool | None,
    force_exclude: bool,
    stdin_filename: str | None,
    show_settings: bool,
    show_files: bool,
    add_noqa: bool,
    quiet: bool,
    statistics: bool,
    show_fixes: bool,
    color: str,
    diff_base: str | None,
    baseline_path: str | None,
    write_baseline_path: str | None,
    jobs: int | None,
    profile_path: str | None,
    min_bytes: str | None,
    no_cache: bool,
    cache_dir: str | None,
) -> None:
    """Check PATHS (default: the current folder) for GPU-memory lifetime bugs."""
    above = _folders_above(paths)  # before any config is read (the run memo's snapshot)
    try:
        output_format = _output_format(output_format, format_alias)
        apply = bool(fix or fix_only) and fix is not False
        mode = FixMode(apply=apply and not diff_only, unsafe=unsafe_fixes, diff_only=diff_only)
        if diff_base and mode.fixing:
            raise ConfigError("--diff-base selects what to report; it cannot be combined with "
                              "--fix or --diff (which act on whole files)")  # fmt: skip
        if add_noqa and mode.fixing:
            raise ConfigError("--add-noqa cannot be combined with --fix or --diff")
        if config_path and isolated:
            raise ConfigError("--config and --isolated exclude each other")
        overrides = Overrides(
            select=_split(select) if select else None,
            extend_select=_split(extend_select),
            ignore=_split(ignore),
            extend_exclude=_split(extend_exclude),
            target_torch_version=parse_torch_version(target_torch_version, "--target-torch-version")
            if target_torch_version
            else None,
            respect_gitignore=respect_gitignore,
        )
        if min_bytes is not None:
            # The run measured every finding; the bytes, not the static significance bar,
            # decide what is shown (`profile` lints at every level too).
            from lifetime_lint.analysis.significance import SETTING

            overrides.extra[SETTING] = "low"
        # The diff base's git processes run while the rules (and LibCST) are imported.
        pending = (
            _start_changed_lines(diff_base)
            if diff_base and not show_settings and list(paths) != ["-"]
            else None
        )
        caches = _CacheRoots(cache_dir, no_cache)
        if config_path is not None and not os.path.isfile(config_path):
            raise ConfigError(f"{config_path}: config file not found")
        resolver = SettingsResolver(
            lambda path: load_config(path, caches.for_config(path)),
            overrides,
            config=os.path.abspath(config_path) if config_path else None,
            isolated=isolated,
        )
        with importing_for_good():  # the rules and LibCST, unless their snapshot is current
            rules = rule_infos(caches.for_config(resolver.config_for(os.getcwd())))
        overrides.validate([rule.code for rule in rules])
        stdin = list(paths) == ["-"]
        if stdin and (show_files or add_noqa or diff_base or write_baseline_path):
            raise ConfigError("reading `-` (stdin) cannot be combined with --show-files, "
                              "--add-noqa, --diff-base or --write-baseline")  # fmt: skip
        if show_settings:
            target = stdin_filename if stdin else (paths[0] if paths else ".")
            click.echo(_render_settings(target or ".", resolver, rules))
            sys.exit(EXIT_CLEAN)
        changed = _changed_lines(pending) if pending is not None else None
        baseline = _load_baseline(baseline_path) if baseline_path else None
        saved_profile, min_size = _load_profile(profile_path, min_bytes)
    except ConfigError as error:
        click.echo(f"lifetime-lint: error: {error}", err=True)
        sys.exit(EXIT_ERROR)

    out = open(output_file, "w", encoding="utf-8") if output_file else sys.stdout  # noqa: SIM115
    run = Run(
        mode=mode,
        output_format=output_format,
        quiet=quiet,
        statistics=statistics,
        exit_zero=exit_zero,
        show_fixes=show_fixes,
        fix_only=fix_only and fix is not False,
        exit_non_zero_on_fix=exit_non_zero_on_fix,
        color=_use_color(color, out),
        output=out,
    )
    try:
        if stdin:
            sys.exit(_check_stdin(stdin_filename, resolver, rules, run, force_exclude))
        # `--diff` writes nothing but its report: replayed as a `check` is. `--fix` writes.
        memo = _memo_inputs(caches, resolver, above, no_cache or stdin or bool(
            output_file or diff_base or baseline_path or write_baseline_path or add_noqa
            or profile_path or min_bytes or mode.apply))  # fmt: skip
        try:
            files, missing = discover(paths or ["."], resolver.for_path,
                                      force_exclude=force_exclude,
                                      record=memo.seen if memo else None,
                                      only=None if changed is None or show_files
                                      else changed.paths())  # fmt: skip
        except ConfigError as error:  # a broken config found below a named folder
            click.echo(f"lifetime-lint: error: {error}", err=True)
            sys.exit(EXIT_ERROR)
        if show_files:
            for path in sorted(files):
                click.echo(path, file=out)
            sys.exit(EXIT_CLEAN)
        if changed is not None:
            # Files without a changed line cannot carry a reportable diagnostic: not parsed.
            files = [path for path in files if changed.rows(path) != set()]
        results: list[FileResult] = [_missing(path) for path in missing]
        try:
            results.extend(_run_grouped(files, resolver, rules, mode, jobs, caches, quiet,
                                        memo.digests if memo else None))  # fmt: skip
        except ConfigError as error:
            click.echo(f"lifetime-lint: error: {error}", err=True)
            sys.exit(EXIT_ERROR)

        if not quiet:
            for warning in _runtime_module_warnings(resolver):
                click.echo(f"lifetime-lint: warning: {warning}", err=True)

        if write_baseline_path:
            sys.exit(_write_baseline(write_baseline_path, results, quiet))
        if add_noqa:
            sys.exit(_add_noqa(results, quiet))

        enabled = {rule.code for s in resolver.all_loaded() for rule in s.enabled_rules(rules)}
        notes = _filter(results, files, sorted(enabled), baseline, baseline_path, changed)
        if saved_profile is not None:
            notes.extend(_filter_by_profile(results, saved_profile, min_size, min_bytes))
        off = {rule.code for s in resolver.all_loaded() for rule in s.off_by_default(rules)}
        code = _report(results, rules, run, sorted(off - enabled))
        if notes and not quiet:
            for note in notes:
                click.echo(note, err=True)
        if memo is not None:
            memo.offer(paths or ["."], files, missing, results, resolver, config_path)
        sys.exit(code)
    finally:
        if output_file:
            out.close()


class _MemoInputs:
    """What this `check` read, for the run memo (`fastpath`) when its output may be
    replayed: only in a process that records one, and never for `--fix` (a `--diff`
    writes nothing, so it may be), stdin, an output file, a diff base, a baseline,
    --add-noqa or a profile."""

    def __init__(self, cache_root: str) -> None:
        from lifetime_lint.files import Seen

        self.cache_root = cache_root
        self.seen = Seen()
        self.above: dict[str, tuple[str, ...] | None] = {}
        # What each file read was checked from (`runner.run_files`), and the configs and
        # project files from here up before any was read: racily-clean inputs' contents.
        self.digests: dict[str, bytes] = {}

    def offer(
        self,
        named: Sequence[str],
        files: Sequence[str],
        missing: Sequence[str],
        results: Sequence[FileResult],
        resolver: SettingsResolver,
        config_path: str | None,
    ) -> None:
        from lifetime_lint import fastpath
        from lifetime_lint.project import package_facts_read
        from lifetime_lint.runner import Progress, pool_started_without_fork
        from lifetime_lint.vendor import RUNTIME_MODULE_SETTING

        if Progress.drawn_in_process or any(d.is_error for r in results for d in r.diagnostics):
            return
        if pool_started_without_fork():
            return  # its workers' own streams: what they wrote was not seen
        if any(s.extra.get(RUNTIME_MODULE_SETTING) for s in resolver.all_loaded()):
            return  # its warning depends on a module's files elsewhere
        inputs = fastpath.RunInputs(self.cache_root)
        inputs.walked = dict(self.seen.listings)
        inputs.files = [os.path.abspath(p) for p in [*files, *missing, *named]
                        if not os.path.isdir(p)]  # fmt: skip
        inputs.cache_tags = list(self.seen.cache_tags)
        inputs.extra_files = []
        if self.seen.ignored is not None:
            inputs.extra_files += self.seen.ignored.inputs()
        consumed = resolver.configs_read()
        inputs.required = [path for path in consumed if path is not None]
        if config_path:
            inputs.extra_files.append(os.path.abspath(config_path))
            inputs.required.append(os.path.abspath(config_path))
        inputs.folders = set(inputs.walked).union(
            fastpath.folders_up([os.getcwd(), *named, *files, *missing])
        )
        # LL004/LL005's package fact reads a module's sibling files (project.cuda_package).
        package_files, package_folders = package_facts_read()
        inputs.extra_files += package_files
        inputs.folders.update(package_folders)
        inputs.above = self.above
        inputs.digests = dict(self.digests)
        if self.seen.ignored is not None and self.seen.ignored.digests:
            inputs.digests.update(self.seen.ignored.digests)
        fastpath.offer(inputs)


_Above = tuple[dict[str, Optional[tuple[str, ...]]], dict[str, bytes]]


def _folders_above(paths: Sequence[str]) -> _Above | None:
    """The special names in every folder from the current one and each named path up,
    listed before the run reads any of them, and the digests of those files, when this
    process records a run memo."""
    from lifetime_lint import fastpath

    if not fastpath.recording():
        return None
    named = [p for p in paths if p != "-"]
    listings = {f: fastpath.special_listing(f) for f in fastpath.folders_up([os.getcwd(), *named])}
    specials = [os.path.join(folder, name) for folder, names in listings.items()
                for name in names or () if name != ".git"]  # fmt: skip
    return listings, fastpath.file_digests(specials)


def _memo_inputs(
    caches: _CacheRoots,
    resolver: SettingsResolver,
    above: _Above | None,
    excluded: bool,
) -> _MemoInputs | None:
    if excluded or above is None:
        return None
    root = caches.for_config(resolver.config_for(os.getcwd()))
    if not root:
        return None
    memo = _MemoInputs(root)
    memo.above, memo.digests = above[0], dict(above[1])
    return memo


def _start_changed_lines(diff_base: str) -> PendingChangedLines:
    from lifetime_lint.gitdiff import start_changed_lines

    return start_changed_lines(diff_base)


def _changed_lines(pending: PendingChangedLines) -> ChangedLines:
    from lifetime_lint.gitdiff import GitDiffError

    try:
        return pending.result()
    except GitDiffError as error:
        raise ConfigError(str(error)) from None


def _load_baseline(path: str) -> Baseline:
    from lifetime_lint.baseline import Baseline, BaselineError

    try:
        return Baseline.load(path)
    except BaselineError as error:
        raise ConfigError(str(error)) from None


def _runtime_module_warnings(resolver: SettingsResolver) -> list[str]:
    """What to say about each config's `runtime-module` (a setting other modules add, so
    it lives in `extra`: a config without extra keys has none, and vendor is not imported)."""
    warnings = []
    for loaded in resolver.all_loaded():
        if not loaded.extra:
            continue
        from lifetime_lint.vendor import configured_runtime_module, runtime_module_warning

        runtime_module = configured_runtime_module(loaded)
        warning = runtime_module and runtime_module_warning(runtime_module, loaded.root)
        if warning:
            warnings.append(warning)
    return warnings


def _fix_report(results: Sequence[FileResult], unsafe: bool) -> list[str]:
    from lifetime_lint.vendor import fix_report

    return fix_report(results, unsafe)


def _output_format(option: str | None, alias: str | None) -> str:
    if option or alias:
        return option or alias  # type: ignore[return-value]
    configured = os.environ.get(OUTPUT_FORMAT_ENV, "").strip()
    if not configured:
        return "text"
    if configured not in REPORTERS:
        raise ConfigError(f"${OUTPUT_FORMAT_ENV}={configured!r}: unknown output format "
                          f"(valid: {', '.join(sorted(REPORTERS))})")  # fmt: skip
    return configured


def _use_color(choice: str, stream: IO[str]) -> bool:
    if choice != "auto":
        return choice == "always"
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return hasattr(stream, "isatty") and stream.isatty() and os.environ.get("TERM") != "dumb"


class _CacheRoots:
    """Where each config's cache lives: --cache-dir, its `cache-dir`, or beside it."""

    def __init__(self, option: str | None, disabled: bool) -> None:
        self.option = os.path.abspath(option) if option else None
        self.disabled = disabled

    def for_config(self, config_path: str | None) -> str | None:
        if self.disabled:
            return None
        if self.option:
            return self.option
        configured = configured_cache_dir(config_path)
        if configured:
            return configured
        root = os.path.dirname(config_path) if config_path else os.getcwd()
        return os.path.join(root, DEFAULT_CACHE_DIR)


def _run_grouped(
    files: Sequence[str],
    resolver: SettingsResolver,
    rules: Sequence[RuleInfo],
    mode: FixMode,
    jobs: int | None,
    caches: _CacheRoots,
    quiet: bool,
    digests: dict[str, bytes] | None = None,
) -> list[FileResult]:
    """Check the files, each with its own config's settings (one run per config);
    `digests`: filled with each read file's content digest (`runner.run_files`)."""
    groups: dict[str | None, list[int]] = {}
    for index, path in enumerate(files):
        groups.setdefault(resolver.config_for(path), []).append(index)
    progress = Progress.for_terminal(len(files), quiet)
    results: list[FileResult | None] = [None] * len(files)
    for config, indices in groups.items():
        chosen = [files[i] for i in indices]
        done = run_files(
            chosen,
            resolver.for_config(config),
            rules,
            mode,
            jobs=jobs or default_jobs(len(files)),
            cache_dir=caches.for_config(config),
            progress=progress,
            digests=digests,
        )
        for index, result in zip(indices, done):
            results[index] = result
    progress.close()
    return [result for result in results if result is not None]


def _filter(
    results: list[FileResult],
    files: Sequence[str],
    enabled_codes: Sequence[str],
    baseline: Baseline | None,
    baseline_path: str | None,
    changed: ChangedLines | None,
) -> list[str]:
    """Drop baselined diagnostics and, under --diff-base, those on unchanged lines."""
    notes: list[str] = []
    if baseline is not None:
        kept, matched = baseline.filter(d for r in results for d in r.diagnostics)
        keep = {id(d) for d in kept}
        for r in results:
            r.diagnostics = [d for d in r.diagnostics if id(d) in keep]
            r.found = None
        stale = baseline.stale(files, enabled_codes)
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
            r.found = None
    return notes


def _load_profile(path: str | None, min_bytes: str | None) -> tuple[Any, int | None]:
    """`--profile FILE` and `--min-bytes SIZE`, checked before anything is linted."""
    if path is None and min_bytes is None:
        return None, None  # the warm path imports nothing more (no LibCST)
    from lifetime_lint.profile import ProfileError, SavedProfile, parse_size

    if min_bytes is not None and path is None:
        raise ConfigError("--min-bytes needs --profile FILE (a run's measurements)")
    try:
        size = None if min_bytes is None else parse_size(min_bytes)
    except ValueError as error:
        raise ConfigError(f"--min-bytes: {error}") from None
    if path is None:
        return None, size
    try:
        return SavedProfile.load(path), size
    except ProfileError as error:
        raise ConfigError(str(error)) from None


def _filter_by_profile(
    results: list[FileResult], saved: Any, min_size: int | None, min_bytes: str | None
) -> list[str]:
    """Attach the profile's measurements; under --min-bytes keep only what it proved."""
    from lifetime_lint.profile import apply_profile

    kept, counts = apply_profile([r.diagnostics for r in results], saved, min_size)
    for r, diagnostics in zip(results, kept):
        r.diagnostics = diagnostics
        r.found = None

    def findings(count: int) -> str:
        return f"{count} {'finding' if count == 1 else 'findings'}"

    notes = []
    if counts.below:
        notes.append(f"{findings(counts.below)} measured below {min_bytes} not shown "
                     f"({saved.path}).")  # fmt: skip
    if counts.not_run:
        notes.append(f"{findings(counts.not_run)} in code the profiled run never executed not "
                     f"shown ({saved.path}).")  # fmt: skip
    if counts.unmeasured:
        notes.append(f"{findings(counts.unmeasured)} in files the profiled run executed but not "
                     "in the profile (new or edited since it was saved): shown, unmeasured.")  # fmt: skip
    return notes


def _write_baseline(path: str, results: Sequence[FileResult], quiet: bool) -> int:
    from lifetime_lint.baseline import write_baseline

    diagnostics = [d for r in results for d in r.diagnostics]
    recorded = write_baseline(path, diagnostics)
    if not quiet:
        noun = "diagnostic" if recorded == 1 else "diagnostics"
        click.echo(f"Recorded {recorded} {noun} in {path}.", err=True)
    errors = [d for d in diagnostics if d.is_error]
    for error in errors:
        click.echo(format_line(error, RunSummary()), err=True)
    return EXIT_ERROR if errors else EXIT_CLEAN


def _add_noqa(results: Sequence[FileResult], quiet: bool) -> int:
    from lifetime_lint.add_noqa import add_noqa

    added = 0
    failed = False
    for r in results:
        for d in r.diagnostics:
            if d.is_error:
                click.echo(format_line(d, RunSummary()), err=True)
                failed = True
        outcome = add_noqa(r.path, r.diagnostics)
        added += outcome.added
        if outcome.error:
            click.echo(f"lifetime-lint: error: {outcome.error}", err=True)
            failed = True
    if not quiet:
        noun = "directive" if added == 1 else "directives"
        click.echo(f"Added {added} noqa {noun}.", err=True)
    return EXIT_ERROR if failed else EXIT_CLEAN


def _check_stdin(
    filename: str | None,
    resolver: SettingsResolver,
    rules: Sequence[RuleInfo],
    run: Run,
    force_exclude: bool,
) -> int:
    """`-`: lint stdin as `filename` (default `-`); with --fix the fixed source (or, if
    nothing applies, the source unchanged) goes to stdout and the report to stderr.
    With --force-exclude an excluded `filename` is not checked (its source is echoed
    under --fix, so an editor's format-on-save keeps the buffer)."""
    from lifetime_lint.api import check_text
    from lifetime_lint.source import SourceError, SourceFile

    name = filename or "-"
    data = sys.stdin.buffer.read()
    try:
        settings = resolver.for_path(name if filename else os.getcwd())
        text = SourceFile.from_bytes(name, data).text
    except ConfigError as error:
        click.echo(f"lifetime-lint: error: {error}", err=True)
        return EXIT_ERROR
    except SourceError as error:
        result = FileResult(name, [_file_error(name, f"Failed to read {name}: {error}")])
        return _report([result], rules, run)
    if filename and force_exclude and settings.is_excluded(name):
        if run.mode.apply:
            sys.stdout.write(text)
        return EXIT_CLEAN
    outcome = check_text(text, name, settings, fix=run.mode.fixing, unsafe_fixes=run.mode.unsafe)
    result = FileResult(
        name,
        outcome.diagnostics,
        fixes_applied=outcome.fixes_applied,
        fixed_by_code=outcome.fixed_by_code,
        diff=None if outcome.diff is None else outcome.diff.encode("utf-8"),
        fixed_text=outcome.fixed_text,
        found=outcome.found,
    )
    if run.mode.apply:
        sys.stdout.write(outcome.fixed_text if outcome.fixed_text is not None else text)
        sys.stdout.flush()
        run.output = sys.stderr if run.output is sys.stdout else run.output
    return _report([result], rules, run)


def _missing(path: str) -> FileResult:
    return FileResult(path, [read_error(path, "No such file or directory")])


def _file_error(path: str, message: str) -> Diagnostic:
    return file_error(path, IO_ERROR, message)


def _report(
    results: list[FileResult],
    rules: Sequence[RuleInfo],
    run: Run,
    off_by_default: Sequence[str] = (),  # rules left off only by the default rule set
) -> int:
    mode = run.mode
    diagnostics = sorted((d for r in results for d in r.diagnostics), key=Diagnostic.sort_key)
    found = sorted((d for r in results for d in r.original_diagnostics), key=Diagnostic.sort_key)
    fixed = sum(r.fixes_applied for r in results) if mode.apply else 0
    summary = RunSummary(
        fix_enabled=mode.apply,
        unsafe_fixes=mode.unsafe,
        fixed=fixed,
        files_checked=len(results),
        show_statistics=False,
        quiet=run.quiet,
        show_fixes=run.show_fixes,
        rule_names={rule.code: rule.name for rule in rules},
        color=run.color,
        off_by_default=list(off_by_default),
    )
    for r in results:
        for key, count in r.left_out.items():
            summary.left_out[key] = summary.left_out.get(key, 0) + count
        for code, count in r.fixed_by_code.items():
            summary.fixed_by_code[code] = summary.fixed_by_code.get(code, 0) + count
        if mode.apply and r.fixed_by_code:
            summary.fixed_by_path[r.path] = dict(r.fixed_by_code)
    errors = [d for d in diagnostics if d.is_error]
    out = run.output

    def emit(text: str | bytes, err: bool = False) -> None:
        # click strips ANSI codes from a stream that is not a terminal unless told not to.
        click.echo(text, file=sys.stderr if err else out, nl=False, color=run.color or None)

    if run.statistics:
        # Counts only, of the findings as found: the same tree gives the same table under
        # check, --fix and --diff. File errors are still reported, on stderr.
        for error in errors:
            emit(format_line(error, summary) + "\n", err=True)
        counted = [d for d in found if not d.is_error]
        if run.output_format == "json":
            emit(render_statistics_json(counted, summary))
        else:
            rows = render_statistics(counted, summary)
            emit("".join(row + "\n" for row in rows))
            if not run.quiet:  # stdout holds the counts only; the totals go to stderr
                emit(_statistics_footer(results, counted, summary, mode), err=True)
    elif mode.diff_only:
        for r in results:
            if r.diff:
                emit(r.diff)
        for error in errors:
            emit(format_line(error, summary) + "\n", err=True)
        if not run.quiet:
            emit("".join(line + "\n" for line in _fix_report(results, mode.unsafe)), err=True)
            fixable = sum(r.fixes_applied for r in results)
            if fixable:
                emit(f"Would apply {fixable} {'fix' if fixable == 1 else 'fixes'}.\n", err=True)
            else:
                emit("No fixes available.\n", err=True)
    elif run.fix_only:
        for error in errors:
            emit(format_line(error, summary) + "\n", err=True)
        if not run.quiet:
            emit(f"Fixed {fixed} {'error' if fixed == 1 else 'errors'}.\n" if fixed
                 else "No errors fixed.\n")  # fmt: skip
            if run.show_fixes and summary.fixed_by_path:
                emit("".join(line + "\n" for line in render_fix_summary(summary)))
    else:
        emit(REPORTERS[run.output_format](diagnostics, summary))
        if mode.apply and not run.quiet:
            emit("".join(line + "\n" for line in _fix_report(results, mode.unsafe)), err=True)
        if run.output_format in MACHINE_FORMATS and run.show_fixes and summary.fixed_by_path:
            # Keep stdout parseable; the human summary goes to stderr.
            emit("".join(line + "\n" for line in render_fix_summary(summary)), err=True)

    if errors:
        return EXIT_ERROR
    if run.exit_non_zero_on_fix and (fixed or (mode.diff_only and any(r.diff for r in results))):
        return EXIT_FINDINGS
    if mode.diff_only:
        return EXIT_FINDINGS if any(r.diff for r in results) else EXIT_CLEAN
    if run.fix_only or run.exit_zero:
        return EXIT_CLEAN
    return EXIT_FINDINGS if diagnostics else EXIT_CLEAN


def _statistics_footer(
    results: Sequence[FileResult], counted: Sequence[Diagnostic], summary: RunSummary,
    mode: FixMode,
) -> str:  # fmt: skip
    total = len(counted)
    if not total:
        return "All checks passed!\n"
    noun = "error" if total == 1 else "errors"
    if mode.apply:
        left = sum(1 for r in results for d in r.diagnostics if not d.is_error)
        return f"Found {total} {noun} ({summary.fixed} fixed, {left} remaining).\n"
    if mode.diff_only:
        fixable = sum(r.fixes_applied for r in results)
        return f"Found {total} {noun}; --fix would apply {fixable}.\n"
    return f"Found {total} {noun}.\n"


def _render_settings(target: str, resolver: SettingsResolver, rules: Sequence[RuleInfo]) -> str:
    """`--show-settings`: the config file and resolved settings that apply to `target`."""
    config = resolver.config_for(target)
    settings = resolver.for_path(target)
    enabled = settings.enabled_rules(rules)
    values: dict[str, Any] = {
        "select": DEFAULT_SELECTION if settings.select is None else settings.select,
        "extend-select": settings.extend_select,
        "ignore": settings.ignore,
        # The default rule set: what runs when `select` is not given.
        "default-rules": [rule.code for rule in rules if rule.default_enabled],
        "off-by-default": [rule.code for rule in rules if not rule.default_enabled],
        "enabled-rules": [rule.code for rule in enabled],
        "exclude": settings.exclude,
        "extend-exclude": settings.extend_exclude,
        "respect-gitignore": settings.respect_gitignore,
        "per-file-ignores": settings.per_file_ignores,
        "target-torch-version": ".".join(map(str, settings.target_torch_version)),
        **settings.extra,
    }
    lines = [
        f"Resolved settings for: {os.path.abspath(target)}",
        f"Settings path: {config or 'none (defaults)'}",
        f"Project root: {settings.root}",
        "",
    ]
    lines.extend(f"{key} = {json.dumps(value)}" for key, value in values.items())
    for rule in enabled:
        lines.append("")
        lines.append(f"[{rule.name}]  # {rule.code}")
        for key, value in settings.options_for(rule).items():
            lines.append(f"{key} = {json.dumps(value)}")
    return "\n".join(lines)


@main.command("vendor-runtime")
@click.argument("path", type=click.Path(dir_okay=False))
def vendor_runtime(path: str) -> None:
    """Write the fixes' helpers to PATH as one self-contained file (standard library and
    torch only); then set `runtime-module` to its module name under [tool.lifetime-lint]."""
    from lifetime_lint.vendor import VendorError
    from lifetime_lint.vendor import write as write_vendored_runtime

    try:
        written = write_vendored_runtime(path)
    except (VendorError, OSError) as error:
        click.echo(f"lifetime-lint: error: {error}", err=True)
        sys.exit(EXIT_ERROR)
    click.echo(f"Wrote {written} (lifetime-lint {__version__} runtime).", err=True)


@main.command()
@click.argument("code", required=False)
@click.option("--all", "show_all", is_flag=True, help="Print every rule's documentation.")
def rule(code: str | None, show_all: bool) -> None:
    """Print the documentation of rule CODE (of every rule with --all; without either, the
    list of rules and whether each is on by default)."""
    from lifetime_lint.registry import all_rules, rule_by_selector

    if show_all:
        chosen = all_rules()
    elif code:
        chosen = rule_by_selector(code)
        if not chosen:
            click.echo(f"lifetime-lint: error: unknown rule {code!r}", err=True)
            sys.exit(EXIT_ERROR)
    else:  # the list of rules: code, name, whether it is on by default, fix availability
        for r in all_rules():
            default = "on" if r.default_enabled else "off by default"
            click.echo(f"{r.code}\t{r.name:<32}\t{default:<14}\tfix {r.fix_availability}")
        return
    click.echo("\n\n".join(render_rule_doc(r) for r in chosen))


def render_rule_doc(rule_class) -> str:
    lines = [f"# {rule_class.name} ({rule_class.code})", ""]
    lines.append(f"Fix is {rule_class.fix_availability} available.")
    if not rule_class.default_enabled:
        lines.append("")
        lines.append(
            f'Off by default: `extend-select = ["{rule_class.code}"]` (or `select = ["ALL"]`) '
            "turns it on."
        )
    lines.append("")
    lines.append(rule_class.documentation())
    if rule_class.options:
        lines.append("")
        lines.append(f"## Settings (`[tool.lifetime-lint.{rule_class.name}]`)")
        for option in rule_class.options:
            lines.append(f"- `{option.name}` (default {option.default!r}): {option.doc}")
    return "\n".join(lines)


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
    type=click.Choice(sorted(REPORTERS)),
    default="text",
    show_default=True,
    help="text: the ranked table; json: the profile (what --save writes); the other formats "
    "are check's, each finding with its measurement.",
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
    elif output_format == "text":
        click.echo(profiling.render_text(result, os.getcwd()), nl=False, err=False)
    else:
        diagnostics = sorted((f.diagnostic for f in result.findings), key=Diagnostic.sort_key)
        names = {rule.code: rule.name for rule in rule_infos(None)}
        summary = RunSummary(rule_names=names, quiet=True, files_checked=len(result.functions))
        click.echo(REPORTERS[output_format](diagnostics, summary), nl=False)
    sys.exit(result.exit_status)


if __name__ == "__main__":  # pragma: no cover
    main()
