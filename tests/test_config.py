"""Configuration: discovery, every key, strict validation with the key named, exit code 2."""

from __future__ import annotations

import re
import textwrap

import pytest
from click.testing import CliRunner

from lifetime_lint.cli import main
from lifetime_lint.config import ConfigError, load_settings
from lifetime_lint.registry import all_rules

VIOLATION = "import torch\ntorch.cuda.empty_cache()\ntorch.cuda.synchronize()\n"


def write_config(root, body):
    """A pyproject.toml whose `[name]` sub-tables in `body` nest under [tool.lifetime-lint]."""
    body = re.sub(r"^\[([^\]]+)\]", r"[tool.lifetime-lint.\1]", textwrap.dedent(body), flags=re.M)
    (root / "pyproject.toml").write_text(
        "[project]\nname = 'model-repo'\n\n[tool.lifetime-lint]\n" + body
    )


def run(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture
def repo(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "pipe.py").write_text(VIOLATION)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_pipe.py").write_text(VIOLATION)
    return tmp_path


def test_discovered_from_a_subfolder(repo, monkeypatch):
    write_config(repo, 'select = ["LL004"]\n')
    monkeypatch.chdir(repo / "src")
    out = run("pipe.py").output
    assert "LL004" in out and "LL005" not in out


def test_per_file_ignores_and_excludes(repo):
    write_config(
        repo,
        """
        extend-exclude = ["generated"]
        portability = "strict"  # report tests/ too (left out by default)
        [per-file-ignores]
        "tests/*" = ["LL005"]
        "src/pipe.py" = ["LL00"]
        """,
    )
    (repo / "generated").mkdir()
    (repo / "generated" / "x.py").write_text(VIOLATION)
    out = run(".").output
    assert "tests/test_pipe.py:2:1: LL004" in out
    assert "tests/test_pipe.py:3:1: LL005" not in out
    assert "src/pipe.py" not in out
    assert "generated" not in out


def test_rule_tables_by_name_or_code(repo):
    write_config(
        repo,
        """
        [raw-empty-cache]
        reclaim-call = "myproj.platform:current_platform.empty_cache"
        [LL005]
        allowed-calls = ["synchronize"]
        """,
    )
    out = run("--diff", "src/pipe.py").output
    assert "+from myproj.platform import current_platform" in out
    assert "+current_platform.empty_cache()" in out
    assert "synchronize" not in run("src/pipe.py").output.split("Found")[0].replace(
        "empty_cache", ""
    )


def test_target_torch_version_unlocks_fixes(repo):
    (repo / "src" / "mem.py").write_text("import torch\nx = torch.cuda.mem_get_info()\n")
    assert "[*]" not in run("src/mem.py").output
    write_config(repo, 'target-torch-version = "2.10"\n')
    assert "[*]" in run("src/mem.py").output


@pytest.mark.parametrize(
    "body, message",
    [
        ("selct = ['LL004']\n", "`tool.lifetime-lint.selct`: unknown key"),
        ("select = 'LL004'\n", "`tool.lifetime-lint.select` must be a list of strings"),
        ("select = ['LL9']\n", "unknown rule selector 'LL9'"),
        ("target-torch-version = 'two'\n", "must look like \"2.9\""),
        ("[raw-empty-cache]\nreclaim = 'x.y'\n",
         "`tool.lifetime-lint.raw-empty-cache.reclaim`: unknown option for LL004"),
        ("[raw-empty-cache]\nreclaim-call = 'not a path'\n", "not a valid import target"),
        ("[LL005]\nreplacements = { synchronize = 3 }\n",
         "`tool.lifetime-lint.LL005.replacements.synchronize` must be a string"),
        ("per-file-ignores = ['x']\n", "`tool.lifetime-lint.per-file-ignores` must be a table"),
    ],
)  # fmt: skip
def test_bad_config_names_the_key_and_exits_2(repo, body, message):
    write_config(repo, body)
    result = run("src/pipe.py")
    assert result.exit_code == 2
    assert message in result.output
    assert "pyproject.toml" in result.output


def test_invalid_toml_and_missing_config_file(repo):
    (repo / "pyproject.toml").write_text("[tool.lifetime-lint\n")
    bad = run("--config", "pyproject.toml", "src")
    assert bad.exit_code == 2 and "invalid TOML" in bad.output
    missing = run("--config", "nope.toml", "src")
    assert missing.exit_code == 2 and "config file not found" in missing.output


def test_dedicated_config_file_with_top_level_keys(tmp_path):
    path = tmp_path / "lifetime-lint.toml"
    path.write_text('ignore = ["LL005"]\n[raw-empty-cache]\nreclaim-call = "a.b:c"\n')
    settings = load_settings(str(path), all_rules())
    assert settings.ignore == ["LL005"]
    assert settings.rule_options["LL004"] == {"reclaim-call": "a.b:c"}
    with pytest.raises(ConfigError):
        path.write_text("[LL004]\n[raw-empty-cache]\n")
        load_settings(str(path), all_rules())
