"""Session-4 chunk facts of LL002 (`lifetime_lint.analysis.chunks`): merges held one clip per
call, host-made chunks and 4-D tile merges. The fix of the merge that stays reported computes
the same video (real torch on CPU); the facts are read from real files by the CLI."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import libcst as cst
import pytest

from lifetime_lint.analysis import chunks as C

torch = pytest.importorskip("torch")

FIXTURES = Path(__file__).parent / "fixtures" / "LL002"


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(f"fixture_s4_{path.stem.replace('.', '_')}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Context:
    def __init__(self, source: str) -> None:
        self.module = cst.parse_module(source)
        self.memo: dict = {}


def _class(context: _Context, name: str) -> cst.ClassDef:
    return next(
        n for n in context.module.body if isinstance(n, cst.ClassDef) and n.name.value == name
    )


def _method(owner: cst.ClassDef, name: str) -> cst.FunctionDef:
    return next(
        s for s in owner.body.body if isinstance(s, cst.FunctionDef) and s.name.value == name
    )


def test_merge_is_per_clip_only_when_the_framewise_path_is_the_default():
    on = _Context((FIXTURES / "negative_per_clip_merge.py").read_text())
    video = _class(on, "AutoencoderKLVideo")
    assert "one clip per call" in (
        C.merged_per_call(on, _method(video, "tiled_decode"), video) or ""
    )
    clips = _class(on, "ClipVAE")
    relayed = C.merged_per_call(on, _method(clips, "_stitch_tiles"), clips)
    assert relayed is not None and "`_decode_clip`" in relayed
    assert C.merged_per_call(on, _method(clips, "_decode"), clips) is None  # nobody calls it

    off = _Context((FIXTURES / "positive_per_clip_flag_off.py").read_text())
    for name in ("AutoencoderKLVideo", "ConfiguredVideoVAE"):  # off in __init__, from a config
        owner = _class(off, name)
        assert C.merged_per_call(off, _method(owner, "tiled_decode"), owner) is None


def _vae(module, name):
    vae = object.__new__(getattr(module, name))
    torch.nn.Module.__init__(vae)
    vae.decoder = lambda t: t.repeat_interleave(2, dim=-1).repeat_interleave(2, dim=-2)
    vae.post_quant_conv = lambda t: t * 0.5
    vae.use_tiling, vae.use_framewise_decoding = True, False
    vae.tile_sample_min_num_frames, vae.tile_sample_stride_num_frames = 16, 12
    vae.tile_latent_min_size, vae.tile_latent_stride, vae.blend_extent = 4, 3, 2
    return vae


def test_fixed_whole_video_merge_computes_the_same_video():
    original = _vae(_load(FIXTURES / "positive_per_clip_flag_off.py"), "AutoencoderKLVideo")
    fixed = _vae(_load(FIXTURES / "positive_per_clip_flag_off.fixed.py"), "AutoencoderKLVideo")
    z = torch.randn(1, 2, 3, 10, 10, generator=torch.Generator().manual_seed(0))
    expected = original.tiled_decode(z)
    assert expected.shape[-1] > 8  # several tiles merged
    assert torch.equal(expected, fixed.tiled_decode(z))


HOST = """
from diffusers.image_processor import numpy_to_pt, pil_to_numpy


def frames(video, size, device):
    processed_frames = []
    for frame in video:
        frame = frame.resize(size)
        frame = numpy_to_pt(pil_to_numpy(frame)){move}
        frame = frame * 2.0 - 1.0
        processed_frames.append(frame)
    return torch.cat(processed_frames, dim=0)
"""


@pytest.mark.parametrize("move, host", [("", True), (".to(device)", False), (".cuda()", False)])
def test_host_made_chunks_are_low_until_moved(tmp_path, move, host):
    (tmp_path / "pyproject.toml").write_text('[tool.lifetime-lint]\nmin-significance = "low"\n')
    source = tmp_path / "frames.py"
    source.write_text("import torch\n" + HOST.format(move=move))
    run = subprocess.run(
        [sys.executable, "-m", "lifetime_lint", "check", "--select", "LL002", "--no-cache",
         "--exit-zero", "--output-format", "json", str(source)],
        capture_output=True, text=True, cwd=tmp_path, check=True,
    )  # fmt: skip
    findings = json.loads(run.stdout)
    assert len(findings) == 1
    assert ("host tensors" in findings[0]["message"]) is host
