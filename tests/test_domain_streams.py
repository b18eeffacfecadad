"""The domain and stream facts behind LL001's size classes: which stream of a multi-stream
model a value belongs to (by name and by dataflow), a width named `latent` is no word of
generation, and the vocabulary of time-series forecasting makes a file small."""

from __future__ import annotations

import textwrap

import libcst as cst

from lifetime_lint.analysis import facts as F
from lifetime_lint.analysis.domain import (
    AUDIO_STREAM,
    LARGE_DOMAIN,
    SMALL_DOMAIN,
    TEXT_STREAM,
    VIDEO_DOMAIN,
    cross_attention_context,
    domain_of_source,
    short_stream,
    short_stream_input,
    stream_named,
)
from lifetime_lint.config import Settings
from lifetime_lint.rule import FileContext


def _facts(source: str, function: str = "forward") -> F.FunctionFacts:
    source = textwrap.dedent(source)
    context = FileContext("x.py", source, cst.parse_module(source), "\n", Settings())
    found = [
        node
        for node in context.module.body
        if isinstance(node, cst.FunctionDef) and node.name.value == function
    ]
    facts = F.facts_for(context, found[0])
    assert facts is not None
    return facts


def _stream(facts: F.FunctionFacts, name: str) -> str | None:
    sites = [site for site in facts.cfg.defs if site.name == name and site.kind == "assign"]
    assert sites, name
    return short_stream(facts, sites[-1])


def test_names_say_the_stream():
    assert stream_named("norm_audio_hidden_states") == AUDIO_STREAM
    assert stream_named("encoder_hidden_states") == TEXT_STREAM
    assert stream_named("und_norm") == TEXT_STREAM
    assert stream_named("txt_attn") == TEXT_STREAM
    assert stream_named("gen_norm") == "main"
    assert stream_named("img_attn_out") == "main"
    # Neither stream, or both: the dataflow decides.
    assert stream_named("attn_output") is None
    assert stream_named("audio_to_video_out") is None
    # `context_layer` is BERT-style code's attention output, not the text stream.
    assert stream_named("context_layer") is None


_AV_BLOCK = """
def forward(self, hidden_states, audio_hidden_states, encoder_hidden_states, gate):
    norm_hidden_states = self.norm(hidden_states)
    norm_audio = self.norm_a(audio_hidden_states)
    mod_norm_audio = norm_audio * (1 + gate)
    a2v_out = self.audio_to_video_attn(norm_hidden_states, context=mod_norm_audio)
    v2a_out = self.video_to_audio_attn(mod_norm_audio, context=norm_hidden_states)
    v2a_kw = self.video_to_audio_attn(context=norm_hidden_states, hidden_states=mod_norm_audio)
    cross_out = self.attn2(norm_hidden_states, context=encoder_hidden_states)
    audio_hidden_states = audio_hidden_states + gate * v2a_out
    ff_output = self.ff(self.norm(hidden_states))
    audio_ff = self.ff_a(self.norm_a(audio_hidden_states))
    return hidden_states + ff_output + a2v_out + cross_out, audio_ff + v2a_kw
"""


def test_an_attention_output_has_its_query_stream():
    facts = _facts(_AV_BLOCK)
    assert _stream(facts, "v2a_out") == AUDIO_STREAM  # audio queries, video keys
    assert _stream(facts, "v2a_kw") == AUDIO_STREAM  # (`hidden_states=` is the query)
    assert _stream(facts, "mod_norm_audio") == AUDIO_STREAM  # elementwise: keeps it
    assert _stream(facts, "a2v_out") is None  # video queries, audio keys: the video stream
    assert _stream(facts, "cross_out") is None  # video queries over the text context
    assert _stream(facts, "ff_output") is None


def test_a_sublayer_over_the_short_stream_is_named_by_its_input():
    facts = _facts(_AV_BLOCK)
    calls = {}
    for node in facts.cfg.nodes:
        for call in node.calls:
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value in ("ff", "ff_a"):
                calls[func.attr.value] = short_stream_input(facts, call, node)
    assert calls == {"ff": None, "ff_a": AUDIO_STREAM}


def test_a_slice_up_to_the_text_length_is_the_text_stream():
    facts = _facts(
        """
        def forward(self, joint, txt_len, text_seq_length):
            attn = self.attn(joint)
            head = self.proj(attn[:, :text_seq_length])
            tail = self.proj(attn[:, text_seq_length:])
            last = self.proj(attn[:, -txt_len:])
            rest = self.proj(attn[:, :-txt_len])
            return head, tail, last, rest
        """
    )
    assert _stream(facts, "head") == TEXT_STREAM
    assert _stream(facts, "last") == TEXT_STREAM
    assert _stream(facts, "tail") is None
    assert _stream(facts, "rest") is None


def test_streams_that_disagree_or_loop_say_nothing():
    facts = _facts(
        """
        def forward(self, audio_hidden_states, encoder_hidden_states, x):
            mixed = audio_hidden_states + encoder_hidden_states
            for _ in range(3):
                x = self.block(x)
            return mixed, x
        """
    )
    assert _stream(facts, "mixed") is None
    assert _stream(facts, "x") is None


_VIDEO_WORDS = "video frames temporal num_frames patch_temporal " * 5
_ENCODER = (
    "def encode(pixel_values, rope, config):\n"
    "    latent_size = config.hidden_size\n"
    "    rope_dim = latent_size // 2\n"
    * 4
    + f"    # {_VIDEO_WORDS}\n    return latent_size, rope_dim, image\n"
)


def test_a_width_named_latent_is_no_word_of_generation():
    # A vision tower that reads video clips and names its width `latent_size`: large, not
    # a video generator.
    assert domain_of_source(_ENCODER) == LARGE_DOMAIN
    generator = _ENCODER + "    latents = denoise(latents, timesteps, noise)\n" * 3
    assert domain_of_source(generator) == VIDEO_DOMAIN


def test_time_series_forecasting_is_small():
    source = (
        "def forecast(self, past_values, horizon_len, quantiles):\n"
        "    point_forecast, quantile_spreads = self._decode_and_project(past_values)\n"
        "    return self._revin(point_forecast, horizon_len, quantiles)\n"
    ) * 3
    assert domain_of_source(source) == SMALL_DOMAIN


def _cross_attention_forward(
    class_name: str, signature: str
) -> tuple[cst.ClassDef, cst.FunctionDef]:
    module = cst.parse_module(
        textwrap.dedent(
            f"""
            class {class_name}:
                def forward{signature}:
                    return x
            """
        )
    )
    cls = module.body[0]
    assert isinstance(cls, cst.ClassDef)
    function = cls.body.body[0]
    assert isinstance(function, cst.FunctionDef)
    return cls, function


def test_cross_attention_context_parameter():
    cls, forward = _cross_attention_forward("CrossAttention", "(self, x, y, mask=None)")
    assert cross_attention_context(cls, forward, "y")
    assert not cross_attention_context(cls, forward, "x")  # the query
    assert not cross_attention_context(cls, forward, "mask")  # not right after the query
    cls, forward = _cross_attention_forward("WanT2VCrossAttn", "(self, hidden_states, context)")
    assert cross_attention_context(cls, forward, "context")
    # A class named for the main stream too may attend to the video; a self-attention
    # class has no context.
    cls, forward = _cross_attention_forward("VideoToAudioCrossAttention", "(self, x, y)")
    assert not cross_attention_context(cls, forward, "y")
    cls, forward = _cross_attention_forward("SelfAttention", "(self, x, y)")
    assert not cross_attention_context(cls, forward, "y")
