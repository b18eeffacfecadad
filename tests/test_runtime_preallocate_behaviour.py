"""`ChunkWriter` keeps `torch.cat`'s behaviour where a list and a writer could differ.

Each case is code that appends to a list and concatenates, run next to the same code with a
`ChunkWriter`, on CPU torch: a producer that reuses its output buffer, chunks made under
`inference_mode` and a result changed in place, a concatenation under `no_grad`, tensor
subclasses, dtype promotion, a shape mismatch caught around the concatenation, and a
function compiled with `torch.compile(fullgraph=True)`.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from lifetime_lint.runtime import ChunkWriter  # noqa: E402


def _both(make_chunks, dim=0, count=None, stack=False):
    """(torch.cat of a list, the writer's result) over the same producer calls."""
    listed = []
    for chunk in make_chunks():
        listed.append(chunk)
    expected = (torch.stack if stack else torch.cat)(listed, dim)
    writer = ChunkWriter(dim, count=count, stack=stack)
    for chunk in make_chunks():
        writer.append(chunk)
    return expected, writer.result()


def _same(actual, expected) -> None:
    assert type(actual) is type(expected)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    assert actual.requires_grad == expected.requires_grad
    assert actual.is_inference() == expected.is_inference()
    assert torch.equal(actual, expected)


class _ReusingProducer:
    """Returns its one output buffer every time (as a CUDA-graph runner does)."""

    def __init__(self, view: bool) -> None:
        self.out = torch.zeros(2, 3)
        self.view = view

    def __call__(self, step: int) -> torch.Tensor:
        self.out.fill_(step)
        return self.out[:, :] if self.view else self.out


@pytest.mark.parametrize("view", [False, True])
@pytest.mark.parametrize("count", [None, 4])
def test_producer_that_reuses_its_buffer(view, count) -> None:
    def chunks():
        producer = _ReusingProducer(view)
        for step in range(4):
            yield producer(step)
        producer.out.fill_(9)  # written again after the last append

    expected, actual = _both(chunks, count=count)
    assert torch.equal(expected, torch.full((8, 3), 9.0))  # every chunk is the last value
    _same(actual, expected)


def test_detached_alias_of_a_live_buffer_is_read_at_the_end() -> None:
    out = torch.zeros(1, 2)

    def chunks():
        for step in range(3):
            out.fill_(step)
            yield out.detach()  # a new tensor, same storage
        out.fill_(7)

    expected, actual = _both(chunks, count=3)
    _same(actual, expected)


def test_fresh_chunks_are_not_kept() -> None:
    writer = ChunkWriter(0, count=3)
    for step in range(3):
        writer.append(torch.full((2, 2), float(step)))
    assert writer._kept == [] and all(ref() is None for ref, _, _ in writer._watched)
    assert torch.equal(
        writer.result(), torch.arange(3.0).repeat_interleave(2)[:, None].expand(6, 2)
    )


@pytest.mark.parametrize("count", [None, 3])
def test_chunks_made_under_inference_mode_result_changed_in_place(count) -> None:
    def run(use_writer: bool):
        chunks = ChunkWriter(0, count=count) if use_writer else []
        with torch.inference_mode():
            for step in range(3):
                chunks.append(torch.full((2,), float(step)))
        out = chunks.result() if use_writer else torch.cat(chunks)
        out.add_(1)  # outside inference mode: only allowed on a normal tensor
        return out

    _same(run(True), run(False))


def test_result_inside_inference_mode_is_an_inference_tensor() -> None:
    chunks = [torch.randn(2) for _ in range(3)]
    writer = ChunkWriter(0, count=3)
    for chunk in chunks:
        writer.append(chunk)
    with torch.inference_mode():
        expected = torch.cat(chunks)
        actual = writer.result()
    _same(actual, expected)


def test_appends_in_and_out_of_inference_mode() -> None:
    chunks = []
    writer = ChunkWriter(0, count=4)
    for step in range(4):
        if step % 2 == 0:
            with torch.inference_mode():
                chunk = torch.full((2,), float(step))
        else:
            chunk = torch.full((2,), float(step))
        chunks.append(chunk)
        writer.append(chunk)
    _same(writer.result(), torch.cat(chunks))


def test_concatenation_under_no_grad_of_chunks_that_require_grad() -> None:
    leaf = torch.randn(2, 3, requires_grad=True)

    def chunks():
        for step in range(3):
            yield leaf * step  # made with grad enabled

    listed = list(chunks())
    with torch.no_grad():
        expected = torch.cat(listed)
    writer = ChunkWriter(0, count=3)
    for chunk in chunks():
        writer.append(chunk)
    with torch.no_grad():
        actual = writer.result()
    _same(actual, expected)
    assert actual.grad_fn is None and actual.is_leaf


def test_appended_under_no_grad_concatenated_with_grad() -> None:
    leaves = [torch.randn(2, requires_grad=True) for _ in range(3)]
    expected = torch.cat(leaves)
    writer = ChunkWriter(0, count=3)
    with torch.no_grad():
        for leaf in leaves:
            writer.append(leaf)
    actual = writer.result()
    _same(actual, expected)
    weights = torch.randn(6)
    (expected * weights).sum().backward()
    grads = [leaf.grad.clone() for leaf in leaves]
    for leaf in leaves:
        leaf.grad = None
    (actual * weights).sum().backward()
    for leaf, grad in zip(leaves, grads):
        assert torch.equal(leaf.grad, grad)


class _Tagged(torch.Tensor):
    """A subclass whose torch functions return the subclass (as DTensor-like types do)."""


@pytest.mark.parametrize("first_plain", [False, True])
@pytest.mark.parametrize("stack", [False, True])
def test_tensor_subclasses(first_plain, stack) -> None:
    def chunks():
        for step in range(3):
            chunk = torch.full((2, 2), float(step))
            yield chunk if (first_plain and step == 0) else chunk.as_subclass(_Tagged)

    expected, actual = _both(chunks, count=3, stack=stack)
    _same(actual, expected)


@pytest.mark.parametrize(
    "dtypes",
    [
        (torch.int32, torch.float16, torch.float32),
        (torch.int64, torch.bfloat16, torch.float16),
        (torch.float16, torch.bfloat16),
        (torch.uint8, torch.int8, torch.bool, torch.float64),
    ],
)
def test_dtype_promotion_paths_are_exact(dtypes) -> None:
    values = [2049, 65519, 257, 3]

    def chunks():
        for dtype, value in zip(dtypes, values):
            yield torch.tensor([value, 1]).to(dtype)

    expected, actual = _both(chunks, count=len(dtypes))
    _same(actual, expected)


def test_shape_mismatch_caught_around_the_concatenation() -> None:
    def run(use_writer: bool):
        chunks = ChunkWriter(1, count=3) if use_writer else []
        appended = 0
        for width in (2, 3, 2):
            chunks.append(torch.ones(width, 4))  # the second chunk does not fit
            appended += 1
        try:
            out = chunks.result() if use_writer else torch.cat(chunks, 1)
        except RuntimeError as error:
            return appended, type(error), str(error)
        return appended, out

    assert run(True) == run(False)


def test_non_tensor_chunk_raises_at_the_concatenation() -> None:
    writer = ChunkWriter(0, count=2)
    writer.append(torch.ones(2))
    writer.append(5)  # type: ignore[arg-type]
    with pytest.raises(TypeError) as actual:
        writer.result()
    with pytest.raises(TypeError) as expected:
        torch.cat([torch.ones(2), 5])  # type: ignore[list-item]
    assert str(actual.value) == str(expected.value)


def _decode(z: torch.Tensor, use_writer: bool) -> torch.Tensor:
    frames = ChunkWriter(dim=1, count=z.shape[1]) if use_writer else []
    for k in range(z.shape[1]):
        decoded = torch.sin(z[:, k : k + 1]) * 2
        frames.append(decoded)
        del decoded
    return frames.result() if use_writer else torch.cat(frames, dim=1)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_torch_compile_fullgraph_traces_and_matches(backend) -> None:
    torch._dynamo.reset()
    z = torch.randn(3, 5, 4)
    compiled = torch.compile(_decode, fullgraph=True, backend=backend)
    expected = _decode(z, False)
    assert torch.equal(compiled(z, True), expected)
    assert torch.equal(_decode(z, True), expected)


def test_int64_then_two_float_promotions_are_exact() -> None:
    # The case hypothesis found: int64, float16, float16, float32 (values that float64 holds).
    chunks = [torch.tensor([[2049, 7]]), torch.ones(1, 2, dtype=torch.float16)]
    chunks += [torch.full((1, 2), 3.0, dtype=torch.float16), torch.full((1, 2), 0.1)]
    writer = ChunkWriter(0, count=4)
    for chunk in chunks:
        writer.append(chunk)
    _same(writer.result(), torch.cat(chunks))
