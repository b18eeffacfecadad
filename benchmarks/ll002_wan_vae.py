"""LL002 on real model code: diffusers' `AutoencoderKLWan` decode before and after `--fix`.

    python benchmarks/ll002_wan_vae.py prepare   # here: downloads wheels, runs the linter
    # GPU machine (installs nothing itself):
    pip install --no-deps --target /tmp/site .whl/*.whl
    PYTHONPATH=/tmp/site python benchmarks/ll002_wan_vae.py run [480p,720p]

`prepare` downloads the pinned diffusers wheel (and the pure-python dependencies a torch
image may lack) into `.whl/`, extracts `diffusers/models/autoencoders/autoencoder_kl_wan.py`
into `.bench/wan/`, and runs the real `lifetime-lint check --fix --select LL002` (safe fixes
only: what a default `--fix` does) over a copy, keeping the diff and the remaining findings.

`run` loads the original class from the installed diffusers and the fixed copy as a sibling
module of the same package (so its relative imports resolve), builds both with the default
(Wan 2.1) config and the same seeded random weights, and decodes 81 frames in bf16, untiled
and tiled, at 480p and 720p. It reports the peak allocated memory
(`torch.cuda.max_memory_allocated`, absolute, as in design notes §7, and above the
pre-call baseline), the wall time and a SHA-256 of the output, original vs fixed. Without
CUDA it runs a tiny CPU smoke version (5 frames, 32x32, float32). With `$OUT` set it writes
`ll002_wan_vae.json` there.
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
BENCH = ROOT / ".bench" / "wan"
ORIGINAL = BENCH / "autoencoder_kl_wan_original.py"
FIXED = BENCH / "autoencoder_kl_wan_fixed.py"
MEMBER = "diffusers/models/autoencoders/autoencoder_kl_wan.py"
DIFFUSERS = "diffusers==0.42.1"
# Requires-Dist of diffusers 0.42.1 that a torch image may lack (pure python): the image
# has numpy, safetensors, huggingface_hub, regex, requests, filelock and pillow.
EXTRA_WHEELS = ("importlib_metadata==10.2.0", "zipp==4.1.2")


def prepare() -> None:
    WHEELS.mkdir(exist_ok=True)
    BENCH.mkdir(parents=True, exist_ok=True)
    pip = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "-d",
        str(WHEELS),
    ]
    subprocess.run(pip + [DIFFUSERS, *EXTRA_WHEELS], check=True)
    wheel = next(WHEELS.glob("diffusers-0.42.1-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        ORIGINAL.write_bytes(archive.read(MEMBER))
    shutil.copyfile(ORIGINAL, FIXED)
    linter = [sys.executable, "-m", "lifetime_lint", "check", "--no-cache", "--select", "LL002"]
    linter += linter_config_args()  # the vendored-runtime runs (benchmarks/vendored_gpu.sh)
    subprocess.run(linter + ["--fix", "--exit-zero", str(FIXED)], check=True)
    remaining = subprocess.run(linter + ["--exit-zero", str(FIXED)], capture_output=True, text=True)
    diff = subprocess.run(["diff", "-u", str(ORIGINAL), str(FIXED)], capture_output=True, text=True)
    (BENCH / "fix.diff").write_text(diff.stdout)
    (BENCH / "remaining.txt").write_text(remaining.stdout)
    print(diff.stdout or "lifetime-lint --fix changed nothing in autoencoder_kl_wan.py")
    print("left after --fix (no safe fix):")
    print(remaining.stdout)


def _load_fixed() -> ModuleType:
    """The fixed copy as `diffusers.models.autoencoders._ll002_fixed_wan`."""
    import diffusers.models.autoencoders as package

    name = f"{package.__name__}._ll002_fixed_wan"
    spec = importlib.util.spec_from_file_location(name, FIXED)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _digest(torch: Any, tensor: Any) -> str:
    data = (
        tensor.detach()
        .contiguous()
        .view(torch.uint8 if tensor.element_size() == 1 else torch.int16)
    )
    return hashlib.sha256(data.cpu().numpy().tobytes()).hexdigest()[:16]


def _decode(torch: Any, model: Any, z: Any, tiled: bool, cuda: bool) -> dict[str, Any]:
    if tiled:
        model.enable_tiling()
    else:
        model.disable_tiling()
    with torch.no_grad():
        run = measure(torch, lambda: model.decode(z).sample, cuda, repeats=1)
    video = run.pop("output")
    row: dict[str, Any] = {"seconds": round(run["seconds"], 3), "sha256": _digest(torch, video)}
    if cuda:
        row["peak_MiB"] = round((run["peak"] + run["base"]) / 2**20, 1)
        row["peak_above_base_MiB"] = round(run["peak"] / 2**20, 1)
    row["shape"] = list(video.shape)
    del video
    return row


def run() -> None:
    import torch
    from diffusers import AutoencoderKLWan

    if not FIXED.exists():
        sys.exit(f"{FIXED} is missing: run `python benchmarks/ll002_wan_vae.py prepare` first")
    changed = ORIGINAL.read_bytes() != FIXED.read_bytes()
    if not changed:
        print(
            "lifetime-lint --fix found nothing to fix in autoencoder_kl_wan.py: both runs are the original"
        )
    fixed_module = _load_fixed()
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    dtype = torch.bfloat16 if cuda else torch.float32  # bf16 convolutions crawl on CPU
    torch.manual_seed(0)
    original = AutoencoderKLWan().to(device, dtype).eval()
    fixed = fixed_module.AutoencoderKLWan().to(device, dtype).eval()
    fixed.load_state_dict(original.state_dict())
    frames = 81 if cuda else 5
    latent_frames = (frames - 1) // 4 + 1
    sizes: dict[str, list[int]] = (
        {"480p": [480, 832], "720p": [720, 1280]} if cuda else {"32px": [32, 32]}
    )
    if cuda and len(sys.argv) > 2:  # `run 480p` to measure one resolution only
        sizes = {label: sizes[label] for label in sys.argv[2].split(",")}
    results: dict[str, Any] = {
        "device": torch.cuda.get_device_name() if cuda else "cpu",
        "torch": torch.__version__,
        "diffusers": __import__("diffusers").__version__,
        "fixed_differs": changed,
        "frames": frames,
        "runs": {},
    }
    # Warm up kernels once at a small size so the first timed run is not penalised.
    with torch.no_grad():
        original.decode(torch.randn(1, 16, 2, 8, 8, device=device, dtype=dtype))
    for label, (height, width) in sizes.items():
        generator = torch.Generator(device="cpu").manual_seed(1)
        z = torch.randn(1, 16, latent_frames, height // 8, width // 8, generator=generator)
        z = z.to(device, dtype)
        for tiled in (False, True):
            key = f"{label} {'tiled' if tiled else 'untiled'}"
            if not cuda and tiled:
                # Tiles of 256 px: make the smoke input tile with small tiles.
                for model in (original, fixed):
                    model.tile_sample_min_height = model.tile_sample_min_width = 16
                    model.tile_sample_stride_height = model.tile_sample_stride_width = 8
            row = {
                "original": _decode(torch, original, z, tiled, cuda),
                "fixed": _decode(torch, fixed, z, tiled, cuda),
            }
            row["bitwise_equal"] = row["original"]["sha256"] == row["fixed"]["sha256"]
            if cuda:
                row["peak_change"] = round(
                    row["fixed"]["peak_MiB"] / row["original"]["peak_MiB"] - 1, 4
                )
            row["time_ratio"] = round(row["fixed"]["seconds"] / row["original"]["seconds"], 4)
            results["runs"][key] = row
            print(key, json.dumps(row))
        del z
    if not cuda:
        print("no CUDA: CPU smoke run only (no memory figures)")
    write_results("ll002_wan_vae.json", results)


if __name__ == "__main__":
    command = sys.argv[1] if len(sys.argv) > 1 else "run"
    {"prepare": prepare, "run": run}[command]()
