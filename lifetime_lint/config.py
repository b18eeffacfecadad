"""Configuration: `[tool.lifetime-lint]` in pyproject.toml (or the top-level keys of a
`lifetime-lint.toml`/`.lifetime-lint.toml`), validated strictly, resolved per file.

An unknown key, a value of the wrong type or an unknown name inside a value is an error
that names the file, the line and the key: a typo in a CI gate's config must not silently
disable a rule. A config file that does not parse is an error too, never skipped in favour
of a parent folder's config or the defaults.

Each file is checked with the settings of its nearest config file (searched from the
file's folder upwards, as Ruff does); `--config FILE` gives every file one config and
`--isolated` ignores them all. Command-line options (`Overrides`) apply on top of each.

Rule selection follows Ruff: `select` (default: the default rule set, every rule whose
`default_enabled` is true), plus `extend-select`, minus `ignore`; a selector is a code, a
code prefix (`LL00`) or `ALL`, and the most specific selector wins (an ignore wins a tie).
The default set counts as least specific, like `ALL`: `ignore = ["LL00"]` still wins over it,
and `extend-select = ["LL005"]` turns on a rule that is off by default.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from lifetime_lint.globs import glob_matcher
from lifetime_lint.lazy_regex import compile_lazily

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

if TYPE_CHECKING:  # pragma: no cover - importing rules imports LibCST
    from lifetime_lint.rule import Rule

CONFIG_TABLE = "lifetime-lint"
# Looked for in each folder, in this order (Ruff's: .ruff.toml, ruff.toml, pyproject.toml).
# The dedicated files hold the keys at the top level; pyproject.toml under [tool.lifetime-lint].
CONFIG_FILENAMES = (".lifetime-lint.toml", "lifetime-lint.toml", "pyproject.toml")

DEFAULT_EXCLUDE = (
    ".bzr", ".direnv", ".eggs", ".git", ".git-rewrite", ".hg", ".ipynb_checkpoints",
    ".mypy_cache", ".nox", ".pants.d", ".pyenv", ".pytest_cache", ".pytype", ".ruff_cache",
    ".svn", ".tox", ".venv", ".vscode", "__pypackages__", "__pycache__", "_build",
    "buck-out", "build", "dist", "node_modules", "site-packages", "venv",
)  # fmt: skip

DEFAULT_TARGET_TORCH = (2, 6)
# How `select` reads when it is not given (`--show-settings`, the cache fingerprint).
DEFAULT_SELECTION = "default"  # the first release with torch.accelerator


class RuleLike(Protocol):
    """A rule class, or its `catalog.RuleInfo` (what selection and caching need)."""

    @property
    def code(self) -> str: ...

    @property
    def default_enabled(self) -> bool: ...

    def option_defaults(self) -> dict[str, Any]: ...


R = TypeVar("R", bound=RuleLike)


class ConfigError(Exception):
    """Bad configuration or bad command-line selection; exit code 2."""


# key -> (type, description). Adding a setting is one entry here: its value, checked for
# type, lands in `Settings.extra[key]` (and in the cache key); a check of the value beyond
# its type goes in KEY_VALIDATORS (returns an error message, or None).
GLOBAL_KEYS: dict[str, tuple[type, str]] = {
    "select": (list, 'rule codes or prefixes to enable (default: the default set; "ALL")'),
    "extend-select": (list, "rule codes or prefixes to enable in addition to `select`"),
    "ignore": (list, "rule codes or prefixes to disable"),
    "exclude": (list, "glob patterns of paths to skip (replaces the defaults)"),
    "extend-exclude": (list, "glob patterns of paths to skip, in addition to the defaults"),
    "per-file-ignores": (dict, "glob (relative to the config file) -> list of codes to ignore"),
    "target-torch-version": (str, 'oldest torch the project supports, e.g. "2.9"'),
    "cache-dir": (str, "where the result cache lives, relative to the config file's folder"),
    "respect-gitignore": (bool, "skip files ignored by git (.gitignore, info/exclude, global)"),
    "runtime-module": (str, "module the fixes import their helpers from (see vendor-runtime)"),
    # LL004/LL005 (lifetime_lint.devices): what the portability rules check.
    "portability": (str, '"library" (default: library code only) or "strict" (everything)'),
    "non-library": (list, "globs of tests, examples, scripts... (replaces the defaults)"),
    "extend-non-library": (list, "more globs of non-library code, in addition to the defaults"),
}


KEY_VALIDATORS: dict[str, Callable[[Any], str | None]] = {}


@dataclass
class Settings:
    """The resolved settings of one run."""

    select: list[str] | None = None  # None: the default rule set
    extend_select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=lambda: list(DEFAULT_EXCLUDE))
    extend_exclude: list[str] = field(default_factory=list)
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    target_torch_version: tuple[int, int] = DEFAULT_TARGET_TORCH
    rule_options: dict[str, dict[str, Any]] = field(default_factory=dict)  # by rule code
    config_path: str | None = None
    root: str = field(default_factory=os.getcwd)
    respect_gitignore: bool = True
    extra: dict[str, Any] = field(default_factory=dict)  # keys added by other modules

    # -- selection ----------------------------------------------------------------
    def enabled_rules(self, rules: Sequence[R]) -> list[R]:
        """The selected rules among `rules` (rule classes or `catalog.RuleInfo`s)."""
        return [rule for rule in rules if self.is_selected(rule)]

    def is_selected(self, rule: RuleLike) -> bool:
        chosen = _specificity(rule.code, self.extend_select)
        if self.select is None:
            if rule.default_enabled:
                chosen = max(chosen, 0)  # as least specific as `ALL`
        else:
            chosen = max(chosen, _specificity(rule.code, self.select))
        return chosen >= 0 and chosen > _specificity(rule.code, self.ignore)

    def off_by_default(self, rules: Sequence[R]) -> list[R]:
        """Rules this run leaves off only because they are not in the default rule set
        (what `--statistics` names, with the line that turns them on)."""
        return [
            rule
            for rule in rules
            if not rule.default_enabled
            and self.select is None
            and not self.is_selected(rule)
            and _specificity(rule.code, self.ignore) < 0
        ]

    def options_for(self, rule: Any) -> dict[str, Any]:
        options = rule.option_defaults()
        options.update(self.rule_options.get(rule.code, {}))
        return options

    # -- paths --------------------------------------------------------------------
    def relative(self, path: str) -> str:
        try:
            rel = os.path.relpath(os.path.abspath(path), self.root)
        except ValueError:  # another drive on Windows
            return os.path.abspath(path).replace(os.sep, "/")
        return rel.replace(os.sep, "/")

    def is_excluded(self, path: str, base: str | None = None) -> bool:
        """Whether a path matches an exclude pattern.

        Patterns with a `/` match the path relative to the config's folder; bare names
        (`build`, `*.pyi`) match any component below `base` (the folder being walked),
        so a checkout that happens to live under a folder named `build` is still checked.
        """
        patterns = list(self.exclude) + list(self.extend_exclude)
        rel = self.relative(path)
        if base is not None:
            below = os.path.relpath(os.path.abspath(path), os.path.abspath(base))
            below = below.replace(os.sep, "/") if below != "." else os.path.basename(path)
        else:
            below = rel if not rel.startswith("../") else os.path.basename(path)
        return _matches_any(rel, below, patterns)

    def ignored_codes(self, path: str) -> list[str]:
        rel = self.relative(path)
        codes: list[str] = []
        for pattern, ignored in self.per_file_ignores.items():
            if _path_matches(rel, pattern):
                codes.extend(ignored)
        return codes

    def fingerprint(self) -> str:
        """A stable description of everything that changes results (for caches)."""
        return repr(
            (
                DEFAULT_SELECTION if self.select is None else sorted(self.select),
                sorted(self.extend_select), sorted(self.ignore),
                sorted((k, tuple(v)) for k, v in self.per_file_ignores.items()),
                self.target_torch_version,
                sorted((code, sorted(opts.items(), key=repr))
                       for code, opts in self.rule_options.items()),
            )
        )  # fmt: skip


def code_matches(code: str, selector: str) -> bool:
    return selector == "ALL" or code.startswith(selector)


def _specificity(code: str, selectors: Iterable[str]) -> int:
    best = -1
    for selector in selectors:
        if code_matches(code, selector):
            best = max(best, 0 if selector == "ALL" else len(selector))
    return best


def _path_matches(rel: str, pattern: str) -> bool:
    pattern = pattern.replace(os.sep, "/")
    if pattern.startswith("./"):
        pattern = pattern[2:]
    if fnmatch.fnmatchcase(rel, pattern) or fnmatch.fnmatchcase(os.path.basename(rel), pattern):
        return True
    # "tests/" or "tests" matches everything below that folder.
    stripped = pattern.rstrip("/")
    return rel == stripped or rel.startswith(stripped + "/")


def _matches_any(rel: str, below: str, patterns: Sequence[str]) -> bool:
    paths, names = _split_patterns(tuple(patterns))
    if names is not None and any(names(part) for part in below.split("/")):
        return True
    return any(_path_matches(rel, pattern) for pattern in paths)


@functools.lru_cache(maxsize=64)
def _split_patterns(
    patterns: tuple[str, ...],
) -> tuple[tuple[str, ...], Callable[[str], Any] | None]:
    """Path patterns (with a `/`), and one matcher for all the bare-name ones:
    a walk tests every path component against every default exclude, so this is hot."""
    paths = tuple(p for p in patterns if "/" in p.rstrip("/"))
    names = [p.rstrip("/") for p in patterns if "/" not in p.rstrip("/")]
    if not names:
        return paths, None
    return paths, glob_matcher(tuple(names))  # string tests: no regex to compile


# -- loading --------------------------------------------------------------------------


def read_toml(path: str) -> tuple[dict[str, Any], str]:
    """A TOML file's data and text; a ConfigError naming the file and line otherwise."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found") from None
    except OSError as error:
        raise ConfigError(f"{path}: cannot read: {error.strerror}") from None
    text = raw.decode("utf-8", "replace")
    try:
        return tomllib.loads(raw.decode("utf-8")), text
    except UnicodeDecodeError as error:
        bad_line = raw[: error.start].count(b"\n") + 1
        raise ConfigError(f"{path}:{bad_line}: invalid TOML: not UTF-8") from None
    except tomllib.TOMLDecodeError as error:
        line: int | None = getattr(error, "lineno", None)
        message = str(getattr(error, "msg", "") or error)
        if line is None:
            found = re.search(r"\(at line (\d+), column \d+\)", message)
            line = int(found.group(1)) if found else None
        if line is None and "end of document" in message:
            line = max(1, text.count("\n") + (0 if text.endswith("\n") else 1))
        where = f"{path}:{line}" if line else path
        raise ConfigError(f"{where}: invalid TOML: {message}") from None


def config_in_folder(directory: str) -> str | None:
    """The config file that governs `directory` itself, if it has one.

    A dedicated file always counts (and must be valid); a pyproject.toml counts when it has
    a [tool.lifetime-lint] table, and one that does not parse is an error: whether it was
    meant to configure this tool cannot be known, and a gate must not pass on a broken config.
    """
    for name in CONFIG_FILENAMES:
        candidate = os.path.join(directory, name)
        if not os.path.isfile(candidate):
            continue
        if name != "pyproject.toml":
            return candidate
        data, _ = read_toml(candidate)
        if CONFIG_TABLE in _as_table(data.get("tool")):
            return candidate
    return None


def find_config(start: str) -> str | None:
    """The nearest config file from `start` (a file or folder) upwards."""
    directory = os.path.abspath(start)
    if not os.path.isdir(directory):
        directory = os.path.dirname(directory)
    while True:
        found = config_in_folder(directory)
        if found is not None:
            return found
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent


def _as_table(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def load_settings(
    config_path: str | None, rules: Sequence[type[Rule]], start: str | None = None
) -> Settings:
    """Read and validate one configuration; `config_path=None` means find the nearest."""
    if config_path is None:
        config_path = find_config(start or os.getcwd())
        if config_path is None:
            return Settings()
    data, text = read_toml(config_path)
    if os.path.basename(config_path) == "pyproject.toml" or (
        "tool" in data and CONFIG_TABLE in _as_table(data["tool"])
    ):
        table = _as_table(data.get("tool")).get(CONFIG_TABLE, {})
        prefix = f"tool.{CONFIG_TABLE}"
    else:  # a dedicated file (lifetime-lint.toml, --config FILE) with top-level keys
        table = data
        prefix = ""
    if not isinstance(table, dict):
        line = _line_of(text, prefix.split("."))
        raise ConfigError(f"{config_path}:{line}: `{prefix}` must be a table")
    settings = Settings(
        config_path=os.path.abspath(config_path),
        root=os.path.dirname(os.path.abspath(config_path)),
    )
    try:
        _apply_table(settings, table, prefix, config_path, rules)
    except _KeyError as error:
        line = _line_of(text, error.key_path)
        where = f"{config_path}:{line}" if line else config_path
        raise ConfigError(f"{where}: `{'.'.join(error.key_path)}`{error.problem}") from None
    return settings


class _KeyError(Exception):
    """A problem with one key; `load_settings` adds the file and line."""

    def __init__(self, key_path: Sequence[str], problem: str) -> None:
        super().__init__(problem)
        self.key_path = [part for part in key_path if part]
        self.problem = problem


_HEADER = compile_lazily(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(?:#.*)?$")
_KEY = compile_lazily(r"""^\s*("(?:[^"\\]|\\.)*"|'[^']*'|[A-Za-z0-9_.\-" ']+?)\s*=""")


def _split_dotted(key: str) -> list[str]:
    parts = re.findall(r'"((?:[^"\\]|\\.)*)"|\'([^\']*)\'|([^.\s]+)', key)
    return [a or b or c for a, b, c in parts]


def _line_of(text: str, key_path: Sequence[str]) -> int | None:
    """The line where a dotted key (`tool.lifetime-lint.select`) is defined, found by
    scanning table headers and `key =` lines (tomllib keeps no positions). Good enough to
    point at the key; None when the key cannot be found (a value built by inline tables)."""
    wanted = [part for part in key_path if part]
    if not wanted:
        return None
    best: int | None = None
    table: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        header = _HEADER.match(line)
        if header:
            table = _split_dotted(header.group(1))
            if table == wanted:
                return number
            continue
        key = _KEY.match(line)
        if key:
            full = table + _split_dotted(key.group(1))
            if full == wanted:
                return number
            if best is None and len(full) < len(wanted) and wanted[: len(full)] == full:
                best = number  # an inline table holding the key: point at its line
    return best


def _apply_table(
    settings: Settings,
    table: Mapping[str, Any],
    prefix: str,
    config_path: str,
    rules: Sequence[type[Rule]],
) -> None:
    by_id: dict[str, type[Rule]] = {}
    for rule in rules:
        by_id[rule.code] = rule
        by_id[rule.name] = rule
    known_codes = [rule.code for rule in rules]
    base = prefix.split(".") if prefix else []
    for key, value in table.items():
        path = base + [key]
        if key in by_id:
            rule = by_id[key]
            if not isinstance(value, dict):
                raise _KeyError(path, f" must be a table of options for {rule.code}")
            if rule.code in settings.rule_options:
                raise _KeyError(path, f": options for {rule.code} are given twice")
            settings.rule_options[rule.code] = _validate_rule_options(rule, value, path)
            continue
        if key not in GLOBAL_KEYS:
            candidates = list(GLOBAL_KEYS) + [rule.name for rule in rules]
            raise _KeyError(path, ": unknown key" + _did_you_mean(key, candidates))
        expected, _ = GLOBAL_KEYS[key]
        value = _check_type(value, expected, path)
        if key in ("select", "extend-select", "ignore"):
            _selectors(value, known_codes, path)
            setattr(settings, key.replace("-", "_"), list(value))
        elif key in ("exclude", "extend-exclude"):
            setattr(settings, key.replace("-", "_"), list(value))
        elif key == "per-file-ignores":
            for pattern, codes in value.items():
                codes = _check_type(codes, list, path + [pattern])
                _selectors(codes, known_codes, path + [pattern])
                settings.per_file_ignores[pattern] = list(codes)
        elif key == "target-torch-version":
            try:
                settings.target_torch_version = parse_torch_version(value, "")
            except ConfigError as error:
                raise _KeyError(path, f"{error}") from None
        elif key == "respect-gitignore":
            settings.respect_gitignore = value
        elif key == "portability" and value not in ("library", "strict"):
            raise _KeyError(path, f'must be "library" or "strict", got {value!r}')
        else:
            problem = KEY_VALIDATORS[key](value) if key in KEY_VALIDATORS else None
            if problem:
                raise _KeyError(path, f": {problem}")
            settings.extra[key] = value


def _selectors(values: Sequence[str], known_codes: Sequence[str], path: list[str]) -> None:
    try:
        validate_selectors(values, known_codes, "")
    except ConfigError as error:
        raise _KeyError(path, f": {error}") from None


def _check_type(value: Any, expected: type, path: list[str]) -> Any:
    names = {str: "a string", list: "a list of strings", dict: "a table", bool: "true or false",
             int: "an integer"}  # fmt: skip
    ok = isinstance(value, expected) and not (expected is int and isinstance(value, bool))
    if ok and expected is list:
        ok = all(isinstance(item, str) for item in value)
    if not ok:
        raise _KeyError(path, f" must be {names.get(expected, expected.__name__)}, "
                              f"got {type(value).__name__} {value!r}")  # fmt: skip
    return value


def _did_you_mean(name: str, candidates: Iterable[str]) -> str:
    import difflib  # only for error messages: not on every run's import path

    close = difflib.get_close_matches(name, sorted(set(candidates)), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _validate_rule_options(
    rule: type[Rule], table: Mapping[str, Any], path: list[str]
) -> dict[str, Any]:
    known = {option.name: option for option in rule.options}
    result: dict[str, Any] = {}
    for key, value in table.items():
        where = path + [key]
        if key not in known:
            valid = ", ".join(sorted(known)) or "none"
            raise _KeyError(where, f": unknown option for {rule.code} (valid: {valid})")
        option = known[key]
        value = _check_type(value, option.kind, where)
        if option.kind is dict:
            for sub_key, sub_value in value.items():
                _check_type(sub_value, str, where + [sub_key])
        if option.names is not None:
            listed = value if option.kind is list else list(value) if option.kind is dict else []
            for name in listed:
                if name not in option.names:
                    raise _KeyError(where, f": unknown name {name!r} for {rule.code}"
                                           + _did_you_mean(name, option.names))  # fmt: skip
        problem = option.validate(value) if option.validate else None
        if problem:
            raise _KeyError(where, f": {problem}")
        result[key] = value
    return result


def validate_selectors(selectors: Sequence[str], known_codes: Sequence[str], where: str) -> None:
    prefix = f"{where}: " if where else ""
    for selector in selectors:
        if selector == "ALL":
            continue
        if not selector.strip():
            raise ConfigError(f"{prefix}empty rule selector {selector!r}")
        if not any(code.startswith(selector) for code in known_codes):
            raise ConfigError(f"{prefix}unknown rule selector {selector!r}")


def parse_torch_version(value: str, where: str = "target-torch-version") -> tuple[int, int]:
    parts = value.strip().split(".")
    try:
        major, minor = int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        prefix = f"{where} " if where else " "
        raise ConfigError(f'{prefix}must look like "2.9", got {value!r}') from None
    return (major, minor)


# -- command-line overrides and per-file resolution -----------------------------------


@dataclass
class Overrides:
    """Settings given on the command line; they apply on top of every config file."""

    select: list[str] | None = None
    extend_select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    extend_exclude: list[str] = field(default_factory=list)
    target_torch_version: tuple[int, int] | None = None
    respect_gitignore: bool | None = None
    # Keys of `Settings.extra` set on the command line (`check --min-bytes` lowers the
    # significance bar: the measured bytes decide instead).
    extra: dict[str, object] = field(default_factory=dict)

    def validate(self, known_codes: Sequence[str]) -> None:
        for flag, values in (("--select", self.select or []),
                             ("--extend-select", self.extend_select),
                             ("--ignore", self.ignore)):  # fmt: skip
            validate_selectors(values, known_codes, flag)

    def apply(self, settings: Settings) -> Settings:
        if self.select is not None:
            settings.select = list(self.select)
        settings.extend_select = settings.extend_select + self.extend_select
        settings.ignore = settings.ignore + self.ignore
        settings.extend_exclude = settings.extend_exclude + self.extend_exclude
        if self.target_torch_version is not None:
            settings.target_torch_version = self.target_torch_version
        if self.respect_gitignore is not None:
            settings.respect_gitignore = self.respect_gitignore
        if self.extra:
            settings.extra = {**settings.extra, **self.extra}
        return settings

    def fingerprint(self) -> str:
        return repr(sorted(vars(self).items()))


class SettingsResolver:
    """The settings of each file: its nearest config's (each read once), or one for all.

    `config` (--config) gives every file that config; `isolated` (--isolated) the defaults.
    `load(config_path)` validates a config file (see `catalog.load_config`, which answers
    from a snapshot when the file and the tool are unchanged, without importing the rules).
    """

    def __init__(
        self,
        load: Callable[[str | None], Settings],
        overrides: Overrides | None = None,
        config: str | None = None,
        isolated: bool = False,
    ) -> None:
        self._load = load
        self.overrides = overrides or Overrides()
        self.fixed_config = config
        self.isolated = isolated
        self._by_config: dict[str | None, Settings] = {}
        self._config_of_folder: dict[str, str | None] = {}

    def for_config(self, config_path: str | None) -> Settings:
        key = os.path.abspath(config_path) if config_path else None
        if key not in self._by_config:
            settings = self._load(key)
            self._by_config[key] = self.overrides.apply(settings)
        return self._by_config[key]

    def config_for(self, path: str) -> str | None:
        """The config file governing `path` (a file or folder)."""
        if self.isolated:
            return None
        if self.fixed_config is not None:
            return self.fixed_config
        directory = os.path.abspath(path)
        if not os.path.isdir(directory):
            directory = os.path.dirname(directory)
        chain: list[str] = []
        found: str | None = None
        while True:
            if directory in self._config_of_folder:
                found = self._config_of_folder[directory]
                break
            chain.append(directory)
            found = config_in_folder(directory)
            if found is not None:
                break
            parent = os.path.dirname(directory)
            if parent == directory:
                break
            directory = parent
        for folder in chain:
            self._config_of_folder[folder] = found
        return found

    def for_path(self, path: str) -> Settings:
        return self.for_config(self.config_for(path))

    def default(self) -> Settings:
        """The settings of the current folder (what a run with no paths would use)."""
        return self.for_path(os.getcwd())

    def all_loaded(self) -> list[Settings]:
        return list(self._by_config.values())

    def configs_read(self) -> list[str | None]:
        """The config file found for each folder asked about (None: defaults)."""
        return list(self._config_of_folder.values()) + list(self._by_config)
