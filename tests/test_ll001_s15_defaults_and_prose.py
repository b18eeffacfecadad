"""Session 15 facts behind LL001's held-out precision: a flag's value under the
constructor's defaults (`class_config.flag_by_default`), video named by a function's code
rather than its docstring (`domain.code_mentions_video`), and a value decoded only by its
name in a file that shows no pixels (`significance.unvisual_named_decoded`)."""

from __future__ import annotations

import libcst as cst

from lifetime_lint.analysis import facts as F
from lifetime_lint.analysis.class_config import flag_by_default
from lifetime_lint.analysis.domain import LARGE_DOMAIN, UNKNOWN_DOMAIN, code_mentions_video
from lifetime_lint.analysis.significance import unvisual_named_decoded

_LAYER = """
class EncoderLayer(nn.Module):
    def __init__(self, size, concat_after=DEFAULT):
        self.concat_after = concat_after
        self.size = size

class Encoder(nn.Module):
    def __init__(self, num_blocks, concat_after=False):
        self.encoders = nn.ModuleList([EncoderLayer(256, PASSED) for _ in range(num_blocks)])
"""


def _module(default: str, passed: str) -> cst.Module:
    return cst.parse_module(_LAYER.replace("DEFAULT", default).replace("PASSED", passed))


def test_a_flag_false_under_every_default_is_false() -> None:
    module = _module("False", "concat_after=concat_after")
    assert flag_by_default(module, {}, "EncoderLayer", "concat_after") is False


def test_a_construction_passing_true_sets_the_flag() -> None:
    module = _module("False", "concat_after=True")
    assert flag_by_default(module, {}, "EncoderLayer", "concat_after") is True


def test_a_flag_from_an_unknown_value_is_not_decided() -> None:
    module = _module("False", "concat_after=config.concat_after")
    assert flag_by_default(module, {}, "EncoderLayer", "concat_after") is None


def test_a_flag_bound_twice_is_not_decided() -> None:
    source = _LAYER.replace("DEFAULT", "False").replace("PASSED", "concat_after=concat_after")
    source = source.replace(
        "        self.size = size\n",
        "        self.size = size\n\n    def enable_concat(self):\n        self.concat_after = True\n",
        1,
    )
    module = cst.parse_module(source)
    assert flag_by_default(module, {}, "EncoderLayer", "concat_after") is None


def _function(source: str) -> cst.FunctionDef:
    statement = cst.parse_module(source).body[0]
    assert isinstance(statement, cst.FunctionDef)
    return statement


def test_a_docstring_frame_is_no_video() -> None:
    function = _function(
        "def forward(self, batched_input):\n"
        '    """Points already transformed to the input frame of the model."""\n'
        "    # one frame of reference\n"
        "    return self.image_encoder(batched_input)\n"
    )
    assert not code_mentions_video(function)


def test_code_naming_frames_is_video() -> None:
    function = _function(
        "def forward(self, clip, num_frames):\n"
        '    """Masks for a clip."""\n'
        "    return self.image_encoder(clip[:num_frames])\n"
    )
    assert code_mentions_video(function)


def test_a_name_decoded_value_in_an_unknown_file_is_model_output() -> None:
    assert unvisual_named_decoded(F.CONCATENATION, F.DECODED, UNKNOWN_DOMAIN) == F.MODEL_OUTPUT
    assert unvisual_named_decoded(F.CONCATENATION, F.DECODED, LARGE_DOMAIN) == F.DECODED
    assert unvisual_named_decoded(F.DECODED, F.DECODED, UNKNOWN_DOMAIN) == F.DECODED
