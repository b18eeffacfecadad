"""The stat index above the content cache: a warm run answers unchanged files by `stat`
alone (no read, no hash, no LibCST), and never serves a stale answer.

Files are aged past the racy window first (a file modified within the file system's
timestamp granularity of its reading is never trusted by stat: see `cache.RACY_NANOSECONDS`),
by waiting rather than by faking the clock: the change time cannot be set back.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from lifetime_lint import cache as cache_module
from lifetime_lint import project as project_module

DECODE = textwrap.dedent(
    """\
    import torch


    def decode(vae, latents):
        video = vae.decode(latents).sample
        torch.cuda.empty_cache()
        return video
    """
)
# The same size as DECODE, without the finding.
DECODE_CLEAN = DECODE.replace("torch.cuda.empty_cache()", "pass  # no cache emptied")
assert len(DECODE_CLEAN) == len(DECODE)
CLEAN = "import torch\n\n\ndef f(x):\n    return torch.relu(x)\n"

# Reports which modules a run imported and whether it read the source files, from inside
# the real command (a fresh interpreter running `lifetime-lint check`).
PROBE = textwrap.dedent(
    """\
    import builtins, io, os, sys
    opened = []
    real_open = os.open
    def spying_open(path, *args, **kwargs):
        if str(path).endswith(".py"):
            opened.append(os.path.abspath(str(path)))
        return real_open(path, *args, **kwargs)
    os.open = spying_open
    from lifetime_lint.cli import main
    try:
        main(["check", "--jobs", "1", *sys.argv[1:]])
    except SystemExit as exit:
        code = exit.code
    sys.stderr.write("PROBE " + repr((code, sorted(opened), "libcst" in sys.modules,
                                      "lifetime_lint.engine" in sys.modules)) + "\\n")
    """
)


def _wait_out_racy_window() -> None:
    time.sleep(cache_module.RACY_NANOSECONDS / 1e9 + 0.2)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\n')
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "decode.py").write_text(DECODE)
    (tmp_path / "pkg" / "clean.py").write_text(CLEAN)
    _wait_out_racy_window()
    return tmp_path


def lint(tree: Path, *args: str) -> tuple[int, str, tuple]:
    """Run the real CLI in a fresh interpreter; (exit code, stdout, probe)."""
    completed = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        cwd=tree, capture_output=True, text=True, check=False,
    )  # fmt: skip
    line = [x for x in completed.stderr.splitlines() if x.startswith("PROBE ")]
    assert line, completed.stderr
    probe = eval(line[-1][len("PROBE ") :])
    return probe[0], completed.stdout, probe


def index_entries(tree: Path) -> dict:
    (index,) = (tree / ".lifetime_lint_cache").glob("*/index.json")
    return json.loads(index.read_text())["entries"]


def test_warm_run_stats_and_reads_no_file_nor_imports_libcst(tree: Path) -> None:
    code, cold, probe = lint(tree, "pkg")
    assert code == 1 and "pkg/decode.py:6:5: LL004" in cold
    assert probe[2] is True  # the cold run parsed
    assert set(index_entries(tree)) == {str(tree / "pkg" / "decode.py"),
                                        str(tree / "pkg" / "clean.py")}  # fmt: skip
    code, warm, probe = lint(tree, "pkg")
    assert (code, warm) == (1, cold)
    _, opened, libcst_imported, engine_imported = probe
    assert opened == [] and not libcst_imported and not engine_imported


def test_touch_without_change_is_hashed_and_answered_from_the_cache(tree: Path) -> None:
    _, cold, _ = lint(tree, "pkg")
    target = tree / "pkg" / "decode.py"
    before = index_entries(tree)[str(target)]
    os.utime(target)  # a new modification time, the same bytes
    _wait_out_racy_window()
    code, warm, probe = lint(tree, "pkg")
    assert (code, warm) == (1, cold)
    assert probe[1] == [str(target)]  # read (and hashed) again, nothing else
    assert not probe[2]  # the content key answered: nothing parsed
    after = index_entries(tree)[str(target)]
    assert after[0] != before[0] and after[3] == before[3]  # new stat, same content key
    assert lint(tree, "pkg")[2][1] == []  # and the next run trusts the new stat


def test_edit_with_the_same_size_and_restored_mtime_is_seen(tree: Path) -> None:
    target = tree / "pkg" / "decode.py"
    assert "LL004" in lint(tree, "pkg")[1]
    info = os.stat(target)
    target.write_text(DECODE_CLEAN)  # same size
    os.utime(target, ns=(info.st_atime_ns, info.st_mtime_ns))  # the old modification time
    assert os.stat(target).st_size == info.st_size
    assert os.stat(target).st_mtime_ns == info.st_mtime_ns
    code, out, probe = lint(tree, "pkg")
    assert code == 0 and "LL004" not in out  # the change time told
    assert probe[2]  # parsed again


def test_a_file_modified_within_the_racy_window_is_not_trusted_by_stat(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\n')
    time.sleep(cache_module.RACY_NANOSECONDS / 1e9 + 0.2)
    (tmp_path / "fresh.py").write_text(DECODE)
    # Modified "now" as far as the run can tell, however slowly it starts: a time ahead of
    # the clock (a skewed network file system) is as untrustworthy as one within the window.
    ahead = time.time_ns() + 3600 * 10**9
    os.utime(tmp_path / "fresh.py", ns=(ahead, ahead))
    code, out, _ = lint(tmp_path, "fresh.py")
    assert code == 1
    # Not indexed (a same-size rewrite in the same clock tick would keep its stat): the
    # next run reads and hashes it, and answers from the content key.
    entries = list((tmp_path / ".lifetime_lint_cache").glob("*/index.json"))
    assert (
        not entries
        or str(tmp_path / "fresh.py") not in json.loads(entries[0].read_text())["entries"]
    )
    code, again, probe = lint(tmp_path, "fresh.py")
    assert (code, again) == (1, out) and probe[1] == [str(tmp_path / "fresh.py")]


def test_a_config_change_invalidates(tree: Path) -> None:
    assert "LL004" in lint(tree, "pkg")[1]
    with open(tree / "pyproject.toml", "a") as handle:
        handle.write('\n[tool.lifetime-lint]\nignore = ["LL004"]\n')
    code, out, _probe = lint(tree, "pkg")
    assert code == 0 and "LL004" not in out
    with open(tree / "pyproject.toml", "w") as handle:
        handle.write('[project]\nname = "demo"\n')
    assert "LL004" in lint(tree, "pkg")[1]


def test_a_project_file_change_invalidates_the_index(tree: Path) -> None:
    """The project's own files decide fixes (whether it declares lifetime-lint): a new
    requirements file in the project changes the stamp, so the index is not used."""
    lint(tree, "pkg")
    _, _, probe = lint(tree, "pkg")
    assert probe[1] == []
    (tree / "requirements.txt").write_text("lifetime-lint\n")
    _, _, probe = lint(tree, "pkg")
    assert sorted(probe[1]) == sorted([str(tree / "pkg" / "decode.py"),
                                       str(tree / "pkg" / "clean.py")])  # fmt: skip


@pytest.mark.parametrize(
    "garbage",
    [b"", b"{", b"[]", b'{"format": 999, "entries": {}}', b'{"format": 2, "entries": []}',
     b"\\xff\\xfe\\x00", b'{"format": 2, "entries": {"x": 1}}'],
)  # fmt: skip
def test_a_corrupt_or_partial_index_is_a_miss(tree: Path, garbage: bytes) -> None:
    _, cold, _ = lint(tree, "pkg")
    (index,) = (tree / ".lifetime_lint_cache").glob("*/index.json")
    index.write_bytes(garbage)
    code, warm, probe = lint(tree, "pkg")
    assert (code, warm) == (1, cold)
    assert len(probe[1]) == 2  # both read again: the index told nothing
    json.loads(index.read_text())  # and rewritten whole


def test_corrupt_entries_are_misses(tree: Path) -> None:
    _, cold, _ = lint(tree, "pkg")
    (index,) = (tree / ".lifetime_lint_cache").glob("*/index.json")
    payload = json.loads(index.read_text())
    for entry in payload["entries"].values():
        entry[4] = [{"code": "LL004"}]  # findings of the wrong shape, stat still matching
    index.write_text(json.dumps(payload))
    code, warm, _ = lint(tree, "pkg")
    assert (code, warm) == (1, cold)


def test_concurrent_runs_keep_each_others_entries(tree: Path) -> None:
    for i in range(8):
        (tree / "pkg" / f"stage_{i}.py").write_text(DECODE.replace("decode", f"stage_{i}"))
    _wait_out_racy_window()
    runs = [
        subprocess.Popen([sys.executable, "-m", "lifetime_lint", "check", "--jobs", "1",
                          f"pkg/stage_{i}.py"], cwd=tree, stdout=subprocess.DEVNULL)
        for i in range(8)
    ]  # fmt: skip
    assert all(run.wait() == 1 for run in runs)
    entries = index_entries(tree)
    # Each run wrote its file's entry over what was on disk; a lost update is only a miss.
    assert 1 <= len(entries) <= 8
    assert not list((tree / ".lifetime_lint_cache").rglob(".tmp-*"))
    code, out, _probe = lint(tree, "pkg")
    assert code == 1 and out.count("LL004") == 9


def test_project_memo_sees_an_edited_pyproject(tmp_path: Path) -> None:
    """A long-running process (the language server) sees an edited project file once it
    asks `forget_changed_projects`; unchanged projects keep their memo."""
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\n')
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "setup.py").write_text("")
    time.sleep(project_module.RACY_SECONDS + 0.2)
    path = str(tmp_path / "x.py")
    assert project_module.project_for(path).declares is False
    project_module.project_for(str(tmp_path / "other" / "y.py"))
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "demo"\ndependencies = ["lifetime-lint"]\n'
    )
    assert project_module.project_for(path).declares is False  # memoised
    assert project_module.forget_changed_projects() >= 1
    assert project_module.project_for(path).declares is True
    assert str(tmp_path / "other") in project_module._PROJECTS  # untouched, kept


def test_discovery_passes_over_cache_folders(tmp_path: Path) -> None:
    """A folder marked by a CACHEDIR.TAG (the result cache, wherever `--cache-dir` puts it)
    is not walked: a warm run's cache holds as many folders as the tree it lints. A
    CACHEDIR.TAG without the standard signature marks nothing."""
    from lifetime_lint.cache import CACHEDIR_SIGNATURE

    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\n')
    (tmp_path / "a.py").write_text(CLEAN)
    for name, tag in (("marked", CACHEDIR_SIGNATURE + b"\n"), ("unmarked", b"not a tag\n")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "CACHEDIR.TAG").write_bytes(tag)
        (tmp_path / name / "b.py").write_text(CLEAN)
    completed = subprocess.run(
        [sys.executable, "-m", "lifetime_lint", "check", "--show-files", "--cache-dir",
         "marked", "."], cwd=tmp_path, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert completed.stdout.split() == ["a.py", os.path.join("unmarked", "b.py")]
