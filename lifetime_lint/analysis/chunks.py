"""Chunk facts for accumulation rules: how big a loop's chunks are next to what the loop holds.

LL002 (accumulate-then-concatenate) is worth its bytes only where the chunks and their
concatenation set the peak. The facts layer says where a chunk comes from (its origin); this
module answers the questions that compare a chunk with the loop around it, each from the
memoised facts of `facts.py` (reaching definitions, value facts, work facts) and the
read-only traversal, once per loop:

- `live_source(...)`: the chunk is computed, by work lighter than a model, from slices of a
  tensor bound before the loop that stays alive across it (`x[:, :, t]` of a recurrent
  scan, `q[b : b + 1]` of a per-sample attention, `w.split(n)[i]`). The chunks together
  are then no larger than that input (a scan's per-step outputs are often 1/state_size of
  it), while the loop's own inputs and work are alive beside them: the concatenation adds
  at most one input's worth and does not set a new peak.
- `moved_from_container(...)`: the chunk is an element taken out of a container that
  existed before the loop (`tensors = input_dict.pop(key)`): the list holds what the
  container held, no new memory.
- `batch_loop(...)`: one iteration per sample of a batch tensor (`range(len(x))`,
  `range(x.shape[0])`, `range(x.size(0))` of a tensor): a handful of chunks.
- `image_model(...)`: the function decodes or merges 2-D images, not video (its tiles are
  4-D `[b, c, h, w]` slices, or its file or class names an image model family such as
  `QwenImage` or `hunyuan_image3`, whose latents have one frame): an image is tens of MiB
  at 2K, less than one tile's decoder activations, so merging its tiles never sets the peak.
- `light_owner(...)`: a scheduler, processor, tokenizer or feature-extractor class (its
  name or a base's, `SchedulerMixin` and `ProcessorMixin` included), or a file of one
  (`scheduling_*.py`, `processing_*.py`, a `preprocess` folder): host-side preprocessing,
  solver math over a handful of orders, offline pipelines whose model calls set the peak.
- `small_by_name(...)`: audio waveforms and audio latents (`audio`, `wavs`, `waveform`):
  a few MiB next to any video or LLM activation.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import libcst as cst

from lifetime_lint import project
from lifetime_lint.analysis import facts as F
from lifetime_lint.analysis import significance as S
from lifetime_lint.analysis import tables as T
from lifetime_lint.analysis.cfg import DefSite, Node
from lifetime_lint.imports import attribute_names
from lifetime_lint.lazy_regex import compile_lazily
from lifetime_lint.traversal import walk

if TYPE_CHECKING:  # Python 3.9 has no typing.TypeGuard; annotations are not evaluated
    from typing_extensions import TypeGuard

# Calls that split one tensor into views: their result is a container of slices of it.
_SPLITS = frozenset({"split", "chunk", "unbind", "tensor_split", "split_with_sizes"})
# Container methods that hand out an element the container already held.
_TAKES = frozenset({"pop", "get", "popitem", "setdefault"})
_MAX_DEPTH = 4


def live_source(
    context,
    facts: F.FunctionFacts,
    loads: dict[int, Node],
    expr: cst.BaseExpression,
    header: Node | None,
) -> tuple[str, ...] | None:
    """`_sliced_source` of a chunk whose live slices are cast to no wider float (see there)."""
    widened: list[str] = []
    found = _sliced_source(context, facts, loads, expr, header, widened)
    return None if found and set(found) & set(widened) else found


def widened_source(
    context,
    facts: F.FunctionFacts,
    loads: dict[int, Node],
    expr: cst.BaseExpression,
    header: Node | None,
) -> tuple[str, ...] | None:
    """The names of the live tensors a chunk is computed from slice by slice, as
    `live_source`, where a slice of one of them is cast to a wide float on the way
    (`x[:, i].to(torch.float32)`: `_widening_cast`; a cast of a mask does not count). Such chunks are up to twice their slices, so the kept chunks are up
    to twice the input and the concatenation's result as large again: the concatenation,
    not the loop, sets the peak (MAISI's group norm: fp32 groups of an fp16 activation)."""
    if _narrowing_cast(context, expr):
        return None  # `(...).to(torch.float16)`: cast back to half precision
    widened: list[str] = []
    found = _sliced_source(context, facts, loads, expr, header, widened)
    return found if found and set(found) & set(widened) else None


def _narrowing_cast(context, expr: cst.BaseExpression) -> bool:
    """`x.to(dtype=torch.float16)`, `.half()`, `.bfloat16()`: a cast to half precision."""
    if not (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)):
        return False
    method = expr.func.attr.value
    if method in ("half", "bfloat16"):
        return not expr.args
    if method not in ("to", "type"):
        return False
    return any(
        (arg.keyword is None or arg.keyword.value == "dtype")
        and (context.qualified_name(arg.value) or "") in _HALF_FLOATS
        for arg in expr.args
    )


_HALF_FLOATS = frozenset({"torch.float16", "torch.half", "torch.bfloat16"})


def _sliced_source(
    context,
    facts: F.FunctionFacts,
    loads: dict[int, Node],
    expr: cst.BaseExpression,
    header: Node | None,
    widened: list[str],
) -> tuple[str, ...] | None:
    """The names of the tensors bound before the loop (and so alive across it) that the
    chunk is computed from slice by slice, with no model-level work on the way; None otherwise.

    Followed through the bindings made in the loop body (`state = a[:, t] * state + b[:,
    t]`, `out = torch.matmul(state, c[:, t])`, then `outs.append(out[:, 0])`), at most a few
    bindings deep. Loop-carried state and whole tensors read in every iteration neither
    count nor block; a call that may expand its input blocks (`_may_expand`: a decoder, an
    upsampler, a callable passed in), since its output may be far larger than its input
    slice (a VAE decoder: 48x)."""
    if header is None or not header.loop_body:
        return None
    body = {id(node) for node in header.loop_body}
    # Names that change from one iteration to the next: the loop's targets and whatever
    # the body binds (`t = i * step`).
    varying_names = _loop_targets(header) | {
        site.name for member in header.loop_body for site in member.defs
    }
    found: list[str] = []
    seen: set[int] = set()
    products = 0  # matrix products with a whole tensor on the way (`_whole_products`)
    pending: list[tuple[cst.BaseExpression, int]] = [(expr, 0)]
    while pending:
        current, depth = pending.pop(0)  # breadth first: the chunk's own inputs first
        names, subscripts, calls = _parts(current)
        # Slice bounds are integers (`x[rank_start : rank_start + n]`, `n = cdiv(m, k)`):
        # how they are computed says nothing about the chunk's size.
        indices = _index_node_ids(subscripts) | _size_argument_ids(calls)
        names = [name for name in names if id(name) not in indices]
        calls = [call for call in calls if id(call) not in indices]
        for call in calls:
            if _may_expand(context, facts, call):
                return None
            receiver = call.func.value if isinstance(call.func, cst.Attribute) else None
            if (
                _widening_cast(context, call)
                and isinstance(receiver, cst.Subscript)
                and isinstance(receiver.value, cst.Name)
            ):
                # The cast of a slice itself (`input[:, i].float()`), not of a mask or a
                # factor the chunk is multiplied by (`mask[..., None].float()`).
                widened.append(receiver.value.value)
        products += _whole_products(facts, loads, current, body)
        sliced = set()
        for subscript in subscripts:
            base = subscript.value
            if not isinstance(base, cst.Name):
                continue
            node = loads.get(id(base))
            if node is None:
                continue
            sites = facts.reaching(node, base.value)
            if not sites:
                continue
            if all(_before_loop(site, body) for site in sites):
                varying = _index_names(subscript) & varying_names
                if varying and _slice_of_tensor(facts, subscript, sites, loads):
                    if base.value not in found:
                        found.append(base.value)
                    sliced.add(id(base))
        for name in names:
            if id(name) in sliced:
                continue
            node = loads.get(id(name))
            if node is None:
                continue
            for site in facts.reaching(node, name.value):
                if site.index in seen or site.node is None:
                    continue
                seen.add(site.index)
                if site.kind == "for" and site.node is header:
                    if _iterates_a_tensor(facts, header) and name.value not in found:
                        found.append(name.value)  # `for x_i in x`: one sample per step
                elif id(site.node) not in body:
                    continue
                elif site.kind in ("assign", "annassign", "augassign") and site.value is not None:
                    if depth < _MAX_DEPTH:
                        pending.append((site.value, depth + 1))
    if products % 2:
        return None  # an outer product; a pair (`softmax(q_i @ k.T) @ v`) contracts back
    return tuple(found) if found else None


# Products whose output can outgrow both operands (`a @ b`: rows of one times columns of
# the other; an outer product).
_PRODUCTS = frozenset({"matmul", "mm", "bmm", "einsum", "outer", "ger", "kron", "tensordot"})


def _whole_products(
    facts: F.FunctionFacts, loads: dict[int, Node], expr: cst.BaseExpression, body: set[int]
) -> int:
    """How many matrix products in `expr` take a whole tensor bound before the loop
    (`left[:, window] @ right_flat`, `torch.einsum("bi,bj->bij", x[:, t], y)`). One such
    product makes each chunk its slice's rows times the whole tensor's columns, so the
    chunks together outgrow the inputs (ESMFold's outer-product mean: a pair tensor out of
    MSA-sized inputs); a second one (chunked attention, `softmax(q_i @ k.T) @ v`)
    contracts back to the slice's size. Products of slices only (`q[b] @ k[b].T`) keep
    the slices' order and do not count."""
    products: list[list[cst.BaseExpression]] = []

    def enter(node: cst.CSTNode) -> None:
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.MatrixMultiply):
            products.append([node.left, node.right])
        elif (
            isinstance(node, cst.Call)
            and _last_name(node.func) in _PRODUCTS
            and not _contracting_einsum(node)
        ):
            products.append([arg.value for arg in node.args if arg.keyword is None])

    walk(expr, enter, lambda node: None, lambda node: not isinstance(node, cst.Lambda))
    return sum(
        any(_whole_tensor(facts, loads, operand, body) for operand in operands)
        for operands in products
    )


def _contracting_einsum(call: cst.Call) -> bool:
    """`torch.einsum("bikd,bjkd->bijd", left[:, window], right)`: an einsum with a literal
    equation that sums over an index and whose output has no more indices than one of its
    operands (ESMFold's triangular multiplication: each chunk has the shape of its sliced
    operand). Not an outer product, whose output has more indices than every operand
    (`"bsic,bsjd->bijcd"`, `"bi,bj->bij"`); an equation that is not a literal, or has no
    `->`, is not read."""
    if _last_name(call.func) != "einsum" or not call.args:
        return False
    equation = call.args[0].value
    if not isinstance(equation, cst.SimpleString):
        return False
    text = equation.evaluated_value
    if not isinstance(text, str) or "->" not in text or "." in text:
        return False
    inputs, output = text.replace(" ", "").split("->", 1)
    operands = inputs.split(",")
    if len(operands) < 2 or (output and not output.isalpha()):
        return False
    contracted = set("".join(operands)) - set(output)
    return bool(contracted) and len(output) <= max(len(operand) for operand in operands)


def residual_update(
    facts: F.FunctionFacts,
    loads: dict[int, Node],
    expr: cst.BaseExpression,
    header: Node | None,
) -> str | None:
    """The tensor a chunk is a residual update of: `chunk + self.mlp(self.norm(chunk))`
    with `chunk = hidden_states[:, start : start + n]` (ESMFold's chunked transition), the
    slice of a tensor alive across the loop plus layer-level work over that slice. The
    layer's output has the slice's shape, so the kept chunks add up to the whole input
    while the layer's intermediates are one chunk's (the reason to chunk). A model-level
    call is not such work. None otherwise."""
    if header is None or not header.loop_body:
        return None
    body = {id(node) for node in header.loop_body}
    value = _bound_in_loop(facts, loads, expr, body)
    if not (isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Add)):
        return None
    varying = _loop_targets(header) | {
        site.name for member in header.loop_body for site in member.defs
    }
    for piece, update in ((value.left, value.right), (value.right, value.left)):
        source = _slice_source(facts, loads, piece, body, varying)
        if source is None:
            continue
        names, _, calls = _parts(update)
        reads_piece = (
            any(name.value == piece.value for name in names)
            if isinstance(piece, cst.Name)
            else any(name.value == source for name in names)
        )
        works = [facts.work(call).level for call in calls]
        if reads_piece and works and F.LAYER <= max(works) < F.MODEL:
            return source
    return None


def cut_from(
    facts: F.FunctionFacts,
    loads: dict[int, Node],
    expr: cst.BaseExpression,
    header: Node | None,
    name: str,
) -> bool:
    """`expr` is computed from `name` itself, through the loop body's bindings
    (`reflected = video.flip(dims=[2])`, then `reflected[:, :, :pad_len]`): a piece of the
    running value, not a chunk the loop produces."""
    if header is None or not header.loop_body:
        return False
    body = {id(node) for node in header.loop_body}
    pending = [(expr, 0)]
    seen: set[int] = set()
    while pending:
        current, depth = pending.pop()
        names, _, _ = _parts(current)
        for read in names:
            if read.value == name:
                return True
            node = loads.get(id(read))
            if node is None or depth >= _MAX_DEPTH:
                continue
            for site in facts.reaching(node, read.value):
                if site.index in seen or site.node is None or id(site.node) not in body:
                    continue
                seen.add(site.index)
                if site.kind in ("assign", "annassign") and site.value is not None:
                    pending.append((site.value, depth + 1))
    return False


def _bound_in_loop(
    facts: F.FunctionFacts, loads: dict[int, Node], expr: cst.BaseExpression, body: set[int]
) -> cst.BaseExpression | None:
    """`expr`, or the value a name is bound to once in the loop body."""
    if not isinstance(expr, cst.Name):
        return expr
    node = loads.get(id(expr))
    if node is None:
        return None
    sites = facts.reaching(node, expr.value)
    if len(sites) != 1 or sites[0].kind != "assign" or sites[0].node is None:
        return None
    return sites[0].value if id(sites[0].node) in body else None


def _slice_source(
    facts: F.FunctionFacts,
    loads: dict[int, Node],
    piece: cst.BaseExpression,
    body: set[int],
    varying: set[str],
) -> str | None:
    """The tensor bound before the loop that `piece` slices by a varying index
    (`x[:, i : i + n]`, or a name bound to that in the loop body)."""
    value = _bound_in_loop(facts, loads, piece, body)
    if not (isinstance(value, cst.Subscript) and isinstance(value.value, cst.Name)):
        return None
    base = value.value
    node = loads.get(id(base))
    if node is None:
        return None
    sites = facts.reaching(node, base.value)
    if not sites or not all(_before_loop(site, body) for site in sites):
        return None
    if not (_index_names(value) & varying and _slice_of_tensor(facts, value, sites)):
        return None
    return base.value


def _whole_tensor(
    facts: F.FunctionFacts, loads: dict[int, Node], operand: cst.BaseExpression, body: set[int]
) -> bool:
    """`right_flat`, `right.transpose(1, 2)`, `k.T`: a tensor bound before the loop, read
    whole (not sliced) in every iteration."""
    base = operand
    while True:
        if isinstance(base, cst.Call) and isinstance(base.func, cst.Attribute):
            base = base.func.value
        elif isinstance(base, cst.Attribute):
            base = base.value
        else:
            break
    if not isinstance(base, cst.Name):
        return False
    node = loads.get(id(base))
    if node is None:
        return False
    sites = facts.reaching(node, base.value)
    return (
        bool(sites)
        and all(_before_loop(site, body) for site in sites)
        and facts.expression(base, node).is_tensor
    )


# Callee words of work whose output outgrows its input (upsamplers, decoders, renderers).
_EXPANDING = compile_lazily(r"(upsampl|upscal|decod|render|generat|synthes|vocod|interpolat)")


def _may_expand(context, facts: F.FunctionFacts, call: cst.Call) -> bool:
    """A call whose output may be far larger than its input: model-level work, a callable
    the function was given or bound (`upsampler(x)`, `render(camera)`: unknown work), or a
    callee named for expansion (`self.upsample(x)`). torch functions, tensor methods and
    submodules otherwise keep the size of their inputs' order."""
    work = facts.work(call)
    if work.level >= F.MODEL or work.kind in ("decode", "model"):
        return True
    func = call.func
    qualified = context.qualified_name(func) or ""
    if qualified.startswith("torch."):
        return False
    if any(_EXPANDING.search(part.lower()) for part in attribute_names(func)[0]):
        return True
    if isinstance(func, cst.Name):
        if _ALLOCATION.match(func.value.lower()):
            return False  # `randn_tensor((1, n), ...)`: the shape it is given, no input's
        return (
            func.value not in _BUILTINS
            and work.kind not in ("helper", "closure")
            and not _SIZE_KEEPING.search(func.value.lower())
        )
    return False


def _widening_cast(context, call: cst.Call) -> bool:
    """`x[:, i].to(dtype=torch.float32)`, `.float()`, `.double()`: a cast to a wide float.
    Models run in half precision (fp16 / bf16), and a chunk cast up from a slice of such
    an input is twice the slice: the chunks together are then up to twice the input, not
    bounded by it (MAISI's group norm keeps every fp32 group of an fp16 activation), so
    `live_source`'s "no larger than the loop's own inputs" does not follow."""
    func = call.func
    if not isinstance(func, cst.Attribute):
        return False
    method = func.attr.value
    if method in ("float", "double"):
        return not call.args
    if method not in ("to", "type"):
        return False
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value != "dtype":
            continue
        if (context.qualified_name(arg.value) or "") in _WIDE_FLOATS:
            return True
    return False


_WIDE_FLOATS = frozenset({"torch.float32", "torch.float", "torch.float64", "torch.double"})


# Callables named for work that keeps its input's size: attention (the output is the
# query's size), layers and blocks of a stack, norms, projections.
_SIZE_KEEPING = compile_lazily(r"(attention|attn|layer|block|norm|mlp|proj)")
# Functions named for an allocation of a given shape (`randn_tensor`, `zeros_like`).
_ALLOCATION = compile_lazily(r"^_?(randn|rand|randint|zeros|ones|empty|full)(_tensor|_like)?$")
_BUILTINS = frozenset(
    {"float", "int", "len", "min", "max", "abs", "range", "zip", "enumerate", "slice"}
)


def moved_from_container(
    facts: F.FunctionFacts,
    loads: dict[int, Node],
    expr: cst.BaseExpression,
    node: Node | None,
    header: Node | None,
) -> bool:
    """The chunk is an element taken from a container bound before the loop (`tensors =
    state.pop(key)`, `state.get(key)`): the tensors existed before the loop, so the list
    holds no memory of its own."""
    if header is None or not header.loop_body or node is None:
        return False
    body = {id(n) for n in header.loop_body}
    value: cst.BaseExpression | None = expr
    if isinstance(expr, cst.Name):
        sites = facts.reaching(node, expr.value)
        if len(sites) != 1 or sites[0].kind != "assign" or sites[0].node is None:
            return False
        value = sites[0].value
        node = sites[0].node
    if not (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Attribute)
        and value.func.attr.value in _TAKES
        and isinstance(value.func.value, cst.Name)
    ):
        return False
    container = value.func.value
    container_node = loads.get(id(container))
    if container_node is None:
        return False
    sites = facts.reaching(container_node, container.value)
    if not sites or not all(_before_loop(site, body) for site in sites):
        return False
    return not any(facts.value(site).is_tensor for site in sites)


def batch_loop(facts: F.FunctionFacts, loop: cst.CSTNode, header: Node | None) -> bool:
    """`for i in range(len(x))`, `range(x.shape[0])`, `range(x.size(0))` where `x` is a
    tensor: one step per sample of its batch dimension."""
    if not isinstance(loop, cst.For) or header is None:
        return False
    iterable = loop.iter
    if not (_is_call(iterable, "range") and len(iterable.args) == 1):
        return False
    bound = iterable.args[0].value
    measured: cst.BaseExpression | None = None
    if _is_call(bound, "len") and len(bound.args) == 1:
        measured = bound.args[0].value
    elif isinstance(bound, cst.Subscript) and isinstance(bound.value, cst.Attribute):
        if bound.value.attr.value == "shape" and _first_index_is_zero(bound):
            measured = bound.value.value
    elif (
        isinstance(bound, cst.Call)
        and isinstance(bound.func, cst.Attribute)
        and bound.func.attr.value == "size"
        and len(bound.args) == 1
        and isinstance(bound.args[0].value, cst.Integer)
        and bound.args[0].value.evaluated_value == 0
    ):
        measured = bound.func.value
    if not isinstance(measured, cst.Name):
        return False
    if not _is_call(bound, "len"):
        return True  # `x.shape[0]`, `x.size(0)`: the batch dimension of a tensor or array
    fact = facts.expression(measured, header)
    return fact.is_tensor and not fact.element_of


_IMAGE_WORD = compile_lazily(r"^(image|images|img|imgs|picture|photo)\d*$")
_VIDEO_WORD = compile_lazily(r"^(video|videos|vid|frames?|temporal|motion|movie|clip)\d*$")
_CAMEL = compile_lazily(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


def image_model(context, function: cst.FunctionDef, owner: cst.ClassDef | None) -> str | None:
    """Why the function works on 2-D images rather than video, or None: its tensors are
    indexed or unpacked as 4-D `[b, c, h, w]` and never as 5-D, or its file or class names
    an image model family (and no video one)."""
    memo = context.memo.setdefault("analysis.chunks.image", {})
    key = id(function)
    if key not in memo:
        memo[key] = _image_model(context.path, function, owner)
    return memo[key]


def _image_model(path: str, function: cst.FunctionDef, owner: cst.ClassDef | None) -> str | None:
    ranks: set[int] = set()

    def enter(node: cst.CSTNode) -> None:
        if isinstance(node, cst.Subscript) and len(node.slice) >= 4:
            if all(isinstance(e.slice, (cst.Index, cst.Slice)) for e in node.slice) and not any(
                isinstance(e.slice, cst.Index) and isinstance(e.slice.value, cst.Ellipsis)
                for e in node.slice
            ):
                ranks.add(len(node.slice))
        elif (
            isinstance(node, cst.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0].target, cst.Tuple)
            and isinstance(node.value, cst.Attribute)
            and node.value.attr.value == "shape"
        ):
            ranks.add(len(node.targets[0].target.elements))

    walk(function, enter, lambda node: None)
    if ranks and max(ranks) == 4:
        return "2-D images (its tensors are 4-D)"
    if _merges_height_and_width_of_4d(function):
        return "2-D images (it joins tile rows on dim 2 and columns on dim 3: 4-D tiles)"
    if 5 in ranks or max(ranks, default=0) > 5:
        words = _words(path, owner)
        if any(_VIDEO_WORD.match(word) for word in words):
            return None
        if any(_IMAGE_WORD.match(word) for word in words):
            return "an image model (one latent frame)"
        return None
    words = _words(path, owner)
    if any(_IMAGE_WORD.match(w) for w in words) and not any(_VIDEO_WORD.match(w) for w in words):
        return "an image model"
    return None


def _merges_height_and_width_of_4d(function: cst.FunctionDef) -> bool:
    """The function concatenates on dims 2 and 3 and on no other: the height and width of
    `[b, c, h, w]` tiles (a video tile merge joins dims 3 and 4, or -2 and -1, and a
    temporal one dim 2 alone). Seen where the tiles come out of a stacked buffer
    (`tiles[idx, :, :, :h, :w]`), whose 5 indices hide that each tile is 4-D."""
    dims: set[int] = set()

    def enter(node: cst.CSTNode) -> None:
        if isinstance(node, cst.Call) and _last_name(node.func) in ("cat", "concat", "concatenate"):
            for position, arg in enumerate(node.args):
                keyword = arg.keyword.value if arg.keyword is not None else None
                if keyword in ("dim", "axis") or (keyword is None and position == 1):
                    value = arg.value
                    if isinstance(value, cst.Integer):
                        dims.add(int(value.evaluated_value))
                    elif isinstance(value, cst.UnaryOperation) and isinstance(
                        value.expression, cst.Integer
                    ):
                        dims.add(-int(value.expression.evaluated_value))
                    else:
                        dims.add(-99)  # a computed dim: unknown

    walk(function, enter, lambda node: None)
    return dims == {2, 3}


def _words(path: str, owner: cst.ClassDef | None) -> set[str]:
    parts = path.replace("\\", "/").rsplit("/", 2)[-2:]
    words: set[str] = set()
    for part in parts:
        stem = part.rsplit(".", 1)[0] if part.endswith(".py") else part
        words.update(w for w in re.split(r"[_\-.]+", stem.lower()) if w)
    if owner is not None:
        words.update(w.lower() for w in _CAMEL.findall(owner.name.value))
    return words


_LIGHT_FILES = compile_lazily(
    r"(^|/)(scheduling_[^/]*|processing_[^/]*|image_processing_[^/]*|video_processing_[^/]*|"
    r"feature_extraction_[^/]*|tokenization_[^/]*)\.py$|(^|/)(schedulers|preprocess|"
    r"preprocessing|processors|data_preprocess|dataset|datasets|eval|evaluation|metrics)/"
)
# diffusers' attention processors (`AttnProcessor2_0`) run the network: not preprocessing.
_ATTENTION = compile_lazily(r"(attn|attention)", re.IGNORECASE)
_LIGHT_CLASS = compile_lazily(
    r"(scheduler|processor|tokenizer|featureextractor|preprocess)", re.IGNORECASE
)


def light_owner(path: str, owner: cst.ClassDef | None) -> str | None:
    """Why the code is preprocessing or scheduler math, not a network (None if it may be
    one): a scheduler, processor, tokenizer or feature-extractor class (by its name or a
    base's, `SchedulerMixin` and `ProcessorMixin` too, unless a name says it is a module or
    model), or a file or folder of them."""
    if owner is not None:
        names = [owner.name.value] + [_last_name(base.value) for base in owner.bases]
        if not any(
            name.endswith(("Module", "Model")) or _ATTENTION.search(name) for name in names
        ) and any(_LIGHT_CLASS.search(name) for name in names):
            return "a scheduler, processor or tokenizer class: preprocessing or solver math"
    near = "/".join(path.replace("\\", "/").rsplit("/", 3)[-3:])  # not the checkout's folders
    if _LIGHT_FILES.search(near):
        return "a scheduler, preprocessing, dataset or evaluation module: host-side or offline work"
    return None


_AUDIO_WORDS = frozenset(
    ["audio", "audios", "wav", "wavs", "waveform", "waveforms", "speech", "mel", "mels",
     "spectrogram", "spectrograms", "pcm"]
)  # fmt: skip


_MASK_WORDS = frozenset(["padding", "paddings", "pad_mask", "mask", "masks"])
# Bookkeeping tensors of a serving stack: a few values per token, page or request.
_INDEX_WORDS = frozenset(
    ["locs", "loc", "indices", "index", "idx", "ids", "pages", "slots", "orders", "positions",
     "offsets", "lens", "lengths", "phys", "table", "tables"]
)  # fmt: skip
# What loading and converting weights is named for: it runs once, one layer at a time.
_LOAD_WORDS = frozenset(
    ["load", "loading", "loader", "weights", "checkpoint", "convert", "conversion", "repack",
     "quantize", "dequantize"]
)  # fmt: skip
_LOAD_FOLDERS = compile_lazily(
    r"(^|/)(quantization|quantizers|model_loader|loaders?|lora|checkpoints?)/"
)
_WEIGHT_WORDS = frozenset(["weight", "weights", "qweight", "qzeros", "scales", "w13", "w2", "w1"])


def load_time(path: str, function: str, names: Iterable[str]) -> str | None:
    """Why the accumulation runs at load time, or None: a function named for loading or
    converting weights (`process_weights_after_loading`, `load_weights`), a file of a
    quantization, model-loader or LoRA package, or chunks named for weights (`qweight`,
    `w13_chunks`). One layer's weights next to the whole model: below the serving peak."""
    words = set(function.lower().strip("_").split("_"))
    named: set[str] = set()
    for name in names:
        named |= set(name.lower().strip("_").split("_"))
    near = "/".join(path.replace("\\", "/").rsplit("/", 3)[-3:])
    if words & _LOAD_WORDS or named & _WEIGHT_WORDS or _LOAD_FOLDERS.search(near):
        return (
            "weight loading or conversion: one layer's weights at load time, below the serving peak"
        )
    return None


# Model families whose tensors are a few MiB: audio, speech and music models (by the file's
# folder or name).
_AUDIO_DOMAIN = compile_lazily(
    r"(^|[/_])(audio|tts|speech|vocoder|codec|voice|voicechat|asr|whisper|music|wav2vec)"
)


def audio_model(path: str) -> bool:
    """An audio, speech or music model's file (`qwen3_tts/`, `nemotron_voicechat/`)."""
    return bool(_AUDIO_DOMAIN.search("/".join(path.replace("\\", "/").lower().rsplit("/", 2)[-2:])))


def small_by_name(names: Iterable[str]) -> str | None:
    """Why the chunks are small by what the code calls them, or None: audio waveforms and
    audio latents (`audio`, `wavs`), padding masks (`input_padding`): a few MiB at most."""
    words = set()
    for name in names:
        words |= set(name.lower().strip("_").split("_"))
    if words & _AUDIO_WORDS:
        return "an audio waveform or audio latent: a few MiB"
    if words & _MASK_WORDS:
        return "padding masks: one value per position, a few KiB to MiB"
    if words & _INDEX_WORDS:
        return "indices or locations: a few values per token, page or request"
    return None


def masks_by_function(function: str) -> str | None:
    """Why a function's chunks are small by its own name (`_merge_attention_masks`,
    `pad_masks`), or None: it builds masks, one value per position."""
    if set(function.lower().strip("_").split("_")) & _MASK_WORDS:
        return "padding masks (the function merges masks): one value per position, a few KiB to MiB"
    return None


# -- helpers --------------------------------------------------------------------------------


def _parts(
    expr: cst.BaseExpression,
) -> tuple[list[cst.Name], list[cst.Subscript], list[cst.Call]]:
    """The names read, the subscripts and the calls of one expression (not of nested
    lambdas or comprehensions' own scopes)."""
    names: list[cst.Name] = []
    subscripts: list[cst.Subscript] = []
    calls: list[cst.Call] = []

    def enter(node: cst.CSTNode) -> None:
        if isinstance(node, cst.Name):
            names.append(node)
        elif isinstance(node, cst.Subscript):
            subscripts.append(node)
        elif isinstance(node, cst.Call):
            calls.append(node)

    def descend(node: cst.CSTNode) -> bool:
        if isinstance(node, cst.Attribute):
            walk(node.value, enter, lambda n: None, descend)  # not the attribute's name
            return False
        if isinstance(node, cst.Arg) and node.keyword is not None:
            walk(node.value, enter, lambda n: None, descend)
            return False
        return not isinstance(node, cst.Lambda)

    walk(expr, enter, lambda node: None, descend)
    return names, subscripts, calls


# Calls whose other arguments are sizes, pads or dims of the tensor they take: the tensor
# is the receiver of a method (`x.view(b, n, d)`) or the first argument (`F.pad(x, pad)`).
_SIZED_CALLS = frozenset(
    ["pad", "view", "reshape", "expand", "repeat", "narrow", "unflatten", "flatten",
     "permute", "transpose", "new_zeros", "new_empty", "new_ones", "new_full"]
)  # fmt: skip


def _size_argument_ids(calls: list[cst.Call]) -> set[int]:
    """The ids of every node inside the size arguments of `_SIZED_CALLS`: `(0, 0, 0,
    num_pads)` of `F.pad(req_hidden, (0, 0, 0, num_pads))`, `b, n` of `x.view(b, n, -1)`."""
    found: set[int] = set()
    for call in calls:
        if _last_name(call.func) not in _SIZED_CALLS:
            continue
        method = isinstance(call.func, cst.Attribute) and _last_name(call.func.value) not in (
            "F",
            "functional",
            "torch",
        )
        args = list(call.args) if method else list(call.args)[1:]
        for arg in args:
            walk(arg.value, lambda node: found.add(id(node)), lambda node: None)
    return found


def _index_node_ids(subscripts: list[cst.Subscript]) -> set[int]:
    """The ids of every node inside the bounds of the subscripts' slices (`a : b`), not
    inside an index (`x[order[a:b]]`: an index tensor gathers rows)."""
    found: set[int] = set()
    for subscript in subscripts:
        for element in subscript.slice:
            if isinstance(element.slice, cst.Slice):
                walk(element.slice, lambda node: found.add(id(node)), lambda node: None)
    return found


def _index_names(subscript: cst.Subscript) -> set[str]:
    found: set[str] = set()
    for element in subscript.slice:
        walk(
            element.slice,
            lambda node: found.add(node.value) if isinstance(node, cst.Name) else None,
            lambda node: None,
        )
    return found


def _slice_of_tensor(
    facts: F.FunctionFacts, subscript: cst.Subscript, sites, loads: dict[int, Node] | None = None
) -> bool:
    """Tensor indexing, not a list's element: several indices or a slice (`x[:, :, t]`,
    `q[b : b + 1]`), a tensor's binding, an element of a tensor split into views, or a
    gather by a slice of indices (`idx = order[a:b]`, then `x[idx]`: a list cannot be
    indexed by a list or a tensor, so `x` is an array)."""
    elements = subscript.slice
    if len(elements) > 1 or any(isinstance(e.slice, cst.Slice) for e in elements):
        return True
    if loads is not None and _gathered_by_slice(facts, subscript, loads):
        return True
    for site in sites:
        if site.kind == "param":
            return False
        fact = facts.value(site)
        if fact.is_tensor and not fact.element_of:
            continue
        value = site.value
        if (
            isinstance(value, cst.Call)
            and isinstance(value.func, cst.Attribute)
            and value.func.attr.value in _SPLITS
        ):
            continue  # `w_c = w.split(sizes, dim=2)` ... `w_c[i]`: a view of `w`
        return False
    return True


def _gathered_by_slice(
    facts: F.FunctionFacts, subscript: cst.Subscript, loads: dict[int, Node]
) -> bool:
    """`x[idx]` where every binding of `idx` that reaches it is a slice (`order[a:b]`)."""
    index = subscript.slice[0].slice
    if not isinstance(index, cst.Index) or not isinstance(index.value, cst.Name):
        return False
    node = loads.get(id(index.value))
    if node is None:
        return False
    sites = facts.reaching(node, index.value.value)
    return bool(sites) and all(
        site.kind == "assign"
        and not site.unpacked
        and isinstance(site.value, cst.Subscript)
        and len(site.value.slice) == 1
        and isinstance(site.value.slice[0].slice, cst.Slice)
        for site in sites
    )


def _before_loop(site: DefSite, body: set[int]) -> bool:
    return site.kind == "param" or (site.node is not None and id(site.node) not in body)


def _loop_targets(header: Node) -> set[str]:
    statement = header.statement
    if isinstance(statement, cst.For):
        names, _, _ = _parts(statement.target)
        return {name.value for name in names}
    return set()


def _iterates_a_tensor(facts: F.FunctionFacts, header: Node) -> bool:
    """The loop walks a tensor along a dimension, or views split off one (`for q, k, v in
    zip(*splits)` after `splits = [torch.split(t, sizes) for t in (q, k, v)]`)."""
    statement = header.statement
    if not isinstance(statement, cst.For):
        return False
    iterable = statement.iter
    if _is_call(iterable, "zip") or _is_call(iterable, "enumerate"):
        return any(_tensor_pieces(facts, a.value, header) for a in iterable.args)
    return _tensor_pieces(facts, iterable, header)


def _tensor_pieces(facts: F.FunctionFacts, value: cst.BaseExpression, header: Node) -> bool:
    if _split_call(value):
        return True
    if not isinstance(value, cst.Name):
        return False
    if _tensor_name(facts, value, header):
        return True
    sites = facts.reaching(header, value.value)
    if len(sites) != 1 or sites[0].kind != "assign" or sites[0].unpacked:
        return False
    bound = sites[0].value
    if isinstance(bound, (cst.ListComp, cst.GeneratorExp)):
        return _split_call(bound.elt)
    return bound is not None and _split_call(bound)


def _split_call(value: cst.BaseExpression) -> bool:
    """`torch.split(t, n)`, `t.chunk(4)`, `t.unbind(1)`: views of one tensor."""
    return isinstance(value, cst.Call) and _last_name(value.func) in _SPLITS


def _tensor_name(facts: F.FunctionFacts, name: cst.Name, header: Node) -> bool:
    fact = facts.expression(name, header)
    return fact.is_tensor and not fact.element_of


def _first_index_is_zero(subscript: cst.Subscript) -> bool:
    if len(subscript.slice) != 1:
        return False
    piece = subscript.slice[0].slice
    return (
        isinstance(piece, cst.Index)
        and isinstance(piece.value, cst.Integer)
        and piece.value.evaluated_value == 0
    )


def _is_call(node: cst.BaseExpression, name: str) -> TypeGuard[cst.Call]:
    return (
        isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == name
    )


def _last_name(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Attribute):
        return node.attr.value
    if isinstance(node, cst.Name):
        return node.value
    return ""


_NETWORK_PART = compile_lazily(
    r"^(vision|visual|vit|backbone|tower|decoder|vae|vision_tower|vision_model|vision_encoder|"
    r"visual_encoder|image_encoder|text_encoder|audio_encoder|[a-z_]+_(tower|encoder|backbone))$"
)


def runs_a_network(work: F.Work) -> bool:
    """A call into a whole encoder that the work facts rate lighter than a model
    (`self.vision.forward_features(x)`, `self.vision_tower(pixels)`): its activations, not
    the concatenation of its outputs, set the peak. A collective is none: the work facts rate
    it model-level for what it waits on, but it allocates only its output, the size of what
    it moves (`single_all_to_all(chunk)` in DeepSpeed's FPDT)."""
    if is_collective(work):
        return False
    return work.level >= F.MODEL or any(_NETWORK_PART.match(part) for part in work.parts)


def is_collective(work: F.Work) -> bool:
    """A collective, or a loop whose heaviest work is one (a loop's work keeps the parts of
    its heaviest call, not its kind)."""
    if work.kind == "collective":
        return True
    if work.kind != "loop" or not work.parts:
        return False
    last = work.parts[-1].lower()
    return last in T.COLLECTIVES or any(word in last for word in T.COLLECTIVE_WORDS)


def callee_name(facts: F.FunctionFacts, expr: cst.BaseExpression, node: Node | None) -> str:
    """The name of the call that made the chunk (`patchify_video_latents` of
    `patchify_video_latents(x)`, `input_embeddings` of `self.input_embeddings(ids)`),
    directly or through the one binding that reaches the append; "" when none."""
    value: cst.BaseExpression | None = expr
    while True:
        if isinstance(value, (cst.Subscript, cst.Attribute)):
            value = value.value
        elif (
            isinstance(value, cst.Call)
            and isinstance(value.func, cst.Attribute)
            and value.func.attr.value in _SHAPING
        ):
            value = value.func.value
        else:
            break
    if isinstance(value, cst.Name) and node is not None:
        sites = facts.reaching(node, value.value)
        value = sites[0].value if len(sites) == 1 and sites[0].kind == "assign" else None
    if not isinstance(value, cst.Call):
        return ""
    return _last_name(value.func)


# Methods that reshape a call's output without changing what it is (`f(x).reshape(1, -1)`).
_SHAPING = frozenset({"reshape", "view", "flatten", "squeeze", "unsqueeze", "contiguous", "to"})


# -- merges whose caller concatenates them per call ------------------------------------------


def merged_per_call(context, function: cst.FunctionDef, owner: cst.ClassDef | None) -> str | None:
    """Why the function's merge holds one clip, not the whole output, or None: a sibling
    (a method of the same class, or a function of the same module) calls it once per
    clip in a loop and concatenates what the loop appends (`_temporal_tiled_decode`
    stitching `self.tiled_decode(tile)`, `_decode` stitching `self._decode_clip(z[..])`),
    and every other call of it in the file comes after a branch that returns through such
    a caller under a flag the class's `__init__` sets to `True` (framewise decoding on by
    default). The caller's concatenation of all clips then sets the peak; this merge's
    chunks are one clip's."""
    memo = context.memo.setdefault("analysis.chunks.per_call", {})
    key = id(function)
    if key not in memo:
        memo[key] = _merged_per_call(context, function, owner)
    return memo[key]


def _merged_per_call(
    context, function: cst.FunctionDef, owner: cst.ClassDef | None, depth: int = 0
) -> str | None:
    name = function.name.value
    body = owner.body.body if owner is not None else context.module.body
    siblings = [s for s in body if isinstance(s, cst.FunctionDef) and s is not function]
    per_clip: list[str] = []
    direct: list[tuple[cst.FunctionDef, list[cst.CSTNode]]] = []
    for caller in siblings:
        for chain in _calls_of(caller, name, self_method=owner is not None):
            loop = next((n for n in reversed(chain) if isinstance(n, (cst.For, cst.While))), None)
            if (
                loop is not None and _concatenates_appended(caller, loop)
            ) or _concatenated_comprehension(chain):
                per_clip.append(caller.name.value)
            else:
                direct.append((caller, chain))
    # A direct caller that is itself called once per clip (`_decode_clip` calling
    # `self._stitch_tiles(...)` once) passes the clip on.
    relayed: list[str] = []
    if depth < 2:
        for caller, _ in list(direct):
            if _merged_per_call(context, caller, owner, depth + 1) is not None:
                relayed.append(caller.name.value)
                direct = [(c, chain) for c, chain in direct if c is not caller]
    if not per_clip and not relayed:
        return None
    on_by_default = _flags_on_by_default(owner)
    for caller, chain in direct:
        if caller.name.value in per_clip:
            continue  # the caller's own short-input path (`if num_frames == 1: return f(x)`)
        if not _after_default_branch(caller, chain, {*per_clip, *relayed}, on_by_default):
            return None
    if per_clip:
        return (
            f"one clip per call: `{per_clip[0]}` calls it clip by clip and concatenates or "
            f"streams the results, so the clips together set the peak and this merge holds "
            f"one clip"
        )
    return (
        f"one clip per call: `{relayed[0]}`, itself run once per clip, calls it once, so "
        f"the clips together set the peak and this merge holds one clip"
    )


def _calls_of(scope: cst.FunctionDef, name: str, self_method: bool) -> list[list[cst.CSTNode]]:
    """The ancestor chains (inside `scope`, nested functions excluded) of each call of
    `self.name(...)` (a method) or `name(...)` (a module function)."""
    found: list[list[cst.CSTNode]] = []
    stack: list[cst.CSTNode] = []

    def enter(node: cst.CSTNode) -> None:
        stack.append(node)
        if isinstance(node, cst.Call):
            func = node.func
            if self_method:
                hit = (
                    isinstance(func, cst.Attribute)
                    and func.attr.value == name
                    and isinstance(func.value, cst.Name)
                    and func.value.value == "self"
                )
            else:
                hit = isinstance(func, cst.Name) and func.value == name
            if hit:
                found.append(list(stack))

    def descend(node: cst.CSTNode) -> bool:
        return node is scope or not isinstance(node, (cst.FunctionDef, cst.Lambda))

    walk(scope, enter, lambda node: stack.pop(), descend)
    return found


_GROW_METHODS = frozenset({"append", "extend"})
_CONCATENATIONS = frozenset({"cat", "concat", "concatenate", "stack"})


def _concatenates_appended(caller: cst.FunctionDef, loop: cst.CSTNode) -> bool:
    """The loop appends to a list (`row.append(decoded)`) that the caller then hands to a
    concatenation (`torch.cat(row, dim=2)`, `torch.cat(result_row, ...)` of a list built
    from it), or yields (a generator streaming one clip at a time to its consumer)."""
    grown: set[str] = set()

    def grows(node: cst.CSTNode) -> None:
        if (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Attribute)
            and node.func.attr.value in _GROW_METHODS
            and isinstance(node.func.value, cst.Name)
        ):
            grown.add(node.func.value.value)

    yields = False

    def grows_or_yields(node: cst.CSTNode) -> None:
        nonlocal yields
        yields = yields or isinstance(node, cst.Yield)
        grows(node)

    walk(loop, grows_or_yields, lambda node: None)
    if yields:
        return True  # a generator hands out one clip at a time (`_decode_chunks`)
    if not grown:
        return False
    concatenated = False

    def concatenates(node: cst.CSTNode) -> None:
        nonlocal concatenated
        if (
            isinstance(node, cst.Call)
            and _last_name(node.func) in _CONCATENATIONS
            and node.args
            and isinstance(node.args[0].value, cst.Name)
        ):
            concatenated = True

    walk(caller, concatenates, lambda node: None)
    return concatenated


def _concatenated_comprehension(chain: list[cst.CSTNode]) -> bool:
    """The call is the element of a comprehension handed to a concatenation
    (`torch.cat([self._encode_clip(x[:, :, i * n : (i + 1) * n]) for i in ...], dim=2)`)."""
    for position, node in enumerate(chain):
        if isinstance(node, (cst.ListComp, cst.GeneratorExp)) and position >= 2:
            holder = chain[position - 2]  # the Call, then its Arg
            if isinstance(holder, cst.Call) and _last_name(holder.func) in _CONCATENATIONS:
                return True
    return False


def _flags_on_by_default(owner: cst.ClassDef | None) -> set[str]:
    """The attributes the class's `__init__` sets to `True` (and nowhere there to
    anything else): `self.use_framewise_decoding = True`."""
    if owner is None:
        return set()
    init = next(
        (
            s
            for s in owner.body.body
            if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"
        ),
        None,
    )
    if init is None:
        return set()
    values: dict[str, set[str]] = {}

    def enter(node: cst.CSTNode) -> None:
        if isinstance(node, cst.Assign):
            for target in node.targets:
                t = target.target
                if (
                    isinstance(t, cst.Attribute)
                    and isinstance(t.value, cst.Name)
                    and t.value.value == "self"
                ):
                    written = node.value.value if isinstance(node.value, cst.Name) else "?"
                    values.setdefault(t.attr.value, set()).add(written)

    walk(init, enter, lambda node: None)
    return {attr for attr, written in values.items() if written == {"True"}}


def _after_default_branch(
    caller: cst.FunctionDef, chain: list[cst.CSTNode], clip_callers: set[str], flags: set[str]
) -> bool:
    """The call (at the end of `chain`) comes after an `if` of the same block that
    returns through a per-clip caller under a flag that is on by default (`if
    self.use_framewise_decoding and n > m: return self._temporal_tiled_decode(z)`): it
    runs only for inputs of at most one clip, or when the user turns the flag off."""
    if not flags:
        return False
    for depth, block in enumerate(chain[:-1]):
        statements = getattr(block, "body", None)
        if not isinstance(statements, (list, tuple)):
            continue
        child = chain[depth + 1]
        position = next((i for i, s in enumerate(statements) if s is child), None)
        if position is None:
            continue
        for earlier in statements[:position]:
            if isinstance(earlier, cst.If) and _returns_through(earlier, clip_callers):
                if _reads_self_flag(earlier.test, flags):
                    return True
    return False


def _returns_through(branch: cst.If, callers: set[str]) -> bool:
    hit = False

    def enter(node: cst.CSTNode) -> None:
        nonlocal hit
        if isinstance(node, cst.Return) and node.value is not None:
            value = node.value
            while isinstance(value, cst.Subscript) or (
                isinstance(value, cst.Attribute) and isinstance(value.value, cst.Call)
            ):
                value = value.value  # `self.tiled_decode(z)[:, :, :n]`, `(...).sample`
            if isinstance(value, cst.Call) and _last_name(value.func) in callers:
                hit = True

    walk(branch.body, enter, lambda node: None)
    return hit


def _reads_self_flag(test: cst.BaseExpression, flags: set[str]) -> bool:
    hit = False

    def enter(node: cst.CSTNode) -> None:
        nonlocal hit
        if (
            isinstance(node, cst.Attribute)
            and isinstance(node.value, cst.Name)
            and node.value.value == "self"
            and node.attr.value in flags
        ):
            hit = True

    walk(test, enter, lambda node: None)
    return hit


# -- chunks on the host ------------------------------------------------------------------------

# Calls that hand back host (CPU) data whatever their input: numpy / PIL conversions,
# host copies. (`to_tensor` is torchvision's and diffusers' PIL-to-tensor conversion.)
_HOST_CALLS = frozenset(
    ["from_numpy", "numpy_to_pt", "pil_to_numpy", "pil_to_tensor", "to_tensor", "fromarray",
     "frombuffer", "cpu", "numpy", "tolist"]
)  # fmt: skip
# Modules whose functions compute on the host (their results are arrays or images).
_HOST_MODULES = ("numpy.", "PIL.", "cv2.", "imageio.", "decord.", "av.")
_DEVICE_MOVES = frozenset({"cuda", "to", "pin_memory"})


def made_on_host(
    context, facts: F.FunctionFacts, expr: cst.BaseExpression, node: Node | None
) -> bool:
    """The chunk is host (CPU) memory: it comes, through the bindings that reach it, from
    numpy or PIL data (`torch.from_numpy(a)`, `numpy_to_pt(pil_to_numpy(frame))`,
    `to_tensor(img)`), from a host copy (`t.cpu()`), or from work over such values only
    (`normalize(frame)`, `x.float() / 255`), and nothing moves it to a device on the way
    (`.to(device)`, `.cuda()`, a `device=` argument). Concatenated there, it never sets the
    GPU peak, whatever its size."""
    return node is not None and _host(context, facts, expr, node, 6)


def _host(
    context, facts: F.FunctionFacts, expr: cst.BaseExpression, node: Node, depth: int
) -> bool:
    if depth <= 0:
        return False
    if isinstance(expr, cst.Name):
        sites = facts.reaching(node, expr.value)
        return bool(sites) and all(
            site.kind == "assign"
            and not site.unpacked
            and site.value is not None
            and site.node is not None
            and _host(context, facts, site.value, site.node, depth - 1)
            for site in sites
        )
    if isinstance(expr, cst.Subscript):
        return _host(context, facts, expr.value, node, depth)
    if isinstance(expr, cst.BinaryOperation):
        sides = [s for s in (expr.left, expr.right) if not _constant(s)]
        return bool(sides) and all(_host(context, facts, s, node, depth) for s in sides)
    if not isinstance(expr, cst.Call):
        return False
    func = expr.func
    method = _last_name(func).lstrip("_").lower()
    if any(
        arg.keyword is not None and arg.keyword.value == "device" and not _cpu_literal(arg.value)
        for arg in expr.args
    ):
        return False  # `torch.zeros(..., device=x.device)`: made where it is told
    if isinstance(func, cst.Attribute) and method in _DEVICE_MOVES:
        if method == "to" and expr.args and all(_cpu_literal(a.value) for a in expr.args[:1]):
            return True  # `.to("cpu")`
        if method == "to" and all(_dtype_argument(context, a) for a in expr.args):
            return _host(context, facts, func.value, node, depth)  # `.to(torch.float32)`
        return False
    if method in _HOST_CALLS:
        return True
    if isinstance(func, cst.Name) and _host_pipeline(context, facts, func.value, node):
        return True  # `transform(crop)` of a `Compose([..., ToTensor(), ...])`
    qualified = context.qualified_name(func) or ""
    if qualified.startswith(_HOST_MODULES):
        return True
    inputs: list[cst.BaseExpression] = [a.value for a in expr.args if not _constant(a.value)]
    if isinstance(func, cst.Attribute) and not _module_name(context, func.value):
        inputs.insert(0, func.value)  # the receiver of a tensor method (`frame.float()`)
    # Work over host values stays on the host (`normalize(frame)`, `frame.float()`); its
    # other inputs may be sizes or options, but no tensor that is not known to be on the host.
    found = False
    for value in inputs:
        if _host(context, facts, value, node, depth - 1):
            found = True
        elif facts.expression(value, node).is_tensor:
            return False
    return found


# Steps of an image transform pipeline that turn PIL images (or arrays) into host tensors:
# torchvision's `ToTensor` / `PILToTensor` and albumentations' `ToTensorV2`. (v2's
# `ToImage` is left out: it also passes tensors through, wherever they are.)
_PIPELINE_HOST_STEPS = frozenset({"ToTensor", "PILToTensor", "ToTensorV2"})


def _host_pipeline(context, facts: F.FunctionFacts, name: str, node: Node) -> bool:
    """`name` is bound, on every path that reaches `node`, to an image transform pipeline
    that converts its input into a host tensor: `T.Compose([T.Resize(s), T.ToTensor(),
    T.Normalize(...)])`, written here or returned by a helper of the class or module
    (`transform = cls._build_transform(size)`), with no step that names a device. Such a
    pipeline takes PIL images or arrays (`ToTensor` refuses tensors) and hands back CPU
    tensors: calling it never allocates GPU memory."""
    sites = facts.reaching(node, name)
    return bool(sites) and all(
        site.kind == "assign"
        and not site.unpacked
        and isinstance(site.value, cst.Call)
        and (_host_compose(site.value) or _returns_host_compose(context, site.value, facts.owner))
        for site in sites
    )


def _host_compose(call: cst.Call) -> bool:
    """`Compose([...])` whose steps include a PIL-to-tensor step and name no device."""
    if _last_name(call.func) != "Compose" or not call.args:
        return False
    steps = call.args[0].value
    if not isinstance(steps, (cst.List, cst.Tuple)):
        return False
    found = False
    for element in steps.elements:
        step = element.value
        if isinstance(step, cst.Call) and _last_name(step.func) in _PIPELINE_HOST_STEPS:
            found = True
        devices: list[bool] = []

        def enter(inner: cst.CSTNode, devices: list[bool] = devices) -> None:
            if isinstance(inner, cst.Name) and inner.value in ("cuda", "device", "to"):
                devices.append(True)

        walk(step, enter, lambda inner: None)
        if devices:
            return False  # `T.Lambda(lambda x: x.to(device))`: moved on the way
    return found


def _returns_host_compose(context, call: cst.Call, owner: cst.ClassDef | None) -> bool:
    """`cls._build_transform(size)` / `self._transform(size)` / `build_transform(size)`: a
    helper of the class or module every `return` of which is such a `Compose`."""
    func = call.func
    if (
        isinstance(func, cst.Attribute)
        and isinstance(func.value, cst.Name)
        and func.value.value == "cls"
        and owner is not None
    ):
        func = cst.Attribute(value=cst.Name("self"), attr=func.attr)
        call = call.with_changes(func=func)  # the same lookup in the class body
    found = _local_helper(context, call, owner)
    if found is None:
        return False
    returns, _ = _returns_and_bindings(found[1])
    return bool(returns) and all(
        isinstance(ret.value, cst.Call) and _host_compose(ret.value) for ret in returns
    )


def _constant(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, (cst.Integer, cst.Float, cst.SimpleString)) or (
        isinstance(expr, cst.UnaryOperation)
        and isinstance(expr.expression, (cst.Integer, cst.Float))
    )


def _cpu_literal(expr: cst.BaseExpression) -> bool:
    if isinstance(expr, cst.SimpleString):
        return expr.evaluated_value in ("cpu", b"cpu")
    return (
        isinstance(expr, cst.Call)
        and _last_name(expr.func) == "device"
        and bool(expr.args)
        and _cpu_literal(expr.args[0].value)
    )


_DTYPES = compile_lazily(r"^(float|half|bfloat|double|int|uint|long|bool|complex)\d*$|^float8")


def _dtype_argument(context, arg: cst.Arg) -> bool:
    """`torch.float32`, `dtype=...`, `non_blocking=...`, `copy=...`: arguments of a `.to`
    that changes the dtype only."""
    if arg.keyword is not None:
        return arg.keyword.value in ("dtype", "non_blocking", "copy", "memory_format")
    qualified = context.qualified_name(arg.value) or ""
    return qualified.startswith("torch.") and bool(_DTYPES.match(qualified.rsplit(".", 1)[-1]))


def _module_name(context, expr: cst.BaseExpression) -> bool:
    """`torch`, `np`, `F`: a module, not a value whose method is called."""
    if not isinstance(expr, (cst.Name, cst.Attribute)):
        return False
    qualified = context.qualified_name(expr) or ""
    return bool(qualified) and qualified.split(".", 1)[0] in (
        "torch", "numpy", "PIL", "cv2", "math", "einops", "torchvision"
    )  # fmt: skip


# Words of a loop count that says the loop walks chunks (`num_chunks`, `n_chunk`).
_CHUNK_COUNT_WORDS = frozenset({"chunk", "chunks"})


def sequence_chunks(loop: cst.CSTNode) -> bool:
    """The loop walks one tensor in chunks from its start: its count or step is named for
    chunks (`range(num_chunks)`, `range(0, n, chunk_size)`; not a window of neighbours such
    as `range(-before, after + 1)`), it iterates a split of a tensor (`for piece in
    x.chunk(n)`), or it consumes a tensor head first (`x = x[chunk_size:]`). Each
    iteration's inputs and work are then one chunk's, while the chunks kept for the
    concatenation add up to the whole sequence: at the concatenation every chunk and the
    output are alive, twice the whole, which is what the chunking was there to avoid
    (DeepSpeed FPDT's chunked attention and loss over 256K-2M tokens). Networks in the loop,
    and chunks computed from slices of a tensor alive across the loop (`live_source`), are
    decided before this is asked."""
    if not isinstance(loop, cst.For):
        return False
    iterable = loop.iter
    if _is_call(iterable, "enumerate") and iterable.args:
        iterable = iterable.args[0].value
    if isinstance(iterable, cst.Call) and _split_call(iterable):
        return _last_name(iterable.func) != "unbind"  # `unbind`: one item per step
    if _is_call(iterable, "range") and iterable.args:
        args = [arg.value for arg in iterable.args]
        start = args[0] if len(args) > 1 else None
        from_zero = start is None or (isinstance(start, cst.Integer) and start.value == "0")
        counts = args[1:] if len(args) > 1 else args
        if from_zero and any(
            _CHUNK_COUNT_WORDS & set(name.lower().split("_"))
            for count in counts
            for name in _names(count)
        ):
            return True
    assigns: list[cst.Assign] = []
    walk(
        loop.body,
        lambda n: assigns.append(n) if isinstance(n, cst.Assign) else None,
        lambda n: None,
    )
    for assign in assigns:  # `x = x[chunk_size:]`: the head was this iteration's chunk
        value = assign.value
        if (
            len(assign.targets) == 1
            and isinstance(assign.targets[0].target, cst.Name)
            and isinstance(value, cst.Subscript)
            and isinstance(value.value, cst.Name)
            and value.value.value == assign.targets[0].target.value
            and len(value.slice) == 1
            and isinstance(value.slice[0].slice, cst.Slice)
            and value.slice[0].slice.lower is not None
            and value.slice[0].slice.upper is None
        ):
            return True
    return False


def _names(node: cst.CSTNode) -> set[str]:
    found: set[str] = set()
    walk(node, lambda n: found.add(n.value) if isinstance(n, cst.Name) else None, lambda n: None)
    return found


def allocation_call(call: cst.Call) -> bool:
    """`torch.zeros(...)`, `torch.empty_like(x)`, `x.new_zeros(...)`: a fresh buffer."""
    last = _last_name(call.func)
    if last.startswith("new_"):  # `x.new_zeros(shape)`
        last = last[4:]
    return bool(_ALLOCATION.match(last))


def shaped_like(
    facts: F.FunctionFacts, call: cst.Call, loads: dict[int, Node], at: Node | None
) -> str:
    """The origin of a buffer shaped after a tensor (`torch.zeros((n, x.shape[1],
    x.shape[2]))`, `torch.zeros_like(x)`, `x.new_zeros(...)`): that tensor's, the largest
    where several are named; `ALLOCATION` (size unknown) when none is."""
    shaped: list[cst.Name] = []
    if _last_name(call.func).endswith("_like") and call.args:
        first = call.args[0].value
        if isinstance(first, cst.Name):
            shaped.append(first)
    if isinstance(call.func, cst.Attribute) and isinstance(call.func.value, cst.Name):
        if _last_name(call.func).startswith("new_"):
            shaped.append(call.func.value)

    def enter(node: cst.CSTNode) -> None:
        if isinstance(node, cst.Attribute) and (
            node.attr.value == "shape" or node.attr.value.endswith("_shape")
        ):
            base = node.value  # `x.shape`, `chunks[0].chunk_shape`
            while isinstance(base, (cst.Subscript, cst.Attribute)):
                base = base.value
            if isinstance(base, cst.Name):
                shaped.append(base)
        elif (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Attribute)
            and node.func.attr.value == "size"
            and isinstance(node.func.value, cst.Name)
        ):
            shaped.append(node.func.value)

    for arg in call.args:
        walk(arg.value, enter, lambda n: None)
    origins = []
    for name in shaped:
        node = loads.get(id(name)) or at  # a comprehension's names: at its statement
        if node is None:
            continue
        fact = facts.expression(name, node)
        if fact.is_tensor:  # an element of a container (`ctx.saved_tensors[0]`) too
            origins.append(fact.origin)
        elif fact.kind in (F.UNKNOWN, F.VIEW):
            # Something with a `.shape` the facts cannot follow (`ctx.saved_tensors[0]`):
            # an array of data, sized as its name says.
            origins.append(S.name_origin(name.value, F.ACTIVATION))
    return F._largest(origins) if origins else F.ALLOCATION


def optional_chunk_size(
    context, function: cst.FunctionDef, owner: cst.ClassDef | None, loop: cst.CSTNode, uses
) -> str | None:
    """The loop's step is a chunk size that is off by default and then falls back to the
    whole length: `for start in range(0, n, size)` with `size = self.chunk_size or n` (or
    inline `range(0, n, chunk or n)`, or `if size is None: size = n`), where the size's
    default is None or 0: a parameter's default, the `__init__` argument or literal the
    attribute is set from, or the field of a configuration file of the package
    (`self.chunk_size = config.outer_product_chunk_size`, `outer_product_chunk_size: int |
    None = None` in `configuration_*.py`). At the default the loop runs once and the list
    holds one chunk, the output itself. A size with another default, or none known
    (`chunk_size: int | None = 64`), is not this. Returns a phrase for the message, or
    None. `uses` is the function's `NameUses`."""
    if not isinstance(loop, cst.For) or not _is_call(loop.iter, "range"):
        return None
    args = loop.iter.args
    if len(args) != 3 or any(a.keyword is not None or a.star for a in args):
        return None
    stop, step = args[1].value, args[2].value
    code = cst.Module([]).code_for_node
    unset: cst.BaseExpression | None = None
    shown = ""
    if _whole_fallback(step, stop, uses):
        assert isinstance(step, cst.BooleanOperation)
        unset, shown = step.left, f"`{code(step)}`"
    elif isinstance(step, cst.Name):
        values: list[tuple[cst.BaseExpression, list[cst.CSTNode]]] = []
        for use in uses.of(step.value):
            parent = use.ancestors[-1] if use.ancestors else None
            if isinstance(parent, cst.AssignTarget):
                assign = use.ancestors[-2]
                if not isinstance(assign, cst.Assign) or len(assign.targets) != 1:
                    return None
                values.append((assign.value, use.ancestors))
            elif isinstance(
                parent, (cst.AugAssign, cst.For, cst.CompFor, cst.NamedExpr, cst.AsName)
            ):
                return None
        for value, chain in values:
            if len(values) == 1 and _whole_fallback(value, stop, uses):
                assert isinstance(value, cst.BooleanOperation)
                unset, shown = value.left, f"`{step.value} = {code(value)}`"
            guard = next((n for n in reversed(chain) if isinstance(n, cst.If)), None)
            if (
                guard is not None
                and _unset_test(guard.test, step.value)
                and _same_length(value, stop, uses)
            ):
                unset = step
                shown = f"`{code(guard.test)}`: `{step.value} = {code(value)}`"
    if unset is None:
        return None
    default = _unset_by_default(context, function, owner, unset)
    return None if default is None else f"{shown}, and {default}"


def _unset_by_default(
    context, function: cst.FunctionDef, owner: cst.ClassDef | None, expr: cst.BaseExpression
) -> str | None:
    """Where `expr` (a parameter or `self.attr`) defaults to None or 0, said for a message."""
    code = cst.Module([]).code_for_node
    if isinstance(expr, cst.Name):
        default = _parameter_default(function, expr.value)
        return f"`{expr.value}` defaults to {default}" if default else None
    if not (
        isinstance(expr, cst.Attribute)
        and isinstance(expr.value, cst.Name)
        and expr.value.value == "self"
        and owner is not None
    ):
        return None
    attr = expr.attr.value
    for statement in owner.body.body:
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if (
                    isinstance(small, cst.AnnAssign)
                    and isinstance(small.target, cst.Name)
                    and small.target.value == attr
                    and small.value is not None
                ):
                    default = _unset_literal(small.value)
                    return f"`{attr}` defaults to {default}" if default else None
    init = next(
        (
            s
            for s in owner.body.body
            if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"
        ),
        None,
    )
    if init is None:
        return None
    sources = []
    for node in _statements(init):
        targets: list[cst.BaseExpression] = []
        value = None
        if isinstance(node, cst.Assign) and len(node.targets) == 1:
            targets, value = [node.targets[0].target], node.value
        elif isinstance(node, cst.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        for target in targets:
            if (
                isinstance(target, cst.Attribute)
                and isinstance(target.value, cst.Name)
                and target.value.value == "self"
                and target.attr.value == attr
            ):
                sources.append(value)
    if len(sources) != 1 or sources[0] is None:
        return None
    source = sources[0]
    default = _unset_literal(source)
    if default:
        return f"`self.{attr}` is set to {default}"
    if isinstance(source, cst.Name):
        default = _parameter_default(init, source.value)
        return f"`{source.value}` defaults to {default}" if default else None
    if isinstance(source, cst.Attribute) and "config" in code(source.value).lower():
        field = source.attr.value
        default = _config_default(context, field)
        return f"the configuration's `{field}` defaults to {default}" if default else None
    return None


def _statements(function: cst.FunctionDef) -> list[cst.BaseSmallStatement]:
    found: list[cst.BaseSmallStatement] = []
    walk(
        function.body,
        lambda node: found.append(node) if isinstance(node, (cst.Assign, cst.AnnAssign)) else None,
        lambda node: None,
        lambda node: not isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)),
    )
    return found


def _parameter_default(function: cst.FunctionDef, name: str) -> str | None:
    params = function.params
    for param in (*params.params, *params.kwonly_params, *params.posonly_params):
        if param.name.value == name:
            return _unset_literal(param.default) if param.default is not None else None
    return None


def _unset_literal(value: cst.BaseExpression) -> str | None:
    if isinstance(value, cst.Name) and value.value == "None":
        return "None"
    if isinstance(value, cst.Integer) and value.value == "0":
        return "0"
    return None


def _config_default(context, field: str) -> str | None:
    """The default of `field` in the configuration modules beside the linted file."""
    path = getattr(context, "path", None)
    if not path:
        return None
    return project.config_field_default(os.path.dirname(os.path.abspath(path)), field)


def _whole_fallback(expr: cst.BaseExpression, stop: cst.BaseExpression, uses) -> bool:
    """`size or n` where `n` is the loop's whole length."""
    return (
        isinstance(expr, cst.BooleanOperation)
        and isinstance(expr.operator, cst.Or)
        and _same_length(expr.right, stop, uses)
    )


def _unset_test(test: cst.BaseExpression, name: str) -> bool:
    """`name is None`, `not name`, `name == 0`, `name <= 0`."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return isinstance(test.expression, cst.Name) and test.expression.value == name
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.Or):
        return _unset_test(test.left, name) or _unset_test(test.right, name)
    if not (
        isinstance(test, cst.Comparison)
        and isinstance(test.left, cst.Name)
        and test.left.value == name
        and len(test.comparisons) == 1
    ):
        return False
    target = test.comparisons[0]
    if isinstance(target.operator, cst.Is):
        return isinstance(target.comparator, cst.Name) and target.comparator.value == "None"
    return (
        isinstance(target.operator, (cst.Equal, cst.LessThanEqual))
        and isinstance(target.comparator, cst.Integer)
        and target.comparator.value == "0"
    )


def _same_length(a: cst.BaseExpression, b: cst.BaseExpression, uses) -> bool:
    """The same expression, or a local bound once to it (`seq_len = x.shape[1]`)."""
    if a.deep_equals(b):
        return True
    return any(
        x.deep_equals(y)
        for x in (a, _only_binding(a, uses))
        for y in (b, _only_binding(b, uses))
        if x is not None and y is not None
    )


def _only_binding(expr: cst.BaseExpression, uses) -> cst.BaseExpression | None:
    if not isinstance(expr, cst.Name):
        return None
    found = None
    for use in uses.of(expr.value):
        parent = use.ancestors[-1] if use.ancestors else None
        if isinstance(parent, cst.AssignTarget):
            assign = use.ancestors[-2]
            if found is not None or not isinstance(assign, cst.Assign) or len(assign.targets) != 1:
                return None
            found = assign.value
        elif isinstance(parent, (cst.AugAssign, cst.For, cst.CompFor, cst.NamedExpr, cst.Param)):
            return None
    return found


# -- helpers that concatenate onto their argument ---------------------------------------------


def concatenating_helper(
    context, call: cst.Call, owner: cst.ClassDef | None
) -> tuple[str, frozenset[int]] | None:
    """`self._soft_append(history, current, overlap)` (a method of the enclosing class) or
    `append_frames(video, new)` (a function of the module) whose every return is a
    concatenation (`torch.cat([history[:, :, :-n], blended, current[:, :, n:]], dim=2)`,
    through one binding and a `.to(...)` at most) of a list holding two or more of its
    parameters, whole or sliced: the helper's name and the positions (in the call's
    positional arguments) of the parameters so joined. None otherwise; a helper that joins
    one parameter with something else (`torch.cat([x, zeros])`: padding) is not one."""
    found = _local_helper(context, call, owner)
    if found is None:
        return None
    name, helper, method = found
    memo = context.memo.setdefault("analysis.chunks.concatenating_helper", {})
    key = id(helper)
    if key not in memo:
        memo[key] = _joined_parameters(context, helper, method)
    joined = memo[key]
    return (name, joined) if joined else None


def _local_helper(
    context, call: cst.Call, owner: cst.ClassDef | None
) -> tuple[str, cst.FunctionDef, bool] | None:
    """The one definition a call reaches without inference: `self.name(...)` a method of
    the enclosing class, `name(...)` a function of the module; its name, its definition
    and whether it is a method (its first parameter is the instance)."""
    func = call.func
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
        if func.value.value != "self" or owner is None:
            return None
        name, body, method = func.attr.value, owner.body.body, True
    elif isinstance(func, cst.Name):
        name, body, method = func.value, context.module.body, False
    else:
        return None
    helpers = [s for s in body if isinstance(s, cst.FunctionDef) and s.name.value == name]
    if len(helpers) != 1:
        return None
    return name, helpers[0], method


def list_joining_helper(
    context, call: cst.Call, owner: cst.ClassDef | None
) -> tuple[str, int, str] | None:
    """`self._concatenate_tensors(outputs, split_size, padding)` (a method of the enclosing
    class) or `merge(tiles)` (a function of the module) that returns the concatenation of
    one of its parameters taken whole as the list of pieces (`x = torch.cat(outputs,
    dim=d)` ... `return x`, through bindings of the returned name and a `.to(...)`): the
    helper's name, the position of that parameter among the call's positional arguments,
    and the parameter's name. Handing a list of chunks to such a helper is concatenating
    it: the chunks and the result are alive together inside the helper, as at a
    `torch.cat` in the caller. The parameter must not be rebound in the helper (then the
    concatenation may join something else); storing into its items (`outputs[i] =
    outputs[i][sl]`, trimming each piece to a view) keeps the same pieces alive. Other
    returns of the helper (a host-staged path for large inputs) do not matter: the call
    concatenates the list on the path that takes the returned `torch.cat`. None otherwise,
    and for `torch.stack` (which joins along a new axis, as `concatenating_helper`)."""
    found = _local_helper(context, call, owner)
    if found is None:
        return None
    name, helper, method = found
    memo = context.memo.setdefault("analysis.chunks.list_joining_helper", {})
    key = id(helper)
    if key not in memo:
        memo[key] = _joined_list_parameter(context, helper, method)
    joined = memo[key]
    return (name, joined[0], joined[1]) if joined is not None else None


_CASTS = ("to", "contiguous", "type_as")


def _without_casts(value: cst.BaseExpression | None) -> cst.BaseExpression | None:
    """`value` under its casts (`torch.cat(xs).to(dtype)`: the concatenation)."""
    while (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Attribute)
        and value.func.attr.value in _CASTS
    ):
        value = value.func.value
    return value


def _returns_and_bindings(
    helper: cst.FunctionDef,
) -> tuple[list[cst.Return], dict[str, list[cst.BaseExpression]]]:
    """A helper's own returns and, per local name, the values it is bound to (an augmented or
    annotated assignment, a loop or `with` target counts as an unknown value `_`, so a name
    rebound there never resolves to one value). Nested functions, lambdas and classes are
    not the helper's."""
    returns: list[cst.Return] = []
    bindings: dict[str, list[cst.BaseExpression]] = {}

    def enter(node: cst.CSTNode) -> None:
        if isinstance(node, cst.Return):
            returns.append(node)
        elif isinstance(node, cst.Assign):
            for target in node.targets:
                if isinstance(target.target, cst.Name):
                    bindings.setdefault(target.target.value, []).append(node.value)
        elif isinstance(node, (cst.AugAssign, cst.AnnAssign)) and isinstance(node.target, cst.Name):
            bindings.setdefault(node.target.value, []).append(cst.Name("_"))
        elif isinstance(node, (cst.For, cst.With)):
            targets: list[cst.BaseExpression] = (
                [node.target]
                if isinstance(node, cst.For)
                else [item.asname.name for item in node.items if item.asname is not None]
            )
            for bound in targets:
                if isinstance(bound, cst.Name):
                    bindings.setdefault(bound.value, []).append(cst.Name("_"))

    def descend(node: cst.CSTNode) -> bool:
        return node is helper or not isinstance(node, (cst.FunctionDef, cst.Lambda, cst.ClassDef))

    walk(helper, enter, lambda node: None, descend)
    return returns, bindings


def _joined_list_parameter(
    context, helper: cst.FunctionDef, method: bool
) -> tuple[int, str] | None:
    params = [p.name.value for p in helper.params.params]
    if method:
        params = params[1:]
    returns, bindings = _returns_and_bindings(helper)

    def joined(value: cst.BaseExpression | None) -> str | None:
        value = _without_casts(value)
        if not isinstance(value, cst.Call):
            return None
        qualified = context.qualified_name(value.func) or ""
        if qualified not in T.CONCATENATIONS or qualified.rsplit(".", 1)[-1] == "stack":
            return None
        listed = value.args[0].value if value.args and value.args[0].keyword is None else None
        if isinstance(listed, cst.Name) and listed.value in params:
            return listed.value
        return None

    found: set[str] = set()
    for ret in returns:
        value = _without_casts(ret.value)
        candidates = bindings.get(value.value, []) if isinstance(value, cst.Name) else [value]
        for candidate in candidates:
            param = joined(candidate)
            if param is not None:
                found.add(param)
    if len(found) != 1:
        return None
    param = found.pop()
    if param in bindings:
        return None  # rebound: the concatenation may join another list
    return params.index(param), param


def host_staged_join(context, call: cst.Call, owner: cst.ClassDef | None) -> bool:
    """The list-joining helper this call reaches (`list_joining_helper`) also has a path
    that concatenates the pieces on the host (`x = torch.cat((x, outputs[k + 1].cpu()))`,
    piece by piece, for inputs over a size): the authors found the device concatenation
    of these pieces too large for the GPU on large inputs, their own sign that this
    concatenation, not the work that made the pieces, sets the peak."""
    found = _local_helper(context, call, owner)
    if found is None or list_joining_helper(context, call, owner) is None:
        return False
    _, helper, _ = found
    _, _, param = list_joining_helper(context, call, owner)  # type: ignore[misc]
    staged = False

    def enter(node: cst.CSTNode) -> None:
        nonlocal staged
        if staged or not isinstance(node, cst.Call):
            return
        qualified = context.qualified_name(node.func) or ""
        if qualified not in T.CONCATENATIONS or not node.args:
            return
        listed = node.args[0].value
        if isinstance(listed, (cst.List, cst.Tuple)):
            staged = any(_host_piece(e.value, param) for e in listed.elements)

    walk(helper, enter, lambda node: None, lambda node: not isinstance(node, cst.Lambda))
    return staged


def _host_piece(value: cst.BaseExpression, param: str) -> bool:
    """`outputs[k + 1].cpu()` / `.to("cpu")`: an item of the list parameter copied to the host."""
    if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)):
        return False
    method = value.func.attr.value
    if method == "cpu":
        pass
    elif method == "to" and value.args and isinstance(value.args[0].value, cst.SimpleString):
        if value.args[0].value.evaluated_value != "cpu":
            return False
    else:
        return False
    base = value.func.value
    return (
        isinstance(base, cst.Subscript)
        and isinstance(base.value, cst.Name)
        and base.value.value == param
    )


def _joined_parameters(context, helper: cst.FunctionDef, method: bool) -> frozenset[int]:
    params = [p.name.value for p in helper.params.params]
    if method:
        params = params[1:]
    if helper.params.star_arg is not cst.MaybeSentinel.DEFAULT and not params:
        return frozenset()
    returns, bindings = _returns_and_bindings(helper)
    if not returns:
        return frozenset()
    joined: frozenset[int] | None = None
    for ret in returns:
        value = _without_casts(ret.value)  # `return output.to(history)`: a cast of the join
        if isinstance(value, cst.Name) and len(bindings.get(value.value, [])) == 1:
            value = bindings[value.value][0]
        if not isinstance(value, cst.Call):
            return frozenset()
        qualified = context.qualified_name(value.func) or ""
        if qualified not in T.CONCATENATIONS or qualified.rsplit(".", 1)[-1] == "stack":
            return frozenset()
        listed = value.args[0].value if value.args else None
        if not isinstance(listed, (cst.List, cst.Tuple)):
            return frozenset()
        found = set()
        for element in listed.elements:
            base = element.value
            while isinstance(base, cst.Subscript):
                base = base.value
            if isinstance(base, cst.Name) and base.value in params:
                found.add(params.index(base.value))
        if len(found) < 2:
            return frozenset()
        joined = frozenset(found) if joined is None else joined & found
    return joined if joined is not None and len(joined) >= 2 else frozenset()


# Attributes that name a module's parameter storage (`lin.weight`, `mA.data`).
_PARAMETER_ATTRIBUTES = frozenset(["weight", "data", "bias"])
# Methods whose result is derived from the receiver alone (a cast, a transpose, a copy).
_RECEIVER_METHODS = frozenset(
    ["float", "half", "bfloat16", "double", "t", "to", "contiguous", "clone", "detach", "T"]
)
# Functions whose result is derived from their tensor arguments alone.
_PRODUCTS = frozenset(["mm", "matmul", "bmm", "einsum", "kron", "outer"])


def weight_derived(expr: cst.BaseExpression, loops: Sequence[cst.CSTNode]) -> bool:
    """Whether a chunk is computed from parameters alone, as a LoRA merge's
    `mB.data.float() @ mA.data.float() * lin.scaling` over `zip(lin.matrix_A, lin.matrix_B)`
    or `self.lora_B.weight @ self.lora_A.weight`: every tensor it reads is the `.weight`,
    `.data` or `.bias` of a module attribute or of a loop target that iterates module
    attributes (`lin.matrix_A`), scaled by attributes or numbers. Such a chunk is the size
    of one layer's weights, not of tokens or pixels."""
    targets = _attribute_loop_targets(loops)
    found: list[bool] = []
    return _weight_leaves(expr, targets, found, scaled=False) and bool(found)


def _attribute_loop_targets(loops: Sequence[cst.CSTNode]) -> set[str]:
    """Names bound by `for` loops whose iterable reads only attributes of names
    (`zip(lin.matrix_A, lin.matrix_B)`, `self.lora_layers`, `enumerate(self.experts)`)."""
    names: set[str] = set()
    for loop in loops:
        if not isinstance(loop, cst.For):
            continue
        iterated = loop.iter
        sources = [iterated]
        if isinstance(iterated, cst.Call) and _last_name(iterated.func) in ("zip", "enumerate"):
            sources = [a.value for a in iterated.args]
            if _last_name(iterated.func) == "enumerate":
                sources = sources[:1]
        if not sources or not all(isinstance(s, cst.Attribute) for s in sources):
            continue
        names |= _names(loop.target)
    return names


def _weight_leaves(
    expr: cst.BaseExpression, targets: set[str], found: list[bool], *, scaled: bool
) -> bool:
    if isinstance(expr, (cst.Integer, cst.Float)):
        return True
    if isinstance(expr, cst.BinaryOperation):
        scale = isinstance(expr.operator, (cst.Multiply, cst.Divide))
        return _weight_leaves(expr.left, targets, found, scaled=scale) and _weight_leaves(
            expr.right, targets, found, scaled=scale
        )
    if isinstance(expr, cst.Call):
        func = expr.func
        if isinstance(func, cst.Attribute) and func.attr.value in _RECEIVER_METHODS:
            return _weight_leaves(func.value, targets, found, scaled=False)
        if _last_name(func) in _PRODUCTS:
            tensors = [a.value for a in expr.args if a.keyword is None and not a.star]
            tensors = [t for t in tensors if not isinstance(t, cst.SimpleString)]
            return bool(tensors) and all(
                _weight_leaves(t, targets, found, scaled=False) for t in tensors
            )
        return False
    if isinstance(expr, cst.Attribute):
        if expr.attr.value == "T":
            return _weight_leaves(expr.value, targets, found, scaled=False)
        if expr.attr.value in _PARAMETER_ATTRIBUTES:
            base = expr.value
            while (
                isinstance(base, cst.Attribute) and base.attr.value in _PARAMETER_ATTRIBUTES
            ) or isinstance(base, cst.Subscript):
                base = base.value  # `lin.weight.data`, `self.lora_B[i].weight`
            if isinstance(base, cst.Attribute) or (
                isinstance(base, cst.Name) and base.value in targets
            ):
                found.append(True)
                return True
            return False
        return scaled and _names_a_scale(expr.attr.value)  # `lin.scaling`: a factor
    if isinstance(expr, cst.Name):
        return scaled and _names_a_scale(expr.value)  # `scale`: a factor
    return False


def _names_a_scale(name: str) -> bool:
    return bool(set(name.lower().strip("_").split("_")) & {"scaling", "scale", "alpha"})


# Callees of a scores product written as a module or helper (`self.matmul_qk`, `bmm`).
_SCORE_PRODUCT = compile_lazily(r"(^|_)(matmul|bmm|baddbmm|mm|qk)(_|$)")
# What transposes the keys for `q @ k.T`.
_TRANSPOSES = frozenset(["transpose", "permute", "T", "mT", "swapaxes"])


def full_key_scores(
    context, facts: F.FunctionFacts, loads: dict[int, Node], header: Node | None
) -> str | None:
    """The code of the scores product when the loop runs attention one query tile at a
    time against every key: a product of the tile with a transposed whole tensor bound
    before the loop (`self.matmul_qk(row_q, key_states.transpose(-2, -1))`, `q[:, s:e] @
    k.T`) and a softmax in the same body. Each iteration's scores are tile x keys per head
    (often in fp32), more than the tile's output (tile x head_dim) by keys / head_dim, so
    the loop's own peak is above what the kept outputs add at the concatenation
    (Baichuan's query-tiled attention for 12K+ tokens: 1.9 GB of scores per tile against a
    120 MiB output). Not FPDT's chunked attention, which tiles the keys too. None otherwise."""
    if header is None or not header.loop_body or not isinstance(header.statement, cst.For):
        return None
    body = {id(node) for node in header.loop_body}
    calls: list[cst.Call] = []
    matmuls: list[cst.BinaryOperation] = []

    def enter(node: cst.CSTNode) -> None:
        if isinstance(node, cst.Call):
            calls.append(node)
        elif isinstance(node, cst.BinaryOperation) and isinstance(
            node.operator, cst.MatrixMultiply
        ):
            matmuls.append(node)

    walk(header.statement.body, enter, lambda node: None)
    if not any(_last_name(call.func) == "softmax" for call in calls):
        return None
    products: list[tuple[cst.CSTNode, list[cst.BaseExpression]]] = [
        (node, [node.left, node.right]) for node in matmuls
    ]
    products += [
        (call, [a.value for a in call.args if a.keyword is None and not a.star])
        for call in calls
        if _SCORE_PRODUCT.search(_last_name(call.func))
    ]
    for product, operands in products:
        if len(operands) != 2:
            continue
        query, keys = operands
        if (
            _transposed(keys)
            and _whole_tensor(facts, loads, keys, body)
            and not _whole_tensor(facts, loads, query, body)
        ):
            return context.source_of(product)
    return None


def _transposed(expr: cst.BaseExpression) -> bool:
    if isinstance(expr, cst.Attribute):
        return expr.attr.value in _TRANSPOSES
    return (
        isinstance(expr, cst.Call)
        and isinstance(expr.func, cst.Attribute)
        and expr.func.attr.value in _TRANSPOSES
    )


# The activation a video VAE's own-forward chunking is weighed against: the widest level of
# a decoder (128 channels, as KVAE's, CogVideoX's and Kandinsky's level 0) at full 720p
# resolution in bf16, for the frames one decoder call gets. Stated in the message.
STATED_CHANNELS = 128
STATED_HEIGHT, STATED_WIDTH = 720, 1280
STATED_ELEMENT_SIZE = 2  # bf16
# Names of a module's frames-per-decoder-call constant or parameter (`seg_len=16`,
# `SEGMENT_FRAMES = 16`): pixel frames per segment the decoder is called on.
_SEGMENT_FRAMES = compile_lazily(r"^(seg_len|segment_len|segment_length|segment_frames)$", re.I)


def chunked_at_stated_activation(
    context, function: cst.FunctionDef, loop: cst.CSTNode
) -> str | None:
    """A layer that runs its own forward over pieces of its input only above a size
    threshold (`if memory_count > 3:` with `memory_count = input.numel() *
    input.element_size() / 10**9`, or `if x.numel() <= LIMIT: return ...` before the
    loop): whether a realistic video-decoder activation crosses it. The activation is
    stated (`STATED_*`: 128 channels, 720x1280, bf16) for the pixel frames one decoder call
    gets, read from the module (`segment_frames`); the threshold expression is evaluated
    in bytes or elements through one binding and module constants (tests that are not
    of the input's size, `if write_to is None:`, are passed over). A description of the
    activation and the threshold when it is chunked at that size (the kept pieces then
    are a widest-level activation, held twice at the join), None when it is not, or when
    the frames or the threshold cannot be read (the layer keeps its measured `low`)."""
    frames = segment_frames(context)
    if frames is None:
        return None
    parameters = [p.name.value for p in function.params.params]
    if len(parameters) < 2:
        return None
    tensor = parameters[1]  # `forward(self, input, ...)`
    shape = (1, STATED_CHANNELS, frames, STATED_HEIGHT, STATED_WIDTH)
    elements = 1
    for size in shape:
        elements *= size
    env = {"numel": float(elements), "element_size": float(STATED_ELEMENT_SIZE)}
    bindings = _single_bindings(function)
    constants = _module_int_constants(context)
    chain = _statements_to(function, loop)
    if chain is None:
        return None
    decided = None
    for kind, test in chain:
        value = _evaluate_test(test, tensor, shape, env, bindings, constants)
        if value is None:
            continue  # not a size test (`if write_to is None:`)
        taken = value if kind == "if" else not value  # an early return skips the loop
        if not taken:
            return None
        decided = test
    if decided is None:
        return None
    return (
        f"at a stated activation of 128 channels x {frames} frames (the module's frames "
        f"per decoder call) x 720x1280 in bf16 ({elements * STATED_ELEMENT_SIZE / 1e9:.1f} GB),"
        f" `{context.source_of(decided)}` holds and the layer splits it: the kept pieces "
        f"are a widest-level activation, held again by the concatenation"
    )


def segment_frames(context) -> int | None:
    """The pixel frames one decoder call gets, read from the module: a module constant
    (`SEGMENT_FRAMES = 16`) or a parameter default (`def _decode(self, z, seg_len=16)`)
    named for a segment's frames; None when absent or when the module has two values."""
    memo = context.memo.setdefault("analysis.chunks.segment_frames", {})
    if "value" in memo:
        return memo["value"]
    values: set[int] = set()

    def enter(node: cst.CSTNode) -> None:
        if isinstance(node, cst.Param) and node.default is not None:
            if _SEGMENT_FRAMES.match(node.name.value) and isinstance(node.default, cst.Integer):
                values.add(int(node.default.evaluated_value))

    walk(context.module, enter, lambda node: None, lambda node: True)
    for name, value in _module_int_constants(context).items():
        if _SEGMENT_FRAMES.match(name):
            values.add(int(value))
    memo["value"] = values.pop() if len(values) == 1 else None
    return memo["value"]


def _module_int_constants(context) -> dict[str, float]:
    """Module-level `NAME = <numeric expression of literals>` bindings."""
    memo = context.memo.setdefault("analysis.chunks.module_constants", {})
    if "value" in memo:
        return memo["value"]
    found: dict[str, float] = {}
    for statement in context.module.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if (
                isinstance(small, cst.Assign)
                and len(small.targets) == 1
                and isinstance(small.targets[0].target, cst.Name)
            ):
                value = _arithmetic(small.value, lambda node: None)
                if value is not None:
                    found[small.targets[0].target.value] = value
    memo["value"] = found
    return found


def _single_bindings(function: cst.FunctionDef) -> dict[str, cst.BaseExpression]:
    """Names bound exactly once in the function, to their value."""
    bindings: dict[str, list[cst.BaseExpression]] = {}

    def enter(node: cst.CSTNode) -> None:
        if isinstance(node, cst.Assign):
            for target in node.targets:
                if isinstance(target.target, cst.Name):
                    bindings.setdefault(target.target.value, []).append(node.value)
        elif isinstance(node, (cst.AugAssign, cst.For)) and isinstance(node.target, cst.Name):
            bindings.setdefault(node.target.value, []).extend([node.target, node.target])

    walk(
        function,
        enter,
        lambda node: None,
        lambda node: node is function or not isinstance(node, (cst.FunctionDef, cst.Lambda)),
    )
    return {name: values[0] for name, values in bindings.items() if len(values) == 1}


def _statements_to(
    function: cst.FunctionDef, loop: cst.CSTNode
) -> list[tuple[str, cst.BaseExpression]] | None:
    """The tests that decide whether `loop` runs: `("if", test)` for each `if` whose body
    holds it, `("return", test)` for each `if test: return ...` before it in an enclosing
    block. None when the loop sits under anything else (an `else`, a `while`, a `try`)."""
    found: list[tuple[str, cst.BaseExpression]] = []

    def search(block: Sequence[cst.CSTNode]) -> bool:
        for statement in block:
            if statement is loop:
                return True
            if isinstance(statement, cst.If):
                if _contains(statement.body, loop):
                    found.append(("if", statement.test))
                    return search(statement.body.body)
                if statement.orelse is not None and _contains(statement.orelse, loop):
                    return False
                body = statement.body.body
                if body and _returns(body[-1]) and statement.orelse is None:
                    found.append(("return", statement.test))
            elif _contains(statement, loop):
                return False
        return False

    return found if search(function.body.body) else None


def _contains(node: cst.CSTNode, target: cst.CSTNode) -> bool:
    hit = False

    def enter(child: cst.CSTNode) -> None:
        nonlocal hit
        hit = hit or child is target

    walk(node, enter, lambda child: None, lambda child: not hit)
    return hit


def _returns(statement: cst.CSTNode) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and any(
        isinstance(small, cst.Return) for small in statement.body
    )


def _evaluate_test(test, tensor, shape, env, bindings, constants) -> bool | None:
    """`memory_count > 3`, `x.numel() <= LIMIT`: the comparison's truth at the stated
    activation, or None when a side cannot be evaluated."""
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
        return None
    depth = {"n": 0}

    def leaf(node: cst.BaseExpression) -> float | None:
        if isinstance(node, cst.Name):
            if node.value in constants:
                return constants[node.value]
            if node.value in bindings and depth["n"] < 3:
                depth["n"] += 1
                return _arithmetic(bindings[node.value], leaf)
            return None
        if (
            isinstance(node, cst.Call)
            and not node.args
            and isinstance(node.func, cst.Attribute)
            and isinstance(node.func.value, cst.Name)
            and node.func.value.value == tensor
            and node.func.attr.value in env
        ):
            return env[node.func.attr.value]
        if (
            isinstance(node, cst.Subscript)
            and isinstance(node.value, cst.Attribute)
            and isinstance(node.value.value, cst.Name)
            and node.value.value.value == tensor
            and node.value.attr.value == "shape"
            and len(node.slice) == 1
            and isinstance(node.slice[0].slice, cst.Index)
            and isinstance(node.slice[0].slice.value, cst.Integer)
        ):
            at = int(node.slice[0].slice.value.evaluated_value)
            return float(shape[at]) if at < len(shape) else None
        return None

    left = _arithmetic(test.left, leaf)
    right = _arithmetic(test.comparisons[0].comparator, leaf)
    if left is None or right is None:
        return None
    operator = test.comparisons[0].operator
    if isinstance(operator, cst.GreaterThan):
        return left > right
    if isinstance(operator, cst.GreaterThanEqual):
        return left >= right
    if isinstance(operator, cst.LessThan):
        return left < right
    if isinstance(operator, cst.LessThanEqual):
        return left <= right
    return None


def _arithmetic(node: cst.BaseExpression, leaf) -> float | None:
    """A numeric expression of literals, `+ - * / // **` and parentheses; other nodes go to
    `leaf` (None: not evaluable)."""
    if isinstance(node, (cst.Integer, cst.Float)):
        return float(node.evaluated_value)
    if isinstance(node, cst.BinaryOperation):
        left, right = _arithmetic(node.left, leaf), _arithmetic(node.right, leaf)
        if left is None or right is None:
            return None
        op = node.operator
        if isinstance(op, cst.Add):
            return left + right
        if isinstance(op, cst.Subtract):
            return left - right
        if isinstance(op, cst.Multiply):
            return left * right
        if isinstance(op, cst.Divide) and right:
            return left / right
        if isinstance(op, cst.FloorDivide) and right:
            return float(left // right)
        if isinstance(op, cst.Power) and abs(right) < 64:
            return left**right
        return None
    return leaf(node)


# A speculative decoder's draft length (`num_assistant_tokens`, `num_speculative_tokens`,
# `n_spec_tokens`, `draft_len`): a handful of tokens per round (transformers' default
# `num_assistant_tokens` is 20; vLLM and SGLang draft 1-8), not a generation length.
_DRAFT_COUNT = compile_lazily(r"(assistant_tokens|spec(ulative)?_?(tokens|steps|len)|draft)")


def draft_bounded(function: cst.FunctionDef, stop: cst.BaseExpression) -> str | None:
    """The draft count that bounds a loop's stop, or None: `stop` is, or is a name bound once
    in the function to, `min(...)` with an argument that names a speculative draft length
    (`max_new_tokens = min(int(self.num_assistant_tokens), max_length - n - 1)` before
    `for _ in range(max_new_tokens)`). A `min` is no larger than any of its arguments, so
    such a loop runs a few draft steps whatever its other bound says, and the logits it keeps
    are a few tokens' (batch x steps x vocabulary: MiB, not the generated text's). Why:
    `range(max_new_tokens)` alone reads as a generation length, the name a draft loop shares
    with a generation loop."""
    value: cst.BaseExpression | None = stop
    if isinstance(stop, cst.Name):
        value = _single_bindings(function).get(stop.value)
    if not (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Name)
        and value.func.value == "min"
        and len(value.args) >= 2
    ):
        return None
    for arg in value.args:
        for node in _names_of(arg.value):
            if _DRAFT_COUNT.search(node.lower()):
                return node
    return None


def _names_of(expr: cst.BaseExpression) -> list[str]:
    """Every name and attribute name in `expr` (`int(self.num_assistant_tokens)`: `int`,
    `self`, `num_assistant_tokens`)."""
    found: list[str] = []

    def enter(node: cst.CSTNode) -> None:
        if isinstance(node, cst.Name):
            found.append(node.value)

    walk(expr, enter, lambda node: None)
    return found


# The tiled-decode blend helpers of video and image VAEs: `blend_v`, `blend_h`, `blend_t`.
# Bases that define no such helper (a class of only these bases that calls one gets it from
# nowhere this file shows).
_PLAIN_BASES = frozenset({"object", "Module", "nn.Module", "torch.nn.Module", "ABC", "abc.ABC"})


def _dotted(expr: cst.BaseExpression) -> str:
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        return f"{_dotted(expr.value)}.{expr.attr.value}"
    return ""


_BLEND_METHOD = compile_lazily(r"^blend_[vht]$")


def inherited_blend_argument(
    context, call: cst.BaseExpression | None, owner: cst.ClassDef | None
) -> cst.BaseExpression | None:
    """The tile argument that `self.blend_v(a, b, extent)` (`blend_h`, `blend_t`) returns as
    given, for a class that inherits the helper from a base of another file (it defines no
    such method, nor does a base class of this file, and some base is neither of this file
    nor `nn.Module`/`object`, which define none): None otherwise. Diffusers' autoencoders
    and every copy of them seen (80+ definitions in diffusers, fastvideo, modelscope, sglang
    and vllm-omni) write the blend into `b` in place (`b[:, :, y, :] = ...`) and `return b`;
    the facts layer reads that from a helper of the same file, and this is the same fact for
    a subclass of a diffusers VAE (vllm-omni's distributed LTX-2 decoder), whose `group =
    self.blend_t(frame_groups[t - 1], group, n)` is still the container's element."""
    if not (
        isinstance(call, cst.Call)
        and isinstance(call.func, cst.Attribute)
        and isinstance(call.func.value, cst.Name)
        and call.func.value.value == "self"
        and _BLEND_METHOD.match(call.func.attr.value)
        and owner is not None
        and owner.bases
    ):
        return None
    method = call.func.attr.value
    local = {
        statement.name.value: statement
        for statement in context.module.body
        if isinstance(statement, cst.ClassDef)
    }
    pending, seen, foreign = [owner], set(), False
    while pending:  # the class and its bases defined in this file
        cls = pending.pop()
        if id(cls) in seen:
            continue
        seen.add(id(cls))
        if any(
            isinstance(statement, cst.FunctionDef) and statement.name.value == method
            for statement in cls.body.body
        ):
            return None  # defined here: the facts layer reads what it returns
        for base in cls.bases:
            if isinstance(base.value, cst.Name) and base.value.value in local:
                pending.append(local[base.value.value])
            elif _dotted(base.value) not in _PLAIN_BASES:
                foreign = True  # a base of another file, which may define the helper
    if not foreign:
        return None  # `nn.Module` defines no blend: the helper is unknown here
    positional = [arg for arg in call.args if arg.keyword is None and arg.star == ""]
    if len(positional) >= 2:
        return positional[1].value
    return next(
        (arg.value for arg in call.args if arg.keyword is not None and arg.keyword.value == "b"),
        None,
    )


# Calls that run a whole diffusion sampling loop and return its samples (`diffuse(**args)`,
# `self.denoise(latents, ...)`, `run_denoising_loop(...)`), by a word of their name.
_SAMPLER_WORDS = frozenset({"diffuse", "denoise", "denoising"})


def sampler_output(
    facts: F.FunctionFacts, expr: cst.BaseExpression | None, node: Node | None
) -> str | None:
    """The sampler call a chunk comes from (`sampled_video[:, :, n:]` with `sampled_video,
    sampled_audio = diffuse(**args)` on every reaching path), or None. A diffusion sampler
    returns the denoised latents (the VAE decode is a separate step: a loop that also calls a
    decoder is the segment-by-segment video generation LL002 keeps, not this), so a result
    kept across such calls is latent-sized however the loop names it (`video`): a long 720p
    clip's latents are tens of MiB, while each call's denoising (a transformer over the
    window's tokens, many steps) sets the iteration's peak far above them."""
    if expr is None or node is None:
        return None
    base = expr
    while isinstance(base, cst.Subscript):
        base = base.value
    if isinstance(base, cst.Call):
        return _sampler_name(base)
    if not isinstance(base, cst.Name):
        return None
    sites = facts.reaching(node, base.value)
    names = [_sampler_name(site.value) if site.kind == "assign" else None for site in sites]
    if not names or any(name is None for name in names):
        return None
    return names[0]


def _sampler_name(value: cst.BaseExpression | None) -> str | None:
    if not isinstance(value, cst.Call):
        return None
    func = value.func
    name = (
        func.attr.value
        if isinstance(func, cst.Attribute)
        else func.value
        if isinstance(func, cst.Name)
        else ""
    )
    words = set(name.lower().strip("_").split("_"))
    return name if words & _SAMPLER_WORDS and "decode" not in name.lower() else None


# -- one iteration's part of an accumulation --------------------------------------------------


def rebuilt_part(
    context, function: cst.FunctionDef, name: str, bindings: Sequence[cst.CSTNode]
) -> tuple[cst.CSTNode, str] | None:
    """The loop in which every binding of `name` sits, and the list that keeps each
    iteration's value of it, when the loop's body hands that value, directly or through
    one binding computed from it (`decoded = torch.cat(time, dim=2)`), to `<list>.append`
    of a list bound outside the loop (`row.append(decoded)`). Past the loop's end, `name`
    holds the last iteration's value only: one part of many that the list (or what it is
    merged into) holds anyway, so releasing it frees at most one part (one tile's frame
    list of a tiled decode). None otherwise."""
    spans = [_span(context, binding) for binding in bindings]
    if not spans:  # (every binding's statement must sit in the loop's body)
        return None
    loop: cst.For | cst.While | None = None

    def enter(node: cst.CSTNode) -> None:
        nonlocal loop
        if isinstance(node, (cst.For, cst.While)):
            start, end = _span(context, node.body)
            if all(start <= s and e <= end for s, e in spans):
                loop = node  # the innermost seen last (a pre-order walk)

    def descend(node: cst.CSTNode) -> bool:
        return node is function or not isinstance(node, (cst.FunctionDef, cst.Lambda))

    walk(function, enter, lambda node: None, descend)
    if loop is None:
        return None
    body = _span(context, loop.body)
    carriers = {name}
    appended: list[tuple[str, cst.BaseExpression]] = []
    outside: set[str] = {p.name.value for p in function.params.params}

    def scan(node: cst.CSTNode) -> None:
        if isinstance(node, cst.Assign):
            start, end = _span(context, node)
            inside = body[0] <= start and end <= body[1]
            for target in node.targets:
                if isinstance(target.target, cst.Name):
                    if not inside:
                        outside.add(target.target.value)
                    elif _keeps(node.value, carriers):
                        carriers.add(target.target.value)
        elif (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Attribute)
            and node.func.attr.value == "append"
            and isinstance(node.func.value, cst.Name)
            and len(node.args) == 1
        ):
            start, end = _span(context, node)
            if body[0] <= start and end <= body[1]:
                appended.append((node.func.value.value, node.args[0].value))

    walk(function, scan, lambda node: None, descend)
    for holder, value in appended:
        if holder in outside and holder not in carriers and _keeps(value, carriers):
            return loop, holder
    return None


# Calls whose result holds their first tensor's data (a merge, a copy, a cast, a view).
_KEEPING_CALLS = frozenset(["cat", "concat", "concatenate", "stack"]) | _RECEIVER_METHODS


def _keeps(expr: cst.BaseExpression, carriers: set[str]) -> bool:
    """`time`, `torch.cat(time, dim=2)`, `tile[..., :w]`, `decoded.float()`: a value that
    holds the data of one of `carriers` (not a model's output computed from it)."""
    if isinstance(expr, cst.Name):
        return expr.value in carriers
    if isinstance(expr, cst.Subscript):
        return _keeps(expr.value, carriers)
    if isinstance(expr, cst.Call) and _last_name(expr.func) in _KEEPING_CALLS:
        if isinstance(expr.func, cst.Attribute) and _keeps(expr.func.value, carriers):
            return True
        return bool(expr.args) and _keeps(expr.args[0].value, carriers)
    return False


def _span(context, node: cst.CSTNode) -> tuple[tuple[int, int], tuple[int, int]]:
    where = context.position(node)
    return (where.start.line, where.start.column), (where.end.line, where.end.column)
