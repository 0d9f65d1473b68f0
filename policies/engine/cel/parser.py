"""Recursive-descent CEL parser producing `ast` nodes with source offsets.

Binary operators are parsed with an operator stack, so Python's recursion depth grows only with
real nesting (parentheses, brackets, calls), which is bounded by MAX_DEPTH. `&&`/`||` chains are
built as balanced trees (they are associative and commutative in CEL), as cel-go does.
Macros (`has`, `all`, `exists`, `exists_one`, `map`, `filter`) are expanded here.
"""

from __future__ import annotations

from .ast import (
    And,
    Call,
    Comprehension,
    Conditional,
    Has,
    Ident,
    ListLit,
    Literal,
    MapLit,
    Node,
    Or,
    Select,
)
from .deadline import deadline_check
from .lexer import KEYWORDS, RESERVED, LexError, Token, tokenize
from .values import INT_MAX

MAX_SOURCE_LENGTH = 10_000
MAX_DEPTH = 100

# Binary operators by precedence (higher binds tighter); all are left-associative.
_PRECEDENCE = {
    "||": 1,
    "&&": 2,
    "==": 3,
    "!=": 3,
    "<": 3,
    "<=": 3,
    ">": 3,
    ">=": 3,
    "in": 3,
    "+": 4,
    "-": 4,
    "*": 5,
    "/": 5,
    "%": 5,
}
_FUNCTION = {
    "==": "_==_",
    "!=": "_!=_",
    "<": "_<_",
    "<=": "_<=_",
    ">": "_>_",
    ">=": "_>=_",
    "in": "@in",
    "+": "_+_",
    "-": "_-_",
    "*": "_*_",
    "/": "_/_",
    "%": "_%_",
}
_MACROS = {"all": (2,), "exists": (2,), "exists_one": (2,), "map": (2, 3), "filter": (2,)}
_TOKEN_NAMES = {"eof": "end of input", "ident": "identifier", "string": "string", "int": "number"}


class ParseError(Exception):
    """A syntax error at a source offset."""

    def __init__(self, message: str, pos: int) -> None:
        super().__init__(message)
        self.message = message
        self.pos = pos


class _Chain:
    """A run of `&&` or `||` operands, turned into a balanced tree when complete."""

    __slots__ = ("cls", "items", "ops")

    def __init__(self, cls: type[And], items: list[Node], ops: list[int]) -> None:
        self.cls, self.items, self.ops = cls, items, ops


def parse(source: str) -> Node:
    """The syntax tree of `source`, or ParseError (only the first syntax error is reported)."""
    if len(source) > MAX_SOURCE_LENGTH:
        raise ParseError(
            f"expression is too long: {len(source)} characters (the limit is {MAX_SOURCE_LENGTH})",
            0,
        )
    try:
        tokens = tokenize(source)
    except LexError as e:
        raise ParseError(e.message, e.pos) from None
    return _Parser(tokens).parse_all()


class _Parser:
    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.i = 0
        self.nesting = 0
        self.made_count = 0

    # -- helpers -----------------------------------------------------------------------------
    @property
    def tok(self) -> Token:
        return self.tokens[self.i]

    def advance(self) -> Token:
        t = self.tokens[self.i]
        self.i += 1
        return t

    def at(self, kind: str) -> bool:
        return self.tokens[self.i].kind == kind

    def expect(self, kind: str, what: str) -> Token:
        if not self.at(kind):
            self.error_here(f"expected {what}")
        return self.advance()

    def error_here(self, expectation: str) -> None:
        t = self.tok
        raise ParseError(f"{expectation}, found {_describe(t)}", t.pos)

    def made(self, node: Node) -> Node:
        """Sets the node's depth and enforces MAX_DEPTH."""
        self.made_count += 1
        if not self.made_count & 1023:  # a request's wall-clock guard covers parsing too
            deadline_check()
        children = node.children()
        if children:
            node.depth = 1 + max(c.depth for c in children)
            if node.depth > MAX_DEPTH:
                raise ParseError(
                    f"expression is nested too deeply (more than {MAX_DEPTH} levels)", node.pos
                )
        return node

    # -- grammar -----------------------------------------------------------------------------
    def parse_all(self) -> Node:
        if self.at("eof"):
            raise ParseError("empty expression", 0)
        node = self.parse_expr()
        if not self.at("eof"):
            t = self.tok
            if t.kind == ")":
                raise ParseError("unbalanced ')': no '(' to close", t.pos)
            if t.kind in ("]", "}"):
                raise ParseError(f"unbalanced '{t.kind}'", t.pos)
            self.error_here("expected an operator or the end of the expression")
        return node

    def parse_expr(self) -> Node:
        self.nesting += 1
        if self.nesting > MAX_DEPTH:
            raise ParseError(
                f"expression is nested too deeply (more than {MAX_DEPTH} levels)", self.tok.pos
            )
        cond = self.parse_binary()
        if self.at("?"):
            q = self.advance()
            if_true = self.parse_binary()
            self.expect(":", "':' of the conditional 'c ? a : b'")
            if_false = self.parse_expr()
            cond = self.made(Conditional(q.pos, cond, if_true, if_false))
        self.nesting -= 1
        return cond

    def parse_binary(self) -> Node:
        operands: list[Node | _Chain] = [self.parse_unary()]
        ops: list[Token] = []
        while True:
            t = self.tok
            op = t.kind if t.kind != "ident" else t.value
            prec = _PRECEDENCE.get(op) if (t.kind != "ident" or t.value == "in") else None
            if prec is None:
                break
            while ops and _PRECEDENCE[_op_name(ops[-1])] >= prec:
                self.reduce(operands, ops.pop())
            ops.append(self.advance())
            if self.at("eof") or self.tok.kind in (")", "]", "}", ",", ":", "?"):
                raise ParseError(f"missing operand after '{op}'", self.tok.pos)
            operands.append(self.parse_unary())
        while ops:
            self.reduce(operands, ops.pop())
        return self.finish(operands[0])

    def reduce(self, operands: list[Node | _Chain], op: Token) -> None:
        right = operands.pop()
        left = operands.pop()
        name = _op_name(op)
        if name in ("&&", "||"):
            cls = And if name == "&&" else Or
            items: list[Node] = []
            positions: list[int] = []
            for part in (left, right):
                if isinstance(part, _Chain) and part.cls is cls:
                    if items:
                        positions.append(op.pos)
                    items.extend(part.items)
                    positions.extend(part.ops)
                else:
                    if items:
                        positions.append(op.pos)
                    items.append(self.finish(part))
            operands.append(_Chain(cls, items, positions))
            return
        node = Call(op.pos, _FUNCTION[name], [self.finish(left), self.finish(right)])
        operands.append(self.made(node))

    def finish(self, part: Node | _Chain) -> Node:
        if isinstance(part, Node):
            return part
        return self.balance(part.cls, part.items, part.ops)

    def balance(self, cls: type[And], items: list[Node], ops: list[int]) -> Node:
        if len(items) == 1:
            return items[0]
        mid = len(items) // 2
        left = self.balance(cls, items[:mid], ops[: mid - 1])
        right = self.balance(cls, items[mid:], ops[mid:])
        return self.made(cls(ops[mid - 1], left, right))

    def parse_unary(self) -> Node:
        t = self.tok
        if t.kind not in ("!", "-"):
            return self.parse_member()
        signs: list[Token] = []
        while self.at(t.kind):
            signs.append(self.advance())
        if (
            t.kind == "-"
            and len(signs) == 1
            and self.at("int")
            and self.tokens[self.i + 1].kind not in (".", "[")
        ):
            # A single '-' belongs to the literal, so -9223372036854775808 is representable;
            # after two or more the literal stands alone (cel-go's grammar: sign? NUM_INT).
            lit = self.advance()
            value = -lit.value
            if value < -INT_MAX - 1:
                raise ParseError("int literal out of range (min -9223372036854775808)", lit.pos)
            signs.pop()
            operand = self.parse_member_suffix(Literal(lit.pos, value))
        else:
            operand = self.parse_member()
        # As in cel-go and cel-cpp, an even run of '!' or '-' cancels out.
        if len(signs) % 2 == 1:
            function = "!_" if t.kind == "!" else "-_"
            operand = self.made(Call(signs[-1].pos, function, [operand]))
        return operand

    def parse_member(self) -> Node:
        return self.parse_member_suffix(self.parse_primary())

    def parse_member_suffix(self, node: Node) -> Node:
        while True:
            if self.at("."):
                self.advance()
                name = self.tok
                if name.kind != "ident" or name.value in KEYWORDS:
                    self.error_here("expected a field or method name after '.'")
                self.advance()
                if self.at("("):
                    open_paren = self.advance()
                    args = self.parse_args(")", open_paren)
                    node = self.member_call(node, name, args)
                else:
                    node = self.made(Select(name.pos, node, name.value))
            elif self.at("["):
                open_bracket = self.advance()
                index = self.parse_expr()
                self.close("]", open_bracket)
                node = self.made(Call(open_bracket.pos, "_[_]", [node, index]))
            elif self.at("{") and isinstance(node, (Ident, Select)):
                raise ParseError(
                    "object construction (Type{field: value}) is not supported", self.tok.pos
                )
            else:
                return node

    def close(self, kind: str, opener: Token) -> None:
        if self.at(kind):
            self.advance()
            return
        t = self.tok
        if t.kind == "eof":
            raise ParseError(f"unbalanced '{opener.kind}': missing '{kind}'", opener.pos)
        self.error_here(f"expected ',' or '{kind}'")

    def parse_args(self, closer: str, opener: Token) -> list[Node]:
        args: list[Node] = []
        if self.at(closer):
            self.advance()
            return args
        while True:
            args.append(self.parse_expr())
            if self.at(","):
                self.advance()
                if self.at(closer) and closer != ")":
                    break
                continue
            break
        self.close(closer, opener)
        return args

    def parse_primary(self) -> Node:
        t = self.tok
        kind = t.kind
        if kind == "int":
            self.advance()
            if t.value > INT_MAX:
                raise ParseError("int literal out of range (max 9223372036854775807)", t.pos)
            return Literal(t.pos, t.value)
        if kind in ("uint", "double", "string", "bytes"):
            self.advance()
            return Literal(t.pos, t.value)
        if kind == "(":
            self.advance()
            if self.at(")"):
                self.error_here("expected an expression inside '()'")
            node = self.parse_expr()
            self.close(")", t)
            return node
        if kind == "[":
            self.advance()
            elements = self.parse_args("]", t)
            return self.made(ListLit(t.pos, elements))
        if kind == "{":
            self.advance()
            return self.parse_map(t)
        if kind == ".":
            self.advance()
            if not self.at("ident"):
                self.error_here("expected an identifier after a leading '.'")
            t = self.tok
        if t.kind == "ident":
            return self.parse_ident()
        if kind == "eof":
            raise ParseError("missing operand: the expression ends early", t.pos)
        if kind in (")", "]", "}"):
            raise ParseError(f"missing operand before '{kind}'", t.pos)
        if kind in _PRECEDENCE or kind in ("?", ":", ",", "."):
            raise ParseError(f"missing operand before '{kind}'", t.pos)
        self.error_here("expected an expression")
        raise AssertionError("unreachable")

    def parse_ident(self) -> Node:
        t = self.advance()
        name = t.value
        if name == "true" or name == "false":
            return Literal(t.pos, name == "true")
        if name == "null":
            return Literal(t.pos, None)
        if name == "in":
            raise ParseError("missing operand before 'in'", t.pos)
        if name in RESERVED:
            raise ParseError(f"'{name}' is a reserved word and cannot be used as a name", t.pos)
        if self.at("("):
            open_paren = self.advance()
            args = self.parse_args(")", open_paren)
            if name == "has":
                return self.has_macro(t, args)
            return self.made(Call(t.pos, name, args))
        return Ident(t.pos, name)

    def parse_map(self, opener: Token) -> Node:
        entries: list[tuple[Node, Node]] = []
        while not self.at("}"):
            key = self.parse_expr()
            self.expect(":", "':' between a map key and its value")
            value = self.parse_expr()
            entries.append((key, value))
            if self.at(","):
                self.advance()
                continue
            break
        self.close("}", opener)
        return self.made(MapLit(opener.pos, entries))

    def has_macro(self, t: Token, args: list[Node]) -> Node:
        if len(args) != 1 or not isinstance(args[0], Select):
            pos = args[0].pos if args else t.pos
            raise ParseError("has() takes one field selection, like has(pod.labels.app)", pos)
        sel = args[0]
        return self.made(Has(t.pos, sel.operand, sel.field))

    def member_call(self, target: Node, name: Token, args: list[Node]) -> Node:
        arities = _MACROS.get(name.value)
        if arities is None or len(args) not in arities:
            if name.value in RESERVED:
                raise ParseError(
                    f"'{name.value}' is a reserved word and cannot be a method", name.pos
                )
            return self.made(Call(name.pos, name.value, args, target))
        var = args[0]
        if not isinstance(var, Ident):
            raise ParseError(
                f"the first argument of {name.value}() must be a simple variable name", var.pos
            )
        kind = name.value
        predicate: Node | None
        transform: Node | None = None
        if kind == "map":
            if len(args) == 3:
                predicate, transform = args[1], args[2]
            else:
                predicate, transform = None, args[1]
        else:
            predicate = args[1]
        node = Comprehension(name.pos, kind, target, var.name, var.pos, predicate, transform)
        return self.made(node)


def _op_name(t: Token) -> str:
    return "in" if t.kind == "ident" else t.kind


def _describe(t: Token) -> str:
    if t.kind == "eof":
        return "the end of the expression"
    if t.kind == "ident":
        return f"'{t.value}'"
    if t.kind in ("string", "bytes"):
        return "a string literal"
    if t.kind in ("int", "uint", "double"):
        return "a number"
    return f"'{t.kind}'"
