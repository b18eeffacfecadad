"""LL002's chunk facts (`lifetime_lint.analysis.chunks`): the fixes the new causes leave in
place still compute the same tensors (executed with real torch on CPU), and the facts name
what they should."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import libcst as cst
import pytest

from lifetime_lint.analysis import chunks as C

torch = pytest.importorskip("torch")

FIXTURES = Path(__file__).parent / "fixtures" / "LL002"


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(f"fixture_{path.stem.replace('.', '_')}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _blend(dim):
    def blend(a, b, extent):
        b = b.clone()
        extent = min(a.shape[dim], b.shape[dim], extent)
        for x in range(extent):
            w = x / extent
            index = [slice(None)] * b.ndim
            index[dim] = x
            tail = [slice(None)] * a.ndim
            tail[dim] = a.shape[dim] - extent + x
            b[tuple(index)] = a[tuple(tail)] * (1 - w) + b[tuple(index)] * w
        return b

    return blend


def _video_vae(module):
    vae = module.AutoencoderKLVideo()
    vae.stride, vae.tile, vae.blend, vae.limit, vae.blend_frames = 3, 4, 2, 6, 1
    vae.decoder = lambda t: t.repeat_interleave(2, dim=-1).repeat_interleave(2, dim=-2) * 0.5
    vae.blend_v, vae.blend_h, vae.blend_t = _blend(3), _blend(4), _blend(2)
    return vae


@pytest.mark.parametrize("fixed", ["positive_loop_inputs_default.fixed.py",
                                   "positive_loop_inputs_default.unsafe.py"])  # fmt: skip
def test_fixed_video_merges_compute_the_same_tensors(fixed):
    original = _video_vae(_load(FIXTURES / "positive_loop_inputs_default.py"))
    rewritten = _video_vae(_load(FIXTURES / fixed))
    generator = torch.Generator().manual_seed(0)
    z = torch.randn(1, 3, 2, 9, 9, generator=generator)
    assert torch.equal(original.tiled_decode(z), rewritten.tiled_decode(z))
    groups = [torch.randn(1, 3, 4, 8, 8, generator=generator) for _ in range(3)]
    expected = original.merge_frame_groups([g.clone() for g in groups])
    assert torch.equal(expected, rewritten.merge_frame_groups([g.clone() for g in groups]))
    assert expected.shape == (1, 3, 12, 8, 8)


def _class(code: str) -> cst.ClassDef:
    statement = cst.parse_module(code).body[0]
    assert isinstance(statement, cst.ClassDef)
    return statement


def test_light_owner_sees_mixin_bases_and_files_but_not_attention_processors():
    assert C.light_owner("pkg/solvers.py", _class("class S(SchedulerMixin, ConfigMixin): pass"))
    assert C.light_owner("pkg/fuyu.py", _class("class FuyuProcessor(ProcessorMixin): pass"))
    assert C.light_owner("models/fuyu/processing_fuyu.py", None)
    assert C.light_owner("pipelines/preprocess/ode.py", None)
    assert C.light_owner("pkg/attn.py", _class("class FluxAttnProcessor2_0: pass")) is None
    assert C.light_owner("pkg/vae.py", _class("class SchedulerAwareModel(nn.Module): pass")) is None
    assert C.light_owner("models/autoencoders/autoencoder_kl_wan.py", None) is None


def test_small_by_name_reads_audio_and_padding_words_only():
    assert C.small_by_name(["audio"]) and C.small_by_name(["wavs", "x"])
    assert C.small_by_name(["input_padding"])
    assert C.small_by_name(["video", "frames", "audition_rows"]) is None
