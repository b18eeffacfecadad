"""Fixes a maintainer merges as they are: imports where Ruff's isort rules put them, no new
dependency on lifetime-lint, no synthetic aliases, no stranded blank lines.

Each case is a small project on disk (its own pyproject with Ruff settings) whose code is
clean under `ruff check --select I,E,W,F` and `ruff format --check`; after
`lifetime-lint check --fix` it must still be clean, and the fixed module must still run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

RUFF = shutil.which("ruff") or os.path.join(os.path.dirname(sys.executable), "ruff")
pytestmark = pytest.mark.skipif(not os.path.exists(RUFF), reason="needs ruff (dev extra)")

PYPROJECT = """\
[project]
name = "demo"
version = "0"
dependencies = ["torch", {dependency}]

[tool.ruff]
line-length = {line_length}

[tool.ruff.lint.isort]
known-first-party = ["demo"]
{extra}"""


def _project(tmp_path: Path, code: str, *, declares: bool = True, line_length: int = 88,
             extra: str = "") -> Path:  # fmt: skip
    dependency = '"lifetime-lint>=0.1"' if declares else '"numpy"'
    (tmp_path / "pyproject.toml").write_text(
        PYPROJECT.format(dependency=dependency, line_length=line_length, extra=extra)
    )
    package = tmp_path / "demo"
    package.mkdir()
    (package / "__init__.py").write_text("")
    # A device layer of its own (a `platforms/` package): LL005 reports here by default.
    (package / "platforms").mkdir()
    (package / "platforms" / "__init__.py").write_text("")
    module = package / "mod.py"
    module.write_text(textwrap.dedent(code).lstrip())
    return module


def _ruff_clean(path: Path) -> None:
    cwd = path.parent.parent
    lint = subprocess.run([RUFF, "check", "--no-cache", "--select", "I,E,W,F", str(path)],
                          cwd=cwd, capture_output=True, text=True)  # fmt: skip
    assert lint.returncode == 0, lint.stdout + path.read_text()
    fmt = subprocess.run([RUFF, "format", "--no-cache", "--check", "--diff", str(path)],
                         cwd=cwd, capture_output=True, text=True)  # fmt: skip
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr


def _lint(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lifetime_lint", "check", "--no-cache", *args, str(path)],
        cwd=path.parent.parent, capture_output=True, text=True,
    )  # fmt: skip


def _fix_and_check(path: Path, *args: str) -> str:
    _ruff_clean(path)  # the case itself is clean
    before = path.read_text()
    _lint(path, "--fix", *args)
    after = path.read_text()
    assert after != before, _lint(path).stdout
    _ruff_clean(path)
    run = subprocess.run([sys.executable, "-c", "import demo.mod"], cwd=path.parent.parent,
                         capture_output=True, text=True)  # fmt: skip
    assert run.returncode == 0, run.stderr
    return after


CASES = {
    "new from-import sorted into third-party": """
        import os

        import numpy
        import torch
        from torch import nn

        from demo import __name__ as name


        def free(model: nn.Module) -> None:
            del model
            torch.cuda.empty_cache()
            print(os.sep, numpy.pi, name)
        """,
    "merged into an existing from-import, sorted": """
        import torch
        from lifetime_lint.runtime import release


        def free(tiles: list) -> list:
            out = list(release(tiles))
            torch.cuda.empty_cache()
            return out
        """,
    "orphaned `import torch` removed, import goes in its place": """
        \"\"\"Docstring.\"\"\"

        import torch


        def free() -> None:
            torch.cuda.empty_cache()
        """,
    "LL003: no blank lines left inside the function": """
        import torch
        import torch.distributed as dist


        def save(samples: torch.Tensor, path: str) -> None:
            world = dist.get_world_size()

            gathered = [torch.empty_like(samples) for _ in range(world)]

            dist.all_gather(gathered, samples)

            if dist.get_rank() == 0:
                torch.save(gathered, f"{path}.{world}")


        def save_tight(samples: torch.Tensor, path: str) -> None:
            gathered = [torch.empty_like(samples) for _ in range(dist.get_world_size())]

            dist.all_gather(gathered, samples)
            if dist.get_rank() == 0:
                torch.save(gathered, path)
        """,
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_fixed_code_stays_ruff_clean(tmp_path: Path, name: str) -> None:
    _fix_and_check(_project(tmp_path, CASES[name]), "--unsafe-fixes")


def test_long_merge_is_wrapped_as_ruff_wraps_it(tmp_path: Path) -> None:
    module = _project(tmp_path, """
        import torch
        from lifetime_lint.runtime import active_device_type, release


        def free(tiles: list) -> list:
            out = list(release(tiles))
            torch.cuda.empty_cache()
            print(active_device_type())
            return out
        """, line_length=62)  # fmt: skip
    after = _fix_and_check(module)
    assert "from lifetime_lint.runtime import (\n    active_device_type,\n    reclaim,\n" in after


def test_runtime_module_is_first_party_and_its_own_section(tmp_path: Path) -> None:
    extra = '\n[tool.lifetime-lint]\nruntime-module = "demo.lifetime_runtime"\n'
    module = _project(tmp_path, """
        import torch


        def free() -> None:
            torch.cuda.empty_cache()
            print(torch.__name__)
        """, declares=False, extra=extra)  # fmt: skip
    vendored = subprocess.run(
        [sys.executable, "-m", "lifetime_lint", "vendor-runtime", "demo/lifetime_runtime.py"],
        cwd=tmp_path, capture_output=True, text=True,
    )  # fmt: skip
    assert vendored.returncode == 0, vendored.stderr
    after = _fix_and_check(module)
    assert "import torch\n\nfrom demo.lifetime_runtime import reclaim\n" in after
    assert "lifetime_lint" not in after


def test_module_level_call_before_a_later_runtime_import_runs(tmp_path: Path) -> None:
    """Issue 10: merging into a later `from lifetime_lint.runtime import ...` raised
    NameError when the module was imported."""
    module = _project(tmp_path, """
        import torch

        torch.cuda.empty_cache()

        from lifetime_lint.runtime import release  # noqa: E402

        print(torch.__name__, release)
        """)  # fmt: skip
    after = _fix_and_check(module)
    assert after.index("import reclaim") < after.index("reclaim()")


def test_a_binding_of_torch_is_used_not_an_alias(tmp_path: Path) -> None:
    module = _project(tmp_path, """
        import torch
        import torch.distributed


        def sync() -> None:
            torch.cuda.synchronize()
            print(torch.distributed.is_available())
        """)  # fmt: skip
    result = _lint(module, "--diff")
    assert "_ll_torch" not in result.stdout
    assert "+    torch.accelerator.synchronize()" in result.stdout


@pytest.mark.parametrize(
    "declaration",
    [
        None,
        ("requirements.txt", "torch\nlifetime-lint==0.1.0  # memory fixes\n"),
        ("setup.cfg", "[options]\ninstall_requires =\n    torch\n    lifetime_lint>=0.1\n"),
    ],
)
def test_runtime_import_is_unsafe_unless_the_project_depends_on_it(
    tmp_path: Path, declaration: tuple[str, str] | None
) -> None:
    module = _project(tmp_path, """
        import torch


        def free() -> None:
            torch.cuda.empty_cache()
            print(torch.__name__)
        """, declares=False)  # fmt: skip
    if declaration is not None:
        (tmp_path / declaration[0]).write_text(declaration[1])
    result = _lint(module, "--fix")
    fixed = "reclaim()" in module.read_text()
    assert fixed == (declaration is not None), result.stdout + result.stderr
    if declaration is None:
        assert "does not depend on lifetime-lint" in result.stdout
        assert "lifetime-lint vendor-runtime" in result.stdout
        assert "not applied" in result.stderr
        unsafe = _lint(module, "--fix", "--unsafe-fixes")
        assert "reclaim()" in module.read_text(), unsafe.stdout
        assert "added `from lifetime_lint.runtime import reclaim`" in unsafe.stderr


# -- every import a fix adds, against Ruff's own isort, over layouts and settings -----------

LAYOUTS = {
    "sections, a comment above a first-party import": """
        import os

        import numpy
        import torch

        from demo import __name__ as name
        # the models come last
        from demo.zeta import VALUE

        print(os, numpy, torch, name, VALUE)
        """,
    "a comment above a from-import in the third-party section": """
        import numpy
        import torch
        # modules
        from torch import nn

        print(numpy, torch, nn)
        """,
    "plain and from imports mixed in one section": """
        import json
        import os
        from os import path
        from typing import Any

        import torch
        from torch import nn


        def f(x: Any) -> None:
            print(json, os, path, torch, nn, x)
        """,
    "only the standard library, then a class": """
        \"\"\"Docstring.\"\"\"

        import os


        class A:
            pass


        print(os, A)
        """,
    "no imports, a docstring, then a function": """
        \"\"\"Docstring.\"\"\"


        def f() -> None:
            pass
        """,
    "no imports, code right away": """
        X = 1
        print(X)
        """,
    "a comment above the first import": """
        # the imports
        import torch

        print(torch)
        """,
}
ISORT_SETTINGS = {
    "defaults": "",
    "lines-between-types": "lines-between-types = 1\n",
    "from-first": "from-first = true\n",
    "lines-after-imports": "lines-after-imports = 2\n",
    "force-sort-within-sections": "force-sort-within-sections = true\n",
    "force-single-line": "force-single-line = true\n",
}
ADDED = {  # (module, name) for `from module import name`; name None: `import module`
    "third-party from": ("lifetime_lint.runtime", "reclaim"),
    "first-party from": ("demo._lifetime_runtime", "ChunkWriter"),
    "standard-library from": ("os.path", "join"),
    "merged into from torch": ("torch", "Tensor"),
    "standard-library import": ("zlib", None),
    "third-party import": ("requests", None),
    "first-party import": ("demo.extra", None),
}


@pytest.mark.parametrize("setting", sorted(ISORT_SETTINGS))
def test_added_imports_are_where_ruffs_isort_puts_them(tmp_path: Path, setting: str) -> None:
    """Each layout, made clean by Ruff itself under the project's isort setting, gets each
    import a fix may add; the result must be clean under `ruff check --select I` and
    `ruff format --check` (a comment above an import, `lines-between-types`, `from-first`,
    `lines-after-imports`, `force-sort-within-sections`, `force-single-line`)."""
    import libcst as cst

    from lifetime_lint.config import Settings
    from lifetime_lint.fixes import add_from_import_edit, apply_edits, module_reference
    from lifetime_lint.rule import FileContext

    (tmp_path / "pyproject.toml").write_text(
        PYPROJECT.format(dependency='"lifetime-lint"', line_length=88, extra="")
        + ISORT_SETTINGS[setting]
    )
    package = tmp_path / "demo"
    package.mkdir()
    originals = package / "originals"
    originals.mkdir()
    for index, layout in enumerate(LAYOUTS.values()):
        (originals / f"layout_{index}.py").write_text(textwrap.dedent(layout).lstrip())
    # Ruff makes each layout clean under this setting first: the starting point is a file
    # the project's own gate accepts.
    for command in (["check", "--select", "I", "--fix"], ["format"]):
        subprocess.run([RUFF, *command, "--no-cache", "-q", str(originals)], cwd=tmp_path,
                       check=False)  # fmt: skip
    assert not _ruff_problems(tmp_path, originals)
    fixed = package / "fixed"
    fixed.mkdir()
    for original in sorted(originals.glob("*.py")):
        for label, (module, name) in ADDED.items():
            target = fixed / f"{original.stem}_{label.replace(' ', '_')}.py"
            source = original.read_text()
            context = FileContext(str(target), source, cst.parse_module(source), "\n", Settings())
            if name is None:
                _, edits = module_reference(context, module, [])
            else:
                edits = (add_from_import_edit(context, module, name),)
            assert edits, (original.name, label)
            target.write_text(apply_edits(source, edits))
    problems = _ruff_problems(tmp_path, fixed)
    assert not problems, "\n\n".join(
        f"{path}: {what}\n{(tmp_path / path).read_text()}" for path, what in problems.items()
    )


def _ruff_problems(project: Path, folder: Path) -> dict[str, str]:
    """Files under `folder` that fail `ruff check --select I` or `ruff format --check`."""
    import json

    found: dict[str, str] = {}
    lint = subprocess.run([RUFF, "check", "--no-cache", "--select", "I", "--output-format",
                           "json", "--exit-zero", str(folder)], cwd=project, capture_output=True,
                          text=True)  # fmt: skip
    for item in json.loads(lint.stdout or "[]"):
        found[os.path.relpath(item["filename"], project)] = item["code"]
    fmt = subprocess.run([RUFF, "format", "--no-cache", "--check", str(folder)], cwd=project,
                         capture_output=True, text=True)  # fmt: skip
    for line in fmt.stdout.splitlines():
        if line.startswith("Would reformat: "):
            path = os.path.relpath(project / line.split(": ", 1)[1].strip(), project)
            found[path] = found.get(path, "") + " format"
    return found


# -- rewritten lines within the project's line length --------------------------------------

LONG_LINES = [
    "        frames = ChunkWriter(dim=1, count=latents.shape[2] // self.temporal_compression)",
    "    gathered_samples = gather_to_root(samples.contiguous(), dst=0, group=process_group)",
    "            step_losses_for_logging.append(loss_of_this_step.detach())",
    "    return torch.accelerator.device_count() > 1 and torch.accelerator.is_available()",
    "        self.outputs[index] = some_function(first_argument, second_argument, third_argument_x)",
    "    value = table[first_key, second_key, third_key, fourth_key_that_is_long, fifth_key_x]",
    "    total = summarise(item for item in collection_of_items if item is not None and item.ok)",
    "    print(message)  # a comment that makes the line long enough to pass any line length",
]


@pytest.mark.parametrize("limit", [40, 60, 79])
def test_long_rewritten_lines_are_wrapped_as_ruff_format_wraps_them(
    tmp_path: Path, limit: int
) -> None:
    """`wrap_statement_line` gives exactly `ruff format`'s layout, or leaves the line (None)
    where its one-bracket split does not make the line fit; its result is never a
    different statement."""
    from lifetime_lint.fixes import wrap_statement_line

    (tmp_path / "ruff.toml").write_text(f"line-length = {limit}\n")
    wrapped_any = False
    for index, line in enumerate(LONG_LINES):
        if len(line) <= limit:
            continue
        wrapped = wrap_statement_line(line, limit)
        depth = (len(line) - len(line.lstrip())) // 4
        prefix = "".join("    " * level + "if x:\n" for level in range(depth))
        path = tmp_path / f"case_{index}.py"
        path.write_text(prefix + line + "\n")
        subprocess.run([RUFF, "format", "--no-cache", "-q", str(path)], cwd=tmp_path, check=True)
        formatted = path.read_text()[len(prefix) :].rstrip("\n")
        if wrapped is None:
            continue
        wrapped_any = True
        assert wrapped == formatted, f"{line!r} at {limit}:\n{wrapped}\n---ruff---\n{formatted}"
        assert all(len(part) <= limit for part in wrapped.splitlines()), wrapped
    assert wrapped_any or limit < 60


def test_a_fix_line_longer_than_the_line_length_is_wrapped(tmp_path: Path) -> None:
    module = _project(tmp_path, """
        import torch


        def merge_tiles(rows: list[torch.Tensor]) -> torch.Tensor:
            decoded_frames_for_the_whole_output_video_clip = []
            for i, tile in enumerate(rows):
                if i > 0:
                    tile = torch.lerp(rows[i - 1], tile, 0.5)
                decoded_frames_for_the_whole_output_video_clip.append(tile)
            return torch.cat(decoded_frames_for_the_whole_output_video_clip, dim=2)
        """, line_length=80)  # fmt: skip
    # (the first tile is the caller's: the writer's fix is unsafe)
    after = _fix_and_check(module, "--unsafe-fixes")
    assert "ChunkWriter(\n" in after, after


@pytest.mark.parametrize("between", ["\x0c\n", "\n\x0c\n", "\x0c"])
def test_a_form_feed_between_imports_survives_the_fix(tmp_path: Path, between: str) -> None:
    """A page break is the file's own: placing an import or removing an orphaned one never
    takes a form feed for a blank line (found by the fuzz test of test_fix_safety.py)."""
    module = _project(tmp_path, "")
    module.write_bytes(
        b"import torch\n" + between.encode() + b"from torch.cuda import empty_cache\n\n\n"
        b"def f(x):\n    empty_cache()\n    return x\n"
    )
    _lint(module, "--fix")
    after = module.read_bytes()
    assert b"reclaim()" in after, after
    assert after.count(b"\x0c") == 1, after
    compile(after, str(module), "exec")
