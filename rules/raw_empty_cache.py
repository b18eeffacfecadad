"""LL004 raw-empty-cache: `torch.cuda.empty_cache()` called directly."""

from __future__ import annotations

import libcst as cst

from lifetime_lint.devices import CUDA_MODULE, cuda_function, in_multi_backend_dispatch
from lifetime_lint.diagnostics import Applicability, Edit, Fix
from lifetime_lint.fixes import Target, import_bindings_under, reference_to, target_problem
from lifetime_lint.rule import Option, Rule


class RawEmptyCache(Rule):
    """
    ## What it does
    Flags calls that resolve to `torch.cuda.empty_cache()`, whatever the import form
    (`import torch as t`, `from torch import cuda`, `from torch.cuda import empty_cache as
    free`, imports inside functions).

    ## Why is this bad?
    `empty_cache()` returns the caching allocator's unused blocks to the device; it frees no
    live tensor. Called through `torch.cuda` it does nothing on NPU, XPU, MPS or HPU, where
    the same model code then keeps its whole cache reserved, and serving repos (vLLM,
    vllm-omni) ban it in pre-commit for that reason. A platform-neutral reclaim does the
    right thing on every backend and nothing on CPU.

    Not flagged: a reference that is not called (`{"cuda": torch.cuda.empty_cache}`), and a
    call inside a branch of a multi-backend dispatch (an `if`/`elif` chain, conditional
    expression or `match` that also tests or handles mps, npu, xpu, hpu, ...), which is the
    platform abstraction itself. A lone `if torch.cuda.is_available():` guard is still
    CUDA-only code and is flagged.

    ## Example
    ```python
    import torch

    def decode(self, latents):
        video = self.vae.decode(latents).sample
        torch.cuda.empty_cache()
        return video
    ```

    ## Use instead
    ```python
    import torch
    from lifetime_lint.runtime import reclaim

    def decode(self, latents):
        video = self.vae.decode(latents).sample
        reclaim()
        return video
    ```

    ## Fix safety
    Safe: on CUDA (and ROCm) `reclaim()` calls `torch.cuda.empty_cache()`; elsewhere it
    calls the active backend's own `empty_cache`, and on a machine without an accelerator it
    does nothing (where `torch.cuda.empty_cache()` did nothing either). The import is added
    once, merged into an existing `from ... import`; an import the fix leaves unused
    (`from torch.cuda import empty_cache`) is removed.

    ## Options
    `reclaim-call` names the callable to rewrite to: `"package.module:object.method"`
    imports `object` from `package.module` and calls `object.method()`, e.g.
    `reclaim-call = "vllm_omni.platforms:current_omni_platform.empty_cache"`; a plain dotted
    path (`"lifetime_lint.runtime.reclaim"`, the default) imports its last component.
    """

    code = "LL004"
    name = "raw-empty-cache"
    summary = "`torch.cuda.empty_cache()` is CUDA-only; use a platform-neutral reclaim"
    triggers = ("empty_cache",)
    fix_availability = "always"
    options = (
        Option(
            "reclaim-call",
            str,
            "lifetime_lint.runtime.reclaim",
            "the callable that replaces `torch.cuda.empty_cache`",
            validate=target_problem,
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if cuda_function(self.context, node) != "empty_cache":
            return
        ancestors = self.context.ancestors
        if in_multi_backend_dispatch(self.context, ancestors):
            return
        target = Target.parse(self.settings["reclaim-call"])
        reference, import_edits = reference_to(self.context, target, ancestors)
        start, end = self.context.span(node.func)
        fix = Fix(
            message=f"Replace with `{reference}()`",
            edits=(Edit(start, end, reference),) + import_edits,
            applicability=Applicability.SAFE,
            orphan_import_candidates=import_bindings_under(self.context, node.func, CUDA_MODULE),
        )
        written = self.context.source_of(node.func)
        self.report(
            node,
            f"`{written}()` is CUDA-only; use the platform-neutral `{reference}()`",
            fix,
        )
