"""Do `--fix`'s edits keep real Ruff-gated repositories clean?

    python benchmarks/ruff_clean.py [--sdists DIR] [--select CODES] [NAME ...]

For each pinned repository (code from `.corpus/`, Ruff and dependency settings from the
project's own sdist: `pip download --no-deps --no-binary :all: NAME==VERSION -d DIR`), in a
fresh temporary copy per mode: `ruff check` (the project's own config, and
`--select I,E,W,F`) and `ruff format --check` before and after `lifetime-lint check --fix`,
`--fix --unsafe-fixes`, and both again with a vendored runtime (`runtime-module` set,
`lifetime-lint vendor-runtime` run first). Counts new violations per (file, code) (must be
0), new format failures (must be 0), fixed files that do not compile and added imports of a
runtime whose names the runtime module does not export or that fails to import without
lifetime-lint (must be 0), and the fixes applied. With `$OUT`, writes `ruff_clean.json`.

One read-only lint of the corpus (`--unsafe-fixes --format json`) first lists the files that
have a fix; each mode then runs `--fix` on those files (the others are never written), and
Ruff runs on the files the fix rewrote, in the copy before and after.
"""

from __future__ import annotations

import argparse
import ast
import collections
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CORPUS = Path(os.environ.get("LIFETIME_LINT_CORPUS", "/work/main/.corpus"))
RUFF = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))

# name -> (code folder in the corpus, package, sdist whose pyproject/setup.cfg configure it)
REPOSITORIES = {
    "vllm-omni": ("vllm-omni/vllm_omni", "vllm_omni", "vllm_omni-0.20.0.tar.gz"),
    "fastvideo": ("fastvideo/fastvideo", "fastvideo", "fastvideo-0.2.1.tar.gz"),
    "diffusers": ("diffusers/diffusers", "diffusers", "diffusers-0.42.1.tar.gz"),
}
MODES = {
    "fix": (False, ["--fix"]),
    "fix-unsafe": (False, ["--fix", "--unsafe-fixes"]),
    "vendored-fix": (True, ["--fix"]),
    "vendored-fix-unsafe": (True, ["--fix", "--unsafe-fixes"]),
}
VENDORED = "_lifetime_runtime"
BLOCK_LIFETIME_LINT = (
    "import importlib.abc, sys\n"
    "class B(importlib.abc.MetaPathFinder):\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name.split('.')[0] == 'lifetime_lint': raise ImportError(name)\n"
    "sys.meta_path.insert(0, B())\n"
)


def _config_files(sdist: Path, folder: Path) -> None:
    with tarfile.open(sdist) as archive:
        for member in archive.getmembers():
            parts = member.name.split("/")
            if len(parts) == 2 and parts[1] in ("pyproject.toml", "setup.cfg", "ruff.toml"):
                data = archive.extractfile(member)
                assert data is not None
                (folder / parts[1]).write_bytes(data.read())


def _ruff(
    folder: Path, *args: str, files: list[str] | None = None
) -> collections.Counter[tuple[str, str]]:
    if files == []:
        return collections.Counter()
    result = subprocess.run([RUFF, "check", "--no-cache", "--exit-zero", "--output-format",
                             "json", *args, *(files or ["."])], cwd=folder, capture_output=True,
                            text=True)  # fmt: skip
    found: collections.Counter[tuple[str, str]] = collections.Counter()
    for item in json.loads(result.stdout or "[]"):
        found[(os.path.relpath(item["filename"], folder), item["code"] or "E999")] += 1
    return found


def _unformatted(folder: Path, files: list[str] | None = None) -> set[str]:
    if files == []:
        return set()
    result = subprocess.run([RUFF, "format", "--no-cache", "--check", *(files or ["."])],
                            cwd=folder, capture_output=True, text=True)  # fmt: skip
    return {
        os.path.relpath(os.path.join(folder, line.split("Would reformat: ", 1)[1].strip()), folder)
        for line in result.stdout.splitlines()
        if line.startswith("Would reformat: ")
    }


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*.py")}


def _exports(module_file: Path) -> set[str]:
    tree = ast.parse(module_file.read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return set(ast.literal_eval(node.value))
    return set()


def fixable_files(name: str, select: str, jobs: int, cache: Path | None = None) -> list[str]:
    """The files of a repository that have a fix (unsafe included), from one read-only lint
    of the corpus: the modes then fix only those (files without a fix are never written).
    With `cache`, the list is kept there per (repository, rules, lifetime-lint source) and
    reused by a later run of the same code on the same corpus."""
    code, package, _ = REPOSITORIES[name]
    key = f"{name}:{select}:{_source_digest()}"
    saved = json.loads(cache.read_text()) if cache is not None and cache.exists() else {}
    if key in saved:
        return list(saved[key])
    result = subprocess.run([sys.executable, "-m", "lifetime_lint", "check", "--no-cache",
                             "--exit-zero", "--unsafe-fixes", "--format", "json", "--jobs",
                             str(jobs), "--select", select, "."], cwd=CORPUS / code, capture_output=True, text=True)  # fmt: skip
    found = {item["filename"] for item in json.loads(result.stdout or "[]") if item.get("fix")}
    files = sorted(f"{package}/{os.path.relpath(f, CORPUS / code)}" for f in found)
    if cache is not None:
        saved[key] = files
        cache.write_text(json.dumps(saved, indent=1))
    return files


def _source_digest() -> str:
    """A digest of the linter's own code (lifetime_lint/, rules/): a cached list of fixable
    files is reused only by the code that produced it."""
    digest = hashlib.sha256()
    for folder in ("lifetime_lint", "rules"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _run_mode(
    name: str, mode: str, sdists: Path, work: Path, files: list[str], select: str, jobs: int
) -> dict[str, Any]:
    code, package, sdist = REPOSITORIES[name]
    vendored, flags = MODES[mode]
    folder = work / f"{name}-{mode}"
    shutil.copytree(CORPUS / code, folder / package)
    _config_files(sdists / sdist, folder)
    subprocess.run(["git", "init", "-q"], cwd=folder, check=True)  # Ruff honours .gitignore
    row: dict[str, Any] = {"repository": name, "mode": mode, "config_from": sdist}
    runtime_module = "lifetime_lint.runtime"
    if vendored:
        runtime_module = f"{package}.{VENDORED}"
        with open(folder / "pyproject.toml", "a", encoding="utf-8") as handle:
            handle.write(f'\n[tool.lifetime-lint]\nruntime-module = "{runtime_module}"\n')
        subprocess.run([sys.executable, "-m", "lifetime_lint", "vendor-runtime",
                        f"{package}/{VENDORED}.py"], cwd=folder, check=True)  # fmt: skip
    # Fixes change only the files they rewrite: Ruff runs on those, before (in an untouched
    # copy, so every file's own config and excludes apply alike) and after.
    before_files = _snapshot(folder)
    pristine = work / f"{name}-{mode}-before"
    shutil.copytree(folder, pristine)
    lint = subprocess.run([sys.executable, "-m", "lifetime_lint", "check", "--no-cache",
                           "--exit-zero", "--jobs", str(jobs), "--select", select, *flags, *files],
                          cwd=folder, capture_output=True, text=True)  # fmt: skip
    fixed = re.search(r"\((\d+) fixed, (\d+) remaining\)", lint.stdout)
    row["select"] = select
    row["fixes_applied"] = int(fixed.group(1)) if fixed else 0
    row["findings_remaining"] = int(fixed.group(2)) if fixed else None
    after_files = _snapshot(folder)
    changed = sorted(p for p in after_files if before_files.get(p) != after_files[p])
    row["files_changed"] = len(changed)
    before_own = _ruff(pristine, files=changed)
    before_iewf = _ruff(pristine, "--select", "I,E,W,F", files=changed)
    before_format = _unformatted(pristine, files=changed)
    shutil.rmtree(pristine)
    after_own = _ruff(folder, files=changed)
    after_iewf = _ruff(folder, "--select", "I,E,W,F", files=changed)
    after_format = _unformatted(folder, files=changed)
    for label, before, after in (("own_config", before_own, after_own),
                                 ("select_IEWF", before_iewf, after_iewf)):  # fmt: skip
        new = {f"{f}:{c}": after[(f, c)] - before[(f, c)] for f, c in after
               if after[(f, c)] > before[(f, c)]}  # fmt: skip
        row[f"new_violations_{label}"] = sum(new.values())
        row[f"new_violations_{label}_detail"] = new
    row["new_format_failures"] = sorted(after_format - before_format)
    exports = (
        _exports(folder / package / f"{VENDORED}.py")
        if vendored
        else set(__import__("lifetime_lint.runtime").runtime.__all__)
    )
    broken: list[str] = []
    added: collections.Counter[str] = collections.Counter()
    for path in changed:
        text = after_files[path].decode("utf-8")
        try:
            tree = compile(text, path, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
        except SyntaxError as error:
            broken.append(f"{path}: does not compile: {error}")
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module in (
                runtime_module,
                "lifetime_lint.runtime",
            ):
                for alias in node.names:
                    added[f"{node.module}.{alias.name}"] += 1
                    if node.module != runtime_module:
                        broken.append(f"{path}: imports {node.module}, not {runtime_module}")
                    elif alias.name not in exports:
                        broken.append(f"{path}: {alias.name} is not in {runtime_module}")
    if vendored:
        # Loaded by path: importing it as `pkg._lifetime_runtime` would run the package's
        # `__init__`, which needs the project's own dependencies (not installed here).
        load = (
            "import importlib.util as u\n"
            f"s = u.spec_from_file_location('rt', '{package}/{VENDORED}.py')\n"
            "m = u.module_from_spec(s); s.loader.exec_module(m); print(sorted(m.__all__))\n"
        )
        check = subprocess.run([sys.executable, "-c", BLOCK_LIFETIME_LINT + load], cwd=folder,
                               capture_output=True, text=True)  # fmt: skip
        if check.returncode != 0:
            broken.append(f"{runtime_module} fails to import: {check.stderr[-400:]}")
    if vendored:  # the vendored file itself must pass the project's own gates
        own = _ruff(folder, files=[f"{package}/{VENDORED}.py"])
        unformatted = _unformatted(folder, files=[f"{package}/{VENDORED}.py"])
        row["vendored_file_violations"] = sum(own.values())
        row["vendored_file_unformatted"] = bool(unformatted)
        if own or unformatted:
            broken.append(
                f"{package}/{VENDORED}.py fails the project's ruff: {dict(own)} {unformatted}"
            )
    row["runtime_imports_added"] = dict(added)
    row["broken"] = broken
    row["lint_stderr_tail"] = lint.stderr.strip().splitlines()[-12:]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", default=list(REPOSITORIES))
    parser.add_argument(
        "--sdists", default=os.environ.get("LIFETIME_LINT_SDISTS", "/tmp/h6play/sdists")
    )
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--select", default="ALL", help="rules to fix (default: all)")
    parser.add_argument("--jobs", "-j", type=int, default=1, help="lint processes (default 1)")
    parser.add_argument("--file-list-cache", type=Path, help="keep the fixable-file lists here")
    parser.add_argument(
        "--files-from",
        type=Path,
        help="the fixable files of the (one) named repository, one a line, from an earlier "
        "read-only pre-pass: skips the pre-pass",
    )
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="ruff-clean-") as work:
        for name in args.names:
            if args.files_from is not None:
                files = args.files_from.read_text().split()
            else:
                files = fixable_files(name, args.select, args.jobs, args.file_list_cache)
            print(f"{name}: {len(files)} files with a fix ({args.select})", flush=True)
            for mode in args.modes.split(","):
                row = _run_mode(
                    name, mode, Path(args.sdists), Path(work), files, args.select, args.jobs
                )
                row["files_with_a_fix"] = len(files)
                rows.append(row)
                print(f"{name:10s} {mode:20s} fixes={row['fixes_applied']:4d} "
                      f"files={row['files_changed']:3d} "
                      f"new(own)={row['new_violations_own_config']} "
                      f"new(IEWF)={row['new_violations_select_IEWF']} "
                      f"new-format={len(row['new_format_failures'])} broken={len(row['broken'])}",
                      flush=True)  # fmt: skip
                for key in (
                    "new_violations_own_config_detail",
                    "new_violations_select_IEWF_detail",
                ):
                    if row[key]:
                        print("   ", key, row[key])
                for item in row["new_format_failures"] + row["broken"]:
                    print("   ", item)
    out = os.environ.get("OUT")
    if out:
        Path(out, "ruff_clean.json").write_text(json.dumps(rows, indent=2))
    bad = sum(r["new_violations_own_config"] + r["new_violations_select_IEWF"]
              + len(r["new_format_failures"]) + len(r["broken"]) for r in rows)  # fmt: skip
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
