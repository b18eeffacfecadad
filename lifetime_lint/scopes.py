"""Scope-aware name resolution: which bindings a name can mean at a given point.

`ImportMap` answers "what does this import bind"; it cannot tell that `torch` inside
`def f(torch):` is a parameter, that a class attribute named `torch` hides the module in the
class body (but not in its methods), or that `empty_cache` was assigned
`torch.cuda.empty_cache` on one branch and `torch.npu.empty_cache` on another. A fix that
rewrites `torch.cuda.X()` where `torch` is something else changes what the program does, so
the rules that rewrite device calls resolve names here instead.

The table follows Python's rules (one walk per file, built on first use):
- a scope is the module, a function or lambda, a class body or a comprehension;
- a name is local to a scope if anything binds it there: an import, an assignment target
  (also inside tuples, starred, annotated, augmented), a parameter, a `for`, `with ... as`,
  `except ... as`, `del`, `match` capture, `def` or `class`; a walrus binds in the nearest
  enclosing function (not the comprehension); `global`/`nonlocal` redirect the bindings;
- lookups skip class scopes from nested functions and comprehensions;
- a name bound nowhere may come from a module-level `from m import *`.

The analysis is flow-insensitive within a scope: every binding of the name in the scope
that owns it is a possible value. That is exactly right for code that runs later (a
function body sees the module's last rebinding, whatever the order in the file) and errs
towards "cannot tell" inside a function, which is the safe side for a fix.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import libcst as cst

from lifetime_lint.imports import ImportBinding, dotted_name
from lifetime_lint.traversal import LEAF_TYPES, walk_skipping

# Binding kinds whose value we can follow.
IMPORT = "import"
ALIAS = "alias"  # `name = a.b.c`, `name = a.b if cond else c.d`
NONE = "none"  # `name = None`: a fallback that cannot run a call, so it changes no answer


@dataclass(frozen=True)
class Binding:
    """One place that binds a name in a scope."""

    name: str
    kind: str  # IMPORT, ALIAS, NONE, or what else bound it ("parameter", "for target", ...)
    node: cst.CSTNode  # the binding statement or target
    scope: Scope
    value: cst.BaseExpression | None = None  # ALIAS: the expression assigned
    imported: ImportBinding | None = None  # IMPORT

    @property
    def line_node(self) -> cst.CSTNode:
        return self.imported.statement if self.imported is not None else self.node


@dataclass(eq=False)
class Scope:
    node: cst.CSTNode
    kind: str  # "module", "function", "class", "comprehension"
    parent: Scope | None
    bindings: dict[str, list[Binding]] = field(default_factory=dict)
    globals: set[str] = field(default_factory=set)
    nonlocals: set[str] = field(default_factory=set)
    star_imports: list[tuple[str, cst.ImportFrom]] = field(default_factory=list)

    def add(self, binding: Binding) -> None:
        self.bindings.setdefault(binding.name, []).append(binding)


@dataclass(frozen=True)
class Value:
    """One thing an expression may evaluate to: a qualified name, or None (unknown)."""

    qualified: str | None
    via: Binding | None  # the binding it came through (None for a star import)
    star: cst.ImportFrom | None = None


class ScopeTable:
    """The scopes of one module and lookups of names and dotted expressions in them."""

    def __init__(self, module: cst.Module) -> None:
        self.module_scope = Scope(module, "module", None)
        self._by_node: dict[int, Scope] = {id(module): self.module_scope}
        _Builder(self).run(module)

    # -- scopes --------------------------------------------------------------------------
    def scope_at(self, ancestors: Sequence[cst.CSTNode]) -> Scope:
        """The innermost scope that contains the node whose ancestor chain this is."""
        for node in reversed(ancestors):
            scope = self._by_node.get(id(node))
            if scope is not None:
                return scope
        return self.module_scope

    def _register(self, node: cst.CSTNode, kind: str, parent: Scope) -> Scope:
        scope = Scope(node, kind, parent)
        self._by_node[id(node)] = scope
        return scope

    # -- lookups -------------------------------------------------------------------------
    def bindings_of(self, name: str, scope: Scope) -> tuple[Scope | None, list[Binding]]:
        """The scope that owns `name` as seen from `scope`, and its bindings there."""
        current: Scope | None = scope
        first = True
        while current is not None:
            if name in current.globals:
                return self.module_scope, self.module_scope.bindings.get(name, [])
            skip = current.kind == "class" and not first
            if not skip and name in current.bindings and name not in current.nonlocals:
                return current, current.bindings[name]
            first = False
            current = current.parent
        return None, []

    def values_of(self, expression: cst.BaseExpression, scope: Scope) -> list[Value]:
        """Every qualified name `a.b.c` may mean from `scope` (unknown ones as None)."""
        return self._values(expression, scope, set())

    def _values(self, expression: cst.BaseExpression, scope: Scope, seen: set[int]) -> list[Value]:
        if isinstance(expression, cst.IfExp):
            return self._values(expression.body, scope, seen) + self._values(
                expression.orelse, scope, seen
            )
        dotted = dotted_name(expression)
        if dotted is None:
            return [Value(None, None)]
        root, _, rest = dotted.partition(".")
        owner, bindings = self.bindings_of(root, scope)
        if owner is None:
            stars = self.module_scope.star_imports
            if stars:
                return [Value(f"{module}.{dotted}", None, star) for module, star in stars]
            return [Value(None, None)]  # a builtin, or undefined
        values: list[Value] = []
        for binding in bindings:
            for base in self._binding_values(binding, seen):
                if base.qualified is None:
                    values.append(Value(None, binding))
                else:
                    qualified = f"{base.qualified}.{rest}" if rest else base.qualified
                    values.append(Value(qualified, binding))
        return values

    def _binding_values(self, binding: Binding, seen: set[int]) -> Iterator[Value]:
        if binding.kind == NONE:
            return
        if binding.kind == IMPORT and binding.imported is not None:
            yield Value(binding.imported.qualified, binding)
        elif binding.kind == ALIAS and binding.value is not None and id(binding) not in seen:
            seen = seen | {id(binding)}
            yield from self._values(binding.value, binding.scope, seen)
        else:
            yield Value(None, binding)


_LEAVES_SKIPPED = frozenset(LEAF_TYPES)


class _Builder:
    """Collects the scopes and bindings of a module in one walk."""

    def __init__(self, table: ScopeTable) -> None:
        self.table = table
        self.stack: list[Scope] = [table.module_scope]

    def run(self, module: cst.Module) -> None:
        # Leaf whitespace and comments (half the nodes) bind nothing: passed over.
        walk_skipping(module, self.enter, self.leave, _LEAVES_SKIPPED)
        self._redirect_declarations()

    @property
    def scope(self) -> Scope:
        return self.stack[-1]

    def bind(self, name: str, kind: str, node: cst.CSTNode, **extra) -> None:
        self.scope.add(Binding(name, kind, node, self.scope, **extra))

    def bind_targets(self, target: cst.CSTNode, kind: str, node: cst.CSTNode) -> None:
        for name in _target_names(target):
            self.bind(name, kind, node)

    # Driven by `traversal.walk_skipping`: one dictionary look-up per node picks the
    # handler of its exact type (most nodes have none), instead of a chain of tests.
    def enter(self, node: cst.CSTNode) -> None:
        handler = _ENTER_HANDLERS.get(type(node))
        if handler is not None:
            handler(self, node)

    def _enter_function(self, node: cst.FunctionDef) -> None:
        self.bind(node.name.value, "def", node)
        self._push(node, "function")
        self._bind_parameters(node.params)

    def _enter_lambda(self, node: cst.Lambda) -> None:
        self._push(node, "function")
        self._bind_parameters(node.params)

    def _enter_class(self, node: cst.ClassDef) -> None:
        self.bind(node.name.value, "class", node)
        self._push(node, "class")

    def _enter_comprehension(self, node: cst.CSTNode) -> None:
        self._push(node, "comprehension")

    def _enter_comp_for(self, node: cst.CompFor) -> None:
        self.bind_targets(node.target, "comprehension target", node)

    def _enter_ann_assign(self, node: cst.AnnAssign) -> None:
        self._assign_one(node.target, node.value, node)

    def _enter_aug_assign(self, node: cst.AugAssign) -> None:
        self.bind_targets(node.target, "augmented assignment", node)

    def _enter_for(self, node: cst.For) -> None:
        self.bind_targets(node.target, "for target", node)

    def _enter_with_item(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            self.bind_targets(node.asname.name, "with target", node)

    def _enter_except(self, node: cst.ExceptHandler | cst.ExceptStarHandler) -> None:
        if node.name is not None:
            self.bind_targets(node.name.name, "except target", node)

    def _enter_del(self, node: cst.Del) -> None:
        self.bind_targets(node.target, "del", node)

    def _enter_match_capture(self, node: cst.MatchAs | cst.MatchStar) -> None:
        if node.name is not None:
            self.bind(node.name.value, "match capture", node)

    def _enter_match_mapping(self, node: cst.MatchMapping) -> None:
        if node.rest is not None:
            self.bind(node.rest.value, "match capture", node)

    def _enter_global(self, node: cst.Global) -> None:
        self.scope.globals.update(n.name.value for n in node.names)

    def _enter_nonlocal(self, node: cst.Nonlocal) -> None:
        self.scope.nonlocals.update(n.name.value for n in node.names)

    def leave(self, node: cst.CSTNode) -> None:
        if type(node) in _SCOPE_TYPES:
            self.stack.pop()

    def _push(self, node: cst.CSTNode, kind: str) -> None:
        self.stack.append(self.table._register(node, kind, self.scope))

    def _bind_parameters(self, params: cst.Parameters) -> None:
        every = list(params.posonly_params) + list(params.params) + list(params.kwonly_params)
        for extra in (params.star_arg, params.star_kwarg):
            if isinstance(extra, cst.Param):
                every.append(extra)
        for param in every:
            self.bind(param.name.value, "parameter", param)

    def _assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._assign_one(target.target, node.value, node)

    def _assign_one(
        self, target: cst.BaseExpression, value: cst.BaseExpression | None, node: cst.CSTNode
    ) -> None:
        if isinstance(target, cst.Name):
            if value is None:
                self.bind(target.value, "annotation", node)
            elif isinstance(value, cst.Name) and value.value == "None":
                self.bind(target.value, NONE, node)
            elif _is_followable(value):
                self.bind(target.value, ALIAS, node, value=value)
            else:
                self.bind(target.value, "assignment", node)
            return
        self.bind_targets(target, "assignment", node)

    def _walrus(self, node: cst.NamedExpr) -> None:
        index = len(self.stack) - 1
        while index > 0 and self.stack[index].kind == "comprehension":
            index -= 1
        scope = self.stack[index]
        for name in _target_names(node.target):
            scope.add(Binding(name, "walrus target", node, scope))

    def _import(self, node: cst.Import) -> None:
        for alias in node.names:
            full = dotted_name(alias.name)
            if full is None:
                continue
            if alias.asname is not None:
                local = dotted_name(alias.asname.name)
                qualified = full
            else:
                local = qualified = full.split(".")[0]
            if local:
                imported = ImportBinding(local, qualified, node, alias, None)
                self.bind(local, IMPORT, node, imported=imported)

    def _import_from(self, node: cst.ImportFrom) -> None:
        base = dotted_name(node.module) if node.module is not None else None
        if node.relative:
            base = None  # a project-relative module: its names are the project's own
        if isinstance(node.names, cst.ImportStar):
            if self.scope.kind == "module":
                self.scope.star_imports.append((base or "<relative>", node))
            return
        for alias in node.names:
            name = dotted_name(alias.name)
            if name is None:
                continue
            local = name
            if alias.asname is not None:
                local = dotted_name(alias.asname.name) or name
            if base is None:
                self.bind(local, "relative import", node)
                continue
            imported = ImportBinding(local, f"{base}.{name}", node, alias, None)
            self.bind(local, IMPORT, node, imported=imported)

    def _redirect_declarations(self) -> None:
        """Bindings under `global x` belong to the module; under `nonlocal x`, to the
        enclosing function that owns `x`."""
        module = self.table.module_scope
        for scope in list(self.table._by_node.values()):
            for name in scope.globals:
                for binding in scope.bindings.pop(name, []):
                    module.add(binding)
            for name in scope.nonlocals:
                moved = scope.bindings.pop(name, [])
                owner = scope.parent
                while owner is not None and (
                    owner.kind != "function" or name not in owner.bindings
                ):
                    owner = owner.parent
                for binding in moved:
                    (owner or module).add(binding)


_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)
_SCOPE_TYPES = frozenset((cst.FunctionDef, cst.Lambda, cst.ClassDef) + _COMPREHENSIONS)

# What `_Builder.enter` does for a node of each exact type (the types that bind names).
_ENTER_HANDLERS: dict[type, Callable[[_Builder, Any], None]] = {
    cst.FunctionDef: _Builder._enter_function,
    cst.Lambda: _Builder._enter_lambda,
    cst.ClassDef: _Builder._enter_class,
    **dict.fromkeys(_COMPREHENSIONS, _Builder._enter_comprehension),
    cst.CompFor: _Builder._enter_comp_for,
    cst.Assign: _Builder._assign,
    cst.AnnAssign: _Builder._enter_ann_assign,
    cst.AugAssign: _Builder._enter_aug_assign,
    cst.For: _Builder._enter_for,
    cst.WithItem: _Builder._enter_with_item,
    cst.ExceptHandler: _Builder._enter_except,
    cst.ExceptStarHandler: _Builder._enter_except,
    cst.NamedExpr: _Builder._walrus,
    cst.Del: _Builder._enter_del,
    cst.MatchAs: _Builder._enter_match_capture,
    cst.MatchStar: _Builder._enter_match_capture,
    cst.MatchMapping: _Builder._enter_match_mapping,
    cst.Global: _Builder._enter_global,
    cst.Nonlocal: _Builder._enter_nonlocal,
    cst.Import: _Builder._import,
    cst.ImportFrom: _Builder._import_from,
}


def _is_followable(value: cst.BaseExpression) -> bool:
    if isinstance(value, cst.IfExp):
        return _is_followable(value.body) and _is_followable(value.orelse)
    return dotted_name(value) is not None


def _target_names(target: cst.CSTNode) -> list[str]:
    """Names an assignment target binds (attributes and subscripts bind none)."""
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        names: list[str] = []
        for element in target.elements:
            names.extend(_target_names(element.value))
        return names
    if isinstance(target, cst.StarredElement):
        return _target_names(target.value)
    return []
