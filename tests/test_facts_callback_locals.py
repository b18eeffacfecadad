"""`locals()[k]` in diffusers' step-end callback loop reads only `_callback_tensor_inputs`."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from lifetime_lint.analysis import facts as F
from lifetime_lint.config import Settings
from lifetime_lint.rule import FileContext

PIPELINE = """
import torch


class Pipeline(DiffusionPipeline):
    _callback_tensor_inputs = ["latents", "prompt_embeds"]

    def check_inputs(self, prompt, callback_on_step_end_tensor_inputs=None):
        if prompt is None:
            raise ValueError("no prompt")
        if callback_on_step_end_tensor_inputs is not None and not all(
            k in self._callback_tensor_inputs for k in callback_on_step_end_tensor_inputs
        ):
            raise ValueError("bad names")

    def __call__(self, prompt, image, callback_on_step_end=None, callback_on_step_end_tensor_inputs=["latents"]):
        if isinstance(callback_on_step_end, PipelineCallback):
            callback_on_step_end_tensor_inputs = callback_on_step_end.tensor_inputs
        CHECK
        prompt_embeds = self.encode_prompt(prompt)
        image = self.image_processor.preprocess(image)
        latents = self.prepare_latents(image)
        for i, t in enumerate(self.scheduler.timesteps):
            noise_pred = self.transformer(latents, t, prompt_embeds)
            latents = self.scheduler.step(noise_pred, t, latents)[0]
            if callback_on_step_end is not None:
                callback_kwargs = {}
                for k in ITERATED:
                    READ
                callback_on_step_end(self, i, t, callback_kwargs)
        return self.vae.decode(latents)
"""

CHECK = "self.check_inputs(prompt, callback_on_step_end_tensor_inputs)"
READ = "callback_kwargs[k] = locals()[k]"
ITERATED = "callback_on_step_end_tensor_inputs"


def _dynamic(
    check: str = CHECK, read: str = READ, iterated: str = ITERATED, extra: str = ""
) -> list[tuple[bool, frozenset[str]]]:
    source = PIPELINE.replace("CHECK", check).replace("READ", read).replace("ITERATED", iterated)
    source = textwrap.dedent(source + extra)
    module = cst.parse_module(source)
    context = FileContext("x.py", source, module, "\n", Settings())
    found: list[cst.FunctionDef] = []

    class Finder(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
            if node.name.value == "__call__":
                found.append(node)

    module.visit(Finder())
    facts = F.facts_for(context, found[0])
    assert facts is not None
    nodes = [n for n in facts.cfg.nodes if n.dynamic_call is not None]
    assert len(nodes) == 1
    flow = facts.flow
    loop = next(n for n in facts.cfg.nodes if n.kind == "for" and n.loop_body)
    # `image` is read before the loop only: dead at the loop when the read is narrowed.
    assert bool(flow.live_in[loop.index] & flow.name_bit("image")) == nodes[0].dynamic
    return [(n.dynamic, n.dynamic_names) for n in nodes]


NARROW = [(False, frozenset({"latents", "prompt_embeds"}))]


@pytest.mark.parametrize(
    "change",
    [
        {},
        {"read": "callback_kwargs[k] = locals().get(k)"},
        {"iterated": "callback_on_step_end_tensor_inputs or []"},
        {  # the guard inline, as Kandinsky 2.2 has it
            "check": "if callback_on_step_end_tensor_inputs is not None and not all(\n"
            "            k in self._callback_tensor_inputs for k in callback_on_step_end_tensor_inputs\n"
            "        ):\n"
            "            raise ValueError('bad names')"
        },
        {
            "check": "self.check_inputs(prompt, callback_on_step_end_tensor_inputs=callback_on_step_end_tensor_inputs)"
        },
    ],
)
def test_checked_callback_loop_reads_only_the_listed_names(change: dict[str, str]) -> None:
    assert _dynamic(**change) == NARROW


@pytest.mark.parametrize(
    "change",
    [
        {"check": "pass"},  # never checked
        {"check": "if prompt:\n            " + CHECK},  # checked on one path only
        {
            "check": CHECK
            + "\n        callback_on_step_end_tensor_inputs = list(callback_on_step_end_tensor_inputs)"
        },
        {"check": "self.check_inputs(callback_on_step_end_tensor_inputs, prompt)"},  # wrong slot
        {"read": "callback_kwargs[k] = locals()[k] or eval(k)"},  # another dynamic read
        {"read": "callback_kwargs[k] = locals()[k + '_1']"},
        {"read": "k = 'image'; callback_kwargs[k] = locals()[k]"},  # `k` rebound
        {"iterated": "self.callback_tensor_names"},
        {  # an inline check that only warns
            "check": "if not all(k in self._callback_tensor_inputs for k in callback_on_step_end_tensor_inputs):\n"
            "            logger.warning('bad names')"
        },
    ],
)
def test_unprovable_callback_loop_reads_every_local(change: dict[str, str]) -> None:
    assert _dynamic(**change)[0][0] is True


def test_list_assigned_through_self_reads_every_local() -> None:
    extra = """
    def set_callback_inputs(self, names):
        self._callback_tensor_inputs = names
"""
    assert _dynamic(extra=textwrap.indent(textwrap.dedent(extra), "    "))[0][0] is True
