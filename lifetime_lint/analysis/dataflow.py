"""Backward liveness and forward reaching definitions over a `CFG`, as int bitsets.

Liveness (may): a name is live at a point if some path from there reads it before it is
rebound or deleted. `del x` reads x (it needs x bound) and then kills it. A node reached
through an exceptional edge sees the state before the raising node's definitions, so
`live_in(n)` includes `live_in` of every exceptional successor. A dynamic read
(`locals()`, `eval`, ...) reads every local; a narrowed one (`Node.dynamic_names`) reads
only the names it can take.

Reaching definitions (may): which `DefSite`s can be the current binding of a name at a
point. Entry pseudo-definitions mark parameters and "unbound" for other locals, and a
`del` produces a "deleted" pseudo-definition, so "x is definitely bound here" is "neither
x's unbound nor any of its deleted sites reaches". An exception edge carries the union of
the raising node's in- and out-state (it may raise before or after binding).

Cost: bit operations on Python ints; iterations to a fixed point in reverse (liveness) or
forward (reaching) creation order, typically 2 to 4 passes.
"""

from __future__ import annotations

from dataclasses import dataclass

from lifetime_lint.analysis.cfg import CFG, DefSite


@dataclass
class Dataflow:
    cfg: CFG
    live_in: list[int]
    live_out: list[int]  # over normal successors only
    reach_in: list[int]
    reach_out: list[int]
    sites_of: dict[str, int]  # name -> bitset of every DefSite of that name

    def name_bit(self, name: str) -> int:
        index = self.cfg.name_index.get(name)
        return 0 if index is None else 1 << index

    def reaching(self, bits: int, name: str) -> list[DefSite]:
        """The definitions of `name` in a reaching-definitions bitset."""
        mask = bits & self.sites_of.get(name, 0)
        result = []
        while mask:
            low = mask & -mask
            result.append(self.cfg.defs[low.bit_length() - 1])
            mask ^= low
        return result


def solve(cfg: CFG, max_passes: int = 50) -> Dataflow:
    nodes = cfg.nodes
    count = len(nodes)
    index = cfg.name_index
    all_names = (1 << len(cfg.names)) - 1

    uses = [0] * count
    kills = [0] * count  # names (re)bound or deleted by the node
    for node in nodes:
        if node.dynamic:
            uses[node.index] = all_names
        else:
            bits = 0
            for name in node.loads:
                position = index.get(name.value)
                if position is not None:
                    bits |= 1 << position
            for read in node.dynamic_names:
                position = index.get(read)
                if position is not None:
                    bits |= 1 << position
            uses[node.index] = bits
        bits = 0
        for site in node.defs:
            if site.kind not in ("unbound", "param"):
                bits |= 1 << index[site.name]
        for site in node.kills:
            bits |= 1 << index[site.name]
        kills[node.index] = bits

    # -- liveness (backward) -------------------------------------------------------
    live_in = [0] * count
    live_out = [0] * count
    order = list(reversed(nodes))
    for _ in range(max_passes):
        changed = False
        for node in order:
            i = node.index
            out = 0
            for successor in node.succ:
                out |= live_in[successor.index]
            exceptional = 0
            for successor in node.esucc:
                exceptional |= live_in[successor.index]
            new_in = uses[i] | (out & ~kills[i]) | exceptional
            live_out[i] = out
            if new_in != live_in[i]:
                live_in[i] = new_in
                changed = True
        if not changed:
            break

    # -- reaching definitions (forward) ----------------------------------------------
    sites_of: dict[str, int] = {}
    for site in cfg.defs:
        sites_of[site.name] = sites_of.get(site.name, 0) | (1 << site.index)
    gen = [0] * count
    kill = [0] * count
    for node in nodes:
        g = 0
        k = 0
        for site in list(node.defs) + list(node.kills):
            k |= sites_of[site.name]
        for site in list(node.defs) + list(node.kills):
            g |= 1 << site.index
        gen[node.index] = g
        kill[node.index] = k
    reach_in = [0] * count
    reach_out = [0] * count
    # Exceptional predecessors, computed once.
    epreds: list[list[int]] = [[] for _ in range(count)]
    for node in nodes:
        for successor in node.esucc:
            epreds[successor.index].append(node.index)
    for _ in range(max_passes):
        changed = False
        for node in nodes:
            i = node.index
            state = 0
            for predecessor in node.preds:
                state |= reach_out[predecessor.index]
            for p in epreds[i]:
                state |= reach_in[p] | reach_out[p]
            if state != reach_in[i]:
                reach_in[i] = state
                changed = True
            out = (state & ~kill[i]) | gen[i]
            if out != reach_out[i]:
                reach_out[i] = out
                changed = True
        if not changed:
            break
    return Dataflow(cfg, live_in, live_out, reach_in, reach_out, sites_of)
