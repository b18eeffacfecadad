"""The run memo (`lifetime_lint.fastpath`), through real processes: a repeated `check`
prints byte for byte what the full command line prints, exits with its status, imports
neither click nor LibCST when it replays, and misses on every change of an input."""

from __future__ import annotations

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
    # Edited within the racy window: not recorded, so the next run is still the full CLI.
    assert_same(tree, ("check", "."), hit=False)
    settle()
    fast(tree, "check", ".")
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
        ("check", "--diff", "."),
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
