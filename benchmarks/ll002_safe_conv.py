"""LL002 on a video VAE's "safe" 3-D convolution: does preallocating its chunks lower the peak?

    python benchmarks/ll002_safe_conv.py prepare   # here: downloads wheels, runs the linter
    # GPU machine (installs nothing itself):
    pip install --no-deps --target /tmp/site .whl/*.whl
    PYTHONPATH=/tmp/site python benchmarks/ll002_safe_conv.py run

The video VAEs of diffusers convolve inputs above a size threshold in time chunks
(`CogVideoXSafeConv3d.forward`: over 2 GiB, `torch.chunk` along frames, one `super().forward`
per chunk, every output kept for one `torch.cat`). LL002 reports that list; labellers
disagreed on whether fixing it matters (the threshold is crossed only at large sizes, and other
layers of the same decoder may hold more). This measures it instead of arguing.

`prepare` takes `autoencoder_kl_cogvideox.py` from the pinned diffusers wheel and runs the real
`lifetime-lint check --fix --unsafe-fixes --select LL002` over a copy (LL002's fix is unsafe:
`ChunkWriter` changes the list's type), keeping the diff. `run` builds
`AutoencoderKLCogVideoX` with its default (CogVideoX-2b) config and seeded random weights, the
original and the fixed class with the same weights, and decodes in bf16 at 480x720 (49 frames,
CogVideoX's size) and 768x1360 (81 frames, CogVideoX 1.5's), untiled and tiled. For each it
reports the peak allocated memory above the pre-call baseline, how many safe-conv calls took
the chunked path (a forward pre-hook applies the class's own threshold), wall time and a
SHA-256 of the output, original vs fixed. Without CUDA: a tiny CPU smoke run. With `$OUT`
set it writes `ll002_safe_conv.json` there.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from types import ModuleType
from typing import Any

from _bench import linter_config_args, measure, write_results

ROOT = Path(__file__).resolve().parent.parent
WHEELS = ROOT / ".whl"
BENCH = ROOT / ".bench" / "safe_conv"
ORIGINAL = BENCH / "autoencoder_kl_cogvideox_original.py"
FIXED = BENCH / "autoencoder_kl_cogvideox_fixed.py"
MEMBER = "diffusers/models/autoencoders/autoencoder_kl_cogvideox.py"
DIFFUSERS = "diffusers==0.42.1"
# Requires-Dist of diffusers 0.42.1 that a torch image may lack (pure python).
EXTRA_WHEELS = ("importlib_metadata==10.2.0", "zipp==4.1.2")
# CogVideoXSafeConv3d's own threshold: the input's bf16/fp16 size in GiB above which it chunks.
CHUNK_ABOVE_GIB = 2


def prepare() -> None:
    WHEELS.mkdir(exist_ok=True)
    BENCH.mkdir(parents=True, exist_ok=True)
    pip = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    subprocess.run(pip + ["-d", str(WHEELS), DIFFUSERS, *EXTRA_WHEELS], check=True)
    wheel = next(WHEELS.glob("diffusers-0.42.1-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        ORIGINAL.write_bytes(archive.read(MEMBER))
    shutil.copyfile(ORIGINAL, FIXED)
    linter = [sys.executable, "-m", "lifetime_lint", "check", "--no-cache", "--select", "LL002"]
    linter += linter_config_args()
    subprocess.run(linter + ["--fix", "--unsafe-fixes", "--exit-zero", str(FIXED)], check=True)
    diff = subprocess.run(["diff", "-u", str(ORIGINAL), str(FIXED)], capture_output=True, text=True)
    (BENCH / "fix.diff").write_text(diff.stdout)
    print(diff.stdout or "lifetime-lint --fix changed nothing in autoencoder_kl_cogvideox.py")


def _load_fixed() -> ModuleType:
    """The fixed copy as a sibling module of diffusers' autoencoders (relative imports)."""
    import diffusers.models.autoencoders as package

    name = f"{package.__name__}._ll002_fixed_cogvideox"
    spec = importlib.util.spec_from_file_location(name, FIXED)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _digest(torch: Any, tensor: Any) -> str:
    data = tensor.detach().contiguous().view(torch.int16)
    return hashlib.sha256(data.cpu().numpy().tobytes()).hexdigest()[:16]


def _count_chunked(model: Any, safe_conv: type) -> list[int]:
    """Hook every safe conv: the counter holds [calls, calls over the chunking threshold]."""
    counter = [0, 0]

    def hook(_module: Any, args: tuple[Any, ...]) -> None:
        tensor = args[0]
        counter[0] += 1
        if tensor.numel() * 2 / 1024**3 > CHUNK_ABOVE_GIB:
            counter[1] += 1

    for module in model.modules():
        if isinstance(module, safe_conv):
            module.register_forward_pre_hook(hook)
    return counter


def _decode(torch: Any, model: Any, counter: list[int], z: Any, tiled: bool, cuda: bool) -> dict:
    model.enable_tiling() if tiled else model.disable_tiling()
    counter[0] = counter[1] = 0
    with torch.no_grad():
        run = measure(torch, lambda: model.decode(z).sample, cuda, repeats=1)
    video = run.pop("output")
    row: dict[str, Any] = {
        "seconds": round(run["seconds"], 3),
        "sha256": _digest(torch, video),
        "safe_conv_calls": counter[0],
        "chunked_calls": counter[1],
        "shape": list(video.shape),
    }
    if cuda:
        row["peak_above_base_MiB"] = round(run["peak"] / 2**20, 1)
    del video
    return row


def run() -> None:
    import torch

    if not FIXED.exists():
        sys.exit(f"{FIXED} is missing: run `python benchmarks/ll002_safe_conv.py prepare` first")
    from diffusers.models.autoencoders import autoencoder_kl_cogvideox as original_module

    fixed_module = _load_fixed()
    cuda = torch.cuda.is_available()
    device, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float32)
    torch.manual_seed(0)
    original = original_module.AutoencoderKLCogVideoX().to(device, dtype).eval()
    fixed = fixed_module.AutoencoderKLCogVideoX().to(device, dtype).eval()
    fixed.load_state_dict(original.state_dict())
    counters = {
        "original": _count_chunked(original, original_module.CogVideoXSafeConv3d),
        "fixed": _count_chunked(fixed, fixed_module.CogVideoXSafeConv3d),
    }
    sizes = {"480x720x49": (480, 720, 49), "768x1360x81": (768, 1360, 81)}
    if not cuda:
        sizes = {"32x32x9": (32, 32, 9)}
    if len(sys.argv) > 2:
        sizes = {label: sizes[label] for label in sys.argv[2].split(",")}
    results: dict[str, Any] = {
        "device": torch.cuda.get_device_name() if cuda else "cpu",
        "torch": torch.__version__,
        "diffusers": __import__("diffusers").__version__,
        "fix_diff": (BENCH / "fix.diff").read_text() if (BENCH / "fix.diff").exists() else "",
        "runs": {},
    }
    for label, (height, width, frames) in sizes.items():
        generator = torch.Generator(device="cpu").manual_seed(1)
        latent_frames = (frames - 1) // 4 + 1
        z = torch.randn(1, 16, latent_frames, height // 8, width // 8, generator=generator)
        z = z.to(device, dtype)
        for tiled in (False, True):
            key = f"{label} {'tiled' if tiled else 'untiled'}"
            row: dict[str, Any] = {}
            for which, model in (("original", original), ("fixed", fixed)):
                try:
                    row[which] = _decode(torch, model, counters[which], z, tiled, cuda)
                except torch.OutOfMemoryError as error:
                    row[which] = {"error": f"out of memory: {str(error)[:120]}"}
                    torch.cuda.empty_cache()
            if "sha256" in row["original"] and "sha256" in row["fixed"]:
                row["bitwise_equal"] = row["original"]["sha256"] == row["fixed"]["sha256"]
                if cuda:
                    before = row["original"]["peak_above_base_MiB"]
                    row["peak_change"] = round(row["fixed"]["peak_above_base_MiB"] / before - 1, 4)
            results["runs"][key] = row
            print(key, json.dumps(row), flush=True)
        del z
    write_results("ll002_safe_conv.json", results)


if __name__ == "__main__":
    command = sys.argv[1] if len(sys.argv) > 1 else "run"
    {"prepare": prepare, "run": run}[command]()
