"""A rule's findings and levels do not depend on which other rules are selected: the facts
layer is shared per file (`context.memo`), so what one rule asks first must not change what
another rule is told (issue: LL001's `rows` in CogVideoX's tiled decode was `high` alone and
`low` beside LL002)."""

from __future__ import annotations

from lifetime_lint.api import check_text
from lifetime_lint.config import Settings

# The shape of diffusers' AutoencoderKLCogVideoX.tiled_decode (0.42.1): frame batches of each
# spatial tile decoded in a loop, the rows blended and concatenated after it.
SOURCE = """
import torch
from torch import nn


class AutoencoderKLVideo(nn.Module):
    def __init__(self, decoder, post_quant_conv):
        super().__init__()
        self.decoder = decoder
        self.post_quant_conv = post_quant_conv

    def tiled_decode(self, z: torch.Tensor) -> torch.Tensor:
        batch_size, num_channels, num_frames, height, width = z.shape
        overlap_height = int(self.tile_latent_min_height * (1 - self.tile_overlap_factor_height))
        overlap_width = int(self.tile_latent_min_width * (1 - self.tile_overlap_factor_width))
        blend_extent_height = int(self.tile_sample_min_height * self.tile_overlap_factor_height)
        blend_extent_width = int(self.tile_sample_min_width * self.tile_overlap_factor_width)
        row_limit_height = self.tile_sample_min_height - blend_extent_height
        row_limit_width = self.tile_sample_min_width - blend_extent_width
        frame_batch_size = self.num_latent_frames_batch_size

        rows = []
        for i in range(0, height, overlap_height):
            row = []
            for j in range(0, width, overlap_width):
                num_batches = max(num_frames // frame_batch_size, 1)
                conv_cache = None
                time = []
                for k in range(num_batches):
                    remaining_frames = num_frames % frame_batch_size
                    start_frame = frame_batch_size * k + (0 if k == 0 else remaining_frames)
                    end_frame = frame_batch_size * (k + 1) + remaining_frames
                    tile = z[
                        :,
                        :,
                        start_frame:end_frame,
                        i : i + self.tile_latent_min_height,
                        j : j + self.tile_latent_min_width,
                    ]
                    if self.post_quant_conv is not None:
                        tile = self.post_quant_conv(tile)
                    tile, conv_cache = self.decoder(tile, conv_cache=conv_cache)
                    time.append(tile)
                row.append(torch.cat(time, dim=2))
            rows.append(row)

        result_rows = []
        for i, row in enumerate(rows):
            result_row = []
            for j, tile in enumerate(row):
                if i > 0:
                    tile = self.blend_v(rows[i - 1][j], tile, blend_extent_height)
                if j > 0:
                    tile = self.blend_h(row[j - 1], tile, blend_extent_width)
                result_row.append(tile[:, :, :, :row_limit_height, :row_limit_width])
            result_rows.append(torch.cat(result_row, dim=4))

        dec = torch.cat(result_rows, dim=3)
        return dec

    def blend_v(self, a, b, blend_extent):
        blend_extent = min(a.shape[3], b.shape[3], blend_extent)
        for y in range(blend_extent):
            b[:, :, :, y, :] = a[:, :, :, -blend_extent + y, :] * (1 - y / blend_extent) + b[
                :, :, :, y, :
            ] * (y / blend_extent)
        return b

    def blend_h(self, a, b, blend_extent):
        blend_extent = min(a.shape[4], b.shape[4], blend_extent)
        for x in range(blend_extent):
            b[:, :, :, :, x] = a[:, :, :, :, -blend_extent + x] * (1 - x / blend_extent) + b[
                :, :, :, :, x
            ] * (x / blend_extent)
        return b
"""


def _findings(code: str, select: list[str]) -> list[tuple[int, str]]:
    settings = Settings(select=select, extra={"min-significance": "low"})
    result = check_text(SOURCE, "pkg/autoencoder_kl_video.py", settings)
    return sorted((d.start.row, d.message) for d in result.diagnostics if d.code == code)


def test_ll001_levels_do_not_depend_on_the_other_selected_rules() -> None:
    alone = _findings("LL001", ["LL001"])
    assert alone  # `rows`, `time` at least
    for others in (["LL002", "LL001"], ["LL001", "LL002"], ["LL001", "LL002", "LL006"]):
        assert _findings("LL001", others) == alone, others


def test_ll002_findings_do_not_depend_on_the_other_selected_rules() -> None:
    alone = _findings("LL002", ["LL002"])
    assert alone
    assert _findings("LL002", ["LL001", "LL002", "LL006"]) == alone
