"""cProfile of cold lints of a few large real files, in one process (imports excluded).

    python benchmarks/speed_profile.py [--top 40] [--sort tottime] FILE...

Without files, lints a fixed set of large files from `.corpus/` (diffusers, transformers,
torch-nn). Prints the total lint time and the profile's top entries.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time
from pathlib import Path

from lifetime_lint.config import Settings
from lifetime_lint.engine import Linter
from lifetime_lint.registry import all_rules
from lifetime_lint.source import SourceFile

_CORPUS = Path(__file__).resolve().parent.parent / ".corpus"
if not _CORPUS.is_dir():
    _CORPUS = Path("/work/main/.corpus")
DEFAULT_FILES = (
    "diffusers/diffusers/pipelines/deprecated/versatile_diffusion/modeling_text_unet.py",
    "diffusers/diffusers/models/attention_processor.py",
    "diffusers/diffusers/loaders/lora_pipeline.py",
    "transformers/transformers/trainer.py",
    "transformers/transformers/generation/utils.py",
    "transformers/transformers/modeling_utils.py",
    "torch-nn/functional.py",
    "torch-nn/modules/module.py",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--sort", default="tottime")
    parser.add_argument("--no-profile", action="store_true", help="time only")
    parser.add_argument("--only", default="", help="restrict the listing (a path regex)")
    parser.add_argument("--save", help="write the raw profile here")
    args = parser.parse_args()
    files = args.files or [str(_CORPUS / name) for name in DEFAULT_FILES]
    sources = [SourceFile.read(path) for path in files if Path(path).exists()]
    linter = Linter(Settings(select=["ALL"]), all_rules())
    profiler = cProfile.Profile()
    started = time.perf_counter()
    if not args.no_profile:
        profiler.enable()
    found = 0
    for source in sources:
        found += len(linter.check_source(source).diagnostics)
    if not args.no_profile:
        profiler.disable()
    print(f"{len(sources)} files, {found} findings, {time.perf_counter() - started:.2f} s")
    if not args.no_profile:
        if args.save:
            profiler.dump_stats(args.save)
        stats = pstats.Stats(profiler).sort_stats(args.sort)
        if args.only:
            stats.print_stats(args.only, args.top)
        else:
            stats.print_stats(args.top)


if __name__ == "__main__":
    main()
