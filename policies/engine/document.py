"""Policy documents: parsing YAML/JSON text and checking its structure.

One validator serves the form, the API, the preview and publish, so the playground can never
accept what publish rejects. It collects every error at once, keyed by field path
(`scores[2].weight`), and knows where each field sits in the source text so that a CEL error at
line 1, column 9 of `filters[0].expression` can also be shown at its line in the document.
CEL checking itself happens in `policy.py`; this module owns the shape of the document.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from .cel.deadline import deadline_check
from .printable import printable
from .testcases import expect_errors

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


# --- mapping -> PolicySpec ---------------------------------------------------------------------


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    return {
        bool: "boolean",
        int: "integer",
        float: "number",
        str: "string",
        list: "list",
        dict: "mapping",
    }.get(type(value), type(value).__name__)


def _suggest(word: str, options: tuple[str, ...] | list[str]) -> str:
    close = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


class _Collector:
    """Collects FieldErrors, attaching document positions."""

    def __init__(self, positions: Positions) -> None:
        self.positions = positions
        self.errors: list[FieldError] = []

    def add(
        self, path: str, message: str, *, rule: str | None = None, kind: str = "schema"
    ) -> None:
        doc_line, doc_column = locate(self.positions, path, None, None)
        self.errors.append(
            FieldError(
                path, message, kind=kind, rule=rule, doc_line=doc_line, doc_column=doc_column
            )
        )


def build_spec(
    data: Any, positions: Positions | None = None
) -> tuple[PolicySpec | None, list[FieldError]]:
    """Checks the structure of a parsed document: (spec, errors).

    `spec` is None only when the document is not a mapping; otherwise it is built from what is
    usable, and `errors` lists every structural problem (the spec is valid when it is empty).
    """
    errors = _Collector(positions or {})
    if data is None:
        errors.add("", "the document is empty")
        return None, errors.errors
    if not isinstance(data, dict):
        errors.add(
            "",
            f"the document must be a mapping (name: ..., filters: ...), got a {_type_name(data)}",
        )
        return None, errors.errors

    for key in data:
        if key not in TOP_LEVEL_FIELDS:
            errors.add(str(key), f"unknown field '{key}'{_suggest(str(key), TOP_LEVEL_FIELDS)}")

    name = data.get("name")
    if name is None:
        errors.add("name", "name is required")
    elif not isinstance(name, str):
        errors.add("name", f"name must be a string, got {_type_name(name)}")
    elif len(name) > 63 or not POLICY_NAME.fullmatch(name):
        errors.add(
            "name",
            f"name '{name}' must be at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit",
        )

    description = data.get("description", "")
    if description is None:
        description = ""
    if not isinstance(description, str):
        errors.add("description", f"description must be a string, got {_type_name(description)}")
    elif len(description) > 2000:
        errors.add("description", "description is longer than 2000 characters")

    scheduler_names = _scheduler_names(data, errors)

    failure_policy = data.get("failurePolicy", "Ignore")
    if failure_policy not in FAILURE_POLICIES:
        errors.add("failurePolicy", f"failurePolicy must be Ignore or Fail, got {failure_policy!r}")

    lists = {
        key: _rule_list(data, key, errors)
        for key in ("matchConditions", "variables", "filters", "scores", "tests")
    }
    match_conditions = tuple(
        _plain_rule(item, f"matchConditions[{i}]", errors) for i, item in lists["matchConditions"]
    )
    variables = tuple(
        _plain_rule(item, f"variables[{i}]", errors, variable=True)
        for i, item in lists["variables"]
    )
    filters = tuple(_filter_rule(item, f"filters[{i}]", errors) for i, item in lists["filters"])
    scores = tuple(_score_rule(item, f"scores[{i}]", errors) for i, item in lists["scores"])
    tests = tuple(_test_case(item, f"tests[{i}]", errors) for i, item in lists["tests"])
    queue = _queue_section(data, errors) if "queue" in data else None
    gang = _gang_section(data, errors) if "gang" in data else None

    if "queue" in data or "gang" in data:
        pass  # a queue order or a gang alone is a policy (seed 002's plugin has no score)
    elif (
        not lists["filters"]
        and not lists["scores"]
        and "filters" not in data
        and "scores" not in data
    ):
        errors.add("", "a policy needs at least one filter, score or queue")
    elif not lists["filters"] and not lists["scores"]:
        errors.add("filters", "a policy needs at least one filter, score or queue")

    _check_unique(
        [("matchConditions", r) for r in match_conditions]
        + [("filters", r) for r in filters]
        + [("scores", r) for r in scores],
        errors,
        what="rule",
    )
    _check_unique([("variables", r) for r in variables], errors, what="variable")
    _check_unique([("tests", t) for t in tests], errors, what="test case")

    spec = PolicySpec(
        name=name if isinstance(name, str) else "",
        description=description if isinstance(description, str) else "",
        scheduler_names=tuple(scheduler_names),
        failure_policy=failure_policy if failure_policy in FAILURE_POLICIES else "Ignore",
        match_conditions=match_conditions,  # type: ignore[arg-type]
        variables=variables,  # type: ignore[arg-type]
        filters=filters,  # type: ignore[arg-type]
        scores=scores,  # type: ignore[arg-type]
        queue=queue,
        gang=gang,
        tests=tests,  # type: ignore[arg-type]
        document=data,
    )
    # The spec is returned even with errors (invalid fields hold defaults) so that the CEL of
    # every well-formed rule can still be checked: one validation reports everything at once.
    return spec, errors.errors


def _scheduler_names(data: dict, errors: _Collector) -> list[str]:
    value = data.get("schedulerNames")
    if value is None:
        errors.add(
            "schedulerNames",
            "schedulerNames is required: the spec.schedulerName values of the pods this policy places",
        )
        return []
    if not isinstance(value, list) or not value:
        errors.add(
            "schedulerNames",
            "schedulerNames must be a non-empty list of names, got "
            + ("an empty list" if value == [] else _type_name(value)),
        )
        return []
    names: list[str] = []
    for index, item in enumerate(value):
        path = f"schedulerNames[{index}]"
        if not isinstance(item, str):
            errors.add(path, f"a scheduler name must be a string, got {_type_name(item)}")
        elif len(item) > 253 or not SCHEDULER_NAME.fullmatch(item):
            errors.add(
                path,
                f"'{item}' is not a valid scheduler name (lowercase letters, digits, '-' and '.')",
            )
        elif item in names:
            errors.add(path, f"'{item}' is listed twice")
        else:
            names.append(item)
    return names


def _rule_list(data: dict, key: str, errors: _Collector) -> list[tuple[int, dict]]:
    value = data.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        errors.add(key, f"{key} must be a list, got {_type_name(value)}")
        return []
    if len(value) > MAX_RULES:
        errors.add(key, f"{key} has {len(value)} entries; at most {MAX_RULES} are allowed")
        return []
    items: list[tuple[int, dict]] = []
    allowed = RULE_FIELDS[key]
    for index, item in enumerate(value):
        path = f"{key}[{index}]"
        if not isinstance(item, dict):
            errors.add(path, f"each entry of {key} must be a mapping, got {_type_name(item)}")
            continue
        for field_name in item:
            if field_name not in allowed:
                errors.add(
                    f"{path}.{field_name}",
                    f"unknown field '{field_name}'{_suggest(str(field_name), allowed)}",
                )
        items.append((index, item))
    return items


def _name(item: dict, path: str, errors: _Collector, *, variable: bool = False) -> str:
    name = item.get("name")
    if name is None:
        errors.add(f"{path}.name", "name is required")
        return ""
    if not isinstance(name, str):
        errors.add(f"{path}.name", f"name must be a string, got {_type_name(name)}")
        return ""
    if variable and not is_variable_name(name):
        errors.add(
            f"{path}.name",
            f"variable name '{name}' must be an identifier (letters, digits and '_', not starting with a digit, not a CEL keyword)",
        )
    elif not variable and (len(name) > 63 or not RULE_NAME.fullmatch(name)):
        errors.add(
            f"{path}.name",
            f"rule name '{name}' must be at most 63 letters, digits, '-', '_' or '.'",
        )
    return name


def _expression(
    item: dict, path: str, errors: _Collector, *, key: str = "expression", required: bool = True
) -> str | None:
    value = item.get(key)
    rule = item.get("name") if isinstance(item.get("name"), str) else None
    if value is None:
        if required:
            errors.add(f"{path}.{key}", f"{key} is required", rule=rule)
        return None
    if isinstance(value, bool | int | float):
        # YAML turned `expression: true` into a boolean; CEL wants the text.
        return json.dumps(value)
    if not isinstance(value, str):
        errors.add(
            f"{path}.{key}",
            f"{key} must be a CEL expression string, got {_type_name(value)}",
            rule=rule,
        )
        return None
    if not value.strip():
        errors.add(f"{path}.{key}", f"{key} is empty", rule=rule)
        return None
    if len(value) > MAX_EXPRESSION_CHARS:
        errors.add(
            f"{path}.{key}", f"{key} is longer than {MAX_EXPRESSION_CHARS} characters", rule=rule
        )
        return None
    return value


def _plain_rule(item: dict, path: str, errors: _Collector, *, variable: bool = False) -> Rule:
    return Rule(
        name=_name(item, path, errors, variable=variable),
        expression=_expression(item, path, errors) or "",
    )


def _filter_rule(item: dict, path: str, errors: _Collector) -> FilterRule:
    name = _name(item, path, errors)
    expression = _expression(item, path, errors) or ""
    message = _expression(item, path, errors, key="message", required=False)
    unresolvable = item.get("unresolvable", True)
    if not isinstance(unresolvable, bool):
        errors.add(
            f"{path}.unresolvable",
            f"unresolvable must be true or false, got {_type_name(unresolvable)}",
            rule=name,
        )
        unresolvable = True
    return FilterRule(name=name, expression=expression, message=message, unresolvable=unresolvable)


def _score_rule(item: dict, path: str, errors: _Collector) -> ScoreRule:
    name = _name(item, path, errors)
    expression = _expression(item, path, errors) or ""
    weight = item.get("weight", 1)
    if isinstance(weight, bool) or not isinstance(weight, int):
        errors.add(
            f"{path}.weight",
            f"weight must be an integer from 0 to {MAX_WEIGHT}, got {_type_name(weight)}",
            rule=name,
        )
        weight = 1
    elif weight < 0:
        errors.add(f"{path}.weight", f"weight must not be negative, got {weight}", rule=name)
    elif weight > MAX_WEIGHT:
        errors.add(
            f"{path}.weight", f"weight must be at most {MAX_WEIGHT}, got {weight}", rule=name
        )
    normalize = item.get("normalize", "none")
    if normalize not in NORMALIZE_MODES:
        errors.add(
            f"{path}.normalize",
            f"normalize must be one of none, minmax; got {normalize!r}",
            rule=name,
        )
    return ScoreRule(name=name, expression=expression, weight=weight, normalize=normalize)


def _queue_section(data: dict, errors: _Collector) -> QueueSpec | None:
    """`queue: {expression, min, max}`; None (with errors) when it is unusable."""
    item = data.get("queue")
    if not isinstance(item, dict):
        errors.add(
            "queue", f"queue must be a mapping (expression, min, max), got {_type_name(item)}"
        )
        return None
    for field_name in item:
        if field_name not in QUEUE_FIELDS:
            errors.add(
                f"queue.{field_name}",
                f"unknown field '{field_name}'{_suggest(str(field_name), QUEUE_FIELDS)}",
            )
    expression = _expression(item, "queue", errors)
    bounds: dict[str, int] = {}
    for key in ("min", "max"):
        value = item.get(key)
        if value is None:
            errors.add(
                f"queue.{key}",
                f"{key} is required: the {'lowest' if key == 'min' else 'highest'} key (an integer)",
            )
        elif isinstance(value, bool) or not isinstance(value, int):
            errors.add(f"queue.{key}", f"{key} must be an integer, got {_type_name(value)}")
        elif not -QUEUE_PRIORITY_LIMIT <= value <= QUEUE_PRIORITY_LIMIT:
            errors.add(
                f"queue.{key}",
                f"{key} must be from -{QUEUE_PRIORITY_LIMIT} to {QUEUE_PRIORITY_LIMIT} "
                f"(a key is a pod priority), got {value}",
            )
        else:
            bounds[key] = value
    if len(bounds) == 2:
        if bounds["min"] > bounds["max"]:
            errors.add("queue.max", f"max ({bounds['max']}) is below min ({bounds['min']})")
        elif bounds["max"] - bounds["min"] + 1 > MAX_QUEUE_LEVELS:
            errors.add(
                "queue.max",
                f"min..max spans {bounds['max'] - bounds['min'] + 1} keys; at most "
                f"{MAX_QUEUE_LEVELS} (one PriorityClass each)",
            )
    if expression is None:
        return None
    # With bad bounds the expression is still returned, so its CEL is checked too.
    return QueueSpec(expression=expression, min=bounds.get("min", 0), max=bounds.get("max", 0))


def _gang_section(data: dict, errors: _Collector) -> GangSpec | None:
    """`gang: {group, minCount}`, each defaulting to seed 002's labels (`gang: {}`)."""
    item = data.get("gang")
    if item is None:
        item = {}
    if not isinstance(item, dict):
        errors.add("gang", f"gang must be a mapping (group, minCount), got {_type_name(item)}")
        return None
    for field_name in item:
        if field_name not in GANG_FIELDS:
            errors.add(
                f"gang.{field_name}",
                f"unknown field '{field_name}'{_suggest(str(field_name), GANG_FIELDS)}",
            )
    group = _expression(item, "gang", errors, key="group", required=False)
    min_count = _expression(item, "gang", errors, key="minCount", required=False)
    return GangSpec(
        group=group or GANG_DEFAULT_GROUP, min_count=min_count or GANG_DEFAULT_MIN_COUNT
    )


def _test_case(item: dict, path: str, errors: _Collector) -> dict[str, Any]:
    name = _name(item, path, errors)
    pod = item.get("pod")
    if not isinstance(pod, dict):
        errors.add(
            f"{path}.pod", f"pod must be a Pod object (mapping), got {_type_name(pod)}", rule=name
        )
    cluster = item.get("cluster", "demo")
    if not isinstance(cluster, str):
        errors.add(
            f"{path}.cluster",
            f"cluster must be 'demo' or a file path, got {_type_name(cluster)}",
            rule=name,
        )
    expect = item.get("expect")
    for sub, problem in expect_errors(expect):
        errors.add(f"{path}.{sub}", problem, rule=name)
    return {"name": name, "pod": pod, "cluster": cluster, "expect": expect}


def _check_unique(rules: list[tuple[str, Any]], errors: _Collector, *, what: str) -> None:
    seen: dict[str, str] = {}
    counters: dict[str, int] = {}
    for key, rule in rules:
        index = counters.get(key, 0)
        counters[key] = index + 1
        name = rule["name"] if isinstance(rule, dict) else rule.name
        if not name:
            continue
        path = f"{key}[{index}]"
        if name in seen:
            errors.add(
                f"{path}.name",
                f"duplicate {what} name '{name}' (already used by {seen[name]})",
                rule=name,
            )
        else:
            seen[name] = path
