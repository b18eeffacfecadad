"""The project fact's other-backend scan: the lowered, case-sensitive search of an ASCII
text finds exactly what the IGNORECASE pattern finds (session 11, the one-file gate)."""

from __future__ import annotations

import pytest

from lifetime_lint import project

TEXTS = [
    "import torch\nx = torch.cuda.synchronize()\n",
    "if torch.backends.mps.is_available():\n    pass\n",
    "device = 'MPS'\n",
    "jumps = samples = 1\n",  # no backend word on its own
    "x = input(); y = output\n",  # `npu`, `tpu` inside words
    "import torch_npu\n",  # after `_`: the word boundary is alphanumeric only
    "import torch_neuronx\nimport torch_neuron\n",
    "neuron = 1\n",  # AWS's library only
    "if torch.version.hip:\n    pass\n",
    "Hip-hop\n",
    "torch.accelerator.current_accelerator()\n",
    "mod = torch.get_device_module()\n",
    "class CudaPlatform(Base):\n    pass\n",
    "class  MyDeviceInterface:\n    pass\n",
    "class Platformer:\n    pass\n",
    "xmps\nmpsx\n2mps\nmps2\n",
    "mps",
    "_mps_",
    "a.IS_HIP\n",
    "ROCm build\n",
    "use_ipex = True\n",
    "xclass CudaPlatform: pass\n",
    "getversion.hip\n",
    "privateuse1\n",
    "INTEL_EXTENSION_FOR_PYTORCH\n",
    "\u017fome text with the long s: mp\u017f\n",  # non-ASCII: the IGNORECASE pattern decides
    "K\u212a mps\n",
    "caf\u00e9 = 'xpu'\n",
]


@pytest.mark.parametrize("text", TEXTS)
def test_lowered_search_finds_what_the_pattern_finds(text: str) -> None:
    expected = project._PROJECT_OTHER_BACKEND.search(text) is not None
    assert project._text_names_another_backend(text) is expected
    if text.isascii():
        old = [m.span() for m in project._PROJECT_OTHER_BACKEND.finditer(text)]
        new = [m.span() for m in project._PROJECT_OTHER_BACKEND_LOWERED.finditer(text.lower())]
        assert new == old


def test_examples_cover_both_answers() -> None:
    found = [project._text_names_another_backend(t) for t in TEXTS]
    assert any(found) and not all(found)
