"""LL002 accumulate-then-concatenate: chunks collected in a list, then `torch.cat` of the list."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from lifetime_lint.analysis import chunks as C
from lifetime_lint.analysis import decoders as D
from lifetime_lint.analysis import facts as F
from lifetime_lint.analysis import significance as S
from lifetime_lint.analysis import tables as T
from lifetime_lint.analysis.cfg import DefSite, Node
from lifetime_lint.analysis.uses import NameUses, Use, uses_for
from lifetime_lint.devices import LEFT_OUT_SCOPE, NON_LIBRARY_NOTE, Portability
from lifetime_lint.diagnostics import Applicability, Edit, Fix
from lifetime_lint.fixes import Target, reference_to, target_problem
from lifetime_lint.lazy_regex import compile_lazily
from lifetime_lint.rule import SHOWS_BELOW_BAR, Option, Rule
from lifetime_lint.traversal import visit, walk

if TYPE_CHECKING:  # Python 3.9 has no typing.TypeGuard; annotations are not evaluated
    from typing_extensions import TypeGuard


def _validate_count(value: int) -> str | None:
    return None if value >= 0 else "must be 0 or more"


class AccumulateThenConcat(Rule):
    """
    ## What it does
    Flags a list that starts empty (`xs = []`, `xs: list[torch.Tensor] = []`, `list()`),
    grows by `.append` / `.extend` / `+=` inside a `for` or `while` loop (nested loops
    included) and is concatenated after the loop (`torch.cat`, `torch.concat`,
    `torch.concatenate`, `torch.stack`, `torch.hstack` / `vstack` / `dstack`, under any
    import alias), once or in branches that exclude each other, also when the name is
    rebound to the result (`dec = torch.cat(dec, dim=2)`, also inside a `with` or `try`
    block and read after it, where the list outlives the rebinding only past a swallowed
    exception; the fix is then unsafe); the loop-carried running form
    `out = torch.cat([out, chunk], dim)`, also through a local helper (a method of the
    class or a function of the module) whose every return concatenates two or more of its
    parameters, whole or sliced (`history = self._soft_append(history, current, overlap)`,
    FramePack's cross-faded append, either argument order); and `torch.cat` / `stack` of a list comprehension
    whose element runs a model (`[self._decode(z).sample for z in ...]`), also when the
    comprehension is bound to a name handed to a local helper that returns `torch.cat` of
    that list parameter (`chunks.list_joining_helper`), where a layer's outputs (`[self.conv(s)
    for s in splits]`) count when the helper also joins the pieces on the host for large
    inputs (`chunks.host_staged_join`: the authors' own sign that the device join is the
    peak; MAISI's split convolution; `medium`, no fix). A list handed to a call only on the
    other arm of the concatenation's conditional (`torch.cat(xs) if small else
    self._cat_inputs(xs)`) is still reported, without a fix. Chunks computed from slices of
    a live input and cast to a wider float (`x[:, i].to(torch.float32)`,
    `chunks.widened_source`) are `medium`: in half precision they are twice the input. A list of slots
    (`out = [None] * n`, `[None for _ in range(n)]`) filled by index in the loop (`out[i] =
    chunk`) counts as grown, without a fix (the slots may be filled in any order). So does a
    list of buffers allocated up front and filled in place in a loop (`grads =
    [torch.zeros(shape) for _ in range(n)]`, `grads[i].add_(...)`, then `torch.cat(grads)`),
    reported without a fix (one output filled through its views, `out.chunk(n)`, needs no
    concatenation, but a rewrite cannot prove the views' shapes); its size class is that of
    the tensor its shape is taken from (`x.shape[1]`, `chunks[0].chunk_shape`). Views of tensors
    made in the iteration count as chunks (`result_row.append(tile[..., :n])` after `tile =
    self.blend_h(...)`: each view keeps its blended tile alive). Reads that neither
    keep nor hand out chunks do not hide it: `len(chunks)`, `if not chunks: raise`,
    `chunks[0].shape`.

    Each finding names what is held (its likely size class, from where the chunks come
    from), what the loop does, and a significance from what sets the peak: `high` for
    decoded tiles or frames merged by light work (blending, cropping: the tiles' decoder
    activations are gone, so every chunk plus the output is the peak), `medium` for
    activation-sized chunks so merged in a decoder's output assembly (a function named for
    decoding, tiles, merging, blending or upsampling, or one that calls a decoder before
    the loop, not a tokenizer's `decode`; or a list named for frames or video: temporal
    tiles, blended frame groups; a list's name counts for chunks of unknown size,
    concatenations or buffers, only in such a function, so that `input_rows` of token ids
    is not decoded output; or a loop that walks one tensor in chunks from its start: a
    count or step named for chunks, `range(num_chunks)`, `range(0, n, chunk_size)`, not a
    window of neighbours such as `range(-before, after + 1)`; a split of a tensor; or a
    tensor consumed head first, `x = x[size:]`: each iteration's inputs and work are one
    chunk's while the kept chunks add up to the whole sequence, as in DeepSpeed FPDT's
    chunked attention over 256K-2M tokens), `low` for activation-sized chunks elsewhere (the
    loop's own inputs and work are of the same order), `low` when each chunk comes from
    model-level work in
    the same loop (that call's own activations usually exceed the concatenation: measured
    unchanged on Wan's untiled decode; a collective such as `single_all_to_all(chunk)` is
    not such work, it allocates only what it moves, and the message calls it a collective),
    except decoded segments generated in the loop (`medium`: the loop body calls a decoder
    and other model-level work, a denoising transformer or a `diffuse` helper, as a long
    video made segment by segment in Wan-Animate, Cosmos Transfer or Helios: each
    iteration's peak is one segment's, the kept video grows with the segment count; so is a
    loop that decodes a list of latent segments generated before it, `for chunk_latents in
    latent_chunks`, as Helios' decode stage does; a loop that only decodes slices of latents
    made before it, `latents.split(n)` included, stays `low`), except a language model's
    logits kept step by step in a generation loop (`medium`: a `while` loop or a range over
    a length such as `max_new_tokens`; each cached step's forward is one token's while the
    kept logits grow with the tokens; a few speculative steps, `range(n_spec_tokens)` or a
    length bound by a draft count, `max_new_tokens = min(self.num_assistant_tokens, ...)`,
    stay `low`),
    for latent-sized results (encode paths,
    conditioning, the outputs of a diffusion sampler, `diffuse(...)` or `self.denoise(...)`,
    kept across a loop that decodes nothing: `chunks.sampler_output`), and whenever the loop gives few chunks (a short literal range, model
    structure such as layers, heads or scales, a `config` count, one chunk per sample of a
    batch: `z.split(1)`, `unbind()`, iterating a tensor), for chunks copied to the host
    (`.cpu()`, `.to("cpu")`, `.numpy()`: CPU memory) or made there (from numpy or PIL
    data: `torch.from_numpy`, `numpy_to_pt`, `to_tensor`, a transform pipeline
    `T.Compose([..., T.ToTensor(), ...])` with no step that names a device, built in the
    function or returned by a helper of the class or module, and work over such values
    only, with no `.to(device)` before the merge), and for one row of an outer
    accumulation (`rows.append(torch.cat(row))`). The chunk facts of
    `lifetime_lint.analysis.chunks` compare the chunks with what the loop holds anyway,
    and make these `low` too: chunks computed, without work that may expand them, from
    slices of a tensor alive across the loop (a recurrent scan's per-step outputs,
    per-sample attention over `q[b : b + 1]`, a loop over `torch.split` views, rows
    gathered by a slice of an index tensor, `x[order[a:b]]`: together no
    larger than the loop's own inputs; not an outer product, a slice times a whole tensor
    bound before the loop, `left[:, window] @ right`, whose chunks outgrow both, while
    chunked attention's second product, `softmax(q_i @ k.T) @ v`, contracts back; not a
    list extended with a call's list, `frames.extend(self._make_inference(a, b, n))`, as
    many new frames per step as the call makes); decoded tiles of an image model (4-D tensors, or a
    file or class named for an image model such as `QwenImage`: a whole 2K image is tens
    of MiB, less than one tile's decoder activations); scheduler, processor, tokenizer and
    feature-extractor classes (`SchedulerMixin` and `ProcessorMixin` bases included) and
    scheduling, processing, preprocessing, dataset and evaluation files; audio waveforms,
    audio latents and padding masks (by name) and audio or speech model files; one chunk
    per sample (`range(x.shape[0])`, `range(len(x))` of a tensor); a chunk size that is
    off by default and then falls back to the whole length (`range(0, n, size)` with `size
    = self.chunk_size or n`, or `if size is None: size = n`, where the size defaults to
    None or 0 as a parameter, as the `__init__` argument it is set from, or as a field of
    a configuration file of the package): at the default the loop runs once (a size with
    another default, `chunk_size: int | None = 64`, or none known keeps its level); tensors taken out of a
    container that held them before the loop (`state_dict.pop(key)`); chunks whose
    producing call is named for something small (`patchify_video_latents`,
    `input_embeddings`); calls into an encoder the work facts rate lighter than a model
    (`self.vision.forward_features`); a merge that holds one clip per call (a sibling
    method runs it once per temporal clip and concatenates or streams the results, and its
    other calls come after a branch that returns through that caller under a flag
    `__init__` sets to `True`, such as framewise decoding: the clips together set the
    peak); 4-D tile merges seen by their concatenation dims (rows on dim 2, columns on
    dim 3, when the tiles come out of a stacked buffer); activation-sized chunks out of a
    network's peak-level layer run in the loop (an MLP over each ray batch); a layer that
    runs its own forward over pieces of its input (`super().forward(piece)` in a `torch.nn`
    subclass: a video VAE's "safe" convolution, chunked only above a size threshold;
    measured on an H200, CogVideoX's decode with a preallocated output: no chunked call at
    480x720x49, peak +0.56% at 768x1360x81, the decoder's other layers set it; but `medium`
    where a stated activation, 128 channels x the module's frames per decoder call
    (`seg_len=16`, `SEGMENT_FRAMES`) x 720x1280 in bf16, crosses the threshold expression,
    evaluated in bytes or elements through one binding and module constants:
    `chunks.chunked_at_stated_activation`, KVAE's 3 GB at 3.8 GB); functions
    named for masks (`_merge_attention_masks`); the merge of a tiled video decode whose
    tile calls decode a batch of latent frames (`z[:, :, k : k + n, i : i + t, j : j + t]`),
    every frame of their tile (`z[:, :, :, i : i + t, j : j + t]`, `z[..., i : i + t, j : j
    + t]`) or whole frames (temporal tiles), read from the subscripts that cut the
    decoder's input (through shape-keeping copies: `z[...].clone()`), or from the class's
    tile cutters for a merge helper
    (`analysis.decoders`): the call's own activations set the peak (measured on an H200:
    0 MiB saved in Mochi, LTX-Video, HunyuanVideo 1.5 and CogVideoX), while one latent
    frame per call (Wan's causal VAE, `z[:, :, k : k + 1, ...]`: -592 MiB at 720p, also
    over a batch of spatial tiles joined on the batch axis, `zt = torch.cat([z[:, :, :, i :
    i + t, j : j + t] for i, j in tiles], 0)` then `zt[:, :, k : k + 1]`:
    `decoders.tile_decoder_span`) keeps
    `high`; chunks computed from parameters alone (a LoRA merge `B.weight @ A.weight *
    scaling`): weights, not activations; attention run one query tile at a time against
    every key with a softmax in the loop (each tile's scores outweigh its output, so the
    loop's own peak is above the concatenation). Findings in
    non-library paths (tests, examples, benchmarks, scripts, notebooks: the top-level
    `non-library` globs, shared with LL004/LL005) are `low` too: another audience, small
    inputs. The default run reports `medium` and `high`; `--statistics` counts the
    non-library findings it left out ("left out: non-library path") and the ones below
    the bar, and `min-significance = "low"` under `[tool.lifetime-lint]` shows every
    finding, each with the reason it is `low` in its message.

    ## Why is this bad?
    At the `torch.cat`, every chunk and the full result are alive together: the peak is
    about twice the output. An 81-frame 720p video in bf16 is 0.42 GiB (3 x 81 x 720 x 1280
    x 2 bytes), so decoding it chunk by chunk and concatenating costs another 0.42 GiB at
    the end; a 48-chunk decode of 4.5 GiB costs 9 GiB. The running form also copies the
    whole result at every step (quadratic time) and holds the old and new result together.
    Writing each chunk into a preallocated output brings the peak to the output plus one
    chunk.

    The saving is real when the concatenation sets the function's peak. With `S` the bytes
    the fix frees there (about the output) and `A` the transient peak elsewhere (the
    activations inside the loop, e.g. in the decoder), the peak falls by about
    `max(0, S - A)`. When the activations dominate (`A` larger than the output) nothing is
    saved. During the last step the writer holds the whole output, the original held all
    but the last chunk plus the previous chunk (still bound until rebound): the same bytes,
    provided the fix can also release the chunk after its copy (`del chunk`, added where
    provably safe). Where it cannot, the fixed loop may hold one chunk more at the last
    step. Measured on diffusers' Wan VAE (H200, bf16, 81 frames): untiled decodes, whose
    peak is inside the decoder, are unchanged; the 720p tiled decode falls 16%; a
    synthetic 48-chunk decode falls from 9,216 to 4,728 MiB (benchmarks/RESULTS.md).

    Not flagged (precision first; each has negative fixtures):
    - literal lists of a fixed few tensors (`torch.cat([a, b])`, classifier-free-guidance
      pairs), and a running concatenation onto a value bound earlier in the same iteration
      (`x = torch.cat([x, image_latents], 1)` after `x = ...`): nothing accumulates; a
      helper that joins one parameter with something else (`torch.cat([video, zeros])`:
      padding) or whose result goes to another name;
    - chunks the facts layer (`lifetime_lint.analysis`) knows are small or not tensors:
      metadata, reductions, ids, masks, positions, timesteps, per-item scores and
      log-probabilities (also by the list's or chunk's name), conditioning below the bar;
    - views of data that stays alive anyway: elements of a container, slices or views of a
      loop variable, a parameter or `self` state (concatenating them allocates only the
      output), also after a blend helper of the same file that writes into its argument
      and returns it, directly (`return b`) or through a one-line wrapper (`def
      blend_t(self, a, b, n): return self._blend(a, b, n, dim=-3)`), or a `blend_v`,
      `blend_h` or `blend_t` that a VAE subclass inherits from a base of another file
      (diffusers' helpers write into `b` and return it: `chunks.inherited_blend_argument`);
    - lists that escape: used in any other way than grown, measured and concatenated
      (returned, stored, iterated, passed elsewhere, captured by a nested function,
      concatenated inside a loop or twice on one path).

    ## Example
    ```python
    import torch

    def decode(self, z):
        frames = []
        for k in range(z.shape[2]):
            decoded = self.decoder(z[:, :, k : k + 1])
            frames.append(decoded)
        return torch.cat(frames, dim=2)
    ```

    ## Use instead
    ```python
    import torch
    from lifetime_lint.runtime import ChunkWriter

    def decode(self, z):
        frames = ChunkWriter(dim=2, count=z.shape[2])
        for k in range(z.shape[2]):
            decoded = self.decoder(z[:, :, k : k + 1])
            frames.append(decoded)
            del decoded
        return frames.result()
    ```
    `ChunkWriter` allocates the output at the first chunk (after that chunk's activations
    are gone, never beside them), sized from the count (once more, early, if later chunks
    are longer, as in causal video VAEs whose first chunk is one frame and the rest four)
    and copies each chunk into its slice; a short total is trimmed in place. `result()`
    equals `torch.cat` / `torch.stack` bit for bit: values, dtype promotion, device, memory
    format, `requires_grad` and gradients.

    ## Fix safety
    A fix is offered only when the number of chunks is known before the loop (without it a
    writer cannot preallocate, and a growing buffer would cost more than the list): one
    `.append` (or `+= [chunk]`) per iteration, not under an `if`, `try` or inner loop, no
    `break` / `continue`, in a `for` over `range(...)` or over a local sequence. The count
    expression is evaluated where the list was created, so its names must not be rebound
    in between. The count only sizes the buffer: a wrong count costs memory, never
    correctness. Reported without a fix: `while` loops, conditional or repeated appends,
    optional lists (`[] if flag else None`),
    `extend`, `hstack` / `vstack` / `dstack`, comprehensions, running forms other than the
    first-iteration one, running forms through a helper.

    The list keeps its name and its appends; `[]` becomes the writer and the concatenation
    becomes `.result()`. When the chunk is a local bound at the top of the loop body and not
    read after the append, the fix adds `del chunk` after it, so the caller holds no chunk
    past its copy. The running form is rewritten when the loop is `for i in range(n)` with
    the first chunk assigned under `if i == 0:` (the diffusers causal-VAE pattern): the
    writer is created before the loop, the chunk is released after its append on the same
    terms, and `out = out.result()` follows the loop.

    With concatenations in exclusive branches the one writer's `result()` replaces each
    (same dim and kind only); reads of the list must come before the concatenation
    (`len()` and truth work on the writer until `result()` empties it); `chunks[0].shape`
    keeps the finding report-only (a writer has no elements).

    Applicability comes from the rewrite, then from where the writer is imported: a fix
    that adds `from lifetime_lint.runtime import ChunkWriter` to a project that neither
    declares lifetime-lint as a dependency nor sets the top-level `runtime-module` (a
    vendored copy: `lifetime-lint vendor-runtime`) is offered as unsafe, since the fixed
    code would not import elsewhere; a `chunk-writer` of the project's own is imported as
    configured.

    Safe when the chunk is a fresh result (a call, or a local bound to one and not read
    after the append) and the count is known to support `len`; the peak can rise by at
    most one chunk, and only where the chunk cannot be released (see above). Where a list
    and a writer could differ, `ChunkWriter` keeps `torch.cat`'s behaviour (each executed
    in tests/test_runtime_preallocate_behaviour.py): a producer that returns its one output
    buffer, or a view of a tensor written again, is read again at `result()` (it is still
    reachable, so the list would have seen its last value); chunks made under
    `torch.inference_mode()` give a normal tensor when `result()` runs outside it (so the
    result can be changed in place), and an inference tensor inside it; under
    `torch.no_grad()` `result()` records no graph, and chunks that require grad appended
    under `no_grad` are tracked when `result()` runs with grad; tensor subclasses are
    concatenated by torch itself; dtype promotion is exact (an exact carrier dtype where a
    promotion would round); torch's errors (shapes, devices, non-tensors) are raised by
    `result()`, so a `try` around the concatenation still catches them; under
    `torch.compile(fullgraph=True)` the writer traces (it defers to `torch.cat` while
    compiling) and returns equal results. Unsafe when a `locals()` / `vars()` / `eval`
    runs while the list is bound (it could read the writer instead of the list; one
    elsewhere in the function does not count), when a read after a `with` or `try` block
    that rebinds the list to its concatenation could see the list itself (an exception
    swallowed before the rebinding would hand it the writer), when the chunk could be changed in place
    by the function itself between its append and the concatenation (a local read after
    the append), and when the count is `len(seq)` of something not known to support `len`
    (an iterator would raise `TypeError`). One difference remains on failing code: a
    running-form loop that runs zero times raises torch's empty-list error instead of
    `UnboundLocalError`.

    ## Options
    `chunk-writer` names the writer class: `"package.module:Name"` or a dotted path
    (default `"lifetime_lint.runtime.ChunkWriter"`); a project's own class must take
    `(dim=..., count=..., stack=True)` and offer `append`, `extend`, `+=` and `result()`.
    `min-constant-count` (default 8): loops over a literal range or sequence with fewer
    elements give few chunks (significance `low`). The global `min-significance` (`"low"`,
    `"medium"` by default, `"high"`) sets which findings are reported; the global
    `non-library` / `extend-non-library` globs say which paths are not library code.
    """

    code = "LL002"
    name = "accumulate-then-concatenate"
    summary = (
        "Chunks accumulated in a list and concatenated after the loop: peak is twice the output"
    )
    triggers = ("cat", "stack")
    fix_availability = "sometimes"
    options = (
        Option(
            "chunk-writer",
            str,
            "lifetime_lint.runtime.ChunkWriter",
            "the preallocating writer class the fix uses",
            validate=target_problem,
        ),
        Option(
            "min-constant-count",
            int,
            8,
            "loops over a literal range or tuple shorter than this give few chunks (low)",
            validate=_validate_count,
        ),
    )

    def __init__(self, context, options) -> None:
        super().__init__(context, options)
        self._loads: dict[int, dict[int, Node]] = {}

    def visit_Call(self, node: cst.Call) -> None:
        kind = _kind_of(self.context, node)
        if kind is None:
            if node.args and isinstance(node.func, (cst.Name, cst.Attribute)):
                ancestors = list(self.context.ancestors)
                function = _innermost_function(ancestors)
                if function is not None:
                    self._running_helper(node, function, ancestors)
            return
        tensors = _argument(node, 0, ("tensors",))
        if tensors is None or _argument(node, None, ("out",)) is not None:
            return
        ancestors = list(self.context.ancestors)
        function = _innermost_function(ancestors)
        if function is None:
            return
        if isinstance(tensors, cst.Name):
            self._accumulated(node, kind, tensors, function, ancestors)
        elif isinstance(tensors, (cst.List, cst.Tuple)):
            self._running(node, kind, tensors, function, ancestors)
        elif isinstance(tensors, (cst.ListComp, cst.GeneratorExp)):
            self._comprehension(node, tensors, function, None)

    # -- the accumulate-then-cat form -----------------------------------------------------
    def _accumulated(
        self,
        call: cst.Call,
        kind: str,
        name: cst.Name,
        function: cst.FunctionDef,
        ancestors: list[cst.CSTNode],
    ) -> None:
        # query: the binding the concatenation reads, and every use of that binding.
        facts = F.facts_for(self.context, function)
        if facts is None or name.value in facts.cfg.captured or name.value in facts.cfg.declared:
            return
        nodes = self._load_nodes(facts)
        cat_node = nodes.get(id(name))
        if cat_node is None:
            return
        found = _list_family(facts, facts.reaching(cat_node, name.value))
        if found is None:
            return
        site, family = found
        assert site.value is not None  # the empty list (`_list_family`)
        # A `locals()` / `eval` while the list is bound may read it: still reported (the
        # memory is the same), but the fix is unsafe (the reader would get the writer).
        dynamic = any(_observed_dynamically(facts, member) for member in family.values())
        # `xs = torch.cat(xs)` bindings that reach a read only past a swallowed exception.
        swallowed: list = []
        grown_in_place = {  # by the `AugAssign` statement
            id(member.node.statement): member
            for member in family.values()
            if member.kind == "augassign" and member.node is not None
        }
        index = self._index(function)
        init: Use | None = None
        grows: list[Use] = []
        cats: list[tuple[Use, cst.Call]] = []
        reads: list[tuple[Use, str]] = []
        escapes: list[Use] = []  # handed to a call on another branch than the cat
        for use in index.of(name.value):
            if use.node is site.target:
                init = use
                continue
            parent = use.ancestors[-1] if use.ancestors else None
            augmented = (
                grown_in_place.get(id(parent))
                if isinstance(parent, cst.AugAssign) and parent.target is use.node
                else None
            )
            node = augmented.node if augmented is not None else nodes.get(id(use.node))
            if node is None:
                continue  # a binding target or `del`: another binding, or this one's end
            reaching = facts.reaching(node, name.value)
            if not any(r.index in family for r in reaching):
                continue  # another binding of the name
            if not all(r.index in family for r in reaching):
                rebinds = _rebound_to_own_concatenation(self.context, name.value, reaching, family)
                if rebinds:
                    # `xs = torch.cat(xs)` inside a `with` or `try`, read after it: the list
                    # reaches the read only if an exception was swallowed before the cat
                    # (checked below: the rebinding runs unconditionally after the loop).
                    swallowed.extend(rebinds)
                    continue
                return  # this list or another one: a rewrite could change the other
            role = _role(use, self.context)
            if role in ("append", "extend", "store"):
                grows.append(use)
            elif role == "cat":
                concat = use.ancestors[-2]
                assert isinstance(concat, cst.Call)
                cats.append((use, concat))
            elif role in _READS:
                reads.append((use, role))
            elif _call_argument(use):
                escapes.append(use)  # kept only if on a path without the concatenation
            else:
                return  # the list escapes: a rewrite could change behaviour
        if init is None or not grows or not cats:
            return
        if any(not _exclusive_arms(escape, use) for escape in escapes for use, _ in cats):
            return  # the list escapes: a rewrite could change behaviour
        # Slots filled by index (`out = [None] * n; out[i] = chunk`): only into a list made
        # for it (`xs[-1] = ...` into an appended list rewrites one chunk); no fix (the
        # writer takes chunks in order, the slots may be filled in any order).
        by_index = _is_placeholder_list(site.value)
        if any(_role(grow, self.context) == "store" for grow in grows) and not by_index:
            return
        cats.sort(key=lambda pair: self.context.span(pair[1])[0])
        if cats[0][1] is not call:
            return  # reported once, at the first concatenation
        block, init_at = _statement_position(init.ancestors)
        if block is None:
            return
        loop_at = _child_index(grows[0].ancestors, block)
        if loop_at is None or not init_at < loop_at:
            return
        loop_statement = _body(block)[loop_at]
        if swallowed and not all(
            _unconditional_after(block, loop_at, site.value) for site in swallowed
        ):
            return  # the list itself may reach the read on an ordinary path
        first_cat = min(
            (at for use, _ in cats if (at := _child_index(use.ancestors, block)) is not None),
            default=None,
        )
        # `frames.append(video[:, :, -1])` between the loop and the concatenation: the last
        # piece, added once (the loop's chunks decide; no fix: the writer is not sized for it).
        tail = [
            grow
            for grow in grows
            if first_cat is not None
            and (at := _child_index(grow.ancestors, block)) is not None
            and loop_at < at < first_cat
            and _loop_between(grow.ancestors, _body(block)[at]) is None
        ]
        grows = [grow for grow in grows if grow not in tail]
        if not grows or any(_child_index(grow.ancestors, block) != loop_at for grow in grows):
            return
        if any(_loop_between(grow.ancestors, loop_statement) is None for grow in grows):
            return  # grown outside any loop
        cat_positions = []
        for use, _ in cats:
            cat_at = _child_index(use.ancestors, block)
            if cat_at is None or cat_at <= loop_at:
                return
            if _loop_between(use.ancestors, _body(block)[cat_at]) is not None:
                return  # concatenated repeatedly
            cat_positions.append(cat_at)
        if len(cats) > 1 and not _mutually_exclusive(facts, [nodes[id(u.node)] for u, _ in cats]):
            return  # concatenated twice: not the pattern
        loops = [_loop_between(grow.ancestors, loop_statement) for grow in grows]
        chunk_exprs = [_grown_value(grow) for grow in grows]
        if any(expr is None for expr in chunk_exprs):
            return
        # A layer that runs its own forward over pieces of its input (`SafeConv3d`: an
        # `nn.Conv3d` subclass chunking inputs over 2 GiB along time) keeps every piece's
        # output for one concatenation: the facts layer does not see `super().forward`.
        own_forward = all(
            _own_forward_output(self.context, facts, expr, nodes.get(id(grow.node)))
            for expr, grow in zip(chunk_exprs, grows)
        )
        chunks = [
            _Chunk("fresh", F.ACTIVATION)
            if own_forward
            else _chunk(facts, expr, nodes.get(id(grow.node)), _header_node(facts, loop))  # type: ignore[arg-type]
            for expr, grow, loop in zip(chunk_exprs, grows, loops)
        ]
        if all(chunk is None for chunk in chunks):
            return  # metadata, or a view of data that stays alive anyway
        if any(chunk is None for chunk in chunks) and len(grows) == 1:
            return
        # Several appends: the ones that add memory of their own decide (`result_row` gets
        # a view of a blended tile on one branch, of a kept tile on the other).
        chunks = [chunk for chunk in chunks if chunk is not None]

        # decide: how much holding these chunks is worth.
        header = _header_node(facts, loop_statement)
        # A name says "decoded output" of pieces the dataflow cannot size (concatenations,
        # allocations) only where the function decodes (`_decodes`).
        found_origin = F._largest(c.origin for c in chunks)  # type: ignore[union-attr]
        decoded_before = self._decoded_before(function, loop_statement)
        names_count = decoded_before or found_origin not in _UNSIZED
        origin = _named_origin(name.value, found_origin, names_count)
        for expr in chunk_exprs:
            if isinstance(expr, cst.Name):
                origin = _named_origin(expr.value, origin, names_count)
        origin = _encoder_output(function, origin)
        # What the producing call is named for, where that says the chunks are small
        # (`patchify_video_latents(x)`, `self.input_embeddings(ids)`); `decode_latents`
        # makes frames.
        callees = [
            C.callee_name(facts, expr, nodes.get(id(grow.node)))
            for expr, grow in zip(chunk_exprs, grows)
            if expr is not None
        ]
        by_callee = {_smaller_by_name(callee, origin) for callee in callees}
        if len(by_callee) == 1:
            origin = by_callee.pop()
        named = [name.value] + [e.value for e in chunk_exprs if isinstance(e, cst.Name)]
        if S.size_class(origin) == S.TINY or any(_per_item(n) for n in named):
            return
        origin = S.domain_origin(origin, self.context.path, _owner_name(facts))
        if S.size_class(origin) == S.ACTIVATION_SIZED and all(
            expr is not None
            and C.weight_derived(expr, _loops_between(grow.ancestors, loop_statement))
            for expr, grow in zip(chunk_exprs, grows)
        ):
            origin = S.WEIGHT_SIZED  # `new_qkv.append(mB.data @ mA.data * lin.scaling)`
        work = _loop_work(facts, header, loop_statement)
        generated = _generates_segments(facts, loop_statement)
        # `for chunk_latents in latent_chunks: decode(...)`: segments generated before.
        listed = _iterates_listed_segments(facts, loop_statement) and _decodes_in(loop_statement)
        # `chunks.append(chunk + self.mlp(self.norm(chunk)))`: a residual update of a slice.
        residual = all(
            C.residual_update(facts, self._load_nodes(facts), expr, _header_node(facts, loop))
            is not None
            for expr, loop in zip(chunk_exprs, loops)
            if expr is not None and loop is not None
        )
        in_chunks = C.sequence_chunks(loop_statement)
        sources = [
            C.widened_source(self.context, facts, nodes, expr, _header_node(facts, loop))
            for expr, loop in zip(chunk_exprs, loops)
            if expr is not None and loop is not None
        ]
        # Some append keeps a chunk cast up (`inputs.append((array - mean) / std)` of fp32
        # groups, another branch casting them back to fp16): the list holds those.
        widened = any(source is not None for source in sources)
        level, generic = _accumulation_level(
            origin,
            work,
            decoded_before or _decode_path(function, named if names_count else []),
            generated or listed,
            in_chunks or own_forward,
            _generation_loop(loop_statement, function),
            residual and in_chunks,
            widened,
        )
        if generic == _SEGMENTS and not generated:
            generic = _LISTED_SEGMENTS
        stated = None  # the own-forward layer is chunked at a stated realistic activation
        if own_forward and (generic is None or generic in _RAISING):
            # Not in a small-domain model (an audio layer's activation is no 720p video's).
            if S.size_class(origin) in (S.ACTIVATION_SIZED, S.LARGE):
                stated = C.chunked_at_stated_activation(self.context, function, loop_statement)
            generic = _OWN_FORWARD if stated is None else None
            if stated is not None:
                level = S.MEDIUM
        raising, generic = (generic, None) if generic in _RAISING else (None, generic)
        raising = raising or stated
        # The specific reasons below say more than "outside a decoder's output assembly".
        structure = None if generic in (_OUTSIDE_DECODE, _PEAK_IN_LOOP, _OWN_FORWARD) else generic
        structure = structure or self._chunk_structure(
            facts, function, origin, named,
            [(None if (residual and in_chunks) or _extended_by_call(grow, expr, self.context)
              else expr,
              nodes.get(id(grow.node)), _header_node(facts, loop) if loop else None)
             for expr, grow, loop in zip(chunk_exprs, grows, loops)],
            loop_statement,
        )  # fmt: skip
        if structure is None and all(
            _on_host(facts, expr, nodes.get(id(grow.node)))
            for expr, grow in zip(chunk_exprs, grows)
        ):
            structure = "the chunks are copied to the host: CPU memory, not the GPU peak"
        if structure is None and all(
            expr is not None and C.made_on_host(self.context, facts, expr, nodes.get(id(grow.node)))
            for expr, grow in zip(chunk_exprs, grows)
        ):
            structure = (
                "the chunks are host tensors (made from numpy or PIL data, not moved to a "
                "device before the merge): CPU memory, not the GPU peak"
            )
        if structure is None and _appended_elsewhere(ancestors):
            # `result_rows.append(torch.cat(result_row, dim=-1))`: one row of a tiled
            # decode; the outer concatenation (its own finding) sets the peak.
            structure = "one row of an outer accumulation, whose concatenation sets the peak"
        for grow in grows:
            for loop in _loops_between(grow.ancestors, loop_statement):
                structure = structure or _small_loop(
                    loop,
                    self.settings["min-constant-count"],
                    index,
                    facts,
                    _header_node(facts, loop),
                )
                if structure is None and (
                    fallback := C.optional_chunk_size(
                        self.context, function, facts.owner, loop, index
                    )
                ):
                    structure = (
                        f"chunking is off by default here ({fallback}; an unset chunk size "
                        f"falls back to the whole length): at the default the loop runs once "
                        f"and the list holds one chunk, the output itself"
                    )
        if (
            structure is None
            and own_forward
            and (image := C.image_model(self.context, function, facts.owner)) is not None
        ):
            structure = (
                f"a layer of {image}: its input has one frame or a few, so the pieces along "
                f"time are few and the layer's output is an image's"
            )
        structure = structure or generic
        if structure is None and S.size_class(origin) == S.LARGE:
            # A tiled decode whose tile calls decode frame batches or whole tiles: their
            # activations, not the merge, set the peak.
            structure = S.tiled_merge(D.tile_decoder_span(self.context, function, facts.owner))
        if structure is not None:
            level = S.LOW
        scoped, structure = self._scoped(level, structure)
        if scoped is None:
            return
        level = scoped
        structure = structure or raising  # why it clears the bar
        written = self.context.source_of(call.func)
        across = _describe_work(work)
        also = f" (and {len(cats) - 1} more)" if len(cats) > 1 else ""
        elsewhere = ""
        if escapes:
            handed = sorted({self.context.source_of(_call_argument(e).func) for e in escapes})  # type: ignore[union-attr]
            elsewhere = (
                f"; on the other branch the list goes to {', '.join(f'`{h}`' for h in handed)}"
                f" instead, so no fix is offered (that branch needs the list)"
            )
        message = (
            f"`{name.value}` holds every chunk ({S.describe(origin)}) across the loop's "
            f"{across} until `{written}({name.value}, ...)`{also}: all chunks and the result "
            f"are alive together (about twice the output); write each chunk into a "
            f"preallocated output"
            + (f"; {structure}" if structure else "")
            + elsewhere
            + f" (significance: {level})"
        )
        kinds = [c.kind for c in chunks]  # type: ignore[union-attr]
        fix = None
        if (
            not by_index
            and not tail
            and not escapes
            and not isinstance(site.value, cst.IfExp)  # `[] if flag else None`: report only
            and not any(role == "element" for _, role in reads)
            and all(
                _child_index(use.ancestors, block) is not None
                and _child_index(use.ancestors, block) < min(cat_positions)  # type: ignore[operator]
                for use, _ in reads
            )
        ):
            # `len(chunks)` / `if not chunks:` work on the writer until `result()` empties it.
            fix = self._accumulate_fix(
                [c for _, c in cats], kind, name, init, grows, loops, kinds, index, block,
                init_at, min(cat_positions), ancestors, facts.cfg.parameters, site.value,
            )  # fmt: skip
            if fix is not None and (dynamic or bool(swallowed)):
                fix = Fix(
                    fix.message, fix.edits, Applicability.UNSAFE, fix.orphan_import_candidates
                )
        self.report(call, message, fix, significance=level)

    def _decoded_before(self, function: cst.FunctionDef, loop: cst.CSTNode) -> bool:
        """The function is named for decoding (`_decodes`), or calls a decoder before the
        accumulating loop (a pipeline that generates latents and decodes after the merge
        concatenates latents, not decoded output)."""
        if _words(function.name.value) & _DECODE_WORDS:
            return True
        start = self.context.span(loop)[0]
        return any(self.context.span(call)[0] < start for call in _decoder_calls(function))

    def _load_nodes(self, facts: F.FunctionFacts) -> dict[int, Node]:
        """The CFG node of every name the function reads (by node identity)."""
        key = id(facts)
        found = self._loads.get(key)
        if found is None:
            found = {id(load): node for node in facts.cfg.nodes for load in node.loads}
            self._loads[key] = found
        return found

    def _accumulate_fix(
        self,
        calls: list[cst.Call],
        kind: str,
        name: cst.Name,
        init: Use,
        grows: list[Use],
        loops: list[cst.CSTNode | None],
        kinds: list[str],
        index: NameUses,
        block: cst.CSTNode,
        init_at: int,
        cat_at: int,
        ancestors: list[cst.CSTNode],
        parameters: set[str],
        init_value: cst.BaseExpression,
    ) -> Fix | None:
        if kind not in ("cat", "stack") or len(grows) != 1 or _role(grows[0], None) != "append":
            return None
        call = calls[0]
        if any(
            _kind_of(self.context, other) != kind or not _same_dim(self.context, other, call)
            for other in calls[1:]
        ):
            return None  # one writer, one dim
        grow = grows[0]
        loop = loops[0]
        statements = _body(block)
        loop_at = _child_index(grow.ancestors, block)
        assert loop_at is not None
        if len(_loops_between(grow.ancestors, statements[loop_at])) != 1:
            return None  # nested loops: the count would be a product
        if not isinstance(loop, cst.For) or not _once_per_iteration(grow.ancestors, loop):
            return None
        between = statements[init_at + 1 : cat_at]
        # Names the count reads must not be rebound between the list and the loop.
        count = _count_expression(
            self.context, loop, index, statements[init_at + 1 : loop_at + 1], parameters
        )
        if count is None:
            return None
        count_code, count_safe = count
        dim = _argument(call, 1, ("dim", "axis"))
        dim_code = "0"
        if dim is not None:
            if not _is_simple(dim) or _names_in(dim) & _assigned_in(between, index):
                return None
            dim_code = self.context.source_of(dim)
        target = Target.parse(self.settings["chunk-writer"])
        reference, import_edits = reference_to(self.context, target, ancestors)
        stack = ", stack=True" if kind == "stack" else ""
        start, end = self.context.span(init_value)
        edits: list[Edit] = [
            Edit(start, end, f"{reference}(dim={dim_code}, count={count_code}{stack})"),
        ]
        for concat in calls:
            call_start, call_end = self.context.span(concat)
            edits.append(Edit(call_start, call_end, f"{name.value}.result()"))
        chunk = _grown_value(grow)
        released = _releasable_chunk(
            chunk, _enclosing_statement(grow.ancestors), _body(loop.body), index
        )
        # A local chunk read after its append may be mutated in place before the
        # concatenation: the list would see that, the writer's copy would not.
        safe = (
            count_safe
            and kinds[0] == "fresh"
            and (not isinstance(chunk, cst.Name) or released is not None)
        )
        if released is not None:
            statement = _enclosing_statement(grow.ancestors)
            indent = self.context.indentation_of(statement)
            at = self.context.line_after(statement)
            edits.append(Edit(at, at, f"{indent}del {released}{self.context.newline}"))
        return Fix(
            message=f"Write the chunks into a preallocated `{reference}`",
            edits=tuple(edits) + import_edits,
            applicability=Applicability.SAFE if safe else Applicability.UNSAFE,
            orphan_import_candidates=_import_bound(self.context, call.func),
        )

    # -- the running form: out = torch.cat([out, chunk], dim) in a loop -------------------
    def _running(
        self,
        call: cst.Call,
        kind: str,
        literal: cst.List | cst.Tuple,
        function: cst.FunctionDef,
        ancestors: list[cst.CSTNode],
    ) -> None:
        if kind != "cat" or len(literal.elements) != 2:
            return
        elements = [element.value for element in literal.elements]
        if any(isinstance(element, cst.StarredElement) for element in literal.elements):
            return
        assign = ancestors[-2] if len(ancestors) >= 2 else None
        conditional = isinstance(assign, cst.IfExp) and len(ancestors) >= 3
        if conditional:  # out = chunk if out is None else torch.cat([out, chunk])
            assign = ancestors[-3]
        if not (
            isinstance(assign, cst.Assign)
            and (assign.value is call or (conditional and assign.value is ancestors[-2]))
            and len(assign.targets) == 1
            and isinstance(assign.targets[0].target, cst.Name)
        ):
            return
        out = assign.targets[0].target.value
        if not (isinstance(elements[0], cst.Name) and elements[0].value == out):
            return
        if _names_in(elements[1]) & {out}:
            return
        loop = _innermost_loop(ancestors, function)
        if loop is None:
            return
        self._running_at(
            call, assign, out, elements[0], elements[1], loop, function, ancestors, conditional
        )

    def _running_helper(
        self, call: cst.Call, function: cst.FunctionDef, ancestors: list[cst.CSTNode]
    ) -> None:
        """`history = self._soft_append(history, current, overlap)` in a loop, where the
        helper returns a concatenation of its arguments (`chunks.concatenating_helper`):
        the running form through a local helper, either way round (`self._soft_append(
        current, history)` prepends)."""
        assign = ancestors[-2] if len(ancestors) >= 2 else None  # the chain ends with the call
        if not (
            isinstance(assign, cst.Assign)
            and assign.value is call
            and len(assign.targets) == 1
            and isinstance(assign.targets[0].target, cst.Name)
        ):
            return
        out = assign.targets[0].target.value
        positional = [arg.value for arg in call.args if arg.keyword is None and not arg.star]
        at = [
            i
            for i, value in enumerate(positional)
            if isinstance(value, cst.Name) and value.value == out
        ]
        if len(at) != 1:
            return
        loop = _innermost_loop(ancestors, function)
        if loop is None:
            return
        facts = F.facts_for(self.context, function)
        if facts is None:
            return
        found = C.concatenating_helper(self.context, call, facts.owner)
        if found is None:
            return
        helper, joined = found
        if at[0] not in joined:
            return
        others = [positional[i] for i in sorted(joined) if i != at[0] and i < len(positional)]
        if len(others) != 1 or _names_in(others[0]) & {out}:
            return
        self._running_at(
            call, assign, out, positional[at[0]], others[0], loop, function, ancestors, False,
            helper=helper,
        )  # fmt: skip

    def _running_at(
        self,
        call: cst.Call,
        assign: cst.Assign,
        out: str,
        onto: cst.BaseExpression,
        added: cst.BaseExpression,
        loop: cst.CSTNode,
        function: cst.FunctionDef,
        ancestors: list[cst.CSTNode],
        conditional: bool,
        helper: str | None = None,
    ) -> None:
        elements = [onto, added]
        facts = F.facts_for(self.context, function)
        if facts is None:
            return
        node = self._load_nodes(facts).get(id(elements[0]))
        header = _header_node(facts, loop)
        chunk = _chunk(facts, elements[1], node, header)
        if chunk is None:
            return
        origin = _encoder_output(function, S.name_origin(out, chunk.origin))
        if S.size_class(origin) == S.TINY or _per_item(out):
            return
        running = (
            _running_helper_assigns(self.context, facts.owner, out, loop)
            if helper is not None
            else frozenset()
        )
        if not _loop_carried(out, assign, loop, self._index(function), running):
            return  # `x = torch.cat([x, extra], 1)` after `x = ...` in the same iteration
        # `video = torch.cat([video, reflected[:, :, :pad_len]], 2)` with `reflected =
        # video.flip(...)`: padded with its own content; no fix (the writer is not `video`).
        padded = C.cut_from(facts, self._load_nodes(facts), elements[1], header, out)
        origin = S.domain_origin(origin, self.context.path, _owner_name(facts))
        work = _loop_work(facts, header, loop)
        named = [out] + ([elements[1].value] if isinstance(elements[1], cst.Name) else [])
        generated = _generates_segments(facts, loop)
        # `for chunk_latents in latent_chunks: history = torch.cat([history, decode(...)])`.
        listed = _iterates_listed_segments(facts, loop) and _decodes_in(loop)
        level, generic = _accumulation_level(
            origin,
            work,
            _decode_path(function, named),
            generated or listed,
            C.sequence_chunks(loop),
        )
        if generic == _SEGMENTS and not generated:
            generic = _LISTED_SEGMENTS
        raising, generic = (generic, None) if generic in _RAISING else (None, generic)
        structure = (
            (_SELF_PADDING if padded else None)
            or _small_loop(
                loop, self.settings["min-constant-count"], self._index(function), facts, header
            )
            or (None if generic == _OUTSIDE_DECODE else generic)
            or self._chunk_structure(
                facts, function, origin, named, [(elements[1], node, header)], loop
            )
            or generic
        )
        if structure is not None:
            level = S.LOW
        scoped, structure = self._scoped(level, structure)
        if scoped is None:
            return
        level = scoped
        structure = structure or raising
        written = self.context.source_of(call.func)
        shown = " ".join(self.context.source_of(call).split())
        form = (
            f"`{out} = {shown if len(shown) <= 70 else written + '(...)'}` in a loop (`{helper}` "
            f"returns a concatenation of `{out}` and `{self.context.source_of(added)}`)"
            if helper is not None
            else f"`{out} = {written}([{out}, ...])` in a loop"
        )
        message = (
            f"{form} ({S.describe(origin)}; across the "
            f"loop's {_describe_work(work)}) copies the whole result at every step and holds "
            f"the old and new result together; write each chunk into a preallocated output"
            + (f"; {structure}" if structure else "")
            + f" (significance: {level})"
        )
        fix = (
            None
            if conditional or padded or helper is not None
            else self._running_fix(call, assign, out, elements[1], loop, function, ancestors)
        )
        self.report(call, message, fix, significance=level)

    def _running_fix(
        self,
        call: cst.Call,
        assign: cst.Assign,
        out: str,
        chunk: cst.BaseExpression,
        loop: cst.CSTNode,
        function: cst.FunctionDef,
        ancestors: list[cst.CSTNode],
    ) -> Fix | None:
        # for i in range(n):
        #     if i == 0:
        #         out = first
        #     else:
        #         ...
        #         out = torch.cat([out, chunk], dim)
        if not (
            isinstance(loop, cst.For) and isinstance(loop.target, cst.Name) and loop.orelse is None
        ):
            return None
        iterable = loop.iter
        if not (
            _is_call_to(iterable, "range")
            and len(iterable.args) == 1
            and iterable.args[0].keyword is None
        ):
            return None
        count = iterable.args[0].value
        if not _is_simple(count):
            return None
        first_if = next(
            (
                s
                for s in _body(loop.body)
                if isinstance(s, cst.If) and _is_zero_test(s.test, loop.target.value)
            ),
            None,
        )
        if first_if is None or not isinstance(first_if.orelse, cst.Else):
            return None
        first = _body(first_if.body)
        if (
            len(first) != 1
            or not isinstance(first[0], cst.SimpleStatementLine)
            or len(first[0].body) != 1
        ):
            return None
        first_assign = first[0].body[0]
        if not (
            isinstance(first_assign, cst.Assign)
            and len(first_assign.targets) == 1
            and isinstance(first_assign.targets[0].target, cst.Name)
            and first_assign.targets[0].target.value == out
        ):
            return None
        cat_line = ancestors[-3] if len(ancestors) >= 3 else None
        if not (
            isinstance(cat_line, cst.SimpleStatementLine)
            and len(cat_line.body) == 1
            and any(s is cat_line for s in _body(first_if.orelse.body))
        ):
            return None
        index = self._index(function)
        facts = F.facts_for(self.context, function)
        if facts is None or any(node.dynamic for node in facts.cfg.nodes):
            return None
        # `out` must be unbound before the loop and used in it only by these two statements.
        loop_start, loop_end = self.context.span(loop)
        for use in index.of(out):
            start, _ = self.context.span(use.node)
            if start < loop_start:
                return None
            if start < loop_end and not any(
                a is first_assign or a is assign for a in use.ancestors
            ):
                return None
        if _assigned_in(_body(loop.body), index) & _names_in(count):
            return None
        dim = _argument(call, 1, ("dim",))
        dim_code = "0" if dim is None else self.context.source_of(dim)
        if dim is not None and (
            not _is_simple(dim) or _names_in(dim) & _assigned_in(_body(loop.body), index)
        ):
            return None
        target = Target.parse(self.settings["chunk-writer"])
        reference, import_edits = reference_to(self.context, target, ancestors)
        newline = self.context.newline
        indent = self.context.indentation_of(loop)
        loop_line = self.context.line_start_of(loop)
        after = self.context.line_after(loop)
        first_start, first_end = self.context.span(first_assign)
        cat_start, cat_end = self.context.span(assign)
        edits = (
            Edit(
                loop_line,
                loop_line,
                f"{indent}{out} = {reference}(dim={dim_code}, count={self.context.source_of(count)}){newline}",
            ),
            Edit(
                first_start,
                first_end,
                f"{out}.append({self.context.source_of(first_assign.value)})",
            ),
            Edit(cat_start, cat_end, f"{out}.append({self.context.source_of(chunk)})"),
            Edit(after, after, f"{indent}{out} = {out}.result(){newline}"),
        ) + import_edits
        # The original drops its reference to the chunk when the next iteration rebinds
        # it; the running `out` held the same bytes. Once the chunk is copied, release it,
        # or the writer's output plus the loop-carried chunk would exceed the original's
        # peak by one chunk during the next step's work (measured on Wan's decode).
        released = _releasable_chunk(chunk, cat_line, _body(first_if.orelse.body), index)
        if released is not None:
            at = self.context.line_after(cat_line)
            release = f"{self.context.indentation_of(cat_line)}del {released}{newline}"
            if at == after:  # the cat ends the loop: one insertion, in order
                edits = tuple(
                    Edit(at, at, release + edit.content)
                    if (edit.start, edit.end) == (at, at)
                    else edit
                    for edit in edits
                )
            else:
                edits = edits + (Edit(at, at, release),)
        return Fix(
            message=f"Write the chunks into a preallocated `{reference}`",
            edits=edits,
            applicability=Applicability.SAFE,
        )

    # -- torch.cat([f(x) for x in data]) ------------------------------------------------
    def _comprehension(
        self,
        call: cst.Call,
        comprehension: cst.ListComp | cst.GeneratorExp,
        function: cst.FunctionDef,
        list_name: str | None,
        parameter: str | None = None,
    ) -> None:
        """A comprehension of model calls concatenated at once: given to `torch.cat`, or
        bound to `list_name` and concatenated, directly or by a local helper whose
        `parameter` it becomes (`_joined_by_helper`)."""
        clauses = []
        clause: cst.CompFor | None = comprehension.for_in
        while clause is not None:
            clauses.append(clause)
            clause = clause.inner_for_in
        min_count = self.settings["min-constant-count"]
        index = self._index(function)
        if list_name is not None and _per_item(list_name):
            return
        facts = F.facts_for(self.context, function)
        if facts is None:
            return
        # The element must run a model (reported without a fix: worth a hand rewrite).
        element: cst.BaseExpression = comprehension.elt
        while isinstance(element, (cst.Attribute, cst.Subscript)):
            element = element.value
        if not isinstance(element, cst.Call):
            return
        work = facts.work(element)
        # `torch.cat([torch.cat(tiles[i * n : (i + 1) * n], dim=-1) for i in range(rows)])`:
        # row strips of a tile grid, every strip a copy held beside the tiles until the merge.
        strips = work.level < F.MODEL and _strip_of_grid(self.context, element, clauses)
        # A layer's outputs for the pieces of a split input, joined by a helper that also
        # stages the join on the host for large inputs (`chunks.host_staged_join`).
        staged = (
            parameter is not None
            and work.level >= F.LAYER
            and C.host_staged_join(self.context, call, facts.owner)
        )
        if work.level < F.MODEL and not strips and not staged:
            return
        origin = S.name_origin(list_name or "", F._origin_of_work(work))
        if strips:
            sliced = _argument(element, 0, ("tensors",))
            assert isinstance(sliced, cst.Subscript)
            origin = S.name_origin(_last_name(sliced.value), origin)
        if S.size_class(origin) == S.TINY:
            return
        level, reason = _accumulation_level(origin, work, True, False, False)
        raising = None  # why it clears the bar
        if staged and work.level < F.MODEL:
            level, reason, raising = S.MEDIUM, None, _HOST_STAGED
        reason = reason or C.light_owner(self.context.path, facts.owner)
        if reason is not None:
            level = S.LOW
        if any(_iterable_is_small_or_model_axis(c.iter, min_count, index) for c in clauses):
            level = S.LOW
        scoped, reason = self._scoped(level, reason)
        if scoped is None:
            return
        level = scoped
        reason = reason or raising
        written = self.context.source_of(call.func)
        by = (
            f" (which `torch.cat`s its `{parameter}` parameter: the chunks and the result "
            f"are alive together inside it)"
            if parameter is not None
            else ""
        )
        self.report(
            call,
            f"`{written}`{by} of a comprehension holds every chunk ({S.describe(origin)}) "
            f"and the result together (about twice the output), across "
            f"`{'.'.join(work.parts)}` for every element; append into a preallocated output "
            f"in a loop"
            + (" (the helper would take the output instead)" if by else "")
            + (f"; {reason}" if reason else "")
            + f" (significance: {level})",
            significance=level,
        )

    def _chunk_structure(
        self,
        facts: F.FunctionFacts,
        function: cst.FunctionDef,
        origin: str,
        names: Sequence[str],
        chunks: Sequence[tuple[cst.BaseExpression | None, Node | None, Node | None]],
        loop: cst.CSTNode | None = None,
    ) -> str | None:
        """Why the chunks, next to what the loop holds anyway, do not set the peak (the
        chunk facts of `analysis.chunks`); None when nothing says so."""
        if loop is not None and chunks and not _decodes_in(loop):
            sampled = [C.sampler_output(facts, expr, node) for expr, node, _ in chunks]
            if all(sampled):
                return (
                    f"each chunk is a diffusion sampler's output (`{sampled[0]}(...)`) and the "
                    f"loop decodes nothing: latents, tens of MiB for a long clip, while each "
                    f"call's denoising sets the iteration's peak far above them"
                )
        light = C.light_owner(self.context.path, facts.owner)
        if light is not None:
            return light
        small = C.small_by_name(names) or C.masks_by_function(function.name.value)
        if small is not None:
            return small
        loading = C.load_time(self.context.path, function.name.value, names)
        if loading is not None:
            return loading
        if function.name.value == "__getitem__" and _dataset_file(self.context.path, facts):
            return (
                "a dataset's `__getitem__`: one sample built on the host (in a DataLoader "
                "worker), CPU memory, not the GPU peak"
            )
        if C.audio_model(self.context.path):
            return "an audio or speech model: its waveforms, codes and logits are a few MiB"
        if (
            origin == F.DECODED
            and (image := C.image_model(self.context, function, facts.owner)) is not None
        ):
            return (
                f"decoded tiles of {image}: a whole image is tens of MiB at 2K, less than "
                f"one tile's decoder activations, so the merge does not set the peak"
            )
        per_call = C.merged_per_call(self.context, function, facts.owner)
        if per_call is not None:
            return per_call
        nodes = self._load_nodes(facts)
        headers = {id(header): header for _, _, header in chunks}
        if len(headers) == 1:
            scores = C.full_key_scores(self.context, facts, nodes, next(iter(headers.values())))
            if scores is not None:
                return (
                    f"each iteration computes one query tile's attention scores against "
                    f"every key (`{scores}`): tile x keys per head, more than the tile's "
                    f"output, so the loop's own peak is above the concatenation's"
                )
        sources = [
            C.live_source(self.context, facts, nodes, expr, header) if expr is not None else None
            for expr, _, header in chunks
        ]
        if sources and all(source is not None for source in sources):
            names = list(dict.fromkeys(name for found in sources if found for name in found))
            listed = ", ".join(f"`{name}`" for name in names[:3]) + (
                " and more" if len(names) > 3 else ""
            )
            return (
                f"each chunk is computed from slices of {listed}, which stay alive across "
                f"the loop: the chunks together are no larger than the loop's own inputs, so "
                f"the concatenation does not set a new peak"
            )
        if chunks and all(
            expr is not None and C.moved_from_container(facts, nodes, expr, node, header)
            for expr, node, header in chunks
        ):
            return (
                "the chunks are taken out of a container that held them before the loop: "
                "the list adds no memory of its own"
            )
        return None

    def _scoped(self, level: str, reason: str | None) -> tuple[str | None, str | None]:
        """Tests, examples, benchmarks and scripts (the `non-library` globs shared with the
        portability rules) are another audience: small inputs, run once. Their findings are
        `low`; below the bar they are counted as left out by scope (`--statistics`), never
        dropped silently. (None: left out.)"""
        if Portability.of(self.context).library:
            return level, reason
        if not S.at_least(S.LOW, S.bar_of(self.context.settings)):
            self.leave_out(LEFT_OUT_SCOPE, SHOWS_BELOW_BAR)
            return None, None
        return S.LOW, reason or NON_LIBRARY_NOTE

    def _index(self, function: cst.FunctionDef) -> NameUses:
        """Where each local name occurs (the shared flow facts of `analysis.uses`)."""
        return uses_for(self.context, function)

    def visit_Assign(self, node: cst.Assign) -> None:
        # `xs = [chunk(x) for x in data]` then `torch.cat(xs)`: the comprehension form.
        if not (
            isinstance(node.value, cst.ListComp)
            and len(node.targets) == 1
            and isinstance(node.targets[0].target, cst.Name)
        ):
            return
        function = _innermost_function(self.context.ancestors)
        if function is None:
            return
        name = node.targets[0].target.value
        index = self._index(function)
        uses = index.of(name)
        cats = []
        helpers: list[str] = []
        reads = False
        for use in uses:
            if any(a is node for a in use.ancestors):
                continue
            parent = use.ancestors[-1] if use.ancestors else None
            call = self._concatenation_of(use)
            joined = None if call is not None else self._joined_by_helper(use, function)
            if call is not None:
                cats.append(call)
            elif joined is not None:
                cats.append(joined[0])
                helpers.append(joined[1])
            elif isinstance(parent, cst.Del):
                continue
            elif _role(use, self.context) in _READS:
                reads = True  # `len(outputs)`, `outputs[0].size(2)`: metadata
            else:
                # Used otherwise: perhaps buffers filled in place (`xs[i].add_(...)`).
                self._filled_in_place(node, node.value, function, name)
                return
        if len(cats) != 1 or len(uses) < 2:
            return
        if reads and not helpers:
            return  # kept to the plain form, whose scores were measured so
        self._comprehension(cats[0], node.value, function, name, helpers[0] if helpers else None)

    def _joined_by_helper(self, use: Use, function: cst.FunctionDef) -> tuple[cst.Call, str] | None:
        """The call of a local helper that concatenates the list given at this use's
        position (`self._concatenate_tensors(outputs, n, pad)`:
        `chunks.list_joining_helper`), and the helper's parameter that receives it."""
        call = _call_argument(use)
        if call is None:
            return None
        if any(arg.star for arg in call.args):
            return None  # `helper(*pieces)`: positions unknown
        positional = [arg for arg in call.args if arg.keyword is None]
        facts = F.facts_for(self.context, function)
        if facts is None:
            return None
        found = C.list_joining_helper(self.context, call, facts.owner)
        if found is None:
            return None
        _, at, parameter = found
        if at >= len(positional) or positional[at].value is not use.node:
            return None
        return call, parameter

    def _concatenation_of(self, use: Use) -> cst.Call | None:
        """The concatenation a use is the first argument of (`torch.cat(rows, dim=3)`)."""
        chain = use.ancestors
        parent = chain[-1] if chain else None
        call = chain[-2] if len(chain) >= 2 else None
        if (
            isinstance(parent, cst.Arg)
            and isinstance(call, cst.Call)
            and call.args
            and call.args[0] is parent
            and _kind_of(self.context, call) is not None
        ):
            return call
        return None

    def _filled_in_place(
        self, assign: cst.Assign, buffers: cst.ListComp, function: cst.FunctionDef, name: str
    ) -> None:
        """`grads = [torch.zeros(chunk_shape) for _ in range(n)]`, each `grads[i].add_(...)`
        in a loop, then `torch.cat(grads)`: every buffer and the result are alive at the
        concatenation (twice the output) where one preallocated output, filled through
        views (`out.chunk(n)`), needs no concatenation. Reported without a fix: the views
        must be the buffers' exact shapes, which a rewrite cannot prove."""
        element = buffers.elt
        clause = buffers.for_in
        if not (
            isinstance(element, cst.Call)
            and C.allocation_call(element)
            and clause.inner_for_in is None
            and not clause.ifs
        ):
            return
        facts = F.facts_for(self.context, function)
        if facts is None or name in facts.cfg.captured or name in facts.cfg.declared:
            return
        cats: list[cst.Call] = []
        updates: list[Use] = []
        for use in self._index(function).of(name):
            if any(a is assign for a in use.ancestors):
                continue
            if use.nested:
                return
            call = self._concatenation_of(use)
            if call is not None:
                cats.append(call)
            elif _updated_in_place(use):
                updates.append(use)
            else:
                return  # read, rebound or handed out: not this pattern
        if len(cats) != 1 or not updates:
            return
        concat = cats[0]
        found = [_innermost_loop(use.ancestors, function) for use in updates]
        loops = [loop for loop in found if loop is not None]
        if len(loops) != len(found):
            return  # a buffer written outside any loop
        statement = self.context.ancestors[-1] if self.context.ancestors else None
        start = self.context.span(assign)[0]
        end = self.context.span(concat)[0]
        if not all(start < self.context.span(loop)[0] < end for loop in loops):
            return
        at = next((n for n in facts.cfg.nodes if n.statement in (assign, statement)), None)
        origin = C.shaped_like(facts, element, self._load_nodes(facts), at)
        if S.size_class(origin) == S.TINY:
            return
        origin = S.domain_origin(origin, self.context.path, _owner_name(facts))
        work = F.Work(F.NONE, "none")
        for loop in dict.fromkeys(loops):
            loop_work = _loop_work(facts, _header_node(facts, loop), loop)
            work = loop_work if loop_work.level > work.level else work
        level, reason = _accumulation_level(
            origin, work, False, False, any(C.sequence_chunks(loop) for loop in loops)
        )
        raising, reason = (reason, None) if reason in _RAISING else (None, reason)
        reason = reason or C.light_owner(self.context.path, facts.owner)
        if reason is not None:
            level = S.LOW
        scoped, reason = self._scoped(level, reason)
        if scoped is None:
            return
        level = scoped
        reason = reason or raising
        written = self.context.source_of(concat.func)
        self.report(
            concat,
            f"`{name}` holds buffers ({S.describe(origin)}) filled in place across the "
            f"loop's {_describe_work(work)} until `{written}({name}, ...)`: all buffers and "
            f"the result are alive together (about twice the output); allocate one output "
            f"and fill views of it (`out.chunk(n)`) instead"
            + (f"; {reason}" if reason else "")
            + f" (significance: {level})",
            significance=level,
        )


# Loop structure that gives few chunks: model axes and counts (issue 12: low significance).
_MODEL_AXIS = compile_lazily(
    r"(layers?|blocks?|heads?|modules?|experts?|convs?|branch(es)?|stages?|levels?|scales?|"
    r"resolutions?|towers?|resnets?|attentions?|attns?|projs?|projections?|embeddings?|"
    r"embedders?|norms?|children|parameters|named_parameters|params|buffers|"
    r"encoders?|decoders?|adapters?|loras?|down_blocks|up_blocks|mid_blocks|samplers?|"
    r"axes|axes_dims?|dims|hidden_states|tokenizers?|mods|quantizers?|codebooks?)$"
)
_MODEL_COUNT = compile_lazily(
    r"^(num|n)_?(layers|heads|blocks|experts|stages|levels|scales|groups|kv_heads|"
    r"attention_heads|hidden_layers|axes|dims|encoders|branches|quantizers|codebooks|"
    r"mask_tokens|queries|classes|feature_levels)"
)


# -- classifying uses -----------------------------------------------------------------------


_READS = ("len", "truth", "element")


def _role(use: Use, context) -> str:
    """What one occurrence of the list's name does: init, append, extend, cat, the reads
    that neither keep nor hand out chunks (`len(xs)`, `if not xs:`, `xs[0].shape`), del,
    rebind, or escape."""
    if use.nested:
        return "escape"
    chain = use.ancestors
    parent = chain[-1] if chain else None
    if isinstance(parent, cst.AssignTarget) and len(chain) >= 2:
        assign = chain[-2]
        if (
            isinstance(assign, cst.Assign)
            and len(assign.targets) == 1
            and _starts_empty(assign.value)
        ):
            return "init"
        return "rebind"
    if isinstance(parent, cst.AnnAssign) and parent.target is use.node:
        value = parent.value
        return "init" if value is not None and _starts_empty(value) else "rebind"
    if isinstance(parent, cst.Attribute) and parent.value is use.node and len(chain) >= 3:
        method_call, line = chain[-2], chain[-3]
        if (
            isinstance(method_call, cst.Call)
            and method_call.func is parent
            and isinstance(line, cst.Expr)
            and parent.attr.value in ("append", "extend")
            and len(method_call.args) == 1
            and method_call.args[0].keyword is None
            and not method_call.args[0].star
        ):
            return parent.attr.value
        return "escape"
    if isinstance(parent, cst.AugAssign) and parent.target is use.node:
        if isinstance(parent.operator, cst.AddAssign) and isinstance(
            parent.value, (cst.List, cst.Tuple)
        ):
            single = len(parent.value.elements) == 1 and isinstance(
                parent.value.elements[0], cst.Element
            )
            return "append" if single else "extend"
        return "escape"
    if isinstance(parent, cst.Arg) and len(chain) >= 2 and context is not None:
        call = chain[-2]
        if isinstance(call, cst.Call) and call.args and call.args[0] is parent:
            if _kind_of(context, call) is not None and _argument(call, None, ("out",)) is None:
                return "cat"
            if _is_call_to(call, "len") and len(call.args) == 1:
                return "len"
        return "escape"
    if isinstance(parent, cst.UnaryOperation) and isinstance(parent.operator, cst.Not):
        return "truth"
    if isinstance(parent, (cst.If, cst.While, cst.IfExp)) and parent.test is use.node:
        return "truth"
    if _none_test(parent, use.node) or _operand_of_test(chain, use.node):
        return "truth"  # `if xs is not None`, `if flag and xs`: a test, not a use of a chunk
    if (
        isinstance(parent, cst.Subscript)
        and parent.value is use.node
        and len(chain) >= 3
        and isinstance(chain[-2], cst.AssignTarget)
        and isinstance(chain[-3], cst.Assign)
        and len(chain[-3].targets) == 1
        and _index_subscript(parent)
    ):
        # `out[i] = chunk` into `out = [None] * n`: the slot holds the chunk, as an append.
        return "store"
    if isinstance(parent, cst.Subscript) and parent.value is use.node and len(chain) >= 3:
        # `xs[0].shape`, `xs[-1].size(2)`: an element's metadata, not the element.
        attribute = chain[-2]
        if isinstance(attribute, cst.Attribute) and attribute.value is parent:
            if attribute.attr.value in T.METADATA_ATTRIBUTES:
                return "element"
            outer = chain[-3]
            if (
                attribute.attr.value in T.METADATA_METHODS
                and isinstance(outer, cst.Call)
                and outer.func is attribute
            ):
                return "element"
        return "escape"
    if isinstance(parent, cst.Del) or (
        isinstance(parent, cst.Element) and len(chain) >= 3 and isinstance(chain[-3], cst.Del)
    ):
        return "del"
    return "escape"


def _call_argument(use: Use) -> cst.Call | None:
    """The call a use of the list is a plain argument of (`self._cat_inputs(inputs)`)."""
    chain = use.ancestors
    if use.nested or len(chain) < 2 or not isinstance(chain[-1], cst.Arg):
        return None
    call = chain[-2]
    return call if isinstance(call, cst.Call) and chain[-1].value is use.node else None


def _exclusive_arms(a: Use, b: Use) -> bool:
    """Two uses on opposite arms of one conditional: the body and the `else` of an `if`
    statement or of a conditional expression (`torch.cat(xs) if small else
    self._cat_inputs(xs)`). At most one of them runs, so a list handed to a call on one
    arm holds the same chunks at the concatenation on the other as if it were never
    handed anywhere; only a rewrite of the list would change the other arm."""
    common = 0
    for x, y in zip(a.ancestors, b.ancestors):
        if x is not y:
            break
        common += 1
    if common == 0 or common >= min(len(a.ancestors), len(b.ancestors)):
        return False
    top, x, y = a.ancestors[common - 1], a.ancestors[common], b.ancestors[common]
    if isinstance(top, cst.IfExp):
        return {id(x), id(y)} == {id(top.body), id(top.orelse)}
    if isinstance(top, cst.If):
        return {id(x), id(y)} == {id(top.body), id(top.orelse)} and top.orelse is not None
    return False


def _kind_of(context, call: cst.Call) -> str | None:
    """ "cat" for `torch.cat` / `concat` / `concatenate`, else the concatenation's name
    (`stack`, `hstack`, ...); None for other calls."""
    qualified = context.qualified_name(call.func) or ""
    if qualified not in T.CONCATENATIONS:
        return None
    last = qualified.rsplit(".", 1)[-1]
    return "cat" if last in ("cat", "concat", "concatenate") else last


def _same_dim(context, a: cst.Call, b: cst.Call) -> bool:
    da, db = _argument(a, 1, ("dim", "axis")), _argument(b, 1, ("dim", "axis"))
    code = lambda d: "0" if d is None else context.source_of(d).strip()  # noqa: E731
    return code(da) == code(db)


def _list_family(facts: F.FunctionFacts, sites) -> tuple[DefSite, dict[int, DefSite]] | None:
    """The empty-list binding these bindings come from, through `xs += [chunk]` (which
    grows the same list in place), and every binding of that family; None otherwise."""
    init: DefSite | None = None
    family: dict[int, DefSite] = {}
    stack = list(sites)
    if not stack:
        return None
    while stack:
        site = stack.pop()
        if site.index in family:
            continue
        if site.kind == "augassign" and site.node is not None:
            family[site.index] = site
            stack.extend(facts.reaching(site.node, site.name))
        elif (
            site.kind in ("assign", "annassign")
            and not site.unpacked
            and site.node is not None
            and site.value is not None
            and _starts_empty(site.value)
            and (init is None or init is site)
        ):
            init = site
            family[site.index] = site
        else:
            return None
    return (init, family) if init is not None else None


def _rebound_to_own_concatenation(context, name: str, reaching, family) -> list:
    """The bindings besides the list itself that reach a read, when every one is `name =
    torch.cat(name, ...)` (else none): the read sees the concatenation, except on a path
    where a context manager or handler swallowed an exception raised before it."""
    others = [site for site in reaching if site.index not in family]
    rebinds = all(
        site.kind == "assign"
        and not site.unpacked
        and isinstance(site.value, cst.Call)
        and _kind_of(context, site.value) is not None
        and isinstance(_argument(site.value, 0, ("tensors",)), cst.Name)
        and _argument(site.value, 0, ("tensors",)).value == name  # type: ignore[union-attr]
        for site in others
    )
    return others if rebinds else []


def _unconditional_after(block: cst.CSTNode, loop_at: int, value: cst.BaseExpression) -> bool:
    """`value` is assigned by a plain statement of `block` after the loop: it runs whenever
    the block completes normally."""
    for statement in _body(block)[loop_at + 1 :]:
        if isinstance(statement, cst.SimpleStatementLine) and any(
            isinstance(small, cst.Assign) and small.value is value for small in statement.body
        ):
            return True
    return False


def _observed_dynamically(facts: F.FunctionFacts, site) -> bool:
    """A `locals()` / `vars()` / `eval` that runs while this binding is current may read
    it; one elsewhere in the function (before the list exists, after it is rebound) does
    not switch the rule off."""
    return any(
        (node.dynamic or site.name in node.dynamic_names)
        and site in facts.reaching(node, site.name)
        for node in facts.cfg.nodes
    )


def _mutually_exclusive(facts: F.FunctionFacts, nodes: list[Node]) -> bool:
    """No node of these can run after another of them (branches of one `if`, returns)."""
    for start in nodes:
        seen = {start.index}
        stack = list(start.succ)
        while stack:
            node = stack.pop()
            if node.index in seen:
                continue
            seen.add(node.index)
            if any(node is other for other in nodes):
                return False
            stack.extend(node.succ)
    return True


def _encoder_output(function: cst.FunctionDef, origin: str) -> str:
    """In an encode path (`tiled_encode`, `_encode`, `encode_tile_merge`) or one that builds
    latents (`tile_indices_to_latent`) the chunks are latent-sized (1/48 to 1/64 of the
    pixels), whatever the list is called (`result_rows`)."""
    words = set(function.name.value.lower().strip("_").split("_"))
    if words & {"encode", "encoder", "encoding", "latent", "latents"} and not words & {
        "decode",
        "decoder",
    }:  # (`tile_indices_to_latent`: latents too)
        return F.LATENTS if origin != F.LOGITS else origin
    return origin


_MODEL_IN_LOOP = (
    "each chunk comes from model-level work in the loop, whose own activations likely "
    "exceed the concatenation"
)


_LOGITS_PER_STEP = (
    "each step's logits (a vocabulary per token) are kept across a generation loop whose "
    "own forward is one step's: the kept logits grow with the generated tokens"
)


_PEAK_IN_LOOP = (
    "each chunk comes out of a network's peak-level layer run in the loop, whose hidden "
    "activations outgrow activation-sized chunks"
)


# Function names of a decoder's output assembly (`tiled_decode`, `_merge_spatial_tiles`,
# `tile_merge`, `temporal_tiled_decode`).
_DECODE_WORDS = frozenset(
    {
        "decode",
        "decoder",
        "decoding",
        "tiled",
        "tile",
        "tiles",
        "merge",
        "blend",
        "stitch",
        "upsample",
        "upscale",
    }
)


def _decoder_calls(function: cst.FunctionDef) -> list[cst.Call]:
    """Calls of a decoder in the function (not a tokenizer's or processor's `decode`)."""
    return [
        call
        for call in _calls_in(function.body)
        if _words(_last_name(call.func)) & _DECODER_CALL_WORDS and not _text_decoder(call.func)
    ]


def _text_decoder(func: cst.BaseExpression) -> bool:
    """`self.tokenizer.decode(ids)`, `processor.batch_decode(...)`: text, not pixels."""
    if not isinstance(func, cst.Attribute):
        return False
    receiver = _words(_last_name(func.value))
    return bool(receiver & {"tokenizer", "processor", "tok", "text", "codec"}) or any(
        word.startswith("token") for word in receiver
    )


_DECODER_CALL_WORDS = frozenset({"decode", "decoder", "vae", "decoded"})


# Origins of chunks whose size the dataflow does not know: a concatenation or a buffer of
# computed shape.
_UNSIZED = (F.CONCATENATION, F.ALLOCATION)


def _named_origin(name: str, origin: str, names_count: bool) -> str:
    """`significance.name_origin`, except that a name does not lift chunks of unknown size
    to decoded output where nothing else says they are (`names_count` false)."""
    named = S.name_origin(name, origin)
    if named == F.DECODED and origin in _UNSIZED and not names_count:
        return origin
    return named


def _calls_in(node: cst.CSTNode) -> list[cst.Call]:
    collector = _CallCollector()
    visit(node, collector)  # (read-only: no node rebuilding)
    return collector.calls


class _CallCollector(cst.CSTVisitor):
    def __init__(self) -> None:
        self.calls: list[cst.Call] = []

    def visit_Call(self, node: cst.Call) -> None:
        self.calls.append(node)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False  # a nested function's calls are its own

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False


def _last_name(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Attribute):
        return node.attr.value
    if isinstance(node, cst.Name):
        return node.value
    return ""


def _decode_path(function: cst.FunctionDef, names: Sequence[str]) -> bool:
    """The accumulation assembles a decoder's output: the function is named for decoding
    or merging tiles, or the list is named for decoded frames (`video`, `frames`)."""
    words = set(function.name.value.lower().strip("_").split("_"))
    return bool(words & _DECODE_WORDS) or any(
        S.name_origin(name, F.CONCATENATION) == F.DECODED for name in names
    )


_OUTSIDE_DECODE = (
    "activation-sized chunks outside a decoder's output assembly: the loop's own inputs and "
    "work are of the same order, so the concatenation rarely sets the peak"
)


_SEGMENTS = (
    "each chunk is a generated segment (the loop runs model-level generation and decodes "
    "per iteration): the kept output grows with the segment count while each iteration's "
    "work is one segment's, so with several segments the concatenation sets the peak"
)

_ENCODER_CALL_WORDS = frozenset({"encode", "encoder", "encoding"})


def _generates_segments(facts: F.FunctionFacts, loop: cst.CSTNode) -> bool:
    """Each iteration generates what it keeps (a long video made segment by segment: a
    denoising loop or `diffuse` helper, then the segment's decode): the loop body calls a
    decoder and also model-level work that is neither a decoder nor an encoder. A loop
    that only decodes slices of latents made before it (Wan's per-frame decode, chunked
    `decode_latents`) keeps its decoder's activations as its peak; it is not one."""
    decodes = generates = False
    for call in _calls_in(loop):
        words = _words(_last_name(call.func))
        if words & _DECODER_CALL_WORDS:
            decodes = decodes or not _text_decoder(call.func)
            continue
        if words & _ENCODER_CALL_WORDS:
            continue
        work = facts.work(call)
        if work.level >= F.MODEL and not C.is_collective(work):
            generates = True
    return decodes and generates


def _decodes_in(loop: cst.CSTNode) -> bool:
    """The loop body calls a decoder (not a tokenizer's text decode)."""
    return any(
        _words(_last_name(call.func)) & _DECODER_CALL_WORDS and not _text_decoder(call.func)
        for call in _calls_in(loop)
    )


_LISTED_SEGMENTS = (
    "each chunk is a whole segment decoded from a list of segments generated before the "
    "loop (a long video made segment by segment): the kept output grows with the segment "
    "count while each iteration's work is one segment's decode"
)


def _iterates_listed_segments(facts: F.FunctionFacts, loop: cst.CSTNode) -> bool:
    """`for chunk_latents in latent_chunks:`: a list of latent segments generated before
    (each a whole segment of a long video, as Helios makes them), not pieces of one tensor
    (`torch.split(z, n)`, a tensor iterated along its first axis, `range` slices)."""
    if isinstance(loop, cst.With):  # `with vae_context(): ...; for ...`
        inner = [statement for statement in loop.body.body if isinstance(statement, cst.For)]
        if len(inner) != 1:
            return False
        loop = inner[0]
    if not (isinstance(loop, cst.For) and isinstance(loop.iter, (cst.Name, cst.Attribute))):
        return False
    named = loop.iter if isinstance(loop.iter, cst.Name) else loop.iter.attr
    words = _words(named.value)
    if not ("segments" in words or (words & {"latent", "latents"} and words & {"chunks", "list"})):
        return False
    header = _header_node(facts, loop)
    if header is None:
        return False
    if isinstance(loop.iter, cst.Attribute):
        # `for chunk_latents in block_state.latent_chunks:` (a modular pipeline's state):
        # a stored list of segments, bound by an earlier step.
        return not facts.expression(loop.iter, header).is_tensor
    sites = facts.reaching(header, loop.iter.value)
    if not sites or facts.expression(loop.iter, header).is_tensor:
        return False
    return all(
        site.kind == "assign"
        and site.value is not None
        and not (isinstance(site.value, cst.Call) and _last_name(site.value.func) in _SPLIT_METHODS)
        and not isinstance(site.value, (cst.List, cst.Tuple, cst.ListComp))
        for site in sites
    )


_SEQUENCE = (
    "the loop walks one tensor in chunks, so each iteration's inputs and work are one "
    "chunk's while the kept chunks add up to the whole"
)

_OWN_FORWARD = (
    'the layer runs its own forward over pieces of its input (a "safe" convolution '
    "bounding one call's memory): the decoder's other layers set the peak, not the kept "
    "outputs (measured on an H200, CogVideoX's VAE decode with a preallocated output: no "
    "chunked call at 480x720x49, peak +0.56% at 768x1360x81)"
)

_SELF_PADDING = (
    "each step appends a piece cut from the running value itself (padding it with its own "
    "frames, reflected or repeated, up to a target length): the loop pads one input "
    "instead of keeping chunks it produces, and each piece reads the running value, so a "
    "preallocated output does not apply"
)

_RESIDUAL = (
    "each chunk is a slice of one tensor plus a layer's update of it, the loop walking the "
    "tensor in chunks to bound the layer's intermediates: those are one chunk's while the "
    "kept chunks add up to the whole tensor, held again by the concatenation"
)

# Reasons that explain a level above `low` (shown in the message; they lower nothing).
_WIDENED = (
    "the chunks are computed from slices of a live input cast to a wider float (fp32): in "
    "half precision the kept chunks are twice the input and the result as large again, so "
    "the concatenation, not the loop, sets the peak"
)
_HOST_STAGED = (
    "for larger inputs the helper concatenates the pieces on the host instead, the authors' "
    "own sign that this concatenation, not the layer that made the pieces, sets the peak"
)
_RAISING = (_WIDENED, _SEGMENTS, _SEQUENCE, _RESIDUAL, _LOGITS_PER_STEP, _LISTED_SEGMENTS)


def _own_forward_output(
    context, facts: F.FunctionFacts, expr: cst.BaseExpression | None, node: Node | None
) -> bool:
    """`super().forward(piece)` (or a name bound only to one) in a method of a class
    derived from a `torch.nn` module (`class SafeConv3d(nn.Conv3d)`): the layer's own
    output for a piece of its input, a fresh activation."""
    owner = facts.owner
    if expr is None or node is None or owner is None:
        return False
    if isinstance(expr, cst.Name):
        sites = facts.reaching(node, expr.value)
        if len(sites) != 1 or sites[0].kind != "assign" or sites[0].value is None:
            return False
        expr = sites[0].value
    if not (
        isinstance(expr, cst.Call)
        and isinstance(expr.func, cst.Attribute)
        and expr.func.attr.value in ("forward", "__call__", "_conv_forward")
        and isinstance(expr.func.value, cst.Call)
        and isinstance(expr.func.value.func, cst.Name)
        and expr.func.value.func.value == "super"
        and expr.args
    ):
        return False
    return any(
        (context.qualified_name(base.value) or "").startswith("torch.nn.") for base in owner.bases
    )


def _accumulation_level(
    origin: str,
    work: F.Work,
    decode_path: bool,
    segments: bool,
    in_chunks: bool,
    generation: bool = False,
    residual: bool = False,
    widened: bool = False,
) -> tuple[str, str | None]:
    """LL002's significance: the concatenation's peak is every chunk plus the output, and it
    is the function's peak only where nothing in the loop needs more. Decoded tiles merged by
    light work (blending, copying: the tiles were decoded earlier): `high`; activation-sized
    chunks so merged: `medium`. Where each chunk comes from a model-level call in the same
    loop, that call's activations usually set the peak (measured on an H200: Wan's untiled
    decode, 4,487 MiB with and without a preallocated output; the 720p tiled merge -16%):
    `low`, with the reason. Activation-sized chunks are `medium` only in a decoder's output
    assembly (`decode_path`), `low` elsewhere."""
    size = S.size_class(origin)
    if size not in (S.LARGE, S.ACTIVATION_SIZED):
        return S.LOW, None
    if size == S.LARGE and segments:
        # Decoded segments of a long output, each generated and decoded in its own
        # iteration: the per-iteration peak is one segment's, the kept output all of them.
        return S.MEDIUM, _SEGMENTS
    if C.runs_a_network(work):
        if origin == F.LOGITS and generation:
            # A language model's logits kept step by step (`all_logits.append(logits)` in a
            # generation loop): each step's forward is one token's (cached decoding), the
            # kept logits grow with the new tokens times the vocabulary.
            return S.MEDIUM, _LOGITS_PER_STEP
        return S.LOW, _MODEL_IN_LOOP
    if size == S.LARGE:
        return S.HIGH, None
    if residual:
        # `chunks.append(chunk + self.mlp(self.norm(chunk)))` over one tensor walked in
        # chunks: the layer runs on one chunk (its intermediates are one chunk's: why the
        # loop chunks), its update has the chunk's shape, so the kept chunks are the whole.
        return S.MEDIUM, _RESIDUAL
    if widened and not C.runs_a_network(work):
        # `inputs.append((x[:, i].float() - mean) / std)`: slices of a live input cast up
        # (`chunks.widened_source`): the kept chunks are up to twice the input.
        return S.MEDIUM, _WIDENED
    if (
        work.level >= F.PEAK
        and work.kind not in ("concatenation", "torch-op", "collective")
        and not C.is_collective(work)
    ):
        # A network's peak-level layer (an MLP, a conv stack) runs over each batch in the
        # loop: its hidden activations outgrow activation-sized outputs.
        return S.LOW, _PEAK_IN_LOOP
    # Activation-sized chunks merged by light work: worth it where they are a decoder's
    # output (temporal tiles of a video VAE, blended frame groups) or the chunks of one
    # sequence walked chunk by chunk; elsewhere the loop's own inputs and work are as large
    # as the chunks.
    if decode_path:
        return S.MEDIUM, None
    return (S.MEDIUM, _SEQUENCE) if in_chunks else (S.LOW, _OUTSIDE_DECODE)


def _smaller_by_name(callee: str, origin: str) -> str:
    """The origin a producing call's name gives, when it is a smaller size class than
    `origin` (never larger: a call named `frames` does not make a chunk large)."""
    if not callee or _words(callee) & {"decode", "decoder", "decoded"}:
        return origin
    named = S.name_origin(callee, F.ACTIVATION)
    if named == F.ACTIVATION:
        return origin  # the name says nothing about size (`cat`, `blend_v`)
    smaller = _SIZE_ORDER.index(S.size_class(named)) < _SIZE_ORDER.index(S.size_class(origin))
    return named if smaller else origin


_SIZE_ORDER = (S.TINY, S.SMALL_SIZED, S.ACTIVATION_SIZED, S.LARGE)


def _words(name: str) -> set[str]:
    return set(name.lower().strip("_").split("_"))


def _owner_name(facts: F.FunctionFacts) -> str | None:
    return facts.owner.name.value if facts.owner is not None else None


def _appended_elsewhere(ancestors: Sequence[cst.CSTNode]) -> bool:
    """The concatenation's result goes straight into another list (`rows.append(cat(row))`)."""
    if len(ancestors) < 3:  # the chain ends with the concatenation itself
        return False
    arg, call = ancestors[-2], ancestors[-3]
    return (
        isinstance(arg, cst.Arg)
        and isinstance(call, cst.Call)
        and isinstance(call.func, cst.Attribute)
        and call.func.attr.value in ("append", "extend")
    )


def _loop_work(facts: F.FunctionFacts, header: Node | None, loop: cst.CSTNode) -> F.Work:
    """The heaviest work of one loop's body (the layer's answer for `for` loops; for a
    `while`, the heaviest call in its body)."""
    if header is not None:
        return facts.loop_work(header)
    calls: list[cst.Call] = []
    walk(loop, lambda n: calls.append(n) if isinstance(n, cst.Call) else None, lambda n: None)
    best = F.Work(F.NONE, "none")
    for call in calls:
        work = facts.work(call)
        if work.level > best.level:
            best = work
    return best if best.level > F.LIGHT else F.Work(F.NONE, "none")


def _header_node(facts: F.FunctionFacts, loop: cst.CSTNode) -> Node | None:
    for node in facts.cfg.nodes:
        if node.statement is loop and node.loop_body is not None:
            return node
    return None


@dataclass(frozen=True)
class _Chunk:
    kind: str  # fresh (a new tensor per iteration), derived (a view of one), unknown
    origin: str


def _chunk(
    facts: F.FunctionFacts, expr: cst.BaseExpression, node: Node | None, header: Node | None
) -> _Chunk | None:
    """What one appended chunk is, from the facts layer; None when a list of it holds no
    memory of its own worth a writer (metadata, small values, views of data that stays
    alive anyway: a loop target, a parameter, `self` state)."""
    if node is None:
        return None
    fact = None
    called = isinstance(expr, cst.Call)
    if isinstance(expr, cst.Name):
        sites = facts.reaching(node, expr.value)
        if any(site.kind in ("param", "for") for site in sites):
            # The loop's own element on some paths, a tensor made in this iteration on
            # others (`group = self._blend(groups[k - 1], group)` for k > 0): the list
            # holds the new ones, as a tile merge's rows do.
            body = (header.loop_body or []) if header is not None else []
            made = [
                site
                for site in sites
                if site.kind not in ("param", "for") and _fresh_on_some_path(facts, site, body, 3)
            ]
            if not made:
                return None
            return _Chunk("derived", F._largest(facts.value(site).origin for site in made))
        if len(sites) == 1:
            fact = facts.value(sites[0])  # what the binding holds, not an alias of it
            called = sites[0].kind == "assign" and isinstance(sites[0].value, cst.Call)
    if isinstance(expr, cst.BinaryOperation):
        # `ids + offsets`, `ids + 1`: arithmetic on small values. Every operand must be
        # small: `(array - mean) / std` divides a fresh activation by a small statistic.
        operands = [
            e for e in (expr.left, expr.right) if not isinstance(e, (cst.Integer, cst.Float))
        ]
        if operands and all(
            isinstance(e, cst.Name)
            and (_per_item(e.value) or S.size_class(S.name_origin(e.value, F.ACTIVATION)) == S.TINY)
            for e in operands
        ):
            return None
    if fact is None:
        derived = _view_of_fresh(facts, expr, node, header)
        if derived is not None:
            return derived
        fact = facts.expression(expr, node)
    if fact.kind == F.METADATA or fact.origin == F.SMALL:
        return None
    if fact.kind == F.TENSOR:
        return _Chunk("fresh", fact.origin)
    if fact.kind == F.VIEW:
        if fact.element_of:
            return None  # an element of a container that holds it anyway
        if not fact.sources:
            return _Chunk("fresh", fact.origin) if fact.tensor else None
        body = (header.loop_body or []) if header is not None else []
        per_iteration = all(_made_this_iteration(facts, source, body, 3) for source in fact.sources)
        return _Chunk("derived", fact.origin) if per_iteration else None
    if fact.kind == F.UNKNOWN:
        # A call the layer cannot classify (`renderer(camera)`): a new value per call.
        return _Chunk("fresh" if called else "unknown", F.ACTIVATION)
    return None


_HOST_METHODS = frozenset({"cpu", "numpy", "tolist"})


def _host_copy(expr: cst.BaseExpression | None) -> bool:
    """`t.cpu()`, `t.to("cpu")`, `t.detach().cpu().float()`, `t.numpy()`: a host copy."""
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        method = expr.func.attr.value
        if method in _HOST_METHODS:
            return True
        if method == "to":
            for arg in expr.args:
                value = arg.value
                if (arg.keyword is None or arg.keyword.value == "device") and isinstance(
                    value, cst.SimpleString
                ):
                    if value.evaluated_value in ("cpu", b"cpu"):
                        return True
        if method not in T.VIEW_METHODS and method not in T.MAYBE_COPY_METHODS:
            return False
        expr = expr.func.value
    return False


def _on_host(facts: F.FunctionFacts, expr: cst.BaseExpression | None, node: Node | None) -> bool:
    """The appended chunk is a host copy, directly or through the binding that reaches the
    append (`frame = out.cpu()` ... `frames.append(frame)`)."""
    if _host_copy(expr):
        return True
    if isinstance(expr, cst.Name) and node is not None:
        sites = facts.reaching(node, expr.value)
        return bool(sites) and all(
            site.kind == "assign" and not site.unpacked and _host_copy(site.value) for site in sites
        )
    return False


def _made_this_iteration(facts: F.FunctionFacts, site: DefSite, body, depth: int) -> bool:
    """A binding made in the loop body that holds a new tensor, or a view of one through a
    short rebinding chain (`out = vae.decode(z)`, then `out = out[:, :, k:]`)."""
    if site.node is None or not any(site.node is member for member in body):
        return False
    fact = facts.value(site)
    if fact.kind == F.TENSOR:
        return True
    if fact.kind == F.VIEW and fact.sources and not fact.element_of and depth > 0:
        return all(_made_this_iteration(facts, s, body, depth - 1) for s in fact.sources)
    return False


def _fresh_on_some_path(facts: F.FunctionFacts, site: DefSite, body, depth: int) -> bool:
    """A binding made in the loop body that holds a new tensor (or the result of a call the
    layer cannot classify, `self._blend(a, b)`), or a view of one on some path."""
    if site.node is None or not any(site.node is member for member in body):
        return False
    given = C.inherited_blend_argument(facts.context, site.value, facts.owner)
    if given is not None:
        # `group = self.blend_t(groups[k - 1], group, n)` with a blend helper inherited
        # from a diffusers VAE: it writes into `group` and returns it, so the binding is
        # new only where the blended argument is.
        if not isinstance(given, cst.Name) or depth == 0:
            return True
        return any(
            _fresh_on_some_path(facts, s, body, depth - 1)
            for s in facts.reaching(site.node, given.value)
            if s.kind not in ("param", "for")
        )
    fact = facts.value(site)
    if fact.kind == F.TENSOR or (fact.kind == F.UNKNOWN and isinstance(site.value, cst.Call)):
        return fact.origin != F.SMALL
    if fact.kind == F.VIEW and fact.sources and not fact.element_of and depth > 0:
        return any(_fresh_on_some_path(facts, s, body, depth - 1) for s in fact.sources)
    return False


def _view_of_fresh(
    facts: F.FunctionFacts, expr: cst.BaseExpression, node: Node, header: Node | None
) -> _Chunk | None:
    """`result_row.append(tile[:, :, :n])` where `tile` is, on some path, a tensor made in
    this iteration (`tile = self.blend_t(row[i - 1], tile, n)`): the view keeps that new
    tensor alive until the concatenation, so the list holds memory of its own (tiled
    decoders' blended tiles). None when no such binding reaches."""
    base = expr
    while True:
        if isinstance(base, cst.Subscript):
            base = base.value
        elif (
            isinstance(base, cst.Call)
            and isinstance(base.func, cst.Attribute)
            and base.func.attr.value in T.VIEW_METHODS
        ):
            base = base.func.value
        else:
            break
    if base is expr or not isinstance(base, cst.Name) or header is None:
        return None
    body = header.loop_body or []
    reaching = facts.reaching(node, base.value)
    fresh = [
        site
        for site in reaching
        if site.kind == "assign"
        and site.node is not None
        and any(site.node is member for member in body)
        and (
            facts.value(site).kind == F.TENSOR
            or (facts.value(site).kind == F.UNKNOWN and isinstance(site.value, cst.Call))
        )
        and facts.value(site).origin != F.SMALL
        and (
            C.inherited_blend_argument(facts.context, site.value, facts.owner) is None
            or _fresh_on_some_path(facts, site, body, 3)
        )
    ]
    if not fresh:
        return None
    # The size is that of the tiles on any path (a blend of two decoded tiles is one).
    return _Chunk("derived", F._largest(facts.value(site).origin for site in reaching))


# Per-item values that lists of are small whatever their origin (scores, token ids,
# log-probabilities, labels): LL002's size hint on top of `significance.name_origin`.
_PER_ITEM_WORDS = frozenset(
    ["token", "tokens", "label", "labels", "score", "scores", "logprob", "logprobs", "prob",
     "probs", "count", "counts", "shape", "shapes", "size", "sizes", "num", "nums", "loss",
     "losses", "metric", "metrics", "norm", "norms", "weight_sum", "stat", "stats", "coef",
     "coefs", "coeff", "coeffs", "coefficient", "coefficients", "ngram", "ngrams", "code",
     "codes", "box", "boxes", "bbox", "bboxes"]
)  # fmt: skip


def _per_item(name: str) -> bool:
    words = name.lower().strip("_").split("_")
    if words[-1] in _LARGE_HEADS:
        return False  # `next_token_logits`, `token_embeddings`: the head noun is large
    return any(word in _PER_ITEM_WORDS for word in words)


# Head nouns of per-position tensors a per-item word may modify (`next_token_logits`: a
# vocabulary of logits per token, not a token id).
_LARGE_HEADS = frozenset(["logits", "embeddings", "embeds", "features", "hidden", "states"])


def _describe_work(work: F.Work) -> str:
    """What the chunks are held across, for the message."""
    if work.level <= F.LIGHT:
        return "iterations"
    if C.is_collective(work):  # rated model-level for what it waits on, not for its bytes
        return f"collective (`{'.'.join(work.parts)}`)" if work.parts else "collective"
    level = F.LEVEL_NAMES[work.level]
    if work.parts:
        return f"{level}-level work (`{'.'.join(work.parts)}`)"
    return f"{level}-level work"


def _import_bound(context, func: cst.BaseExpression) -> tuple[str, ...]:
    """`cat` of `from torch import cat`: an import the fix may leave unused."""
    if isinstance(func, cst.Name) and context.imports.bindings_for(func.value):
        return (func.value,)
    return ()


def _starts_empty(node: cst.BaseExpression) -> bool:
    """A list that holds no tensor yet: `[]`, `list()`, slots to fill by index, or an
    optional list made only on request (`[] if return_logits else None`: the appends are
    guarded by `is not None`, the list grows exactly as `[]` does when asked for)."""
    if isinstance(node, cst.IfExp):
        sides = (node.body, node.orelse)
        return any(_is_none(side) for side in sides) and any(
            _is_empty_list(side) or _is_placeholder_list(side) for side in sides
        )
    return _is_empty_list(node) or _is_placeholder_list(node)


def _generation_loop(loop: cst.CSTNode, function: cst.FunctionDef) -> bool:
    """A loop that generates until it is done: `while` (until EOS or a length), or a
    range over a length (`range(max_new_tokens)`), not a few speculative steps
    (`range(n_spec_tokens)`, or a length bound by a draft count: `max_new_tokens =
    min(self.num_assistant_tokens, ...)`, `chunks.draft_bounded`)."""
    if isinstance(loop, cst.While):
        return True
    if not (isinstance(loop, cst.For) and isinstance(loop.iter, cst.Call)):
        return False
    if not (isinstance(loop.iter.func, cst.Name) and loop.iter.func.value == "range"):
        return False
    args = loop.iter.args
    if not 1 <= len(args) <= 2:
        return False  # a step: a walk in chunks (`range(a, end, chunk_length)`), not steps
    stop = args[-1].value
    if C.draft_bounded(function, stop) is not None:
        return False
    return any(_GENERATION_LENGTH.search(name.lower()) for name in _names_in(stop))


_GENERATION_LENGTH = compile_lazily(r"(max|length|len\b|new_tokens|gen)")


def _extended_by_call(grow: Use, expr: cst.BaseExpression | None, context) -> bool:
    """`frames.extend(self._make_inference(model, img0, img1, n))`: each iteration adds the
    list a call returns, as many chunks as it makes (RIFE's interpolated frames between two
    input frames), so the chunks are not bounded by the slices the call reads; a split of a
    tensor (`xs.extend(t.split(n))`) is views of it. A list literal (`xs.extend([chunk])`)
    adds the one chunk it names."""
    call = grow.ancestors[-2] if len(grow.ancestors) > 1 else None
    return (
        isinstance(expr, cst.Call)
        and _role(grow, context) == "extend"
        and isinstance(call, cst.Call)
        and bool(call.args)
        and call.args[0].value is expr
        and _last_name(expr.func) not in _SPLIT_METHODS
    )


_SPLIT_METHODS = frozenset({"split", "chunk", "unbind", "tensor_split", "split_with_sizes"})


def _none_test(parent: cst.CSTNode | None, node: cst.CSTNode) -> bool:
    """`xs is None`, `xs is not None`: whether the optional list was made."""
    return (
        isinstance(parent, cst.Comparison)
        and parent.left is node
        and len(parent.comparisons) == 1
        and isinstance(parent.comparisons[0].operator, (cst.Is, cst.IsNot))
        and _is_none(parent.comparisons[0].comparator)
    )


def _operand_of_test(chain: Sequence[cst.CSTNode], node: cst.CSTNode) -> bool:
    """`if flag and xs:`: the list (or `xs is not None`) as one operand of an `and`/`or`
    chain that is an `if`/`while` test."""
    child: cst.CSTNode = node
    index = len(chain) - 1
    if index >= 0 and _none_test(chain[index], child):
        child, index = chain[index], index - 1
    seen = False
    while index >= 0 and isinstance(chain[index], cst.BooleanOperation):
        child, index, seen = chain[index], index - 1, True
    if not seen or index < 0:
        return False
    test = chain[index]
    return isinstance(test, (cst.If, cst.While, cst.IfExp)) and test.test is child


def _is_none(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


def _is_placeholder_list(node: cst.BaseExpression) -> bool:
    """`[None] * n` or `[None for _ in range(n)]`: slots a loop fills by index
    (`out[i] = chunk`) before the concatenation."""
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply):
        return any(_is_none_list(side) for side in (node.left, node.right))
    return (
        isinstance(node, cst.ListComp)
        and isinstance(node.elt, cst.Name)
        and node.elt.value == "None"
        and node.for_in.inner_for_in is None
        and not node.for_in.ifs
    )


def _is_none_list(node: cst.BaseExpression) -> bool:
    return (
        isinstance(node, cst.List)
        and len(node.elements) == 1
        and isinstance(node.elements[0], cst.Element)
        and isinstance(node.elements[0].value, cst.Name)
        and node.elements[0].value.value == "None"
    )


def _index_subscript(subscript: cst.Subscript) -> bool:
    """`xs[i]`: one element, not a slice (`xs[a:b] = ...` replaces several)."""
    return (
        len(subscript.slice) == 1
        and isinstance(subscript.slice[0], cst.SubscriptElement)
        and isinstance(subscript.slice[0].slice, cst.Index)
    )


def _is_empty_list(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.List) and not node.elements:
        return True
    return (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Name)
        and node.func.value == "list"
        and not node.args
    )


def _grown_value(use: Use) -> cst.BaseExpression | None:
    parent = use.ancestors[-1]
    if isinstance(parent, cst.Subscript):  # `out[i] = chunk`
        assign = use.ancestors[-3]
        assert isinstance(assign, cst.Assign)
        return assign.value
    if isinstance(parent, cst.Attribute):
        call = use.ancestors[-2]
        assert isinstance(call, cst.Call)
        value = call.args[0].value
        if parent.attr.value == "extend":
            # `frames.extend(self._interpolate(a, b))`: a helper's list of new values; the
            # call stands for each of them.
            return _single_element(value) or (value if isinstance(value, cst.Call) else None)
        return value
    if isinstance(parent, cst.AugAssign):
        return _single_element(parent.value)
    return None


def _single_element(value: cst.BaseExpression) -> cst.BaseExpression | None:
    if isinstance(value, (cst.List, cst.Tuple)) and value.elements:
        first = value.elements[0]
        if isinstance(first, cst.Element):
            return first.value
    if isinstance(value, (cst.ListComp, cst.GeneratorExp)):
        return value.elt
    return value if isinstance(value, cst.Name) else None


def _loop_carried(
    name: str,
    cat_assign: cst.Assign,
    loop: cst.CSTNode,
    index: NameUses,
    running: frozenset[int] = frozenset(),
) -> bool:
    """The value concatenated onto comes from the previous iteration: no other binding of
    the name in the loop except under a first-iteration or `is None` branch, or another
    running form onto it (`running`: the ids of such assignments, a helper called either
    way round on two branches)."""
    for use in index.of(name):
        if not any(a is loop for a in use.ancestors) or any(a is cat_assign for a in use.ancestors):
            continue
        if any(id(a) in running for a in use.ancestors):
            continue
        parent = use.ancestors[-1] if use.ancestors else None
        if not isinstance(
            parent,
            (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.NamedExpr, cst.For, cst.AsName),
        ):
            continue
        branch = next((a for a in reversed(use.ancestors) if isinstance(a, cst.If)), None)
        if branch is None or not any(
            a is loop for a in use.ancestors[: use.ancestors.index(branch)]
        ):
            return False
        if not _is_first_iteration_test(branch.test):
            return False
    return True


def _is_first_iteration_test(test: cst.BaseExpression) -> bool:
    """`i == 0`, `x is None`, `not xs`, `first`-named flags."""
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        comparison = test.comparisons[0]
        if isinstance(comparison.operator, cst.Equal) and isinstance(
            comparison.comparator, cst.Integer
        ):
            return comparison.comparator.evaluated_value == 0
        if isinstance(comparison.operator, cst.Is) and isinstance(comparison.comparator, cst.Name):
            return comparison.comparator.value == "None"
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return True
    return isinstance(test, cst.Name) and "first" in test.value


# -- loops ----------------------------------------------------------------------------------


def _loops_between(chain: Sequence[cst.CSTNode], top: cst.CSTNode) -> list[cst.CSTNode]:
    started = False
    loops: list[cst.CSTNode] = []
    for node in chain:
        if node is top:
            started = True
        if started and isinstance(node, (cst.For, cst.While)):
            loops.append(node)
    return loops


def _loop_between(chain: Sequence[cst.CSTNode], top: cst.CSTNode) -> cst.CSTNode | None:
    """The innermost loop at or below `top` in the chain."""
    loops = _loops_between(chain, top)
    return loops[-1] if loops else None


def _running_helper_assigns(
    context, owner: cst.ClassDef | None, name: str, loop: cst.CSTNode
) -> frozenset[int]:
    """The assignments in `loop` of `name = helper(..., name, ...)` where the helper
    concatenates its arguments (`chunks.concatenating_helper`) with `name` among them."""
    found: set[int] = set()

    def enter(node: cst.CSTNode) -> None:
        if not (
            isinstance(node, cst.Assign)
            and isinstance(node.value, cst.Call)
            and len(node.targets) == 1
            and isinstance(node.targets[0].target, cst.Name)
            and node.targets[0].target.value == name
        ):
            return
        helper = C.concatenating_helper(context, node.value, owner)
        if helper is None:
            return
        positional = [a.value for a in node.value.args if a.keyword is None and not a.star]
        if any(
            i < len(positional)
            and isinstance(positional[i], cst.Name)
            and positional[i].value == name  # type: ignore[attr-defined]
            for i in helper[1]
        ):
            found.add(id(node))

    walk(loop, enter, lambda node: None)
    return frozenset(found)


def _innermost_loop(
    ancestors: Sequence[cst.CSTNode], function: cst.FunctionDef
) -> cst.CSTNode | None:
    found = None
    inside = False
    for node in ancestors:
        if node is function:
            inside = True
            continue
        if inside and isinstance(node, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            return None
        if inside and isinstance(node, (cst.For, cst.While)):
            found = node
    return found


def _updated_in_place(use: Use) -> bool:
    """`xs[i].add_(...)`, `xs[i].copy_(...)`, `xs[i] += ...`: one element written in place."""
    chain = use.ancestors
    if len(chain) < 3 or not isinstance(chain[-1], cst.Subscript):
        return False
    subscript, above = chain[-1], chain[-2]
    if not _index_subscript(subscript):
        return False
    if isinstance(above, cst.AugAssign):
        return above.target is subscript
    if isinstance(above, cst.Attribute) and isinstance(chain[-3], cst.Call):
        method = above.attr.value
        return chain[-3].func is above and method.endswith("_") and not method.startswith("_")
    return False


def _loop_targets(chain: Sequence[cst.CSTNode]) -> set[str]:
    names: set[str] = set()
    for node in chain:
        if isinstance(node, cst.For):
            names |= _names_in(node.target)
    return names


def _small_loop(
    loop: cst.CSTNode, min_count: int, index: NameUses, facts=None, header=None
) -> str | None:
    """Why a loop gives few chunks (issue 12's loop structure), or None: a literal range or
    sequence shorter than `min-constant-count`, model structure (layers, heads, scales,
    `config` counts), or the samples of a batch."""
    if _small_or_model_axis(loop, min_count, index):
        return "few chunks: the loop walks a short literal, model structure or a config count"
    if isinstance(loop, cst.For) and _feature_levels(loop, facts, header):
        return (
            "few chunks: the loop walks the levels of a feature pyramid (a handful of "
            "feature maps, each a fraction of the size of the one before)"
        )
    if isinstance(loop, cst.For):
        for dotted in _dotted_names_in(loop.iter):
            words = set(dotted.lower().replace(".", "_").split("_"))
            if words & {"batch", "bs", "bsz", "prompts", "samples"}:
                return "few chunks: one per sample of a batch"
        if _walks_the_batch(loop.iter, facts, header) or (
            facts is not None and C.batch_loop(facts, loop, header)
        ):
            return "few chunks: one per sample of a batch"
    return None


_PYRAMID_WORDS = frozenset({"fpn", "pyramid", "mlvl", "multiscale", "multilevel"})
_FEATURE_WORDS = frozenset({"feat", "feats", "feature", "features", "fmap", "fmaps"})


def _feature_levels(loop: cst.For, facts, header) -> bool:
    """`for features in x` (`x: List[Tensor]`, a detection head's input), `for lvl, feat in
    enumerate(mlvl_feats)`, `for f in multi_scale_features`: the levels of a feature
    pyramid, a few feature maps of shrinking size. Named for a pyramid (`fpn`, `mlvl`,
    `multi_scale`, `pyramid`), or for features and iterating a list the function was given
    (a parameter that is not a tensor)."""
    iterable = loop.iter
    if _is_call_to(iterable, "enumerate") and iterable.args:
        iterable = iterable.args[0].value
    names = _dotted_names_in(iterable) + sorted(_names_in(loop.target))
    words: set[str] = set()
    for dotted in names:
        parts = dotted.lower().replace(".", "_").split("_")
        words |= set(parts) | {a + b for a, b in zip(parts, parts[1:])}
    if words & _PYRAMID_WORDS:
        return True
    if not (words & _FEATURE_WORDS) or not isinstance(iterable, cst.Name):
        return False
    if facts is None or header is None:
        return False
    sites = facts.reaching(header, iterable.value)
    return (
        bool(sites)
        and all(site.kind == "param" for site in sites)
        and not facts.expression(iterable, header).is_tensor
    )


def _walks_the_batch(iterable: cst.BaseExpression, facts, header) -> bool:
    """`for x in z.split(1)` / `z.unbind(0)` / `for data, pos in zip(x, ids)` over a tensor:
    one step per sample along the batch dimension."""
    if _is_call_to(iterable, "zip") or _is_call_to(iterable, "enumerate"):
        return any(_walks_the_batch(a.value, facts, header) for a in iterable.args)
    if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Attribute):
        method, args = iterable.func.attr.value, iterable.args
        if method == "split" and len(args) == 1 and _literal_int(args[0].value) == 1:
            return True
        if method == "unbind" and (not args or _literal_int(args[0].value) == 0):
            return True
    if isinstance(iterable, cst.Name) and facts is not None and header is not None:
        # A tensor iterated along dim 0; not an element of a list of lists (`for tile in
        # row` over a row of decoded tiles walks tiles, not samples).
        sites = facts.reaching(header, iterable.value)
        if (
            sites
            and any(_split_off_the_batch(site.value) for site in sites)
            and all(
                _split_off_the_batch(site.value) or _list_rebuilt_from(site.value, iterable.value)
                for site in sites
            )
        ):
            # `for piece in torch.chunk(x, n, dim=2)` (also after `pieces = [pieces[0]] +
            # [cat(...) for ...]` pads each piece with its neighbour's frames): along time.
            return False
        fact = facts.expression(iterable, header)
        return fact.is_tensor and not fact.element_of
    return False


def _dataset_file(path: str, facts: F.FunctionFacts) -> bool:
    """The file or the owning class is named for a dataset (`dataset_multiview.py`,
    `video_super_resolution_dataset.py`, `class VideoDataset`)."""
    stem = path.replace("\\", "/").rsplit("/", 1)[-1].lower()
    owner = (_owner_name(facts) or "").lower()
    return "dataset" in stem or owner.endswith(("dataset", "data"))


def _list_rebuilt_from(value: cst.BaseExpression | None, name: str) -> bool:
    """A list display, comprehension or sum of them that reads `name` (`pieces =
    [pieces[0]] + [torch.cat((pieces[i - 1][:, :, -2:], pieces[i]), dim=2) for i in ...]`)."""

    def is_list(node: cst.BaseExpression) -> bool:
        if isinstance(node, (cst.List, cst.ListComp)):
            return True
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add):
            return is_list(node.left) and is_list(node.right)
        return False

    return value is not None and is_list(value) and name in _names_in(value)


def _split_off_the_batch(value: cst.BaseExpression | None) -> bool:
    """`torch.chunk(x, n, dim=2)`, `x.split(size, dim=-3)`: pieces along a dimension
    other than the batch's (a literal `dim` other than 0)."""
    if not isinstance(value, cst.Call) or _last_name(value.func) not in ("chunk", "split"):
        return False
    for position, arg in enumerate(value.args):
        func = value.func
        bare = 2 if isinstance(func, cst.Name) or _last_name(func.value) == "torch" else 1  # type: ignore[attr-defined]
        if (arg.keyword is not None and arg.keyword.value == "dim") or (
            arg.keyword is None and position == bare
        ):
            expr = arg.value
            if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
                return isinstance(expr.expression, cst.Integer)
            dim = _literal_int(expr)
            return dim is not None and dim != 0
    return False


def _small_or_model_axis(loop: cst.CSTNode, min_count: int, index: NameUses) -> bool:
    if isinstance(loop, cst.For):
        return _iterable_is_small_or_model_axis(loop.iter, min_count, index)
    return False


def _iterable_is_small_or_model_axis(
    iterable: cst.BaseExpression, min_count: int, index: NameUses
) -> bool:
    if isinstance(iterable, (cst.Tuple, cst.List, cst.Set)):
        return len(iterable.elements) < min_count
    if (
        _is_call_to(iterable, "enumerate")
        or _is_call_to(iterable, "zip")
        or _is_call_to(iterable, "reversed")
    ):
        if any(_iterable_is_small_or_model_axis(a.value, min_count, index) for a in iterable.args):
            return True
    if isinstance(iterable, cst.Name):
        literal = _literal_binding(iterable.value, index)
        if literal is not None and len(literal.elements) < min_count:
            return True
    if _is_call_to(iterable, "range"):
        values = [_literal_int(arg.value) for arg in iterable.args]
        if values and all(v is not None for v in values):
            length = len(range(*values))  # type: ignore[arg-type]
            if length < min_count:
                return True
    for dotted in _dotted_names_in(iterable):
        parts = dotted.split(".")
        if parts[-1] in T.METADATA_ATTRIBUTES and parts[-1] != "config":
            continue  # `range(0, hidden_states.shape[1], n)`: a length, not model structure
        if "config" in parts[:-1] or parts[0] == "config" or parts[-1] == "config":
            return True
        if _MODEL_AXIS.search(parts[-1]) or _MODEL_COUNT.search(parts[-1]):
            return True
        if "shapes" in parts[-1].split("_"):
            return True  # one step per feature level (`spatial_shapes`)
    return False


def _literal_binding(name: str, index: NameUses) -> cst.Tuple | cst.List | None:
    """The tuple or list literal a local is bound to, when that is its only binding."""
    literal = None
    for use in index.of(name):
        parent = use.ancestors[-1] if use.ancestors else None
        if isinstance(parent, cst.AssignTarget):
            assign = use.ancestors[-2]
            if literal is not None or not isinstance(assign, cst.Assign):
                return None
            if not isinstance(assign.value, (cst.Tuple, cst.List)):
                return None
            literal = assign.value
        elif isinstance(parent, (cst.AugAssign, cst.For, cst.NamedExpr, cst.AsName, cst.Param)):
            return None
        elif isinstance(parent, cst.Attribute) and parent.value is use.node:
            return None  # `.append` and friends may grow it
    return literal


def _once_per_iteration(chain: Sequence[cst.CSTNode], loop: cst.For) -> bool:
    """The statement runs exactly once per iteration: no if/try/loop between, no break/continue."""
    if loop.orelse is not None:
        return False
    inside = False
    for node in chain:
        if node is loop:
            inside = True
            continue
        if inside and isinstance(
            node,
            (
                cst.If,
                cst.Try,
                cst.TryStar,
                cst.For,
                cst.While,
                cst.Match,
                cst.IfExp,
                cst.BooleanOperation,
            ),
        ):
            return False
    finder = _JumpFinder()
    visit(loop.body, finder)
    return not finder.found


class _JumpFinder(cst.CSTVisitor):
    def __init__(self) -> None:
        self.found = False

    def visit_Break(self, node: cst.Break) -> None:
        self.found = True

    def visit_Continue(self, node: cst.Continue) -> None:
        self.found = True

    def visit_For(self, node: cst.For) -> bool:
        return False  # its own break/continue

    def visit_While(self, node: cst.While) -> bool:
        return False

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False


def _count_expression(
    context,
    loop: cst.For,
    index: NameUses,
    before_loop: Sequence[cst.CSTNode],
    parameters: set[str],
) -> tuple[str, bool] | None:
    """Code for the number of iterations, evaluated where the list was created; and whether
    it is certain to evaluate without error."""
    iterable = loop.iter
    rebound = _assigned_in(before_loop, index)
    if _is_call_to(iterable, "range"):
        args = iterable.args
        if not args or any(a.keyword is not None or a.star for a in args):
            return None
        if any(not _is_simple(a.value) for a in args) or any(
            _names_in(a.value) & rebound for a in args
        ):
            return None
        if len(args) == 1:
            return context.source_of(args[0].value), True
        return f"len({context.source_of(iterable)})", True
    sequence = iterable
    if (
        _is_call_to(iterable, "enumerate")
        and len(iterable.args) == 1
        and iterable.args[0].keyword is None
    ):
        sequence = iterable.args[0].value
    if isinstance(sequence, cst.Name) and sequence.value not in rebound:
        return f"len({sequence.value})", _is_sized_local(sequence.value, index, parameters)
    return None


def _is_sized_local(name: str, index: NameUses, parameters: set[str]) -> bool:
    """Every binding of the local builds a list or tuple (so `len` works)."""
    values = []
    for use in index.of(name):
        parent = use.ancestors[-1] if use.ancestors else None
        if isinstance(parent, cst.AssignTarget):
            assign = use.ancestors[-2]
            if not isinstance(assign, cst.Assign) or len(assign.targets) != 1:
                return False
            values.append(assign.value)
        elif isinstance(
            parent,
            (
                cst.AugAssign,
                cst.For,
                cst.CompFor,
                cst.NamedExpr,
                cst.WithItem,
                cst.AsName,
                cst.Param,
            ),
        ):
            return False
    if not values or name in parameters:
        return False
    for value in values:
        if isinstance(value, (cst.List, cst.ListComp, cst.Tuple)):
            continue
        if (
            isinstance(value, cst.Call)
            and isinstance(value.func, cst.Name)
            and value.func.value in ("list", "tuple", "sorted")
        ):
            continue
        if (
            isinstance(value, cst.Call)
            and isinstance(value.func, cst.Attribute)
            and value.func.attr.value in ("split", "chunk", "unbind", "tensor_split")
        ):
            continue
        return False
    return True


def _releasable_chunk(
    chunk: cst.BaseExpression | None,
    statement: cst.CSTNode | None,
    body: Sequence[cst.CSTNode],
    index: NameUses,
) -> str | None:
    """A local chunk bound in `body` (a loop body or a branch of it) before any read of it
    there, read nowhere else, and never read after `statement` (its append): `del` after
    the append is then safe."""
    if not isinstance(chunk, cst.Name):
        return None
    name = chunk.value
    body = list(body)
    if not any(statement is s for s in body):
        return None
    position = next(i for i, s in enumerate(body) if s is statement)
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return None
    first_bound = None
    for i, s in enumerate(body[:position]):
        if (
            isinstance(s, cst.SimpleStatementLine)
            and len(s.body) == 1
            and isinstance(s.body[0], cst.Assign)
        ):
            assign = s.body[0]
            targets = assign.targets
            if (
                len(targets) == 1
                and isinstance(targets[0].target, cst.Name)
                and targets[0].target.value == name
            ):
                if name in _names_in(assign.value):
                    return None  # reads the previous iteration's value first
                first_bound = i
                break
    if first_bound is None:
        return None
    for use in index.of(name):
        if use.nested:
            return None
        owner = next((a for a in use.ancestors if any(a is s for s in body)), None)
        if owner is None:
            return None  # used outside the loop body
        at = next(i for i, s in enumerate(body) if s is owner)
        if at < first_bound or at > position:
            return None
    return name


# -- small syntax helpers -------------------------------------------------------------------


def _argument(
    call: cst.Call, position: int | None, keywords: Sequence[str]
) -> cst.BaseExpression | None:
    positional = [a for a in call.args if a.keyword is None and not a.star]
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value in keywords:
            return arg.value
    if position is not None and position < len(positional):
        return positional[position].value
    return None


def _innermost_function(ancestors: Sequence[cst.CSTNode]) -> cst.FunctionDef | None:
    for node in reversed(ancestors):
        if isinstance(node, cst.FunctionDef):
            return node
        if isinstance(node, (cst.Lambda, cst.ClassDef)):
            return None
    return None


def _body(node: cst.CSTNode) -> Sequence[cst.CSTNode]:
    if isinstance(node, (cst.IndentedBlock, cst.SimpleStatementSuite, cst.Module)):
        return node.body
    return ()


def _statement_position(chain: Sequence[cst.CSTNode]) -> tuple[cst.CSTNode | None, int]:
    """The block holding the statement of a use, and the statement's index in it."""
    for i in range(len(chain) - 1, 0, -1):
        if isinstance(chain[i], cst.SimpleStatementLine) and isinstance(
            chain[i - 1], cst.IndentedBlock
        ):
            block = chain[i - 1]
            for j, statement in enumerate(_body(block)):
                if statement is chain[i]:
                    return block, j
    return None, -1


def _child_index(chain: Sequence[cst.CSTNode], block: cst.CSTNode) -> int | None:
    for i, node in enumerate(chain):
        if node is block and i + 1 < len(chain):
            child = chain[i + 1]
            for j, statement in enumerate(_body(block)):
                if statement is child:
                    return j
    return None


def _enclosing_statement(chain: Sequence[cst.CSTNode]) -> cst.CSTNode:
    for node in reversed(chain):
        if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            return node
    raise AssertionError("a use outside any statement")


def _is_call_to(node: cst.BaseExpression, name: str) -> TypeGuard[cst.Call]:
    return (
        isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == name
    )


def _is_zero_test(test: cst.BaseExpression, name: str) -> bool:
    return (
        isinstance(test, cst.Comparison)
        and isinstance(test.left, cst.Name)
        and test.left.value == name
        and len(test.comparisons) == 1
        and isinstance(test.comparisons[0].operator, cst.Equal)
        and isinstance(test.comparisons[0].comparator, cst.Integer)
        and test.comparisons[0].comparator.evaluated_value == 0
    )


def _literal_int(node: cst.BaseExpression) -> int | None:
    if isinstance(node, cst.Integer):
        return int(node.evaluated_value)
    if (
        isinstance(node, cst.UnaryOperation)
        and isinstance(node.operator, cst.Minus)
        and isinstance(node.expression, cst.Integer)
    ):
        return -int(node.expression.evaluated_value)
    return None


def _is_simple(node: cst.BaseExpression) -> bool:
    """Names, attributes, constant subscripts, literals and arithmetic: cheap, no calls."""
    if isinstance(node, (cst.Name, cst.Integer)):
        return True
    if isinstance(node, cst.Attribute):
        return _is_simple(node.value)
    if isinstance(node, cst.UnaryOperation):
        return _is_simple(node.expression)
    if isinstance(node, cst.BinaryOperation):
        return _is_simple(node.left) and _is_simple(node.right)
    if _is_call_to(node, "len") and len(node.args) == 1 and node.args[0].keyword is None:
        return isinstance(node.args[0].value, (cst.Name, cst.Attribute)) and _is_simple(
            node.args[0].value
        )
    if isinstance(node, cst.Subscript):
        return _is_simple(node.value) and all(
            isinstance(s.slice, cst.Index) and _is_simple(s.slice.value) for s in node.slice
        )
    return False


def _names_in(node: cst.CSTNode) -> set[str]:
    finder = _NameCollector()
    visit(node, finder)
    return finder.names


def _dotted_names_in(node: cst.CSTNode) -> list[str]:
    collector = _DottedCollector()
    visit(node, collector)
    return collector.dotted


class _NameCollector(cst.CSTVisitor):
    def __init__(self) -> None:
        self.names: set[str] = set()

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        visit(node.value, self)
        return False


class _DottedCollector(cst.CSTVisitor):
    def __init__(self) -> None:
        self.dotted: list[str] = []

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        parts = [node.attr.value]
        value: cst.BaseExpression = node.value
        while isinstance(value, cst.Attribute):
            parts.append(value.attr.value)
            value = value.value
        if isinstance(value, cst.Name):
            parts.append(value.value)
        self.dotted.append(".".join(reversed(parts)))
        if not isinstance(value, cst.Name):
            visit(value, self)  # `f(x).y`: the names inside the call (a plain base is the chain's)
        return False

    def visit_Name(self, node: cst.Name) -> None:
        self.dotted.append(node.value)


def _assigned_in(statements: Sequence[cst.CSTNode], index: NameUses) -> set[str]:
    """Names bound or deleted anywhere in these statements (from the shared name uses)."""
    return {
        name
        for name, uses in index.names.items()
        if any(
            (use.binding or use.deleted) and any(use.inside(s) for s in statements) for use in uses
        )
    }


def _strip_of_grid(context, element: cst.Call, clauses: Sequence[cst.CompFor]) -> bool:
    """`torch.cat(tiles[i * n : (i + 1) * n], dim=-1)` for `i` of the comprehension: one row
    strip of a grid kept as a flat list, a new tensor per row (not a model's work)."""
    if _kind_of(context, element) is None:
        return False
    tensors = _argument(element, 0, ("tensors",))
    if not isinstance(tensors, cst.Subscript) or len(tensors.slice) != 1:
        return False
    piece = tensors.slice[0].slice
    if not isinstance(piece, cst.Slice) or piece.lower is None or piece.upper is None:
        return False
    targets = set().union(*(_names_in(clause.target) for clause in clauses))
    return bool(targets & _names_in(piece.lower)) and bool(targets & _names_in(piece.upper))
