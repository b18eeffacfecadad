"""What kind of model a file implements, from what its code talks about (a per-file fact).

An activation's bytes follow the model's real input sizes: a video DiT block holds
32,760 tokens x 1,536 channels (96 MiB), an ASR conformer after 8x subsampling holds a few
hundred frames (about 1.5 MiB for 30 s of audio), a speech codec or TTS decoder a few hundred
tokens, a legacy text model with learned position tables at most its
`max_position_embeddings` (512-2,048 tokens). The same `del attn_output` is worth a finding in
the first and nothing in the others.

The fact is derived from the words of the file's identifiers and strings (split at
underscores), counted once per file and memoised on the file context:

- `large`: the vocabulary of video and image generation (frames, `conv3d`, latents,
  timesteps, patchify, VAE, denoising) or of long-context language models (rotary
  positions, KV caches, sliding windows) outweighs the rest;
- `small`: the vocabulary of audio and speech (audio, mel, waveform, codebooks, CTC,
  subsampling, vocoder, codec) or of detection and segmentation post-processing (boxes, NMS,
  panoptic, multimask) dominates, or the file is a text model whose positions come from a
  learned table (`max_position_embeddings`, relative buckets) with no rotary or ALiBi
  positions and no generation vocabulary: its sequences are capped at the table's size;
- `unknown`: neither (a generic layer, a utility): sizes are not judged from the domain.
"""

from __future__ import annotations

import re
from collections import Counter

LARGE_DOMAIN, SMALL_DOMAIN, UNKNOWN_DOMAIN = "large", "small", "unknown"

MEMO_KEY = "analysis.domain"

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# Words of video/image generation and of long-context language models.
_LARGE_WORDS = frozenset(
    [
        "conv3d", "frames", "video", "videos", "temporal", "latent", "latents", "timestep",
        "timesteps", "patchify", "unpatchify", "vae", "denoise", "denoising", "diffusion",
        "unet", "rotary", "rope", "sliding", "kv", "prefill", "img", "image", "images",
        "pixel", "noise",
    ]
)  # fmt: skip
# Words of audio/speech models and of detection/segmentation post-processing.
_SMALL_WORDS = frozenset(
    [
        "audio", "speech", "mel", "waveform", "wav", "vocoder", "codec", "codebook",
        "codebooks", "ctc", "asr", "phoneme", "phonemes", "spectrogram", "subsampling",
        "conformer", "tts", "acoustic", "acoustics", "voice", "fbank", "bbox", "bboxes",
        "boxes", "nms", "panoptic", "detection", "detections", "multimask", "keypoints",
    ]
)  # fmt: skip
# Positions from a learned table cap the sequence; rotary/ALiBi positions do not.
_TABLE_POSITIONS = ("max_position_embeddings", "num_buckets")
_OPEN_POSITIONS = frozenset(["rotary", "rope", "alibi"])
# Below this many domain words a file says too little to judge.
_EVIDENCE = 10


def domain_of_source(source: str) -> str:
    """The domain (`large`, `small` or `unknown`) of a file's source text."""
    counts: Counter[str] = Counter()
    table_positions = False
    for word in _WORD.findall(source):
        lowered = word.lower()
        if not table_positions and lowered.endswith(_TABLE_POSITIONS):
            table_positions = True
        for part in lowered.split("_"):
            if part in _LARGE_WORDS or part in _SMALL_WORDS or part == "alibi":
                counts[part] += 1
    large = sum(counts[w] for w in _LARGE_WORDS)
    small = sum(counts[w] for w in _SMALL_WORDS)
    if small >= _EVIDENCE and small > large:
        return SMALL_DOMAIN
    generation = large - counts["kv"]
    if table_positions and generation < _EVIDENCE and not any(counts[w] for w in _OPEN_POSITIONS):
        return SMALL_DOMAIN  # a legacy text model: sequences capped by its position table
    if large >= _EVIDENCE:
        return LARGE_DOMAIN
    return UNKNOWN_DOMAIN


def file_domain(context) -> str:
    """The domain of the file being linted (computed once per file)."""
    domain = context.memo.get(MEMO_KEY)
    if domain is None:
        domain = domain_of_source(context.source)
        context.memo[MEMO_KEY] = domain
    return domain
