"""Branches on an optional attribute that the project sets only on CUDA
(`project.attribute_writes`): pipelines copied from older diffusers release their last
offloaded model under `if hasattr(self, "final_offload_hook") and self.final_offload_hook is
not None:` and empty CUDA's cache there. Where no module of the project sets the attribute
to anything but None (DeepCache, SimpleTuner, HiDiffusion), or each write sits in a function
that binds a literal CUDA device (iopaint's copied `enable_model_cpu_offload`), the branch
runs only on CUDA: left out by default. A write anywhere else, a plain `empty_cache()`
beside the gate, or a project that sets the attribute by name keeps it reported. Real
files, the real command; the warm run (cache on) sees a write added elsewhere."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from lifetime_lint import cache as cache_module
from lifetime_lint import project
from rule_cli import ll004_rows  # tests/ is on sys.path

PIPELINE = """\
import torch

from studio.pipelines.base import BasePipeline


class InpaintPipeline(BasePipeline):
    def __call__(self, image, mask, steps=30):
        latents = self.prepare_latents(image, mask)
        for t in self.scheduler.timesteps[:steps]:
            latents = self.step(latents, t)
        image = self.vae.decode(latents).sample

        # Offload the last model to the CPU before returning.
        if hasattr(self, "final_offload_hook") and self.final_offload_hook is not None:
            self.final_offload_hook.offload()
            torch.cuda.empty_cache()
        return image

    def prepare_latents(self, image, mask):
        if getattr(self, "final_offload_hook", None) is not None:
            self.unet.to("cpu")
            torch.cuda.empty_cache()
        return self.vae.encode(image * mask).latent_dist.sample()

    def unload(self):
        self.unet.to("cpu")
        torch.cuda.empty_cache()
"""
BASE = """\
import torch


class BasePipeline:
    def __init__(self, unet, vae, scheduler):
        self.unet, self.vae, self.scheduler = unet, vae, scheduler
        self.final_offload_hook = None

    def to_mps(self):
        return torch.backends.mps.is_available()
"""
# iopaint's copy of diffusers' model offload: the hook is set only after a CUDA device.
CUDA_OFFLOAD = """\

    def enable_model_cpu_offload(self, gpu_id=0):
        from accelerate import cpu_offload_with_hook

        device = torch.device(f"cuda:{gpu_id}")
        hook = None
        for model in [self.unet, self.vae]:
            _, hook = cpu_offload_with_hook(model, device, prev_module_hook=hook)
        self.final_offload_hook = hook
"""
# The same offload on whatever device the caller names: the hook is set on MPS too.
ANY_DEVICE_OFFLOAD = """\

    def enable_model_cpu_offload(self, device="cuda"):
        from accelerate import cpu_offload_with_hook

        hook = None
        for model in [self.unet, self.vae]:
            _, hook = cpu_offload_with_hook(model, torch.device(device), prev_module_hook=hook)
        self.final_offload_hook = hook
"""
CONFIG = '[project]\nname = "studio"\n'


def _forget() -> None:
    project.forget_all_packages()


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A repository with a base pipeline that names MPS (not a CUDA-only project) and a
    copied pipeline with the legacy offload gates."""
    (tmp_path / "pyproject.toml").write_text(CONFIG)
    package = tmp_path / "studio" / "pipelines"
    package.mkdir(parents=True)
    (tmp_path / "studio" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "base.py").write_text(BASE)
    (package / "inpaint.py").write_text(PIPELINE)
    _forget()
    yield tmp_path
    _forget()


UNLOAD = [("inpaint.py", 27)]  # the plain release in `unload` stays reported
GATED = [("inpaint.py", 16), ("inpaint.py", 22)]


def test_a_gate_on_an_attribute_the_project_never_sets_is_left_out(tree: Path) -> None:
    fact = project.attribute_writes(str(tree / "studio" / "pipelines" / "inpaint.py"),
                                    "final_offload_hook")  # fmt: skip
    assert fact is not None and fact.unjudged == () and fact.cuda_bound == ()
    rows, statistics = ll004_rows(tree, "--no-cache")
    assert rows == UNLOAD
    assert "    2\tLL004 \t    left out: branch on an attribute the project sets only on CUDA" in (
        statistics
    )
    (tree / "pyproject.toml").write_text(CONFIG + '[tool.lifetime-lint]\nportability = "strict"\n')
    assert ll004_rows(tree, "--no-cache")[0] == sorted([*UNLOAD, *GATED])


def test_a_gate_set_only_after_a_cuda_device_is_left_out(tree: Path) -> None:
    (tree / "studio" / "pipelines" / "base.py").write_text(BASE + CUDA_OFFLOAD)
    fact = project.attribute_writes(str(tree / "studio" / "pipelines" / "base.py"),
                                    "final_offload_hook")  # fmt: skip
    assert (
        fact is not None
        and fact.unjudged == ()
        and fact.cuda_bound == ("studio/pipelines/base.py:19",)
    )
    assert ll004_rows(tree, "--no-cache")[0] == UNLOAD


@pytest.mark.parametrize(
    "write",
    [
        ANY_DEVICE_OFFLOAD,  # set on whatever device the caller names
        '\n    def attach(self, hook):\n        setattr(self, "final_offload_hook", hook)\n',
        "\n    def final_offload_hook(self):\n        return self.hooks[-1]\n",  # a method
    ],
)
def test_a_gate_set_elsewhere_is_reported(tree: Path, write: str) -> None:
    (tree / "studio" / "pipelines" / "base.py").write_text(BASE + write)
    assert ll004_rows(tree, "--no-cache")[0] == sorted([*UNLOAD, *GATED])


def test_a_plain_hasattr_or_another_object_is_not_a_gate(tree: Path) -> None:
    text = PIPELINE.replace(
        'if hasattr(self, "final_offload_hook") and self.final_offload_hook is not None:',
        'if hasattr(self, "final_offload_hook"):',
    ).replace('getattr(self, "final_offload_hook", None)', 'getattr(self.config, "offload", None)')
    (tree / "studio" / "pipelines" / "inpaint.py").write_text(text)
    assert ll004_rows(tree, "--no-cache")[0] == sorted([*UNLOAD, *GATED])


def test_a_write_added_elsewhere_is_seen_by_the_warm_run(tree: Path) -> None:
    assert ll004_rows(tree)[0] == UNLOAD
    time.sleep(cache_module.RACY_NANOSECONDS / 1e9 + 0.2)
    assert ll004_rows(tree)[0] == UNLOAD  # warm: answered by the stat index
    (tree / "studio" / "pipelines" / "base.py").write_text(BASE + ANY_DEVICE_OFFLOAD)
    assert ll004_rows(tree)[0] == sorted([*UNLOAD, *GATED])
