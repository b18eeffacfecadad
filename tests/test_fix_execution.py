"""Every rule's safe fixes, executed: the code before and after `lifetime-lint check --fix`
is imported side by side and run on CPU torch (gloo groups for LL003), and must give the
same results, in generators, async functions, try/finally, loops with break/continue,
torch.compile'd callers (fullgraph) and subgroups. Covers LL001-LL006's safe fixes.

All cases live in one project on disk (depending on lifetime-lint, so its safe fixes are
offered) and are fixed by one real `lifetime-lint` subprocess. A case whose rule offers no
safe fix is listed in `NOT_FIXED`; the test fails if that changes either way, so the list
stays true.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

torch = pytest.importorskip("torch")

# name -> source; each module defines `run()` and is deterministic.
CASES: dict[str, str] = {
    # LL004: torch.cuda.empty_cache() -> reclaim()
    "ll004_generator": """
        import torch


        def frames(n):
            for i in range(n):
                if i % 2:
                    torch.cuda.empty_cache()
                yield torch.full((2,), float(i))


        def run():
            return list(frames(5))
        """,
    "ll004_async": """
        import asyncio

        import torch


        async def step(x):
            torch.cuda.empty_cache()
            await asyncio.sleep(0)
            return x * 2


        def run():
            return asyncio.run(step(torch.arange(4.0)))
        """,
    "ll004_try_finally_break_continue": """
        import torch


        def run():
            seen = []
            for i in range(6):
                try:
                    if i == 1:
                        continue
                    if i == 4:
                        break
                    seen.append(torch.tensor(i))
                finally:
                    torch.cuda.empty_cache()
            return seen
        """,
    "ll004_module_level_before_later_import": """
        import torch

        torch.cuda.empty_cache()

        from lifetime_lint.runtime import release  # noqa: E402


        def run():
            return list(release([torch.ones(1), torch.zeros(1)]))
        """,
    # LL002: accumulate-then-cat -> ChunkWriter
    "ll002_decode_loop": """
        import torch


        def decode(z: torch.Tensor):
            frames = []
            for k in range(z.shape[1]):
                frames.append(z[:, k : k + 1] * 2 + 1)
            return torch.cat(frames, dim=1)


        def run():
            return decode(torch.arange(24.0).reshape(2, 4, 3))
        """,
    "ll002_loop_with_continue_and_break": """
        import torch


        def decode(z: torch.Tensor):
            frames = []
            for k in range(z.shape[1]):
                if k == 1:
                    continue
                if k == 5:
                    break
                frames.append(z[:, k : k + 1] - k)
            return torch.cat(frames, dim=1)


        def run():
            return decode(torch.arange(42.0).reshape(2, 7, 3))
        """,
    "ll002_in_generator": """
        import torch


        def batches(z: torch.Tensor):
            for start in range(0, z.shape[0], 2):
                parts = []
                for k in range(z.shape[1]):
                    parts.append(z[start : start + 2, k : k + 1].clone())
                yield torch.cat(parts, dim=1)


        def run():
            return list(batches(torch.arange(48.0).reshape(4, 4, 3)))
        """,
    "ll002_in_async_function": """
        import asyncio

        import torch


        async def decode(z: torch.Tensor):
            frames = []
            for k in range(z.shape[1]):
                await asyncio.sleep(0)
                frames.append(z[:, k : k + 1] * 3)
            return torch.cat(frames, dim=1)


        def run():
            return asyncio.run(decode(torch.arange(24.0).reshape(2, 4, 3)))
        """,
    "ll002_try_finally": """
        import torch


        def decode(z: torch.Tensor):
            frames = []
            try:
                for k in range(z.shape[1]):
                    frames.append(z[:, k : k + 1] + 0.5)
            finally:
                z.add_(0)
            return torch.cat(frames, dim=1)


        def run():
            return decode(torch.arange(24.0).reshape(2, 4, 3))
        """,
    "ll002_compiled_caller": """
        import torch


        @torch.compile(fullgraph=True, backend="eager")
        def decode(z: torch.Tensor):
            frames = []
            for k in range(z.shape[1]):
                frames.append(z[:, k : k + 1] * 2)
            return torch.cat(frames, dim=1)


        def run():
            return decode(torch.arange(24.0).reshape(2, 4, 3))
        """,
    "ll002_compiled_by_reference": """
        import torch


        def decode(z: torch.Tensor):
            frames = []
            for k in range(z.shape[1]):
                frames.append(z[:, k : k + 1] * 2)
            return torch.cat(frames, dim=1)


        compiled = torch.compile(decode, fullgraph=True, backend="eager")


        def run():
            return compiled(torch.arange(24.0).reshape(2, 4, 3))
        """,
    # LL001: a tensor held across a heavy call -> `del` after its last use
    "ll001_held_across_decode": """
        import torch
        from torch import nn


        class Pipeline(nn.Module):
            def __init__(self):
                super().__init__()
                torch.manual_seed(0)
                self.encoder = nn.Linear(4, 4)
                self.decoder = nn.Linear(4, 4)

            @torch.no_grad()
            def forward(self, x):
                hidden = self.encoder(x)
                latents = hidden * 2
                for _ in range(3):
                    latents = self.decoder(latents)
                return latents


        def run():
            return Pipeline()(torch.ones(2, 4))
        """,
    # LL001 in a generator, an async function, try/finally, a loop with break/continue
    "ll001_generator": """
        import torch
        from torch import nn


        class Pipeline(nn.Module):
            def __init__(self):
                super().__init__()
                torch.manual_seed(0)
                self.encoder = nn.Linear(4, 4)
                self.decoder = nn.Linear(4, 4)

            @torch.no_grad()
            def stream(self, x, steps):
                hidden = self.encoder(x)
                latents = hidden * 2
                for _ in range(steps):
                    latents = self.decoder(latents)
                    yield latents


        def run():
            return list(Pipeline().stream(torch.ones(2, 4), 3))
        """,
    "ll001_async": """
        import asyncio

        import torch
        from torch import nn


        class Pipeline(nn.Module):
            def __init__(self):
                super().__init__()
                torch.manual_seed(0)
                self.encoder = nn.Linear(4, 4)
                self.decoder = nn.Linear(4, 4)

            @torch.no_grad()
            async def generate(self, x):
                hidden = self.encoder(x)
                latents = hidden * 2
                await asyncio.sleep(0)
                for _ in range(3):
                    latents = self.decoder(latents)
                return latents


        def run():
            return asyncio.run(Pipeline().generate(torch.ones(2, 4)))
        """,
    "ll001_try_finally": """
        import torch
        from torch import nn


        class Pipeline(nn.Module):
            def __init__(self):
                super().__init__()
                torch.manual_seed(0)
                self.encoder = nn.Linear(4, 4)
                self.decoder = nn.Linear(4, 4)
                self.calls = 0

            @torch.no_grad()
            def forward(self, x):
                try:
                    hidden = self.encoder(x)
                    latents = hidden * 2
                    for _ in range(3):
                        latents = self.decoder(latents)
                finally:
                    self.calls += 1
                return latents, self.calls


        def run():
            return Pipeline()(torch.ones(2, 4))
        """,
    "ll001_loop_break_continue": """
        import torch
        from torch import nn


        class Pipeline(nn.Module):
            def __init__(self):
                super().__init__()
                torch.manual_seed(0)
                self.encoder = nn.Linear(4, 4)
                self.decoder = nn.Linear(4, 4)

            @torch.no_grad()
            def forward(self, x):
                outputs = []
                for step in range(6):
                    if step == 1:
                        continue
                    if step == 4:
                        break
                    hidden = self.encoder(x + step)
                    latents = hidden * 2
                    for _ in range(2):
                        latents = self.decoder(latents)
                    outputs.append(latents)
                return outputs


        def run():
            return Pipeline()(torch.ones(2, 4))
        """,
    # LL001 where a `del` before the use would raise NameError: a fix, if any, keeps it
    "ll001_used_in_finally": """
        import torch
        from torch import nn


        class Pipeline(nn.Module):
            def __init__(self):
                super().__init__()
                torch.manual_seed(0)
                self.encoder = nn.Linear(4, 4)
                self.decoder = nn.Linear(4, 4)
                self.shapes = []

            @torch.no_grad()
            def forward(self, x):
                hidden = self.encoder(x)
                try:
                    latents = hidden * 2
                    for _ in range(3):
                        latents = self.decoder(latents)
                finally:
                    self.shapes.append(tuple(hidden.shape))
                return latents, self.shapes


        def run():
            return Pipeline()(torch.ones(2, 4))
        """,
    "ll001_reused_next_iteration": """
        import torch
        from torch import nn


        class Pipeline(nn.Module):
            def __init__(self):
                super().__init__()
                torch.manual_seed(0)
                self.encoder = nn.Linear(4, 4)
                self.decoder = nn.Linear(4, 4)

            @torch.no_grad()
            def forward(self, x):
                outputs = []
                hidden = self.encoder(x)
                for step in range(5):
                    if step % 2:
                        outputs.append(hidden.sum())
                        continue
                    latents = hidden * 2
                    for _ in range(2):
                        latents = self.decoder(latents)
                    outputs.append(latents.sum())
                return outputs


        def run():
            return Pipeline()(torch.ones(2, 4))
        """,
    # LL002: a compiled caller (fullgraph) traces through the fixed helper
    "ll002_compiled_outer_caller": """
        import torch


        def decode(z: torch.Tensor):
            frames = []
            for k in range(z.shape[1]):
                frames.append(z[:, k : k + 1] * 2)
            return torch.cat(frames, dim=1)


        @torch.compile(fullgraph=True, backend="eager")
        def outer(z: torch.Tensor):
            return decode(z) + 1


        def run():
            return outer(torch.arange(24.0).reshape(2, 4, 3))
        """,
    # LL005: torch.cuda queries -> torch.accelerator, in a generator under try/finally
    "ll005_queries": """
        import torch


        def frames(n):
            for i in range(n):
                if torch.cuda.is_available():
                    torch.cuda.synchronize()
                yield i, torch.cuda.device_count()


        def run():
            out = []
            try:
                for item in frames(4):
                    if item[0] == 1:
                        continue
                    if item[0] == 3:
                        break
                    out.append(item)
            finally:
                out.append(torch.cuda.is_available())
            return out
        """,
    # LL006: a training loop that keeps each step's loss
    "ll006_appended_losses": """
        import torch
        from torch import nn


        def train(steps):
            torch.manual_seed(0)
            model = nn.Linear(3, 1)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            x = torch.randn(8, 3)
            y = torch.randn(8, 1)
            losses = []
            for step in range(steps):
                if step == 1:
                    continue
                optimizer.zero_grad()
                loss = nn.functional.mse_loss(model(x), y)
                loss.backward()
                optimizer.step()
                losses.append(loss)
            return [p.detach().clone() for p in model.parameters()], [v.item() for v in losses]


        def run():
            return train(4)
        """,
}

# Cases for which no safe fix is offered (observed; the test checks it stays so).
NOT_FIXED: dict[str, str] = {
    "ll002_loop_with_continue_and_break": "LL002 offers no safe fix when a jump skips appends",
}
# Cases that test a fix's safety where one would be easy to get wrong: whether a fix is
# offered there may change as the rules improve; whatever is offered must keep behaviour.
ANY_FIX: dict[str, str] = {
    "ll001_used_in_finally": "a `del` inside the try would break the finally's use",
    "ll001_reused_next_iteration": "a `del` in the loop would break the next iteration's use",
}


def _write(folder: Path) -> dict[str, Path]:
    (folder / "pyproject.toml").write_text(
        '[project]\nname = "cases"\nversion = "0"\ndependencies = ["torch", "lifetime-lint"]\n'
        # Small programs: every finding, whatever its significance, so every fix is run.
        '\n[tool.lifetime-lint]\nmin-significance = "low"\nportability = "strict"\n'
    )
    paths = {}
    for name, source in CASES.items():
        path = folder / f"{name}.py"
        path.write_text(textwrap.dedent(source).lstrip())
        paths[name] = path
    return paths


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (
            isinstance(a, torch.Tensor)
            and isinstance(b, torch.Tensor)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and a.stride() == b.stride()
            and torch.equal(a, b)
        )
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    return a == b


@pytest.fixture(scope="module")
def fixed_cases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    before = tmp_path_factory.mktemp("before")
    after = tmp_path_factory.mktemp("after")
    originals = _write(before)
    fixed = _write(after)
    result = subprocess.run(
        [sys.executable, "-m", "lifetime_lint", "check", "--no-cache", "--fix", "--exit-zero", "."],
        cwd=after, capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    return {name: (originals[name], fixed[name]) for name in CASES}


@pytest.mark.parametrize("name", sorted(CASES))
def test_safe_fix_keeps_behaviour(fixed_cases: dict[str, tuple[Path, Path]], name: str) -> None:
    original, fixed = fixed_cases[name]
    changed = original.read_text() != fixed.read_text()
    assert name in ANY_FIX or changed == (name not in NOT_FIXED), (
        f"{name}: expected {'no fix' if name in NOT_FIXED else 'a safe fix'}\n{fixed.read_text()}"
    )
    expected = _load(original, f"before_{name}").run()
    actual = _load(fixed, f"after_{name}").run()
    assert _same(expected, actual), f"{name}:\n{fixed.read_text()}"


# -- LL003 on real gloo groups ----------------------------------------------------------

GATHER_CASE = """
import torch
import torch.distributed as dist


def collect_world(t):
    buffers = [torch.empty_like(t) for _ in range(dist.get_world_size())]
    dist.all_gather(buffers, t)
    if dist.get_rank() == 0:
        return [b.tolist() for b in buffers]
    return None


def collect_group(t, group):
    buffers = [torch.empty_like(t) for _ in range(dist.get_world_size(group))]
    dist.all_gather(buffers, t, group=group)
    if dist.get_rank(group) == 0:
        return torch.stack(buffers).tolist()
    return None


def collect_steps(t, steps):
    for step in range(steps):
        if step == 1:
            continue
        if step == 3:
            break
        shifted = t + step
        buffers = [torch.empty_like(shifted) for _ in range(dist.get_world_size())]
        dist.all_gather(buffers, shifted)
        if dist.get_rank() == 0:
            yield torch.stack(buffers).tolist()


async def collect_async(t, group):
    buffers = [torch.empty_like(t) for _ in range(dist.get_world_size(group))]
    try:
        dist.all_gather(buffers, t, group=group)
    finally:
        t.add_(0)
    if dist.get_rank(group) == 0:
        return [b.tolist() for b in buffers]
    return None
"""


def _gather_worker(rank: int, world_size: int, folder: str) -> None:
    import asyncio

    import torch.distributed as dist

    before = _load(Path(folder, "before", "gather_case.py"), "gather_before")
    after = _load(Path(folder, "after", "gather_case.py"), "gather_after")
    subgroup = dist.new_group([1, 2])
    t = torch.arange(3.0) + 10 * rank
    results = []
    for module in (before, after):
        row = [module.collect_world(t), list(module.collect_steps(t, 5))]
        if rank in (1, 2):
            row.append(module.collect_group(t, subgroup))
            row.append(asyncio.run(module.collect_async(t, subgroup)))
        results.append(row)
    assert results[0] == results[1], (rank, results)


def test_ll003_fix_keeps_results_on_gloo_world_and_subgroup(tmp_path: Path) -> None:
    from test_runtime_gather import run_gloo  # tests/ is on sys.path

    for side in ("before", "after"):
        (tmp_path / side).mkdir()
        (tmp_path / side / "pyproject.toml").write_text(
            '[project]\nname = "g"\nversion = "0"\ndependencies = ["lifetime-lint"]\n'
        )
        (tmp_path / side / "gather_case.py").write_text(GATHER_CASE.lstrip())
    subprocess.run(
        [sys.executable, "-m", "lifetime_lint", "check", "--no-cache", "--fix", "--exit-zero",
         "--select", "LL003", "gather_case.py"],
        cwd=tmp_path / "after", check=True, capture_output=True,
    )  # fmt: skip
    fixed = (tmp_path / "after" / "gather_case.py").read_text()
    # The world, the subgroup and the generator's loop (break/continue) are fixed; the
    # async function's try/finally may or may not be: it runs either way.
    assert fixed.count("gather_to_root(") >= 3, fixed
    run_gloo(
        _gather_worker, 3, str(tmp_path), timeout=240.0
    )  # 3 spawned torch ranks, a shared machine
