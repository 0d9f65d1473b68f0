"""A policy document's mapping -> PolicySpec (document.py: the text, its limits and positions, the
spec's types): every field checked, every error collected at once with its field path and the
position it sits at, a close spelling suggested for an unknown field."""

from __future__ import annotations

import difflib
import json
from typing import Any

from .document import (
    FAILURE_POLICIES,
    GANG_DEFAULT_GROUP,
    GANG_DEFAULT_MIN_COUNT,
    GANG_FIELDS,
    MAX_EXPRESSION_CHARS,
    MAX_QUEUE_LEVELS,
    MAX_RULES,
    MAX_WEIGHT,
    NORMALIZE_MODES,
    POLICY_NAME,
    QUEUE_FIELDS,
    QUEUE_PRIORITY_LIMIT,
    RULE_FIELDS,
    RULE_NAME,
    SCHEDULER_NAME,
    TOP_LEVEL_FIELDS,
    FieldError,
    FilterRule,
    GangSpec,
    PolicySpec,
    Positions,
    QueueSpec,
    Rule,
    ScoreRule,
    is_variable_name,
    locate,
)
from .testcases import expect_errors


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
