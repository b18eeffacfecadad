"""Output formats end to end: sarif (validated against the official schema), github, full,
concise, json, and where the human summary goes for machine formats."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from lifetime_lint.cli import main
from lifetime_lint.registry import all_rules

SCHEMA = Path(__file__).parent / "data" / "sarif-schema-2.1.0.json"

DECODE = textwrap.dedent(
    """\
    import torch


    def decode(vae, latents):
        video = vae.decode(latents).sample
        torch.cuda.empty_cache()
        torch.cuda.synchronize()
        return video
    """
)

# The memory statistics fix is unsafe under the default target torch version... or absent;
# either way the report must stay valid.
STATS = textwrap.dedent(
    """\
    import torch


    def log_peak(step):
        peak = torch.cuda.max_memory_allocated()
        print(step, peak)
    """
)


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pipelines" / "video").mkdir(parents=True)
    (tmp_path / "pipelines" / "video" / "decode.py").write_text(DECODE)
    (tmp_path / "pipelines" / "stats.py").write_text(STATS)
    (tmp_path / "pipelines" / "broken.py").write_text(
        "import torch\n\ndef f(:\n    torch.cuda.synchronize()\n"
    )
    return tmp_path


def run(*args: str):
    return CliRunner().invoke(main, ["check", "--no-cache", *args], catch_exceptions=False)


def test_sarif_is_valid_and_complete(project):
    result = run("--format", "sarif", "pipelines")
    assert result.exit_code == 2  # the syntax error
    log = json.loads(result.stdout)
    jsonschema.Draft4Validator(json.loads(SCHEMA.read_text())).validate(log)

    run_ = log["runs"][0]
    driver = run_["tool"]["driver"]
    assert driver["name"] == "lifetime-lint"
    rules = driver["rules"]
    ids = [rule["id"] for rule in rules]
    assert {rule.code for rule in all_rules()} <= set(ids)
    assert "E999" in ids
    for rule in rules:
        if rule["id"].startswith("LL"):
            assert rule["help"]["text"].startswith("## What it does")
            assert rule["helpUri"].startswith("https://")
            assert rule["shortDescription"]["text"]
            assert rule["fullDescription"]["text"] and not rule["fullDescription"][
                "text"
            ].startswith("#")

    results = run_["results"]
    by_rule = {}
    for item in results:
        assert ids[item["ruleIndex"]] == item["ruleId"]
        by_rule.setdefault(item["ruleId"], []).append(item)
    empty_cache = by_rule["LL004"][0]
    location = empty_cache["locations"][0]["physicalLocation"]
    # Relative to %SRCROOT% (the working directory), as GitHub code scanning wants them.
    assert location["artifactLocation"] == {
        "uri": "pipelines/video/decode.py",
        "uriBaseId": "%SRCROOT%",
    }
    assert location["region"] == {"startLine": 6, "startColumn": 5, "endLine": 6, "endColumn": 29}
    assert run_["originalUriBaseIds"]["%SRCROOT%"]["uri"] == project.as_uri() + "/"
    replacements = empty_cache["fixes"][0]["artifactChanges"][0]["replacements"]
    assert {"text": "reclaim"} in [r["insertedContent"] for r in replacements]
    assert len(empty_cache["partialFingerprints"]["lifetimeLint/v1"]) == 20
    assert by_rule["E999"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == (
        "pipelines/broken.py"
    )


def test_sarif_of_a_clean_tree_is_valid(project):
    (project / "pipelines" / "broken.py").unlink()
    result = run("--format", "sarif", "--select", "LL004", "pipelines/stats.py")
    assert result.exit_code == 0
    log = json.loads(result.stdout)
    jsonschema.Draft4Validator(json.loads(SCHEMA.read_text())).validate(log)
    assert log["runs"][0]["results"] == []


def test_github_annotations(project):
    result = run("--format", "github", "pipelines/video")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[0] == (
        "::error title=lifetime-lint (LL004),file=pipelines/video/decode.py,line=6,col=5,"
        "endLine=6,endColumn=29::pipelines/video/decode.py:6:5: LL004 "
        "`torch.cuda.empty_cache()` is CUDA-only: it empties only CUDA's caching allocator, "
        "and does nothing on XPU, NPU, MPS or HPU; `reclaim()` empties the active "
        "accelerator's cache and does nothing without one"
    )
    assert lines[1].startswith(
        "::error title=lifetime-lint (LL005),file=pipelines/video/decode.py,line=7,"
    )
    assert len(lines) == 2  # no human summary mixed into the workflow commands


def test_github_escapes_workflow_command_syntax():
    from lifetime_lint.diagnostics import Diagnostic, Location
    from lifetime_lint.reporters import RunSummary, render_github

    d = Diagnostic("LL004", "raw-empty-cache", "50% of\nmemory", "a,b:c.py", Location(1, 1),
                   Location(1, 2))  # fmt: skip
    line = render_github([d], RunSummary())
    assert line == (
        "::error title=lifetime-lint (LL004),file=a%2Cb%3Ac.py,line=1,col=1,endLine=1,"
        "endColumn=2::a,b:c.py:1:1: LL004 50%25 of%0Amemory\n"
    )


def test_full_shows_source_with_the_span_underlined(project):
    result = run("--format", "full", "pipelines/video")
    assert result.exit_code == 1
    expected = textwrap.dedent(
        """\
        pipelines/video/decode.py:6:5: LL004 [*] `torch.cuda.empty_cache()` is CUDA-only: it empties only CUDA's caching allocator, and does nothing on XPU, NPU, MPS or HPU; `reclaim()` empties the active accelerator's cache and does nothing without one
          |
        5 |     video = vae.decode(latents).sample
        6 |     torch.cuda.empty_cache()
          |     ^^^^^^^^^^^^^^^^^^^^^^^^ LL004
        7 |     torch.cuda.synchronize()
          |
          = help: Replace with `reclaim()`
        """
    )
    assert result.stdout.startswith(expected)
    assert "Found 2 errors." in result.stdout


def test_full_keeps_tabs_and_truncates_long_spans(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    lines = ["import torch", "", "def f():", "\ttorch.cuda.synchronize(",
             "\t)", "\tpass", ""]  # fmt: skip
    (tmp_path / "t.py").write_text("\n".join(lines))
    result = run("--format", "full", "--select", "LL005", "t.py")
    assert (
        "4 | \ttorch.cuda.synchronize(\n  | \t^^^^^^^^^^^^^^^^^^^^^^^ LL005\n5 | \t)\n"
        in result.stdout
    )

    from lifetime_lint.diagnostics import Diagnostic, Location
    from lifetime_lint.reporters import RunSummary, render_full

    (tmp_path / "long.py").write_text("".join(f"x{i} = ({i},\n" for i in range(20)))
    d = Diagnostic("LL001", "n", "m", "long.py", Location(2, 1), Location(15, 3))
    rendered = render_full([d], RunSummary(quiet=True))
    assert "2 | x1 = (1,\n  | ^^^^^^^^ LL001\n" in rendered
    assert "7 | x6 = (6,\n  | ...\n  |\n" in rendered
    assert "x8" not in rendered


def test_concise_is_text(project):
    assert run("--format", "concise", "pipelines/video").stdout == run("pipelines/video").stdout


def test_json_links_each_rule(project):
    result = run("--format", "json", "pipelines/video")
    items = json.loads(result.stdout)
    assert [item["code"] for item in items] == ["LL004", "LL005"]
    assert items[0]["url"].endswith("/docs/rules.md#raw-empty-cache-ll004")


def test_machine_formats_keep_stdout_parseable(project):
    # --statistics with json: Ruff's shape, the counts as JSON on stdout.
    result = run("--format", "json", "--statistics", "pipelines/video")
    assert json.loads(result.stdout) == [
        {"code": "LL004", "name": "raw-empty-cache", "count": 1, "fixable": True},
        {"code": "LL005", "name": "hard-coded-cuda-call", "count": 1, "fixable": True},
    ]

    result = run("--format", "sarif", "--fix", "--show-fixes", "pipelines/video")
    json.loads(result.stdout)
    assert "Fixed 2 errors:" in result.stderr
    assert "pipelines/video/decode.py" in result.stderr


def test_show_fixes_lists_fixes_per_file(project):
    result = run("--fix", "--show-fixes", "pipelines/video")
    assert result.exit_code == 0
    assert (
        "Fixed 2 errors:\n"
        "- pipelines/video/decode.py:\n"
        "    1 \u00d7 LL004 (raw-empty-cache)\n"
        "    1 \u00d7 LL005 (hard-coded-cuda-call)\n"
    ) in result.stdout
    assert "Found 2 errors (2 fixed, 0 remaining)." in result.stdout
    # Without --show-fixes, only the summary line.
    (project / "pipelines" / "video" / "decode.py").write_text(DECODE)
    assert "Fixed 2 errors:" not in run("--fix", "pipelines/video").stdout


def test_statistics_counts_per_rule(project):
    (project / "pipelines" / "video" / "again.py").write_text(DECODE)
    result = run("--statistics", "-q", "pipelines/video")
    assert result.stdout.splitlines()[-2:] == [
        "    2\tLL004 \t[*] raw-empty-cache",
        "    2\tLL005 \t[*] hard-coded-cuda-call",
    ]
