#!/usr/bin/env bash
# The single-GPU benchmarks that use the helpers, fixed against a VENDORED runtime.
#   bash benchmarks/vendored_gpu.sh prepare   # here (dev environment): vendor + fix + wheels
#   bash benchmarks/vendored_gpu.sh run       # GPU machine: torch only, no lifetime_lint
# `prepare` writes .bench/vendored/ (pyproject with `runtime-module = "_ll_vendored_runtime"`
# and the file `lifetime-lint vendor-runtime` wrote) and re-runs each benchmark's `prepare`
# with that config, so the fixed files import the helpers from `_ll_vendored_runtime`.
# `run` puts only .bench/vendored on PYTHONPATH (not the gpu_shim): the fixed code can only
# get its helpers from the vendored copy.
set -euo pipefail
cd "$(dirname "$0")/.."
vendored=.bench/vendored
case "${1:-run}" in
  prepare)
    mkdir -p "$vendored"
    printf '[tool.lifetime-lint]\nruntime-module = "_ll_vendored_runtime"\n' > "$vendored/pyproject.toml"
    python -m lifetime_lint vendor-runtime "$vendored/_ll_vendored_runtime.py"
    export LIFETIME_LINT_BENCH_CONFIG="$vendored/pyproject.toml"
    python benchmarks/ll001_pipeline.py prepare > "$vendored/ll001_prepare.log"
    python benchmarks/ll002_decode.py prepare > "$vendored/ll002_prepare.log"
    python benchmarks/ll002_wan_vae.py prepare > "$vendored/wan_prepare.log"
    grep -h "import" .bench/ll001/*fixed*.py .bench/ll002_decode/*fixed*.py .bench/wan/*fixed*.py \
      | grep -E "lifetime|_ll_vendored" || true
    ;;
  run)
    export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD/$vendored"
    out="${OUT:-/tmp/lifetime-lint-bench}"
    mkdir -p "$out"
    if (cd / && python3 -c 'import lifetime_lint' 2>/dev/null); then
      echo "lifetime_lint is importable here: the run would not prove the vendored copy" >&2
      exit 1
    fi
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
    python3 -c 'import torch; print("torch", torch.__version__)' | tee -a "$out/gpu.txt"
    sha256sum "$vendored/_ll_vendored_runtime.py" | tee -a "$out/gpu.txt"
    python3 benchmarks/ll001_pipeline.py run 2>&1 | tee "$out/ll001.log"
    python3 benchmarks/ll002_decode.py run 2>&1 | tee "$out/ll002.log"
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
    PYTHONPATH="/tmp/site:$PYTHONPATH" python3 benchmarks/ll002_wan_vae.py run 2>&1 | tee "$out/wan.log"
    ;;
esac
