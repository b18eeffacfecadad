"""Facts added for LL001's session-16 false findings (issue 12): learned parameters tiled over
the batch, mask resizing and state-clearing module methods are not activation-sized work."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from lifetime_lint.analysis import facts as F


def _class(source: str) -> cst.ClassDef:
    module = cst.parse_module(textwrap.dedent(source))
    found = [n for n in module.body if isinstance(n, cst.ClassDef)]
    return found[0]


_MOTIONER = """
class Motioner(nn.Module):
    def __init__(self, dim, n):
        super().__init__()
        self.token = nn.Parameter(torch.zeros(1, n, dim))
        self.queries = torch.nn.Parameter(torch.randn(1, 64, dim))
        self.proj = nn.Linear(dim, dim)
        self.cache = torch.zeros(1, n, dim)
"""


def test_learned_parameters_are_the_init_parameters_only():
    assert F.learned_parameters(_class(_MOTIONER)) == frozenset({"token", "queries"})
    assert F.learned_parameters(None) == frozenset()


@pytest.mark.parametrize(
    ("code", "tiled"),
    [
        ("self.token.clone().repeat(batch_size, 1, 1).contiguous()", True),
        ("self.queries.expand(b, -1, -1)", True),
        ("self.token.repeat(b, 1, 1).to(x.dtype)", True),
        ("self.token.repeat(1, num_frames, 1)", False),  # tiled over frames: scales
        ("self.token.expand(b, n, -1)", False),
        ("self.token.repeat(sizes)", False),  # axes not visible
        ("self.token.clone()", False),  # not tiled: not this fact
        ("self.cache.repeat(b, 1, 1)", False),  # a buffer, not a learned parameter
        ("self.token.repeat(b, 1, 1) * x", False),
    ],
)
def test_batch_tiled_parameter(code: str, tiled: bool):
    parameters = F.learned_parameters(_class(_MOTIONER))
    assert F.batch_tiled_parameter(cst.parse_expression(code), parameters) is tiled


@pytest.mark.parametrize(
    ("code", "mask"),
    [
        ("F.interpolate(mask_.unsqueeze(0), size=s, mode='nearest-exact')", True),
        ("F.interpolate(attention_mask[None], size=s)", True),
        ("F.interpolate(masks2, size=s)", True),
        ("F.interpolate(hidden_states, scale_factor=2.0)", False),
        ("F.interpolate(masked_video, size=s)", False),
        ("F.interpolate(input=mask, size=s)", False),  # keyword input: not read
    ],
)
def test_resamples_a_mask(code: str, mask: bool):
    call = cst.parse_expression(code)
    assert isinstance(call, cst.Call)
    assert F._resamples_a_mask(call) is mask


@pytest.mark.parametrize(
    ("name", "bookkeeping"),
    [
        ("clear_cache", True),
        ("reset_kv_cache", True),
        ("_clear_feature_cache", True),
        ("state_dict", True),
        ("clearance", False),
        ("decode", False),
        ("refine", False),
    ],
)
def test_clearing_methods_are_bookkeeping(name: str, bookkeeping: bool):
    assert F._is_bookkeeping(name) is bookkeeping
