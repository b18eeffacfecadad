"""LL005's device-layer gate (`project.missing_device_layer`): in a project with no
`platforms/`-style folder of its own, a raw `torch.cuda` call is CUDA-first code, left out by
default and counted; a platform folder anywhere in the tree (also below a namespace package),
`require-device-layer = false`, `replacements` or `portability = "strict"` report it. Real
files, the real command, the cache on (a folder added later is seen by the warm run)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from lifetime_lint import cache as cache_module
from lifetime_lint import project
from rule_cli import rule_rows  # tests/ is on sys.path

SYNC = "import torch\n\n\ndef wait(x):\n    torch.cuda.synchronize()\n    return x\n"


def _forget() -> None:
    project.forget_all_packages()


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A repository (`pyproject.toml`) whose package names another backend (so it is not a
    CUDA-only project) and has no platform folder."""
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\n[tool.lifetime-lint]\n')
    package = tmp_path / "pkg"
    (package / "ops").mkdir(parents=True)
    (package / "__init__.py").write_text('DEVICE = "xpu"\n')
    (package / "ops" / "__init__.py").write_text("")
    (package / "ops" / "sync.py").write_text(SYNC)
    _forget()
    yield tmp_path
    _forget()


def check(tree: Path, *flags: str) -> tuple[list[int], str]:
    """(the rows of LL005 findings under `pkg`, the `--statistics` text) of the real command."""
    rows, statistics = rule_rows(tree, "LL005", *flags, target="pkg")
    return [row for _, row in rows], statistics


def test_a_project_without_a_device_layer_is_left_out_and_counted(tree: Path) -> None:
    reason = project.missing_device_layer(str(tree / "pkg" / "ops" / "sync.py"))
    assert reason is not None and reason.startswith(project.NO_DEVICE_LAYER)
    rows, statistics = check(tree)
    assert rows == []
    assert "left out: project without a device layer" in statistics
    assert 'portability = "strict"' in statistics


def test_a_platform_folder_added_later_is_seen_by_the_warm_run(tree: Path) -> None:
    assert check(tree)[0] == []
    time.sleep(cache_module.RACY_NANOSECONDS / 1e9 + 0.2)
    assert check(tree)[0] == []  # warm: answered by the stat index
    (tree / "pkg" / "platforms").mkdir()
    (tree / "pkg" / "platforms" / "__init__.py").write_text("")
    assert check(tree)[0] == [5]
    assert project.missing_device_layer(str(tree / "pkg" / "ops" / "sync.py")) is None


def test_a_platform_folder_of_headers_is_no_device_layer(tree: Path) -> None:
    """A vendored kernel library's `platform/` of C++ headers (TileLang's cutlass copy) is
    not the project's device layer; a Python module put in it makes it one."""
    headers = tree / "pkg" / "3rdparty" / "cutlass" / "include" / "platform"
    headers.mkdir(parents=True)
    (headers / "platform.h").write_text("#pragma once\n")
    _forget()
    assert check(tree, "--no-cache")[0] == []
    (headers / "probe.py").write_text("import torch\n")
    _forget()
    assert check(tree, "--no-cache")[0] == [5]


def test_a_platform_folder_below_a_namespace_package_counts(tree: Path) -> None:
    """SGLang's layout: `sglang/srt/` has no `__init__.py`, `sglang/srt/platforms/` does."""
    runtime = tree / "pkg" / "srt"
    (runtime / "utils").mkdir(parents=True)
    (runtime / "platforms").mkdir()
    (runtime / "platforms" / "__init__.py").write_text("")
    (runtime / "utils" / "__init__.py").write_text("")
    (runtime / "utils" / "sync.py").write_text(SYNC)
    assert project.missing_device_layer(str(runtime / "utils" / "sync.py")) is None
    assert sorted(check(tree)[0]) == [5, 5]


@pytest.mark.parametrize(
    "config",
    [
        "[tool.lifetime-lint.hard-coded-cuda-call]\nrequire-device-layer = false\n",
        'portability = "strict"\n',
        "[tool.lifetime-lint.hard-coded-cuda-call]\n"
        'replacements = { synchronize = "pkg.device:current.synchronize" }\n',
    ],
)
def test_the_settings_that_report_every_project(tree: Path, config: str) -> None:
    (tree / "pyproject.toml").write_text(
        '[project]\nname = "demo"\n[tool.lifetime-lint]\n' + config
    )
    assert check(tree)[0] == [5]


def test_a_folder_without_init_inside_a_package_belongs_to_its_project(tree: Path) -> None:
    """exllamav2's layout: `exllamav2/conversion/` has no `__init__.py`."""
    conversion = tree / "pkg" / "conversion"
    conversion.mkdir()
    (conversion / "quantize.py").write_text(SYNC)
    assert project.missing_device_layer(str(conversion / "quantize.py")) is not None
    assert check(tree)[0] == []
    (tree / "pkg" / "platforms").mkdir()
    (tree / "pkg" / "platforms" / "__init__.py").write_text("")
    assert sorted(check(tree)[0]) == [5, 5]


def test_a_loose_file_is_judged_by_itself(tmp_path: Path) -> None:
    (tmp_path / "sync.py").write_text(SYNC)
    assert project.missing_device_layer(str(tmp_path / "sync.py")) is None
