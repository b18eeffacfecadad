"""LL002 on KVAE's safe 3-D convolution: the video decode's peak with and without the chunks kept.

    python benchmarks/ll002_kvae_safe_conv.py SOURCE   # needs a CUDA GPU; H, W, LT from the env

SOURCE is diffusers 0.42.1's `models/autoencoders/autoencoder_kl_kvae_video.py` (pinned corpus:
`.corpus/diffusers/...`). `KVAESafeConv3d.forward` splits an input above 3 GB into chunks, keeps
every chunk's output in a list and concatenates them, unless the caller passes `write_to=`, an
output to write each chunk into (what LL002's fix does). Its caller `KVAECachedCausalConv3d`
copies the result into its own preallocated output without passing `write_to`. Two copies of
the model with the same random weights decode the same latents (`_decode`, bf16): `original`,
and `write_to` (the caller passes its output slice). Reported: the peak allocated above the
weights and latents, how many safe-conv calls took the chunked path, and the output's hash
(equal outputs: the change keeps the data). Writes `$OUT/kvae_safe_conv.json` when OUT is set.
Diffusers' package imports are stubbed (the module's classes need only torch)."""

import json
import os
import sys
import types
from pathlib import Path

import _bench
import torch

# What the module's package imports provide, for a module run outside its package.
STUB = """
class _Log:
    @staticmethod
    def get_logger(n):
        return _lg.getLogger(n)
logging = _Log
def register_to_config(f):
    return f
class ConfigMixin:
    pass
class FromOriginalModelMixin:
    pass
class AutoencoderMixin:
    pass
ModelMixin = nn.Module
def apply_forward_hook(f):
    return f
class AutoencoderKLOutput:
    pass
class DiagonalGaussianDistribution:
    pass
class DecoderOutput:
    def __init__(self, sample):
        self.sample = sample
"""
CALLER = "output[:, :, offset_out:] = self.conv(input_parallel[:, :, offset_in:])"
CALLER_WRITING = "self.conv(input_parallel[:, :, offset_in:], write_to=output[:, :, offset_out:])"


def measure(module: types.ModuleType, state: dict | None, z: torch.Tensor) -> tuple[dict, dict]:
    model = module.AutoencoderKLKVAEVideo()
    model.config = types.SimpleNamespace(
        ch_mult=(1, 2, 4, 8), num_res_blocks=2, temporal_compress_times=4
    )
    if state is None:
        state = model.state_dict()
    else:
        model.load_state_dict(state)
    model = model.to(z.device, z.dtype).eval()
    calls = {"n": 0, "chunked": 0}

    def count(_module, args):
        calls["n"] += 1
        if args[0].numel() * args[0].element_size() / 1e9 > 3:
            calls["chunked"] += 1

    for sub in model.modules():
        if isinstance(sub, module.KVAESafeConv3d):
            sub.register_forward_pre_hook(count)
    with torch.no_grad():
        run = _bench.measure(torch, lambda: model._decode(z), cuda=True, repeats=1)
    out = run["output"]
    result = {
        "peak_MiB": round(run["peak"] / 2**20, 1),
        "safe_conv_calls": calls["n"],
        "chunked_calls": calls["chunked"],
        "out_shape": list(out.shape),
        "sha256_16": _bench.digest(out),
        "wall_s": round(run["seconds"], 2),
    }
    return result, state  # (the next measure empties the cache of this model first)


def main() -> None:
    source = Path(sys.argv[1]).read_text()
    assert CALLER in source, "not the pinned diffusers 0.42.1 source"
    modules = {
        "original": _bench.load_outside_package(source, "kvae_original", STUB),
        "write_to": _bench.load_outside_package(
            source.replace(CALLER, CALLER_WRITING), "kvae_write_to", STUB
        ),
    }
    height, width = int(os.environ.get("H", 720)), int(os.environ.get("W", 1280))
    latent_frames = int(os.environ.get("LT", 5))
    torch.manual_seed(0)
    report: dict = {"H": height, "W": width, "latent_frames": latent_frames, "dtype": "bf16"}
    z = torch.randn(
        1, 16, latent_frames, height // 8, width // 8, device="cuda", dtype=torch.bfloat16
    )
    state = None
    for name, module in modules.items():
        report[name], state = measure(module, state, z)
        print(name, report[name], flush=True)
    print(json.dumps(report))
    if os.environ.get("OUT"):
        name = f"kvae_safe_conv_{height}x{width}x{latent_frames}.json"
        Path(os.environ["OUT"], name).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
