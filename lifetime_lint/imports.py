"""Purpose-built import and alias resolution.

LibCST's QualifiedNameProvider resolves every name in the module (about 8x the parse time
on torch/nn). The rules only ask "does this expression mean `torch.cuda.empty_cache`?", which
a table of import bindings answers: collect every `import`/`from ... import` once per file
(flow-insensitively, function-local imports included) and resolve dotted expressions
against it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from lifetime_lint.traversal import subclass_test, walk

if TYPE_CHECKING:  # pragma: no cover
    from lifetime_lint.scopes import ScopeTable


def attribute_names(node: cst.BaseExpression) -> tuple[list[str], bool]:
    """The names along an attribute chain, last first (`a.b.c` -> `["c", "b", "a"]`), and
    whether the chain starts at a plain name (`x[0].up` gives `["up"]`, False)."""
    parts: list[str] = []
    # Exact types (neither class has a subclass): a failing isinstance() against LibCST's
    # ABC-based classes is slow, and every chain ends in one.
    while type(node) is cst.Attribute:
        parts.append(node.attr.value)
        node = node.value
    if type(node) is cst.Name:
        parts.append(node.value)
        return parts, True
    return parts, False


def dotted_name(node: cst.BaseExpression) -> str | None:
    """`a.b.c` for a Name/Attribute chain, else None."""
    parts, from_a_name = attribute_names(node)
    return ".".join(reversed(parts)) if from_a_name else None


def _module_name(node: cst.Attribute | cst.Name | None) -> str | None:
    return dotted_name(node) if node is not None else None


@dataclass(frozen=True)
class ImportBinding:
    """A local name bound by an import statement."""

    local: str  # the name bound in the scope ("t" for `import torch as t`)
    qualified: str  # what it means ("torch")
    statement: cst.Import | cst.ImportFrom
    alias: cst.ImportAlias
    scope: cst.CSTNode | None  # enclosing FunctionDef/ClassDef, None at module level


class ImportMap:
    """Import bindings of one module and dotted-name resolution against them."""

    def __init__(self, bindings: Sequence[ImportBinding], module: cst.Module) -> None:
        self.module = module
        self._scopes: ScopeTable | None = None  # built when a rule or fix first asks
        self.bindings = list(bindings)
        self._by_local: dict[str, list[ImportBinding]] = {}
        for binding in self.bindings:
            self._by_local.setdefault(binding.local, []).append(binding)

    @classmethod
    def from_module(cls, module: cst.Module) -> ImportMap:
        collector = _ImportCollector()
        # Imports are statements: expressions (which cannot hold one) are not entered.
        walk(module, collector.enter, collector.leave, _may_hold_imports)
        return cls(collector.bindings, module)

    def qualified_name(self, node: cst.BaseExpression) -> str | None:
        """Resolve `t.cuda.empty_cache` to `torch.cuda.empty_cache` through the imports.

        Returns None when the root name is not bound by an import (a local variable, a
        parameter, a builtin), so `self.torch.cuda` or `x.cuda` never match.
        """
        dotted = dotted_name(node)
        if dotted is None:
            return None
        root, _, rest = dotted.partition(".")
        bindings = self._by_local.get(root)
        if not bindings:
            return None
        qualified = bindings[-1].qualified
        return f"{qualified}.{rest}" if rest else qualified

    def bindings_for(self, local: str) -> list[ImportBinding]:
        return list(self._by_local.get(local, ()))

    def locals_for(self, qualified: str) -> Iterator[ImportBinding]:
        """Bindings whose name means exactly `qualified`."""
        for binding in self.bindings:
            if binding.qualified == qualified:
                yield binding

    def visible_local_for(self, qualified: str, ancestors: Sequence[cst.CSTNode]) -> str | None:
        """A local name meaning `qualified` that is visible at a point with these ancestors.

        Module-level imports and imports in an enclosing function are visible; imports in
        classes or sibling functions are not.
        A name that is shadowed at that point (a parameter or local of the same name, a
        rebinding anywhere in the scope that owns it) is not visible: code written there
        with it would mean something else.
        """
        enclosing = {id(node) for node in ancestors if isinstance(node, cst.FunctionDef)}
        for binding in self.locals_for(qualified):
            if binding.scope is None or id(binding.scope) in enclosing:
                if len(self._by_local.get(binding.local, ())) == 1 and self._means_at(
                    binding.local, qualified, ancestors
                ):
                    return binding.local
        return None

    @property
    def scope_table(self) -> ScopeTable:
        """The module's `scopes.ScopeTable` (Python's scoping rules), built on first use."""
        from lifetime_lint.scopes import ScopeTable  # scopes builds on this module

        if self._scopes is None:
            self._scopes = ScopeTable(self.module)
        return self._scopes

    def means_at(self, local: str, qualified: str, ancestors: Sequence[cst.CSTNode]) -> bool:
        """Whether `local`, read at this point, can only be `qualified` (not shadowed)."""
        return self._means_at(local, qualified, ancestors)

    def _means_at(self, local: str, qualified: str, ancestors: Sequence[cst.CSTNode]) -> bool:
        """Whether `local`, read at this point, can only be `qualified`."""
        table = self.scope_table
        values = table.values_of(cst.Name(local), table.scope_at(ancestors))
        return bool(values) and all(value.qualified == qualified for value in values)

    def is_bound_locally(self, name: str) -> bool:
        return name in self._by_local


_cannot_hold_imports = subclass_test(
    cst.BaseExpression, cst.Import, cst.ImportFrom, cst.BaseParenthesizableWhitespace
)


def _may_hold_imports(node: cst.CSTNode) -> bool:
    return not _cannot_hold_imports(node)


class _ImportCollector(cst.CSTVisitor):
    def __init__(self) -> None:
        self.bindings: list[ImportBinding] = []
        self._scopes: list[cst.CSTNode] = []

    # Driven by `traversal.walk` (cheaper than `module.visit`), routed like a visitor.
    def enter(self, node: cst.CSTNode) -> None:
        kind = type(node)
        if kind is cst.FunctionDef or kind is cst.ClassDef:
            self._scopes.append(node)
        elif kind is cst.Import:
            self.visit_Import(node)  # type: ignore[arg-type]
        elif kind is cst.ImportFrom:
            self.visit_ImportFrom(node)  # type: ignore[arg-type]

    def leave(self, node: cst.CSTNode) -> None:
        kind = type(node)
        if kind is cst.FunctionDef or kind is cst.ClassDef:
            self._scopes.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._scopes.append(node)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._scopes.pop()

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._scopes.append(node)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._scopes.pop()

    def visit_Import(self, node: cst.Import) -> bool:
        scope = self._scopes[-1] if self._scopes else None
        for alias in node.names:
            full = _module_name(alias.name)
            if full is None:
                continue
            if alias.asname is not None:
                local = dotted_name(alias.asname.name)
                if local:
                    self.bindings.append(ImportBinding(local, full, node, alias, scope))
            else:
                # `import torch.cuda` binds `torch` (to the package `torch`).
                root = full.split(".")[0]
                self.bindings.append(ImportBinding(root, root, node, alias, scope))
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        if node.relative or isinstance(node.names, cst.ImportStar):
            return False
        base = _module_name(node.module)
        if base is None:
            return False
        scope = self._scopes[-1] if self._scopes else None
        for alias in node.names:
            name = _module_name(alias.name)
            if name is None:
                continue
            local = name
            if alias.asname is not None:
                local = dotted_name(alias.asname.name) or name
            self.bindings.append(ImportBinding(local, f"{base}.{name}", node, alias, scope))
        return False
