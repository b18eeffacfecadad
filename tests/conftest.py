"""Suite-wide settings that keep the tests correct when pytest-xdist spreads them over workers.

The README's test command runs `-n auto --dist loadgroup`: tests are handed to workers one by
one, except that the tests of a module that share an expensive module- or class-scoped fixture
(one `--fix` run over all cases, one pre-commit environment) stay on one worker, so the fixture
is built once, as in a serial run. Without xdist this file changes nothing.
"""

from __future__ import annotations

import pytest

_SHARED_SCOPES = frozenset({"module", "class", "package"})


def _shares_a_wide_fixture(item: pytest.Item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(
        definition.scope in _SHARED_SCOPES
        for definitions in info.name2fixturedefs.values()
        for definition in definitions
    )


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups from the markers
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("xdist_group") is None and _shares_a_wide_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))
