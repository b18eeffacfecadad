"""A notebook named on the command line is checked cell by cell and fixed into its JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from lifetime_lint.cli import main


def notebook(cells, **dump):
    document = {
        "cells": [
            {"cell_type": kind, "metadata": {"tags": ["t"]}, "source": source}
            | ({"execution_count": None, "outputs": []} if kind == "code" else {})
            for kind, source in cells
        ],
        "metadata": {"kernelspec": {"display_name": "Python 3", "name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    options = {"indent": 1, "sort_keys": True, "ensure_ascii": False} | dump
    return (json.dumps(document, **options) + "\n").encode()


CELLS = [
    ("markdown", ["# Offload\n", "`torch.cuda.empty_cache()` in prose is no call."]),
    ("code", ["%matplotlib inline\n", "import torch"]),
    ("code", "x = torch.ones(3)  # caf\u00e9"),
    (
        "code",
        [
            "def offload(t):\n",
            "    !echo offloading\n",
            "    del t\n",
            "    torch.cuda.empty_cache()\n",
            "    return 1",
        ],
    ),
    ("code", ["%%bash\n", "echo torch.cuda.empty_cache()\n"]),
    ("code", ["offload(x)"]),
]


def run(*args):
    # Notebooks are not library code: the portability rules see them under `strict` only.
    config = os.path.join(os.getcwd(), "pyproject.toml")
    if not os.path.exists(config):
        with open(config, "w", encoding="utf-8") as handle:
            handle.write(
                '[project]\nname = "nb"\ndependencies = ["lifetime-lint"]\n\n'
                '[tool.lifetime-lint]\nportability = "strict"\n'
            )
    return CliRunner().invoke(main, ["--no-cache", *args], catch_exceptions=False)


def _execute(document: dict) -> str:
    """Run the notebook's Python cells in order (magic lines dropped), in a fresh process."""
    code = []
    for cell in document["cells"]:
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if source.startswith("%%"):
            continue
        lines = [line for line in source.split("\n") if not line.lstrip().startswith(("%", "!"))]
        code.append("\n".join(lines))
    code.append("print(offload(x))")
    completed = subprocess.run(
        [sys.executable, "-c", "\n".join(code)],
        capture_output=True,
        text=True,
        env=dict(os.environ, CUDA_VISIBLE_DEVICES=""),
    )
    assert completed.returncode == 0, completed.stderr
    return completed.stdout


def test_notebook_findings_are_reported_by_cell(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "nb.ipynb").write_bytes(notebook(CELLS))
    result = run("nb.ipynb")
    assert result.exit_code == 1
    assert "nb.ipynb:cell 4:4:5: LL004 [*] `torch.cuda.empty_cache()`" in result.output
    assert "All checks passed" not in result.output
    assert result.output.count("LL004") == 1  # not the markdown cell, not the %%bash cell
    data = json.loads(run("--format", "json", "nb.ipynb").output)
    assert [(d["cell"], d["location"]) for d in data] == [(4, {"row": 4, "column": 5})]


def test_notebook_fix_is_written_into_the_json_and_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    original = notebook(CELLS)
    (tmp_path / "nb.ipynb").write_bytes(original)
    before = _execute(json.loads(original))
    assert run("--fix", "nb.ipynb").exit_code == 0
    fixed = (tmp_path / "nb.ipynb").read_bytes()
    document, was = json.loads(fixed), json.loads(original)
    sources = ["".join(c["source"]) if isinstance(c["source"], list) else c["source"]
               for c in document["cells"]]  # fmt: skip
    assert (
        sources[1] == "%matplotlib inline\nimport torch\nfrom lifetime_lint.runtime import reclaim"
    )
    assert sources[3] == (
        "def offload(t):\n    !echo offloading\n    del t\n    reclaim()\n    return 1"
    )
    for index in (0, 2, 4, 5):  # untouched cells keep their exact source
        assert document["cells"][index] == was["cells"][index]
    for index in (1, 3):  # a list of lines stays a list of lines; nothing else changes
        assert isinstance(document["cells"][index]["source"], list)
        assert {k: v for k, v in document["cells"][index].items() if k != "source"} == {
            k: v for k, v in was["cells"][index].items() if k != "source"
        }
    assert document["metadata"] == was["metadata"]
    # Written in the notebook's own layout: re-dumping it the same way is a no-op.
    assert (
        fixed
        == (json.dumps(document, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode()
    )
    assert _execute(document) == before == "1\n"
    assert run("--fix", "nb.ipynb").exit_code == 0
    assert (tmp_path / "nb.ipynb").read_bytes() == fixed  # idempotent


def test_notebook_diff_is_a_patch_of_the_json(tmp_path, monkeypatch):
    import shutil

    if shutil.which("patch") is None:
        pytest.skip("patch is not installed")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "nb.ipynb").write_bytes(notebook(CELLS))
    diff = run("--diff", "nb.ipynb")
    assert diff.exit_code == 1
    (tmp_path / "fix.patch").write_bytes(diff.stdout_bytes)
    expected = tmp_path / "expected"
    expected.mkdir()
    (expected / "nb.ipynb").write_bytes(notebook(CELLS))
    run("--fix", str(expected / "nb.ipynb"))
    subprocess.run(["patch", "-p0", "--batch", "-i", "fix.patch"], check=True, capture_output=True)
    assert (tmp_path / "nb.ipynb").read_bytes() == (expected / "nb.ipynb").read_bytes()


def test_a_layout_that_cannot_be_written_back_is_reported_not_reformatted(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    odd = notebook(CELLS, indent=3)
    (tmp_path / "nb.ipynb").write_bytes(odd)
    result = run("--fix", "nb.ipynb")
    assert result.exit_code == 2
    assert (
        "E902 Not fixed nb.ipynb: its JSON layout is not one this tool can write back"
        in result.output
    )
    assert "nb.ipynb:cell 4:4:5: LL004" in result.output  # still checked
    assert (tmp_path / "nb.ipynb").read_bytes() == odd


def test_broken_notebook_and_syntax_error_in_a_cell(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.ipynb").write_bytes(b'{"cells": [')
    broken = notebook([("code", "import torch"), ("code", ["x = 1\n", "def f(:\n", "  pass"])])
    (tmp_path / "syntax.ipynb").write_bytes(broken)
    result = run("bad.ipynb", "syntax.ipynb")
    assert result.exit_code == 2
    assert "bad.ipynb:1:1: E902 Failed to read bad.ipynb: not a Jupyter notebook" in result.output
    assert "syntax.ipynb:cell 2:2:7: E999 Failed to parse syntax.ipynb:cell 2:2:7:" in result.output
