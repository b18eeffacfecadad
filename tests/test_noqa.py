"""Suppression comments: line, statement first/last line, codes, file level, not strings."""

from __future__ import annotations

import textwrap

from lifetime_lint.config import Settings
from lifetime_lint.engine import Linter


def codes(source: str):
    diagnostics, error = Linter(Settings()).lint_text("x.py", textwrap.dedent(source))
    assert error is None
    return [(d.start.row, d.code) for d in diagnostics]


def test_line_noqa_bare_and_with_codes():
    assert codes(
        """\
        import torch
        torch.cuda.empty_cache()  # noqa
        torch.cuda.empty_cache()  # noqa: LL004
        torch.cuda.empty_cache()  # noqa: LL005
        torch.cuda.empty_cache()  # NOQA:LL005,LL004
        torch.cuda.empty_cache()
        """
    ) == [(4, "LL004"), (6, "LL004")]


def test_multiline_statement_first_or_last_line():
    assert codes(
        """\
        import torch
        free, total = (  # noqa: LL005
            torch.cuda.mem_get_info()
        )
        stats = dict(
            peak=torch.cuda.max_memory_allocated(),
        )  # noqa: LL005
        stats = dict(
            peak=torch.cuda.max_memory_allocated(),
        )
        """
    ) == [(9, "LL005")]


def test_file_level_noqa():
    assert codes("# lifetime-lint: noqa\nimport torch\ntorch.cuda.synchronize()\n") == []
    assert codes(
        "# lifetime-lint: noqa: LL005\nimport torch\ntorch.cuda.synchronize()\n"
        "torch.cuda.empty_cache()\n"
    ) == [(4, "LL004")]


def test_noqa_text_inside_a_string_suppresses_nothing():
    assert codes('import torch\ntorch.cuda.synchronize(); s = "# noqa"\n') == [(2, "LL005")]
