"""The tensor-facts layer: value, work and flow facts per binding, on realistic snippets."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from lifetime_lint.analysis import facts as F
from lifetime_lint.analysis import significance as S
from lifetime_lint.config import Settings
from lifetime_lint.rule import FileContext


def _facts(source: str, function: str = "forward") -> F.FunctionFacts:
    source = textwrap.dedent(source)
    module = cst.parse_module(source)
    context = FileContext("x.py", source, module, "\n", Settings())
    found: list[cst.FunctionDef] = []

    class Finder(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
            if node.name.value == function:
                found.append(node)

    module.visit(Finder())
    facts = F.facts_for(context, found[0])
    assert facts is not None
    assert F.facts_for(context, found[0]) is facts  # memoised on the file context
    return facts


def _binding(facts: F.FunctionFacts, name: str, nth: int = 0) -> F.DefSite:
    sites = [s for s in facts.cfg.defs if s.name == name and s.kind not in ("unbound", "deleted")]
    return sites[nth]


PRELUDE = """
import json
import math
import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm_q = nn.LayerNorm(8)
        self.attn1 = nn.Linear(8, 8)
        self.attn2 = nn.Linear(8, 8)
        self.ffn = nn.Linear(8, 8)
        self.proj = nn.Linear(8, 8)
"""


@pytest.mark.parametrize(
    "expression",
    [
        "math.ceil(x.shape[1] / 4)",
        "x.shape[1] // 4",
        "len(x)",
        "x.shape[2]",
        "f'{x.shape}'",
        "str(x.dtype)",
        "json.loads(payload)",
        "x.size(0) * x.size(1)",
    ],
)
def test_metadata_is_not_a_tensor(expression: str) -> None:
    facts = _facts(
        PRELUDE
        + f"""
    def forward(self, x: torch.Tensor, payload):
        value = {expression}
        return value
"""
    )
    fact = facts.value(_binding(facts, "value"))
    assert fact.kind == F.METADATA
    assert not fact.is_tensor


def test_awaited_rpc_result_is_not_a_tensor() -> None:
    facts = _facts(
        """
import torch

async def forward(self, client, x: torch.Tensor):
    reply = await client.call("encode", x)
    return reply
"""
    )
    assert not facts.value(_binding(facts, "reply")).is_tensor


def test_tensor_from_torch_module_call_and_operator() -> None:
    facts = _facts(
        PRELUDE
        + """
    def forward(self, x: torch.Tensor):
        a = torch.randn(4, 8)
        b = self.attn1(x)
        c = a + b
        n = 3
        m = n * 2
        return c, m
"""
    )
    assert facts.value(_binding(facts, "a")).kind == F.TENSOR
    assert facts.value(_binding(facts, "b")).kind == F.TENSOR
    assert facts.value(_binding(facts, "c")).kind == F.TENSOR
    assert facts.value(_binding(facts, "m")).kind == F.METADATA


def test_light_rebinding_is_still_a_fresh_tensor() -> None:
    facts = _facts(
        PRELUDE
        + """
    def forward(self, x: torch.Tensor):
        q = self.proj(x)
        q = self.norm_q(q)
        return q
"""
    )
    second = _binding(facts, "q", 1)
    assert facts.value(second).kind == F.TENSOR
    assert facts.owner_of_storage(second)


def test_view_exclusion_is_per_binding() -> None:
    facts = _facts(
        PRELUDE
        + """
    def forward(self, y: torch.Tensor):
        x = self.proj(y)
        parts = torch.split(x, 2)
        x = torch.cat([p * 2 for p in parts])
        return x
"""
    )
    first, second = _binding(facts, "x", 0), _binding(facts, "x", 1)
    assert not facts.owner_of_storage(first)  # `parts` shares it
    assert facts.owner_of_storage(second)


def test_contiguous_is_one_answer_for_every_rule() -> None:
    facts = _facts(
        PRELUDE
        + """
    def forward(self, x: torch.Tensor):
        h = self.proj(x)
        c = h.contiguous()
        return c
"""
    )
    fact = facts.value(_binding(facts, "c"))
    assert fact.kind == F.VIEW and fact.tensor
    assert [s.name for s in fact.sources] == ["h"]
    assert not facts.owner_of_storage(_binding(facts, "h"))


def test_ownership_transfer_through_a_container_slot() -> None:
    facts = _facts(
        """
import torch
import torch.nn.functional as F

def forward(x: torch.Tensor, cache_list, idx, conv):
    cache = cache_list[idx]
    inp = torch.cat([cache, x], dim=2)
    cache_list[idx] = inp[:, :, -2:].clone()
    return conv(inp)
"""
    )
    cache = _binding(facts, "cache")
    fact = facts.value(cache)
    assert fact.borrowed == ("cache_list", "idx")
    assert fact.is_tensor  # the slot is given tensors
    assert [s.container for s in facts.transferred(cache)] == ["cache_list"]
    call = facts.cfg.nodes[-2].calls[0]
    assert facts.work(call).kind == "module-parameter"


def test_nested_lists_of_decoded_tiles() -> None:
    facts = _facts(
        """
import torch

class VAE:
    def __init__(self):
        self.decoder = Decoder()

    def tiled_decode(self, z: torch.Tensor):
        rows = []
        for i in range(4):
            row = []
            for j in range(4):
                tile = self.decoder(z[:, :, i, j])
                row.append(tile)
            rows.append(row)
        return rows
""",
        "tiled_decode",
    )
    rows = _binding(facts, "rows")
    assert facts.is_container_of_tensors(rows)
    assert facts.contents_fact(rows).origin == F.DECODED


def test_dynamic_aliases_read_every_local() -> None:
    facts = _facts(
        """
import torch

ev = eval

def forward(x):
    d = locals
    y = torch.ones(3)
    d()
    ev("y")
"""
    )
    dynamic = [n for n in facts.cfg.nodes if n.dynamic]
    assert len(dynamic) == 2


def test_work_levels() -> None:
    facts = _facts(
        PRELUDE
        + """
    def forward(self, x: torch.Tensor, attn):
        a = self.attn1(x)
        b = self.attn2(a)
        c = self.ffn(b)
        d = self.norm_q(c)
        e = F.conv3d(d, d)
        f = attn.linear2(e)
        g = torch.cat([a, b])
        dist_out = torch.distributed.all_reduce(g)
        torch.distributed.all_gather(self.buffers, g)

        def run(h):
            return self.ffn(h)

        return run(f)
"""
    )
    levels = {}
    for node in facts.cfg.nodes:
        for call in node.calls:
            levels[facts.context.code_for(call.func)] = facts.work(call).level
    assert levels["self.attn1"] == F.PEAK  # self-attention
    assert levels["self.attn2"] == F.LAYER  # cross-attention
    assert levels["self.ffn"] == F.PEAK
    assert levels["self.norm_q"] == F.LIGHT
    assert levels["F.conv3d"] == F.PEAK
    assert levels["attn.linear2"] == F.LIGHT
    assert levels["torch.cat"] == F.LAYER
    assert levels["torch.distributed.all_reduce"] == F.LIGHT  # reduces in place
    assert levels["torch.distributed.all_gather"] == F.MODEL  # allocates the gathered output
    assert levels["run"] == F.PEAK  # a closure that runs a sublayer


def test_significance_table() -> None:
    peak, layer, model = (
        F.Work(F.PEAK, "submodule"),
        F.Work(F.LAYER, "submodule"),
        F.Work(F.MODEL, "decode"),
    )
    assert S.estimate(F.ACTIVATION, peak, domain="video").level == S.MEDIUM
    assert S.estimate(F.ACTIVATION, peak).level == S.LOW  # no evidence of many tokens
    assert S.estimate(F.ACTIVATION, layer, domain="video").level == S.LOW
    assert S.estimate(F.CONDITIONING, model).level == S.LOW
    assert S.estimate(F.DECODED, model).level == S.HIGH
    assert S.estimate(F.DECODED, layer).level == S.MEDIUM
    assert S.name_origin("prompt_embeds", F.MODEL_OUTPUT) == F.CONDITIONING
    assert S.name_origin("attention_mask", F.ACTIVATION) == F.SMALL


def test_latent_names_are_latent_sized_even_over_decoded_inputs() -> None:
    """`image_latents`, `midpoint_denoised_video` (a denoiser's prediction) live in latent
    space whatever the dataflow saw; `decoded_video` and `frames` stay decoded; conditioning
    keeps its class."""
    assert S.name_origin("image_latents", F.DECODED) == F.LATENTS
    assert S.name_origin("midpoint_denoised_video", F.DECODED) == F.LATENTS
    assert S.name_origin("decoded_video", F.DECODED) == F.DECODED
    assert S.name_origin("frames", F.CONCATENATION) == F.DECODED
    assert S.name_origin("latent_prompt_embeds", F.CONDITIONING) == F.CONDITIONING
    assert S.size_class(F.ALLOCATION) == S.SMALL_SIZED  # shape unseen: paddings, statistics


def test_indicator_and_flag_tensors_are_small_whatever_their_modality_word() -> None:
    """`image_only_indicator = torch.zeros(batch, frames)` (Stable Video Diffusion's UNet) and
    `keyframe_flags` are per-frame numbers: the word `image` does not make them frames."""
    for origin in (F.ALLOCATION, F.CONCATENATION, F.ACTIVATION):
        assert S.name_origin("image_only_indicator", origin) == F.SMALL
        assert S.name_origin("keyframe_flags", origin) == F.SMALL
    assert S.name_origin("frames", F.ALLOCATION) == F.DECODED


def test_a_classmethods_cls_is_its_class_not_a_module_passed_in() -> None:
    """`cls._get_sde_coeff(...)` in a classmethod calls the class's own method: no sublayer
    work (sglang's LTX-2 sampler step was rated as a peak-level sublayer through it)."""
    source = textwrap.dedent(
        """
        class Stage:
            @classmethod
            def _get_sde_coeff(cls, sigma_next, sigma_up):
                return sigma_next * 0.5, sigma_next, sigma_up

            @classmethod
            def forward(cls, sample, denoised, sigma, sigma_next, noise):
                alpha, down, up = cls._get_sde_coeff(sigma_next, sigma_up=sigma_next)
                return alpha * (sample - sigma * denoised) + up * noise
        """
    )
    facts = _facts(source)
    assert "cls" not in facts.module_parameters
    calls = [call for node in facts.cfg.nodes for call in node.calls]
    coeff = next(
        c
        for c in calls
        if isinstance(c.func, cst.Attribute) and c.func.attr.value == "_get_sde_coeff"
    )
    assert facts.work(coeff).level < F.LAYER


def test_a_msgspec_decode_is_data_not_a_tensor() -> None:
    """`msgspec.msgpack.decode(raw)`: a registration message (a dict), not decoded frames."""
    facts = _facts(
        textwrap.dedent(
            """
            import msgspec

            def forward(socket):
                msg = msgspec.msgpack.decode(socket.recv())
                return msg.get("stage_config")
            """
        )
    )
    assert not facts.value(_binding(facts, "msg")).is_tensor
