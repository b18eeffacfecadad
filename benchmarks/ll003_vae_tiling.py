"""The LL003 benchmark's workload: a distributed tiled VAE decode, as written before the fix.

Each rank decodes one vertical strip of the latent video frame by frame (a small
convolutional decoder, 8x upsampling, the way tiled VAE decoders keep activations small),
all-gathers the strips, and rank 0 stitches the frames. This file is the "before" side:
`python benchmarks/ll003_gather.py prepare` writes the linter's `--fix` of it to
`.bench/ll003/vae_tiling_fixed.py`, the "after" side. Imports torch only.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn


class StripDecoder(nn.Module):
    """Latent (16 channels) to RGB at 8x the resolution, one frame at a time."""

    def __init__(self, latent_channels: int = 16, width: int = 64) -> None:
        super().__init__()
        self.conv_in = nn.Conv2d(latent_channels, width, 3, padding=1)
        self.up = nn.ModuleList(
            [
                nn.Conv2d(width, width, 3, padding=1),
                nn.Conv2d(width, width // 2, 3, padding=1),
                nn.Conv2d(width // 2, width // 2, 3, padding=1),
            ]
        )
        self.conv_out = nn.Conv2d(width // 2, 3, 3, padding=1)

    def forward(self, latents: torch.Tensor) -> torch.Tensor:
        frames, _, height, width = latents.shape
        out = latents.new_empty((frames, 3, height * 8, width * 8))
        for index in range(frames):
            hidden = self.conv_in(latents[index : index + 1])
            for conv in self.up:
                hidden = nn.functional.interpolate(hidden, scale_factor=2.0, mode="nearest")
                hidden = nn.functional.silu(conv(hidden))
            out[index : index + 1] = self.conv_out(hidden)
        return out


class DistributedTiledDecode:
    """Every rank decodes one strip; rank 0 of the group returns the whole video."""

    def __init__(self, decoder: nn.Module, group=None) -> None:
        self.decoder = decoder
        self.group = group
        self.rank = dist.get_rank(self.group)
        self.world_size = dist.get_world_size(self.group)

    def gather_strips(self, strip: torch.Tensor):
        strips = [torch.empty_like(strip) for _ in range(self.world_size)]
        dist.all_gather(strips, strip, group=self.group)
        return strips if self.rank == 0 else None

    @torch.no_grad()
    def decode(self, latents: torch.Tensor):
        local = latents.tensor_split(self.world_size, dim=-1)[self.rank]
        strip = self.decoder(local.contiguous())
        strips = self.gather_strips(strip)
        if self.rank != 0:
            return None
        return torch.cat(strips, dim=-1)
