"""What kind of model a file implements, from what its code talks about (a per-file fact).

An activation's bytes follow the model's real input sizes: a video DiT block holds
32,760 tokens x 1,536 channels (96 MiB), an ASR conformer after 8x subsampling holds a few
hundred frames (about 1.5 MiB for 30 s of audio), a speech codec or TTS decoder a few hundred
tokens, a legacy text model with learned position tables at most its
`max_position_embeddings` (512-2,048 tokens). The same `del attn_output` is worth a finding in
the first and nothing in the others.

The fact is derived from the words of the file's identifiers and strings (split at
underscores), counted once per file and memoised on the file context:

- `video`: a `large` file whose code handles video (many tokens): it shows the structure of
  5-D video tensors (`b, c, t, h, w = x.shape`, `Conv3d`, frame counts such as `num_frames`
  or a temporal patch size) and the words of video (frames, temporal, `...Video...` class
  names), with the vocabulary of generation (latents, timesteps, diffusion). At 480p x 81
  frames a video DiT holds 32,760 tokens per activation (96 MiB at 1,536 channels; ~700
  MiB for HunyuanVideo at 720p x 129 frames);
- `large`: the vocabulary of video and image generation (frames, `conv3d`, latents,
  timesteps, patchify, VAE, denoising) or of long-context language models (rotary
  positions, KV caches, sliding windows) outweighs the rest, without the evidence of
  video: thousands of tokens (an image DiT at 1024^2: ~4k tokens, 16-24 MiB per
  activation; an LLM block, whose weights and KV cache dwarf one activation);
- `small`: the vocabulary of audio and speech (audio, mel, waveform, codebooks, CTC,
  subsampling, vocoder, codec) or of detection and segmentation post-processing (boxes, NMS,
  panoptic, multimask) dominates, or the file is a text model whose positions come from a
  learned table (`max_position_embeddings`, relative buckets) with no rotary or ALiBi
  positions and no generation vocabulary: its sequences are capped at the table's size;
- `unknown`: neither, in a file long enough to show it (a utility, a config layer, a
  retrieval model): no evidence of many tokens or pixels, so an activation counts one
  level down;
- `unjudged`: a file too short to say (a snippet, a small module). It is no many-token
  domain either: nothing in it shows tens of thousands of tokens, so an activation there
  counts one level down like an unknown file's (`significance.MANY_TOKEN_DOMAINS`; a GAN
  discriminator's or an SSIM metric's convolutions in a short file are a few MiB).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Container, Iterator
from dataclasses import dataclass, field

import libcst as cst

from lifetime_lint.lazy_regex import compile_lazily
from lifetime_lint.traversal import walk

VIDEO_DOMAIN, LARGE_DOMAIN, SMALL_DOMAIN, UNKNOWN_DOMAIN = "video", "large", "small", "unknown"
UNJUDGED_DOMAIN = "unjudged"

MEMO_KEY = "analysis.domain"

_WORD = compile_lazily(r"[A-Za-z_][A-Za-z0-9_]*")

# Words of video/image generation and of long-context language models.
_LARGE_WORDS = frozenset(
    [
        "conv3d", "frames", "video", "videos", "temporal", "latent", "latents", "timestep",
        "timesteps", "patchify", "unpatchify", "vae", "denoise", "denoising", "diffusion",
        "unet", "rotary", "rope", "sliding", "kv", "prefill", "img", "image", "images",
        "pixel", "noise",
    ]
)  # fmt: skip
# Words of audio/speech models, of detection/segmentation post-processing and of time-series
# forecasting (a context of a few thousand points, patched into a few hundred tokens; its
# forecasts are batch x horizon x quantiles: KiB to a few MiB).
_SMALL_WORDS = frozenset(
    [
        "audio", "speech", "mel", "waveform", "wav", "vocoder", "codec", "codebook",
        "codebooks", "ctc", "asr", "phoneme", "phonemes", "spectrogram", "subsampling",
        "conformer", "tts", "acoustic", "acoustics", "voice", "fbank", "bbox", "bboxes",
        "boxes", "nms", "panoptic", "detection", "detections", "multimask", "keypoints",
        "forecast", "forecasts", "forecasting", "horizon", "quantile", "quantiles",
        "timeseries", "seasonal", "seasonality", "lags", "revin",
    ]
)  # fmt: skip
# Words of video (split at underscores and CamelCase: `HunyuanVideoTransformer3DModel`).
_VIDEO_WORDS = frozenset(
    ["video", "videos", "frame", "frames", "temporal", "conv3d", "3d", "t2v", "i2v", "v2v"]
)
# Words of generation (diffusion): a multimodal LLM that reads videos has none of these.
_GENERATION_WORDS = frozenset(
    [
        "timestep", "timesteps", "latent", "latents", "patchify", "unpatchify", "vae",
        "denoise", "denoising", "diffusion", "noise", "dit",
    ]
)  # fmt: skip
# Words of language modelling: a multimodal LLM reads videos, it does not generate them.
_LANGUAGE_WORDS = frozenset(["vocab", "lm", "logits"])
_CAMEL = compile_lazily(r"[A-Z]+[0-9]*(?=[A-Z][a-z]|$)|[A-Z]?[a-z]+[0-9]*|[0-9]+[A-Za-z]*|[A-Z]+")
# The structure of 5-D video tensors: a 5-name unpack of a shape, a 3-D convolution, a
# frame count or a temporal patch size.
_VIDEO_STRUCTURE = compile_lazily(
    r"^[ \t]*\(?[ \t]*\w+(?:[ \t]*,[ \t]*\w+){4}[ \t]*,?[ \t]*\)?[ \t]*=[ \t]*[\w.\[\]]+"
    r"\.(?:shape|size\(\))"
    r"|[Cc]onv3[dD]"
    r"|\b\w*(?:num_\w*frames|latent_frames|patch_size_t|temporal_patch\w*|p_t)\b",
    re.MULTILINE,
)
# How much evidence makes a `large` file a video one: structure and words, or many words.
_VIDEO_STRUCTURE_EVIDENCE, _VIDEO_WORD_EVIDENCE, _VIDEO_WORDS_ALONE = 2, 5, 20
_GENERATION_EVIDENCE = 5
# Words that make a compound a width (`latent_size`, `latent_dim`), not a tensor.
_WIDTH_WORDS = frozenset(["size", "dim", "dims", "width"])
# Positions from a learned table cap the sequence; rotary/ALiBi positions do not.
_TABLE_POSITIONS = ("max_position_embeddings", "num_buckets")
_OPEN_POSITIONS = frozenset(["rotary", "rope", "alibi"])
# Below this many domain words a file says too little to judge.
_EVIDENCE = 10
# Below this many identifiers, a file without domain words is too short to judge.
_LONG_FILE = 1500


def domain_of_source(source: str) -> str:
    """The domain (`video`, `large`, `small`, `unknown` or `unjudged`) of a file's source
    text."""
    counts: Counter[str] = Counter()
    table_positions = False
    words = _WORD.findall(source)
    # Each distinct identifier once, weighted by how often it occurs (the same counts).
    occurrences = Counter(words)
    for word, times in occurrences.items():
        lowered = word.lower()
        if not table_positions and lowered.endswith(_TABLE_POSITIONS):
            table_positions = True
        for part in lowered.split("_"):
            if part in _LARGE_WORDS or part in _SMALL_WORDS or part == "alibi":
                counts[part] += times
    large = sum(counts[w] for w in _LARGE_WORDS)
    small = sum(counts[w] for w in _SMALL_WORDS)
    if small >= _EVIDENCE and small > large:
        return SMALL_DOMAIN
    generation = large - counts["kv"]
    if table_positions and generation < _EVIDENCE and not any(counts[w] for w in _OPEN_POSITIONS):
        return SMALL_DOMAIN  # a legacy text model: sequences capped by its position table
    if large >= _EVIDENCE:
        return VIDEO_DOMAIN if _shows_video(source, occurrences) else LARGE_DOMAIN
    return UNKNOWN_DOMAIN if len(words) >= _LONG_FILE else UNJUDGED_DOMAIN


def _shows_video(source: str, occurrences: Counter[str]) -> bool:
    """Whether a generation file handles video: 5-D structure and video words, or many video
    words, with more words of generation than of language modelling. A width named for a
    latent (`latent_size`, `latent_dim`: an encoder's hidden size, as an LLM's NaViT
    image/video tower names it) is no word of generation."""
    video = generation = language = 0
    for word, times in occurrences.items():  # each distinct identifier, with its count
        parts = word.split("_")
        for at, part in enumerate(parts):
            pieces = [part] if part.islower() or part.isupper() else _CAMEL.findall(part)
            for piece in pieces:
                lowered = piece.lower()
                if lowered in _VIDEO_WORDS:
                    video += times
                elif lowered in _GENERATION_WORDS:
                    if at + 1 < len(parts) and parts[at + 1].lower() in _WIDTH_WORDS:
                        continue  # `latent_size = config.hidden_size`
                    generation += times
                elif lowered in _LANGUAGE_WORDS:
                    language += times
    if generation < _GENERATION_EVIDENCE or language >= generation:
        return False
    if video >= _VIDEO_WORDS_ALONE:
        return True
    if video < _VIDEO_WORD_EVIDENCE:
        return False
    return len(_VIDEO_STRUCTURE.findall(source)) >= _VIDEO_STRUCTURE_EVIDENCE


def mentions_video(text: str) -> bool:
    """Whether source text (a function's) names video: `video`, `frames`, `num_frames`,
    `VideoDecoder`."""
    for word in set(_WORD.findall(text)):  # (each distinct identifier once)
        for part in word.split("_"):
            pieces = [part] if part.islower() or part.isupper() else _CAMEL.findall(part)
            if any(piece.lower() in _VIDEO_WORDS for piece in pieces):
                return True
    return False


def code_mentions_video(function: cst.FunctionDef) -> bool:
    """Whether a function's code, not its prose, names video: its identifiers and strings,
    without its docstring or comments (`mentions_video`). A docstring's "transformed to the
    input frame of the model" (SAM's coordinate frame) is no video."""
    docstring: cst.CSTNode | None = None
    body = function.body
    if isinstance(body, cst.IndentedBlock) and body.body:
        first = body.body[0]
        if (
            isinstance(first, cst.SimpleStatementLine)
            and len(first.body) == 1
            and isinstance(first.body[0], cst.Expr)
            and isinstance(first.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
        ):
            docstring = first
    words: list[str] = []
    skipping: list[cst.CSTNode] = []

    def enter(node: cst.CSTNode) -> None:
        if node is docstring:
            skipping.append(node)
        if skipping:
            return
        if isinstance(node, (cst.Name, cst.SimpleString)):
            words.append(node.value)

    def leave(node: cst.CSTNode) -> None:
        if skipping and skipping[-1] is node:
            skipping.pop()

    walk(function, enter, leave)
    return mentions_video(" ".join(words))


# Parameters that say a block runs incrementally against a key/value cache (`kv_cache`,
# `past_key_values`, `layer_past`, `crossattn_cache`, `use_cache`, LingBot's `self_cache`
# and `cross_cache`); a causal VAE's conv cache (`feat_cache`: two frames per conv, beside
# a chunk of full-resolution frames) is no such thing.
_KV_CACHE_WORDS = frozenset(["kv", "attn", "crossattn", "key", "keys", "use", "self", "cross"])


def runs_against_cache(function) -> bool:
    """Whether a function takes a KV cache (a parameter named for one): a streaming causal
    video block or an LLM layer works on one chunk of new tokens per call (a few latent
    frames: thousands of tokens), beside a cache that dwarfs one activation."""
    params = function.params
    for param in (*params.posonly_params, *params.params, *params.kwonly_params):
        words = set(param.name.value.lower().split("_"))
        if "past" in words or ("cache" in words and words & _KV_CACHE_WORDS):
            return True
    return False


# Recurrent cells: their input is one time step, `(batch, input_size)` by their signature.
_RECURRENT_CELLS = frozenset(["LSTMCell", "GRUCell", "RNNCell"])
_CELLS_KEY = "domain.recurrent_cells"


def recurrent_cells(module: cst.Module, memo: dict, owner: str | None) -> frozenset[str]:
    """The attributes of class `owner` that its methods bind to a recurrent cell
    (`self.attention_rnn = nn.LSTMCell(...)`), memoised per file; empty without a class."""
    if owner is None:
        return frozenset()
    table = memo.get(_CELLS_KEY)
    if table is None:
        table = {}
        for statement in module.body:
            if isinstance(statement, cst.ClassDef):
                table[statement.name.value] = _cells_of(statement)
        memo[_CELLS_KEY] = table
    return table.get(owner, frozenset())


def _cells_of(node: cst.ClassDef) -> frozenset[str]:
    found: set[str] = set()

    def enter(current: cst.CSTNode) -> None:
        if not isinstance(current, cst.Assign) or not isinstance(current.value, cst.Call):
            return
        func = current.value.func
        called = func.attr.value if isinstance(func, cst.Attribute) else None
        if isinstance(func, cst.Name):
            called = func.value
        if called not in _RECURRENT_CELLS:
            return
        for target in current.targets:
            slot = target.target
            if (
                isinstance(slot, cst.Attribute)
                and isinstance(slot.value, cst.Name)
                and slot.value.value == "self"
            ):
                found.add(slot.attr.value)

    walk(node, enter, lambda current: None)
    return frozenset(found)


def file_domain(context) -> str:
    """The domain of the file being linted (computed once per file)."""
    domain = context.memo.get(MEMO_KEY)
    if domain is None:
        domain = domain_of_source(context.source)
        context.memo[MEMO_KEY] = domain
    return domain


# -- which classes of a video file work at video size ----------------------------------------
# One file often holds several independent models: diffusers' `attention.py` holds an SD1.x
# UNet block with GLIGEN's gated attention, SD3's `JointTransformerBlock` (an image DiT) and
# AnimateDiff's `FreeNoiseTransformerBlock` (video). The file's domain is video because of the
# last; the image blocks hold ~4k tokens at 1024^2, not 32,760.

_VIDEO_CLASSES_KEY = "domain.video_classes"
# How much of a class's own code must be about video (video words, 5-D structure) to count.
_CLASS_VIDEO_EVIDENCE = 2


def class_domain(context, owner: str | None) -> str:
    """The domain a class of the file works at: the file's (`file_domain`), except that in a
    video file whose video evidence lies in some of its classes, a class with no link to them
    works at image size (`LARGE_DOMAIN`). See `video_classes` for the links."""
    domain = file_domain(context)
    if domain != VIDEO_DOMAIN or owner is None:
        return domain
    video = video_classes(context.module, context.memo)
    if video is None or owner in video or owner not in video.classes:
        return domain
    return LARGE_DOMAIN


@dataclass(frozen=True)
class VideoClasses:
    """The top-level classes of a file (`classes`) and those that work at video size."""

    classes: frozenset[str]
    video: frozenset[str]

    def __contains__(self, name: object) -> bool:
        return name in self.video


def video_classes(module: cst.Module, memo: dict) -> VideoClasses | None:
    """Which top-level classes of a module work at video size, memoised per file; None when no
    class shows video in its own code (the file's evidence is elsewhere: keep the file's
    domain for all). A class is video when
    - its name names video (`VideoBlock`, `TemporalBasicTransformerBlock`), or its own code
      shows it (`_CLASS_VIDEO_EVIDENCE` video words or 5-D structures: `num_frames`,
      `b, c, t, h, w = x.shape`, `Conv3d`);
    - it names (builds, subclasses or lists in `_no_split_modules`) a class that does, or
      one that names such a class (a model that builds a video block is a video model); or
    - a video class names it (a block built by a video model runs on its tokens:
      `WanTransformerBlock`, built only by `WanTransformer3DModel`).
    Naming counts any identifier or string word equal to a class name, so a block built
    through a variable or a config list still links; a class named by a module-level
    function (`initialize_layers(model)` building the blocks) keeps the file's domain."""
    if _VIDEO_CLASSES_KEY in memo:
        return memo[_VIDEO_CLASSES_KEY]
    result = _video_classes(module)
    memo[_VIDEO_CLASSES_KEY] = result
    return result


def _video_classes(module: cst.Module) -> VideoClasses | None:
    definitions = [s for s in module.body if isinstance(s, cst.ClassDef)]
    classes = frozenset(s.name.value for s in definitions)
    names: dict[str, set[str]] = {}  # class -> the other classes of the file it names
    shown: set[str] = set()
    for statement in definitions:
        name = statement.name.value
        code = module.code_for_node(statement)
        words = _WORD.findall(code)
        names[name] = (set(words) & classes) - {name}
        evidence = sum(1 for word in words if mentions_video(word))
        evidence += len(_VIDEO_STRUCTURE.findall(code))
        if evidence >= _CLASS_VIDEO_EVIDENCE or mentions_video(name):  # (`VideoBlock`)
            shown.add(name)
    if not shown:
        return None
    video = set(shown)
    for function in module.body:  # named by module-level code (a builder function): linked
        if isinstance(function, cst.FunctionDef):
            video |= set(_WORD.findall(module.code_for_node(function))) & classes
    changed = True
    while changed:  # up: a class that names a video class (its model, its subclass)
        changed = False
        for name, named in names.items():
            if name not in video and named & video:
                video.add(name)
                changed = True
    pending = list(video)
    while pending:  # down: what a video class names (its blocks, processors, bases)
        for built in names[pending.pop()]:
            if built not in video:
                video.add(built)
                pending.append(built)
    return VideoClasses(classes, frozenset(video))


# -- which stream of a multi-stream model a value belongs to ----------------------------------
# A two-stream model (an audio-video DiT such as LTX-2, a dual-stream image DiT, a
# mixture-of-transformers such as BAGEL or Cosmos3 with its understanding and generation
# streams) runs its blocks over a long stream (video or image tokens: thousands to tens of
# thousands) and a short one (audio latents, ~25 tokens a second; prompt or understanding
# tokens, a few hundred). The file's domain says how big the long stream's activations are;
# a value of the short stream is a few MiB whatever the domain.
AUDIO_STREAM, TEXT_STREAM = "audio", "text"
_MAIN_STREAM = "main"

# Words that name a short stream (whole words of a name split at underscores).
_AUDIO_STREAM_WORDS = frozenset(["audio", "audios", "speech", "sound", "wav", "waveform"])
_TEXT_STREAM_WORDS = frozenset(
    ["text", "txt", "prompt", "prompts", "caption", "context", "und", "understanding"]
)
# Words that name the long stream (`video_hidden_states`, `img_q`, `gen_norm`).
_MAIN_STREAM_WORDS = frozenset(
    ["video", "videos", "vid", "img", "image", "images", "visual", "vision", "gen", "frames"]
)
# Keywords that pass an attention's or a sublayer's query (its output's tokens).
_QUERY_KEYWORDS = frozenset(["hidden_states", "x", "query", "q", "input", "inputs", "hidden"])
_MODULE_RECEIVERS = frozenset(["self", "cls"])
_STREAM_DEPTH = 12  # (each binding is followed once per query: the `seen` memo)


def stream_named(name: str) -> str | None:
    """The stream a name says: `audio` (`norm_audio_hidden_states`), `text`
    (`encoder_hidden_states`, `context`, `txt`, `und_norm`), `main` (`video_x`, `img_attn`,
    `gen_norm`), or None (`hidden_states`, `attn_output`, a name of both streams such as
    `audio_to_video_out`)."""
    words = set(name.lower().strip("_").split("_"))
    if "layer" in words:
        return None  # `context_layer`: an attention's output in BERT-style code, not a stream
    short: str | None = None
    if words & _AUDIO_STREAM_WORDS:
        short = AUDIO_STREAM
    elif words & _TEXT_STREAM_WORDS or {"encoder", "hidden"} <= words:
        short = TEXT_STREAM
    main = bool(words & _MAIN_STREAM_WORDS)
    if short is not None and not main:
        return short
    if main and short is None:
        return _MAIN_STREAM
    return None


def short_stream(facts, site) -> str | None:
    """`AUDIO_STREAM` or `TEXT_STREAM` when a binding holds the short stream of a multi-stream
    model, by its name or by dataflow; None otherwise. An attention's or a sublayer's output
    has its query's tokens (the first argument, or `hidden_states=`): the video-to-audio
    cross-attention `self.video_to_audio_attn(norm_audio, context=norm_video)` returns audio
    tokens. A value derived from the short stream through light ops, sublayers and
    elementwise arithmetic (which cannot mix token counts) keeps it, and so does a slice of
    a joint sequence up to the text length (`joint[:, :text_len]`)."""
    stream = _site_stream(facts, site, _STREAM_DEPTH, {})
    return stream if stream in (AUDIO_STREAM, TEXT_STREAM) else None


def short_stream_input(facts, call: cst.Call, node) -> str | None:
    """`AUDIO_STREAM` or `TEXT_STREAM` when a call's query input (its first argument, or
    `hidden_states=`) is the short stream: `self.mlp(self.norm(residual_und))` works on the
    understanding stream's few hundred tokens, not on the video's."""
    stream = _expression_stream(facts, call, node, _STREAM_DEPTH, {})
    return stream if stream in (AUDIO_STREAM, TEXT_STREAM) else None


def _site_stream(facts, site, depth: int, seen: dict[int, str | None]) -> str | None:
    named = stream_named(site.name)
    if named is not None or depth <= 0:
        return named
    if site.index in seen:
        return seen[site.index]  # (None while it is being followed: a loop's own update)
    if site.kind == "param":
        if cross_attention_context(facts.owner, facts.function, site.name):
            return TEXT_STREAM  # `y` of `CrossAttention.forward(self, x, y)`: the context
        return None
    if site.kind not in ("assign", "annassign", "walrus") or site.unpacked:
        return None  # (a parameter or an unpacked result: only its name can say)
    if site.value is None or site.node is None:
        return None
    seen[site.index] = None
    stream = _expression_stream(facts, site.value, site.node, depth - 1, seen)
    seen[site.index] = stream
    return stream


def _expression_stream(facts, expr, node, depth: int, seen: dict[int, str | None]) -> str | None:
    if depth <= 0:
        return None
    if isinstance(expr, cst.Name):
        named = stream_named(expr.value)
        if named is not None:
            return named
        sites = facts.reaching(node, expr.value)
        streams = {_site_stream(facts, site, depth, seen) for site in sites}
        return streams.pop() if len(streams) == 1 else None
    if isinstance(expr, cst.Call):
        func = expr.func
        if (
            isinstance(func, cst.Attribute)
            and isinstance(func.value, cst.Name)
            and func.value.value not in _MODULE_RECEIVERS
            and facts.reaching(node, func.value.value)
        ):
            # `x.view(...)`, `x.to(dtype)`: a method of a local tensor keeps its tokens
            return _expression_stream(facts, func.value, node, depth - 1, seen)
        query = _query_argument(expr)
        return None if query is None else _expression_stream(facts, query, node, depth - 1, seen)
    if isinstance(expr, cst.BinaryOperation):
        if isinstance(expr.operator, cst.MatrixMultiply):
            return _expression_stream(facts, expr.left, node, depth - 1, seen)
        # Elementwise arithmetic broadcasts: an operand of the short stream sets the result's
        # tokens (the other is the same stream or a per-sample scale or gate).
        streams = {
            _expression_stream(facts, side, node, depth - 1, seen)
            for side in (expr.left, expr.right)
        }
        streams.discard(None)
        return streams.pop() if len(streams) == 1 else None
    if isinstance(expr, cst.UnaryOperation):
        return _expression_stream(facts, expr.expression, node, depth - 1, seen)
    if isinstance(expr, cst.Subscript):
        if _slices_to_text(expr):
            return TEXT_STREAM
        return _expression_stream(facts, expr.value, node, depth - 1, seen)
    if isinstance(expr, cst.Attribute):
        # `out.audio_hidden_states`: the field's name says its stream; `audio.x` (LTX-2's
        # per-modality `TransformerArgs`): a field of a stream's record is that stream's.
        # A module's own attribute (`self.weight`) says nothing through its receiver.
        named = stream_named(expr.attr.value)
        if named is not None:
            return named
        if isinstance(expr.value, cst.Name) and expr.value.value in _MODULE_RECEIVERS:
            return None
        return _expression_stream(facts, expr.value, node, depth - 1, seen)
    if isinstance(expr, cst.IfExp):
        # `audio.x if audio is not None else None`: an optional stream is that stream; every
        # branch that can hold a tensor must agree (an unknown branch may be the long stream).
        branches = [
            branch
            for branch in (expr.body, expr.orelse)
            if not (isinstance(branch, cst.Name) and branch.value == "None")
        ]
        streams = {_expression_stream(facts, branch, node, depth - 1, seen) for branch in branches}
        return streams.pop() if len(streams) == 1 else None
    return None


# A cross-attention's key/value input is its conditioning: the prompt's few hundred tokens
# (Wan's `CrossAttention.forward(self, x, y)` over the 512-token T5 context), a reference
# image's 257 CLIP tokens, an audio clip's embeddings; its queries are the long stream. A
# class named for the main stream too (`VideoToAudioCrossAttention`) may take the video as
# its context and is left out, and so is a parameter that falls back to the query
# (`context = x if context is None else context`: the dataflow sees both).
_CROSS_CLASS_WORDS = frozenset(["cross"])
_ATTENTION_CLASS_WORDS = frozenset(["attention", "attn"])


def cross_attention_context(owner, function, name: str) -> bool:
    """Whether `name` is the context (key/value input) parameter of a cross-attention's
    `forward`: the class is named for cross-attention and for no main stream
    (`CrossAttention`, `WanT2VCrossAttention`), and `name` is the positional parameter right
    after the query (`forward(self, x, context)`), not a query keyword."""
    if owner is None or function.name.value != "forward" or name in _QUERY_KEYWORDS:
        return False
    words = {word.lower() for word in _CLASS_WORD.findall(owner.name.value)}
    if not (words & _CROSS_CLASS_WORDS and words & _ATTENTION_CLASS_WORDS):
        return False
    if words & _MAIN_STREAM_WORDS or stream_named(name) == _MAIN_STREAM:
        return False
    params = [p.name.value for p in (*function.params.posonly_params, *function.params.params)]
    return len(params) >= 3 and params[2] == name


def _slices_to_text(subscript: cst.Subscript) -> bool:
    """`joint[:, :text_len]`, `x[:, : encoder_hidden_states.shape[1]]`, `attn[:, -txt_len:]`:
    a slice of a joint sequence up to a bound named for the text stream, or its last
    text-length tokens (the prompt's tokens)."""
    for element in subscript.slice:
        index = element.slice
        if not isinstance(index, cst.Slice):
            continue
        lower, upper = index.lower, index.upper
        if upper is not None and (
            lower is None or (isinstance(lower, cst.Integer) and lower.value == "0")
        ):
            if not isinstance(upper, cst.UnaryOperation) and _names_text(upper):
                return True
        if (
            upper is None
            and isinstance(lower, cst.UnaryOperation)
            and isinstance(lower.operator, cst.Minus)
            and _names_text(lower.expression)
        ):
            return True
    return False


def _names_text(bound: cst.BaseExpression) -> bool:
    return any(stream_named(name.value) == TEXT_STREAM for name in _names_in(bound))


def _names_in(expr: cst.BaseExpression) -> Iterator[cst.Name]:
    if isinstance(expr, cst.Name):
        yield expr
    elif isinstance(expr, cst.Attribute):
        yield from _names_in(expr.value)
        yield expr.attr
    elif isinstance(expr, cst.Subscript):
        yield from _names_in(expr.value)
    elif isinstance(expr, cst.BinaryOperation):
        yield from _names_in(expr.left)
        yield from _names_in(expr.right)


# -- classes whose every instance serves a short stream ----------------------------------------
# A video DiT file also holds the modules of its text stream: HunyuanVideo's token refiner
# (`self.context_embedder = HunyuanVideoTokenRefiner(...)`, called on the prompt embeddings)
# runs its own attention and MLP blocks over a few hundred prompt tokens, with generic names
# inside (`x`, `attn`, `mlp`) that no name- or dataflow-level stream fact can see.

_CLASS_STREAMS_KEY = "domain.class_streams"


def short_stream_classes(module: cst.Module, memo: dict) -> dict[str, str]:
    """The classes of a module whose every instance works on a short stream, each with its
    stream (`TEXT_STREAM` or `AUDIO_STREAM`), memoised per file. A class is of the short
    stream when
    - every instance the file builds is put into an attribute named for that stream
      (`self.txt_in = SingleTokenRefiner(...)`, `self.context_embedder = ...`) or for no
      stream (`self.llm_adapter = LLMAdapter(...)`) and every call of that attribute passes
      that stream as its query (`self.txt_in(encoder_hidden_states, timestep)`,
      `self.llm_adapter(text_embeds, text_ids)`), by name; or
    - it is built, and only inside classes of that stream (a refiner's blocks, built in its
      `nn.ModuleList`).
    A class built anywhere else (a module-level function, a main-stream attribute, an
    attribute called on another value) is not: `self.img_in = TokenRefiner(...)` over the
    video tokens keeps its activations' size."""
    table = memo.get(_CLASS_STREAMS_KEY)
    if table is None:
        table = _class_streams(module, memo)
        memo[_CLASS_STREAMS_KEY] = table
    return table


def _class_streams(module: cst.Module, memo: dict) -> dict[str, str]:
    scan = _attribute_scan(module, memo)
    builds = scan.builds
    attribute_streams = {
        site: {_named_query_stream(call) for call in calls} for site, calls in scan.calls.items()
    }  # (class, attribute) -> the streams its calls' queries name

    streams: dict[str, str] = {}
    for name, sites in builds.items():
        found: set[str | None] = set()
        for builder, attribute, _ in sites:
            named = stream_named(attribute) if attribute is not None else _MAIN_STREAM
            if builder is None or attribute is None or named == _MAIN_STREAM:
                found.add(None)
                continue
            queries = attribute_streams.get((builder, attribute), {None})
            # (an attribute named for no stream, `self.llm_adapter`, serves the stream that
            # every call of it passes: `self.llm_adapter(text_embeds, text_ids)`)
            accepted = ({TEXT_STREAM}, {AUDIO_STREAM}) if named is None else ({named},)
            found |= queries if queries in accepted else {None}
        if len(found) == 1 and (stream := found.pop()) in (TEXT_STREAM, AUDIO_STREAM):
            streams[name] = stream
    changed = True
    while changed:  # built only by classes of one short stream
        changed = False
        for name, sites in builds.items():
            if name in streams:
                continue
            builders = {
                streams.get(builder) if builder is not None and builder != name else None
                for builder, _, _ in sites
            }
            if len(builders) == 1 and (stream := builders.pop()) is not None:
                streams[name] = stream
                changed = True
    # A class named for the understanding stream (`Cosmos3UndDecoderLayer`) serves it; its
    # parts may serve the generation stream too (named there as a default `mlp_cls`), so the
    # name does not spread to them.
    for name in _classes_of(module):
        if _class_named_for_text(name):
            streams.setdefault(name, TEXT_STREAM)
    return streams


_PARAMETER_STREAMS_KEY = "domain.parameter_streams"


def parameter_streams(module: cst.Module, memo: dict) -> dict[tuple[str, str], str]:
    """`(class, parameter)` -> stream for the parameters of a class's `forward` that every
    call of its instances passes the same short stream, by name, memoised per file: in
    `self.cross_attn = CrossAttention(dim)` called only as `self.cross_attn(x, context)`, the
    `y` of `CrossAttention.forward(self, x, y)` holds the text context (a few hundred tokens),
    so its projections are no video-sized activations. A class that is also built anywhere
    else (a module-level function, a container module, an attribute never called) is left
    out: some of its calls are not seen."""
    table = memo.get(_PARAMETER_STREAMS_KEY)
    if table is None:
        table = _parameter_streams(module, memo)
        memo[_PARAMETER_STREAMS_KEY] = table
    return table


def _parameter_streams(module: cst.Module, memo: dict) -> dict[tuple[str, str], str]:
    forwards: dict[str, list[str]] = {}  # class -> the names of forward's parameters
    for statement in module.body:
        if not isinstance(statement, cst.ClassDef):
            continue
        for item in statement.body.body:
            if isinstance(item, cst.FunctionDef) and item.name.value == "forward":
                params = item.params
                if params.star_arg is not None and isinstance(params.star_arg, cst.Param):
                    break  # `*args`: positions do not map to names
                names = [p.name.value for p in (*params.posonly_params, *params.params)]
                forwards[statement.name.value] = names[1:]  # (without `self`)
    if not forwards:
        return {}
    scan = _attribute_scan(module, memo)
    calls = scan.calls
    built_into: dict[str, set[tuple[str, str] | None]] = {}  # class -> (owner, attribute)
    for name in forwards:
        for owner, attribute, direct in scan.builds.get(name, ()):
            site = (owner, attribute) if owner and attribute and direct else None
            built_into.setdefault(name, set()).add(site)

    streams: dict[tuple[str, str], str] = {}
    for name, sites in built_into.items():
        if None in sites:
            continue
        seen: dict[str, set[str | None]] = {}
        names = forwards[name]
        every_call_seen = True
        for site in sites:
            site_calls = calls.get(site)  # type: ignore[arg-type]
            if not site_calls:
                every_call_seen = False
                break
            for call in site_calls:
                if any(a.star for a in call.args):
                    every_call_seen = False
                    break
                passed: dict[str, cst.BaseExpression] = {}
                positional = [a.value for a in call.args if a.keyword is None]
                for parameter, value in zip(names, positional):
                    passed[parameter] = value
                for arg in call.args:
                    if arg.keyword is not None:
                        passed[arg.keyword.value] = arg.value
                for parameter in names:
                    given = passed.get(parameter)
                    seen.setdefault(parameter, set()).add(
                        None if given is None else _named_stream(given, _STREAM_DEPTH)
                    )
        if not every_call_seen:
            continue
        for parameter, found in seen.items():
            if len(found) == 1 and (stream := next(iter(found))) == TEXT_STREAM:
                streams[(name, parameter)] = stream
    return streams


_ATTRIBUTE_SCAN_KEY = "domain.attribute_scan"


@dataclass
class _AttributeScan:
    """Where a module builds its own classes and calls module attributes, in one pass."""

    # class -> (the class that builds it or None, the `self.` attribute it is put into or
    # None, whether it is the attribute's whole value rather than an item of a container)
    builds: dict[str, list[tuple[str | None, str | None, bool]]]
    calls: dict[tuple[str, str], list[cst.Call]]  # (class, attribute) -> `self.attr(...)` calls
    # Each `Cls(...)` of a file class inside a top-level function or a top-level class's
    # method (nested code included), with that function (`_functions_of`'s functions).
    constructions: list[tuple[cst.Call, cst.FunctionDef]] = field(default_factory=list)
    # id(function) -> the last name of every call in it, nested code included, for each
    # `_functions_of` function (for the frame-wise test).
    called: dict[int, set[str]] = field(default_factory=dict)


def _attribute_scan(module: cst.Module, memo: dict) -> _AttributeScan:
    """One read-only walk of a module with classes (none without: nothing asked of it), for
    the class builds, `self.attr(...)` calls and constructions above and each function's
    called names (the last name of each call: `nn.Conv2d(...)` -> `Conv2d`)."""
    scan = memo.get(_ATTRIBUTE_SCAN_KEY)
    if scan is not None:
        return scan
    classes = {s.name.value for s in module.body if isinstance(s, cst.ClassDef)}
    scan = _AttributeScan({}, {})
    builds, calls = scan.builds, scan.calls
    constructions = scan.constructions
    called = scan.called
    eligible = {id(f) for statement in module.body for f in _functions_of(statement)}
    assigned: dict[int, tuple[str, bool]] = {}  # id(call) -> (attribute, whole)
    depth = 0  # of FunctionDefs around the node
    # the `_functions_of` function (top-level, or a top-level class's method) we are in
    outer: cst.FunctionDef | None = None
    names: set[str] | None = None  # the called names of `outer`
    owner: str | None = None

    def enter(node: cst.CSTNode) -> None:
        nonlocal depth, outer, names
        kind = type(node)
        if kind is cst.Call:
            func = node.func  # type: ignore[attr-defined]
            func_type = type(func)
            if names is not None:
                if func_type is cst.Name:
                    names.add(func.value)
                elif func_type is cst.Attribute:
                    names.add(func.attr.value)
                else:
                    names.add("<dynamic>")
            if func_type is cst.Name and func.value in classes:
                attribute, whole = assigned.get(id(node), (None, False))
                builds.setdefault(func.value, []).append((owner, attribute, whole))
                if outer is not None:
                    constructions.append((node, outer))  # type: ignore[arg-type]
                return
            if owner is None:
                return
            attribute = _self_attribute(func)
            if attribute is not None:
                calls.setdefault((owner, attribute), []).append(node)  # type: ignore[arg-type]
        elif kind is cst.Assign:
            targets = node.targets  # type: ignore[attr-defined]
            if len(targets) != 1:
                return
            attribute = _self_attribute(targets[0].target)
            if attribute is None:
                return
            value = node.value  # type: ignore[attr-defined]
            for call in _built_calls(value):
                assigned[id(call)] = (attribute, call is value)
        elif kind is cst.FunctionDef:
            if not depth and id(node) in eligible:
                outer = node  # type: ignore[assignment]
                names = called[id(node)] = set()
            depth += 1

    def leave(node: cst.CSTNode) -> None:
        nonlocal depth, outer, names
        if type(node) is cst.FunctionDef:
            depth -= 1
            if not depth:
                outer = names = None

    if classes:
        for statement in module.body:
            owner = statement.name.value if isinstance(statement, cst.ClassDef) else None
            walk(statement, enter, leave)  # (read-only: no node rebuilding)
    memo[_ATTRIBUTE_SCAN_KEY] = scan
    return scan


def _self_attribute(expr: cst.BaseExpression) -> str | None:
    """`attr` of `self.attr`, else None."""
    if (
        isinstance(expr, cst.Attribute)
        and isinstance(expr.value, cst.Name)
        and expr.value.value in _MODULE_RECEIVERS
    ):
        return expr.attr.value
    return None


def _built_calls(value: cst.BaseExpression) -> Iterator[cst.Call]:
    """The constructor calls an attribute's value is built from: `Cls(...)`, or the items of
    a container module (`nn.ModuleList([Cls(...) for _ in range(n)])`, `nn.Sequential(...)`)."""
    if isinstance(value, cst.Call):
        yield value
        for arg in value.args:
            yield from _built_calls(arg.value)
    elif isinstance(value, (cst.List, cst.Tuple)):
        for element in value.elements:
            yield from _built_calls(element.value)
    elif isinstance(value, (cst.ListComp, cst.GeneratorExp)):
        yield from _built_calls(value.elt)


def _named_query_stream(call: cst.Call) -> str | None:
    """The stream a call's query input names (its `hidden_states=`-like keyword or first
    positional argument), followed through tensor methods, subscripts and arithmetic by
    name alone (no dataflow: the call may sit in any method)."""
    query = _query_argument(call)
    return None if query is None else _named_stream(query, _STREAM_DEPTH)


def _query_argument(call: cst.Call) -> cst.BaseExpression | None:
    """The argument a sublayer or attention takes its tokens from: its `hidden_states=`-like
    keyword, else its first positional argument."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value in _QUERY_KEYWORDS:
            return arg.value
    return next((a.value for a in call.args if a.keyword is None and not a.star), None)


def _named_stream(expr: cst.BaseExpression, depth: int) -> str | None:
    if depth <= 0:
        return None
    if isinstance(expr, cst.Name):
        return stream_named(expr.value)
    if isinstance(expr, cst.Attribute):
        return stream_named(expr.attr.value)
    if isinstance(expr, cst.Subscript):
        return _named_stream(expr.value, depth - 1)
    if isinstance(expr, cst.Call):
        func = expr.func
        if isinstance(func, cst.Attribute) and _self_attribute(func) is None:
            return _named_stream(func.value, depth - 1)  # `encoder_hidden_states.to(dtype)`
        return _named_query_stream(expr)
    if isinstance(expr, cst.BinaryOperation):
        sides = {_named_stream(side, depth - 1) for side in (expr.left, expr.right)}
        return sides.pop() if len(sides) == 1 else None
    return None


# Class-name words of a short stream's own layers (`Cosmos3UndDecoderLayer`, BAGEL's
# understanding layers, `TxtBlock`); wider words (`Text`, `Context`) also name main-stream
# classes (`TextToVideoBlock`, `ContextParallelAttention`) and are not used.
_TEXT_CLASS_WORDS = frozenset(["und", "understanding", "txt"])
_CLASS_WORD = compile_lazily(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


def _classes_of(module: cst.Module) -> list[str]:
    return [s.name.value for s in module.body if isinstance(s, cst.ClassDef)]


def _class_named_for_text(name: str) -> bool:
    """A class named for the text or understanding stream and for no main one."""
    words = {word.lower() for word in _CLASS_WORD.findall(name)}
    return bool(words & _TEXT_CLASS_WORDS) and not words & _MAIN_STREAM_WORDS


# -- classes that work at a known narrow (latent) width ---------------------------------------
# I2VGen-XL's UNet builds `I2VGenXLTransformerTemporalEncoder(dim=in_channels, ...)` with
# `in_channels: int = 4`: the encoder's attention and feed-forward run over 4-channel image
# latents, however video-like the file. A class whose every build in the file passes, as its
# width, a constructor parameter of the builder with a small integer default (a latent
# channel count) holds latent-sized activations.

_LATENT_WIDTH_KEY = "domain.latent_width_classes"
# Keywords (and `__init__` parameter names) that set a block's own hidden width.
_WIDTH_KEYWORDS = frozenset(
    ["dim", "hidden_size", "hidden_dim", "embed_dim", "query_dim", "d_model", "model_dim"]
)
# The widest latent channel count of the autoencoders read (SD 4, SD3/Flux/Wan 2.1 16,
# HunyuanVideo 1.5 32, Wan 2.2 48).
_LATENT_WIDTH = 48
_LATENT_NAME = compile_lazily(r"channel|latent|z_dim")


def latent_width_classes(module: cst.Module, memo: dict) -> frozenset[str]:
    """The classes of a module that every build of the file gives a latent width (see above),
    memoised per file."""
    found = memo.get(_LATENT_WIDTH_KEY)
    if found is None:
        found = _latent_width_classes(module, memo)
        memo[_LATENT_WIDTH_KEY] = found
    return found


def _latent_width_classes(module: cst.Module, memo: dict) -> frozenset[str]:
    definitions = {s.name.value: s for s in module.body if isinstance(s, cst.ClassDef)}
    if not definitions:
        return frozenset()
    widths = {name: _width_parameter(cls) for name, cls in definitions.items()}
    verdicts: dict[str, set[bool]] = {}
    narrow_of: dict[int, dict[str, int]] = {}  # id(function) -> its small-default parameters
    for call, function in _attribute_scan(module, memo).constructions:
        name = call.func.value  # type: ignore[attr-defined]  # (a Name: see the scan)
        narrow = narrow_of.get(id(function))
        if narrow is None:
            narrow = narrow_of[id(function)] = _narrow_parameters(function)
        width = _width_argument(call, widths[name])
        verdicts.setdefault(name, set()).add(isinstance(width, cst.Name) and width.value in narrow)
    return frozenset(name for name, seen in verdicts.items() if seen == {True})


def _functions_of(statement: cst.CSTNode) -> Iterator[cst.FunctionDef]:
    if isinstance(statement, cst.FunctionDef):
        yield statement
    elif isinstance(statement, cst.ClassDef) and isinstance(statement.body, cst.IndentedBlock):
        for item in statement.body.body:
            if isinstance(item, cst.FunctionDef):
                yield item


def _width_parameter(cls: cst.ClassDef) -> tuple[int, str] | None:
    """The position (after `self`) and name of the width parameter of a class's `__init__`:
    its first parameter, when that is named for a width."""
    for function in _functions_of(cls):
        if function.name.value == "__init__":
            params = list(function.params.params)[1:]
            if params and params[0].name.value in _WIDTH_KEYWORDS:
                return 0, params[0].name.value
            return None
    return None


def _width_argument(call: cst.Call, parameter: tuple[int, str] | None) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value in _WIDTH_KEYWORDS:
            return arg.value
    if parameter is not None:
        positional = [a for a in call.args if a.keyword is None and not a.star]
        if positional:
            return positional[0].value
    return None


def _narrow_parameters(function: cst.FunctionDef) -> dict[str, int]:
    """A function's channel-count parameters whose default is a small positive integer
    (`in_channels: int = 4`, `latent_channels=16`; not `dim=64`, a toy default)."""
    narrow: dict[str, int] = {}
    for param in (*function.params.params, *function.params.kwonly_params):
        default = param.default
        if isinstance(default, cst.Integer) and _LATENT_NAME.search(param.name.value):
            value = int(default.evaluated_value)
            if 0 < value <= _LATENT_WIDTH:
                narrow[param.name.value] = value
    return narrow


# -- classes that work on one frame (or a frame pair) at a time -------------------------------
# A frame interpolator in a video stack (RIFE's `IFBlock`: 2-D convolutions over a pair of
# decoded frames and their flow) holds one image's activations: a few to tens of MiB, not a
# video's. A class built only from 2-D convolutions, pointwise layers and containers (and
# from the file's classes and functions that are), with at least one 2-D convolution, is such
# a frame-wise network. A class that also builds anything else (a 3-D or causal conv, an
# attention, a linear layer, a block imported from elsewhere) may see the whole clip.

_FRAME_WISE_KEY = "domain.frame_wise_classes"
_FRAME_CONVS = frozenset(["Conv2d", "ConvTranspose2d"])
_FRAME_WISE_LAYERS = _FRAME_CONVS | frozenset(
    [
        "Sequential", "ModuleList", "Identity", "Parameter", "Dropout",
        "ReLU", "LeakyReLU", "PReLU", "SiLU", "GELU", "Sigmoid", "Tanh", "ELU", "Hardswish",
        "BatchNorm2d", "InstanceNorm2d", "GroupNorm",
        "PixelShuffle", "PixelUnshuffle", "Upsample", "MaxPool2d", "AvgPool2d",
        "ones", "zeros", "tensor", "super", "__init__", "int", "range", "len", "float",
    ]
)  # fmt: skip


_ONE_FRAME_KEY = "analysis.domain.one_frame_classes"


def _frame_count_default(function: cst.FunctionDef) -> int | None:
    """The default of a constructor parameter named for a frame count (`max_frames`,
    `num_frames`, `frames`), when it is an integer literal; None otherwise."""
    params = function.params
    for param in (*params.posonly_params, *params.params, *params.kwonly_params):
        words = param.name.value.lower().strip("_").split("_")
        if words[-1] not in ("frames", "frame") or param.default is None:
            continue
        if isinstance(param.default, cst.Integer):
            return int(param.default.value)
    return None


def one_frame_classes(module: cst.Module, memo: dict) -> frozenset[str]:
    """The classes of a module built for one frame by default: a video architecture whose
    constructor's frame count defaults to 1 (`max_frames: int = 1`: Cosmos Predict2's
    MiniTrainDIT as an image model, Anima: T=1, a few thousand tokens), its subclasses that
    keep that default, and the classes only such models name (their blocks). Memoised per
    file. A model whose frame count defaults higher, or a block some other class also
    names, keeps the file's domain."""
    found = memo.get(_ONE_FRAME_KEY)
    if found is None:
        found = _one_frame_classes(module)
        memo[_ONE_FRAME_KEY] = found
    return found


def _one_frame_classes(module: cst.Module) -> frozenset[str]:
    definitions = [s for s in module.body if isinstance(s, cst.ClassDef)]
    classes = {s.name.value for s in definitions}
    seeds: set[str] = set()
    own_count: set[str] = set()  # classes whose constructor has a frame count of their own
    named_by: dict[str, set[str]] = {name: set() for name in classes}
    bases: dict[str, set[str]] = {}
    for statement in definitions:
        name = statement.name.value
        for function in _functions_of(statement):
            if function.name.value == "__init__":
                default = _frame_count_default(function)
                if default is not None:
                    own_count.add(name)
                    if default == 1:
                        seeds.add(name)
    if not seeds:  # before the code generation below, the costly part (most files)
        return frozenset()
    for statement in definitions:
        name = statement.name.value
        for word in set(_WORD.findall(module.code_for_node(statement))) & classes - {name}:
            named_by[word].add(name)
        bases[name] = {
            base_name
            for base in statement.bases
            if (base_name := _last_name(base.value)) in classes
        }
    one = set(seeds)
    changed = True
    while changed:
        changed = False
        for name in classes - one:
            inherits = name not in own_count and bool(bases[name] & one)
            built = bool(named_by[name]) and named_by[name] <= one | {name}
            if inherits or built:
                one.add(name)
                changed = True
    return frozenset(one)


def _last_name(node: cst.BaseExpression) -> str | None:
    """The last name of `Base` or `pkg.Base`."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return node.attr.value
    return None


def frame_wise_classes(module: cst.Module, memo: dict) -> frozenset[str]:
    """The classes of a module that are frame-wise 2-D conv networks (see above), memoised
    per file."""
    found = memo.get(_FRAME_WISE_KEY)
    if found is None:
        found = _frame_wise_classes(module, memo)
        memo[_FRAME_WISE_KEY] = found
    return found


def _frame_wise_classes(module: cst.Module, memo: dict) -> frozenset[str]:
    if not any(isinstance(s, cst.ClassDef) for s in module.body):
        return frozenset()  # (only classes are asked of)
    called = _attribute_scan(module, memo).called
    parts: dict[str, tuple[set[str], set[str]]] = {}  # name -> (layers, own parts)
    local = set()
    for statement in module.body:
        if isinstance(statement, (cst.ClassDef, cst.FunctionDef)):
            local.add(statement.name.value)
    for statement in module.body:
        if isinstance(statement, cst.ClassDef):
            body = [f for f in _functions_of(statement) if f.name.value == "__init__"]
        elif isinstance(statement, cst.FunctionDef):
            body = [statement]
        else:
            continue
        layers: set[str] = set()
        own: set[str] = set()
        for function in body:
            for name in called[id(function)]:
                (own if name in local else layers).add(name)
        parts[statement.name.value] = (layers, own)
    verdict: dict[str, bool] = {}

    def frame_wise(name: str, seen: frozenset[str]) -> tuple[bool, bool]:
        """(only frame-wise parts, some 2-D conv among them)"""
        layers, own = parts.get(name, (set(), set()))
        if not layers <= _FRAME_WISE_LAYERS:
            return False, False
        conv = bool(layers & _FRAME_CONVS)
        for part in own - seen - {name}:
            ok, has = frame_wise(part, seen | {name})
            if not ok:
                return False, False
            conv = conv or has
        return True, conv

    definitions = [s for s in module.body if isinstance(s, cst.ClassDef)]
    # Whether a class shows frames is asked only of frame-wise candidates and their builders
    # (each answer prints the class's code: most of this scan's cost when asked of all).
    classes = {s.name.value: s for s in definitions}
    video = _LazyClassTest(lambda name: _shows_frames(module, classes[name]), classes)
    builders: dict[str, set[str]] = {}  # class -> the classes of the file that build it
    for statement in definitions:
        for part in parts[statement.name.value][1]:
            builders.setdefault(part, set()).add(statement.name.value)
    for statement in definitions:
        name = statement.name.value
        ok, conv = frame_wise(name, frozenset())
        verdict[name] = ok and conv and not _built_for_video(name, builders, video)
    return frozenset(name for name, ok in verdict.items() if ok)


class _LazyClassTest:
    """`name in tested`: a per-class test over the file's classes, each answered once."""

    def __init__(self, test: Callable[[str], bool], classes: Container[str]) -> None:
        self._test = test
        self._classes = classes
        self._answers: dict[str, bool] = {}

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str) or name not in self._classes:
            return False
        answer = self._answers.get(name)
        if answer is None:
            answer = self._answers[name] = self._test(name)
        return answer


def _shows_frames(module: cst.Module, cls: cst.ClassDef) -> bool:
    """Whether a class's name or own code handles a clip (`TemporalConv`, `num_frames`, a
    5-D unpack of a shape, `video`): 2-D layers over `batch * num_frames` images see every
    frame at once. (A lone `frame`, as in "one intermediate frame", is no clip.)"""
    code = module.code_for_node(cls)
    if mentions_video(cls.name.value) or _VIDEO_STRUCTURE.search(code):
        return True
    return any(word.lower() in _CLIP_WORDS for word in _WORD.findall(code))


_CLIP_WORDS = frozenset(["video", "videos", "temporal", "clip", "clips"])


def _built_for_video(name: str, builders: dict[str, set[str]], video: Container[str]) -> bool:
    """Whether the class, or a class that builds it (up the file's build chain), shows video."""
    seen: set[str] = set()
    pending = [name]
    while pending:
        current = pending.pop()
        if current in video:
            return True
        if current in seen:
            continue
        seen.add(current)
        pending.extend(builders.get(current, ()))
    return False
