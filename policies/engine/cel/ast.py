"""The CEL syntax tree. Nodes carry their source offset; the checker annotates `type` and the
resolved function overloads in place, so a Program's tree is private to it."""

from __future__ import annotations

from typing import Any


class Node:
    """Base: `pos` is the source offset reported in issues; `type` is set by the checker."""

    __slots__ = ("depth", "pos", "type")

    def __init__(self, pos: int) -> None:
        self.pos = pos
        self.type: Any = None
        self.depth = 1

    def children(self) -> tuple[Node, ...]:
        return ()


class Literal(Node):
    __slots__ = ("value",)

    def __init__(self, pos: int, value: Any) -> None:
        super().__init__(pos)
        self.value = value


class Ident(Node):
    """A name: an input (`pod`), a macro variable, or a type name (`int`)."""

    __slots__ = ("binding", "name")

    def __init__(self, pos: int, name: str) -> None:
        super().__init__(pos)
        self.name = name
        self.binding: Comprehension | None = None  # set by the checker for macro variables


class Select(Node):
    """`operand.field`; `pos` is the field name's offset."""

    __slots__ = ("field", "operand", "resource_key")

    def __init__(self, pos: int, operand: Node, field: str) -> None:
        super().__init__(pos)
        self.operand = operand
        self.field = field
        self.resource_key: str | None = None

    def children(self) -> tuple[Node, ...]:
        return (self.operand,)


class Has(Node):
    """`has(operand.field)`."""

    __slots__ = ("field", "operand")

    def __init__(self, pos: int, operand: Node, field: str) -> None:
        super().__init__(pos)
        self.operand = operand
        self.field = field

    def children(self) -> tuple[Node, ...]:
        return (self.operand,)


class Call(Node):
    """A function, method or operator call (`_+_`, `size`, `s.contains(t)`, `math.greatest`).

    `target` is the receiver of a method call. The checker sets `overloads` (the candidates
    that fit the static argument types) and `qualified` (a namespaced global like `math.abs`).
    """

    __slots__ = ("args", "function", "overloads", "target")

    def __init__(
        self, pos: int, function: str, args: list[Node], target: Node | None = None
    ) -> None:
        super().__init__(pos)
        self.function = function
        self.args = args
        self.target = target
        self.overloads: list[Any] = []

    def children(self) -> tuple[Node, ...]:
        return ((self.target,) if self.target is not None else ()) + tuple(self.args)

    @property
    def operands(self) -> list[Node]:
        """Receiver then arguments: the parameter list overloads are matched against."""
        return ([self.target] if self.target is not None else []) + self.args


class And(Node):
    __slots__ = ("left", "right")

    def __init__(self, pos: int, left: Node, right: Node) -> None:
        super().__init__(pos)
        self.left, self.right = left, right

    def children(self) -> tuple[Node, ...]:
        return (self.left, self.right)


class Or(And):
    __slots__ = ()


class Conditional(Node):
    __slots__ = ("cond", "if_false", "if_true")

    def __init__(self, pos: int, cond: Node, if_true: Node, if_false: Node) -> None:
        super().__init__(pos)
        self.cond, self.if_true, self.if_false = cond, if_true, if_false

    def children(self) -> tuple[Node, ...]:
        return (self.cond, self.if_true, self.if_false)


class ListLit(Node):
    __slots__ = ("elements",)

    def __init__(self, pos: int, elements: list[Node]) -> None:
        super().__init__(pos)
        self.elements = elements

    def children(self) -> tuple[Node, ...]:
        return tuple(self.elements)


class MapLit(Node):
    __slots__ = ("entries",)

    def __init__(self, pos: int, entries: list[tuple[Node, Node]]) -> None:
        super().__init__(pos)
        self.entries = entries

    def children(self) -> tuple[Node, ...]:
        return tuple(n for kv in self.entries for n in kv)


class Comprehension(Node):
    """A macro over a list or a map's keys: `kind` is all, exists, exists_one, map or filter.

    `predicate` is the condition (all/exists/exists_one/filter, and map's optional filter),
    `transform` map's result expression. `slot` numbers the variable for the interpreter.
    """

    __slots__ = (
        "iter_range",
        "kind",
        "predicate",
        "slot",
        "transform",
        "var",
        "var_pos",
        "var_type",
    )

    def __init__(
        self,
        pos: int,
        kind: str,
        iter_range: Node,
        var: str,
        var_pos: int,
        predicate: Node | None,
        transform: Node | None,
    ) -> None:
        super().__init__(pos)
        self.kind = kind
        self.iter_range = iter_range
        self.var = var
        self.var_pos = var_pos
        self.predicate = predicate
        self.transform = transform
        self.slot = 0
        self.var_type: Any = None  # the variable's static type, set by the checker

    def children(self) -> tuple[Node, ...]:
        out: tuple[Node, ...] = (self.iter_range,)
        if self.predicate is not None:
            out += (self.predicate,)
        if self.transform is not None:
            out += (self.transform,)
        return out


def walk(node: Node):
    """Every node of the tree, parents before children (iterative: trees may be deep)."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n.children()))


def start(node: Node) -> int:
    """Offset where the node's source text begins (a node's `pos` is its operator or name)."""
    while True:
        if isinstance(node, (Select, Comprehension)):
            nxt = node.operand if isinstance(node, Select) else node.iter_range
        elif isinstance(node, Call) and node.target is not None:
            nxt = node.target
        elif isinstance(node, Call) and node.args and node.args[0].pos < node.pos:
            nxt = node.args[0]  # binary operators and index: the left operand comes first
        elif isinstance(node, And):
            nxt = node.left
        elif isinstance(node, Conditional):
            nxt = node.cond
        else:
            return node.pos
        node = nxt
