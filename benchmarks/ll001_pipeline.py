"""LL001 benchmark: an encode -> denoise loop -> decode pipeline before and after `--fix`.

    python benchmarks/ll001_pipeline.py prepare   # here: writes .bench/ll001/ with the linter
    python benchmarks/ll001_pipeline.py run       # GPU machine: torch + lifetime_lint only

The "before" is benchmarks/ll001_pipeline_model.py, a pipeline written the usual way; the
"after" is the real linter's `--fix` of it (`del` of the embeddings once the loop is done, and
of the loop's dead per-step input). `run` builds both with the same weights and inputs and
reports, for each: the peak allocated memory above what was allocated before the call
(`torch.cuda.max_memory_allocated`), the median wall time, whether the outputs are bitwise
equal, and the expected saving: the bytes of the tensors the fix deletes, measured on the
"before" pipeline at its last step through its own `locals()` callback (distinct storages
only). Without CUDA it runs a tiny CPU smoke version (equality, time, expected bytes). With
`$OUT` set it writes `ll001_pipeline.json` there.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from _bench import linter_config_args, load_module, measure, write_results

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "benchmarks" / "ll001_pipeline_model.py"
BENCH = ROOT / ".bench" / "ll001"
FIXED = BENCH / "pipeline_fixed.py"


def prepare() -> None:
    """Produce the "after" code with the real linter (needs the dev environment)."""
    BENCH.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(SOURCE, FIXED)
    linter = [sys.executable, "-m", "lifetime_lint", "check", "--no-cache", "--select", "LL001"]
    linter += linter_config_args()  # the vendored-runtime runs (benchmarks/vendored_gpu.sh)
    subprocess.run(linter + ["--exit-zero", str(SOURCE)], check=True)
    subprocess.run(linter + ["--fix", "--exit-zero", str(FIXED)], check=True)
    remaining = subprocess.run(linter + ["--exit-zero", str(FIXED)], capture_output=True, text=True)
    diff = subprocess.run(["diff", "-u", str(SOURCE), str(FIXED)], capture_output=True, text=True)
    (BENCH / "fix.diff").write_text(diff.stdout)
    print(diff.stdout)
    print("after --fix:", remaining.stdout.strip() or "no LL001 findings left")


def _deleted_names(source: str) -> list[str]:
    names: list[str] = []
    for match in re.finditer(r"^\s*del ([\w, ]+)$", source, re.MULTILINE):
        names.extend(name.strip() for name in match.group(1).split(","))
    return names


def run() -> None:
    import torch

    if not FIXED.exists():
        sys.exit(f"{FIXED} is missing: run `python benchmarks/ll001_pipeline.py prepare` first")
    before = load_module(SOURCE, "ll001_pipeline_before")
    after = load_module(FIXED, "ll001_pipeline_after")
    deleted = _deleted_names(FIXED.read_text())
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    dtype = torch.bfloat16 if cuda else torch.float32
    # CUDA: prompt embeddings 1 x 32768 x 8192 bf16 = 512 MiB each (1 GiB after the CFG cat);
    # latents 1 x 16 x 21 x 60 x 104; decode activations 1 x 128 x 21 x 480 x 832 = 2.1 GB.
    if cuda:
        vocab, dim, tokens, channels, frames, height, width, hidden, scale = (
            1000,
            8192,
            32768,
            16,
            21,
            60,
            104,
            128,
            8,
        )
        steps, repeats = 10, 3
    else:
        vocab, dim, tokens, channels, frames, height, width, hidden, scale = (
            50,
            16,
            8,
            4,
            3,
            4,
            6,
            8,
            2,
        )
        steps, repeats = 3, 2

    def build(module: ModuleType) -> Any:
        torch.manual_seed(0)
        text_encoder = module.TextEncoder(vocab, dim).to(device, dtype).eval()
        transformer = module.Denoiser(channels, dim).to(device, dtype).eval()
        vae = module.VideoDecoder(channels, hidden, scale).to(device, dtype).eval()
        return module.TextToVideoPipeline(text_encoder, transformer, vae)

    pipe_before, pipe_after = build(before), build(after)
    generator = torch.Generator(device="cpu").manual_seed(1)
    prompt_ids = torch.randint(0, vocab, (1, tokens), generator=generator).to(device)
    negative_ids = torch.randint(0, vocab, (1, tokens), generator=generator).to(device)
    latents = torch.randn(1, channels, frames, height, width, generator=generator).to(device, dtype)

    def call(pipe: Any, **extra: Any) -> Any:
        return pipe(prompt_ids, negative_ids, latents, num_inference_steps=steps, **extra)

    # Expected saving: what the deleted names hold at the last step of the "before" run.
    sizes: dict[str, int] = {}

    def record(i: int, tensors: dict[str, Any]) -> None:
        if i != steps - 1:
            return
        storages = {}
        for name, value in tensors.items():
            if isinstance(value, torch.Tensor):
                storages[value.untyped_storage().data_ptr()] = (
                    name,
                    value.untyped_storage().nbytes(),
                )
        sizes.clear()
        sizes.update(dict(storages.values()))

    call(pipe_before, callback_on_step_end=record, callback_on_step_end_tensor_inputs=deleted)
    expected = sum(sizes.values())

    runs = {
        "before": measure(torch, lambda: call(pipe_before), cuda, repeats),
        "after": measure(torch, lambda: call(pipe_after), cuda, repeats),
    }
    equal = torch.equal(runs["before"]["output"], runs["after"]["output"])
    results: dict[str, Any] = {
        "device": torch.cuda.get_device_name() if cuda else "cpu",
        "torch": torch.__version__,
        "dtype": str(dtype),
        "deleted_by_fix": deleted,
        "released_MiB_by_name": {k: v / 2**20 for k, v in sizes.items()},
        "expected_saving_MiB": expected / 2**20,
        "bitwise_equal": equal,
        "seconds_before": runs["before"]["seconds"],
        "seconds_after": runs["after"]["seconds"],
        "time_ratio": runs["after"]["seconds"] / runs["before"]["seconds"],
        "times_before": runs["before"]["times"],
        "times_after": runs["after"]["times"],
    }
    if cuda:
        saving = runs["before"]["peak"] - runs["after"]["peak"]
        results.update(
            peak_MiB_before=runs["before"]["peak"] / 2**20,
            peak_MiB_after=runs["after"]["peak"] / 2**20,
            peak_ratio=runs["after"]["peak"] / runs["before"]["peak"],
            saving_MiB=saving / 2**20,
            saving_over_expected=saving / expected if expected else None,
        )
    for key, value in results.items():
        print(f"{key:24s} {value:.4f}" if isinstance(value, float) else f"{key:24s} {value}")
    if not cuda:
        print("no CUDA: CPU smoke run only (no memory figures)")
    write_results("ll001_pipeline.json", results)
    if not equal:
        sys.exit("outputs differ")


if __name__ == "__main__":
    command = sys.argv[1] if len(sys.argv) > 1 else "run"
    if command == "prepare":
        prepare()
    elif command == "run":
        run()
    else:
        sys.exit(f"unknown command {command!r}: use prepare or run")
