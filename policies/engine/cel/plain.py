"""Type errors in plain words. The checker words an operator or function applied to the wrong
types as cel-go does ("no matching overload for '<' applied to (string, int); expected ...");
what a policy author needs first is what went wrong and the usual fix. `plain_message` rewrites
those messages; the checker's own text stays available beside it (FieldError.cel_message), for
whoever knows CEL or searches for it."""

from __future__ import annotations

import re

_NO_OVERLOAD = re.compile(
    r"^no matching overload for (?P<label>unary '-'|index '\[\]'|'[^']+') applied to "
    r"\((?P<args>.*?)\)(?:; (?P<rest>.*))?$",
    re.S,
)
_NUMBERS = ("int", "uint", "double")
_COMPARE = ("<", "<=", ">", ">=")
_ARITHMETIC = ("+", "-", "*", "/", "%")
_NAMES = {"null_type": "null", "dyn": "value of unknown type"}


def _split(args: str) -> list[str]:
    """`string, map(string, int)` -> ["string", "map(string, int)"]: commas at depth 0 only."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(args):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(args[start:i].strip())
            start = i + 1
    tail = args[start:].strip()
    return [*parts, tail] if tail or parts else []


def _a(kind: str) -> str:
    """`int` -> "an int", `list(int)` -> "a list of int": the type with its article."""
    name = _NAMES.get(kind, kind)
    if name.startswith("list(") and name.endswith(")"):
        name = f"list of {name[5:-1]}"
    elif name.startswith("map("):
        name = "map"
    return ("an " if name[:1] in "aeio" else "a ") + name  # a uint: "you-int"


def _numbers_hint(kinds: list[str]) -> str:
    mixed = [k for k in kinds if k in _NUMBERS]
    if len(set(mixed)) < 2:
        return ""
    return (
        "CEL never converts numbers implicitly (1 == 1.0 is an error): wrap one side in "
        "double(...), int(...) or uint(...)"
    )


def plain_message(message: str) -> str | None:
    """The plain-language version of a checker message, or None when it is already plain."""
    found = _NO_OVERLOAD.match(message)
    if found is None:
        return None
    label, kinds = found["label"], _split(found["args"])
    expected = (found["rest"] or "").removeprefix("expected ")
    op = label.strip("'")
    numbers = _numbers_hint(kinds)
    if len(kinds) == 2 and op in (*_COMPARE, "==", "!="):
        left, right = kinds
        if "null_type" in kinds and op in ("==", "!="):
            other = right if left == "null_type" else left
            return (
                f"{_a(other)} is never null in CEL: to check that a field or key is there, "
                "use has(pod.labels.app) or 'app' in pod.labels"
            )
        said = f"'{op}' cannot compare {_a(left)} with {_a(right)}"
        if numbers:
            return f"{said}; {numbers}"
        if "string" in kinds and {left, right} & set(_NUMBERS):
            return (
                f'{said}; convert one side: int("42") reads a number from a string, '
                "string(42) writes one (a label value is always a string)"
            )
        return f"{said}; both sides must have the same type"
    if len(kinds) == 2 and op in _ARITHMETIC:
        left, right = kinds
        said = f"'{op}' cannot combine {_a(left)} and {_a(right)}"
        if numbers:
            return f"{said}; {numbers}"
        if op == "+" and "string" in kinds:
            return f"{said}; '+' joins two strings: wrap the other side in string(...)"
        if op == "+":
            return f"{said}; both sides must have the same type (numbers of one kind, strings or lists)"
        return f"{said}; both sides must be numbers of the same kind"
    if op in ("!", "&&", "||") or label == "unary '-'":
        return f"{label} does not apply to {' and '.join(_a(k) for k in kinds)}"
    if label == "index '[]'" and len(kinds) == 2:
        return f"{_a(kinds[0])} cannot be indexed with {_a(kinds[1])}"
    if op == "in" and len(kinds) == 2:
        said = f"'in' cannot look for {_a(kinds[0])} in {_a(kinds[1])}"
        if kinds[1] == "string":
            return f"{said}; 'in' looks in a list or a map's keys: for text, use .contains(...)"
        return f"{said}; 'in' looks in a list or a map's keys"
    member = bool(kinds) and f"{kinds[0]}.{op}(" in expected
    receiver, args = (f"{kinds[0]}.", kinds[1:]) if member else ("", kinds)
    given = " and ".join(_a(k) for k in args) if args else "no arguments"
    said = f"{receiver}{op}(...) cannot take {given}"
    return f"{said}; it takes {expected}" if expected else said
