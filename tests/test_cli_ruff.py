"""The command line as a Ruff user types it, through the real CLI in a subprocess.

Discovery (git ignores, per-file configuration), Ruff's flags, stdin, `--add-noqa`,
`--statistics` agreeing across check/--diff/--fix, and the cache serving `--diff`/`--fix`
without importing LibCST.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

FINDINGS = textwrap.dedent(
    """\
    import torch


    def decode(vae, latents):
        video = vae.decode(latents).sample
        torch.cuda.empty_cache()
        torch.cuda.synchronize()
        return video
    """
)

# Runs the CLI and reports on stderr whether LibCST was imported (the cache promise).
_PROBE = (
    "import sys\n"
    "from lifetime_lint.cli import main\n"
    "try:\n"
    "    main(sys.argv[1:])\n"
    "finally:\n"
    "    sys.stderr.write('\\nLIBCST-IMPORTED\\n' if 'libcst' in sys.modules else '\\nNO-LIBCST\\n')\n"
)


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GIT_", "LIFETIME_LINT_", "NO_COLOR", "FORCE_COLOR"))}  # fmt: skip
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env.update(
        HOME=str(home), GIT_CONFIG_NOSYSTEM="1", GIT_AUTHOR_NAME="t",
        GIT_AUTHOR_EMAIL="t@example.com", GIT_COMMITTER_NAME="t",
        GIT_COMMITTER_EMAIL="t@example.com", GIT_CEILING_DIRECTORIES=str(tmp_path.parent),
        PYTHONPATH=str(ROOT),
    )  # fmt: skip
    env.update(extra)
    return env


def lint(cwd: Path, *args: str, stdin: str | None = None, probe: bool = False, **env: str):
    command = [sys.executable, "-c", _PROBE] if probe else [sys.executable, "-m", "lifetime_lint"]
    return subprocess.run(
        [*command, *args], cwd=cwd, input=stdin, capture_output=True, text=True,
        env=_env(cwd, **env), timeout=300,
    )  # fmt: skip


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
                          env=_env(cwd)).stdout  # fmt: skip


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# -- commands ------------------------------------------------------------------------------


def test_unknown_command_is_a_usage_error_naming_the_nearest(tmp_path):
    write(tmp_path / "a.py", FINDINGS)
    for word, nearest in (("chek", "check"), ("rules", "rule")):
        result = lint(tmp_path, word, ".")
        assert result.returncode == 2, result
        assert f"unknown command or path '{word}'" in result.stderr
        assert f"Did you mean `{nearest}`?" in result.stderr
        assert "a.py" not in result.stdout  # nothing was linted
    result = lint(tmp_path, "xyzzy")
    assert result.returncode == 2 and "Commands: check, " in result.stderr
    # An existing path with a command-like name is a path.
    write(tmp_path / "pipelines" / "b.py", FINDINGS)
    result = lint(tmp_path, "pipelines")
    assert result.returncode == 1 and "pipelines/b.py:6:5: LL004" in result.stdout
    # A missing file that looks like a path stays an E902 (as before).
    assert "E902" in lint(tmp_path, "missing.py").stdout


# -- discovery: git ignores ----------------------------------------------------------------


@pytest.fixture
def ignoring_repo(tmp_path):
    repo = tmp_path / "repo"
    write(repo / "pkg" / "kept.py", FINDINGS)
    write(repo / "pkg" / "model_pb2.py", FINDINGS)  # .gitignore pattern
    write(repo / "generated" / "out.py", FINDINGS)  # .gitignore folder
    write(repo / "pkg" / "scratch.py", FINDINGS)  # .git/info/exclude
    write(repo / "pkg" / "notes.py", FINDINGS)  # the global excludes file
    write(repo / "pkg" / "sub" / "deep.py", FINDINGS)  # a nested .gitignore
    write(repo / ".gitignore", "*_pb2.py\ngenerated/\n")
    write(repo / "pkg" / "sub" / ".gitignore", "deep.py\n")
    git(repo, "init", "-q")
    write(repo / ".git" / "info" / "exclude", "scratch.py\n")
    write(tmp_path / "global-ignore", "notes.py\n")
    git(repo, "config", "--global", "core.excludesFile", str(tmp_path / "global-ignore"))
    return repo


def test_git_ignored_files_are_skipped_by_default(ignoring_repo):
    repo = ignoring_repo
    shown = lint(repo, "--show-files", ".")
    assert shown.returncode == 0, shown
    assert shown.stdout.split() == ["pkg/kept.py"]
    result = lint(repo, "--statistics", ".")
    assert (
        result.stdout
        == "    1\tLL004 \t[*] raw-empty-cache\n    1\tLL005 \t[*] hard-coded-cuda-call\n"
    )

    everything = lint(repo, "--show-files", "--no-respect-gitignore", ".").stdout.split()
    assert len(everything) == 6 and "generated/out.py" in everything
    write(repo / "pyproject.toml", "[tool.lifetime-lint]\nrespect-gitignore = false\n")
    assert len(lint(repo, "--show-files", ".").stdout.split()) == 6
    (repo / "pyproject.toml").unlink()

    # Named on the command line: checked, unless --force-exclude (pre-commit); a named
    # ignored folder is walked, with the ignore rules applied inside it (as Ruff does).
    assert "LL004" in lint(repo, "generated/out.py").stdout
    assert lint(repo, "--force-exclude", "generated/out.py").returncode == 0
    assert lint(repo, "--show-files", "generated").stdout.split() == ["generated/out.py"]
    assert lint(repo, "--show-files", "pkg/sub").stdout == ""  # deep.py: sub's own .gitignore
    # --extend-exclude on the command line.
    assert lint(repo, "--show-files", "--extend-exclude", "kept.py", ".").stdout == ""


# -- configuration per file ------------------------------------------------------------------


@pytest.fixture
def nested(tmp_path):
    """outer/ ignores LL005 everywhere; outer/proj/ is its own project, ignoring LL004 in tests."""
    outer = tmp_path / "outer"
    write(
        outer / "pyproject.toml",
        '[tool.lifetime-lint]\nignore = ["LL005"]\nportability = "strict"\n',
    )
    write(outer / "top.py", FINDINGS)
    write(outer / "proj" / "pyproject.toml", textwrap.dedent("""\
        [project]
        name = "proj"
        dependencies = ["lifetime-lint"]  # its runtime fixes are safe here (issue 13)

        [tool.lifetime-lint]
        select = ["LL004", "LL005"]
        portability = "strict"  # report tests/ too (left out by default)

        [tool.lifetime-lint.per-file-ignores]
        "tests/*" = ["LL004"]
        """))  # fmt: skip
    write(outer / "proj" / "tests" / "test_x.py", FINDINGS)
    write(outer / "proj" / "src" / "x.py", FINDINGS)
    return tmp_path


def test_nested_project_config_applies_when_linted_from_outside(nested):
    result = lint(nested, "outer/proj/tests/test_x.py")
    assert "test_x.py:7:5: LL005" in result.stdout
    assert "LL004" not in result.stdout, result.stdout  # the project's per-file-ignores

    # One run over both projects: each file gets its own nearest config.
    result = lint(nested, "--output-format", "json", "outer")
    found = sorted((Path(i["filename"]).relative_to(nested).as_posix(), i["code"])
                   for i in json.loads(result.stdout))  # fmt: skip
    assert found == [
        ("outer/proj/src/x.py", "LL004"),
        ("outer/proj/src/x.py", "LL005"),
        ("outer/proj/tests/test_x.py", "LL005"),
        ("outer/top.py", "LL004"),
    ]
    settings = lint(nested, "--show-settings", "outer/proj/tests/test_x.py").stdout
    assert f"Settings path: {nested / 'outer' / 'proj' / 'pyproject.toml'}" in settings
    assert 'per-file-ignores = {"tests/*": ["LL004"]}' in settings

    # --config: one config for every file; --isolated: none.
    write(nested / "only4.toml", 'select = ["LL004"]\nportability = "strict"\n')
    result = lint(nested, "--config", "only4.toml", "--statistics", "outer")
    assert result.stdout == "    3\tLL004 \t[*] raw-empty-cache\n"
    result = lint(nested, "--isolated", "--statistics", "outer")
    assert result.stdout == (  # the default scope leaves tests/ out, and says so
        "    2\tLL004 \t[*] raw-empty-cache\n    2\tLL005 \t[*] hard-coded-cuda-call\n"
        '    1\tLL004 \t    left out: non-library path (portability = "strict" reports them)\n'
        '    1\tLL005 \t    left out: non-library path (portability = "strict" reports them)\n'
    )


def test_dedicated_config_file_wins_in_its_folder(nested):
    proj = nested / "outer" / "proj"
    write(proj / "lifetime-lint.toml", 'select = ["LL004"]\n')
    result = lint(nested, "--statistics", "outer/proj/src/x.py")
    assert result.stdout == "    1\tLL004 \t[*] raw-empty-cache\n"
    write(proj / ".lifetime-lint.toml", 'select = ["LL005"]\n')
    result = lint(nested, "--statistics", "outer/proj/src/x.py")
    assert result.stdout == "    1\tLL005 \t[*] hard-coded-cuda-call\n"


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ('[tool.lifetime-lint]\nselect = ["ALL"\n', 2, "invalid TOML"),
        ("[tool.lifetime-lint]\nselect = [\n", 2, "invalid TOML"),
        ("[tool.ruff]\nline-length = = 3\n", 2, "invalid TOML"),
        ('[tool.lifetime-lint]\nselec = ["ALL"]\n', 2, "unknown key (did you mean 'select'?)"),
        ('[tool.lifetime-lint]\nselect = [""]\n', 2, "empty rule selector ''"),
        ("[tool]\nlifetime-lint = 3\n", 2, "`tool.lifetime-lint` must be a table"),
        (
            '[tool.lifetime-lint.hard-coded-cuda-call]\nreplacements = { synchronise = "a.b:c" }\n',
            2,
            "unknown name 'synchronise' for LL005 (did you mean 'synchronize'?)",
        ),
        (
            '[tool.lifetime-lint.hard-coded-cuda-call]\nallowed-calls = ["synchronise"]\n',
            2,
            "unknown name 'synchronise' for LL005",
        ),
        (
            '[tool.lifetime-lint]\nselect = ["ALL"]\n\n[tool.lifetime-lint.hard-coded-cuda-call]\n'
            'banned-calls = ["nonexistent_fn"]\n',
            5,
            "unknown name 'nonexistent_fn' for LL005",
        ),
    ],
)
def test_broken_nearest_config_is_an_error_not_skipped(nested, text, line, message):
    """A broken pyproject.toml where the search finds it fails the run (exit 2, file and
    line), even though a valid config sits in the folder above."""
    proj = nested / "outer" / "proj"
    (proj / "pyproject.toml").write_text(text)
    for cwd, target in ((nested, "outer/proj/src/x.py"), (proj / "src", "x.py")):
        result = lint(cwd, target)
        assert result.returncode == 2, result
        assert f"{proj / 'pyproject.toml'}:{line}:" in result.stderr, result.stderr
        assert message in result.stderr
        assert "LL004" not in result.stdout


def test_valid_option_names_are_accepted(nested):
    proj = nested / "outer" / "proj"
    (proj / "pyproject.toml").write_text(
        "[tool.lifetime-lint.hard-coded-cuda-call]\n"
        'allowed-calls = ["synchronize"]\nextend-banned-calls = ["get_device_name"]\n'
    )
    result = lint(nested, "--select", "LL005", "outer/proj/src/x.py")
    assert result.returncode == 0, result


# -- stdin ------------------------------------------------------------------------------------


def test_stdin_with_filename_uses_that_files_settings(nested):
    name = "outer/proj/tests/test_x.py"
    result = lint(nested, "-", "--stdin-filename", name, stdin=FINDINGS)
    assert result.returncode == 1
    assert result.stdout.startswith(f"{name}:7:5: LL005 [*]"), result.stdout
    assert "LL004" not in result.stdout  # per-file-ignores of the file it stands for

    fixed = lint(nested, "-", "--fix", "--stdin-filename", "outer/proj/src/x.py", stdin=FINDINGS)
    assert fixed.returncode == 0, fixed
    assert "    reclaim()\n" in fixed.stdout and "torch.accelerator.synchronize()" in fixed.stdout
    compile(fixed.stdout, "x.py", "exec")
    assert "Found 2 errors (2 fixed, 0 remaining)." in fixed.stderr
    assert (nested / "outer" / "proj" / "src" / "x.py").read_text() == FINDINGS  # untouched

    diff = lint(nested, "-", "--diff", "--stdin-filename", "outer/proj/src/x.py", stdin=FINDINGS)
    assert diff.returncode == 1 and "+    reclaim()" in diff.stdout
    clean = lint(nested, "-", "--fix", stdin="x = 1\n")
    assert clean.returncode == 0 and clean.stdout == "x = 1\n"


def test_python_api_for_editors(nested):
    from lifetime_lint.api import check_text, settings_for

    path = str(nested / "outer" / "proj" / "tests" / "test_x.py")
    settings = settings_for(path)
    result = check_text(FINDINGS, path, settings)
    assert [d.code for d in result.diagnostics] == ["LL005"]
    fixed = check_text(FINDINGS, path, settings, fix=True)
    assert fixed.diagnostics == [] and "torch.accelerator.synchronize()" in fixed.fixed_text
    assert [d.code for d in fixed.found] == ["LL005"]


# -- flags -------------------------------------------------------------------------------------


def test_output_format_env_alias_output_file_and_color(tmp_path):
    write(tmp_path / "a.py", FINDINGS)
    as_json = lint(tmp_path, "--output-format", "json", "a.py").stdout
    assert [item["code"] for item in json.loads(as_json)] == ["LL004", "LL005"]
    assert lint(tmp_path, "--format", "json", "a.py").stdout == as_json
    assert lint(tmp_path, "a.py", LIFETIME_LINT_OUTPUT_FORMAT="json").stdout == as_json
    assert lint(tmp_path, "--format", "text", "a.py", LIFETIME_LINT_OUTPUT_FORMAT="json"
                ).stdout.startswith("a.py:6:5:")  # fmt: skip
    bad = lint(tmp_path, "a.py", LIFETIME_LINT_OUTPUT_FORMAT="yaml")
    assert bad.returncode == 2 and "LIFETIME_LINT_OUTPUT_FORMAT" in bad.stderr

    result = lint(tmp_path, "-o", "report.json", "--output-format", "json", "a.py")
    assert result.returncode == 1 and result.stdout == ""
    assert (tmp_path / "report.json").read_text() == as_json

    coloured = lint(tmp_path, "--color", "always", "a.py").stdout
    assert "\x1b[" in coloured and "LL004" in coloured
    assert "\x1b[" not in lint(tmp_path, "a.py").stdout  # not a terminal
    assert "\x1b[" not in lint(tmp_path, "--color", "auto", "a.py", NO_COLOR="1").stdout


def test_fix_only_no_fix_and_exit_non_zero_on_fix(tmp_path):
    target = write(tmp_path / "a.py", FINDINGS)
    result = lint(tmp_path, "--fix", "--no-fix", "a.py")
    assert result.returncode == 1 and target.read_text() == FINDINGS
    result = lint(tmp_path, "--fix-only", "a.py")
    assert result.returncode == 0 and result.stdout == "Fixed 2 errors.\n", result
    assert "reclaim()" in target.read_text()
    target.write_text(FINDINGS)
    result = lint(tmp_path, "--fix", "--exit-non-zero-on-fix", "a.py")
    assert result.returncode == 1, result
    assert lint(tmp_path, "--fix", "--exit-non-zero-on-fix", "a.py").returncode == 0


def test_add_noqa_is_idempotent(tmp_path):
    source = textwrap.dedent(
        """\
        import torch


        def decode(vae, latents):
            video = vae.decode(latents).sample
            torch.cuda.empty_cache()  # free the decode's workspace
            torch.cuda.synchronize()  # noqa: LL004
            peak = dict(
                allocated=torch.cuda.max_memory_allocated(),
            )
            return video, peak
        """
    )
    target = write(tmp_path / "a.py", source)
    assert lint(tmp_path, "a.py").returncode == 1
    result = lint(tmp_path, "--add-noqa", "a.py")
    assert result.returncode == 0, result
    assert "Added 3 noqa directives." in result.stderr
    once = target.read_text()
    assert "torch.cuda.empty_cache()  # free the decode's workspace  # noqa: LL004\n" in once
    assert "torch.cuda.synchronize()  # noqa: LL004, LL005\n" in once
    assert "allocated=torch.cuda.max_memory_allocated(),  # noqa: LL005\n" in once
    assert lint(tmp_path, "a.py").returncode == 0  # every finding is now suppressed
    again = lint(tmp_path, "--add-noqa", "a.py")
    assert "Added 0 noqa directives." in again.stderr
    assert target.read_text() == once


# -- statistics agree across check, --diff and --fix; the cache serves --diff and --fix ----


def test_statistics_agree_between_check_diff_and_fix(tmp_path):
    tree = tmp_path / "tree"
    shutil.copytree(
        ROOT / "tests" / "fixtures", tree, ignore=shutil.ignore_patterns("*.fixed.py", "*.expected")
    )
    check = lint(tree, "--statistics", "--isolated", "--no-cache", ".")
    assert check.stdout.count("\n") >= 3, check
    diff = lint(tree, "--statistics", "--isolated", "--no-cache", "--diff", ".")
    assert diff.stdout == check.stdout
    cached_diff = lint(tree, "--statistics", "--isolated", "--diff", ".")
    assert cached_diff.stdout == check.stdout
    fix = lint(tree, "--statistics", "--isolated", "--fix", ".")
    assert fix.stdout == check.stdout
    assert "fixed" in fix.stderr


def test_second_diff_and_fix_after_diff_parse_nothing(tmp_path):
    write(tmp_path / "pkg" / "a.py", FINDINGS)
    write(tmp_path / "pkg" / "b.py", FINDINGS.replace("decode", "encode"))
    write(tmp_path / "pkg" / "clean.py", "import torch\n\nx = torch.zeros(3)\n")
    first = lint(tmp_path, "--diff", "pkg", probe=True)
    assert first.returncode == 1 and "+    reclaim()" in first.stdout
    assert "LIBCST-IMPORTED" in first.stderr
    second = lint(tmp_path, "--diff", "pkg", probe=True)
    assert second.stdout == first.stdout
    assert "Would apply 4 fixes." in second.stderr and "NO-LIBCST" in second.stderr

    fixed = lint(tmp_path, "--fix", "pkg", probe=True)  # writes what --diff computed
    assert fixed.returncode == 0 and "NO-LIBCST" in fixed.stderr, fixed
    assert "Found 4 errors (4 fixed, 0 remaining)." in fixed.stdout
    assert "    reclaim()\n" in (tmp_path / "pkg" / "a.py").read_text()
    warm = lint(tmp_path, "pkg", probe=True)
    assert warm.returncode == 0 and "NO-LIBCST" in warm.stderr, warm


def test_warm_check_imports_no_libcst(tmp_path):
    write(tmp_path / "a.py", FINDINGS)
    write(
        tmp_path / "pyproject.toml",
        '[tool.lifetime-lint.raw-empty-cache]\nreclaim-call = "a.b:c"\n',
    )
    cold = lint(tmp_path, ".", probe=True)
    assert "LIBCST-IMPORTED" in cold.stderr
    warm = lint(tmp_path, ".", probe=True)
    assert warm.stdout == cold.stdout and "NO-LIBCST" in warm.stderr
    (tmp_path / "pyproject.toml").write_text('[tool.lifetime-lint]\nignore = ["LL005"]\n')
    changed = lint(tmp_path, ".", probe=True)  # a config change re-validates with the rules
    assert "LL005" not in changed.stdout and "LIBCST-IMPORTED" in changed.stderr
