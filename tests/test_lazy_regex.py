"""`compile_lazily`: the same answers as `re.compile`, compiled only when first used."""

from __future__ import annotations

import re
import subprocess
import sys

from lifetime_lint.lazy_regex import compile_lazily


def test_a_lazy_pattern_answers_as_the_compiled_one() -> None:
    source = r"(?P<word>[a-z]+)(\d*)"
    lazy, eager = compile_lazily(source, re.IGNORECASE), re.compile(source, re.IGNORECASE)
    text = "Alpha1 beta22 GAMMA"
    assert lazy.pattern == eager.pattern
    assert lazy.search(text).group("word") == eager.search(text).group("word")
    assert lazy.match(text).span() == eager.match(text).span()
    assert lazy.fullmatch("abc3") is not None and lazy.fullmatch("3abc") is None
    assert lazy.findall(text) == eager.findall(text)
    assert [m.span() for m in lazy.finditer(text)] == [m.span() for m in eager.finditer(text)]
    assert lazy.sub("-", text) == eager.sub("-", text)
    assert lazy.subn("-", text) == eager.subn("-", text)
    assert lazy.split(text) == eager.split(text)
    assert (lazy.flags, lazy.groups, lazy.groupindex) == (
        eager.flags,
        eager.groups,
        eager.groupindex,
    )
    assert repr(lazy) == repr(eager)


def test_nothing_is_compiled_before_first_use_and_a_bad_pattern_fails_then() -> None:
    code = (
        "import re, re._compiler as c\n"
        "calls = []\n"
        "real = c.compile\n"
        "c.compile = lambda p, f=0: (calls.append(p), real(p, f))[1]\n"
        "from lifetime_lint.lazy_regex import compile_lazily\n"
        "calls.clear()\n"
        "lazy = compile_lazily(r'never(used)+')\n"
        "bad = compile_lazily('(unclosed')\n"
        "print(lazy.pattern, len(calls))\n"
        "lazy.search('neverused'); lazy.search('x')\n"
        "print(len(calls))\n"
        "try:\n"
        "    bad.search('x')\n"
        "except re.error:\n"
        "    print('error on use')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.splitlines() == ["never(used)+ 0", "1", "error on use"]


def test_the_tool_compiles_no_module_level_pattern_at_import() -> None:
    """Importing the modules of the one-file gate compiles only what they use at import."""
    code = (
        "import re._compiler as c\n"
        "calls = []\n"
        "real = c.compile\n"
        "c.compile = lambda p, f=0: (calls.append(p), real(p, f))[1]\n"
        "import libcst, click\n"
        "calls.clear()\n"
        "import lifetime_lint.devices, lifetime_lint.analysis.chunks, lifetime_lint.parsing\n"
        "import lifetime_lint.noqa, lifetime_lint.rules.discarded_all_gather\n"
        "print(len(calls))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    compiled_at_import = int(result.stdout.strip())
    # Before: 79 (39 in devices.py alone). What remains (7 when written) is the standard
    # library's (`string.Template`, `tomllib`) and config.py's and vendor.py's constants.
    assert compiled_at_import < 10, compiled_at_import
