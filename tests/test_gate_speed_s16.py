"""Session 16's gate speed changes, which change no output: the lint on a roomy frame
stack (`fastpath.on_roomy_stack`) and the process's end right after a `check`
(`fastpath.program`, what `python -m lifetime_lint` and the script run)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from lifetime_lint import fastpath

CHUNKED = sys.implementation.name == "cpython" and sys.version_info >= (3, 11)


def _roomy_frames() -> int:
    frame = sys._getframe()
    count = 0
    while frame is not None:
        count += frame.f_code.co_stacksize == fastpath.ROOMY_STACK_SLOTS
        frame = frame.f_back
    return count


def test_on_roomy_stack_is_the_call_it_wraps() -> None:
    def add(a: int, b: int = 0) -> tuple[int, int]:
        return a + b, _roomy_frames()

    assert fastpath.on_roomy_stack(add, 2, b=3) == (5, 1 if CHUNKED else 0)
    with pytest.raises(ZeroDivisionError):
        fastpath.on_roomy_stack(lambda: 1 / 0)
    assert fastpath._roomy_thread is None  # released after a return and after a raise


def test_nested_calls_reuse_the_roomy_frame_and_other_threads_get_their_own() -> None:
    seen: list[int] = []

    def inner() -> None:
        seen.append(_roomy_frames())

    def outer() -> None:
        fastpath.on_roomy_stack(inner)
        worker = threading.Thread(target=fastpath.on_roomy_stack, args=(inner,))
        worker.start()
        worker.join()

    fastpath.on_roomy_stack(outer)
    assert seen == ([1, 1] if CHUNKED else [0, 0])


@pytest.mark.skipif(not CHUNKED, reason="CPython 3.11+ frame stack")
def test_a_deep_recursion_runs_inside_the_roomy_chunk() -> None:
    """A recursion near the default limit on the roomy stack (inside its chunk, and past
    it where it must be) gives what a plain call gives."""

    def depth(n: int) -> int:
        return 0 if n == 0 else 1 + depth(n - 1)

    assert fastpath.on_roomy_stack(depth, 900) == depth(900) == 900


PROBE = textwrap.dedent(
    """
    import atexit, sys
    from lifetime_lint import fastpath
    if sys.argv[1] == "atexit":
        atexit.register(lambda: print("atexit ran", file=sys.stderr))
    del sys.argv[1]
    fastpath.program(prog_name="lifetime-lint")
    """
)


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LIFETIME_LINT_")}
    return subprocess.run([sys.executable, "-c", PROBE, *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True)  # fmt: skip


def test_the_process_ends_with_the_check_s_status_and_all_its_output(tmp_path: Path) -> None:
    body = "".join(f"\n\ndef f{i}():\n    torch.cuda.synchronize()\n" for i in range(400))
    (tmp_path / "a.py").write_text("import torch\n" + body)
    args = ("check", "--no-cache", "--select", "LL005", "a.py")
    done = _run(tmp_path, "plain", *args)
    assert done.returncode == 1
    assert done.stdout.count("LL005") == 400  # more than a pipe holds: flushed before leaving
    normal = _run(tmp_path, "atexit", *args)  # a callback: the interpreter's own exit
    assert (done.stdout, done.returncode) == (normal.stdout, normal.returncode)
    assert done.stderr + "atexit ran\n" == normal.stderr
    assert _run(tmp_path, "plain", "check", "--no-cache", "missing.py").returncode == 2
    assert _run(tmp_path, "plain", "check", "--no-cache", "--exit-zero", "a.py").returncode == 0


def test_an_atexit_callback_still_runs(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    done = _run(tmp_path, "atexit", "check", "--no-cache", "a.py")
    assert done.returncode == 0 and "atexit ran" in done.stderr


def test_fastpath_main_still_raises_system_exit(tmp_path: Path) -> None:
    """`main` is for callers that go on afterwards: it never ends the process itself."""
    (tmp_path / "a.py").write_text("x = 1\n")
    probe = textwrap.dedent(
        """
        import sys
        from lifetime_lint import fastpath
        sys.argv = ["lifetime-lint", "check", "--no-cache", "a.py"]
        try:
            fastpath.main(prog_name="lifetime-lint")
        except SystemExit as exit:
            print("after main", exit.code)
        """
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True,
                          text=True)  # fmt: skip
    assert done.stdout.splitlines()[-1] == "after main 0"
