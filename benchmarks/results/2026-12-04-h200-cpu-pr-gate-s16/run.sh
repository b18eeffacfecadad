# The PR-gate benchmark on the device machine's CPUs, pinned to 2 cores (issue 14's "2 cores").
set -e
which git taskset python3
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gate/whl/*.whl
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
mkdir -p .corpus && tar -xzf .gate/corpora.tgz -C .corpus
python3 -m compileall -q .gate/sites /tmp/site > /dev/null || true
nproc; taskset -c 2,3 nproc; python3 -c "import libcst, click; print(libcst.__file__)"
git config --global user.email b@example.com; git config --global user.name b
taskset -c 2,3 python3 benchmarks/pr_gate.py --sites .gate/sites --corpus torch-nn --repeats 3 2>$OUT/torch-nn.err | tee $OUT/torch-nn.md
mv $OUT/pr_gate.json $OUT/pr_gate_torch_nn.json
taskset -c 2,3 python3 benchmarks/pr_gate.py --sites .gate/sites --corpus vllm-omni --repeats 1 --tools new,old,ruff 2>$OUT/vllm-omni.err | tee $OUT/vllm-omni.md
mv $OUT/pr_gate.json $OUT/pr_gate_vllm_omni.json
