"""schedweb's CEL: parser, type checker, cost estimator, exact interpreter and Python code generator.

    env = policy_env({"freeCpu": types.INT})
    program = compile_expression("variables.freeCpu >= pod.requests.cpu", env,
                                 cost_limit=1_000_000, expect=(types.BOOL,))
    program.evaluate({"pod": pod, "node": node, "variables": {"freeCpu": 3000}},
                     cost_limit=1_000_000)                       # exact path
    ctx = CodegenContext({"pod": "pod", "node": "node", "variables.freeCpu": "v_freeCpu"})
    source = program.emit(ctx)                                   # fast path; globals in ctx.globals

Semantics are cel-go's and cel-cpp's, checked against cel-expr-python by
tests/engine/test_cel_differential.py. Modules, in pipeline order:
    lexer, parser, ast   source -> syntax tree with offsets (macros expanded, depth bounded)
    types, env           static types, input declarations (policy_env)
    library, functions   every function and operator: overloads, implementations, costs
    checker, suggest     type checking with "did you mean" suggestions
    bounds, cost         declared input sizes and the static worst-case cost
    values, runtime      uint and type values; CEL operators, equality, conversions
    regex                RE2 (google-re2): validation, size bounds, cache
    interpreter          the exact path (closures, error absorption, cost counting)
    codegen              the fast path (Python source driven by static types)
    program              compile_expression and Program
"""

from . import types
from .codegen import CodegenContext
from .env import Env, policy_env, queue_env
from .errors import CelCompileError, CelCostError, CelError, CelEvalError, Issue
from .program import Program, compile_expression

__all__ = [
    "CelCompileError",
    "CelCostError",
    "CelError",
    "CelEvalError",
    "CodegenContext",
    "Env",
    "Issue",
    "Program",
    "compile_expression",
    "policy_env",
    "queue_env",
    "types",
]
