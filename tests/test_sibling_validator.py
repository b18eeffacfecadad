"""A validator imported from a module beside the launcher (`devices._imported_validator_backend`):
SGLang's rope kernels keep `_validate_qknorm_complex_rope` (`if not (x.is_cuda and
torch.version.hip is None and ...): raise`) in one module and call it from the launcher of
another module of the same folder before `with torch.cuda.device(k.device):`. Past the
call the tensors are CUDA's, so the call is left out by default. A validator that checks
shapes only, one from a module of another folder, or a local function of the same name
keeps it reported. Real files, the real command; the warm run (cache on) sees the
validator edited."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lifetime_lint import cache as cache_module
from lifetime_lint import project

VALIDATOR = """\
import torch


def _validate_rope(x, weight):
    if not (
        x.is_cuda
        and torch.version.hip is None
        and x.ndim == 4
        and weight.device == x.device
    ):
        raise RuntimeError("invalid input for rope")
"""
SHAPES_ONLY = VALIDATOR.replace("        x.is_cuda\n        and torch.version.hip is None\n", "")
LAUNCHER = """\
import torch

from {module} import _validate_rope


def rope_kv(k, weight):
    k = k.contiguous()
    _validate_rope(k, weight)
    out = torch.empty_like(k)
    with torch.cuda.device(k.device):
        _launch(k, weight, out)
    return out
"""
CONFIG = '[project]\nname = "kernels"\n'


def _rows(root: Path, *flags: str) -> list[tuple[str, int]]:
    args = [sys.executable, "-m", "lifetime_lint", "check", "--jobs", "1", "--select", "LL005",
            "--exit-zero", "--output-format", "json", *flags, "."]  # fmt: skip
    found = subprocess.run(args, cwd=root, capture_output=True, text=True, check=True)
    return sorted(
        (Path(d["filename"]).name, d["location"]["row"]) for d in json.loads(found.stdout)
    )


def _tree(root: Path, module: str, validator: str = VALIDATOR) -> Path:
    """A repository with a platform layer (so LL005 reports by default) and a `rope/`
    package holding the validator's module and the launcher."""
    (root / "pyproject.toml").write_text(CONFIG)
    package = root / "kernels"
    (package / "platforms").mkdir(parents=True)
    (package / "rope").mkdir()
    (package / "other").mkdir()
    for folder in (package, package / "platforms", package / "rope", package / "other"):
        (folder / "__init__.py").write_text("")
    (package / "rope" / "checks.py").write_text(validator)
    (package / "other" / "checks.py").write_text(validator)
    (package / "rope" / "launch.py").write_text(LAUNCHER.format(module=module))
    return root


@pytest.fixture(autouse=True)
def _forget():
    project.forget_all_packages()
    yield
    project.forget_all_packages()


REPORTED = [("launch.py", 10)]


@pytest.mark.parametrize("module", ["kernels.rope.checks", ".checks"])
def test_past_a_sibling_validator_that_requires_cuda_is_left_out(
    tmp_path: Path, module: str
) -> None:
    root = _tree(tmp_path, module)
    assert _rows(root, "--no-cache") == []
    (root / "pyproject.toml").write_text(CONFIG + '[tool.lifetime-lint]\nportability = "strict"\n')
    assert _rows(root, "--no-cache") == REPORTED


def test_a_validator_of_shapes_only_is_reported(tmp_path: Path) -> None:
    assert _rows(_tree(tmp_path, ".checks", SHAPES_ONLY), "--no-cache") == REPORTED


def test_a_validator_of_another_folder_is_not_read(tmp_path: Path) -> None:
    assert _rows(_tree(tmp_path, "kernels.other.checks"), "--no-cache") == REPORTED


def test_a_local_function_of_the_same_name_is_not_the_import(tmp_path: Path) -> None:
    root = _tree(tmp_path, ".checks")
    launch = root / "kernels" / "rope" / "launch.py"
    launch.write_text(launch.read_text() + "\n\ndef _validate_rope(x, weight):\n    return None\n")
    assert _rows(root, "--no-cache") == REPORTED


def test_the_validator_edited_is_seen_by_the_warm_run(tmp_path: Path) -> None:
    root = _tree(tmp_path, ".checks")
    assert _rows(root) == []
    time.sleep(cache_module.RACY_NANOSECONDS / 1e9 + 0.2)
    assert _rows(root) == []  # warm: answered by the stat index
    (root / "kernels" / "rope" / "checks.py").write_text(SHAPES_ONLY)
    assert _rows(root) == REPORTED
