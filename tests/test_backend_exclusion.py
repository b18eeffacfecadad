"""Models a project keeps off a backend (`project.backend_exclusion`): iopaint lists
`MPS_UNSUPPORT_MODELS = ["lama", "ldm", ...]` in its `const.py` and runs those models on the
CPU when MPS is asked for; it names no backend but MPS beside CUDA. A model on that list
(`class LDM(InpaintModel): name = "ldm"`) never runs on an accelerator but CUDA: its
`torch.cuda.empty_cache()` is left out by default. A shared helper, a model off the list, or
a project that also names a backend without a list stays reported. Real files, the real
command; the warm run (cache on) sees the list edited."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from lifetime_lint import cache as cache_module
from lifetime_lint import project
from rule_cli import ll004_rows  # tests/ is on sys.path

CONST = """\
MPS_UNSUPPORT_MODELS = [
    "lama",
    "ldm",
    "manga",
]

DEFAULT_MODEL = "lama"
AVAILABLE_MODELS = ["lama", "ldm", "manga", "sd"]
"""
HELPER = """\
import torch

from inpaint.const import MPS_UNSUPPORT_MODELS


def switch_mps_device(model_name, device):
    if model_name in MPS_UNSUPPORT_MODELS and str(device) == "mps":
        return torch.device("cpu")
    return device


def torch_gc():
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
"""
LDM = """\
import torch

from inpaint.model.base import InpaintModel


class LDM(InpaintModel):
    name = "ldm"

    def forward(self, image, mask):
        c = self.encode(image.to(self.device))
        torch.cuda.empty_cache()
        samples = self.sampler.sample(c, mask)
        torch.cuda.empty_cache()
        return self.decode(samples)
"""
SD = """\
import torch

from inpaint.model.base import InpaintModel


class SD(InpaintModel):
    name = "sd"

    def forward(self, image, mask):
        out = self.pipe(image=image, mask_image=mask)
        torch.cuda.empty_cache()
        return out
"""
BASE = """\
import torch


class InpaintModel:
    name = "base"

    def __init__(self, device):
        self.device = device

    def to_mps(self):
        return torch.backends.mps.is_available()
"""
CONFIG = '[project]\nname = "inpaint"\n'


def _forget() -> None:
    project.forget_all_packages()


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A repository shaped like iopaint: a constant module with the MPS list, a device
    switch, a shared cleanup helper, a model on the list and one off it."""
    (tmp_path / "pyproject.toml").write_text(CONFIG)
    package = tmp_path / "inpaint"
    (package / "model").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "const.py").write_text(CONST)
    (package / "helper.py").write_text(HELPER)
    (package / "model" / "__init__.py").write_text("")
    (package / "model" / "base.py").write_text(BASE)
    (package / "model" / "ldm.py").write_text(LDM)
    (package / "model" / "sd.py").write_text(SD)
    _forget()
    yield tmp_path
    _forget()


check = ll004_rows


REPORTED = [("helper.py", 14), ("sd.py", 11)]


def test_a_model_on_every_exclusion_list_is_left_out(tree: Path) -> None:
    fact = project.backend_exclusion(str(tree / "inpaint" / "model" / "ldm.py"))
    assert fact is not None and fact.backends == "MPS"
    assert fact.names == {"lama", "ldm", "manga"}
    assert "`MPS_UNSUPPORT_MODELS` (inpaint/const.py)" in fact.lists
    rows, statistics = check(tree, "--no-cache")
    assert rows == REPORTED  # the shared helper and the model MPS runs stay reported
    assert "    2\tLL004 \t    left out: model the project keeps off other backends" in statistics
    (tree / "pyproject.toml").write_text(CONFIG + '[tool.lifetime-lint]\nportability = "strict"\n')
    assert check(tree, "--no-cache")[0] == sorted([*REPORTED, ("ldm.py", 11), ("ldm.py", 13)])


@pytest.mark.parametrize(
    "other",
    [
        "def on_xpu(t):\n    return t.device.type == 'xpu'\n",  # a backend without a list
        "def sync():\n    torch.accelerator.synchronize()\n",
    ],
)
def test_a_project_naming_a_backend_without_a_list_is_reported(tree: Path, other: str) -> None:
    (tree / "inpaint" / "model" / "base.py").write_text(BASE + "\n\n" + other)
    assert project.backend_exclusion(str(tree / "inpaint" / "model" / "ldm.py")) is None
    assert check(tree, "--no-cache")[0] == sorted([*REPORTED, ("ldm.py", 11), ("ldm.py", 13)])


def test_a_backend_named_only_in_a_url_is_not_one(tree: Path) -> None:
    (tree / "inpaint" / "model" / "base.py").write_text(
        BASE + '\n\n# See https://github.com/tensorflow/tpu/issues/494 ("drop path")\n'
    )
    assert check(tree, "--no-cache")[0] == REPORTED


def test_the_list_edited_is_seen_by_the_warm_run(tree: Path) -> None:
    assert check(tree)[0] == REPORTED
    time.sleep(cache_module.RACY_NANOSECONDS / 1e9 + 0.2)
    assert check(tree)[0] == REPORTED  # warm: answered by the stat index
    (tree / "inpaint" / "const.py").write_text(CONST.replace('    "ldm",\n', ""))
    assert check(tree)[0] == sorted([*REPORTED, ("ldm.py", 11), ("ldm.py", 13)])
