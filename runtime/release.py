"""`release(items)`: iterate a list while dropping the list's reference to each item.

`for tile in tiles:` keeps every tile alive until the loop ends, because the list still
references the tiles already consumed; with tensors that is the sum of all tiles at the
loop's peak. `for tile in release(tiles):` hands out the same items in the same order but
removes each from the list as it is taken, so a consumed tile is freed as soon as the loop
body lets go of it (`tile` is rebound by the next iteration), and the list is empty when the
loop completes.

The generator itself never holds an item across a `yield`: it pops the item and yields it in
one expression. If the loop stops early (`break`, an exception), the items not yet taken
stay in the list, in their original order.

Works for anything with `reverse()` and `pop()` (lists); needs no torch.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TypeVar

T = TypeVar("T")


def release(items: list[T]) -> Iterator[T]:
    """Yield the items of `items` in order, removing each from the list as it is yielded.

    Args:
        items: a list (it is emptied as the iteration proceeds).

    Raises:
        TypeError: if `items` cannot be consumed in place (a tuple, a generator); such
            containers do not keep their items alive in the way a list does, or cannot be
            emptied, so there is nothing `release` can do for them.
    """
    if not (hasattr(items, "pop") and hasattr(items, "reverse")):
        raise TypeError(
            f"release() needs a list to empty as it iterates, not {type(items).__name__}"
        )
    return _consume(items)


def _consume(items: list[T]) -> Iterator[T]:
    # Reversed, the next item is at the end: O(1) pops instead of O(n) pops from the front.
    items.reverse()
    try:
        while items:
            yield items.pop()
    finally:
        # Stopped early: put the remaining items back in their original order.
        items.reverse()
