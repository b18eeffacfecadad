"""LL002 benchmark: a temporal decode loop before and after `lifetime-lint --fix`.

    python benchmarks/ll002_decode.py prepare   # here: writes .bench/ll002_decode/ with the linter
    python benchmarks/ll002_decode.py run       # GPU machine: torch + lifetime_lint.runtime only

`run` decodes 48 latent frames into 48 chunks of 96 MiB (bf16, 4.5 GiB of output) with the
original accumulate-then-cat loop and with the linter's fix (a `ChunkWriter`), and the same
for the running `out = torch.cat([out, chunk])` form. It reports the peak allocated memory
(`torch.cuda.max_memory_allocated`, above what was allocated before the call), the
theoretical minimum (output + one decoder call's own peak), the share of the theoretical
saving achieved, median wall time both ways, and whether the outputs are bitwise equal.
Without CUDA it runs a tiny CPU smoke version (equality and time only). With `$OUT` set it
writes `ll002_decode.json` there.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from _bench import linter_config_args, load_module, measure, write_results

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "benchmarks" / "ll002_decode_model.py"
BENCH = ROOT / ".bench" / "ll002_decode"
FIXED = BENCH / "decode_model_fixed.py"


def prepare() -> None:
    """Produce the "after" code with the real linter (needs the dev environment)."""
    BENCH.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(SOURCE, FIXED)
    linter = [sys.executable, "-m", "lifetime_lint", "check", "--no-cache", "--select", "LL002"]
    linter += linter_config_args()  # the vendored-runtime runs (benchmarks/vendored_gpu.sh)
    subprocess.run(linter + ["--fix", "--exit-zero", str(FIXED)], check=True)
    remaining = subprocess.run(linter + ["--exit-zero", str(FIXED)], capture_output=True, text=True)
    diff = subprocess.run(["diff", "-u", str(SOURCE), str(FIXED)], capture_output=True, text=True)
    (BENCH / "fix.diff").write_text(diff.stdout)
    print(diff.stdout)
    print("after --fix:", remaining.stdout.strip() or "no LL002 findings left")


def run() -> None:
    import torch

    if not FIXED.exists():
        sys.exit(f"{FIXED} is missing: run `python benchmarks/ll002_decode.py prepare` first")
    before = load_module(SOURCE, "ll002_decode_before")
    after = load_module(FIXED, "ll002_decode_after")
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    # 48 chunks of 1 x 16 x 4 x 768 x 1024 bf16 = 96 MiB each on CUDA; tiny on CPU.
    channels, frames, height, width = (16, 48, 96, 128) if cuda else (4, 6, 4, 6)
    dtype = torch.bfloat16 if cuda else torch.float32
    repeats = 3 if cuda else 2
    torch.manual_seed(0)
    model_before = before.TemporalVAE(channels).to(device, dtype).eval()
    model_after = after.TemporalVAE(channels).to(device, dtype).eval()
    model_after.load_state_dict(model_before.state_dict())
    z = torch.randn(1, channels, frames, height, width, device=device, dtype=dtype)

    # One decoder call's own peak (its output chunk included): the unavoidable transient.
    with torch.no_grad():
        call = measure(torch, lambda: model_before.decoder(z[:, :, :1]), device == "cuda", 1)
        chunk_bytes = call["output"].numel() * call["output"].element_size()
        del call["output"]
    output_bytes = chunk_bytes * frames
    results: dict[str, Any] = {
        "device": torch.cuda.get_device_name() if cuda else "cpu",
        "torch": torch.__version__,
        "dtype": str(dtype),
        "chunks": frames,
        "chunk_MiB": chunk_bytes / 2**20,
        "output_MiB": output_bytes / 2**20,
        "forms": {},
    }
    for form, method in (("accumulate-then-cat", "decode"), ("running-cat", "decode_running")):
        runs = {}
        for label, model in (("before", model_before), ("after", model_after)):
            runs[label] = measure(
                torch, lambda m=model, name=method: getattr(m, name)(z), device == "cuda", repeats
            )
        equal = torch.equal(runs["before"]["output"], runs["after"]["output"])
        row: dict[str, Any] = {
            "bitwise_equal": equal,
            "seconds_before": runs["before"]["seconds"],
            "seconds_after": runs["after"]["seconds"],
            "time_ratio": runs["after"]["seconds"] / runs["before"]["seconds"],
        }
        if cuda:
            minimum = output_bytes + call["peak"]
            saving = runs["before"]["peak"] - runs["after"]["peak"]
            possible = runs["before"]["peak"] - minimum
            row.update(
                peak_MiB_before=runs["before"]["peak"] / 2**20,
                peak_MiB_after=runs["after"]["peak"] / 2**20,
                theoretical_min_MiB=minimum / 2**20,
                after_over_min=runs["after"]["peak"] / minimum,
                share_of_theoretical_saving=saving / possible if possible > 0 else None,
            )
        for run_ in runs.values():
            run_["output"] = None
        results["forms"][form] = row
        print(form)
        for key, value in row.items():
            print(
                f"  {key:28s} {value:.4f}" if isinstance(value, float) else f"  {key:28s} {value}"
            )
    if not cuda:
        print("no CUDA: CPU smoke run only (no memory figures)")
    write_results("ll002_decode.json", results)


if __name__ == "__main__":
    command = sys.argv[1] if len(sys.argv) > 1 else "run"
    {"prepare": prepare, "run": run}[command]()
