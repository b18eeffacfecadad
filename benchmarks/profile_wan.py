"""`lifetime-lint profile` against the drop in peak each fix gives alone (issue 16, H200).

    python benchmarks/profile_wan.py prepare     # here: bundle under /work/main/.gpu/h-profile
    bash .gpu/h-profile/run.sh vae|pipe          # GPU machine (the bundle carried)

For each finding that runs in a workload, the profile's measured `bytes` (what its names held
at its function's peak) is compared with the drop in peak allocated memory (above the
pre-call allocation) when that finding's fix, and nothing else, is applied.

Workloads (diffusers 0.42.1, seeded random weights, bf16, no downloads):
- `vae`: `AutoencoderKLWan` (Wan 2.1 config), 81 frames, untiled and tiled, 480p and 720p;
- `pipe`: `WanPipeline` with a Wan 2.1 1.3B-sized transformer (30 blocks), 480x832, 81
  frames, 4 steps, CFG 5, prompt embeddings passed in, `output_type="pt"`.

Variants are made on the GPU machine (libcst carried as a wheel): the file as it is, the file
with every safe fix (what `check --fix` does, in a project that declares lifetime-lint), and
one file per fix with only that fix's edits. Per-decoder-call memory (allocated at entry and
the call's own peak) is recorded too, which is what explains a fix that raises a peak.
Results go to `$OUT` (JSON) and a table on stdout.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BUNDLE = Path(os.environ.get("LL_BUNDLE", "/work/main/.gpu/h-profile"))
OUT = Path(os.environ.get("OUT", "/tmp/profile-wan-out"))
WAN_FILE = "diffusers/models/autoencoders/autoencoder_kl_wan.py"
SIZES = {"480p": (480, 832), "720p": (720, 1280), "smoke": (32, 32)}
MIB = 2**20
WHEELS = ("diffusers==0.42.1", "importlib_metadata==10.2.0", "zipp==4.1.2", "libcst==1.9.0")
PROJECT = '[project]\nname = "bench"\nversion = "0"\ndependencies = ["lifetime-lint"]\n'

# -- here: the bundle ----------------------------------------------------------------------


def prepare() -> None:
    """Copy this worktree's lifetime_lint (laid out as installed) and this script into the
    bundle, and the wheels the GPU image lacks."""
    source = BUNDLE / "src"
    shutil.rmtree(source, ignore_errors=True)
    package = source / "lifetime_lint"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "lifetime_lint", package, ignore=ignore)
    shutil.copytree(ROOT / "runtime", package / "runtime", ignore=ignore)
    shutil.copytree(ROOT / "rules", package / "rules", ignore=ignore)
    shutil.copy(__file__, BUNDLE / "profile_wan.py")
    shutil.copy(ROOT / "benchmarks" / "profile_wan_run.sh", BUNDLE / "run.sh")
    wheels = BUNDLE / "whl"
    wheels.mkdir(parents=True, exist_ok=True)
    if len(list(wheels.glob("*.whl"))) < len(WHEELS):
        platforms = ["manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64"]
        command = [sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                   "--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp",
                   *[f"--platform={p}" for p in platforms], "-d", str(wheels), *WHEELS]  # fmt: skip
        subprocess.run(command, check=True)
    exclude = Path("/work/main/.git/info/exclude")
    if exclude.exists() and "/.gpu/" not in exclude.read_text().split():
        with exclude.open("a") as handle:
            handle.write("/.gpu/\n")
    print(f"bundle ready: {BUNDLE}")


# -- variants (needs libcst) ---------------------------------------------------------------


def _linter() -> Any:
    import dataclasses

    from lifetime_lint.analysis.significance import SETTING
    from lifetime_lint.config import Settings
    from lifetime_lint.engine import Linter

    settings = Settings()
    return Linter(dataclasses.replace(settings, extra={**settings.extra, SETTING: "low"}))


def make_variants(path: Path, out: Path) -> list[dict[str, Any]]:
    """One copy of `path` per fix (that fix's edits only), and the manifest."""
    from lifetime_lint.fixes import apply_edits
    from lifetime_lint.source import SourceFile

    source = SourceFile.read(str(path))
    diagnostics, error = _linter().lint_text(str(path), source.text, source.newline)
    assert error is None, error
    out.mkdir(parents=True, exist_ok=True)
    (out / "unchanged.py").write_text(source.text, encoding="utf-8")
    manifest = []
    for d in diagnostics:
        if d.fix is None:
            continue
        name = f"{d.code}_{d.start.row}_{d.start.column}"
        (out / f"{name}.py").write_text(apply_edits(source.text, d.fix.edits), encoding="utf-8")
        manifest.append({
            "name": name, "code": d.code, "row": d.start.row, "column": d.start.column,
            "safe": d.fix.is_safe, "significance": d.significance, "message": d.message,
        })  # fmt: skip
    return manifest


# -- measuring -----------------------------------------------------------------------------


def _cuda(torch: Any) -> bool:
    return bool(torch.cuda.is_available())


def _peak_call(torch: Any, call: Any) -> tuple[Any, dict[str, Any]]:
    cuda = _cuda(torch)
    if cuda:
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    output = call()
    if cuda:
        torch.cuda.synchronize()
    row: dict[str, Any] = {"seconds": round(time.perf_counter() - started, 3)}
    if cuda:
        row["peak_above_base"] = torch.cuda.max_memory_allocated() - base
        row["base"] = base
    return output, row


def _digest(tensor: Any) -> str:
    import hashlib

    import torch

    data = (
        tensor.detach()
        .contiguous()
        .view(torch.int16 if tensor.element_size() == 2 else torch.uint8)
    )
    return hashlib.sha256(data.cpu().numpy().tobytes()).hexdigest()[:16]


class CallRecorder:
    """Allocated memory at each call of a module and the call's own peak (forward hooks).

    The allocator has one peak register; the hooks reset it per call, so the largest value
    it held before each reset is folded into `peak`, the whole measurement's peak.
    """

    def __init__(self, torch: Any, module: Any) -> None:
        self.cuda = torch.cuda if _cuda(torch) else None
        self.calls: list[tuple[int, int]] = []
        self.peak = 0
        self._entry = 0
        self._handles = [
            module.register_forward_pre_hook(self._enter),
            module.register_forward_hook(self._leave),
        ]

    def _enter(self, *_: Any) -> None:
        if self.cuda is not None:
            self.peak = max(self.peak, self.cuda.max_memory_allocated())
            self._entry = self.cuda.memory_allocated()
            self.cuda.reset_peak_memory_stats()

    def _leave(self, *_: Any) -> None:
        if self.cuda is not None:
            call_peak = self.cuda.max_memory_allocated()
            self.peak = max(self.peak, call_peak)
            self.calls.append((self._entry, call_peak))

    def close(self) -> int:
        """The measurement's peak, the hooks removed."""
        for handle in self._handles:
            handle.remove()
        if self.cuda is not None:
            self.peak = max(self.peak, self.cuda.max_memory_allocated())
        return self.peak


def _load_variant(path: Path, name: str) -> Any:
    import diffusers.models.autoencoders as package

    module_name = f"{package.__name__}._ll_variant_{name}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def _vae_latents(torch: Any, size: str, frames: int) -> Any:
    height, width = SIZES[size]
    generator = torch.Generator(device="cpu").manual_seed(1)
    latent_frames = (frames - 1) // 4 + 1
    return torch.randn(1, 16, latent_frames, height // 8, width // 8, generator=generator)


def _set_tiling(model: Any, tiled: bool, smoke: bool) -> None:
    if tiled:
        model.enable_tiling()
        if smoke:
            model.tile_sample_min_height = model.tile_sample_min_width = 16
            model.tile_sample_stride_height = model.tile_sample_stride_width = 8
    else:
        model.disable_tiling()


def vae_workload(size: str, tiled: bool, frames: int) -> None:
    """The program `lifetime-lint profile` runs: one decode with the installed diffusers."""
    import torch
    from diffusers import AutoencoderKLWan

    device = "cuda" if _cuda(torch) else "cpu"
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    torch.manual_seed(0)
    model = AutoencoderKLWan().to(device, dtype).eval()
    _set_tiling(model, tiled, size == "smoke")
    z = _vae_latents(torch, size, frames).to(device, dtype)
    with torch.no_grad():
        video = model.decode(z).sample
    print("decoded", tuple(video.shape))


def vae_verify(cases: list[str], variants: Path, frames: int) -> dict[str, Any]:
    """Each case: the original class, every variant, and the all-fixes file, one model each
    (same weights), decoded in turn; peak above the pre-call allocation and digest."""
    import torch
    from diffusers import AutoencoderKLWan

    device = "cuda" if _cuda(torch) else "cpu"
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    manifest = json.loads((variants / "manifest.json").read_text())
    ran = set()  # the findings some profiled case executed: only their fixes can matter here
    for saved in OUT.glob("vae_profile_*.json"):
        for item in json.loads(saved.read_text())["findings"]:
            if item["measured"] is not None:
                ran.add((item["code"], item["location"]["row"], item["location"]["column"]))
    if ran:
        manifest = [e for e in manifest if (e["code"], e["row"], e["column"]) in ran]
    rows = os.environ.get("VARIANT_ROWS")  # the decode side only, when no profile says
    if rows:
        manifest = [e for e in manifest if str(e["row"]) in rows.split(",")]
    torch.manual_seed(0)
    original = AutoencoderKLWan().to(device, dtype).eval()
    state = original.state_dict()
    models = {"original": original}
    # `unchanged`: the file as it is, loaded like every variant: the control a drop is read
    # against (a fresh module's first decode differs from the original's by itself).
    for entry in [*manifest, {"name": "unchanged"}, {"name": "all_safe"}]:
        module = _load_variant(variants / f"{entry['name']}.py", entry["name"])
        model = module.AutoencoderKLWan().to(device, dtype).eval()
        model.load_state_dict(state)
        models[entry["name"]] = model
    with torch.no_grad():  # warm-up: kernels and cuDNN plans out of the measurement
        original.decode(torch.randn(1, 16, 2, 8, 8, device=device, dtype=dtype))
    results: dict[str, Any] = {"manifest": manifest, "cases": {}}
    for case in cases:
        size, tiling = case.split("-")
        z = _vae_latents(torch, size, frames).to(device, dtype)
        rows = {}
        for name, model in models.items():
            _set_tiling(model, tiling == "tiled", size == "smoke")
            recorder = CallRecorder(torch, model.decoder)
            with torch.no_grad():
                video, row = _peak_call(torch, lambda m=model, latents=z: m.decode(latents).sample)
            peak = recorder.close()
            if "base" in row:
                row["peak_above_base"] = peak - row["base"]
            row["sha256"] = _digest(video)
            row["decoder_calls"] = recorder.calls
            del video
            rows[name] = row
            print(case, name, {k: v for k, v in row.items() if k != "decoder_calls"}, flush=True)
        results["cases"][case] = rows
        del z
    return results


# -- the pipeline --------------------------------------------------------------------------

TRANSFORMER_1_3B: dict[str, Any] = {
    "patch_size": (1, 2, 2), "num_attention_heads": 12, "attention_head_dim": 128,
    "in_channels": 16, "out_channels": 16, "text_dim": 4096, "freq_dim": 256, "ffn_dim": 8960,
    "num_layers": 30, "cross_attn_norm": True, "qk_norm": "rms_norm_across_heads", "eps": 1e-6,
}  # fmt: skip


def pipe_workload(size: str, frames: int, steps: int) -> dict[str, Any]:
    import torch
    from diffusers import (
        AutoencoderKLWan,
        UniPCMultistepScheduler,
        WanPipeline,
        WanTransformer3DModel,
    )

    cuda = _cuda(torch)
    device = "cuda" if cuda else "cpu"
    dtype = torch.bfloat16 if cuda else torch.float32
    config = dict(TRANSFORMER_1_3B)
    if size == "smoke":
        config.update(num_layers=2, num_attention_heads=2, attention_head_dim=16, ffn_dim=64,
                      text_dim=32)  # fmt: skip
    torch.manual_seed(0)
    with torch.device(device):
        transformer = WanTransformer3DModel(**config).to(dtype).eval()
        vae = AutoencoderKLWan().to(dtype).eval()
    scheduler = UniPCMultistepScheduler(
        prediction_type="flow_prediction", use_flow_sigmas=True, num_train_timesteps=1000,
        flow_shift=3.0,
    )  # fmt: skip
    pipe = WanPipeline(tokenizer=None, text_encoder=None, vae=vae, scheduler=scheduler,
                       transformer=transformer)  # fmt: skip
    text_dim = config["text_dim"]
    generator = torch.Generator(device="cpu").manual_seed(2)
    prompt = torch.randn(1, 512, text_dim, generator=generator).to(device, dtype)
    negative = torch.randn(1, 512, text_dim, generator=generator).to(device, dtype)
    height, width = SIZES[size]
    recorder = CallRecorder(torch, vae.decoder)
    with torch.no_grad():
        output, row = _peak_call(torch, lambda: pipe(
            prompt_embeds=prompt, negative_prompt_embeds=negative, height=height, width=width,
            num_frames=frames, num_inference_steps=steps, guidance_scale=5.0, output_type="pt",
            generator=torch.Generator(device=device).manual_seed(0),
        ).frames)  # fmt: skip
    peak = recorder.close()
    if "base" in row:
        row["peak_above_base"] = peak - row["base"]
    row["decoder_calls"] = recorder.calls
    row["sha256"] = _digest(output)
    row["diffusers"] = os.path.dirname(__import__("diffusers").__file__)
    print("pipe", json.dumps({k: v for k, v in row.items() if k != "decoder_calls"}), flush=True)
    return row


def pipe_variants(
    profile: Path, tree: Path, top: int, out: Path, workload: list[str]
) -> list[dict[str, Any]]:
    """For the findings of the profiled pipeline run with the most measured bytes (and every
    LL002 finding that ran: preallocation can raise a peak), a copy of `tree` with only that
    finding's fix, and the pipeline's peak with it (each in a fresh interpreter)."""
    from lifetime_lint.fixes import apply_edits
    from lifetime_lint.source import SourceFile

    saved = json.loads(profile.read_text())
    ran = [item for item in saved["findings"] if item["measured"] is not None and item["fix"]]
    ran.sort(key=lambda item: -item["measured"]["bytes"])
    chosen = ran[:top] + [item for item in ran[top:] if item["code"] == "LL002"]
    rows = []
    for number, item in enumerate(chosen):
        relative = Path(os.path.realpath(item["filename"])).relative_to(os.path.realpath(tree))
        variant = out / f"variant{number}"
        shutil.rmtree(variant, ignore_errors=True)
        shutil.copytree(tree, variant, symlinks=True)
        target = variant / relative
        source = SourceFile.read(str(target))
        diagnostics, _ = _linter().lint_text(str(target), source.text, source.newline)
        match = [
            d for d in diagnostics
            if (d.code, d.start.row, d.start.column)
            == (item["code"], item["location"]["row"], item["location"]["column"])
        ]  # fmt: skip
        row: dict[str, Any] = {"finding": f"{relative}:{item['location']['row']} {item['code']}",
                               "message": item["message"], "measured": item["measured"]}  # fmt: skip
        if not match or match[0].fix is None:
            row["error"] = "the finding is not found again in the copy"
        else:
            fix = match[0].fix
            target.write_text(apply_edits(source.text, fix.edits), encoding="utf-8")
            row["safe"] = fix.is_safe
            saved_row = variant / "row.json"
            env = dict(os.environ, PYTHONPATH=f"{variant}:{os.environ.get('PYTHONPATH', '')}")
            subprocess.run([sys.executable, __file__, "pipe", *workload, "--save", str(saved_row)],
                           env=env, check=False, timeout=400)  # fmt: skip
            if saved_row.exists():
                row["run"] = json.loads(saved_row.read_text())
        rows.append(row)
        print("variant", json.dumps(row), flush=True)
        shutil.rmtree(variant, ignore_errors=True)
    return rows


def compare_saved(before: Path, after: Path) -> str:
    """`profile --compare`'s table from two saved profiles (the tree before and after)."""
    from lifetime_lint.profile import Comparison, render_comparison

    runs = [json.loads(path.read_text()) for path in (before, after)]
    return render_comparison(Comparison(runs[0], runs[1], [], 0, None))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "command",
        choices=["prepare", "variants", "vae", "vae-verify", "pipe", "pipe-variants", "compare"],
    )
    parser.add_argument("--top", type=int, default=4)
    parser.add_argument("--profile", type=Path)
    parser.add_argument("--after", type=Path)
    parser.add_argument("--size", default="480p")
    parser.add_argument("--tiled", action="store_true")
    parser.add_argument("--frames", type=int, default=81)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--cases", default="480p-untiled,480p-tiled,720p-untiled,720p-tiled")
    parser.add_argument("--file", type=Path)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--save", type=Path)
    args = parser.parse_args()
    if args.command == "prepare":
        prepare()
    elif args.command == "variants":
        manifest = make_variants(args.file, args.out)
        (args.out / "manifest.json").write_text(json.dumps(manifest, indent=1))
        print(f"{len(manifest)} variants of {args.file} in {args.out}")
    elif args.command == "vae":
        vae_workload(args.size, args.tiled, args.frames)
    elif args.command == "vae-verify":
        results = vae_verify(args.cases.split(","), args.file, args.frames)
        (args.save or args.out / "vae_verify.json").write_text(json.dumps(results, indent=1))
    elif args.command == "pipe":
        row = pipe_workload(args.size, args.frames, args.steps)
        if args.save:
            args.save.write_text(json.dumps(row))
    elif args.command == "pipe-variants":
        workload = ["--size", args.size, "--frames", str(args.frames), "--steps", str(args.steps)]
        rows = pipe_variants(
            args.profile, args.file, args.top, Path("/tmp/pipe-variants"), workload
        )
        (args.save or args.out / "pipe_variants.json").write_text(json.dumps(rows, indent=1))
    elif args.command == "compare":
        print(compare_saved(args.profile, args.after))


if __name__ == "__main__":
    main()
