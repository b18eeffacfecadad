"""The rules' identities and validated configurations, without importing the rules.

Importing the rules imports LibCST, which costs about as much as a whole warm run over a
mid-sized tree. A run answered from the cache only needs to know which rules exist (code,
name, option defaults: for selection, cache keys and reports) and what a config file says
once validated, so both are kept in the cache folder, keyed by the tool's code fingerprint
(and the config file's bytes): on a hit nothing under `lifetime_lint.rules` is imported.
Any unreadable or stale snapshot is a miss, answered by importing the rules as before.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from lifetime_lint.cache import code_fingerprint, write_file_atomic
from lifetime_lint.config import (
    DEFAULT_TARGET_TORCH,
    ConfigError,
    Settings,
    load_settings,
    read_toml,
)


@dataclass(frozen=True)
class RuleInfo:
    """What the command line, the cache and the reporters need to know about a rule."""

    code: str
    name: str
    summary: str = ""
    fix_availability: str = "sometimes"
    defaults: dict[str, Any] = field(default_factory=dict)
    default_enabled: bool = True  # in the default rule set (see `Rule.default_enabled`)

    def option_defaults(self) -> dict[str, Any]:
        return json.loads(json.dumps(self.defaults))


def _info(rule: Any) -> RuleInfo:
    # Through JSON, so that a snapshot and a fresh import give equal values (tuples -> lists).
    return RuleInfo(rule.code, rule.name, rule.summary, rule.fix_availability,
                    json.loads(json.dumps(rule.option_defaults())),
                    rule.default_enabled)  # fmt: skip


def rule_infos(cache_root: str | None) -> list[RuleInfo]:
    """Every rule, from the snapshot in `cache_root` if it is current (else imported)."""
    snapshot = (
        os.path.join(cache_root, f"rules-{code_fingerprint()[:16]}.json") if cache_root else None
    )
    if snapshot is not None:
        loaded = _read_json(snapshot)
        if isinstance(loaded, list):
            try:
                return [RuleInfo(**item) for item in loaded]
            except TypeError:
                pass
    from lifetime_lint.registry import all_rules

    infos = [_info(rule) for rule in all_rules()]
    if snapshot is not None:
        _write_json(snapshot, [dataclasses.asdict(info) for info in infos], cache_root)
    return infos


def rule_classes(codes: Sequence[str]) -> list[Any]:
    """The rule classes with these codes (imports the rules, and LibCST)."""
    from lifetime_lint.registry import all_rules

    wanted = set(codes)
    return [rule for rule in all_rules() if rule.code in wanted]


def load_config(config_path: str | None, cache_root: str | None) -> Settings:
    """A validated config file, from its snapshot when neither it nor the tool changed."""
    if config_path is None:
        return Settings()
    snapshot = None
    if cache_root is not None:
        try:
            with open(config_path, "rb") as handle:
                data = handle.read()
        except OSError:
            data = None  # load_settings reports it
        if data is not None:
            key = hashlib.sha256(
                f"{code_fingerprint()}\0{os.path.abspath(config_path)}\0".encode() + data
            ).hexdigest()
            snapshot = os.path.join(cache_root, "settings", f"{key[:32]}.json")
            settings = _settings_from_json(_read_json(snapshot))
            if settings is not None:
                return settings
    from lifetime_lint.registry import all_rules

    settings = load_settings(config_path, all_rules())
    if snapshot is not None:
        _write_json(snapshot, _settings_to_json(settings), cache_root)
    return settings


def configured_cache_dir(config_path: str | None) -> str | None:
    """The `cache-dir` a config file names (absolute), read without validating the rest."""
    if config_path is None:
        return None
    try:
        data, _ = read_toml(config_path)
    except ConfigError:
        return None  # load_config reports it
    if os.path.basename(config_path) == "pyproject.toml" or "tool" in data:
        tool = data.get("tool")
        table = tool.get("lifetime-lint", {}) if isinstance(tool, dict) else {}
    else:
        table = data
    value = table.get("cache-dir") if isinstance(table, dict) else None
    if not isinstance(value, str):
        return None
    return os.path.join(os.path.dirname(os.path.abspath(config_path)), os.path.expanduser(value))


# -- snapshots on disk ----------------------------------------------------------------


def _read_json(path: str) -> Any:
    try:
        with open(path, "rb") as handle:
            return json.load(handle)
    except (OSError, ValueError, RecursionError):
        return None


def _write_json(path: str, value: Any, root: str | None) -> None:
    try:
        data = json.dumps(value, separators=(",", ":")).encode()
    except (TypeError, ValueError):
        return  # a value JSON cannot hold (a TOML date in an extension key): no snapshot
    write_file_atomic(path, data, cache_root=root)


def _settings_to_json(settings: Settings) -> dict[str, Any]:
    return {f.name: getattr(settings, f.name) for f in dataclasses.fields(settings)}


def _settings_from_json(value: Any) -> Settings | None:
    if not isinstance(value, dict):
        return None
    names = {f.name for f in dataclasses.fields(Settings)}
    if set(value) != names:
        return None  # written by another version of Settings
    try:
        settings = Settings(**value)
        settings.target_torch_version = tuple(value["target_torch_version"] or DEFAULT_TARGET_TORCH)
    except TypeError:
        return None
    return settings
