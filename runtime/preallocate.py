"""`ChunkWriter`: build the result of `torch.cat` / `torch.stack` without holding the chunks.

Decode loops (video VAEs, tiled decoders) append every chunk to a list and concatenate after
the loop: at the `torch.cat`, every chunk and the full output are alive together, about twice
the output. A `ChunkWriter` allocates the output once, at the first chunk (from its shape,
dtype, device and memory format and the expected `count` of chunks or total `size`), and
copies each chunk into its slice as it arrives, so the caller need not keep any chunk past
its copy: the peak becomes the output plus one chunk.

    frames = ChunkWriter(dim=2, count=num_frames)
    for k in range(num_frames):
        frames.append(decoder(latents[:, :, k : k + 1]))
    video = frames.result()          # == torch.cat(list_of_chunks, dim=2), bit for bit

Contract (what `result()` equals, and when):
- Values, dtype (torch's type promotion over all chunks), device, memory format (contiguous,
  or channels-last when every chunk is), `requires_grad` and gradients are those of
  `torch.cat(chunks, dim)` (or `torch.stack(chunks, dim)` with `stack=True`). Gradients
  flow to every chunk through the copies.
- `count` and `size` are hints that decide the allocation, never the result. The buffer is
  sized at the first chunk: `size` exactly when given, else `count` times the first chunk's
  length. When a chunk shows that this is too short (chunks longer than the first), the
  buffer is reallocated to what is written plus this chunk's length for every chunk still
  expected, copying what is written (correct, and early, but a transient copy); past a
  wrong `count` or `size` it grows by half each time, so appends stay linear. A
  shorter total (a short last chunk, fewer chunks) is trimmed without a second buffer: a
  view of the buffer when the concatenation dimension is the outermost non-trivial one,
  else the written data is compacted in place to a contiguous layout (a few strided copies
  inside the buffer; under autograd, one contiguous copy instead). Passing the exact
  `size` avoids both.
- Without `count` or `size` nothing can be preallocated: the writer keeps the chunks and
  concatenates in `result()`, exactly like the original code (no saving, no cost).
- A chunk with another dtype promotes the buffer as `torch.cat` would (one reallocation).
  Where the promoted dtype would round chunks already written (int32, then float16, then
  float32: torch.cat converts the int32 values straight to float32), the buffer is kept
  in a dtype that holds them exactly (float32, float64 or complex128) and cast once in
  `result()`; chunks the buffer's dtype rounds are kept and copied again. The only refusal
  left: int64 values beyond 2**53 among floating chunks, promoted twice (RuntimeError).
- The list held every chunk, so `torch.cat` read each one at the end. A chunk whose memory
  something else still reaches (a producer that returns its one output buffer, a view of
  a tensor written again later, a `detach()` of a live tensor) is read again in
  `result()`: through a weak reference, or kept when its storage is shared (keeping it
  costs nothing the list did not). A chunk nothing else reaches is final once copied.
- Modes are those of the concatenation: `result()` returns an inference tensor exactly
  when it runs under `torch.inference_mode()` (one copy when the appends ran in the other
  mode), and records no graph under `torch.no_grad()`; chunks that require grad appended
  under `no_grad` are kept and copied again, so a `result()` with grad enabled tracks them.
- Tensor subclasses, and appends while `torch.compile` traces, go to torch itself: the
  writer keeps them and `result()` concatenates with `torch.cat` (after a plain prefix,
  the subclass's `__torch_function__` sees the written prefix and the remaining chunks).
  `torch.compile(fullgraph=True)` traces a function that uses a writer.
- Errors are torch's own (same type and message, from the same op on stand-ins that
  allocate nothing), raised by `result()`, where `torch.cat` raised: a chunk torch would
  reject is kept with every later one (as the list held them), so code that catches the
  concatenation's error still catches it. An empty writer's `result()` raises what
  `torch.cat([])` / `torch.stack([])` do.
- Device-neutral: only `torch.empty` and `Tensor.copy_`, no device-specific call.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import torch


class _Meta:
    """The shape and dtype of the result so far."""

    __slots__ = ("dtype", "shape")

    def __init__(self, shape: tuple[int, ...], dtype: torch.dtype) -> None:
        self.shape = shape
        self.dtype = dtype


class ChunkWriter:
    """Concatenate chunks into one preallocated output as they arrive.

    Args:
        dim: the dimension to concatenate along (as in `torch.cat`), or to stack along.
        count: how many chunks will be appended, when known (a hint).
        size: the total length of the result along `dim`, when known (a hint; exact
            sizing even when chunks differ in length). Ignored with `stack=True`.
        stack: build `torch.stack(chunks, dim)` instead of `torch.cat(chunks, dim)`.
    """

    __slots__ = (
        "_appended",
        "_buffer",
        "_channels_last",
        "_failure",
        "_filled",
        "_held",
        "_kept",
        "_passthrough",
        "_rounded",
        "_sources",
        "_tail",
        "_template",
        "_watched",
        "count",
        "dim",
        "size",
        "stack",
    )

    def __init__(
        self,
        dim: int = 0,
        *,
        count: int | None = None,
        size: int | None = None,
        stack: bool = False,
    ) -> None:
        self.dim = dim
        self.count = None if count is None else max(int(count), 0)
        self.size = None if size is None or stack else max(int(size), 0)
        self.stack = stack
        self._buffer: torch.Tensor | None = None
        self._filled = 0  # written length along the (normalized) dim
        self._appended = 0  # chunks appended, legacy empty ones included
        # Chunks kept as they are: no hint, or only legacy empty 1-D chunks so far.
        self._held: list[torch.Tensor] = []
        self._template: _Meta | None = None  # shape and dtype of the result so far
        self._channels_last = True  # every chunk so far is channels-last (4-D/5-D)
        self._sources: set[Any] = set()  # dtypes of the chunks written (and not kept)
        self._rounded = False  # a promotion rounded written chunks (no exact carrier)
        # Chunks written into the buffer that must be read again (see `_track`): kept
        # strongly, or watched through a weak reference to the chunk or its base.
        self._kept: list[tuple[torch.Tensor, int]] = []
        self._watched: list[tuple[Any, int, Any]] = []
        # After a chunk torch.cat would reject: stand-ins for the chunks before it, and
        # the error; the rejected chunk and every later one go to `_tail`.
        self._failure: tuple[list[torch.Tensor], BaseException] | None = None
        # Tensor subclasses and traced (torch.compile) code: chunks kept from here on and
        # concatenated by torch itself in `result()`.
        self._passthrough = False
        self._tail: list[Any] = []

    # -- the public API -------------------------------------------------------------------
    def append(self, chunk: torch.Tensor) -> None:
        """Copy `chunk` into its slice of the output.

        A chunk that `torch.cat` would reject is kept, with every later one, and torch's
        error is raised by `result()`, where the concatenation was.
        """
        import torch

        if self._failure is not None or self._passthrough:
            self._tail.append(chunk)
            self._appended += 1
            return
        if _passes_through(torch, chunk):
            self._passthrough = True
            self.append(chunk)
            return
        try:
            template = self._validate(torch, chunk)
        except Exception as error:  # torch's own error, raised later by result()
            self._failure = (self._stand_ins(torch, self._stand_in_device(torch, chunk)), error)
            self._tail.append(chunk)
            self._appended += 1
            return
        index = self._appended
        self._appended += 1
        if self.count is None and self.size is None:
            self._held.append(chunk)
            self._template = template
            return
        if self._is_legacy_empty(chunk):
            # `torch.cat` skips 1-D empty tensors except for dtype promotion.
            self._template = template
            if self._buffer is not None and template.dtype != self._buffer.dtype:
                self._promote(torch, template.dtype)
            elif self._buffer is None:
                self._held.append(chunk)
            return
        part = self._part(chunk)
        dim = self._dim(chunk)
        self._note_format(torch, chunk)
        if self._buffer is None:
            self._template = template
            self._allocate(torch, part, dim, index)
        else:
            self._template = template
            if template.dtype != self._buffer.dtype:
                self._promote(torch, template.dtype)
            # Grow as soon as a chunk shows the buffer too short: with `count`, project
            # this chunk's length over every chunk still expected, so the reallocation
            # happens once and early, while little is written.
            needed = self._filled + part.shape[dim]
            if self.size is None:
                needed += part.shape[dim] * max(self._expected_remaining(index) - 1, 0)
            capacity = self._buffer.shape[dim]
            if needed > capacity:
                if self._expected_remaining(index) <= 0 or self.size is not None:
                    # The hint was wrong (more chunks than `count`, more than `size`):
                    # grow geometrically so a long tail stays linear; trimmed at the end.
                    needed = max(needed, capacity + capacity // 2)
                self._grow(torch, dim, needed)
        self._writable(torch)
        buffer = self._buffer
        assert buffer is not None
        length = part.shape[dim]
        buffer.narrow(dim, self._filled, length).copy_(part)
        self._track(torch, chunk, self._filled)
        self._filled += length

    def extend(self, chunks: Iterable[torch.Tensor]) -> None:
        """`append` each chunk in turn."""
        for chunk in chunks:
            self.append(chunk)

    def __iadd__(self, chunks: Iterable[torch.Tensor]) -> ChunkWriter:
        self.extend(chunks)
        return self

    def __len__(self) -> int:
        """The number of chunks appended so far."""
        return self._appended

    def result(self) -> torch.Tensor:
        """The concatenation of every chunk appended; the writer is empty afterwards."""
        import torch

        op = torch.stack if self.stack else torch.cat
        try:
            if self._failure is not None:
                stand_ins, error = self._failure
                op(stand_ins + self._tail, self.dim)  # torch's error over the whole list
                raise error
            if self._buffer is None:
                return op(self._held + self._tail, self.dim)
            written = self._written(torch)
            if not self._tail:
                return written
            # Chunks after a subclass (or under tracing): torch concatenates them with
            # what was written, so their own `__torch_function__` runs.
            if self.stack:
                dim = self._dim_of(written.dim())
                return torch.cat([written] + [t.unsqueeze(dim) for t in self._tail], dim)
            return torch.cat([written] + self._tail, self.dim)
        finally:
            self._buffer = None
            self._held = []
            self._filled = 0
            self._appended = 0
            self._template = None
            self._kept = []
            self._watched = []
            self._sources = set()
            self._rounded = False
            self._failure = None
            self._passthrough = False
            self._tail = []

    def _written(self, torch: Any) -> torch.Tensor:
        """The buffer as `torch.cat` would have returned it here and now: chunks still
        reachable read again, trimmed, in the current inference and grad modes."""
        buffer = self._buffer
        assert buffer is not None and self._template is not None
        if buffer.dtype != self._template.dtype:
            buffer = buffer.to(self._template.dtype)  # from the exact carrier (see _promote)
        elif buffer.is_inference() != torch.is_inference_mode_enabled():
            # torch.cat returns an inference tensor exactly when it runs in inference mode.
            buffer = buffer.clone()
        dim = self._dim_of(buffer.dim())
        for chunk, offset in self._kept:
            self._recopy(buffer, chunk, offset)
        for reference, offset, geometry in self._watched:
            chunk = _reach(reference, geometry)
            if chunk is not None:
                self._recopy(buffer, chunk, offset)
        if self._filled == buffer.shape[dim]:
            result = buffer
        else:
            trimmed = buffer.narrow(dim, 0, self._filled)
            if all(size == 1 for size in buffer.shape[:dim]) and not self._channels_last_result():
                result = trimmed  # still contiguous: no copy
            else:
                compacted = None
                if buffer.is_contiguous() and not buffer.requires_grad:
                    compacted = _compact(buffer, dim, self._filled)
                result = (
                    compacted
                    if compacted is not None
                    else trimmed.clone(memory_format=self._memory_format(torch, buffer))
                )
        if result.requires_grad and not torch.is_grad_enabled():
            # The copies were recorded, but torch.cat under no_grad records nothing.
            result = result.detach()
        return result

    # -- chunks the writer must read again ------------------------------------------------
    def _track(self, torch: Any, chunk: torch.Tensor, offset: int) -> None:
        """Remember the chunks whose copy may not be what `torch.cat` would read later.

        The list the writer replaces held every chunk, so `torch.cat` read each one at the
        end: a chunk changed in place after its append (a producer that reuses its output
        buffer, a view of a tensor that is written again) must be read again. A chunk whose
        memory nothing else can reach is final; one that something else still reaches is
        watched through a weak reference and read again in `result()` if still alive; one
        whose storage is shared with another tensor, that promotion could round, or that
        needs gradients the current no-grad mode did not record is kept. Keeping a chunk
        costs no memory the original did not spend: the list held it too.
        """
        part_dtype = self._buffer.dtype if self._buffer is not None else chunk.dtype
        keep = (
            not _exact_cast(torch, chunk.dtype, part_dtype)
            or (chunk.requires_grad and not torch.is_grad_enabled())
            or _storage_shared(torch, chunk)
            or (chunk._base is not None and chunk._base.dtype != chunk.dtype)
        )
        if keep:
            self._kept.append((chunk, offset))
            return
        self._sources.add(chunk.dtype)
        import weakref

        base = chunk._base
        if base is None:
            self._watched.append((weakref.ref(chunk), offset, None))
        else:
            geometry = (tuple(chunk.shape), chunk.stride(), chunk.storage_offset())
            self._watched.append((weakref.ref(base), offset, geometry))

    def _recopy(self, buffer: torch.Tensor, chunk: torch.Tensor, offset: int) -> None:
        part = self._part(chunk)
        dim = self._dim(chunk)
        buffer.narrow(dim, offset, part.shape[dim]).copy_(part)

    def _part(self, chunk: torch.Tensor) -> torch.Tensor:
        return chunk.unsqueeze(self._dim(chunk)) if self.stack else chunk

    def _stand_in_device(self, torch: Any, chunk: Any) -> Any:
        reference = self._device_reference()
        if reference is not None:
            return reference
        return chunk.device if isinstance(chunk, torch.Tensor) else None

    def _writable(self, torch: Any) -> None:
        """An inference-mode buffer cannot be written outside inference mode: copy it."""
        buffer = self._buffer
        if buffer is not None and buffer.is_inference() and not torch.is_inference_mode_enabled():
            self._buffer = buffer.clone()

    # -- validation: torch's own checks and messages --------------------------------------
    def _validate(self, torch: Any, chunk: Any) -> _Meta:
        """Raise what torch would for this chunk; return the shape and dtype of the result so far.

        Checked by hand (no meta tensors: their first use imports torch's meta registrations,
        seconds); on a failure the real op runs on allocation-free stand-ins, for torch's own
        error.
        """
        op = torch.stack if self.stack else torch.cat
        if not isinstance(chunk, torch.Tensor):
            op(self._stand_ins(torch, None) + [chunk], self.dim)  # raises torch's TypeError
            raise TypeError(f"expected Tensor, but got {type(chunk).__name__}")
        reference = self._device_reference()
        if reference is not None and chunk.device != reference:
            op(self._stand_ins(torch, reference) + [chunk], self.dim)
            raise RuntimeError(
                f"Expected all tensors to be on the same device, but found {reference} and "
                f"{chunk.device}"
            )
        result = self._combine(chunk)
        if result is None:
            op(self._stand_ins(torch, chunk.device) + [chunk], self.dim)
            raise RuntimeError(f"cannot concatenate a chunk of shape {tuple(chunk.shape)}")
        return result

    def _combine(self, chunk: torch.Tensor) -> _Meta | None:
        """The result's shape and dtype with this chunk added, or None where torch fails."""
        import torch

        shape = list(chunk.shape)
        ndim = len(shape)
        template = self._template
        dtype = (
            chunk.dtype if template is None else torch.promote_types(template.dtype, chunk.dtype)
        )
        if self.stack:
            if not -(ndim + 1) <= self.dim <= ndim:
                return None
            dim = self.dim + ndim + 1 if self.dim < 0 else self.dim
            if template is None:
                return _Meta(tuple(shape[:dim] + [1] + shape[dim:]), dtype)
            expected = list(template.shape)
            count = expected.pop(dim)
            if expected != shape:
                return None
            return _Meta(tuple(shape[:dim] + [count + 1] + shape[dim:]), dtype)
        if ndim == 1 and shape[0] == 0:  # legacy empty: skipped, whatever `dim` is
            return _Meta(template.shape if template is not None else (0,), dtype)
        if ndim == 0 or not -ndim <= self.dim < ndim:
            return None
        if template is None or template.shape == (0,):
            return _Meta(tuple(shape), dtype)
        if len(template.shape) != ndim:
            return None
        dim = self.dim + ndim if self.dim < 0 else self.dim
        expected = list(template.shape)
        if expected[:dim] + expected[dim + 1 :] != shape[:dim] + shape[dim + 1 :]:
            return None
        expected[dim] += shape[dim]
        return _Meta(tuple(expected), dtype)

    def _stand_ins(self, torch: Any, device: Any) -> list[torch.Tensor]:
        """One allocation-free tensor per chunk appended so far, shaped like the first."""
        if self._appended == 0:
            return []
        template = self._template
        shape = list(template.shape) if template is not None else [0]
        if self.stack and template is not None:
            del shape[self._dim_of(len(shape))]
        elif template is not None and shape and shape != [0]:
            shape[self._dim_of(len(shape))] = 1
        dtype = template.dtype if template is not None else torch.float32
        one = torch.empty((), dtype=dtype, device=device if device is not None else "cpu")
        return [one.expand(shape)] * self._appended

    def _device_reference(self) -> Any:
        if self._buffer is not None:
            return self._buffer.device
        for held in self._held:
            return held.device
        return None

    # -- allocation ---------------------------------------------------------------------
    def _allocate(self, torch: Any, part: torch.Tensor, dim: int, index: int) -> None:
        if self.size is not None:
            length = max(self.size, part.shape[dim])
        else:
            length = part.shape[dim] * max(self._expected_remaining(index), 1)
        shape = list(part.shape)
        shape[dim] = length
        dtype = self._template.dtype if self._template is not None else part.dtype
        self._buffer = torch.empty(
            shape, dtype=dtype, device=part.device, memory_format=self._memory_format(torch, part)
        )
        self._held = []  # legacy empty chunks only: nothing to copy
        self._filled = 0

    def _expected_remaining(self, index: int) -> int:
        """Chunks still expected, this one (number `index`) included."""
        if self.count is None:
            return 1
        return self.count - index

    def _grow(self, torch: Any, dim: int, length: int) -> None:
        old = self._buffer
        assert old is not None
        shape = list(old.shape)
        shape[dim] = length
        new = torch.empty(
            shape, dtype=old.dtype, device=old.device, memory_format=self._memory_format(torch, old)
        )
        new.narrow(dim, 0, self._filled).copy_(old.narrow(dim, 0, self._filled))
        self._buffer = new

    def _promote(self, torch: Any, dtype: torch.dtype) -> None:
        """Convert the buffer to the promoted dtype, as torch.cat converts every chunk.

        Chunks written exactly convert to the same values as straight from their own dtype;
        the kept ones (which the old dtype rounded) are copied again from the chunk. Where the
        promoted dtype would round a written chunk (int32, then float16: a later float32
        chunk would make torch.cat convert the int32 values straight to float32), the
        buffer becomes a carrier dtype that holds every chunk exactly, cast in `result()`.
        """
        old = self._buffer
        assert old is not None
        dim = self._dim_of(old.dim())
        carrier = _carrier(torch, self._sources | {old.dtype}, dtype)
        if (
            carrier is None
            and old.dtype == torch.int64
            and self._sources
            <= {torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool}
        ):
            # int64 chunks whose values float64 holds exactly (|v| <= 2**53): a float64
            # carrier is exact for them (one reduction, on this rare path only).
            written = old.narrow(dim, 0, self._filled)
            if written.numel() == 0 or int(written.abs().max()) <= 2**53:
                carrier = _carrier(torch, {torch.float64}, dtype)
                # Those values are float64 values now: later promotions may rely on it.
                self._sources = {torch.float64}
        if carrier is None:
            if self._rounded:
                raise RuntimeError(
                    f"ChunkWriter cannot reproduce torch.cat's type promotion to {dtype}: "
                    f"chunks were already rounded to {old.dtype} (int64 among floating "
                    f"chunks); cast the chunks to one dtype"
                )
            self._rounded = True  # rounded as torch.cat rounds, unless promoted again
            carrier = dtype
        if carrier == old.dtype:
            return
        dtype = carrier
        new = torch.empty(
            old.shape, dtype=dtype, device=old.device, memory_format=self._memory_format(torch, old)
        )
        new.narrow(dim, 0, self._filled).copy_(old.narrow(dim, 0, self._filled))
        self._buffer = new
        for chunk, offset in self._kept:
            self._recopy(new, chunk, offset)

    # -- small helpers ------------------------------------------------------------------
    def _dim(self, chunk: torch.Tensor) -> int:
        return self._dim_of(chunk.dim() + 1 if self.stack else chunk.dim())

    def _dim_of(self, ndim: int) -> int:
        return self.dim + ndim if self.dim < 0 else self.dim

    @staticmethod
    def _is_legacy_empty(chunk: torch.Tensor) -> bool:
        return chunk.dim() == 1 and chunk.shape[0] == 0

    def _note_format(self, torch: Any, chunk: torch.Tensor) -> None:
        if self.stack or not self._channels_last:
            self._channels_last = False
            return
        if chunk.dim() == 4:
            fmt = torch.channels_last
        elif chunk.dim() == 5:
            fmt = torch.channels_last_3d
        else:
            self._channels_last = False
            return
        self._channels_last = chunk.is_contiguous(memory_format=fmt) and not chunk.is_contiguous()

    def _channels_last_result(self) -> bool:
        return self._channels_last and self._buffer is not None and not self._buffer.is_contiguous()

    def _memory_format(self, torch: Any, tensor: torch.Tensor) -> Any:
        if self._channels_last and tensor.dim() == 4:
            return torch.channels_last
        if self._channels_last and tensor.dim() == 5:
            return torch.channels_last_3d
        return torch.contiguous_format


def _carrier(torch: Any, sources: set[Any], dtype: Any) -> Any:
    """The narrowest of `dtype`, float32, float64, complex128 that holds every source and
    `dtype` exactly; None where none does (int64 among floating chunks)."""
    for candidate in (dtype, torch.float32, torch.float64, torch.complex128):
        if _exact_cast(torch, dtype, candidate) and all(
            _exact_cast(torch, source, candidate) for source in sources
        ):
            return candidate
    return None


def _passes_through(torch: Any, chunk: Any) -> bool:
    """Chunks torch must concatenate itself: tensor subclasses (their `__torch_function__`
    decides what `torch.cat` returns) and anything appended while `torch.compile` traces
    (the graph holds the chunks anyway; the compiler plans the memory)."""
    if torch.compiler.is_compiling():
        return True
    return isinstance(chunk, torch.Tensor) and type(chunk) not in (
        torch.Tensor,
        torch.nn.Parameter,
    )


_BASELINE_USE_COUNT: list[int] = []


def _storage_shared(torch: Any, chunk: torch.Tensor) -> bool:
    """Whether another tensor than the chunk (and its base) shares its storage: a
    `detach()` of a live tensor, a producer's output buffer, a tensor saved for backward.
    Without torch's use count (a private function), every chunk counts as shared."""
    use_count = getattr(torch._C, "_storage_Use_Count", None)
    if use_count is None:
        return True
    if not _BASELINE_USE_COUNT:  # a fresh tensor's count, as measured here
        fresh = torch.empty(1)
        storage = fresh.untyped_storage()
        _BASELINE_USE_COUNT.append(use_count(storage._cdata))
    storage = chunk.untyped_storage()
    count = use_count(storage._cdata)
    return count > _BASELINE_USE_COUNT[0] + (chunk._base is not None)


def _reach(reference: Any, geometry: Any) -> Any:
    """The watched chunk if something still reaches its memory, else None."""
    target = reference()
    if target is None or geometry is None:
        return target
    shape, stride, offset = geometry
    return target.as_strided(shape, stride, offset)


# Compaction gives up (and copies once) past this many strided copies.
_MAX_COMPACTION_COPIES = 64


def _compact(buffer: torch.Tensor, dim: int, filled: int) -> torch.Tensor | None:
    """Move the first `filled` entries along `dim` of a contiguous buffer into a contiguous
    tensor of that length, in place, and return it (a view of the buffer's storage).

    Outer block `o` moves from offset `o*cap*inner` to `o*filled*inner`, in increasing order,
    so a move never overwrites data not yet moved. Blocks `[a, b)` move in one strided copy
    when their destination ends before their source starts (`b*filled <= a*cap`), so the
    groups grow geometrically; a block whose move overlaps itself goes through a
    temporary of one block.
    """
    shape = list(buffer.shape)
    cap = shape[dim]
    outer = 1
    for size in shape[:dim]:
        outer *= size
    inner = 1
    for size in shape[dim + 1 :]:
        inner *= size
    flat = buffer.view(-1)
    block = filled * inner
    moves = []
    start = 1
    while start < outer:
        end = min(outer, max(start + 1, (start * cap) // filled if filled else outer))
        moves.append((start, end))
        start = end
        if len(moves) > _MAX_COMPACTION_COPIES:
            return None
    for start, end in moves:
        count = end - start
        source = flat.as_strided(
            (count, block), (cap * inner, 1), flat.storage_offset() + start * cap * inner
        )
        target = flat.narrow(0, start * block, count * block).view(count, block)
        if end * block > start * cap * inner:  # the move overlaps its own source
            source = source.clone()
        target.copy_(source)
    shape[dim] = filled
    return flat.narrow(0, 0, outer * block).view(shape)


def _exact_cast(torch: Any, source: torch.dtype, target: torch.dtype) -> bool:
    """Whether every value of `source` converts to `target` without rounding."""
    if source == target or source == torch.bool:
        return True
    if target == torch.bool:
        return False
    if target.is_complex:
        component = torch.float32 if target == torch.complex64 else torch.float64
        if source.is_complex:
            source = torch.float32 if source == torch.complex64 else torch.float64
        return _exact_cast(torch, source, component)
    if source.is_complex:
        return False
    if source.is_floating_point:
        if not target.is_floating_point:
            return False
        s, t = torch.finfo(source), torch.finfo(target)
        return t.eps <= s.eps and t.max >= s.max and t.tiny * t.eps <= s.tiny * s.eps
    info = torch.iinfo(source)
    if target.is_floating_point:
        digits = round(-math.log2(torch.finfo(target).eps)) + 1  # significand bits
        return max(-info.min, info.max).bit_length() <= digits
    target_info = torch.iinfo(target)
    return target_info.min <= info.min and target_info.max >= info.max
