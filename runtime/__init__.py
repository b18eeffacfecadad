"""Helpers that lifetime-lint's fixes call; installed as `lifetime_lint.runtime`.

Importing this package does not import torch: each helper imports it when first called, so
the linter and a pre-commit environment never need torch, while model code (which has it)
gets platform-neutral memory management.
"""

from lifetime_lint.runtime.gather import gather_to_root
from lifetime_lint.runtime.preallocate import ChunkWriter
from lifetime_lint.runtime.reclaim import active_device_type, reclaim
from lifetime_lint.runtime.release import release

__all__ = ["ChunkWriter", "active_device_type", "gather_to_root", "reclaim", "release"]
