"""What one decoder call of a tiled decode decodes: the fact that decides whether merging the
decoded tiles sets the decode's peak (issues #11, #12).

A tiled VAE decode cuts the latent into spatial tiles (`for i in range(0, h, step): for j in
...: tile = z[:, :, t, i : i + n, j : j + n]`), decodes each and merges the decoded `rows`
with a final `torch.cat`. Releasing or preallocating those rows saves the merge's bytes only
where the merge, not one tile's decoder call, sets the peak. Measured on an H200
(benchmarks/RESULTS.md, "LL001 significance against measured VAE peaks" and the session 9/10
tiled rows): Wan 2.1's causal VAE decodes one latent frame of a tile per call (`z[:, :, k : k
+ 1, ...]` in a loop over frames), so its per-call working set is small and `del rows` lowers
the 720p peak by 592 MiB (30%); where a call decodes a batch of frames (CogVideoX, Mochi
frame batches: 0 MiB of 18,164), or every frame of its tile (LTX-Video 161 frames, LTX-2,
HunyuanVideo 1.5: 0 MiB), the tile call's own activations (128-512 channels at the tile's
full resolution over many frames) set the peak and the merge saves nothing.

`tile_decoder_span` reads the temporal extent of the decoder calls' input from the subscripts
that cut it (through the names and single-input calls between: `tile = self.post_quant_conv(
tile)`): an index or a one-wide slice of the frame axis (axis 2 of `[b, c, t, h, w]`) is
`one-frame`; a wider slice a batch; `:` (or an Ellipsis before the spatial slices, `z[...,
i : i + n, j : j + n]`) every frame. A merge helper with no decoder call of its own
(`tile_merge`, `_merge_spatial_tiles`) gets the extent of the tile cutters of its class (the
5-D subscripts with spatial slices in its methods other than encoders). A decoder call
through a method of the class that is abstract (`def _decode(...): pass`) leaves the extent
unknown (None): the subclass decides.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import libcst as cst

from lifetime_lint.traversal import walk

ONE_FRAME = "one-frame"  # one latent frame of a spatial tile per call (Wan's causal VAE)
FRAME_BATCH = "frame-batch"  # a batch of latent frames of a spatial tile per call
ALL_FRAMES = "all-frames"  # every frame of a spatial tile in one call
TEMPORAL = "temporal"  # temporal tiles only: a batch of whole frames per call
# From the smallest per-call working set to the largest: several calls give the largest.
_ORDER = (ONE_FRAME, TEMPORAL, FRAME_BATCH, ALL_FRAMES)

_FULL, _ONE, _BATCH = "full", "one", "batch"


@dataclass(frozen=True)
class TileSpan:
    kind: str  # one of ONE_FRAME, FRAME_BATCH, ALL_FRAMES, TEMPORAL
    source: str  # the code that told it (a subscript, or the class's tile cutter)
    from_class: bool = False  # read from the class's tile cutters, not this function's calls


_MEMO_KEY = "analysis.decoders.span"


def tile_decoder_span(context, function: cst.FunctionDef, owner: cst.ClassDef | None):
    """What one decoder call of the tiled decode in `function` decodes (`TileSpan`), or
    None when the function is no tiled video decode or the extent is unknown. Memoised per
    function on the file context (the same answer whichever rule asks first)."""
    memo = context.memo.setdefault(_MEMO_KEY, {})
    key = id(function)
    if key not in memo:
        memo[key] = _batched(context, function, _span(context, function, owner))
    return memo[key]


def _span(context, function: cst.FunctionDef, owner: cst.ClassDef | None) -> TileSpan | None:
    methods = _methods(owner)
    found = _call_spans(context, function, methods, 0)
    if found is None:
        return None  # an abstract decoder method: the subclass decides
    from_class = False
    if (
        not found
        and owner is not None
        and not _is_encoder_name(function.name.value)
        and not any(_is_decoder_name(_last_name(call.func)) for call in _calls(function))
    ):  # a merge helper with no decoder call of its own (`tile_merge`)
        found = [
            span
            for method in methods.values()
            if not _is_encoder_name(method.name.value)
            for span in _cutter_spans(context, method)
        ]
        from_class = True
    if not found:
        return None
    kind, source = max(found, key=lambda pair: _ORDER.index(pair[0]))
    return TileSpan(kind, source, from_class)


def _methods(owner: cst.ClassDef | None) -> dict[str, cst.FunctionDef]:
    if owner is None:
        return {}
    return {
        statement.name.value: statement
        for statement in owner.body.body
        if isinstance(statement, cst.FunctionDef)
    }


def _call_spans(
    context, function: cst.FunctionDef, methods: dict[str, cst.FunctionDef], depth: int
) -> list[tuple[str, str]] | None:
    """The span of each decoder call of the function whose input is cut by a visible
    subscript; None when a decoder call goes through an abstract method of the class."""
    spans: list[tuple[str, str]] = []
    for call in _calls(function):
        callee = _last_name(call.func)
        if not _is_decoder_name(callee):
            continue
        method = methods.get(callee) if _on_self(call.func) else None
        if method is not None and method is not function:
            if _abstract(method):
                return None
            if depth < 1:
                inner = _call_spans(context, method, methods, depth + 1)
                if inner is None:
                    return None
                if any(kind == ONE_FRAME for kind, _ in inner):
                    # `self._decode(tile)` decodes the tile frame by frame itself
                    spans.append((ONE_FRAME, f"{callee}: " + inner[0][1]))
                    continue
        main = _main_input(call)
        if main is None:
            continue
        span = _extent(context, function, main, context.span(call)[0], 0)
        if span is not None:
            spans.append(span)
    return spans


def _cutter_spans(context, method: cst.FunctionDef) -> list[tuple[str, str]]:
    """Tile cutters in a method: subscripts of the frame axis and a spatial slice at an
    offset."""
    found: list[tuple[str, str]] = []

    def enter(node: cst.CSTNode) -> None:
        if isinstance(node, cst.Subscript):
            cut = _cut(node)
            if cut is not None and cut[1] and _offset_cut(node):
                kind = _combine(cut[0], True)
                if kind is not None:
                    found.append((kind, context.source_of(node)))

    walk(method.body, enter, lambda node: None)
    return found


def _offset_cut(subscript: cst.Subscript) -> bool:
    """A spatial slice starts at an offset (`i : i + n`): a tile cut out of the latent, not
    the crop of a decoded tile (`tile[:, :, :, :stride_h, :stride_w]`)."""
    return any(
        isinstance(element.slice, cst.Slice) and element.slice.lower is not None
        for element in subscript.slice[-2:]
    )


def _extent(
    context, function: cst.FunctionDef, expr: cst.BaseExpression, before: int, depth: int
) -> tuple[str, str] | None:
    temporal_spatial = _temporal(context, function, expr, before, depth)
    if temporal_spatial is None:
        return None
    (temporal, spatial), source = temporal_spatial
    kind = _combine(temporal, spatial)
    return (kind, source) if kind is not None else None


def _combine(temporal: str, spatial: bool) -> str | None:
    if temporal == _ONE:
        # (whole frames one at a time, untiled: each call runs the decoder at the full
        # resolution, which outgrows the merged output as a batch of frames does)
        return ONE_FRAME if spatial else TEMPORAL
    if temporal == _BATCH:
        return FRAME_BATCH if spatial else TEMPORAL
    return ALL_FRAMES if spatial else None  # (`:` and no spatial cut: no tile at all)


def _temporal(
    context, function: cst.FunctionDef, expr: cst.BaseExpression, before: int, depth: int
) -> tuple[tuple[str, bool], str] | None:
    """((temporal extent, spatially cut), source) of the tensor `expr` at offset `before`."""
    if depth > 6:
        return None
    if isinstance(expr, cst.Call):
        receiver = _same_shape_receiver(expr)
        if receiver is not None:  # `z[:, :, a:b, i : i + n].clone()`: the same tile
            return _temporal(context, function, receiver, before, depth + 1)
        main = _main_input(expr)  # `self.post_quant_conv(tile)`: the same frames
        return _temporal(context, function, main, before, depth + 1) if main is not None else None
    if isinstance(expr, cst.Name):
        bound = _last_binding(context, function, expr.value, before)
        if bound is None:
            return None
        value, at = bound
        return _temporal(context, function, value, at, depth + 1)
    if isinstance(expr, cst.Subscript):
        cut = _cut(expr)
        if cut is None:
            return None
        temporal, spatial = cut
        if temporal == _FULL or not spatial:
            inner = _temporal(context, function, expr.value, before, depth + 1)
            if inner is not None:
                (inner_temporal, inner_spatial), _ = inner
                if temporal == _FULL:
                    temporal = inner_temporal
                spatial = spatial or inner_spatial
        return (temporal, spatial), context.source_of(expr)
    return None


# Tensor methods that return the same elements in the same shape (a copy, a cast, a move).
def _cut(subscript: cst.Subscript) -> tuple[str, bool] | None:
    """(extent of the frame axis, whether the height or width axis is sliced) of a subscript
    of a 5-D `[b, c, t, h, w]` tensor, or None when it is no such cut (4-D image tiles,
    indexing a list)."""
    elements = [element.slice for element in subscript.slice]
    if elements and _is_ellipsis(elements[0]):
        if len(elements) != 3:
            return None  # `x[..., :n]`: one axis, no tile
        spatial = any(_narrowing(e) for e in elements[1:])
        return (_FULL, spatial) if spatial else None
    if len(elements) < 3 or len(elements) > 5 or any(_is_ellipsis(e) for e in elements):
        return None
    if len(elements) == 4:
        return None  # `z[:, :, i : i + n, j : j + n]`: a 2-D image tile
    if not all(isinstance(e, cst.Slice) and _whole(e) for e in elements[:2]):
        return None  # batch and channel axes taken whole
    temporal = _frame_extent(elements[2])
    spatial = any(_narrowing(e) for e in elements[3:])
    return temporal, spatial


def _frame_extent(element: cst.BaseSlice) -> str:
    if isinstance(element, cst.Index):
        return _ONE  # `z[:, :, k]`
    assert isinstance(element, cst.Slice)
    if _whole(element):
        return _FULL
    lower, upper = element.lower, element.upper
    if lower is None and _int(upper) == 1:
        return _ONE  # `:1`
    if upper is None:
        return _ONE if _int(lower) == -1 else _FULL  # `-1:`; `1:`: the rest of the clip
    if (
        lower is not None
        and isinstance(upper, cst.BinaryOperation)
        and isinstance(upper.operator, cst.Add)
        and _int(upper.right) == 1
        and _same(upper.left, lower)
    ):
        return _ONE  # `k : k + 1`
    return _BATCH


def _whole(element: cst.BaseSlice) -> bool:
    return (
        isinstance(element, cst.Slice)
        and element.lower is None
        and element.upper is None
        and element.step is None
    )


def _narrowing(element: cst.BaseSlice) -> bool:
    return isinstance(element, cst.Slice) and not _whole(element)


def _is_ellipsis(element: cst.BaseSlice) -> bool:
    return isinstance(element, cst.Index) and isinstance(element.value, cst.Ellipsis)


def _int(node: cst.BaseExpression | None) -> int | None:
    if isinstance(node, cst.Integer):
        return int(node.value)
    if (
        isinstance(node, cst.UnaryOperation)
        and isinstance(node.operator, cst.Minus)
        and isinstance(node.expression, cst.Integer)
    ):
        return -int(node.expression.value)
    return None


def _same(a: cst.BaseExpression, b: cst.BaseExpression) -> bool:
    return a.deep_equals(b)


def _last_binding(
    context, function: cst.FunctionDef, name: str, before: int
) -> tuple[cst.BaseExpression, int] | None:
    """The value of the last plain assignment to `name` that starts before `before` (the
    statements of tiled decodes bind a tile and rebind it in the same loop body)."""
    best: tuple[cst.BaseExpression, int] | None = None

    def enter(node: cst.CSTNode) -> None:
        nonlocal best
        if not isinstance(node, cst.Assign):
            return
        start = context.span(node)[0]
        if start >= before or (best is not None and start <= best[1]):
            return
        for target in node.targets:
            value = _assigned_value(target.target, node.value, name)
            if value is not None:
                best = (value, start)

    walk(function.body, enter, lambda node: None)
    return best


def _assigned_value(
    target: cst.BaseExpression, value: cst.BaseExpression, name: str
) -> cst.BaseExpression | None:
    if isinstance(target, cst.Name):
        return value if target.value == name else None
    if isinstance(target, (cst.Tuple, cst.List)):
        # `tile, conv_cache = self.decoder(tile, ...)`: the first item is the output
        elements = target.elements
        if elements and isinstance(elements[0].value, cst.Name) and elements[0].value.value == name:
            return value
    return None


# Tensor methods whose result has the receiver's shape (a copy, a cast, a move).
_SAME_SHAPE_METHODS = frozenset(
    {"clone", "contiguous", "detach", "to", "float", "half", "bfloat16", "type", "cpu", "cuda"}
)


def _same_shape_receiver(call: cst.Call) -> cst.BaseExpression | None:
    """The tensor a shape-keeping method is called on (`tile.clone()`, `x.to(dtype)`), or
    None for any other call."""
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value in _SAME_SHAPE_METHODS:
        return func.value
    return None


def _main_input(call: cst.Call) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.keyword is None and arg.star == "":
            return arg.value
        break
    return None


def _calls(function: cst.FunctionDef) -> list[cst.Call]:
    calls: list[cst.Call] = []
    walk(function.body, lambda n: calls.append(n) if isinstance(n, cst.Call) else None, _no)
    return calls


def _no(node: cst.CSTNode) -> None:
    return None


def _last_name(func: cst.BaseExpression) -> str:
    if isinstance(func, cst.Attribute):
        return func.attr.value
    if isinstance(func, cst.Name):
        return func.value
    return ""


def _on_self(func: cst.BaseExpression) -> bool:
    return (
        isinstance(func, cst.Attribute)
        and isinstance(func.value, cst.Name)
        and func.value.value == "self"
    )


# `self.decoder(tile)`, `self._decode(tile)`, `self.video_decoder(x)`; not a tiled decode
# calling another (`self.spatial_tiled_decode(z)`), nor a text decoder.
_DECODER_NAME = re.compile(r"^_*(decode|decoder|\w+_decoder)$", re.IGNORECASE)
_TEXT = re.compile(r"token|text|processor|codec", re.IGNORECASE)


def _is_decoder_name(name: str) -> bool:
    return bool(_DECODER_NAME.match(name)) and "tile" not in name and not _TEXT.search(name)


def _is_encoder_name(name: str) -> bool:
    return "encode" in name.lower()


def _abstract(method: cst.FunctionDef) -> bool:
    """`def _decode(self, *args, **kwargs): pass` (or `...`, `raise NotImplementedError`,
    a docstring only)."""
    body = method.body
    statements: list[cst.CSTNode] = (
        list(body.body) if isinstance(body, cst.IndentedBlock) else [body]
    )
    for statement in statements:
        if not isinstance(statement, cst.SimpleStatementLine):
            return False
        for small in statement.body:
            if isinstance(small, cst.Pass):
                continue
            if isinstance(small, cst.Expr) and isinstance(
                small.value, (cst.Ellipsis, cst.SimpleString, cst.ConcatenatedString)
            ):
                continue
            if isinstance(small, cst.Raise):
                continue
            return False
    return True


def _batched(context, function: cst.FunctionDef, span: TileSpan | None) -> TileSpan | None:
    """`span` (what `_span` read) corrected where it reads whole frames (temporal
    tiles) but each decoder call's input is cut from a batch of spatial tiles: a name bound
    to `torch.cat([z[:, :, :, i : i + n, j : j + n] for i, j in tiles], 0)` (or a list
    display of such cuts), then `zt[:, :, k : k + 1]` per call. Joining same-shaped tiles
    along the batch axis (dim 0) keeps each tile's frames and spatial extent: the call
    decodes one latent frame (or a batch of frames) of a few spatial tiles, not whole
    untiled frames, so the per-call working set is a tile's (Wan's causal VAE, whose merge
    of the whole clip sets the peak: -592 MiB at 720p), and the TEMPORAL reason for `low`
    does not hold. Any other span is returned as it is; so is a TEMPORAL one where some
    decoder input is not cut from such a batch (a true temporal tiling). Part of
    `tile_decoder_span`, so LL001 and LL002 read the same span."""
    if span is None or span.kind != TEMPORAL:
        return span
    kinds: list[tuple[str, str]] = []
    for call in _calls(function):
        if not _is_decoder_name(_last_name(call.func)):
            continue
        main = _main_input(call)
        if main is None:
            continue
        found = _cut_of_tile_batch(context, function, main, context.span(call)[0], 0)
        if found is None:
            return span  # a decoder input that is no cut of a tile batch
        kinds.append(found)
    if not kinds:
        return span
    kind, source = max(kinds, key=lambda pair: _ORDER.index(pair[0]))
    return TileSpan(kind, source, span.from_class)


def _cut_of_tile_batch(
    context, function: cst.FunctionDef, expr: cst.BaseExpression, before: int, depth: int
) -> tuple[str, str] | None:
    """(span kind, source) of a decoder input that cuts frames out of a batch-axis
    concatenation of spatial tile cuts, through names and single-input calls
    (`self.post_quant_conv(zt[:, :, k : k + 1])`); None for anything else."""
    if depth > 6:
        return None
    if isinstance(expr, cst.Call):
        receiver = _same_shape_receiver(expr)
        inner = receiver if receiver is not None else _main_input(expr)
        return (
            _cut_of_tile_batch(context, function, inner, before, depth + 1)
            if inner is not None
            else None
        )
    if isinstance(expr, cst.Name):
        bound = _last_binding(context, function, expr.value, before)
        if bound is None:
            return None
        return _cut_of_tile_batch(context, function, bound[0], bound[1], depth + 1)
    if not isinstance(expr, cst.Subscript):
        return None
    cut = _cut(expr)
    if cut is None or cut[1] or not isinstance(expr.value, cst.Name):
        return None  # no frame cut, or already a spatial tile (decoders reads those)
    temporal = _frame_extent(expr.slice[2].slice)
    bound = _last_binding(context, function, expr.value.value, before)
    if bound is None or not _tile_batch(bound[0]):
        return None
    kind = _combine(temporal, True)
    return (kind, context.source_of(expr)) if kind is not None else None


def _tile_batch(value: cst.BaseExpression) -> bool:
    """`torch.cat(<spatial tile cuts>, 0)` (or `dim=0`): same-shaped tiles of a 5-D latent
    stacked along the batch axis, each cut at a spatial offset (`z[:, :, :, i : i + n, j :
    j + n]`), from a list display or a comprehension."""
    if not (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Attribute)
        and value.func.attr.value == "cat"
        and value.args
    ):
        return False
    dim = next(
        (a.value for a in value.args[1:] if a.keyword is None or a.keyword.value == "dim"), None
    )
    if dim is None or _int(dim) != 0:
        return False
    pieces = value.args[0].value
    if isinstance(pieces, cst.ListComp):
        elements: list[cst.BaseExpression] = [pieces.elt]
    elif isinstance(pieces, (cst.List, cst.Tuple)) and pieces.elements:
        elements = [e.value for e in pieces.elements]
    else:
        return False
    return all(
        isinstance(e, cst.Subscript) and (cut := _cut(e)) is not None and cut[1] and _offset_cut(e)
        for e in elements
    )


# Words of an encoder-decoder network's stages (`self.encoder_level1`, `self.enc2`,
# `self.decoder`, `self.dec_layers`), read from a submodule's name split at `_` and digits.
_STAGE_WORD = re.compile(r"[a-z]+")
_ENCODER_STAGE = frozenset(["encoder", "enc", "encoders"])
_DECODER_STAGE = frozenset(["decoder", "dec", "decoders"])
# Class words of an autoencoder, whose forward decodes latents back to pixels.
_AUTOENCODER_CLASS = re.compile(r"autoencoder|vae|vq|quant|tokenizer|codec", re.IGNORECASE)


def decodes_feature_maps(function: cst.FunctionDef, owner: cst.ClassDef | None) -> bool:
    """Whether `function` is the forward of an encoder-decoder network (a U-Net of image
    restoration or colorization: `self.encoder_level1(x)` ... `self.decoder_level1(h)`,
    `self.encoder(x)` ... `self.decoder()`): it calls both an encoder stage and a decoder
    stage of its own module, outside a class named for an autoencoder (an autoencoder's
    forward decodes latents back to pixels; so does a decode method, which calls no encoder).
    What such a decoder stage returns is the network's feature maps at the stage's
    resolution (channels x H x W, up to full resolution), not decoded tiles or frames."""
    if owner is None or _AUTOENCODER_CLASS.search(owner.name.value):
        return False
    if _is_decoder_name(function.name.value) or _is_encoder_name(function.name.value):
        return False
    methods = _methods(owner)
    encoder = decoder = False
    for call in _calls(function):
        func = call.func
        if not (_on_self(func) and isinstance(func, cst.Attribute)):
            continue
        name = func.attr.value
        if name in methods:
            continue  # `self.decode(z)`: a method, not a stage
        words = set(_STAGE_WORD.findall(name.lower()))
        encoder = encoder or bool(words & _ENCODER_STAGE)
        decoder = decoder or bool(words & _DECODER_STAGE)
    return encoder and decoder


def from_decoder_stage(name: str, values: list[cst.BaseExpression | None]) -> bool:
    """Whether a binding of a `decodes_feature_maps` forward holds a decoder stage's output:
    named for it (`inp_dec_level1`, `out_dec_level2`, `decoder_out`) or bound, every time,
    to an expression that calls a decoder stage of the module (`out_feat =
    self.decoder()`). The network's other values (`frames = torch.stack(...)` of its
    input) are what they were."""
    if set(_STAGE_WORD.findall(name.lower())) & _DECODER_STAGE:
        return True
    return bool(values) and all(v is not None and _calls_decoder_stage(v) for v in values)


def _calls_decoder_stage(value: cst.BaseExpression) -> bool:
    found: list[bool] = []

    def enter(node: cst.CSTNode) -> None:
        if isinstance(node, cst.Call) and _on_self(node.func):
            words = set(_STAGE_WORD.findall(_last_name(node.func).lower()))
            if words & _DECODER_STAGE:
                found.append(True)

    walk(value, enter, _no)
    return bool(found)
