"""The run memo (`lifetime_lint.fastpath`), through real processes: a repeated `check`
prints byte for byte what the full command line prints, exits with its status, imports
neither click nor LibCST when it replays, and misses on every change of an input."""

from __future__ import annotations

import marshal
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from lifetime_lint import fastpath
from lifetime_lint.cache import CACHEDIR_SIGNATURE, DEFAULT_CACHE_DIR, RACY_NANOSECONDS
from lifetime_lint.config import CONFIG_FILENAMES
from lifetime_lint.files import CACHEDIR_TAG
from lifetime_lint.project import _PROJECT_FILES

DECODE = textwrap.dedent(
    """\
    import torch


    def decode(vae, latents):
        video = vae.decode(latents).sample
        torch.cuda.empty_cache()
        peak = torch.cuda.max_memory_allocated()
        return video, peak
    """
)
CLEAN = "import torch\n\n\ndef f(x):\n    return torch.relu(x)\n"
# The full command line, without the fast path in front of it.
FULL = "import sys; from lifetime_lint.cli import main; sys.argv[0] = 'lifetime-lint'; main()"


def test_constants_agree_with_the_modules_they_mirror():
    assert fastpath.CACHE_FOLDER == DEFAULT_CACHE_DIR
    assert fastpath.RACY_NS == RACY_NANOSECONDS
    assert fastpath.CACHEDIR_SIGNATURE == CACHEDIR_SIGNATURE
    assert {*CONFIG_FILENAMES, *_PROJECT_FILES, ".gitignore", ".git", CACHEDIR_TAG} <= set(
        fastpath.SPECIAL_NAMES
    )


@pytest.fixture
def tree(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "pyproject.toml").write_text("[tool.lifetime-lint]\n")
    (tmp_path / ".gitignore").write_text("*.tmp\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "decode.py").write_text(DECODE)
    (tmp_path / "pkg" / "clean.py").write_text(CLEAN)
    return tmp_path


def settle() -> None:
    """Wait until what was just written is older than the racily-clean window."""
    time.sleep(RACY_NANOSECONDS / 1e9 + 0.2)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    env.pop("LIFETIME_LINT_OUTPUT_FORMAT", None)
    return env


def fast(cwd: Path, *args: str) -> tuple[bytes, bytes, int, bool]:
    """`python -m lifetime_lint ARGS` (the entry point): stdout, stderr without the
    `-X importtime` lines, the exit status, and whether click or LibCST was imported."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "lifetime_lint", *args],
        cwd=cwd, capture_output=True, env=_env(),
    )  # fmt: skip
    lines = done.stderr.splitlines(keepends=True)
    timing = b"".join(line for line in lines if line.startswith(b"import time:"))
    rest = b"".join(line for line in lines if not line.startswith(b"import time:"))
    imported = {line.rsplit(b"|", 1)[-1].strip() for line in timing.splitlines()}
    heavy = any(name in imported for name in (b"click", b"libcst"))
    return done.stdout, rest, done.returncode, heavy


def full(cwd: Path, *args: str) -> tuple[bytes, bytes, int]:
    done = subprocess.run(
        [sys.executable, "-c", FULL, *args], cwd=cwd, capture_output=True, env=_env()
    )
    return done.stdout, done.stderr, done.returncode


def assert_same(cwd: Path, args: tuple[str, ...], hit: bool) -> tuple[bytes, bytes, int]:
    out, err, code, heavy = fast(cwd, *args)
    assert (out, err, code) == full(cwd, *args)
    assert heavy is not hit, "expected a replay" if hit else "expected the full CLI"
    return out, err, code


def recorded_then_hit(cwd: Path, *args: str) -> tuple[bytes, bytes, int]:
    settle()
    first = fast(cwd, *args)
    assert first[3], "the first run is the full CLI"
    return assert_same(cwd, args, hit=True)


def test_a_repeated_check_is_replayed_byte_for_byte(tree):
    out, _, code = recorded_then_hit(tree, "check", ".")
    assert code == 1 and b"LL004" in out and out.count(b"\n") > 2
    assert (tree / DEFAULT_CACHE_DIR / fastpath.RUNS_FOLDER).is_dir()


@pytest.mark.parametrize(
    "args",
    [
        ("check", "--output-format", "json", "."),
        ("check", "--statistics", "."),
        ("--statistics", "--output-format", "json"),
        ("check", "--exit-zero", "pkg"),
        ("check", "-q", "pkg/decode.py", "pkg/clean.py"),
        ("check", "--select", "ALL", "--color", "always", "."),
    ],
)
def test_other_plain_invocations_are_replayed(tree, args):
    _, _, code = recorded_then_hit(tree, *args)
    assert code == (0 if "--exit-zero" in args else 1)


def test_a_clean_tree_exits_0_when_replayed(tree):
    (tree / "pkg" / "decode.py").unlink()
    out, err, code = recorded_then_hit(tree, "check", ".")
    assert code == 0 and b"All checks passed" in out + err


def test_an_edit_is_a_miss(tree):
    recorded_then_hit(tree, "check", ".")
    (tree / "pkg" / "clean.py").write_text(DECODE.replace("decode", "render"))
    out, _, code = assert_same(tree, ("check", "."), hit=False)
    assert b"clean.py" in out and code == 1
    # Edited within the racy window: recorded with the digest of what was linted, so the
    # next run replays (re-hashing the racily-clean file).
    assert_same(tree, ("check", "."), hit=True)


def test_an_edit_with_the_same_size_and_time_is_a_miss(tree):
    recorded_then_hit(tree, "check", ".")
    path = tree / "pkg" / "decode.py"
    info = path.stat()
    path.write_text(DECODE.replace("empty_cache", "empty_cachX"))
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
    assert path.stat().st_size == info.st_size
    out, _, _ = assert_same(tree, ("check", "."), hit=False)
    assert b"empty_cache()" not in out


def test_a_new_file_is_a_miss(tree):
    recorded_then_hit(tree, "check", ".")
    (tree / "pkg" / "new.py").write_text(DECODE)
    out, _, _ = assert_same(tree, ("check", "."), hit=False)
    assert b"new.py" in out


def test_a_new_file_in_a_new_folder_is_a_miss(tree):
    recorded_then_hit(tree, "check", ".")
    (tree / "pkg" / "sub").mkdir()
    (tree / "pkg" / "sub" / "deep.py").write_text(DECODE)
    out, _, _ = assert_same(tree, ("check", "."), hit=False)
    assert b"deep.py" in out


def test_a_deleted_file_is_a_miss(tree):
    recorded_then_hit(tree, "check", ".")
    (tree / "pkg" / "decode.py").unlink()
    _, _, code = assert_same(tree, ("check", "."), hit=False)
    assert code == 0


def test_a_deleted_named_file_is_a_miss(tree):
    recorded_then_hit(tree, "check", "pkg/decode.py")
    (tree / "pkg" / "decode.py").unlink()
    _, _, code = assert_same(tree, ("check", "pkg/decode.py"), hit=False)
    assert code == 2


def test_a_changed_pyproject_is_a_miss(tree):
    recorded_then_hit(tree, "check", ".")
    (tree / "pyproject.toml").write_text('[tool.lifetime-lint]\nignore = ["LL004"]\n')
    out, _, _ = assert_same(tree, ("check", "."), hit=False)
    assert b"LL004" not in out


def test_a_nested_config_is_a_miss(tree):
    recorded_then_hit(tree, "check", ".")
    (tree / "pkg" / "lifetime-lint.toml").write_text('ignore = ["LL004"]\n')
    out, _, _ = assert_same(tree, ("check", "."), hit=False)
    assert b"LL004" not in out


def test_absent_special_names_of_a_listed_folder_are_not_stat_watched(tree):
    # The walked folder's listing (and the listing of each folder above taken before the
    # run read anything) names every special entry: an absent one needs no watch of its own.
    recorded_then_hit(tree, "check", ".")
    (memo,) = (tree / DEFAULT_CACHE_DIR / fastpath.RUNS_FOLDER).iterdir()
    watched = {path for _, path, _ in marshal.loads(memo.read_bytes())[2]}
    assert str(tree / "pyproject.toml") in watched and str(tree / ".git") in watched
    assert str(tree / "pkg" / "setup.cfg") not in watched
    assert str(tree / "pkg" / ".git") not in watched
    assert str(tree.parent / "setup.cfg") not in watched  # above: its listing is watched
    (tree / "pkg" / "setup.cfg").write_text("[metadata]\nname = pkg\n")
    assert_same(tree, ("check", "."), hit=False)


def test_a_config_added_in_a_folder_above_is_a_miss(tree):
    inner = tree / "pkg" / "inner"
    inner.mkdir()
    (inner / "decode.py").write_text(DECODE)
    recorded_then_hit(inner, "check", ".")
    (tree / "pkg" / "lifetime-lint.toml").write_text('ignore = ["LL004"]\n')
    out, _, _ = assert_same(inner, ("check", "."), hit=False)
    assert b"LL004" not in out


def test_a_changed_gitignore_is_a_miss(tree):
    recorded_then_hit(tree, "check", ".")
    (tree / ".gitignore").write_text("*.tmp\ndecode.py\n")
    _, _, code = assert_same(tree, ("check", "."), hit=False)
    assert code == 0


def test_a_gitignore_in_a_subfolder_is_a_miss(tree):
    recorded_then_hit(tree, "check", ".")
    (tree / "pkg" / ".gitignore").write_text("decode.py\n")
    _, _, code = assert_same(tree, ("check", "."), hit=False)
    assert code == 0


def test_a_changed_environment_or_argument_is_another_memo(tree):
    recorded_then_hit(tree, "check", ".")
    assert_same(tree, ("check", "--output-format", "grouped", "."), hit=False)
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "lifetime_lint", "check", "."],
        cwd=tree, capture_output=True, env=dict(_env(), LIFETIME_LINT_OUTPUT_FORMAT="json"),
    )  # fmt: skip
    assert b"click" in done.stderr and done.stdout.startswith(b"[")


def test_a_file_error_is_never_replayed(tree):
    (tree / "pkg" / "broken.py").write_text("import torch\ndef f(:\n")
    settle()
    for _ in range(2):
        _, _, code = assert_same(tree, ("check", "."), hit=False)
        assert code == 2


@pytest.mark.parametrize(
    "args",
    [
        ("check", "--fix", "."),
        ("check", "--no-cache", "."),
        ("check", "--show-files", "."),
        ("check", "--diff-base", "HEAD", "."),
    ],
)
def test_other_invocations_always_run_the_full_cli(tree, args):
    subprocess.run(["git", "add", "-A"], cwd=tree, check=True)
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"],
        cwd=tree, check=True,
    )  # fmt: skip
    settle()
    for _ in range(2):
        assert_same(tree, args, hit=False)


def test_a_corrupt_memo_is_a_miss(tree):
    recorded_then_hit(tree, "check", ".")
    runs = tree / DEFAULT_CACHE_DIR / fastpath.RUNS_FOLDER
    for memo in runs.iterdir():
        memo.write_bytes(memo.read_bytes()[:40])
    assert_same(tree, ("check", "."), hit=False)


# The entry point in a script, optionally with pool workers that write to stderr (as a
# warning printed in a worker would): their bytes never reach the recording process.
ENTRY = """
import sys
from lifetime_lint import fastpath, runner

if sys.argv[1] == "noisy":
    real = runner._check_chunk

    def noisy(chunk):
        print("a worker wrote this", file=sys.stderr)
        return real(chunk)

    runner._check_chunk = noisy
del sys.argv[1]
sys.argv[0] = "lifetime-lint"
fastpath.main()
"""


@pytest.mark.parametrize("workers", ["quiet", "noisy"])
def test_output_of_pool_workers_blocks_the_memo(tmp_path, workers):
    (tmp_path / "pyproject.toml").write_text("[tool.lifetime-lint]\n")
    for index in range(40):  # enough files for a pool (runner.PARALLEL_MIN_FILES)
        (tmp_path / f"m{index}.py").write_text(DECODE)
    settle()
    args = ("check", "--jobs", "2", ".")
    done = subprocess.run(
        [sys.executable, "-c", ENTRY, workers, *args], cwd=tmp_path, capture_output=True,
        env=_env(),
    )  # fmt: skip
    assert done.returncode == 1
    assert (b"a worker wrote this" in done.stderr) is (workers == "noisy")
    # Quiet workers: the run recorded its memo; noisy ones: it did not.
    assert_same(tmp_path, args, hit=workers == "quiet")


# -- racily-clean inputs (modified within 2 s of the run): recorded with their digests -------


def _git_add(tree: Path) -> None:
    subprocess.run(["git", "add", "-A"], cwd=tree, check=True)  # a fresh index, as a clone's


def _memo_watches(tree: Path) -> list[tuple[str, str, object]]:
    import marshal

    (memo,) = (tree / DEFAULT_CACHE_DIR / fastpath.RUNS_FOLDER).iterdir()
    return marshal.loads(memo.read_bytes())[2]


def test_a_fresh_tree_is_replayed_without_waiting(tree):
    _git_add(tree)
    first = fast(tree, "check", ".")  # every input was written just now
    assert first[3] and first[2] == 1
    racy = {os.path.relpath(path, tree) for kind, path, _ in _memo_watches(tree) if kind == "h"}
    assert {"pkg/decode.py", "pkg/clean.py", "pyproject.toml", ".gitignore",
            os.path.join(".git", "index")} <= racy  # fmt: skip
    out, _, code = assert_same(tree, ("check", "."), hit=True)
    assert code == 1 and b"LL004" in out


def test_a_fresh_tree_checked_by_pool_workers_is_replayed(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.lifetime-lint]\n")
    for index in range(40):  # enough files for a pool (runner.PARALLEL_MIN_FILES)
        (tmp_path / f"m{index}.py").write_text(DECODE if index % 2 else CLEAN)
    args = ("check", "--jobs", "2", ".")
    assert fast(tmp_path, *args)[3]
    assert_same(tmp_path, args, hit=True)


def test_a_racy_edit_keeping_the_size_and_time_is_re_linted(tree):
    path = tree / "pkg" / "decode.py"
    info = path.stat()
    assert fast(tree, "check", ".")[3]
    path.write_text(DECODE.replace("empty_cache", "empty_cachX"))  # the same second, size
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
    assert path.stat().st_size == info.st_size
    out, _, _ = assert_same(tree, ("check", "."), hit=False)
    assert b"empty_cache()" not in out


def test_a_racily_clean_file_is_re_hashed_on_replay(tree):
    """The case git's racy check guards: a file rewritten with its stat unchanged (an edit
    within one timestamp tick, same size). Its stat cannot be kept by hand, so the memo's
    recorded digest is altered instead: a replay that trusted the stat would hit."""
    import marshal

    assert fast(tree, "check", ".")[3]
    (memo,) = (tree / DEFAULT_CACHE_DIR / fastpath.RUNS_FOLDER).iterdir()
    fmt, material, watches, chunks, code = marshal.loads(memo.read_bytes())
    target = str(tree / "pkg" / "decode.py")
    altered = [(kind, path, (value[0], fastpath.content_digest(b"other")))
               if kind == "h" and path == target else (kind, path, value)
               for kind, path, value in watches]  # fmt: skip
    assert altered != watches
    memo.write_bytes(marshal.dumps((fmt, material, altered, chunks, code)))
    assert_same(tree, ("check", "."), hit=False)


def test_a_racily_clean_watch_holds_only_for_the_same_content(tmp_path):
    path = tmp_path / "a.py"
    path.write_text("x = 1\n")
    signature = fastpath.file_signature(str(path))
    same = [("h", str(path), (signature, fastpath.content_digest(b"x = 1\n")))]
    other = [("h", str(path), (signature, fastpath.content_digest(b"x = 2\n")))]
    assert fastpath._holds(same) and not fastpath._holds(other)
    path.unlink()
    assert not fastpath._holds(same)


# The entry point with `Checker.read` patched to edit each file after its bytes were
# noted, as an editor saving during the run would: what was linted is not what is there.
EDITED_DURING_THE_RUN = """
import sys
from lifetime_lint import fastpath, runner

real = runner.Checker.read


def read(self, path, data):
    real(self, path, data)
    with open(path, "ab") as handle:
        handle.write(b"# saved during the run\\n")


runner.Checker.read = read
sys.argv[0] = "lifetime-lint"
fastpath.main()
"""


def test_a_file_edited_during_the_run_is_not_recorded(tree):
    args = ("check", ".")
    done = subprocess.run([sys.executable, "-c", EDITED_DURING_THE_RUN, *args], cwd=tree,
                          capture_output=True, env=_env())  # fmt: skip
    assert done.returncode == 1
    assert not (tree / DEFAULT_CACHE_DIR / fastpath.RUNS_FOLDER).is_dir() or not any(
        (tree / DEFAULT_CACHE_DIR / fastpath.RUNS_FOLDER).iterdir()
    )
    assert_same(tree, args, hit=False)


def test_a_repeated_diff_is_replayed_and_a_fix_never_is(tree):
    """`--diff` writes nothing but its report, so its second run replays it (issue 14:
    the second `--diff` parses nothing); `--fix` writes files and always runs in full."""
    original = (tree / "pkg" / "decode.py").read_bytes()
    diff = ("check", "--diff", "--unsafe-fixes", ".")
    out, _, code = recorded_then_hit(tree, *diff)
    assert code == 1 and out.startswith(b"--- pkg/decode.py") and b"+    reclaim()" in out
    # The project does not depend on lifetime-lint: the safe run withholds that fix.
    _, err, code = recorded_then_hit(tree, "check", "--diff", "pkg")
    assert code == 0 and b"need --unsafe-fixes" in err
    assert (tree / "pkg" / "decode.py").read_bytes() == original
    # An edit is a miss: a replayed diff is never stale.
    (tree / "pkg" / "decode.py").write_bytes(original.replace(b"video, peak", b"peak, video"))
    settle()
    out, _, _ = assert_same(tree, diff, hit=False)
    assert b"     return peak, video" in out
    assert_same(tree, diff, hit=True)
    for _ in range(2):
        (tree / "pkg" / "decode.py").write_bytes(original)
        settle()
        *_, heavy = fast(tree, "check", "--fix", "--exit-zero", "--unsafe-fixes", ".")
        assert heavy, "a --fix always runs the full CLI"
        assert b"reclaim()" in (tree / "pkg" / "decode.py").read_bytes()
