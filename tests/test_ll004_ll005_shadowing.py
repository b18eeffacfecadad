"""LL004/LL005 resolve names with Python's scoping: programs run the same after `--fix`.

Each program binds `torch`, `cuda` or an imported device function to something else in
some scope (a parameter, a local, a module-level or `global` reassignment, a for / with /
except / walrus / match / comprehension target, a class attribute, an enclosing function's
parameter, a lambda parameter, `nonlocal`) and prints what its calls return. Each is run
with CPU torch in a subprocess, fixed with `lifetime-lint check --fix --unsafe-fixes`, and
run again: output and exit status must be the same. The programs whose `torch.cuda` call is
real must still be reported (and fixed); the shadowed ones must not be rewritten.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("torch")

FAKE = """
class _Cuda:
    def device_count(self):
        return 7
    def empty_cache(self):
        print("fake empty_cache")
        return "fake"
    def synchronize(self):
        return "synced"
class Fake:
    cuda = _Cuda()
    def __enter__(self):
        return self
    def __exit__(self, *exc):
        return False
"""

# name -> (program, whether the linter must report a finding in it)
PROGRAMS: dict[str, tuple[str, bool]] = {
    "parameter": (
        """
        import torch
        def count(torch):
            return torch.cuda.device_count()
        print(count(Fake()))
        """,
        False,
    ),
    "local_reassignment": (
        """
        import torch
        def count():
            torch = Fake()
            return torch.cuda.device_count()
        print(count())
        """,
        False,
    ),
    "module_reassignment": (
        """
        import torch
        torch = Fake()
        def count():
            return torch.cuda.device_count()
        print(count())
        """,
        False,
    ),
    "global_statement": (
        """
        import torch
        def install():
            global torch
            torch = Fake()
        install()
        print(torch.cuda.device_count())
        torch.cuda.empty_cache()
        """,
        False,
    ),
    "for_target": (
        """
        import torch
        for torch in [Fake()]:
            print(torch.cuda.device_count())
        """,
        False,
    ),
    "with_target": (
        """
        import torch
        def run():
            with Fake() as torch:
                return torch.cuda.empty_cache()
        print(run())
        """,
        False,
    ),
    "except_target": (
        """
        import torch
        class Failure(Exception):
            cuda = Fake.cuda
        try:
            raise Failure()
        except Failure as torch:
            print(torch.cuda.device_count())
        """,
        False,
    ),
    "walrus_target": (
        """
        import torch
        def run():
            if (torch := Fake()) is not None:
                return torch.cuda.device_count()
        print(run())
        """,
        False,
    ),
    "walrus_in_comprehension": (
        """
        import torch
        def run():
            values = [(torch := item) for item in [Fake()]]
            return torch.cuda.device_count(), len(values)
        print(run())
        """,
        False,
    ),
    "match_capture": (
        """
        import torch
        def run(value):
            match value:
                case [torch]:
                    return torch.cuda.device_count()
                case _:
                    return None
        print(run([Fake()]))
        """,
        False,
    ),
    "comprehension_target": (
        """
        import torch
        print([torch.cuda.device_count() for torch in [Fake(), Fake()]])
        """,
        False,
    ),
    "class_attribute": (
        """
        import torch
        class Holder:
            torch = Fake()
            count = torch.cuda.device_count()
        print(Holder.count)
        """,
        False,
    ),
    "enclosing_parameter": (
        """
        import torch
        def outer(torch):
            def inner():
                return torch.cuda.device_count()
            return inner()
        print(outer(Fake()))
        """,
        False,
    ),
    "lambda_parameter": (
        """
        import torch
        count = lambda torch: torch.cuda.device_count()
        print(count(Fake()))
        """,
        False,
    ),
    "nonlocal": (
        """
        import torch
        def outer():
            torch = None
            def inner():
                nonlocal torch
                torch = Fake()
                return torch.cuda.device_count()
            return inner()
        print(outer())
        """,
        False,
    ),
    "cuda_parameter": (
        """
        from torch import cuda
        def count(cuda):
            return cuda.device_count()
        print(count(Fake.cuda))
        """,
        False,
    ),
    "function_parameter": (
        """
        from torch.cuda import empty_cache
        def free(empty_cache):
            return empty_cache()
        print(free(Fake.cuda.empty_cache))
        """,
        False,
    ),
    "function_local": (
        """
        from torch.cuda import device_count
        def count():
            device_count = lambda: 5
            return device_count()
        print(count())
        """,
        False,
    ),
    "function_reassigned_at_module_level": (
        """
        from torch.cuda import device_count
        device_count = Fake.cuda.device_count
        print(device_count())
        """,
        False,
    ),
    "default_argument_shadow": (
        """
        import torch as t
        def count(t=Fake()):
            return t.cuda.device_count()
        print(count())
        """,
        False,
    ),
    # Real `torch.cuda` calls next to shadowed names: reported, fixed, same behaviour.
    "method_sees_module_not_class_attribute": (
        """
        import torch
        class Holder:
            torch = Fake()
            def count(self):
                torch.cuda.empty_cache()
                return torch.cuda.device_count()
        print(Holder().count(), Holder.torch.cuda.device_count())
        """,
        True,
    ),
    "fix_must_not_use_shadowed_torch": (
        """
        import torch
        from torch import cuda as tc
        def count(torch):
            return tc.device_count(), torch.cuda.device_count()
        print(count(Fake()))
        """,
        True,
    ),
    "fix_must_not_use_shadowed_helper": (
        """
        import torch
        from lifetime_lint.runtime import reclaim
        def free(reclaim):
            torch.cuda.empty_cache()
            return reclaim
        print(free("kept"))
        reclaim()
        """,
        True,
    ),
    "star_import": (
        """
        from torch.cuda import *
        empty_cache()
        print(device_count())
        """,
        True,
    ),
    "optional_torch": (
        """
        try:
            import torch
        except ImportError:
            torch = None
        def free():
            torch.cuda.empty_cache()
            return "freed"
        print(free())
        """,
        True,
    ),
    "alias_assignment": (
        """
        import torch
        free = torch.cuda.empty_cache
        def run():
            free()
            return "done"
        print(run())
        """,
        True,
    ),
    "parameter_elsewhere": (
        """
        import torch
        def other(torch):
            return torch.cuda.device_count()
        def count():
            return torch.cuda.device_count()
        print(other(Fake()), count())
        """,
        True,
    ),
}


RUNNER = """
import contextlib, io, json, runpy, sys
results = {}
for path in sys.argv[1:]:
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_path(path, run_name="__main__")
        outcome = "ok"
    except BaseException as error:  # the program's failure is part of its behaviour
        outcome = type(error).__name__
    results[path] = [outcome, out.getvalue()]
print(json.dumps(results))
"""


def _run_all(paths: list[Path]) -> dict[str, list[str]]:
    """Each program's outcome and output, run in one CPU-torch process (torch imports once)."""
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, *map(str, paths)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def _lint(folder: Path, *flags: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "lifetime_lint", "check", "--no-cache", "--exit-zero",
         "--select", "LL004,LL005", "--format", "json", *flags, "."],
        capture_output=True, text=True, timeout=600, cwd=folder,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def outcome(tmp_path_factory):
    folder = tmp_path_factory.mktemp("shadowing")
    (folder / "pyproject.toml").write_text('[tool.lifetime-lint]\nportability = "strict"\n')
    paths = {}
    for name, (body, _) in PROGRAMS.items():
        paths[name] = folder / f"{name}.py"
        paths[name].write_text(FAKE + textwrap.dedent(body), encoding="utf-8")
    originals = {name: path.read_text(encoding="utf-8") for name, path in paths.items()}
    before = _run_all(list(paths.values()))
    findings = json.loads(_lint(folder))
    _lint(folder, "--fix", "--unsafe-fixes")
    after = _run_all(list(paths.values()))
    reported = {Path(f["filename"]).stem for f in findings}
    return paths, originals, before, after, reported


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_fix_keeps_behaviour(outcome, name: str) -> None:
    paths, originals, before, after, reported = outcome
    path = paths[name]
    fixed = path.read_text(encoding="utf-8")
    assert (name in reported) == PROGRAMS[name][1]
    assert after[str(path)] == before[str(path)], f"behaviour changed:\n{fixed}"
    if PROGRAMS[name][1]:
        assert fixed != originals[name], "a real finding should have been fixed"
    else:
        assert fixed == originals[name], "a shadowed name was rewritten"


def test_programs_ran(outcome) -> None:
    """The comparison means something: the fake objects were really called."""
    paths, _, before, _, _ = outcome
    assert before[str(paths["parameter"])] == ["ok", "7\n"]
    assert before[str(paths["global_statement"])] == ["ok", "7\nfake empty_cache\n"]
