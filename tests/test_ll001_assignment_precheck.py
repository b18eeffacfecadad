"""LL001 builds no facts for a function without an assignment below it (a cold-run cut):
every way of binding a name that LL001 reports still reaches the analysis, through the
real CLI."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

SOURCE = textwrap.dedent(
    """\
    import torch


    class Sampler:
        def __init__(self, transformer):
            self.transformer = transformer

        @torch.no_grad()
        def annotated_only(self, latents, t):
            guidance: torch.Tensor = self.transformer(latents, t)
            print(guidance.mean())
            self.transformer(latents, t)

        @torch.no_grad()
        def walrus_in_a_comprehension_only(self, latents, t):
            print([(g := self.transformer(x, t)).mean() for x in latents])
            self.transformer(latents, t)
            print(g.mean())
            self.transformer(latents, t)

        @torch.no_grad()
        def outer_without_assignments(self, latents, t):
            def inner(x):
                guidance = self.transformer(x, t)
                x = x - guidance
                return self.transformer(x, t)

            return inner(latents)

        @torch.no_grad()
        def no_assignment_at_all(self, latents, t):
            print(self.transformer(latents, t).mean())
            return self.transformer(latents, t)
    """
)


def _findings(tmp_path: Path) -> list[tuple[int, str]]:
    (tmp_path / "pyproject.toml").write_text('[tool.lifetime-lint]\nmin-significance = "low"\n')
    (tmp_path / "sampler.py").write_text(SOURCE)
    done = subprocess.run(
        [sys.executable, "-m", "lifetime_lint", "check", "--no-cache", "--exit-zero",
         "--output-format", "json", "sampler.py"],
        cwd=tmp_path, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return sorted(
        (finding["location"]["row"], finding["message"].split("`")[1])
        for finding in json.loads(done.stdout)
        if finding["code"] == "LL001"
    )


def test_annotated_walrus_and_nested_bindings_are_still_analysed(tmp_path: Path) -> None:
    # Each at its last use (the same findings as before the cut): an annotated assignment
    # (line 11), a walrus inside a comprehension, which binds in the function (line 18),
    # and the nested function's own binding (line 25; the outer function has none).
    assert _findings(tmp_path) == [(11, "guidance"), (18, "g"), (25, "guidance")]
