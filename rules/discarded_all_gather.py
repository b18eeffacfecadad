"""LL003 discarded-all-gather: an all_gather whose result only one rank reads."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import libcst as cst

from lifetime_lint.analysis import facts as F
from lifetime_lint.analysis import significance as S
from lifetime_lint.analysis.uses import NameUses, load_nodes, uses_for
from lifetime_lint.devices import in_multi_backend_dispatch
from lifetime_lint.diagnostics import Applicability, Edit, Fix
from lifetime_lint.fixes import Target, import_bindings_under, reference_to, target_problem
from lifetime_lint.imports import dotted_name
from lifetime_lint.lazy_regex import compile_lazily
from lifetime_lint.rule import Option, Rule
from lifetime_lint.traversal import visit, walk


def _validate_wrappers(value: list[str]) -> str | None:
    for entry in value:
        if not all(part.isidentifier() for part in entry.split(".")):
            return f"not a function or method name: {entry!r}"
    return None


class DiscardedAllGather(Rule):
    """
    ## What it does
    Flags an `all_gather` whose result is read on one rank only (under `if rank == 0:`,
    `if int(rank) == 0:`, `if is_root:`, in `return xs if rank == 0 else None`, after an
    early return of the other ranks, also a compound one such as `if dst is not None and
    rank != dst: return`, reported as read on `dst` when it is given; also through `video =
    torch.cat(gathered, dim=2)` computed on every rank when only the root reads `video`),
    or never read at all. The rank compared may be a local or attribute bound to one
    (`me = dist.get_rank()`: the binding that reaches the test, from the facts layer's
    reaching definitions) or a helper of the same module or class that returns one
    (`if self._rank() == 0:`, `idx, size = _coordinates(group)`). A local flag is followed
    to the test it holds (`is_collector = rank == master_rank or not only_rank_0; ... if
    is_collector:`); a flag in such a test that is a parameter defaulting to the value that
    singles out the root (`only_rank_0: bool = True`) makes the finding "when
    `only_rank_0` is True, its default", while a flag without such a default (`if rank ==
    0 or debug:`) is taken to let every rank read. A function of the same module that fills
    a list with a collective and returns it (mmengine's `all_gather_object(data, group) ->
    gather_list`) is followed like the collective it wraps, as is a method of the enclosing
    class called as `self.`/`cls.` that returns the list or its items flattened
    (`for part in gathered: flat.extend(part)`), and so are other packages'
    helpers: mmengine's `all_gather_object` and `all_gather`, accelerate's `gather_object`,
    and any function named for an all-gather (`evenly_divisible_all_gather`,
    `concat_all_gather`; not `string_list_all_gather`), also through `typing.cast`
    (`x = cast(torch.Tensor, idist.all_gather(x))`). Reads that learn only the result's
    length, type or presence (`len(x)`, `isinstance(x, T)`, `x is None`) may run on every
    rank; a merge loop on every rank (`for part in gathered: merged[k].extend(part[k])`,
    adding to a collection made empty just before it) is followed to the merged name; an
    early exit may be nested (`if main_rank is not None: if rank != main_rank: return`), and
    the root may be a rank named for its job (`rank == self.save_rank`).

    Each finding has a significance from what each rank sends (the facts layer's origin of
    the sent tensor, refined by its name): `high` for decoded frames or tiles, `medium` for
    activations and tensors of unknown origin, `low` for latent-sized predictions,
    embeddings and scalars (world_size copies of a few MiB), and for `all_gather_object`
    of anything the facts layer does not know to be a tensor (pickled request ids, sets,
    status records: metadata), except a collection whose name says it holds what a loop
    collected (`result_part`, `self.results`, `predictions`, `preds`, `outputs`,
    `local_states`, `completions`, `generations`, `translations`, `artifacts`, also as a
    copy `dict(...)` or a comprehension over them; not one step's `result` nor an
    `rng_state`), which is `medium`, a state dict (`model.state_dict()`,
    `optimizer.state_dict()`, or a local bound to one: every weight or optimizer state the
    rank holds), which is `high`, and a list, tuple or dict that carries a tensor (known
    to the facts layer, or returned by a call named for one: `[pack_states_to_tensor(p),
    offset, size]`), which is `medium`; CUDA IPC handles (`{gpu: reduce_tensor(w)}`)
    are metadata; a `full_tensor()` in a loop over a state dict or a module's parameters
    (`for name, param in sd.items(): param = param.full_tensor()`) is `low`, since each
    of the other ranks holds one weight until the loop rebinds it (checkpoint
    consolidation: one parameter's size, off the training peak), and so are receive
    buffers of one element per rank (`list(t.new_zeros(n).chunk(n))`: a singleton
    optimizer state) and a gather in a loop over the tokens to generate (`for step in
    range(max_new_tokens):`: one token's state per sample), and an `all_gather_object`
    of one batch's decoded text (`tokenizer.batch_decode(...)`: strings, a few KB; text
    collected over a loop keeps the collected-results rating). A uint8 tensor into
    which the function pickles one object (`pickle.dumps(result_part)` padded to the
    longest: an `all_gather_object` written by hand) is rated as that object would be:
    `medium` for collected results, else `low`. The default run reports
    `medium` and `high`; `min-significance = "low"` under `[tool.lifetime-lint]` shows the
    rest. Calls resolving to
    `torch.distributed.all_gather`, `all_gather_into_tensor`, `all_gather_object`, their
    `torch.distributed._functional_collectives` forms, a DTensor's `full_tensor()` (every
    shard all-gathered on every rank, read under `if rank == 0:`; the reads are those the
    binding reaches), and configured wrappers (by default any `.all_gather(...)` method, as on a
    group coordinator).

    Not flagged: results that every rank reads (a CFG-parallel combine, a context-parallel
    unshard, sequence-parallel attention, sizes gathered to build groups; a guard on the
    rank of another parallel dimension than the gathered group's, by the call that made
    it or by its name: `if self.pp_rank == 0:` around a gather over the TP group has one
    reader per pipeline stage, and every rank of the group reads), buffers that come
    from outside the function (a parameter, an attribute) or that are slices of another
    tensor (`[flat[i * n : (i + 1) * n] for i in ...]`: the data is read through `flat`)
    or one existing buffer repeated (`[buffer for _ in range(world_size)]`: nothing is
    allocated per rank; a profiling run's dummy gather that reserves buffers),
    asynchronous calls (`async_op=True`), a wrapper called with a step name first
    (`dist_wrapper.all_gather("read", read_data)` runs a step on every rank and gathers its
    outcome), and an `all_gather` in a branch that chooses by backend (the guarded
    path for backends that lack a fast `gather`, such as Ascend's HCCL).

    ## Why is this bad?
    Every rank allocates `world_size` receive buffers and fills them, and all ranks but one
    throw them away: world_size x the tensor's bytes for nothing on each of the other ranks,
    at the moment their memory is fullest (the decoded output is already there). In a real
    4-GPU distributed VAE decode that is 2,080,899,072 bytes per non-root rank.
    `dist.gather(t, buffers if rank == dst else None, dst=dst)` moves the same bytes to the
    destination and leaves the other ranks holding only their send tensor.

    ## Example
    ```python
    def gather_tiles(self, tile):
        buffers = [torch.empty_like(tile) for _ in range(self.world_size)]
        dist.all_gather(buffers, tile, group=self.group)
        return buffers if self.rank == 0 else None
    ```

    ## Use instead
    ```python
    from lifetime_lint.runtime import gather_to_root

    def gather_tiles(self, tile):
        buffers = gather_to_root(tile, group=self.group, group_dst=0)
        return buffers if self.rank == 0 else None
    ```
    `gather_to_root` returns the list `all_gather` would have filled on the destination and
    `None` elsewhere, and keeps the `all_gather` path on backends listed as emulating
    `gather` (default: hccl; see `lifetime_lint.runtime.gather`).

    ## Fix safety
    The fix deletes the receive-buffer allocation and replaces the `all_gather` with the
    helper; the code that reads the result on the root is kept. It is offered for
    `dist.all_gather` and `dist.all_gather_into_tensor` with buffers allocated in the same
    block, and when the root rank is a known value (`rank == 0`, `rank == dst`). Where the
    only read is a `torch.cat(gathered, dim=d)` on every rank, the concatenation moves into
    the helper (`video = gather_to_root(frame, dst=0, dim=2)`).

    It is safe when the analysis shows that nothing else can tell the difference: the
    buffers are `*_like(tensor)` copies of the sent tensor (or one shape per rank, passed
    on as `shapes=`), the rank compared against is known to be a global rank
    (`dist.get_rank()`, giving `dst=`) or a rank in the gathered group
    (`dist.get_rank(group)`, `group.rank()`, giving `group_dst=`), also through the one
    binding of a local that reaches the test, a `self.` attribute set once from such a
    call, or a helper of the same module or class that returns it (`rank, world =
    _rank_world(group)`, `self._rank()`), and the destination is provably a
    member of the group: rank 0 of the numbering the guard uses (the world always has a
    global rank 0, every group a group rank 0). Where it may not be, the original reads the
    result on no rank while the helper raises `ValueError`, so the fix is unsafe: a global
    rank compared over a subgroup (global rank 0 need not be a member), a destination held
    in a variable (`rank == dst`). It is also unsafe when the rank's kind is unknown (the
    fix then assumes a group rank), when the buffers are shaped after another tensor, and
    always for `all_gather_into_tensor` (the helper returns the gathered tensors
    concatenated along dim 0, where the original output may have been a stacked shape).

    A fix that adds `from lifetime_lint.runtime import gather_to_root` to a project that
    neither declares lifetime-lint as a dependency nor sets the top-level `runtime-module`
    (a vendored copy: `lifetime-lint vendor-runtime`) is offered as unsafe whatever the
    analysis shows, since the fixed code would not import elsewhere.

    No fix where a rank other than the root reads the result's length, type or presence
    (after a gather to one rank it would have nothing to measure), for a merge loop, nor
    for `all_gather_object` (use `dist.gather_object`), `full_tensor()`,
    functional collectives (they take meshes and are traced by `torch.compile`), wrappers, a root given by a flag
    (`if is_root:`), a root that only holds when a destination is given (`if dst is not
    None and rank != dst: return`: every rank reads when `dst` is None), and results that
    are never read.

    ## Options
    `gather-call` names the helper the fix calls (default
    `"lifetime_lint.runtime.gather_to_root"`; `"package.module:object.method"` imports
    `object`). It must accept `tensor, *, group, dst | group_dst, dim, shapes`.
    `wrappers` lists calls whose return value is an all-gathered tensor: a bare name
    matches a method (`coordinator.all_gather(x)`) or a local function; a dotted name matches
    the function it resolves to (`"vllm.distributed.tensor_model_parallel_all_gather"`).
    """

    code = "LL003"
    name = "discarded-all-gather"
    summary = "`all_gather` result read on one rank only: the others' receive buffers are wasted"
    triggers = ("all_gather", "full_tensor", "gather_object")
    fix_availability = "sometimes"
    options = (
        Option(
            "gather-call",
            str,
            "lifetime_lint.runtime.gather_to_root",
            "the helper that gathers onto one rank",
            validate=target_problem,
        ),
        Option(
            "wrappers",
            list,
            ["all_gather"],
            "calls whose return value is an all-gathered tensor",
            validate=_validate_wrappers,
        ),
    )

    def __init__(self, context, options) -> None:
        super().__init__(context, options)
        self._pending: dict[int, list[_Candidate]] = {}
        self._wrappers: dict[str, str] | None = None  # module functions that return a gather

    # -- triggers ---------------------------------------------------------------------
    def visit_Call(self, node: cst.Call) -> None:
        kind = self._kind(node)
        if kind is None:
            return
        ancestors = tuple(self.context.ancestors)
        function = next((a for a in reversed(ancestors) if isinstance(a, cst.FunctionDef)), None)
        if function is None:
            return
        self._pending.setdefault(id(function), []).append(_Candidate(node, kind, ancestors))

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        for candidate in self._pending.pop(id(original_node), ()):
            self._check(original_node, candidate)

    def _kind(self, call: cst.Call) -> str | None:
        qualified = self.context.qualified_name(call.func)
        if qualified is None:
            qualified = self._local_alias(call.func)
        if qualified is not None:
            kind = _COLLECTIVES.get(qualified)
            if kind is not None:
                return kind
        for entry in self.settings["wrappers"]:
            if "." in entry:
                if qualified == entry:
                    return WRAPPER
            elif isinstance(call.func, cst.Attribute) and call.func.attr.value == entry:
                if qualified is None or not qualified.startswith("torch."):
                    return WRAPPER
            elif isinstance(call.func, cst.Name) and call.func.value == entry and qualified is None:
                return WRAPPER
        if (
            isinstance(call.func, cst.Attribute)
            and call.func.attr.value == "full_tensor"
            and not call.args
            and (qualified is None or not qualified.startswith("torch."))
        ):
            return FULL  # `DTensor.full_tensor()`: every shard all-gathered on every rank
        if isinstance(call.func, cst.Name) and qualified is None and "gather" in call.func.value:
            return self._module_wrapper(call.func.value)
        if (
            isinstance(call.func, cst.Attribute)
            and isinstance(call.func.value, cst.Name)
            and call.func.value.value in ("self", "cls")
            and "gather" in call.func.attr.value
        ):
            return self._method_wrapper(call.func.attr.value)
        if qualified is not None and not qualified.startswith("torch."):
            known = _PACKAGE_WRAPPERS.get(qualified)
            if known is not None:
                return known
            if _NAMED_ALL_GATHER.match(qualified.rpartition(".")[2]):
                return WRAPPER  # `evenly_divisible_all_gather(outputs, concat=True)`
        return None

    def _local_alias(self, func: cst.BaseExpression) -> str | None:
        """`dist.all_gather_object` after `dist = torch.distributed` in the same function
        (nemo's speechlm2 models): the qualified name through the local alias, when the
        function binds the alias once, to a module that has that collective."""
        if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)):
            return None
        alias, attribute = func.value.value, func.attr.value
        if attribute not in _COLLECTIVE_NAMES:
            return None  # no module has it as a collective: the function body is not walked
        function = next(
            (a for a in reversed(self.context.ancestors) if isinstance(a, cst.FunctionDef)),
            None,
        )
        if function is None:
            return None
        finder = _AssignmentFinder(alias)
        visit(function.body, finder)
        if len(finder.values) != 1:
            return None
        module = self.context.qualified_name(finder.values[0])
        if module is None or f"{module}.{attribute}" not in _COLLECTIVES:
            return None
        return f"{module}.{attribute}"

    def _module_wrapper(self, name: str) -> str | None:
        """For a function of this module that fills a list with a collective and returns it
        (mmengine's `all_gather_object(data, group) -> gather_list`): the kind its callers
        get back (`WRAPPED_OBJECT` for `all_gather_object`, `RETURNED` for tensors)."""
        if self._wrappers is None:
            self._wrappers = {}
            for statement in self.context.module.body:
                if isinstance(statement, cst.FunctionDef):
                    kind = _returned_gather(self.context, statement)
                    if kind is not None:
                        self._wrappers[statement.name.value] = kind
        return self._wrappers.get(name)

    def _method_wrapper(self, name: str) -> str | None:
        """`self._gather_objects(local_logs)` where a method of the enclosing class fills a
        list with a collective and returns it, or its flattened items (fastvideo's
        `DiffusionNFTMethod._gather_objects`): the kind its callers get back."""
        owner = next(
            (a for a in reversed(self.context.ancestors) if isinstance(a, cst.ClassDef)), None
        )
        if owner is None:
            return None
        for statement in owner.body.body:
            if isinstance(statement, cst.FunctionDef) and statement.name.value == name:
                return _returned_gather(self.context, statement)
        return None

    # -- analysis ---------------------------------------------------------------------
    def _check(self, function: cst.FunctionDef, candidate: _Candidate) -> None:
        call, kind, ancestors = candidate.call, candidate.kind, candidate.ancestors
        site = _call_site(self.context, call, kind, ancestors)
        if site is None or _is_async(call, kind):
            return
        if _backend_dispatch(self.context, ancestors):
            return
        result, statement, block = site
        if kind == WRAPPER and _names_a_step(call):
            return  # `dist_wrapper.all_gather("read", read_data)`: runs a step, not a tensor
        # query: the function's flow facts and where the result is read.
        ranks = _Ranks(self.context, function)
        if ranks.facts is None or _declared_or_parameter(ranks, result):
            return
        allocation = None
        alternative = None  # the other branch of `if world_size > 1: <gather> else: ...`
        outer = False  # the buffers were allocated before the `if` around the call
        enclosing = _branch_of(ancestors, block)
        if enclosing is not None:
            alternative = enclosing[2]
        if kind in BUFFER_KINDS:
            allocation = _allocation_before(block, statement, result)
            if allocation is None and enclosing is not None:
                allocation = _allocation_before(enclosing[1], enclosing[0], result)
                outer = True
            if allocation is None:
                return  # buffers from elsewhere: not this function's allocation
            if kind == LIST and _repeats_one_buffer(_allocated_value(allocation, result)):
                return  # `[dummy] * world_size`: one buffer, every slot the same tensor
        reads = _reads_of(
            uses_for(self.context, function), result, statement, allocation, alternative
        )
        if reads is None and kind not in BUFFER_KINDS:
            # `param = param.full_tensor()` in a loop: the reads this binding reaches
            reads = _reads_of_binding(ranks, result, statement, _bound_value(statement, call))
        if reads is None:
            return
        # decide: every read is on one rank (directly, or through a concatenation).
        guards: list[_Guard] = []
        through: list[_Derived] = []  # results derived on every rank, read on the root only
        presence = False  # `len(x)`, `isinstance(x, T)`, `x is None` read on every rank
        for chain in reads.chains:
            if _presence_read(self.context, chain):
                presence = True
                continue
            if _restructured_in_place(chain, result):
                continue  # `x = [a for part in x for a in part]`: its later reads decide
            if _binds_none(chain):
                continue  # `all_images = None`: drops the data, reads none of it
            guard = _guard(ranks, chain)
            if guard is None:
                derived = self._derived(ranks, chain)
                if derived is None:
                    return
                through.append(derived)
                guards.extend(derived.guards)
            else:
                guards.append(guard)
        loop_names = uses_for(self.context, function).loop_targets
        if any(
            isinstance(rank, cst.Name) and rank.value in loop_names
            for rank in (_unwrap_int(g.rank) for g in guards if g.rank is not None)
        ):
            return  # `for rank in range(world_size): if rank == 0:` is not this rank
        keys = {guard.root for guard in guards}
        if len(keys) > 1:
            return
        if kind in BUFFER_KINDS and _ranks_of_another_group(ranks, call, guards):
            return  # `sp_rank == 0` around a world all_gather: one reader per group, not one
        written = self.context.source_of(call.func)
        fills = f"fills `{result}`"
        if kind == FULL:
            written += "()"
            fills = f"all-gathers every shard into `{result}`"
        level, small = _significance(ranks, _sent_tensor(call, kind), kind)
        if kind == LIST and _element_buffers(self.context, allocation, result):
            # `list(t.new_zeros(world_size).chunk(world_size))`: one element per rank.
            level = S.LOW
            small = "; each rank receives one element per rank (a scalar's buffers), so the waste is small"
        if level != S.LOW and _in_token_loop(function, ancestors):
            # `for step in range(max_new_tokens): c = proj(c); all_gather(c)`: each
            # iteration of an autoregressive decode gathers one token's state per sample.
            level = S.LOW
            small = (
                "; once per generated token (a loop over new tokens), so each rank sends "
                "one token's state per sample and the waste is small"
            )
        if kind == FULL and _in_loop_over_weights(ancestors):
            # `for name, param in sd.items(): param = param.full_tensor()`: each of the
            # other ranks holds one gathered weight until the loop rebinds it.
            level = S.LOW
            small = (
                "; one weight at a time (a loop over a state dict or parameters), freed when "
                "the loop rebinds it, so the waste is one parameter's size"
            )
        if not guards:
            if presence:
                return  # only its length or type is read, on every rank: not "unused"
            self.report(
                call,
                f"`{written}` {fills} on every rank, but nothing reads it: every rank "
                f"allocates world_size receive buffers for nothing{small}",
                statement=statement,
                significance=level,
            )
            return
        root = keys.pop()
        where = f"rank {root}" if root != _FLAG else "the root rank"
        given = sorted({guard.given for guard in guards if guard.given is not None})
        when = f" when {given[0]} (every rank otherwise)" if given else ""
        via = ""
        if through:
            via = " (through " + ", ".join(sorted({f"`{d.name}`" for d in through})) + ")"
        advice = _ADVICE[kind]
        if kind == WRAPPER and isinstance(call.func, cst.Name):
            advice = _GATHER_ADVICE  # a function, not a group coordinator's method
        fix = None
        fixable = (
            root != _FLAG
            and not given
            and not presence  # `len(None)` would raise on the other ranks after the fix
            and kind in FIXABLE_KINDS
            and reads.after_call
            and not outer
        )
        if (
            fixable
            and isinstance(allocation, cst.SimpleStatementLine)
            and all(derived.concat is not None for derived in through)
            and (not through or (len(reads.chains) == 1 and kind == LIST))
        ):
            fix = self._fix(
                call, kind, result, statement, allocation, ancestors, root, guards,
                through[0] if through else None, block, ranks,
            )  # fmt: skip
        self.report(
            call,
            f"`{written}` {fills} on every rank, but only {where} reads it{when}{via}; "
            f"{advice}{small}",
            fix,
            statement=statement,
            significance=level,
        )

    def _derived(self, ranks: _Ranks, chain: Sequence[cst.CSTNode]) -> _Derived | None:
        """For `video = torch.cat(result, ...)` run on every rank, where only the root reads
        `video`: the derived name and the guards of its reads. None otherwise."""
        if len(chain) >= 2 and isinstance(chain[-2], cst.For) and chain[-2].iter is chain[-1]:
            return self._merged(ranks, chain[-2])
        if len(chain) < 5:
            return None
        argument, concat, assign, statement = chain[-2], chain[-3], chain[-4], chain[-5]
        if not (
            isinstance(argument, cst.Arg)
            and argument.keyword is None
            and isinstance(concat, cst.Call)
            and concat.args
            and concat.args[0] is argument
            and self.context.qualified_name(concat.func) in _CONCATENATIONS
            and isinstance(assign, cst.Assign)
            and assign.value is concat
            and len(assign.targets) == 1
            and isinstance(assign.targets[0].target, cst.Name)
            and isinstance(statement, cst.SimpleStatementLine)
        ):
            return None
        name = assign.targets[0].target.value
        if _declared_or_parameter(ranks, name):
            return None
        reads = _reads_of(uses_for(self.context, ranks.function), name, statement, None)
        return _guarded(ranks, name, reads, statement, concat)

    def _merged(self, ranks: _Ranks, loop: cst.For) -> _Derived | None:
        """For `for part in gathered: merged[k].extend(part[k])` run on every rank (mmdet's
        per-category merge), where only the root reads `merged`: the merged name and the
        guards of its reads. The loop may only add to locals made empty just before it
        (`merged = defaultdict(list)`); None otherwise."""
        accumulators = _accumulators(loop.body)
        if accumulators is None or len(accumulators) != 1:
            return None
        name = accumulators.pop()
        if _declared_or_parameter(ranks, name):
            return None
        uses = uses_for(self.context, ranks.function)
        bindings = [u for u in uses.of(name) if u.binding and not u.inside(loop)]
        first = min(bindings, key=lambda u: u.order, default=None)
        loop_order = next((u.order for u in uses.of(name) if u.inside(loop)), None)
        if first is None or loop_order is None or first.order > loop_order:
            return None
        start = next(
            (a for a in reversed(first.ancestors) if isinstance(a, cst.SimpleStatementLine)),
            None,
        )
        assign = start.body[0] if start is not None else None
        if not (isinstance(assign, cst.Assign) and _is_empty_collection(assign.value)):
            return None
        reads = _reads_of(uses, name, loop, start)  # type: ignore[arg-type]
        return _guarded(ranks, name, reads, start, None)

    # -- fix ----------------------------------------------------------------------------
    def _fix(
        self,
        call: cst.Call,
        kind: str,
        result: str,
        statement: cst.SimpleStatementLine,
        allocation: cst.SimpleStatementLine,
        ancestors: Sequence[cst.CSTNode],
        root: str,
        guards: Sequence[_Guard],
        derived: _Derived | None,
        block: cst.CSTNode,
        ranks: _Ranks,
    ) -> Fix | None:
        if len(statement.body) != 1 or len(allocation.body) != 1:
            return None
        if _has_comment(allocation):
            return None  # deleting the statement would lose the comment
        arguments = _arguments(call, ("tensor_list", "tensor", "group"))
        tensor = arguments.get("tensor")
        if tensor is None or not isinstance(allocation.body[0], cst.Assign):
            return None
        tensor_code = self.context.code_for(tensor).strip()
        group = arguments.get("group")
        group_code = None
        if group is not None and not (isinstance(group, cst.Name) and group.value == "None"):
            group_code = self.context.code_for(group).strip()
        reasons: list[str] = []

        # Which rank numbering the guard compares against, and whether the destination is
        # provably a member of the group: only rank 0 of the numbering the guard uses is
        # (the world always has a global rank 0, every group a group rank 0). Otherwise the
        # original reads nothing on any rank where the helper raises ValueError.
        kinds = {ranks.kind(guard.rank) for guard in guards}
        rank_kind = kinds.pop() if len(kinds) == 1 else None
        if group_code is None:
            destination = f"dst={root}"
            if rank_kind is None:
                reasons.append("the rank compared against may not be a global rank")
        elif rank_kind == _GLOBAL:
            destination = f"dst={root}"
            reasons.append(
                f"global rank {root} may not be a member of `{group_code}` (the helper then "
                f"raises ValueError where the original read nothing)"
            )
        else:
            destination = f"group_dst={root}"
            if rank_kind != ("group", _normalise(group_code)):
                reasons.append(
                    f"the fix assumes the compared rank is a rank in `{group_code}`; if it is "
                    f"a global rank, use `dst={root}`"
                )
        if root != "0" and not reasons:
            reasons.append(
                f"`{root}` may name no rank of the group (the helper then raises ValueError "
                f"where the original read nothing)"
            )

        # What the receive buffers looked like.
        extra = ""
        value = allocation.body[0].value
        if kind == LIST:
            shape = _buffer_shape(self.context, value, tensor_code)
            if shape is None:
                return None
            if shape == _LIKE_OTHER:
                reasons.append("the receive buffers are not shaped like the sent tensor")
            elif shape != _LIKE_TENSOR:
                extra = f", shapes={shape}"
        else:  # all_gather_into_tensor
            extra = ", dim=0"
            reasons.append(
                "the helper returns the gathered tensors concatenated along dim 0, the "
                "original output may have had another shape"
            )

        # `video = torch.cat(frames, dim=2)` on every rank: the helper concatenates instead.
        removed = [allocation]
        if derived is not None:
            if derived.concat is None:
                return None  # a merge loop: nothing the helper can take over
            dim = _concat_dim(self.context, derived.concat)
            if dim is None or not _later_sibling(block, statement, derived.statement):
                return None
            if len(derived.statement.body) != 1 or _has_comment(derived.statement):
                return None
            result = derived.name
            extra += f", dim={dim}"
            removed.append(derived.statement)

        target = Target.parse(self.settings["gather-call"])
        reference, import_edits = reference_to(self.context, target, ancestors)
        group_argument = f", group={group_code}" if group_code is not None else ""
        replacement = f"{result} = {reference}({tensor_code}{group_argument}, {destination}{extra})"
        start, end = self.context.span(call)
        edits = (
            tuple(
                Edit(self.context.line_start_of(line), self.context.line_after(line), "")
                for line in removed
            )
            + (Edit(start, end, replacement),)
            + import_edits
        )
        message = f"Gather onto rank {root} only, with `{reference}`"
        if reasons:
            message += " (unsafe: " + "; ".join(reasons) + ")"
        return Fix(
            message=message,
            edits=edits,
            applicability=Applicability.UNSAFE if reasons else Applicability.SAFE,
            orphan_import_candidates=import_bindings_under(self.context, call.func, _DIST),
        )


def _returned_gather(context, function: cst.FunctionDef) -> str | None:
    """The kind of a function whose `return name` gives a list that a buffer collective
    statement of its own body filled (`dist.all_gather_object(gather_list, data, group)`
    ... `return gather_list`); None otherwise."""
    finder = _GatherReturnFinder(context)
    visit(function.body, finder)
    kinds = {finder.filled[name] for name in finder.returned if name in finder.filled}
    if len(kinds) != 1:
        return None
    kind = kinds.pop()
    return WRAPPED_OBJECT if kind == OBJECT else RETURNED


class _GatherReturnFinder(cst.CSTVisitor):
    def __init__(self, context) -> None:
        self.context = context
        self.filled: dict[str, str] = {}  # buffer name -> kind of the collective filling it
        self.returned: list[str] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False  # a nested function's returns are not this function's

    def visit_Expr(self, node: cst.Expr) -> None:
        if isinstance(node.value, cst.Call):
            kind = _COLLECTIVES.get(self.context.qualified_name(node.value.func) or "")
            if kind in BUFFER_KINDS and not _is_async(node.value, kind):
                first = _arguments(node.value, ("tensor_list", "tensor")).get("tensor_list")
                if isinstance(first, cst.Name):
                    self.filled[first.value] = kind

    def visit_For(self, node: cst.For) -> None:
        # `for part in gathered: flat.extend(part)`: `flat` holds what `gathered` did.
        if not (isinstance(node.iter, cst.Name) and node.iter.value in self.filled):
            return
        kind = self.filled[node.iter.value]
        for line in _simple_lines(node.body):
            for small in line.body:
                if (
                    isinstance(small, cst.Expr)
                    and isinstance(small.value, cst.Call)
                    and isinstance(small.value.func, cst.Attribute)
                    and small.value.func.attr.value in ("extend", "append")
                    and isinstance(small.value.func.value, cst.Name)
                ):
                    self.filled.setdefault(small.value.func.value.value, kind)

    def visit_Return(self, node: cst.Return) -> None:
        if isinstance(node.value, cst.Name):
            self.returned.append(node.value.value)
        elif isinstance(node.value, cst.ListComp) and isinstance(node.value.for_in.iter, cst.Name):
            # `return [item for part in gathered for item in part]`
            self.returned.append(node.value.for_in.iter.value)


def _simple_lines(body: cst.BaseSuite) -> list[cst.SimpleStatementLine]:
    """The simple statement lines of a block and of the `if` blocks inside it."""
    lines: list[cst.SimpleStatementLine] = []
    for statement in getattr(body, "body", ()):
        if isinstance(statement, cst.SimpleStatementLine):
            lines.append(statement)
        elif isinstance(statement, cst.If):
            lines.extend(_simple_lines(statement.body))
    return lines


def _names_a_step(call: cst.Call) -> bool:
    """A wrapper called with a string first (torch.distributed.checkpoint's
    `_DistWrapper.all_gather("read", read_data)` runs `read_data` on every rank and gathers
    its result or exception): a named step, not a tensor to gather."""
    positional = [a.value for a in call.args if a.keyword is None and not a.star]
    return bool(positional) and isinstance(
        positional[0], (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)
    )


def _sent_tensor(call: cst.Call, kind: str) -> cst.BaseExpression | None:
    """What each rank contributes: `all_gather(buffers, tensor)`, `wrapper(tensor, ...)`."""
    if kind in BUFFER_KINDS:
        return _arguments(call, ("tensor_list", "tensor")).get("tensor")
    if kind == FULL and isinstance(call.func, cst.Attribute):
        return call.func.value
    positional = [a.value for a in call.args if a.keyword is None and not a.star]
    return positional[0] if positional else None


# Bounds of an autoregressive decode loop: `max_new_tokens`, `max_new_len`,
# `self.max_gen_toks`, `max_generation_length`, `num_new_tokens`.
_TOKEN_BOUND = compile_lazily(
    r"^(max_new_(tokens?|len|length)|max_gen(eration)?_(toks|tokens|len|length)"
    r"|num_new_tokens)$"
)


def _in_token_loop(function: cst.FunctionDef, ancestors: Sequence[cst.CSTNode]) -> bool:
    """The call is in a `for` loop over the tokens to generate: its iterable names a
    new-token bound (`range(max_new_tokens)`), directly or through the function's
    bindings of a name it iterates (`indices = tqdm(list(range(max_new_len)))`)."""
    for node in ancestors:
        if isinstance(node, cst.For) and _names_token_bound(function, node.iter, 3):
            return True
    return False


def _names_token_bound(function: cst.FunctionDef, node: cst.CSTNode, depth: int) -> bool:
    finder = _NameCollector()
    visit(node, finder)
    if any(_TOKEN_BOUND.match(name) for name in finder.names):
        return True
    if depth <= 0:
        return False
    for name in finder.bare:
        assignments = _AssignmentFinder(name)
        visit(function.body, assignments)
        if any(_names_token_bound(function, v, depth - 1) for v in assignments.values):
            return True
    return False


class _NameCollector(cst.CSTVisitor):
    """The last names of the names and attributes in an expression (`names`), and its
    bare names (`bare`)."""

    def __init__(self) -> None:
        self.names: set[str] = set()
        self.bare: set[str] = set()

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)
        self.bare.add(node.value)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        self.names.add(node.attr.value)
        visit(node.value, self)
        return False


_WEIGHT_ITERATORS = frozenset(
    {"state_dict", "named_parameters", "parameters", "named_buffers", "buffers"}
)


def _in_loop_over_weights(ancestors: Sequence[cst.CSTNode]) -> bool:
    """Whether the innermost `for` around the call walks a state dict or a module's
    parameters (`sd.items()`, `model.state_dict().items()`, `model.named_parameters()`)."""
    loop = None
    for ancestor in reversed(ancestors):
        if isinstance(ancestor, cst.FunctionDef):
            return False
        if isinstance(ancestor, cst.For):
            loop = ancestor
            break
    if loop is None:
        return False
    iterable = loop.iter
    while isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Attribute):
        method = iterable.func.attr.value
        if method in _WEIGHT_ITERATORS:
            return True
        if method not in ("items", "values", "keys"):
            return False
        iterable = iterable.func.value
    name = iterable.value if isinstance(iterable, cst.Name) else None
    return name is not None and (
        "state_dict" in name or name.endswith("_sd") or name in ("sd", "params", "parameters")
    )


def _significance(ranks: _Ranks, sent: cst.BaseExpression | None, kind: str) -> tuple[str, str]:
    """How much the wasted receive buffers are worth, from what each rank sends (the facts
    layer's origin, refined by its name): world_size copies of a latent-sized prediction or
    an embedding are a few MiB (`low`, below the default bar), of decoded frames `high`,
    of anything else (an activation, a tensor of unknown origin) `medium`. And, when low,
    the words that say so in the message."""
    origin = F.ACTIVATION
    tensor = False  # the facts layer knows it sends a tensor (or a container of them)
    name = sent.value if isinstance(sent, cst.Name) else ""
    node = ranks.loads.get(id(sent)) if sent is not None else None
    if ranks.facts is not None and sent is not None and node is not None:
        fact = ranks.facts.expression(sent, node)
        if fact.is_tensor or fact.kind == F.CONTAINER:
            origin = fact.origin
            tensor = True
        elif fact.kind == F.METADATA:
            origin = F.SMALL
    if len(name) > 1:  # a one-letter name (`t`, `x`) says nothing about size
        origin = S.name_origin(name, origin)
    if isinstance(sent, cst.Name) and _literal_small_allocation(ranks.binding(sent)):
        # `tmp = torch.zeros(1, device="npu")`: a warm-up or handshake of a few elements.
        return S.LOW, "; each rank sends a tensor of a few elements, so the waste is small"
    if kind in (OBJECT, WRAPPED_OBJECT) and _ipc_handles(ranks, sent):
        # `{gpu_id: reduce_tensor(weight)}`: a CUDA IPC handle (rebuild function and
        # arguments), not the tensor's bytes; the tensor itself stays shared in place.
        return S.LOW, "; each rank sends CUDA IPC handles (metadata), so the waste is small"
    if kind in (OBJECT, WRAPPED_OBJECT) and not tensor:
        if _state_dict(ranks, sent):
            # `model.state_dict()`: every parameter and buffer the rank holds, pickled.
            return S.HIGH, (
                "; each rank sends a state dict (every weight or optimizer state it holds), "
                "so each of the others receives all of them"
            )
        carried = _tensor_in_object(ranks, sent)
        if carried is not None:
            # `[compacted_states, offset, size]` with `compacted_states = pack_..._to_tensor()`
            return S.MEDIUM, (
                f"; each rank sends a tensor (`{carried}`) pickled with the object, so each "
                f"of the others receives world_size of them"
            )
        decoded = _decoded_text(ranks, sent)
        if decoded is not None:
            # `completions_text = tokenizer.batch_decode(ids)`: one batch's strings.
            return S.LOW, (
                f"; each rank sends the text of one batch (`{decoded}`: strings, a few KB), "
                f"so the waste is small"
            )
        collected = _collected_results(ranks, sent)
        if collected is not None:
            # `all_gather_object(result_part)` in an evaluation: every sample's outputs.
            return S.MEDIUM, (
                f"; each rank sends `{collected}`, by its name the results, predictions or "
                f"states it collected (pickled, growing with the data it covers), so each "
                f"of the others receives world_size of them"
            )
        # `all_gather_object` pickles Python objects: request ids, sets, status records.
        return S.LOW, "; each rank sends a pickled Python object (metadata), so the waste is small"
    pickled = _pickled_payload(ranks, sent) if kind not in (OBJECT, WRAPPED_OBJECT) else None
    if pickled is not None:
        # `part_send[:n] = torch.tensor(bytearray(pickle.dumps(result_part)), dtype=uint8)`:
        # an all_gather_object written by hand; the bytes are the object they carry.
        collected = _collected_results(ranks, pickled)
        if collected is not None:
            return S.MEDIUM, (
                f"; each rank sends `{collected}` pickled into a byte tensor, by its name the "
                f"results, predictions or states it collected (growing with the data it "
                f"covers), so each of the others receives world_size of them"
            )
        return S.LOW, (
            "; each rank sends a pickled Python object in a byte tensor (metadata), so the "
            "waste is small"
        )
    size = S.size_class(origin)
    if size in (S.SMALL_SIZED, S.TINY):
        return S.LOW, f"; each rank sends little ({S.describe(origin)}), so the waste is small"
    return (S.HIGH if size == S.LARGE else S.MEDIUM), ""


class _PickleDumps(cst.CSTVisitor):
    """The objects a function pickles (`pickle.dumps(obj)`, `dumps(obj)`)."""

    def __init__(self) -> None:
        self.objects: list[cst.BaseExpression] = []

    def visit_Call(self, node: cst.Call) -> None:
        if _last_name(node.func) == "dumps" and node.args:
            self.objects.append(node.args[0].value)


# Receivers of a `.decode(...)` call that turn token ids into strings.
_TEXT_DECODER_OWNER = compile_lazily(r"(?i)tokeni[sz]er|processor|processing_class")


def _decoded_text(ranks: _Ranks, sent: cst.BaseExpression | None) -> str | None:
    """The binding of `sent` when it is the text a tokenizer decoded in this function
    (`completions_text = self.processing_class.batch_decode(ids)`, `tokenizer.decode(t)`):
    one batch's strings, not results collected over a dataset. None otherwise."""
    if not isinstance(sent, cst.Name):
        return None
    bound = ranks.binding(sent)
    if bound is None or bound[1] is not None or not isinstance(bound[0], cst.Call):
        return None
    func = bound[0].func
    if not isinstance(func, cst.Attribute):
        return None
    method = func.attr.value
    owner = ranks.context.code_for(func.value).strip()
    if method != "batch_decode" and not (method == "decode" and _TEXT_DECODER_OWNER.search(owner)):
        return None
    return f"{sent.value} = {owner}.{method}(...)"


def _pickled_payload(ranks: _Ranks, sent: cst.BaseExpression | None) -> cst.BaseExpression | None:
    """What a uint8 tensor sent by `all_gather` carries when the function pickles exactly
    one object into bytes (an `all_gather_object` written by hand: `pickle.dumps(obj)`,
    `torch.ByteTensor`/`bytearray`, padded to the longest): that object, or None."""
    if not isinstance(sent, cst.Name):
        return None
    bound = ranks.binding(sent)
    if bound is None or bound[1] is not None:
        return None
    code = ranks.context.code_for(bound[0])
    if not re.search(r"uint8|ByteTensor|ByteStorage|bytearray|dumps|frombuffer", code):
        return None
    finder = _PickleDumps()
    ranks.function.body.visit(finder)
    if len(finder.objects) != 1:
        return None
    return finder.objects[0]


def _state_dict(ranks: _Ranks, sent: cst.BaseExpression | None) -> bool:
    """`x.state_dict(...)`, or a local whose one binding is that call: a module's or an
    optimizer's tensors (weights, buffers, moments), not metadata."""
    if isinstance(sent, cst.Name):
        bound = ranks.binding(sent)
        sent = bound[0] if bound is not None and bound[1] is None else None
    return (
        isinstance(sent, cst.Call)
        and isinstance(sent.func, cst.Attribute)
        and sent.func.attr.value == "state_dict"
    )


def _tensor_in_object(ranks: _Ranks, sent: cst.BaseExpression | None) -> str | None:
    """The element of a list, tuple or dict display sent by `all_gather_object` (or of the
    one binding of the local sent) that holds a tensor: known to the facts layer, or the
    result of a call whose name says it returns one (`pack_states_to_tensor(...)`, also
    under `x if own else None`). Its code, or None."""
    if isinstance(sent, cst.Name):
        bound = ranks.binding(sent)
        sent = bound[0] if bound is not None and bound[1] is None else None
    if isinstance(sent, (cst.List, cst.Tuple)):
        elements = [e.value for e in sent.elements if isinstance(e, cst.Element)]
    elif isinstance(sent, cst.Dict):
        elements = [e.value for e in sent.elements if isinstance(e, cst.DictElement)]
    else:
        return None
    for element in elements:
        value: cst.BaseExpression | None = element
        if isinstance(element, cst.Name):
            node = ranks.loads.get(id(element))
            if ranks.facts is not None and node is not None:
                fact = ranks.facts.expression(element, node)
                if fact.is_tensor or fact.kind == F.CONTAINER:
                    return element.value
            bound = ranks.binding(element)
            value = bound[0] if bound is not None and bound[1] is None else None
        if isinstance(value, cst.IfExp):
            value = value.body
        if isinstance(value, cst.Call) and _TENSOR_RETURNING.search(_last_name(value.func) or ""):
            return ranks.context.code_for(element).strip()
    return None


# Names of collections that hold what a loop collected per sample or per parameter:
# `result_part`, `results`, `self.results`, `predictions`, `preds`, `outputs`,
# `local_states` (not `result`, one step's outcome, nor `rng_state`).
# Also what a generation or validation loop produced per sample: `completions`,
# `_val_generations`, `translations`, `all_processes_artifacts` (logged images, videos).
_COLLECTED = compile_lazily(
    r"^_?((.*_)?(results|predictions|preds|outputs|states|generations|completions"
    r"|translations|artifacts|images|videos)(_.*)?|results?_parts?)$"
)

# Calls that copy a collection without changing what it holds: `dict(self._generations)`.
_COPYING_CALLS = frozenset({"dict", "list", "tuple", "sorted"})


def _collected_results(ranks: _Ranks, sent: cst.BaseExpression | None) -> str | None:
    """The code of what `all_gather_object` sends when its name says it is a collection
    of results, predictions or states (`result_part`, `self.results`, `(preds, labels)`),
    unless the facts layer or its one binding shows metadata (a string, a path, a
    number). None otherwise."""
    if isinstance(sent, (cst.Tuple, cst.List)):
        for element in sent.elements:
            found = _collected_results(ranks, element.value)
            if found is not None:
                return found
        return None
    if isinstance(sent, cst.IfExp):
        # `images if images is not None else [None] * n`: a filler when there is none
        return _collected_results(ranks, sent.body) or _collected_results(ranks, sent.orelse)
    if (
        isinstance(sent, cst.Call)
        and isinstance(sent.func, cst.Name)
        and sent.func.value in _COPYING_CALLS
        and len(sent.args) == 1
    ):
        # `dict(self._val_generations)`: a copy of the collection.
        return _collected_results(ranks, sent.args[0].value)
    if isinstance(sent, (cst.ListComp, cst.GeneratorExp, cst.DictComp)):
        # `[(t, g) for t, g in zip(translations, ground_truths) if g]`: a filtered copy.
        comprehension: cst.CompFor | None = sent.for_in
        while comprehension is not None:
            iterated = comprehension.iter
            sources = (
                [a.value for a in iterated.args]
                if isinstance(iterated, cst.Call) and _last_name(iterated.func) == "zip"
                else [iterated]
            )
            for source in sources:
                found = _collected_results(ranks, source)
                if found is not None:
                    return found
            comprehension = comprehension.inner_for_in
        return None
    if not isinstance(sent, (cst.Name, cst.Attribute)):
        return None
    name = _last_name(sent)
    if name is None or not _COLLECTED.match(name):
        return None
    if isinstance(sent, cst.Name):
        bound = ranks.binding(sent)
        if bound is not None and bound[1] is None:
            value = bound[0]
            if isinstance(value, (cst.SimpleString, cst.FormattedString, cst.Integer)):
                return None
    return ranks.context.code_for(sent).strip()


_IPC_REDUCTIONS = frozenset(
    f"torch.multiprocessing.reductions.{name}" for name in ("reduce_tensor", "reduce_storage")
)


def _ipc_handles(ranks: _Ranks, sent: cst.BaseExpression | None, depth: int = 3) -> bool:
    """Whether what is sent is (a display of) `reduce_tensor(t)` results: the handles
    `torch.multiprocessing` shares a tensor by, through the one binding of each local."""
    if sent is None or depth < 0:
        return False
    if isinstance(sent, cst.Name):
        bound = ranks.binding(sent)
        return bound is not None and bound[1] is None and _ipc_handles(ranks, bound[0], depth - 1)
    if isinstance(sent, cst.Call):
        return ranks.context.qualified_name(sent.func) in _IPC_REDUCTIONS
    if isinstance(sent, (cst.List, cst.Tuple)):
        values = [e.value for e in sent.elements if isinstance(e, cst.Element)]
    elif isinstance(sent, cst.Dict):
        values = [e.value for e in sent.elements if isinstance(e, cst.DictElement)]
    else:
        return False
    return bool(values) and all(_ipc_handles(ranks, v, depth - 1) for v in values)


# Callees that say in their name that they return a tensor: `pack_states_to_tensor`,
# `get_flat_tensors`, `to_tensor` (not `tensor_parallel_size`, `is_tensor`).
_TENSOR_RETURNING = compile_lazily(r"^(?!is_|has_)(.*_)?tensors?$")


_LITERAL_ALLOCATORS = frozenset({"zeros", "ones", "empty", "full", "tensor", "randn", "rand"})


def _literal_small_allocation(bound) -> bool:
    """`torch.zeros(1)`, `torch.ones(2, 4)`, `torch.tensor([0])`: shapes written as small
    literals (at most 64 elements)."""
    if bound is None or bound[1] is not None:
        return False
    value = bound[0]
    if not (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Attribute)
        and value.func.attr.value in _LITERAL_ALLOCATORS
    ):
        return False
    positional = [a.value for a in value.args if a.keyword is None and not a.star]
    if value.func.attr.value == "tensor":
        return bool(positional) and isinstance(positional[0], (cst.List, cst.Tuple, cst.Integer))
    sizes = positional[:-1] if value.func.attr.value == "full" else positional
    if not sizes or not all(isinstance(size, cst.Integer) for size in sizes):
        return False
    count = 1
    for size in sizes:
        assert isinstance(size, cst.Integer)
        count *= int(size.value)
    return count <= 64


def _allocated_value(allocation: cst.CSTNode | None, name: str) -> cst.BaseExpression | None:
    """The value `name` is bound to by its allocation statement (`name = <value>`, also
    inside `if name is None: name = <value>`)."""
    if isinstance(allocation, cst.If):
        allocation = allocation.body.body[0]
    if not isinstance(allocation, cst.SimpleStatementLine):
        return None
    for small in allocation.body:
        if isinstance(small, cst.Assign) and any(
            isinstance(t.target, cst.Name) and t.target.value == name for t in small.targets
        ):
            return small.value
        if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
            if small.target.value == name:
                return small.value
    return None


def _repeats_one_buffer(value: cst.BaseExpression | None) -> bool:
    """`[dummy] * world_size` (`world_size * [buf]`, `[torch.empty_like(x)] * n`): one
    tensor repeated in every slot, so `all_gather` writes every rank's data into the same
    buffer (vLLM's EPLB gives it to ranks that must take part but read nothing): it
    allocates nothing beyond that one tensor. Not `[None] * n`, the placeholders
    `all_gather_object` fills with new objects. Also a comprehension that repeats one
    existing tensor (`[buffer for _ in range(ep_size)]`, Aphrodite's EPLB profiling
    gather), but not one that allocates per slot (`[torch.empty_like(x) for _ in ...]`)
    or reads its own targets (`[bufs[i] for i in range(n)]`)."""
    if isinstance(value, cst.ListComp):
        return _repeated_name(value)
    if not (isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Multiply)):
        return False
    for side in (value.left, value.right):
        if isinstance(side, cst.List) and len(side.elements) == 1:
            element = side.elements[0]
            return not isinstance(element, cst.StarredElement) and not (
                isinstance(element.value, cst.Name) and element.value.value == "None"
            )
    return False


def _repeated_name(comprehension: cst.ListComp) -> bool:
    """`[buffer for _ in range(n)]`: the element is one plain name (or attribute chain of
    names) that no `for` of the comprehension binds and no `if` filters."""
    element = comprehension.elt
    chain: list[str] = []
    while isinstance(element, cst.Attribute):
        chain.append(element.attr.value)
        element = element.value
    if not isinstance(element, cst.Name) or element.value == "None":
        return False
    bound: set[str] = set()
    clause: cst.CompFor | None = comprehension.for_in
    while clause is not None:
        if clause.ifs:
            return False
        walk(
            clause.target,
            lambda n: bound.add(n.value) if isinstance(n, cst.Name) else None,
            lambda n: None,
        )
        clause = clause.inner_for_in
    return element.value not in bound


def _element_buffers(context, allocation: cst.CSTNode | None, name: str) -> bool:
    """Receive buffers of one element each, whatever the sent tensor: a tensor of n
    elements chunked into n (`list(t.new_zeros(n).chunk(n))`, fairscale's gather of
    singleton optimizer states such as `step`), or a list of small literal allocations
    (`[torch.zeros(1, device=d) for _ in range(world_size)]`)."""
    value = _allocated_value(allocation, name)
    if isinstance(value, cst.ListComp):
        return _literal_small_allocation((value.elt, None))
    if not (
        isinstance(value, cst.Call)
        and _last_name(value.func) == "list"
        and len(value.args) == 1
        and isinstance(value.args[0].value, cst.Call)
    ):
        return False
    split = value.args[0].value
    if not (
        isinstance(split.func, cst.Attribute)
        and split.func.attr.value == "chunk"
        and len(split.args) >= 1
        and isinstance(split.func.value, cst.Call)
    ):
        return False
    made = split.func.value
    sizes = [a.value for a in made.args if a.keyword is None and not a.star]
    if not (_last_name(made.func) or "").startswith(("new_", "zeros", "empty", "ones")):
        return False
    if len(sizes) != 1:
        return False
    return _normalise(context.code_for(sizes[0])) == _normalise(
        context.code_for(split.args[0].value)
    )


def _has_comment(statement: cst.SimpleStatementLine) -> bool:
    """A comment on the statement's line(s), inside it or after it (not the lines above)."""
    finder = _CommentFinder()
    visit(statement, finder)
    leading = {id(line.comment) for line in statement.leading_lines if line.comment}
    return any(id(comment) not in leading for comment in finder.comments)


class _CommentFinder(cst.CSTVisitor):
    def __init__(self) -> None:
        self.comments: list[cst.Comment] = []

    def visit_Comment(self, node: cst.Comment) -> None:
        self.comments.append(node)


def _gather_group(context, call: cst.Call) -> str | None:
    """The `group` argument of a buffer collective as normalised code; None for the world."""
    group = _arguments(call, ("tensor_list", "tensor", "group")).get("group")
    if group is None or (isinstance(group, cst.Name) and group.value == "None"):
        return None
    return _normalise(context.code_for(group))


def _ranks_of_another_group(ranks: _Ranks, call: cst.Call, guards: Sequence[_Guard]) -> bool:
    """Whether a guard compares a rank known to be numbered in another group than the one
    gathered over (then every such group has its own "rank 0" reader): known from the
    call that made it (`dist.get_rank(group=sp_group)`), or from its name, which names a
    parallel dimension (`pp_rank`, `self.tp_rank`, `cfg_rank`) that the gathered group's
    code does not mention (`pp_rank == 0` around a gather over the TP group: one reader per
    pipeline stage, and every rank of the gathered group reads)."""
    group = _gather_group(ranks.context, call)
    argument = _arguments(call, ("tensor_list", "tensor", "group")).get("group")
    bound = ranks.binding(argument) if isinstance(argument, cst.Name) else None
    origin = _normalise(ranks.context.code_for(bound[0])) if bound and bound[1] is None else None
    for guard in guards:
        kind = ranks.kind(guard.rank)
        if (
            isinstance(kind, tuple)
            and kind[1] != group
            and not _same_role(kind[1], group)
            and not _same_role(kind[1], origin)
        ):
            return True
        dimension = _parallel_dimension(guard.rank)
        if dimension is not None and (group is None or dimension not in _code_words(group)):
            return True
    return False


def _same_role(first: str | None, second: str | None) -> bool:
    """Two groups' code naming the same attribute of different owners
    (`self.process_group` and `fsdp_instances[k].process_group`: nested wrappers of one
    model, sharded over the same ranks): taken as the same group."""
    if first is None or second is None:
        return False
    head, dot, attribute = first.rpartition(".")
    other, other_dot, other_attribute = second.rpartition(".")
    return bool(dot and other_dot and attribute == other_attribute and head != other)


# Names of parallel dimensions in rank names (`pp_rank`, `tp_rank_in_group`, `cfg_rank`).
_DIMENSION_RANK = compile_lazily(
    r"^_?(pp|tp|dp|sp|cp|ep|cfg|pipeline|tensor|data|sequence|expert)_rank"
)


def _parallel_dimension(rank: cst.BaseExpression | None) -> str | None:
    """`pp` for `pp_rank`, `self.pp_rank`, `int(pp_rank)`; None for other ranks."""
    if rank is None:
        return None
    rank = _unwrap_int(rank)
    name = rank.attr.value if isinstance(rank, cst.Attribute) else getattr(rank, "value", None)
    if not isinstance(name, str):
        return None
    found = _DIMENSION_RANK.match(name.lower())
    return found.group(1) if found else None


def _code_words(code: str) -> set[str]:
    return set(re.split(r"[^a-z0-9]+", code.lower()))


# -- what is flagged -----------------------------------------------------------------------

LIST = "list"  # all_gather(tensor_list, tensor)
INTO = "into"  # all_gather_into_tensor(output, tensor)
OBJECT = "object"  # all_gather_object(object_list, obj)
RETURNED = "returned"  # functional collectives: the result is the return value
WRAPPER = "wrapper"
FULL = "full_tensor"  # `dtensor.full_tensor()`: the result is the return value
WRAPPED_OBJECT = "wrapped_object"  # a function of this module returning all_gather_object's list
BUFFER_KINDS = (LIST, INTO, OBJECT)
FIXABLE_KINDS = (LIST, INTO)

_DIST = "torch.distributed"
_C10D = "torch.distributed.distributed_c10d"
_FUNCOL = "torch.distributed._functional_collectives"
_COLLECTIVES: dict[str, str] = {
    f"{_DIST}.all_gather": LIST,
    f"{_C10D}.all_gather": LIST,
    f"{_DIST}.all_gather_into_tensor": INTO,
    f"{_C10D}.all_gather_into_tensor": INTO,
    f"{_DIST}._all_gather_base": INTO,
    f"{_DIST}.all_gather_object": OBJECT,
    f"{_C10D}.all_gather_object": OBJECT,
    f"{_FUNCOL}.all_gather_tensor": RETURNED,
    f"{_FUNCOL}.all_gather_tensor_autograd": RETURNED,
    f"{_FUNCOL}.all_gather_inplace": LIST,
    f"{_FUNCOL}.all_gather_tensor_inplace": INTO,
    f"{_DIST}.nn.functional.all_gather": RETURNED,
}
# Their last names: `alias.name(...)` can resolve to a collective only for one of these.
_COLLECTIVE_NAMES = frozenset(name.rpartition(".")[2] for name in _COLLECTIVES)

# Other packages' functions that all-gather and return the result on every rank.
_PACKAGE_WRAPPERS: dict[str, str] = {
    "mmengine.dist.all_gather_object": WRAPPED_OBJECT,
    "mmengine.dist.dist.all_gather_object": WRAPPED_OBJECT,
    "mmengine.dist.all_gather": WRAPPER,
    "mmengine.dist.dist.all_gather": WRAPPER,
    "accelerate.utils.gather_object": WRAPPED_OBJECT,
    "accelerate.utils.operations.gather_object": WRAPPED_OBJECT,
}
# A function of another package named for an all-gather (`evenly_divisible_all_gather`,
# `concat_all_gather`): returns what every rank sent.
# (`string_list_all_gather` gathers strings, not tensors: metadata, not matched.)
_NAMED_ALL_GATHER = compile_lazily(r"^(?!.*(string|str|object|obj|name|key)_)(.+_)?all_gather$")

_CONCATENATIONS = {"torch.cat", "torch.concat", "torch.concatenate", "torch.stack"}


@dataclass(frozen=True)
class _Derived:
    """`name = torch.cat(result, ...)` (or a merge loop over `result` into `name`), run on
    every rank, whose reads are root-only."""

    name: str
    guards: list[_Guard]
    statement: cst.SimpleStatementLine
    concat: cst.Call | None  # None for a merge loop: no fix moves it


_ADDING_METHODS = frozenset({"append", "extend", "update", "add", "setdefault"})
_EMPTY_FACTORIES = frozenset({"list", "dict", "set", "defaultdict", "OrderedDict"})


def _is_empty_collection(value: cst.BaseExpression) -> bool:
    """`[]`, `{}`, `list()`, `dict()`, `defaultdict(list)`, `OrderedDict()`."""
    if isinstance(value, (cst.List, cst.Dict)):
        return not value.elements
    if isinstance(value, cst.Call) and isinstance(value.func, (cst.Name, cst.Attribute)):
        name = _last_name(value.func)
        return name in _EMPTY_FACTORIES and (name == "defaultdict" or not value.args)
    return False


def _accumulators(body: cst.BaseSuite) -> set[str] | None:
    """The locals a merge loop's body only adds to (`merged[k].extend(v)`,
    `merged.append(x)`, `merged[k] = v`), through nested `for` loops; None when the body
    does anything else (another call, a branch, a return)."""
    found: set[str] = set()
    statements = body.body if isinstance(body, cst.IndentedBlock) else (body,)
    for statement in statements:
        if isinstance(statement, cst.For) and statement.orelse is None:
            inner = _accumulators(statement.body)
            if inner is None:
                return None
            found |= inner
            continue
        lines = statement.body if isinstance(statement, cst.SimpleStatementLine) else None
        if isinstance(statement, cst.SimpleStatementSuite):
            lines = statement.body
        if not lines:
            return None
        for line in lines:
            target: cst.BaseExpression | None = None
            if isinstance(line, cst.Expr) and isinstance(line.value, cst.Call):
                func = line.value.func
                if isinstance(func, cst.Attribute) and func.attr.value in _ADDING_METHODS:
                    target = func.value
            elif isinstance(line, cst.Assign) and len(line.targets) == 1:
                if isinstance(line.targets[0].target, cst.Subscript):
                    target = line.targets[0].target
            while isinstance(target, cst.Subscript):
                target = target.value
            if not isinstance(target, cst.Name):
                return None
            found.add(target.value)
    return found


def _concat_dim(context, concat: cst.Call) -> str | None:
    """The literal `dim` of `torch.cat(xs[, dim])` (0 when absent); None for `torch.stack`,
    `out=` or a computed dim."""
    if context.qualified_name(concat.func) == "torch.stack":
        return None
    arguments = _arguments(concat, ("tensors", "dim"))
    if set(arguments) - {"tensors", "dim"}:
        return None
    dim = arguments.get("dim")
    if dim is None:
        return "0"
    if isinstance(dim, cst.Integer):
        return dim.value
    if (
        isinstance(dim, cst.UnaryOperation)
        and isinstance(dim.operator, cst.Minus)
        and isinstance(dim.expression, cst.Integer)
    ):
        return "-" + dim.expression.value
    return None


def _later_sibling(block: cst.CSTNode, first: cst.CSTNode, second: cst.CSTNode) -> bool:
    body = list(block.body)  # type: ignore[attr-defined]
    positions = {id(node): index for index, node in enumerate(body)}
    return (
        id(first) in positions
        and id(second) in positions
        and (positions[id(first)] < positions[id(second)])
    )


_GATHER_ADVICE = "gather to that rank (`dist.gather`) so the others allocate no receive buffers"
_ADVICE = {
    LIST: _GATHER_ADVICE,
    INTO: _GATHER_ADVICE,
    OBJECT: "use `dist.gather_object` so the others receive nothing",
    RETURNED: _GATHER_ADVICE,
    FULL: "gather the local shards to that rank instead (`dist.gather` of `.to_local()`), so "
    "the others do not materialise the whole tensor",
    WRAPPED_OBJECT: "gather to that rank (`dist.gather_object`) so the others receive nothing",
    WRAPPER: "gather to that rank (e.g. the group coordinator's `gather`)",
}


@dataclass(frozen=True)
class _Candidate:
    call: cst.Call
    kind: str
    ancestors: tuple[cst.CSTNode, ...]


def _presence_read(context, chain: Sequence[cst.CSTNode]) -> bool:
    """The read at the end of `chain` learns only the result's length, type or presence
    (`len(x)`, `isinstance(x, T)`, `x is None`), not its data: a test every rank may run
    while only the root reads the data. (With the data gathered to one rank the others
    would need that fact another way, so a finding with such reads gets no fix.)"""
    if len(chain) < 3:
        return False
    name, parent, outer = chain[-1], chain[-2], chain[-3]
    if isinstance(parent, cst.CompFor) and parent.iter is name and not parent.ifs:
        # `all(item is None for item in gathered)`: each element tested for None only
        element = getattr(outer, "elt", None)
        return (
            parent.inner_for_in is None
            and isinstance(parent.target, cst.Name)
            and isinstance(element, cst.Comparison)
            and isinstance(element.left, cst.Name)
            and element.left.value == parent.target.value
            and _is_none_test(element)
        )
    if isinstance(parent, cst.Arg) and isinstance(outer, cst.Call) and outer.args:
        if outer.args[0] is parent and isinstance(outer.func, cst.Name):
            return outer.func.value in ("len", "isinstance") and context.qualified_name(
                outer.func
            ) in (None, f"builtins.{outer.func.value}")
        return False
    if isinstance(parent, cst.Comparison) and parent.left is name:
        return _is_none_test(parent)
    return False


def _is_none_test(test: cst.Comparison) -> bool:
    """`x is None` or `x is not None`."""
    if len(test.comparisons) != 1:
        return False
    comparison = test.comparisons[0]
    return (
        isinstance(comparison.operator, (cst.Is, cst.IsNot))
        and isinstance(comparison.comparator, cst.Name)
        and comparison.comparator.value == "None"
    )


def _call_site(
    context, call: cst.Call, kind: str, ancestors: Sequence[cst.CSTNode]
) -> tuple[str, cst.SimpleStatementLine, cst.CSTNode] | None:
    """(result name, the statement, its block) for `f(result, ...)` as a statement of its
    own, or `result = f(...)` for calls that return the result, also through
    `typing.cast` (`x = cast(torch.Tensor, idist.all_gather(x))`: the same object)."""
    end = len(ancestors)
    if kind not in BUFFER_KINDS:
        while end >= 3 and _casts(context, ancestors[end - 3], ancestors[end - 2]):
            end -= 2  # the cast call stands for the collective
    if end < 4:
        return None
    parent, statement, block = ancestors[end - 2], ancestors[end - 3], ancestors[end - 4]
    if not isinstance(statement, cst.SimpleStatementLine):
        return None
    if not isinstance(block, (cst.IndentedBlock, cst.Module)):
        return None
    if kind in BUFFER_KINDS:
        first = _arguments(call, ("tensor_list", "tensor")).get("tensor_list")
        if not isinstance(parent, cst.Expr) or not isinstance(first, cst.Name):
            return None
        return first.value, statement, block
    if isinstance(parent, cst.Assign) and len(parent.targets) == 1:
        target = parent.targets[0].target
        if isinstance(target, cst.Name):
            return target.value, statement, block
    if isinstance(parent, cst.AnnAssign) and isinstance(parent.target, cst.Name):
        return parent.target.value, statement, block
    return None


def _casts(context, outer: cst.CSTNode, argument: cst.CSTNode) -> bool:
    """`outer` is `typing.cast(T, value)` and `argument` its value argument: the call
    returns `value` itself."""
    return (
        isinstance(outer, cst.Call)
        and isinstance(argument, cst.Arg)
        and len(outer.args) == 2
        and outer.args[1] is argument
        and context.qualified_name(outer.func) == "typing.cast"
    )


def _arguments(call: cst.Call, names: Sequence[str]) -> dict[str, cst.BaseExpression]:
    """Arguments by parameter name: positional ones in the order of `names`, plus keywords.

    The first positional parameter of the buffer collectives has several spellings
    (`tensor_list`, `output_tensor`, `object_list`); keywords for it map to the first name.
    """
    found: dict[str, cst.BaseExpression] = {}
    position = 0
    aliases = {"tensor_list": 0, "output_tensor": 0, "object_list": 0, "input_tensor": 1, "obj": 1}
    for argument in call.args:
        if argument.star:
            return found
        if argument.keyword is None:
            if position < len(names):
                found[names[position]] = argument.value
            position += 1
        else:
            keyword = argument.keyword.value
            index = aliases.get(keyword)
            if index is not None and index < len(names):
                found[names[index]] = argument.value
            else:
                found[keyword] = argument.value
    return found


def _is_async(call: cst.Call, kind: str) -> bool:
    for argument in call.args:
        if argument.keyword is not None and argument.keyword.value == "async_op":
            return not (isinstance(argument.value, cst.Name) and argument.value.value == "False")
    # all_gather(tensor_list, tensor, group, async_op): a fourth positional argument.
    return kind in (LIST, INTO) and len([a for a in call.args if a.keyword is None]) >= 4


_BACKEND_WORDS = compile_lazily(
    r"\b(hccl|backend|get_backend|torch_npu|npu|is_npu)\b", re.IGNORECASE
)


def _backend_dispatch(context, ancestors: Sequence[cst.CSTNode]) -> bool:
    """Inside a branch that chooses by backend or device (the guarded all_gather path)."""
    if in_multi_backend_dispatch(context, ancestors):
        return True
    for node in ancestors:
        if isinstance(node, (cst.If, cst.IfExp)) and _BACKEND_WORDS.search(
            context.code_for(node.test)
        ):
            return True
    return False


def _declared_or_parameter(ranks: _Ranks, name: str) -> bool:
    """A parameter, or a name some `global` / `nonlocal` statement of the function (or of
    a nested one) declares: its value comes from or goes to elsewhere."""
    assert ranks.facts is not None
    if name in ranks.facts.cfg.parameters or name in ranks.facts.cfg.declared:
        return True
    uses = uses_for(ranks.context, ranks.function).of(name)
    return any(isinstance(use.parent, cst.NameItem) for use in uses)


def _lazy_allocation(test: cst.If, name: str) -> bool:
    """`if name is None: name = <fresh buffers>` (nothing else, no `else:`): buffers made
    on first use and reused by later iterations (fairscale's optimizer-state gather)."""
    if test.orelse is not None or not isinstance(test.test, cst.Comparison):
        return False
    if not (
        isinstance(test.test.left, cst.Name)
        and test.test.left.value == name
        and _is_none_test(test.test)
        and isinstance(test.test.comparisons[0].operator, cst.Is)
    ):
        return False
    body = test.body.body
    if len(body) != 1 or not isinstance(body[0], cst.SimpleStatementLine):
        return False
    if len(body[0].body) != 1 or not isinstance(body[0].body[0], cst.Assign):
        return False
    assign = body[0].body[0]
    return (
        len(assign.targets) == 1
        and isinstance(assign.targets[0].target, cst.Name)
        and assign.targets[0].target.value == name
        and _is_fresh(assign.value)
    )


def _allocation_before(
    block: cst.CSTNode, statement: cst.BaseStatement, name: str
) -> cst.SimpleStatementLine | cst.If | None:
    """The nearest earlier statement of the block that assigns `name` (`name = ...`)."""
    body = list(block.body)  # type: ignore[attr-defined]
    index = next(i for i, s in enumerate(body) if s is statement)
    for earlier in reversed(body[:index]):
        if isinstance(earlier, cst.If) and _lazy_allocation(earlier, name):
            return earlier  # `if buf is None: buf = [...]` just before: allocated here
        if isinstance(earlier, cst.SimpleStatementLine):
            for small in earlier.body:
                if isinstance(small, cst.Assign) and any(
                    isinstance(t.target, cst.Name) and t.target.value == name for t in small.targets
                ):
                    return earlier if _is_fresh(small.value) else None
                if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                    if small.target.value == name and small.value is not None:
                        return earlier if _is_fresh(small.value) else None
    return None


def _branch_of(
    ancestors: Sequence[cst.CSTNode], block: cst.CSTNode
) -> tuple[cst.If, cst.CSTNode, cst.CSTNode | None] | None:
    """For a collective in the body of `if world_size > 1:` (an `if` directly in a block,
    not an `elif`): the `if`, its enclosing block and its other branch (`else:` filling the
    buffers locally, which runs instead of the collective), to find buffers allocated just
    before the `if`."""
    index = next((i for i in range(len(ancestors) - 1, -1, -1) if ancestors[i] is block), None)
    if index is None or index < 2:
        return None
    branch, enclosing = ancestors[index - 1], ancestors[index - 2]
    if not (isinstance(branch, cst.If) and branch.body is block):
        return None
    if not isinstance(enclosing, (cst.IndentedBlock, cst.Module)):
        return None
    return branch, enclosing, branch.orelse


def _restructured_in_place(chain: Sequence[cst.CSTNode], name: str) -> bool:
    """The use at the end of `chain` is in `name = [a for part in name for a in part]` (or
    `[a for a in name]`): the statement only flattens the gathered list into the same name,
    on every rank, so it is no read of the data; the reads of the rebound name decide."""
    statement = next((n for n in chain if isinstance(n, cst.SimpleStatementLine)), None)
    if statement is None or len(statement.body) != 1:
        return False
    assign = statement.body[0]
    if not (
        isinstance(assign, cst.Assign)
        and len(assign.targets) == 1
        and isinstance(assign.targets[0].target, cst.Name)
        and assign.targets[0].target.value == name
        and isinstance(assign.value, cst.ListComp)
    ):
        return False
    comp = assign.value
    first = comp.for_in
    if not (isinstance(first.iter, cst.Name) and first.iter.value == name and not first.ifs):
        return False
    inner = first.inner_for_in
    if inner is None:
        innermost = first
    else:
        if inner.inner_for_in is not None or inner.ifs:
            return False
        if not (
            isinstance(inner.iter, cst.Name)
            and isinstance(first.target, cst.Name)
            and inner.iter.value == first.target.value
        ):
            return False
        innermost = inner
    return (
        isinstance(innermost.target, cst.Name)
        and isinstance(comp.elt, cst.Name)
        and comp.elt.value == innermost.target.value
    )


_ALLOCATORS = compile_lazily(
    r"^(empty|zeros|ones|full|empty_like|zeros_like|ones_like|full_like|rand_like|randn_like|"
    r"empty_strided|new_empty|new_zeros|new_ones|new_full|clone)$"
)


def _is_fresh(value: cst.BaseExpression) -> bool:
    """A new list of buffers (`[... for _ in range(n)]`, `[None] * n`) or a new tensor
    (`torch.empty(...)`, `x.new_empty(...)`): not a buffer owned by someone else. Slices of
    another tensor (`[flat[i * n : (i + 1) * n] for i in range(world)]`) are views: the
    gathered data is read through that tensor."""
    if isinstance(value, cst.ListComp):
        return not isinstance(value.elt, cst.Subscript)
    if isinstance(value, cst.List):
        elements = [e.value for e in value.elements if isinstance(e, cst.Element)]
        return not (elements and all(isinstance(e, cst.Subscript) for e in elements))
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Multiply):
        return isinstance(value.left, cst.List) or isinstance(value.right, cst.List)
    if isinstance(value, cst.Call):
        name = _last_name(value.func)
        if name == "list" and len(value.args) == 1:
            # `list(t.new_zeros(n * size).chunk(n))`: views of a tensor made here
            inner = value.args[0].value
            return (
                isinstance(inner, cst.Call)
                and isinstance(inner.func, cst.Attribute)
                and inner.func.attr.value in ("chunk", "split", "unbind")
                and _is_fresh(inner.func.value)
            )
        return name is not None and bool(_ALLOCATORS.match(name))
    return False


@dataclass(frozen=True)
class _Reads:
    chains: list[tuple[cst.CSTNode, ...]]  # each read's ancestors and the name itself
    after_call: bool  # every read comes after the collective


def _reads_of(
    uses: NameUses,
    name: str,
    statement: cst.SimpleStatementLine,
    allocation: cst.SimpleStatementLine | cst.If | None,
    alternative: cst.CSTNode | None = None,
) -> _Reads | None:
    """Every read and rebinding of `name` outside the collective's statement and the
    buffers' allocation (a rebinding counts as a read: it must come after the collective,
    on the root only, like `gathered = torch.cat(gathered)` under `if rank == 0:`). None
    when the name is bound elsewhere before the collective."""
    occurrences = uses.of(name)
    at_call = next((use.order for use in occurrences if use.inside(statement)), None)
    if at_call is None:
        return None
    chains: list[tuple[cst.CSTNode, ...]] = []
    after_call = True
    for use in occurrences:
        if use.inside(statement) or (allocation is not None and use.inside(allocation)):
            continue
        if alternative is not None and use.inside(alternative):
            continue  # the branch that runs instead of the collective (one process)
        if use.deleted or isinstance(use.parent, cst.NameItem):
            continue
        before = use.order < at_call
        if use.binding and before and _binds_none(use.chain):
            continue  # `buffer = None` before a lazy allocation: no data, no read
        if use.binding and before:
            return None
        if before:
            after_call = False
        chains.append(use.chain)
    return _Reads(chains, after_call)


def _binds_none(chain: Sequence[cst.CSTNode]) -> bool:
    """The binding at the end of `chain` is `name = None`."""
    if len(chain) < 3:
        return False
    target, assign = chain[-2], chain[-3]
    return (
        isinstance(target, cst.AssignTarget)
        and isinstance(assign, cst.Assign)
        and len(assign.targets) == 1
        and isinstance(assign.value, cst.Name)
        and assign.value.value == "None"
    )


def _bound_value(statement: cst.SimpleStatementLine, call: cst.Call) -> cst.BaseExpression:
    """The value `statement` binds: `call`, or the `cast(T, call)` around it."""
    assignment = statement.body[0]
    if isinstance(assignment, (cst.Assign, cst.AnnAssign)) and assignment.value is not None:
        return assignment.value
    return call


def _reads_of_binding(
    ranks: _Ranks, name: str, statement: cst.SimpleStatementLine, call: cst.BaseExpression
) -> _Reads | None:
    """The reads of `name` that the binding `name = <call>` may reach (the facts layer's
    reaching definitions), for a name bound before too (`param = param.full_tensor()` in
    a loop over parameters). None when a nested function reads it (unknown when) or a
    read cannot be placed."""
    if ranks.facts is None:
        return None
    chains: list[tuple[cst.CSTNode, ...]] = []
    for use in uses_for(ranks.context, ranks.function).of(name):
        if use.inside(statement) or use.binding or use.deleted:
            continue
        if use.nested or isinstance(use.parent, cst.NameItem):
            return None
        node = ranks.loads.get(id(use.node))
        if node is None:
            return None
        if any(site.value is call for site in ranks.facts.reaching(node, name)):
            chains.append(use.chain)
    return _Reads(chains, True)


# -- root guards ---------------------------------------------------------------------------

_FLAG = "<flag>"


@dataclass(frozen=True)
class _Guard:
    root: str  # the root rank as code ("0", "dst"), or _FLAG for `if is_root:`
    rank: cst.BaseExpression | None  # the rank expression compared, if any
    # Only while this holds (`dst is not None` in `if dst is not None and rank != dst:
    # return`): otherwise every rank reads.
    given: str | None = None


_RANK_NAME = compile_lazily(
    r"^_?(rank|global_rank|group_rank|rank_in_group|my_rank|cur_rank|"
    r"current_rank|world_rank|[a-z0-9]+_rank|rank_id|rank_idx)$"
)
_NOT_RANK = compile_lazily(
    r"(^|_)(local|node|src|dst|root|target|master|leader|peer|next|prev|"
    r"last|first|num|max|min)(_|$)"
)
_ROOT_VALUE = compile_lazily(
    r"^_?(dst|root|src|master|leader|target|main)(_?rank|_?idx|_?id)?$|"
    r"^_?[a-z0-9]+_(dst|root|src)$|"
    r"^_?(save|saver|dump|log|logging|write|writer|output|report)_rank$"  # `self.save_rank`
)
_ROOT_FLAGS = {
    "is_root", "is_root_rank", "is_master", "is_main_process", "is_main_rank", "is_rank_zero",
    "is_rank0", "is_rank_0", "is_leader", "is_world_process_zero", "is_global_zero",
    "is_master_process", "is_dst", "is_first_rank",
}  # fmt: skip


def _guarded(ranks: _Ranks, name: str, reads, statement, concat) -> _Derived | None:
    """The derived value `name` (bound at `statement`) when every read of it after the
    collective is under a root guard; None when it is never read after the call or some read
    is unguarded."""
    if reads is None or not reads.chains or not reads.after_call:
        return None
    guards = [_guard(ranks, read) for read in reads.chains]
    if any(guard is None for guard in guards):
        return None
    return _Derived(name, guards, statement, concat)  # type: ignore[arg-type]


def _guard(ranks: _Ranks, chain: Sequence[cst.CSTNode]) -> _Guard | None:
    """The root-only condition that protects the last node of the chain, if any."""
    for index in range(len(chain) - 2, -1, -1):
        node, child = chain[index], chain[index + 1]
        found: _Guard | None = None
        if isinstance(node, cst.FunctionDef) and index == 0:
            return None
        if isinstance(node, (cst.If, cst.IfExp)):
            if child is node.body:
                found = _root_when(ranks, node.test, True)
            elif child is node.orelse:
                found = _root_when(ranks, node.test, False)
        elif isinstance(node, cst.BooleanOperation) and child is node.right:
            found = _root_when(ranks, node.left, isinstance(node.operator, cst.And))
        elif isinstance(node, (cst.IndentedBlock, cst.Module)):
            found = _early_exit_guard(ranks, node, child)
        if found is not None:
            return found
    return None


def _early_exit_guard(ranks: _Ranks, block: cst.CSTNode, child: cst.CSTNode) -> _Guard | None:
    """`if rank != 0: return` earlier in the same block: the rest runs on the root only."""
    for statement in block.body:  # type: ignore[attr-defined]
        if statement is child:
            return None
        test = _exit_test(statement)
        if test is not None:
            found = _root_when(ranks, test, False)
            if found is not None:
                return found
    return None


def _exit_test(statement: cst.CSTNode) -> cst.BaseExpression | None:
    """The condition under which `statement` leaves the block: `if t: return` gives `t`;
    `if a: if b: return` (nothing else in either) reads as `a and b` (nemo's
    `if main_rank is not None: if rank != main_rank: return None`)."""
    if not isinstance(statement, cst.If) or statement.orelse is not None:
        return None
    if _exits(statement.body):
        return statement.test
    body = statement.body
    if isinstance(body, cst.IndentedBlock) and len(body.body) == 1:
        inner = _exit_test(body.body[0])
        if inner is not None:
            return cst.BooleanOperation(left=statement.test, operator=cst.And(), right=inner)
    return None


def _exits(body: cst.BaseSuite) -> bool:
    if isinstance(body, cst.IndentedBlock):
        statements = list(body.body)
        if not statements:
            return False
        last = statements[-1]
        if isinstance(last, cst.SimpleStatementLine):
            return isinstance(last.body[-1], (cst.Return, cst.Raise, cst.Continue, cst.Break))
        return False
    if isinstance(body, cst.SimpleStatementSuite):
        return isinstance(body.body[-1], (cst.Return, cst.Raise, cst.Continue, cst.Break))
    return False


def _root_when(
    ranks: _Ranks, test: cst.BaseExpression, truth: bool, depth: int = 2
) -> _Guard | None:
    """The guard that holds when `test` evaluates to `truth`: exactly one rank passes.
    A local flag is followed to the test its one binding computes (`is_collector = rank
    == 0`; `depth` bounds the chain)."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return _root_when(ranks, test.expression, not truth, depth)
    if isinstance(test, cst.BooleanOperation):
        conjunction = isinstance(test.operator, cst.And)
        if conjunction == truth:  # `a and b` true / `a or b` false: both parts hold
            return _root_when(ranks, test.left, truth, depth) or _root_when(
                ranks, test.right, truth, depth
            )
        # `if dst is not None and rank != dst: return`: the rest runs on rank dst when a
        # destination is given, on every rank otherwise.
        for given, other in ((test.left, test.right), (test.right, test.left)):
            name = _given_test(ranks.context, given, not truth)
            if name is None:
                continue
            found = _root_when(ranks, other, truth)
            if found is not None and found.root == name:
                return _Guard(found.root, found.rank, given=f"`{name}` is given")
        # `is_collector = rank == master_rank or not only_rank_0`: the root alone passes
        # while the other part, a plain flag, does not hold (every rank passes otherwise).
        for flag, other in ((test.right, test.left), (test.left, test.right)):
            condition = _flag_condition(ranks, flag, not truth)
            if condition is None:
                continue
            found = _root_when(ranks, other, truth, depth)
            if found is not None and found.given is None:
                return _Guard(found.root, found.rank, given=condition)
        return None
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        left, target = test.left, test.comparisons[0]
        right, operator = target.comparator, target.operator
        rank, value = None, None
        if ranks.is_rank(left) and _is_root_value(right):
            rank, value = left, right
        elif ranks.is_rank(right) and _is_root_value(left):
            rank, value = right, left
            operator = _mirrored(operator)
        if rank is None or value is None:
            return None
        value_code = ranks.context.code_for(value).strip()
        if isinstance(operator, cst.Equal) and truth:
            return _Guard(value_code, rank)
        if isinstance(operator, cst.NotEqual) and not truth:
            return _Guard(value_code, rank)
        # `rank > 0` false / `rank >= 1` false / `rank <= 0` true: rank 0 (ranks are >= 0).
        if value_code == "0" and (
            (isinstance(operator, cst.GreaterThan) and not truth)
            or (isinstance(operator, cst.LessThanEqual) and truth)
        ):
            return _Guard("0", rank)
        if value_code == "1" and (
            (isinstance(operator, cst.GreaterThanEqual) and not truth)
            or (isinstance(operator, cst.LessThan) and truth)
        ):
            return _Guard("0", rank)
        return None
    if ranks.is_rank(test) and not truth:  # `if rank: return`
        return _Guard("0", test)
    if truth and _last_name(test) in _ROOT_FLAGS:
        return _Guard(_FLAG, None)
    if isinstance(test, cst.Name) and depth > 0:
        bound = ranks.binding(test)
        if bound is not None and bound[1] is None and isinstance(bound[0], _TESTS):
            return _root_when(ranks, bound[0], truth, depth - 1)
    return None


_TESTS = (cst.Comparison, cst.BooleanOperation, cst.UnaryOperation)


def _flag_condition(ranks: _Ranks, flag: cst.BaseExpression, value: bool) -> str | None:
    """`only_rank_0` (or `not only_rank_0`), a parameter of the function whose default
    (`only_rank_0: bool = True`) makes it evaluate to `value`: the words for that; None for
    anything else. A call with the defaults then reads on the root only; a flag without
    such a default (`if rank == 0 or debug:`) may let every rank read."""
    while isinstance(flag, cst.UnaryOperation) and isinstance(flag.operator, cst.Not):
        flag, value = flag.expression, not value
    if not isinstance(flag, cst.Name):
        return None
    parameters = ranks.function.params
    default = next(
        (
            p.default
            for p in (*parameters.params, *parameters.kwonly_params)
            if p.name.value == flag.value
        ),
        None,
    )
    if not isinstance(default, cst.Name) or default.value != ("True" if value else "False"):
        return None
    return f"`{flag.value}` is {default.value}, its default"


def _given_test(context, test: cst.BaseExpression, truth: bool) -> str | None:
    """`x is not None` (when `truth`) or `x is None` (when not): the code of `x`."""
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
        return None
    comparison = test.comparisons[0]
    if not (isinstance(comparison.comparator, cst.Name) and comparison.comparator.value == "None"):
        return None
    if isinstance(comparison.operator, cst.IsNot if truth else cst.Is):
        return context.code_for(test.left).strip()
    return None


def _mirrored(operator: cst.BaseCompOp) -> cst.BaseCompOp:
    swaps: dict[type[cst.BaseCompOp], type[cst.BaseCompOp]] = {
        cst.GreaterThan: cst.LessThan,
        cst.LessThan: cst.GreaterThan,
        cst.GreaterThanEqual: cst.LessThanEqual,
        cst.LessThanEqual: cst.GreaterThanEqual,
    }
    swapped = swaps.get(type(operator))
    return swapped() if swapped is not None else operator


def _last_name(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.Call) and not node.args:
        node = node.func
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return node.attr.value
    return None


def _named_rank(context, node: cst.BaseExpression) -> bool:
    """`rank`, `self.rank`, `sp_rank`, `dist.get_rank(...)`, `group.rank()`,
    `get_tensor_model_parallel_rank()`, `int(rank)`; not `local_rank` or `node_rank` (one
    per machine)."""
    node = _unwrap_int(node)
    if isinstance(node, cst.Call):
        qualified = context.qualified_name(node.func)
        if qualified in (f"{_DIST}.get_rank", f"{_C10D}.get_rank"):
            return True
        name = _last_name(node.func)
        if name is None:
            return False
        if name == "rank" and isinstance(node.func, cst.Attribute) and not node.args:
            return True
        return (
            name == "get_rank" or re.match(r"^get_[a-z0-9_]*rank$", name) is not None
        ) and not _NOT_RANK.search(name[4:])
    name = _last_name(node) if isinstance(node, (cst.Name, cst.Attribute)) else None
    return name is not None and bool(_RANK_NAME.match(name)) and not _NOT_RANK.search(name)


def _unwrap_int(node: cst.BaseExpression) -> cst.BaseExpression:
    """`int(rank)` compares the same rank."""
    if (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Name)
        and node.func.value == "int"
        and len(node.args) == 1
        and node.args[0].keyword is None
        and not node.args[0].star
    ):
        return node.args[0].value
    return node


def _is_root_value(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.Integer):
        return True
    name = _last_name(node) if isinstance(node, (cst.Name, cst.Attribute)) else None
    return name is not None and bool(_ROOT_VALUE.match(name))


# -- what the fix needs to know ----------------------------------------------------------

_GLOBAL = "global"
_LIKE_TENSOR = "<like tensor>"
_LIKE_OTHER = "<like other>"
_LIKE_FACTORIES = {
    f"torch.{name}" for name in ("empty_like", "zeros_like", "ones_like", "full_like",
                                 "rand_like", "randn_like")
}  # fmt: skip
_SHAPE_FACTORIES = {"torch.empty", "torch.zeros", "torch.ones"}


class _Ranks:
    """What the rank expressions of one function denote, asked of the facts layer: the
    binding that reaches a name (`r = dist.get_rank(group)`; `rank, world = _rank_world(g)`),
    and helpers of the same module or class that return a rank (`self._rank()`)."""

    def __init__(self, context, function: cst.FunctionDef) -> None:
        self.context = context
        self.function = function
        self.facts = F.facts_for(context, function)
        self.loads = load_nodes(context, self.facts) if self.facts is not None else {}

    def binding(self, name: cst.BaseExpression) -> tuple[cst.BaseExpression, int | None] | None:
        """The value the one binding that reaches `name` assigns, and the name's position
        when that binding unpacks a tuple; None when several (or none) may reach."""
        if not isinstance(name, cst.Name) or self.facts is None:
            return None
        node = self.loads.get(id(name))
        if node is None:
            return None
        sites = self.facts.reaching(node, name.value)
        if len(sites) != 1:
            return None
        site = sites[0]
        if site.kind not in ("assign", "annassign") or site.value is None:
            return None
        if not site.unpacked:
            return site.value, None
        statement = site.node.statement if site.node is not None else None
        if not isinstance(statement, cst.Assign) or len(statement.targets) != 1:
            return None
        target = statement.targets[0].target
        if not isinstance(target, (cst.Tuple, cst.List)):
            return None
        for position, element in enumerate(target.elements):
            if element.value is site.target:
                return site.value, position
        return None

    def helper_return(self, call: cst.Call, position: int | None) -> tuple[cst.Call, dict] | None:
        """`_rank_world(group)` / `self._rank()`: a helper of this module or class whose one
        `return` gives `dist.get_rank(...)` (at `position` of a returned tuple): that call,
        and the helper's parameters bound to the caller's arguments."""
        if self.facts is None:
            return None
        helper = self.facts.local_callee(call)
        helper_facts = F.facts_for(self.context, helper) if helper is not None else None
        if helper is None or helper_facts is None:
            return None
        returns = [
            node.statement
            for node in helper_facts.cfg.nodes
            if isinstance(node.statement, cst.Return)
        ]
        if len(returns) != 1 or returns[0].value is None:
            return None
        value = returns[0].value
        if position is not None:
            if not isinstance(value, cst.Tuple) or position >= len(value.elements):
                return None
            value = value.elements[position].value
        elif isinstance(value, cst.Tuple):
            return None
        if not isinstance(value, cst.Call):
            return None
        params = [p.name.value for p in helper.params.params]
        if params and params[0] == "self" and isinstance(call.func, cst.Attribute):
            params = params[1:]
        bound = {name: arg.value for name, arg in zip(params, call.args) if arg.keyword is None}
        bound.update({arg.keyword.value: arg.value for arg in call.args if arg.keyword is not None})
        return value, bound

    def is_rank(self, node: cst.BaseExpression, depth: int = 2) -> bool:
        """A rank by its name or call (`_named_rank`), or a value that comes from one: a
        local bound to a rank (`r = dist.get_rank()`), a helper returning one."""
        node = _unwrap_int(node)
        if _named_rank(self.context, node):
            return True
        if depth <= 0:
            return False
        if isinstance(node, cst.Call):
            found = self.helper_return(node, None)
            return found is not None and self.is_rank(found[0], depth - 1)
        bound = self.binding(node)
        if bound is None:
            return False
        value, position = bound
        if position is None:
            return self.is_rank(value, depth - 1)
        if isinstance(value, cst.Call):
            found = self.helper_return(value, position)
            return found is not None and _named_rank(self.context, found[0])
        return False

    def kind(self, rank: cst.BaseExpression | None) -> object:
        """`_GLOBAL`, `("group", code)` or None (unknown) for the rank a guard compares."""
        if rank is None:
            return None
        rank = _unwrap_int(rank)
        if isinstance(rank, cst.Call):
            found = _rank_call_kind(self.context, rank)
            if found is None:
                helper = self.helper_return(rank, None)
                if helper is not None:
                    return _rank_call_kind(self.context, helper[0], helper[1])
            return found
        if isinstance(rank, cst.Attribute):
            value = _attribute_value(rank, self.function, self.context)
            return _rank_call_kind(self.context, value) if isinstance(value, cst.Call) else None
        bound = self.binding(rank)
        if bound is None:
            return None
        value, position = bound
        if not isinstance(value, cst.Call):
            return None
        if position is None:
            direct = _rank_call_kind(self.context, value)
            if direct is not None:
                return direct
        helper = self.helper_return(value, position)
        if helper is not None:
            return _rank_call_kind(self.context, helper[0], helper[1])
        return None


def _rank_call_kind(context, call: cst.Call, bound: dict | None = None) -> object:
    """The numbering of `dist.get_rank(group)` / `group.rank()`; inside a helper, `bound`
    maps its parameters to the caller's arguments (an unbound parameter: unknown)."""

    def group_code(group: cst.BaseExpression) -> str | None:
        if bound is not None and isinstance(group, cst.Name):
            if group.value not in bound:
                return None
            group = bound[group.value]
        return _normalise(context.code_for(group))

    qualified = context.qualified_name(call.func)
    if qualified in (f"{_DIST}.get_rank", f"{_C10D}.get_rank"):
        group = _arguments(call, ("group",)).get("group")
        if group is None or (isinstance(group, cst.Name) and group.value == "None"):
            return _GLOBAL
        code = group_code(group)
        return None if code is None else ("group", code)
    if isinstance(call.func, cst.Attribute) and call.func.attr.value == "rank" and not call.args:
        code = group_code(call.func.value)
        return None if code is None else ("group", code)
    return None


def _attribute_value(
    node: cst.Attribute, function: cst.FunctionDef, context
) -> cst.BaseExpression | None:
    """The value of the single `self.attr = ...` in the methods of the enclosing class."""
    if not (isinstance(node.value, cst.Name) and node.value.value == "self"):
        return None
    owner = F.file_facts(context).owners.get(id(function))
    if owner is None:
        return None
    finder = _AssignmentFinder(f"self.{node.attr.value}")
    visit(owner, finder)
    return finder.values[0] if len(finder.values) == 1 else None


class _AssignmentFinder(cst.CSTVisitor):
    def __init__(self, target: str) -> None:
        self.target = target
        self.values: list[cst.BaseExpression] = []

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            if dotted_name(target.target) == self.target:
                self.values.append(node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None and dotted_name(node.target) == self.target:
            self.values.append(node.value)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if dotted_name(node.target) == self.target:
            self.values.append(node.value)


def _buffer_shape(context, value: cst.BaseExpression, tensor_code: str) -> str | None:
    """How the receive buffers were made: `_LIKE_TENSOR` (copies of the sent tensor's shape),
    the code of a per-rank shapes iterable, `_LIKE_OTHER`, or None (not a buffer list)."""
    if not isinstance(value, cst.ListComp) or value.for_in.inner_for_in is not None:
        return None
    if value.for_in.ifs:
        return None
    element = value.elt
    if not isinstance(element, cst.Call):
        return None
    qualified = context.qualified_name(element.func)
    positional = [a.value for a in element.args if a.keyword is None and not a.star]
    if qualified in _LIKE_FACTORIES and positional:
        template = context.code_for(positional[0]).strip()
        return _LIKE_TENSOR if template == tensor_code else _LIKE_OTHER
    if isinstance(element.func, cst.Attribute) and not element.args:
        method = element.func.attr.value
        if method in ("clone", "detach") or method.endswith("_like"):
            owner = context.code_for(element.func.value).strip()
            return _LIKE_TENSOR if owner == tensor_code else _LIKE_OTHER
    target = value.for_in.target
    per_rank_shape = (
        positional
        and isinstance(target, cst.Name)
        and isinstance(positional[0], cst.Name)
        and positional[0].value == target.value
    )
    if per_rank_shape and (
        qualified in _SHAPE_FACTORIES
        or (isinstance(element.func, cst.Attribute) and element.func.attr.value == "new_empty")
    ):
        return context.code_for(value.for_in.iter).strip()
    if qualified in _SHAPE_FACTORIES or (
        isinstance(element.func, cst.Attribute) and element.func.attr.value == "new_empty"
    ):
        return _LIKE_OTHER
    return None


def _normalise(code: str) -> str:
    return re.sub(r"\s+", "", code)
