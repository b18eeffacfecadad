"""What the analyses know about torch: one set of tables, shared by every rule.

Each table answers one question about a call or attribute, judged on its last name part
(`x.view(...)` -> `view`) or on its qualified torch name. Rules never keep private copies:
a disagreement between two rules about what `.contiguous()` returns is a bug in one of
them, so there is one answer here (`MAYBE_COPY_METHODS`).
"""

from __future__ import annotations

# -- methods on a tensor -------------------------------------------------------------------

# Results that always share the receiver's storage.
VIEW_METHODS = frozenset(
    [
        "view", "view_as", "reshape_as", "expand", "expand_as", "transpose", "permute",
        "squeeze", "unsqueeze", "narrow", "chunk", "split", "tensor_split", "unbind",
        "split_with_sizes", "t", "movedim", "moveaxis", "swapaxes", "swapdims", "unflatten",
        "diagonal", "select", "unfold", "as_strided", "detach", "requires_grad_",
        "share_memory_", "real", "imag", "mT", "mH", "T", "H",
    ]
)  # fmt: skip
# Results that are the receiver itself when the call is a no-op (already contiguous, the
# same dtype/device, a reshape that needs no copy) and a fresh copy otherwise. For a
# release rule they are aliases (deleting the source may free nothing); for an
# accumulate rule a list of them may still hold real memory.
MAYBE_COPY_METHODS = frozenset(
    [
        "contiguous", "reshape", "flatten", "to", "type", "type_as", "float", "half",
        "double", "bfloat16", "int", "long", "bool", "cpu", "cuda", "pin_memory",
    ]
)  # fmt: skip
# Views that hand out several pieces of one storage: none of them owns it alone.
SPLITTING = frozenset({"chunk", "split", "tensor_split", "unbind", "split_with_sizes"})
# Methods whose result is a new tensor, with names no other common Python type uses: the
# receiver need not be known to be a tensor.
TENSOR_ONLY_METHODS = frozenset(
    [
        "clone", "matmul", "mm", "bmm", "baddbmm", "addmm", "softmax", "log_softmax",
        "rsqrt", "sigmoid", "masked_fill", "index_select", "repeat_interleave",
        "new_zeros", "new_ones", "new_empty", "new_full", "new_tensor", "einsum",
        "masked_scatter", "scatter_add", "index_add", "narrow_copy", "unfold_copy",
        "float_power", "addcmul", "addcdiv",
    ]
)  # fmt: skip
# Methods that return a new tensor when the receiver is a tensor, and something else
# on other types (`set.add`, `str.count`, `Fraction.limit_denominator`...): they count
# only when dataflow says the receiver is a tensor.
TENSOR_METHODS_ON_TENSORS = frozenset(
    [
        "exp", "log", "sqrt", "pow", "abs", "neg", "tanh", "relu", "gelu", "silu", "clamp",
        "clip", "add", "sub", "mul", "div", "where", "gather", "scatter", "cumsum",
        "cumprod", "repeat", "tile", "roll", "flip", "round", "floor", "ceil", "lerp",
        "sample", "mode", "square", "reciprocal", "sort", "topk", "masked_select",
        "nan_to_num", "sin", "cos",
    ]
)  # fmt: skip
# Reductions: a fraction of their input (often a scalar); never worth a finding.
REDUCTIONS = frozenset(
    [
        "sum", "mean", "std", "var", "norm", "vector_norm", "matrix_norm", "amax", "amin",
        "max", "min", "prod", "logsumexp", "all", "any", "count_nonzero", "argmax",
        "argmin", "median", "nansum", "nanmean", "aminmax", "std_mean", "var_mean",
    ]
)  # fmt: skip
# Methods whose result is metadata or a plain Python value, not a tensor.
METADATA_METHODS = frozenset(
    [
        "item", "tolist", "size", "dim", "numel", "ndimension", "nelement",
        "element_size", "data_ptr", "stride", "get_device", "is_contiguous",
        "is_floating_point", "is_complex", "storage_offset", "untyped_storage",
        "keys", "values", "items", "format", "join", "startswith", "endswith", "lower",
        "upper", "strip", "rstrip", "lstrip", "replace", "split_lines", "encode_plus",
        "count", "index", "decode_utf8", "hexdigest", "isoformat", "exists", "is_file",
        "is_dir", "read_text", "read_bytes", "as_posix", "relative_to", "with_suffix",
    ]
)  # fmt: skip
# Attributes that are metadata (shape, dtype, device, flags) or configuration.
METADATA_ATTRIBUTES = frozenset(
    [
        "shape", "dtype", "device", "ndim", "is_cuda", "requires_grad", "layout",
        "config", "grad_fn", "is_leaf", "names", "itemsize", "nbytes", "is_sparse",
        "is_quantized", "is_meta", "training", "name", "stem", "suffix", "parent",
    ]
)  # fmt: skip

# -- builtins and library functions --------------------------------------------------------

# Builtins whose result is never a tensor.
METADATA_BUILTINS = frozenset(
    [
        "len", "int", "float", "str", "bool", "range", "list", "dict", "tuple", "set",
        "frozenset", "isinstance", "issubclass", "getattr", "hasattr", "enumerate", "zip",
        "sorted", "reversed", "round", "repr", "type", "id", "hash", "print", "format",
        "open", "any", "all", "min", "max", "divmod", "iter", "next", "map", "filter",
        "callable", "object", "super", "sum", "abs", "ord", "chr", "bytes", "bytearray",
        "input", "vars", "dir", "globals", "locals", "slice", "pow", "bin", "hex", "oct",
    ]
)  # fmt: skip
# Modules whose functions return plain values (numbers, strings, paths, decoded JSON).
METADATA_MODULES = (
    "math.", "os.", "os.path.", "json.", "msgpack.", "orjson.", "ujson.", "pickle.",
    "yaml.", "re.", "string.", "time.", "datetime.", "pathlib.", "shutil.", "glob.",
    "random.", "itertools.", "functools.", "operator.", "collections.", "logging.",
    "warnings.", "inspect.", "typing.", "dataclasses.", "copy.deepcopy", "struct.",
    "base64.", "hashlib.", "uuid.", "socket.", "asyncio.", "requests.", "aiohttp.",
    "httpx.", "zmq.", "io.", "sys.", "platform.", "subprocess.", "tempfile.", "msgspec.",
    "cloudpickle.", "marshal.", "tomllib.", "toml.", "zlib.", "csv.",
)  # fmt: skip

# -- torch functions -------------------------------------------------------------------------

# torch namespaces whose functions do not return activations.
TORCH_NOT_TENSOR_PREFIXES = (
    "torch.cuda.", "torch.backends.", "torch.distributed.", "torch.jit.", "torch.compile",
    "torch.amp.", "torch.autograd.", "torch.utils.", "torch.hub.", "torch.nn.init.",
    "torch.nn.utils.", "torch.nn.parallel.", "torch.library.", "torch.fx.", "torch.onnx.",
    "torch._dynamo.", "torch.compiler.", "torch.profiler.", "torch.accelerator.",
    "torch.xpu.", "torch.mps.", "torch.npu.", "torch.distributions.", "torch.testing.",
    "torch.export.", "torch.cpu.", "torch.Size", "torch.Generator", "torch.device",
    "torch.dtype", "torch.finfo", "torch.iinfo", "torch.Stream", "torch.Event",
)  # fmt: skip
TORCH_NOT_TENSOR_FUNCTIONS = frozenset(
    [
        "device", "dtype", "manual_seed", "seed", "initial_seed", "no_grad",
        "inference_mode", "enable_grad", "set_grad_enabled", "autocast", "finfo", "iinfo",
        "load", "save", "numel", "use_deterministic_algorithms", "typename", "is_tensor",
        "is_storage", "is_floating_point", "is_complex", "is_nonzero", "is_grad_enabled",
        "is_inference_mode_enabled", "get_default_dtype", "set_default_dtype",
        "get_rng_state", "set_rng_state", "broadcast_shapes", "promote_types",
        "result_type", "can_cast", "set_printoptions", "compile",
    ]
)  # fmt: skip
# torch functions returning views of their first argument.
TORCH_VIEW_FUNCTIONS = frozenset(
    [
        "chunk", "split", "tensor_split", "unbind", "narrow", "transpose", "permute",
        "squeeze", "unsqueeze", "t", "movedim", "moveaxis", "swapaxes", "select",
        "view_as_real", "view_as_complex", "as_strided", "diagonal", "broadcast_to",
        "atleast_1d", "atleast_2d", "atleast_3d", "detach",
    ]
)  # fmt: skip
TORCH_MAYBE_COPY_FUNCTIONS = frozenset({"reshape", "flatten", "ravel"})
# Library functions that reshape their first argument like `torch.reshape` (a view of it
# where the layout allows, so the result keeps the argument's storage alive).
RESHAPING_FUNCTIONS = frozenset({"einops.rearrange"})
# torch functions that build small tensors from Python data (ids, positions, scalars).
TORCH_SMALL_FUNCTIONS = frozenset(
    {"tensor", "as_tensor", "arange", "linspace", "logspace", "from_numpy", "scalar_tensor",
     "LongTensor", "IntTensor", "FloatTensor", "BoolTensor"}
)  # fmt: skip
# torch functions returning the indices of a mask (integers per hit, not activations).
INDEX_FUNCTIONS = frozenset(
    {"nonzero", "argwhere", "searchsorted", "bucketize", "unique", "unique_consecutive", "bincount"}
)  # (`torch.unique` of slot or label ids: at most one entry per distinct id)
# Concatenations: a new tensor the size of all inputs together.
CONCATENATIONS = frozenset(
    {"torch.cat", "torch.concat", "torch.concatenate", "torch.stack", "torch.hstack",
     "torch.vstack", "torch.dstack"}
)  # fmt: skip
# Allocating torch ops whose own working set scales with big inputs: holding another
# activation across one of them adds to a real peak.
HEAVY_TORCH_OPS = frozenset(
    [
        "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
        "conv_transpose3d", "scaled_dot_product_attention", "interpolate", "upsample",
        "grid_sample", "unfold", "fold", "matmul", "bmm", "baddbmm", "einsum",
        "group_norm", "layer_norm", "pad", "linear",
    ]
)  # fmt: skip
# Allocators that create a buffer of a given shape.
ALLOCATORS = frozenset(
    [
        "empty", "zeros", "ones", "full", "empty_like", "zeros_like", "ones_like",
        "full_like", "rand_like", "randn_like", "empty_strided", "new_empty", "new_zeros",
        "new_ones", "new_full", "randn", "rand", "randint", "normal",
    ]
)  # fmt: skip

# -- collectives ------------------------------------------------------------------------------

COLLECTIVES = frozenset(
    [
        "all_reduce", "all_gather", "all_gather_into_tensor", "all_gather_object",
        "reduce_scatter", "reduce_scatter_tensor", "all_to_all", "all_to_all_single",
        "broadcast", "broadcast_object_list", "reduce", "gather", "scatter", "send",
        "recv", "isend", "irecv", "batch_isend_irecv", "_all_gather_base",
        "all_gather_tensor", "all_gather_tensor_autograd", "reduce_scatter_tensor_autograd",
    ]
)  # fmt: skip
# Collectives that reduce or copy into the tensors they are given: they allocate nothing,
# so holding another tensor across one adds nothing to a peak.
IN_PLACE_COLLECTIVES = frozenset(
    ["all_reduce", "reduce", "broadcast", "send", "recv", "isend", "irecv", "batch_isend_irecv"]
)  # fmt: skip
# Collectives of Python objects (pickled metadata, not tensors).
OBJECT_COLLECTIVES = frozenset(
    ["all_gather_object", "broadcast_object_list", "gather_object", "scatter_object_list"]
)  # fmt: skip
# ... and the words of a project helper's name that say it wraps one
# (`tensor_model_parallel_all_reduce`).
IN_PLACE_WORDS = ("all_reduce",)
# The word of a project helper's name that says its collective moves Python objects, as in
# torch's own names (`_all_gather_group_objects`, `broadcast_object`, `gather_objects`).
OBJECT_WORD = "object"
# Parts of a project helper's name that say it wraps a collective
# (`tensor_model_parallel_all_gather`, `sequence_model_parallel_all_to_all_4D`).
COLLECTIVE_WORDS = ("all_gather", "all_reduce", "all_to_all", "reduce_scatter")

# -- modules -----------------------------------------------------------------------------------

# Components that make a call light whatever its method is called (`self.tokenizer.encode`).
LIGHT_OWNERS = (
    "*tokenizer*", "*processor*", "*scheduler*", "logger", "*progress*", "json",
    "guider", "*feature_extractor*", "*logging*", "*metrics*", "*timer*", "*profiler*",
)  # fmt: skip
# Callee names of model-level work (a whole network): the default of LL001's
# `heavy-calls`.
MODEL_CALLS = (
    "*encoder", "*decoder", "encode", "decode", "encode_*", "decode_*", "_encode*",
    "_decode*", "vae", "*transformer", "unet", "controlnet", "forward", "generate",
    "model", "*_model",
)  # fmt: skip
# Submodules whose call allocates about one activation (normalisations, projections,
# activations, embeddings): holding a tensor across one of them is not worth a finding.
LIGHT_SUBMODULES = (
    "*norm*", "ln*", "*_ln", "dropout*", "drop*", "act*", "*_act", "activation*",
    "nonlinearity", "*proj*", "linear*", "*embed*", "*embedder*", "time_*", "*pos_*",
    "rope*", "*rotary*", "pad*", "*pool*", "scale*", "shift*", "gate*", "*quant*",
    "fc*", "*_fc", "*router*", "to_out*", "to_q", "to_k", "to_v", "to_qkv", "to_kv",
)  # fmt: skip
# The feed-forward: it expands the hidden size several times. Among peak-level work a
# value is held across, LL001 names the feed-forward (measured, issue 12: an activation
# held across Wan's feed-forward cost 6.2% of the denoise peak).
FEED_FORWARD_SUBMODULES = (
    "ff", "ffn", "*ff", "ff_*", "*_ff", "*ffn*", "*mlp*", "feed_forward*",
    "*feedforward*", "experts", "moe", "*_moe",
)  # fmt: skip
# Submodules that set a block's activation peak: the feed-forward, self-attention (QKV and
# scores), a stack of blocks, a whole residual stage. A layer-level hold across one of
# these adds to the block's peak.
PEAK_SUBMODULES = FEED_FORWARD_SUBMODULES + (
    "attn", "attn1", "self_attn*", "attention", "self_attention", "*blocks", "*layers",
    "resnets", "*stage*", "mid_block", "*res_block*", "*resblock*", "conv_in", "conv_out",
)  # fmt: skip
# Cross-attention attends to a short conditioning sequence: its working set is smaller
# than the feed-forward's that follows it in a block.
CROSS_ATTENTION = ("attn2", "*cross*", "*context_attn*", "*text_attn*")
