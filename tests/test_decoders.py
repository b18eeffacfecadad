"""`analysis.decoders.tile_decoder_span`: what one decoder call of a tiled decode decodes."""

from __future__ import annotations

import textwrap

import libcst as cst

from lifetime_lint.analysis import decoders as D
from lifetime_lint.analysis import significance as S
from lifetime_lint.traversal import NodeOffsets


class _Context:
    def __init__(self, source: str) -> None:
        self.source = textwrap.dedent(source)
        self.module = cst.parse_module(self.source)
        self.memo: dict = {}
        self._offsets = NodeOffsets(self.module)

    def span(self, node: cst.CSTNode) -> tuple[int, int]:
        return self._offsets[node]

    def source_of(self, node: cst.CSTNode) -> str:
        start, end = self.span(node)
        return self.source[start:end]


def _spans(source: str) -> dict[str, str | None]:
    context = _Context(source)
    found: dict[str, str | None] = {}
    for statement in context.module.body:
        if isinstance(statement, cst.ClassDef):
            for method in statement.body.body:
                if isinstance(method, cst.FunctionDef):
                    span = D.tile_decoder_span(context, method, statement)
                    found[method.name.value] = span.kind if span else None
    return found


VAE = """
class VAE:
    def framewise(self, z):
        for i in range(0, z.shape[3], 8):
            for j in range(0, z.shape[4], 8):
                for k in range(z.shape[2]):
                    tile = z[:, :, k : k + 1, i : i + 8, j : j + 8]
                    tile = self.post_quant_conv(tile)
                    decoded = self.decoder(tile, feat_cache=self.cache)

    def batches(self, z):
        for i in range(0, z.shape[3], 8):
            for j in range(0, z.shape[4], 8):
                for k in range(0, z.shape[2], 4):
                    tile, cache = self.decoder(z[:, :, k : k + 4, i : i + 8, j : j + 8])

    def whole_tiles(self, z):
        for i in range(0, z.shape[3], 8):
            for j in range(0, z.shape[4], 8):
                decoded = self.decoder(z[..., i : i + 8, j : j + 8])

    def first_then_batches(self, z):
        for i in range(0, z.shape[3], 8):
            for j in range(0, z.shape[4], 8):
                tile = self.post_quant_conv(z[:, :, :, i : i + 8, j : j + 8])
                first = self.decoder(tile[:, :, :1, :, :])
                rest = self.decoder(tile[:, :, 1 : 1 + 4, :, :])

    def temporal(self, z):
        for i in range(0, z.shape[2], 4):
            decoded = self.decoder(z[:, :, i : i + 5, :, :])

    def image(self, z):
        for i in range(0, z.shape[2], 8):
            for j in range(0, z.shape[3], 8):
                decoded = self.decoder(z[:, :, i : i + 8, j : j + 8])
"""


def test_the_temporal_extent_of_each_decoder_call() -> None:
    assert _spans(VAE) == {
        "framewise": D.ONE_FRAME,
        "batches": D.FRAME_BATCH,
        "whole_tiles": D.ALL_FRAMES,
        "first_then_batches": D.FRAME_BATCH,  # the largest call decides
        "temporal": D.TEMPORAL,
        "image": None,  # 4-D image tiles: not this fact's
    }


SPLIT = """
class DistributedVAE:
    def tile_split(self, z):
        tasks = []
        for i in range(0, z.shape[3], 8):
            for j in range(0, z.shape[4], 8):
                tasks.append([z[:, :, k : k + 1, i : i + 8, j : j + 8] for k in range(z.shape[2])])
        return tasks

    def tile_merge(self, tiles):
        rows = []
        for row in tiles:
            rows.append(torch.cat([tile[:, :, :, :8, :8] for tile in row], dim=-1))
        return torch.cat(rows, dim=-2)


class ParallelTiledVAE:
    def _decode(self, *args, **kwargs):
        pass

    def parallel_tiled_decode(self, z):
        for t in range(0, z.shape[2], 4):
            tile = z[:, :, t : t + 5, :, :]
            tile = self._decode(tile)
"""


def test_a_merge_helper_reads_the_class_cutters_and_an_abstract_decoder_is_unknown() -> None:
    spans = _spans(SPLIT)
    assert spans["tile_merge"] == D.ONE_FRAME  # the cutter, not the merge's crops
    assert spans["parallel_tiled_decode"] is None  # the subclass's `_decode` decides


def test_only_one_frame_per_call_keeps_the_merge_level() -> None:
    assert S.tiled_merge(None) is None
    assert S.tiled_merge(D.TileSpan(D.ONE_FRAME, "z[:, :, k : k + 1]")) is None
    for kind in (D.FRAME_BATCH, D.ALL_FRAMES, D.TEMPORAL):
        reason = S.tiled_merge(D.TileSpan(kind, "z[:, :, :, i : i + 8, j : j + 8]"))
        assert reason and "`z[:, :, :, i : i + 8, j : j + 8]`" in reason


COPIED = """
class VAE:
    def copied_batches(self, z):
        for i in range(0, z.shape[3], 8):
            for j in range(0, z.shape[4], 8):
                for k in range(0, z.shape[2], 2):
                    tile = z[:, :, k : k + 2, i : i + 8, j : j + 8].clone()
                    tile = self.post_quant_conv(tile)
                    tile, cache = self.decoder(tile)

    def cast_frames(self, z):
        for i in range(0, z.shape[3], 8):
            for j in range(0, z.shape[4], 8):
                for k in range(z.shape[2]):
                    decoded = self.decoder(z[:, :, k : k + 1, i : i + 8, j : j + 8].to(z.dtype))
"""


def test_a_copy_or_cast_of_a_tile_keeps_its_extent() -> None:
    spans = _spans(COPIED)
    assert spans["copied_batches"] == D.FRAME_BATCH  # `z[...].clone()`: the same tile
    assert spans["cast_frames"] == D.ONE_FRAME  # `.to(dtype)`: not its argument's extent
