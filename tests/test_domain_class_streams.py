"""`domain.short_stream_classes`: classes whose every instance serves a short stream."""

from __future__ import annotations

import textwrap

import libcst as cst

from lifetime_lint.analysis.domain import AUDIO_STREAM, TEXT_STREAM, short_stream_classes

_REFINER = """
from torch import nn


class RefinerBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.mlp = nn.Linear(dim, dim)

    def forward(self, x):
        return x + self.mlp(x)


class TokenRefiner(nn.Module):
    def __init__(self, dim, depth):
        super().__init__()
        self.blocks = nn.ModuleList([RefinerBlock(dim) for _ in range(depth)])

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x
"""


def _classes(model: str) -> dict[str, str]:
    source = textwrap.dedent(_REFINER) + textwrap.dedent(model)
    return short_stream_classes(cst.parse_module(source), {})


def test_refiner_built_for_the_prompt_and_its_blocks_are_text_stream() -> None:
    classes = _classes(
        """
        class Model(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.context_embedder = TokenRefiner(dim, 2)

            def forward(self, hidden_states, encoder_hidden_states):
                encoder_hidden_states = self.context_embedder(encoder_hidden_states.to(hidden_states.dtype))
                return hidden_states, encoder_hidden_states
        """
    )
    assert classes == {"TokenRefiner": TEXT_STREAM, "RefinerBlock": TEXT_STREAM}


def test_refiner_also_built_for_the_video_tokens_is_no_stream() -> None:
    classes = _classes(
        """
        class Model(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.txt_in = TokenRefiner(dim, 2)
                self.img_in = TokenRefiner(dim, 2)

            def forward(self, hidden_states, encoder_hidden_states):
                return self.img_in(hidden_states), self.txt_in(encoder_hidden_states)
        """
    )
    assert classes == {}


def test_text_named_attribute_called_on_another_value_is_no_stream() -> None:
    classes = _classes(
        """
        class Model(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.txt_in = TokenRefiner(dim, 2)

            def forward(self, hidden_states, encoder_hidden_states):
                encoder_hidden_states = self.txt_in(encoder_hidden_states)
                return self.txt_in(hidden_states)
        """
    )
    assert classes == {}


def test_attribute_named_for_no_stream_serves_the_stream_its_calls_pass() -> None:
    # `self.llm_adapter = LLMAdapter(...)` called only as `self.llm_adapter(text_embeds, ids)`
    only_text = _classes(
        """
        class Model(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.refiner = TokenRefiner(dim, 2)

            def forward(self, encoder_hidden_states):
                return self.refiner(encoder_hidden_states)
        """
    )
    both = _classes(
        """
        class Model(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.refiner = TokenRefiner(dim, 2)

            def forward(self, hidden_states, encoder_hidden_states):
                encoder_hidden_states = self.refiner(encoder_hidden_states)
                return self.refiner(hidden_states)
        """
    )
    main_named = _classes(
        """
        class Model(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.img_refiner = TokenRefiner(dim, 2)

            def forward(self, encoder_hidden_states):
                return self.img_refiner(encoder_hidden_states)
        """
    )
    assert only_text == {"TokenRefiner": TEXT_STREAM, "RefinerBlock": TEXT_STREAM}
    assert both == {}
    assert main_named == {}


def test_a_function_build_is_no_stream() -> None:
    built_outside = _classes(
        """
        class Model(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.txt_in = TokenRefiner(dim, 2)

            def forward(self, encoder_hidden_states):
                return self.txt_in(encoder_hidden_states)


        def make_refiner(dim):
            return TokenRefiner(dim, 4)
        """
    )
    assert built_outside == {}


def test_never_called_attribute_is_no_stream_and_audio_is_its_own_stream() -> None:
    never_called = _classes(
        """
        class Model(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.txt_in = TokenRefiner(dim, 2)
        """
    )
    audio = _classes(
        """
        class Model(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.audio_in = TokenRefiner(dim, 2)

            def forward(self, audio_hidden_states):
                return self.audio_in(hidden_states=audio_hidden_states)
        """
    )
    assert never_called == {}
    assert audio == {"TokenRefiner": AUDIO_STREAM, "RefinerBlock": AUDIO_STREAM}
