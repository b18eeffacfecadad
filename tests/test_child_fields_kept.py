"""LibCST's child orders, read from byte code once and kept across processes
(`traversal.save_child_fields`): the same orders as reading them afresh, in real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

# Every node type's order through `child_fields` (kept or read), and read afresh from the
# byte code and source with the keeping bypassed; `dis` calls are counted.
_READ_ALL = """
import dis, json, sys
real = dis.get_instructions
calls = []
dis.get_instructions = lambda *a, **k: (calls.append(1), real(*a, **k))[1]
import libcst as cst
from lifetime_lint import traversal
types = sorted(
    (t for t in vars(cst).values() if isinstance(t, type) and issubclass(t, cst.CSTNode)),
    key=lambda t: t.__name__,
)
kept = {t.__name__: traversal.child_fields(t) for t in types}
dis_calls = len(calls)
fresh = {}
for t in types:
    code = getattr(t._visit_and_replace_children, "__code__", None)
    order = traversal._read_child_fields_from_code(code) if code is not None else None
    fresh[t.__name__] = order if order is not None else traversal.child_fields_from_source(t)
traversal.save_child_fields()
print(json.dumps({"kept": kept, "fresh": fresh, "dis_calls": dis_calls}))
"""


def _run(prefix: Path, **env: str) -> dict:
    environment = {**os.environ, "PYTHONPYCACHEPREFIX": str(prefix), **env}
    environment.pop("PYTHONDONTWRITEBYTECODE", None)
    environment.update(env)
    result = subprocess.run(
        [sys.executable, "-c", _READ_ALL], env=environment, capture_output=True, text=True,
        check=True,
    )  # fmt: skip
    return json.loads(result.stdout)


def _kept_files(prefix: Path) -> list[Path]:
    return sorted(prefix.rglob("child-fields.*.marshal"))


def test_kept_orders_are_the_orders_read_afresh(tmp_path: Path) -> None:
    first = _run(tmp_path)
    assert first["kept"] == first["fresh"]
    assert first["dis_calls"] > 50  # the writing run reads the byte code
    assert len(_kept_files(tmp_path)) == 1
    second = _run(tmp_path)
    assert second["kept"] == second["fresh"] == first["kept"]
    assert second["dis_calls"] == 0  # the reading run reads none


def test_nothing_is_kept_without_byte_code_writing_and_a_bad_file_is_read_afresh(
    tmp_path: Path,
) -> None:
    unwritten = _run(tmp_path, PYTHONDONTWRITEBYTECODE="1")
    assert unwritten["kept"] == unwritten["fresh"]
    assert _kept_files(tmp_path) == []
    _run(tmp_path)
    (kept,) = _kept_files(tmp_path)
    kept.write_bytes(kept.read_bytes()[:40])  # truncated
    damaged = _run(tmp_path)
    assert damaged["kept"] == damaged["fresh"] and damaged["dis_calls"] > 50
    assert _run(tmp_path)["dis_calls"] == 0  # rewritten by the run that read it afresh


def test_the_cli_keeps_the_orders_and_prints_the_same(tmp_path: Path) -> None:
    source = tmp_path / "work" / "model.py"
    source.parent.mkdir()
    source.write_text(
        "import torch\n\n\ndef step(model, batch):\n    loss = model(batch).sum()\n"
        "    torch.cuda.empty_cache()\n    return loss.item()\n"
    )
    environment = {**os.environ, "PYTHONPYCACHEPREFIX": str(tmp_path / "prefix")}
    environment.pop("PYTHONDONTWRITEBYTECODE", None)
    command = [sys.executable, "-m", "lifetime_lint", "check", "--no-cache", str(source)]
    runs = [
        subprocess.run(command, env=environment, capture_output=True, text=True) for _ in range(2)
    ]
    assert len(_kept_files(tmp_path / "prefix")) == 1
    assert "LL004" in runs[0].stdout
    assert [(r.stdout, r.stderr, r.returncode) for r in runs[1:]] == [
        (runs[0].stdout, runs[0].stderr, runs[0].returncode)
    ]
