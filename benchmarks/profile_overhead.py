"""Overhead of `lifetime-lint profile`: the same program with and without it, in one run.

    python benchmarks/profile_overhead.py [--repeats 3] [--steps 30] [--device cpu]

The program is a small diffusion-shaped workload written to a temporary folder: a
convolutional "denoiser" called for a number of steps from a module without findings, and a
pipeline function with one LL001 finding (conditioning held across the decode). Only that
function is line-traced; every operator still passes the CPU storage tracker (on CPU) or the
allocator queries (on an accelerator). Prints, as JSON, the median wall time of `python
program.py` and of `lifetime-lint profile program.py` (each in a fresh interpreter, startup
included), their ratio, and the bytes the finding was measured to hold.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

MODEL = """
import torch


class Denoiser(torch.nn.Module):
    def __init__(self, channels=64):
        super().__init__()
        self.layers = torch.nn.Sequential(
            torch.nn.Conv2d(channels, channels, 3, padding=1),
            torch.nn.SiLU(),
            torch.nn.Conv2d(channels, channels, 3, padding=1),
        )

    def forward(self, x):
        return x + self.layers(x)
"""

PROGRAM = """
import sys

import torch

from model import Denoiser


class Pipeline:
    def __init__(self, device):
        self.denoiser = Denoiser().to(device)
        self.decoder = Denoiser().to(device)
        self.device = device

    @torch.no_grad()
    def __call__(self, steps):
        conditioning = torch.randn(1, 64, 128, 128, device=self.device)
        latents = conditioning * 0.5
        for _ in range(steps):
            latents = self.denoiser(latents)
        return self.decoder(latents)


if __name__ == "__main__":
    torch.manual_seed(0)
    image = Pipeline(sys.argv[2])(int(sys.argv[1]))
    print(float(image.sum()))
"""


def timed(command: list[str], cwd: str) -> float:
    started = time.perf_counter()
    subprocess.run(command, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="profile-overhead-")
    with open(os.path.join(folder, "model.py"), "w", encoding="utf-8") as handle:
        handle.write(MODEL)
    with open(os.path.join(folder, "program.py"), "w", encoding="utf-8") as handle:
        handle.write(PROGRAM)
    plain = [sys.executable, "program.py", str(args.steps), args.device]
    saved = os.path.join(folder, "profile.json")
    profiled = [sys.executable, "-m", "lifetime_lint", "profile", "--device", args.device,
                "--save", saved, "program.py", str(args.steps), args.device]  # fmt: skip
    times: dict[str, list[float]] = {"plain": [], "profiled": []}
    for _ in range(args.repeats):  # interleaved, so drift in machine load hits both
        times["plain"].append(timed(plain, folder))
        times["profiled"].append(timed(profiled, folder))
    with open(saved, encoding="utf-8") as handle:
        findings = json.load(handle)["findings"]
    medians = {label: statistics.median(values) for label, values in times.items()}
    print(
        json.dumps(
            {
                "steps": args.steps,
                "device": args.device,
                "repeats": args.repeats,
                "plain_s": round(medians["plain"], 2),
                "profiled_s": round(medians["profiled"], 2),
                "speed_ratio": round(medians["plain"] / medians["profiled"], 3),
                "findings": [
                    {"code": f["code"], "row": f["location"]["row"], "measured": f["measured"]}
                    for f in findings
                ],
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
