"""Type checking: resolves names, fields, functions and overloads against an `Env`, annotating
every node with its static type. Collects every issue instead of stopping at the first."""

from __future__ import annotations

from policies.engine.inputs import resource_key
from policies.engine.quantity import QuantityError, parse_quantity

from . import ast
from . import types as t
from .deadline import deadline_check
from .library import FUNCTIONS, NAMESPACES, Overload, global_functions, methods_for
from .regex import RegexError, compile_regex
from .suggest import did_you_mean, distance
from .types import BOOL, DYN, ERROR, INT, STRING, Type
from .values import UInt

STANDARD_RESOURCES = ("cpu", "memory", "ephemeral_storage", "storage", "pods")
_ARITHMETIC = frozenset(
    ("_+_", "_-_", "_*_", "_/_", "_%_", "_<_", "_<=_", "_>_", "_>=_", "_==_", "_!=_")
)
_REGEX_FUNCTIONS = frozenset(("matches", "find", "findAll"))
_OPERATOR_LABEL = {
    "_+_": "'+'",
    "_-_": "'-'",
    "_*_": "'*'",
    "_/_": "'/'",
    "_%_": "'%'",
    "-_": "unary '-'",
    "!_": "'!'",
    "_==_": "'=='",
    "_!=_": "'!='",
    "_<_": "'<'",
    "_<=_": "'<='",
    "_>_": "'>'",
    "_>=_": "'>='",
    "@in": "'in'",
    "_[_]": "index '[]'",
}

RESOURCE_INDEX = Overload(
    "index_resources",
    "_[_]",
    (t.RESOURCES, STRING),
    INT,
    impl=lambda r, k: r.get(resource_key(k), 0),
)


def check_resource_name(name: str) -> str | None:
    """None if `name` may be a resource field, else the message (typos of standard names)."""
    if name in STANDARD_RESOURCES:
        return None
    near = sorted(STANDARD_RESOURCES, key=lambda s: distance(name, s))
    if distance(name, near[0]) <= 2:
        hint = "" if "_" in name else " (extended resources are named like nvidia_com_gpu)"
        return f"unknown resource '{name}'; did you mean '{near[0]}'?{hint}"
    if "_" in name:
        return None
    return (
        f"unknown resource '{name}': standard resources are cpu, memory, ephemeral_storage, "
        "storage and pods; extended resources are written with '_' for '.', '/' and '-' "
        "(nvidia.com/gpu is nvidia_com_gpu)"
    )


class Checker:
    """Checks one tree. `issues` holds (offset, message) pairs; node types are set in place."""

    def __init__(self, variables: dict[str, Type]) -> None:
        self.variables = variables
        self.issues: list[tuple[int, str]] = []
        self.scopes: list[ast.Comprehension] = []
        self.slots = 0
        self.checked = 0

    def error(self, pos: int, message: str) -> Type:
        self.issues.append((pos, message))
        return ERROR

    def check(self, node: ast.Node) -> Type:
        self.checked += 1
        if not self.checked & 1023:  # a request's wall-clock guard covers type checking too
            deadline_check()
        method = getattr(self, "_" + type(node).__name__.lower())
        typ = method(node)
        node.type = typ
        return typ

    # -- leaves ------------------------------------------------------------------------------
    def _literal(self, node: ast.Literal) -> Type:
        v = node.value
        if v is None:
            return t.NULL
        if isinstance(v, bool):
            return BOOL
        if isinstance(v, UInt):
            return t.UINT
        if isinstance(v, int):
            return INT
        if isinstance(v, float):
            return t.DOUBLE
        if isinstance(v, str):
            return STRING
        return t.BYTES

    def _ident(self, node: ast.Ident) -> Type:
        for scope in reversed(self.scopes):
            if scope.var == node.name:
                node.binding = scope
                return scope.var_type
        if node.name in self.variables:
            return self.variables[node.name]
        if node.name in t.TYPE_NAMES:
            return t.type_of(t.TYPE_NAMES[node.name])
        if node.name in NAMESPACES:
            return self.error(
                node.pos, f"'{node.name}' is a namespace of functions, like {node.name}.abs(x)"
            )
        names = [s.var for s in self.scopes] + list(self.variables) + list(t.TYPE_NAMES)
        return self.error(
            node.pos, f"undeclared reference '{node.name}'" + did_you_mean(node.name, names)
        )

    # -- selection -----------------------------------------------------------------------------
    def _select(self, node: ast.Select) -> Type:
        operand = self.check(node.operand)
        return self.field_type(operand, node.field, node.pos, node)

    def field_type(self, operand: Type, field: str, pos: int, node: ast.Select | None) -> Type:
        if operand.is_dyn:
            return operand
        if operand.kind == "object":
            if field in operand.fields:
                return operand.fields[field]
            if not operand.fields:
                methods = ", ".join(methods_for(operand)) or "none"
                return self.error(pos, f"{operand} has no fields (its methods: {methods})")
            hint = did_you_mean(field, operand.fields)
            return self.error(pos, f"undefined field '{field}' on {operand}{hint}")
        if operand.kind == "resources":
            problem = check_resource_name(field)
            if problem:
                return self.error(pos, problem)
            if node is not None:
                node.resource_key = field
            return INT
        if operand.kind == "map":
            if operand.key.kind not in ("string", "dyn"):
                return self.error(
                    pos, f"cannot select field '{field}' from {operand}: keys are not strings"
                )
            return operand.elem
        return self.error(pos, f"cannot select field '{field}' from a value of type {operand}")

    def _has(self, node: ast.Has) -> Type:
        operand = self.check(node.operand)
        if operand.kind in ("object", "resources", "map") or operand.is_dyn:
            if operand.kind == "resources":
                problem = check_resource_name(node.field)
                if problem:
                    self.error(node.pos, problem)
            else:
                self.field_type(operand, node.field, node.pos, None)
            return BOOL
        return self.error(node.pos, f"has() needs a map or object field, not a field of {operand}")

    # -- logic -----------------------------------------------------------------------------------
    def _and(self, node: ast.And) -> Type:
        op = "&&" if type(node) is ast.And else "||"
        for side in (node.left, node.right):
            typ = self.check(side)
            if typ != BOOL and not typ.is_dyn:
                self.error(ast.start(side), f"operands of '{op}' must be bool, got {typ}")
        return BOOL

    _or = _and

    def _conditional(self, node: ast.Conditional) -> Type:
        cond = self.check(node.cond)
        if cond != BOOL and not cond.is_dyn:
            self.error(ast.start(node.cond), f"the condition of '?:' must be bool, got {cond}")
        a = self.check(node.if_true)
        b = self.check(node.if_false)
        if a == ERROR or b == ERROR:
            return ERROR
        joined = t.join(a, b)
        if joined is None:
            return self.error(
                node.pos,
                f"the branches of '?:' have different types: {a} and {b} (wrap one in dyn() to allow it)",
            )
        return joined

    # -- literals -------------------------------------------------------------------------------
    def _listlit(self, node: ast.ListLit) -> Type:
        elems = [self.check(e) for e in node.elements]
        return t.list_of(t.most_general(elems))

    def _maplit(self, node: ast.MapLit) -> Type:
        keys, values = [], []
        seen: dict[object, int] = {}
        for k, v in node.entries:
            kt = self.check(k)
            if kt.kind not in ("int", "uint", "bool", "string") and not kt.is_dyn:
                self.error(ast.start(k), f"map keys must be int, uint, bool or string, got {kt}")
            if isinstance(k, ast.Literal):
                marker = (type(k.value) is bool, k.value)
                if marker in seen:
                    self.error(k.pos, f"duplicate map key {k.value!r}")
                seen[marker] = k.pos
            keys.append(kt)
            values.append(self.check(v))
        return t.map_of(t.most_general(keys), t.most_general(values))

    # -- macros ---------------------------------------------------------------------------------
    def _comprehension(self, node: ast.Comprehension) -> Type:
        rng = self.check(node.iter_range)
        if rng.kind == "list":
            elem = rng.elem
        elif rng.kind in ("map", "resources"):
            elem = rng.key
        elif rng.is_dyn:
            elem = DYN
        else:
            self.error(
                ast.start(node.iter_range), f"{node.kind}() needs a list or a map, got {rng}"
            )
            elem = ERROR
        node.var_type = elem
        node.slot = self.slots
        self.slots += 1
        self.scopes.append(node)
        try:
            if node.predicate is not None:
                pt = self.check(node.predicate)
                if pt != BOOL and not pt.is_dyn:
                    what = "the condition of" if node.kind != "map" else "the filter of"
                    self.error(
                        ast.start(node.predicate), f"{what} {node.kind}() must be bool, got {pt}"
                    )
            tt = self.check(node.transform) if node.transform is not None else None
        finally:
            self.scopes.pop()
        if node.kind in ("all", "exists", "exists_one"):
            return BOOL
        if node.kind == "filter":
            return t.list_of(elem)
        assert tt is not None
        return t.list_of(tt)

    # -- calls ------------------------------------------------------------------------------------
    def _call(self, node: ast.Call) -> Type:
        target = node.target
        if (
            isinstance(target, ast.Ident)
            and not self._declared(target.name)
            and f"{target.name}.{node.function}" in FUNCTIONS
        ):
            node.function = f"{target.name}.{node.function}"
            node.target = None
        elif (
            isinstance(target, ast.Ident)
            and target.name in NAMESPACES
            and not self._declared(target.name)
        ):
            qualified = f"{target.name}.{node.function}"
            known = [n for n in FUNCTIONS if n.startswith(target.name + ".")]
            for a in node.args:
                self.check(a)
            return self.error(
                node.pos, f"unknown function '{qualified}'" + did_you_mean(qualified, known)
            )
        args = [self.check(a) for a in node.operands]
        if ERROR in args:
            return ERROR
        if node.function in ("math.greatest", "math.least"):
            return self._greatest(node, args)
        if node.function == "_[_]" and args[0].kind == "resources":
            return self._resource_index(node, args)
        member = node.target is not None
        overloads = [ov for ov in FUNCTIONS.get(node.function, []) if ov.member == member]
        if not overloads:
            return self._unknown_function(node, args)
        matched: list[tuple[Overload, Type]] = []
        for ov in overloads:
            if len(ov.params) != len(args):
                continue
            bindings: dict[str, Type] = {}
            if all(t.is_assignable(p, a, bindings) for p, a in zip(ov.params, args)):
                matched.append((ov, t.substitute(ov.result, bindings)))
        if not matched:
            return self._no_overload(node, args, overloads)
        node.overloads = [ov for ov, _ in matched]
        if node.function in _REGEX_FUNCTIONS:
            self._check_pattern(node.operands[1])
        if node.function == "quantity":
            self._check_quantity(node.operands[0])
        results = {r for _, r in matched}
        return results.pop() if len(results) == 1 else DYN

    def _check_pattern(self, pattern: ast.Node) -> None:
        """Literal patterns are compiled now, so RE2-incompatible syntax is a compile issue."""
        if isinstance(pattern, ast.Literal) and isinstance(pattern.value, str):
            try:
                compile_regex(pattern.value)
            except RegexError as e:
                self.error(pattern.pos, str(e))

    def _check_quantity(self, text: ast.Node) -> None:
        """A literal quantity is parsed now: a malformed or absurd one (5000 digits) is a
        compile issue at its position, not an error on every node."""
        if isinstance(text, ast.Literal) and isinstance(text.value, str):
            try:
                parse_quantity(text.value)
            except QuantityError as e:
                self.error(text.pos, str(e))

    def _declared(self, name: str) -> bool:
        return name in self.variables or any(s.var == name for s in self.scopes)

    def _resource_index(self, node: ast.Call, args: list[Type]) -> Type:
        key = node.args[1]
        if args[1] != STRING and not args[1].is_dyn:
            return self.error(key.pos, f"resource names are strings, got {args[1]}")
        if isinstance(key, ast.Literal) and isinstance(key.value, str):
            key.value = resource_key(key.value)  # "nvidia.com/gpu" -> "nvidia_com_gpu"
            problem = check_resource_name(key.value)
            if problem:
                return self.error(key.pos, problem)
        node.overloads = [RESOURCE_INDEX]
        return INT

    def _greatest(self, node: ast.Call, args: list[Type]) -> Type:
        name = node.function
        if not args:
            return self.error(node.pos, f"{name}() needs at least one argument")
        if len(args) == 1 and args[0].kind == "list":
            elem = args[0].elem
            if isinstance(node.args[0], ast.ListLit) and not node.args[0].elements:
                return self.error(node.args[0].pos, f"{name}() of an empty list has no value")
            if elem.kind not in ("int", "uint", "double") and not elem.is_dyn:
                return self.error(node.args[0].pos, f"{name}() needs numbers, got {args[0]}")
            node.overloads = [ov for ov in FUNCTIONS[name] if ov.params[0].elem == elem] or list(
                FUNCTIONS[name]
            )
            return elem
        for a, typ in zip(node.args, args):
            if typ.kind not in ("int", "uint", "double") and not typ.is_dyn:
                return self.error(a.pos, f"{name}() needs numbers, got {typ}")
        node.overloads = []
        kinds = set(args)
        return kinds.pop() if len(kinds) == 1 else DYN

    def _unknown_function(self, node: ast.Call, args: list[Type]) -> Type:
        name = node.function
        if node.target is not None:
            receiver = args[0]
            candidates = (
                methods_for(receiver)
                if not receiver.is_dyn
                else sorted({ov.function for ovs in FUNCTIONS.values() for ov in ovs if ov.member})
            )
            is_global = any(not ov.member for ov in FUNCTIONS.get(name, []))
            if is_global:
                return self.error(
                    node.pos, f"'{name}' is a function, not a method: write {name}(...)"
                )
            hint = did_you_mean(name, candidates)
            if not hint and candidates and not receiver.is_dyn:
                hint = f" ({receiver} methods: {', '.join(candidates)})"
            return self.error(node.pos, f"unknown method '{name}' on {receiver}{hint}")
        if any(ov.member for ov in FUNCTIONS.get(name, [])):
            return self.error(node.pos, f"'{name}' is a method: write value.{name}(...)")
        candidates = global_functions() + [n for n in FUNCTIONS if "." in n]
        return self.error(node.pos, f"unknown function '{name}'" + did_you_mean(name, candidates))

    def _no_overload(self, node: ast.Call, args: list[Type], overloads: list[Overload]) -> Type:
        name = node.function
        label = _OPERATOR_LABEL.get(name, f"'{name}'")
        shown = ", ".join(str(a) for a in args)
        message = f"no matching overload for {label} applied to ({shown})"
        numeric = {a.kind for a in args} & {"int", "uint", "double"}
        if name in _ARITHMETIC and len(numeric) > 1:
            message += (
                "; CEL never mixes int, uint and double implicitly: convert one side with "
                "double(...), int(...) or uint(...)"
            )
        elif len(overloads) <= 6:
            message += "; expected " + " or ".join(ov.signature() for ov in overloads)
        return self.error(node.pos, message)
