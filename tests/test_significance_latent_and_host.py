"""Value facts behind LL001's session-8 significance: a decoder's input, layers built for the
latent's channels, and tensors in host memory."""

from __future__ import annotations

import textwrap

import libcst as cst

from lifetime_lint.analysis import facts as F
from lifetime_lint.config import Settings
from lifetime_lint.rule import FileContext


def _function_facts(source: str, name: str) -> F.FunctionFacts:
    source = textwrap.dedent(source)
    module = cst.parse_module(source)
    context = FileContext("pkg/x.py", source, module, "\n", Settings())
    found: list[cst.FunctionDef] = []

    class Finder(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
            if node.name.value == name:
                found.append(node)

    module.visit(Finder())
    facts = F.facts_for(context, found[0])
    assert facts is not None
    return facts


def _site(facts: F.FunctionFacts, name: str) -> F.DefSite:
    return next(s for s in facts.cfg.defs if s.name == name and s.kind == "assign")


_DECODE = """
import torch
from torch import nn


class Decoder(nn.Module):
    def __init__(self, decoder, post_quant_conv):
        super().__init__()
        self.decoder = decoder
        self.post_quant_conv = post_quant_conv

    def decode(self, z):
        x = self.post_quant_conv(z)
        y = self.post_quant_conv(z)
        outs = [self.decoder(x[:, :, i : i + 1], context=y) for i in range(z.shape[2])]
        return torch.cat(outs, 2)
"""


def test_main_input_of_a_decoder_is_latent_sized() -> None:
    facts = _function_facts(_DECODE, "decode")
    assert facts.feeds_decoder(_site(facts, "x"))
    assert not facts.feeds_decoder(_site(facts, "y"))  # passed beside the main input


_LAYERS = """
from torch import nn


class VideoDiT(nn.Module):
    def __init__(self, inner_dim, patch_size, out_channels, z_channels):
        super().__init__()
        self.proj_out = nn.Linear(inner_dim, patch_size * patch_size * out_channels)
        self.ff_out = nn.Linear(inner_dim, inner_dim)
        self.conv_in = nn.Conv3d(z_channels, inner_dim, kernel_size=3)
        if inner_dim > 0:
            self.mix = nn.Conv3d(inner_dim, inner_dim, kernel_size=(1, 1, 1))
        self.widen = nn.Conv3d(inner_dim, 4 * inner_dim, kernel_size=1)

    def forward(self, hidden_states, z):
        return self.proj_out(hidden_states), self.conv_in(z)
"""


def test_channel_arguments_of_built_layers() -> None:
    facts = _function_facts(_LAYERS, "forward")
    owner = facts.owner_facts
    assert owner is not None
    assert owner.latent_outputs == frozenset(["proj_out"])
    assert owner.latent_inputs == frozenset(["conv_in"])
    assert owner.pointwise == frozenset(["mix"])  # (`widen` changes the channel count)


_HOST = """
import torch


def run(shape, dtype, device, frames, processor, vae, **factory):
    on_host = torch.zeros(shape, dtype=dtype)
    on_device = torch.zeros(shape, dtype=dtype, device=device)
    maybe = torch.zeros(shape, **factory)
    pixels = processor.preprocess(frames)
    pixels_cast = pixels.to(dtype=torch.float32)
    pixels_moved = pixels.to(device)
    return vae.encode(pixels_moved), on_host, on_device, maybe, pixels_cast
"""


def test_host_tensors_until_moved() -> None:
    facts = _function_facts(_HOST, "run")
    host = {name: facts.value(_site(facts, name)).host for name in (
        "on_host", "on_device", "maybe", "pixels", "pixels_cast", "pixels_moved"
    )}  # fmt: skip
    assert host == {
        "on_host": True,
        "on_device": False,
        "maybe": False,  # `**factory` may carry a device
        "pixels": True,
        "pixels_cast": True,
        "pixels_moved": False,
    }


def test_default_device_in_the_file_keeps_factories_on_it() -> None:
    source = "import torch\ntorch.set_default_device('cuda')\n" + textwrap.dedent(_HOST)
    facts = _function_facts(source, "run")
    assert not facts.value(_site(facts, "on_host")).host
