set -e
nvidia-smi --query-gpu=name,memory.total --format=csv
export PYTHONUNBUFFERED=1
for cfg in "480 832 5" "720 1280 5"; do
  set -- $cfg
  H=$1 W=$2 LT=$3 python3 benchmarks/ll002_kvae_safe_conv.py .gate/kvae/autoencoder_kl_kvae_video.py 2>&1 | tail -4
done
