"""LL006 benchmark: a training epoch and a validation loop before and after `lifetime-lint --fix`.

    python benchmarks/ll006_growth.py prepare   # here: writes .bench/ll006_growth/ with the linter
    python benchmarks/ll006_growth.py run       # GPU machine: torch only

`run` trains `ll006_growth_model.MLPRegressor` (4 x 4096 hidden, batch 512) for 60 steps and
validates it for 40, once with the original code (`total_loss += loss`,
`step_losses.append(loss)`, `val_loss += F.mse_loss(...)` without `torch.no_grad()`) and once
with the code `lifetime-lint --fix` wrote, from the same seed and the same batches. Per step
it records the autograd nodes reachable from the accumulators, the bytes of saved tensors
those nodes still hold, `torch.cuda.memory_allocated()` after the step and the peak allocated
during it (`max_memory_allocated` after a reset at the step's start), and the loss. Without
CUDA it runs a small CPU version (nodes, saved bytes and losses). With `$OUT` set it writes
`ll006_growth.json` there.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from _bench import load_module, write_results

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "benchmarks" / "ll006_growth_model.py"
BENCH = ROOT / ".bench" / "ll006_growth"
FIXED = BENCH / "growth_model_fixed.py"


def prepare() -> None:
    """Produce the "after" code with the real linter (needs the dev environment)."""
    BENCH.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(SOURCE, FIXED)
    linter = [sys.executable, "-m", "lifetime_lint", "check", "--no-cache", "--select", "LL006"]
    subprocess.run(linter + ["--fix", "--exit-zero", str(FIXED)], check=True)
    remaining = subprocess.run(linter + ["--exit-zero", str(FIXED)], capture_output=True, text=True)
    diff = subprocess.run(["diff", "-u", str(SOURCE), str(FIXED)], capture_output=True, text=True)
    (BENCH / "fix.diff").write_text(diff.stdout)
    print(diff.stdout)
    print("after --fix:", remaining.stdout.strip() or "no LL006 findings left")


def graph_size(torch: Any, roots: list[Any]) -> tuple[int, int]:
    """Autograd nodes reachable from `roots` (tensors or numbers) and the bytes of the saved
    tensors they still hold (released ones, after backward, count nothing)."""
    seen: set[int] = set()
    # The Python wrappers of visited nodes are kept alive: a freed wrapper's id() can be
    # reused by the next one, which would end the walk early.
    visited: list[Any] = []
    stack = [r.grad_fn for r in roots if isinstance(r, torch.Tensor) and r.grad_fn is not None]
    saved = 0
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        visited.append(node)
        for attribute in dir(node):
            if not attribute.startswith("_saved_"):
                continue
            try:
                value = getattr(node, attribute)
            except RuntimeError:  # freed by backward
                continue
            if isinstance(value, torch.Tensor):
                saved += value.numel() * value.element_size()
        stack.extend(function for function, _ in node.next_functions)
    return len(seen), saved


def run_variant(torch: Any, module: Any, device: str, sizes: dict[str, int]) -> dict[str, Any]:
    cuda = device == "cuda"
    torch.manual_seed(0)
    model = module.MLPRegressor(sizes["features"], sizes["hidden"], sizes["depth"]).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    generator = torch.Generator(device="cpu").manual_seed(1)

    def batches(count: int) -> list[tuple[Any, Any]]:
        shape = (sizes["batch"], sizes["features"])
        return [
            (
                torch.randn(shape, generator=generator).to(device),
                torch.randn((sizes["batch"], 1), generator=generator).to(device),
            )
            for _ in range(count)
        ]

    train_batches = batches(sizes["train_steps"])
    val_batches = batches(sizes["val_steps"])
    records: dict[str, list[dict[str, Any]]] = {"train": [], "val": []}

    def record(phase: str, loss: Any, roots: list[Any]) -> None:
        nodes, saved = graph_size(torch, roots)
        entry: dict[str, Any] = {"loss": number(loss), "graph_nodes": nodes, "saved_bytes": saved}
        if cuda:
            torch.cuda.synchronize()
            entry["allocated"] = torch.cuda.memory_allocated()
            entry["peak_allocated"] = torch.cuda.max_memory_allocated()
            torch.cuda.reset_peak_memory_stats()
        records[phase].append(entry)

    def on_train_step(step: int, total_loss: Any, step_losses: list[Any]) -> None:
        record("train", step_losses[-1], [total_loss, *step_losses])

    previous = [0.0]

    def on_val_step(step: int, val_loss: Any) -> None:
        record("val", number(val_loss) - previous[0], [val_loss])
        previous[0] = number(val_loss)

    def number(value: Any) -> float:
        return float(value.detach() if isinstance(value, torch.Tensor) else value)

    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    total_loss, _step_losses, val_loss = module.fit(
        model, train_batches, val_batches, optimizer, on_train_step, on_val_step
    )
    return {"records": records, "total_loss": number(total_loss), "val_loss": number(val_loss)}


def summarize(records: list[dict[str, Any]], key: str) -> dict[str, Any]:
    values = [r[key] for r in records]
    return {"first": values[0], "last": values[-1], "max": max(values)}


def run() -> None:
    import torch

    if not FIXED.exists():
        sys.exit(f"{FIXED} is missing: run `python benchmarks/ll006_growth.py prepare` first")
    before = load_module(SOURCE, "ll006_growth_before")
    after = load_module(FIXED, "ll006_growth_after")
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    if cuda:
        sizes = {"features": 1024, "hidden": 4096, "depth": 4, "batch": 512}
        sizes |= {"train_steps": 60, "val_steps": 40}
    else:
        sizes = {"features": 32, "hidden": 64, "depth": 3, "batch": 16}
        sizes |= {"train_steps": 12, "val_steps": 8}
    results: dict[str, Any] = {"device": torch.cuda.get_device_name() if cuda else "cpu"}
    results["sizes"] = sizes
    results["torch"] = torch.__version__
    for name, module in (("before", before), ("after", after)):
        results[name] = run_variant(torch, module, device, sizes)
        if cuda:
            torch.cuda.empty_cache()
    summary: dict[str, Any] = {}
    for name in ("before", "after"):
        for phase in ("train", "val"):
            records = results[name]["records"][phase]
            keys = ["graph_nodes", "saved_bytes"] + (
                ["allocated", "peak_allocated"] if cuda else []
            )
            summary[f"{name}.{phase}"] = {key: summarize(records, key) for key in keys}
    summary["losses_equal"] = (
        all(
            [r["loss"] for r in results["before"]["records"][phase]]
            == [r["loss"] for r in results["after"]["records"][phase]]
            for phase in ("train", "val")
        )
        and results["before"]["total_loss"] == results["after"]["total_loss"]
    )
    results["summary"] = summary
    for key, value in summary.items():
        print(key, value)
    write_results("ll006_growth.json", results)


if __name__ == "__main__":
    if sys.argv[1:] == ["prepare"]:
        prepare()
    elif sys.argv[1:] == ["run"]:
        run()
    else:
        sys.exit(__doc__)
