"""Facts read from folder and file names (ROCm-only folders, CUDA-only kernel packages,
platform folders) use the path from the project's root, not from the working directory: a
checkout that happens to live in a folder called `amd-quark` (or under `/home/rocm/`) is
linted the same from inside and from outside. Real files, the real command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lifetime_lint import project

RELEASE = """\
import torch


def release(model):
    model.to("cpu")
    torch.cuda.empty_cache()
"""


def _rows(cwd: Path, target: str) -> list[tuple[str, int]]:
    run = subprocess.run(
        [sys.executable, "-m", "lifetime_lint", "check", "--no-cache", "--exit-zero",
         "--select", "LL004", "--output-format", "json", target],
        cwd=cwd, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return sorted((Path(d["filename"]).name, d["location"]["row"]) for d in json.loads(run.stdout))


@pytest.mark.parametrize("checkout", ["amd-quark", "rocm", "platforms"])
def test_a_folder_above_the_project_is_not_its_layout(tmp_path: Path, checkout: str) -> None:
    root = tmp_path / "work" / checkout
    package = root / "quark"
    package.mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "quark"\n')
    (package / "__init__.py").write_text("")
    (package / "export.py").write_text(RELEASE)
    (package / "device.py").write_text("import torch\n\nDEVICE = 'xpu'\n")  # a choice
    project.forget_all_packages()
    assert project.project_relative_path(str(package / "export.py")) == "quark/export.py"
    inside = _rows(root, "quark/export.py")
    outside = _rows(tmp_path, str(package / "export.py"))
    assert inside == outside == [("export.py", 6)]


def test_a_loose_file_has_no_project_path(tmp_path: Path) -> None:
    (tmp_path / "loose").mkdir()
    (tmp_path / "loose" / "run.py").write_text(RELEASE)
    path = project.project_relative_path(str(tmp_path / "loose" / "run.py"))
    # no marker up to the filesystem root, no package: None (unless a folder above has one)
    assert path is None or path.endswith("loose/run.py")
