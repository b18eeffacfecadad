"""LL002 on EasyAnimate's causal 3-D convolution: the video decode's peak with and without the list.

    python benchmarks/ll002_magvit_causal_conv.py SOURCE   # needs a CUDA GPU; H, W, LT from the env

SOURCE is diffusers 0.42.1's `models/autoencoders/autoencoder_kl_magvit.py` (pinned corpus:
`.corpus/diffusers/...`). `EasyAnimateCausalConv3d.forward` always runs its convolution one
temporal window at a time (each window gives one output frame), appends every window's output
to a list and concatenates the list: at the concatenation the frames are held twice. The labels
disagreed on whether that costs anything at realistic sizes (LL002.json: negative; a session-13
draw: one of the two loops true). Two copies of the model with the same random weights decode
the same latents (`_decode`, bf16, no tiling): `original`, and `preallocated`, where both
window loops write each window's frame into an output allocated once (what LL002's fix does).
Reported: the peak allocated above the weights and latents, the number of windowed calls, and
the output's hash (equal hashes: the change keeps the data). Writes
`$OUT/magvit_causal_conv_{H}x{W}x{LT}.json` when OUT is set. Diffusers' package imports are
stubbed (the module's classes need only torch)."""

from __future__ import annotations

import json
import os
import sys
import types
from pathlib import Path

import _bench
import torch
from torch import nn

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
class AutoencoderMixin:
    pass
class _ModelMixin(nn.Module):
    gradient_checkpointing = False
ModelMixin = _ModelMixin
def apply_forward_hook(f):
    return f
class AutoencoderKLOutput:
    pass
class DiagonalGaussianDistribution:
    pass
class DecoderOutput:
    def __init__(self, sample):
        self.sample = sample
def get_activation(name):
    return {"silu": nn.SiLU, "swish": nn.SiLU, "gelu": nn.GELU, "relu": nn.ReLU}[name]()
"""
# The window loop, twice in `EasyAnimateCausalConv3d.forward` (first call and cached call).
WINDOW_LOOP = """            outputs = []
            i = 0
            while i + self.temporal_padding + 1 <= num_frames:
                out = super().forward(hidden_states[:, :, i : i + self.temporal_padding + 1])
                i += self.t_stride
                outputs.append(out)
            return torch.concat(outputs, 2)
"""
WINDOW_INTO_OUTPUT = "            return self._windows_into_output(hidden_states, num_frames)\n"


def _windows_into_output(self: nn.Conv3d, hidden_states: torch.Tensor, num_frames: int):
    """The same windows, each written into one output allocated at the first window."""
    starts = range(0, num_frames - self.temporal_padding, self.t_stride)
    output = None
    for index, start in enumerate(starts):
        window = hidden_states[:, :, start : start + self.temporal_padding + 1]
        frame = nn.Conv3d.forward(self, window)
        if output is None:
            assert frame.shape[2] == 1, frame.shape
            output = frame.new_empty((*frame.shape[:2], len(starts), *frame.shape[3:]))
        output[:, :, index : index + 1] = frame
        del frame
    return output


def load(source: str, name: str) -> types.ModuleType:
    module = _bench.load_outside_package(source, name, STUB)
    module.EasyAnimateCausalConv3d._windows_into_output = _windows_into_output
    return module


def measure(module: types.ModuleType, state: dict | None, z: torch.Tensor) -> tuple[dict, dict]:
    model = module.AutoencoderKLMagvit()
    if state is None:
        state = model.state_dict()
    else:
        model.load_state_dict(state)
    model = model.to(z.device, z.dtype).eval()
    calls = {"n": 0, "windows": 0}

    def count(conv, args):
        calls["n"] += 1
        frames = args[0].shape[2] + (conv.temporal_padding if conv.prev_features is None else 0)
        calls["windows"] += max(0, (frames - conv.temporal_padding - 1) // conv.t_stride + 1)

    for sub in model.modules():
        if isinstance(sub, module.EasyAnimateCausalConv3d):
            sub.register_forward_pre_hook(count)
    model._clear_conv_cache()
    with torch.no_grad():
        run = _bench.measure(torch, lambda: model._decode(z).sample, cuda=True, repeats=1)
    out = run["output"]
    result = {
        "peak_MiB": round(run["peak"] / 2**20, 1),
        "causal_conv_calls": calls["n"],
        "windows_about": calls["windows"],
        "out_shape": list(out.shape),
        "sha256_16": _bench.digest(out),
        "wall_s": round(run["seconds"], 2),
    }
    return result, state  # (the next measure empties the cache of this model first)


def main() -> None:
    source = Path(sys.argv[1]).read_text()
    assert source.count(WINDOW_LOOP) == 2, "not the pinned diffusers 0.42.1 source"
    modules = {
        "original": load(source, "magvit_original"),
        "preallocated": load(source.replace(WINDOW_LOOP, WINDOW_INTO_OUTPUT), "magvit_prealloc"),
    }
    height, width = int(os.environ.get("H", 480)), int(os.environ.get("W", 720))
    latent_frames = int(os.environ.get("LT", 13))
    torch.manual_seed(0)
    report: dict = {"H": height, "W": width, "latent_frames": latent_frames, "dtype": "bf16"}
    z = torch.randn(
        1, 16, latent_frames, height // 8, width // 8, device="cuda", dtype=torch.bfloat16
    )
    state = None
    for name, module in modules.items():
        report[name], state = measure(module, state, z)
        print(name, report[name], flush=True)
    saved = report["original"]["peak_MiB"] - report["preallocated"]["peak_MiB"]
    report["saved_MiB"] = round(saved, 1)
    report["saved_fraction"] = round(saved / report["original"]["peak_MiB"], 4)
    report["equal"] = report["original"]["sha256_16"] == report["preallocated"]["sha256_16"]
    print(json.dumps(report))
    if os.environ.get("OUT"):
        name = f"magvit_causal_conv_{height}x{width}x{latent_frames}.json"
        Path(os.environ["OUT"], name).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
