# Cold A/B on the device's CPUs pinned to 2 cores: new (HEAD) vs b7dcd50 (main before the facts layer), 7 repeats.
set -e
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gate/whl/*.whl
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
mkdir -p .corpus && tar -xzf .gate/corpora.tgz -C .corpus
python3 -m compileall -q .gate/sitesD /tmp/site > /dev/null || true
git config --global user.email b@example.com; git config --global user.name b
taskset -c 2,3 python3 benchmarks/pr_gate.py --sites .gate/sitesD --corpus torch-nn --repeats 7 --tools new,old --steps cold 2>$OUT/d.err | tee $OUT/d.md
mv $OUT/pr_gate.json $OUT/pr_gate_d.json
