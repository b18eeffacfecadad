"""Value facts behind LL001's session-6 precision: what a container's elements are held by,
edge slices, and helpers' returned values two calls deep."""

from __future__ import annotations

import textwrap

import libcst as cst

from lifetime_lint.analysis import facts as F
from lifetime_lint.config import Settings
from lifetime_lint.rule import FileContext


def _facts(source: str, function: str) -> F.FunctionFacts:
    source = textwrap.dedent(source)
    module = cst.parse_module(source)
    context = FileContext("x.py", source, module, "\n", Settings())
    found = [
        node
        for node in module.body
        if isinstance(node, cst.FunctionDef) and node.name.value == function
    ]
    facts = F.facts_for(context, found[0])
    assert facts is not None
    return facts


def _site(facts: F.FunctionFacts, name: str) -> F.DefSite:
    return next(s for s in facts.cfg.defs if s.name == name and s.kind == "assign")


def test_display_of_names_is_held_by_those_names() -> None:
    facts = _facts(
        """
        def run(model, guider, prompt):
            prompt_embeds = model(prompt)
            inputs = {"encoder_hidden_states": (prompt_embeds,), "steps": 4}
            return guider(inputs)
        """,
        "run",
    )
    holders = facts.element_holders(_site(facts, "inputs"))
    assert holders is not None
    assert [h.name for h in holders] == ["prompt_embeds"]


def test_display_with_a_fresh_element_is_its_only_holder() -> None:
    facts = _facts(
        """
        def run(model, guider, prompt, image):
            prompt_embeds = model(prompt)
            inputs = {"text": prompt_embeds, "image": model.image_encoder(image)}
            return guider(inputs)
        """,
        "run",
    )
    assert facts.element_holders(_site(facts, "inputs")) is None


def test_list_appended_per_iteration_owns_its_elements() -> None:
    facts = _facts(
        """
        def run(decoder, tiles_in):
            tiles = []
            for z in tiles_in:
                tile = decoder(z)
                tiles.append(tile)
            return tiles
        """,
        "run",
    )
    assert facts.element_holders(_site(facts, "tiles")) is None


def test_items_taken_out_of_an_opaque_container_hold_it() -> None:
    facts = _facts(
        """
        def run(stage, batch):
            features = stage.extract(batch)
            features = {"clip": stage.encoder(batch)}
            clip = features["clip"]
            return clip
        """,
        "run",
    )
    display = [s for s in facts.cfg.defs if s.name == "features" and s.kind == "assign"][1]
    assert facts.element_holders(display) is None  # a fresh element: the dict's own


def test_edge_slices_are_a_fraction_of_their_source() -> None:
    facts = _facts(
        """
        def run(conv, x: "torch.Tensor", keep):
            pad = x[:, :, :1].repeat(1, 1, 2, 1, 1)
            last = x[:, -1:]
            rest = x[:, :, 1:]
            window = x[:, :, :keep]
            head = x[:1]
            return conv(pad), last, rest, window, head
        """,
        "run",
    )
    origins = {
        n: facts.value(_site(facts, n)).origin for n in ("pad", "last", "rest", "window", "head")
    }
    assert origins["pad"] == F.SMALL and origins["last"] == F.SMALL
    assert origins["rest"] != F.SMALL and origins["window"] != F.SMALL
    assert origins["head"] != F.SMALL  # the batch axis: all of a batch of one


def test_index_tensor_through_a_cached_wrapper_is_small() -> None:
    facts = _facts(
        """
        import torch

        def _permutation(offset, n, device):
            order = torch.arange(offset, offset + n, device=device)
            order = order.reshape(2, -1).permute(1, 0).reshape(-1)
            return order, offset + n

        def _cached_permutation(n, device) -> torch.Tensor:
            order, _ = _permutation(0, n, device)
            return order

        def run(n, device):
            order = _cached_permutation(n, device) + 1
            return order
        """,
        "run",
    )
    fact = facts.value(_site(facts, "order"))
    assert fact.is_tensor and fact.origin == F.SMALL


def test_a_halo_shaped_like_its_tensor_is_a_fraction_of_it() -> None:
    facts = _facts(
        """
        import torch

        def run(x: torch.Tensor, halo: int):
            left = x.new_zeros((x.shape[0], x.shape[1], 1, x.shape[3]))
            wide = x.new_zeros((x.shape[0], x.shape[1], halo, x.shape[3]))
            mask = torch.zeros(x.shape[0], 1, x.shape[2], x.shape[2])
            return left, wide, mask
        """,
        "run",
    )
    assert facts.value(_site(facts, "left")).origin == F.SMALL
    assert facts.value(_site(facts, "wide")).origin != F.SMALL
    assert facts.value(_site(facts, "mask")).origin != F.SMALL  # seq x seq: not x's shape


def test_list_of_slices_of_a_bound_tensor_is_held_by_it() -> None:
    facts = _facts(
        """
        import torch

        def run(attn, k, n, shifting):
            k_pad = torch.cat([k[:, :1].expand(-1, shifting, -1, -1), k], dim=1)
            cat_k = []
            for i in range(shifting):
                cat_k.append(k_pad[:, i : i + n])
            return attn(torch.cat(cat_k, dim=2))
        """,
        "run",
    )
    holders = facts.element_holders(_site(facts, "cat_k"))
    assert holders is not None
    assert {h.name for h in holders} == {"k_pad"}


def test_list_of_slices_of_a_per_iteration_tensor_owns_them() -> None:
    facts = _facts(
        """
        import torch

        def run(attn, k, n, shifting):
            cat_k = []
            for i in range(shifting):
                k_shift = torch.roll(k, shifts=i, dims=1)
                cat_k.append(k_shift[:, :n])
            return attn(torch.cat(cat_k, dim=2))
        """,
        "run",
    )
    assert facts.element_holders(_site(facts, "cat_k")) is None
