"""`ChunkWriter` equals `torch.cat` / `torch.stack` bit for bit, errors included."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from lifetime_lint.runtime import ChunkWriter  # noqa: E402

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int32, torch.uint8]
FAST = settings(max_examples=60, deadline=None)


def _same(actual: torch.Tensor, expected: torch.Tensor) -> None:
    assert actual.dtype == expected.dtype
    assert actual.device == expected.device
    assert actual.shape == expected.shape
    assert actual.is_contiguous() == expected.is_contiguous()
    assert actual.requires_grad == expected.requires_grad
    assert torch.equal(actual, expected)


def _chunk(shape: list[int], dtype: torch.dtype, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=generator).to(dtype)
    return torch.randint(0, 100, shape, generator=generator).to(dtype)


def _write(chunks, dim: int, count: int | None, size: int | None, stack: bool = False):
    writer = ChunkWriter(dim, count=count, size=size, stack=stack)
    for chunk in chunks:
        writer.append(chunk)
    return writer.result()


@st.composite
def _cat_case(draw):
    ndim = draw(st.integers(1, 4))
    shape = [draw(st.integers(1, 4)) for _ in range(ndim)]
    dim = draw(st.integers(-ndim, ndim - 1))
    n = draw(st.integers(1, 6))
    base = draw(st.integers(1, 3))
    lengths = [base] * n
    if draw(st.booleans()):  # a shorter (or longer) last chunk
        lengths[-1] = draw(st.integers(0, 5))
    if draw(st.booleans()):  # uneven chunks (Wan: 1 frame, then 4 each)
        lengths[0] = draw(st.integers(0, 5))
    dtype = draw(st.sampled_from(DTYPES))
    chunks = []
    for index, length in enumerate(lengths):
        chunk_shape = list(shape)
        chunk_shape[dim] = length
        chunks.append(_chunk(chunk_shape, dtype, index))
    hint = draw(st.sampled_from(["none", "count", "wrong-count", "size", "wrong-size"]))
    total = sum(lengths)
    count = {"count": n, "wrong-count": draw(st.integers(0, 8))}.get(hint)
    size = {"size": total, "wrong-size": draw(st.integers(0, 20))}.get(hint)
    return chunks, dim, count, size


@FAST
@given(_cat_case())
def test_cat_equivalence(case) -> None:
    chunks, dim, count, size = case
    _same(_write(chunks, dim, count, size), torch.cat(chunks, dim))


@FAST
@given(
    st.lists(st.integers(1, 4), min_size=0, max_size=3),
    st.integers(1, 6),
    st.sampled_from(DTYPES),
    st.data(),
)
def test_stack_equivalence(shape, n, dtype, data) -> None:
    dim = data.draw(st.integers(-len(shape) - 1, len(shape)))
    count = data.draw(st.sampled_from([None, n, 1, n + 3]))
    chunks = [_chunk(shape, dtype, index) for index in range(n)]
    _same(_write(chunks, dim, count, None, stack=True), torch.stack(chunks, dim))


@FAST
@given(st.lists(st.sampled_from(DTYPES + [torch.bool, torch.int64]), min_size=2, max_size=4))
def test_dtype_promotion(dtypes) -> None:
    chunks = [_chunk([2, 3], dtype, index) for index, dtype in enumerate(dtypes)]
    _same(_write(chunks, 1, len(chunks), None), torch.cat(chunks, 1))


def test_promotion_after_a_rounding_one_is_exact() -> None:
    # int32 -> float16 rounds 2049; torch.cat converts it straight to float32 instead.
    chunks = [torch.tensor([[2049]], dtype=torch.int32), torch.ones(1, 1, dtype=torch.float16)]
    chunks.append(torch.ones(1, 1, dtype=torch.float32))
    _same(_write(chunks, 0, 3, None), torch.cat(chunks, 0))
    _same(_write(chunks, 0, None, None), torch.cat(chunks, 0))


def test_legacy_empty_chunks_are_skipped_like_torch_cat() -> None:
    chunks = [
        torch.empty(0, dtype=torch.float64),
        torch.ones(2, 3),
        torch.empty(0),
        torch.ones(1, 3),
    ]
    _same(_write(chunks, 0, 4, None), torch.cat(chunks, 0))
    _same(_write(chunks[:1], 0, 1, None), torch.cat(chunks[:1], 0))


def test_channels_last_is_preserved() -> None:
    chunks = [torch.randn(1, 3, 4, 5).to(memory_format=torch.channels_last) for _ in range(3)]
    actual = _write(chunks, 0, 3, None)
    expected = torch.cat(chunks, 0)
    assert actual.stride() == expected.stride()
    assert torch.equal(actual, expected)


def test_exact_count_allocates_once_and_holds_no_chunk() -> None:
    writer = ChunkWriter(2, count=4)
    first = torch.randn(1, 2, 3, 4)
    writer.append(first)
    buffer = writer._buffer
    assert buffer is not None and buffer.shape == (1, 2, 12, 4)
    for _ in range(3):
        writer.append(torch.randn(1, 2, 3, 4))
    assert writer._buffer is buffer  # never reallocated
    assert writer._held == []
    assert writer.result() is buffer


def test_uneven_first_chunk_reallocates_once_to_the_exact_size() -> None:
    writer = ChunkWriter(2, count=21)
    writer.append(torch.randn(1, 3, 1, 2, 2))  # Wan: the first chunk decodes one frame
    writer.append(torch.randn(1, 3, 4, 2, 2))
    assert writer._buffer is not None and writer._buffer.shape[2] == 81


def test_autograd_parity() -> None:
    leaves = [torch.randn(2, length, 3, requires_grad=True) for length in (1, 4, 4, 2)]
    weights = torch.randn(2, 11, 3)
    expected = torch.cat(leaves, 1)
    (expected * weights).sum().backward()
    expected_grads = [leaf.grad.clone() for leaf in leaves]
    for leaf in leaves:
        leaf.grad = None
    actual = _write(leaves, 1, 4, None)
    _same(actual, expected.detach().requires_grad_())
    (actual * weights).sum().backward()
    for leaf, grad in zip(leaves, expected_grads):
        assert torch.equal(leaf.grad, grad)


def test_autograd_stack_and_no_grad() -> None:
    leaves = [torch.randn(3, requires_grad=True) for _ in range(3)]
    actual = _write(leaves, 0, 3, None, stack=True)
    actual.pow(2).sum().backward()
    for leaf in leaves:
        assert torch.equal(leaf.grad, 2 * leaf.detach())
    with torch.no_grad():
        assert not _write(leaves, 0, 3, None).requires_grad


def _error(call):
    with pytest.raises(Exception) as info:
        call()
    return type(info.value), str(info.value)


@pytest.mark.parametrize("count", [None, 3])
@pytest.mark.parametrize(
    "chunks, dim, stack",
    [
        ([torch.ones(2, 3), torch.ones(2, 4)], 0, False),
        ([torch.ones(2, 3), torch.ones(2, 3), torch.ones(3, 4)], 1, False),
        ([torch.ones(2, 3), torch.ones(2, 3, 1)], 0, False),
        ([torch.ones(2, 3), torch.ones(2, 3)], 2, False),
        ([torch.tensor(1.0), torch.tensor(2.0)], 0, False),
        ([torch.ones(2, 3), torch.ones(2, 4)], 0, True),
        ([torch.ones(2, 3), torch.ones(2, 3)], 3, True),
        ([torch.ones(2), 5], 0, False),
    ],
)
def test_error_parity(chunks, dim, stack, count) -> None:
    op = torch.stack if stack else torch.cat
    expected = _error(lambda: op(chunks, dim))
    assert _error(lambda: _write(chunks, dim, count, None, stack=stack)) == expected


@pytest.mark.parametrize("stack", [False, True])
def test_empty_writer_raises_like_torch(stack) -> None:
    op = torch.stack if stack else torch.cat
    expected = _error(lambda: op([], 0))
    assert _error(lambda: ChunkWriter(0, count=3, stack=stack).result()) == expected


def test_device_mismatch_raises_torchs_error() -> None:
    chunks = [torch.ones(2, 3), torch.ones(2, 3, device="meta")]
    expected = _error(lambda: torch.cat(chunks, 0))
    assert _error(lambda: _write(chunks, 0, 2, None)) == expected


def test_extend_iadd_len_and_reuse() -> None:
    writer = ChunkWriter(0, count=4)
    chunks = [torch.randn(2, 2) for _ in range(4)]
    writer.extend(chunks[:2])
    writer += chunks[2:]
    assert len(writer) == 4
    _same(writer.result(), torch.cat(chunks))
    assert len(writer) == 0


@FAST
@given(
    st.integers(1, 5), st.integers(1, 4), st.integers(1, 6), st.integers(0, 5), st.integers(1, 3)
)
def test_short_last_chunk_on_an_inner_dim_is_compacted_in_place(
    outer, length, n, last, inner
) -> None:
    chunks = [torch.randn(outer, length, inner) for _ in range(n - 1)]
    chunks.append(torch.randn(outer, last, inner))
    writer = ChunkWriter(1, count=n)
    for chunk in chunks:
        writer.append(chunk)
    storage = writer._buffer.untyped_storage().data_ptr() if writer._buffer is not None else None
    actual = writer.result()
    _same(actual, torch.cat(chunks, 1))
    if storage is not None and outer * (n - 1) * length < 64 * outer:
        assert actual.untyped_storage().data_ptr() == storage  # no second buffer


@pytest.mark.parametrize("count", [None, 2])
def test_legacy_empty_chunks_ignore_dim(count) -> None:
    x = torch.randn(2, 3, 4)
    for chunks in ([torch.empty(0), x], [x, torch.empty(0, dtype=torch.float64)], [torch.empty(0)]):
        _same(_write(chunks, 2, count, None), torch.cat(chunks, 2))


def test_wrong_count_grows_geometrically() -> None:
    writer = ChunkWriter(0, count=2)
    chunks = [torch.randn(1, 3) for _ in range(40)]
    sizes = set()
    for chunk in chunks:
        writer.append(chunk)
        sizes.add(writer._buffer.shape[0])
    assert len(sizes) < 12  # not one reallocation per chunk
    _same(writer.result(), torch.cat(chunks))
