"""What a fix, or a rule, needs to know about the project or package a file belongs to.

Two facts, read from the project's own files once per folder: whether the project declares
lifetime-lint as a dependency (so a fix may import `lifetime_lint.runtime` there), and how
its import sorter wants imports laid out (Ruff's `[tool.ruff.lint.isort]`, or isort's
`[tool.isort]`), so an import a fix adds is where `ruff check --select I` expects it.
And one fact for LL004/LL005, read from a module's sibling files: whether its package is
CUDA-only (`cuda_package`), or the whole project it belongs to (`cuda_project`).
"""

from __future__ import annotations

import fnmatch
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lifetime_lint.lazy_regex import compile_lazily

# Files that mark a project's root (the search for its settings stops there).
_ROOT_MARKERS = ("pyproject.toml", "setup.cfg", "setup.py")
_RUFF_FILES = (".ruff.toml", "ruff.toml")
_DISTRIBUTION = compile_lazily(r"^\s*lifetime[-_.]lint(?![\w.-])", re.IGNORECASE)

FUTURE, STDLIB, THIRD_PARTY, FIRST_PARTY, LOCAL_FOLDER = range(5)
SECTION_NAMES = {
    "future": FUTURE,
    "standard-library": STDLIB,
    "third-party": THIRD_PARTY,
    "first-party": FIRST_PARTY,
    "local-folder": LOCAL_FOLDER,
}


@dataclass(frozen=True)
class ImportStyle:
    """The import sorter's settings that decide where an added import goes (Ruff's defaults)."""

    known_first_party: tuple[str, ...] = ()
    known_third_party: tuple[str, ...] = ()
    known_local_folder: tuple[str, ...] = ()
    src: tuple[str, ...] = ()  # folders whose top-level packages are first-party
    line_length: int = 88
    # The line length the project's own Ruff/isort settings name (None: no such settings,
    # so rewritten lines are left as the fix writes them).
    configured_line_length: int | None = None
    force_single_line: bool = False
    force_sort_within_sections: bool = False
    order_by_type: bool = True
    case_sensitive: bool = False
    from_first: bool = False  # `from x import y` before `import x` within a section
    lines_between_types: int = 0  # blank lines between the `import x` and `from x` runs
    lines_after_imports: int = -1  # -1: the formatter's choice (1, or 2 before a def/class)

    def section_of(self, module: str) -> int:
        """Ruff's section for an absolute import of `module`."""
        top = module.split(".")[0]
        if top == "__future__":
            return FUTURE
        for patterns, section in (
            (self.known_local_folder, LOCAL_FOLDER),
            (self.known_first_party, FIRST_PARTY),
            (self.known_third_party, THIRD_PARTY),
        ):
            if any(_module_matches(module, pattern) for pattern in patterns):
                return section
        if top in _stdlib_names():
            return STDLIB
        for folder in self.src:
            if os.path.isdir(os.path.join(folder, top)) or os.path.isfile(
                os.path.join(folder, top + ".py")
            ):
                return FIRST_PARTY
        return THIRD_PARTY

    def module_key(self, module: str) -> tuple[str, str]:
        return (module, module) if self.case_sensitive else (module.lower(), module)

    def member_key(self, name: str, asname: str | None = None) -> tuple[Any, ...]:
        """Ruff's order of the names in `from x import ...` (constants, classes, others)."""
        kind = 0
        if self.order_by_type:
            if len(name) > 1 and name.isupper():
                kind = 0
            elif name[:1].isupper():
                kind = 1
            else:
                kind = 2
        return (kind, *self.module_key(name), asname or "")


@dataclass(frozen=True)
class Project:
    root: str | None  # the folder with pyproject.toml / setup.cfg / setup.py, if any
    declares: bool  # whether its metadata lists lifetime-lint among its requirements
    style: ImportStyle = field(default_factory=ImportStyle)
    has_metadata: bool = False  # any pyproject/setup/requirements file on the way up

    @property
    def declares_lifetime_lint(self) -> bool:
        """Whether code here may import `lifetime_lint`: the project lists it, or there is
        no project metadata at all (a loose script, run where the linter is installed)."""
        return self.declares or not self.has_metadata


# folder -> (its project stamp when read, its project)
_PROJECTS: dict[str, tuple[str | None, Project]] = {}


def project_for(path: str) -> Project:
    """The project of the file at `path` (memoised per folder; a long-running process
    calls `forget_changed_projects` to see edits of the project's files)."""
    folder = os.path.dirname(os.path.abspath(path))
    memo = _PROJECTS.get(folder)
    if memo is None:
        stamp = project_stamp(folder)
        memo = _PROJECTS[folder] = (stamp, _read_project(folder))
    return memo[1]


def forget_changed_projects() -> int:
    """Drop the memoised projects whose files changed on disk since they were read (an
    edited, added or removed pyproject.toml, setup.cfg, requirements file, ruff.toml); the
    language server calls this before each lint. Returns how many were dropped."""
    stamps: dict[str, str | None] = {}
    changed = [
        folder
        for folder, (stamp, _) in _PROJECTS.items()
        if stamp is None or project_stamp(folder, stamps) != stamp
    ]
    for folder in changed:
        del _PROJECTS[folder]
    return len(changed) + forget_changed_packages()


# Names `_read_project` may read in each folder of the search (and the `requirements/`
# folder's *.txt/*.in); requirements*.txt/.in are matched by prefix.
_PROJECT_FILES = (*_ROOT_MARKERS, *_RUFF_FILES)
# A project file modified this recently may change again within the file system's
# timestamp granularity (FAT: 2 s) without its stat changing: not stamped. (A folder's
# time is not held to this: the run's own cache folder may just have been created in it.)
RACY_SECONDS = 2.0


def project_stamp(folder: str, memo: dict[str, str | None] | None = None) -> str | None:
    """A string that changes whenever a file `_read_project(folder)` reads may have changed,
    found by `stat` alone (no file is read or parsed): each folder of the search (up to the
    project root, as `_read_project` walks) with its modification time (a file added,
    removed or replaced by rename) and the size, times and inode of each project file and
    configuration module in it (an in-place edit). None when something was modified too recently to be trusted.

    `memo`: stamps of single folders already computed in this pass (parents are shared)."""
    import time

    now = time.time_ns()
    parts: list[str] = []
    directory = folder
    while True:
        part = memo.get(directory, "") if memo is not None else ""
        if part == "":
            part = _folder_stamp(directory, now)
            if memo is not None:
                memo[directory] = part
        if part is None:
            return None
        parts.append(part)
        if part.endswith("!"):  # a root marker: the search stops here
            break
        parent = os.path.dirname(directory)
        if parent == directory:
            break
        directory = parent
    return "\0".join(parts)


def _folder_stamp(directory: str, now_ns: int) -> str | None:
    racy = now_ns - int(RACY_SECONDS * 1e9)
    try:
        info = os.stat(directory)
    except OSError:
        return f"{directory}:missing"
    items = [f"{directory}:{info.st_mtime_ns}:{info.st_ino}"]
    names = _listdir(directory)
    wanted = [
        name
        for name in names
        if name in _PROJECT_FILES
        or (name.startswith("requirements") and name.endswith((".txt", ".in")))
        or _is_config_module(name)  # LL002 reads defaults there (`config_field_default`)
    ]
    if "requirements" in names:
        wanted.extend(
            os.path.join("requirements", name)
            for name in _listdir(os.path.join(directory, "requirements"))
        )
        wanted.append("requirements")
    for name in wanted:
        try:
            item = os.stat(os.path.join(directory, name))
        except OSError:
            continue
        if max(item.st_mtime_ns, item.st_ctime_ns) >= racy:
            return None
        items.append(f"{name}:{item.st_size}:{item.st_mtime_ns}:{item.st_ctime_ns}:{item.st_ino}")
    root = any(name in _ROOT_MARKERS and os.path.isfile(os.path.join(directory, name))
               for name in names)  # fmt: skip
    return ";".join(items) + ("!" if root else "")


def _read_project(folder: str) -> Project:
    declares = False
    has_metadata = False
    style: ImportStyle | None = None
    root: str | None = None
    directory = folder
    while True:
        has_metadata = has_metadata or _has_metadata(directory)
        if not declares:
            declares = _declares_in(directory)
        if style is None:
            style = _style_in(directory)
        if any(os.path.isfile(os.path.join(directory, name)) for name in _ROOT_MARKERS):
            root = directory
            break
        parent = os.path.dirname(directory)
        if parent == directory:
            break
        directory = parent
    if style is None:
        base = root or folder
        style = ImportStyle(src=(base, os.path.join(base, "src")))
    return Project(root, declares, style, has_metadata)


def _has_metadata(directory: str) -> bool:
    names = _listdir(directory)
    return any(name in _ROOT_MARKERS for name in names) or any(
        name.startswith("requirements") and name.endswith((".txt", ".in")) for name in names
    )


# -- dependency declarations -------------------------------------------------------------


def _declares_in(directory: str) -> bool:
    pyproject = _load_toml(os.path.join(directory, "pyproject.toml"))
    if pyproject and any(_names_lifetime_lint(item) for item in _pyproject_requirements(pyproject)):
        return True
    if _setup_cfg_declares(os.path.join(directory, "setup.cfg")):
        return True
    setup_py = _read_text(os.path.join(directory, "setup.py"))
    if setup_py and re.search(r"""["']lifetime[-_.]lint(?![\w.-])""", setup_py, re.I):
        return True
    candidates = []
    for name in _listdir(directory):
        if name.startswith("requirements") and name.endswith((".txt", ".in")):
            candidates.append(os.path.join(directory, name))
    requirements_dir = os.path.join(directory, "requirements")
    for name in _listdir(requirements_dir):
        if name.endswith((".txt", ".in")):
            candidates.append(os.path.join(requirements_dir, name))
    return any(
        _names_lifetime_lint(line)
        for candidate in candidates
        for line in (_read_text(candidate) or "").splitlines()
    )


def _pyproject_requirements(data: dict[str, Any]) -> list[str]:
    """Every requirement the pyproject lists, and the project's own name (lifetime-lint
    itself, and its fixtures, may use its runtime)."""
    project = data.get("project", {})
    found: list[str] = list(_strings(project.get("name")))
    found.extend(_strings(project.get("dependencies")))
    for extra in (project.get("optional-dependencies") or {}).values():
        found.extend(_strings(extra))
    for group in (data.get("dependency-groups") or {}).values():
        found.extend(_strings(group))
    poetry = data.get("tool", {}).get("poetry", {})
    found.extend(str(name) for name in (poetry.get("dependencies") or {}))
    for group in (poetry.get("group") or {}).values():
        found.extend(str(name) for name in (group.get("dependencies") or {}))
    return found


def _setup_cfg_declares(path: str) -> bool:
    text = _read_text(path)
    if not text or not re.search(r"lifetime[-_.]lint", text, re.I):
        return False
    import configparser  # only for a setup.cfg that names lifetime-lint

    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error:
        return False
    values = []
    if parser.has_option("options", "install_requires"):
        values.append(parser.get("options", "install_requires"))
    if parser.has_section("options.extras_require"):
        values.extend(value for _, value in parser.items("options.extras_require"))
    return any(_names_lifetime_lint(line) for value in values for line in value.splitlines())


def _names_lifetime_lint(requirement: str) -> bool:
    return bool(_DISTRIBUTION.match(requirement.split("#")[0]))


# -- import-sorter settings --------------------------------------------------------------


def _style_in(directory: str) -> ImportStyle | None:
    """The Ruff or isort settings defined in this folder, if any (Ruff's win)."""
    for name in _RUFF_FILES:
        data = _load_toml(os.path.join(directory, name))
        if data is not None:
            return _ruff_style(data, directory)
    data = _load_toml(os.path.join(directory, "pyproject.toml"))
    if data is None:
        return None
    tool = data.get("tool", {})
    if "ruff" in tool:
        return _ruff_style(tool["ruff"], directory)
    if "isort" in tool:
        return _isort_style(tool["isort"], directory)
    return None


def _ruff_style(ruff: dict[str, Any], directory: str) -> ImportStyle:
    lint = ruff.get("lint", {})
    isort = lint.get("isort", ruff.get("isort", {}))
    src = tuple(os.path.join(directory, folder) for folder in _strings(ruff.get("src")))
    return ImportStyle(
        known_first_party=tuple(_strings(isort.get("known-first-party"))),
        known_third_party=tuple(_strings(isort.get("known-third-party"))),
        known_local_folder=tuple(_strings(isort.get("known-local-folder"))),
        src=src or (directory, os.path.join(directory, "src")),
        line_length=int(ruff.get("line-length", 88)),
        configured_line_length=int(ruff.get("line-length", 88)),
        force_single_line=bool(isort.get("force-single-line", False)),
        force_sort_within_sections=bool(isort.get("force-sort-within-sections", False)),
        order_by_type=bool(isort.get("order-by-type", True)),
        case_sensitive=bool(isort.get("case-sensitive", False)),
        from_first=bool(isort.get("from-first", False)),
        lines_between_types=_integer(isort.get("lines-between-types"), 0),
        lines_after_imports=_integer(isort.get("lines-after-imports"), -1),
    )


def _isort_style(isort: dict[str, Any], directory: str) -> ImportStyle:
    src = tuple(os.path.join(directory, folder) for folder in _strings(isort.get("src_paths")))
    profile = isort.get("profile")
    return ImportStyle(
        known_first_party=tuple(_strings(isort.get("known_first_party"))),
        known_third_party=tuple(_strings(isort.get("known_third_party"))),
        known_local_folder=tuple(_strings(isort.get("known_local_folder"))),
        src=src or (directory, os.path.join(directory, "src")),
        line_length=int(isort.get("line_length", 88 if profile == "black" else 79)),
        force_single_line=bool(isort.get("force_single_line", False)),
        force_sort_within_sections=bool(isort.get("force_sort_within_sections", False)),
        order_by_type=bool(isort.get("order_by_type", True)),
        case_sensitive=bool(isort.get("case_sensitive", False)),
        from_first=bool(isort.get("from_first", False)),
        lines_between_types=_integer(isort.get("lines_between_types"), 0),
        lines_after_imports=_integer(isort.get("lines_after_imports"), -1),
    )


def _module_matches(module: str, pattern: str) -> bool:
    return (
        module == pattern
        or module.startswith(pattern + ".")
        or fnmatch.fnmatchcase(module, pattern)
        or fnmatch.fnmatchcase(module.split(".")[0], pattern)
    )


def _stdlib_names() -> frozenset[str]:
    names = getattr(sys, "stdlib_module_names", None)
    if names is None:  # pragma: no cover - Python 3.9
        names = set(sys.builtin_module_names) | {
            "abc", "argparse", "ast", "asyncio", "collections", "contextlib", "copy",
            "dataclasses", "enum", "functools", "gc", "importlib", "inspect", "io",
            "itertools", "json", "logging", "math", "os", "pathlib", "pickle", "random",
            "re", "shutil", "subprocess", "sys", "tempfile", "threading", "time", "types",
            "typing", "unittest", "warnings", "weakref",
        }  # fmt: skip
    return frozenset(names)


# -- small file helpers ------------------------------------------------------------------


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)):
        return [item for item in value if isinstance(item, str)]
    return []


def _integer(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _load_toml(path: str) -> dict[str, Any] | None:
    if sys.version_info >= (3, 11):  # imported here: a warm run reads no project file
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return None


def read_text(path: str) -> str | None:
    """The text of the file at `path` (undecodable bytes replaced), or None: unreadable."""
    return _read_text(path)


def _read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def _listdir(directory: str) -> list[str]:
    try:
        return sorted(os.listdir(directory))
    except OSError:
        return []


# -- the CUDA-only package a module belongs to (a fact read from its sibling files) ------
#
# A module's own text may not say it is CUDA-only while its package does: a package that
# ships CUDA sources (`csrc/`, `*.cu`) whose modules launch the kernels built from them, or
# one whose modules import CUDA's own Python driver or a CUDA-only kernel library at top
# level (`from cuda.bindings import driver`). Either is evidence only while no module of
# the package names another backend (`npu`, `xpu`, `mps`, ...): then `torch.cuda` there is
# the device API by design, not a portability bug. The fact is read from other files, so
# what it read is stamped by `stat` (`cuda_package_stamp`) for the stat index and the run
# memo, and its reason is part of each dependent file's content key (`cache.Cache.key`).

# Libraries that are a CUDA program's own driver or kernels (`cuda` is cuda-python:
# `cuda.bindings`, `cuda.cuda`, `cuda.cudart`). Not monitoring or tooling libraries
# (`pynvml`, `nvtx`) that multi-backend utility packages import beside portable code.
_PACKAGE_CUDA_LIBRARIES = ("cuda", "cupy", "pycuda", "cutlass", "flashinfer", "deep_gemm",
                           "tensorrt", "deep_ep", "nvshmem")  # fmt: skip
_TOP_LEVEL_CUDA_IMPORT = compile_lazily(
    r"^(?:import|from)[ \t]+(" + "|".join(_PACKAGE_CUDA_LIBRARIES) + r")(?=[. \t]|$)", re.M
)
# Another backend a package's module or folder may name (`devices._OTHER_BACKEND` less the
# ones where `torch.cuda` is the device API: ROCm's HIP, and for CUDA sources, which are
# compiled by MUSA's CUDA-compatible toolchain too, MUSA).
_NON_CUDA_BACKEND = compile_lazily(
    r"(?<![A-Za-z0-9])(mps|npu|xpu|hpu|mlu|musa|mtia|tpu|xla|neuron|habana|ascend|gaudi|"
    r"privateuse1|intel_extension_for_pytorch|ipex)(?![A-Za-z0-9])",
    re.IGNORECASE,
)
_NON_CUDA_DIALECT = compile_lazily(_NON_CUDA_BACKEND.pattern.replace("musa|", ""), re.I)
_CUDA_SOURCE_SUFFIXES = (".cu", ".cuh")
# A package folder named for a CUDA-only kernel library: a vendored copy or wrapper of its
# kernels (gptqmodel's `exllamav3/`, sglang's `marlin_lora_temp/`), whose kernels exist
# only for NVIDIA GPUs (ExLlama, Marlin and Machete are CUDA (and HIP) GEMMs, BitBLAS
# and SageAttention CUDA kernels, FlashMLA Hopper's). The name alone is evidence only
# while no module of the folder's tree names another backend, as for shipped sources.
_CUDA_KERNEL_LIBRARY_FOLDER = compile_lazily(
    r"(?:[a-z0-9]+_)*(?:exllama(?:v\d+)?|marlin|machete|bitblas|sageattention|sage_attention|"
    r"flash_mla|flashmla)(?:_[a-z0-9]+)*",
    re.IGNORECASE,
)


def _ships_cuda_sources(listing: list[str]) -> bool:
    return "csrc" in listing or any(n.endswith(_CUDA_SOURCE_SUFFIXES) for n in listing)


def _names_cuda_kernel_library(directory: str) -> bool:
    return _CUDA_KERNEL_LIBRARY_FOLDER.fullmatch(os.path.basename(directory)) is not None


@dataclass(frozen=True)
class CudaPackage:
    """Why the package of a folder is CUDA-only (None: it is not, or no package)."""

    reason: str | None
    files: tuple[str, ...] = ()  # the Python files the fact may read
    folders: tuple[str, ...] = ()  # the folders whose listing it depends on


# folder -> (stamp of its inputs when read, the fact)
_PACKAGES: dict[str, tuple[str | None, CudaPackage]] = {}
# package that ships CUDA sources -> whether its tree names another backend, this pass
_SOURCE_TREES_OTHER_BACKEND: dict[str, bool] = {}
# folder -> the fact's inputs (listings only), this process
_PACKAGE_INPUTS: dict[str, tuple[tuple[str, ...], tuple[str, ...], str | None]] = {}


def cuda_package(path: str) -> CudaPackage:
    """The CUDA-only package the module at `path` belongs to (memoised per folder; a
    long-running process calls `forget_changed_projects` to see edits of sibling files)."""
    folder = os.path.dirname(os.path.abspath(path))
    memo = _PACKAGES.get(folder)
    if memo is None:
        import time

        started = time.time_ns()
        fact = _read_cuda_package(folder)
        memo = _PACKAGES[folder] = (cuda_package_stamp(folder, started), fact)
    return memo[1]


def cuda_package_read_stamp(path: str) -> str | None:
    """The stamp of the package fact of `path` as it was read (None: not trusted)."""
    cuda_package(path)
    return _PACKAGES[os.path.dirname(os.path.abspath(path))][0]


def cuda_package_stamp(
    folder: str, now_ns: int | None = None, memo: dict[str, str | None] | None = None
) -> str | None:
    """A string that changes whenever a file or listing `cuda_package` reads for the
    modules of `folder` may have changed, by `stat` alone (None: something was modified
    too recently to trust, within `RACY_SECONDS` of `now_ns`). `memo`: the stat part of
    each path already taken in this pass (the folders of one package share a tree)."""
    import time

    racy = (time.time_ns() if now_ns is None else now_ns) - int(RACY_SECONDS * 1e9)
    files, folders, _ = package_inputs(folder)
    parts: list[str] = []
    for path, is_file in [*((d, False) for d in folders), *((f, True) for f in files)]:
        part = memo.get(path, "") if memo is not None else ""
        if part == "":
            part = _stat_part(path, is_file, racy)
            if memo is not None:
                memo[path] = part
        if part is None:
            return None
        parts.append(part)
    return "\0".join(parts)


def _stat_part(path: str, is_file: bool, racy_ns: int) -> str | None:
    try:
        info = os.stat(path)
    except OSError:
        return f"{path}:missing"
    if not is_file:  # a folder: its time changes when an entry is added, removed, renamed
        return f"{path}:{info.st_mtime_ns}:{info.st_ino}"
    if max(info.st_mtime_ns, info.st_ctime_ns) >= racy_ns:
        return None
    return f"{path}:{info.st_size}:{info.st_mtime_ns}:{info.st_ctime_ns}:{info.st_ino}"


def package_inputs(folder: str) -> tuple[tuple[str, ...], tuple[str, ...], str | None]:
    """What the package fact of `folder` depends on, from listings alone: the Python files
    it may read, the folders whose listings decide them, and the package that ships CUDA
    sources (the folder or its nearest enclosing package with a `csrc/` or `*.cu`, or
    named for a CUDA-only kernel library: `exllamav3/`), if any. Not a package (no
    `__init__.py`): the inputs of the project fact of the package it sits in (exllamav2's
    `conversion/`), if any, and the folders of the device-layer fact."""
    memo = _PACKAGE_INPUTS.get(folder)
    if memo is not None:
        return memo
    names = _listdir(folder)
    folders = [folder]
    files: list[str] = []
    sources: str | None = None
    if "__init__.py" in names:
        files = [os.path.join(folder, n) for n in names if n.endswith(".py")]
        directory, listing = folder, names
        while "__init__.py" in listing:
            if _ships_cuda_sources(listing) or _names_cuda_kernel_library(directory):
                sources = directory
                break
            parent = os.path.dirname(directory)
            if parent == directory:
                break
            directory, listing = parent, _listdir(parent)
            folders.append(directory)
        if sources is not None:
            tree_files, tree_folders = _python_tree(sources)
            files = sorted(set(files).union(tree_files))
            folders = sorted(set(folders).union(tree_folders))
        project = _project_fact(folder)
        if project is not None:
            _, evidence_files, evidence_folders = project
            files = sorted(set(files).union(evidence_files))
            folders = sorted(set(folders).union(evidence_folders))
    else:  # a folder inside a package (exllamav2's `conversion/`) is in its project
        project = _project_fact(folder)
        if project is not None:
            files, folders = sorted(project[1]), sorted({folder, *project[2]})
    layer = _device_layer_fact(folder)  # also for a folder inside a package (namespace)
    if layer is not None:
        folders = sorted(set(folders).union(layer[1]))
    exclusion = _exclusion_fact(folder)
    if exclusion is not None:
        files = sorted(set(files).union(exclusion[1]))
        folders = sorted(set(folders).union(exclusion[2]))
    memo = _PACKAGE_INPUTS[folder] = (tuple(files), tuple(folders), sources)
    return memo


# -- the CUDA-only project a package belongs to -------------------------------------------
#
# A project whose every module (its installable package, or the whole repository where the
# package sits beside its `pyproject.toml`/`setup.py`) names no backend but CUDA: no
# `npu`/`xpu`/`mps`/... branch (ROCm's HIP is `torch.cuda`), no `torch.accelerator`, no
# platform layer (a `platforms/` folder, a `*Platform` class). Its `torch.cuda` calls are the device API by
# design (audiocraft, stable-audio-tools, NVIDIA's Cosmos): LL004/LL005 leave them out by
# default (`portability = "strict"` reports them). Too small a tree (a few modules) is no
# evidence; too large a one is not read.
PROJECT_MIN_MODULES = 20
CUDA_PROJECT = "a CUDA-only project"  # how its reason starts
# A project that imports `torch_npu.contrib.transfer_to_npu` has Ascend's plugin rebind
# every `torch.cuda` function to its `torch.npu` twin for the whole process: its
# `torch.cuda.empty_cache()` empties the NPU's cache there, and on CUDA CUDA's. Where the
# project chooses no backend but those two, its `torch.cuda` calls are right on each.
REDIRECTED_PROJECT = "a project whose torch.cuda calls run on the NPU too"  # its reason's start
_TRANSFER_TO_NPU = compile_lazily(
    r"^[ \t]*(?:from[ \t]+torch_npu\.contrib[ \t]+import[ \t]+(?:\([ \t]*)?transfer_to_npu\b"
    r"|import[ \t]+torch_npu\.contrib\.transfer_to_npu\b)",
    re.M,
)
PROJECT_MAX_MODULES = 20000
# ROCm is not another backend here: on ROCm `torch.cuda` is HIP, so a CUDA-and-ROCm project
# (xformers: `torch.version.hip` branches for its kernels) calls the right API. Nor is MTIA,
# Meta's in-house accelerator with no public build: a `torch.mtia.is_available()` default
# (xformers' bias device) does not make a project portable for its users. ("neuron" only
# as AWS's library.)
_PROJECT_BACKEND_WORDS = (
    "mps|npu|xpu|hpu|mlu|musa|tpu|xla|neuronx|torch_neuronx?|habana|"
    "ascend|gaudi|privateuse1|intel_extension_for_pytorch|ipex"
)
_PROJECT_OTHER_BACKEND = compile_lazily(
    rf"(?<![A-Za-z0-9])({_PROJECT_BACKEND_WORDS})(?![A-Za-z0-9])"
    r"|\btorch\.accelerator\b|\bget_device_module\b"
    r"|\bclass[ \t]+\w*(?:Platform|DeviceInterface)\b",
    re.IGNORECASE,
)
# The same search over an ASCII text lowered (the project scan reads every module, and this
# is about twice as fast on them): case-sensitive, and each branch starts with its first
# letter (the boundary test moved after it: `m(?<![A-Za-z0-9][\s\S])ps` is
# `(?<![A-Za-z0-9])mps`), so `re` tries a branch only where one of those letters stands.
# A text with other characters keeps the pattern above (Unicode case folding: `ſ`, `K`).
_AFTER_NO_ALNUM = r"(?<![A-Za-z0-9][\s\S])"
_AFTER_NO_WORD = r"(?<!\w[\s\S])"
_PROJECT_OTHER_BACKEND_LOWERED = compile_lazily(
    "(?:"
    + "|".join(w[0] + _AFTER_NO_ALNUM + w[1:] for w in _PROJECT_BACKEND_WORDS.split("|"))
    + r")(?![A-Za-z0-9])"
    + rf"|t{_AFTER_NO_WORD}orch\.accelerator\b"
    + rf"|g{_AFTER_NO_WORD}et_device_module\b"
    + rf"|c{_AFTER_NO_WORD}lass[ \t]+\w*(?:platform|deviceinterface)\b",
    0,
)


def _text_names_another_backend(text: str) -> bool:
    """`_PROJECT_OTHER_BACKEND.search(text)` found something."""
    if text.isascii():
        return _PROJECT_OTHER_BACKEND_LOWERED.search(text.lower()) is not None
    return _PROJECT_OTHER_BACKEND.search(text) is not None


_PLATFORM_FOLDERS = frozenset({"platforms", "platform", "hardware_backend", "device_backends"})
_SKIPPED_FOLDERS = frozenset({"__pycache__", "node_modules", "build", "dist", "site-packages"})
# top package folder -> (project root, its Python files, its folders), this process
_PROJECT_TREES: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]] | None] = {}
# project root -> (why it is CUDA-only or None, the files and folders that decide it)
_PROJECT_FACTS: dict[str, tuple[str | None, tuple[str, ...], tuple[str, ...]]] = {}


_TOP_PACKAGES: dict[str, str | None] = {}  # folder -> its top-level package, or None


def project_tree(folder: str) -> tuple[str, tuple[str, ...], tuple[str, ...]] | None:
    """The project of the package in `folder`: its root (the folder above the top-level
    package, or above its `src/`, where that holds a `pyproject.toml`, `setup.cfg` or
    `setup.py`; else the top-level package itself), its Python files and its folders
    (hidden, build and cache folders left out). A folder without `__init__.py` inside a
    package is in that package's project. None: `folder` is neither."""
    if "__init__.py" not in _listdir(folder):
        package = _enclosing_package(folder)
        if package is None:
            return None
        folder = package
    top = top_package(folder)
    assert top is not None  # `folder` holds an `__init__.py`
    if top in _PROJECT_TREES:
        return _PROJECT_TREES[top]
    root = top
    above = os.path.dirname(top)
    if os.path.basename(above) == "src":
        above = os.path.dirname(above)
    if any(name in _ROOT_MARKERS for name in _listdir(above)):
        root = above
    files: list[str] = []
    folders: list[str] = []
    for directory, subfolders, names in os.walk(root):
        subfolders[:] = sorted(
            d for d in subfolders if not d.startswith(".") and d not in _SKIPPED_FOLDERS
        )
        folders.append(directory)
        files.extend(os.path.join(directory, n) for n in sorted(names) if n.endswith(".py"))
        if len(files) > PROJECT_MAX_MODULES:
            _PROJECT_TREES[top] = None
            return None
    tree = _PROJECT_TREES[top] = (root, tuple(files), tuple(folders))
    return tree


def top_package(folder: str) -> str | None:
    """The top-level package holding `folder`: the highest folder, going up, of the unbroken
    chain of folders with `__init__.py` from `folder`; None: `folder` is no package.
    Memoised with the listings (`_forget_listings`)."""
    top = _TOP_PACKAGES.get(folder, "")
    if top != "":
        return top
    if "__init__.py" not in _listdir(folder):
        top = None
    else:
        top = folder
        while True:
            parent = os.path.dirname(top)
            if parent == top or "__init__.py" not in _listdir(parent):
                break
            top = parent
    _TOP_PACKAGES[folder] = top
    return top


def _enclosing_package(folder: str) -> str | None:
    """The nearest package above `folder`, a folder without `__init__.py` (exllamav2's
    `conversion/`), below the repository root (a `pyproject.toml`, `setup.cfg`, `setup.py`
    or `.git` folder); None: there is none."""
    directory = folder
    while True:
        names = _listdir(directory)
        if directory != folder and "__init__.py" in names:
            return directory
        if any(n in _ROOT_MARKERS or n == ".git" for n in names):
            return None
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent


def project_relative_path(path: str) -> str | None:
    """`path` from its project's root: the nearest folder above it holding a
    `pyproject.toml`, `setup.cfg`, `setup.py` or `.git`, else the folder above its top-level
    package; None: neither. Folder names above the project (a checkout called `amd-quark`,
    `/home/rocm/...`) are not the project's layout, so a fact read from names uses this
    rather than the path from the working directory."""
    absolute = os.path.abspath(path)
    folder = directory = os.path.dirname(absolute)
    while True:
        if any(n in _ROOT_MARKERS or n == ".git" for n in _listdir(directory)):
            return os.path.relpath(absolute, directory).replace(os.sep, "/")
        parent = os.path.dirname(directory)
        if parent == directory:
            break
        directory = parent
    top = top_package(folder)
    if top is None:
        return None
    return os.path.relpath(absolute, os.path.dirname(top)).replace(os.sep, "/")


def cuda_project(folder: str) -> str | None:
    """Why the project of the package in `folder` is CUDA-only, or None."""
    fact = _project_fact(folder)
    return None if fact is None else fact[0]


def _project_fact(folder: str) -> tuple[str | None, tuple[str, ...], tuple[str, ...]] | None:
    """The project fact of the package in `folder` with what decides it (the stamps cover
    only that): the first module or folder that names another backend (while it stays,
    the project is multi-backend, whatever the other files say); for a CUDA-only project
    every module and folder; for too small a tree its folders (a module added is seen).
    None: not a package."""
    tree = project_tree(folder)
    if tree is None:
        return None
    root, files, folders = tree
    fact = _PROJECT_FACTS.get(root)
    if fact is not None:
        return fact
    read = _reader()  # each module read once, however many of the scans below ask
    redirect = _npu_redirect(root, files, read)
    if redirect is not None:
        fact = _PROJECT_FACTS[root] = (redirect, files, folders)
        return fact
    if len(files) < PROJECT_MIN_MODULES:
        # Too few modules to show that none needs another backend, unless one of them
        # picks the device and picks only CUDA or the CPU (`"cuda" if
        # torch.cuda.is_available() else "cpu"`: gfpgan, whisperx) while none names another
        # (here any mention counts, prose too: in a handful of modules one is a large share).
        evidence = _project_names_another_backend(files, folders, read, any_mention=True)
        selection = None if evidence is not None else _cuda_or_cpu_selection(root, files, read)
        if evidence is not None:
            fact = (None, *evidence)
        elif selection is None:
            fact = (None, files, folders)
        else:
            reason = (f"{CUDA_PROJECT} (`{os.path.basename(root)}` runs on CUDA or the CPU: "
                      f"{selection}, and none of its {len(files)} modules names another "
                      "backend or a platform layer)")  # fmt: skip
            fact = (reason, files, folders)
    else:
        # A package below a namespace package (SGLang's `sglang/srt/model_loader/`: `srt/`
        # has no `__init__.py`) is part of a larger project whose other modules are not read
        # here: any mention counts, as in a small project.
        evidence = _project_names_another_backend(
            files, folders, read, any_mention=_below_a_namespace_package(root)
        )
        if evidence is not None:
            fact = (None, *evidence)
        else:
            reason = (f"{CUDA_PROJECT} (`{os.path.basename(root)}`: {_none_or_one(root, files, read)} "
                      f"of its {len(files)} modules names another backend or a platform layer)")  # fmt: skip
            fact = (reason, files, folders)
    _PROJECT_FACTS[root] = fact
    return fact


def _below_a_namespace_package(root: str) -> bool:
    """Whether a folder above `root`, below the repository root, is a package (an
    `__init__.py` above a folder without one)."""
    return _enclosing_package(os.path.dirname(root)) is not None


def _npu_redirect(root: str, files: tuple[str, ...], read: Callable[[str], str]) -> str | None:
    """Why the project's `torch.cuda` calls also run on the NPU (`REDIRECTED_PROJECT`), or
    None: no module imports `transfer_to_npu`, or one chooses a backend but CUDA and NPU
    (on MPS or XPU the redirect does nothing)."""
    importer = next((p for p in files if _TRANSFER_TO_NPU.search(read(p))), None)
    if importer is None:
        return None
    for path in files:
        text = read(path)
        if _text_names_another_backend(text) and _CHOOSES_OTHER_THAN_NPU.search(
            _backend_code(text)
        ):
            return None
    return (f"{REDIRECTED_PROJECT} (`{os.path.relpath(importer, root)}` imports "
            "`torch_npu.contrib.transfer_to_npu`, which makes each `torch.cuda` function "
            "its `torch.npu` twin; no module chooses another backend)")  # fmt: skip


def _reader() -> Callable[[str], str]:
    """A module reader that keeps what it read, for the scans of one project fact."""
    texts: dict[str, str] = {}

    def read(path: str) -> str:
        text = texts.get(path)
        if text is None:
            text = texts[path] = _read_text(path) or ""
        return text

    return read


def _none_or_one(root: str, files: tuple[str, ...], read: Callable[[str], str]) -> str:
    """How many of a project's modules name another backend in code, for its reason:
    "none", or "only `path`" (one module that reacts to a backend, such as a branch copied
    from another project, is not support for it: see `_CHOOSES_BACKEND`)."""
    lone = _lone_backend_module(files, read)
    return "none" if lone is None else f"only `{os.path.relpath(lone, root)}`"


# A device pick between CUDA and the CPU alone: `"cuda" if torch.cuda.is_available() else
# "cpu"` (or the other way round), in a call (`torch.device(...)`), a default or a
# parameter's default.
CUDA_OR_CPU_PICK = compile_lazily(
    r"""(["'])cuda(?::\d+)?\1[ \t]+if[ \t][^\n]*?[ \t]else[ \t]+(["'])cpu\2"""
    r"""|(["'])cpu\3[ \t]+if[ \t][^\n]*?[ \t]else[ \t]+(["'])cuda(?::\d+)?\4"""
)


def _cuda_or_cpu_selection(
    root: str, files: tuple[str, ...], read: Callable[[str], str]
) -> str | None:
    """Where the first of `files` picks between CUDA and the CPU only, or None."""
    for path in files:
        match = CUDA_OR_CPU_PICK.search(read(path))
        if match:
            return f"`{os.path.relpath(path, root)}` picks `{match.group(0)}`"
    return None


def _project_names_another_backend(
    files: tuple[str, ...],
    folders: tuple[str, ...],
    read: Callable[[str], str],
    any_mention: bool = False,
) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """The (files, folders) whose stat shows the evidence gone: a platform-layer folder
    holding Python modules or a folder named for another backend (its parent's listing), a
    torch module named for one, a module that chooses one (`_CHOOSES_BACKEND`), or
    the first two torch modules whose code reacts to one; None: there is none, or a single
    module only reacts to one (`_lone_backend_module` says which). With `any_mention` (a
    small project), the first module whose text names one at all."""
    for directory in folders:
        name = os.path.basename(directory)
        if _PROJECT_OTHER_BACKEND.search(name) or (
            name in _PLATFORM_FOLDERS and _holds_python(directory)
        ):
            return (), (os.path.dirname(directory),)
    reacting: list[str] = []
    for path in files:
        text = read(path)
        if not _text_names_another_backend(text):
            continue
        if any_mention:
            return (path,), ()
        torch_module = _IMPORTS_TORCH.search(text) is not None
        if torch_module and _PROJECT_OTHER_BACKEND.search(os.path.basename(path)[:-3]):
            return (path,), ()
        code = _backend_code(text)
        if _CHOOSES_BACKEND.search(code):
            return (path,), ()
        if torch_module and _PROJECT_OTHER_BACKEND.search(code):
            reacting.append(path)
            if len(reacting) == 2:
                return tuple(reacting), ()
    return None


def _lone_backend_module(files: tuple[str, ...], read: Callable[[str], str]) -> str | None:
    """The one torch module of `files` whose code reacts to another backend (in a project
    where `_project_names_another_backend` finds no evidence there is at most one)."""
    for path in files:
        text = read(path)
        if (
            _text_names_another_backend(text)
            and _IMPORTS_TORCH.search(text)
            and _PROJECT_OTHER_BACKEND.search(_backend_code(text))
        ):
            return path
    return None


# What makes a project one that runs beyond CUDA, read from its code rather than its prose:
# - a module that *chooses* another backend (`DEVICE = "mps" if ... else "cpu"`, `return
#   "xpu"`, `torch.device("npu")`, `.to("mps")`) or uses the portable device API
#   (`torch.accelerator`, `get_device_module`, a `*Platform` class): one is enough;
# - modules that only *react* to one (`is_mps = x.device.type == "mps"`, a Trainer's
#   `if is_torch_xpu_available(): torch.xpu.empty_cache()`): two are needed, since a lone
#   reaction is usually a copied branch (deepcompressor's `is_mps` line from diffusers,
#   AMD Quark's copy of transformers' Trainer cache release) in a CUDA-first project;
#   and only modules that import torch count (a quantizer's ONNX half names its NPU target).
# Comments and prose strings (a docstring's "for AMD NPU", an error message) never count; a
# string counts only where it is a single value such as a device (`"mps"`, `f"xpu:{i}"`).
_IMPORTS_TORCH = compile_lazily(
    r"^[ \t]*(?:import|from)[ \t]+(?:torch|intel_extension_for_pytorch|habana_frameworks)",
    re.M,
)
_BACKEND_VALUE = (
    r'"(?:mps|npu|xpu|hpu|mlu|musa|tpu|xla|privateuse1|hpu|habana|gaudi|ascend)(?::[^"]*)?"'
)
_PICKED_AS = (  # what makes a value the device chosen: assigned, returned, an `else`, a device
    r"(?:(?<![=!<>])=(?!=)[ \t]*|\breturn[ \t]+|\belse[ \t]+|\bdevice[ \t]*\([ \t]*|\bto[ \t]*\([ \t]*)"
)
_NOT_COMPARED = r"(?![ \t]*(?:in\b|[=!]=))"  # `return "xla" in str(d)` tests, it does not pick
_NOT_AFTER_COMPARISON = r"(?<!==)(?<!== )(?<!!=)(?<!!= )"
_CHOOSES_BACKEND = compile_lazily(
    rf"{_PICKED_AS}{_BACKEND_VALUE}{_NOT_COMPARED}"
    rf"|{_NOT_AFTER_COMPARISON}{_BACKEND_VALUE}[ \t]+if\b"
    r"|\btorch\.accelerator\b|\bget_device_module\b|\bclass[ \t]+\w*(?:Platform|DeviceInterface)\b",
    re.IGNORECASE,
)
_OTHER_THAN_NPU_VALUE = r'"(?:mps|xpu|hpu|mlu|musa|tpu|xla|privateuse1|habana|gaudi)(?::[^"]*)?"'
_CHOOSES_OTHER_THAN_NPU = compile_lazily(
    rf"{_PICKED_AS}{_OTHER_THAN_NPU_VALUE}{_NOT_COMPARED}"
    rf"|{_NOT_AFTER_COMPARISON}{_OTHER_THAN_NPU_VALUE}[ \t]+if\b",
    re.IGNORECASE,
)
_VALUE_STRING = compile_lazily(r"[\w.:{}-]*")
# A string literal (any prefix, triple or single quotes) or a comment, leftmost first, so a
# `#` inside a string and a quote inside a comment are each part of the one that starts first.
_STRING_OR_COMMENT = compile_lazily(
    r"[rRbBuUfF]{0,2}(?:(?P<q3>\"\"\"|''')(?P<b3>(?:\\[\s\S]|[\s\S])*?)(?P=q3)"
    r"|(?P<q1>[\"'])(?P<b1>(?:\\[\s\S]|[^\\\n])*?)(?P=q1))"
    r"|#[^\n]*",
)


def _backend_code(text: str) -> str:
    """The module's text with comments dropped and each string literal kept, in double
    quotes, only if it is one value-like word (`"mps"`, `"xpu:{i}"`), else emptied: what
    the backend facts read as code. One pass of C regex (the tokenizer took 90 ms of the
    one-file gate on torch/nn's prose-heavy modules)."""

    def keep(match: re.Match[str]) -> str:
        body = match.group("b3") if match.group("q3") else match.group("b1")
        if body is None:  # a comment
            return ""
        return f'"{body}"' if _VALUE_STRING.fullmatch(body) else '""'

    return _STRING_OR_COMMENT.sub(keep, text)


def _holds_python(directory: str) -> bool:
    """Whether `directory` or a folder below it holds a Python module (a `platform/`
    folder of C++ headers in vendored kernels is no device layer)."""
    for _, subfolders, names in os.walk(directory):
        subfolders[:] = [d for d in subfolders if not d.startswith(".")]
        if any(n.endswith(".py") for n in names):
            return True
    return False


def _python_tree(top: str) -> tuple[list[str], list[str]]:
    files: list[str] = []
    folders: list[str] = []
    for directory, subfolders, names in os.walk(top):
        subfolders.sort()
        folders.append(directory)
        files.extend(os.path.join(directory, n) for n in sorted(names) if n.endswith(".py"))
    return files, folders


def _read_cuda_package(folder: str) -> CudaPackage:
    files, folders, sources = package_inputs(folder)
    if not files:
        return CudaPackage(None, files, folders)
    if "__init__.py" not in _listdir(folder):  # inside a package: only its project's fact
        return CudaPackage(cuda_project(folder), files, folders)
    reason = None
    if sources is not None:
        package = os.path.basename(sources)
        tree = [p for p in files if p.startswith(sources + os.sep)]
        # Shipped sources are CUDA whether MUSA's toolchain compiles them too; a folder
        # known by its name only is CUDA-only while nothing in it names MUSA either.
        builds = _ships_cuda_sources(_listdir(sources))
        if sources not in _SOURCE_TREES_OTHER_BACKEND:  # one reading per tree and pass
            _SOURCE_TREES_OTHER_BACKEND[sources] = _names_another_backend(
                sources, tree, _NON_CUDA_DIALECT if builds else _NON_CUDA_BACKEND
            )
        if _SOURCE_TREES_OTHER_BACKEND[sources]:
            pass
        elif builds:
            reason = (f"a package that builds CUDA sources (`{package}/`), none of whose "
                      f"{len(tree)} modules names another backend")  # fmt: skip
        else:
            reason = (f"a package named for a CUDA-only kernel library (`{package}/`), "
                      f"none of whose {len(tree)} modules names another backend")  # fmt: skip
    if reason is None:
        own = [p for p in files if os.path.dirname(p) == folder]
        for name in own:
            match = _TOP_LEVEL_CUDA_IMPORT.search(_read_text(name) or "")
            if match:
                if not _names_another_backend(folder, own, _NON_CUDA_BACKEND):
                    reason = (f"a package of CUDA-only modules (`{os.path.basename(name)}` "
                              f"imports `{match.group(1)}`; no module beside it names "
                              "another backend)")  # fmt: skip
                break
    if reason is None:
        reason = cuda_project(folder)
    return CudaPackage(reason, files, folders)


def _names_another_backend(top: str, files: list[str], backend: re.Pattern[str]) -> bool:
    """Whether a module among `files`, or the name of a file or folder in `top`'s listing
    (an `npu/` subpackage), names a backend matched by `backend`."""
    if any(backend.search(name.rsplit(".", 1)[0]) for name in _listdir(top)):
        return True
    return any(backend.search(_read_text(name) or "") for name in files)


def package_facts_read() -> tuple[list[str], list[str]]:
    """The files and folders every package fact this process read depends on (the run
    memo watches them: a sibling edit must not replay a stale report)."""
    files: dict[str, None] = {}
    folders: dict[str, None] = {}
    for read_files, read_folders, _ in list(_PACKAGE_INPUTS.values()):
        files.update(dict.fromkeys(read_files))
        folders.update(dict.fromkeys(read_folders))
    for folder, read_files in list(_CONFIG_INPUTS.items()):
        files.update(dict.fromkeys(read_files))
        folders[folder] = None
    for read_files, read_folders in list(_ATTRIBUTE_INPUTS.values()):
        files.update(dict.fromkeys(read_files))
        folders.update(dict.fromkeys(read_folders))
    return list(files), list(folders)


# -- defaults in a package's configuration files -----------------------------------------
#
# LL002 asks whether a chunk size read from a config (`self.chunk_size =
# config.outer_product_chunk_size`) is off by default: the answer lies in the configuration
# files beside the module (`configuration_esmfold2.py`), so the cache keys such a module on
# their contents and `project_stamp` on their stats (`config_files`).

_CONFIG_DEFAULTS: dict[tuple[str, str], str | None] = {}


def _is_config_module(name: str) -> bool:
    return name.endswith(".py") and "config" in name.lower()


_CONFIG_INPUTS: dict[str, tuple[str, ...]] = {}


def config_files(folder: str) -> list[str]:
    """The configuration modules in `folder` (Python files named for `config`); their
    stats are part of `project_stamp`, their contents of the cache key (`cache.Cache`), and
    the run memo watches them and the folder (`package_facts_read`)."""
    files = tuple(
        os.path.join(folder, name) for name in _listdir(folder) if _is_config_module(name)
    )
    _CONFIG_INPUTS[folder] = files
    return list(files)


def config_field_default(folder: str, field: str) -> str | None:
    """ "None" or "0" when every default of `field` in `folder`'s configuration modules is
    that (`field: int | None = None` in a config class, `field=None` among an `__init__`'s
    parameters); None when another default or none is found."""
    key = (folder, field)
    if key in _CONFIG_DEFAULTS:
        return _CONFIG_DEFAULTS[key]
    pattern = re.compile(
        rf"^[ \t]*{re.escape(field)}[ \t]*(?::[^=\n]*)?=[ \t]*([^,\n#)]+)|"
        rf"[(,][ \t\n]*{re.escape(field)}[ \t]*(?::[^=\n,]*)?=[ \t]*([^,\n#)]+)",
        re.MULTILINE,
    )
    defaults: set[str] = set()
    for path in config_files(folder):
        text = (_read_text(path) or "")[:400_000]
        for match in pattern.finditer(text):
            defaults.add((match.group(1) or match.group(2) or "").strip())
    found = None
    if defaults and defaults <= {"None", "0"}:
        found = "None" if "None" in defaults else "0"
    _CONFIG_DEFAULTS[key] = found
    return found


# -- modules beside a module that it imports from ----------------------------------------
#
# LL004/LL005 read a validator a module imports from a module beside it (`from
# .qknorm_rope import _validate_rope`, or the same module by its absolute name): when that
# validator raises unless the tensors are CUDA's, the code past its call is CUDA-only
# (`devices._imported_validator`). Only modules of the same folder are read: their stats
# are already part of the package stamp (`package_inputs` lists a package folder's every
# `.py`), and their contents are part of the cache key of a module importing from them
# (`cache.Cache._package_part`, through `sibling_imports_digest`).
_FROM_IMPORT = compile_lazily(
    r"^[ \t]*from[ \t]+(\.?[A-Za-z_][\w.]*|\.)[ \t]+import\b", re.MULTILINE
)


def sibling_module_file(path: str, module: str) -> str | None:
    """The file of the module `module` names (as a `from <module> import` writes it) when
    it is a module in the same folder as the module at `path` (`.rope`, or
    `pkg.ops.rope` for a module in `.../pkg/ops/`), else None."""
    folder = os.path.dirname(os.path.abspath(path))
    if module.startswith("."):
        if module.startswith("..") or module == ".":
            return None
        name = module[1:]
        if "." in name:
            return None
    else:
        parts = module.split(".")
        if len(parts) < 2:
            return None
        name = parts[-1]
        tail = os.sep + os.sep.join(parts[:-1])
        if not folder.endswith(tail):
            return None
    candidate = os.path.join(folder, name + ".py")
    if candidate == os.path.abspath(path) or not os.path.isfile(candidate):
        return None
    if "__init__.py" not in _listdir(folder):
        return None
    return candidate


def sibling_imports_digest(path: str, text: str) -> str:
    """A digest of the contents of the same-folder modules the module at `path` (whose
    text is `text`) imports names from, "" when there are none: a validator edited there
    is a new cache key for this module."""
    import hashlib

    found = sorted(
        {
            f
            for match in _FROM_IMPORT.finditer(text)
            for f in [sibling_module_file(path, match.group(1))]
            if f is not None
        }
    )
    if not found:
        return ""
    digest = hashlib.sha256()
    for name in found:
        digest.update(name.encode() + b"\0" + (_read_text(name) or "").encode() + b"\0")
    return digest.hexdigest()


def _forget_listings() -> None:
    _CONFIG_DEFAULTS.clear()
    _CONFIG_INPUTS.clear()
    _PACKAGE_INPUTS.clear()  # listings are cheap: a new or removed file is seen
    _SOURCE_TREES_OTHER_BACKEND.clear()
    _PROJECT_TREES.clear()
    _TOP_PACKAGES.clear()
    _PROJECT_FACTS.clear()
    _DEVICE_LAYERS.clear()
    _EXCLUSIONS.clear()
    _ATTRIBUTE_WRITES.clear()
    _ATTRIBUTE_INPUTS.clear()
    _IMPORTED_NAMES.clear()
    _WORD_INDEX.clear()


def forget_all_packages() -> None:
    """Drop every memoised package and project fact (a caller that edits the files they
    read and cannot wait for a stamp to change: tests)."""
    _forget_listings()
    _PACKAGES.clear()


def forget_changed_packages() -> int:
    """Drop the memoised package facts whose inputs changed on disk since they were read
    (the language server calls this, through `forget_changed_projects`)."""
    _forget_listings()
    changed = [
        folder
        for folder, (stamp, _) in _PACKAGES.items()
        if stamp is None or cuda_package_stamp(folder) != stamp
    ]
    for folder in changed:
        del _PACKAGES[folder]
    return len(changed)


# -- the device layer of a project ------------------------------------------------------
#
# LL005 asks that a `torch.cuda` call go through the project's own device abstraction. A
# project that has one (a `platforms/` package: vLLM, vLLM-Omni, SGLang, FastVideo, LMCache)
# has chosen to run on more than CUDA and says how; a raw call there is a slip its own review
# bans. A project without one has not: its CUDA calls sit in CUDA-first code (kernels,
# autotuning, CUDA-only integrations) whose port is a feature request, not a bug. Measured on
# held-out projects nobody tuned on (benchmarks/RESULTS.md, session 13): LL005 was true for
# 0 of 41 default findings (set 5) and 8 of 130 (set 4), none in a project with a platform
# folder; every labelled LL005 instance of the pinned corpora but one lies in such a project.
# LL005 leaves these calls out by default (`portability = "strict"` reports them). The
# folders are the ones LL004/LL005 also leave alone as the platform layer itself.
NO_DEVICE_LAYER = "a project without a device layer"  # how its reason starts
# project root -> (why it has none or None, the folders whose listings decide it)
_DEVICE_LAYERS: dict[str, tuple[str | None, tuple[str, ...]]] = {}


def missing_device_layer(path: str) -> str | None:
    """Why the project of the module at `path` has no device layer of its own (no
    `platforms/`-style folder anywhere in its tree), or None: it has one, or the module is
    not in a package (a loose file has no project to judge)."""
    fact = _device_layer_fact(os.path.dirname(os.path.abspath(path)))
    return None if fact is None else fact[0]


def may_have_device_layer(path: str) -> bool:
    """Whether the project of the module at `path` has a device layer of its own, or is
    too large a tree to tell (a loose module, in no package, has none)."""
    fact = _device_layer_fact(os.path.dirname(os.path.abspath(path)))
    return fact is not None and fact[0] is None


def _device_layer_fact(folder: str) -> tuple[str | None, tuple[str, ...]] | None:
    """The device-layer fact of the project of the package in `folder`, with the folders
    whose listings decide it: the parent of the platform folder found (while it stays, the
    project has one), or every folder of the tree (a platform folder added anywhere is seen).
    None: not a package."""
    root = _layer_search_root(folder)
    if root is None:
        return None
    fact = _DEVICE_LAYERS.get(root)
    if fact is None:
        layer, folders = _find_platform_folder(root)
        if layer is not None:
            fact = (None, (os.path.dirname(layer),))
        elif len(folders) > PROJECT_MAX_MODULES:  # too large a tree to read: no judgement
            fact = (None, ())
        else:
            reason = (f"{NO_DEVICE_LAYER} (`{os.path.basename(root)}`: no `platforms/` "
                      f"folder among its {len(folders)} folders)")  # fmt: skip
            fact = (reason, folders)
        fact = _DEVICE_LAYERS[root] = fact
    return fact


def _layer_search_root(folder: str) -> str | None:
    """Where to look for the device layer of the package in `folder`: its outermost package
    below the repository root (a `pyproject.toml`, `setup.cfg`, `setup.py` or `.git`
    folder), across namespace packages on the way (SGLang's `sglang/srt/` has no
    `__init__.py`, and its `platforms/` sits there; nor has exllamav2's `conversion/`);
    the folder above it where that is the repository root (or holds the package's `src/`).
    None: neither `folder` nor a folder above it (below the repository root) is a package."""
    top: str | None = None
    directory = folder
    while True:
        names = _listdir(directory)
        if "__init__.py" in names:
            top = directory
        if directory != top and any(n in _ROOT_MARKERS or n == ".git" for n in names):
            break
        parent = os.path.dirname(directory)
        if parent == directory:
            break
        directory = parent
    if top is None:
        return None
    above = os.path.dirname(top)
    if os.path.basename(above) == "src":
        above = os.path.dirname(above)
    if any(name in _ROOT_MARKERS for name in _listdir(above)):
        return above
    return top


def _find_platform_folder(root: str) -> tuple[str | None, tuple[str, ...]]:
    """The first platform-layer folder under `root` that holds Python modules (None: none;
    a vendored kernel library's `platform/` of C++ headers is not one), and the folders walked
    (hidden, build and cache folders left out; the walk stops at the first platform folder,
    or past `PROJECT_MAX_MODULES` folders)."""
    folders: list[str] = []
    for directory, subfolders, _ in os.walk(root):
        subfolders[:] = sorted(
            d for d in subfolders if not d.startswith(".") and d not in _SKIPPED_FOLDERS
        )
        folders.append(directory)
        if os.path.basename(directory) in _PLATFORM_FOLDERS and _holds_python(directory):
            return directory, tuple(folders)
        if len(folders) > PROJECT_MAX_MODULES:
            break
    return None, tuple(folders)


# -- names a project keeps off a backend -------------------------------------------------
#
# A project may support a backend for part of its models only, and say so in a constant
# module: iopaint's `const.py` lists `MPS_UNSUPPORT_MODELS = ["lama", "ldm", ...]`, and its
# device switch runs those models on the CPU when MPS is asked for. Where every backend but
# CUDA that the project names at all has such a list (iopaint names MPS alone: no npu, xpu,
# `torch.accelerator` or platform layer), a model on every list never runs on an
# accelerator but CUDA: its `torch.cuda.empty_cache()` empties the cache of the only
# accelerator it uses, and does nothing on the CPU. The fact is read from other files: the
# constant modules and, while it holds, every module (stamped like the package facts).
_EXCLUSION_LIST = compile_lazily(
    r"^(?P<name>(?:[A-Z0-9]+_)*?(?P<backend>MPS|NPU|XPU|HPU|MLU|MUSA)_(?:[A-Z0-9]+_)*?"
    r"(?:UNSUPPORT(?:ED)?|NOT_SUPPORTED|EXCLUDED?|BLACKLIST|DENYLIST)(?:_[A-Z0-9]+)*)"
    r"[ \t]*(?::[^=\n]*)?=[ \t]*[\[({](?P<body>[^\])}]*)[\])}]",
    re.MULTILINE,
)
_LISTED_STRING = compile_lazily(r"""(["'])([\w.:/-]+)\1""")
_CONSTANT_MODULE = compile_lazily(r"^_?(const|consts|constants|settings|defaults)\.py$")
# project root -> (the fact or None, the files and folders that decide it)
_EXCLUSIONS: dict[str, tuple[BackendExclusion | None, tuple[str, ...], tuple[str, ...]]] = {}


@dataclass(frozen=True)
class BackendExclusion:
    """The names a project keeps off every backend but CUDA it names (and the CPU)."""

    names: frozenset[str]
    lists: str  # "`MPS_UNSUPPORT_MODELS` (iopaint/const.py)"
    backends: str  # "MPS"
    project: str


def backend_exclusion(path: str) -> BackendExclusion | None:
    """The exclusion lists of the project of the module at `path`, where they cover every
    backend but CUDA that the project names; None otherwise."""
    fact = _exclusion_fact(os.path.dirname(os.path.abspath(path)))
    return None if fact is None else fact[0]


def _exclusion_fact(
    folder: str,
) -> tuple[BackendExclusion | None, tuple[str, ...], tuple[str, ...]] | None:
    """The exclusion fact of the project of the package in `folder`, with the files and
    folders that decide it: the constant modules and every folder (a list added is seen);
    while a list stands, also the module that names a backend it does not cover, or, while
    the fact holds, every module. None: not a package."""
    tree = project_tree(folder)
    if tree is None:
        return None
    root, files, folders = tree
    fact = _EXCLUSIONS.get(root)
    if fact is not None:
        return fact
    constants = tuple(p for p in files if _CONSTANT_MODULE.match(os.path.basename(p)))
    lists: dict[str, list[tuple[str, str, set[str]]]] = {}
    for path in constants:
        for match in _EXCLUSION_LIST.finditer(_read_text(path) or ""):
            names = {m.group(2) for m in _LISTED_STRING.finditer(match.group("body"))}
            if names:
                where = os.path.relpath(path, root)
                lists.setdefault(match.group("backend").lower(), []).append(
                    (match.group("name"), where, names)
                )
    if not lists or len(files) > PROJECT_MAX_MODULES:
        fact = (None, constants, folders)
    else:
        uncovered = None
        for path in files:
            text = _read_text(path) or ""
            for match in _PROJECT_OTHER_BACKEND.finditer(text):
                if _in_url(text, match.start()):  # `github.com/tensorflow/tpu/issues/494`
                    continue
                if match.group(1) is None or match.group(1).lower() not in lists:
                    uncovered = path
                    break
            if uncovered is not None:
                break
        if uncovered is not None:
            fact = (None, tuple(sorted({*constants, uncovered})), folders)
        else:
            excluded = frozenset.intersection(
                *(frozenset().union(*(n for _, _, n in found)) for found in lists.values())
            )
            described = ", ".join(
                f"`{name}` ({where})" for found in lists.values() for name, where, _ in found
            )
            exclusion = BackendExclusion(
                excluded, described, "/".join(b.upper() for b in sorted(lists)),
                os.path.basename(root),
            )  # fmt: skip
            fact = (exclusion, files, folders)
    _EXCLUSIONS[root] = fact
    return fact


def _in_url(text: str, start: int) -> bool:
    """Whether the word at `start` is part of a URL (its whitespace-delimited token holds
    `://` before it)."""
    token = max(text.rfind(c, 0, start) for c in " \t\n\"'(<") + 1
    return "://" in text[token:start]


# -- who sets an optional attribute ----------------------------------------------------
#
# Code copied from older diffusers pipelines releases its last offloaded model under
# `if hasattr(self, "final_offload_hook") and self.final_offload_hook is not None:` and
# empties CUDA's cache there. The gate itself says the attribute is optional: the class
# does not define it, someone else may. Whether anyone does is read from the project's
# other modules: where none sets the attribute to anything but None, the branch does not
# run for the project's own code (DeepCache, SimpleTuner, HiDiffusion: diffusers' base
# pipeline now keeps `_all_hooks`); where each write sits in a function that binds a
# literal CUDA device outside any `if` (iopaint's copied `enable_model_cpu_offload`:
# `device = torch.device(f"cuda:{gpu_id}")` ... `self.final_offload_hook = hook`), the
# branch runs only once that CUDA-only function ran. A write the scan cannot judge (the
# attribute's name as a string outside `hasattr`/`getattr`, `setattr(self, "x", v)`, a
# keyword `x=v`, a plain name `x = v`) keeps the branch reported. The diffusers releases
# that set `final_offload_hook` themselves did so in an `enable_model_cpu_offload` that
# hard-coded `torch.device(f"cuda:{gpu_id}")`.
_ATTRIBUTE_WRITES: dict[tuple[str, str], AttributeWrites | None] = {}
_ATTRIBUTE_INPUTS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
_WORD_INDEX: dict[str, dict[str, list[str]]] = {}  # project root -> word -> its modules
_WORD = compile_lazily(r"[A-Za-z_]\w*")
_NONE_VALUE = compile_lazily(r"^None\s*(?:#.*)?$")
_DEF_LINE = compile_lazily(r"^([ \t]*)(?:async[ \t]+)?def[ \t]")
_LITERAL_CUDA_DEVICE = compile_lazily(
    r"^[ \t]*[A-Za-z_][\w.]*[ \t]*=[ \t]*(?:torch\.)?device\([ \t]*f?[\"']cuda(?::[^\"']*)?[\"'][ \t]*\)"
)
_READS_BY_NAME = compile_lazily(r"(?:hasattr|getattr)\([ \t]*[\w.]+[ \t]*,[ \t]*$")


@dataclass(frozen=True)
class AttributeWrites:
    """Where a project sets an attribute to something other than None."""

    project: str
    unjudged: tuple[str, ...]  # "path:line" of writes outside a CUDA-bound function
    cuda_bound: tuple[str, ...]  # "path:line" of writes in a function with a CUDA device


def attribute_writes(path: str, attribute: str) -> AttributeWrites | None:
    """The writes of `attribute` (other than None) in the project of the module at `path`,
    by text; None: the module is in no project (or too large a one to read)."""
    tree = project_tree(os.path.dirname(os.path.abspath(path)))
    if tree is None:
        return None
    root, files, folders = tree
    key = (root, attribute)
    if key in _ATTRIBUTE_WRITES:
        return _ATTRIBUTE_WRITES[key]
    _ATTRIBUTE_INPUTS[root] = (files, folders)
    index = _word_index(root, files)
    write = re.compile(rf"(?<![\w])({re.escape(attribute)})[ \t]*(?::[^=\n]*)?=(?!=)")
    bound_by_name = re.compile(
        rf"(?:\b(?:def|class|import|as|for)[ \t]+|^[ \t]*from[ \t]+\S+[ \t]+import\b[^\n]*\b)"
        rf"{re.escape(attribute)}\b",
        re.MULTILINE,
    )
    named = re.compile(rf"[\"']{re.escape(attribute)}[\"']")
    unjudged: list[str] = []
    bound: list[str] = []
    for module in index.get(attribute, ()):
        text = _read_text(module) or ""
        where = os.path.relpath(module, root)
        lines = text.splitlines()
        for match in write.finditer(text):
            line = text.count("\n", 0, match.start())
            end = text.find("\n", match.end())
            value = text[match.end() : end if end >= 0 else len(text)]
            if _NONE_VALUE.match(value.strip()):
                continue
            target = bound if _in_cuda_device_function(lines, line) else unjudged
            target.append(f"{where}:{line + 1}")
        for match in bound_by_name.finditer(text):  # a method, class or import of that name
            unjudged.append(f"{where}:{text.count(chr(10), 0, match.start()) + 1}")
        for match in named.finditer(text):
            if not _READS_BY_NAME.search(text[max(0, match.start() - 80) : match.start()]):
                unjudged.append(f"{where}:{text.count(chr(10), 0, match.start()) + 1}")
    fact = AttributeWrites(os.path.basename(root), tuple(unjudged), tuple(bound))
    _ATTRIBUTE_WRITES[key] = fact
    return fact


def _word_index(root: str, files: tuple[str, ...]) -> dict[str, list[str]]:
    """Word -> the project's modules whose text holds it: one read of the project for
    every name asked about (attribute writes, importers)."""
    index = _WORD_INDEX.get(root)
    if index is None:
        index = _WORD_INDEX[root] = {}
        for module in files:
            for word in set(_WORD.findall(_read_text(module) or "")):
                index.setdefault(word, []).append(module)
    return index


# -- which names of a module the rest of its project imports ------------------------------
#
# A module that ends with an `if __name__ == "__main__":` demo may still be a library: its
# public functions are its API when another module of the project imports them (`from
# pkg.ops.fuse import fuse_lora`, `from . import fuse` then `fuse.fuse_lora(...)`). Read by
# text from the modules that name the module's own name; a module of the same name
# elsewhere in the project counts too (over-counting keeps findings reported, never hides
# one), and `import *` from it counts every name.
_IMPORTED_NAMES: dict[str, frozenset[str]] = {}
_IMPORT_FROM_LIST = compile_lazily(
    r"^[ \t]*from[ \t]+([.\w]+)[ \t]+import[ \t]+(\([^)]*\)|[^\n#]*)", re.MULTILINE
)
_IMPORT_MODULE = compile_lazily(r"^[ \t]*import[ \t]+([^\n#]*)", re.MULTILINE)
EVERY_NAME = "*"


def imported_names(path: str) -> frozenset[str]:
    """The names other modules of the project import from the module at `path` (`from
    <...>.<stem> import a, b`, or `<stem>.a` where they import the module itself), with
    `EVERY_NAME` for a star import; empty outside a project."""
    absolute = os.path.abspath(path)
    if absolute in _IMPORTED_NAMES:
        return _IMPORTED_NAMES[absolute]
    stem = os.path.splitext(os.path.basename(absolute))[0]
    tree = project_tree(os.path.dirname(absolute))
    names: set[str] = set()
    if tree is not None and stem != "__init__":
        root, files, folders = tree
        _ATTRIBUTE_INPUTS[root] = (files, folders)
        attribute = re.compile(rf"(?<!\w){re.escape(stem)}\.([A-Za-z_]\w*)")
        for module in _word_index(root, files).get(stem, ()):
            if module == absolute:
                continue
            text = _read_text(module) or ""
            whole = False  # the module itself imported: its names are read as `stem.x`
            for match in _IMPORT_FROM_LIST.finditer(text):
                source, listed = match.group(1), match.group(2).strip("() \t\n")
                items = [i.split()[0] for i in listed.replace("\n", " ").split(",") if i.split()]
                if source.rsplit(".", 1)[-1] == stem:
                    names.update(items)
                elif stem in items:
                    whole = True
            for match in _IMPORT_MODULE.finditer(text):
                parts = [p.split()[0] for p in match.group(1).split(",") if p.split()]
                whole = whole or any(p.rsplit(".", 1)[-1] == stem for p in parts)
            if whole:
                names.update(attribute.findall(text))
    fact = _IMPORTED_NAMES[absolute] = frozenset(names)
    return fact


def _in_cuda_device_function(lines: list[str], line: int) -> bool:
    """Whether line `line` sits in a function whose own body binds a literal CUDA device
    (`device = torch.device(f"cuda:{gpu_id}")`) at its top level, above the line."""
    text = lines[line]
    indent = len(text) - len(text.lstrip())
    for start in range(line - 1, -1, -1):
        found = _DEF_LINE.match(lines[start])
        if found is not None and len(found.group(1).expandtabs()) < indent:
            break
    else:
        return False
    body_indent: int | None = None
    for candidate in lines[start + 1 : line]:
        stripped = candidate.strip()
        if not stripped or stripped.startswith("#"):
            continue
        width = len(candidate) - len(candidate.lstrip())
        if body_indent is None:
            body_indent = width
        if width == body_indent and _LITERAL_CUDA_DEVICE.match(candidate):
            return True
    return False


# A test that reads an attribute by name (`if hasattr(self, "hook") and ...`,
# `... and getattr(self, "hook", None) is not None`), as `_gated_attribute` reads it.
_GATED_BY_NAME = compile_lazily(
    r"(?:\bif|\belif|\band)[\s(]+(?:hasattr|getattr)\([ \t]*self[ \t]*,[ \t]*[\"'](\w+)[\"']"
)


def optional_attribute_writes(path: str, text: str) -> list[tuple[str, AttributeWrites | None]]:
    """The project's writes of each attribute the module reads by name (`hasattr(self,
    "hook")`): part of the module's cache key, so that a write added elsewhere is seen."""
    names = sorted(set(_GATED_BY_NAME.findall(text)))
    return [(name, attribute_writes(path, name)) for name in names]
