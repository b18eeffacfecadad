"""A project that imports `torch_npu.contrib.transfer_to_npu` (Ascend's plugin rebinds every
`torch.cuda` function to its `torch.npu` twin for the process: atorch, NPU ports of LLM
trainers): its `torch.cuda` calls are right on CUDA and on the NPU, so LL004/LL005 leave them
out by default, counted under their own `--statistics` row; a module that chooses a third
backend (MPS, XPU) brings them back, since the redirect does nothing there. Real files, the
real command."""

from __future__ import annotations

from pathlib import Path

import pytest

from lifetime_lint import project
from rule_cli import ll004_rows  # tests/ is on sys.path

PATCH = """\
import torch

try:
    import torch_npu
    from torch_npu.contrib import transfer_to_npu
except ImportError:
    pass
"""
TRAINER = """\
import torch


def release(model):
    model.to("cpu")
    torch.cuda.empty_cache()
"""


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "trainer"\n[tool.lifetime-lint]\n')
    package = tmp_path / "trainer"
    (package / "npu").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "npu" / "__init__.py").write_text(PATCH)
    (package / "engine.py").write_text(TRAINER)
    (package / "devices.py").write_text(
        "import torch\n\n\ndef device_type():\n    return 'npu' if is_npu() else 'cuda'\n"
    )
    project.forget_all_packages()
    yield tmp_path
    project.forget_all_packages()


def test_redirected_project_is_left_out_and_counted(tree: Path) -> None:
    rows, statistics = ll004_rows(tree, "--no-cache")
    assert rows == []
    assert "left out: torch.cuda redirected to the NPU (transfer_to_npu)" in statistics
    reason = project.cuda_package(str(tree / "trainer" / "engine.py")).reason
    assert reason is not None and reason.startswith(project.REDIRECTED_PROJECT)
    assert "`trainer/npu/__init__.py` imports" in reason


def test_strict_portability_reports_them(tree: Path) -> None:
    (tree / "pyproject.toml").write_text(
        '[project]\nname = "trainer"\n[tool.lifetime-lint]\nportability = "strict"\n'
    )
    assert ll004_rows(tree, "--no-cache")[0] == [("engine.py", 6)]


@pytest.mark.parametrize(
    "third",
    [
        'DEVICE = "mps" if torch.backends.mps.is_available() else "cpu"\n',
        "def d():\n    return 'xpu'\n",
    ],
)
def test_a_third_backend_chosen_brings_them_back(tree: Path, third: str) -> None:
    (tree / "trainer" / "apple.py").write_text("import torch\n\n" + third)
    assert ll004_rows(tree, "--no-cache")[0] == [("engine.py", 6)]


def test_a_membership_test_is_no_choice(tree: Path) -> None:
    """`return "xla" in str(device)` tests a device; it does not choose XLA."""
    (tree / "trainer" / "probe.py").write_text(
        'import torch\n\n\ndef on_xla(d):\n    return "xla" in str(d).lower()\n'
    )
    assert ll004_rows(tree, "--no-cache")[0] == []


def test_without_the_import_they_are_reported(tree: Path) -> None:
    (tree / "trainer" / "npu" / "__init__.py").write_text("import torch\n\nimport torch_npu\n")
    assert ll004_rows(tree, "--no-cache")[0] == [("engine.py", 6)]
