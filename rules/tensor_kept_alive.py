"""LL001 tensor-kept-alive: a dead tensor stays bound across heavy work.

The rule reads trigger -> query -> decide -> fix: every function (`leave_FunctionDef`) is
asked of the facts layer (`lifetime_lint.analysis.facts`), which says what each binding
holds, which calls are heavy and how the function flows; the rule decides where a binding
that alone owns a tensor dies while heavy work still runs, rates the finding
(`lifetime_lint.analysis.significance`), and inserts `del`.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import libcst as cst

from lifetime_lint.analysis import chunks as C
from lifetime_lint.analysis import facts as F
from lifetime_lint.analysis import significance as S
from lifetime_lint.analysis import tables as T
from lifetime_lint.analysis.cfg import DefSite, Node, StatementInfo
from lifetime_lint.analysis.class_config import off_default_path
from lifetime_lint.analysis.dataflow import Dataflow
from lifetime_lint.analysis.decoders import (
    decodes_feature_maps,
    from_decoder_stage,
    tile_decoder_span,
)
from lifetime_lint.analysis.domain import (
    AUDIO_STREAM,
    LARGE_DOMAIN,
    TEXT_STREAM,
    UNJUDGED_DOMAIN,
    class_domain,
    code_mentions_video,
    frame_wise_classes,
    latent_width_classes,
    one_frame_classes,
    recurrent_cells,
    runs_against_cache,
    short_stream,
    short_stream_classes,
    short_stream_input,
)
from lifetime_lint.analysis.tables import FEED_FORWARD_SUBMODULES, MODEL_CALLS
from lifetime_lint.devices import Portability
from lifetime_lint.diagnostics import Applicability, Edit, Fix
from lifetime_lint.fixes import Target, reference_to, target_problem
from lifetime_lint.globs import glob_matcher
from lifetime_lint.imports import dotted_name
from lifetime_lint.lazy_regex import compile_lazily
from lifetime_lint.rule import Option, Rule
from lifetime_lint.rules.autograd_history_kept import held_by_autograd
from lifetime_lint.traversal import LEAF_TYPES, child_nodes, walk


def _validate_patterns(value: list[str]) -> str | None:
    for pattern in value:
        if not pattern or pattern.strip() != pattern:
            return f"not a callee pattern: {pattern!r}"
    return None


class TensorKeptAlive(Rule):
    """
    ## What it does
    Flags a local variable that alone holds a tensor no longer needed (nothing reads it
    again) while heavy work still runs before the function returns or the name is rebound:
    a model-level call (a denoise loop, a VAE decode, an encoder, `generate`), a collective,
    a sublayer of a block, an allocating torch op over big inputs (`F.conv3d`), an
    output-sized concatenation, or a call matching `heavy-calls`. It names the variable,
    what it likely holds and its size class, the line of its last use, what it is held
    across, and how much the finding likely matters (significance `low`, `medium` or
    `high`, also a property of the finding in JSON and SARIF output).

    ## Why is this bad?
    A tensor is freed when its last reference goes away; a local variable is a reference
    until the function returns. A flagged tensor adds its full size to the peak memory of
    the work it is held across: the decoded tiles of a tiled VAE decode held through the
    final concatenation, the attention output of a video transformer block held through the
    block's feed-forward (about 96 MiB at 32,760 tokens in Wan 2.1; releasing it lowered the
    denoise peak by 6%), the old cache entry of a cached convolution held while the
    convolution allocates. A name rebound in a loop keeps the previous iteration's value
    alive during this iteration's heavy call. (The saving is in inference and under
    `torch.no_grad()`; while training, autograd may keep the same tensor for the backward
    pass, and `del` then frees nothing, at no cost.)

    What is worth a finding is the held bytes at the peak of what they are held across, so
    each finding is rated (see `docs/architecture.md` for the measurements behind the bar):
    - `high`: large values (decoded tiles, frames or images, logits; the feature maps of an
      encoder-decoder network's decoder stage, bound to `self.decoder_level1(h)` or named
      for it in a restoration U-Net whose forward also runs `self.encoder_level1`, outside a
      class named for an autoencoder: rated the same, and the message calls them feature maps, not decoded
      tiles) held across model-level work, a block's peak sublayer or an output-sized
      concatenation; a decode-named value renamed for weights or a query (`q_tiles =
      quantize_tiles(tiles)`, `quantized_tiles`) is no longer decoded output; in a file
      too short to show what its model works on, where no file, folder or class name says
      image, video, VAE, autoencoder or U-Net and the function names no VAE, U-Net or
      diffusion model (`significance.pixel_named`), such a value is rated the same but the
      message says only what the code shows: a decoder's output or a value named for
      frames, large if it is pixels (an RL policy's or a text or speech model's decoder
      returns hidden states);
    - `medium`: activation-sized values (a layer's output, a model's hidden states, an old
      cache entry) of a model that works on many tokens (a video model: tens of thousands
      of tokens per activation) held across the sublayer that sets a block's peak
      (feed-forward, self-attention, the attention kernel, a convolution stack) or a
      collective; large values held across one other sublayer;
    - `low`: activations of a model that works on thousands of tokens or fewer (an image
      DiT at 1024^2 holds about 4k tokens, 16-24 MiB per activation; an LLM layer, beside
      weights and a KV cache that dwarf one activation; a vision encoder, a perceiver
      resampler; a streaming causal block that runs a few latent frames per call against a
      KV cache, which it takes as a parameter) or of a file too short to show that it works
      on more (no evidence of many tokens; unless the file's own name says video and its
      code unpacks a 5-D shape or builds a `Conv3d`, `wan_video_camera_controller.py`: a
      video module, rated as one), activation-class values held across a whole
      model call (a VAE decode, a transformer call, a denoise loop: what is held there is
      at the model's interface, latents, embeddings, predictions or masks), logits (the
      sampled positions' or a few hundred queries' scores), a decoded waveform, values
      named for audio in an audio-video model (`audio_input`: the audio stream, a few
      hundred tokens), activations
      held across one other sublayer (cross-attention, a piece of a
      sublayer such as `self.attn1.to_out[0]`), embeddings of unknown size and latents
      (usually a few MiB) held across anything, values read only broadcast over two or
      more new axes (`token_types[:, :, None, None, :]`: per-frame embeddings added over
      height and width, a fraction of an activation), buffers whose shape the analysis cannot
      see (`torch.zeros(b, pad_len, dim)`: paddings and accumulators in the samples read),
      decoded tiles of an image model (4-D `[b, c, h, w]` tiles, or a file or class named
      for an image family: a whole image is tens of MiB, less than one tile's decoder
      activations), the decoded tiles of a tiled video decode held across its merge where
      each tile call decodes a batch of latent frames, every frame of its tile, or whole
      frames (temporal tiles; `analysis.decoders`: the call's activations set the peak, the
      merge saved 0 MiB in Mochi, LTX-Video, HunyuanVideo 1.5 and CogVideoX on an H200;
      one latent frame per call, as in Wan's causal VAE, keeps `high`), the previous chunk of decoded frames held across the next decoder
      call (the decoder's activations dwarf one chunk), a list rebound on every iteration
      of a loop whose body appends each iteration's value, or its concatenation, to a list
      bound outside the loop (`time = []` ... `row.append(torch.cat(time, dim=2))` in a
      tiled decode) and held past the loop's end (`chunks.rebuilt_part`: it holds the last
      iteration's part only, one tile's frames, one of the parts the outer list keeps
      anyway), activations held across attention
      in an autoencoder (a file, folder or class named for a VAE: its attention runs in the
      mid block at the latent resolution, below the decoder's full-resolution peak), the
      input of a decoder (the value, or a slice of it, passed as a decoder call's main
      input: `x = self.post_quant_conv(z)` ... `self.decoder(x[:, :, i : i + 1])`, one
      latent frame, a tile's latents, and what a `post_quant_conv` feeding the decoder reads,
      `zt = torch.cat([z[..., i : i + t, j : j + t] ...], 0)` ... `tile =
      self.post_quant_conv(zt[:, :, k : k + 1])`, a batch of latent tiles; or of a layer `__init__` builds for the latent's
      channels, `self.conv_in = Conv3d(z_channels, ...)`: latent-sized, about 1/50 of the
      video it decodes), a slice of latents (`torch.cat([tile_latents[:, :, i : i + 1]
      ...])`), and tensors in host memory (a torch factory called without `device=` in a
      file that sets no default device, an image or video processor's output before it is
      moved to the device: they hold no GPU memory), the input of a recurrent cell
      (`self.rnn(x, (h, c))` where `__init__` binds `self.rnn = nn.LSTMCell(...)`: one time
      step, batch x features), a value already needed across a loop of the model's blocks
      (`for block, attn, upsample in self.ups:` calling the blocks it iterates) and held after
      it across one sublayer only (a U-Net's init residual, skip lists or conditioning
      context held across the final block: each block ran its own peak with it alive, so
      releasing it lowers only the tail), a list whose last use is a loop that only pops
      it (`h.pop()` in the up loop: drained, likely empty), the last chunk of a loop over
      slices whose bounds both move with the loop (`norm(x[:, start:end])` copied into a
      full buffer), held after the loop, values mixed with Gaussian noise
      (`(1 - s) * clean_video + s * torch.randn_like(...)`: latents, whatever their name),
      activations of a video architecture whose constructor's frame count defaults to 1
      (`max_frames: int = 1`: an image model), and anything in a file whose `torch` is
      OneFlow (`import oneflow as torch`: compiled into a graph that plans its own memory).
    Functions decorated `@torch.compile` or `@torch.jit.script` are not checked (the compiler
    plans their memory), and a function named for a quantity of a decode
    (`decode_mib_per_latent`, `decode_platform_cap`) runs no decoder.
    Buffers whose shape is all integer literals, of at most 16 MiB at fp32 (a warm-up's
    dummy input `torch.zeros(1, 1, 3, 180, 320)`), are not reported at all: the code states
    their size. Norms, projections (`to_q`, `to_out`, `*proj*`) and embeddings are not
    heavy work, nor is a pointwise convolution that keeps the channel count
    (`self.conv3 = nn.Conv3d(c, c, kernel_size=(1, 1, 1))`: a per-pixel projection), nor is a module whose name's last word says residual or gate, called on
    two or more tensors (`self.img_mlp_residual(residual, mlp_out, gate)`: a fused gated
    residual add, elementwise, after the feed-forward it is named for has run), nor is a
    module method named for clearing state (`vae.clear_cache()`, `reset_*`: it empties the
    feature cache's lists and allocates nothing), nor is resizing a mask
    (`F.interpolate(mask_.unsqueeze(0), ...)`: one channel, a fraction of an activation).
    How heavy work is follows from its inputs: a sublayer over the conditioning stream
    (`self.ff_context(norm_encoder_hidden_states)` in a dual-stream block: a few hundred
    text tokens) is one other sublayer whatever its name, and a projection of the
    conditioning stays conditioning-sized through nested sublayers
    (`self.norm_k(self.add_k_proj(context_img))`: 257 image tokens), and a sublayer over a
    noise level returns an embedding, not an activation (`vec = self.time_in(timestep)`: one
    vector per sample; also through a plain rename, `t = timestep` ... `self.time_in(t)`, and
    over a guidance-distilled model's guidance strength, `self.guidance_in(guidance)`); one over ids or sizes is light,
    one over decoded frames sets the peak; a helper of the file whose every tensor input
    is tiny (`_downsample_mask_to_latent(attention_mask, ...)`) is light work; a gather of
    an unpatchifying projection's output (`self.proj_out = nn.Linear(inner_dim,
    patch_size * patch_size * out_channels)`: latent channels a token) moves a fraction of
    one activation and counts as one other sublayer; an all-reduce (`dist.all_reduce(x)`,
    `tensor_model_parallel_all_reduce(x)`) reduces into its input and allocates nothing,
    nor does a gather of sizes, nor an object collective (`all_gather_object`, or a helper
    named for one, `_all_gather_group_objects`: pickled Python objects). A value held only across work lighter than the function's
    heaviest work (the post-norm after the vision tower, latent packing after the VAE
    encode) is not alive at the function's peak and counts one level down (where that makes
    it `low`, its message says so). A value held
    across both a nested model call and the block's feed-forward is rated, and named, at the
    feed-forward. Many tokens are told from the file's code: 5-D video tensors
    (`b, c, t, h, w = x.shape`, `Conv3d`, `num_frames`, a temporal patch size) and the words
    of video with those of generation (latents, timesteps, diffusion), in a file, folder
    and class not named for an image model (`transformer_qwenimage.py`,
    `...ImageProjection...`). In a file whose
    code is about audio or speech (mel, waveform, codebooks, CTC), detection
    post-processing, in a file or class named for a perceiver resampler (a few hundred
    learned latents), or a text model with a learned position table (no rotary positions),
    activations, outputs and logits are small (a few MiB at real sizes); so are the
    activations of any module of a package whose top-level name says speech or audio
    (`styletts2/Utils/JDC/model.py`, a pitch extractor over an 80-bin mel). A value
    backpropagated with no gradient (`loss = self.vae(img)` ... `backward(loss / k)`) is a
    scalar whatever call made it, and `decode` on an object of a serialization codec
    (`self.decoder = MsgpackDecoder()`) returns host objects, not frames. In a long file
    that shows neither images, video nor generation (a transducer's beam search), a value
    named for decoding (`beam_dec_out`) holds a decoder's hidden states, not decoded frames;
    and a function's pixels are frames only where its code, not its docstring, names video
    (SAM's "transformed to the input frame of the model" is a coordinate frame).
    In a model of two streams (audio-video, a dual-stream DiT, a mixture of transformers) a
    value of the short stream (audio latents, prompt or understanding tokens) is a few MiB
    whatever the file's domain. Its stream follows its name (`und_*`, `txt_*`,
    `encoder_hidden_states`, `context`) or its dataflow: an attention's output has its
    query's tokens, so in LTX-2's block the audio-to-video output is video-sized and the
    video-to-audio one audio-sized (measured on an H200: 96 MiB and 1 MiB off the block's
    peak). A sublayer over the short stream is not the block's peak. So is a whole class
    of the short stream: one the file builds only into an attribute named for that stream
    (or for none) and calls only on that stream (HunyuanVideo's token refiner,
    `self.context_embedder = TokenRefiner(...)` called on `encoder_hidden_states`: its
    blocks' generic `x`, `attn` and `mlp` run over the prompt's few hundred tokens; an
    `self.llm_adapter` called on `text_embeds`), and a class built only by such classes
    (the refiner's blocks). The same class also built for the video tokens
    (`self.patch_refiner = TokenRefiner(...)` called on `hidden_states`) keeps its size.
    A cross-attention's context (`y` of `CrossAttention.forward(self, x, y)`) is the text
    stream unless it falls back to the query. A value computed from weights alone, which no
    input of the function reaches (DoRA's `lora_weight`, `weight_norm`), is weight-sized,
    and a name ending in a singular `image` (`vace_reference_image`), or one for a picked
    frame of a clip (`first_frame_up`, `last_frame`, `ref_frame`: one frame, resized or not),
    one image: both small;
    so are a learned parameter tiled over the batch only (`token =
    self.token.clone().repeat(batch_size, 1, 1)`: its size set by the constructor; tiled over
    frames, `repeat(1, num_frames, 1)`, it keeps its size) and a processor's preprocessing
    of one image (`video = self.video_processor.preprocess_video(image)` in an
    image-to-video pipeline: one frame, whatever the value is named).
    In a video file that holds several models (diffusers' `attention.py`: SD3's image
    `JointTransformerBlock` beside AnimateDiff's video blocks), the video size goes per class:
    to a class named for video or whose code shows it, to the classes that build or name one,
    and to what those build; another class of the file works at image size. A finding that
    exists only on a path the model's own defaults never take (`attn_output` held across the
    feed-forward only when `self.attn2` is None, where the constructor's default and every
    construction in the file build `attn2`; a class the file builds only under a non-default
    selector; a concatenation under `if self.concat_after:` where the flag's constructor
    default is False and no construction in the file passes True) is `low`, and its
    message says so. A default of None, a value from a config or
    `**kwargs` keeps the finding.
    Findings in tests, examples, benchmarks and scripts (the non-library globs the
    portability rules share) are `low`: small inputs, run once.
    The default run reports `medium` and `high`; `min-significance = "low"` under
    `[tool.lifetime-lint]` shows the rest, and `--statistics` counts the findings below
    the bar.

    The analysis is a per-function control-flow graph (if/elif/else, for/while with else,
    break/continue, try/except/else/finally, with, match, return, raise, async forms) with
    backward liveness and forward reaching definitions, so:
    - a use in a later loop iteration keeps a name alive; names that die after the loop
      are flagged before what follows it;
    - `locals()`, `vars()`, `eval`, `exec`, frame inspection and names bound to them
      (`ev = eval`) read every local where they are called (diffusers' step callbacks), but
      do not hide what dies afterwards;
    - nothing is reported for a binding read by a closure, lambda or generator expression,
      declared `global`/`nonlocal`, stored into a container or attribute, or shared with
      another binding (`a, b = x.chunk(2)`, `y = x`, `x[0]`, `x.contiguous()`, a tuple of
      split views whose pieces are taken, `e = x.chunk(6)` then `[p.squeeze(1) for p in
      e]`), nor a name that says it is a mask (`prompt_attention_mask`): there `del`
      frees nothing, or frees a few KiB. Sharing is judged per binding: an earlier `parts = torch.split(x)`
      does not hide a later `x = torch.cat(...)`. A view chain through another name
      (`q_sbhd = query.view(...)` ... `query = q_sbhd.view(shape)`) is reported where both
      names are dead; on the path where the other name is still bound, it holds the
      storage too. Pieces of a base that stays bound on every path (`q, k, v =
      qkv.chunk(3)` with `qkv` never released) and pieces a same-file helper returns
      (`shift, scale, gate = self.get_ada_values(...)` over `values.unbind(dim=2)`) are
      reported only where every name sharing the storage dies at once, and the fix
      deletes them together.
    - a tensor held into the next forward of a loop that runs with grad enabled and never
      calls backward is LL006's finding (its fix, `torch.no_grad()`, frees the graph too),
      never LL001's. A value taken out of a container slot
      (`cache = cache_list[i]`) counts once the slot is overwritten (`cache_list[i] = new`):
      from there the local is the only owner. A container whose tensors keep their own
      names (`inputs = {"encoder_hidden_states": (prompt_embeds,)}`, or a helper's feature
      dict whose items the function takes out, `clip = features["clip"]`, or a list of
      slices of a bound tensor, `cat_k.append(k_pad[:, i : i + n])`) is not reported
      while those names (or views of them) may still be bound at the work it is held
      across: `del` frees at most the container. Once they are rebound or deleted, or for
      an element only the container holds (a model output put in it, `tiles.append(tile)`
      in a loop that rebinds `tile`), it is. A name whose last read is a guard that
      returns or raises when it holds something (`if fast is not None: return fast`) is
      None past it and holds nothing. Nothing in TorchScript or `torch.compile`d
      functions, nor in functions too large to analyse within the cost budget.

    Tensor-ness comes from dataflow, not from names: a binding counts when its value comes
    from torch, from a tensor method on a tensor, from a module call (`self.norm_q(q)` too),
    from an operator over tensors, or from a subscript or attribute of such a call
    (`self.vae.decode(z).sample`), or when it is annotated `torch.Tensor`. A tensor name
    rebound to an opaque function that takes it (`query = apply_rotary_emb(query, cos,
    sin)`) still holds what it held; unpacking a helper of the same file gives each name
    its own returned value (`video, mask = self.preprocess(...)`), and a helper annotated
    `-> tuple[torch.Tensor, ...]` over an opaque kernel returns tensors. Never a
    parameter, loop target, literal, `len(...)`, `math.ceil(...)`, `a // b` over numbers,
    `.shape[i]`, `.item()`, a string or path, a JSON or msgpack decode, an awaited RPC
    result, a value tested for truth (`if x:`), or the result of an unknown function. Small
    tensors (reductions, ids, masks, positions, timesteps, the token ids `generate`
    returns, the indices `torch.where(mask)` returns, index tensors built from
    `torch.arange` in a helper that a cached wrapper unpacks, a slice of at most two along
    an axis after the first such as a causal convolution's edge-frame pad `x[:, :, :1]`
    or the last token `x[:, -1:]`, and a halo allocated as one tensor's shape with such an
    axis, `x.new_zeros((b, c, 1, w))`: one frame of T, a fraction of its source) are never
    reported, nor is anything
    in a kernel-DSL body (`@triton.jit`, `@helion.kernel`, code calling `tl.*`/`hl.*`),
    whose values are per-tile registers.

    ## Example
    ```python
    def tiled_decode(self, z):
        t = z.shape[2]  # a causal decoder: one latent frame per call
        rows = []
        for i in range(0, z.shape[3], self.tile):
            row = []
            for j in range(0, z.shape[4], self.tile):
                frames = [z[:, :, k : k + 1, i : i + self.tile, j : j + self.tile] for k in range(t)]
                row.append(torch.cat([self.decoder(frame) for frame in frames], dim=2))
            rows.append(row)
        result_rows = []
        for i, row in enumerate(rows):
            if i > 0:
                row = [self.blend(rows[i - 1][j], tile) for j, tile in enumerate(row)]
            result_rows.append(torch.cat([tile[..., : self.stride] for tile in row], dim=4))
        return torch.cat(result_rows, dim=3)
    ```

    ## Use instead
    ```python
    def tiled_decode(self, z):
        t = z.shape[2]  # a causal decoder: one latent frame per call
        rows = []
        for i in range(0, z.shape[3], self.tile):
            row = []
            for j in range(0, z.shape[4], self.tile):
                frames = [z[:, :, k : k + 1, i : i + self.tile, j : j + self.tile] for k in range(t)]
                row.append(torch.cat([self.decoder(frame) for frame in frames], dim=2))
            rows.append(row)
        result_rows = []
        for i, row in enumerate(rows):
            if i > 0:
                row = [self.blend(rows[i - 1][j], tile) for j, tile in enumerate(row)]
            result_rows.append(torch.cat([tile[..., : self.stride] for tile in row], dim=4))
        del rows
        return torch.cat(result_rows, dim=3)
    ```

    ## Fix safety
    The safe fix only adds `del` statements: nothing else in the function changes. Safe:
    `del name` is inserted right after the outermost statement after which the name
    is dead on every path and definitely bound (so the `del` can never raise), with the
    block's indentation and the file's newline; names that die at the same point share one
    `del a, b`. Deleting a local that nothing reads again cannot change what the function
    computes. (Code that reads its caller's frame, `sys._getframe(1).f_locals`, is the one
    thing the analysis cannot see.) No fix when the name may be unbound or already deleted
    on some path, or when the statement sits on one line with its `if`/`for` header. A
    `break` or `continue` inside that statement that jumps past the `del` gets its own
    `del` right before it where the name is dead at the jump's target (not across a
    `finally`, where the fix frees the name on the other paths only). A finding suppressed
    with `# noqa` is never fixed, and its name is left out of a shared `del`.

    A list of tensors consumed by a loop and not used afterwards keeps every item alive
    until the loop ends. The unsafe fix rewrites `for tile in tiles:` to
    `for tile in release(tiles):`, which drops the list's reference to each item as the
    loop takes it and empties the list at the end: unsafe because another reference to the
    same list would see it emptied.

    ## Options
    - `heavy-calls`: glob patterns matched (case-insensitively) against the last part of a
      callee's dotted name that make a call model-level work (default: encoders, decoders,
      `encode*`/`decode*`, `vae`, transformers, `unet`, `controlnet`, `forward`,
      `generate`, `model`, `*_model`). Calls through a tokenizer, processor, scheduler,
      logger or progress bar are never heavy, nor are `self.` calls inside a tokenizer,
      processor, scheduler or feature-extractor class (by its name or a base's name), unless
      that class is a network (a name or base ending in `Module`, `Model` or `Mixin`).
      Components registered with diffusers' `register_modules(...)` are model-level;
      other submodules assigned in `__init__` (`self.mlp = ...`) are layer-level, and
      collectives (and helpers named after one) are model-level.
    - `extend-heavy-calls`: patterns added to `heavy-calls`.
    - `submodules-are-heavy` (default true): set it to false to keep only findings held
      across model-level work and loops, dropping those held across one layer
      (`self.mlp(x)`).
    - `release-call`: the helper of the list fix (default
      `lifetime_lint.runtime.release`), as `package.module:object.method` or a dotted path.
    - The global `min-significance` (`"low"`, `"medium"` by default, or `"high"`) sets
      which findings are reported.
    """

    code = "LL001"
    name = "tensor-kept-alive"
    summary = "A dead tensor stays bound across heavy work; `del` it after its last use"
    triggers = ("torch",)
    fix_availability = "sometimes"
    options = (
        Option(
            "heavy-calls",
            list,
            list(MODEL_CALLS),
            "glob patterns of callee name parts that make a call heavy work",
            validate=_validate_patterns,
        ),
        Option(
            "extend-heavy-calls",
            list,
            [],
            "patterns added to `heavy-calls`",
            validate=_validate_patterns,
        ),
        Option(
            "submodules-are-heavy",
            bool,
            True,
            "whether a call of any submodule assigned in `__init__` (`self.mlp(x)`) is heavy "
            "work; false keeps only calls matching `heavy-calls` (model-level findings)",
        ),
        Option(
            "release-call",
            str,
            "lifetime_lint.runtime.release",
            "the helper that yields a list's items while dropping the list's references",
            validate=target_problem,
        ),
    )

    # Functions with more CFG nodes than this are skipped (bounded cost).
    max_nodes = 4000

    def __init__(self, context, options) -> None:
        super().__init__(context, options)
        patterns = list(options["heavy-calls"]) + list(options["extend-heavy-calls"])
        self._heavy_patterns = tuple(p.lower() for p in patterns)
        self._submodules_are_heavy: bool = options["submodules-are-heavy"]
        # Per enclosing function (innermost last): whether an assignment statement or a
        # walrus occurs anywhere below it. A function without one binds nothing a `del`
        # could release, so its facts are never built (about half of all functions).
        self._assigns: list[bool] = []

    # -- trigger -----------------------------------------------------------------------
    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._assigns.append(False)

    def _note_assignment(self, node: cst.CSTNode) -> None:
        # Mark every enclosing function (an outer one is marked if an inner one is).
        assigns = self._assigns
        at = len(assigns) - 1
        while at >= 0 and not assigns[at]:
            assigns[at] = True
            at -= 1

    visit_Assign = visit_AnnAssign = visit_AugAssign = visit_NamedExpr = _note_assignment

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        if self._assigns and not self._assigns.pop():
            return  # no assignment below it: no binding of `_ASSIGNED` kinds to report
        if _is_compiled(node):
            return
        facts = F.facts_for(self.context, node, self.max_nodes)
        if facts is None or facts.kernel_dsl:
            return  # (a kernel-DSL body holds per-tile values, not tensors)
        _Analysis(self, facts).run()

    # -- heavy work, with this rule's options ---------------------------------------------
    def effective_work(self, work: F.Work) -> F.Work:
        """The layer's answer, adjusted by `heavy-calls` and `submodules-are-heavy`."""
        parts = work.parts
        if (
            parts
            and work.level < F.MODEL
            and work.kind in ("none", "submodule", "module-parameter")
        ):
            if self._matches(parts[-1]):
                return F.Work(F.MODEL, "model", True, parts)
        if work.by_pattern and not self._matches(parts[-1] if parts else ""):
            return F.Work(F.NONE, "none", parts=parts)
        if not self._submodules_are_heavy and work.level < F.MODEL and work.kind != "loop":
            return F.Work(F.NONE, "none", parts=parts)
        return work

    def _matches(self, name: str) -> bool:
        return glob_matcher(self._heavy_patterns)(name.lower())  # fnmatchcase's answer


def _tiled_merge_note(context, facts: F.FunctionFacts, origin: str, across: F.Work) -> str:
    """Words for the message when `origin` is decoded output held across the merge of a
    tiled decode whose tile calls decode frame batches or whole tiles
    (`significance.tiled_merge`: the tile call's activations set the peak, releasing the
    rows saves nothing), or that merges one clip per call (`chunks.merged_per_call`: the
    caller's concatenation of the clips sets the peak); "" otherwise."""
    merge = across.kind == "concatenation" or (
        across.kind == "loop" and bool(across.parts) and across.parts[-1] in ("cat", "stack")
    )
    if S.size_class(origin) != S.LARGE or not merge:
        return ""
    reason = S.tiled_merge(tile_decoder_span(context, facts.function, facts.owner))
    reason = reason or C.merged_per_call(context, facts.function, facts.owner)
    return f" ({reason})" if reason else ""


def _compiled_note(context) -> str:
    """Words for the message when the function is compiled code whose memory a `del` does
    not change: a file whose `torch` is OneFlow (`F.torch_is_oneflow`), traced into a graph
    that plans its own memory (functions decorated `@torch.compile` or `@torch.jit.script`
    are not analysed at all: `_is_compiled`); "" otherwise."""
    if F.torch_is_oneflow(context):
        return (
            " (the file's `torch` is OneFlow, `import oneflow as torch`: compiled into a graph"
            " whose memory plan a Python `del` does not change)"
        )
    return ""


def _is_compiled(function: cst.FunctionDef) -> bool:
    for decorator in function.decorators:
        name = dotted_name(
            decorator.decorator.func
            if isinstance(decorator.decorator, cst.Call)
            else decorator.decorator
        )
        if name is not None and any(
            part in ("jit", "script", "compile", "script_method", "trace")
            for part in name.split(".")
        ):
            return True
    return False


_MAIN_GUARD_KEY = "tensor_kept_alive.main_guard_calls"


def _main_guard_calls(module: cst.Module, memo: dict) -> frozenset[str]:
    """The names the module's top-level `if __name__ == "__main__":` blocks call, memoised."""
    found = memo.get(_MAIN_GUARD_KEY)
    if found is not None:
        return found
    names: set[str] = set()
    for statement in module.body:
        if isinstance(statement, cst.If) and _is_main_guard(statement.test):

            def enter(node: cst.CSTNode) -> None:
                if isinstance(node, cst.Call) and isinstance(node.func, cst.Name):
                    names.add(node.func.value)

            walk(statement.body, enter, _ignore)
    found = frozenset(names)
    memo[_MAIN_GUARD_KEY] = found
    return found


def _is_main_guard(test: cst.BaseExpression) -> bool:
    """`__name__ == "__main__"` (either way round)."""
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    if not isinstance(test.comparisons[0].operator, cst.Equal):
        return False
    sides = (test.left, test.comparisons[0].comparator)
    return any(isinstance(side, cst.Name) and side.value == "__name__" for side in sides) and any(
        isinstance(side, cst.SimpleString) and side.evaluated_value == "__main__" for side in sides
    )


_DOWNSAMPLING = compile_lazily(r"down_?sampl", re.IGNORECASE)


# What an audio model's own values are (its waveform, its latents): sized like its work.
_AUDIO_ORIGINS = frozenset([S.WAVEFORM, S.AUDIO_STREAM, F.SMALL_MODEL])


def _audio_model_work(work: F.Work) -> F.Work:
    """A model-level call named for audio (`self._decode_audio(...)`, `self.vocoder(mel)`)
    beside video: an audio VAE's or vocoder's activations are seconds of samples, a few MiB,
    so a video-sized value held across it is held across one sublayer's worth of work
    (`LAYER`), not at the video decode's peak (LTX-2's decoded video held across the audio
    decode that follows it)."""
    if work.level < F.MODEL or not work.parts or work.kind == "collective":
        return work
    words = {w for part in work.parts for w in part.lower().strip("_").split("_")}
    if not words & _AUDIO_WORK_WORDS:
        return work
    return replace(work, level=F.LAYER)


_AUDIO_WORK_WORDS = frozenset(["audio", "vocoder", "waveform", "wav", "speech", "mel"])


def _per_iteration_slices(function: cst.FunctionDef) -> dict[int, cst.For]:
    """The values (by id) of the assignments inside a `for` loop of the function that read a
    slice whose lower and upper bounds both depend on the loop (its targets, or names its
    body binds from them: `end = min(start + chunk_size, n)`), with that loop (the
    innermost such)."""
    found: dict[int, cst.For] = {}

    def names_in(node: cst.CSTNode) -> set[str]:
        names: set[str] = set()
        walk(
            node, lambda n: names.add(n.value) if isinstance(n, cst.Name) else None, lambda n: None
        )
        return names

    def visit_loop(loop: cst.For) -> None:
        moving = names_in(loop.target)
        assigns: list[cst.Assign] = []
        walk(
            loop.body,
            lambda n: assigns.append(n) if isinstance(n, cst.Assign) else None,
            lambda n: None,
        )
        for _ in range(2):  # (a bound computed from a bound: `end = start + step`)
            for assign in assigns:
                if names_in(assign.value) & moving:
                    for target in assign.targets:
                        moving |= names_in(target.target)

        def moves(bound: cst.BaseExpression | None) -> bool:
            return bound is not None and bool(names_in(bound) & moving)

        for assign in assigns:
            sliced = False

            def enter(node: cst.CSTNode) -> None:
                nonlocal sliced
                if isinstance(node, cst.Slice) and moves(node.lower) and moves(node.upper):
                    sliced = True

            walk(assign.value, enter, lambda n: None)
            if sliced:
                found[id(assign.value)] = loop

    walk(function, lambda n: visit_loop(n) if isinstance(n, cst.For) else None, lambda n: None)
    return found


def _samples_latents(value: cst.BaseExpression | None) -> bool:
    """A sampling helper's result: a call given both the latents (`latents=`) and the noise
    levels (`timesteps=`, `sigmas=`) by keyword, such as a pipeline's own denoise loop
    (`self.backward_loop(timesteps=..., latents=x_1_t1)`): latents, whatever the result is
    called. (A decoder takes no timesteps: its pixels keep their size.)"""
    if not isinstance(value, cst.Call):
        return False
    keywords = {a.keyword.value.lower() for a in value.args if a.keyword is not None}
    return "latents" in keywords and any(
        word in keyword for keyword in keywords for word in ("timestep", "sigma")
    )


def _names_a_mask(name: str) -> bool:
    """`prompt_attention_mask`, `connector_attention_mask`, `masks`: batch x tokens, a few
    KiB, whatever call returned it (a pixel-space mask of decoded frames keeps its class)."""
    return name.lower().strip("_").rstrip("0123456789").endswith(("mask", "masks"))


_AUDIO_WORDS = frozenset(["audio", "audios", "waveform", "waveforms", "wav", "speech", "sound"])
# Names of a weight-derived value (`lora_weight = torch.mm(B.weight, A.weight)`,
# `weight_norm = self.get_weight_norm(weight, ...)`, `merged_weight`): sized by the layer, not
# by tokens or pixels. Attention weights (`attn_weight`, `weights = softmax(scores)`: plural)
# are no such value.
_WEIGHT_WORDS = frozenset(["weight"])
_NOT_WEIGHT_WORDS = frozenset(["attn", "attention", "score", "scores", "prob", "probs", "softmax"])


def _names_a_weight(name: str) -> bool:
    words = set(name.lower().strip("_").split("_"))
    return bool(words & _WEIGHT_WORDS) and not words & _NOT_WEIGHT_WORDS


# `vace_reference_image`, `ref_image`, `input_image`: one image (the last word singular), a
# few MiB even in a video pipeline (a bare `image` may be an image encoder's stream).
_ONE_IMAGE_WORDS = frozenset(["image"])
_MANY_IMAGE_WORDS = frozenset(
    ["images", "video", "videos", "frame", "frames", "tokens", "hidden", "states", "attn"]
)


def _names_read(expr: cst.CSTNode) -> set[str]:
    """The bare names an expression reads (callees' receivers included, attributes not)."""
    names: set[str] = set()

    def enter(node: cst.CSTNode) -> None:
        if isinstance(node, cst.Name):
            names.add(node.value)

    walk(expr, enter, lambda node: None)
    return names


# Words that pick one frame of a clip (`first_frame`, `last_frame_up`, `ref_frame`).
_ONE_FRAME_PICKS = frozenset(["first", "last", "ref", "reference", "start", "end"])


def _names_one_image(name: str) -> bool:
    """`vace_reference_image`, `first_frame_up`, `last_frame`: a name for one image, or for
    one picked frame of a clip (a first/last/reference frame, resized or not), not for the
    clip: one image's pixels, a few MiB."""
    words = name.lower().strip("_").split("_")
    if len(words) >= 2 and words[-1] in _ONE_IMAGE_WORDS and not set(words) & _MANY_IMAGE_WORDS:
        return True
    for at in range(len(words) - 1):
        if words[at] in _ONE_FRAME_PICKS and words[at + 1] in ("frame", "image"):
            rest = set(words[:at]) | set(words[at + 2 :])
            return not rest & _MANY_IMAGE_WORDS
    return False


# Tensor methods that keep a value's elements (views, moves, casts).
_SAME_BYTES_METHODS = T.VIEW_METHODS | T.MAYBE_COPY_METHODS


def _preprocesses_one_image(value: cst.BaseExpression | None) -> bool:
    """`self.video_processor.preprocess_video(image, height=h, width=w)`,
    `self.image_processor.preprocess(first_image)`: a processor's `preprocess*` method
    whose main input is named for one image (`image`, `*_image`)."""
    if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)):
        return False
    if not value.func.attr.value.startswith("preprocess"):
        return False
    owner = dotted_name(value.func.value) or ""
    if "processor" not in owner.lower():
        return False
    main = next((a.value for a in value.args if a.keyword is None and not a.star), None)
    if main is None:
        main = next(
            (a.value for a in value.args if a.keyword is not None and a.keyword.value == "image"),
            None,
        )
    if not isinstance(main, cst.Name):
        return False
    name = main.value
    return name.lower().strip("_") == "image" or _names_one_image(name)


def _names_audio(name: str) -> bool:
    """`audio = self.audio_vae.decode(z)`: a decoded waveform (48 kHz x 10 s x 2 channels is
    under 4 MiB), not frames."""
    return bool(_AUDIO_WORDS & set(name.lower().strip("_").split("_")))


def _pieces_taken(function: cst.FunctionDef, name: str) -> bool:
    """Whether the function takes pieces out of `name` (iterates it, in a loop or a
    comprehension, or subscripts it): for a tuple of split views (`e = x.chunk(6)`) the
    pieces share one storage, so while any piece stays bound `del e` frees nothing."""
    found = False

    def is_name(node: cst.CSTNode | None) -> bool:
        return isinstance(node, cst.Name) and node.value == name

    def enter(node: cst.CSTNode) -> None:
        nonlocal found
        iterated = isinstance(node, (cst.For, cst.CompFor)) and is_name(node.iter)
        if iterated or (isinstance(node, cst.Subscript) and is_name(node.value)):
            found = True
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Name):
            if node.func.value in ("enumerate", "zip", "list", "tuple", "iter", "reversed"):
                if any(is_name(arg.value) for arg in node.args):
                    found = True

    walk(function, enter, lambda node: None)
    return found


def _runs_iterated_blocks(loop: cst.For) -> bool:
    """Whether a loop over a module attribute (`for block1, attn, up in self.ups:`, also
    through `zip`/`enumerate`) calls a module it iterates: the model's blocks, one per
    iteration."""
    iterable = loop.iter
    while isinstance(iterable, cst.Call) and dotted_name(iterable.func) in ("zip", "enumerate"):
        if not iterable.args:
            return False
        iterable = iterable.args[0].value  # (`zip`: the first module list)
    if not (isinstance(iterable, cst.Attribute) and dotted_name(iterable.value) == "self"):
        return False
    targets: set[str] = set()

    def bound(node: cst.CSTNode) -> None:
        if isinstance(node, cst.Name):
            targets.add(node.value)
        for child in child_nodes(node):
            bound(child)

    bound(loop.target)
    found = False

    def enter(node: cst.CSTNode) -> None:
        nonlocal found
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name):
            found = found or node.func.value in targets

    walk(loop.body, enter, lambda node: None)
    return found


def _feed_forward(work: F.Work) -> bool:
    """Work that is (or, for a helper, runs) a block's feed-forward: `self.ffn(...)`,
    `self.img_mlp(...)`, `self._cross_and_ffn(...)`."""
    if work.level != F.PEAK or not work.parts:
        return False
    name = work.parts[-1].lower()
    return glob_matcher(FEED_FORWARD_SUBMODULES)(name)


def _heavier(work: F.Work, than: F.Work) -> bool:
    """Higher level, or the feed-forward beside other peak-level work (attention): the
    finding is about the block's peak."""
    if work.level != than.level:
        return work.level > than.level
    return _feed_forward(work) and not _feed_forward(than)


# -- the analysis of one function -------------------------------------------------------

_ASSIGNED = ("assign", "annassign", "walrus", "augassign")


class _Held:
    """What a dying binding is held across: the heaviest work, where, and its call."""

    __slots__ = ("call", "node", "work")

    def __init__(self, work: F.Work, node: cst.CSTNode, call: cst.Call | None) -> None:
        self.work = work
        self.node = node  # the call, or the loop statement
        self.call = call  # the call that makes it heavy (for a loop: one inside it)


class _Pending:
    __slots__ = ("estimate", "held", "info", "name", "note", "origin", "status", "tokens")

    def __init__(self, name, info, status, held, origin, estimate, tokens, note="") -> None:
        self.name = name
        self.info = info
        self.status = status
        self.held = held
        self.origin = origin
        self.estimate = estimate
        self.tokens = tokens  # the token domain its size follows (`S.token_domain`)
        self.note = note  # why it is held only off the defaults' path (`class_config`)


class _Analysis:
    def __init__(self, rule: TensorKeptAlive, facts: F.FunctionFacts) -> None:
        self.rule = rule
        self.context = rule.context
        self.facts = facts
        self.cfg = facts.cfg
        self._node_work: dict[int, tuple[F.Work, cst.Call | None]] = {}
        self._loop_work: dict[int, tuple[F.Work, cst.Call | None]] = {}
        self.flow: Dataflow | None = None
        self._source: str | None = None
        self._owner_name = facts.owner.name.value if facts.owner is not None else None
        self._peak: int | None = None
        self._scalars: frozenset[str] | None = None
        self._per_iteration: dict[int, cst.For] | None = None

    def _backpropagated(self) -> frozenset[str]:
        """The names this function backpropagates as scalars (`F.backpropagated_scalars`)."""
        if self._scalars is None:
            self._scalars = F.backpropagated_scalars(self.facts.function)
        return self._scalars

    def run(self) -> None:
        cfg = self.cfg
        facts = self.facts
        if not any(site.kind in _ASSIGNED for site in cfg.defs):
            return
        excluded = set(cfg.declared) | set(cfg.captured) | {"_"}  # `_`: thrown away on purpose
        # A graph held into the next forward of a loop with grad on: LL006's finding.
        excluded |= held_by_autograd(self.context, facts.function)
        candidates: set[str] = set()
        for site in cfg.defs:
            if site.kind in _ASSIGNED and site.name not in excluded:
                if self._reportable(site) is not None:
                    candidates.add(site.name)
        if not candidates:
            return
        flow = facts.flow
        self.flow = flow
        pending: list[_Pending] = []
        groups: dict[int, list[_Pending]] = {}
        library = Portability.of(self.context).library
        released = self._consumed_lists(flow, excluded)
        for info, name in self._dead_points(flow, candidates):
            if (id(info.statement), name) in released or self._iterates_released(info, name):
                continue  # `release(tiles)` frees each item and leaves the list empty
            assert info.exit is not None
            sites = flow.reaching(flow.reach_out[info.exit.index], name)
            real = [s for s in sites if s.kind not in ("unbound", "deleted")]
            if not real:
                continue
            if self._none_past_exit_guard(info, name):
                continue  # `if fast is not None: return fast`: None where the code goes on
            origins = [self._reportable(s) for s in real]
            if any(
                origin is None and not self._caller_owned(site)
                for origin, site in zip(origins, real)
            ) or all(origin is None for origin in origins):
                continue
            if self._shared_live(info, real, candidates):
                continue
            flowed = F._largest(o for o in origins if o is not None)
            origin = S.unvisual_named_decoded(
                flowed, S.name_origin(name, flowed), class_domain(self.context, self._owner_name)
            )
            if S.size_class(origin) == S.ACTIVATION_SIZED and all(
                _samples_latents(site.value) for site, o in zip(real, origins) if o is not None
            ):
                origin = F.LATENTS  # `x_1_t0 = self.backward_loop(timesteps=..., latents=x)`
            if origin == F.DECODED and all(
                self._encoder_output(site.value) for site, o in zip(real, origins) if o is not None
            ):
                origin = F.LATENTS  # `lq_tiles = [tile_encoder(tile) for tile in inputs]`
            if origin == F.DECODED and all(
                F.mixes_noise(facts.function, site.value)
                for site, o in zip(real, origins)
                if o is not None
            ):
                origin = F.LATENTS  # `noisy_video = (1 - s) * clean_video + s * noise`
            if name in self._backpropagated():
                origin = F.SMALL  # `loss = self.vae(img)` ... `backward(loss)`: a scalar
            if _names_a_mask(name) and S.size_class(origin) != S.LARGE:
                continue  # `prompt_attention_mask = self.encode(...)[1]`: batch x tokens
            owned = [site for site, o in zip(real, origins) if o is not None]
            if all(facts.value(site).host for site in owned) and not facts.read_by_model(name):
                origin = S.HOST_TENSOR  # `torch.zeros(shape)`, a processor's frames: on the CPU
            elif S.size_class(origin) in (S.LARGE, S.ACTIVATION_SIZED) and all(
                facts.feeds_decoder(site) for site in owned
            ):
                origin = S.DECODER_INPUT  # `x = self.post_quant_conv(z)` ... `self.decoder(x[i])`
            domain = class_domain(self.context, self._owner_name)
            origin = S.domain_origin(
                origin,
                self.context.path,
                self._owner_name,
                domain,
                S.builders_of(self.context.module, self.context.memo, self._owner_name),
            )
            origin = S.package_origin(origin, self.context.path)
            tokens = self._token_domain(domain)
            chunk_of = origin
            if origin == F.DECODED and all(
                self._one_frame_decode(site.value)
                for site, o in zip(real, origins)
                if o is not None
            ):
                origin = S.DECODED_FRAME  # `self.vae.decode(z[:, :, i : i + 1])`: one frame
            elif origin == F.DECODED and self._from_one_image(owned):
                origin = F.IMAGE  # `video = self.video_processor.preprocess_video(image)`
            elif origin == F.DECODED and self._image_model() is not None:
                origin = F.DECODED_IMAGE  # one frame: tens of MiB, below the decoder's peak
            elif origin == F.DECODED and domain == LARGE_DOMAIN and not self._names_video():
                origin = S.PIXEL_IMAGES  # an image model's pixels: one image, a few MiB
            elif origin == F.DECODED and _names_audio(name):
                origin = S.WAVEFORM  # a decoded waveform: seconds of samples, a few MiB
            elif (
                origin == F.DECODED
                and decodes_feature_maps(facts.function, facts.owner)
                and from_decoder_stage(name, [site.value for site in owned])
            ):
                origin = S.DECODER_FEATURES  # `self.decoder_level1(h)` of a restoration U-Net
            elif origin == F.LOGITS:
                origin = S.SCORES  # the last positions' or a few hundred queries' scores
            elif origin == F.ACTIVATION and _names_a_weight(name) and not self._reads_input(real):
                origin = S.WEIGHT_SIZED  # `lora_weight = torch.mm(B.weight, A.weight)`
            elif S.size_class(origin) == S.ACTIVATION_SIZED and self._sliced_per_iteration(owned):
                origin = S.LOOP_CHUNK  # `chunk = norm(x[:, start:end])` in a chunked loop
            elif S.size_class(origin) == S.ACTIVATION_SIZED and self._batch_tiled_parameters(owned):
                origin = S.LEARNED_TOKENS  # `token = self.token.clone().repeat(b, 1, 1)`
            elif origin in (F.ACTIVATION, F.MODEL_OUTPUT) and _names_one_image(name):
                origin = F.IMAGE  # `vace_reference_image = pipe.preprocess_video(...)`
            elif _names_audio(name) and S.size_class(origin) == S.ACTIVATION_SIZED:
                # `audio_input`, `eps_audio`: the audio stream of an audio-video model
                # (LTX-2: about 25 latent tokens a second), a few MiB beside the video's.
                origin = S.AUDIO_STREAM
            elif S.size_class(origin) == S.ACTIVATION_SIZED:
                # The short stream by dataflow: the video-to-audio attention's output has
                # audio queries; `und_norm` is the understanding (text) stream.
                origin = self._owner_stream() or self._short_stream_origin(real) or origin
                if origin == F.ACTIVATION and self._latent_width():
                    origin = F.LATENTS  # `TemporalEncoder(dim=in_channels)`: 4-channel latents
                elif self._downsampling_block():
                    origin = S.DOWNSAMPLED  # `conv_out`, `pool_out` of `CosmosDownsample3d`
                if origin == F.ACTIVATION and _read_only_broadcast(facts.function, name):
                    origin = S.BROADCAST_TABLE  # `token_types[:, :, None, None, :]`
            if S.size_class(origin) in (S.LARGE, S.ACTIVATION_SIZED) and self._steps_a_cell(name):
                origin = (
                    S.STEP_INPUT
                )  # `query_input = cat(memory, ctx)` ... `self.rnn(query_input)`
            if S.size_class(origin) == S.TINY:
                continue
            held_across = self._held_across(info, name, real)
            if not held_across:
                continue
            if origin == S.LOOP_CHUNK and self._held_inside(
                self._sliced_per_iteration(owned), held_across
            ):
                origin = chunk_of  # `normalized_halo` held across the window's own MLP
            if self._elements_held(info, real, candidates, held_across):
                continue  # a container of tensors that keep their own names
            if self._captured_by_live_object(info, name, held_across):
                continue  # `meta = AttentionMetadata(joint_query=q)` ... `self.attn(x, meta)`
            status = 0
            if any(s.kind == "deleted" for s in sites):
                status = 1
            elif any(s.kind == "unbound" for s in sites):
                status = 2
            elif not info.insertable:
                status = 3
            held, estimate = self._rated(info, origin, held_across, tokens)
            # Held only on a path the model's own defaults never take: low.
            note = _compiled_note(self.context)
            note = note or off_default_path(self.context, self._owner_name, info, name, held.node)
            note = note or _tiled_merge_note(self.context, facts, origin, held.work)
            note = note or self._drained_note(info, name)
            note = note or self._needed_across_note(info, name, real, held.work)
            note = note or self._rebuilt_part_note(name, owned, held_across)
            note = note or self._after_peak_note(info, origin, held, estimate, tokens)
            if note:
                estimate = replace(estimate, level=S.LOW)
            if not library or self._script_entry():
                # Tests, examples, benchmarks, scripts: small inputs, run once (the shared
                # non-library globs, or the function an `if __name__ == "__main__":` block
                # of the file calls): low, shown with `min-significance = "low"`.
                estimate = replace(estimate, level=S.LOW)
            finding = _Pending(name, info, status, held, origin, estimate, tokens, note)
            groups.setdefault(id(info), []).append(finding)
            pending.append(finding)
        self._report(pending, groups)

    def _function_source(self) -> str:
        if self._source is None:
            self._source = self.context.source_of(self.facts.function)
        return self._source

    def _rebuilt_part_note(self, name: str, owned: list[DefSite], held: list[_Held]) -> str:
        """Why a value held past a loop is `low` when the loop rebinds it every iteration and
        keeps each iteration's value in a list (`chunks.rebuilt_part`): after the loop it
        is the last iteration's part only (one tile's frame list of a tiled decode), one of
        the parts that list holds anyway; "" otherwise."""
        statements = [s.node.statement for s in owned if s.node is not None]
        if not owned or len(statements) != len(owned) or any(s is None for s in statements):
            return ""
        found = C.rebuilt_part(self.context, self.facts.function, name, statements)  # type: ignore[arg-type]
        if found is None:
            return ""
        loop, holder = found
        where = self.context.position(loop)
        if any(self.context.position(item.node).start.line <= where.end.line for item in held):
            return ""  # held inside the loop too: beside work of its own size
        return (
            f" (rebound on every iteration of the loop at line {where.start.line}, whose "
            f"`{holder}` keeps each iteration's part: past the loop it holds the last part "
            f"only, one of many kept anyway)"
        )

    def _after_peak_note(
        self, info: StatementInfo, origin: str, held: _Held, estimate: S.Estimate, tokens: str
    ) -> str:
        """Why a finding is `low` when only the lighter-work discount made it so: the value
        is held only across work lighter than the function's heaviest (`_rated`), which ran
        before it died or after it was bound, so its bytes are not alive at the function's
        peak (the input video after the VAE encode, held across mask reshaping)."""
        if estimate.level != S.LOW:
            return ""
        row = self.context.position(info.statement).start.line
        carried = self.context.position(held.node).start.line <= row
        work = held.work
        if S.autoencoder_named(self.context.path, self._owner_name):
            work = S.at_autoencoder_bottleneck(work)
        undiscounted = S.estimate(origin, work, one_chunk=carried, domain=tokens)
        if undiscounted.level == S.LOW:
            return ""
        return " (only across work lighter than the function's heaviest call, whose peak `del` does not lower)"

    def _rated(
        self, info: StatementInfo, origin: str, candidates: list[_Held], tokens: str
    ) -> tuple[_Held, S.Estimate]:
        """The work the finding is about and its rating: the heaviest work, or the block's
        heaviest sublayer when that rates higher (a query held across both a nested model
        call and the feed-forward is worth its bytes at the feed-forward's peak)."""
        best: tuple[_Held, S.Estimate] | None = None
        row = self.context.position(info.statement).start.line
        function_peak = self._function_peak()
        peak: int | None = function_peak
        audio = origin not in _AUDIO_ORIGINS  # (an audio model's own values: sized like it)
        works = [_audio_model_work(held.work) if audio else held.work for held in candidates]
        if any(work.level >= function_peak for work in works):
            peak = None  # alive at the function's peak: no lighter-work discount
        autoencoder = S.autoencoder_named(self.context.path, self._owner_name)
        for held, work in zip(candidates, works):
            carried = self.context.position(held.node).start.line <= row
            # (held into the next iteration: one chunk's worth)
            if autoencoder:
                work = S.at_autoencoder_bottleneck(work)
            estimate = S.estimate(
                origin,
                work,
                one_chunk=carried,
                function_peak=peak,
                domain=tokens,
            )
            if best is None or S.rank(estimate.level) > S.rank(best[1].level):
                best = (held, estimate)
        assert best is not None
        return best

    def _one_frame_decode(self, value: cst.BaseExpression | None) -> bool:
        """Whether the value is a decode of one latent frame: its input comes from a unit
        slice of the frame axis of a `[b, c, t, h, w]` latent (`z[:, :, i : i + 1]`), here or
        through the local names it is built from (`plane = denorm(z[:, :, i : i + 1])`)."""
        while isinstance(value, (cst.Subscript, cst.Attribute)):
            value = value.value  # `self.vae.decode(z, return_dict=False)[0]`, `.sample`
        if not isinstance(value, cst.Call) or self.facts.work(value).kind != "decode":
            return False
        if not value.args or value.args[0].keyword is not None:
            return False
        defs: dict[str, list[DefSite]] = {}
        for site in self.cfg.defs:
            defs.setdefault(site.name, []).append(site)
        seen: set[str] = set()

        def one_frame(expr: cst.CSTNode, depth: int) -> bool:
            found = False

            def enter(node: cst.CSTNode) -> None:
                nonlocal found
                if found:
                    return
                if isinstance(node, cst.Subscript) and _unit_frame_slice(node):
                    found = True
                elif isinstance(node, cst.Name) and node.value in seen:
                    found = True  # `plane = (1 - s) * plane + s * noise`: still that frame
                elif isinstance(node, cst.Name) and depth < 4:
                    sites = [s for s in defs.get(node.value, []) if s.kind != "unbound"]
                    if sites and all(s.kind in _ASSIGNED and s.value is not None for s in sites):
                        seen.add(node.value)
                        found = all(
                            one_frame(s.value, depth + 1) for s in sites if s.value is not None
                        )

            walk(expr, enter, lambda node: None)
            return found

        return one_frame(value.args[0].value, 0)

    def _reads_input(self, sites: list[DefSite]) -> bool:
        """Whether any of the bindings may be computed from the function's inputs (its
        positional parameters after `self`), through the local names their values read: an
        attention's `weight = softmax(q @ k.T)` or a gate's `input_mix_weight` is; a DoRA
        `lora_weight = torch.mm(lora_B.weight, lora_A.weight)` over keyword-only modules and
        weights (`forward(self, x, *, lora_A, lora_B, base_layer)`) is not."""
        params = self.facts.function.params
        positional = {p.name.value for p in (*params.posonly_params, *params.params)}
        positional.discard("self")
        positional.discard("cls")
        if params.star_arg is not None and isinstance(params.star_arg, cst.Param):
            positional.add(params.star_arg.name.value)
        defs: dict[str, list[DefSite]] = {}
        for site in self.cfg.defs:
            defs.setdefault(site.name, []).append(site)
        seen: set[int] = {site.index for site in sites}
        pending = list(sites)
        while pending:
            site = pending.pop()
            if site.kind == "param":
                if site.name in positional:
                    return True
                continue
            if site.kind not in _ASSIGNED or site.value is None:
                return True  # (a loop target, a `with` target: from anything)
            for read in _names_read(site.value):
                for source in defs.get(read, ()):
                    if source.kind != "unbound" and source.index not in seen:
                        seen.add(source.index)
                        pending.append(source)
        return False

    def _from_one_image(self, sites: list[DefSite], depth: int = 0) -> bool:
        """Whether every binding is a processor's preprocessing of a value named for one
        image (`video = self.video_processor.preprocess_video(image, ...)` in an
        image-to-video pipeline: the conditioning image as a one-frame clip, 3 x H x W, a
        few MiB), here or through the views and copies of it the function rebinds
        (`video = video.permute(...)`, `video = video.to(device)`): its name says video, its
        bytes are one image's."""
        if not sites or depth > 4:
            return False
        for site in sites:
            if site.kind not in _ASSIGNED or site.unpacked or site.node is None:
                return False
            value = site.value
            if _preprocesses_one_image(value):
                continue
            while (
                isinstance(value, cst.Call)
                and isinstance(value.func, cst.Attribute)
                and value.func.attr.value in _SAME_BYTES_METHODS
            ):
                value = value.func.value
            if not isinstance(value, cst.Name):
                return False
            if not self._from_one_image(self.facts.reaching(site.node, value.value), depth + 1):
                return False
        return True

    def _encoder_output(self, value: cst.BaseExpression | None) -> bool:
        """Whether the value is an encoder's output (`tile_encoder(tile)`, `self.vae.encode(x)`,
        or a list of them): latents, not the decoded tiles or frames its name may suggest."""
        if isinstance(value, (cst.ListComp, cst.GeneratorExp)):
            value = value.elt
        while isinstance(value, (cst.Subscript, cst.Attribute)) and not isinstance(value, cst.Call):
            value = value.value  # `self.vae.encode(x)[0]`, `.latent_dist`
        return isinstance(value, cst.Call) and self.facts.work(value).kind == "encode"

    def _short_stream_origin(self, sites: list[DefSite]) -> str | None:
        """`S.AUDIO_STREAM` or `S.TEXT_STREAM` when every binding that reaches the dead point
        holds the same short stream of a multi-stream model (`domain.short_stream`)."""
        streams = {short_stream(self.facts, site) for site in sites}
        if streams == {AUDIO_STREAM}:
            return S.AUDIO_STREAM
        if streams == {TEXT_STREAM}:
            return S.TEXT_STREAM
        return None

    def _owner_stream(self) -> str | None:
        """`S.TEXT_STREAM` or `S.AUDIO_STREAM` when the function's class serves only a short
        stream (`domain.short_stream_classes`: a token refiner built as `self.txt_in` and called
        on the prompt embeddings, and the blocks only it builds)."""
        if self._owner_name is None:
            return None
        stream = short_stream_classes(self.context.module, self.context.memo).get(self._owner_name)
        return {AUDIO_STREAM: S.AUDIO_STREAM, TEXT_STREAM: S.TEXT_STREAM}.get(stream or "")

    def _batch_tiled_parameters(self, sites: list[DefSite]) -> bool:
        """Whether every binding is a learned parameter of the class tiled over the batch
        only (`facts.batch_tiled_parameter`: `self.token.clone().repeat(batch_size, 1, 1)`
        in Wan S2V's motioner, `self.query_tokens.expand(b, -1, -1)`): the parameter's
        size times the batch, which the input's sequence length does not scale."""
        parameters = F.learned_parameters(self.facts.owner)
        return bool(parameters) and all(
            site.kind == "assign"
            and not site.unpacked
            and F.batch_tiled_parameter(site.value, parameters)
            for site in sites
        )

    def _latent_width(self) -> bool:
        """Whether the function's class works at a latent channel width
        (`domain.latent_width_classes`: every build passes `dim=in_channels`, 4 by default)."""
        if self._owner_name is None:
            return False
        module, memo = self.context.module, self.context.memo
        return self._owner_name in latent_width_classes(module, memo)

    def _script_entry(self) -> bool:
        """Whether the function is a module-level function that the file's own
        `if __name__ == "__main__":` block calls (a vendored model file's demo `main()`)."""
        if self.facts.owner is not None:
            return False
        return self.facts.function.name.value in _main_guard_calls(
            self.context.module, self.context.memo
        )

    def _downsampling_block(self) -> bool:
        """Whether the function is a method of an autoencoder's downsampling block
        (`CosmosDownsample3d`, `Downsample2D` in a VAE file)."""
        owner = self._owner_name
        return (
            owner is not None
            and _DOWNSAMPLING.search(owner) is not None
            and S.autoencoder_named(self.context.path, owner)
        )

    def _sliced_per_iteration(self, sites: list[DefSite]) -> list[cst.For]:
        """The loops in which every binding is computed from a slice of a tensor whose lower
        and upper bounds both move with the loop (`x[:, start:end]` in `for start in
        range(0, n, chunk)`, with `end = min(start + chunk, n)`; `x[:, i : i + 1]`): one
        piece of many, whose size is the loop's step, not the input's; [] when not all are.
        A growing prefix (`x[:, : i + 1]`) or suffix has one fixed bound and keeps its size."""
        if self._per_iteration is None:
            self._per_iteration = _per_iteration_slices(self.facts.function)
        loops = [self._per_iteration.get(id(site.value)) for site in sites]
        if not loops or any(loop is None for loop in loops):
            return []
        return [loop for loop in loops if loop is not None]

    def _held_inside(self, loops: list[cst.For], held: list[_Held]) -> bool:
        """Whether some work the value is held across runs inside one of the loops: there the
        chunk sits beside work on the same chunk (a window's norm held across its MLP), a
        finding like the unchunked block's; after the loop it is beside work on the whole
        input, a fraction of it."""
        spans = []
        for loop in loops:
            where = self.context.position(loop)
            spans.append((where.start.line, where.end.line))
        for item in held:
            line = self.context.position(item.node).start.line
            if any(start <= line <= end for start, end in spans):
                return True
        return False

    def _names_video(self) -> bool:
        """Whether the function's own code names video (`video`, `frames`): its pixels are
        frames even where the file shows too little to be a video file. Its code, not its
        docstring or comments (`code_mentions_video`)."""
        return code_mentions_video(self.facts.function)

    def _token_domain(self, domain: str) -> str:
        """How many tokens the function's activations hold (`S.token_domain`)."""
        function = self.facts.function
        image = (
            S.image_named(self.context.path, self._owner_name)
            or (
                # a frame-wise 2-D conv network (a frame interpolator): one image's activations
                self._owner_name is not None
                and self._owner_name in frame_wise_classes(self.context.module, self.context.memo)
            )
            or (
                # a video architecture built for one frame by default (`max_frames: int = 1`)
                self._owner_name is not None
                and self._owner_name in one_frame_classes(self.context.module, self.context.memo)
            )
        )
        return S.token_domain(domain, image, runs_against_cache(function))

    def _image_model(self) -> str | None:
        """Why the function decodes or merges 2-D images rather than video (shared with
        LL002: `analysis.chunks.image_model`), or None."""
        return C.image_model(self.context, self.facts.function, self.facts.owner)

    def _steps_a_cell(self, name: str) -> bool:
        """Whether the function passes `name` as the input of a recurrent cell of its class
        (`self.attention_rnn(query_input, (h, c))` with `self.attention_rnn = nn.LSTMCell(...)`):
        a cell takes one time step, `(batch, input_size)`."""
        cells = recurrent_cells(self.context.module, self.context.memo, self._owner_name)
        if not cells:
            return False
        found = False

        def enter(node: cst.CSTNode) -> None:
            nonlocal found
            if found or not isinstance(node, cst.Call) or not node.args:
                return
            func = node.func
            first = node.args[0]
            if (
                isinstance(func, cst.Attribute)
                and isinstance(func.value, cst.Name)
                and func.value.value == "self"
                and func.attr.value in cells
                and first.keyword is None
                and isinstance(first.value, cst.Name)
                and first.value.value == name
            ):
                found = True

        walk(self.facts.function, enter, lambda node: None)
        return found

    def _drained_note(self, info: StatementInfo, name: str) -> str:
        """Words for the message when the binding's last use is a loop that only pops from
        it (`x = torch.cat((x, h.pop()), dim=1)` in a U-Net's up loop) and appends nothing:
        the loop drains the list, so deleting it after the loop frees nothing; "" otherwise."""
        statement = info.statement
        if not isinstance(statement, (cst.For, cst.While)):
            return ""
        pops = 0
        other = False

        def visit(node: cst.CSTNode) -> None:
            nonlocal pops, other
            if (
                isinstance(node, cst.Attribute)
                and isinstance(node.value, cst.Name)
                and node.value.value == name
            ):
                if node.attr.value == "pop":
                    pops += 1
                else:
                    other = True  # `h.append(x)`, `h.extend(...)`: pushed again in the loop
                return
            if isinstance(node, cst.Name) and node.value == name:
                other = True  # read whole (`cat(h)`, `h[-1]`, an argument): not only popped
                return
            for child in child_nodes(node):
                visit(child)

        visit(statement.body)
        if isinstance(statement, cst.While):
            visit(statement.test)
        else:
            visit(statement.iter)
        if not pops or other:
            return ""
        return f" (the loop drains it with `{name}.pop()`: likely empty by then)"

    def _needed_across_note(
        self, info: StatementInfo, name: str, sites: list[DefSite], across: F.Work
    ) -> str:
        """Words for the message when, before its last use, the value is already needed
        across a loop of the model's blocks (`for block, attn, upsample in self.ups:` calling
        the blocks it iterates) and is held after it across one sublayer only (a U-Net's
        init residual, skip lists or conditioning context, alive through the down and up
        loops and held across only the final block or conv): each block runs a peak of its
        own at least as heavy as one sublayer, with the value alive, so releasing it lowers
        only the tail; "" otherwise. Not for a concatenation, a loop or a whole model call
        after the loop (the final join of a loop's outputs, a decode: those can set the
        function's peak)."""
        start = info.exit
        if start is None or not F.LAYER <= across.level <= F.PEAK:
            return ""
        if across.kind in ("concatenation", "loop", "collective", "helper", "closure"):
            return ""
        defined = [site.node for site in sites if site.node is not None]
        if not defined or len(defined) != len(sites):
            return ""

        def rebinds(node: Node) -> bool:
            return any(site.name == name for site in node.defs) or any(
                site.name == name for site in node.kills
            )

        forward: set[int] = set()
        queue = deque(successor for node in defined for successor in node.succ)
        while queue:
            node = queue.popleft()
            if node.index in forward:
                continue
            forward.add(node.index)
            if not rebinds(node):
                queue.extend(node.succ)
        backward: set[int] = set()
        back = deque([info.entry])
        while back:
            node = back.popleft()
            if node.index in backward:
                continue
            backward.add(node.index)
            if node is info.entry or not rebinds(node):
                back.extend(node.preds)
        span = forward & backward
        for header in self.cfg.nodes:
            statement = header.statement
            if (
                header.kind != "for"
                or not header.loop_body
                or not isinstance(statement, cst.For)
                or header.index not in span
                or any(node in header.loop_body for node in defined)
            ):
                continue
            if _runs_iterated_blocks(statement):
                line = self.context.position(statement).start.line
                return (
                    f", but it is already needed across the loop of blocks at line {line} "
                    "(each block with a peak of its own), so releasing it lowers only the tail"
                )
        return ""

    def _function_peak(self) -> int:
        """The level of the heaviest work anywhere in the function (memoised per node)."""
        if self._peak is None:
            headers = {n.index for n in self.cfg.nodes if n.loop_body}
            self._peak = max(
                (self._work_of_node(node, headers)[0].level for node in self.cfg.nodes),
                default=F.NONE,
            )
        return self._peak

    # -- decide: which bindings alone own a tensor ---------------------------------------
    def _reportable(self, site: DefSite) -> str | None:
        """The origin of what the binding alone owns (a tensor or a list of tensors), or
        None when deleting it could free nothing."""
        facts = self.facts
        if site.kind not in _ASSIGNED:
            return None
        fact = facts.value(site)
        if (
            not site.unpacked
            and F.is_split_call(site.value)
            and _pieces_taken(facts.function, site.name)
        ):
            return None  # its pieces are views of one storage that other names keep
        if facts.owner_of_storage(site) or facts.storage_partners(site) is not None:
            return fact.origin  # (partners: checked dead where the name dies, `_shared_live`)
        if self._sibling_pieces(site) is not None:
            return F.ACTIVATION  # (the siblings: deleted with it, `_shared_live`)
        if fact.kind == F.CONTAINER and not site.unpacked:
            if facts.escaped(site) or facts.truth_tested(site) or facts.aliases.get(site.index):
                return None
            contents = facts.contents_fact(site)
            if contents.kind != F.TENSOR or facts.elements_shared(site):
                return None
            return contents.origin
        if fact.borrowed is not None and fact.tensor and facts.transferred(site):
            if facts.escaped(site) or facts.truth_tested(site) or facts.aliases.get(site.index):
                return None
            return F.CACHE_ENTRY if S.size_class(fact.origin) != S.LARGE else fact.origin
        return None

    def _shared_live(self, info: StatementInfo, sites: list[DefSite], candidates: set[str]) -> bool:
        """Whether another name of a view chain (`q_sbhd = query.view(...)` ...
        `query = q_sbhd.view(shape)`) still holds the storage after `info`: it is live, or
        it is still bound and not released with it (`q, k = qkvg.chunk(2)`: `qkvg` keeps
        both pieces' storage, so `del q, k` frees nothing). Then `del` frees nothing."""
        flow = self.flow
        assert flow is not None and info.exit is not None
        live = flow.live_out[info.exit.index]
        reach = flow.reach_out[info.exit.index]
        for site in sites:
            partners = self.facts.storage_partners(site)
            if partners is None:
                partners = self._sibling_pieces(site)
            for partner in partners or ():
                if live & flow.name_bit(partner):
                    return True
                bit = flow.name_bit(partner)
                dies_here = partner in candidates and flow.live_in[info.entry.index] & bit
                bindings = flow.reaching(reach, partner)
                if (
                    not dies_here
                    and bindings
                    and all(bound.kind not in ("unbound", "deleted") for bound in bindings)
                ):
                    # Bound on every path (a partner dying here is deleted with it, `del q,
                    # k`; one bound on some paths only, a view chain under `if fused:`, leaves
                    # the others' saving).
                    return True
        return False

    def _captured_by_live_object(self, info: StatementInfo, name: str, held: list[_Held]) -> bool:
        """Whether the name's last use stores it into an object still live at every work
        it is held across: `attn_metadata = AttentionMetadata(joint_query=joint_q, ...)` (a
        constructor: a capitalised callee), `dict(q=q)` or `{"q": q}`, then
        `self.attn(q, k, v, attn_metadata)`. The object keeps the tensor there, so `del`
        frees nothing."""
        flow = self.flow
        assert flow is not None and info.exit is not None
        statement = info.statement
        if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
            return False
        assign = statement.body[0]
        if isinstance(assign, cst.Assign) and len(assign.targets) == 1:
            target, value = assign.targets[0].target, assign.value
        elif isinstance(assign, cst.AnnAssign) and assign.value is not None:
            target, value = assign.target, assign.value
        else:
            return False
        if not isinstance(target, cst.Name) or target.value == name:
            return False
        kwargs_builder = False
        if isinstance(value, cst.Call):
            callee = value.func.attr if isinstance(value.func, cst.Attribute) else value.func
            if not isinstance(callee, cst.Name):
                return False
            if not (callee.value[:1].isupper() or callee.value == "dict"):
                # `kwargs = pipeline._build_transformer_kwargs(..., hidden_states=x)` then
                # `self.transformer(**kwargs)`: a helper that builds the keyword arguments
                # of a call returns the tensors it is given inside the mapping.
                if not (
                    "kwargs" in callee.value.lower() or _splatted(self.facts.function, target.value)
                ):
                    return False
                kwargs_builder = True
            stored = [arg.value for arg in value.args if arg.keyword is not None]
        elif isinstance(value, cst.Dict):
            stored = [el.value for el in value.elements if isinstance(el, cst.DictElement)]
        else:
            return False
        if not any(isinstance(v, cst.Name) and v.value == name for v in stored):
            return False
        nodes = [self._cfg_node(h.node) for h in held]
        if not nodes or any(node is None for node in nodes):
            return False
        bit = flow.name_bit(target.value)
        if kwargs_builder:
            # The mapping keeps the tensor while it is bound, live or not: `kwargs` is
            # seldom deleted after `self.transformer(**kwargs)`.
            own = {d.index for d in info.exit.defs if d.name == target.value}
            return bool(own) and all(
                {s.index for s in flow.reaching(flow.reach_in[node.index], target.value)} <= own
                for node in nodes
                if node is not None
            )
        return all(flow.live_in[node.index] & bit for node in nodes if node is not None)

    def _elements_held(
        self, info: StatementInfo, sites: list[DefSite], candidates: set[str], held: list[_Held]
    ) -> bool:
        """Whether every element of the container the name holds is still held by another
        binding across the work (`F.FunctionFacts.element_holders`): that binding, or a
        view of it, may still be current there, and it is not released with the name. Then
        `del` frees at most the container itself."""
        flow = self.flow
        assert flow is not None and info.exit is not None
        live = flow.live_out[info.exit.index]
        nodes = [n for n in (self._cfg_node(h.node) for h in held) if n is not None]
        if not nodes:
            return False
        for site in sites:
            holders = self.facts.element_holders(site)
            if holders is None:
                return False
            for holder in holders:
                bit = flow.name_bit(holder.name)
                if (
                    not live & bit
                    and holder.name in candidates
                    and flow.live_in[info.entry.index] & bit
                ):
                    return False  # released with it (`del inputs, prompt_embeds`)
                for node in nodes:
                    current = flow.reaching(flow.reach_in[node.index], holder.name)
                    if not any(self._derives_from(bound, holder) for bound in current):
                        return False  # rebound or deleted before the work: the container's alone
        return True

    def _cfg_node(self, node: cst.CSTNode) -> Node | None:
        """The CFG node of a held-across call or loop statement."""
        if isinstance(node, cst.Call):
            found = self.facts._node_of_call(node)
            if found is not None:
                return found
        return next((n for n in self.cfg.nodes if n.statement is node), None)

    def _derives_from(self, bound: DefSite, holder: DefSite, depth: int = 0) -> bool:
        """`bound` is `holder`, or a view chain back to it (`latents = latents[:, :n]`)."""
        if bound.index == holder.index:
            return True
        if depth > 4 or bound.kind in ("unbound", "deleted", "param"):
            return False
        fact = self.facts.value(bound)
        return fact.kind == F.VIEW and any(
            self._derives_from(source, holder, depth + 1) for source in fact.sources
        )

    def _sibling_pieces(self, site: DefSite) -> frozenset[str] | None:
        """`shift, scale, gate = self.get_ada_values(...)`, where the helper returns
        `values.unbind(dim=2)`: the other names of the unpacking, which share the storage
        (None: not such a piece). Deleting all of them together frees it."""
        value, statement = site.value, site.node.statement if site.node else None
        if not site.unpacked or not isinstance(value, cst.Call) or site.kind != "assign":
            return None
        callee = self.facts.local_callee(value)
        if callee is None or not self.facts.helper_returns_pieces(callee):
            return None
        if not isinstance(statement, cst.Assign) or len(statement.targets) != 1:
            return None
        target = statement.targets[0].target
        if not isinstance(target, (cst.Tuple, cst.List)):
            return None
        names = [e.value.value for e in target.elements if isinstance(e.value, cst.Name)]
        if len(names) != len(target.elements):
            return None  # (a starred or attribute target keeps a piece elsewhere)
        return frozenset(n for n in names if n != site.name)

    def _caller_owned(self, site: DefSite, depth: int = 0) -> bool:
        """A parameter, or a display of parameters (`control_video = [control_video]`): on
        paths where such a binding is current (`if latents is None: video =
        preprocess(video)`), `del` frees nothing and costs nothing; the finding is about the
        other paths."""
        if site.kind == "param":
            return True
        value = site.value
        if depth > 2 or site.kind != "assign" or not isinstance(value, (cst.List, cst.Tuple)):
            return False
        if site.unpacked or not value.elements or site.node is None:
            return False
        for element in value.elements:
            if not isinstance(element.value, cst.Name):
                return False
            sites = self.facts.reaching(site.node, element.value.value)
            if not sites or not all(self._caller_owned(s, depth + 1) for s in sites):
                return False
        return True

    # -- where names die -------------------------------------------------------------
    def _dead_points(self, flow: Dataflow, candidates: set[str]):
        """(statement, name) for the outermost statements after which a live name dies."""
        mask = 0
        for name in candidates:
            mask |= flow.name_bit(name)
        found: dict[str, list[StatementInfo]] = {}
        for info in self.cfg.statements:
            if info.exit is None or (info.exit.kind == "after" and not info.exit.preds):
                continue
            before = flow.live_in[info.entry.index]
            after = flow.live_out[info.exit.index]
            dying = before & ~after & mask
            while dying:
                low = dying & -dying
                dying ^= low
                name = self.cfg.names[low.bit_length() - 1]
                found.setdefault(name, []).append(info)
        for name, infos in found.items():
            chosen = set(map(id, infos))
            for info in infos:
                parent = info.parent
                outer = False
                while parent is not None:
                    if id(parent) in chosen:
                        outer = True
                        break
                    parent = parent.parent
                if not outer:
                    yield info, name

    # -- what it is held across ---------------------------------------------------------
    def _work_of_node(
        self, node: Node, inside: set[int], name: str | None = None
    ) -> tuple[F.Work, cst.Call | None]:
        """The heaviest work of a CFG node; a loop header (other than a loop the name dies
        in, or one that rebinds the name) counts its whole body."""
        if (
            node.kind in ("for", "while")
            and node.loop_body
            and node.index not in inside
            and not (name is not None and self._rebinds(node, name))
        ):
            return self._work_of_loop(node)
        cached = self._node_work.get(node.index)
        if cached is None:
            best: tuple[F.Work, cst.Call | None] = (F.Work(F.NONE, "none"), None)
            for call in node.calls:
                work = self.rule.effective_work(self.facts.work(call))
                if (
                    work.level == F.PEAK
                    and work.kind not in ("concatenation", "collective")
                    and short_stream_input(self.facts, call, node) is not None
                ):
                    # `self.mlp(self.norm(residual_und))`: a sublayer over the short stream
                    # (audio, prompt or understanding tokens) is not the block's peak.
                    work = replace(work, level=F.LAYER, sized_by="conditioning")
                if work.level > best[0].level:
                    best = (work, call)
            cached = best
            self._node_work[node.index] = cached
        return cached

    def _rebinds(self, header: Node, name: str) -> bool:
        assert header.loop_body is not None
        return any(site.name == name for node in header.loop_body for site in node.defs)

    def _work_of_loop(self, header: Node) -> tuple[F.Work, cst.Call | None]:
        cached = self._loop_work.get(header.index)
        if cached is None:
            assert header.loop_body is not None
            best: tuple[F.Work, cst.Call | None] = (F.Work(F.NONE, "none"), None)
            computes = False
            for node in header.loop_body:
                work, call = self._work_of_node(node, {header.index})
                if work.level > best[0].level:
                    best = (work, call)
                if not computes and node.calls:
                    computes = any(
                        self.facts.expression(call, node).kind == F.TENSOR for call in node.calls
                    )
            work, call = best
            if work.level >= F.LAYER:
                cached = (F.Work(work.level, "loop", work.by_pattern, work.parts), call)
            elif computes:
                cached = (F.Work(F.LAYER, "loop"), None)
            else:
                cached = (F.Work(F.NONE, "none"), None)
            self._loop_work[header.index] = cached
        return cached

    def _held_across(self, info: StatementInfo, name: str, sites: list[DefSite]) -> list[_Held]:
        """The heaviest work that runs while `name` stays bound after `info`, and, when that
        is a whole model call, the heaviest work below it too (a block's feed-forward after
        a nested model call). For a value taken out of a container slot, only work after
        the slot is overwritten counts (until then the container still holds it)."""
        start = info.exit
        assert start is not None
        cfg = self.cfg
        inside = {n.index for n in cfg.nodes if n.loop_body and start in n.loop_body}
        stores: set[int] = set()
        owned_from_start = True
        for site in sites:
            transfers = self.facts.transferred(site) if self.facts.value(site).borrowed else []
            if not transfers:
                continue
            nodes = {s.node.index for s in transfers}
            stores |= nodes
            assert site.node is not None
            if not any(site.node.index < index <= start.index for index in nodes):
                owned_from_start = False
        best: _Held | None = None
        below: _Held | None = None  # the heaviest work that is no whole model call
        seen: set[tuple[int, bool]] = set()
        queue = deque((successor, owned_from_start) for successor in start.succ)
        while queue:
            node, owned = queue.popleft()
            key = (node.index, owned)
            if key in seen:
                continue
            seen.add(key)
            if owned:
                work, call = self._work_of_node(node, inside, name)
                where: cst.CSTNode | None = call
                if work.kind == "loop":
                    where = node.statement
                if work.level >= F.LAYER and where is not None:
                    if best is None or _heavier(work, best.work):
                        best = _Held(work, where, call)
                    if not S.model_interface(work) and (
                        below is None or _heavier(work, below.work)
                    ):
                        below = _Held(work, where, call)
            if any(site.name == name for site in node.defs) or any(
                site.name == name for site in node.kills
            ):
                continue
            now_owned = owned or node.index in stores
            successors = node.succ
            if (
                node.kind == "for"
                and node.loop_body
                and node.index not in inside
                and self._rebinds(node, name)
            ):
                # A loop that rebinds the name: judge the usual path, where it runs at
                # least once (not the empty-iterable exit that skips the rebinding).
                body = {n.index for n in node.loop_body}
                successors = [s for s in node.succ if s.index in body] or node.succ
            queue.extend((successor, now_owned) for successor in successors)
        if best is None:
            return []
        return [best] if below is None or below is best else [best, below]

    # -- lists consumed by a loop -----------------------------------------------------
    def _consumed_lists(self, flow: Dataflow, excluded: set[str]) -> set[tuple[int, str]]:
        """`for tile in tiles:` over a local list of tensors that nothing reads after the
        loop starts: every consumed tile stays referenced by the list until the loop ends.
        Unsafe fix: `for tile in release(tiles):`."""
        reported: set[tuple[int, str]] = set()
        for info in self.cfg.statements:
            statement = info.statement
            if not isinstance(statement, cst.For):
                continue
            iterable = statement.iter
            if (  # `enumerate(tiles)`: release the list inside it
                isinstance(iterable, cst.Call)
                and isinstance(iterable.func, cst.Name)
                and iterable.func.value == "enumerate"
                and iterable.args
                and iterable.args[0].keyword is None
                and not iterable.args[0].star
            ):
                iterable = iterable.args[0].value
            if not isinstance(iterable, cst.Name) or iterable.value in excluded:
                continue
            name = iterable.value
            iterate = info.entry
            header = iterate.succ[0] if iterate.succ else None
            if header is None or header.kind != "for" or not header.loop_body:
                continue
            if flow.live_in[header.index] & flow.name_bit(name):
                continue  # read again in the loop, its `else` or after it
            if any(node.dynamic for node in header.loop_body):
                continue
            sites = flow.reaching(flow.reach_in[iterate.index], name)
            if not sites or any(
                s.kind not in ("assign", "annassign") or self._list_origin(s) is None for s in sites
            ):
                continue
            work, _ = self._work_of_loop(header)
            if work.level < F.LAYER:
                continue
            origin = S.name_origin(name, F._largest(self._list_origin(s) or F.SMALL for s in sites))
            if S.size_class(origin) == S.TINY:
                continue
            estimate = S.estimate(origin, work)
            target = Target.parse(self.rule.settings["release-call"])
            reference, imports = reference_to(self.context, target, self.context.ancestors)
            start, end = self.context.span(iterable)
            fix = Fix(
                message=f"Iterate over `{reference}({name})`",
                edits=(Edit(start, end, f"{reference}({name})"),) + imports,
                applicability=Applicability.UNSAFE,
            )
            row = self.context.position(statement).start.line
            self.rule.report(
                iterable,
                f"`{name}` ({S.describe(origin)}) keeps every item alive until the loop at "
                f"line {row} ends; iterate with `{reference}({name})` to free each item once "
                f"it is consumed (significance: {estimate.level})",
                fix,
                statement=statement,
                significance=estimate.level,
            )
            reported.add((id(statement), name))
        return reported

    def _iterates_released(self, info: StatementInfo, name: str) -> bool:
        """`for tile in release(tiles):` (this rule's own fix, already applied)."""
        statement = info.statement
        if not isinstance(statement, cst.For) or not isinstance(statement.iter, cst.Call):
            return False
        call = statement.iter
        helper = str(self.rule.settings["release-call"]).replace(":", ".").rsplit(".", 1)[-1]
        callee = dotted_name(call.func) or ""
        return (
            callee.rsplit(".", 1)[-1] == helper
            and len(call.args) == 1
            and isinstance(call.args[0].value, cst.Name)
            and call.args[0].value.value == name
        )

    def _list_origin(self, site: DefSite) -> str | None:
        """The origin of a local list's tensors when the binding alone owns the list."""
        facts = self.facts
        fact = facts.value(site)
        if fact.kind != F.CONTAINER or site.unpacked:
            return None
        if facts.escaped(site) or facts.truth_tested(site) or facts.aliases.get(site.index):
            return None
        contents = facts.contents_fact(site)
        if contents.kind != F.TENSOR or facts.elements_shared(site):
            return None
        return contents.origin

    # -- reporting ---------------------------------------------------------------------
    def _report(self, pending: list[_Pending], groups: dict[int, list[_Pending]]) -> None:
        context = self.context
        code = self.rule.code
        prepared = []
        suppressed: set[tuple[int, str]] = set()
        bar = S.bar_of(context.settings)
        for finding in pending:
            last_use, dynamic = self._last_use(finding.info, finding.name)
            if last_use is None:
                continue
            prepared.append((finding, last_use, dynamic))
            if context.is_suppressed(code, last_use, finding.info.statement) or not S.at_least(
                finding.estimate.level, bar
            ):
                # Not reported, so not fixed: its name stays out of a shared `del`.
                suppressed.add((id(finding.info), finding.name))
        for finding, last_use, dynamic in prepared:
            name, info = finding.name, finding.info
            last_row = context.position(last_use).start.line
            if dynamic:
                reader = context.source_of(last_use.func)  # type: ignore[attr-defined]
                last = f"last read by `{reader}()` at line {last_row}"
            else:
                last = f"last used at line {last_row}"
            held = finding.held
            heavy_row = context.position(held.node).start.line
            across = self._across(held, heavy_row)
            statement_row = context.position(info.statement).start.line
            described = finding.origin
            if described in (F.DECODED, S.DECODER_FEATURES) and finding.tokens == UNJUDGED_DOMAIN:
                if not S.pixel_named(context.path, self._owner_name, self._function_source()):
                    described = S.UNJUDGED_DECODED  # a short file: nothing says it is pixels
            what = S.describe_held(described, finding.tokens, finding.held.work)
            if heavy_row <= statement_row:
                subject = f"`{name}` from the previous iteration ({what}; {last})"
                until = " until it is rebound"
            else:
                subject = f"`{name}` ({what}; {last})"
                until = ""
            level = finding.estimate.level
            message = (
                f"{subject} stays alive across {across}{until}{finding.note}; `del` it after its "
                "last use "
                f"(significance: {level})"
            )
            fix = None
            if finding.status == 1:
                message += " (no fix: it is already deleted on some path)"
            elif finding.status == 2:
                message += " (no fix: it may be unbound there)"
            elif finding.status == 0:
                # One `del` for every name that dies here, except names whose finding is
                # not reported (suppressed, or below the significance bar).
                names = [
                    other.name
                    for other in groups[id(info)]
                    if other.status == 0 and (id(info), other.name) not in suppressed
                ]
                if name not in names:
                    names = [name]
                fix = self._fix(info, names)
            self.rule.report(last_use, message, fix, statement=info.statement, significance=level)

    def _across(self, held: _Held, row: int) -> str:
        """What the value is held across, in words: "the VAE decode `self.vae.decode(...)`
        at line 12", "the loop at line 30, which runs `self.transformer(...)`"."""
        work = held.work
        callee = ""
        if held.call is not None:
            callee = " ".join(self.context.source_of(held.call.func).split())
            if len(callee) > 40:
                callee = callee[:37] + "..."
        if work.kind == "loop":
            runs = f", which runs `{callee}(...)`" if callee else ""
            return f"the loop at line {row}{runs}"
        lowered = callee.lower()
        if work.kind == "decode":
            label = "the VAE decode" if "vae" in lowered else "the decode"
        elif work.kind == "encode" and "vae" in lowered:
            label = "the VAE encode"
        elif work.kind in ("encoder", "encode"):
            label = "the encoder call"
        elif work.kind == "model":
            label = "the model call"
        elif work.kind == "collective":
            label = "the collective"
        elif work.kind == "concatenation":
            label = "the concatenation"
        elif work.kind == "torch-op":
            label = "the allocating op"
        elif work.kind == "closure":
            label = "the nested function that runs sublayers,"
        elif work.kind == "helper":
            label = "the helper that runs sublayers,"
        elif work.kind == "module-parameter":
            label = "the call of a module passed in,"
        elif work.sized_by == "large":
            label = "the sublayer over large inputs"
        elif work.sized_by == "conditioning":
            label = "one conditioning-stream sublayer,"
        elif work.level >= F.PEAK:
            label = "the sublayer"
        else:
            label = "one sublayer,"
        where = ""
        if (
            S.autoencoder_named(self.context.path, self._owner_name)
            and S.at_autoencoder_bottleneck(work) != work
        ):
            where = ", attention at the autoencoder's latent resolution"
        return f"{label} `{callee}(...)` at line {row}{where}"

    def _none_past_exit_guard(self, info: StatementInfo, name: str) -> bool:
        """Whether the name's last read is in a guard that returns or raises when it holds
        something (`fast = _fast_path(x)`; `if fast is not None: return fast`, or `if
        cached: return cached`): where the code goes on past the guard, the name is None
        (or empty), so it holds nothing across the work that follows."""
        last, dynamic = self._last_use(info, name)
        if last is None or dynamic:
            return False
        found = False

        def contains_last(node: cst.CSTNode) -> bool:
            inside = False

            def mark(current: cst.CSTNode) -> None:
                nonlocal inside
                inside = inside or current is last

            walk(node, mark, _ignore)
            return inside

        def enter(node: cst.CSTNode) -> None:
            nonlocal found
            if found or type(node) is not cst.If:
                return
            assert isinstance(node, cst.If)
            if node.orelse is not None or not _tests_presence(node.test, name):
                return
            if not _always_exits(node.body):
                return
            found = contains_last(node)

        walk(info.statement, enter, _ignore)
        return found

    def _last_use(self, info: StatementInfo, name: str) -> tuple[cst.CSTNode | None, bool]:
        """The last read of `name` inside the statement, in source order (the walk's order;
        no positions, which would cost a code generation of the module): a Name, or a
        `locals()`-like call (then the flag is True) when the name is only read
        dynamically."""
        loads = {id(load) for node in self.cfg.nodes for load in node.loads if load.value == name}
        calls = {
            id(n.dynamic_call)
            for n in self.cfg.nodes
            if n.dynamic_call is not None and (n.dynamic or name in n.dynamic_names)
        }
        best: cst.CSTNode | None = None
        dynamic = False

        def enter(node: cst.CSTNode) -> None:
            nonlocal best, dynamic
            if id(node) in loads:
                best, dynamic = node, False
            elif id(node) in calls:
                best, dynamic = node, True

        walk(info.statement, enter, _ignore)
        return best, dynamic

    def _fix(self, info: StatementInfo, names: Sequence[str]) -> Fix:
        context = self.context
        offset = context.line_after(info.statement)
        prefix = ""
        if (
            offset == len(context.source)
            and context.source
            and not context.source.endswith(("\n", "\r"))
        ):
            prefix = context.newline
        indentation = context.indentation_of(info.statement)
        listed = ", ".join(names)
        code = f"{prefix}{indentation}del {listed}{context.newline}"
        edits = [Edit(offset, offset, code)]
        edits.extend(self._jump_edits(info, names))
        return Fix(
            message=f"Insert `del {listed}` after line {context.position(info.statement).end.line}",
            edits=tuple(edits),
            applicability=Applicability.SAFE,
        )

    def _jump_edits(self, info: StatementInfo, names: Sequence[str]) -> list[Edit]:
        """`break`/`continue` lines inside the statement that leave it without passing the
        `del` after it: the names dead at the jump's target get their own `del` before it."""
        assert self.flow is not None and info.exit is not None
        flow = self.flow
        low, high = info.entry.index, info.exit.index
        lines = {id(line.entry): line for line in self.cfg.statements}
        edits: list[Edit] = []
        for node in self.cfg.nodes[low : high + 1]:
            if not node.jump or not isinstance(node.statement, (cst.Break, cst.Continue)):
                continue
            if len(node.succ) != 1:
                continue
            target = node.succ[0]
            if low <= target.index <= high or target.kind not in ("after", "for", "while"):
                continue  # stays inside the statement, or crosses a `finally`
            line = lines.get(id(node))
            if (
                line is None
                or not line.insertable
                or not isinstance(line.statement, cst.SimpleStatementLine)
                or len(line.statement.body) != 1
            ):
                continue
            dead_here = []
            for name in names:
                bit = flow.name_bit(name)
                if flow.live_in[target.index] & bit:
                    continue
                sites = flow.reaching(flow.reach_in[node.index], name)
                if not sites or any(s.kind in ("unbound", "deleted") for s in sites):
                    continue
                dead_here.append(name)
            if dead_here:
                start = self.context.line_start_of(line.statement)
                indentation = self.context.indentation_of(line.statement)
                code = f"{indentation}del {', '.join(dead_here)}{self.context.newline}"
                edits.append(Edit(start, start, code))
        return edits


# A read that inserts at least this many new axes broadcasts over them (`[:, :, None, None]`).
_BROADCAST_AXES = 2


def _ignore(node: cst.CSTNode) -> None:
    return None


def _tests_presence(test: cst.BaseExpression, name: str) -> bool:
    """`name is not None` or a bare `name`: true exactly when the name holds something."""
    if isinstance(test, cst.Name):
        return test.value == name
    if (
        isinstance(test, cst.Comparison)
        and isinstance(test.left, cst.Name)
        and test.left.value == name
        and len(test.comparisons) == 1
    ):
        target = test.comparisons[0]
        return (
            isinstance(target.operator, cst.IsNot)
            and isinstance(target.comparator, cst.Name)
            and target.comparator.value == "None"
        )
    return False


def _always_exits(body: cst.BaseSuite) -> bool:
    """The block ends in `return` or `raise` (so nothing after its `if` runs from it)."""
    statements = body.body
    if not statements:
        return False
    last = statements[-1]
    if isinstance(last, cst.SimpleStatementLine):
        return bool(last.body) and isinstance(last.body[-1], (cst.Return, cst.Raise))
    if isinstance(body, cst.SimpleStatementSuite):
        return isinstance(statements[-1], (cst.Return, cst.Raise))
    return False


def _read_only_broadcast(function: cst.FunctionDef, name: str) -> bool:
    """Whether every read of `name` in the function indexes it with two or more `None`
    axes (`token_types[:, :, None, None, :]`): a per-frame or per-channel table broadcast
    over the axes it lacks (height and width), not a per-token activation."""
    broadcast: set[int] = set()
    reads = 0
    stack: list[cst.CSTNode] = [function.body]
    targets: set[int] = set()
    while stack:
        node: Any = stack.pop()  # (its type is tested exactly below)
        kind = type(node)  # (exact types: isinstance against LibCST's ABCs is slow)
        if kind in _BINDING_STATEMENTS:
            bound = node.targets if kind is cst.Assign else [node]
            for target in bound:
                for inner in _bound_names(target.target):
                    targets.add(id(inner))
        elif kind is cst.Subscript and type(node.value) is cst.Name:
            if node.value.value == name:
                nones = sum(
                    isinstance(element.slice, cst.Index)
                    and isinstance(element.slice.value, cst.Name)
                    and element.slice.value.value == "None"
                    for element in node.slice
                )
                if nones >= _BROADCAST_AXES:
                    broadcast.add(id(node.value))
        elif kind is cst.Name and node.value == name and id(node) not in targets:
            reads += 1
            if id(node) not in broadcast:
                return False
        # (LibCST's `children` rebuilds; whitespace and comment leaves hold no name)
        stack.extend(child for child in reversed(child_nodes(node)) if type(child) not in _LEAVES)
    return reads > 0


_BINDING_STATEMENTS = frozenset((cst.Assign, cst.AnnAssign, cst.AugAssign, cst.For))
_LEAVES = frozenset(LEAF_TYPES)


def _unit_frame_slice(node: cst.Subscript) -> bool:
    """`z[:, :, i : i + 1]` (or `z[:, :, i]`... only the unit slice): one frame of a
    `[b, c, t, h, w]` latent."""
    elements = node.slice
    if len(elements) < 3:
        return False
    third = elements[2].slice
    if not isinstance(third, cst.Slice) or third.lower is None or third.upper is None:
        return False
    upper = third.upper
    return (
        isinstance(upper, cst.BinaryOperation)
        and isinstance(upper.operator, cst.Add)
        and isinstance(upper.right, cst.Integer)
        and upper.right.value == "1"
        and upper.left.deep_equals(third.lower)
    )


def _splatted(function: cst.FunctionDef, name: str) -> bool:
    """Whether the function passes `**name` to a call: `name` is a mapping of keyword
    arguments (`self.transformer(**kwargs)`)."""
    found = False

    def enter(node: cst.CSTNode) -> None:
        nonlocal found
        if (
            isinstance(node, cst.Arg)
            and node.star == "**"
            and isinstance(node.value, cst.Name)
            and node.value.value == name
        ):
            found = True

    walk(function, enter, lambda node: None)
    return found


def _bound_names(target: cst.BaseExpression) -> list[cst.Name]:
    """The names an assignment target binds (`x`, `a, (b, *c)`)."""
    if isinstance(target, cst.Name):
        return [target]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in _bound_names(e.value)]
    if isinstance(target, cst.StarredElement):
        return _bound_names(target.value)
    return []
