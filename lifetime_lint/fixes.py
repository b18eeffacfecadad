"""Building blocks of fixes: adding imports, applying edits, removing imports a fix orphaned.

Rules describe fixes as text edits; these helpers make the common ones (reference a helper
that needs an import) consistent across rules: an import is added once, merged into an
existing `from module import ...` where there is one, placed after the module's import
block, and never shadows a name the module already uses.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import libcst as cst

from lifetime_lint.diagnostics import Edit, Fix
from lifetime_lint.imports import dotted_name
from lifetime_lint.rule import FileContext
from lifetime_lint.traversal import visit


@dataclass(frozen=True)
class Target:
    """A configurable callable such as `pkg.mod:obj.method` or `pkg.mod.func`.

    The part before `:` is the module to import from; the first name after it is imported;
    the rest is an attribute path. Without `:` the last dotted component is imported.
    """

    module: str
    name: str
    attributes: tuple[str, ...] = ()

    @classmethod
    def parse(cls, spec: str) -> Target:
        spec = spec.strip()
        if ":" in spec:
            module, _, path = spec.partition(":")
            parts = path.split(".")
        else:
            module, _, last = spec.rpartition(".")
            parts = [last]
        if (
            not module
            or not all(p.isidentifier() for p in parts)
            or not all(p.isidentifier() for p in module.split("."))
        ):
            raise ValueError(f"not a valid import target: {spec!r} (use 'package.module:name')")
        return cls(module, parts[0], tuple(parts[1:]))

    @property
    def qualified(self) -> str:
        return ".".join((self.module, self.name) + self.attributes)


def target_problem(spec: str) -> str | None:
    """Why `spec` is not a valid helper path, or None: an `Option.validate` for rule options
    that name a helper (`reclaim-call`, `chunk-writer`, ...)."""
    try:
        Target.parse(spec)
    except ValueError as error:
        return str(error)
    return None


def reference_to(
    context: FileContext, target: Target, ancestors: Sequence[cst.CSTNode]
) -> tuple[str, tuple[Edit, ...]]:
    """Code that names `target` at a point, and the edits (an import) it needs."""
    imports = context.imports
    local = imports.visible_local_for(f"{target.module}.{target.name}", ancestors)
    if local is not None:
        return ".".join((local,) + target.attributes), ()
    module_local = imports.visible_local_for(target.module, ancestors)
    if module_local is not None and "." not in target.module:
        return ".".join((module_local, target.name) + target.attributes), ()
    name = target.name
    asname: str | None = None
    if _name_is_taken(context, name):
        asname = f"_ll_{name}"
    edit = add_from_import_edit(context, target.module, name, asname)
    return ".".join((asname or name,) + target.attributes), (edit,)


def module_reference(
    context: FileContext, module: str, ancestors: Sequence[cst.CSTNode]
) -> tuple[str, tuple[Edit, ...]]:
    """Code that names a module (`torch`) at a point, and the `import` it needs."""
    local = context.imports.visible_local_for(module, ancestors)
    if local is not None:
        return local, ()
    if _name_is_taken(context, module.split(".")[0]):
        alias = "_ll_" + module.replace(".", "_")
        return alias, (_insert_import_line(context, f"import {module} as {alias}"),)
    return module, (_insert_import_line(context, f"import {module}"),)


def import_bindings_under(
    context: FileContext, func: cst.BaseExpression, module: str
) -> tuple[str, ...]:
    """The local name a rewrite of `func` may leave unused, for `Fix.orphan_import_candidates`.

    `empty_cache` of `from torch.cuda import empty_cache`, `cuda` of `from torch import cuda`,
    `tc` of `import torch.cuda as tc`: the root name of `func`, when every import binding it
    has names `module` or something inside it. Never a binding of a parent package (a plain
    `import torch` may be there for its side effects).
    """
    root = func
    while isinstance(root, cst.Attribute):
        root = root.value
    if not isinstance(root, cst.Name):
        return ()
    bindings = context.imports.bindings_for(root.value)
    if bindings and all(
        b.qualified == module or b.qualified.startswith(module + ".") for b in bindings
    ):
        return (root.value,)
    return ()


def _name_is_taken(context: FileContext, name: str) -> bool:
    taken = context.memo.get("fixes.taken_names")
    if taken is None:  # one walk per file, however many fixes ask
        finder = _NameFinder()
        visit(context.module, finder)
        taken = context.memo["fixes.taken_names"] = finder.names
    return name in taken


class _NameFinder(cst.CSTVisitor):
    """Every name the module uses or binds (attribute names after a dot excluded)."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        visit(node.value, self)  # the attribute name itself is not a binding
        return False

    def visit_Import(self, node: cst.Import) -> bool:
        # `import torch.cuda` binds `torch`; a module path binds nothing else.
        for alias in node.names:
            bound = _bound_name(alias) if alias.asname else (dotted_name(alias.name) or "")
            self.names.add(bound.split(".")[0])
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        if not isinstance(node.names, cst.ImportStar):
            for alias in node.names:
                bound = _bound_name(alias)
                if bound is not None:
                    self.names.add(bound)
        return False


def add_from_import_edit(
    context: FileContext, module: str, name: str, asname: str | None = None
) -> Edit:
    """`from module import name [as asname]`, merged into an existing top-level
    `from module import ...` when there is one, else a new line after the import block."""
    alias_code = f"{name} as {asname}" if asname else name
    for statement in context.module.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if (
                isinstance(small, cst.ImportFrom)
                and not small.relative
                and small.module is not None
                and dotted_name(small.module) == module
                and not isinstance(small.names, cst.ImportStar)
            ):
                last = small.names[-1]
                _, end = context.span(last.asname if last.asname is not None else last.name)
                return Edit(end, end, f", {alias_code}")
    return _insert_import_line(context, f"from {module} import {alias_code}")


def _insert_import_line(context: FileContext, code: str) -> Edit:
    offset = import_insertion_offset(context)
    source = context.source
    if offset == len(source) and source and not source.endswith(("\n", "\r")):
        return Edit(offset, offset, context.newline + code + context.newline)
    return Edit(offset, offset, code + context.newline)


def import_insertion_offset(context: FileContext) -> int:
    """After the docstring, `__future__` imports and the leading block of imports."""
    body = context.module.body
    anchor: cst.CSTNode | None = None
    for index, statement in enumerate(body):
        if _is_import_line(statement) or (index == 0 and _is_docstring(statement)):
            anchor = statement
            continue
        break
    if anchor is not None:
        return context.line_after(anchor)
    if not body:
        return len(context.source)
    return context.line_start_of(body[0])


def _is_import_line(statement: cst.CSTNode) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and all(
        isinstance(small, (cst.Import, cst.ImportFrom)) for small in statement.body
    )


def _is_docstring(statement: cst.CSTNode) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


# -- applying ---------------------------------------------------------------------------


def select_non_overlapping(fixes: Iterable[Fix]) -> list[Fix]:
    """Greedily accept fixes in source order whose edits overlap no accepted edit.

    Identical edits (the same import added by two fixes) are shared, not conflicts. The
    rest waits for the next round of the fix loop, which re-lints the new source.
    """
    accepted: list[Fix] = []
    taken: list[Edit] = []
    for fix in sorted(fixes, key=lambda f: min((e.start for e in f.edits), default=0)):
        if any(edit.overlaps(other) for edit in fix.edits for other in taken):
            continue
        accepted.append(fix)
        taken.extend(edit for edit in fix.edits if edit not in taken)
    return accepted


def apply_edits(source: str, edits: Iterable[Edit]) -> str:
    unique = sorted(set(edits), key=lambda e: (e.start, e.end))
    pieces: list[str] = []
    cursor = 0
    for edit in unique:
        pieces.append(source[cursor : edit.start])
        pieces.append(edit.content)
        cursor = edit.end
    pieces.append(source[cursor:])
    return "".join(pieces)


def orphan_import_edits(context: FileContext, names: set[str]) -> list[Edit]:
    """Edits that drop the import aliases binding `names` that nothing in the module reads.

    Text edits on the file's exact text, never LibCST's regenerated module (which is not
    byte for byte the file everywhere: it drops form feeds and a final lone CR). A statement
    left with no alias goes with its line (and, opening a block, the blank lines after it);
    a block left empty gets `pass`.
    """
    if not names:
        return []
    counter = _ReferenceCounter(names)
    visit(context.module, counter)
    unused = {name for name in names if counter.counts.get(name, 0) == 0}
    if not unused:
        return []
    finder = _OrphanedImportFinder(unused)
    visit(context.module, finder)
    edits: list[Edit] = []
    for block, lines in finder.lines_by_block.items():
        emptied = [line for line, kept in lines if not kept]
        block_body: Sequence[cst.CSTNode] = getattr(block, "body", ())
        keep_one = isinstance(block, cst.IndentedBlock) and len(emptied) == len(block_body)
        for line, kept in lines:
            if kept:
                edits.append(_rewrite_statement_edit(context, line, kept))
            elif keep_one and line is emptied[0]:
                first, last = line.body[0], line.body[-1]
                edits.append(Edit(context.span(first)[0], context.span(last)[1], "pass"))
            else:
                opens_block = isinstance(block, cst.IndentedBlock) and block_body[0] is line
                edits.append(_line_removal_edit(context, line, opens_block))
    for suite, kept in finder.suites:
        first, last = suite.body[0], suite.body[-1]
        start, end = context.span(first)[0], context.span(last)[1]
        edits.append(Edit(start, end, _joined(context, kept) if kept else "pass"))
    return edits


def _rewrite_statement_edit(
    context: FileContext, line: cst.SimpleStatementLine, kept: list[tuple[cst.CSTNode, bool]]
) -> Edit:
    first, last = line.body[0], line.body[-1]
    if len(line.body) == 1 and len(kept) == 1:
        small, _ = kept[0]
        start, end = context.span(first)
        return Edit(start, end, _small_code(context, small))
    return Edit(context.span(first)[0], context.span(last)[1], _joined(context, kept))


def _joined(context: FileContext, kept: list[tuple[cst.CSTNode, bool]]) -> str:
    return "; ".join(
        _small_code(context, small) if changed else context.source_of(small)
        for small, changed in kept
    )


def _small_code(context: FileContext, small: cst.CSTNode) -> str:
    return context.code_for(small.with_changes(semicolon=cst.MaybeSentinel.DEFAULT))


def _line_removal_edit(
    context: FileContext, line: cst.SimpleStatementLine, opens_block: bool
) -> Edit:
    source = context.source
    start, end = context.line_start_of(line), context.line_after(line)
    # A form feed opening the line is a page break, not part of the import: it stays.
    leading = source[start : context.span(line.body[0])[0]]
    start += leading.rfind("\f") + 1
    if opens_block:
        # Do not leave the block opening on blank lines.
        starts = context.line_starts
        row = context.row_of(end)
        while row < len(starts) and not source[starts[row - 1] : starts[row]].strip():
            end = starts[row]
            row += 1
    return Edit(start, end, "")


class _OrphanedImportFinder(cst.CSTVisitor):
    """Statements with aliases to drop, by enclosing block, with what each keeps:
    (small statement, changed) pairs, empty when nothing is left."""

    def __init__(self, names: set[str]) -> None:
        self.names = names
        self._blocks: list[cst.CSTNode] = []
        self.lines_by_block: dict[
            cst.CSTNode, list[tuple[cst.SimpleStatementLine, list[tuple[cst.CSTNode, bool]]]]
        ] = {}
        self.suites: list[tuple[cst.SimpleStatementSuite, list[tuple[cst.CSTNode, bool]]]] = []

    def visit_Module(self, node: cst.Module) -> None:
        self._blocks.append(node)

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._blocks.append(node)

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock) -> None:
        self._blocks.pop()

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> bool:
        kept = self._kept(node.body)
        if kept is not None:
            self.lines_by_block.setdefault(self._blocks[-1], []).append((node, kept))
        return False

    def visit_SimpleStatementSuite(self, node: cst.SimpleStatementSuite) -> bool:
        kept = self._kept(node.body)
        if kept is not None:
            self.suites.append((node, kept))
        return False

    def _kept(self, smalls: Sequence[cst.BaseSmallStatement]):  # type: ignore[no-untyped-def]
        """What the statements keep, or None when none of them changes."""
        kept: list[tuple[cst.CSTNode, bool]] = []
        changed = False
        for small in smalls:
            if isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar):
                updated = self._without_unused(small, lambda alias: True)
            elif isinstance(small, cst.Import):
                # Only `import a.b as x` bindings are candidates: a plain `import torch`
                # may be there for its side effects.
                updated = self._without_unused(small, lambda alias: alias.asname is not None)
            else:
                updated = small
            if updated is not small:
                changed = True
            if updated is not None:
                kept.append((updated, updated is not small))
        return kept if changed else None

    def _without_unused(self, statement, removable):  # type: ignore[no-untyped-def]
        """The import statement without its unused aliases (None if none is left)."""
        kept = [
            alias
            for alias in statement.names
            if not (removable(alias) and _bound_name(alias) in self.names)
        ]
        if len(kept) == len(statement.names):
            return statement
        if not kept:
            return None
        kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return statement.with_changes(names=kept)


class _ReferenceCounter(cst.CSTVisitor):
    def __init__(self, names: set[str]) -> None:
        self.names = names
        self.counts: dict[str, int] = {}

    def visit_Import(self, node: cst.Import) -> bool:
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        return False

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        visit(node.value, self)
        return False

    def visit_Name(self, node: cst.Name) -> None:
        if node.value in self.names:
            self.counts[node.value] = self.counts.get(node.value, 0) + 1

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        # A name listed in `__all__` (or used by string) is still in use.
        try:
            value = node.evaluated_value
        except Exception:
            return
        if isinstance(value, str) and value in self.names:
            self.counts[value] = self.counts.get(value, 0) + 1


def _bound_name(alias: cst.ImportAlias) -> str | None:
    if alias.asname is not None:
        return dotted_name(alias.asname.name)  # type: ignore[arg-type]
    return dotted_name(alias.name)
