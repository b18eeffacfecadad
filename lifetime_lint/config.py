"""Configuration: `[tool.lifetime-lint]` in pyproject.toml, validated strictly.

An unknown key or a value of the wrong type is an error that names the key: a typo in a CI
gate's config must not silently disable a rule.

Rule selection follows Ruff: `select` (default: every rule), plus `extend-select`, minus
`ignore`; a selector is a code, a code prefix (`LL00`) or `ALL`, and the most specific
selector wins (an ignore wins a tie).
"""

from __future__ import annotations

import fnmatch
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from lifetime_lint.rule import Rule

CONFIG_TABLE = "lifetime-lint"

DEFAULT_EXCLUDE = (
    ".bzr", ".direnv", ".eggs", ".git", ".git-rewrite", ".hg", ".ipynb_checkpoints",
    ".mypy_cache", ".nox", ".pants.d", ".pyenv", ".pytest_cache", ".pytype", ".ruff_cache",
    ".svn", ".tox", ".venv", ".vscode", "__pypackages__", "__pycache__", "_build",
    "buck-out", "build", "dist", "node_modules", "site-packages", "venv",
)  # fmt: skip

DEFAULT_TARGET_TORCH = (2, 6)  # the first release with torch.accelerator


class ConfigError(Exception):
    """Bad configuration or bad command-line selection; exit code 2."""


# key -> (type, description). Other modules extend this table with their own settings.
GLOBAL_KEYS: dict[str, tuple[type, str]] = {
    "select": (list, "rule codes or prefixes to enable (default: all)"),
    "extend-select": (list, "rule codes or prefixes to enable in addition to `select`"),
    "ignore": (list, "rule codes or prefixes to disable"),
    "exclude": (list, "glob patterns of paths to skip (replaces the defaults)"),
    "extend-exclude": (list, "glob patterns of paths to skip, in addition to the defaults"),
    "per-file-ignores": (dict, "glob (relative to the config file) -> list of codes to ignore"),
    "target-torch-version": (str, 'oldest torch the project supports, e.g. "2.9"'),
    "cache-dir": (str, "where the result cache lives, relative to the config file's folder"),
    # LL004/LL005 (lifetime_lint.devices): what the portability rules check.
    "portability": (str, '"library" (default: library code only) or "strict" (everything)'),
    "non-library": (list, "globs of tests, examples, scripts... (replaces the defaults)"),
    "extend-non-library": (list, "more globs of non-library code, in addition to the defaults"),
}


@dataclass
class Settings:
    """The resolved settings of one run."""

    select: list[str] = field(default_factory=lambda: ["ALL"])
    extend_select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=lambda: list(DEFAULT_EXCLUDE))
    extend_exclude: list[str] = field(default_factory=list)
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    target_torch_version: tuple[int, int] = DEFAULT_TARGET_TORCH
    rule_options: dict[str, dict[str, Any]] = field(default_factory=dict)  # by rule code
    config_path: str | None = None
    root: str = field(default_factory=os.getcwd)
    extra: dict[str, Any] = field(default_factory=dict)  # keys added by other modules

    # -- selection ----------------------------------------------------------------
    def enabled_rules(self, rules: Sequence[type[Rule]]) -> list[type[Rule]]:
        selected = list(self.select) + list(self.extend_select)
        return [rule for rule in rules if _selected(rule.code, selected, self.ignore)]

    def options_for(self, rule: type[Rule]) -> dict[str, Any]:
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
                sorted(self.select), sorted(self.extend_select), sorted(self.ignore),
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


def _selected(code: str, select: Iterable[str], ignore: Iterable[str]) -> bool:
    chosen = _specificity(code, select)
    return chosen >= 0 and chosen > _specificity(code, ignore)


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
    parts = below.split("/")
    for pattern in patterns:
        if "/" in pattern.rstrip("/"):
            if _path_matches(rel, pattern):
                return True
        elif any(fnmatch.fnmatchcase(part, pattern.rstrip("/")) for part in parts):
            return True
    return False


# -- loading --------------------------------------------------------------------------


def find_config(start: str) -> str | None:
    """The nearest pyproject.toml with a [tool.lifetime-lint] table, from `start` upwards."""
    directory = os.path.abspath(start)
    if os.path.isfile(directory):
        directory = os.path.dirname(directory)
    while True:
        candidate = os.path.join(directory, "pyproject.toml")
        if os.path.isfile(candidate):
            try:
                with open(candidate, "rb") as handle:
                    data = tomllib.load(handle)
            except (OSError, tomllib.TOMLDecodeError):
                data = {}
            if CONFIG_TABLE in data.get("tool", {}):
                return candidate
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent


def load_settings(
    config_path: str | None, rules: Sequence[type[Rule]], start: str | None = None
) -> Settings:
    """Read and validate the configuration; `config_path=None` means discover it."""
    if config_path is None:
        config_path = find_config(start or os.getcwd())
        if config_path is None:
            return Settings()
    try:
        with open(config_path, "rb") as handle:
            data = tomllib.load(handle)
    except FileNotFoundError:
        raise ConfigError(f"{config_path}: config file not found") from None
    except OSError as error:
        raise ConfigError(f"{config_path}: cannot read: {error.strerror}") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{config_path}: invalid TOML: {error}") from None
    if os.path.basename(config_path) == "pyproject.toml" or "tool" in data:
        table = data.get("tool", {}).get(CONFIG_TABLE, {})
        prefix = f"tool.{CONFIG_TABLE}"
    else:  # a dedicated file (--config lifetime-lint.toml) with top-level keys
        table = data
        prefix = ""
    if not isinstance(table, dict):
        raise ConfigError(f"{config_path}: `{prefix}` must be a table")
    settings = Settings(
        config_path=os.path.abspath(config_path),
        root=os.path.dirname(os.path.abspath(config_path)),
    )
    _apply_table(settings, table, prefix, config_path, rules)
    return settings


def _key(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


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
    for key, value in table.items():
        where = f"{config_path}: `{_key(prefix, key)}`"
        if key in by_id:
            rule = by_id[key]
            if not isinstance(value, dict):
                raise ConfigError(f"{where} must be a table of options for {rule.code}")
            if rule.code in settings.rule_options:
                raise ConfigError(f"{where}: options for {rule.code} are given twice")
            settings.rule_options[rule.code] = _validate_rule_options(rule, value, where)
            continue
        if key not in GLOBAL_KEYS:
            raise ConfigError(f"{where}: unknown key")
        expected, _ = GLOBAL_KEYS[key]
        value = _check_type(value, expected, where)
        if key in ("select", "extend-select", "ignore"):
            validate_selectors(value, known_codes, where)
            setattr(settings, key.replace("-", "_"), list(value))
        elif key in ("exclude", "extend-exclude"):
            setattr(settings, key.replace("-", "_"), list(value))
        elif key == "per-file-ignores":
            for pattern, codes in value.items():
                codes = _check_type(codes, list, f"{where}[{pattern!r}]")
                validate_selectors(codes, known_codes, f"{where}[{pattern!r}]")
                settings.per_file_ignores[pattern] = list(codes)
        elif key == "target-torch-version":
            settings.target_torch_version = parse_torch_version(value, where)
        elif key == "portability" and value not in ("library", "strict"):
            raise ConfigError(f'{where} must be "library" or "strict", got {value!r}')
        else:
            settings.extra[key] = value


def _check_type(value: Any, expected: type, where: str) -> Any:
    names = {str: "a string", list: "a list of strings", dict: "a table", bool: "true or false",
             int: "an integer"}  # fmt: skip
    ok = isinstance(value, expected) and not (expected is int and isinstance(value, bool))
    if ok and expected is list:
        ok = all(isinstance(item, str) for item in value)
    if not ok:
        raise ConfigError(f"{where} must be {names.get(expected, expected.__name__)}, "
                          f"got {type(value).__name__} {value!r}")  # fmt: skip
    return value


def _validate_rule_options(
    rule: type[Rule], table: Mapping[str, Any], where: str
) -> dict[str, Any]:
    known = {option.name: option for option in rule.options}
    result: dict[str, Any] = {}
    for key, value in table.items():
        if key not in known:
            valid = ", ".join(sorted(known)) or "none"
            raise ConfigError(f"{where[:-1]}.{key}`: unknown option for {rule.code} "
                              f"(valid: {valid})")  # fmt: skip
        option = known[key]
        value = _check_type(value, option.kind, f"{where[:-1]}.{key}`")
        if option.kind is dict:
            for sub_key, sub_value in value.items():
                _check_type(sub_value, str, f"{where[:-1]}.{key}.{sub_key}`")
        problem = option.validate(value) if option.validate else None
        if problem:
            raise ConfigError(f"{where[:-1]}.{key}`: {problem}")
        result[key] = value
    return result


def validate_selectors(selectors: Sequence[str], known_codes: Sequence[str], where: str) -> None:
    for selector in selectors:
        if selector == "ALL":
            continue
        if not any(code.startswith(selector) for code in known_codes):
            raise ConfigError(f"{where}: unknown rule selector {selector!r}")


def parse_torch_version(value: str, where: str = "target-torch-version") -> tuple[int, int]:
    parts = value.strip().split(".")
    try:
        major, minor = int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        raise ConfigError(f'{where} must look like "2.9", got {value!r}') from None
    return (major, minor)
