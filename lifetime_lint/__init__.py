"""lifetime-lint: find and fix GPU-memory lifetime bugs in PyTorch code.

The linter (this package, `lifetime_lint.rules`) needs only libcst and click; the helpers
that fixed code calls live in `lifetime_lint.runtime` and import torch lazily.
"""

__version__ = "0.2.0"
