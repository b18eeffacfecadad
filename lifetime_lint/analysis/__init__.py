"""Flow analyses over LibCST function bodies, shared by rules that reason about lifetimes.

`cfg.build(function)` builds a statement-level control-flow graph of one function (every
statement form, exceptional edges included) with per-node uses, definitions and deletions;
`dataflow.solve(graph)` runs backward liveness and forward reaching definitions over it
(definitely-bound falls out of the latter). Both are purpose-built: no LibCST metadata
provider is resolved, and a function is walked once.

`facts.facts_for(context, function)` is what rules use: the CFG and dataflow of the
function plus value facts per binding and work facts per call, built once per function and
memoised on the file context (`tables` is the one place that knows torch; `significance`
rates a finding by its likely bytes at the peak of what it is held across).
"""

from lifetime_lint.analysis.cfg import CFG, DefSite, Node, StatementInfo, build
from lifetime_lint.analysis.dataflow import Dataflow, solve

__all__ = ["CFG", "Dataflow", "DefSite", "Node", "StatementInfo", "build", "solve"]
