# Source this on the GPU machine (torch, no libcst): makes `lifetime_lint.runtime` importable
# from the working tree without installing, mapping runtime/ under the package as setuptools does.
shim="${TMPDIR:-/tmp}/lifetime-lint-shim"
rm -rf "$shim" && mkdir -p "$shim/lifetime_lint"
cp -r lifetime_lint/. "$shim/lifetime_lint/"
cp -r runtime "$shim/lifetime_lint/runtime"
cp -r rules "$shim/lifetime_lint/rules"
export PYTHONPATH="$shim${PYTHONPATH:+:$PYTHONPATH}"
