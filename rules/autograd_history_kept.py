"""LL006 autograd-history-kept: a loop keeps every iteration's autograd graph alive."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import libcst as cst

from lifetime_lint.analysis.cfg import CFG, DefSite, Node, TooLarge, build, iter_children
from lifetime_lint.analysis.dataflow import Dataflow, solve
from lifetime_lint.analysis.facts import backward_helpers
from lifetime_lint.analysis.significance import LOW, at_least, bar_of
from lifetime_lint.devices import LEFT_OUT_SCOPE, NON_LIBRARY_NOTE, Portability
from lifetime_lint.diagnostics import Applicability, Edit, Fix
from lifetime_lint.globs import glob_matcher
from lifetime_lint.imports import dotted_name
from lifetime_lint.lazy_regex import compile_lazily
from lifetime_lint.rule import SHOWS_BELOW_BAR, FileContext, Rule
from lifetime_lint.traversal import LEAF_TYPES

# -- autograd facts -----------------------------------------------------------------------
# Private to LL006 for now: which calls run backward, which contexts disable grad, which
# expressions carry autograd history. Candidates for the shared tensor-facts layer.

# `loss.backward()`, `accelerator.backward(loss)`, `fabric.backward(loss)`,
# `model_engine.backward(loss)`, Lightning's `self.manual_backward(loss)`.
_BACKWARD_METHODS = frozenset({"backward", "manual_backward"})
_AUTOGRAD_CALLS = frozenset({"torch.autograd.backward", "torch.autograd.grad"})
# What the text of a file that calls backward must contain (`_may_call_backward`): a
# `_BACKWARD_METHODS` attribute (`.`, then blanks, line continuations or comments, then the
# name), or an `_AUTOGRAD_CALLS` name reached from `torch` (`autograd.grad`).
# (A comment ends at its line break, so the pattern cannot split one: no backtracking.)
_BLANK = r"(?:[ \t\f\r\n\\]|#[^\r\n]*[\r\n])*"
_BACKWARD_ATTRIBUTE = compile_lazily(rf"\.{_BLANK}(?:manual_)?backward\b")
_AUTOGRAD_ATTRIBUTE = compile_lazily(rf"autograd{_BLANK}\.{_BLANK}(?:grad|backward)\b")
# Import bindings under which a shorter name can mean an `_AUTOGRAD_CALLS` function.
_AUTOGRAD_BINDINGS = _AUTOGRAD_CALLS | {"torch.autograd"}

# Context managers and decorators under which no new history is recorded.
_NO_GRAD = frozenset(
    {
        "torch.no_grad",
        "torch.inference_mode",
        "torch.autograd.no_grad",
        "torch.autograd.grad_mode.no_grad",
        "torch.autograd.grad_mode.inference_mode",
    }
)
_SET_GRAD_ENABLED = frozenset({"torch.set_grad_enabled", "torch.autograd.set_grad_enabled"})
# Methods whose result carries no history (a number, a detached tensor, an integer or
# boolean tensor, metadata).
_DETACHING_METHODS = frozenset(
    {
        "item",
        "tolist",
        "detach",
        "detach_",
        "numpy",
        "argmax",
        "argmin",
        "argsort",
        "long",
        "int",
        "bool",
        "short",
        "byte",
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
        "isnan",
        "isinf",
        "isfinite",
        "nonzero",
        "size",
        "dim",
        "numel",
        "nelement",
        "element_size",
        "stride",
        "data_ptr",
        "get_device",
        "is_contiguous",
        "is_floating_point",
        "backward",
        "keys",
        "__len__",
    }
)
# Attributes that carry no history.
_DETACHING_ATTRIBUTES = frozenset(
    {
        "data",
        "grad",
        "shape",
        "dtype",
        "device",
        "ndim",
        "requires_grad",
        "is_leaf",
        "grad_fn",
        "is_cuda",
        "layout",
    }
)
# Functions that return gradients: without `create_graph=True` the gradients are plain
# tensors with no graph of their own (`grad, = torch.autograd.grad(loss, [x],
# retain_graph=True)` keeps `loss`'s graph for a later backward, not in `grad`).
_GRADIENT_CALLS = frozenset({"torch.autograd.grad"})


def _creates_graph(call: cst.Call) -> bool:
    """Whether a `torch.autograd.grad` call may record a graph of the gradients: its
    `create_graph` argument (keyword, or the fifth positional) is present and not `False`."""
    for position, arg in enumerate(call.args):
        named = arg.keyword.value if arg.keyword is not None else None
        if named == "create_graph" or (named is None and arg.star == "" and position == 4):
            return not (isinstance(arg.value, cst.Name) and arg.value.value in ("False", "None"))
        if arg.star:
            return True  # `**kwargs` may set it
    return False


# Attributes whose reading means the gradient matters: the `.detach()` fix would change it.
_GRAD_ATTRIBUTES = frozenset(
    {"grad", "grad_fn", "requires_grad", "is_leaf", "retain_grad", "register_hook"}
)
# torch functions whose result carries no history whatever their arguments.
_NON_DIFFERENTIABLE_TORCH = frozenset(
    {
        "argmax",
        "argmin",
        "argsort",
        "tensor",
        "as_tensor",
        "from_numpy",
        "is_tensor",
        "numel",
        "equal",
        "isnan",
        "isinf",
        "isfinite",
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
        "zeros_like",
        "ones_like",
        "empty_like",
        "full_like",
        "randn_like",
        "rand_like",
        "randint_like",
        "nonzero",
        "bucketize",
        "searchsorted",
    }
)
# Builtins whose result is a plain Python value.
_NUMBER_BUILTINS = frozenset(
    {
        "float",
        "int",
        "bool",
        "str",
        "len",
        "round",
        "repr",
        "format",
        "print",
        "isinstance",
        "type",
        "id",
        "hash",
        "range",
        "enumerate",
    }
)
# Builtins that hand their argument's tensors (and their history) on.
_PASSING_BUILTINS = frozenset({"sum", "max", "min", "abs", "list", "tuple", "sorted", "reversed"})
# The called name (last dotted part) of a forward pass or a loss computation.
_MODEL_CALLS = (
    "model",
    "*_model",
    "*model",
    "model_*",
    "module",
    "net",
    "*net",
    "network",
    "*transformer",
    "transformer*",
    "*encoder",
    "*decoder",
    "vae",
    "controlnet",
    "*denoiser",
    "discriminator",
    "generator",
    "critic",
    "actor",
    "policy",
    "student",
    "forward",
    "*_step",
)
_LOSS_CALLS = ("*loss", "*loss_fn", "loss*", "compute_loss*", "criterion*", "*criterion")
# A callee named for an action on a model (`save_best_model`, `load_model`, `build_encoder`)
# returns a path, a module or a number, never a forward's output.
_MODEL_ACTION_VERBS = (
    "save_*",
    "load_*",
    "build_*",
    "create_*",
    "make_*",
    "get_*",
    "init_*",
    "setup_*",
    "prepare_*",
    "wrap_*",
    "unwrap_*",
    "copy_*",
    "export_*",
    "freeze_*",
    "unfreeze_*",
    "register_*",
    "set_*",
    "convert_*",
    "compile_*",
    "print_*",
    "count_*",
)
# Parts of a callee that make it no forward pass at all.
_NOT_MODEL_PARTS = (
    "*tokenizer*",
    "*processor*",
    "*scheduler*",
    "*logger*",
    "log",
    "log_*",
    "*tracker*",
    "*writer*",
    "*optimizer*",
    "optim",
    "*dataset*",
    "*loader*",
    "*metric*",
    "*progress*",
    "pbar",
    "accelerator",
    "teacher*",
    "*ema*",
    "*_fn_kwargs",
)
# Called names that are methods of a model but no forward with history.
_NOT_FORWARD = frozenset(
    {
        "generate",
        "parameters",
        "named_parameters",
        "state_dict",
        "load_state_dict",
        "train",
        "eval",
        "to",
        "cuda",
        "cpu",
        "zero_grad",
        "step",
        "requires_grad_",
        "apply",
        "save_pretrained",
        "from_pretrained",
        "enable_gradient_checkpointing",
        "gradient_checkpointing_enable",
        "train_step",
        "eval_step",
        "prediction_step",
        "optimizer_step",
        "lr_scheduler_step",
        "validation_step",
        "test_step",
        "predict_step",
    }
)
# Functions the framework (Lightning) or the name says run without grad.
_EVALUATION_FUNCTIONS = (
    "validation_step",
    "test_step",
    "predict_step",
    "on_validation_*",
    "on_test_*",
    "on_predict_*",
    "evaluate*",
    "evaluation*",
    "eval_*",
    "*_eval",
    "*_evaluate",
    "validate*",
    "validation*",
    "inference*",
    "predict*",
)
# One call of a training step is one iteration: what it stores on `self` outlives it.
_TRAINING_STEP_FUNCTIONS = frozenset({"training_step"})
# Methods that store their argument in the receiver.
_STORING_METHODS = {"append": 0, "appendleft": 0, "add": 0, "extend": 0, "insert": 1, "put": 0}
# Calls whose arguments are only shown or recorded as numbers.
_LOGGING_CALLS = (
    "print",
    "log",
    "log_*",
    "*_log",
    "info",
    "debug",
    "warning",
    "warn",
    "write",
    "set_postfix*",
    "set_description*",
    "add_scalar*",
    "format",
    "str",
    "float",
    "int",
    "round",
)
_NUMBER_REDUCERS = frozenset({"sum", "len", "min", "max", "mean", "median", "fmean", "stdev"})


def _matches(name: str, patterns: tuple[str, ...]) -> bool:
    return glob_matcher(patterns)(name.lower())  # fnmatchcase's answer, no regex compiled


def _is_no_grad_context(context: FileContext, expression: cst.BaseExpression) -> bool:
    """`torch.no_grad()`, `torch.inference_mode()`, `torch.set_grad_enabled(<not True>)`."""
    call = expression if isinstance(expression, cst.Call) else None
    target = call.func if call is not None else expression
    qualified = context.qualified_name(target)
    if qualified is None:
        dotted = dotted_name(target) or ""
        last = dotted.rsplit(".", 1)[-1]
        return last in ("no_grad", "inference_mode")
    if qualified in _NO_GRAD:
        # `inference_mode(False)` records history
        return call is None or not call.args or not _is_false(call.args[0].value)
    if qualified in _SET_GRAD_ENABLED:
        # `set_grad_enabled(is_train)`: grad may be off; nothing is claimed there.
        return call is None or not call.args or not _is_true(call.args[0].value)
    return False


def _is_true(expression: cst.BaseExpression) -> bool:
    return isinstance(expression, cst.Name) and expression.value == "True"


def _is_false(expression: cst.BaseExpression) -> bool:
    return isinstance(expression, cst.Name) and expression.value == "False"


def _backward_inputs(context: FileContext, call: cst.Call) -> list[cst.BaseExpression] | None:
    """The expressions whose graph a call runs backward through, or None if it does not."""
    func = call.func
    qualified = context.qualified_name(func)
    positional = [arg.value for arg in call.args if arg.keyword is None and not arg.star]
    if qualified in _AUTOGRAD_CALLS:
        return [arg.value for arg in call.args]  # outputs=, inputs=, grad_outputs=
    if isinstance(func, cst.Attribute) and func.attr.value in _BACKWARD_METHODS:
        receiver = func.value
        if any(arg.keyword is not None and arg.keyword.value == "gradient" for arg in call.args):
            return [receiver]  # `out.backward(gradient=g)`
        if positional and func.attr.value == "backward" and _reads_gradient(positional[0]):
            return [receiver]  # `t.backward(weight * d.grad)`: the argument is a gradient
        if positional and "loss" not in (dotted_name(receiver) or "").lower():
            return positional[:1]  # `accelerator.backward(loss)`, `self.manual_backward(loss)`
        if isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Attribute):
            # `scaler.scale(loss).backward()`: the scaled value is the argument.
            return [arg.value for arg in receiver.args if arg.keyword is None] or [receiver]
        return [receiver]  # `loss.backward()`, `(loss / n).backward()`
    if isinstance(func, cst.Name) and qualified is None:
        helper = _backward_helpers(context).get(func.value)
        if helper is not None:  # `_backward_scalar_loss(loss)`, defined in this file
            position, parameter = helper
            named = [a.value for a in call.args if a.keyword and a.keyword.value == parameter]
            if named or position < len(positional):
                return named[:1] or [positional[position]]
    return None


def _reads_gradient(expression: cst.BaseExpression) -> bool:
    """Whether an expression reads a `.grad` (a gradient handed to `tensor.backward`)."""
    return any(
        isinstance(node, cst.Attribute) and node.attr.value == "grad"
        for node in _calls_and_attributes(expression)
    )


def _calls_and_attributes(expression: cst.CSTNode) -> Iterator[cst.CSTNode]:
    stack = [expression]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(iter_children(node))


def _backward_helpers(context: FileContext) -> dict[str, tuple[int, str]]:
    """This file's functions that run backward on a parameter (`F.backward_helpers`)."""
    key = "LL006.backward_helpers"
    helpers = context.memo.get(key)
    if helpers is None:
        helpers = backward_helpers(context.module)
        context.memo[key] = helpers
    return helpers


def _names_read(expression: cst.CSTNode | None) -> Iterator[cst.Name]:
    """Name nodes read by an expression (not attribute names, not keyword names)."""
    if expression is None:
        return
    stack: list[cst.CSTNode] = [expression]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Name):
            yield node
        elif isinstance(node, (cst.Attribute, cst.Arg)):
            stack.append(node.value)
        elif isinstance(node, (cst.Lambda, cst.FunctionDef, cst.ClassDef)):
            continue
        else:
            stack.extend(iter_children(node))


def _dotted_reads(expression: cst.CSTNode | None) -> Iterator[str]:
    """Every `a.b.c` chain read by an expression (`self.losses` in `torch.stack(self.losses)`)."""
    if expression is None:
        return
    stack: list[cst.CSTNode] = [expression]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Attribute):
            dotted = dotted_name(node)
            if dotted is not None:
                yield dotted
                continue
        stack.extend(iter_children(node))


def _root_name(expression: cst.BaseExpression) -> cst.Name | None:
    """`self` of `self.history[-1]`, `metrics` of `metrics["loss"]`."""
    while isinstance(expression, (cst.Attribute, cst.Subscript)):
        expression = expression.value
    return expression if isinstance(expression, cst.Name) else None


@dataclass
class _ModuleFacts:
    """What LL006 needs to know about the whole file, computed once per file."""

    # Called name -> whether each visible call of it runs with grad disabled.
    calls_under_no_grad: dict[str, list[bool]] = field(default_factory=dict)
    # Receivers of `.requires_grad_(False)`: their calls record no history of their own.
    frozen: set[str] = field(default_factory=set)
    # `self.x` chains read by a backward call's inputs anywhere in the file.
    backward_reads: set[str] = field(default_factory=set)
    # Chains whose gradient or graph is read (`x.grad`, `x.requires_grad`).
    grad_reads: set[str] = field(default_factory=set)
    # ids of the functions whose own body (not a nested function's) calls backward.
    training_functions: set[int] = field(default_factory=set)


def _may_call_backward(context: FileContext) -> bool:
    """False when the file cannot hold a call that `_backward_inputs` recognises: then no
    function trains by a backward call of its own, and the file is not scanned.

    Such a call is a `_BACKWARD_METHODS` attribute, or a name whose import binding makes it
    an `_AUTOGRAD_CALLS` function: `torch.autograd.grad` (text `autograd.grad`), `ag.grad`
    after `from torch import autograd as ag`, `grad` after `from torch.autograd import
    grad` (the last two: bindings in `_AUTOGRAD_BINDINGS`). Star and relative imports bind
    nothing (`imports.ImportMap`), so no other spelling resolves to one.
    """
    key = "LL006.may_call_backward"
    answer = context.memo.get(key)
    if answer is None:
        text = context.source
        answer = (
            _BACKWARD_ATTRIBUTE.search(text) is not None
            or _AUTOGRAD_ATTRIBUTE.search(text) is not None
            or any(b.qualified in _AUTOGRAD_BINDINGS for b in context.imports.bindings)
        )
        context.memo[key] = answer
    return answer


def _module_facts(context: FileContext) -> _ModuleFacts:
    key = "LL006.module_facts"
    facts = context.memo.get(key)
    if facts is None:
        facts = _ModuleFacts()
        _scan_module(context, context.module, False, facts)
        context.memo[key] = facts
    return facts


_LEAVES = frozenset(LEAF_TYPES)


def _scan_module(
    context: FileContext, node: cst.CSTNode, no_grad: bool, facts: _ModuleFacts
) -> None:
    stack: list[tuple[cst.CSTNode, bool, int]] = [(node, no_grad, 0)]
    while stack:
        current, disabled, function = stack.pop()
        # Exact types: isinstance against LibCST's abstract base classes is slow.
        if type(current) is cst.FunctionDef:
            disabled = any(_is_no_grad_context(context, d.decorator) for d in current.decorators)
            function = id(current)
        elif type(current) is cst.With:
            if any(_is_no_grad_context(context, item.item) for item in current.items):
                for item in current.items:
                    stack.append((item, disabled, function))
                stack.append((current.body, True, function))
                continue
        elif type(current) is cst.Call:
            dotted = dotted_name(current.func)
            if dotted is not None:
                last = dotted.rsplit(".", 1)[-1]
                facts.calls_under_no_grad.setdefault(last, []).append(disabled)
                if (
                    last == "requires_grad_"
                    and current.args
                    and _is_false(current.args[0].value)
                    and isinstance(current.func, cst.Attribute)
                ):
                    receiver = dotted_name(current.func.value)
                    if receiver is not None:
                        facts.frozen.add(receiver)
            inputs = _backward_inputs(context, current)
            if inputs is not None:
                facts.training_functions.add(function)
                for expression in inputs:
                    facts.backward_reads.update(_dotted_reads(expression))
        elif type(current) is cst.Attribute and current.attr.value in _GRAD_ATTRIBUTES:
            dotted = dotted_name(current.value)
            if dotted is not None:
                facts.grad_reads.add(dotted)
        stack.extend(
            (child, disabled, function)
            for child in iter_children(current)
            if type(child) not in _LEAVES  # whitespace and comments: none of the above
        )


# -- the rule ---------------------------------------------------------------------------


class AutogradHistoryKept(Rule):
    """
    ## What it does
    Flags a loop that accumulates a value carrying autograd history into something that
    outlives the iteration: `total_loss += loss`, `losses.append(loss)`,
    `self.history.append(outputs.logits)`, `metrics["loss"] += loss`, a running statistic
    `ema = 0.9 * ema + 0.1 * loss`, or the same stores onto `self` in a Lightning-style
    `training_step` (each call is one iteration). Also flags, once per loop, a loop that
    runs with grad enabled and never calls backward (a validation loop without
    `torch.no_grad()`) where the previous iteration's output is still bound while the next
    forward runs; not for a rollout whose stored outputs a later backward runs through
    (REINFORCE, actor-critic, micro-batches summed into the step's loss).

    ## Why is this bad?
    It is the first item of PyTorch's FAQ on running out of memory. A tensor computed with
    grad enabled references the graph that produced it; adding it to an accumulator makes
    the accumulator reference every iteration's graph, and nothing is freed until the
    accumulator is. What that graph holds depends on whether backward ran through it:
    - In a loop that calls backward on the loss each step, backward frees the saved
      activations but not the graph's nodes: every node of every step's graph stays in
      host memory, so it grows with the step count (or until the accumulator is reset,
      which the message names).
    - In a loop that never calls backward (evaluation with grad enabled), every
      iteration's saved activations stay too: device memory grows by one forward's
      activations per iteration (88 MiB per step for a 4 x 4096 MLP at batch 512 in
      `benchmarks/ll006_growth.py` on an H200; flat after the fix).

    A value carries history when it is the output of a forward pass or a loss computed
    with grad enabled (a call of `model`, `*_model`, `*net`, `*encoder`, `*transformer`,
    `criterion`, `*loss`, `self(...)`, ..., not of a module frozen with
    `.requires_grad_(False)`), a value that the function passes to backward
    (`loss.backward()`, `accelerator.backward(loss)`, `scaler.scale(loss).backward()`,
    `torch.autograd.grad`, a function of the same file that runs backward on its
    parameter, as `_backward_scalar_loss(loss)` does with `loss.backward()`, the value a
    `training_step` returns), or anything derived from one by tensor operations (operators,
    `outputs.loss`, `out[0]`, tensor methods, `torch.*` functions, `sum()`). A call of a
    function defined at the top of the same file is judged by its body, not its name: it
    carries what its returns carry (history made inside it, or that of the arguments that
    reach a return), so `_fold_epoch_loss(acc, loss)`, which returns `loss.detach()` or
    `acc` grown in place, is no loss computation. The argument of `tensor.backward(g)` that
    reads a `.grad` (or `gradient=`) is a gradient, not a value backpropagated. Not history: the gradients `torch.autograd.grad` returns
    without `create_graph=True`, `.item()`, `float()`, `.detach()`,
    `.data`, `.tolist()`, `.numpy()`, integer and boolean results (`argmax`, comparisons),
    results of unknown functions (`accelerator.gather(loss)`) and of calls named for an
    action on a model (`save_best_model`, `load_model`, `build_encoder`, `get_*`, ...),
    anything computed under `torch.no_grad()` or `torch.inference_mode()` (or
    `set_grad_enabled` of anything but `True`).

    Only functions that visibly train are checked: those that call backward (directly or
    through such a helper of the file), and `training_step`. A method that runs backward
    itself outside any loop is one step per call (a step-wise agent's `train(data,
    target)`, a queue worker's `run`): what it accumulates onto `self` outlives the call,
    as in a `training_step`, and the message names the line that resets it. Nothing is reported in a function decorated with `torch.no_grad()` or
    `torch.inference_mode()`, one whose every call in the file runs under them, or an
    evaluation function by its name (`validation_step`, `test_step`, `predict_step`,
    `evaluate*`, `validate*`, `eval_*`, `predict*`, ...), which frameworks run without grad.
    An accumulator that is later passed to backward or `torch.autograd.grad` (gradient
    accumulation that needs the graph), or that a function without a backward call of its
    own returns (its caller may), is not reported; nor is one that a function with two
    modes returns (GradCache: `if with_backward: loss.backward(); loss = loss.detach()`
    before the store, the sum of the stored values returned for the caller's backward
    otherwise); nor is a store under `torch.no_grad()`
    of arithmetic (which records nothing). A loop that only stores parts of one graph made
    before it (`for k, source in enumerate(sources): losses[source] = reco[k]`) adds no
    graph per iteration: it is judged by the loop around it, so a dict rebuilt for every
    batch is not reported, and one that outlives the batches is reported at the batch loop.

    ## Example
    ```python
    total_loss = 0.0
    for batch in loader:
        loss = criterion(model(batch["x"]), batch["y"])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total_loss += loss
    print(f"epoch loss {total_loss / len(loader):.4f}")
    ```

    ## Use instead
    ```python
    total_loss = 0.0
    for batch in loader:
        loss = criterion(model(batch["x"]), batch["y"])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total_loss += loss.item()
    print(f"epoch loss {total_loss / len(loader):.4f}")
    ```

    ## Fix safety
    The fix rewrites the history-carrying parts of the stored value (`loss`,
    `outputs.loss`, `model(x)`), never the accumulator, choosing by how the accumulator is
    read in the function:
    - `.item()` when the accumulator is a local that is only used as a number: passed to
      `print`, a logger's `log`/`info`, `add_scalar`, `set_postfix`, `str`/`float`/`round`,
      formatted in an f-string, reduced by `sum`/`len`/`mean`, or combined with numbers
      before that (`total_loss / len(loader)`), directly or through one assignment.
      Unsafe: the stored value becomes a Python float instead of a tensor, `.item()`
      raises on a tensor of more than one element, and it waits for the device each
      iteration.
    - `.detach()` otherwise (the accumulator is returned, stored, reduced by `torch`
      functions, read through a method such as `.item()` or `.cpu()`, or is an attribute).
      Safe when nothing reads the accumulator's gradient or graph: the value, dtype, device
      and type stay the same, and the accumulator was never passed to backward (such
      accumulators are not reported). No fix when the file reads the accumulator's
      `.grad`, `.grad_fn`, `.requires_grad` or hooks, or when the stored value is not a
      Python expression that can take a method call.

    The held-into-the-next-forward form has no fix: wrapping the loop in
    `torch.no_grad()` is right only if it does not train.

    ## Scope
    Findings in tests, examples, benchmarks and scripts (the `non-library` globs shared
    with the other rules, and `test_*` functions) are `low`: they run a few iterations on
    small inputs, and a test often keeps outputs on purpose to compare them. The default
    run counts them as left out by scope (`--statistics`); `min-significance = "low"`
    shows them, each message saying why it is `low`.

    ## Options
    None.
    """

    code = "LL006"
    name = "autograd-history-kept"
    summary = "A loop accumulates a tensor with autograd history; every iteration's graph stays"
    triggers = ("backward", "training_step", "autograd")
    fix_availability = "sometimes"

    max_nodes = 4000

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        analysis = _analysis_of(self.context, node)
        if analysis is not None:
            analysis.report(self)


_ANALYSES = "LL006.analyses"


def _analysis_of(context: FileContext, node: cst.FunctionDef) -> _FunctionAnalysis | None:
    """LL006's analysis of one function (None: nothing says it trains), memoised on the
    file context so that LL001 can ask which names LL006 reports."""
    memo = context.memo.setdefault(_ANALYSES, {})
    key = id(node)
    if key not in memo:
        memo[key] = _build_analysis(context, node)
    return memo[key]


def _build_analysis(context: FileContext, node: cst.FunctionDef) -> _FunctionAnalysis | None:
    name = node.name.value
    if _matches(name, _EVALUATION_FUNCTIONS):
        return None
    if any(_is_no_grad_context(context, d.decorator) for d in node.decorators):
        return None
    is_step = name in _TRAINING_STEP_FUNCTIONS
    if not is_step and not _may_call_backward(context):
        return None  # no backward call anywhere: nothing says grad is on here
    facts = _module_facts(context)
    if not is_step and id(node) not in facts.training_functions:
        return None  # no backward call of its own: nothing says grad is on here
    callers = facts.calls_under_no_grad.get(name)
    if callers and all(callers):
        return None
    try:
        cfg = build(node, AutogradHistoryKept.max_nodes)
    except (TooLarge, RecursionError):
        return None
    backward_nodes = [
        (n, inputs)
        for n in cfg.nodes
        for call in n.calls
        if (inputs := _backward_inputs(context, call)) is not None
    ]
    if not backward_nodes and not is_step:
        return None
    return _FunctionAnalysis(context, cfg, facts, backward_nodes, is_step)


_SUMMARIES = "LL006.returned_history"


@dataclass(frozen=True)
class _Summary:
    """What a top-level function of the file returns (`_returned_history`)."""

    fresh: bool  # a return may carry history made inside the function
    passed: frozenset[str]  # parameters whose history may reach a return
    parameters: tuple[str, ...]  # positional parameter names, in order


def _returned_history(context: FileContext, name: str) -> _Summary | None:
    """What the top-level function `name` of this file returns, as LL006 propagates history
    through its body: (whether a return may carry history made inside it, the parameters
    whose history may reach a return). `_fold_epoch_loss(acc, loss)`, which returns
    `loss.detach()` or `acc` after `acc.add_(loss.detach())`, returns no history of its own
    and only `acc`'s: a call of it is no loss computation, whatever its name. None: no
    such function (or a recursive one, or too large to analyse)."""
    memo = context.memo.setdefault(_SUMMARIES, {})
    if name in memo:
        return memo[name]
    memo[name] = None  # while analysing: a recursive call is unknown
    functions = [
        s for s in context.module.body if isinstance(s, cst.FunctionDef) and s.name.value == name
    ]
    if len(functions) != 1:
        return None
    function = functions[0]
    if any(_is_no_grad_context(context, d.decorator) for d in function.decorators):
        memo[name] = _Summary(False, frozenset(), ())
        return memo[name]
    try:
        cfg = build(function, AutogradHistoryKept.max_nodes)
    except (TooLarge, RecursionError):
        return None
    analysis = _FunctionAnalysis(context, cfg, _module_facts(context), [], False)
    returns = [n for n in cfg.nodes if isinstance(n.statement, cst.Return) and n.statement.value]

    def returns_history(seeded: set[int]) -> bool:
        analysis.history = set(seeded)
        analysis._spread_history()
        return any(
            analysis._carries(
                n.statement.value,  # type: ignore[union-attr]
                analysis.flow.reach_in[n.index],
                analysis._enabled(n),
            )
            for n in returns
        )

    fresh = returns_history(set())
    passed = frozenset(
        site.name
        for site in cfg.defs
        if site.kind == "param"
        and returns_history(
            {s.index for s in cfg.defs if s.kind == "param" and s.name == site.name}
        )
    )
    params = function.params
    ordered = tuple(p.name.value for p in (*params.posonly_params, *params.params))
    memo[name] = _Summary(fresh, passed, ordered)
    return memo[name]


def _arguments_at(call: cst.Call, summary: _Summary) -> list[cst.BaseExpression] | None:
    """The arguments of a call bound to the summary's passing parameters (by position or
    keyword); None when a `*args` or `**kwargs` hides which."""
    passed: list[cst.BaseExpression] = []
    for position, arg in enumerate(call.args):
        if arg.star:
            return None
        if arg.keyword is not None:
            bound = arg.keyword.value
        elif position < len(summary.parameters):
            bound = summary.parameters[position]
        else:
            continue
        if bound in summary.passed:
            passed.append(arg.value)
    return passed


def held_by_autograd(context: FileContext, function: cst.FunctionDef) -> frozenset[str]:
    """Names LL006 reports as keeping one iteration's autograd graph into the next forward
    (a loop with grad on that never calls backward): the finding is LL006's, whose fix
    (`torch.no_grad()`) frees the graph too; LL001 leaves these names alone."""
    if AutogradHistoryKept.triggers and not any(
        trigger in context.source for trigger in AutogradHistoryKept.triggers
    ):
        return frozenset()
    analysis = _analysis_of(context, function)
    if analysis is None:
        return frozenset()
    return frozenset(site.name for site, _, _, _ in analysis.held_into_next_forward())


@dataclass
class _Sink:
    """A statement that stores a history-carrying value into a longer-lived place."""

    node: Node
    statement: cst.BaseSmallStatement
    accumulator: cst.BaseExpression  # the target or container
    values: list[cst.BaseExpression]  # the stored expressions
    loop: Node | None  # the header of the loop whose iterations it outlives; None: a step
    running: bool = False  # `ema = 0.9 * ema + 0.1 * loss`


class _FunctionAnalysis:
    def __init__(
        self,
        context: FileContext,
        cfg: CFG,
        facts: _ModuleFacts,
        backward_nodes: list[tuple[Node, list[cst.BaseExpression]]],
        is_step: bool,
    ) -> None:
        self.context = context
        self.cfg = cfg
        self.facts = facts
        self.backward_nodes = backward_nodes
        self.is_step = is_step
        self.flow: Dataflow = solve(cfg)
        self.disabled = _no_grad_statements(self.context, cfg.function)
        self.history: set[int] = set()  # DefSite indices
        self.loops_of = _enclosing_loops(cfg)
        self.parents = _parent_map(cfg.function)
        self._propagated = False
        self._held: list[tuple[DefSite, Node, Node, cst.Call]] | None = None

    # -- driver ----------------------------------------------------------------------
    def report(self, rule: AutogradHistoryKept) -> None:
        self.rule = rule
        if not self._propagated:
            self._propagate_history()
        needed_names, needed_chains = self._graph_needed()
        reported_loops: set[int] = set()
        for sink in self._sinks():
            accumulator_text = self.context.source_of(sink.accumulator)
            root = _root_name(sink.accumulator)
            if root is not None and root.value in needed_names:
                if isinstance(sink.accumulator, cst.Name) or root.value != "self":
                    continue
            if any(
                chain == accumulator_text or accumulator_text.startswith(chain + ".")
                for chain in needed_chains | self.facts.backward_reads
            ):
                continue
            if self._kept_for_caller(sink):
                continue
            self._report_sink(sink, accumulator_text)
            if sink.loop is not None:
                reported_loops.add(sink.loop.index)
        self._report_held()

    def _kept_for_caller(self, sink: _Sink) -> bool:
        """A function with two modes (GradCache's `if with_backward: loss.backward();
        loss = loss.detach()`): the stored name is rebound to its own `.detach()` on one
        path into the store, so the history that reaches it on the other path is kept on
        purpose, and the function returns the accumulator for a caller to backpropagate."""
        root = _root_name(sink.accumulator)
        if root is None:
            return False
        bits = self.flow.reach_in[sink.node.index]
        detached = False
        for value in sink.values:
            if not isinstance(value, cst.Name):
                continue
            for site in self.flow.reaching(bits, value.value):
                rebound = site.value
                if (
                    site.kind == "assign"
                    and isinstance(rebound, cst.Call)
                    and isinstance(rebound.func, cst.Attribute)
                    and rebound.func.attr.value == "detach"
                    and isinstance(rebound.func.value, cst.Name)
                    and rebound.func.value.value == value.value
                ):
                    detached = True
        return detached and root.value in self._returned_names()

    def _returned_names(self) -> set[str]:
        """Locals whose value may reach a `return`: read by a returned expression, or by the
        value bound to such a local (`loss = sum(losses); return loss`)."""
        pending = [
            name.value
            for node in self.cfg.nodes
            if isinstance(node.statement, cst.Return)
            for name in _names_read(node.statement.value)
        ]
        names: set[str] = set()
        while pending:
            name = pending.pop()
            if name in names:
                continue
            names.add(name)
            for site in self.cfg.defs:
                if site.name == name and site.value is not None:
                    pending.extend(n.value for n in _names_read(site.value))
        return names

    # -- where grad is disabled ------------------------------------------------------
    def _enabled(self, node: Node) -> bool:
        return id(node.statement) not in self.disabled

    # -- which values carry history --------------------------------------------------
    def _propagate_history(self) -> None:
        """Which bindings carry autograd history: those whose value comes from a model or
        loss call and what flows from them, and the inputs of `backward` (and of a step's
        returns). An input that already carries history through its own names
        (`scaler.scale(loss / cfg.accumulation_steps).backward()`: `loss` comes from a loss
        call) marks nothing more: its other operands are scalars or settings, and marking
        them (`cfg`) would make every later read of a setting a carrier of history."""
        self._propagated = True
        flow = self.flow
        self._spread_history()
        roots: list[tuple[Node, cst.BaseExpression]] = [
            (node, expression) for node, inputs in self.backward_nodes for expression in inputs
        ]
        if self.is_step:
            roots += [
                (node, node.statement.value)
                for node in self.cfg.nodes
                if isinstance(node.statement, cst.Return) and node.statement.value is not None
            ]
        marked = False
        for node, expression in roots:
            if self._carries(expression, flow.reach_in[node.index], True):
                continue
            for name in _names_read(expression):
                marked = self._mark(flow.reach_in[node.index], name.value) or marked
        if marked:
            self._spread_history()

    def _spread_history(self) -> None:
        """Close `history` under the flow: a binding whose value carries history carries it."""
        changed = True
        while changed:
            changed = False
            for site in self.cfg.defs:
                if site.node is None or site.value is None:
                    continue
                node = site.node
                bits = self.flow.reach_in[node.index]
                if site.index not in self.history:
                    value: cst.BaseExpression | None = site.value
                    if site.kind == "with":
                        continue
                    if site.unpacked and isinstance(value, cst.Call) and self._is_source(value):
                        # `loss, logs = self.compute_loss(batch)`: only the loss is sure.
                        if not self._is_model_call(value) and "loss" not in site.name.lower():
                            continue
                    if self._carries(value, bits, self._enabled(node)) or (
                        site.kind == "augassign" and self._name_carries(site.name, bits)
                    ):
                        self.history.add(site.index)
                        changed = True
                elif isinstance(site.value, (cst.Attribute, cst.Subscript)):
                    # `loss = outputs.loss` with loss passed to backward: outputs has history.
                    base = site.value.value
                    if isinstance(base, cst.Name) and self._mark(bits, base.value):
                        changed = True

    def _mark(self, bits: int, name: str) -> bool:
        added = False
        for site in self.flow.reaching(bits, name):
            if site.kind not in ("unbound", "deleted", "param") and site.index not in self.history:
                self.history.add(site.index)
                added = True
        return added

    def _name_carries(self, name: str, bits: int) -> bool:
        return any(s.index in self.history for s in self.flow.reaching(bits, name))

    def _carries(self, expression: cst.BaseExpression | None, bits: int, enabled: bool) -> bool:
        """Whether an expression's value may carry autograd history."""
        if expression is None:
            return False
        kind = type(expression)
        if kind is cst.Name:
            return self._name_carries(expression.value, bits)  # type: ignore[attr-defined]
        if kind is cst.Attribute:
            if expression.attr.value in _DETACHING_ATTRIBUTES:  # type: ignore[attr-defined]
                return False
            return self._carries(expression.value, bits, enabled)  # type: ignore[attr-defined]
        if kind is cst.Subscript:
            return self._carries(expression.value, bits, enabled)  # type: ignore[attr-defined]
        if kind is cst.Call:
            return self._call_carries(expression, bits, enabled)  # type: ignore[arg-type]
        if kind is cst.BinaryOperation:
            return enabled and (
                self._carries(expression.left, bits, enabled)  # type: ignore[attr-defined]
                or self._carries(expression.right, bits, enabled)  # type: ignore[attr-defined]
            )
        if kind is cst.UnaryOperation:
            return (
                enabled
                and not isinstance(expression.operator, cst.Not)  # type: ignore[attr-defined]
                and self._carries(expression.expression, bits, enabled)  # type: ignore[attr-defined]
            )
        if kind is cst.BooleanOperation:
            return self._carries(expression.left, bits, enabled) or self._carries(  # type: ignore[attr-defined]
                expression.right,  # type: ignore[attr-defined]
                bits,
                enabled,
            )
        if kind is cst.IfExp:
            return self._carries(expression.body, bits, enabled) or self._carries(  # type: ignore[attr-defined]
                expression.orelse,  # type: ignore[attr-defined]
                bits,
                enabled,
            )
        if isinstance(expression, (cst.List, cst.Tuple, cst.Set)):
            return any(self._carries(e.value, bits, enabled) for e in expression.elements)
        if isinstance(expression, cst.Dict):
            return any(
                self._carries(e.value, bits, enabled)
                for e in expression.elements
                if isinstance(e, cst.DictElement)
            )
        if isinstance(expression, (cst.ListComp, cst.GeneratorExp, cst.SetComp)):
            element = expression.elt
            if _surely_detached(element):
                return False
            return self._carries(expression.for_in.iter, bits, enabled)
        if kind in (cst.Await, cst.NamedExpr):
            inner = getattr(expression, "expression", None) or getattr(expression, "value", None)
            return self._carries(inner, bits, enabled)
        return False

    def _call_carries(self, call: cst.Call, bits: int, enabled: bool) -> bool:
        func = call.func
        qualified = self.context.qualified_name(func)
        arguments = [arg.value for arg in call.args]
        if qualified is not None and (qualified == "torch" or qualified.startswith("torch.")):
            last = qualified.rsplit(".", 1)[-1]
            if last in _NON_DIFFERENTIABLE_TORCH or not enabled:
                return False
            if qualified in _GRADIENT_CALLS and not _creates_graph(call):
                return False
            return any(self._carries(a, bits, enabled) for a in arguments)
        if isinstance(func, cst.Name):
            if func.value in _NUMBER_BUILTINS:
                return False
            if func.value in _PASSING_BUILTINS:
                return any(self._carries(a, bits, enabled) for a in arguments)
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            if method in _DETACHING_METHODS:
                return False
            if self._carries(func.value, bits, enabled):
                # A tensor method (`loss.float()`, `loss.mean()`) or a container read
                # (`outputs.get("loss")`): the latter passes history on even under no_grad.
                return enabled or method in ("get", "pop", "values", "items", "__getitem__")
        summary = self._summary(call)
        if summary is not None:
            passed = _arguments_at(call, summary)
            if passed is not None and any(self._carries(a, bits, enabled) for a in passed):
                return enabled
        return enabled and self._is_source(call)

    def _summary(self, call: cst.Call) -> _Summary | None:
        """What a call of a function defined at the top of this file returns
        (`_returned_history`), or None for any other call."""
        func = call.func
        if not isinstance(func, cst.Name) or func.value in self.cfg.name_index:
            return None  # a local (or a parameter) may shadow it
        if self.context.qualified_name(func) is not None:
            return None
        return _returned_history(self.context, func.value)

    def _is_source(self, call: cst.Call) -> bool:
        return self._is_model_call(call) or self._is_loss_call(call)

    def _callee_parts(self, call: cst.Call) -> list[str] | None:
        dotted = dotted_name(call.func)
        if dotted is None:
            return None
        summary = self._summary(call)
        if summary is not None and not summary.fresh:
            return None  # a helper of this file that makes no history of its own
        parts = dotted.split(".")
        if parts[-1] in _NOT_FORWARD or parts[-1][:1].isupper():
            return None
        if any(_matches(part, _NOT_MODEL_PARTS) for part in parts):
            return None
        for index in range(1, len(parts) + 1):
            if ".".join(parts[:index]) in self.facts.frozen:
                return None
        return parts

    def _is_model_call(self, call: cst.Call) -> bool:
        parts = self._callee_parts(call)
        if parts is None:
            return False
        if parts == ["self"]:
            return True  # Lightning's `self(x)`
        return _matches(parts[-1], _MODEL_CALLS) and not _matches(parts[-1], _MODEL_ACTION_VERBS)

    def _is_loss_call(self, call: cst.Call) -> bool:
        parts = self._callee_parts(call)
        return parts is not None and _matches(parts[-1], _LOSS_CALLS)

    # -- what backward needs ---------------------------------------------------------
    def _graph_needed(self) -> tuple[set[str], set[str]]:
        """Locals and chains whose graph backward (here or in a caller) runs through."""
        roots: list[cst.BaseExpression] = [
            expression for _, inputs in self.backward_nodes for expression in inputs
        ]
        if not self.backward_nodes:
            roots += [
                node.statement.value
                for node in self.cfg.nodes
                if isinstance(node.statement, cst.Return) and node.statement.value is not None
            ]
        names: set[str] = set()
        chains: set[str] = set()
        pending = [name.value for root in roots for name in _names_read(root)]
        for root in roots:
            chains.update(_dotted_reads(root))
        sites_by_name: dict[str, list] = {}
        for site in self.cfg.defs:
            sites_by_name.setdefault(site.name, []).append(site)
        while pending:
            name = pending.pop()
            if name in names:
                continue
            names.add(name)
            for site in sites_by_name.get(name, ()):
                if site.value is not None:
                    pending.extend(n.value for n in _names_read(site.value))
                    chains.update(_dotted_reads(site.value))
        return names, chains

    # -- sinks -----------------------------------------------------------------------
    def _sinks(self) -> Iterator[_Sink]:
        for node in self.cfg.nodes:
            statement = node.statement
            if node.kind != "small" or not isinstance(
                statement, (cst.AugAssign, cst.Assign, cst.Expr)
            ):
                continue
            sink = self._sink_of(node, statement)
            if sink is not None:
                yield sink

    def _sink_of(self, node: Node, statement: cst.BaseSmallStatement) -> _Sink | None:
        bits = self.flow.reach_in[node.index]
        enabled = self._enabled(node)
        accumulator: cst.BaseExpression
        if isinstance(statement, cst.AugAssign):
            if not enabled:
                return None  # arithmetic under no_grad records nothing
            accumulator = statement.target
            values = [statement.value]
            running = False
        elif isinstance(statement, cst.Assign):
            if len(statement.targets) != 1:
                return None
            accumulator = statement.targets[0].target
            text = self.context.source_of(accumulator)
            reads_itself = any(
                self.context.source_of(part) == text for part in _subexpressions(statement.value)
            )
            if reads_itself and enabled and isinstance(accumulator, (cst.Name, cst.Attribute)):
                values = [statement.value]
                running = True
            elif isinstance(accumulator, cst.Subscript) and not _constant_key(accumulator):
                values = [statement.value]
                running = False
            else:
                return None
        elif isinstance(statement, cst.Expr):
            call = statement.value
            if not isinstance(call, cst.Call) or not isinstance(call.func, cst.Attribute):
                return None
            position = _STORING_METHODS.get(call.func.attr.value)
            positional = [a.value for a in call.args if a.keyword is None and not a.star]
            if position is None or len(positional) <= position:
                return None
            accumulator = call.func.value
            values = [positional[position]]
            running = False
        else:
            return None
        accumulator_text = self.context.source_of(accumulator)
        carried = [
            value
            for value in values
            if self._carries_besides(value, accumulator_text, bits, enabled)
        ]
        if not carried:
            return None
        loop = self._outlived_loop(node, accumulator, carried)
        if loop is None and not self._outlives_call(accumulator, bits):
            return None
        return _Sink(node, statement, accumulator, carried, loop, running)

    def _carries_besides(
        self, value: cst.BaseExpression, accumulator: str, bits: int, enabled: bool
    ) -> bool:
        """Whether `value` carries history other than through the accumulator itself."""
        return any(True for _ in self._history_leaves(value, accumulator, bits, enabled))

    def _history_leaves(
        self, value: cst.BaseExpression, accumulator: str, bits: int, enabled: bool
    ) -> Iterator[cst.BaseExpression]:
        """The smallest parts of `value` to detach: names, chains and calls with history."""
        if self.context.source_of(value) == accumulator:
            return
        if not self._carries(value, bits, enabled):
            return
        if isinstance(value, cst.BinaryOperation):
            yield from self._history_leaves(value.left, accumulator, bits, enabled)
            yield from self._history_leaves(value.right, accumulator, bits, enabled)
        elif isinstance(value, cst.UnaryOperation):
            yield from self._history_leaves(value.expression, accumulator, bits, enabled)
        elif isinstance(value, (cst.List, cst.Tuple)):
            for element in value.elements:
                yield from self._history_leaves(element.value, accumulator, bits, enabled)
        elif isinstance(value, cst.Dict):
            for item in value.elements:
                if isinstance(item, cst.DictElement):
                    yield from self._history_leaves(item.value, accumulator, bits, enabled)
        else:  # a name, chain, call or other expression: detached as a whole
            yield value

    def _outlived_loop(
        self, node: Node, accumulator: cst.BaseExpression, values: list[cst.BaseExpression]
    ) -> Node | None:
        """The innermost loop whose iterations the accumulator outlives and in which the
        stored history is made, if any.

        A loop that only stores parts of one graph made before it (`for k, name in
        enumerate(sources): losses[name] = reco[k]`) adds no graph per iteration: the
        question moves to the loop around it, where that graph is made each time.
        """
        root = _root_name(accumulator)
        if root is None:
            return None
        bits = self.flow.reach_in[node.index]
        sites = self.flow.reaching(bits, root.value)
        for header in self.loops_of.get(node.index, ()):
            body = {n.index for n in header.loop_body or ()}
            if not self._outlives(header, body, node, accumulator, root, sites):
                return None
            if self._history_made_in(values, bits, body):
                return header
        return None

    def _outlives(
        self,
        header: Node,
        body: set[int],
        node: Node,
        accumulator: cst.BaseExpression,
        root: cst.Name,
        sites: list[DefSite],
    ) -> bool:
        """Whether the accumulator lives from one iteration of `header`'s loop to the next."""
        if root.value in self.cfg.parameters and not sites:
            return True
        for site in sites:
            if site.kind in ("unbound", "deleted"):
                continue
            if site.node is None or site.node.index not in body:
                return True  # bound before the loop: a parameter or earlier statement
            if site.node is node and isinstance(accumulator, cst.Name):
                return True  # carried round the back edge
        return root.value not in self.cfg.name_index  # a global or closure outlives it

    def _history_made_in(self, values: list[cst.BaseExpression], bits: int, body: set[int]) -> bool:
        """Whether a stored value's history may be new in each iteration of a loop body:
        it calls a forward or loss, or reads a name with history bound inside the body."""
        for value in values:
            if any(self._is_source(call) for call in _calls_in(value)):
                return True
            for name in _names_read(value):
                for site in self.flow.reaching(bits, name.value):
                    if site.index not in self.history:
                        continue
                    if site.node is None or site.node.index in body:
                        return True
        return False

    def _outlives_call(self, accumulator: cst.BaseExpression, bits: int) -> bool:
        """Whether a store outside any loop outlives the call: in a `training_step`, onto
        `self` or a global; in a method that runs backward on its own (`loss.backward()`
        in `def train(self, data, target)`: one call is one step, as in a step-wise agent
        or a queue worker), onto `self`, whose attribute lives from one call to the next."""
        if self.is_step:
            return self._outlives_step(accumulator, bits)
        root = _root_name(accumulator)
        return (
            bool(self.backward_nodes)
            and "self" in self.cfg.parameters
            and root is not None
            and root.value == "self"
            and not isinstance(accumulator, cst.Name)
            and not self.cfg.function.name.value.startswith("__")
        )

    def _outlives_step(self, accumulator: cst.BaseExpression, bits: int) -> bool:
        root = _root_name(accumulator)
        if root is None or isinstance(accumulator, cst.Name):
            return False
        return root.value == "self" or root.value not in self.cfg.name_index

    # -- reports ---------------------------------------------------------------------
    def _report_sink(self, sink: _Sink, accumulator: str) -> None:
        statement_text = _short(self.context.source_of(sink.statement))
        bits = self.flow.reach_in[sink.node.index]
        enabled = self._enabled(sink.node)
        leaves = [
            leaf
            for value in sink.values
            for leaf in self._history_leaves(value, accumulator, bits, enabled)
        ]
        if sink.loop is None:
            where = f"every call of `{self.cfg.function.name.value}`"
            backward_here = True  # the trainer calls backward on the returned loss
        else:
            row = self.context.position(sink.loop.statement).start.line  # type: ignore[arg-type]
            where = f"the loop at line {row}"
            body = {n.index for n in sink.loop.loop_body or ()}
            backward_here = any(node.index in body for node, _ in self.backward_nodes)
        reset = self._reset_row(sink)
        until = f" until `{accumulator}` is reset at line {reset}" if reset else ""
        if backward_here:
            growth = "with every iteration" + until if reset else "with the step count"
            cost = (
                "backward frees the saved activations, not the graph's nodes, "
                f"so host memory grows {growth}"
            )
        else:
            cost = (
                "nothing calls backward on these graphs, so every iteration's saved "
                f"activations stay too and memory grows with each iteration{until}"
            )
        fix = self._fix(sink, accumulator, leaves)
        advice = "store `.detach()` or `.item()` of it" if fix is None else fix.message
        advice = advice[0].lower() + advice[1:]
        message = (
            f"`{statement_text}` keeps every iteration's autograd graph alive through "
            f"`{accumulator}` ({where}): {cost}; {advice}"
        )
        self._emit(sink.statement, message, fix, _line_of(self, sink.statement))

    def _reset_row(self, sink: _Sink) -> int | None:
        """The line where a name accumulator is rebound inside its loop or a loop around it
        (a periodic reset: per epoch, per optimizer step)."""
        if sink.loop is None:
            return self._attribute_reset_row(sink)
        if not isinstance(sink.accumulator, cst.Name):
            return None
        body = {n.index for h in self.loops_of.get(sink.node.index, ()) for n in h.loop_body or ()}
        rows = [
            self.context.position(site.node.statement).start.line  # type: ignore[arg-type]
            for site in self.cfg.defs
            if site.name == sink.accumulator.value
            and site.kind in ("assign", "annassign")
            and site.node is not None
            and site.node.index in body
            and site.node is not sink.node
        ]
        return min(rows) if rows else None

    def _attribute_reset_row(self, sink: _Sink) -> int | None:
        """The line where a per-call step rebinds the attribute it accumulates into
        (`self._running_loss = 0` after the optimizer step)."""
        text = self.context.source_of(sink.accumulator)
        rows = [
            self.context.position(node.statement).start.line
            for node in self.cfg.nodes
            if node is not sink.node
            and isinstance(node.statement, cst.Assign)
            and any(self.context.source_of(t.target) == text for t in node.statement.targets)
        ]
        return min(rows) if rows else None

    def _fix(self, sink: _Sink, accumulator: str, leaves: list[cst.BaseExpression]) -> Fix | None:
        if not leaves:
            return None
        root = _root_name(sink.accumulator)
        chains = {accumulator}
        if root is not None:
            chains.add(root.value)
        if chains & self.facts.grad_reads:
            return None
        number_only = isinstance(sink.accumulator, cst.Name) and self._number_only(
            sink.accumulator.value, sink.statement
        )
        method = "item" if number_only else "detach"
        edits = []
        for leaf in leaves:
            start, end = self.context.span(leaf)
            if isinstance(leaf, (cst.Name, cst.Attribute, cst.Subscript, cst.Call)) or leaf.lpar:
                edits.append(Edit(end, end, f".{method}()"))
            else:
                edits.append(Edit(start, start, "("))
                edits.append(Edit(end, end, f").{method}()"))
        written = ", ".join(f"`{self.context.source_of(leaf)}.{method}()`" for leaf in leaves)
        if number_only:
            return Fix(
                f"Store {written}: `{accumulator}` is only used as a number",
                tuple(edits),
                Applicability.UNSAFE,
            )
        return Fix(f"Store {written}", tuple(edits), Applicability.SAFE)

    def _number_only(self, name: str, sink: cst.CSTNode, depth: int = 0) -> bool:
        """Whether every read of a local outside its own accumulation is as a number."""
        reads = 0
        for node in self.cfg.nodes:
            statement = node.statement
            if statement is sink:
                continue
            for load in node.loads:
                if load.value != name:
                    continue
                if isinstance(statement, cst.AugAssign) and statement.target is load:
                    continue  # another accumulation into it
                reads += 1
                if not self._read_as_number(load, depth):
                    return False
        return reads > 0

    def _read_as_number(self, load: cst.Name, depth: int) -> bool:
        child: cst.CSTNode = load
        parent = self.parents.get(id(child))
        while parent is not None:
            if isinstance(
                parent,
                (
                    cst.BinaryOperation,
                    cst.UnaryOperation,
                    cst.Comparison,
                    cst.ComparisonTarget,
                    cst.FormattedStringExpression,
                    cst.FormattedString,
                    cst.ConcatenatedString,
                    cst.Arg,
                    cst.Element,
                    cst.DictElement,
                    cst.Dict,
                    cst.Tuple,
                    cst.List,
                    cst.IfExp,
                ),
            ):
                if isinstance(parent, (cst.Comparison, cst.ComparisonTarget)):
                    return True  # `if total > best:` reads a number
                child, parent = parent, self.parents.get(id(parent))
                continue
            if isinstance(parent, cst.Call):
                if parent.func is child:
                    return False
                callee = dotted_name(parent.func) or ""
                last = callee.rsplit(".", 1)[-1]
                if _matches(last, _LOGGING_CALLS):
                    return True
                if last in _NUMBER_REDUCERS and not callee.startswith("torch."):
                    child, parent = parent, self.parents.get(id(parent))
                    continue
                return False
            if isinstance(parent, (cst.If, cst.While)):
                return True
            if isinstance(parent, cst.Assign) and depth == 0:
                targets = [t.target for t in parent.targets]
                if len(targets) == 1 and isinstance(targets[0], cst.Name):
                    return self._number_only(targets[0].value, parent, depth + 1)
            return False
        return False

    def held_into_next_forward(self) -> list[tuple[DefSite, Node, Node, cst.Call]]:
        """A loop with grad on and no backward: (the held binding, its statement's node, the
        loop header, the forward call) per loop, the last output held into the next forward."""
        if self._held is not None:
            return self._held
        if not self._propagated:
            self._propagate_history()
        needed, _ = self._graph_needed()
        found: list[tuple[DefSite, Node, Node, cst.Call]] = []
        for header in {h.index: h for hs in self.loops_of.values() for h in hs}.values():
            body_nodes = header.loop_body or []
            body = {n.index for n in body_nodes}
            if any(node.index in body for node, _ in self.backward_nodes):
                continue
            around = {h.index for h in self.loops_of.get(header.index, ()) if h is not header}
            if any(
                (self.loops_of.get(n.index) or [header])[0].index in around
                for n, _ in self.backward_nodes
            ):
                continue  # an inner loop of a training step: its graphs may feed that backward
            if any(self._stores_into(node) & needed for node in body_nodes):
                continue  # a rollout whose stored outputs a later backward runs through
            for node in body_nodes:
                if not self._enabled(node) or not isinstance(node.statement, cst.Assign):
                    continue
                forward = next(
                    (c for c in node.calls if self._is_model_call(c) or self._is_loss_call(c)),
                    None,
                )
                if forward is None:
                    continue
                held = [
                    site
                    for site in node.defs
                    if site.index in self.history
                    and site.name not in needed
                    and self.flow.name_bit(site.name) & self.flow.live_in[header.index] == 0
                    and self._bound_at_header(site, header)
                ]
                if held:
                    found.append((held[0], node, header, forward))
                    break
        self._held = found
        return found

    def _report_held(self) -> None:
        for site, node, header, forward in self.held_into_next_forward():
            row = self.context.position(header.statement).start.line  # type: ignore[arg-type]
            forward_text = self.context.source_of(forward.func)
            message = (
                f"`{site.name}` keeps one iteration's autograd graph, saved activations "
                f"included, alive into the next iteration of the loop at line {row}, "
                f"while `{forward_text}(...)` runs again: the loop runs with grad enabled "
                "and never calls backward; run it under `torch.no_grad()` if it does not "
                "train"
            )
            statement = node.statement
            assert statement is not None  # held_into_next_forward keeps assignments only
            self._emit(site.target or statement, message, None, _line_of(self, statement))

    def _emit(
        self, node: cst.CSTNode, message: str, fix: Fix | None, statement: cst.CSTNode
    ) -> None:
        """Report, scoped: library code unrated (always reported); tests, examples,
        benchmarks and scripts `low` (another audience: a few iterations on small inputs),
        counted as left out by scope where the run's bar is above `low`."""
        scope = self._outside_library()
        if scope is None:
            self.rule.report(node, message, fix, statement=statement)
        elif not at_least(LOW, bar_of(self.context.settings)):
            self.rule.leave_out(LEFT_OUT_SCOPE, SHOWS_BELOW_BAR)
        else:
            message += f" (significance: {LOW}: {scope})"
            self.rule.report(node, message, fix, statement=statement, significance=LOW)

    def _outside_library(self) -> str | None:
        """Why the function is not library code (a path under the `non-library` globs, a
        `test_*` function), or None."""
        if not Portability.of(self.context).library:
            return NON_LIBRARY_NOTE
        if self.cfg.function.name.value.startswith("test_"):
            return "in a test function (`test_*`)"
        return None

    def _stores_into(self, node: Node) -> set[str]:
        """Root names of the containers or accumulators a statement stores into."""
        statement = node.statement
        targets: list[cst.BaseExpression] = []
        if isinstance(statement, cst.AugAssign):
            targets.append(statement.target)
        elif isinstance(statement, cst.Assign):
            for target in (t.target for t in statement.targets):
                written = self.context.source_of(target)
                if isinstance(target, cst.Subscript) or any(
                    self.context.source_of(part) == written
                    for part in _subexpressions(statement.value)
                ):
                    targets.append(target)  # `d[k] = v`, `total = total + loss`
        elif (
            isinstance(statement, cst.Expr)
            and isinstance(statement.value, cst.Call)
            and isinstance(statement.value.func, cst.Attribute)
            and statement.value.func.attr.value in _STORING_METHODS
        ):
            targets.append(statement.value.func.value)
        roots = (_root_name(target) for target in targets)
        return {root.value for root in roots if root is not None}

    def _bound_at_header(self, site: DefSite, header: Node) -> bool:
        bits = self.flow.reach_in[header.index]
        return any(s is site for s in self.flow.reaching(bits, site.name))


# -- small helpers --------------------------------------------------------------------


def _no_grad_statements(context: FileContext, function: cst.FunctionDef) -> set[int]:
    """ids of the statements of a function that run under `no_grad`/`inference_mode`."""
    disabled: set[int] = set()
    stack: list[tuple[cst.CSTNode, bool]] = [(function.body, False)]
    while stack:
        node, off = stack.pop()
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        if off:
            disabled.add(id(node))
        if isinstance(node, cst.With) and any(
            _is_no_grad_context(context, item.item) for item in node.items
        ):
            stack.append((node.body, True))
            continue
        if isinstance(node, (cst.BaseExpression,)):
            continue
        stack.extend((child, off) for child in iter_children(node))
    return disabled


def _enclosing_loops(cfg: CFG) -> dict[int, list[Node]]:
    """Node index -> the loop headers around it, innermost first."""
    loops: dict[int, list[Node]] = {}
    for header in cfg.nodes:
        if header.loop_body is None:
            continue
        for node in header.loop_body:
            loops.setdefault(node.index, []).append(header)
    for headers in loops.values():
        headers.sort(key=lambda h: len(h.loop_body or ()))
    return loops


def _parent_map(function: cst.FunctionDef) -> dict[int, cst.CSTNode]:
    parents: dict[int, cst.CSTNode] = {}
    stack: list[cst.CSTNode] = [function.body]
    while stack:
        node = stack.pop()
        for child in iter_children(node):
            parents[id(child)] = node
            stack.append(child)
    return parents


def _subexpressions(expression: cst.CSTNode) -> Iterator[cst.CSTNode]:
    stack = [expression]
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.Name, cst.Attribute)):
            yield node
        stack.extend(iter_children(node))


def _surely_detached(expression: cst.BaseExpression) -> bool:
    """Whether an expression's value surely carries no history whatever its inputs: a
    constant, a shape or other metadata, `.item()`-like results, numbers and strings built
    from them (`tuple(x.shape) if isinstance(x, torch.Tensor) else "list"`)."""
    if isinstance(expression, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
        return True
    if isinstance(expression, (cst.Integer, cst.Float, cst.Imaginary)):
        return True
    if isinstance(expression, cst.Attribute):
        return expression.attr.value in _DETACHING_ATTRIBUTES
    if isinstance(expression, cst.IfExp):
        return _surely_detached(expression.body) and _surely_detached(expression.orelse)
    if isinstance(expression, (cst.Tuple, cst.List)):
        return all(_surely_detached(element.value) for element in expression.elements)
    if isinstance(expression, cst.Call):
        func = expression.func
        if isinstance(func, cst.Attribute) and func.attr.value in _DETACHING_METHODS:
            return True
        if isinstance(func, cst.Name):
            if func.value in _NUMBER_BUILTINS:
                return True
            if func.value in _PASSING_BUILTINS:
                return all(_surely_detached(arg.value) for arg in expression.args)
    return False


def _calls_in(expression: cst.CSTNode) -> Iterator[cst.Call]:
    stack = [expression]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Call):
            yield node
        stack.extend(iter_children(node))


def _short(text: str, limit: int = 60) -> str:
    """A statement as a message quotes it: its first line, at most `limit` characters."""
    first = " ".join(text.split())
    return first if len(first) <= limit else first[: limit - 3].rstrip() + "..."


def _constant_key(subscript: cst.Subscript) -> bool:
    return all(
        isinstance(element.slice, cst.Index)
        and isinstance(element.slice.value, (cst.SimpleString, cst.Integer))
        for element in subscript.slice
    )


def _line_of(analysis: _FunctionAnalysis, statement: cst.CSTNode) -> cst.CSTNode:
    """The statement line around a small statement (for `# noqa` on multi-line ones)."""
    node: cst.CSTNode | None = statement
    while node is not None and not isinstance(
        node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)
    ):
        node = analysis.parents.get(id(node))
    return node or statement
