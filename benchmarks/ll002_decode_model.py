"""The "before" code of the LL002 decode benchmark: realistic decode loops, as written.

`benchmarks/ll002_decode.py prepare` runs `lifetime-lint --fix --select LL002` over a copy
of this file into `.bench/ll002_decode/`; the `run` step times both and compares peaks.
Imports only torch (the GPU machine has no libcst).
"""

import torch
from torch import nn


class ChunkDecoder(nn.Module):
    """Light per-chunk work: upsample one latent frame 8x and expand it to four frames.

    The activations of one call are a few chunks' worth, far below the full output, so the
    concatenation sets the peak (the case LL002's fix is for).
    """

    def __init__(self, channels: int, scale: int = 8, frames: int = 4) -> None:
        super().__init__()
        self.scale = scale
        self.frames = frames
        self.proj = nn.Conv3d(channels, channels, 1)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        x = torch.nn.functional.interpolate(z, scale_factor=(1, self.scale, self.scale))
        x = self.proj(x)
        return x.expand(-1, -1, self.frames, -1, -1).contiguous()


class TemporalVAE(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.decoder = ChunkDecoder(channels)

    @torch.no_grad()
    def decode(self, z: torch.Tensor) -> torch.Tensor:
        frames = []
        for k in range(z.shape[2]):
            decoded = self.decoder(z[:, :, k : k + 1])
            frames.append(decoded)
        return torch.cat(frames, dim=2)

    @torch.no_grad()
    def decode_running(self, z: torch.Tensor) -> torch.Tensor:
        num_frame = z.shape[2]
        for i in range(num_frame):
            if i == 0:
                out = self.decoder(z[:, :, i : i + 1])
            else:
                out_ = self.decoder(z[:, :, i : i + 1])
                out = torch.cat([out, out_], 2)
        return out
