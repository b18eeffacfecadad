"""A held tensor belongs to exactly one of LL001 (tensor-kept-alive) and LL006
(autograd-history-kept): the rule whose fix is right."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures" / "LL006"


def _findings(path: Path, tmp_path: Path) -> list[tuple[str, str]]:
    config = tmp_path / "pyproject.toml"
    config.write_text('[tool.lifetime-lint]\nmin-significance = "low"\n')
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "lifetime_lint",
            "check",
            "--select",
            "LL001,LL006",
            "--output-format",
            "json",
            "--exit-zero",
            "--no-cache",
            "--config",
            str(config),
            str(path),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return [(f["code"], f["message"]) for f in json.loads(result.stdout)]


def _names(findings: list[tuple[str, str]], code: str) -> set[str]:
    return {message.split("`")[1] for found, message in findings if found == code}


def test_graph_held_into_the_next_forward_is_ll006s(tmp_path: Path) -> None:
    # A validation loop with grad on: `torch.no_grad()` (LL006) frees the graph; `del`
    # (LL001) would leave `val_loss` holding every graph anyway.
    findings = _findings(FIXTURES / "positive_validation_without_no_grad.py", tmp_path)
    assert "val_logits" in _names(findings, "LL006")
    assert "val_logits" not in _names(findings, "LL001")


def test_output_held_in_a_training_loop_is_ll001s(tmp_path: Path) -> None:
    # A training loop calls backward: the graph is freed there; the previous iteration's
    # logits held across the next forward are LL001's (`del`), not LL006's.
    findings = _findings(FIXTURES / "positive_plain_loop.py", tmp_path)
    assert "logits" in _names(findings, "LL001")
    assert "logits" not in _names(findings, "LL006")
