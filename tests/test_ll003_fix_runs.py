"""LL003's fixed code behaves like the original on a real 2-rank gloo group.

The fixture inputs and their committed `--fix` / `--unsafe-fixes` outputs are imported side
by side in every rank and called with the same arguments: each function must return the
same value on every rank (the gathered result on the root, whatever the code returned
elsewhere). So the rewrite keeps behaviour where it matters, not only its text.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

from test_runtime_gather import run_gloo  # noqa: E402  (tests/ is on sys.path)

FIXTURES = Path(__file__).parent / "fixtures" / "LL003"

# fixture stem -> the file with its fix applied (unsafe fixes included where needed)
CASES = {
    "fix_patch_parallel_executor": "fix_patch_parallel_executor.fixed.py",
    "fix_early_return": "fix_early_return.fixed.py",
    "fix_uneven_shapes": "fix_uneven_shapes.unsafe.py",
    "fix_into_tensor": "fix_into_tensor.unsafe.py",
    "fix_orphaned_import": "fix_orphaned_import.fixed.py",
    "positive_guard_forms": "positive_guard_forms.unsafe.py",
    "positive_concatenated_on_every_rank": "positive_concatenated_on_every_rank.fixed.py",
    "positive_rank_through_bindings": "positive_rank_through_bindings.fixed.py",
}


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


class _FakeVae:
    """Decodes like a VAE: 8x spatial upsampling plus a per-channel affine map."""

    def decode(self, latents):
        sample = torch.nn.functional.interpolate(
            latents.flatten(0, 1) if latents.dim() == 5 else latents, scale_factor=8
        )
        if latents.dim() == 5:
            sample = sample.unflatten(0, latents.shape[:2])
        return SimpleNamespace(sample=sample * 0.5 + 0.25)


class _Writer:
    def __init__(self):
        self.calls = []

    def add_images(self, tag, images, step):
        self.calls.append((tag, images.clone(), step))


def _calls(module: ModuleType, rank: int, world_size: int, stem: str):
    """(label, thunk) pairs that exercise one fixture module."""
    generator = torch.Generator().manual_seed(1234 + rank)
    x = torch.randn(2, 3, 4, generator=generator)
    if stem == "fix_patch_parallel_executor":
        seeded = torch.Generator().manual_seed(7)
        latents = torch.randn(1, 4, 8, 8 * world_size, generator=seeded)
        decoder = module.PatchParallelDecoder(_FakeVae())
        return [("decode", lambda: decoder.decode(latents))]
    if stem == "fix_early_return":
        seeded = torch.Generator().manual_seed(7)
        latents = torch.randn(1, 4, 2 * world_size, 4, 4, generator=seeded)
        return [("decode", lambda: module.decode_video_tiles(_FakeVae(), latents, world_size))]
    if stem == "fix_uneven_shapes":
        # gloo's all_gather needs equal sizes: the original runs with equal row counts
        # here; `_check_uneven_rows` runs the fixed code with unequal ones.
        rows = torch.full((2, 3), float(rank))
        counts = [2] * world_size
        return [
            (f"dst={dst}", lambda dst=dst: module.gather_rows(rows, counts, None, dst=dst))
            for dst in range(world_size)
        ]
    if stem == "fix_into_tensor":
        return [("collect", lambda: module.collect_latents(x))]
    if stem == "fix_orphaned_import":
        return [("gather", lambda: module.gather_decoded(x, world_size))]
    if stem == "positive_concatenated_on_every_rank":
        seeded = torch.Generator().manual_seed(7)
        latents = torch.randn(1, 4, 2 * world_size, 4, 4, generator=seeded)

        def saved():
            with tempfile.TemporaryDirectory() as folder:
                path = os.path.join(folder, "video.pt")
                module.decode_and_save(_FakeVae(), latents, world_size, path)
                return torch.load(path) if os.path.exists(path) else None

        return [("decode_and_save", saved)]
    if stem == "positive_rank_through_bindings":
        decoder = module.Decoder()
        decoder.group, decoder.world_size = dist.group.WORLD, world_size

        def saved():
            here = os.getcwd()
            with tempfile.TemporaryDirectory() as folder:
                os.chdir(folder)  # `local_bound_to_get_rank` saves into the working folder
                try:
                    module.local_bound_to_get_rank(x, world_size)
                    return torch.load("video.pt") if os.path.exists("video.pt") else None
                finally:
                    os.chdir(here)

        return [
            ("local_bound_to_get_rank", saved),
            ("helper_in_the_test", lambda: module.helper_in_the_test(x, world_size)),
            ("int_of_a_helper_rank", lambda: module.int_of_a_helper_rank(x, world_size)),
            ("unpacked_from_a_helper", lambda: module.unpacked_from_a_helper(x, None)),
            ("method_rank", lambda: decoder.gather(x)),
        ]
    assert stem == "positive_guard_forms"
    writer = _Writer()

    def loop():
        module.loop_with_continue([x, x + 1, x * 2], world_size, writer)
        return writer.calls

    return [
        ("not_rank", lambda: module.not_rank(x, rank, world_size)),
        ("else_of_non_root", lambda: module.else_of_non_root(x, rank, world_size)),
        ("root_on_the_left", lambda: module.root_on_the_left(x, world_size)),
        ("loop_with_continue", loop),
        ("rebound_on_root", lambda: module.rebound_on_root(x, world_size, rank)),
        ("method_rank", lambda: module.method_rank(x, dist.group.WORLD)),
    ]


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (
            isinstance(a, torch.Tensor)
            and isinstance(b, torch.Tensor)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and torch.equal(a, b)
        )
    if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    return a == b


def _compare_fixtures(rank: int, world_size: int) -> None:
    for stem, fixed_name in CASES.items():
        original = _load(FIXTURES / f"{stem}.py", f"ll003_{stem}_original")
        fixed = _load(FIXTURES / fixed_name, f"ll003_{stem}_fixed")
        assert "gather_to_root" in (FIXTURES / fixed_name).read_text()
        before = [(label, thunk()) for label, thunk in _calls(original, rank, world_size, stem)]
        after = [(label, thunk()) for label, thunk in _calls(fixed, rank, world_size, stem)]
        for (label, want), (_, got) in zip(before, after):
            assert _same(got, want), f"{stem}.{label} differs on rank {rank}"
            if rank == 0 and label != "dst=1":
                assert want is not None, f"{stem}.{label}: the root got nothing"


def _check_uneven_rows(rank: int, world_size: int) -> None:
    fixed = _load(FIXTURES / CASES["fix_uneven_shapes"], "ll003_uneven_fixed")
    counts = [r + 1 for r in range(world_size)]
    rows = torch.full((counts[rank], 3), float(rank))
    for dst in range(world_size):
        result = fixed.gather_rows(rows, counts, None, dst=dst)
        if rank == dst:
            expected = torch.cat([torch.full((n, 3), float(r)) for r, n in enumerate(counts)])
            assert torch.equal(result, expected)
        else:
            assert result is None


def _all(rank: int, world_size: int) -> None:
    _compare_fixtures(rank, world_size)
    _check_uneven_rows(rank, world_size)


def test_fixed_fixtures_match_the_original_on_gloo() -> None:
    missing = [name for name in CASES.values() if not (FIXTURES / name).exists()]
    assert not missing, missing
    run_gloo(_all, 2)
