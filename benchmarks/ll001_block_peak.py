"""What each LL001 fix does to a model's forward peak, by significance level (H200).

    python benchmarks/ll001_block_peak.py prepare        # here: bundle under .gpu/calib
    python3 .gpu/calib/ll001_block_peak.py run            # GPU machine (the bundle carried)

Issue 12 asks for significance levels calibrated against measured peaks, not rules of thumb.
For three diffusers 0.42.1 transformers at realistic widths and token counts (one or two
blocks: a block's activations, not the block count, set the peak above the weights):

- `wan`: Wan 2.1 1.3B (`WanTransformer3DModel`), 480x832, 81 frames: 32,760 video tokens;
- `ltx2`: LTX-2 (`LTX2VideoTransformer3DModel`), 512x768, 121 frames, CFG batch 2: 6,144
  video tokens in a 4,096-wide stream beside 126 audio tokens in a 2,048-wide stream;
- `flux`: FLUX.1-dev (`FluxTransformer2DModel`), 1024x1024: 4,096 image + 512 text tokens;
- `wan-vae`, `wan-vae-tiled`, `cosmos-vae`: the Wan 2.1 VAE (`AutoencoderKLWan`) and Cosmos
  1.0's 8x8x8 tokenizer (`AutoencoderKLCosmos`), encode + decode of 17 frames at 480x832
  (the Wan one also tiled at 720x1280), where the file's findings are VAE activations,
  latents beside a decode and decoded tiles;

the model file gets one variant per LL001 fix (every finding, `min-significance = "low"`,
each fix alone), and each variant's forward runs with the same seeded weights and inputs.
Reported per fix: its significance and what it holds, the drop in the forward's peak
allocated memory above the pre-call allocation (second call of each model: the first one
pays one-time workspaces), and whether the output is bitwise equal. A drop is read against
`unchanged` (the file as it is, loaded the same way).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
BUNDLE = Path(os.environ.get("LL_BUNDLE", "/work/main/.gpu/calib"))
OUT = Path(os.environ.get("OUT", "/tmp/ll001-block-peak"))
MIB = 2**20
# workload -> (diffusers.models subpackage, file)
FILES = {
    "wan": ("transformers", "transformer_wan.py"),
    "ltx2": ("transformers", "transformer_ltx2.py"),
    "flux": ("transformers", "transformer_flux.py"),
    "wan-vae": ("autoencoders", "autoencoder_kl_wan.py"),
    "wan-vae-tiled": ("autoencoders", "autoencoder_kl_wan.py"),
    "wan-vae-decode-81": ("autoencoders", "autoencoder_kl_wan.py"),
    "cosmos-vae": ("autoencoders", "autoencoder_kl_cosmos.py"),
    "hunyuan15-vae-decode-121": ("autoencoders", "autoencoder_kl_hunyuanvideo15.py"),
    "hunyuan-vae-decode-129": ("autoencoders", "autoencoder_kl_hunyuan_video.py"),
    "cogvideox-vae-decode-49": ("autoencoders", "autoencoder_kl_cogvideox.py"),
    "cogvideox-vae-decode-81": ("autoencoders", "autoencoder_kl_cogvideox.py"),
    "mochi-vae-decode-163": ("autoencoders", "autoencoder_kl_mochi.py"),
    "ltx-vae-decode-161": ("autoencoders", "autoencoder_kl_ltx.py"),
    "ltx2-vae-decode-121": ("autoencoders", "autoencoder_kl_ltx2.py"),
    "magvit-vae-decode-49": ("autoencoders", "autoencoder_kl_magvit.py"),
}
# The latent of each decode-only workload: (channels, latent frames, height, width).
DECODE_LATENTS = {
    "wan-vae-decode-81": (16, 21, 90, 160),  # Wan 2.1: 81 frames at 720x1280
    "hunyuan15-vae-decode-121": (32, 31, 45, 80),  # HunyuanVideo 1.5: 121 frames at 720p
    "hunyuan-vae-decode-129": (16, 33, 90, 160),  # HunyuanVideo: 129 frames at 720p
    "cogvideox-vae-decode-49": (16, 13, 60, 90),  # CogVideoX-5B: 49 frames at 480x720
    "cogvideox-vae-decode-81": (16, 21, 96, 170),  # CogVideoX1.5: 81 frames at 768x1360
    "mochi-vae-decode-163": (12, 28, 60, 106),  # Mochi 1: 163 frames at 480x848
    "ltx-vae-decode-161": (128, 21, 22, 38),  # LTX-Video: 161 frames at 704x1216
    "ltx2-vae-decode-121": (128, 16, 24, 40),  # LTX-2: 121 frames at 768x1280
    "magvit-vae-decode-49": (16, 13, 84, 144),  # EasyAnimate (MagViT): 49 frames at 672x1152
}
DECODE_ONLY = set(DECODE_LATENTS)  # `model.decode(**inputs)` instead of `model(**inputs)`
TILED = {"wan-vae-tiled", *DECODE_ONLY}  # run with the model's `enable_tiling()`


def prepare() -> None:
    """The profile bundle's layout (lifetime_lint as installed, wheels), plus this script."""
    sys.path.insert(0, str(HERE))
    import profile_wan

    profile_wan.BUNDLE = BUNDLE
    profile_wan.prepare()
    shutil.copy(__file__, BUNDLE / "ll001_block_peak.py")


def _install() -> None:
    """The bundle's wheels (diffusers, libcst) into a scratch site, then on the path."""
    site = Path(os.environ.get("LL_SITE", "/tmp/site"))
    if not (site / "diffusers").is_dir():
        import subprocess

        wheels = sorted(str(p) for p in (BUNDLE / "whl").glob("*.whl"))
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
             "--no-compile", "--target", str(site), *wheels],
            check=True,
        )  # fmt: skip
    sys.path[:0] = [str(site), str(BUNDLE / "src"), str(BUNDLE)]


def _load(path: Path, name: str, subpackage: str) -> Any:
    package = importlib.import_module(f"diffusers.models.{subpackage}")
    module_name = f"{package.__name__}._ll_variant_{name}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


# -- the three workloads: (class name, config, inputs) ----------------------------------


def _wan(torch: Any, smoke: bool) -> tuple[str, dict[str, Any], dict[str, Any]]:
    config = {
        "patch_size": (1, 2, 2), "num_attention_heads": 12, "attention_head_dim": 128, "in_channels": 16,
        "out_channels": 16, "text_dim": 4096, "freq_dim": 256, "ffn_dim": 8960, "num_layers": 1,
        "cross_attn_norm": True, "qk_norm": "rms_norm_across_heads", "eps": 1e-6,
    }  # fmt: skip
    g = torch.Generator(device="cpu").manual_seed(1)
    inputs = {
        "hidden_states": torch.randn(1, 16, *((2, 4, 4) if smoke else (21, 60, 104)), generator=g),
        "timestep": torch.tensor([500.0]),
        "encoder_hidden_states": torch.randn(1, 8 if smoke else 512, 4096, generator=g),
        "return_dict": False,
    }
    return "WanTransformer3DModel", config, inputs


def _ltx2(torch: Any, smoke: bool) -> tuple[str, dict[str, Any], dict[str, Any]]:
    frames, height, width = (2, 2, 2) if smoke else (16, 16, 24)  # 121 frames at 512x768
    audio_frames = 4 if smoke else 126  # 121 / 24 fps x 25 audio latents per second
    text = 8 if smoke else 1024
    batch = 2  # classifier-free guidance
    g = torch.Generator(device="cpu").manual_seed(1)
    inputs = {
        "hidden_states": torch.randn(batch, frames * height * width, 128, generator=g),
        "audio_hidden_states": torch.randn(batch, audio_frames, 128, generator=g),
        "encoder_hidden_states": torch.randn(batch, text, 3840, generator=g),
        "audio_encoder_hidden_states": torch.randn(batch, text, 3840, generator=g),
        "timestep": torch.full((batch,), 500.0),
        "num_frames": frames, "height": height, "width": width, "fps": 24.0, "audio_num_frames": audio_frames,
        "return_dict": False,
    }  # fmt: skip
    return "LTX2VideoTransformer3DModel", {"num_layers": 1}, inputs


def _flux(torch: Any, smoke: bool) -> tuple[str, dict[str, Any], dict[str, Any]]:
    config = {
        "patch_size": 1, "in_channels": 64, "num_layers": 1, "num_single_layers": 1, "attention_head_dim": 128,
        "num_attention_heads": 24, "joint_attention_dim": 4096, "pooled_projection_dim": 768,
        "guidance_embeds": True, "axes_dims_rope": (16, 56, 56),
    }  # fmt: skip
    g = torch.Generator(device="cpu").manual_seed(1)
    image, text = (16, 8) if smoke else (64 * 64, 512)
    inputs = {
        "hidden_states": torch.randn(1, image, 64, generator=g),
        "encoder_hidden_states": torch.randn(1, text, 4096, generator=g),
        "pooled_projections": torch.randn(1, 768, generator=g),
        "timestep": torch.tensor([0.5]),
        "img_ids": torch.zeros(image, 3),
        "txt_ids": torch.zeros(text, 3),
        "guidance": torch.tensor([3.5]),
        "return_dict": False,
    }
    return "FluxTransformer2DModel", config, inputs


def _video(torch: Any, smoke: bool, frames: int, height: int, width: int) -> dict[str, Any]:
    g = torch.Generator(device="cpu").manual_seed(1)
    shape = (1, 3, *((frames, 16, 16) if smoke else (frames, height, width)))
    return {"sample": torch.randn(*shape, generator=g).clamp(-1, 1), "return_dict": False}


def _wan_vae(torch: Any, smoke: bool) -> tuple[str, dict[str, Any], dict[str, Any]]:
    # Wan 2.1's VAE (the class defaults), encode + decode of 17 frames at 480x832: the
    # causal VAE runs frame chunks, so its activation peak does not grow with the frames.
    return "AutoencoderKLWan", {}, _video(torch, smoke, 17, 480, 832)


def _wan_vae_tiled(torch: Any, smoke: bool) -> tuple[str, dict[str, Any], dict[str, Any]]:
    # The same, tiled (`enable_tiling()`), at 720x1280: the tiled encode/decode paths.
    return "AutoencoderKLWan", {}, _video(torch, smoke, 17, 720, 1280)


def _decode_latent(name: str) -> Any:
    """The tiled decode alone of a full clip at its model's real size (`DECODE_LATENTS`):
    output-sized values (decoded tiles, rows) grow with the frames, one tile's decoder
    activations with the tile's frames."""

    def workload(torch: Any, smoke: bool) -> tuple[str, dict[str, Any], dict[str, Any]]:
        channels, frames, height, width = DECODE_LATENTS[name]
        g = torch.Generator(device="cpu").manual_seed(1)
        shape = (1, channels, *((2, 4, 4) if smoke else (frames, height, width)))
        class_name = {
            "wan": "AutoencoderKLWan", "hunyuan15": "AutoencoderKLHunyuanVideo15",
            "hunyuan": "AutoencoderKLHunyuanVideo", "cogvideox": "AutoencoderKLCogVideoX",
            "mochi": "AutoencoderKLMochi", "ltx": "AutoencoderKLLTXVideo",
            "ltx2": "AutoencoderKLLTX2Video", "magvit": "AutoencoderKLMagvit",
        }[name.split("-")[0]]  # fmt: skip
        return class_name, {}, {"z": torch.randn(*shape, generator=g), "return_dict": False}

    return workload


def _cosmos_vae(torch: Any, smoke: bool) -> tuple[str, dict[str, Any], dict[str, Any]]:
    # Cosmos 1.0's continuous 8x8x8 tokenizer (the class defaults), 17 frames at 480x832.
    return "AutoencoderKLCosmos", {}, _video(torch, smoke, 17, 480, 832)


WORKLOADS = {
    "wan": _wan, "ltx2": _ltx2, "flux": _flux,
    "wan-vae": _wan_vae, "wan-vae-tiled": _wan_vae_tiled, "cosmos-vae": _cosmos_vae,
    **{name: _decode_latent(name) for name in DECODE_LATENTS},
}  # fmt: skip


def _forward_peak(torch: Any, call: Any, inputs: dict[str, Any]) -> tuple[int, str]:
    from profile_wan import _digest

    cuda = torch.cuda.is_available()
    peak = 0
    output = None
    for _ in range(2):  # the second call: the first one pays one-time workspaces
        if cuda:
            torch.cuda.synchronize()
            base = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
        with torch.no_grad():
            output = call(**inputs)
        if cuda:
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated() - base
        first = output[0] if isinstance(output, (tuple, list)) else output
        digest = _digest(first)
        del output, first
    return peak, digest


def run(names: list[str], smoke: bool, only: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    _install()
    import diffusers
    import torch
    from profile_wan import make_variants

    rows: list[dict[str, Any]] = []
    site_models = Path(diffusers.__file__).parent / "models"
    for name in names:
        subpackage, filename = FILES[name]
        class_name, config, inputs = WORKLOADS[name](torch, smoke)
        device = "cuda" if torch.cuda.is_available() else "cpu"
        dtype = torch.bfloat16 if device == "cuda" else torch.float32
        variants = OUT / f"variants_{name}"
        shutil.rmtree(variants, ignore_errors=True)
        manifest = [
            e
            for e in make_variants(site_models / subpackage / filename, variants)
            if e["code"] == "LL001" and e["safe"]
            and (not only or any(f"_{line}_" in e["name"] for line in only))
        ]  # fmt: skip
        device_inputs = {
            k: v.to(device, dtype if v.is_floating_point() else v.dtype)
            if isinstance(v, torch.Tensor)
            else v
            for k, v in inputs.items()
        }
        state = None
        control = None
        for entry in [{"name": "unchanged"}, *manifest]:
            label = f"{name}_{entry['name']}".replace("-", "_")
            module = _load(variants / f"{entry['name']}.py", label, subpackage)
            torch.manual_seed(0)
            # Built on the CPU, then moved: some modules keep CPU constants as buffers
            # (Cosmos' wavelets are a clone of a module-level tensor).
            model = getattr(module, class_name)(**config)
            model = model.to(device, dtype).eval()
            if name in TILED:
                model.enable_tiling()
            if state is None:
                state = {k: v.clone() for k, v in model.state_dict().items()}
            else:
                model.load_state_dict(state)
            call = model.decode if name in DECODE_ONLY else model
            peak, digest = _forward_peak(torch, call, device_inputs)
            del call
            del model
            if device == "cuda":
                torch.cuda.empty_cache()
            if control is None:
                control = (peak, digest)
            row = {
                "model": name, "variant": entry["name"], "peak_mib": round(peak / MIB, 1),
                "drop_mib": round((control[0] - peak) / MIB, 1),
                "drop_pct": round(100 * (control[0] - peak) / max(control[0], 1), 2),
                "equal": digest == control[1],
                "significance": entry.get("significance"),
                "message": entry.get("message", "")[:160],
            }  # fmt: skip
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("prepare")
    runner = sub.add_parser("run")
    runner.add_argument("--models", default="wan,ltx2,flux")
    runner.add_argument("--smoke", action="store_true", help="tiny inputs (a CPU check)")
    runner.add_argument("--lines", default="", help="only the fixes at these lines (a,b,...)")
    args = parser.parse_args()
    if args.command == "prepare":
        prepare()
        return
    OUT.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in args.models.split(","):
        try:
            rows += run([name], args.smoke, tuple(x for x in args.lines.split(",") if x))
        except Exception as error:  # one model's failure must not lose the others
            import traceback

            traceback.print_exc()
            rows.append({"model": name, "error": repr(error)})
    (OUT / "ll001_block_peak.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
