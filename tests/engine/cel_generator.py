"""A seeded generator of random, well-typed CEL expressions over `pod` and `node`, for the
differential test. Each expression is built for a wanted result type from typed productions, so
it always type-checks; some of them fail at run time (missing keys, overflow, division by zero),
which is the point: errors must agree with the oracle too.

It avoids what the oracle cannot see the same way (see cel_cases): `size()`, `in`, `has()` and
iteration on resource maps, cluster helpers, quantities, `type(pod)`, and lists built by
iterating a map (CEL leaves map order unspecified).
"""

from __future__ import annotations

import random
import re

_RESOURCES = ("cpu", "memory", "pods", "ephemeral_storage", "nvidia_com_gpu", "hugepages_2Mi")
_STRINGS = (
    '"a"',
    '"zone"',
    '"node-a"',
    '"gpu"',
    '""',
    '"é"',
    '"-"',
    '"NoSchedule"',
    '"true"',
    '"  x "',
)
_LABEL_KEYS = ('"zone"', '"app"', '"team"', '"nvidia.com/gpu.present"', '"kubernetes.io/hostname"')


_MARKED = re.compile(r"«(\w)\|([^«»]*)»")
_CASTS = {"s": "string", "i": "int", "b": "bool"}


def render(expression: str, *, for_oracle: bool) -> str:
    """The expression as we compile it, or as the oracle compiles it: the oracle sees pod and
    node as map(string, dyn), so typed input fields are wrapped in an identity conversion
    (`string(node.name)`) to give its checker the static types ours has."""
    if not for_oracle:
        return _MARKED.sub(lambda m: m.group(2), expression)
    return _MARKED.sub(lambda m: f"{_CASTS[m.group(1)]}({m.group(2)})", expression)


def s(text: str) -> str:
    return f"«s|{text}»"


def i(text: str) -> str:
    return f"«i|{text}»"


def b(text: str) -> str:
    return f"«b|{text}»"


class ExpressionGenerator:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.scope: list[tuple[str, str]] = []  # macro variables in reach: (name, type)
        self.counter = 0

    def expressions(self, count: int) -> list[str]:
        out = []
        kinds = ["bool", "int", "string", "double", "list_int", "list_string", "uint", "dyn"]
        for i in range(count):
            self.scope = []
            out.append(self.gen(kinds[i % len(kinds)], 4))
        return out

    def pick(self, *options):
        return self.rng.choice(options)

    def gen(self, kind: str, depth: int) -> str:
        method = getattr(self, "g_" + kind)
        return method(max(depth, 0))

    def var(self, kind: str) -> str | None:
        names = [n for n, k in self.scope if k == kind]
        if not names:
            return None
        name = self.rng.choice(names)
        return {"string": s, "int": i, "bool": b}.get(kind, str)(name)

    def fresh(self) -> str:
        self.counter += 1
        return f"v{self.counter}"

    # -- leaves and productions by type ------------------------------------------------------------
    def g_int(self, d: int) -> str:
        leaves = [
            lambda: self.pick(
                "0",
                "1",
                "2",
                "3",
                "7",
                "10",
                "100",
                "-1",
                "-7",
                "1000",
                "9223372036854775807",
                "-9223372036854775808",
                "4611686018427387904",
            ),
            lambda: i(f"node.allocatable.{self.pick(*_RESOURCES)}"),
            lambda: i(f"node.requested.{self.pick(*_RESOURCES)}"),
            lambda: i(f"pod.requests.{self.pick(*_RESOURCES)}"),
            lambda: i(self.pick("node.podCount", "pod.priority")),
            lambda: self.var("int") or i("node.podCount"),
        ]
        if d <= 0:
            return self.rng.choice(leaves)()
        options = [
            *leaves,
            lambda: (
                f"({self.g_int(d - 1)} {self.pick('+', '-', '*', '/', '%')} {self.g_int(d - 1)})"
            ),
            lambda: f"-({self.g_int(d - 1)})",
            lambda: f"size({self.g_string(d - 1)})",
            lambda: f"{self.g_list_int(d - 1)}.size()",
            lambda: f"({self.g_bool(d - 1)} ? {self.g_int(d - 1)} : {self.g_int(d - 1)})",
            lambda: f"int({self.g_double(d - 1)})",
            lambda: f"int({self.g_uint(d - 1)})",
            lambda: f"int({self.g_string(d - 1)})",
            lambda: f"{self.g_string(d - 1)}.indexOf({self.g_string(d - 1)})",
            lambda: f"math.greatest({self.g_int(d - 1)}, {self.g_int(d - 1)})",
            lambda: f"math.least([{self.g_int(d - 1)}, {self.g_int(d - 1)}, {self.g_int(d - 1)}])",
            lambda: f"math.abs({self.g_int(d - 1)})",
            lambda: f"{self.g_list_int(d - 1)}[{self.pick('0', '1', '2', '-1')}]",
            lambda: f"int({self.g_dyn(d - 1)})",
            lambda: f"{self.g_dyn(d - 1)} + {self.g_int(d - 1)}",
        ]
        return self.rng.choice(options)()

    def g_uint(self, d: int) -> str:
        leaves = [
            lambda: self.pick("0u", "1u", "7u", "18446744073709551615u", "9223372036854775808u")
        ]
        if d <= 0:
            return leaves[0]()
        options = [
            *leaves,
            lambda: (
                f"({self.g_uint(d - 1)} {self.pick('+', '-', '*', '/', '%')} {self.g_uint(d - 1)})"
            ),
            lambda: f"uint({self.g_int(d - 1)})",
            lambda: f"uint({self.g_double(d - 1)})",
            lambda: f"math.greatest({self.g_uint(d - 1)}, {self.g_uint(d - 1)})",
        ]
        return self.rng.choice(options)()

    def g_double(self, d: int) -> str:
        leaves = [
            lambda: self.pick("0.0", "1.5", "-2.25", "1e300", "0.1", "3.0", "1e-7", "100.0"),
            lambda: f"double({i('node.allocatable.' + self.pick(*_RESOURCES))})",
            lambda: self.var("double") or "0.5",
        ]
        if d <= 0:
            return self.rng.choice(leaves)()
        options = [
            *leaves,
            lambda: (
                f"({self.g_double(d - 1)} {self.pick('+', '-', '*', '/')} {self.g_double(d - 1)})"
            ),
            lambda: f"-({self.g_double(d - 1)})",
            lambda: f"double({self.g_int(d - 1)})",
            lambda: f"double({self.g_string(d - 1)})",
            lambda: f"double({self.g_uint(d - 1)})",
            lambda: (
                f"math.{self.pick('ceil', 'floor', 'round', 'trunc', 'abs')}({self.g_double(d - 1)})"
            ),
            lambda: f"math.greatest({self.g_double(d - 1)}, {self.g_double(d - 1)})",
            lambda: f"({self.g_bool(d - 1)} ? {self.g_double(d - 1)} : {self.g_double(d - 1)})",
            lambda: (
                f"double({i('node.requested.cpu')}) / double({i('node.allocatable.cpu')}) * 100.0"
            ),
        ]
        return self.rng.choice(options)()

    def g_string(self, d: int) -> str:
        leaves = [
            lambda: self.pick(*_STRINGS),
            lambda: s(
                self.pick("node.name", "pod.name", "pod.namespace", "pod.qosClass", "pod.ownerKind")
            ),
            lambda: s(f"node.labels[{self.pick(*_LABEL_KEYS)}]"),
            lambda: s(f"pod.labels[{self.pick(*_LABEL_KEYS)}]"),
            lambda: self.var("string") or s("node.name"),
        ]
        if d <= 0:
            return self.rng.choice(leaves)()
        options = [
            *leaves,
            lambda: f"({self.g_string(d - 1)} + {self.g_string(d - 1)})",
            lambda: f"string({self.g_int(d - 1)})",
            lambda: f"string({self.g_double(d - 1)})",
            lambda: f"string({self.g_uint(d - 1)})",
            lambda: f"string({self.g_bool(d - 1)})",
            lambda: (
                f"{self.g_string(d - 1)}.{self.pick('lowerAscii', 'upperAscii', 'trim', 'reverse')}()"
            ),
            lambda: f"{self.g_string(d - 1)}.substring({self.pick('0', '1', '2')})",
            # Two-argument substring is left out: cel-cpp 0.1.3 rejects end == size() (see
            # test_cel_functions for the spec's worked examples).
            lambda: f"{self.g_string(d - 1)}.charAt({self.pick('0', '1', '3')})",
            lambda: f"{self.g_string(d - 1)}.replace({self.g_string(0)}, {self.g_string(0)})",
            lambda: (
                f"{self.g_list_string(d - 1)}.join({self.pick('', chr(34) + ',' + chr(34))})".replace(
                    ".join()", ".join()"
                )
            ),
            lambda: f"({self.g_bool(d - 1)} ? {self.g_string(d - 1)} : {self.g_string(d - 1)})",
            lambda: f"{self.g_list_string(d - 1)}[{self.pick('0', '1')}]",
            lambda: f"string({self.g_dyn(d - 1)})",
        ]
        return self.rng.choice(options)()

    def g_bool(self, d: int) -> str:
        leaves = [
            lambda: self.pick("true", "false", b("node.unschedulable")),
            lambda: self.var("bool") or "true",
            lambda: f"({self.pick(*_LABEL_KEYS)} in node.labels)",
            lambda: "has(node.labels.zone)",
        ]
        if d <= 0:
            return self.rng.choice(leaves)()
        t = self.pick("int", "double", "string", "uint", "bool")
        options = [
            *leaves,
            lambda: (
                f"({self.gen(t, d - 1)} {self.pick('==', '!=', '<', '<=', '>', '>=')} {self.gen(t, d - 1)})"
            ),
            lambda: f"({self.g_bool(d - 1)} {self.pick('&&', '||')} {self.g_bool(d - 1)})",
            lambda: f"!{self.g_bool(d - 1)}",
            lambda: (
                f"{self.g_string(d - 1)}.{self.pick('startsWith', 'endsWith', 'contains')}({self.g_string(d - 1)})"
            ),
            lambda: (
                f"{self.g_string(d - 1)}.matches({self.pick(chr(34) + '^[a-z]+' + chr(34), chr(34) + '[0-9]$' + chr(34), chr(34) + 'a|b' + chr(34))})"
            ),
            lambda: f"({self.g_int(d - 1)} in {self.g_list_int(d - 1)})",
            lambda: f"({self.g_string(d - 1)} in {self.g_list_string(d - 1)})",
            lambda: self.macro_bool(d),
            lambda: f"({self.g_dyn(d - 1)} == {self.gen(t, d - 1)})",
            lambda: f"({self.g_list_int(d - 1)} == {self.g_list_int(d - 1)})",
            lambda: (
                f"has({self.pick('node.object.metadata.labels', 'pod.object.spec.priority', 'node.object.spec.podCIDR')})"
            ),
            lambda: f"math.isNaN({self.g_double(d - 1)})",
        ]
        return self.rng.choice(options)()

    def macro_bool(self, d: int) -> str:
        v = self.fresh()
        form = self.pick("list_int", "labels", "taints", "list_string")
        macro = self.pick("all", "exists", "exists_one")
        if form == "list_int":
            rng, kind = self.g_list_int(d - 1), "int"
        elif form == "list_string":
            rng, kind = self.g_list_string(d - 1), "string"
        elif form == "labels":
            rng, kind = self.pick("node.labels", "pod.labels", "node.annotations"), "string"
        else:
            self.scope.append((v, "taint"))
            body = self.pick(
                f'{s(v + ".effect")} == "NoSchedule"',
                f'{s(v + ".key")}.startsWith("node")',
                f'{s(v + ".value")} == ""',
            )
            self.scope.pop()
            return f"{self.pick('node.taints')}.{macro}({v}, {body})"
        self.scope.append((v, kind))
        body = self.g_bool(d - 1)
        self.scope.pop()
        return f"{rng}.{macro}({v}, {body})"

    def g_list_int(self, d: int) -> str:
        leaves = [lambda: self.pick("[]", "[1, 2, 3]", "[0, -1]", "[9223372036854775807, 1]")]
        if d <= 0:
            return leaves[0]()
        v = self.fresh()

        def mapped() -> str:
            src = self.g_list_int(d - 1)
            self.scope.append((v, "int"))
            body = self.g_int(d - 1)
            self.scope.pop()
            return f"{src}.map({v}, {body})"

        def filtered() -> str:
            src = self.g_list_int(d - 1)
            self.scope.append((v, "int"))
            body = self.g_bool(d - 1)
            self.scope.pop()
            return f"{src}.filter({v}, {body})"

        options = [
            *leaves,
            lambda: f"[{self.g_int(d - 1)}, {self.g_int(d - 1)}]",
            lambda: f"({self.g_list_int(d - 1)} + {self.g_list_int(d - 1)})",
            mapped,
            filtered,
            lambda: f"{self.g_list_string(d - 1)}.map({v}, size({v}))",
        ]
        return self.rng.choice(options)()

    def g_list_string(self, d: int) -> str:
        leaves = [
            lambda: self.pick(
                '["a", "b"]', "[]", '["zone", ""]', f"[{s('node.name')}, {s('pod.name')}]"
            )
        ]
        if d <= 0:
            return leaves[0]()
        options = [
            *leaves,
            lambda: (
                f"{self.g_string(d - 1)}.split({self.pick(chr(34) + '-' + chr(34), chr(34) + chr(34), chr(34) + '.' + chr(34))})"
            ),
            lambda: f"({self.g_list_string(d - 1)} + {self.g_list_string(d - 1)})",
            lambda: f"{self.g_list_int(d - 1)}.map(x, string(x))",
            lambda: f"node.taints.map(t, {s('t.key')})",
            lambda: f"pod.tolerations.map(t, {s('t.operator')})",
        ]
        return self.rng.choice(options)()

    def g_dyn(self, d: int) -> str:
        leaves = [
            lambda: self.pick(
                "node.object.metadata.name",
                "pod.object.spec.priority",
                "node.object.spec.weights[0]",
                "node.object.spec.weights[1]",
                "node.object.status.capacity.cpu",
                "pod.object.metadata.annotations",
                "node.object.metadata.labels.zone",
                "node.object.status.phase",
                "pod.object.spec.containers[0].name",
            )
        ]
        if d <= 0:
            return leaves[0]()
        options = [
            *leaves,
            lambda: f"dyn({self.gen(self.pick('int', 'double', 'string', 'uint'), d - 1)})",
            lambda: (
                f"({self.g_bool(d - 1)} ? dyn({self.g_int(d - 1)}) : dyn({self.g_string(d - 1)}))"
            ),
            lambda: f"[1, 'a', 2.5][{self.pick('0', '1', '2')}]",
        ]
        return self.rng.choice(options)()
