"""Shared knowledge about device APIs, for the rules that flag hard-coded CUDA calls.

- `cuda_function`: which `torch.cuda` function a call resolves to, through any import form.
- `in_multi_backend_dispatch`: whether a node sits in a branch of code that chooses between
  CUDA and another backend (`if cuda ... elif mps ... elif npu ...`): that code *is* the
  platform abstraction and is left alone.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import libcst as cst

from lifetime_lint.rule import FileContext

CUDA_MODULE = "torch.cuda"

# Backends other than CUDA that a dispatch might name. CPU is deliberately absent: a CUDA
# branch with a CPU fallback is still CUDA-only code on every other accelerator.
_OTHER_BACKEND = re.compile(
    r"\b(mps|npu|xpu|hpu|mlu|musa|mtia|tpu|xla|neuron|habana|ascend|gaudi|torch_npu|"
    r"privateuse1|intel_extension_for_pytorch|ipex)\b",
    re.IGNORECASE,
)


def cuda_function(context: FileContext, call: cst.Call) -> str | None:
    """`"empty_cache"` for `torch.cuda.empty_cache()`, `tc.empty_cache()`, `empty_cache()`..."""
    qualified = context.qualified_name(call.func)
    if qualified is None or not qualified.startswith(CUDA_MODULE + "."):
        return None
    name = qualified[len(CUDA_MODULE) + 1 :]
    return name if name.isidentifier() else None


def in_multi_backend_dispatch(context: FileContext, ancestors: Sequence[cst.CSTNode]) -> bool:
    """True when an enclosing if/elif/else chain, conditional expression or `match` tests
    or handles another backend besides CUDA in its conditions or its other branches."""
    chain = list(ancestors)
    for index in range(len(chain) - 1, -1, -1):
        node = chain[index]
        if isinstance(node, cst.If):
            head = index
            while head > 0 and _is_elif_of(chain[head - 1], chain[head]):
                head -= 1
            if _mentions_other_backend(context, _if_chain_parts(chain[head], chain)):
                return True
        elif isinstance(node, cst.IfExp):
            parts: list[cst.CSTNode] = [node.test]
            parts += [b for b in (node.body, node.orelse) if not _contains(chain, b)]
            if _mentions_other_backend(context, parts):
                return True
        elif isinstance(node, cst.Match):
            parts = [node.subject]
            for case in node.cases:
                parts.append(case.pattern)
                if not _contains(chain, case):
                    parts.append(case.body)
            if _mentions_other_backend(context, parts):
                return True
    return False


def _is_elif_of(parent: cst.CSTNode, child: cst.CSTNode) -> bool:
    return isinstance(parent, cst.If) and parent.orelse is child


def _if_chain_parts(head: cst.If, ancestors: Sequence[cst.CSTNode]) -> list[cst.CSTNode]:
    """The tests of every branch, and the bodies of the branches the node is not in."""
    parts: list[cst.CSTNode] = []
    branch: cst.CSTNode | None = head
    while branch is not None:
        if isinstance(branch, cst.If):
            parts.append(branch.test)
            if not _contains(ancestors, branch.body):
                parts.append(branch.body)
            branch = branch.orelse
        else:  # Else
            if not _contains(ancestors, branch):
                parts.append(branch.body)
            branch = None
    return parts


def _contains(ancestors: Sequence[cst.CSTNode], node: cst.CSTNode) -> bool:
    return any(ancestor is node for ancestor in ancestors)


def _mentions_other_backend(context: FileContext, parts: Sequence[cst.CSTNode]) -> bool:
    return any(_OTHER_BACKEND.search(context.code_for(part)) for part in parts)
