"""Flow facts by syntax: every occurrence of a local name in one function, with where it sits.

The CFG (`cfg.py`) knows which node reads or binds a name and the dataflow which binding
reaches a read; what it does not keep is the syntactic position of each occurrence (is it
the first argument of `torch.cat`, the receiver of `.append`, the test of an `if`, the
target of a `for`?). Rules that rewrite code or read guards need that position, so this
module records it once per function, memoised on the file context next to the facts
(`uses_for`), walked with the read-only traversal:

- `NameUses.of(name)`: the occurrences of `name` in source order, each a `Use` with the
  ancestor chain from the function down to the name's parent, whether it sits in a nested
  function, lambda or class (another scope), whether it binds or deletes the name;
- `NameUses.loop_targets`: names bound by a `for` or a comprehension's `for`;
- `load_nodes(context, facts)`: the CFG node of every name read, to ask the dataflow
  which binding a read sees.

Names that are not references are left out: attribute names (`x.append` is no use of
`append`), keyword names of calls, the names of nested `def`/`class` statements and import
aliases.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from lifetime_lint.analysis.cfg import Node
from lifetime_lint.traversal import walk

MEMO_KEY = "analysis.uses"
LOADS_KEY = "analysis.uses.loads"
_SCOPES = (cst.FunctionDef, cst.Lambda, cst.ClassDef)


@dataclass(frozen=True)
class Use:
    """One occurrence of a name."""

    node: cst.Name
    # From the function itself (first) down to the name's parent (last).
    ancestors: tuple[cst.CSTNode, ...]
    order: int  # position among all uses of the function, in source order
    nested: bool  # inside a nested def, lambda or class
    binding: bool  # (part of) an assignment, `for`, `with ... as`, walrus target
    deleted: bool  # a target of `del`

    @property
    def parent(self) -> cst.CSTNode | None:
        return self.ancestors[-1] if self.ancestors else None

    @property
    def chain(self) -> tuple[cst.CSTNode, ...]:
        """The ancestors followed by the name itself."""
        return self.ancestors + (self.node,)

    def inside(self, node: cst.CSTNode) -> bool:
        return any(ancestor is node for ancestor in self.ancestors)


@dataclass
class NameUses:
    function: cst.FunctionDef
    names: dict[str, list[Use]] = field(default_factory=dict)
    loop_targets: frozenset[str] = frozenset()

    def of(self, name: str) -> list[Use]:
        return self.names.get(name, [])


def uses_for(context, function: cst.FunctionDef) -> NameUses:
    """The name uses of one function (built on first request, shared by every rule)."""
    memo = context.memo.setdefault(MEMO_KEY, {})
    found = memo.get(id(function))
    if found is None or found.function is not function:
        found = _build(function)
        memo[id(function)] = found
    return found


def _build(function: cst.FunctionDef) -> NameUses:
    uses = NameUses(function)
    chain: list[cst.CSTNode] = [function]
    skipped: set[int] = set()  # Name nodes that are not references
    loop_targets: set[str] = set()
    nested = [0]
    counter = [0]

    def enter(node: cst.CSTNode) -> None:
        kind = type(node)
        if kind is cst.Name:
            if id(node) not in skipped:
                name = node.value  # type: ignore[attr-defined]
                binding, deleted = _binding_role(chain, node)
                uses.names.setdefault(name, []).append(
                    Use(node, tuple(chain), counter[0], nested[0] > 0, binding, deleted)  # type: ignore[arg-type]
                )
                counter[0] += 1
                if binding and _is_loop_target(chain):
                    loop_targets.add(name)
        elif kind is cst.Attribute:
            skipped.add(id(node.attr))  # type: ignore[attr-defined]
        elif kind is cst.Arg and node.keyword is not None:  # type: ignore[attr-defined]
            skipped.add(id(node.keyword))  # type: ignore[attr-defined]
        elif kind in (cst.FunctionDef, cst.ClassDef):
            skipped.add(id(node.name))  # type: ignore[attr-defined]
        elif kind is cst.ImportAlias or kind is cst.Import or kind is cst.ImportFrom:
            pass
        if kind in _SCOPES:
            nested[0] += 1
        chain.append(node)

    def leave(node: cst.CSTNode) -> None:
        chain.pop()
        if type(node) in _SCOPES:
            nested[0] -= 1

    def descend(node: cst.CSTNode) -> bool:
        return not isinstance(node, (cst.Import, cst.ImportFrom))

    walk(function.body, enter, leave, descend)
    uses.loop_targets = frozenset(loop_targets)
    return uses


def _binding_role(chain: list[cst.CSTNode], name: cst.CSTNode) -> tuple[bool, bool]:
    """(binds, deletes) for `name`, whose ancestors are `chain`."""
    child = name
    for parent in reversed(chain):
        if isinstance(parent, (cst.Tuple, cst.List, cst.StarredElement, cst.Element)):
            child = parent
            continue
        if isinstance(parent, (cst.AssignTarget, cst.AsName)):
            return True, False
        if isinstance(parent, cst.Del):
            return False, True
        if isinstance(parent, (cst.AugAssign, cst.AnnAssign, cst.NamedExpr, cst.For, cst.CompFor)):
            return getattr(parent, "target", None) is child, False
        return False, False
    return False, False


def _is_loop_target(chain: list[cst.CSTNode]) -> bool:
    for parent in reversed(chain):
        if isinstance(parent, (cst.For, cst.CompFor)):
            return True
        if not isinstance(parent, (cst.Tuple, cst.List, cst.StarredElement, cst.Element)):
            return False
    return False


def load_nodes(context, facts) -> dict[int, Node]:
    """The CFG node that reads each name node of a function (by node identity): where to
    ask the dataflow which binding a read sees (`facts.reaching(node, name)`)."""
    memo = context.memo.setdefault(LOADS_KEY, {})
    found = memo.get(id(facts))
    if found is None or found[0] is not facts:
        found = (facts, {id(load): node for node in facts.cfg.nodes for load in node.loads})
        memo[id(facts)] = found
    return found[1]
