"""Writing files keeps what the file was; `--diff` is a patch that applies; workers die with
their parent; file-level errors come from one factory.

Real files and permissions: the suite runs as root in CI, so ownership is checked with
`os.chown` to other ids, and "may not write" by running the CLI as `nobody`.
"""

from __future__ import annotations

import errno
import os
import pathlib
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
VIOLATION = b"import torch\n\n\ndef f():\n    torch.cuda.empty_cache()\n"
FIXED = b"from lifetime_lint.runtime import reclaim\n\n\ndef f():\n    reclaim()\n"  # `import torch` left unused goes too (F401)
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
NOBODY = 65534


# Runs the CLI as another user. Python itself lives under /root (0700 here and in CI), so
# the child starts as root, imports everything by fixing a warm-up file, then drops to the
# user and runs the real command in the same process.
_AS_USER = r"""
import contextlib, io, os, sys, tempfile
from lifetime_lint.cli import main

warm = tempfile.mkdtemp()
with open(os.path.join(warm, "w.py"), "w") as handle:
    handle.write("import torch\n\n\ndef f():\n    torch.cuda.empty_cache()\n")
for args in (["check", "--no-cache", "--fix", warm], ["check", "--no-cache", "--diff", warm]):
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            main(args, standalone_mode=False)
    except SystemExit:
        pass
user = int(sys.argv[1])
os.setgid(user)
os.setuid(user)
sys.stdout.flush()
main(["check", "--no-cache", *sys.argv[2:]])
"""


def cli(*args, cwd, user=None, timeout=300):
    if user is None:
        command = [sys.executable, "-m", "lifetime_lint", "check", "--no-cache", *args]
    else:
        command = [sys.executable, "-c", _AS_USER, str(user), *args]
    return subprocess.run(command, cwd=cwd, capture_output=True, timeout=timeout)


@pytest.fixture
def world_tree():
    """A folder anyone can enter (pytest's tmp_path is root's alone)."""
    folder = tempfile.mkdtemp(prefix="ll-data-safety-")
    os.chmod(folder, 0o755)
    yield pathlib.Path(folder)
    shutil.rmtree(folder, ignore_errors=True)


# -- what a fix keeps ---------------------------------------------------------------------


@pytest.mark.skipif(not IS_ROOT, reason="needs root to give the file to another owner")
def test_fix_keeps_owner_group_and_mode(tmp_path):
    path = tmp_path / "t.py"
    path.write_bytes(VIOLATION)
    os.chown(path, 12345, 23456)
    os.chmod(path, 0o640)
    assert cli("--fix", "t.py", cwd=tmp_path).returncode == 0
    info = os.stat(path)
    assert path.read_bytes() == FIXED
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (12345, 23456, 0o640)


def test_fix_keeps_an_executable_bit(tmp_path):
    path = tmp_path / "t.py"
    path.write_bytes(VIOLATION)
    os.chmod(path, 0o751)
    assert cli("--fix", "t.py", cwd=tmp_path).returncode == 0
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o751
    assert path.read_bytes() == FIXED


def test_fix_does_not_split_hard_links(tmp_path):
    path = tmp_path / "t.py"
    path.write_bytes(VIOLATION)
    other = tmp_path / "elsewhere.py"
    os.link(path, other)
    inode = os.stat(path).st_ino
    assert cli("--fix", "t.py", cwd=tmp_path).returncode == 0
    assert other.read_bytes() == FIXED  # the other name sees the fix
    assert os.stat(path).st_ino == inode == os.stat(other).st_ino
    assert os.stat(path).st_nlink == 2


def test_fix_keeps_extended_attributes(tmp_path):
    path = tmp_path / "t.py"
    path.write_bytes(VIOLATION)
    try:
        os.setxattr(path, "user.origin", b"vendored from upstream")
    except OSError as error:
        if error.errno in (errno.ENOTSUP, errno.EOPNOTSUPP, errno.EPERM):
            pytest.skip("this file system keeps no user attributes")
        raise
    assert cli("--fix", "t.py", cwd=tmp_path).returncode == 0
    assert path.read_bytes() == FIXED
    assert os.getxattr(path, "user.origin") == b"vendored from upstream"


def test_unchanged_files_are_not_rewritten(tmp_path):
    path = tmp_path / "t.py"
    path.write_bytes(b"import torch\n")
    before = os.stat(path)
    assert cli("--fix", "t.py", cwd=tmp_path).returncode == 0
    after = os.stat(path)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


# -- what a fix may not write -------------------------------------------------------------


def test_read_only_file_is_reported_and_left_alone(tmp_path):
    """No write bit: reported, not rewritten, even by root and although the folder is
    writable (renaming a new file over it would be possible, but is not permission)."""
    path = tmp_path / "t.py"
    path.write_bytes(VIOLATION)
    os.chmod(path, 0o444)
    completed = cli("--fix", "t.py", cwd=tmp_path)
    out = completed.stdout.decode()
    assert completed.returncode == 2, out
    assert "t.py:1:1: E902 Failed to write t.py: Permission denied" in out
    assert "LL000" not in out and "Please report" not in out
    assert "t.py:5:5: LL004" in out  # its finding is still reported, as not fixed
    assert path.read_bytes() == VIOLATION
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o444


@pytest.mark.skipif(not IS_ROOT, reason="needs root to run the CLI as another user")
def test_a_file_the_user_may_not_write_in_a_folder_they_may(world_tree):
    folder = world_tree / "theirs"
    folder.mkdir()
    os.chown(folder, NOBODY, NOBODY)
    path = folder / "t.py"
    path.write_bytes(VIOLATION)
    os.chmod(path, 0o644)  # root's, readable by all, writable by root only
    completed = cli("--fix", ".", cwd=folder, user=NOBODY)
    out = completed.stdout.decode()
    assert completed.returncode == 2, out + completed.stderr.decode()
    assert "t.py:1:1: E902 Failed to write t.py: Permission denied" in out
    assert "Please report" not in out
    assert path.read_bytes() == VIOLATION
    assert os.stat(path).st_uid == 0


@pytest.mark.skipif(not IS_ROOT, reason="needs root to run the CLI as another user")
def test_a_writable_file_in_a_folder_the_user_may_not_write(world_tree):
    """No temporary file can be made beside it: it is rewritten in place, owner kept."""
    path = world_tree / "t.py"
    path.write_bytes(VIOLATION)
    os.chown(path, NOBODY, NOBODY)
    os.chmod(world_tree, 0o755)  # root's folder
    completed = cli("--fix", "t.py", cwd=world_tree, user=NOBODY)
    assert completed.returncode == 0, completed.stdout.decode() + completed.stderr.decode()
    assert path.read_bytes() == FIXED
    assert os.stat(path).st_uid == NOBODY
    assert [p.name for p in world_tree.iterdir()] == ["t.py"]  # no temporary file left


@pytest.mark.skipif(not IS_ROOT, reason="needs root to run the CLI as another user")
def test_neither_file_nor_folder_writable_is_an_ordinary_permission_error(world_tree):
    path = world_tree / "t.py"
    path.write_bytes(VIOLATION)
    os.chmod(path, 0o644)
    completed = cli("--fix", "t.py", cwd=world_tree, user=NOBODY)
    out = completed.stdout.decode()
    assert completed.returncode == 2
    assert "t.py:1:1: E902 Failed to write t.py: Permission denied" in out
    assert "LL000" not in out and "Internal error" not in out
    assert path.read_bytes() == VIOLATION


# -- --diff is a patch --------------------------------------------------------------------

DIFF_CASES = {
    # Latin-1 with a PEP 263 cookie: the patch is in Latin-1, as the file.
    "latin1.py": b"# -*- coding: latin-1 -*-\nimport torch\nname = '\xe9t\xe9'\n\n\n"
    b"def f():\n    torch.cuda.empty_cache()\n",
    # U+2028 and U+0085 are no line breaks to patch (str.splitlines says they are).
    "u2028.py": "import torch\nNOTE = 'a\u2028b\u0085c'  # \u2028\n\n\ndef f():\n"
    "    torch.cuda.empty_cache()\n".encode(),
    # Form feeds, including one starting a statement line.
    "formfeed.py": b"\x0cimport torch\n\x0c\ndef f():\n    torch.cuda.empty_cache()\n",
    "crlf_bom.py": b"\xef\xbb\xbf" + VIOLATION.replace(b"\n", b"\r\n"),
    "no_final_newline.py": VIOLATION.rstrip(b"\n"),
    "lone_cr_end.py": b"import torch\nfrom torch.cuda import empty_cache\n\n\ndef f():\n"
    b"    empty_cache()\r",
}


@pytest.mark.parametrize("tool", ["patch", "git"])
def test_diff_applies_with_patch_and_git_apply(tmp_path, tool):
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} is not installed")
    source, expected = tmp_path / "source", tmp_path / "expected"
    for folder in (source, expected):
        folder.mkdir()
        for name, data in DIFF_CASES.items():
            (folder / name).write_bytes(data)
    assert cli("--fix", ".", cwd=expected).returncode == 0
    for name, data in DIFF_CASES.items():
        assert (expected / name).read_bytes() != data, name  # every case has a fix
    diff = cli("--diff", ".", cwd=source)
    assert diff.returncode == 1, diff.stderr
    assert all(
        (source / n).read_bytes() == d for n, d in DIFF_CASES.items()
    )  # --diff writes nothing
    (tmp_path / "fix.patch").write_bytes(diff.stdout)
    if tool == "patch":
        command = ["patch", "-p0", "--batch", "--input", str(tmp_path / "fix.patch")]
    else:
        command = ["git", "apply", "-p0", "--unsafe-paths", str(tmp_path / "fix.patch")]
    applied = subprocess.run(command, cwd=source, capture_output=True)
    assert applied.returncode == 0, applied.stdout.decode() + applied.stderr.decode()
    for name in DIFF_CASES:
        assert (source / name).read_bytes() == (expected / name).read_bytes(), name


# -- workers die with their parent ----------------------------------------------------------


def _children(pid: int) -> set[int]:
    found = set()
    for task in pathlib.Path(f"/proc/{pid}/task").glob("*/children"):
        found.update(int(child) for child in task.read_text().split())
    return found


def _alive(pid: int) -> bool:
    try:
        state = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_workers_exit_after_kill_9_of_the_parent(tmp_path):
    slow = (ROOT / "lifetime_lint" / "engine.py").read_bytes() + b"\nimport torch\n"
    slow = b"import torch\n" + slow * 3 + b"\ndef f():\n    torch.cuda.empty_cache()\n"
    for i in range(200):
        (tmp_path / f"f{i:03}.py").write_bytes(slow)
    parent = subprocess.Popen(
        [sys.executable, "-m", "lifetime_lint", "check", "--no-cache", "--jobs", "2", "."],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        workers: set[int] = set()
        while time.monotonic() < deadline and len(workers) < 2:
            workers = _children(parent.pid)
            time.sleep(0.2)
        assert len(workers) >= 2, "the pool never started"
        time.sleep(1.0)  # let them get busy
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and any(_alive(w) for w in workers):
            time.sleep(0.2)
        survivors = [w for w in workers if _alive(w)]
    finally:
        for worker in _children(parent.pid) if parent.poll() is None else ():
            os.kill(worker, signal.SIGKILL)
        if parent.poll() is None:
            parent.kill()
    for worker in survivors:  # do not leave them behind, then fail
        os.kill(worker, signal.SIGKILL)
    assert survivors == []


# -- one factory for file-level errors ------------------------------------------------------


def test_file_level_errors_are_built_in_one_place():
    """E902/E999/LL000 diagnostics (`is_error=True`) are built by lifetime_lint.file_errors."""
    builders = [
        path.relative_to(ROOT).as_posix()
        for path in sorted((ROOT / "lifetime_lint").rglob("*.py"))
        if "is_error=True" in path.read_text()
    ]
    assert builders == ["lifetime_lint/file_errors.py"]
