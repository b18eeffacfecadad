set -e
nvidia-smi --query-gpu=name,memory.total --format=csv
export PYTHONUNBUFFERED=1
for cfg in "480 720 13" "672 1152 13" "720 1280 13"; do
  set -- $cfg
  H=$1 W=$2 LT=$3 python3 benchmarks/ll002_magvit_causal_conv.py .gate/magvit/autoencoder_kl_magvit.py 2>&1 | tail -3
done
