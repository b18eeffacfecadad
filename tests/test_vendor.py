"""`lifetime-lint vendor-runtime`: a one-file copy of the runtime, generated from its sources,
importable without lifetime-lint, behaving as `lifetime_lint.runtime` does (CPU torch, real
gloo for `gather_to_root`), and checked for staleness by `check`."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import lifetime_lint.runtime as runtime
from lifetime_lint import vendor

# Imports the vendored copy with lifetime_lint made unimportable, and checks its helpers
# against torch's own results.
BEHAVIOUR = r"""
import importlib.abc, sys

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "lifetime_lint":
            raise ImportError("lifetime_lint must not be needed")

sys.meta_path.insert(0, Block())
sys.path.insert(0, sys.argv[1])
import torch
import _vendored as rt

assert sorted(rt.__all__) == sorted(sys.argv[2].split(","))
chunks = [torch.randn(2, 3, k + 1) for k in range(4)]
writer = rt.ChunkWriter(dim=2, count=4)
for chunk in chunks:
    writer.append(chunk)
assert torch.equal(writer.result(), torch.cat(chunks, dim=2))
items = [torch.ones(1), torch.zeros(1)]
taken = list(rt.release(items))
assert items == [] and len(taken) == 2
assert rt.active_device_type() is None
rt.reclaim(collect_garbage=True)
got = rt.gather_to_root(torch.arange(3.0))
assert isinstance(got, list) and torch.equal(got[0], torch.arange(3.0))
print("ok")
"""

GLOO = r"""
import os, sys
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

def work(rank, world, folder, init):
    sys.path.insert(0, folder)
    import _vendored as rt
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    sub = dist.new_group([0, 1])
    t = torch.full((2,), float(rank))
    whole = rt.gather_to_root(t, dst=0, dim=0)
    part = rt.gather_to_root(t, group=sub, group_dst=1)
    if rank == 0:
        assert torch.equal(whole, torch.tensor([0.0, 0.0, 1.0, 1.0, 2.0, 2.0])), whole
    else:
        assert whole is None
    if rank == 1:
        assert [x.tolist() for x in part] == [[0.0, 0.0], [1.0, 1.0]], part
    elif rank == 0:
        assert part is None
    dist.barrier()
    dist.destroy_process_group()

if __name__ == "__main__":
    mp.spawn(work, args=(3, sys.argv[1], "file://" + sys.argv[2]), nprocs=3, join=True)
    print("ok")
"""


def _vendored(tmp_path: Path) -> Path:
    target = tmp_path / "_vendored.py"
    result = subprocess.run(
        [sys.executable, "-m", "lifetime_lint", "vendor-runtime", str(target)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return target


def test_vendored_copy_imports_without_lifetime_lint_and_behaves_the_same(tmp_path: Path) -> None:
    _vendored(tmp_path)
    run = subprocess.run(
        [sys.executable, "-c", BEHAVIOUR, str(tmp_path), ",".join(runtime.__all__)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr


@pytest.mark.skipif(not torch.distributed.is_available(), reason="needs torch.distributed")
def test_vendored_gather_to_root_on_real_gloo_groups(tmp_path: Path) -> None:
    _vendored(tmp_path)
    script = tmp_path / "gloo_check.py"
    script.write_text(GLOO)
    run = subprocess.run(
        [sys.executable, str(script), str(tmp_path), str(tmp_path / "store")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0 and run.stdout.strip().endswith("ok"), run.stderr[-3000:]


def test_generated_from_the_runtime_sources(tmp_path: Path) -> None:
    """Not a second hand-kept copy: a change to a runtime module shows in the output."""
    copy = tmp_path / "runtime"
    shutil.copytree(vendor.runtime_folder(), copy)
    release = copy / "release.py"
    release.write_text(release.read_text() + "\n\ndef _added_for_the_test():\n    return 1\n")
    text = vendor.render(copy)
    assert "def _added_for_the_test():" in text
    assert text != vendor.render()
    for name in runtime.__all__:
        assert f"def {name}(" in text or f"class {name}" in text


def test_merging_refuses_a_name_defined_twice(tmp_path: Path) -> None:
    copy = tmp_path / "runtime"
    shutil.copytree(vendor.runtime_folder(), copy)
    (copy / "release.py").write_text(
        (copy / "release.py").read_text() + "\n\ndef reclaim():\n    pass\n"
    )
    with pytest.raises(vendor.VendorError, match="defined in both"):
        vendor.render(copy)


def test_header_version_and_hash_tell_edited_and_stale_copies(tmp_path: Path) -> None:
    target = _vendored(tmp_path)
    text = target.read_text()
    assert f"version={vendor.__version__}" in text
    current = vendor.status(target)
    assert current.current and not current.edited
    assert current.problem("pkg._vendored") is None
    target.write_text(text.replace("def release(", "def release(  ", 1))
    edited = vendor.status(target)
    assert edited.edited and "was edited" in (edited.problem("pkg._vendored") or "")
    old = vendor.render().replace(f"version={vendor.__version__}", "version=0.0.1")
    old = old.replace("def release(", "def release(  ", 1)
    body = old[vendor.STAMP.search(old).end() + 1 :]  # type: ignore[union-attr]
    digest = __import__("hashlib").sha256(body.encode()).hexdigest()
    target.write_text(
        vendor.STAMP.sub(f"# lifetime-lint-runtime: version=0.0.1 sha256={digest}", old)
    )
    stale = vendor.status(target)
    assert not stale.edited and not stale.current
    assert "out of date" in (stale.problem("pkg._vendored") or "")


def test_check_warns_about_a_stale_or_missing_runtime_module(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(textwrap.dedent("""
        [tool.lifetime-lint]
        runtime-module = "pkg._rt"
        """))  # fmt: skip
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    check = [sys.executable, "-m", "lifetime_lint", "check", "--no-cache", "pkg"]
    missing = subprocess.run(check, cwd=tmp_path, capture_output=True, text=True)
    assert "runtime-module pkg._rt: no pkg/_rt.py (or package) under" in missing.stderr
    _ = subprocess.run([sys.executable, "-m", "lifetime_lint", "vendor-runtime", "pkg/_rt.py"],
                       cwd=tmp_path, check=True, capture_output=True)  # fmt: skip
    fresh = subprocess.run(check, cwd=tmp_path, capture_output=True, text=True)
    assert "warning" not in fresh.stderr, fresh.stderr
    path = tmp_path / "pkg" / "_rt.py"
    path.write_text(path.read_text() + "# local change\n")
    edited = subprocess.run(check, cwd=tmp_path, capture_output=True, text=True)
    assert "was edited" in edited.stderr


def test_fix_reports_what_it_added_needs_and_left(tmp_path: Path) -> None:
    """`--fix` through the real CLI, in a project with a vendored runtime: the summary names
    each added import, the vendored file the fixed code now needs, and each file left
    unfixed with the reason; the file whose only import the fix orphaned starts with the
    new import (no blank line left above it)."""
    (tmp_path / "pyproject.toml").write_text(textwrap.dedent("""
        [project]
        name = "pkg"
        version = "0"
        dependencies = ["torch"]

        [tool.lifetime-lint]
        runtime-module = "pkg._rt"
        """))  # fmt: skip
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "free.py").write_text(
        "import torch\n\n\ndef free():\n    torch.cuda.empty_cache()\n"
    )
    (package / "broken.py").write_text("import torch\n\ndef f(:\n    torch.cuda.empty_cache()\n")
    subprocess.run([sys.executable, "-m", "lifetime_lint", "vendor-runtime", "pkg/_rt.py"],
                   cwd=tmp_path, check=True, capture_output=True)  # fmt: skip
    fix = subprocess.run([sys.executable, "-m", "lifetime_lint", "check", "--no-cache", "--fix",
                          "pkg"], cwd=tmp_path, capture_output=True, text=True)  # fmt: skip
    assert fix.returncode == 2, fix.stdout + fix.stderr  # the unparsable file is an error
    assert "pkg/free.py: added `from pkg._rt import reclaim`" in fix.stderr
    assert "import the vendored runtime `pkg._rt` (pkg/_rt.py)" in fix.stderr
    assert "pkg/broken.py: not fixed (E999:" in fix.stderr
    assert (package / "free.py").read_text() == (
        "from pkg._rt import reclaim\n\n\ndef free():\n    reclaim()\n"
    )
    assert "f(:" in (package / "broken.py").read_text()
