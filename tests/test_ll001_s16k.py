"""Session-16 (h-ll001k) facts: compiled OneFlow ports, decode quantity helpers, noise-mixed
latents, one-frame video architectures (the rule-level behaviour is in the fixtures)."""

from __future__ import annotations

import libcst as cst

from lifetime_lint.analysis import facts as F
from lifetime_lint.analysis.domain import one_frame_classes
from lifetime_lint.config import Settings
from lifetime_lint.rule import FileContext


def _context(source: str) -> FileContext:
    return FileContext("x.py", source, cst.parse_module(source), "\n", Settings())


def test_torch_aliased_to_oneflow_is_compiled_code() -> None:
    assert F.torch_is_oneflow(_context("import oneflow as torch\n"))
    assert not F.torch_is_oneflow(_context("import oneflow as flow\nimport torch\n"))
    assert not F.torch_is_oneflow(_context("def f():\n    import oneflow as torch\n"))


def test_decode_quantity_helpers_run_no_model() -> None:
    assert F._measures_a_codec("decode_mib_per_latent")
    assert F._measures_a_codec("decode_platform_cap")
    assert F._measures_a_codec("_encode_memory_estimate")
    assert not F._measures_a_codec("decode_latents")
    assert not F._measures_a_codec("tiled_decode")
    assert not F._measures_a_codec("cap_frames")  # (no decode or encode in the name)


def _function(source: str) -> cst.FunctionDef:
    node = cst.parse_module(source).body[0]
    assert isinstance(node, cst.FunctionDef)
    return node


def _value(function: cst.FunctionDef, name: str) -> cst.BaseExpression:
    for statement in function.body.body:
        if isinstance(statement, cst.SimpleStatementLine):
            assign = statement.body[0]
            if isinstance(assign, cst.Assign):
                target = assign.targets[0].target
                if isinstance(target, cst.Name) and target.value == name:
                    return assign.value
    raise AssertionError(name)


def test_values_mixed_with_gaussian_noise() -> None:
    function = _function(
        "def step(a, b, s):\n"
        "    clean_video = a + b * torch.randn_like(a)\n"
        "    noise = torch.randn_like(clean_video)\n"
        "    noisy_video = ((1 - s) * clean_video + s * noise).type_as(a)\n"
        "    frames = clean_video * 0.5 + 0.5\n"
        "    drawn = torch.randn_like(a)\n"
    )
    assert F.mixes_noise(function, _value(function, "clean_video"))
    assert F.mixes_noise(function, _value(function, "noisy_video"))
    assert not F.mixes_noise(function, _value(function, "frames"))  # no noise in it
    assert not F.mixes_noise(function, _value(function, "drawn"))  # the draw itself


def test_one_frame_default_marks_the_model_and_its_own_blocks() -> None:
    source = (
        "class Block: pass\n"
        "class Shared: pass\n"
        "class ImageDiT:\n"
        "    def __init__(self, dim, max_frames: int = 1):\n"
        "        self.blocks = [Block(), Shared()]\n"
        "class Anima(ImageDiT): pass\n"
        "class VideoDiT:\n"
        "    def __init__(self, dim, num_frames: int = 81):\n"
        "        self.blocks = [Shared()]\n"
    )
    found = one_frame_classes(cst.parse_module(source), {})
    assert found == frozenset(["ImageDiT", "Block", "Anima"])
