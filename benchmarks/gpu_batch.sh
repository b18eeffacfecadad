#!/usr/bin/env bash
# Run the GPU benchmarks in one lease, on a machine with torch + CUDA but no libcst.
# Prepare first, here (needs the dev environment):
#   python benchmarks/ll001_pipeline.py prepare
#   python benchmarks/ll002_decode.py prepare
#   python benchmarks/ll002_wan_vae.py prepare
#   python benchmarks/ll003_gather.py prepare
# then run this on the GPU machine with .bench/ll001 .bench/ll002_decode .bench/wan
# .bench/ll003 and .whl carried. Arguments pick benchmarks (default: all).
set -uo pipefail
cd "$(dirname "$0")/.."
source benchmarks/gpu_shim.sh
export PYTHONUNBUFFERED=1
out="${OUT:-/tmp/lifetime-lint-bench}"
mkdir -p "$out"
which=("$@")
[ ${#which[@]} -gt 0 ] || which=(ll001 ll002 ll003 wan)
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
python3 -c 'import torch; print("torch", torch.__version__, "gpus", torch.cuda.device_count())' | tee -a "$out/gpu.txt"
for name in "${which[@]}"; do
  echo "=== $name"
  case "$name" in
    ll001) python3 benchmarks/ll001_pipeline.py run 2>&1 | tee "$out/ll001.log" ;;
    ll002) python3 benchmarks/ll002_decode.py run 2>&1 | tee "$out/ll002.log" ;;
    ll003) python3 benchmarks/ll003_gather.py --iters 5 2>&1 | tee "$out/ll003.log" ;;
    wan)
      python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
      PYTHONPATH="/tmp/site:$PYTHONPATH" python3 benchmarks/ll002_wan_vae.py run 2>&1 | tee "$out/wan.log" ;;
    reclaim) python3 -P -m pytest -q -s tests/test_runtime_reclaim.py -k cuda -p no:cacheprovider 2>&1 | tee "$out/reclaim.log" ;;
  esac
done
