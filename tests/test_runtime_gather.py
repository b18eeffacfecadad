"""`lifetime_lint.runtime.gather_to_root` on real multi-process gloo groups (2 and 4 ranks).

Each case spawns fresh processes that rendezvous through a file store in a temporary
folder (no ports, nothing outside localhost), runs every check of one world size in one
group, and reports a failing rank's traceback. A hung or crashed rank fails the test within
the timeout instead of hanging the suite.
"""

from __future__ import annotations

import datetime
import os
import tempfile
import time
import traceback
from typing import Any, Callable

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

from lifetime_lint.runtime import gather_to_root  # noqa: E402
from lifetime_lint.runtime.gather import FALLBACK_ENV  # noqa: E402

pytestmark = pytest.mark.skipif(
    not (dist.is_available() and dist.is_gloo_available()), reason="needs gloo"
)

TIMEOUT_S = 60.0


# -- a small launcher, shared with tests/test_ll003_fix_runs.py --------------------------


def _entry(worker: Callable, rank: int, world_size: int, folder: str, args: tuple) -> None:
    try:
        dist.init_process_group(
            "gloo",
            init_method=f"file://{os.path.join(folder, 'store')}",
            rank=rank,
            world_size=world_size,
            timeout=datetime.timedelta(seconds=TIMEOUT_S),
        )
        worker(rank, world_size, *args)
        dist.barrier()
        dist.destroy_process_group()
    except BaseException:  # report every failure, then exit non-zero
        with open(os.path.join(folder, f"rank{rank}.err"), "w") as handle:
            handle.write(traceback.format_exc())
        os._exit(1)


def run_gloo(worker: Callable, world_size: int, *args: Any, timeout: float = TIMEOUT_S) -> None:
    """Run `worker(rank, world_size, *args)` on `world_size` spawned gloo ranks; fail on any
    rank's exception, crash or timeout (the other ranks are then terminated)."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory() as folder:
        processes = [
            context.Process(target=_entry, args=(worker, rank, world_size, folder, args))
            for rank in range(world_size)
        ]
        for process in processes:
            process.start()
        deadline = time.monotonic() + timeout
        try:
            while any(p.exitcode is None for p in processes):
                if any(p.exitcode not in (None, 0) for p in processes):
                    break
                if time.monotonic() > deadline:
                    break
                time.sleep(0.05)
        finally:
            for process in processes:
                if process.exitcode is None:
                    process.terminate()
                process.join(10)
        errors = []
        for rank in range(world_size):
            path = os.path.join(folder, f"rank{rank}.err")
            if os.path.exists(path):
                with open(path) as handle:
                    errors.append(f"rank {rank}:\n{handle.read()}")
        codes = [p.exitcode for p in processes]
        assert not errors, "\n".join(errors)
        assert codes == [0] * world_size, f"ranks did not finish in {timeout:.0f} s: {codes}"


# -- checks run on every rank -----------------------------------------------------------


def _contribution(rank: int, shape=(3, 5), dtype=None) -> torch.Tensor:
    dtype = dtype or torch.float32
    return (torch.arange(_numel(shape), dtype=torch.float32).reshape(shape) + 100 * rank).to(dtype)


def _numel(shape) -> int:
    count = 1
    for size in shape:
        count *= size
    return count


def _all_gather(tensor, group=None):
    buffers = [torch.empty_like(tensor) for _ in range(dist.get_world_size(group))]
    dist.all_gather(buffers, tensor, group=group)
    return buffers


def _assert_same_list(result, expected) -> None:
    assert isinstance(result, list) and len(result) == len(expected)
    for got, want in zip(result, expected):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert torch.equal(got, want)


def _check_destination(rank: int, world_size: int) -> None:
    for dtype in (torch.float32, torch.bfloat16, torch.int64):
        tensor = _contribution(rank, dtype=dtype)
        expected = _all_gather(tensor)
        for root in (0, world_size - 1):
            for keyword in ("dst", "group_dst"):
                result = gather_to_root(tensor, **{keyword: root})
                if rank == root:
                    _assert_same_list(result, expected)
                    assert all(r.data_ptr() != tensor.data_ptr() for r in result)
                else:
                    assert result is None
    # Neither dst nor group_dst: global rank 0, as dist.gather.
    result = gather_to_root(_contribution(rank))
    assert (result is not None) == (rank == 0)


def _check_concatenated(rank: int, world_size: int) -> None:
    tensor = _contribution(rank, shape=(2, 3, 4))
    expected = _all_gather(tensor)
    for dim in (0, 1, -1, -3):
        result = gather_to_root(tensor, dst=0, dim=dim)
        if rank == 0:
            assert torch.equal(result, torch.cat(expected, dim=dim)), dim
        else:
            assert result is None
    # A non-contiguous contribution is sent by value.
    transposed = tensor.transpose(0, 2)
    result = gather_to_root(transposed, dst=0)
    if rank == 0:
        _assert_same_list(result, [t.transpose(0, 2) for t in expected])


def _check_uneven(rank: int, world_size: int) -> None:
    shapes = [(r + 1, 3) for r in range(world_size)]
    tensor = torch.full(shapes[rank], float(rank))
    expected = [torch.full(shape, float(r)) for r, shape in enumerate(shapes)]
    for fallback in ((), ("gloo",)):
        result = gather_to_root(tensor, group_dst=1, shapes=shapes, fallback_backends=fallback)
        if rank == 1:
            _assert_same_list(result, expected)
        else:
            assert result is None
    result = gather_to_root(tensor, dst=0, shapes=shapes, dim=0)
    if rank == 0:
        assert torch.equal(result, torch.cat(expected))
    # Equal shapes given explicitly take the plain path.
    same = gather_to_root(_contribution(rank), dst=0, shapes=[(3, 5)] * world_size)
    if rank == 0:
        _assert_same_list(same, _all_gather_reference(world_size))
    with pytest.raises(ValueError, match="tensor shape"):
        gather_to_root(torch.zeros(9), dst=0, shapes=shapes)


def _all_gather_reference(world_size: int):
    return [_contribution(r) for r in range(world_size)]


def _check_fallback(rank: int, world_size: int) -> None:
    tensor = _contribution(rank)
    expected = _all_gather(tensor)
    real_gather = dist.gather

    def no_gather(*args, **kwargs):  # the fallback must not call gather at all
        raise AssertionError("gather called on a fallback backend")

    dist.gather = no_gather
    try:
        result = gather_to_root(tensor, dst=0, fallback_backends=("GLOO",))
        assert (result is None) == (rank != 0)
        if rank == 0:
            _assert_same_list(result, expected)
        os.environ[FALLBACK_ENV] = "hccl, gloo"
        result = gather_to_root(tensor, dst=world_size - 1, dim=0)
        if rank == world_size - 1:
            assert torch.equal(result, torch.cat(expected))
        else:
            assert result is None
    finally:
        dist.gather = real_gather
        os.environ.pop(FALLBACK_ENV, None)
    # The default list (hccl) does not include gloo: gather is used.
    calls = []

    def counting_gather(*args, **kwargs):
        calls.append(kwargs)
        return real_gather(*args, **kwargs)

    dist.gather = counting_gather
    try:
        gather_to_root(tensor, dst=0)
    finally:
        dist.gather = real_gather
    assert len(calls) == 1


def _check_subgroup(rank: int, world_size: int) -> None:
    members = [1, 3]
    group = dist.new_group(members)  # every rank must create it
    if rank not in members:
        assert gather_to_root(_contribution(rank), group=group, group_dst=1) is None
        return
    tensor = _contribution(rank)
    expected = _all_gather(tensor, group=group)
    for kwargs in ({"group_dst": 1}, {"dst": 3}):
        result = gather_to_root(tensor, group=group, **kwargs)
        if rank == 3:
            _assert_same_list(result, expected)
        else:
            assert result is None
    with pytest.raises(ValueError, match="not both"):
        gather_to_root(tensor, group=group, dst=3, group_dst=1)
    with pytest.raises(ValueError, match="not in a group of 2"):
        gather_to_root(tensor, group=group, group_dst=2)


def _all_checks(rank: int, world_size: int) -> None:
    _check_destination(rank, world_size)
    _check_concatenated(rank, world_size)
    _check_uneven(rank, world_size)
    _check_fallback(rank, world_size)
    if world_size >= 4:
        _check_subgroup(rank, world_size)


@pytest.mark.parametrize("world_size", [2, 4])
def test_gather_to_root_matches_all_gather(world_size: int) -> None:
    run_gloo(_all_checks, world_size)


def _hang_on_rank_one(rank: int, world_size: int) -> None:
    if rank == 1:
        raise RuntimeError("rank 1 failed on purpose")
    dist.barrier()  # rank 0 would wait here for the gloo timeout


def test_launcher_reports_a_failing_rank_quickly() -> None:
    started = time.monotonic()
    with pytest.raises(AssertionError, match="rank 1 failed on purpose"):
        run_gloo(_hang_on_rank_one, 2)
    assert time.monotonic() - started < TIMEOUT_S / 2


# -- without a process group ----------------------------------------------------------


def test_single_process_is_the_whole_world() -> None:
    assert not dist.is_initialized()
    tensor = torch.arange(6.0).reshape(2, 3)
    result = gather_to_root(tensor)
    assert isinstance(result, list) and len(result) == 1
    assert torch.equal(result[0], tensor) and result[0].data_ptr() != tensor.data_ptr()
    concatenated = gather_to_root(tensor, dst=0, dim=1)
    assert torch.equal(concatenated, tensor) and concatenated.data_ptr() != tensor.data_ptr()
    with pytest.raises(ValueError, match="only rank is 0"):
        gather_to_root(tensor, dst=1)


def test_without_torch_distributed(monkeypatch) -> None:
    monkeypatch.setattr(dist, "is_available", lambda: False)
    tensor = torch.ones(3)
    (copy,) = gather_to_root(tensor, group_dst=0)
    assert torch.equal(copy, tensor)


@pytest.mark.parametrize(
    "backend, configured, env, expected",
    [
        ("hccl", None, None, True),  # the default list
        ("nccl", None, None, False),
        ("cpu:gloo,cuda:nccl", ("nccl",), None, True),
        ("cpu:gloo,cuda:nccl", ("hccl",), None, False),
        ("gloo", None, "hccl, GLOO", True),
        ("hccl", None, "", False),  # an empty variable: no fallback at all
        ("hccl", (), "hccl", False),  # the argument wins over the environment
    ],
)
def test_fallback_backend_names(monkeypatch, backend, configured, env, expected) -> None:
    from lifetime_lint.runtime.gather import _falls_back

    if env is None:
        monkeypatch.delenv(FALLBACK_ENV, raising=False)
    else:
        monkeypatch.setenv(FALLBACK_ENV, env)
    assert _falls_back(backend, configured) is expected
