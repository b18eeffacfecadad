"""`gather_to_root()`: gather tensors onto one rank without allocating them on the others.

`dist.all_gather(buffers, t)` makes every rank allocate `world_size` receive buffers, even when
only one rank reads them. `gather_to_root(t, dst=0)` returns what `all_gather` would have put
in `buffers` on the destination rank and `None` elsewhere, and allocates the receive buffers
only on the destination: the other ranks hold nothing but their own send tensor.

Backends that emulate `gather` slowly (Ascend's HCCL implements it with a broadcast plus an
all_gather, measured 0.5 to 1.5 s slower per call in one real repo) take the `all_gather` path
instead, and the non-destination ranks drop their receive buffers at once. The list of such
backends is `GATHER_FALLBACK_BACKENDS` (default: hccl), the `fallback_backends` argument, or
the `LIFETIME_LINT_GATHER_FALLBACK` environment variable (comma-separated names; empty
means none).

Without an initialised process group (a single-process run, a CPU-only build without
`torch.distributed`), the caller is the whole world and therefore the destination: the
result is a list holding one copy of `tensor` (or the copy itself when `dim` is given),
as `all_gather` on a group of one would give. A destination other than 0 is then an error.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import torch

GATHER_FALLBACK_BACKENDS: tuple[str, ...] = ("hccl",)
FALLBACK_ENV = "LIFETIME_LINT_GATHER_FALLBACK"

Shape = Sequence[int]


def gather_to_root(
    tensor: torch.Tensor,
    *,
    dst: int | None = None,
    group_dst: int | None = None,
    group: Any = None,
    dim: int | None = None,
    shapes: Sequence[Shape] | None = None,
    fallback_backends: Sequence[str] | None = None,
) -> list[torch.Tensor] | torch.Tensor | None:
    """Gather `tensor` from every rank of `group` onto one rank.

    Args:
        tensor: this rank's contribution (every rank must call, like any collective).
        dst: the destination as a global rank; `group_dst`: as a rank within `group`. Give
            at most one; with neither, the destination is global rank 0 (as `dist.gather`).
        group: the process group (default: the world).
        dim: return one tensor, the gathered tensors concatenated along `dim`, instead of a
            list. Along dim 0 the tensors are received straight into the result.
        shapes: every rank's tensor shape, in group-rank order, when they differ (the
            shapes the original `all_gather` receive buffers had). Tensors are then padded
            to the largest size for the transfer, on every backend.
        fallback_backends: backends that take the `all_gather` path (default: see module).

    Returns:
        On the destination: the list `all_gather` would have filled (new tensors, in
        group-rank order), or their concatenation when `dim` is given. Elsewhere, and on
        a process that is not in `group`: None.
    """
    import torch
    import torch.distributed as dist

    if dst is not None and group_dst is not None:
        raise ValueError("give either dst (a global rank) or group_dst, not both")
    if not (dist.is_available() and dist.is_initialized()):
        if (dst or 0) != 0 or (group_dst or 0) != 0:
            raise ValueError("no process group is initialised: the only rank is 0")
        return _result([tensor.clone()], dim, torch)

    rank = dist.get_rank(group)
    if rank < 0:  # this process is not in `group`: nothing to send or receive (as torch)
        return None
    world_size = dist.get_world_size(group)
    if group_dst is None:
        global_dst = 0 if dst is None else dst
        group_dst = global_dst if group is None else dist.get_group_rank(group, global_dst)
    if not 0 <= group_dst < world_size:
        raise ValueError(f"destination rank {group_dst} is not in a group of {world_size}")
    if shapes is not None:
        shapes = [tuple(int(size) for size in shape) for shape in shapes]
        if len(shapes) != world_size:
            raise ValueError(f"shapes has {len(shapes)} entries for a group of {world_size}")
        if shapes[rank] != tuple(tensor.shape):
            raise ValueError(f"rank {rank}: tensor shape {tuple(tensor.shape)} != {shapes[rank]}")
        if all(shape == shapes[rank] for shape in shapes):
            shapes = None
    is_root = rank == group_dst
    tensor = tensor.contiguous()

    fall_back = _falls_back(dist.get_backend(group), fallback_backends)
    if shapes is not None:
        return _gather_uneven(tensor, shapes, is_root, group, group_dst, dim, fall_back, dist)
    if fall_back:
        everyone = [torch.empty_like(tensor) for _ in range(world_size)]
        dist.all_gather(everyone, tensor, group=group)
        if not is_root:
            del everyone  # drop the receive buffers at once
            return None
        return _result(everyone, dim, torch)
    output: torch.Tensor | None = None
    buffers: list[torch.Tensor] | None = None
    if is_root:
        if dim is not None and tensor.dim() > 0 and dim % tensor.dim() == 0:
            # Concatenation along dim 0: receive straight into contiguous slices of the result.
            output = tensor.new_empty((world_size * tensor.shape[0],) + tuple(tensor.shape[1:]))
            buffers = (
                list(output.chunk(world_size))
                if tensor.shape[0]
                else [tensor.new_empty(tensor.shape) for _ in range(world_size)]
            )
        else:
            buffers = [torch.empty_like(tensor) for _ in range(world_size)]
    _gather(dist, tensor, buffers, group, group_dst)
    if not is_root:
        return None
    if output is not None:
        return output
    return _result(buffers, dim, torch)


def _gather_uneven(tensor, shapes, is_root, group, group_dst, dim, fall_back, dist):
    """Tensors of different shapes: pad each to the largest size, slice on the root.

    gloo's and NCCL's gather (and gloo's all_gather) require equal sizes; padding works on
    every backend and costs one padded send buffer per rank.
    """
    import torch

    numels = [_numel(shape) for shape in shapes]
    largest = max(numels)
    flat = tensor.reshape(-1)
    if flat.numel() < largest:
        padded = flat.new_empty(largest)
        padded[: flat.numel()].copy_(flat)
        flat = padded
    buffers: list | None
    if fall_back:
        buffers = [flat.new_empty(largest) for _ in shapes]
        dist.all_gather(buffers, flat, group=group)
        if not is_root:
            del buffers  # drop the receive buffers at once
            return None
    else:
        buffers = [flat.new_empty(largest) for _ in shapes] if is_root else None
        _gather(dist, flat, buffers, group, group_dst)
        if not is_root or buffers is None:
            return None
    pieces = [buffer[:numel].view(shape) for buffer, numel, shape in zip(buffers, numels, shapes)]
    return _result(pieces, dim, torch)


def _gather(dist, tensor, buffers, group, group_dst) -> None:
    if _has_group_dst(dist.gather):
        dist.gather(tensor, buffers, group=group, group_dst=group_dst)
    else:  # torch < 2.6 takes only a global rank
        dst = group_dst if group is None else dist.get_global_rank(group, group_dst)
        dist.gather(tensor, buffers, dst=dst, group=group)


@functools.cache
def _has_group_dst(function: Any) -> bool:
    try:
        return "group_dst" in inspect.signature(function).parameters
    except (TypeError, ValueError):  # pragma: no cover - builtins without signatures
        return False


def _falls_back(backend: Any, configured: Sequence[str] | None) -> bool:
    """Whether this group's backend ("nccl", "cpu:gloo,cuda:nccl", ...) is a listed one."""
    names = configured
    if names is None:
        from_env = os.environ.get(FALLBACK_ENV)
        names = GATHER_FALLBACK_BACKENDS if from_env is None else from_env.split(",")
    wanted = {name.strip().lower() for name in names if name.strip()}
    parts = str(backend).lower().replace(",", " ").replace(":", " ").split()
    return any(part in wanted for part in parts)


def _numel(shape: Shape) -> int:
    count = 1
    for size in shape:
        count *= size
    return count


def _result(buffers, dim, torch):
    if dim is None:
        return buffers
    if len(buffers) == 1:
        return buffers[0]
    return torch.cat(buffers, dim=dim)
