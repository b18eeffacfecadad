"""LL006's fixes, executed: real models trained on CPU before and after `lifetime-lint --fix`.

Memory is measured by walking the autograd graph reachable from the accumulators (nodes, and
bytes of saved tensors not yet released): it grows with every step before the fix and is
empty after it, while every loss value stays bitwise equal.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "LL006"
BENCHMARKS = ROOT / "benchmarks"


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _lint_fix(path: Path, *extra: str) -> str:
    """Run the real CLI's --fix on a file; return what it printed."""
    result = subprocess.run(
        [sys.executable, "-m", "lifetime_lint", "check", "--no-cache", "--select", "LL006"]
        + ["--fix", "--exit-zero", *extra, str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        yield _load(BENCHMARKS / "ll006_growth.py", "ll006_growth_bench")
    finally:
        sys.path.remove(str(BENCHMARKS))


def test_growth_model_before_and_after_fix(tmp_path, bench):
    before_path = tmp_path / "before.py"
    after_path = tmp_path / "after.py"
    shutil.copyfile(BENCHMARKS / "ll006_growth_model.py", before_path)
    shutil.copyfile(BENCHMARKS / "ll006_growth_model.py", after_path)
    _lint_fix(after_path)
    fixed = after_path.read_text()
    assert "total_loss += loss.detach()" in fixed
    assert "step_losses.append(loss.detach())" in fixed
    assert "val_loss += F.mse_loss(val_prediction, y).detach()" in fixed

    sizes = {"features": 16, "hidden": 32, "depth": 3, "batch": 8, "train_steps": 10}
    sizes["val_steps"] = 6
    before = bench.run_variant(torch, _load(before_path, "ll006_before"), "cpu", sizes)
    after = bench.run_variant(torch, _load(after_path, "ll006_after"), "cpu", sizes)

    train_nodes = [r["graph_nodes"] for r in before["records"]["train"]]
    val_saved = [r["saved_bytes"] for r in before["records"]["val"]]
    # Before: every training step adds its graph's nodes (backward freed their saved
    # tensors), every validation step adds its saved activations.
    assert all(b > a for a, b in zip(train_nodes, train_nodes[1:])), train_nodes
    assert all(r["saved_bytes"] == 0 for r in before["records"]["train"])
    assert all(b > a for a, b in zip(val_saved, val_saved[1:])), val_saved
    per_step = train_nodes[1] - train_nodes[0]
    assert train_nodes[-1] - train_nodes[0] == per_step * (len(train_nodes) - 1)
    # After: nothing reachable from the accumulators, at any step.
    for phase in ("train", "val"):
        assert all(r["graph_nodes"] == 0 and r["saved_bytes"] == 0 for r in after["records"][phase])
        assert [r["loss"] for r in before["records"][phase]] == [
            r["loss"] for r in after["records"][phase]
        ]
    assert before["total_loss"] == after["total_loss"]
    assert before["val_loss"] == after["val_loss"]


def _train_epoch_results(module, steps=6):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    generator = torch.Generator().manual_seed(3)
    loader = [
        (torch.randn(4, 8, generator=generator), torch.randint(0, 3, (4,), generator=generator))
        for _ in range(steps)
    ]
    total, mean_step, metrics = module.train_epoch(
        model, loader, optimizer, torch.nn.functional.cross_entropy, log_every=2
    )
    return total, mean_step, metrics


def test_plain_loop_fixture_safe_and_unsafe_fixes_keep_the_values(capsys):
    original = _load(FIXTURES / "positive_plain_loop.py", "ll006_plain")
    fixed = _load(FIXTURES / "positive_plain_loop.fixed.py", "ll006_plain_fixed")
    unsafe = _load(FIXTURES / "positive_plain_loop.unsafe.py", "ll006_plain_unsafe")
    results = [_train_epoch_results(m) for m in (original, fixed, unsafe)]
    printed = capsys.readouterr().out.splitlines()
    # The epoch's prints (running mean and EMA) are the same text all three ways.
    third = len(printed) // 3
    assert printed[:third] == printed[third : 2 * third] == printed[2 * third :]
    (total0, mean0, metrics0), (total1, mean1, metrics1), (total2, mean2, metrics2) = results
    assert total0.grad_fn is not None and metrics0["loss"].grad_fn is not None
    assert total1.grad_fn is None and metrics1["loss"].grad_fn is None
    assert torch.equal(total0.detach(), total1) and torch.equal(total1, total2)
    assert mean0 == mean1 == mean2
    assert torch.equal(metrics0["loss"].detach(), metrics1["loss"])
    assert torch.equal(metrics1["loss"], metrics2["loss"])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_DDP_DRIVER = """
import sys, torch
sys.path.insert(0, sys.argv[1])
import importlib
module = importlib.import_module(sys.argv[2])
torch.manual_seed(0)
model = torch.nn.Linear(6, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
scaler = torch.amp.GradScaler("cpu", enabled=False)
generator = torch.Generator().manual_seed(5)
loader = [(torch.randn(4, 6, generator=generator), torch.randn(4, 1, generator=generator))
          for _ in range(5)]
history = module.train(0, 1, model, loader, optimizer, scaler, epochs=2)
print(repr([h.item() for h in history]), [h.grad_fn is not None for h in history])
torch.distributed.destroy_process_group()
"""


def test_ddp_fixture_runs_the_same_on_a_real_gloo_group(tmp_path):
    shutil.copyfile(FIXTURES / "positive_ddp.py", tmp_path / "ddp_before.py")
    shutil.copyfile(FIXTURES / "positive_ddp.fixed.py", tmp_path / "ddp_after.py")
    outputs = []
    for name in ("ddp_before", "ddp_after"):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()))
        result = subprocess.run(
            [sys.executable, "-c", _DDP_DRIVER, str(tmp_path), name],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
        outputs.append(result.stdout.strip())
    values_before, grad_before = outputs[0].rsplit(" [", 1)
    values_after, grad_after = outputs[1].rsplit(" [", 1)
    assert values_before == values_after
    assert grad_before == "True, True]" and grad_after == "False, False]"


def test_scaled_loss_fix_detaches_the_loss_only(tmp_path):
    """`history.append(loss / cfg.accumulation_steps)` beside
    `scaler.scale(loss / cfg.accumulation_steps).backward()`: the fixed file detaches `loss`
    (not the int setting, whose `.detach()` would raise), stores the same values, and keeps
    no graph."""
    fixed = FIXTURES / "positive_scaled_loss_with_settings.fixed.py"
    assert "loss.detach() / cfg.accumulation_steps" in fixed.read_text(encoding="utf-8")
    path = tmp_path / "scaled.py"
    shutil.copyfile(FIXTURES / "positive_scaled_loss_with_settings.py", path)
    _lint_fix(path)
    assert path.read_text(encoding="utf-8") == fixed.read_text(encoding="utf-8")

    class Config:
        train_steps, accumulation_steps = 3, 2

        def resolved(self):
            return self

    def run(module_path: Path, name: str):
        torch.manual_seed(0)
        unet = torch.nn.Linear(4, 4)
        optimizer = torch.optim.SGD(unet.parameters(), lr=0.1)
        scaler = torch.amp.GradScaler("cpu", enabled=False)
        batches = iter(
            [{"noisy": torch.randn(2, 4), "target": torch.randn(2, 4)} for _ in range(6)]
        )
        return _load(module_path, name).train(Config(), unet, batches, optimizer, scaler)

    before = run(FIXTURES / "positive_scaled_loss_with_settings.py", "scaled_before")
    after = run(path, "scaled_after")
    assert [b.item() for b in before] == [a.item() for a in after]
    assert all(b.grad_fn is not None for b in before)
    assert all(a.grad_fn is None for a in after)


def test_helper_backward_and_per_call_step_fixes_keep_the_values(tmp_path):
    """Backward through a helper of the file (`_backward_scaled(loss, k)`), and a method that
    is one step per call (`self.running_loss += loss`): the fixed files store the same
    values and keep no graph."""

    def fixed_copy(name: str) -> Path:
        path = tmp_path / f"{name}.py"
        shutil.copyfile(FIXTURES / f"{name}.py", path)
        _lint_fix(path)
        fixed = FIXTURES / f"{name}.fixed.py"
        assert path.read_text(encoding="utf-8") == fixed.read_text(encoding="utf-8")
        return path

    helper_after = fixed_copy("positive_backward_through_helper")

    def run_epoch(module_path: Path, name: str):
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 2)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        batches = [(torch.randn(3, 4), torch.randn(3, 2)) for _ in range(4)]
        return _load(module_path, name).train_epoch(model, batches, optimizer, accumulation=2)

    total_before, history_before = run_epoch(
        FIXTURES / "positive_backward_through_helper.py", "helper_before"
    )
    total_after, history_after = run_epoch(helper_after, "helper_after")
    assert total_before.item() == total_after.item()
    assert [h.item() for h in history_before] == [h.item() for h in history_after]
    assert total_before.grad_fn is not None and total_after.grad_fn is None
    assert all(h.grad_fn is None for h in history_after)

    step_after = fixed_copy("positive_method_step_accumulates_on_self")

    def run_steps(module_path: Path, name: str):
        torch.manual_seed(0)
        agent = _load(module_path, name).Agent(torch.nn.Linear(4, 2), log_every=100)
        for _ in range(5):
            agent.update(torch.randn(3, 4), torch.randn(3, 2))
        return agent.running_loss

    before = run_steps(FIXTURES / "positive_method_step_accumulates_on_self.py", "step_before")
    after = run_steps(step_after, "step_after")
    assert before.item() == after.item()
    assert before.grad_fn is not None and after.grad_fn is None
