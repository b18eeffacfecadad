"""`lifetime_lint.runtime.release`: same items, same order, each freed once consumed."""

from __future__ import annotations

import gc
import weakref

import pytest
import torch

from lifetime_lint.runtime import release


def test_yields_every_item_in_order_and_empties_the_list():
    tiles = [torch.full((2,), float(i)) for i in range(5)]
    expected = [t.clone() for t in tiles]
    seen = list(release(tiles))
    assert tiles == []
    assert all(torch.equal(a, b) for a, b in zip(seen, expected))


def test_a_consumed_item_is_freed_once_the_loop_lets_go_of_it():
    tiles = [torch.ones(1024) * i for i in range(4)]
    refs = [weakref.ref(t) for t in tiles]
    alive = []
    for index, tile in enumerate(release(tiles)):
        gc.collect()
        alive.append(sum(ref() is not None for ref in refs))
        assert refs[index]() is tile
    del tile
    gc.collect()
    # The current tile plus those not yet taken; the earlier ones are gone.
    assert alive == [4, 3, 2, 1]
    assert all(ref() is None for ref in refs)


def test_without_release_every_tile_stays_alive():
    tiles = [torch.ones(1024) * i for i in range(4)]
    refs = [weakref.ref(t) for t in tiles]
    alive = []
    for _tile in tiles:
        alive.append(sum(ref() is not None for ref in refs))
    assert alive == [4, 4, 4, 4]


def test_stopping_early_keeps_the_rest_in_order():
    items = list(range(6))
    iterator = release(items)
    taken = [next(iterator), next(iterator)]
    iterator.close()
    assert taken == [0, 1]
    assert items == [2, 3, 4, 5]


def test_break_in_a_for_loop_keeps_the_rest_in_order():
    items = ["a", "b", "c", "d"]
    for item in release(items):
        if item == "b":
            break
    assert items == ["c", "d"]


def test_empty_list():
    items: list = []
    assert list(release(items)) == []
    assert items == []


@pytest.mark.parametrize("container", [(1, 2), range(3), iter([1, 2])])
def test_rejects_what_it_cannot_empty(container):
    with pytest.raises(TypeError, match="needs a list"):
        release(container)  # type: ignore[arg-type]
