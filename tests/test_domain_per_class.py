"""The per-class domain of a video file that holds several models (`domain.class_domain`)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import libcst as cst

from lifetime_lint.analysis.domain import (
    LARGE_DOMAIN,
    VIDEO_DOMAIN,
    class_domain,
    file_domain,
    video_classes,
)

FIXTURES = Path(__file__).parent / "fixtures" / "LL001"


def _context(source: str) -> SimpleNamespace:
    return SimpleNamespace(source=source, module=cst.parse_module(source), memo={})


def _fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def test_an_image_block_of_a_video_file_works_at_image_size() -> None:
    context = _context(_fixture("domain_per_class_image_block.py"))
    assert file_domain(context) == VIDEO_DOMAIN
    assert class_domain(context, "ImageJointBlock") == LARGE_DOMAIN
    assert class_domain(context, "VideoDiTModel") == VIDEO_DOMAIN


def test_a_block_built_only_by_the_video_model_stays_video() -> None:
    context = _context(_fixture("domain_per_class_video_block.py"))
    for name in ("VideoDiTModel", "VideoDiTBlock", "FeedForward"):
        assert class_domain(context, name) == VIDEO_DOMAIN, name
    assert class_domain(context, None) == VIDEO_DOMAIN  # module-level code: the file's


# A video model that builds its block through a variable and lists it by name only.
_BUILT_BY_NAME = """
class Block(nn.Module):
    def forward(self, x):
        return x

class OtherBlock(nn.Module):
    def forward(self, x):
        return x

class VideoModel(nn.Module):
    _no_split_modules = ["Block"]

    def __init__(self, num_frames):
        block_cls = Block
        self.blocks = nn.ModuleList([block_cls() for _ in range(num_frames)])

    def forward(self, video):
        b, c, t, h, w = video.shape
        return video
"""


def test_a_class_named_by_a_video_class_is_video_and_an_unnamed_one_is_not() -> None:
    table = video_classes(cst.parse_module(_BUILT_BY_NAME), {})
    assert table is not None
    assert "Block" in table and "VideoModel" in table
    assert "OtherBlock" not in table


# The video evidence lies in a block; the model that builds it, and the model's other parts,
# are video too; a subclass of a video class is video.
_EVIDENCE_IN_A_BLOCK = """
class TemporalBlock(nn.Module):
    def forward(self, hidden_states, num_frames):
        return hidden_states.unflatten(0, (-1, num_frames))

class SpatialBlock(nn.Module):
    def forward(self, hidden_states):
        return hidden_states

class Model(nn.Module):
    def __init__(self):
        self.temporal = TemporalBlock()
        self.spatial = SpatialBlock()

class TemporalBlockWithCache(TemporalBlock):
    pass

class ImageOnlyBlock(nn.Module):
    def forward(self, hidden_states):
        return hidden_states
"""


def test_video_flows_up_to_the_builder_and_down_to_its_other_parts() -> None:
    table = video_classes(cst.parse_module(_EVIDENCE_IN_A_BLOCK), {})
    assert table is not None
    assert {"TemporalBlock", "Model", "SpatialBlock", "TemporalBlockWithCache"} <= table.video
    assert "ImageOnlyBlock" not in table


def test_up_then_down_does_not_leak_through_a_shared_helper() -> None:
    """An image block and a video block that both build one helper: the helper works at
    video size, the image block does not (a helper is no video model)."""
    source = """
class Helper(nn.Module):
    def forward(self, x):
        return x

class VideoBlock(nn.Module):
    def __init__(self):
        self.helper = Helper()
    def forward(self, x, num_frames, temporal_chunks):
        return x

class ImageBlock(nn.Module):
    def __init__(self):
        self.helper = Helper()
"""
    table = video_classes(cst.parse_module(source), {})
    assert table is not None
    assert {"VideoBlock", "Helper"} <= table.video
    assert "ImageBlock" not in table


def test_without_video_evidence_in_any_class_every_class_keeps_the_file_domain() -> None:
    """The file's video words lie in module-level code: no class can be told apart."""
    source = """
class Block(nn.Module):
    def forward(self, hidden_states):
        return hidden_states

def prepare_video_latents(video, num_frames):
    b, c, t, h, w = video.shape
    return video[:, :, :num_frames]
"""
    assert video_classes(cst.parse_module(source), {}) is None


def test_a_file_that_is_not_video_is_left_alone() -> None:
    source = "class Block(nn.Module):\n    def forward(self, image_latents):\n        return image_latents\n"
    context = _context(source)
    assert class_domain(context, "Block") == file_domain(context)
