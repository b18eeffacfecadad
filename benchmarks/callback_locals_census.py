"""How many diffusers-style step-end callback loops (`callback_kwargs[k] = locals()[k]`) in
`.corpus/` the facts layer narrows to `_callback_tensor_inputs` (session 11, h-locals).

    PYTHONPATH=. python benchmarks/callback_locals_census.py
"""

from __future__ import annotations

import collections
import subprocess

import libcst as cst

from lifetime_lint.analysis import facts as F
from lifetime_lint.config import Settings
from lifetime_lint.rule import FileContext


def _callback_functions(module: cst.Module) -> list[cst.FunctionDef]:
    functions: list[cst.FunctionDef] = []

    class Finder(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
            body = module.code_for_node(node.body)
            if "locals()[" in body and "callback_kwargs" in body:
                functions.append(node)

    module.visit(Finder())
    return functions


def main() -> None:
    listing = subprocess.run(
        ["grep", "-rlF", "--include=*.py", "locals()[", ".corpus/"], capture_output=True, text=True
    )
    stats: collections.Counter[str] = collections.Counter()
    kept: list[str] = []
    for path in listing.stdout.split():
        with open(path, encoding="utf-8", errors="replace") as handle:
            source = handle.read()
        try:
            module = cst.parse_module(source)
        except Exception:
            continue
        context = FileContext(path, source, module, "\n", Settings())
        for function in _callback_functions(module):
            facts = F.facts_for(context, function)
            if facts is None:
                stats["too large"] += 1
                continue
            for node in facts.cfg.nodes:
                if node.dynamic_call is None or node.statement is None:
                    continue
                if "callback_kwargs" not in module.code_for_node(node.statement):
                    continue
                stats["kept" if node.dynamic else "narrowed"] += 1
                if node.dynamic:
                    kept.append(f"{path}:{function.name.value}")
    print(dict(stats))
    print(dict(collections.Counter(p.split("/")[1] for p in kept)))
    for entry in kept:
        print("kept:", entry)


if __name__ == "__main__":
    main()
