"""LL003 benchmark: a distributed tiled VAE decode before and after `lifetime-lint --fix`.

    python benchmarks/ll003_gather.py prepare   # here (needs lifetime_lint + libcst)
    python benchmarks/ll003_gather.py           # on the GPU machine (torch only)

`prepare` runs the real linter's LL003 fix over `benchmarks/ll003_vae_tiling.py` and writes
`.bench/ll003/vae_tiling_fixed.py` (the `all_gather` + receive buffers become
`gather_to_root`). The run spawns 2 ranks: NCCL on 2 GPUs when there are 2, otherwise a small
gloo smoke run on CPU. Each rank decodes the same latents with both versions (warm-up, then
`--iters` timed calls, alternating before/after) and records:

- the peak memory allocated during a call, as an absolute figure and as the increase over
  what was allocated when the call started (weights and latents excluded), per rank;
- the receive buffers alone: the peak of `gather_strips()` called on a decoded strip,
  over the strip itself (the bytes the fix is meant to remove on non-root ranks);
- the median wall time of a whole decode and of `gather_strips()` alone;
- whether rank 0's video is bitwise equal before and after, and non-root ranks get None;
- the subgroup case: two `dist.new_group`s, one without global rank 0 and one with it
  ([1] and [0, 1] on 2 ranks; [1, 3] and [0, 2] on 4): on each member, the fixture
  `tests/fixtures/LL003/fix_subgroup_destination.py` before and after `--fix` (safe fixes
  only: `group_dst=0`, provably a member; the global-rank function must stay unfixed),
  whether the group root's result is bitwise equal, whether `gather_to_root(...,
  group_dst=0)` equals `all_gather` read on the group's root, and the peak over start of
  each variant per member.

CPU/gloo now: `python benchmarks/ll003_gather.py prepare && python benchmarks/ll003_gather.py
--cpu --world-size 4` (`--world-size 2` is what the 2-GPU run uses).

Prints a table with after/before ratios; writes `ll003_gather.json` to `$OUT` if set.
NCCL's own settings (NCCL_NVLS_ENABLE=0 on the lab machine) are left as the environment has
them.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from _bench import load_module, write_results

ROOT = Path(__file__).resolve().parent.parent
BEFORE = ROOT / "benchmarks" / "ll003_vae_tiling.py"
AFTER = ROOT / ".bench" / "ll003" / "vae_tiling_fixed.py"
SUBGROUP_BEFORE = ROOT / "tests" / "fixtures" / "LL003" / "fix_subgroup_destination.py"
SUBGROUP_AFTER = ROOT / ".bench" / "ll003" / "subgroup_fixed.py"
SUBGROUP_SAFE = ("group_root", "group_root_through_helper")  # group_dst=0: a member

# (frames, latent height, latent width): CUDA is a 720p, 81-frame video (Wan 2.1 size);
# the CPU smoke run is tiny.
CUDA_SHAPE = (81, 90, 160)
CPU_SHAPE = (3, 8, 16)


# -- prepare (runs where lifetime_lint and libcst are installed) --------------------------


def prepare() -> None:
    from lifetime_lint.config import Settings
    from lifetime_lint.engine import FixMode, Linter
    from lifetime_lint.source import SourceFile

    settings = Settings()
    settings.select = ["LL003"]
    source = SourceFile.from_bytes(str(BEFORE), BEFORE.read_bytes())
    result = Linter(settings).check_source(source, FixMode(diff_only=True))
    if result.fixed_text is None or "gather_to_root" not in result.fixed_text:
        raise SystemExit(f"LL003 did not fix {BEFORE}: {[d.message for d in result.diagnostics]}")
    remaining = [d for d in result.diagnostics if d.code == "LL003"]
    if remaining:
        raise SystemExit(f"LL003 still reports after the fix: {[d.message for d in remaining]}")
    AFTER.parent.mkdir(parents=True, exist_ok=True)
    AFTER.write_text(result.fixed_text, encoding="utf-8")
    print(result.diff, end="")
    print(f"wrote {AFTER.relative_to(ROOT)}")

    # The subgroup fixture: safe fixes only where the destination is group rank 0.
    source = SourceFile.from_bytes(str(SUBGROUP_BEFORE), SUBGROUP_BEFORE.read_bytes())
    result = Linter(settings).check_source(source, FixMode(diff_only=True))
    fixed = result.fixed_text or ""
    if fixed.count("group_dst=0") != len(SUBGROUP_SAFE) or "dst=0)" in fixed.replace(
        "group_dst=0)", ""
    ):
        raise SystemExit(f"LL003's safe fixes of {SUBGROUP_BEFORE.name} are not the expected ones")
    SUBGROUP_AFTER.write_text(fixed, encoding="utf-8")
    print(f"wrote {SUBGROUP_AFTER.relative_to(ROOT)} (global_root left unfixed: unsafe)")


# -- the measurement (torch, the standard library and lifetime_lint.runtime only) -----------


def _worker(rank: int, world_size: int, folder: str, use_cuda: bool, iters: int) -> None:
    try:
        _measure(rank, world_size, folder, use_cuda, iters)
    except BaseException:
        with open(os.path.join(folder, f"rank{rank}.err"), "w") as handle:
            handle.write(traceback.format_exc())
        os._exit(1)


def _measure(rank: int, world_size: int, folder: str, use_cuda: bool, iters: int) -> None:
    import torch
    import torch.distributed as dist

    if use_cuda:
        torch.cuda.set_device(rank)
    dist.init_process_group(
        "nccl" if use_cuda else "gloo",
        init_method=f"file://{os.path.join(folder, 'store')}",
        rank=rank,
        world_size=world_size,
        timeout=datetime.timedelta(seconds=120),
    )
    device = torch.device("cuda", rank) if use_cuda else torch.device("cpu")
    dtype = torch.bfloat16 if use_cuda else torch.float32
    frames, height, width = CUDA_SHAPE if use_cuda else CPU_SHAPE
    modules = {
        "before": load_module(BEFORE, "ll003_before"),
        "after": load_module(AFTER, "ll003_after"),
    }

    torch.manual_seed(0)  # the same weights and latents on every rank
    decoder = modules["before"].StripDecoder().to(device=device, dtype=dtype).eval()
    latents = torch.randn(frames, 16, height, width, device=device, dtype=dtype)
    runners = {name: module.DistributedTiledDecode(decoder) for name, module in modules.items()}

    def sync() -> None:
        if use_cuda:
            torch.cuda.synchronize()
            dist.barrier(device_ids=[rank])
        else:
            dist.barrier()

    def measured(call) -> dict[str, Any]:
        sync()
        start_bytes = torch.cuda.memory_allocated() if use_cuda else None
        if use_cuda:
            torch.cuda.reset_peak_memory_stats()
        started = time.perf_counter()
        value = call()
        if use_cuda:
            torch.cuda.synchronize()
        seconds = time.perf_counter() - started
        peak = torch.cuda.max_memory_allocated() if use_cuda else None
        record = {"seconds": seconds, "peak_bytes": peak, "start_bytes": start_bytes}
        record["peak_increase_bytes"] = None if peak is None else peak - start_bytes
        del value
        sync()
        return record

    outputs = {name: runner.decode(latents) for name, runner in runners.items()}  # warm-up
    same = _same(outputs["before"], outputs["after"])
    root_has_video = outputs["before"] is not None
    del outputs
    with torch.no_grad():
        strip = decoder(latents.tensor_split(world_size, dim=-1)[rank].contiguous())
    for runner in runners.values():  # warm-up of the collective alone
        runner.gather_strips(strip)

    samples: dict[str, dict[str, list[dict[str, Any]]]] = {
        name: {"decode": [], "gather": []} for name in runners
    }
    for _ in range(iters):
        for name, runner in runners.items():  # alternate, so drift hits both
            samples[name]["decode"].append(measured(lambda r=runner: r.decode(latents)))
            samples[name]["gather"].append(measured(lambda r=runner: r.gather_strips(strip)))

    summary: dict[str, Any] = {
        "rank": rank,
        "device": torch.cuda.get_device_name(rank) if use_cuda else "cpu",
        "strip_bytes": strip.numel() * strip.element_size(),
        "root_output_equal": same,
        "gets_video": root_has_video,
    }
    for name, kinds in samples.items():
        for kind, records in kinds.items():
            summary[f"{name}.{kind}.median_s"] = statistics.median(r["seconds"] for r in records)
            for key in ("peak_bytes", "peak_increase_bytes"):
                values = [r[key] for r in records if r[key] is not None]
                summary[f"{name}.{kind}.{key}"] = max(values) if values else None
    summary["subgroups"] = _subgroups(rank, world_size, strip, use_cuda)
    with open(os.path.join(folder, f"rank{rank}.json"), "w") as handle:
        json.dump(summary, handle)
    sync()
    dist.destroy_process_group()


def _subgroup_members(world_size: int) -> dict[str, list[int]]:
    if world_size > 2:
        return {
            "without global rank 0": list(range(1, world_size, 2)),
            "with global rank 0": list(range(0, world_size, 2)),
        }
    return {"without global rank 0": [1], "with global rank 0": [0, 1]}


def _subgroups(rank: int, world_size: int, tensor, use_cuda: bool) -> dict[str, Any]:
    """The subgroup case on this rank: equality and peaks, per group it is a member of
    (only members call, so nothing here waits on the whole world)."""
    import torch
    import torch.distributed as dist

    def peak_increase(call) -> int | None:
        if not use_cuda:
            call()
            return None
        torch.cuda.synchronize()
        start = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        value = call()
        torch.cuda.synchronize()
        del value
        return torch.cuda.max_memory_allocated() - start

    from lifetime_lint.runtime import gather_to_root

    before = load_module(SUBGROUP_BEFORE, "ll003_subgroup_before")
    after = load_module(SUBGROUP_AFTER, "ll003_subgroup_after")
    groups = {label: (m, dist.new_group(m)) for label, m in _subgroup_members(world_size).items()}
    found: dict[str, Any] = {}
    for label, (members, group) in groups.items():
        if rank not in members:
            continue
        root = dist.get_rank(group) == 0
        record: dict[str, Any] = {"members": members, "group_root": root}
        buffers = [tensor.new_empty(tensor.shape) for _ in members]
        dist.all_gather(buffers, tensor, group=group)
        helper = gather_to_root(tensor, group=group, group_dst=0)
        record["helper_equals_all_gather_on_root"] = (
            all(_same(a, b) for a, b in zip(helper, buffers)) if root else helper is None
        )
        for function in SUBGROUP_SAFE:
            want = getattr(before, function)(tensor, group)
            got = getattr(after, function)(tensor, group)
            record[f"{function}.equal"] = _same(want, got)
            for name, module in (("before", before), ("after", after)):
                call = getattr(module, function)
                record[f"{function}.{name}.peak_increase_bytes"] = peak_increase(
                    lambda c=call, g=group: c(tensor, g)
                )
        found[label] = record
    return found


def _same(a, b) -> bool:
    import torch

    if a is None or b is None:
        return a is None and b is None
    return a.shape == b.shape and a.dtype == b.dtype and bool(torch.equal(a, b))


def run(iters: int, force_cpu: bool, world_size: int = 2) -> int:
    if not AFTER.exists() or not SUBGROUP_AFTER.exists():
        print(
            f"{AFTER.relative_to(ROOT)} is missing: run `python {Path(__file__).name} prepare` "
            "where lifetime-lint is installed, and carry .bench/ along",
            file=sys.stderr,
        )
        return 2
    import torch
    import torch.multiprocessing as mp

    use_cuda = (
        (not force_cpu) and torch.cuda.is_available() and torch.cuda.device_count() >= world_size
    )
    with tempfile.TemporaryDirectory() as folder:
        context = mp.get_context("spawn")
        processes = [
            context.Process(target=_worker, args=(rank, world_size, folder, use_cuda, iters))
            for rank in range(world_size)
        ]
        for process in processes:
            process.start()
        deadline = time.monotonic() + 300
        while any(p.exitcode is None for p in processes) and time.monotonic() < deadline:
            if any(p.exitcode not in (None, 0) for p in processes):
                break
            time.sleep(0.1)
        for process in processes:
            if process.exitcode is None:
                process.terminate()
            process.join(10)
        failures = [Path(folder, f"rank{r}.err") for r in range(world_size)]
        failures = [path.read_text() for path in failures if path.exists()]
        if failures or any(p.exitcode != 0 for p in processes):
            print(
                "\n".join(failures) or f"exit codes {[p.exitcode for p in processes]}",
                file=sys.stderr,
            )
            return 1
        ranks = [json.loads(Path(folder, f"rank{r}.json").read_text()) for r in range(world_size)]

    results = {
        "benchmark": "ll003_gather",
        "backend": "nccl" if use_cuda else "gloo (CPU smoke run)",
        "torch": torch.__version__,
        "shape": {
            "frames": (CUDA_SHAPE if use_cuda else CPU_SHAPE)[0],
            "latent": list((CUDA_SHAPE if use_cuda else CPU_SHAPE)[1:]),
        },
        "iters": iters,
        "ranks": ranks,
    }
    _print_table(results)
    write_results("ll003_gather.json", results)
    subgroup_checks = [
        value
        for r in ranks
        for record in r["subgroups"].values()
        for key, value in record.items()
        if key.endswith("equal") or key == "helper_equals_all_gather_on_root"
    ]
    ok = (
        all(r["root_output_equal"] for r in ranks)
        and ranks[0]["gets_video"]
        and not any(r["gets_video"] for r in ranks[1:])
        and bool(subgroup_checks)
        and all(subgroup_checks)
    )
    return 0 if ok else 1


def _mib(value) -> str:
    return "-" if value is None else f"{value / 2**20:,.1f} MiB"


def _ratio(after, before) -> str:
    if after is None or before is None or before == 0:
        return "-" if after is None or before is None else ("0 -> 0" if after == 0 else "inf")
    return f"{after / before:.3f}x"


def _print_table(results: dict[str, Any]) -> None:
    print(
        f"LL003 gather benchmark: {results['backend']}, torch {results['torch']}, "
        f"{results['shape']['frames']} frames, latent {results['shape']['latent']}, "
        f"{results['iters']} timed iterations per variant"
    )
    print("| rank | measure | before | after | after/before |")
    print("| --- | --- | --- | --- | --- |")
    rows = [
        ("decode peak allocated", "decode.peak_bytes", _mib),
        ("decode peak over start", "decode.peak_increase_bytes", _mib),
        ("gather_strips peak over start", "gather.peak_increase_bytes", _mib),
        ("decode median time", "decode.median_s", lambda s: f"{s * 1e3:.2f} ms"),
        ("gather_strips median time", "gather.median_s", lambda s: f"{s * 1e3:.2f} ms"),
    ]
    for rank in results["ranks"]:
        for label, key, fmt in rows:
            before, after = rank[f"before.{key}"], rank[f"after.{key}"]
            shown_before = fmt(before) if before is not None else "-"
            shown_after = fmt(after) if after is not None else "-"
            print(
                f"| {rank['rank']} | {label} | {shown_before} | {shown_after} | "
                f"{_ratio(after, before)} |"
            )
        print(f"| {rank['rank']} | strip (send tensor) | {_mib(rank['strip_bytes'])} | | |")
    print(
        "| rank | subgroup | group root | fixture function | equal | peak over start before | after |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for rank in results["ranks"]:
        for label, record in rank["subgroups"].items():
            for function in SUBGROUP_SAFE:
                print(
                    f"| {rank['rank']} | {label} {record['members']} | {record['group_root']} | "
                    f"{function} | {record[f'{function}.equal']} | "
                    f"{_mib(record[f'{function}.before.peak_increase_bytes'])} | "
                    f"{_mib(record[f'{function}.after.peak_increase_bytes'])} |"
                )
            print(
                f"| {rank['rank']} | {label} | | gather_to_root == all_gather on the root | "
                f"{record['helper_equals_all_gather_on_root']} | | |"
            )
    equal = all(r["root_output_equal"] for r in results["ranks"])
    print(
        f"rank 0 output bitwise equal before/after: {equal}; "
        f"video only on rank 0: {[r['gets_video'] for r in results['ranks']]}"
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", nargs="?", default="run", choices=("run", "prepare"))
    parser.add_argument("--iters", type=int, default=5, help="timed iterations per variant")
    parser.add_argument("--cpu", action="store_true", help="the gloo smoke run even with GPUs")
    parser.add_argument("--world-size", type=int, default=2, help="ranks (one GPU each)")
    args = parser.parse_args(argv)
    if args.command == "prepare":
        prepare()
        return 0
    return run(args.iters, args.cpu, args.world_size)


if __name__ == "__main__":
    sys.exit(main())
