"""A library module that ends with an `if __name__ == "__main__":` demo: its public
functions that another module of the project imports (`project.imported_names`) are its
API, not a script's helpers, so their `torch.cuda` calls stay reported; a function only
the demo calls is still left out as `script entry point`. Real files, the real command;
the warm run (cache on) sees an import added elsewhere."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from lifetime_lint import cache as cache_module
from lifetime_lint import project
from rule_cli import ll004_rows  # tests/ is on sys.path

FUSE = """\
import torch


def fuse_adapters(model, adapters):
    for adapter in adapters:
        model.merge(adapter)
    torch.cuda.empty_cache()
    return model


def _load(path):
    return torch.load(path, map_location="cpu")


def demo_report(model):
    print(model)
    torch.cuda.empty_cache()


if __name__ == "__main__":
    import sys

    model = fuse_adapters(_load(sys.argv[1]), [_load(p) for p in sys.argv[2:]])
    demo_report(model)
"""
# A module elsewhere in the project that names another backend (not a CUDA-only project).
DEVICES = """\
import torch


def pick():
    return "mps" if torch.backends.mps.is_available() else "cpu"
"""
CONFIG = '[project]\nname = "studio"\n'
FUSED = ("fuse.py", 7)  # `fuse_adapters`' release
DEMO = ("fuse.py", 17)  # `demo_report`: only the demo block calls it


def _forget() -> None:
    project.forget_all_packages()


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text(CONFIG)
    package = tmp_path / "studio" / "ops"
    package.mkdir(parents=True)
    (tmp_path / "studio" / "__init__.py").write_text("")
    (tmp_path / "studio" / "devices.py").write_text(DEVICES)
    (package / "__init__.py").write_text("")
    (package / "fuse.py").write_text(FUSE)
    _forget()
    yield tmp_path
    _forget()


def test_functions_only_the_demo_calls_are_left_out(tree: Path) -> None:
    rows, statistics = ll004_rows(tree, "--no-cache")
    assert rows == []
    assert "    2\tLL004 \t    left out: script entry point" in statistics


@pytest.mark.parametrize(
    "importer",
    [
        "from studio.ops.fuse import fuse_adapters\n\n\ndef run(m, a):\n"
        "    return fuse_adapters(m, a)\n",
        "from studio.ops import (\n    fuse,\n)\n\n\ndef run(m, a):\n"
        "    return fuse.fuse_adapters(m, a)\n",
        "from .fuse import *  # noqa: F403\n",
        "import studio.ops.fuse\n\n\ndef run(m, a):\n"
        "    return studio.ops.fuse.fuse_adapters(m, a)\n",
    ],
)
def test_a_function_the_project_imports_is_library_code(tree: Path, importer: str) -> None:
    (tree / "studio" / "ops" / "pipeline.py").write_text(importer)
    rows = ll004_rows(tree, "--no-cache")[0]
    star = "import *" in importer
    assert rows == ([FUSED, DEMO] if star else [FUSED])


def test_importing_another_name_or_module_changes_nothing(tree: Path) -> None:
    (tree / "studio" / "ops" / "pipeline.py").write_text(
        "from studio.ops.fuse import demo_reports\nfrom studio.devices import pick\n"
        "fuse_adapters = None  # a name, not an import of it\n"
    )
    assert ll004_rows(tree, "--no-cache")[0] == []


def test_an_import_added_elsewhere_is_seen_by_the_warm_run(tree: Path) -> None:
    assert ll004_rows(tree)[0] == []
    time.sleep(cache_module.RACY_NANOSECONDS / 1e9 + 0.2)
    assert ll004_rows(tree)[0] == []  # warm: answered by the stat index
    (tree / "studio" / "ops" / "pipeline.py").write_text(
        "from studio.ops.fuse import fuse_adapters\n"
    )
    assert ll004_rows(tree)[0] == [FUSED]
