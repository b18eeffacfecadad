"""LL004/LL005 portability: guarded-call fixes run the same on CPU, and the scope setting
leaves tests/examples/scripts out by default while `--statistics` counts what it left out."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

FIXTURES = Path(__file__).parent / "fixtures"


# These trees test the package and project facts, not the device-layer gate: LL005 reports in
# every project here (`test_device_layer.py` tests the gate).
ANY_PROJECT = "[tool.lifetime-lint.hard-coded-cuda-call]\nrequire-device-layer = false\n"


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Recorder:
    """A pipe / VAE stand-in: records the calls, decodes to real CPU tensors."""

    def __init__(self) -> None:
        self.calls: list[object] = []
        self.text_encoder = self

    def to(self, device):
        self.calls.append(("to", device))
        return self

    def decode(self, tile):
        return SimpleNamespace(sample=tile * 2)


@pytest.mark.parametrize("version", ["py", "fixed.py"])
def test_ll004_guarded_fix_runs_like_the_original(version: str) -> None:
    module = _load(FIXTURES / "LL004" / f"fix_guarded_call.{version}", f"ll004_guard_{version}")
    pipe = _Recorder()
    assert module.offload_text_encoder(pipe) is None
    assert pipe.calls == [("to", "cpu")]
    tiles = [torch.arange(4.0), torch.ones(2)]
    frames = module.decode_tiles(_Recorder(), tiles)
    assert [f.tolist() for f in frames] == [[0.0, 2.0, 4.0, 6.0], [2.0, 2.0]]


def test_ll005_guarded_fix_runs_like_the_original() -> None:
    original = _load(FIXTURES / "LL005" / "fix_guarded_call.py", "ll005_guard")
    fixed = _load(FIXTURES / "LL005" / "fix_guarded_call.fixed.py", "ll005_guard_fixed")
    step = lambda: torch.arange(3).sum().item()  # noqa: E731
    # On CPU both skip the synchronisation and return the step's value.
    assert original.timed(step)[0] == fixed.timed(step)[0] == 3


def test_guard_fix_text() -> None:
    fixed = (FIXTURES / "LL004" / "fix_guarded_call.fixed.py").read_text()
    assert "is_available" not in fixed  # the guard went with the call
    fixed5 = (FIXTURES / "LL005" / "fix_guarded_call.fixed.py").read_text()
    assert "torch.cuda" not in fixed5 and fixed5.count("torch.accelerator.is_available()") == 2


LIBRARY = """\
import torch


def offload(pipe):
    pipe.to("cpu")
    torch.cuda.empty_cache()
    torch.cuda.synchronize()
"""


def _project(root: Path, config: str = "") -> None:
    (root / "pyproject.toml").write_text("[tool.lifetime-lint]\n" + config + ANY_PROJECT)
    for relative in (
        "pkg/pipeline.py",
        "tests/test_pipeline.py",
        "examples/run.py",
        "benchmarks/bench.py",
        "scripts/convert.py",
        "pkg/conftest.py",
    ):
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(LIBRARY)


def _check(root: Path, *flags: str) -> tuple[list[dict], str]:
    """The findings (JSON) and the `--statistics` table of one tree."""
    base = [sys.executable, "-m", "lifetime_lint", "check", "--no-cache", "--exit-zero",
            "--select", "LL004,LL005", *flags, "."]  # fmt: skip
    found = subprocess.run(
        base + ["--format", "json"], capture_output=True, text=True, timeout=300, cwd=root
    )
    assert found.returncode == 0, found.stderr
    counted = subprocess.run(
        base + ["--statistics"], capture_output=True, text=True, timeout=300, cwd=root
    )
    assert counted.returncode == 0, counted.stderr
    return json.loads(found.stdout), counted.stdout + counted.stderr


def test_default_scope_is_library_code_and_statistics_count_the_rest(tmp_path: Path) -> None:
    _project(tmp_path)
    findings, statistics = _check(tmp_path)
    assert sorted({Path(f["filename"]).as_posix().split("/")[-2] for f in findings}) == ["pkg"]
    assert {f["filename"].rsplit("/", 1)[-1] for f in findings} == {"pipeline.py"}
    assert len(findings) == 2
    # 5 files x 1 call per rule were left out, and the statistics say so.
    assert "    5\tLL004 \t    left out: non-library path" in statistics
    assert "    5\tLL005 \t    left out: non-library path" in statistics


def test_strict_portability_reports_everything(tmp_path: Path) -> None:
    _project(tmp_path, 'portability = "strict"\n')
    findings, statistics = _check(tmp_path)
    assert len(findings) == 12
    assert "left out" not in statistics


def test_non_library_globs_are_the_users(tmp_path: Path) -> None:
    _project(tmp_path, 'non-library = ["examples"]\nextend-non-library = ["scripts/*"]\n')
    findings, statistics = _check(tmp_path)
    reported = {Path(f["filename"]).parent.name for f in findings}
    assert reported == {"pkg", "tests", "benchmarks"}
    assert "    2\tLL004 \t    left out: non-library path" in statistics


def test_bad_portability_value_is_a_config_error(tmp_path: Path) -> None:
    _project(tmp_path, 'portability = "lenient"\n')
    done = subprocess.run(
        [sys.executable, "-m", "lifetime_lint", "check", "--no-cache", "."],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2
    assert "portability" in done.stderr and "strict" in done.stderr


def test_platform_layer_and_cuda_bound_code_are_counted(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.lifetime-lint]\n" + ANY_PROJECT)
    platforms = tmp_path / "pkg" / "platforms"
    platforms.mkdir(parents=True)
    (platforms / "cuda.py").write_text(LIBRARY)
    (tmp_path / "pkg" / "bench_kernels.py").write_text(
        textwrap.dedent(
            """\
            import torch


            def run(kernel, x):
                x = x.cuda()
                torch.cuda.synchronize()
                return kernel(x)
            """
        )
    )
    findings, statistics = _check(tmp_path)
    assert findings == []
    assert "    1\tLL004 \t    left out: platform layer" in statistics
    assert "    1\tLL005 \t    left out: platform layer" in statistics
    assert "    1\tLL005 \t    left out: CUDA-bound code" in statistics


def test_cuda_bound_causes_are_counted_by_reason_and_strict_reports_them(
    tmp_path: Path,
) -> None:
    """Caller-gated helpers, ROCm-only classes and CUDA-subsystem code are left out of the
    default run with their own `--statistics` rows; `portability = "strict"` (one line)
    reports every one of them."""
    package = tmp_path / "pkg"
    package.mkdir()
    for case in (
        "LL005/negative_caller_gated.py",
        "LL005/negative_validator_raises.py",
        "LL005/negative_driver_and_ipc_subsystems.py",
        "LL004/negative_rocm_only_method.py",
    ):
        (package / case.split("/")[1]).write_text((FIXTURES / case).read_text())
    (tmp_path / "pyproject.toml").write_text("[tool.lifetime-lint]\n" + ANY_PROJECT)
    findings, statistics = _check(tmp_path)
    assert findings == []
    # `_launch_rms_norm`, `FusedRMSNorm._fused`, and the uuid lookup's `device_count`.
    assert "    3\tLL005 \t    left out: called only from CUDA-bound code" in statistics
    assert "    3\tLL004 \t    left out: ROCm-only code (torch.cuda is HIP there)" in statistics
    assert "LL005 \t    left out: CUDA-bound code" in statistics
    (tmp_path / "pyproject.toml").write_text(
        '[tool.lifetime-lint]\nportability = "strict"\n' + ANY_PROJECT
    )
    strict, statistics = _check(tmp_path)
    assert "left out" not in statistics
    lines = {(Path(f["filename"]).name, f["location"]["row"]) for f in strict}
    assert ("negative_caller_gated.py", 22) in lines
    assert ("negative_validator_raises.py", 31) in lines
    assert ("negative_rocm_only_method.py", 21) in lines
    assert ("negative_driver_and_ipc_subsystems.py", 12) in lines


def test_rocm_only_folder_is_left_out(tmp_path: Path) -> None:
    """A kernel package named for an AMD architecture (`vattn_asm_gfx950/`) runs on ROCm,
    where `torch.cuda` is HIP: counted, not reported; the same code elsewhere is."""
    source = textwrap.dedent(
        """\
        import torch


        def num_segments(num_seqs: int) -> int:
            props = torch.cuda.get_device_properties(torch.cuda.current_device())
            return max(1, props.multi_processor_count // num_seqs)
        """
    )
    (tmp_path / "pyproject.toml").write_text("[tool.lifetime-lint]\n" + ANY_PROJECT)
    for folder in ("pkg/attention/vattn_asm_gfx950", "pkg/attention/paged"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "__init__.py").write_text(source)
    findings, statistics = _check(tmp_path)
    assert [Path(f["filename"]).parent.name for f in findings] == ["paged"]
    assert "    1\tLL005 \t    left out: ROCm-only code (torch.cuda is HIP there)" in statistics


def test_session4_causes_are_counted_by_reason_and_strict_reports_them(tmp_path: Path) -> None:
    """Log-only locals, queries past their own answer without CUDA, JIT CUDA-kernel modules
    and fast paths past a per-item device check are left out with `--statistics` rows;
    `portability = "strict"` reports every one, and the positives stay reported."""
    package = tmp_path / "pkg"
    package.mkdir()
    negatives = (
        "negative_log_only_values.py",
        "negative_own_answer_without_gpu.py",
        "negative_jit_kernel_module.py",
        "negative_loop_device_check.py",
    )
    positives = (
        "positive_values_that_decide.py",
        "positive_fallback_that_poses_as_an_answer.py",
        "positive_loop_without_device_check.py",
    )
    for case in negatives + positives:
        (package / case).write_text((FIXTURES / "LL005" / case).read_text())
    (tmp_path / "pyproject.toml").write_text("[tool.lifetime-lint]\n" + ANY_PROJECT)
    findings, statistics = _check(tmp_path)
    reported = sorted({Path(f["filename"]).name for f in findings})
    assert reported == sorted(positives)
    # `before_mb`, `after_mb` and `peak` feed log messages only.
    assert "    3\tLL005 \t    left out: logging only" in statistics
    assert "    2\tLL005 \t    left out: past its own answer without CUDA" in statistics
    assert "LL005 \t    left out: CUDA-bound code" in statistics
    (tmp_path / "pyproject.toml").write_text(
        '[tool.lifetime-lint]\nportability = "strict"\n' + ANY_PROJECT
    )
    strict, statistics = _check(tmp_path)
    assert "left out" not in statistics
    assert {Path(f["filename"]).name for f in strict} >= set(negatives)


def test_example_folder_globs_are_non_library(tmp_path: Path) -> None:
    """`parallel_examples/`, `unit_tests/`, `gpu-benchmarks/` are examples, tests and
    benchmarks by name (the default `*[_-]examples`-style globs); a singular
    `paint_by_example/` package is library code."""
    (tmp_path / "pyproject.toml").write_text("[tool.lifetime-lint]\n" + ANY_PROJECT)
    for relative in (
        "parallel_examples/run_flux.py",
        "unit_tests/check.py",
        "gpu-benchmarks/bench.py",
        "pkg/paint_by_example/pipeline.py",
    ):
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(LIBRARY)
    findings, statistics = _check(tmp_path)
    assert {Path(f["filename"]).parent.name for f in findings} == {"paint_by_example"}
    assert "    3\tLL004 \t    left out: non-library path" in statistics


def _cuda_project(root: Path, modules: int, other: str = "") -> None:
    (root / "pyproject.toml").write_text("[tool.lifetime-lint]\n" + ANY_PROJECT)
    package = root / "audiogen"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "generation.py").write_text(LIBRARY)
    for index in range(modules - 2):
        (package / f"block{index}.py").write_text("import torch\n\nWIDTH = 8\n")
    if other:
        (package / "block0.py").write_text(other)


def test_cuda_only_project_is_left_out_and_counted(tmp_path: Path) -> None:
    """A project of 20+ modules none of which names another backend or a platform layer
    (audiocraft, stable-audio-tools): its torch.cuda calls are left out by default, counted
    as `CUDA-only project`, and reported by `portability = "strict"`."""
    _cuda_project(tmp_path, 24)
    findings, statistics = _check(tmp_path)
    assert findings == []
    assert "    1\tLL004 \t    left out: CUDA-only project" in statistics
    assert "    1\tLL005 \t    left out: CUDA-only project" in statistics
    (tmp_path / "pyproject.toml").write_text(
        '[tool.lifetime-lint]\nportability = "strict"\n' + ANY_PROJECT
    )
    strict, _ = _check(tmp_path)
    assert len(strict) == 2


@pytest.mark.parametrize(
    "other",
    [
        'DEVICE = "mps" if torch.backends.mps.is_available() else "cuda"\n',
        "def sync():\n    torch.accelerator.synchronize()\n",
        "class AudioPlatform:\n    pass\n",
        "def pick(i):\n    return f'xpu:{i}'\n",
    ],
)
def test_project_naming_another_backend_is_reported(tmp_path: Path, other: str) -> None:
    """One module that chooses another backend, uses `torch.accelerator` or defines a
    platform class makes the project multi-backend: its torch.cuda calls are reported."""
    _cuda_project(tmp_path, 24, other)
    findings, _ = _check(tmp_path)
    assert len(findings) == 2


def test_below_a_namespace_package_any_mention_counts(tmp_path: Path) -> None:
    """SGLang's layout: `pkg/srt/` has no `__init__.py`, so `pkg/srt/loader/` is judged as
    its own project while it is part of a larger one: one reacting module is evidence."""
    (tmp_path / "pyproject.toml").write_text("[tool.lifetime-lint]\n" + ANY_PROJECT)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    package = tmp_path / "pkg" / "srt" / "loader"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "generation.py").write_text(LIBRARY)
    for index in range(22):
        (package / f"block{index}.py").write_text("import torch\n\nWIDTH = 8\n")
    (package / "block0.py").write_text(
        "import torch\n\n\ndef use_xpu():\n    return torch.xpu.is_available()\n"
    )
    assert len(_check(tmp_path)[0]) == 2


def test_one_module_reacting_to_another_backend_is_not_enough(tmp_path: Path) -> None:
    """A lone module that only reacts to another backend (a probe, a Trainer's per-backend
    cache release copied from transformers) leaves the project CUDA-only; a second one
    makes it multi-backend."""
    reaction = "import torch\n\n\ndef use_xpu():\n    return torch.xpu.is_available()\n"
    _cuda_project(tmp_path, 24, reaction)
    assert _check(tmp_path)[0] == []
    package = tmp_path / "audiogen"
    (package / "block2.py").write_text(  # prose and a module without torch never count
        'import torch\n\n\ndef align():\n    """Align to the AMD NPU\'s constraints (mps, xpu)."""\n'
        '    raise ValueError("not supported on NPU")  # nor on xpu\n'
    )
    (package / "block3.py").write_text("def npu_target(model):\n    return model == 'xpu'\n")
    assert _check(tmp_path)[0] == []
    (tmp_path / "audiogen" / "block1.py").write_text(
        "import torch\n\n\ndef release():\n    if torch.xpu.is_available():\n"
        "        torch.xpu.empty_cache()\n"
    )
    assert len(_check(tmp_path)[0]) == 2


@pytest.mark.parametrize(
    "other",
    [
        "IS_ROCM = torch.version.hip is not None\n",
        "def is_hip():\n    return torch.version.hip is not None  # ROCm build\n",
        # xformers' default bias device: Meta's in-house MTIA, no public build.
        "def default_device():\n    if torch.cuda.is_available():\n"
        '        return torch.device("cuda")\n    if torch.mtia.is_available():\n'
        '        return torch.device("mtia")\n    return torch.device("cpu")\n',
    ],
)
def test_cuda_and_rocm_project_is_cuda_only(tmp_path: Path, other: str) -> None:
    """ROCm (HIP) is no other backend for `torch.cuda`, which is HIP there, and MTIA is
    no backend a project's users have: a CUDA+ROCm project (xformers) is CUDA-only."""
    _cuda_project(tmp_path, 24, other)
    findings, statistics = _check(tmp_path)
    assert findings == []
    assert "LL005 \t    left out: CUDA-only project" in statistics


def _multi_backend_project(root: Path, relative: str) -> None:
    """A multi-backend project (an `npu` branch) with LIBRARY at `relative`."""
    (root / "pyproject.toml").write_text("[tool.lifetime-lint]\n" + ANY_PROJECT)
    path = root / relative
    for parent in reversed(path.relative_to(root).parents[:-1]):
        (root / parent).mkdir(exist_ok=True)
        (root / parent / "__init__.py").write_text("")
    (root / "pkg" / "device.py").write_text(
        "import torch\n\nDEVICE = 'npu' if hasattr(torch, 'npu') else 'cuda'\n"
    )
    path.write_text(LIBRARY)


@pytest.mark.parametrize(
    "relative",
    [
        "pkg/library/extensions/cuda/__init__.py",  # quanto: beside `mps/`, `hip/`, `cpp/`
        "pkg/vllm_flash_attn/ops/triton/rotary.py",  # a vendored flash-attn copy
        "pkg/third_party/triton_kernels/testing.py",  # test tooling
    ],
)
def test_cuda_package_and_testing_module_in_a_multi_backend_project(
    tmp_path: Path, relative: str
) -> None:
    """A `cuda/` package, a (vendored) CUDA-only kernel library's folder and a `testing.py`
    module are CUDA-only or non-library code even where the project is multi-backend."""
    _multi_backend_project(tmp_path, relative)
    findings, _ = _check(tmp_path)
    assert findings == []


@pytest.mark.parametrize(
    "relative",
    [
        "pkg/cuda_utils/offload.py",  # utilities named for CUDA, not its backend package
        "pkg/flash_attention/offload.py",  # an attention package, not the flash-attn library
        "pkg/inference/testing_mode.py",  # a library module, not `testing.py`
    ],
)
def test_near_names_in_a_multi_backend_project_are_reported(tmp_path: Path, relative: str) -> None:
    _multi_backend_project(tmp_path, relative)
    findings, _ = _check(tmp_path)
    assert len(findings) == 2


def test_small_project_is_no_evidence(tmp_path: Path) -> None:
    _cuda_project(tmp_path, 6)
    findings, _ = _check(tmp_path)
    assert len(findings) == 2
