"""LL003's options are validated like every rule's: a typo must not disable the fix."""

from __future__ import annotations

import pytest

from lifetime_lint.config import ConfigError, load_settings
from lifetime_lint.registry import all_rules


def _load(tmp_path, body: str):
    path = tmp_path / "pyproject.toml"
    path.write_text("[tool.lifetime-lint.discarded-all-gather]\n" + body)
    return load_settings(str(path), all_rules())


def test_defaults_and_valid_values(tmp_path) -> None:
    settings = _load(tmp_path, 'gather-call = "proj.comm:group.gather_to_root"\nwrappers = []\n')
    (rule,) = [r for r in all_rules() if r.code == "LL003"]
    options = settings.options_for(rule)
    assert options == {"gather-call": "proj.comm:group.gather_to_root", "wrappers": []}
    assert rule.option_defaults() == {
        "gather-call": "lifetime_lint.runtime.gather_to_root",
        "wrappers": ["all_gather"],
    }


@pytest.mark.parametrize(
    "body",
    [
        'gather-call = "not a target"\n',
        "gather-call = 3\n",
        'wrappers = ["all-gather"]\n',
        'wrappers = "all_gather"\n',
        'gather-to = "x.y"\n',
    ],
)
def test_bad_values_are_errors(tmp_path, body: str) -> None:
    with pytest.raises(ConfigError, match="discarded-all-gather"):
        _load(tmp_path, body)
