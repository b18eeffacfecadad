"""What a class's constructor builds under the model's own default arguments (a per-file fact).

A block's `forward` often branches on what its constructor built: Sana-Video's block runs
`if self.attn2 is not None:` (cross-attention), where `__init__` binds `self.attn2 = None`
and then `SanaCrossAttention(...)` when `cross_attention_dim is not None`, with
`cross_attention_dim=2240` by default and the model passing its own default of 2240. A value
held across the feed-forward only on the `attn2 is None` path is held on a path the model's
defaults never take. Likewise a class the file builds only under a non-default selector
(`elif self_attn_block == "SwinSelfAttention":`, default `"SelfAttention"`) does not run
under the defaults.

Only what the file shows counts: a parameter's value under the defaults is known when its
default is a literal and every construction of the class in the file omits it, passes a
literal, or passes its own constructor's parameter whose value is known the same way. A
value from a config object, `**kwargs`, a reassigned parameter or anything else is unknown,
and an unknown value never decides a branch.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

import libcst as cst

from lifetime_lint.traversal import visit, walk

MEMO_KEY = "analysis.class_config"
_UNKNOWN = object()  # a value the file does not decide
_DEPTH = 4  # how many constructors a parameter is followed through


@dataclass
class _Construction:
    """One `Cls(...)` call of a class of the file, with where it sits."""

    call: cst.Call
    builder: cst.ClassDef | None  # the class whose `__init__` makes it, if any
    function: cst.FunctionDef | None
    branches: tuple[tuple[cst.BaseExpression, bool], ...]  # (If test, in its body?)


@dataclass
class _Table:
    classes: dict[str, cst.ClassDef]
    constructions: dict[str, list[_Construction]] = field(default_factory=dict)
    values: dict[tuple[str, str, bool], object] = field(default_factory=dict)  # memo
    built: dict[str, frozenset[str]] = field(default_factory=dict)  # memo


def _table(module: cst.Module, memo: dict) -> _Table:
    table = memo.get(MEMO_KEY)
    if table is not None:
        return table
    classes = {s.name.value: s for s in module.body if isinstance(s, cst.ClassDef)}
    table = _Table(classes)
    constructions = table.constructions

    builders: list[cst.ClassDef] = []
    functions: list[cst.FunctionDef] = []
    branches: list[tuple[cst.BaseExpression, bool]] = []  # (If test, in its body?)
    ifs: list[cst.If] = []
    opened: list[cst.CSTNode] = []  # the If bodies and `orelse`s that pushed a branch

    # One read-only walk with a type switch. LibCST's field hooks around an If's `body` and
    # `orelse` (what a CSTVisitor would use here) are the entering and leaving of the If's
    # body node and `orelse` node: each is a direct child of the innermost open If.
    def enter(node: cst.CSTNode) -> None:
        kind = type(node)
        if ifs:
            parent = ifs[-1]
            if node is parent.body:
                branches.append((parent.test, True))
                opened.append(node)
            elif node is parent.orelse:
                branches.append((parent.test, False))
                opened.append(node)
        if kind is cst.Call:
            func = node.func  # type: ignore[attr-defined]
            if type(func) is cst.Name and func.value in classes:
                constructions.setdefault(func.value, []).append(
                    _Construction(
                        node,  # type: ignore[arg-type]
                        builders[-1] if builders else None,
                        functions[-1] if functions else None,
                        tuple(branches),
                    )
                )
        elif kind is cst.If:
            ifs.append(node)  # type: ignore[arg-type]
        elif kind is cst.FunctionDef:
            functions.append(node)  # type: ignore[arg-type]
        elif kind is cst.ClassDef:
            builders.append(node)  # type: ignore[arg-type]

    def leave(node: cst.CSTNode) -> None:
        kind = type(node)
        if kind is cst.If:
            ifs.pop()
        elif kind is cst.FunctionDef:
            functions.pop()
        elif kind is cst.ClassDef:
            builders.pop()
        if opened and opened[-1] is node:
            opened.pop()
            branches.pop()

    if classes:
        walk(module, enter, leave)  # (read-only: no node rebuilding)
    memo[MEMO_KEY] = table
    return table


def _init_of(definition: cst.ClassDef) -> cst.FunctionDef | None:
    for item in definition.body.body:
        if isinstance(item, cst.FunctionDef) and item.name.value == "__init__":
            return item
    return None


def _literal(expr: cst.BaseExpression, module: cst.Module) -> object:
    try:
        return ast.literal_eval(module.code_for_node(expr).strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return _UNKNOWN


def _reassigned(function: cst.FunctionDef, name: str) -> bool:
    """Whether the function's body binds `name` (its parameter is then no longer its
    argument)."""
    found = False

    def check(target: cst.CSTNode | None) -> None:
        nonlocal found
        if target is not None and _binds(target, name):  # type: ignore[arg-type]
            found = True

    class Scan(cst.CSTVisitor):
        def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
            check(node.target)

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            check(node.target)

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            check(node.target)

        def visit_For(self, node: cst.For) -> None:
            check(node.target)

        def visit_AsName(self, node: cst.AsName) -> None:
            check(node.name)

        def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
            check(node.target)

    visit(function.body, Scan())
    return found


def _parameter(function: cst.FunctionDef, name: str) -> cst.Param | None:
    params = function.params
    for param in (*params.posonly_params, *params.params, *params.kwonly_params):
        if param.name.value == name:
            return param
    return None


def parameter_values(module: cst.Module, memo: dict, owner: str, name: str) -> object:
    """The set of values (a frozenset) the parameter `name` of `owner.__init__` takes under
    the defaults, over its default and every construction of `owner` in the file; `_UNKNOWN`
    when the file does not decide it."""
    return _values(_table(module, memo), module, owner, name, _DEPTH, True)


def _values(
    table: _Table, module: cst.Module, owner: str, name: str, depth: int, top: bool
) -> object:
    """`top`: whether the default of a class the file never builds (a top-level model, built
    from a checkpoint's config) decides; without it only values the file sets count."""
    key = (owner, name, top)
    if key in table.values:
        return table.values[key]
    table.values[key] = _UNKNOWN  # (a cycle of constructors decides nothing)
    result = _compute_values(table, module, owner, name, depth, top)
    table.values[key] = result
    return result


def _compute_values(
    table: _Table, module: cst.Module, owner: str, name: str, depth: int, top: bool
) -> object:
    definition = table.classes.get(owner)
    init = _init_of(definition) if definition is not None else None
    if init is None or depth <= 0:
        return _UNKNOWN
    param = _parameter(init, name)
    if param is None or param.star or _reassigned(init, name):
        return _UNKNOWN
    positional = [p.name.value for p in (*init.params.posonly_params, *init.params.params)][1:]
    keyword_only = param in init.params.kwonly_params
    values: set[object] = set()
    default_needed = not table.constructions.get(owner)
    if default_needed and not top:
        return _UNKNOWN  # a top-level model: its checkpoints' configs set the value
    for construction in table.constructions.get(owner, ()):
        passed: cst.BaseExpression | None = None
        for at, arg in enumerate(construction.call.args):
            if arg.star:
                return _UNKNOWN  # `Cls(**kwargs)`: any value may come in
            if arg.keyword is not None:
                if arg.keyword.value == name:
                    passed = arg.value
            elif not keyword_only and at < len(positional) and positional[at] == name:
                passed = arg.value
        if passed is None:
            default_needed = True
            continue
        value = _argument_value(table, module, construction, passed, depth, top)
        if value is _UNKNOWN:
            return _UNKNOWN
        values |= value  # type: ignore[arg-type]
    if default_needed:
        if param.default is None:
            return _UNKNOWN
        default = _literal(param.default, module)
        if default is _UNKNOWN:
            return _UNKNOWN
        values.add(default)
    return frozenset(values)


def _argument_value(
    table: _Table,
    module: cst.Module,
    construction: _Construction,
    passed: cst.BaseExpression,
    depth: int,
    top: bool,
) -> object:
    """The values an argument passes: a literal, or the builder's own constructor parameter
    (followed through its constructions)."""
    literal = _literal(passed, module)
    if literal is not _UNKNOWN:
        try:
            return frozenset([literal])
        except TypeError:  # (an unhashable literal: a list or dict)
            return _UNKNOWN
    function, builder = construction.function, construction.builder
    if (
        isinstance(passed, cst.Name)
        and function is not None
        and builder is not None
        and function.name.value == "__init__"
        and _init_of(builder) is function
    ):
        return _values(table, module, builder.name.value, passed.value, depth - 1, top)
    return _UNKNOWN


def _truth(
    table: _Table, module: cst.Module, owner: str, test: cst.BaseExpression, top: bool = True
) -> bool | None:
    """Whether an `__init__` condition on one of its parameters holds under the defaults
    (`P is not None`, `P is None`, `P == "lit"`, `P != "lit"`, `P`, `not P`); None when the
    file does not decide it."""
    negate = False
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        negate, test = True, test.expression
    result: set[bool] = set()
    if isinstance(test, cst.Name):
        values = _values(table, module, owner, test.value, _DEPTH, top)
        if values is _UNKNOWN:
            return None
        result = {bool(v) for v in values}  # type: ignore[attr-defined]
    elif (
        isinstance(test, cst.Comparison)
        and isinstance(test.left, cst.Name)
        and len(test.comparisons) == 1
    ):
        comparison = test.comparisons[0]
        values = _values(table, module, owner, test.left.value, _DEPTH, top)
        other = _literal(comparison.comparator, module)
        if values is _UNKNOWN or other is _UNKNOWN:
            return None
        operator = comparison.operator
        for value in values:  # type: ignore[attr-defined]
            if isinstance(operator, cst.IsNot):
                result.add(value is not other)
            elif isinstance(operator, cst.Is):
                result.add(value is other)
            elif isinstance(operator, cst.Equal):
                result.add(value == other)
            elif isinstance(operator, cst.NotEqual):
                result.add(value != other)
            else:
                return None
    if len(result) != 1:
        return None
    return result.pop() != negate


def _under_defaults(
    table: _Table, module: cst.Module, owner: str, branches, top: bool = True
) -> bool | None:
    """Whether a statement inside these `if` branches of `owner.__init__` runs under the
    defaults: False when some branch is not taken, True when every one is, else None."""
    decided = True
    for test, in_body in branches:
        truth = _truth(table, module, owner, test, top)
        if truth is None:
            decided = False
        elif truth != in_body:
            return False
    return True if decided else None


def built_by_default(module: cst.Module, memo: dict, owner: str) -> frozenset[str]:
    """The `self.` attributes `owner.__init__` binds to a built module under the defaults
    where some argument would leave them None: `self.attn2 = Attn(...) if dim is not None
    else None`, or `self.attn2 = Attn(...)` under `if cross_attention_dim is not None:`,
    with the value decided (`parameter_values`)."""
    table = _table(module, memo)
    if owner in table.built:
        return table.built[owner]
    definition = table.classes.get(owner)
    init = _init_of(definition) if definition is not None else None
    built: set[str] = set()
    if init is not None:
        always: set[str] = set()  # built by an unconditional `self.attr = Module(...)`
        for statement, branches in _assignments(init):
            target = statement.targets[0].target if len(statement.targets) == 1 else None
            attribute = _self_attribute(target)
            if attribute is None:
                continue
            value = statement.value
            conditional = bool(branches)
            if isinstance(value, cst.IfExp):
                truth = _truth(table, module, owner, value.test)
                if truth is None:
                    continue
                value, conditional = (value.body if truth else value.orelse), True
            if not isinstance(value, cst.Call):
                continue
            if not conditional:
                always.add(attribute)
            elif _under_defaults(table, module, owner, branches):
                built.add(attribute)
        # An attribute the constructor always builds (Allegro's `self.attn2 = Attention(...)`)
        # is never None unless the class binds it to something else somewhere.
        if always and definition is not None:
            built.update(always - _bound_to_non_call(definition))
    result = frozenset(built)
    table.built[owner] = result
    return result


def _bound_to_non_call(definition: cst.ClassDef) -> set[str]:
    """The `self.` attributes any method of the class binds to something other than a call
    (`self.attn2 = None`, `self.attn2 = attn`), or deletes: such an attribute may be None
    (or anything) when `forward` runs."""
    found: set[str] = set()

    class Scan(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            for target in node.targets:
                attribute = _self_attribute(target.target)
                if attribute is not None and not isinstance(node.value, cst.Call):
                    found.add(attribute)

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            attribute = _self_attribute(node.target)
            if attribute is not None and not isinstance(node.value, cst.Call):
                found.add(attribute)

        def visit_Del(self, node: cst.Del) -> None:
            attribute = _self_attribute(node.target)
            if attribute is not None:
                found.add(attribute)

    visit(definition, Scan())
    return found


def _assignments(function: cst.FunctionDef):
    """The `x = ...` statements of a function with the `if` branches they sit in (not inside
    loops, nested functions or `try`)."""
    found: list[tuple[cst.Assign, tuple[tuple[cst.BaseExpression, bool], ...]]] = []

    def walk(statements, branches) -> None:
        for statement in statements:
            if isinstance(statement, cst.SimpleStatementLine):
                for small in statement.body:
                    if isinstance(small, cst.Assign):
                        found.append((small, branches))
            elif isinstance(statement, cst.If):
                _walk_if(statement, branches)

    def _walk_if(node: cst.If, branches) -> None:
        walk(_statements(node.body), (*branches, (node.test, True)))
        orelse = node.orelse
        if isinstance(orelse, cst.If):
            _walk_if(orelse, (*branches, (node.test, False)))
        elif isinstance(orelse, cst.Else):
            walk(_statements(orelse.body), (*branches, (node.test, False)))

    walk(_statements(function.body), ())
    return found


def _statements(suite: cst.BaseSuite) -> tuple[cst.CSTNode, ...]:
    return tuple(suite.body) if isinstance(suite, cst.IndentedBlock) else ()


def _self_attribute(expr: cst.BaseExpression | None) -> str | None:
    if (
        isinstance(expr, cst.Attribute)
        and isinstance(expr.value, cst.Name)
        and expr.value.value == "self"
    ):
        return expr.attr.value
    return None


def not_built_by_default(module: cst.Module, memo: dict, owner: str | None) -> bool:
    """Whether the file builds the class only on `__init__` branches its builders' defaults
    never take (`elif self_attn_block == "SwinSelfAttention":` with the default
    `"SelfAttention"` throughout). A class the file never builds is not judged: it may be
    built elsewhere. The selector's value must be set by the file (a literal, or the default
    of a class the file builds without it): a top-level model's selector names variants that
    other checkpoints' configs choose (HunyuanVideo's `image_condition_type="token_replace"`
    is its I2V checkpoint)."""
    if owner is None:
        return False
    table = _table(module, memo)
    constructions = table.constructions.get(owner)
    if not constructions:
        return False
    for construction in constructions:
        builder, function = construction.builder, construction.function
        if builder is None or function is None or _init_of(builder) is not function:
            return False  # built outside a constructor: not judged
        branches = construction.branches
        if _under_defaults(table, module, builder.name.value, branches, False) is not False:
            return False
    return True


def off_default_branch(
    module: cst.Module,
    memo: dict,
    owner: str | None,
    statement: cst.CSTNode,
    block: tuple[cst.CSTNode, ...],
    name: str,
    before_line: int,
    line_of,
) -> str | None:
    """The attribute (`attn2`) when a later statement of the same block, ending before
    `before_line`, is `if self.attn2 is not None:` (or `if self.attn2:`, or `if self.attn2 is
    None: ... else:`) whose branch taken under the defaults rebinds `name`: the binding then
    reaches what follows only when the attribute is None, a path the defaults never take.
    None otherwise. `line_of(node)` gives a node's (first, last) line."""
    if owner is None or statement not in block:
        return None
    built = built_by_default(module, memo, owner)
    if not built:
        return None
    for later in block[block.index(statement) + 1 :]:
        if line_of(later)[1] >= before_line:
            break
        if not isinstance(later, cst.If):
            continue
        attribute, taken = _attribute_test(later.test)
        if attribute is None or attribute not in built:
            continue
        if taken:
            branch = _statements(later.body)
        elif isinstance(later.orelse, cst.Else):
            branch = _statements(later.orelse.body)
        else:
            continue
        if any(_rebinds(line, name) for line in branch):
            return attribute
    return None


def _attribute_test(test: cst.BaseExpression) -> tuple[str | None, bool]:
    """(`attr`, whether the body runs when it is built) for `self.attr is not None`,
    `self.attr`, `self.attr is None`; (None, False) otherwise."""
    attribute = _self_attribute(test)
    if attribute is not None:
        return attribute, True
    if (
        isinstance(test, cst.Comparison)
        and len(test.comparisons) == 1
        and isinstance(test.comparisons[0].comparator, cst.Name)
        and test.comparisons[0].comparator.value == "None"
    ):
        attribute = _self_attribute(test.left)
        operator = test.comparisons[0].operator
        if attribute is not None and isinstance(operator, cst.IsNot):
            return attribute, True
        if attribute is not None and isinstance(operator, cst.Is):
            return attribute, False
    return None, False


def _rebinds(statement: cst.CSTNode, name: str) -> bool:
    """Whether a top-level line of a branch assigns `name` (`attn_output = self.attn2(...)`)."""
    if not isinstance(statement, cst.SimpleStatementLine):
        return False
    for small in statement.body:
        if isinstance(small, cst.Assign):
            for target in small.targets:
                if _binds(target.target, name):
                    return True
    return False


def _binds(target: cst.BaseExpression, name: str) -> bool:
    if isinstance(target, cst.Name):
        return target.value == name
    if isinstance(target, (cst.Tuple, cst.List)):
        return any(_binds(element.value, name) for element in target.elements)
    return False


def flag_by_default(
    module: cst.Module, memo: dict, owner: str | None, attribute: str
) -> bool | None:
    """The truth of `self.attribute` under the defaults when `owner.__init__` binds it once,
    unconditionally, to one of its parameters or a literal (`self.concat_after =
    concat_after`, the parameter defaulting to False and no construction in the file passing
    True), and no method of the class binds it otherwise; None when the file does not decide
    it."""
    if owner is None:
        return None
    table = _table(module, memo)
    definition = table.classes.get(owner)
    init = _init_of(definition) if definition is not None else None
    if definition is None or init is None:
        return None
    bound: list[cst.BaseExpression] = []

    class Scan(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            for target in node.targets:
                if _self_attribute(target.target) == attribute:
                    bound.append(node.value)

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            if _self_attribute(node.target) == attribute:
                bound.append(node.value or cst.Name("None"))

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            if _self_attribute(node.target) == attribute:
                bound.append(node.value)

        def visit_Del(self, node: cst.Del) -> None:
            if _self_attribute(node.target) == attribute:
                bound.append(node.target)

    visit(definition, Scan())
    if len(bound) != 1:
        return None
    value = bound[0]
    if not any(
        statement.value is value and not branches for statement, branches in _assignments(init)
    ):
        return None  # bound in a branch, a loop or another method: not judged
    if isinstance(value, cst.Name) and value.value not in ("True", "False", "None"):
        return _truth(table, module, owner, value)
    literal = _literal(value, module)
    if literal is _UNKNOWN:
        return None
    return bool(literal)


def off_default_flag(context, owner: str | None, info) -> str | None:
    """The attribute (`concat_after`) when the statement `info` sits in the body of an
    `if self.concat_after:` (or the `else` of `if not self.concat_after:`) that the model's
    own defaults never take (`flag_by_default`); None otherwise."""
    if owner is None:
        return None
    inner, outer = info, info.parent
    while outer is not None:
        test = outer.statement
        if isinstance(test, cst.If):
            negate, condition = False, test.test
            if isinstance(condition, cst.UnaryOperation) and isinstance(
                condition.operator, cst.Not
            ):
                negate, condition = True, condition.expression
            attribute = _self_attribute(condition)
            if attribute is not None:
                in_body = inner.statement in _statements(test.body)
                in_else = isinstance(test.orelse, cst.Else) and inner.statement in _statements(
                    test.orelse.body
                )
                if in_body or in_else:
                    runs_when = in_body != negate  # the branch runs when the flag is truthy
                    truth = flag_by_default(context.module, context.memo, owner, attribute)
                    if truth is not None and truth != runs_when:
                        return attribute
        inner, outer = outer, outer.parent
    return None


def off_default_path(context, owner: str | None, info, name: str, held_node: cst.CSTNode) -> str:
    """Words for the message ("only when `self.attn2` is None, ...") when a finding of
    `name`, dead at `info.statement` and held across `held_node`, exists only on a path the
    model's own defaults never take; "" otherwise."""
    module, memo = context.module, context.memo
    if not_built_by_default(module, memo, owner):
        return (
            f" (only where `{owner}` is built, which this file does only under non-default"
            " constructor arguments)"
        )

    def line_of(node: cst.CSTNode) -> tuple[int, int]:
        where = context.position(node)
        return where.start.line, where.end.line

    flag = off_default_flag(context, owner, info)
    if flag is not None:
        return (
            f" (only when `self.{flag}` is set, which the constructor's default arguments never do)"
        )
    attribute = off_default_branch(
        module, memo, owner, info.statement, info.block, name, line_of(held_node)[0], line_of
    )
    if attribute is None:
        return ""
    return (
        f" only when `self.{attribute}` is None, which the constructor's default arguments"
        " never leave it"
    )
