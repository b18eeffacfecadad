"""What a constructor builds under the model's own defaults (`analysis.class_config`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import libcst as cst

from lifetime_lint.analysis.class_config import (
    built_by_default,
    not_built_by_default,
    parameter_values,
)

FIXTURES = Path(__file__).parent / "fixtures" / "LL001"

_BLOCK = """
class Block(nn.Module):
    def __init__(self, dim, cross_attention_dim=DEFAULT):
        self.attn2 = None
        if cross_attention_dim is not None:
            self.attn2 = Attention(dim, cross_attention_dim)
        self.norm2 = nn.LayerNorm(dim) if cross_attention_dim is not None else None

class Model(nn.Module):
    def __init__(self, config, cross_attention_dim=2240):
        self.blocks = nn.ModuleList([Block(64, PASSED) for _ in range(4)])
"""


def _module(default: str, passed: str) -> cst.Module:
    return cst.parse_module(_BLOCK.replace("DEFAULT", default).replace("PASSED", passed))


def test_an_attribute_built_under_every_default_is_built() -> None:
    module = _module("2240", "cross_attention_dim=cross_attention_dim")
    assert parameter_values(module, {}, "Block", "cross_attention_dim") == frozenset([2240])
    assert built_by_default(module, {}, "Block") == frozenset(["attn2", "norm2"])


def test_a_default_of_none_a_config_value_or_kwargs_keep_it_undecided() -> None:
    assert built_by_default(_module("None", ""), {}, "Block") == frozenset()
    assert built_by_default(_module("2240", "cross_attention_dim=None"), {}, "Block") == frozenset()
    config = _module("2240", "cross_attention_dim=config.cross_attention_dim")
    assert built_by_default(config, {}, "Block") == frozenset()
    assert built_by_default(_module("2240", "**config.block_kwargs"), {}, "Block") == frozenset()


def test_a_positional_argument_counts() -> None:
    assert built_by_default(_module("2240", "None"), {}, "Block") == frozenset()
    assert built_by_default(_module("None", "768"), {}, "Block") == frozenset(["attn2", "norm2"])


def test_a_reassigned_parameter_is_not_its_default() -> None:
    source = (
        _BLOCK.replace("DEFAULT", "2240")
        .replace("PASSED", "")
        .replace(
            "        self.attn2 = None\n",
            "        self.attn2 = None\n        cross_attention_dim = lookup(dim)\n",
        )
    )
    assert built_by_default(cst.parse_module(source), {}, "Block") == frozenset()


_SELECTOR = """
class Plain(nn.Module):
    pass

class Windowed(Plain):
    pass

class Block(nn.Module):
    def __init__(self, kind="plain"):
        if kind == "plain":
            self.attn = Plain()
        elif kind == "windowed":
            self.attn = Windowed()

class Model(nn.Module):
    def __init__(self, kind="plain"):
        self.blocks = [Block(kind=KIND) for _ in range(4)]

class Pipeline:
    def __init__(self):
        self.model = Model()
"""


def test_a_class_built_only_under_a_non_default_selector_is_not_built() -> None:
    module = cst.parse_module(_SELECTOR.replace("KIND", "kind"))
    assert not_built_by_default(module, {}, "Windowed")
    assert not not_built_by_default(module, {}, "Plain")
    chosen = cst.parse_module(_SELECTOR.replace("KIND", '"windowed"'))
    assert not not_built_by_default(chosen, {}, "Windowed")
    from_config = cst.parse_module(_SELECTOR.replace("KIND", "config.kind"))
    assert not not_built_by_default(from_config, {}, "Windowed")


def test_a_class_the_file_never_builds_is_not_judged() -> None:
    module = cst.parse_module(_SELECTOR.replace("KIND", "kind"))
    assert not not_built_by_default(module, {}, "Model")


def _lint(path: Path) -> str:
    run = subprocess.run(
        [sys.executable, "-m", "lifetime_lint", "check", "--isolated", "--no-cache",
         "--exit-zero", "--output-format", "concise", "--select", "LL001", str(path)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return run.stdout


def test_the_default_run_leaves_out_only_the_off_default_finding(tmp_path: Path) -> None:
    """On disk, in a subprocess: the `attn_output` held across the feed-forward only when
    `attn2` is None is not in the default run; with the block's default None it is."""
    source = (FIXTURES / "domain_off_default_attn2.py").read_text(encoding="utf-8")
    off_default = tmp_path / "off_default.py"
    off_default.write_text(source, encoding="utf-8")
    reported = _lint(off_default)
    assert ":33:41: LL001" not in reported and ":37:29: LL001" in reported
    kept = tmp_path / "kept.py"
    kept.write_text(
        source.replace(
            "cross_attention_dim: int | None = 2240) -> None:",
            "cross_attention_dim: int | None = None) -> None:",
        ).replace("cross_attention_dim=cross_attention_dim)", "cross_attention_dim=None)"),
        encoding="utf-8",
    )
    assert ":33:41: LL001" in _lint(kept)


def test_a_top_level_model_selector_is_a_checkpoint_choice() -> None:
    """The model the file never builds is built from a checkpoint's config: its selector's
    default does not decide (HunyuanVideo's `image_condition_type="token_replace"`)."""
    source = _SELECTOR.replace("KIND", "kind").replace(
        "        self.model = Model()\n", "        pass\n"
    )
    assert not not_built_by_default(cst.parse_module(source), {}, "Windowed")
