"""The kept byte code of dataclass methods (`lifetime_lint.generated_code`), in real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# Defines dataclasses of every generated kind (init with defaults and factories, repr,
# eq, order, frozen, slots, keyword-only, post-init, InitVar, ClassVar, a forward
# reference), imports LibCST and reports what they do and whether anything was compiled.
PROBE = textwrap.dedent(
    """
    import json, sys
    from lifetime_lint import generated_code
    if sys.argv[1] == "cached":
        generated_code.install()
    import dataclasses
    from dataclasses import InitVar, dataclass, field
    from typing import ClassVar

    @dataclass(order=True, frozen=True)
    class Point:
        x: int
        y: "float" = 0.5
        tags: tuple = field(default_factory=tuple)
        origin: ClassVar[int] = 0

    @dataclass(slots=True, kw_only=True)
    class Box:
        size: int = 3
        scale: InitVar[int] = 2
        area: int = field(init=False, default=0)

        def __post_init__(self, scale):
            self.area = self.size * self.size * scale

    import libcst as cst
    module = cst.parse_module("def f(x, *, y=1):\\n    return [x + y for _ in range(3)]\\n")
    p, q = Point(1), Point(1, 2.0, ("a",))
    report = {
        "repr": [repr(p), repr(q), repr(Box(size=4, scale=3))],
        "order": [p < q, p == Point(1), hash(p) == hash(Point(1))],
        "frozen": False,
        "annotations": {k: repr(v) for k, v in Point.__init__.__annotations__.items()},
        "defaults": repr(Point.__init__.__defaults__),
        "kwonly": repr(Box.__init__.__kwdefaults__),
        "slots": Box.__slots__,
        "libcst": module.code,
        "libcst_eq": cst.Name("a").deep_equals(cst.Name("a")),
        "compiled": getattr(generated_code, "_added", None),
        "used": len(generated_code._used),
    }
    try:
        p.x = 2
    except dataclasses.FrozenInstanceError:
        report["frozen"] = True
    print(json.dumps(report, sort_keys=True))
    generated_code.save()
    """
)


def _probe(mode: str, prefix: Path, *extra_env: tuple[str, str]) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(prefix)
    env["PYTHONPATH"] = str(REPO)
    env.update(dict(extra_env))
    done = subprocess.run(
        [sys.executable, "-c", PROBE, mode], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


def _cache_files(prefix: Path) -> list[Path]:
    return sorted(prefix.rglob("dataclass-code.*.marshal"))


def test_cached_code_defines_the_same_classes_and_is_compiled_once(tmp_path: Path) -> None:
    plain = _probe("plain", tmp_path / "plain")
    first = _probe("cached", tmp_path / "cache")
    [written] = _cache_files(tmp_path / "cache")
    second = _probe("cached", tmp_path / "cache")
    assert first["compiled"] is True and second["compiled"] is False
    assert int(second["used"]) > 500  # LibCST's node classes, all served from the file
    for report in (first, second):
        for key in ("compiled", "used"):
            report.pop(key)
    plain.pop("compiled"), plain.pop("used")
    assert first == plain and second == plain
    assert plain["frozen"] is True and plain["order"] == [True, True, True]
    assert _cache_files(tmp_path / "cache") == [written]


def test_no_file_is_written_without_byte_code_writing(tmp_path: Path) -> None:
    _probe("cached", tmp_path, ("PYTHONDONTWRITEBYTECODE", "1"))
    assert _cache_files(tmp_path) == []


def test_a_damaged_file_is_only_a_slower_start(tmp_path: Path) -> None:
    plain = _probe("plain", tmp_path / "plain")
    _probe("cached", tmp_path / "cache")
    [written] = _cache_files(tmp_path / "cache")
    written.write_bytes(written.read_bytes()[:1000])
    damaged = _probe("cached", tmp_path / "cache")
    assert damaged["compiled"] is True
    for report in (plain, damaged):
        report.pop("compiled"), report.pop("used")
    assert damaged == plain
    assert _probe("cached", tmp_path / "cache")["compiled"] is False  # rewritten whole


def test_the_cli_output_is_the_same_with_and_without_the_file(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("import torch\n\n\ndef f():\n    torch.cuda.synchronize()\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LIFETIME_LINT_")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(tmp_path / "pycache")
    command = [sys.executable, "-m", "lifetime_lint", "check", "--no-cache", str(source)]
    runs = [subprocess.run(command, env=env, capture_output=True, text=True) for _ in range(2)]
    assert _cache_files(tmp_path / "pycache")
    assert runs[0].returncode == runs[1].returncode == 1
    assert runs[0].stdout == runs[1].stdout and "LL005" in runs[0].stdout
    assert runs[0].stderr == runs[1].stderr


def test_only_the_linter_uses_it_not_a_profiled_program(tmp_path: Path) -> None:
    """`profile` runs the user's program in this process: its dataclasses are the stock
    interpreter's; `check` (and the other commands) use the kept code."""
    probe = textwrap.dedent(
        """
        import dataclasses, sys
        from lifetime_lint import fastpath
        sys.argv = ["lifetime-lint", *sys.argv[1:]]
        try:
            fastpath.main(prog_name="lifetime-lint")
        except SystemExit:
            pass
        print("exec" in vars(dataclasses), file=sys.stderr)
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("LIFETIME_LINT_")}
    env["PYTHONPYCACHEPREFIX"] = str(tmp_path)
    seen = {}
    for command in ("profile", "check"):
        done = subprocess.run([sys.executable, "-c", probe, command, "--help"], env=env,
                              capture_output=True, text=True, check=True)  # fmt: skip
        seen[command] = done.stderr.strip().splitlines()[-1]
    assert seen == {"profile": "False", "check": "True"}
