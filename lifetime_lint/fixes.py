"""Building blocks of fixes: adding imports, applying edits, removing imports a fix orphaned.

Rules describe fixes as text edits; these helpers make the common ones (reference a helper
that needs an import) consistent across rules, and mergeable as they are: a helper comes
from the project's `runtime-module` when it has one; an existing binding is reused where
one is in scope; an import is added once, where the project's import sorter (Ruff's `I`
rules, or isort) would put it, merged into an existing `from module import ...` that runs
before the use; a name the module already uses is never shadowed; and a fix that would make
the project depend on lifetime-lint without its saying so is offered as unsafe.
"""

from __future__ import annotations

import ast
import os
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import libcst as cst

from lifetime_lint.diagnostics import Applicability, Edit, Fix
from lifetime_lint.imports import dotted_name
from lifetime_lint.project import LOCAL_FOLDER, ImportStyle, project_for
from lifetime_lint.rule import FileContext, Rule
from lifetime_lint.traversal import visit
from lifetime_lint.vendor import RUNTIME_PACKAGE, UNDECLARED, configured_runtime_module

if TYPE_CHECKING:  # pragma: no cover
    from lifetime_lint.config import Settings


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


# -- where helpers come from -------------------------------------------------------------

_UNDECLARED_RUNTIME_EDITS = "fixes.undeclared_runtime_edits"


def is_runtime_package(module: str) -> bool:
    return module == RUNTIME_PACKAGE or module.startswith(RUNTIME_PACKAGE + ".")


def helper_target(settings: Settings, target: Target) -> Target:
    """`target`, imported from the project's `runtime-module` when it is one of ours."""
    module = configured_runtime_module(settings)
    if module and is_runtime_package(target.module):
        return Target(module, target.name, target.attributes)
    return target


def reference_to(
    context: FileContext, target: Target, ancestors: Sequence[cst.CSTNode]
) -> tuple[str, tuple[Edit, ...]]:
    """Code that names `target` at a point, and the edits (an import) it needs.

    A helper of `lifetime_lint.runtime` comes from the project's `runtime-module` when one
    is configured. An existing binding is used where one is visible and already bound when
    the code runs; otherwise an import is added (see `add_from_import_edit`).
    """
    target = helper_target(context.settings, target)
    use = _use_offset(context, ancestors)
    local = _usable_binding(context, f"{target.module}.{target.name}", ancestors, use)
    if local is not None:
        return ".".join((local,) + target.attributes), ()
    module_local = _usable_binding(context, target.module, ancestors, use)
    if module_local is not None and "." not in target.module:
        return ".".join((module_local, target.name) + target.attributes), ()
    name = target.name
    asname: str | None = None
    if _name_is_taken(context, name):
        asname = f"_ll_{name}"
    at_module_level = not any(isinstance(node, _SCOPES) for node in ancestors)
    edit = add_from_import_edit(
        context, target.module, name, asname, before=use if at_module_level else None
    )
    if is_runtime_package(target.module) and not _may_import_runtime(context):
        context.memo.setdefault(_UNDECLARED_RUNTIME_EDITS, set()).add(edit)
    return ".".join((asname or name,) + target.attributes), (edit,)


def module_reference(
    context: FileContext, module: str, ancestors: Sequence[cst.CSTNode]
) -> tuple[str, tuple[Edit, ...]]:
    """Code that names a module (`torch`) at a point, and the `import` it needs.

    Any binding of the module is used (`import torch.distributed` binds `torch`); an
    import is added only when there is none, and an alias only when the name is taken.
    """
    local = _usable_binding(context, module, ancestors, _use_offset(context, ancestors))
    if local is not None:
        return local, ()
    if _name_is_taken(context, module.split(".")[0]):
        alias = "_ll_" + module.replace(".", "_")
        return alias, (_insert_statement(context, module, None, f"import {module} as {alias}"),)
    return module, (_insert_statement(context, module, None, f"import {module}"),)


def _may_import_runtime(context: FileContext) -> bool:
    """Whether a fix may add an import of `lifetime_lint.runtime` to this file: the project
    declares lifetime-lint as a dependency, or the file imports from it already."""
    if project_for(context.path).declares_lifetime_lint:
        return True
    return any(
        binding.qualified.split(".")[0] == "lifetime_lint" for binding in context.imports.bindings
    )


def review_fix(context: FileContext, rule: Rule, message: str, fix: Fix) -> tuple[str, Fix]:
    """The finding's message and fix as they may be offered in this project.

    A fix that imports `lifetime_lint.runtime` into a project that does not depend on
    lifetime-lint is unsafe (the module would fail to import wherever the linter is not
    installed); both messages say what to do instead.
    """
    fix = fit_to_line_length(context, fix)
    undeclared = context.memo.get(_UNDECLARED_RUNTIME_EDITS)
    if not undeclared or not any(edit in undeclared for edit in fix.edits):
        return message, fix
    options = [
        option.name
        for option in rule.options
        if isinstance(option.default, str) and option.default.startswith(RUNTIME_PACKAGE + ".")
    ]
    own_helper = f", or point `{options[0]}` at the project's own helper" if options else ""
    reason = (
        f"unsafe: it imports `{RUNTIME_PACKAGE}`, {UNDECLARED}; vendor the helpers with `lifetime-lint vendor-runtime "
        "PATH/_lifetime_runtime.py` and set `runtime-module` under [tool.lifetime-lint]"
        f"{own_helper}"
    )
    note = (
        "; the fix is unsafe here: this project does not depend on lifetime-lint (vendor the "
        f"helpers with `lifetime-lint vendor-runtime` and set `runtime-module`{own_helper})"
    )
    fix = replace(fix, message=f"{fix.message} ({reason})", applicability=Applicability.UNSAFE)
    return message + note, fix


# -- rewritten lines within the project's line length ------------------------------------


def fit_to_line_length(context: FileContext, fix: Fix) -> Fix:
    """`fix`, with each rewritten one-line statement that would pass the project's Ruff
    `line-length` wrapped as `ruff format` wraps it (split at the bracket that closes the
    line: the body on one indented line if it fits there, else one item a line with a
    trailing comma). A line that cannot be wrapped so is left as the fix wrote it."""
    limit = project_for(context.path).style.configured_line_length
    if limit is None:
        return fix
    source = context.source
    edits = list(fix.edits)
    rows = [(context.row_of(e.start), context.row_of(max(e.start, e.end - 1))) for e in edits]
    for index, edit in enumerate(edits):
        first, last = rows[index]
        if (
            not edit.content
            or "\n" in edit.content
            or "\r" in edit.content
            or source[edit.end - 1 : edit.end] in ("\n", "\r")
            or any(o[0] <= last and first <= o[1] for i, o in enumerate(rows) if i != index)
        ):
            continue
        line_start = context.line_starts[first - 1]
        line_end = edit.end
        while line_end < len(source) and source[line_end] not in "\r\n":
            line_end += 1
        line = source[line_start : edit.start] + edit.content + source[edit.end : line_end]
        if len(line) <= limit:
            continue
        wrapped = wrap_statement_line(line, limit, context.newline)
        if wrapped is not None:
            edits[index] = Edit(line_start, line_end, wrapped)
    if edits == list(fix.edits):
        return fix
    return replace(fix, edits=tuple(edits))


_OPENING = {")": "(", "]": "[", "}": "{"}


def wrap_statement_line(line: str, limit: int, newline: str = "\n") -> str | None:
    """A one-line simple statement too long for `limit`, split as `ruff format` splits it
    at the bracket that closes the line, or None when that does not make it fit (or the line
    is not one whole statement: a comment, a string continuation, an open bracket)."""
    import io
    import tokenize

    indent = line[: len(line) - len(line.lstrip())]
    code = line[len(indent) :]
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code + "\n").readline))
    except (tokenize.TokenError, SyntaxError):
        return None
    significant = [
        t for t in tokens if t.type not in (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER)
    ]
    if not significant or any(t.type in (tokenize.COMMENT, tokenize.INDENT) for t in tokens):
        return None
    last = significant[-1]
    if last.string not in _OPENING or last.end[0] != 1:
        return None
    # The bracket that opens the closing one, and the top-level commas inside it.
    depth = 0
    opening = None
    commas: list[int] = []
    for token in reversed(significant[:-1]):
        if token.type != tokenize.OP:
            continue
        if token.string in _OPENING:
            depth += 1
        elif token.string in _OPENING.values():
            if depth == 0:
                opening = token
                break
            depth -= 1
        elif token.string == "," and depth == 0:
            commas.append(token.start[1])
    if opening is None or opening.string != _OPENING[last.string]:
        return None
    head = code[: opening.end[1]]
    body = code[opening.end[1] : last.start[1]].strip()
    if not body or len(indent) + len(head) > limit:
        return None
    inner = indent + "    "
    if len(inner) + len(body) <= limit and not body.endswith(","):
        pieces = [body]
    else:
        items = []
        cursor = opening.end[1]
        for comma in sorted(commas):
            items.append(code[cursor:comma].strip())
            cursor = comma + 1
        items.append(code[cursor : last.start[1]].strip())
        items = [item for item in items if item]
        if any(len(inner) + len(item) + 1 > limit for item in items):
            return None
        pieces = [item + "," for item in items]
    wrapped = newline.join(
        [indent + head] + [inner + piece for piece in pieces] + [indent + last.string]
    )
    try:  # the same statement, only laid out on several lines
        same = ast.dump(ast.parse(code)) == ast.dump(ast.parse(wrapped.strip()))
    except SyntaxError:
        return None
    return wrapped if same else None


def _use_offset(context: FileContext, ancestors: Sequence[cst.CSTNode]) -> int:
    return context.span(ancestors[-1])[0] if ancestors else len(context.source)


_SCOPES = (cst.FunctionDef, cst.Lambda, cst.ClassDef)


def _usable_binding(
    context: FileContext, qualified: str, ancestors: Sequence[cst.CSTNode], use: int
) -> str | None:
    """A local name bound to `qualified` by an import that code at `use` can rely on.

    Visible from the use (module level, or an enclosing function), never rebound by another
    import to something else, and, when it is bound in the use's own scope, bound before
    the use (a module-level call above a later import would raise NameError).
    """
    imports = context.imports
    scopes = [node for node in ancestors if isinstance(node, _SCOPES)]
    innermost = scopes[-1] if scopes else None
    enclosing = {id(node) for node in scopes if isinstance(node, cst.FunctionDef)}
    for binding in imports.locals_for(qualified):
        if binding.scope is not None and id(binding.scope) not in enclosing:
            continue
        if any(other.qualified != qualified for other in imports.bindings_for(binding.local)):
            continue
        if binding.scope is innermost and context.span(binding.statement)[1] > use:
            continue
        if not imports.means_at(binding.local, qualified, ancestors):
            continue  # shadowed at the use (a parameter, a local, a rebinding)
        return binding.local
    return None


def import_bindings_under(
    context: FileContext, func: cst.BaseExpression, module: str
) -> tuple[str, ...]:
    """The local name a rewrite of `func` may leave unused, for `Fix.orphan_import_candidates`.

    `empty_cache` of `from torch.cuda import empty_cache`, `cuda` of `from torch import cuda`,
    `tc` of `import torch.cuda as tc`: the root name of `func`, when every import binding it
    has names `module` or something inside it; and `torch` of a plain `import torch` that
    the rewrite leaves unused (Ruff's F401 would flag it, and its own fix removes it), except
    in an `__init__.py`, where an import may be a re-export.
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
    package = module.split(".")[0]
    if (
        bindings
        and os.path.basename(context.path) != "__init__.py"
        and all(
            isinstance(b.statement, cst.Import) and b.alias.asname is None and b.local == package
            for b in bindings
        )
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
            self.names.add((bound or "").split(".")[0])
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        if not isinstance(node.names, cst.ImportStar):
            for alias in node.names:
                bound = _bound_name(alias)
                if bound is not None:
                    self.names.add(bound)
        return False


# -- adding imports where the import sorter wants them -----------------------------------


def add_from_import_edit(
    context: FileContext,
    module: str,
    name: str,
    asname: str | None = None,
    *,
    before: int | None = None,
) -> Edit:
    """`from module import name [as asname]` where Ruff's isort rules (`I001`) put it.

    Merged, in sorted position, into an existing module-level `from module import ...`: one
    that runs before offset `before` for a module-level use (a later one would bind the name
    too late: NameError at import), one of the leading import block otherwise; rewrapped in
    parentheses when the line would pass the project's line length; else a new statement
    in its section of the leading import block, sorted.
    """
    style = project_for(context.path).style
    if not style.force_single_line:
        # Without a use offset (a use inside a function), only the leading block: merging
        # into a later import while another fix adds one at the top would import twice.
        candidates = context.module.body if before is not None else _leading_import_block(context)
        for statement in candidates:
            if not isinstance(statement, cst.SimpleStatementLine):
                continue
            if before is not None and context.span(statement)[1] > before:
                break
            for small in statement.body:
                if (
                    isinstance(small, cst.ImportFrom)
                    and not small.relative
                    and small.module is not None
                    and dotted_name(small.module) == module
                    and not isinstance(small.names, cst.ImportStar)
                ):
                    return _merge_into(context, style, statement, small, name, asname)
    code = _from_import_code(style, module, [_alias_code(name, asname)], "", context.newline)
    return _insert_statement(context, module, name, code)


def _alias_code(name: str, asname: str | None) -> str:
    return f"{name} as {asname}" if asname else name


def _from_import_code(
    style: ImportStyle, module: str, aliases: list[str], indent: str, newline: str
) -> str:
    """`from module import a, b` as Ruff's isort writes it: wrapped when it is too long."""
    line = f"{indent}from {module} import {', '.join(aliases)}"
    if len(line) <= style.line_length:
        return line[len(indent) :]
    body = "".join(f"{indent}    {alias},{newline}" for alias in aliases)
    return f"from {module} import ({newline}{body}{indent})"


def _merge_into(
    context: FileContext,
    style: ImportStyle,
    statement: cst.SimpleStatementLine,
    node: cst.ImportFrom,
    name: str,
    asname: str | None,
) -> Edit:
    aliases = list(node.names)  # type: ignore[arg-type]
    keys = [style.member_key(dotted_name(a.name) or "", _bound_asname(a)) for a in aliases]
    new_key = style.member_key(name, asname)
    index = bisect_left(keys, new_key) if keys == sorted(keys) else len(aliases)
    alias_code = _alias_code(name, asname)
    newline = context.newline
    text = context.source_of(node)
    if node.lpar is not None and ("\n" in text or "\r" in text):
        # One name a line, as Ruff writes a wrapped import: add a line for the new name.
        reference = aliases[min(index, len(aliases) - 1)]
        start, _ = context.span(reference)
        line_start = context.line_starts[context.row_of(start) - 1]
        indent = context.source[line_start:start]
        if index < len(aliases):
            return Edit(start, start, f"{alias_code},{newline}{indent}")
        last_end = _alias_end(context, reference)
        if reference.comma is cst.MaybeSentinel.DEFAULT or not isinstance(
            reference.comma, cst.Comma
        ):
            return Edit(last_end, last_end, f",{newline}{indent}{alias_code}")
        comma_end = context.source.index(",", last_end) + 1
        return Edit(comma_end, comma_end, f"{newline}{indent}{alias_code},")
    line_start = context.line_start_of(statement)
    line_end = context.line_after(statement)
    line = context.source[line_start:line_end].rstrip("\r\n")
    fits = len(line) + len(alias_code) + 2 <= style.line_length
    if fits or node.lpar is not None or len(statement.body) > 1 or _has_comment(statement):
        if index < len(aliases):
            start, _ = context.span(aliases[index])
            return Edit(start, start, f"{alias_code}, ")
        end = _alias_end(context, aliases[-1])
        return Edit(end, end, f", {alias_code}")
    codes = [context.source_of(a.name) + (f" as {_bound_asname(a)}" if a.asname else "")
             for a in aliases]  # fmt: skip
    codes.insert(index, alias_code)
    indent = context.indentation_of(statement)
    start, end = context.span(node)
    wrapped = _from_import_code(style, dotted_name(node.module) or "", codes, indent, newline)  # type: ignore[arg-type]
    return Edit(start, end, wrapped)


def _alias_end(context: FileContext, alias: cst.ImportAlias) -> int:
    return context.span(alias.asname.name if alias.asname is not None else alias.name)[1]


def _bound_asname(alias: cst.ImportAlias) -> str | None:
    return dotted_name(alias.asname.name) if alias.asname is not None else None


def _has_comment(statement: cst.SimpleStatementLine) -> bool:
    return statement.trailing_whitespace.comment is not None


def _insert_statement(
    context: FileContext, module: str, first_member: str | None, code: str
) -> Edit:
    """A new import statement in its section of the leading import block, sorted."""
    style = project_for(context.path).style
    newline = context.newline
    block = _leading_import_block(context)
    if not block:
        return _new_import_block(context, code)
    section = style.section_of(module)
    is_from = first_member is not None
    key = _statement_key(style, is_from, module, first_member)
    entries = [_describe(style, statement) for statement in block]
    same = [(k, s) for sec, k, s in entries if sec == section]
    if same:
        index = next((i for i, (k, _) in enumerate(same) if k > key), len(same))
        previous = same[index - 1][1] if index else None
        following = same[index][1] if index < len(same) else None
        return _insert_in_section(context, style, previous, following, is_from, code)
    later = [s for sec, _, s in entries if sec > section]
    if later:
        at = _start_with_comments(context, later[0])
        return Edit(at, at, code + newline + newline)
    at = context.line_after(block[-1])
    if at == len(context.source) and not context.source.endswith(("\n", "\r")):
        return Edit(at, at, newline + newline + code + newline)
    return Edit(at, at, newline + code + newline)


def _insert_in_section(
    context: FileContext,
    style: ImportStyle,
    previous: cst.SimpleStatementLine | None,
    following: cst.SimpleStatementLine | None,
    is_from: bool,
    code: str,
) -> Edit:
    """`code` between two statements of its section (either may be None: first or last),
    with the blank lines Ruff's isort puts between them: `lines-between-types` where the
    `import x` run meets the `from x` run, and one more above a statement that has comments
    on the lines above it (unless it opens its section)."""
    newline = context.newline
    gap_above = _blank_lines_between(style, previous, is_from) if previous is not None else 0
    if following is None:
        assert previous is not None
        at = context.line_after(previous)
        return Edit(at, at, newline * gap_above + code + newline)
    gap_below = _blank_lines_between(style, following, is_from)
    if _atop_comments(following):
        gap_below += 1
    end = _start_with_comments(context, following)
    if previous is None:
        return Edit(end, end, code + newline + newline * gap_below)
    start = context.line_after(previous)
    if _not_blank(context.source[start:end]):
        # Something other than blank lines between them (a detached comment, a form
        # feed): keep it.
        return Edit(end, end, code + newline + newline * gap_below)
    # The blank lines between the two neighbours are rewritten to what each side needs.
    return Edit(start, end, newline * gap_above + code + newline + newline * gap_below)


def _blank_lines_between(
    style: ImportStyle, neighbour: cst.SimpleStatementLine, is_from: bool
) -> int:
    """Blank lines `lines-between-types` puts between `neighbour` and a new import."""
    neighbour_is_from = isinstance(neighbour.body[0], cst.ImportFrom)
    return style.lines_between_types if neighbour_is_from != is_from else 0


def _atop_comments(statement: cst.SimpleStatementLine) -> bool:
    """Whether comments sit directly above the statement (Ruff's isort keeps them with it)."""
    lines = statement.leading_lines
    return bool(lines) and lines[-1].comment is not None


def _statement_key(
    style: ImportStyle, is_from: bool, module: str, first_member: str | None
) -> tuple[Any, ...]:
    member = style.member_key(first_member) if first_member and style.force_single_line else ()
    kind = is_from != style.from_first  # which run comes first: `import x` or `from x`
    if style.force_sort_within_sections:
        return (style.module_key(module), kind, member)
    return (kind, style.module_key(module), member)


def _describe(
    style: ImportStyle, statement: cst.SimpleStatementLine
) -> tuple[int, tuple[Any, ...], cst.SimpleStatementLine]:
    small = statement.body[0]
    if isinstance(small, cst.Import):
        module = dotted_name(small.names[0].name) or ""
        return style.section_of(module), _statement_key(style, False, module, None), statement
    assert isinstance(small, cst.ImportFrom)
    module = (dotted_name(small.module) if small.module is not None else None) or ""
    if small.relative:
        return (
            LOCAL_FOLDER,
            (not style.from_first, ("." * len(small.relative) + (module or ""),) * 2),
            statement,
        )
    first = None
    if not isinstance(small.names, cst.ImportStar):
        first = dotted_name(small.names[0].name)
    return (
        style.section_of(module or ""),
        _statement_key(style, True, module or "", first),
        statement,
    )


def _leading_import_block(context: FileContext) -> list[cst.SimpleStatementLine]:
    """The import statements at the top of the module (after its docstring)."""
    block: list[cst.SimpleStatementLine] = []
    for index, statement in enumerate(context.module.body):
        if _is_import_line(statement):
            block.append(statement)  # type: ignore[arg-type]
            continue
        if index == 0 and _is_docstring(statement):
            continue
        break
    return block


def _start_with_comments(context: FileContext, statement: cst.SimpleStatementLine) -> int:
    """Where the statement's lines begin, comments directly above it included (isort moves
    such comments with their import)."""
    comments = 0
    for line in reversed(statement.leading_lines):
        if line.comment is None:
            break
        comments += 1
    row = context.position(statement).start.line - comments
    return context.line_starts[row - 1]


def _new_import_block(context: FileContext, code: str) -> Edit:
    """The first import of a module: after the docstring, with the blank lines Ruff's
    formatter wants around it (one before, one after; two before a `def` or `class`)."""
    newline = context.newline
    body = context.module.body
    source = context.source
    if body and _is_docstring(body[0]):
        at = context.line_after(body[0])
        before = newline
    elif body:
        at = _start_with_comments(context, body[0])  # type: ignore[arg-type]
        before = ""
    else:
        at, before = len(source), ""
    if at == len(source) and source and not source.endswith(("\n", "\r")):
        before = newline + before
    blank = 0
    cursor = at
    while cursor < len(source):
        line_end = _line_end_after(source, cursor)
        if _not_blank(source[cursor:line_end]):
            break
        blank += 1
        cursor = line_end
    following = source[cursor : _line_end_after(source, cursor)].lstrip()
    if not following:
        return Edit(at, at, before + code + newline)
    wanted = 2 if following.startswith(("def ", "class ", "@", "async def ")) else 1
    lines_after = project_for(context.path).style.lines_after_imports
    if lines_after >= 0 and not following.startswith("#"):
        # `lines-after-imports`: exactly that many, the blank lines there replaced.
        end = at
        for _ in range(blank):
            end = _line_end_after(source, end)
        return Edit(at, end, before + code + newline + newline * lines_after)
    return Edit(at, at, before + code + newline + newline * max(0, wanted - blank))


def import_insertion_offset(context: FileContext) -> int:
    """After the docstring, `__future__` imports and the leading block of imports."""
    block = _leading_import_block(context)
    if block:
        return context.line_after(block[-1])
    body = context.module.body
    if body and _is_docstring(body[0]):
        return context.line_after(body[0])
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


def added_imports(before: str, after: str) -> list[str]:
    """The import statements in `after` that `before` lacks, one name each (for --fix's
    summary): `from lifetime_lint.runtime import reclaim`, `import torch`."""

    def imports(text: str) -> list[str]:
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            return []
        found: list[str] = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found.extend(
                    f"import {a.name}" + (f" as {a.asname}" if a.asname else "") for a in node.names
                )
            elif isinstance(node, ast.ImportFrom):
                module = "." * node.level + (node.module or "")
                found.extend(
                    f"from {module} import {a.name}" + (f" as {a.asname}" if a.asname else "")
                    for a in node.names
                )
        return found

    remaining = list(imports(before))
    new = []
    for line in imports(after):
        if line in remaining:
            remaining.remove(line)
        else:
            new.append(line)
    return new


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
    """The source with the edits applied (they must not overlap).

    An edit that deletes whole lines takes with it the blank lines it would leave doubled
    (a blank line above and below the deleted statement) or opening a block, so a removed
    statement leaves no blank lines behind.
    """
    unique = sorted(set(edits), key=lambda e: (e.start, e.end))
    for index, edit in enumerate(unique):
        widened = _without_stranded_blank_lines(source, edit)
        following = unique[index + 1].start if index + 1 < len(unique) else len(source)
        if widened.end <= following:
            unique[index] = widened
    pieces: list[str] = []
    cursor = 0
    for edit in unique:
        pieces.append(source[cursor : edit.start])
        pieces.append(edit.content)
        cursor = edit.end
    pieces.append(source[cursor:])
    return "".join(pieces)


def _without_stranded_blank_lines(source: str, edit: Edit) -> Edit:
    if edit.content or edit.start == edit.end or not _at_line_start(source, edit.start):
        return edit
    if not _at_line_start(source, edit.end):
        return edit
    blank_above = 0
    cursor = edit.start
    while cursor > 0:
        line_start = _line_start_before(source, cursor)
        if _not_blank(source[line_start:cursor]):
            break
        blank_above += 1
        cursor = line_start
    previous = source[_line_start_before(source, cursor) : cursor].rstrip() if cursor else ""
    end = edit.end
    blank_below = 0
    while end < len(source):
        line_end = _line_end_after(source, end)
        if _not_blank(source[end:line_end]):
            break
        blank_below += 1
        end = line_end
    if not blank_below:
        return edit
    at_file_start = cursor == 0
    if blank_above == 0 and not previous.endswith(":") and not at_file_start:
        return edit
    # Opening a block or the file: drop every blank line below; between two blank runs:
    # keep the longer run only.
    drop = blank_below if blank_above == 0 or at_file_start else min(blank_above, blank_below)
    end = edit.end
    for _ in range(drop):
        end = _line_end_after(source, end)
    return Edit(edit.start, end, "")


def _not_blank(text: str) -> bool:
    """Whether `text` holds more than blank lines. A form feed counts as content: it is
    the file's own page break, and a fix never deletes or rewrites one."""
    return bool(text.strip()) or "\x0c" in text


def _at_line_start(source: str, offset: int) -> bool:
    return offset == 0 or offset == len(source) or source[offset - 1] in "\n\r"


def _line_start_before(source: str, offset: int) -> int:
    """Start of the line that ends at `offset` (which is a line start)."""
    index = offset - 1
    if index > 0 and source[index] == "\n" and source[index - 1] == "\r":
        index -= 1
    while index > 0 and source[index - 1] not in "\n\r":
        index -= 1
    return max(index, 0)


def _line_end_after(source: str, offset: int) -> int:
    """Offset just past the line break of the line starting at `offset`."""
    index = offset
    while index < len(source) and source[index] not in "\n\r":
        index += 1
    if source.startswith("\r\n", index):
        return index + 2
    return min(index + 1, len(source))


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

    def _kept(
        self, smalls: Sequence[cst.BaseSmallStatement]
    ) -> list[tuple[cst.CSTNode, bool]] | None:
        """What the statements keep, or None when none of them changes."""
        kept: list[tuple[cst.CSTNode, bool]] = []
        changed = False
        for small in smalls:
            updated: cst.BaseSmallStatement | None = small
            if isinstance(small, (cst.Import, cst.ImportFrom)):
                # `import torch` that the fix leaves unused goes too (it would be F401 in a
                # Ruff-gated project); torch's import side effects happen wherever it is used.
                updated = self._without_unused(small)
            if updated is not small:
                changed = True
            if updated is not None:
                kept.append((updated, updated is not small))
        return kept if changed else None

    def _without_unused(
        self, statement: cst.Import | cst.ImportFrom
    ) -> cst.Import | cst.ImportFrom | None:
        """The import statement without its unused aliases (None if none is left)."""
        names = statement.names
        if isinstance(names, cst.ImportStar):
            return statement
        kept = [alias for alias in names if _binds(alias) not in self.names]
        if len(kept) == len(names):
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


def _binds(alias: cst.ImportAlias) -> str | None:
    """The local name an alias binds: `x` for `import a.b as x`, `a` for `import a.b`."""
    bound = _bound_name(alias)
    if alias.asname is None and bound is not None:
        return bound.split(".")[0]
    return bound


def _bound_name(alias: cst.ImportAlias) -> str | None:
    if alias.asname is not None:
        return dotted_name(alias.asname.name)
    return dotted_name(alias.name)
