"""Measure what lifetime-lint's findings cost while a program runs (`lifetime-lint profile`).

Static analysis proves a name is dead; only a run says whether it holds 4 MiB or 4 GiB at the
moment that matters. This module traces the functions that have findings, line by line, and
records for each run of such a function:

- its own peak of allocated memory (including everything the calls on a line allocate), the
  line where it happened, and how many times the function ran;
- for each finding, the distinct storage bytes its names held at the start of the peak line,
  counting only storages that nothing outside those names kept alive (another tensor object,
  a view, a list, autograd's saved tensors): the bytes that releasing them would have freed;
- per outermost traced call, what every traced frame's findings held at that call's peak
  (`Tracer.roots`): what a finding's fix lowers the program's peak by.

Memory is read from the accelerator's allocator where there is one (CUDA/ROCm, XPU, ...:
`memory_allocated` with the peak reset per line) and otherwise from a tracker of live tensor
storages (a `TorchDispatchMode` that sees every tensor an operator returns, and a weak
finalizer on its storage), so the same command and tests run on CPU. Tensors that existed
before tracing started are invisible to the CPU tracker; storages resized in place keep the
size they were created with.

torch is imported when a tracer is built, never at import of this module.
"""

from __future__ import annotations

import sys
import threading
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from types import CodeType, FrameType
from typing import Any, Callable

# -- memory meters ----------------------------------------------------------------------------


class AcceleratorMeter:
    """Allocated bytes and a resettable peak from the accelerator's caching allocator."""

    def __init__(self, torch: Any, device_type: str) -> None:
        self.device_type = device_type
        self.module = torch.get_device_module(device_type)
        # `torch.cuda.memory_allocated()` builds, flattens and sorts the allocator's whole
        # statistics dict on every call; the tracer reads it several times per traced line,
        # so on CUDA it reads the nested dict the allocator returns, one key deep.
        self._stats = self._reset = None
        if device_type == "cuda":
            self._stats = getattr(torch._C, "_cuda_memoryStats", None)
            self._reset = getattr(torch._C, "_cuda_resetPeakMemoryStats", None)
            self._index = self.module.current_device()

    def current(self) -> int:
        if self._stats is not None:
            return int(self._stats(self._index)["allocated_bytes"]["all"]["current"])
        return int(self.module.memory_allocated())

    def peak(self) -> int:
        if self._stats is not None:
            return int(self._stats(self._index)["allocated_bytes"]["all"]["peak"])
        return int(self.module.max_memory_allocated())

    def reset_peak(self) -> None:
        if self._reset is not None:
            self._reset(self._index)
        else:
            self.module.reset_peak_memory_stats()

    def close(self) -> None:
        pass


class StorageMeter:
    """Live bytes of the tensor storages created while it is active (CPU accounting).

    Every operator's outputs pass through a dispatch mode; a storage seen for the first time is
    counted and a finalizer uncounts it when the storage is freed. Storage objects are
    preserved by PyTorch, so a finalizer on one fires when the storage itself dies.
    """

    def __init__(self, torch: Any) -> None:
        from torch.utils._python_dispatch import TorchDispatchMode
        from torch.utils._pytree import tree_leaves

        self._torch = torch
        self._lock = threading.Lock()
        self._live: dict[int, int] = {}
        self._current = 0
        self._peak = 0
        meter = self

        class _Track(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                for leaf in tree_leaves(out):
                    if isinstance(leaf, torch.Tensor):
                        meter._see(leaf)
                return out

        self._mode = _Track()
        self._mode.__enter__()

    def _see(self, tensor: Any) -> None:
        try:
            storage = tensor.untyped_storage()
        except (RuntimeError, NotImplementedError):  # meta, sparse, functional wrappers
            return
        key = id(storage)
        with self._lock:
            if key in self._live:
                return
            size = int(storage.nbytes())
            self._live[key] = size
            self._current += size
            self._peak = max(self._peak, self._current)
        weakref.finalize(storage, self._forget, key)

    def _forget(self, key: int) -> None:
        with self._lock:
            self._current -= self._live.pop(key, 0)

    def current(self) -> int:
        return self._current

    def peak(self) -> int:
        return self._peak

    def reset_peak(self) -> None:
        with self._lock:
            self._peak = self._current

    def close(self) -> None:
        self._mode.__exit__(None, None, None)


def make_meter(torch: Any, device: str = "auto") -> AcceleratorMeter | StorageMeter:
    """The accelerator's allocator when there is one (or `device` names it), else CPU."""
    if device == "cpu":
        return StorageMeter(torch)
    if device != "auto":
        return AcceleratorMeter(torch, device)
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is not None and accelerator.is_available():
        return AcceleratorMeter(torch, accelerator.current_accelerator().type)
    if torch.cuda.is_available():
        return AcceleratorMeter(torch, "cuda")
    return StorageMeter(torch)


# -- what is traced ---------------------------------------------------------------------------

MISSED_PREFIX = "missed:"  # snapshot keys of dead names that no finding covers


@dataclass
class Watch:
    """One finding to measure: the names it holds, in one function."""

    key: str  # the finding's identity (file:row:col:code), for the report
    names: tuple[str, ...]


@dataclass
class FunctionWatch:
    """A function (by file and first line of its code object) and the findings in it."""

    filename: str
    first_line: int
    qualname: str
    watches: list[Watch] = field(default_factory=list)
    # Row -> local names that static liveness says are dead there and no finding covers:
    # measured too, so a run shows what the rules missed.
    dead_by_row: dict[int, tuple[str, ...]] = field(default_factory=dict)


@dataclass
class Sample:
    """What one run of a function measured."""

    peak_bytes: int = 0  # the function's own peak of allocated memory
    entry_bytes: int = 0  # allocated when it was entered
    peak_row: int = 0
    held: dict[str, int] = field(default_factory=dict)  # watch key -> bytes at the peak
    exact: bool = True  # `held` had its reference check (False: an upper bound, see Tracer)


@dataclass
class RootPeak:
    """What was held at the peak of one outermost traced call (the program's peak as the
    finding's own function sees it: the call that contains every traced call under it)."""

    peak_bytes: int = 0
    row: int = 0  # the outermost function's line at that peak
    qualname: str = ""
    held: dict[str, int] = field(default_factory=dict)  # watch key -> bytes, every frame
    rows: dict[int, int] = field(default_factory=dict)  # id of a FunctionRecord -> its line


@dataclass
class FunctionRecord:
    """Everything measured for one function over the whole run."""

    watch: FunctionWatch
    calls: int = 0
    best: Sample | None = None  # the run with the largest peak
    largest_held: dict[str, int] = field(default_factory=dict)  # per watch, over all runs
    timeline: list[tuple[int, int]] = field(default_factory=list)  # (row, bytes), best run


class _Active:
    """A traced frame on the stack: the line it is on and what that line has seen so far."""

    __slots__ = (
        "bound",
        "frame",
        "line_peak",
        "pending",
        "ran",
        "record",
        "root",
        "row",
        "sample",
        "snapshot",
        "timeline",
    )

    def __init__(self, record: FunctionRecord, entry: int, frame: FrameType | None) -> None:
        self.record = record
        self.frame = frame
        self.pending: list[Pending] = []  # reference checks the snapshot still owes
        self.root: RootPeak | None = None  # only on the outermost traced frame
        # outermost frame: the functions run under it (by id: code filenames may be relative)
        self.ran: dict[int, FunctionRecord] = {}
        self.sample = Sample(peak_bytes=entry, entry_bytes=entry)
        self.row = 0
        self.line_peak = entry
        self.snapshot: dict[str, int] = {}
        self.timeline: list[tuple[int, int]] = []
        self.bound: dict[str, int] = {}  # watched name -> id of its value at the last line


class Tracer:
    """Line tracing of the watched functions, with per-line peaks that nest correctly.

    The allocator keeps one peak register. Before it is reset at the start of a line, its value
    is folded into every traced frame on the stack, so an outer frame's line still sees the
    peak that an inner traced call reached.

    What a finding is worth is what its names hold at the peak of the outermost traced call
    that ran its function (`roots`): releasing them lowers that peak, while a function's own
    peak inside it may be anywhere else. Both are recorded.

    Cost: the reference check that proves nothing else holds a tensor can walk the whole heap
    (`gc.get_referrers`), so each line takes only the cheap part (reference counts) and
    remembers what still needs the walk; the walk runs, once per line and batched, only where
    a line reaches a candidate peak (at or above the function's largest peak so far, or the
    outermost call's). Samples of calls below the function's largest peak keep the cheap
    figure, an upper bound, and do not count towards `largest_held`.
    """

    def __init__(
        self,
        torch: Any,
        meter: AcceleratorMeter | StorageMeter,
        functions: Iterable[FunctionWatch] = (),
        resolve: Callable[[CodeType], FunctionWatch | None] | None = None,
    ) -> None:
        """`functions` are watched from the start; `resolve` is asked once per other code
        object that runs (the profile command lints a file the first time it runs)."""
        self.torch = torch
        self._resolve = resolve
        self.meter = meter
        self.records: dict[tuple[str, int], FunctionRecord] = {}
        for function in functions:
            self.records[(function.filename, function.first_line)] = FunctionRecord(function)
        self._by_code: dict[CodeType, FunctionRecord | None] = {}
        self.counter = ReferenceCounter(torch)
        self._stack: list[_Active] = []
        self._previous: Callable | None = None
        # watch key -> (bytes, the outermost call's peak, its qualname, the function's line)
        self.roots: dict[str, tuple[int, int, str, int]] = {}

    # -- installing -----------------------------------------------------------------------
    def start(self) -> None:
        self._previous = sys.gettrace()
        threading.settrace(self._global)
        sys.settrace(self._global)

    def stop(self) -> None:
        sys.settrace(self._previous)
        threading.settrace(self._previous)
        while self._stack:  # frames left by an exception that escaped the program
            self._finish(self._stack[-1])
        self.meter.close()

    # -- events ---------------------------------------------------------------------------
    def _record_for(self, code: CodeType) -> FunctionRecord | None:
        try:
            return self._by_code[code]
        except KeyError:
            key = (code.co_filename, code.co_firstlineno)
            record = self.records.get(key)
            if record is None and self._resolve is not None:
                self._by_code[code] = None  # no re-entry while resolving (it may run code)
                watch = self._resolve(code)
                if watch is not None:
                    record = self.records[key] = FunctionRecord(watch)
            self._by_code[code] = record
            return record

    def _global(self, frame: FrameType, event: str, arg: Any) -> Callable | None:
        if event != "call":
            return None
        record = self._record_for(frame.f_code)
        if record is None:
            return None
        self._fold()
        active = _Active(record, self.meter.current(), frame)
        self.meter.reset_peak()
        if not self._stack:
            active.root = RootPeak(peak_bytes=active.line_peak, qualname=record.watch.qualname)
            root = active
        else:
            root = self._stack[0]
        root.ran[id(record)] = record
        self._stack.append(active)
        return self._local

    def _local(self, frame: FrameType, event: str, arg: Any) -> Callable | None:
        if not self._stack:
            return None
        active = self._stack[-1]
        if event == "line":
            self._end_line(active)
            active.row = frame.f_lineno
            active.snapshot, active.pending = self._held(frame, active)
            active.line_peak = self.meter.current()
            self.meter.reset_peak()
        elif event == "return":
            self._finish(active)
        return self._local

    def _fold(self) -> None:
        peak = self.meter.peak()
        for active in self._stack:
            if peak > active.line_peak:
                active.line_peak = peak

    def _end_line(self, active: _Active) -> None:
        self._fold()
        if active.row:
            active.timeline.append((active.row, active.line_peak))
            sample = active.sample
            best = active.record.best
            candidate = best is None or active.line_peak >= best.peak_bytes
            if candidate and active.line_peak >= sample.peak_bytes:
                self._settle(active)
            root = self._stack[0] if self._stack else None
            if root is not None and root.root is not None:
                if active.line_peak > root.root.peak_bytes:
                    self._new_root_peak(root.root, active.line_peak)
                elif active.line_peak == root.root.peak_bytes:
                    self._new_root_peak(root.root, active.line_peak, keep=True)
            if active.line_peak > sample.peak_bytes or not sample.peak_row:
                sample.peak_bytes = active.line_peak
                sample.peak_row = active.row
                sample.held = dict(active.snapshot)
                sample.exact = not active.pending
            elif active.line_peak == sample.peak_bytes and not active.pending:
                # Later lines at the same level are at the peak too. The line that allocated
                # a buffer reaches the level first, but the buffer is bound only from the
                # next line on (`out = [torch.empty_like(x) ...]`, then ranks that never read
                # it return): what a finding holds at the peak is its most over those lines.
                for key, size in active.snapshot.items():
                    if size > sample.held.get(key, 0):
                        sample.held[key] = size

    def _settle(self, active: _Active) -> None:
        """Run the reference checks the frame's snapshot deferred (see the class docstring)."""
        if not active.pending or active.frame is None:
            active.pending = []
            return
        for key, size in self.counter.settle(active.pending, active.frame).items():
            active.snapshot[key] = max(0, active.snapshot.get(key, 0) - size)
        active.pending = []

    def _new_root_peak(self, root: RootPeak, level: int, keep: bool = False) -> None:
        """The outermost call reached a new peak: what every traced frame holds now. `keep`:
        a later line at the same level, where a buffer allocated by the previous line is bound
        now (the same tie rule as a function's own peak): the most of both is kept."""
        root.peak_bytes = level
        if not keep:
            root.held = {}
            root.rows = {}
        for frame_state in self._stack:
            self._settle(frame_state)
            root.rows.setdefault(id(frame_state.record), frame_state.row)
            for key, size in frame_state.snapshot.items():
                root.held[key] = max(root.held.get(key, 0), size)
        if not keep:
            root.row = self._stack[0].row

    def _finish(self, active: _Active) -> None:
        self._end_line(active)
        self._stack.pop()
        active.frame = None
        record = active.record
        record.calls += 1
        if record.best is None or active.sample.peak_bytes > record.best.peak_bytes:
            record.best = active.sample
            record.timeline = active.timeline
        if active.sample.exact:
            for key, size in active.sample.held.items():
                record.largest_held[key] = max(record.largest_held.get(key, 0), size)
        root = active.root
        if root is not None:
            for function, ran in active.ran.items():
                for watch in ran.watch.watches:
                    known = self.roots.get(watch.key)
                    if known is None or root.peak_bytes > known[1]:
                        self.roots[watch.key] = (
                            root.held.get(watch.key, 0),
                            root.peak_bytes,
                            root.qualname,
                            root.rows.get(function, 0),
                        )
        # The next line of the caller must still see this call's peak.
        for outer in self._stack:
            outer.line_peak = max(outer.line_peak, active.sample.peak_bytes)

    # -- bytes a finding holds -----------------------------------------------------------
    def _held(self, frame: FrameType, active: _Active) -> tuple[dict[str, int], list[Pending]]:
        watches = active.record.watch.watches
        dead = active.record.watch.dead_by_row.get(frame.f_lineno, ())
        if dead:
            watches = [*watches, *(Watch(MISSED_PREFIX + name, (name,)) for name in dead)]
        if not watches:
            return {}, []
        local_values = frame.f_locals
        # While a trace function runs, CPython holds one more reference to a value stored by
        # the line that just ended: a binding that changed since the last line is "fresh".
        bound = {
            name: id(local_values[name])
            for watch in watches
            for name in watch.names
            if name in local_values
        }
        fresh = {value for name, value in bound.items() if active.bound.get(name) != value}
        active.bound = bound
        names = {id(local_values[name]): name for name in bound}
        pending: list[Pending] = []
        held = self.counter.held_bytes(
            {
                watch.key: [local_values[name] for name in watch.names if name in local_values]
                for watch in watches
            },
            local_values,
            fresh,
            defer=pending,
        )
        for item in pending:
            item.name = names.get(item.value_id, "")
        return held, pending


class Pending:
    """A reference check deferred to the end of the line: the value (weakly, or by the name
    bound to it), the finding whose bytes it added, and how many bytes."""

    __slots__ = ("containers", "key", "name", "ref", "size", "value_id")

    def __init__(self, value: Any, key: str, containers: frozenset[int] = frozenset()) -> None:
        self.value_id = id(value)
        self.key = key
        self.containers = containers  # ids of the finding's own containers: not "elsewhere"
        self.size = 0
        self.name = ""
        try:
            self.ref: Any = weakref.ref(value)
        except TypeError:  # lists, tuples, dicts: found again through the binding
            self.ref = None

    def value(self, frame_locals: dict[str, Any]) -> Any:
        if self.ref is not None:
            return self.ref()
        value = frame_locals.get(self.name)
        return value if id(value) == self.value_id else None


class ReferenceCounter:
    """Which tensors nothing but a frame's bindings keeps alive, and their storage bytes.

    How many references a binding adds depends on the Python version (fast locals, the
    `f_locals` snapshot dict or proxy), so the counts are calibrated once, on a probe frame,
    with the same calls that measure real frames.
    """

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self._use_count = getattr(torch._C, "_storage_Use_Count", None)
        self.per_binding, self.in_list = self._calibrate()
        self.per_binding_extra = self._calibrate_second_binding() - self.per_binding

    def _calibrate(self) -> tuple[int, int]:
        """References seen for a tensor bound to one local, and for one held only by a list,
        through exactly the calls that measure a traced frame."""
        torch = self.torch
        probe: dict[str, int] = {}

        def one_binding() -> None:
            tensor = torch.zeros(1)
            listed = [torch.zeros(1)]
            local_values = sys._getframe().f_locals
            (probe["binding"],) = self._ref_counts(
                [local_values[name] for name in ("tensor",) if name in local_values]
            )
            (probe["list_item"],) = self._ref_counts(list(local_values["listed"]))
            del tensor, listed, local_values

        one_binding()
        return probe["binding"], probe["list_item"]

    def _calibrate_second_binding(self) -> int:
        torch = self.torch
        probe: dict[str, int] = {}

        def two_bindings() -> None:
            tensor = torch.zeros(1)
            alias = tensor
            local_values = sys._getframe().f_locals
            (probe["binding"],) = self._ref_counts(
                [local_values[name] for name in ("tensor",) if name in local_values]
            )
            del tensor, alias, local_values

        two_bindings()
        return probe["binding"]

    @staticmethod
    def _ref_counts(values: list[Any]) -> list[int]:
        return [sys.getrefcount(values[index]) for index in range(len(values))]

    def held_bytes(
        self,
        values_by_key: dict[str, list[Any]],
        frame_locals: dict[str, Any],
        fresh: set[int] = frozenset(),  # type: ignore[assignment]
        defer: list[Pending] | None = None,
    ) -> dict[str, int]:
        """Per finding, the storage bytes that releasing its bindings would free.

        A tensor bound to k names counts when it has no references beyond those bindings; a
        tensor in a list, tuple or dict bound to a name (or in containers nested in it) counts
        when each container is held only by its binding or its parent and the tensor only by
        its container. A storage counts once per finding, when every tensor that shares it
        (views and their base included) is among that finding's values: what its fix alone
        frees. Two findings about the same tensor (`del time` and the writer of the list
        `time`) each count it, since either fix frees it; a view held by another finding keeps
        the storage, as it would after this finding's fix alone.

        With `defer`, a value whose reference count is above the calibrated one is counted
        and appended there (a `Pending` with the bytes it added) instead of walking the heap;
        `settle` does the walk later, for many values at once.
        """
        bindings: dict[int, int] = {}
        for bound in frame_locals.values():
            bindings[id(bound)] = bindings.get(id(bound), 0) + 1
        # A name two findings share sits in both findings' lists: those references are ours.
        listed: dict[int, int] = {}
        for values in values_by_key.values():
            for value in {id(v) for v in values}:
                listed[value] = listed.get(value, 0) + 1
        all_lists = tuple(values_by_key.values())
        held = dict.fromkeys(values_by_key, 0)
        for key, values in values_by_key.items():
            # One call per finding: its temporaries (the loop's last tensor) must not add a
            # reference to the next finding's values.
            held[key] = self._held_by(
                key, values, frame_locals, bindings, listed, all_lists, fresh, defer
            )
        if defer:
            defer[:] = [item for item in defer if item.size]
        return held

    def _held_by(
        self,
        key: str,
        values: list[Any],
        frame_locals: dict[str, Any],
        bindings: dict[int, int],
        listed: dict[int, int],
        all_lists: tuple[list[Any], ...],
        fresh: set[int],
        defer: list[Pending] | None,
    ) -> int:
        """`held_bytes` for one finding."""
        torch = self.torch
        total = 0
        candidates: list[Any] = []
        origins: list[Pending | None] = []
        occurrences: dict[int, int] = {}
        for value in values:
            occurrences[id(value)] = occurrences.get(id(value), 0) + 1
        measured_names = set(occurrences)  # bound to the finding's names: measured as such
        measured_ids: set[int] = set()
        # The finding's own containers (its list `time`, and lists in it) hold some of its
        # other values too (the chunk also bound to `decoded`): those references are the
        # finding's, released by its fix with the rest.
        slots, containers = self._container_slots(values)
        copy = list(values)
        counts = self._ref_counts(copy)
        for index in range(len(values)):  # no zip: its tuples would reference the values
            value, references = values[index], counts[index]
            if id(value) in measured_ids:
                continue
            measured_ids.add(id(value))
            # Each further binding of the same object adds what one binding adds beyond
            # the temporaries of this measurement (calibrated: see _calibrate); each
            # further occurrence in `values` adds two (that list and its copy).
            extra = (bindings.get(id(value), 1) - 1) * self.per_binding_extra
            extra += 2 * (occurrences[id(value)] - 1)
            extra += 1 if id(value) in fresh else 0
            extra += listed[id(value)] - 1  # the other findings' lists that hold it
            extra += slots.get(id(value), 0)  # this finding's containers that hold it
            origin = None
            if references - 1 > self.per_binding + extra:  # -1: the copy
                if defer is not None:
                    origin = Pending(value, key, containers)
                    defer.append(origin)
                elif self._referenced_elsewhere(
                    value, (frame_locals, values, copy, *all_lists), containers
                ):
                    continue  # held elsewhere too: releasing the name frees nothing
            found: list[Any] = []
            if isinstance(value, torch.Tensor):
                found = [value]
            elif isinstance(value, (list, tuple)):
                found = self._only_in_container(value, named=measured_names)
            elif isinstance(value, dict):
                found = self._only_in_container(list(value.values()), value, named=measured_names)
            candidates.extend(found)
            origins.extend([origin] * len(found))
        # storage id -> [storage, holders (TensorImpls this finding holds), first origin]
        storages: dict[int, list[Any]] = {}
        seen_tensors: set[int] = set()
        for tensor, origin in zip(candidates, origins):
            if id(tensor) in seen_tensors:
                continue
            seen_tensors.add(id(tensor))
            try:
                storage = tensor.untyped_storage()
            except (RuntimeError, NotImplementedError):
                continue
            entry = storages.get(id(storage))
            if entry is None:
                storages[id(storage)] = [storage, 1, origin]
            else:
                entry[1] += 1
                entry[2] = entry[2] or origin
        for storage, holders, origin in storages.values():
            # One reference per TensorImpl plus PyTorch's preserved storage object: a
            # view or alias outside this finding's names keeps the storage alive.
            if self._use_count is not None and self._use_count(storage._cdata) > holders + 1:
                continue
            total += int(storage.nbytes())
            if origin is not None:
                origin.size += int(storage.nbytes())
        return total

    def settle(self, pending: Sequence[Pending], frame: FrameType) -> dict[str, int]:
        """The deferred checks, with one heap walk: per finding, the bytes to take back
        because a Python object other than the frame holds the value. A value that died
        during the line was held by nothing else that outlived it: its bytes stay."""
        import gc

        frame_locals = frame.f_locals
        values = {}
        for item in pending:
            value = item.value(frame_locals)
            if value is not None:
                values[item.value_id] = value
        if not values:
            return {}
        elsewhere: set[tuple[int, int]] = set()  # (value, the object that holds it)
        ours = {id(frame_locals), id(values), id(pending)}
        for referrer in gc.get_referrers(*values.values()):
            if id(referrer) in ours or isinstance(referrer, (FrameType, Pending)):
                continue
            owned_frame = getattr(referrer, "gi_frame", None) or getattr(referrer, "cr_frame", None)
            owned_frame = owned_frame or getattr(referrer, "ag_frame", None)
            if owned_frame is not None and owned_frame.f_locals is frame_locals:
                continue
            held_here = {id(item) for item in gc.get_referents(referrer)} & values.keys()
            elsewhere |= {(value, id(referrer)) for value in held_here}
        taken: dict[str, int] = {}
        for item in pending:
            if any(
                value == item.value_id and holder not in item.containers
                for value, holder in elsewhere
            ):
                taken[item.key] = taken.get(item.key, 0) + item.size
        return taken

    @staticmethod
    def _referenced_elsewhere(
        value: Any, ours: Sequence[Any], containers: frozenset[int] = frozenset()
    ) -> bool:
        """Whether a Python object other than this measurement's own holds `value`.

        Reached only when the reference count is above the calibrated one: PyTorch adds
        references of its own that no Python container sees (a view and its base keep each
        other's Python objects), so the count alone would call those tensors shared.
        """
        import gc

        allowed = {id(item) for item in ours} | containers
        frame_locals = ours[0]
        for referrer in gc.get_referrers(value):
            if id(referrer) in allowed or isinstance(referrer, FrameType):
                continue
            # A generator's or coroutine's locals live in the generator object itself.
            owned_frame = getattr(referrer, "gi_frame", None) or getattr(referrer, "cr_frame", None)
            owned_frame = owned_frame or getattr(referrer, "ag_frame", None)
            if owned_frame is not None and owned_frame.f_locals is frame_locals:
                continue
            return True
        return False

    def _container_slots(self, values: Sequence[Any]) -> tuple[dict[int, int], frozenset[int]]:
        """How many slots of the containers among `values` (and of containers nested in them)
        hold each object, and the ids of those containers."""
        slots: dict[int, int] = {}
        containers: set[int] = set()
        todo = [(value, 0) for value in values if isinstance(value, (list, tuple, dict))]
        while todo:
            container, depth = todo.pop()
            if id(container) in containers:
                continue
            containers.add(id(container))
            items = container.values() if isinstance(container, dict) else container
            for item in items:
                slots[id(item)] = slots.get(id(item), 0) + 1
                if depth < _NESTED_CONTAINERS and isinstance(item, (list, tuple, dict)):
                    todo.append((item, depth + 1))
        return slots, frozenset(containers)

    def _only_in_container(
        self,
        items: Sequence[Any],
        owner: Any = None,
        depth: int = 0,
        seen: set[int] | None = None,
        named: set[int] = frozenset(),  # type: ignore[assignment]
    ) -> list[Any]:
        """The tensors among a container's items that only the container references, and those
        of nested containers that only it references (a list of rows of tiles), to a few levels.
        Items in `named` (values the finding binds to names) are measured as such instead."""
        torch = self.torch
        items = list(items)
        extra = 1 if owner is not None else 0  # list(dict.values()) was copied once more
        seen = set() if seen is None else seen
        found: list[Any] = []
        counts = self._ref_counts(list(items))
        for index in range(len(items)):  # no zip: its tuples would reference the items
            item, references = items[index], counts[index]
            if id(item) in named or references - 1 - extra > self.in_list:
                continue  # something else holds it too: releasing the container frees nothing
            if isinstance(item, torch.Tensor):
                found.append(item)
            elif depth < _NESTED_CONTAINERS and id(item) not in seen:
                seen.add(id(item))
                if isinstance(item, (list, tuple)):
                    found.extend(self._only_in_container(item, None, depth + 1, seen, named))
                elif isinstance(item, dict):
                    values = list(item.values())
                    found.extend(self._only_in_container(values, item, depth + 1, seen, named))
        return found


# How deep `held_bytes` looks into containers held only by their container.
_NESTED_CONTAINERS = 4
