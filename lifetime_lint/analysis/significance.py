"""How much a lifetime finding is worth: its likely bytes at the peak of what it is held across.

Shared by LL001 (a dead tensor kept bound) and LL002 (chunks kept in a list). Two inputs,
both from the facts layer:

- the size class of the held value, from where it comes from (`ValueFact.origin`):
  `large` (decoded tiles/frames/images, logits, a concatenation of those), `activation`
  (a layer's output, an operator over activations, a model's hidden states, a cache
  slot, a buffer allocated like one of those), `small` (conditioning such as prompt
  embeddings, latents and latent-space predictions: a few MiB in the pipelines measured;
  a buffer whose shape the analysis cannot see: paddings, statistics and accumulators in
  the samples read, none of 8 worth a fix), `tiny`
  (reductions, ids, masks, positions: never reported);
- what it is held across (`Work.level` of the heaviest work while the value stays bound):
  `model` (a model-level call, a denoise loop, a VAE decode, a collective), `peak` (the
  sublayer that sets a block's peak: feed-forward, self-attention, a conv stack, a heavy
  torch op such as `F.conv3d`, an output-sized concatenation), `layer` (one other
  sublayer, e.g. cross-attention).

The bar (`DEFAULT_BAR`, "medium"): the default run reports `high` and `medium`.

| held value \\ across | model | peak | layer |
| --- | --- | --- | --- |
| large | high | high | medium |
| activation, many tokens (video) | low (latent-sized) | medium | low |
| activation, thousands of tokens | low | low | low |
| small | low | low | low |

An activation's bytes follow its tokens (`domain.py`): a video DiT at 480p x 81 frames holds
32,760 tokens (96 MiB per activation at 1,536 channels, ~700 MiB for HunyuanVideo at 720p x
129 frames), an image DiT at 1024^2 about 4k (16-24 MiB), a detection model ~8k x 256
channels (~8 MiB), a perceiver resampler or IP-adapter a few hundred latents, an LLM layer
thousands of tokens beside weights and a KV cache that dwarf them. Only the many-token
domain (`video`) rates an activation held across a block's peak sublayer `medium`; an
image, language, vision-encoder or unknown file rates it `low`, so does a file too short to
judge (`unjudged`: a snippet, a small module shows no evidence of many tokens either),
and so does a block that runs against a KV cache (`domain.runs_against_cache`: a streaming
causal block sees a few latent frames per call, ~2.6k-4.7k tokens, ~8-14 MiB, beside a
cache of GiBs). Held across a whole model call (a VAE decode, a transformer call, a denoise
loop, an encoder; not a collective), an activation-class value is at the model's interface:
latents, embeddings, predictions, concatenations of latents or masks (latent-sized), so it
counts as `small`; pixel-space values (decoded or preprocessed frames: `large`) are what
clears the bar there.

A value held from the previous iteration of a loop (`out_` of a chunked decode, rebound each
iteration) is one chunk of many: it counts one size class smaller. A value held only across
work lighter than its function's heaviest work (`function_peak`) is not alive at the peak:
one level down. How heavy the work is follows from its inputs (`facts.Work.sized_by`: the
text stream's feed-forward is conditioning-sized, an in-place all-reduce allocates nothing),
and how large an activation is follows from the file's model domain (`domain.py`).

Calibration (docs/architecture.md has the figures): diffusers' WanPipeline, 480p, 81
frames on an H200: the attention output of a transformer block held across the block's
feed-forward is about 96 MiB at 32,760 tokens, and releasing it lowered the denoise peak by
6.2% (activation x peak: medium, reported). The first attention output, held across
cross-attention only and rebound before the feed-forward, saved nothing (activation x
layer: low, hidden). Prompt embeddings and latents held across the VAE decode changed the
peak by +2 MiB (small x model: low, hidden). Releasing 2 GiB of dead decoded output before
a decode saved exactly 2,048 MiB (large x model: high).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace

import libcst as cst

from lifetime_lint.analysis import decoders as D
from lifetime_lint.analysis import facts as F
from lifetime_lint.analysis.domain import (
    LARGE_DOMAIN,
    SMALL_DOMAIN,
    UNJUDGED_DOMAIN,
    UNKNOWN_DOMAIN,
    VIDEO_DOMAIN,
)
from lifetime_lint.config import GLOBAL_KEYS, KEY_VALIDATORS
from lifetime_lint.lazy_regex import compile_lazily
from lifetime_lint.project import top_package
from lifetime_lint.traversal import LEAF_TYPES, walk_skipping

LOW, MEDIUM, HIGH = "low", "medium", "high"
LEVELS = (LOW, MEDIUM, HIGH)
DEFAULT_BAR = MEDIUM

LARGE, ACTIVATION_SIZED, SMALL_SIZED, TINY = "large", "activation", "small", "tiny"

# Pixel-space values of a model of thousands of tokens (an image pipeline's preprocessed or
# decoded image: 1024^2 x 3 channels is 6-12 MiB), told by the file's domain, not by dataflow.
PIXEL_IMAGES = "pixel-images"
# Logits as LL001 meets them: the sampled positions' vocabulary scores in serving and
# generation loops, a detector's class or box scores over a few hundred queries, a loss's
# (kept by autograd anyway): a few MiB, not a full-sequence vocabulary projection.
SCORES = "scores"
# A decoded waveform (an audio VAE's output): seconds of samples, a few MiB.
WAVEFORM = "waveform"
DECODED_FRAME = "decoded-frame"  # the decode of one latent frame of a video
# The input of a recurrent cell (`nn.LSTMCell`, `GRUCell`, `RNNCell`): one time step,
# batch x features (a Tacotron decoder step's `cat(memory, context)`): KiB to a few MiB.
STEP_INPUT = "step-input"
# A value named for audio in an audio-video model (`audio_input`, `eps_audio`): the audio
# stream's latents or hidden states, a few hundred tokens (LTX-2: about 25 a second).
AUDIO_STREAM = "audio-stream"
# A value of the text stream of a multi-stream model (`context_attn_output`, a
# mixture-of-transformers' understanding stream `und_norm`): prompt or understanding tokens,
# a few hundred (`domain.short_stream`).
TEXT_STREAM = "text-stream"
# A value every read of which broadcasts it over two or more new axes
# (`token_types[:, :, None, None, :]`: per-frame embeddings added over height and width): a
# fraction of the activation it is added to, by the product of those axes.
BROADCAST_TABLE = "broadcast-table"
# The main input of a decoder call (`facts.feeds_decoder`): latent channels at the latent
# resolution, about 1/50 of the video it decodes, and less than the decoder's own peak.
DECODER_INPUT = "decoder-input"
# A tensor in host (CPU) memory (`facts.ValueFact.host`): it holds no GPU memory.
HOST_TENSOR = "host-tensor"
# An activation of an autoencoder's downsampling block (`CosmosDownsample3d`): after its
# first strided conv or pool it is at a quarter of its input's size or less, and the
# block's peak is at its input (measured on the H200: 0 MiB for each such finding).
DOWNSAMPLED = "downsampled"

# The output of a decoder stage of an encoder-decoder network (`decoders.decodes_feature_maps`:
# a restoration U-Net's `self.decoder_level1(h)`, a colorizer's `self.decoder()`): feature
# maps at up to the input's full resolution, as large as decoded output, but not decoded
# tiles or frames; rated as `large`, described as what it is.
DECODER_FEATURES = "decoder-features"
# Decoded output (a decoder's result, or a value named for frames) of a file too short to
# show that its model works on pixels: a text, speech or policy decoder returns hidden
# states. Rated as decoded output; the message says what the code does not show.
UNJUDGED_DECODED = "unjudged-decoded"
# A value derived from weights alone (`lora_weight = torch.mm(B.weight, A.weight)`, a DoRA
# weight norm): sized by one layer's parameters, not by tokens or pixels.
WEIGHT_SIZED = "weight-sized"
# A learned parameter tiled over the batch only (`facts.batch_tiled_parameter`:
# `self.token.clone().repeat(batch_size, 1, 1)`, learned query or motion tokens): the
# constructor sets its size, so it does not grow with the input's sequence.
LEARNED_TOKENS = "learned-tokens"
# One piece of a loop over slices of a tensor (`x[:, start:end]` with both bounds moving
# with the loop, `normalized[:, start:end].copy_(chunk)`): a chunk of the activation, its
# size set by the loop's step (a chunked block's 1,024 tokens), not by the whole input.
LOOP_CHUNK = "loop-chunk"

_SIZE_OF_ORIGIN = {
    F.DECODED: LARGE,
    DECODER_FEATURES: LARGE,
    UNJUDGED_DECODED: LARGE,
    F.LOGITS: LARGE,
    F.CONCATENATION: ACTIVATION_SIZED,
    F.MODEL_OUTPUT: ACTIVATION_SIZED,
    F.ACTIVATION: ACTIVATION_SIZED,
    F.CACHE_ENTRY: ACTIVATION_SIZED,
    F.ALLOCATION: SMALL_SIZED,  # unknown shape: 0 of 8 true in a read sample (LL001-s3)
    F.CONDITIONING: SMALL_SIZED,
    F.LATENTS: SMALL_SIZED,
    F.IMAGE: SMALL_SIZED,
    F.DECODED_IMAGE: SMALL_SIZED,
    PIXEL_IMAGES: SMALL_SIZED,
    SCORES: SMALL_SIZED,
    WAVEFORM: SMALL_SIZED,
    DECODED_FRAME: SMALL_SIZED,
    STEP_INPUT: SMALL_SIZED,
    AUDIO_STREAM: SMALL_SIZED,
    TEXT_STREAM: SMALL_SIZED,
    BROADCAST_TABLE: SMALL_SIZED,
    DECODER_INPUT: SMALL_SIZED,
    HOST_TENSOR: SMALL_SIZED,
    DOWNSAMPLED: SMALL_SIZED,
    WEIGHT_SIZED: SMALL_SIZED,
    LEARNED_TOKENS: SMALL_SIZED,
    LOOP_CHUNK: SMALL_SIZED,
    F.SMALL_MODEL: SMALL_SIZED,
    F.SMALL: TINY,
}

# Message keys of an activation whose token count the domain tells (`describe_held`).
VIDEO_ACTIVATION, FEW_TOKEN_ACTIVATION = "video-activation", "few-token-activation"
# An activation of a file too short to show what model it belongs to (`unjudged`): nothing
# says its tokens are many, so it is rated like one of thousands of tokens, and said so.
UNJUDGED_ACTIVATION = "unjudged-activation"
INTERFACE_VALUE = "interface-value"

# What each origin is called in a message, with its size class.
_DESCRIPTION = {
    F.DECODED: "decoded tiles, frames or images: large",
    DECODER_FEATURES: (
        "feature maps of an encoder-decoder network's decoder stage, up to full resolution: large"
    ),
    F.LOGITS: "logits: large",
    F.CONCATENATION: "a concatenation: activation-sized or larger",
    F.MODEL_OUTPUT: "a model output: activation-sized",
    F.ACTIVATION: "an activation: scales with tokens or pixels",
    VIDEO_ACTIVATION: "an activation of a video model: tens of MiB or more at tens of thousands of tokens",
    FEW_TOKEN_ACTIVATION: "an activation over thousands of tokens or fewer: a few to tens of MiB",
    UNJUDGED_ACTIVATION: (
        "an activation of a file too short to show its model: no evidence that it holds"
        " tens of thousands of tokens"
    ),
    UNJUDGED_DECODED: (
        "a decoder's output or a value named for frames, in a file too short to show what it"
        " decodes: large for tiles, frames or images, less for a text, speech or policy"
        " decoder's hidden states"
    ),
    INTERFACE_VALUE: (
        "a value at a model call's interface (latents, embeddings, a prediction): usually a few MiB"
    ),
    F.CACHE_ENTRY: "an old cache entry: activation-sized",
    F.ALLOCATION: "a buffer of computed shape: size unknown",
    F.CONDITIONING: "an embedding: size unknown, usually a few MiB",
    F.LATENTS: "latent-sized: usually a few MiB",
    F.IMAGE: "one preprocessed image: a few MiB",
    F.DECODED_IMAGE: (
        "decoded tiles of an image model: tens of MiB, less than one tile's decoder activations"
    ),
    F.SMALL_MODEL: (
        "an activation of an audio, speech, time-series, detection or resampler model: a few MiB"
    ),
    PIXEL_IMAGES: "images of an image model, in pixel space: a few to tens of MiB",
    SCORES: "logits of the sampled positions or of a few hundred queries: usually a few MiB",
    WAVEFORM: "a decoded waveform: a few MiB",
    DECODED_FRAME: "one decoded frame (the decode of a one-frame latent): a few MiB",
    STEP_INPUT: "one time step's input to a recurrent cell (batch x features): KiB to a few MiB",
    AUDIO_STREAM: "the audio stream of an audio-video model: a few hundred tokens, a few MiB",
    TEXT_STREAM: (
        "the text or understanding stream of a multi-stream model: a few hundred tokens, a few MiB"
    ),
    BROADCAST_TABLE: (
        "a table broadcast over two or more axes where it is read: a fraction of an activation"
    ),
    DECODER_INPUT: (
        "the input of a decoder or of a layer built for latent channels: latent-sized,"
        " usually a few MiB"
    ),
    HOST_TENSOR: "a tensor in host (CPU) memory: it holds no GPU memory",
    WEIGHT_SIZED: "a value derived from weights: one layer's parameters, not scaled by tokens",
    LOOP_CHUNK: (
        "one chunk of a loop over slices of its input: a fraction of the activation, sized"
        " by the loop's step"
    ),
    LEARNED_TOKENS: (
        "a learned parameter repeated over the batch: its size is set by the constructor,"
        " not by the input's tokens"
    ),
    DOWNSAMPLED: (
        "an activation of an autoencoder's downsampling block: a fraction of its input,"
        " below the block's peak"
    ),
    F.SMALL: "small",
}


def rank(level: str) -> int:
    return LEVELS.index(level)


def size_class(origin: str) -> str:
    return _SIZE_OF_ORIGIN.get(origin, ACTIVATION_SIZED)


def describe(origin: str) -> str:
    return _DESCRIPTION.get(origin, "a tensor")


def describe_held(origin: str, domain: str, across: F.Work | None = None) -> str:
    """`describe`, with an activation's size class from its token domain (`token_domain`),
    or from the whole model call it is held across (`model_interface`)."""
    if across is not None and size_class(origin) == ACTIVATION_SIZED and model_interface(across):
        return _DESCRIPTION[INTERFACE_VALUE]
    if origin == F.ACTIVATION and domain == VIDEO_DOMAIN:
        return _DESCRIPTION[VIDEO_ACTIVATION]
    if origin == F.ACTIVATION and domain == UNJUDGED_DOMAIN:
        return _DESCRIPTION[UNJUDGED_ACTIVATION]
    if origin == UNJUDGED_DECODED:
        return _DESCRIPTION[UNJUDGED_DECODED]
    if origin == F.ACTIVATION and domain not in MANY_TOKEN_DOMAINS:
        return _DESCRIPTION[FEW_TOKEN_ACTIVATION]
    return describe(origin)


@dataclass(frozen=True)
class Estimate:
    level: str  # low / medium / high
    size: str  # large / activation / small / tiny
    across: int  # Work level of what it is held across


_SMALLER = {LARGE: ACTIVATION_SIZED, ACTIVATION_SIZED: SMALL_SIZED}


def estimate(
    origin: str,
    across: F.Work,
    one_chunk: bool = False,
    function_peak: int | None = None,
    domain: str = UNJUDGED_DOMAIN,
) -> Estimate:
    """The significance of holding a value of this origin across this work. `one_chunk`: the
    value is the previous iteration's of a loop (one chunk of many: one size class down).
    `function_peak`: the level of the heaviest work of the whole function; a value held only
    across lighter work (after the encoder ran, or dead before the decode) is not alive at
    the function's peak, so it counts one level down (an output-sized concatenation of
    decoded tiles excepted: there the result sits beside all its inputs; a concatenation of
    latents or embeddings is no such join). `domain`: how many tokens an activation holds
    (`token_domain`); outside the many-token domain an activation counts one level down.
    An activation-class value held across a whole model call is at the model's interface
    (latents, embeddings, predictions): small."""
    size = size_class(origin)
    if size == ACTIVATION_SIZED and model_interface(across):
        size = SMALL_SIZED
    decoding = across.kind == "decode" or (
        across.kind in ("helper", "loop", "closure")
        and bool(across.parts)
        and F._model_kind(across.parts) == "decode"
    )  # (`self._i0_decode(x)`: a helper that runs the decoder)
    if one_chunk and origin == F.DECODED and decoding:
        # The previous chunk of decoded frames held across the next decoder call: the
        # decoder's own activations (128+ channels at the output's resolution) dwarf one
        # 3-channel chunk, so the saving is max(0, S - A) = 0 (design notes §7).
        size = SMALL_SIZED
    elif one_chunk:
        size = _SMALLER.get(size, size)
    level = LOW
    if size == LARGE and _small_join(across):
        level = LOW  # a concatenation that joins no decoded frames: not the output's peak
    elif size == LARGE:
        level = HIGH if across.level >= F.PEAK else MEDIUM
    elif size == ACTIVATION_SIZED:
        level = MEDIUM if across.level >= F.PEAK else LOW
    if (
        function_peak is not None
        and across.level < function_peak
        and (across.kind != "concatenation" or across.sized_by == "small")
        and level != LOW
    ):
        level = LEVELS[rank(level) - 1]
    if size == ACTIVATION_SIZED and domain not in MANY_TOKEN_DOMAINS and level != LOW:
        level = LEVELS[rank(level) - 1]
    return Estimate(level, size, across.level)


# Domains whose activations hold tens of thousands of tokens. Only video: a file too short
# to judge (`unjudged`) shows no evidence of many tokens either, so its activations count
# one level down like an unknown file's (held-out set 9: a GAN discriminator's convs, an
# SSIM metric's 32x32 maps, both in short files, were rated medium by the old rule).
MANY_TOKEN_DOMAINS = frozenset([VIDEO_DOMAIN])


def token_domain(domain: str, image_model: bool, against_cache: bool) -> str:
    """The domain an activation's size follows: a video file's block works on many tokens
    unless its file or class names an image model (an image model built on a video
    architecture holds one frame) or it runs against a KV cache (one chunk per call). A
    file too short to judge (`unjudged`) is not a many-token domain (`MANY_TOKEN_DOMAINS`):
    its activations count one level down, and an image model's or a cached block's are
    said to be of thousands of tokens (`large`)."""
    if domain in (VIDEO_DOMAIN, UNJUDGED_DOMAIN) and (image_model or against_cache):
        return LARGE_DOMAIN
    return domain


# An image model's own name (file, folder or class): `transformer_qwenimage.py`,
# `IPAdapterPlusImageProjectionBlock`; a name of video too (`image2video`) is no image model.
_IMAGE_NAME = frozenset(["image", "images", "img", "imgs", "t2i", "i2i"])
_VIDEO_NAME = frozenset(["video", "videos", "vid", "frame", "frames", "temporal", "i2v", "t2v"])
_NAME_WORD = compile_lazily(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


def image_named(path: str, owner: str | None) -> bool:
    """Whether the file, its folder or the class names an image model and no video one."""
    parts = path.replace("\\", "/").rsplit("/", 2)[-2:] + ([owner] if owner else [])
    words: set[str] = set()
    for part in parts:
        stem = part[:-3] if part.endswith(".py") else part
        for piece in re.split(r"[_\-.]+", stem):
            words.update(word.lower() for word in _NAME_WORD.findall(piece))
    return bool(words & _IMAGE_NAME) and not words & _VIDEO_NAME


def autoencoder_named(path: str, owner: str | None) -> bool:
    """Whether the file, its folder or the class names an autoencoder (`wanvae.py`,
    `autoencoder_kl_wan.py`, `AutoencoderKLHunyuanVideo`, `vaes/`)."""
    parts = path.replace("\\", "/").rsplit("/", 2)[-2:] + ([owner] if owner else [])
    return any("vae" in part.lower() or "autoencoder" in part.lower() for part in parts)


# Words of a model that works on pixels, beside the image and video names.
_PIXEL_MODEL_NAME = frozenset(["vae", "vqvae", "vqgan", "unet", "diffusion", "pixel", "pixels"])


def pixel_named(path: str, owner: str | None, function_source: str = "") -> bool:
    """Whether the file, its folder or the class names a model that works on pixels (an
    image or video word: `TiledVideoDecoder`, `image_decoder.py`; an autoencoder,
    `autoencoder_named`; a VAE, U-Net or diffusion model), or the function's code names
    such a model (`self.vae.decode`).
    Without any, a short file's decoder may as well be a text, speech or policy model's."""
    if autoencoder_named(path, owner):
        return True
    parts = path.replace("\\", "/").rsplit("/", 2)[-2:] + ([owner] if owner else [])
    if any("unet" in part.lower() for part in parts):
        return True  # `RestorationUNet`, `unet_2d_blocks.py`
    words: set[str] = set()
    for part in parts:
        stem = part[:-3] if part.endswith(".py") else part
        for piece in re.split(r"[_\-.]+", stem):
            words.update(word.lower() for word in _NAME_WORD.findall(piece))
    if words & (_IMAGE_NAME | _VIDEO_NAME | _PIXEL_MODEL_NAME):
        return True
    # The code: only model words (a loader `load_audio_text_image_video` names no model).
    code: set[str] = set()
    for identifier in set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", function_source)):
        for piece in identifier.split("_"):
            code.update(word.lower() for word in _NAME_WORD.findall(piece))
    return bool(code & _PIXEL_MODEL_NAME)


_ATTENTION_WORK = compile_lazily(r"attn|attention", re.IGNORECASE)


def at_autoencoder_bottleneck(across: F.Work) -> F.Work:
    """Attention in an autoencoder runs in its mid block, at the latent resolution (the
    VAEs read: SD/SDXL, Wan, HunyuanVideo, Kandinsky): a Wan VAE's mid-block attention over
    one 60x104 latent frame at 384 channels is a few MiB, while the decoder's peak is in
    its full-resolution up blocks. Attention work there counts as one sublayer (`LAYER`),
    not as what sets the peak; other work is returned unchanged."""
    if across.level != F.PEAK or across.kind not in ("torch-op", "submodule", "module-parameter"):
        return across
    if not across.parts or not _ATTENTION_WORK.search(across.parts[-1]):
        return across
    return replace(across, level=F.LAYER)


def _small_join(across: F.Work) -> bool:
    """A concatenation (or a loop of them) below peak level: it joins no decoded frames or
    logits (`facts._joins_large`), so it is not where an output-sized value peaks (a
    padding frame joined to a clip, a row of latents, per-token differences)."""
    if across.level >= F.PEAK:
        return False
    if across.kind == "concatenation":
        return True
    return across.kind == "loop" and bool(across.parts) and across.parts[-1] in _JOINS


_JOINS = frozenset(["cat", "concat", "concatenate", "stack"])


def model_interface(across: F.Work) -> bool:
    """Whether the work is a whole model call (a VAE decode, a transformer or encoder call,
    a denoise loop over one): what is held across it is at the model's interface. A
    collective moves activations, and a loop of blocks is a model's own body (peak level)."""
    return (
        across.level >= F.MODEL
        and across.kind != "collective"
        and not (across.kind == "loop" and bool(across.parts) and _is_collective(across.parts[-1]))
    )


def _is_collective(name: str) -> bool:
    lowered = name.lower()
    return any(word in lowered for word in ("all_gather", "all_to_all", "all_reduce", "gather"))


# Model families whose activations are a few MiB at their real sizes (audio and speech
# models, text encoders, segmentation and detection heads, image post-processing, perceiver
# resamplers over a few hundred learned latents), by their file, folder or class name: an
# activation there is small.
_SMALL_DOMAINS = compile_lazily(
    r"(audio|speech|vocoder|tts|music|codec|whisper|wav2vec|asr|mel|sam2|sam3|detr|bert|"
    r"segment|detect|image_?process|perceiver|resampler|(^|[^a-z])sam([^a-z]|$))",
    re.IGNORECASE,
)


def domain_origin(
    origin: str,
    path: str,
    owner: str | None,
    domain: str = "unknown",
    users: tuple[str, ...] = (),
) -> str:
    """An activation in a small-sized model family is small, by its file or class name, or
    because every class of the file that builds the owner is named for one (`users`: a
    motion encoder built only inside `CausalAudioEncoder` runs over audio frames); in a file
    whose domain fact (`lifetime_lint.analysis.domain`: what the code talks about) is small,
    so are its decoded outputs and logits (a waveform, codebook logits)."""
    size = size_class(origin)
    if domain == SMALL_DOMAIN and size in (LARGE, ACTIVATION_SIZED):
        return F.SMALL_MODEL
    if size != ACTIVATION_SIZED:
        return origin
    where = path.replace("\\", "/").rsplit("/", 2)[-2:] + ([owner] if owner else [])
    if any(_SMALL_DOMAINS.search(part) for part in where):
        return F.SMALL_MODEL
    if users and all(_builder_of_small_model(user) for user in users):
        return F.SMALL_MODEL
    return origin


# The top-level package of a speech or audio project (`styletts2`, `f5_tts`, `cosyvoice`,
# `audiocraft`): its modules (a pitch extractor over an 80-bin mel, a WavLM discriminator)
# often never say audio themselves. `mel`/`sam` are left out: a package name is one word
# (`camelot` is no mel model).
_SMALL_PACKAGES = compile_lazily(
    r"audio|speech|vocoder|tts|voice|whisper|wav2vec|wavlm|hubert|codec|music", re.IGNORECASE
)


def package_origin(origin: str, path: str) -> str:
    """An activation of a module inside a speech or audio package is small: the file's own
    folder and name say nothing (StyleTTS2's `Utils/JDC/model.py`), but the top-level
    package (the highest folder of the chain of `__init__.py` folders above the file) is
    named for an audio model family and for no video (`_VIDEO_NAME`)."""
    if size_class(origin) != ACTIVATION_SIZED:
        return origin
    top = top_package(os.path.dirname(os.path.abspath(path)))
    package = None if top is None else os.path.basename(top)
    if package is None or not _SMALL_PACKAGES.search(package):
        return origin
    words = {word.lower() for word in _NAME_WORD.findall(package)}
    return origin if words & _VIDEO_NAME else F.SMALL_MODEL


def _builder_of_small_model(name: str) -> bool:
    """A class named for a small model family and for no video (`CausalAudioEncoder`, not
    `LTX2AudioVideoAttnProcessor`, whose parts serve both streams)."""
    words = {word.lower() for word in _NAME_WORD.findall(name)}
    return bool(_SMALL_DOMAINS.search(name)) and not words & _VIDEO_NAME


def builders_of(module: cst.Module, memo: dict, owner: str | None) -> tuple[str, ...]:
    """The names of the classes of a module whose code builds `owner` (`OwnerClass(...)`
    inside their methods), memoised per file; empty for a class no other class builds."""
    if owner is None:
        return ()
    table = memo.get(_BUILDERS_KEY)
    if table is None:
        table = {}
        for statement in module.body:
            if isinstance(statement, cst.ClassDef):
                for name in _called_names(statement):
                    table.setdefault(name, set()).add(statement.name.value)
        memo[_BUILDERS_KEY] = table
    return tuple(sorted(table.get(owner, set()) - {owner}))


_BUILDERS_KEY = "significance.builders"


def _called_names(node: cst.CSTNode) -> set[str]:
    names: set[str] = set()

    def enter(current: cst.CSTNode) -> None:
        if type(current) is cst.Call:
            func = current.func
            if type(func) is cst.Name:
                names.add(func.value)

    # Read-only, a plain callback, and past the whitespace leaves (half the nodes).
    walk_skipping(node, enter, _ignore, _LEAVES_SKIPPED)
    return names


_LEAVES_SKIPPED = frozenset(LEAF_TYPES)


def _ignore(node: cst.CSTNode) -> None:
    return None


def at_least(level: str, bar: str) -> bool:
    return rank(level) >= rank(bar)


SETTING = "min-significance"


def _validate_bar(value: object) -> str | None:
    return None if value in LEVELS else f'must be "low", "medium" or "high", got {value!r}'


# `[tool.lifetime-lint] min-significance`, registered the way config.py lets modules add keys.
GLOBAL_KEYS[SETTING] = (
    str,
    'report rated findings (LL001) from this significance up: "low", "medium" (default) or "high"',
)
KEY_VALIDATORS[SETTING] = _validate_bar


def bar_of(settings) -> str:
    """The configured bar (`min-significance` under `[tool.lifetime-lint]`)."""
    extra = getattr(settings, "extra", None) or {}
    value = extra.get(SETTING, DEFAULT_BAR)
    return value if value in LEVELS else DEFAULT_BAR


def unvisual_named_decoded(flowed: str, named: str, domain: str) -> str:
    """`named` (`name_origin` of `flowed`), except that a value decoded only by its name
    (`beam_dec_out = torch.stack(...)`) in a file whose code shows neither images, video nor
    generation (domain `unknown`: a transducer's beam search, a seq2seq decoder) holds a
    decoder's hidden states, as a decoder's own output there does (`facts`): model output."""
    if named == F.DECODED and flowed != F.DECODED and domain == UNKNOWN_DOMAIN:
        return F.MODEL_OUTPUT
    return named


def name_origin(name: str, origin: str) -> str:
    """Refine an origin by what the code calls the value (size hints only, never
    tensor-ness): `prompt_embeds` is conditioning, `latents` latent-sized, `frames` decoded,
    `attention_mask` small, even when they come from a generic call."""
    lowered = name.lower().strip("_")
    words = set(lowered.replace("-", "_").split("_"))
    if origin not in (F.MODEL_OUTPUT, F.DECODED) and (
        words & _TINY_WORDS or lowered.rstrip("0123456789") in _TINY_WORDS
    ):
        return F.SMALL  # (a model-level call's output keeps its class whatever its name)
    if origin in (F.DECODED, F.MODEL_OUTPUT) and words & _INDEX_WORDS:
        return F.SMALL  # `video_pos_ids = video_coords.chunk(2)[0]`: positions, not frames
    if origin == F.DECODED and words & _EMBEDDING_WORDS:
        return F.CONDITIONING  # `prefix_embeds = self.decode_prefix(h)`: embeddings, not frames
    if "encoded" in words and not words & _CONDITIONING_WORDS and origin in _ENCODABLE_ORIGINS:
        return F.LATENTS  # `encoded_tile = self.encode(tile)`: an encoder's latent, not pixels
    if words & _LATENT_WORDS and origin != F.CONDITIONING:
        # `image_latents`, `tile_latents`, `denoised_video` (a denoiser's prediction): latent
        # space, not pixels, even when the dataflow saw decoded inputs
        return F.LATENTS
    if "pixel" in words and "values" in words and origin in _PIXEL_INPUT_ORIGINS:
        return F.IMAGE  # `pixel_values`: a processor's preprocessed input images
    if origin == F.DECODED and words & _NOT_PIXEL_WORDS:
        # `q_tiles = quantize_tiles(tiles)`: what a decode-named input flowed into, renamed
        # for weights or a query, is no longer decoded output.
        return WEIGHT_SIZED if words & _WEIGHT_WORDS else F.ACTIVATION
    if origin in (F.DECODED, F.CONDITIONING):
        return origin
    if words & {"logits"}:
        return F.LOGITS  # (router and gate logits are small: caught above)
    if words & {"noise", "pred"}:
        return F.LATENTS  # `noise_pred_text`: a prediction in latent space, not text
    if words & _CONDITIONING_WORDS or {"encoder", "hidden"} <= words:
        return F.CONDITIONING  # `image_embeds` before `image`; `encoder_hidden_states`
    if words & _MODALITY_WORDS and words & _FEATURE_WORDS:
        return F.CONDITIONING  # `image_features`, `audio_feats`: an encoder's tokens
    if (
        words & _DECODED_WORDS
        and not words & _FEATURE_WORDS
        and not words & _NOT_PIXEL_WORDS
        and origin in (F.MODEL_OUTPUT, F.CONCATENATION, F.ALLOCATION)
    ):
        return F.DECODED  # `frames = torch.cat(...)`: a value of unknown size, named frames
    if origin == F.IMAGE and words & {"video", "videos", "frames"}:
        return F.DECODED  # `control_video = image_processor.preprocess(frames)`: many images
    if words & _LATENT_WORDS:
        return F.LATENTS
    return origin


_TINY_WORDS = frozenset(
    [
        "topk",
        "boxes",
        "box",
        "shape",
        "shapes",
        "size",
        "sizes",
        "rotary",
        "sums",
        "counts",
        "probs",
        "routing",
        "router",
        "guidance",
        "gate",
        "gates",
        "mod",
        "modulation",
        "adaln",
        "label",
        "labels",
        "bias",
        "t",
        "ts",
        "timestep",
        "time",
        "timesteps",
        "sigma",
        "sigmas",
        "ids",
        "id",
        "idx",
        "indices",
        "index",
        "lens",
        "len",
        "lengths",
        "length",
        "mask",
        "masks",
        "indicator",
        "indicators",
        "flag",
        "flags",
        "scale",
        "scales",
        "mean",
        "std",
        "step",
        "steps",
        "shift",
        "temb",
        "seed",
        "generator",
        "pos",
        "position",
        "positions",
        "freqs",
        "freq",
        "cos",
        "sin",
        "rope",
        "coords",
        "coord",
        "grid",
        "offsets",
        "offset",
        "seqlens",
        "cu",
        "loss",
        "losses",
    ]
)
_INDEX_WORDS = frozenset(["ids", "id", "idx", "indices", "pos", "positions", "coords", "offsets"])
_DECODED_WORDS = frozenset(
    [
        "decoded",
        "dec",
        "image",
        "images",
        "video",
        "videos",
        "frame",
        "frames",
        "pixel",
        "pixels",
        "tile",
        "tiles",
        "row",
        "rows",
        "recon",
        "reconstruction",
        "reconstructed",
        "output_frames",
    ]
)
# Words that say tiles or rows are weights, not pixels (a quantizer's `weight_tiles`,
# `quantized_tiles`), and words that say they are a query's (`q_tiles`: attention's query
# tiles, or a quantizer's quantized tiles; either way not decoded output).
_WEIGHT_WORDS = frozenset(["weight", "weights", "quant", "quantized", "qweight"])
_NOT_PIXEL_WORDS = _WEIGHT_WORDS | frozenset(["q", "qkv", "query"])
_CONDITIONING_WORDS = frozenset(
    [
        "embeds",
        "embed",
        "embedding",
        "embeddings",
        "emb",
        "prompt",
        "prompts",
        "text",
        "txt",
        "cond",
        "condition",
        "conditioning",
        "context",
        "caption",
        "cap",
        "negative",
        "pooled",
    ]
)
# (`clip`, `siglip`: the image encoders whose features condition video and image models.)
_MODALITY_WORDS = frozenset(
    ["image", "images", "vision", "visual", "audio", "video", "pixel", "clip", "siglip"]
)
_FEATURE_WORDS = frozenset(
    ["features", "feature", "feats", "feat", "fea", "hidden", "states", "tokens", "embeds", "mask"]
)
# What an `encoded_*` value can be when its size is the encoder's output (not a small model's
# features, not conditioning).
_ENCODABLE_ORIGINS = frozenset([F.DECODED, F.MODEL_OUTPUT, F.ACTIVATION, F.CONCATENATION])
_LATENT_WORDS = frozenset(["latent", "latents", "noise", "pred", "noise_pred", "denoised"])
_EMBEDDING_WORDS = frozenset(["embeds", "embed", "embedding", "embeddings", "emb"])
# What a `pixel_values` binding may come from when it is a model's preprocessed input.
_PIXEL_INPUT_ORIGINS = frozenset([F.ACTIVATION, F.DECODED, F.CONCATENATION, F.ALLOCATION])


# Why merging a tiled decode's decoded tiles saves nothing, by what one tile call decodes
# (`decoders.tile_decoder_span`). Measured on an H200 (benchmarks/RESULTS.md): releasing the
# decoded rows lowered Wan 2.1's 720p tiled decode by 592 MiB (one latent frame per call), and
# by 0 MiB in Mochi (163 frames, frame batches and whole tiles), LTX-Video (161 frames, whole
# tiles), HunyuanVideo 1.5 (whole tiles), CogVideoX and MagViT (frame batches: 0.5 MiB of
# 3,862, 0.4 MiB of 5,634). One whole-tile merge did set the peak: LTX-2's (121 frames,
# 766 MiB of 2,587), whose decoder is light next to its output; the level stays low (three
# whole-tile decodes of four measured saved nothing) and the message says so.
_TILE_CALL = {
    D.FRAME_BATCH: (
        "each tile call decodes a batch of latent frames (`{source}`): its decoder activations"
        " at the tile's full resolution outgrow the merged output, which sets no peak"
        " (measured under 1 MiB on CogVideoX and Mochi)"
    ),
    D.ALL_FRAMES: (
        "each tile call decodes every frame of its spatial tile (`{source}`): that call's"
        " activations usually set the peak, not the merge (measured 0 MiB on LTX-Video, Mochi"
        " and HunyuanVideo 1.5, but 766 MiB on LTX-2, whose decoder is light)"
    ),
    D.TEMPORAL: (
        "temporal tiles: each call decodes a batch of whole frames (`{source}`), whose"
        " activations outgrow the merged output"
    ),
}


def tiled_merge(span: D.TileSpan | None) -> str | None:
    """Why holding or concatenating the decoded tiles of a tiled decode is `low` (the words
    for the message), or None where it keeps its level: one latent frame of a spatial tile
    per call (Wan's causal VAE: the merge of the whole clip sets the peak), or a decode whose
    per-call extent the code does not show."""
    if span is None or span.kind not in _TILE_CALL:
        return None
    source = " ".join(span.source.split())
    if len(source) > 60:
        source = source[:57] + "..."
    where = " of the class's tile cutter" if span.from_class else ""
    return _TILE_CALL[span.kind].format(source=source + where)
