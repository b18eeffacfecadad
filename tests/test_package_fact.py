"""LL004/LL005's package fact (`project.cuda_package`), read from a module's sibling files:
a package whose modules import CUDA's own driver or a CUDA-only kernel library at top level,
or which ships CUDA sources, and none of whose modules names another backend, is CUDA-only.

A fact read from other files must never be served stale: each test edits a sibling through
the real CLI with the cache on (the content key, the stat index, the run memo of a
one-file run) and the finding comes back, then goes away again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lifetime_lint import cache as cache_module
from lifetime_lint import project

MANAGER = "import torch\n\n\ndef wait(x):\n    torch.cuda.synchronize()\n    return x\n"
TRANSPORT = "from cuda.bindings import driver\n\n\ndef handle():\n    return driver\n"
PORTABLE = "import numpy as driver\n\n\ndef handle():\n    return driver\n"

# These trees test the package and project facts, not the device-layer gate: LL005 reports in
# every project here (`test_device_layer.py` tests the gate).
ANY_PROJECT = "[tool.lifetime-lint.hard-coded-cuda-call]\nrequire-device-layer = false\n"


def _forget_package_facts() -> None:
    """This process's memo of package facts, dropped (a test edits the files they read)."""
    project.forget_all_packages()


def settle() -> None:
    """Wait until what was just written is older than the racily-clean window."""
    time.sleep(cache_module.RACY_NANOSECONDS / 1e9 + 0.2)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "demo"\n[tool.lifetime-lint]\n' + ANY_PROJECT
    )
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "manager.py").write_text(MANAGER)
    (package / "transport.py").write_text(TRANSPORT)
    return tmp_path


def rows(tree: Path, *paths: str) -> list[tuple[str, int]]:
    """The LL005 findings of `lifetime-lint check PATHS` (the real command, cache on)."""
    done = subprocess.run(
        [sys.executable, "-m", "lifetime_lint", "check", "--jobs", "1", "--select", "LL005",
         "--output-format", "json", "--exit-zero", *paths],
        cwd=tree, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return [
        (os.path.basename(d["filename"]), d["location"]["row"]) for d in json.loads(done.stdout)
    ]


def test_fact_needs_a_cuda_only_import_and_no_other_backend(tree: Path) -> None:
    manager = str(tree / "pkg" / "manager.py")
    fact = project.cuda_package(manager)
    assert fact.reason is not None and "`transport.py` imports `cuda`" in fact.reason
    _forget_package_facts()
    (tree / "pkg" / "npu_ops.py").write_text("import torch_npu\n")  # a sibling for NPU
    assert project.cuda_package(manager).reason is None
    _forget_package_facts()
    (tree / "pkg" / "npu_ops.py").unlink()
    (tree / "pkg" / "__init__.py").unlink()  # a folder of scripts is no package
    assert project.cuda_package(manager).reason is None
    _forget_package_facts()


def test_fact_of_a_package_that_ships_cuda_sources(tree: Path) -> None:
    (tree / "pkg" / "transport.py").write_text(PORTABLE)
    (tree / "pkg" / "ops").mkdir()
    (tree / "pkg" / "ops" / "__init__.py").write_text("")
    (tree / "pkg" / "ops" / "launch.py").write_text(MANAGER)
    (tree / "pkg" / "csrc").mkdir()
    (tree / "pkg" / "csrc" / "kernel.cu").write_text("__global__ void k() {}\n")
    launch = str(tree / "pkg" / "ops" / "launch.py")
    try:
        reason = project.cuda_package(launch).reason
        assert reason is not None and "builds CUDA sources (`pkg/`)" in reason
        assert rows(tree, "pkg") == []
        # A module of the package for Intel GPUs: the kernels' package is not CUDA-only.
        (tree / "pkg" / "ops" / "xpu.py").write_text("import torch\nDEVICE = 'xpu'\n")
        assert sorted(rows(tree, "pkg")) == [("launch.py", 5), ("manager.py", 5)]
    finally:
        _forget_package_facts()


def test_fact_of_a_vendored_cuda_kernel_library(tree: Path) -> None:
    """A subpackage named for a CUDA-only kernel library (gptqmodel's `exllamav3/util/`,
    whose kernels' `.cu` sources live in another top-level package): CUDA-only while no
    module of its tree names another backend, MUSA included; the same code in a folder
    with a plain name is still reported."""
    (tree / "pkg" / "transport.py").write_text(PORTABLE)
    library = tree / "pkg" / "exllamav3"
    (library / "util").mkdir(parents=True)
    (library / "__init__.py").write_text("")
    (library / "ext.py").write_text('import torch\n\nSOURCES = ["gemm.cpp"]\n')
    (library / "util" / "__init__.py").write_text("")
    (library / "util" / "memory.py").write_text(MANAGER)
    plain = tree / "pkg" / "gemm_utils"
    plain.mkdir()
    (plain / "__init__.py").write_text("")
    (plain / "memory.py").write_text(MANAGER)
    memory = str(library / "util" / "memory.py")
    try:
        reason = project.cuda_package(memory).reason
        assert reason is not None and "CUDA-only kernel library (`exllamav3/`)" in reason
        assert project.cuda_package(str(plain / "memory.py")).reason is None
        assert sorted(rows(tree, "pkg")) == [("manager.py", 5), ("memory.py", 5)]
        # A module of the library for Moore Threads' MUSA: it runs beyond CUDA.
        (library / "musa_ops.py").write_text("import torch\nDEVICE = 'musa'\n")
        assert sorted(rows(tree, "pkg")) == [("manager.py", 5), ("memory.py", 5), ("memory.py", 5)]
    finally:
        _forget_package_facts()


def test_sibling_edit_is_seen_by_the_content_key_and_the_stat_index(tree: Path) -> None:
    settle()
    assert rows(tree, "pkg") == []  # bound by transport.py's driver import
    assert rows(tree, "pkg") == []  # warm: answered by the stat index
    entries = json.loads(next((tree / ".lifetime_lint_cache").glob("*/index.json")).read_text())
    assert entries["entries"][str(tree / "pkg" / "manager.py")][6]  # the package stamp
    (tree / "pkg" / "transport.py").write_text(PORTABLE)
    assert rows(tree, "pkg") == [("manager.py", 5)]  # manager.py itself is unchanged
    settle()
    assert rows(tree, "pkg") == [("manager.py", 5)]
    (tree / "pkg" / "transport.py").write_text(TRANSPORT)
    assert rows(tree, "pkg") == []
    settle()
    assert rows(tree, "pkg") == []


def test_sibling_edit_is_seen_by_a_one_file_run_and_its_run_memo(tree: Path) -> None:
    settle()
    for _ in range(2):  # the second run may be replayed from the run memo
        assert rows(tree, "pkg/manager.py") == []
    (tree / "pkg" / "transport.py").write_text(PORTABLE)
    assert rows(tree, "pkg/manager.py") == [("manager.py", 5)]
    settle()
    for _ in range(2):
        assert rows(tree, "pkg/manager.py") == [("manager.py", 5)]
    (tree / "pkg" / "transport.py").write_text(TRANSPORT)
    assert rows(tree, "pkg/manager.py") == []


def test_a_long_running_process_forgets_a_changed_package(tree: Path) -> None:
    manager = str(tree / "pkg" / "manager.py")
    try:
        settle()
        assert project.cuda_package(manager).reason is not None
        (tree / "pkg" / "transport.py").write_text(PORTABLE)
        assert project.forget_changed_projects() >= 1  # what the language server calls
        assert project.cuda_package(manager).reason is None
    finally:
        _forget_package_facts()


@pytest.fixture
def cuda_project(tmp_path: Path) -> Path:
    """A project of 24 modules in two subpackages, none naming another backend."""
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "gen"\n[tool.lifetime-lint]\n' + ANY_PROJECT
    )
    for sub in ("gen", "gen/models"):
        folder = tmp_path / sub
        folder.mkdir()
        (folder / "__init__.py").write_text("")
        for index in range(11):
            (folder / f"m{index}.py").write_text("import torch\n\nWIDTH = 8\n")
    (tmp_path / "gen" / "models" / "manager.py").write_text(MANAGER)
    return tmp_path


def test_a_backend_named_anywhere_in_the_project_is_seen_by_a_warm_run(
    cuda_project: Path,
) -> None:
    """The project fact is read from every module: a module of another subpackage that
    starts to name another backend brings the finding back through the stat index, and
    dropping it again leaves it out."""
    settle()
    assert rows(cuda_project, "gen") == []
    assert rows(cuda_project, "gen") == []  # warm
    (cuda_project / "gen" / "m3.py").write_text('DEVICE = "npu"\n')
    assert rows(cuda_project, "gen") == [("manager.py", 5)]
    settle()
    assert rows(cuda_project, "gen") == [("manager.py", 5)]
    (cuda_project / "gen" / "m3.py").write_text("WIDTH = 8\n")
    assert rows(cuda_project, "gen") == []


def test_multi_backend_project_stamps_only_its_evidence(cuda_project: Path) -> None:
    """In a multi-backend project the stamps cover the module that names the backend, not
    every module: an unrelated edit leaves every other folder's package stamp as it was."""
    (cuda_project / "gen" / "m3.py").write_text('DEVICE = "npu"\n')
    models = str(cuda_project / "gen" / "models")
    try:
        settle()
        files, _, _ = project.package_inputs(models)
        assert str(cuda_project / "gen" / "m3.py") in files
        assert str(cuda_project / "gen" / "m5.py") not in files
        before = project.cuda_package_stamp(models)
        (cuda_project / "gen" / "m5.py").write_text("WIDTH = 9\n")
        assert project.cuda_package_stamp(models) == before
    finally:
        _forget_package_facts()
