"""Prepare the real-code corpora that benchmarks and corpus checks run over.

    python benchmarks/corpus.py            # all corpora into .corpus/ (git-ignored)
    python benchmarks/corpus.py diffusers  # one of them

Pinned releases are fetched with `pip download --no-deps` (wheels carry the sources) and
unpacked once; `torch-nn` (torch/nn) and `torch` (every Python file of the package) are
copied from the installed torch (2.13.0, the dev extra's pin), so they need no network.
Prints each corpus's folder, file count and line count.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".corpus")

PINNED: dict[str, str] = {
    "diffusers": "diffusers==0.42.1",
    "transformers": "transformers==5.24.0",
    "vllm-omni": "vllm-omni==0.30.0",
    "fastvideo": "fastvideo==0.2.1",
    "sglang": "sglang==0.5.23",
    # Sequence- and patch-parallel diffusion inference (xDiT, DistriFusion): where gathers
    # of activations and decoded frames, and per-patch outputs concatenated, really occur.
    "xfuser": "xfuser==0.7.0",
    "distrifuser": "distrifuser==0.0.1b1",
    # xDiT's patch-parallel VAE (decoded tiles exchanged between ranks).
    "distvae": "distvae==0.1.0",
    # Training and serving stacks that gather results across ranks and concatenate
    # per-batch or per-chunk outputs (evaluation collection, metric sync, logits gathers).
    "mmengine": "mmengine==0.10.7",
    "torchmetrics": "torchmetrics==1.9.0",
    "accelerate": "accelerate==1.15.0",
    "torchtitan": "torchtitan==0.3.0",
    "lmdeploy": "lmdeploy==0.18.0",
    # The newest megatron-core for Python 3.11 (0.17+ need 3.12).
    "megatron-core": "megatron-core==0.16.1",
    # Published as source distributions only.
    "deepspeed": "deepspeed==0.19.8",
    "colossalai": "colossalai==0.5.0",
    # Session 7 (LL003): RL trainers, fine-tuning and training frameworks, evaluation
    # harnesses and vision stacks, where rollouts, metrics and predictions are gathered
    # for rank-0 logging or saving, and checkpoints are consolidated.
    "trl": "trl==1.16.0",
    "verl": "verl==0.9.1",
    "openrlhf": "openrlhf==0.11.2",
    "pytorch-lightning": "pytorch-lightning==2.6.6",
    "torchrec": "torchrec==1.9.2",
    "fairscale": "fairscale==0.4.13",
    "open-clip-torch": "open-clip-torch==3.3.0",
    "lmms-eval": "lmms-eval==0.7.3",
    "torchtune": "torchtune==0.6.1",
    "composer": "composer==0.32.1",
    "ms-swift": "ms-swift==4.6.0",
    "llamafactory": "llamafactory==0.9.5",
    "ai2-olmo-core": "ai2-olmo-core==3.0.0",
    "mmdet": "mmdet==3.3.0",
    # Session 8 (LL003): evaluation and metrics code (predictions all-gathered, then the
    # root computes or saves), vision and speech toolkits, checkpoint consolidation.
    "monai": "monai==1.6.1",
    "pytorch-ignite": "pytorch-ignite==0.5.5",
    "torcheval": "torcheval==0.0.7",
    "timm": "timm==1.0.31",
    "sentence-transformers": "sentence-transformers==6.2.0",
    "mmpretrain": "mmpretrain==1.2.0",
    "mmsegmentation": "mmsegmentation==1.2.2",
    "mmaction2": "mmaction2==1.2.0",
    "mmpose": "mmpose==1.3.2",
    "mmdet3d": "mmdet3d==1.4.0",
    "mmocr": "mmocr==1.0.1",
    "lightly": "lightly==1.6.0",
    "pytorchvideo": "pytorchvideo==0.1.5",
    "torchao": "torchao==0.18.0",
    "nanotron": "nanotron==0.4",
    "fairseq2": "fairseq2==0.8.1",
    "nemo-toolkit": "nemo-toolkit==3.0.0",
    "speechbrain": "speechbrain==1.1.2",
    "salesforce-lavis": "salesforce-lavis==1.0.2",
    "ultralytics": "ultralytics==8.4.190",
    "pytorch-metric-learning": "pytorch-metric-learning==2.9.0",
    "mmagic": "mmagic==1.2.0",
    "espnet": "espnet==202511",
    # Session 10 (LL003): trainers, evaluation harnesses and model hubs whose evaluation
    # and logging code gathers predictions, metrics and samples to one rank.
    "finetrainers": "finetrainers==0.2.0",
    "modelscope": "modelscope==1.40.2",
    "xtuner": "xtuner==0.2.0",
    "lm-eval": "lm-eval==0.4.13",
    "catalyst": "catalyst==22.4",
    "vissl": "vissl==0.1.6",
    "open-flamingo": "open-flamingo==2.0.1",
    "cosmos-predict2": "cosmos-predict2==1.0.9",
}

# Corpora whose importable package is not named like the distribution.
PACKAGE: dict[str, str] = {
    "megatron-core": "megatron",
    "open-clip-torch": "open_clip",
    "ms-swift": "swift",
    "ai2-olmo-core": "olmo_core",
    "pytorch-ignite": "ignite",
    "mmsegmentation": "mmseg",
    "mmaction2": "mmaction",
    "nemo-toolkit": "nemo",
    "salesforce-lavis": "lavis",
    "pytorch-metric-learning": "pytorch_metric_learning",
    "lm-eval": "lm_eval",
    "open-flamingo": "open_flamingo",
    "cosmos-predict2": "cosmos_predict2",
}

# Corpora with no wheel on PyPI: `pip download --no-binary :all:`, the package's folder
# taken from the source archive (laid out as in a wheel: `<package>/...`).
SOURCE_ONLY: frozenset[str] = frozenset({"deepspeed", "colossalai", "fairscale", "pytorchvideo"})


def corpus_path(name: str) -> str:
    return os.path.join(ROOT, name)


def prepare(name: str) -> str:
    """Make sure corpus `name` exists under .corpus/ and return its folder."""
    target = corpus_path(name)
    if os.path.isdir(target) and os.listdir(target):
        return target
    os.makedirs(ROOT, exist_ok=True)
    if name in ("torch-nn", "torch"):
        import importlib.util

        spec = importlib.util.find_spec("torch")
        if spec is None or not spec.submodule_search_locations:
            raise SystemExit("torch is not installed: pip install torch==2.13.0")
        package = next(iter(spec.submodule_search_locations))
        if name == "torch-nn":
            source = os.path.join(package, "nn")
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
            return target
        # The whole package's Python sources (torch/distributed, torch/utils, ...) under
        # `torch/`, as a wheel lays them out; labels' paths start with `torch/`.
        shutil.copytree(
            package,
            os.path.join(target, "torch"),
            ignore=lambda folder, names: [
                n
                for n in names
                if n == "__pycache__"
                or (not n.endswith(".py") and not os.path.isdir(os.path.join(folder, n)))
            ],
        )
        return target
    requirement = PINNED[name]
    download = os.path.join(ROOT, "_downloads")
    os.makedirs(download, exist_ok=True)
    binary = "--no-binary=:all:" if name in SOURCE_ONLY else "--only-binary=:all:"
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", binary,
         "-d", download, requirement],
        check=True,
    )  # fmt: skip
    distribution, version = requirement.split("==")
    package = PACKAGE.get(name, distribution.replace("-", "_"))
    if name in SOURCE_ONLY:
        archive_path = os.path.join(download, f"{distribution}-{version}.tar.gz")
        with tarfile.open(archive_path) as archive:
            top = f"{distribution}-{version}/{package}/"
            picked = []
            for member in archive.getmembers():
                if member.isfile() and member.name.startswith(top):
                    member.name = member.name[len(f"{distribution}-{version}/") :]
                    picked.append(member)
            archive.extractall(target, picked, filter="data")
        return target
    wheel_prefix = distribution.replace("-", "_")
    wheels = sorted(glob.glob(os.path.join(download, f"{wheel_prefix}-{version}-*.whl")))
    if not wheels:
        raise SystemExit(f"no wheel downloaded for {requirement}")
    with zipfile.ZipFile(wheels[-1]) as archive:
        members = [m for m in archive.namelist() if m.startswith(package + "/")]
        archive.extractall(target, members)
        # Some wheels (openrlhf) lay the package out under `<name>-<version>.data/purelib/`.
        purelib = f"{wheel_prefix}-{version}.data/purelib/"
        for member in archive.infolist():
            if member.filename.startswith(purelib + package + "/") and not member.is_dir():
                member.filename = member.filename[len(purelib) :]
                archive.extract(member, target)
    return os.path.join(target)


def python_files(folder: str) -> list[str]:
    found: list[str] = []
    for directory, _, names in os.walk(folder):
        found.extend(os.path.join(directory, n) for n in names if n.endswith(".py"))
    return sorted(found)


def main(argv: list[str]) -> None:
    names = argv or ["torch-nn", "torch", *PINNED]
    for name in names:
        folder = prepare(name)
        files = python_files(folder)
        lines = 0
        for path in files:
            with open(path, "rb") as handle:
                lines += handle.read().count(b"\n")
        print(f"{name}: {folder} ({len(files)} files, {lines} lines)")


if __name__ == "__main__":
    main(sys.argv[1:])
