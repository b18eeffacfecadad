"""LL002's unsafe fix of a chunked own-forward convolution, run: same output, bit for bit.

The fixture's `SafeConv3d` cuts inputs over 2 GiB along time; the test lowers that bar in the
original and the fixed text alike (and asks for three chunks) so the chunked branch runs on
CPU-sized tensors, then compares both layers' outputs with the same weights and input.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "LL002"


def _layer_class(path: Path) -> Any:
    text = path.read_text(encoding="utf-8")
    for before, after in (
        ("if memory_count > 2:", "if memory_count > -1:"),
        ("int(memory_count / 2) + 1", "3"),
    ):
        assert before in text, before
        text = text.replace(before, after)
    namespace: dict[str, Any] = {"__name__": f"fixture_{path.stem.replace('.', '_')}"}
    exec(compile(text, str(path), "exec"), namespace)
    return namespace["SafeConv3d"]


@pytest.mark.parametrize("kernel", [1, 3])
def test_fixed_safe_conv_gives_the_same_output(kernel: int) -> None:
    original = _layer_class(FIXTURES / "significance_chunked_own_forward.py")
    fixed = _layer_class(FIXTURES / "significance_chunked_own_forward.unsafe.py")
    torch.manual_seed(0)
    before = original(2, 3, kernel_size=kernel)
    after = fixed(2, 3, kernel_size=kernel)
    after.load_state_dict(before.state_dict())
    x = torch.randn(1, 2, 9, 5, 5)
    expected = before(x)
    assert expected.shape[2] == 9 - (kernel - 1)  # three overlapping chunks: a full convolution
    assert torch.equal(after(x), expected)
