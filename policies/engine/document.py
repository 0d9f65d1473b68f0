"""Policy documents: parsing YAML/JSON text and checking its structure.

One validator serves the form, the API, the preview and publish, so the playground can never
accept what publish rejects. It collects every error at once, keyed by field path
(`scores[2].weight`), and knows where each field sits in the source text so that a CEL error at
line 1, column 9 of `filters[0].expression` can also be shown at its line in the document.
CEL checking itself happens in `policy.py`; this module owns the shape of the document, and
`spec_build.py` builds a PolicySpec from a parsed document, collecting every error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from .cel.deadline import deadline_check
from .printable import printable

MAX_DOCUMENT_BYTES = 256 * 1024
MAX_RULES = 64
MAX_EXPRESSION_CHARS = 10_000
MAX_WEIGHT = 100

# Documents are bounded before any work is done on them (issue 15): nesting depth (PyYAML and
# every walk below recurse), nodes after alias expansion (a 600-byte alias bomb expands to
# billions), and digits of an integer (Python refuses to convert more than 4300).
MAX_DEPTH = 64
MAX_NODES = 100_000
MAX_INT_DIGITS = 40

# Names are checked with fullmatch: `$` with .match would accept a trailing newline.
POLICY_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
RULE_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# CEL's reserved words cannot name a variable (`variables.in` would not parse).
CEL_RESERVED = frozenset(
    {
        "true",
        "false",
        "null",
        "in",
        "as",
        "break",
        "const",
        "continue",
        "else",
        "for",
        "function",
        "if",
        "import",
        "let",
        "loop",
        "package",
        "namespace",
        "return",
        "var",
        "void",
        "while",
    }
)


def is_variable_name(name: str) -> bool:
    return bool(VARIABLE_NAME.fullmatch(name)) and name not in CEL_RESERVED


SCHEDULER_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")

FAILURE_POLICIES = ("Ignore", "Fail")
NORMALIZE_MODES = ("none", "minmax")

TOP_LEVEL_FIELDS = (
    "name",
    "description",
    "schedulerNames",
    "failurePolicy",
    "matchConditions",
    "variables",
    "filters",
    "scores",
    "queue",
    "gang",
    "tests",
)
RULE_FIELDS = {
    "matchConditions": ("name", "expression"),
    "variables": ("name", "expression"),
    "filters": ("name", "expression", "message", "unresolvable"),
    "scores": ("name", "expression", "weight", "normalize"),
    "tests": ("name", "pod", "cluster", "expect"),
}


@dataclass(frozen=True)
class FieldError:
    """One problem in a policy document.

    `path` names the field (`filters[0].expression`); `line`/`column` are 1-based positions inside
    that field's CEL expression (CEL errors only); `doc_line`/`doc_column` are the same place in
    the document text when it is known.
    """

    path: str
    message: str
    kind: str = "schema"  # schema, syntax, type, cost, yaml
    rule: str | None = None
    line: int | None = None
    column: int | None = None
    doc_line: int | None = None
    doc_column: int | None = None
    # a type error's message in the checker's (cel-go's) own words, when `message` says it in
    # plain ones (policies/engine/cel/plain.py)
    cel_message: str | None = None

    def __post_init__(self) -> None:
        # messages quote the document (`unknown field '...'`): shown escaped everywhere
        object.__setattr__(self, "path", printable(self.path))
        object.__setattr__(self, "message", printable(self.message))
        if self.cel_message is not None:
            object.__setattr__(self, "cel_message", printable(self.cel_message))

    def __str__(self) -> str:
        where = self.path or "document"
        if self.line is not None:
            where += f" (line {self.line}, column {self.column})"
        return f"{where}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "message": self.message,
            "kind": self.kind,
            "rule": self.rule,
            "line": self.line,
            "column": self.column,
            "docLine": self.doc_line,
            "docColumn": self.doc_column,
            "celMessage": self.cel_message,
        }


class PolicyInvalid(Exception):
    """A document that cannot be compiled; `errors` lists every problem found, `warnings`
    the document's YAML 1.1 readings (they often explain an error: `name: on` is a boolean)."""

    def __init__(self, errors: list[FieldError], warnings: list[FieldError] = ()) -> None:
        self.errors = errors
        self.warnings = list(warnings)
        super().__init__("; ".join(str(e) for e in errors))


@dataclass(frozen=True)
class Rule:
    """A named CEL expression (matchConditions and variables)."""

    name: str
    expression: str


@dataclass(frozen=True)
class FilterRule:
    name: str
    expression: str
    message: str | None = None  # a CEL string expression
    unresolvable: bool = True  # FailedAndUnresolvableNodes: preemption cannot help (protocol P4)


@dataclass(frozen=True)
class ScoreRule:
    name: str
    expression: str
    weight: int = 1
    normalize: str = "none"


# The queue key becomes a pod priority through one PriorityClass per value (policies/queue.py):
# user PriorityClasses may not exceed one billion (kube-apiserver validation,
# HighestUserDefinablePriority), and the span of keys bounds how many classes exist.
QUEUE_FIELDS = ("expression", "min", "max")
QUEUE_PRIORITY_LIMIT = 1_000_000_000
MAX_QUEUE_LEVELS = 1000


@dataclass(frozen=True)
class QueueSpec:
    """`queue:`: a CEL int over `pod` and `namespaceObject` ordering the scheduling queue (higher
    first); keys are clamped into min..max, each value a pod priority."""

    expression: str
    min: int
    max: int


# `gang:` reads seed 002's labels unless told otherwise: podGroup names the group, minAvailable
# its size; a pod without them (or with a minAvailable that is not a number) is in no gang.
GANG_FIELDS = ("group", "minCount")
GANG_DEFAULT_GROUP = 'has(pod.labels.podGroup) ? pod.labels.podGroup : ""'
GANG_DEFAULT_MIN_COUNT = (
    'has(pod.labels.minAvailable) && pod.labels.minAvailable.matches("^[0-9]{1,9}$")'
    " ? int(pod.labels.minAvailable) : 0"
)


@dataclass(frozen=True)
class GangSpec:
    """`gang:`: which group a pod belongs to (a CEL string, "" for none) and how many members
    the group needs before any is placed (a CEL int; below 2 means no gang)."""

    group: str = GANG_DEFAULT_GROUP
    min_count: str = GANG_DEFAULT_MIN_COUNT


@dataclass(frozen=True)
class PolicySpec:
    """A structurally valid policy document (its CEL is checked by `compile_policy`)."""

    name: str
    scheduler_names: tuple[str, ...]
    description: str = ""
    failure_policy: str = "Ignore"
    match_conditions: tuple[Rule, ...] = ()
    variables: tuple[Rule, ...] = ()
    filters: tuple[FilterRule, ...] = ()
    scores: tuple[ScoreRule, ...] = ()
    queue: QueueSpec | None = None
    gang: GangSpec | None = None
    tests: tuple[dict[str, Any], ...] = ()
    document: dict[str, Any] = field(default_factory=dict, compare=False)


# --- text -> mapping, with positions ---------------------------------------------------------


@dataclass
class Position:
    """Where a value starts in the source text (1-based) and how its scalar is quoted."""

    line: int
    column: int
    style: str | None = None  # None (plain), "'", '"', "|" or ">"
    indent: int = 0


Positions = dict[str, Position]


@dataclass
class ParsedDocument:
    data: Any
    positions: Positions = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)  # the source text's lines, when parsed from text
    # unquoted scalars YAML 1.1 reads differently from YAML 1.2 (kind "warning"; see
    # coercion_warnings): the document is valid, but perhaps not what its author meant
    warnings: list[FieldError] = field(default_factory=list)


def parse_text(text: str) -> ParsedDocument:
    """YAML (or JSON, a subset) text -> data and field positions; raises PolicyInvalid."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_DOCUMENT_BYTES:
        raise PolicyInvalid(
            [FieldError("", f"the document is larger than {MAX_DOCUMENT_BYTES // 1024} KiB")]
        )
    if not text.strip():
        raise PolicyInvalid([FieldError("", "the document is empty", kind="yaml")])
    loader = None
    try:
        loader = _BoundedLoader(text)
        node = loader.get_single_node()
        if node is not None:
            _check_nodes(node)
        data = loader.construct_document(node) if node is not None else None
        warnings = coercion_warnings(node, loader) if node is not None else []
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark else (None, None)
        problem = exc.problem or str(exc)
        message = f"YAML syntax error: {problem}"
        if exc.context:
            message += f" ({exc.context})"
        raise PolicyInvalid(
            [FieldError("", message, kind="yaml", doc_line=line, doc_column=column)]
        ) from None
    except yaml.YAMLError as exc:
        raise PolicyInvalid([FieldError("", f"YAML error: {exc}", kind="yaml")]) from None
    finally:
        if loader is not None:
            loader.dispose()
    positions: Positions = {}
    if node is not None:
        _collect_positions(node, "", positions)
    return ParsedDocument(data=data, positions=positions, lines=text.split("\n"), warnings=warnings)


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader that refuses nesting deeper than MAX_DEPTH while composing (before PyYAML's
    own recursion could fail) and integers longer than MAX_INT_DIGITS, with their position."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent, index):
        deadline_check()  # a request's wall-clock guard covers reading the document too
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise yaml.composer.ComposerError(
                    None,
                    None,
                    f"nested deeper than {MAX_DEPTH} levels",
                    self.peek_event().start_mark,
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        text = str(node.value).replace("_", "").lstrip("+-").removeprefix("0x").removeprefix("0o")
        if len(text) > MAX_INT_DIGITS:
            raise yaml.constructor.ConstructorError(
                None, None, f"integer out of range ({len(text)} digits)", node.start_mark
            )
        return super().construct_yaml_int(node)


_BoundedLoader.add_constructor("tag:yaml.org,2002:int", _BoundedLoader.construct_yaml_int)


# YAML 1.2's core schema (what JSON-minded tools and Kubernetes' newer YAML readers use): only
# these plain scalars are booleans, integers and floats; PyYAML, the reader here, is YAML 1.1.
_YAML12_BOOL = re.compile(r"true|True|TRUE|false|False|FALSE")
_YAML12_INT = re.compile(r"[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+")
_YAML12_FLOAT = re.compile(
    r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)"
    r"|\.(?:nan|NaN|NAN)"
)
_TAG = "tag:yaml.org,2002:"


def coercion_warnings(root: yaml.Node, loader: yaml.SafeLoader) -> list[FieldError]:
    """Unquoted scalars that YAML 1.1 reads otherwise than YAML 1.2: `on`, `yes`, `no` and
    `off` (booleans in 1.1, strings in 1.2), `010` (8 in 1.1, 10 in 1.2), `0b101`, `1_000`,
    `1:30` (numbers in 1.1 only). Warnings, not errors: a version published before this check
    must still compile in the extender (PolicyRegistry skips one that does not), and every
    part of schedweb reads the text the same way, so only the author's intent is at stake."""
    out: list[FieldError] = []
    seen: set[int] = set()
    stack: list[tuple[yaml.Node, str]] = [(root, "")]
    while stack:
        node, path = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            for key, value in reversed(node.value):
                if isinstance(key, yaml.ScalarNode):
                    stack.append((value, f"{path}.{key.value}" if path else str(key.value)))
                stack.append((key, path))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(
                (item, f"{path}[{i}]") for i, item in reversed(list(enumerate(node.value)))
            )
        elif isinstance(node, yaml.ScalarNode) and node.style is None:
            reading = _yaml11_reading(node, loader)
            if reading is not None:
                out.append(
                    FieldError(
                        path,
                        reading,
                        kind="warning",
                        doc_line=node.start_mark.line + 1,
                        doc_column=node.start_mark.column + 1,
                    )
                )
    return out


def _yaml11_reading(node: yaml.ScalarNode, loader: yaml.SafeLoader) -> str | None:
    """What a plain scalar means to YAML 1.1 and to 1.2 when they differ, else None."""
    text = node.value
    if node.tag == _TAG + "bool":
        if _YAML12_BOOL.fullmatch(text):
            return None
        value = "true" if loader.construct_yaml_bool(node) else "false"
        return (
            f"unquoted {text} is the boolean {value} in YAML 1.1 (this reader) and the string "
            f"'{text}' in YAML 1.2: write {value}, or quote it ('{text}') for the text"
        )
    if node.tag == _TAG + "int":
        value = loader.construct_yaml_int(node)
        if _YAML12_INT.fullmatch(text) and _yaml12_int(text) == value:
            return None
        other = _yaml12_int(text) if _YAML12_INT.fullmatch(text) else f"the string '{text}'"
        return (
            f"unquoted {text} is {value} in YAML 1.1 (this reader) and {other} in YAML 1.2: "
            f"write {value}, or quote it ('{text}') for the text"
        )
    if node.tag == _TAG + "float" and not _YAML12_FLOAT.fullmatch(text):
        value = loader.construct_yaml_float(node)
        return (
            f"unquoted {text} is {value!r} in YAML 1.1 (this reader) and the string '{text}' "
            f"in YAML 1.2: write {value!r}, or quote it ('{text}') for the text"
        )
    return None


def _yaml12_int(text: str) -> int:
    if text.startswith("0o"):
        return int(text[2:], 8)
    if text.startswith("0x"):
        return int(text[2:], 16)
    return int(text, 10)


def _check_nodes(root: yaml.Node) -> None:
    """Rejects duplicate keys (naming both places) and documents whose aliases expand past the
    document limits: more than MAX_NODES values, or more than MAX_DOCUMENT_BYTES of scalar
    text (a 37 KB document of anchors expanded into 2.5 MB of CEL that took 14 s and 690 MB
    to compile, issue 27). Aliases share nodes, so sizes are memoized: nothing is expanded."""
    sizes: dict[int, tuple[int, int]] = {}  # id(node) -> (values, characters) once expanded
    # Post-order over the node graph, iteratively; depth is already bounded by the loader.
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        if id(node) in sizes:
            continue
        children: list[yaml.Node] = []
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                children += (key, value)
        elif isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        if not done:
            if isinstance(node, yaml.MappingNode):
                _check_duplicate_keys(node)
            stack.append((node, True))
            stack.extend((child, False) for child in children if id(child) not in sizes)
            continue
        count = 1 + sum(sizes[id(child)][0] for child in children)
        chars = sum(sizes[id(child)][1] for child in children)
        if isinstance(node, yaml.ScalarNode):
            chars = len(node.value)
        if count > MAX_NODES:
            raise yaml.composer.ComposerError(
                None,
                None,
                f"the document expands to more than {MAX_NODES} values (aliases)",
                node.start_mark,
            )
        if chars > MAX_DOCUMENT_BYTES:
            raise yaml.composer.ComposerError(
                None,
                None,
                f"the document expands to more than {MAX_DOCUMENT_BYTES // 1024} KiB of text "
                "(aliases repeat what their anchor holds; the limit counts each repeat)",
                node.start_mark,
            )
        sizes[id(node)] = (count, chars)


def _check_duplicate_keys(node: yaml.MappingNode) -> None:
    seen: dict[Any, yaml.Mark] = {}
    for key, _value in node.value:
        if not isinstance(key, yaml.ScalarNode) or key.tag == "tag:yaml.org,2002:merge":
            continue
        first = seen.setdefault((key.tag, key.value), key.start_mark)
        if first is not key.start_mark:
            raise yaml.constructor.ConstructorError(
                f"'{key.value}' is first defined at line {first.line + 1}, column {first.column + 1}",
                first,
                f"duplicate key '{key.value}'",
                key.start_mark,
            )


def check_values(data: Any) -> list[FieldError]:
    """Bounds for data that did not come through parse_text (API JSON): nesting depth, size,
    and strings that UTF-8 (the extender's JSON, the UI) cannot encode, such as lone surrogates."""
    errors: list[FieldError] = []
    count = 0
    stack: list[tuple[Any, str, int]] = [(data, "", 0)]
    while stack:
        value, path, depth = stack.pop()
        count += 1
        if depth > MAX_DEPTH:
            return [FieldError(path, f"nested deeper than {MAX_DEPTH} levels")]
        if count > MAX_NODES:
            return [FieldError("", f"the document has more than {MAX_NODES} values")]
        if isinstance(value, str):
            if not _encodable(value):
                errors.append(FieldError(path, _unencodable(value)))
        elif isinstance(value, dict):
            for key, item in value.items():
                child = f"{path}.{key}" if path else str(key)
                if isinstance(key, str) and not _encodable(key):
                    errors.append(FieldError(path, _unencodable(key)))
                    continue
                stack.append((item, child, depth + 1))
        elif isinstance(value, list):
            stack.extend((item, f"{path}[{i}]", depth + 1) for i, item in enumerate(value))
        elif isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
            errors.append(FieldError(path, "integer out of range"))
    return errors


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _unencodable(text: str) -> str:
    bad = next(c for c in text if 0xD800 <= ord(c) <= 0xDFFF)
    return f"contains U+{ord(bad):04X}, a lone surrogate that UTF-8 cannot encode"


def _collect_positions(node: yaml.Node, path: str, out: Positions) -> None:
    style = getattr(node, "style", None) if isinstance(node, yaml.ScalarNode) else None
    out[path] = Position(node.start_mark.line + 1, node.start_mark.column + 1, style or None)
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode):
                child = f"{path}.{key.value}" if path else str(key.value)
                _collect_positions(value, child, out)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _collect_positions(item, f"{path}[{index}]", out)


def locate(
    positions: Positions, path: str, line: int | None, column: int | None
) -> tuple[int | None, int | None]:
    """The document position of a (line, column) inside the scalar at `path`.

    Exact for plain and single-line quoted scalars and for literal blocks (`|`); for folded or
    multi-line quoted scalars it points at the scalar's start line.
    """
    pos = positions.get(path)
    if pos is None:
        return None, None
    if line is None or column is None:
        return pos.line, pos.column
    if pos.style in ("|", ">"):
        # Block content starts on the next line; its indentation is unknown here, so assume the
        # usual two spaces deeper than the key (good enough to put a marker on the right line).
        return pos.line + line, pos.column + 1 + column if pos.style == "|" else pos.column
    if line == 1:
        offset = 1 if pos.style in ("'", '"') else 0
        return pos.line, pos.column + offset + column - 1
    return pos.line + line - 1, column
