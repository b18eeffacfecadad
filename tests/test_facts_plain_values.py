"""Plain values that look held: integers from `range` loops and from helpers annotated to
return numbers, containers of `(start, stop)` pairs, index tensors, `rearrange` views, and
the names of CLIP features and encoder latents (facts found reading DiffSynth-Studio's video
models, a repository outside the labelled corpora)."""

from __future__ import annotations

import textwrap

import libcst as cst

from lifetime_lint.analysis import facts as F
from lifetime_lint.analysis.significance import name_origin
from lifetime_lint.config import Settings
from lifetime_lint.rule import FileContext


def _facts(source: str, function: str) -> F.FunctionFacts:
    source = textwrap.dedent(source)
    module = cst.parse_module(source)
    context = FileContext("x.py", source, module, "\n", Settings())
    found = [n for n in module.body if isinstance(n, cst.FunctionDef) and n.name.value == function]
    facts = F.facts_for(context, found[0])
    assert facts is not None
    return facts


def _value(facts: F.FunctionFacts, name: str) -> F.ValueFact:
    site = next(s for s in facts.cfg.defs if s.name == name and s.kind in ("assign", "for"))
    return facts.value(site)


RUNS = """
import torch

def runs_of(slots) -> list[tuple[int, int]]:
    rows = slots.tolist()
    return [(0, len(rows))]

def unannotated_runs(slots):
    runs = []
    start = 0
    for index in range(1, slots.shape[0]):
        runs.append((start, index))
        start = index
    return runs

def passes(q, slots, stride: int):
    for run_start, run_stop in runs_of(slots):
        for step in range(run_start, run_stop, stride):
            first = run_start + step * stride
    for begin, end in unannotated_runs(slots):
        width = end - begin
    hidden = torch.ones(4096, 4096, device=q.device) * first
    return hidden
"""


def test_range_targets_and_annotated_helpers_give_integers() -> None:
    facts = _facts(RUNS, "passes")
    assert _value(facts, "step").kind == F.METADATA
    assert not _value(facts, "run_start").is_tensor
    assert not _value(facts, "first").is_tensor
    assert _value(facts, "hidden").is_tensor  # an operator over a tensor still is one


def test_a_list_of_integer_pairs_has_no_tensor_elements() -> None:
    facts = _facts(RUNS, "passes")
    assert not _value(facts, "begin").is_tensor
    assert not _value(facts, "width").is_tensor


def test_scalar_annotated_parameters_are_plain_values() -> None:
    facts = _facts(RUNS, "passes")
    site = next(s for s in facts.cfg.defs if s.name == "stride" and s.kind == "param")
    assert facts.value(site).kind == F.METADATA
    q = next(s for s in facts.cfg.defs if s.name == "q" and s.kind == "param")
    assert facts.value(q).kind == F.UNKNOWN  # unannotated: nothing is claimed


def test_unique_ids_are_small_and_rearrange_keeps_its_input_storage() -> None:
    facts = _facts(
        """
        import torch
        from einops import rearrange

        def attend(q, slots, proj):
            wanted, inverse = torch.unique(slots.reshape(-1), return_inverse=True)
            heads = proj(q)
            split = rearrange(heads, "b l (h d) -> b l h d", h=8)
            return wanted, inverse, split
        """,
        "attend",
    )
    assert _value(facts, "wanted").origin == F.SMALL
    split = _value(facts, "split")
    assert split.kind == F.VIEW and split.is_tensor  # the storage of `heads`
    assert [source.name for source in split.sources] == ["heads"]


def test_clip_features_are_conditioning_and_encoded_tiles_latent() -> None:
    assert name_origin("clip_fea", F.ACTIVATION) == F.CONDITIONING
    assert name_origin("clip_features", F.ACTIVATION) == F.CONDITIONING
    assert name_origin("encoded_tile", F.MODEL_OUTPUT) == F.LATENTS
    assert name_origin("encoded_prompt", F.MODEL_OUTPUT) == F.CONDITIONING
    assert name_origin("encoded_list", F.SMALL_MODEL) == F.SMALL_MODEL  # an audio encoder's
    assert name_origin("clip_grad", F.ACTIVATION) == F.ACTIVATION  # no feature word


CROSS_ATTENTION = """
import torch
from torch import nn

class CrossAttention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)

    def forward(self, x, y):
        q = self.q(x)
        k = self.k(y)
        v = self.v(y)
        return torch.nn.functional.scaled_dot_product_attention(q, k, v)

class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.cross_attn = CrossAttention(dim)

    def forward(self, x, context):
        return x + self.cross_attn(x, context)
"""


def _method_facts(source: str, owner: str, method: str) -> F.FunctionFacts:
    source = textwrap.dedent(source)
    module = cst.parse_module(source)
    context = FileContext("x.py", source, module, "\n", Settings())
    cls = next(n for n in module.body if isinstance(n, cst.ClassDef) and n.name.value == owner)
    function = next(
        n for n in cls.body.body if isinstance(n, cst.FunctionDef) and n.name.value == method
    )
    facts = F.facts_for(context, function)
    assert facts is not None
    return facts


def test_a_cross_attention_context_passed_only_the_text_stream_is_conditioning() -> None:
    facts = _method_facts(CROSS_ATTENTION, "CrossAttention", "forward")
    assert _value(facts, "k").origin == F.CONDITIONING
    assert _value(facts, "q").origin != F.CONDITIONING  # the query keeps the video tokens


def test_a_cross_attention_also_called_on_other_values_is_not_judged() -> None:
    source = (
        CROSS_ATTENTION
        + """
class Injector(nn.Module):
    def __init__(self, dim, n):
        super().__init__()
        self.injector = nn.ModuleList([CrossAttention(dim) for _ in range(n)])

    def forward(self, feat, vec):
        return self.injector[0](feat, vec)
"""
    )
    facts = _method_facts(source, "CrossAttention", "forward")
    assert _value(facts, "k").origin != F.CONDITIONING
