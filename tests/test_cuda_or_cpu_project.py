"""The CUDA-only project fact at any size (`project._project_fact`): a project of fewer than
`PROJECT_MIN_MODULES` modules is CUDA-only when one of its modules picks the device between
CUDA and the CPU alone (`"cuda" if torch.cuda.is_available() else "cpu"`: gfpgan, whisperx)
and none names another backend; a folder without `__init__.py` inside a package (exllamav2's
`conversion/`) is in that package's project. Real files, the real command; the warm run
(cache on) sees a module that names another backend added later."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from lifetime_lint import cache as cache_module
from lifetime_lint import project
from rule_cli import ll004_rows  # tests/ is on sys.path

RESTORER = """\
import torch


class Restorer:
    def __init__(self, device=None):
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu") \\
            if device is None else device

    def enhance(self, img):
        out = self.net(img.to(self.device))
        torch.cuda.empty_cache()
        return out
"""
VALIDATION = """\
import torch


def validate(model, loader):
    for batch in loader:
        model.test(batch)
        torch.cuda.empty_cache()
"""
# ANY_PROJECT: LL005's device-layer gate off, so its findings show the project fact alone.
CONFIG = (
    '[project]\nname = "restore"\n[tool.lifetime-lint]\n'
    "[tool.lifetime-lint.hard-coded-cuda-call]\nrequire-device-layer = false\n"
)


def _forget() -> None:
    project.forget_all_packages()


@pytest.fixture
def small(tmp_path: Path) -> Path:
    """A repository with a six-module package that picks CUDA or the CPU (gfpgan's shape)."""
    (tmp_path / "pyproject.toml").write_text(CONFIG)
    package = tmp_path / "restore"
    (package / "models").mkdir(parents=True)
    (package / "__init__.py").write_text("from .utils import Restorer\n")
    (package / "utils.py").write_text(RESTORER)
    (package / "version.py").write_text('__version__ = "1.3.8"\n')
    (package / "models" / "__init__.py").write_text("")
    (package / "models" / "model.py").write_text(VALIDATION)
    (package / "models" / "arch.py").write_text("import torch.nn as nn\n\nWIDTH = 64\n")
    _forget()
    yield tmp_path
    _forget()


check = ll004_rows


def test_a_small_cuda_or_cpu_project_is_cuda_only(small: Path) -> None:
    reason = project.cuda_package(str(small / "restore" / "models" / "model.py")).reason
    assert reason is not None and reason.startswith(project.CUDA_PROJECT)
    assert "runs on CUDA or the CPU" in reason and "`restore/utils.py` picks" in reason
    rows, statistics = check(small, "--no-cache")
    assert rows == []
    assert "    2\tLL004 \t    left out: CUDA-only project" in statistics
    (small / "pyproject.toml").write_text(
        CONFIG.replace("]\n[tool", ']\nportability = "strict"\n[tool', 1)
    )
    assert check(small, "--no-cache")[0] == [("model.py", 7), ("utils.py", 11)]


@pytest.mark.parametrize(
    "other",
    [
        'DEVICE = "mps" if torch.backends.mps.is_available() else "cpu"\n',  # another pick
        "def sync():\n    torch.accelerator.synchronize()\n",
        "def pick(i):\n    return torch.device(f'xpu:{i}')\n",
        "class XpuPlatform:\n    pass\n",
    ],
)
def test_a_small_project_naming_another_backend_is_reported(small: Path, other: str) -> None:
    (small / "restore" / "models" / "arch.py").write_text("import torch\n\n" + other)
    assert check(small, "--no-cache")[0] == [("model.py", 7), ("utils.py", 11)]


REACTION = "def on_xpu(t):\n    return t.device.type == 'xpu'  # a dtype fallback\n"


def test_in_a_small_project_any_mention_counts(small: Path) -> None:
    """In a handful of modules one that reacts to another backend is a large share: unlike
    a project of 20+ modules (tests/test_ll004_ll005_portability.py), it is evidence."""
    (small / "restore" / "models" / "arch.py").write_text("import torch\n\n" + REACTION)
    assert check(small, "--no-cache")[0] == [("model.py", 7), ("utils.py", 11)]


@pytest.mark.parametrize(
    "pick",
    [
        'DEVICE = "cuda"\n',  # CUDA chosen, but no pick between CUDA and the CPU
        "def device(i):\n    return f'cuda:{i}'\n",
    ],
)
def test_a_small_project_that_picks_no_cpu_fallback_is_no_evidence(small: Path, pick: str) -> None:
    (small / "restore" / "utils.py").write_text(
        RESTORER.replace('"cuda" if torch.cuda.is_available() else "cpu"', "device") + "\n" + pick
    )
    assert check(small, "--no-cache")[0] == [("model.py", 7), ("utils.py", 11)]


def test_another_backend_added_later_is_seen_by_the_warm_run(small: Path) -> None:
    assert check(small)[0] == []
    time.sleep(cache_module.RACY_NANOSECONDS / 1e9 + 0.2)
    assert check(small)[0] == []  # warm: answered by the stat index
    (small / "restore" / "models" / "arch.py").write_text("DEVICE = 'npu'\n")  # a choice
    assert check(small)[0] == [("model.py", 7), ("utils.py", 11)]


def test_a_folder_without_init_inside_a_cuda_only_package(tmp_path: Path) -> None:
    """exllamav2's `conversion/` (no `__init__.py`) in a package of 20+ modules none of which
    names another backend: the conversion scripts' calls are the CUDA-only project's."""
    (tmp_path / "pyproject.toml").write_text(CONFIG)
    package = tmp_path / "exl"
    (package / "conversion").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    for index in range(22):
        (package / f"layer{index}.py").write_text("import torch\n\nWIDTH = 8\n")
    (package / "conversion" / "quantize.py").write_text(VALIDATION)
    _forget()
    reason = project.cuda_package(str(package / "conversion" / "quantize.py")).reason
    assert reason is not None and reason.startswith(project.CUDA_PROJECT)
    assert check(tmp_path, "--no-cache")[0] == []
    (package / "layer0.py").write_text("import torch\n\nDEVICE = 'xpu'\n")
    _forget()
    assert check(tmp_path, "--no-cache")[0] == [("quantize.py", 7)]


def test_a_loose_folder_is_no_project(tmp_path: Path) -> None:
    """A scripts folder beside the package, not inside it: no project fact."""
    (tmp_path / "pyproject.toml").write_text(CONFIG)
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "run.py").write_text(VALIDATION)
    _forget()
    assert project.cuda_package(str(tmp_path / "scripts" / "run.py")).reason is None
    assert project.project_tree(str(tmp_path / "scripts")) is None
