"""The default rule set and what `--statistics` says was left out, through the real CLI.

Which rules run when `select` is not given is each rule's `default_enabled`; `--statistics`
(text and JSON) counts, besides the findings, those left out by scope (with the setting that
reports them) and those below `min-significance`, and names a rule that is off by default
with the line that turns it on. The same counts come out of `check`, `--fix` and `--diff`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lifetime_lint.config import Settings
from lifetime_lint.registry import all_rules

LIBRARY = textwrap.dedent(
    """\
    import torch


    def step(model, x):
        y = model(x)
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        return y
    """
)

# LL001 rates these `low` (below the default bar): a pipeline's prompt embeddings and
# latents held across the VAE decode, as in tests/fixtures/LL001/significance_low_hidden.py.
BELOW_BAR = (
    Path(__file__).parent / "fixtures" / "LL001" / "significance_low_hidden.py"
).read_text()

# Run the real command line with LL005 taken out of the default rule set, as a rule that is
# off by default would be (no rule ships off by default: see the README's measurement).
_LL005_OFF = (
    "import sys; from lifetime_lint.registry import all_rules; "
    "[setattr(r, 'default_enabled', False) for r in all_rules() if r.code == 'LL005']; "
    "from lifetime_lint.cli import main; sys.argv[0] = 'lifetime-lint'; main()"
)


def _tree(root: Path) -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "pkg" / "step.py").write_text(LIBRARY)
    (root / "tests" / "test_step.py").write_text(LIBRARY)
    return root


def _lint(root: Path, *args: str, ll005_off: bool = False) -> subprocess.CompletedProcess:
    head = ["-c", _LL005_OFF] if ll005_off else ["-m", "lifetime_lint"]
    return subprocess.run(
        [sys.executable, *head, "check", "--no-cache", *args],
        capture_output=True,
        text=True,
        cwd=root,
        timeout=300,
    )


def test_every_shipped_rule_is_in_the_default_set() -> None:
    # The measured decision (README, "Which rules are on by default"); a change is deliberate.
    assert [r.code for r in all_rules() if not r.default_enabled] == []
    settings = Settings()
    assert settings.select is None
    assert [r.code for r in settings.enabled_rules(all_rules())] == [r.code for r in all_rules()]


def test_selection_with_a_rule_off_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    ll005 = next(r for r in all_rules() if r.code == "LL005")
    monkeypatch.setattr(ll005, "default_enabled", False)
    rules = all_rules()

    def enabled(**fields) -> list[str]:
        return [r.code for r in Settings(**fields).enabled_rules(rules)]

    assert "LL005" not in enabled()
    assert "LL005" in enabled(extend_select=["LL005"])
    assert "LL005" in enabled(extend_select=["LL00"])
    assert "LL005" in enabled(select=["ALL"])
    assert enabled(select=["LL005"]) == ["LL005"]
    # The default set is as unspecific as ALL: a prefix ignore still wins over it.
    assert enabled(ignore=["LL00"]) == []
    assert [r.code for r in Settings().off_by_default(rules)] == ["LL005"]
    assert Settings(extend_select=["LL005"]).off_by_default(rules) == []
    assert Settings(select=["LL001"]).off_by_default(rules) == []  # chosen explicitly


def test_statistics_name_the_scope_and_the_setting_that_reports_it(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    text = _lint(root, "--statistics", ".")
    assert text.stdout.splitlines() == [
        "    1\tLL004 \t[*] raw-empty-cache",
        "    1\tLL005 \t[*] hard-coded-cuda-call",
        '    1\tLL004 \t    left out: non-library path (portability = "strict" reports them)',
        '    1\tLL005 \t    left out: non-library path (portability = "strict" reports them)',
    ]
    rows = json.loads(_lint(root, "--statistics", "--output-format", "json", ".").stdout)
    assert [row["code"] for row in rows] == ["LL004", "LL005"]
    assert rows[0]["count"] == 1
    assert rows[0]["left_out"] == [
        {"reason": "non-library path", "count": 1, "shown_by": 'portability = "strict"'}
    ]
    # The setting does what the row says.
    (root / "lifetime-lint.toml").write_text('portability = "strict"\n')
    strict = _lint(root, "--statistics", ".")
    assert "left out" not in strict.stdout
    assert "    2\tLL004 \t[*] raw-empty-cache" in strict.stdout


def test_statistics_count_findings_below_the_significance_bar(tmp_path: Path) -> None:
    (tmp_path / "pipeline.py").write_text(BELOW_BAR)
    default = _lint(tmp_path, "--statistics", "--select", "LL001", ".")
    rows = default.stdout.splitlines()
    below = [row for row in rows if "below min-significance" in row]
    assert below, default.stdout + default.stderr
    assert below[0].endswith('(min-significance = "low" reports them)')
    hidden = int(below[0].split("\t")[0])
    (tmp_path / "lifetime-lint.toml").write_text('min-significance = "low"\n')
    shown = _lint(tmp_path, "--statistics", "--select", "LL001", ".")
    assert "below min-significance" not in shown.stdout
    reported = sum(int(r.split("\t")[0]) for r in shown.stdout.splitlines() if "[" in r)
    assert reported >= hidden
    as_json = json.loads(
        _lint(tmp_path, "--isolated", "--statistics", "--format", "json", "--select", "LL001", ".")
        .stdout
    )  # fmt: skip
    (row,) = as_json
    assert row["left_out"][0]["reason"] == "below min-significance"
    assert row["left_out"][0]["count"] == hidden


def test_statistics_agree_between_check_fix_and_diff(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    (root / "pkg" / "block.py").write_text(BELOW_BAR)
    check = _lint(root, "--statistics", ".")
    diff = _lint(root, "--statistics", "--diff", ".")
    fix = _lint(root, "--statistics", "--fix", ".")
    assert "left out: non-library path" in check.stdout
    assert check.stdout == diff.stdout == fix.stdout


def test_a_rule_off_by_default_is_named_with_the_line_that_turns_it_on(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    off = _lint(root, "--statistics", ".", ll005_off=True)
    assert off.stdout.splitlines() == [
        "    1\tLL004 \t[*] raw-empty-cache",
        '    1\tLL004 \t    left out: non-library path (portability = "strict" reports them)',
        '    -\tLL005 \t    off by default (extend-select = ["LL005"] turns it on)',
    ]
    rows = json.loads(_lint(root, "--statistics", "--format", "json", ".", ll005_off=True).stdout)
    assert rows[-1] == {
        "code": "LL005",
        "name": "hard-coded-cuda-call",
        "count": 0,
        "fixable": False,
        "off_by_default": True,
        "shown_by": 'extend-select = ["LL005"]',
    }
    on = _lint(root, "--statistics", "--extend-select", "LL005", ".", ll005_off=True)
    assert "    1\tLL005 \t[*] hard-coded-cuda-call" in on.stdout
    assert "off by default" not in on.stdout
    settings = _lint(root, "--show-settings", "pkg/step.py", ll005_off=True).stdout
    assert 'select = "default"' in settings
    assert 'off-by-default = ["LL005"]' in settings
    assert '"LL005"' not in settings.split("enabled-rules = ")[1].splitlines()[0]
    listing = _lint(root, ll005_off=True)  # `check` itself reports no LL005 either
    assert "LL005" not in listing.stdout


def test_rule_lists_every_rule_and_whether_it_is_on_by_default() -> None:
    listing = subprocess.run(
        [sys.executable, "-m", "lifetime_lint", "rule"], capture_output=True, text=True
    )
    assert listing.returncode == 0
    lines = listing.stdout.splitlines()
    assert [line.split("\t")[0] for line in lines] == [r.code for r in all_rules()]
    assert all("\ton " in line for line in lines)
    off = subprocess.run(
        [sys.executable, "-c", _LL005_OFF.replace("main()", "main(['rule'])")],
        capture_output=True,
        text=True,
    )
    assert "LL005\thard-coded-cuda-call" in off.stdout and "off by default" in off.stdout
    doc = subprocess.run(
        [sys.executable, "-c", _LL005_OFF.replace("main()", "main(['rule', 'LL005'])")],
        capture_output=True,
        text=True,
    )
    assert 'Off by default: `extend-select = ["LL005"]`' in doc.stdout
