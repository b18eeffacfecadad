"""How much a lifetime finding is worth: its likely bytes at the peak of what it is held across.

Shared by LL001 (a dead tensor kept bound) and LL002 (chunks kept in a list). Two inputs,
both from the facts layer:

- the size class of the held value, from where it comes from (`ValueFact.origin`):
  `large` (decoded tiles/frames/images, logits, a concatenation of those), `activation`
  (a layer's output, an operator over activations, a model's hidden states, a cache
  slot, a buffer of computed shape), `small` (conditioning such as prompt embeddings,
  latents and latent-space predictions: a few MiB in the pipelines measured), `tiny`
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
| activation | medium | medium | low |
| small | low | low | low |

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

import re
from dataclasses import dataclass

from lifetime_lint.analysis import facts as F
from lifetime_lint.analysis.domain import SMALL_DOMAIN
from lifetime_lint.config import GLOBAL_KEYS, KEY_VALIDATORS

LOW, MEDIUM, HIGH = "low", "medium", "high"
LEVELS = (LOW, MEDIUM, HIGH)
DEFAULT_BAR = MEDIUM

LARGE, ACTIVATION_SIZED, SMALL_SIZED, TINY = "large", "activation", "small", "tiny"

_SIZE_OF_ORIGIN = {
    F.DECODED: LARGE,
    F.LOGITS: LARGE,
    F.CONCATENATION: ACTIVATION_SIZED,
    F.MODEL_OUTPUT: ACTIVATION_SIZED,
    F.ACTIVATION: ACTIVATION_SIZED,
    F.CACHE_ENTRY: ACTIVATION_SIZED,
    F.ALLOCATION: ACTIVATION_SIZED,
    F.CONDITIONING: SMALL_SIZED,
    F.LATENTS: SMALL_SIZED,
    F.IMAGE: SMALL_SIZED,
    F.SMALL_MODEL: SMALL_SIZED,
    F.SMALL: TINY,
}

# What each origin is called in a message, with its size class.
_DESCRIPTION = {
    F.DECODED: "decoded tiles, frames or images: large",
    F.LOGITS: "logits: large",
    F.CONCATENATION: "a concatenation: activation-sized or larger",
    F.MODEL_OUTPUT: "a model output: activation-sized",
    F.ACTIVATION: "an activation: scales with tokens or pixels",
    F.CACHE_ENTRY: "an old cache entry: activation-sized",
    F.ALLOCATION: "a buffer of computed shape",
    F.CONDITIONING: "an embedding: size unknown, usually a few MiB",
    F.LATENTS: "latent-sized: usually a few MiB",
    F.IMAGE: "one preprocessed image: a few MiB",
    F.SMALL_MODEL: "an activation of an audio, speech or detection model: a few MiB",
    F.SMALL: "small",
}


def rank(level: str) -> int:
    return LEVELS.index(level)


def size_class(origin: str) -> str:
    return _SIZE_OF_ORIGIN.get(origin, ACTIVATION_SIZED)


def describe(origin: str) -> str:
    return _DESCRIPTION.get(origin, "a tensor")


@dataclass(frozen=True)
class Estimate:
    level: str  # low / medium / high
    size: str  # large / activation / small / tiny
    across: int  # Work level of what it is held across


_SMALLER = {LARGE: ACTIVATION_SIZED, ACTIVATION_SIZED: SMALL_SIZED}


def estimate(
    origin: str, across: F.Work, one_chunk: bool = False, function_peak: int | None = None
) -> Estimate:
    """The significance of holding a value of this origin across this work. `one_chunk`: the
    value is the previous iteration's of a loop (one chunk of many: one size class down).
    `function_peak`: the level of the heaviest work of the whole function; a value held only
    across lighter work (after the encoder ran, or dead before the decode) is not alive at
    the function's peak, so it counts one level down (an output-sized concatenation of
    decoded tiles excepted: there the result sits beside all its inputs; a concatenation of
    latents or embeddings is no such join)."""
    size = size_class(origin)
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
    if size == LARGE:
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
    return Estimate(level, size, across.level)


# Model families whose activations are a few MiB at their real sizes (audio and speech
# models, text encoders, segmentation and detection heads, image post-processing), by their
# file, folder or class name: an activation there is small.
_SMALL_DOMAINS = re.compile(
    r"(audio|speech|vocoder|tts|music|codec|whisper|wav2vec|asr|mel|sam2|sam3|detr|bert|"
    r"segment|detect|image_?process|(^|[^a-z])sam([^a-z]|$))",
    re.IGNORECASE,
)


def domain_origin(origin: str, path: str, owner: str | None, domain: str = "unknown") -> str:
    """An activation in a small-sized model family is small, by its file or class name; in a
    file whose domain fact (`lifetime_lint.analysis.domain`: what the code talks about) is
    small, so are its decoded outputs and logits (a waveform, codebook logits)."""
    size = size_class(origin)
    if domain == SMALL_DOMAIN and size in (LARGE, ACTIVATION_SIZED):
        return F.SMALL_MODEL
    if size != ACTIVATION_SIZED:
        return origin
    where = path.replace("\\", "/").rsplit("/", 2)[-2:] + ([owner] if owner else [])
    if any(_SMALL_DOMAINS.search(part) for part in where):
        return F.SMALL_MODEL
    return origin


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
    if "pixel" in words and "values" in words and origin in _PIXEL_INPUT_ORIGINS:
        return F.IMAGE  # `pixel_values`: a processor's preprocessed input images
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
        "label",
        "labels",
        "bias",
        "t",
        "ts",
        "timestep",
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
        "conditioning",
        "context",
        "caption",
        "cap",
        "negative",
        "pooled",
    ]
)
_MODALITY_WORDS = frozenset(["image", "images", "vision", "visual", "audio", "video", "pixel"])
_FEATURE_WORDS = frozenset(
    ["features", "feature", "feats", "feat", "hidden", "states", "tokens", "embeds", "mask"]
)
_LATENT_WORDS = frozenset(["latent", "latents", "noise", "pred", "noise_pred"])
# What a `pixel_values` binding may come from when it is a model's preprocessed input.
_PIXEL_INPUT_ORIGINS = frozenset([F.ACTIVATION, F.DECODED, F.CONCATENATION, F.ALLOCATION])
