# Cold A/B on the device's CPUs pinned to 2 cores: new vs 6a3ec12 (sites), new vs new-without-roomy-stack (sitesB).
set -e
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gate/whl/*.whl
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
mkdir -p .corpus && tar -xzf .gate/corpora.tgz -C .corpus
python3 -m compileall -q .gate/sites .gate/sitesB /tmp/site > /dev/null || true
git config --global user.email b@example.com; git config --global user.name b
python3 --version
taskset -c 2,3 python3 benchmarks/pr_gate.py --sites .gate/sites --corpus torch-nn --repeats 7 --tools new,old --steps cold 2>$OUT/a.err | tee $OUT/a.md
mv $OUT/pr_gate.json $OUT/pr_gate_a.json
taskset -c 2,3 python3 benchmarks/pr_gate.py --sites .gate/sitesB --corpus torch-nn --repeats 7 --tools new,old --steps "cold,diff-base 1 file" 2>$OUT/b.err | tee $OUT/b.md
mv $OUT/pr_gate.json $OUT/pr_gate_b.json
