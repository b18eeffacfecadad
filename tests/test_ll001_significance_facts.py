"""The facts behind LL001's significance: work sized by its inputs, the function's peak, the
per-file model domain, kernel-DSL bodies, views returned by helpers."""

from __future__ import annotations

import textwrap

import libcst as cst

from lifetime_lint.analysis import facts as F
from lifetime_lint.analysis import significance as S
from lifetime_lint.analysis.domain import (
    LARGE_DOMAIN,
    SMALL_DOMAIN,
    UNJUDGED_DOMAIN,
    UNKNOWN_DOMAIN,
    VIDEO_DOMAIN,
    domain_of_source,
    file_domain,
    mentions_video,
    runs_against_cache,
)
from lifetime_lint.config import Settings
from lifetime_lint.rule import FileContext


def _context(source: str) -> FileContext:
    source = textwrap.dedent(source)
    return FileContext("x.py", source, cst.parse_module(source), "\n", Settings())


def _facts(source: str, function: str = "forward") -> F.FunctionFacts:
    context = _context(source)
    found: list[cst.FunctionDef] = []

    class Finder(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
            if node.name.value == function:
                found.append(node)

    context.module.visit(Finder())
    facts = F.facts_for(context, found[0])
    assert facts is not None
    return facts


def _works(facts: F.FunctionFacts) -> dict[str, F.Work]:
    return {
        facts.context.code_for(call): facts.work(call)
        for node in facts.cfg.nodes
        for call in node.calls
    }


BLOCK = """
import torch
import torch.distributed as dist
from torch import nn


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.ff = nn.Linear(dim, dim)
        self.ff_context = nn.Linear(dim, dim)
        self.mlp = nn.Linear(dim, dim)
        self.upsampler = nn.Conv2d(3, 3, 3)

    def forward(self, hidden_states, encoder_hidden_states, ids, decoder, z):
        norm_encoder_hidden_states = encoder_hidden_states * 2
        a = self.ff(hidden_states)
        b = self.ff_context(norm_encoder_hidden_states)
        lengths = ids.sum(-1)
        c = self.mlp(lengths)
        frames = decoder.decode(z)
        video = (frames / 2 + 0.5).clamp(0, 1)
        d = self.upsampler(video)
        dist.all_reduce(a)
        sizes = torch.tensor([a.shape[0]])
        gathered = [torch.empty_like(sizes) for _ in range(4)]
        dist.all_gather(gathered, sizes, group=self.group)
        out = [torch.empty_like(a) for _ in range(4)]
        dist.all_gather(out, a)
        return a, b, c, d
"""


def test_work_is_sized_by_its_inputs() -> None:
    works = _works(_facts(BLOCK))
    assert works["self.ff(hidden_states)"].level == F.PEAK
    conditioning = works["self.ff_context(norm_encoder_hidden_states)"]
    assert (conditioning.level, conditioning.sized_by) == (F.LAYER, "conditioning")
    tiny = works["self.mlp(lengths)"]
    assert (tiny.level, tiny.sized_by) == (F.LIGHT, "tiny")
    large = works["self.upsampler(video)"]
    assert (large.level, large.sized_by) == (F.PEAK, "large")


def test_collectives_that_allocate_nothing_are_light() -> None:
    works = _works(_facts(BLOCK))
    assert works["dist.all_reduce(a)"].sized_by == "in-place"
    assert works["dist.all_reduce(a)"].level == F.LIGHT
    assert works["dist.all_gather(gathered, sizes, group=self.group)"].level == F.LIGHT
    assert works["dist.all_gather(out, a)"].level == F.MODEL  # gathers activations


def test_held_below_the_functions_peak_counts_one_level_down() -> None:
    ffn = F.Work(F.PEAK, "submodule", parts=("self", "ffn"))
    video = VIDEO_DOMAIN  # (a many-token domain: an activation there is rated by its work)
    assert S.estimate(F.ACTIVATION, ffn, function_peak=F.PEAK, domain=video).level == S.MEDIUM
    assert S.estimate(F.ACTIVATION, ffn, function_peak=F.MODEL, domain=video).level == S.LOW
    assert S.estimate(F.DECODED, ffn, function_peak=F.MODEL).level == S.MEDIUM
    join = F.Work(F.PEAK, "concatenation", parts=("torch", "cat"))
    assert S.estimate(F.DECODED, join, function_peak=F.MODEL).level == S.HIGH  # output-sized
    small_join = F.Work(F.LAYER, "concatenation", parts=("torch", "cat"))
    assert S.estimate(F.DECODED, small_join).level == S.LOW  # joins no decoded frames
    latents_join = F.Work(F.LAYER, "concatenation", parts=("torch", "cat"), sized_by="small")
    assert S.estimate(F.DECODED, latents_join, function_peak=F.MODEL).level == S.LOW


def test_an_activation_without_evidence_of_big_inputs_counts_one_level_down() -> None:
    ffn = F.Work(F.PEAK, "submodule", parts=("self", "ffn"))
    assert S.estimate(F.ACTIVATION, ffn, domain=VIDEO_DOMAIN).level == S.MEDIUM
    assert S.estimate(F.ACTIVATION, ffn, domain=LARGE_DOMAIN).level == S.LOW  # ~4k tokens
    # A file too short to judge shows no evidence of many tokens either.
    assert S.estimate(F.ACTIVATION, ffn, domain=UNJUDGED_DOMAIN).level == S.LOW
    assert S.estimate(F.ACTIVATION, ffn, domain=UNKNOWN_DOMAIN).level == S.LOW
    assert S.estimate(F.DECODED, ffn, domain=UNKNOWN_DOMAIN).level == S.HIGH  # large stays


def test_model_domain_from_the_files_words() -> None:
    video = "def f(latents, num_frames):\n" + "    x = conv3d(latents) + timestep\n" * 4
    audio = "def f(audio_waveform, sample_rate):\n" + "    mel = audio_mel(waveform, ctc)\n" * 4
    legacy = "max_position_embeddings = 512\nposition_embeddings = 1\nhidden = 2\n"
    llama = legacy + "rotary_emb = 3\n"
    assert domain_of_source(video) == VIDEO_DOMAIN
    image = "def f(latents, height, width):\n" + "    x = conv2d(latents) + timestep + image\n" * 4
    assert domain_of_source(image) == LARGE_DOMAIN
    assert domain_of_source(audio) == SMALL_DOMAIN
    assert domain_of_source(legacy) == SMALL_DOMAIN  # sequences capped by a learned table
    assert domain_of_source(llama) == UNJUDGED_DOMAIN  # too short to say
    assert domain_of_source("def f(x):\n    return x\n") == UNJUDGED_DOMAIN
    utility = "def retrieve(question, index, docs):\n    return index.search(question)\n" * 200
    assert domain_of_source(utility) == UNKNOWN_DOMAIN  # long, and no sign of big inputs
    context = _context(audio)
    assert file_domain(context) == SMALL_DOMAIN
    assert file_domain(context) == SMALL_DOMAIN  # memoised


def test_small_domain_makes_activations_outputs_and_logits_small() -> None:
    for origin in (F.ACTIVATION, F.DECODED, F.LOGITS):
        assert S.domain_origin(origin, "models/x/model.py", None, SMALL_DOMAIN) == F.SMALL_MODEL
    assert S.domain_origin(F.DECODED, "models/x/model.py", None, LARGE_DOMAIN) == F.DECODED
    assert S.domain_origin(F.ACTIVATION, "models/sam/modeling_sam.py", None) == F.SMALL_MODEL
    assert S.domain_origin(F.ACTIVATION, "models/wan/transformer_wan.py", None) == F.ACTIVATION


def test_kernel_dsl_bodies() -> None:
    source = """
    import helion
    import helion.language as hl
    import torch
    import triton.language as tl


    @helion.kernel(static_shapes=True)
    def forward(x):
        for tile in hl.tile(x.size(0)):
            row = x[tile, :]
        return x


    def helper(x_ptr):
        return tl.load(x_ptr)


    def plain(x):
        return torch.relu(x)
    """
    assert _facts(source).kernel_dsl
    assert _facts(source, "helper").kernel_dsl
    assert not _facts(source, "plain").kernel_dsl


def test_views_returned_by_a_helper_are_views_of_the_argument() -> None:
    source = """
    import torch
    from torch import nn


    class Net(nn.Module):
        def split_qkvz(self, mixed):
            mixed = mixed.view(mixed.shape[0], 4, -1)
            q, k, v, z = torch.split(mixed, [1, 1, 1, 1], dim=1)
            return q, k, v, z

        def forward(self, x):
            projected = self.proj(x)
            q, k, v, z = self.split_qkvz(projected)
            return q, z
    """
    facts = _facts(source)
    projected = next(s for s in facts.cfg.defs if s.name == "projected")
    assert not facts.owner_of_storage(projected)  # `z` (a view of it) is still used


def test_many_tokens_only_in_video_code_not_run_against_a_kv_cache() -> None:
    def function(source: str) -> cst.FunctionDef:
        node = cst.parse_module(source).body[0]
        assert isinstance(node, cst.FunctionDef)
        return node

    assert runs_against_cache(
        function("def forward(self, x, kv_cache=None, current_start=0): pass")
    )
    assert runs_against_cache(function("def forward(self, x, past_key_values=None): pass"))
    assert not runs_against_cache(
        function("def forward(self, x, feat_cache=None, feat_idx=0): pass")
    )
    assert S.image_named("models/transformers/transformer_qwenimage.py", "QwenImageBlock")
    assert S.image_named("models/embeddings.py", "IPAdapterPlusImageProjectionBlock")
    assert not S.image_named("pipelines/wan/pipeline_wan_i2v.py", "WanImageToVideoPipeline")
    assert S.token_domain(VIDEO_DOMAIN, False, False) == VIDEO_DOMAIN
    assert S.token_domain(VIDEO_DOMAIN, True, False) == LARGE_DOMAIN  # image-named
    assert S.token_domain(VIDEO_DOMAIN, False, True) == LARGE_DOMAIN  # streaming chunk
    assert S.token_domain(UNJUDGED_DOMAIN, True, False) == LARGE_DOMAIN
    assert S.token_domain(UNJUDGED_DOMAIN, False, False) == UNJUDGED_DOMAIN
    assert UNJUDGED_DOMAIN not in S.MANY_TOKEN_DOMAINS
    assert mentions_video("class HunyuanVideoBlock: pass") and mentions_video("num_frames = 81")
    assert not mentions_video("def decode(self, z): return self.decoder(z)")


def test_a_whole_model_call_holds_values_at_its_interface() -> None:
    decode = F.Work(F.MODEL, "decode", parts=("self", "vae", "decode"))
    gather = F.Work(F.MODEL, "collective", parts=("dist", "all_gather"))
    assert S.model_interface(decode) and not S.model_interface(gather)
    assert S.estimate(F.ACTIVATION, decode, domain=VIDEO_DOMAIN).level == S.LOW
    assert S.estimate(F.ACTIVATION, gather, domain=VIDEO_DOMAIN).level == S.MEDIUM
    assert S.estimate(F.DECODED, decode, domain=VIDEO_DOMAIN).level == S.HIGH  # pixel space
