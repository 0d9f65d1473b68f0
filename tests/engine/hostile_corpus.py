"""The hostile policies of issue 27 (round two), shared by the engine's tests and the entry
points' (the preview, `evaluate`; the extender's later).

Every document is within the document limits; on the code before issue 27 each was also within
the cost budget and ran for seconds to minutes per node (times are the issue's, or measured on
the development machine at f860bf1 for the cases added here). Each case says what must happen
now:

- "rejected": validation refuses it with a positioned error (`where`: the kind of error and a
  text it contains), the estimate now seeing what the operation reads or produces;
- "cost": it compiles, and every node's evaluation stops at the run-time cost budget;
- "budget": it compiles and each node is within every cost budget, but there are many of them:
  only the request's time budget (deadline.budget, the preview's guard) bounds it;
- "ok": it evaluates normally, quickly.
"""

from __future__ import annotations

import json

HEADER = "name: t\nschedulerNames: [schedweb]\n"


def numbers(n: int) -> str:
    return "[" + ", ".join(str(i) for i in range(n)) + "]"


def text(chars: int, fill: str = "x") -> str:
    """A CEL expression building `chars` characters (within the 10 000-character limit of an
    expression): a list of literal chunks joined, one list entry per 9000 characters."""
    chunks = -(-chars // 9000)
    width = chars // chunks
    return f'{numbers(chunks)}.map(i, "{fill * width}").join()'


def rule(name: str, expression: str, more: dict[str, str] | None = None) -> str:
    lines = f"  - name: {name}\n    expression: {json.dumps(expression)}\n"
    return lines + "".join(f"    {k}: {json.dumps(v)}\n" for k, v in (more or {}).items())


def document(*, variables=(), filters=(), scores=(), failure_policy: str | None = None) -> str:
    out = HEADER
    if failure_policy:
        out += f"failurePolicy: {failure_policy}\n"
    for section, rules in (("variables", variables), ("filters", filters), ("scores", scores)):
        if rules:
            out += f"{section}:\n" + "".join(rule(*r) for r in rules)
    return out


L100 = numbers(100)
BIG_A = ("a", text(900_000))  # two equal 900 KB strings, distinct objects
BIG_B = ("b", text(900_000))


def looped(body: str, outer: int = 1000, inner: int = 100) -> str:
    """`body` evaluated outer x inner times (100 000 by default): within the old estimate."""
    return f"{numbers(outer)}.all(i, {numbers(inner)}.all(j, {body}))"


def refused_loop(variables, body: str, outer: int = 1000, inner: int = 100):
    """A case: `body` over `variables` in a loop, refused now because the estimate sees what
    each step reads."""
    text = document(variables=variables, filters=[("f", looped(body, outer, inner))])
    return text, "rejected", ("cost", "the all() over")


NEEDLE = [("hay", '"' + "a" * 2400 + '"'), ("pin", f'"{"a" * 600}b{"a" * 599}"')]
BIG_MAP = [BIG_A, BIG_B, ("m", "{variables.a: 1}")]
LONG_LIST = f'{L100}.map(i, "{"x" * 9000}")'


# ten filters of ~1 M units each that the generated code cannot decide: a division by zero
# first (the generated code raises, the node goes to the exact path), then a loop the exact
# path runs whole, 0.7 s per node for the ten (35 s over the demo cluster in the issue)
_L1000, _L90 = numbers(1000), numbers(90)
_EXACT = (
    "(1 / (node.name.size() - node.name.size()) == 1) || "
    f"{_L1000}.all(x, {_L90}.all(y, x + y + node.name.size() >= 0))"
)
_NINE_KB = " && ".join(["node.name.size() >= 0"] * 360)  # 9 KB of CEL


def _alias_bomb() -> str:
    """37 KB of YAML whose aliases repeat a 9 KB expression 256 times: 2.5 MB of CEL."""
    out = HEADER + "variables:\n"
    out += f"  - name: v0\n    expression: &e {json.dumps(_NINE_KB)}\n"
    out += "".join(f"  - name: v{i}\n    expression: *e\n" for i in range(1, 64))
    for section in ("matchConditions", "filters"):
        out += f"{section}:\n" + "".join(
            f"  - name: {section[0]}{i}\n    expression: *e\n" for i in range(64)
        )
    out += "scores:\n" + "".join(f"  - name: s{i}\n    expression: *e\n" for i in range(64))
    return out


CORPUS: dict[str, tuple[str, str, tuple[str, str] | None]] = {
    # -- the issue's ----------------------------------------------------------------------------
    # 100 000 comparisons of two equal 900 KB strings per node (7 s per node): each now costs
    # the common length, ceil(900 000 / 10) = 90 000
    "string equality of 900 KB strings in a loop": refused_loop(
        [BIG_A, BIG_B], "variables.a == variables.b"
    ),
    "ordering of 900 KB strings in a loop": refused_loop(
        [BIG_A, BIG_B], "variables.a <= variables.b"
    ),
    # `in` a list compares each element as equality does
    "`in` a list of a 900 KB string in a loop": refused_loop(
        [BIG_A, BIG_B], "variables.a in [variables.b]", 900
    ),
    # an empty pattern matches 900 001 times, each match a search and a list entry (3.8 s)
    "findAll with an empty pattern over 900 KB": (
        document(variables=[BIG_A], filters=[("f", 'variables.a.findAll("").size() > 0')]),
        "rejected",
        ("cost", "findAll() on variables.a"),
    ),
    # every search reads to the end of the text: n^2 / 2 characters (13 minutes per node)
    "quadratic findAll over 1 M characters": (
        document(
            variables=[("m", text(999_000, "a"))],
            filters=[("f", 'variables.m.findAll("a.*?b|a").size() > 0')],
        ),
        "rejected",
        ("cost", "findAll() on variables.m"),
    ),
    "ten 1 M-unit filters pushed onto the exact path": (
        document(filters=[(f"f{k}", _EXACT) for k in range(10)]),
        "budget",
        None,
    ),
    "aliases expanding 37 KB into 2.5 MB of CEL": (
        _alias_bomb(),
        "rejected",
        ("yaml", "expands to more than 256 KiB of text"),
    ),
    # -- added here ----------------------------------------------------------------------------
    # CPython's substring search is O(n x m) below 2500 characters: 0.28 ms a call here, and
    # 3840 calls per node fit the old charge (the haystack's traversal, 240)
    "contains with a needle that almost matches everywhere": refused_loop(
        NEEDLE, "!variables.hay.contains(variables.pin)", 60, 64
    ),
    "lastIndexOf with a needle that almost matches everywhere": refused_loop(
        NEEDLE, "variables.hay.lastIndexOf(variables.pin) < 0", 40, 64
    ),
    # a map lookup hashes its key and compares it with the key found: 900 KB each time
    "a map looked up by a 900 KB key in a loop": refused_loop(
        BIG_MAP, "variables.m[variables.b] == 1"
    ),
    "`in` a map of a 900 KB key in a loop": refused_loop(BIG_MAP, "variables.b in variables.m"),
    # lists of long strings: equality walks 100 elements and compares 9000 characters at each
    "equality of lists of long strings in a loop": refused_loop(
        [("la", LONG_LIST), ("lb", LONG_LIST)], "variables.la == variables.lb", 90
    ),
    "isSorted over long equal strings in a loop": refused_loop(
        [("la", LONG_LIST)], "variables.la.isSorted()", 90
    ),
    # a pattern computed in each iteration is compiled in each: [\p{Greek}\p{Han}]{100} took
    # 4 ms a compile, while the search itself is charged 26 x 7 (1000 per node: 4 s)
    "a distinct regex compiled in every iteration": (
        document(
            filters=[
                (
                    "f",
                    f"{numbers(1000)}.all(i, "
                    '!node.name.matches(string(i) + "[\\\\p{Greek}\\\\p{Han}]{100}"))',
                )
            ]
        ),
        "rejected",
        ("cost", "the all() over"),
    ),
    "a 5000-digit quantity": (
        document(filters=[("f", 'quantity("' + "9" * 5000 + '").isInteger()')]),
        "rejected",
        ("type", "5000 digits, at most 64"),
    ),
    # within its estimate (a label value is at most 63 characters), but the cluster given to
    # the preview or `evaluate` is a file: its label holds 1 M characters. The generated code
    # hands the node over at the first search past the estimate, the exact path stops at the
    # budget (1 M units: 10 searches).
    "quadratic findAll over a label larger than declared": (
        document(filters=[("f", 'node.labels.huge.findAll("a.*?b|a").size() > 0')]),
        "cost",
        None,
    ),
    "filter messages with NUL, ANSI escapes and a bidi override": (
        document(
            filters=[
                (
                    "f",
                    "false",
                    {"message": '"\\u001b[31mred\\u0000 \\u202egnp.exe " + node.name'},
                )
            ]
        ),
        "ok",
        None,
    ),
}

# The label the "larger than declared" case reads, on every node of its cluster.
HUGE_LABEL = "a" * 1_000_000
