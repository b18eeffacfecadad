"""The rule registry: every `Rule` subclass defined in a module of `lifetime_lint.rules`.

Adding a rule is adding a file to `rules/` (and a fixture folder); nothing to register.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil

from lifetime_lint.rule import Rule


@functools.cache
def all_rules() -> list[type[Rule]]:
    from lifetime_lint import rules as package

    found: dict[str, type[Rule]] = {}
    for info in pkgutil.iter_modules(package.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, Rule)
                and value is not Rule
                and value.__module__ == module.__name__
                and value.code
            ):
                if value.code in found and found[value.code] is not value:
                    raise RuntimeError(f"two rules claim {value.code}")
                found[value.code] = value
    return [found[code] for code in sorted(found)]


def rule_by_selector(selector: str) -> list[type[Rule]]:
    """Rules whose code or name matches (`LL004`, `ll004`, `raw-empty-cache`)."""
    selector = selector.strip()
    return [
        rule
        for rule in all_rules()
        if rule.code.lower() == selector.lower() or rule.name == selector.lower()
    ]
