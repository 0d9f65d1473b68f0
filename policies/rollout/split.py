"""Which version judges a pod during a canary (issue 25, item 3): pure, the same answer in every
extender process and replica, on every call (filter, prioritize, bind).

A share is a percentage or a label selector. By percentage, a pod is the canary's when
sha256(uid) mod 10000 < percent * 100: the uid is assigned by the API server (a pod author
cannot choose it, only resubmit for another), so the split is not steerable beyond that, and a
pod keeps its version on every call because its uid does not change. By selector, a pod is the
canary's when the selector (Kubernetes label-selector syntax: `a=b`, `a!=b`, `a in (x,y)`,
`a notin (x)`, `a`, `!a`, comma-separated, all must hold) matches its labels, where the key
`kubernetes.io/metadata.name` is the pod's namespace (the label Kubernetes puts on every
namespace), whatever the pod's own labels say: a pod author chooses their pod's labels, so a
selector on them is the author's choice by design; the namespace is not.

Imports only the standard library and the scheduler model's selector matching.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from policies.schedmodel.plugins import label_selector_matches

NAMESPACE_KEY = "kubernetes.io/metadata.name"
MAX_SELECTOR = 1024  # characters of a selector's text
MAX_REQUIREMENTS = 20
MAX_VALUES = 50  # values of one `in`/`notin`
BUCKETS = 10000  # a percentage's resolution: 0.01%

# apimachinery validation: a qualified name (optional DNS-subdomain prefix, <= 253) and a label
# value (<= 63, may be empty).
_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_KEY = re.compile(rf"([a-z0-9]([-a-z0-9.]{{0,251}}[a-z0-9])?/)?{_NAME}")
_VALUE = re.compile(rf"({_NAME})?")
_SET = re.compile(r"\s*(\S+?)\s+(in|notin)\s*\(([^()]*)\)\s*(,|$)")
_PLAIN = re.compile(r"\s*(!?)\s*([^\s,=!()]+)\s*(?:(==|=|!=)\s*([^\s,=!()]*))?\s*(,|$)")


class SelectorInvalid(ValueError):
    """A selector's text that does not parse; `str()` says where and why."""


def selector_parse(text: str) -> dict[str, Any]:
    """The metav1.LabelSelector (matchExpressions only) of a selector's text, checked as
    apimachinery's labels.Parse checks it; SelectorInvalid otherwise. An empty text is refused:
    it would select every pod, which is a publish, not a canary."""
    if not isinstance(text, str):
        raise SelectorInvalid("must be a string")
    if len(text) > MAX_SELECTOR:
        raise SelectorInvalid(f"at most {MAX_SELECTOR} characters")
    if not text.strip():
        raise SelectorInvalid("is empty: it would select every pod")
    expressions: list[dict[str, Any]] = []
    at = 0
    while at < len(text):
        if len(expressions) == MAX_REQUIREMENTS:
            raise SelectorInvalid(f"at most {MAX_REQUIREMENTS} requirements")
        match = _SET.match(text, at)
        if match:
            key, op, values = match.group(1), match.group(2), match.group(3)
            items = [v.strip() for v in values.split(",")]
            if not items or len(items) > MAX_VALUES:
                raise SelectorInvalid(f"at column {at + 1}: 1 to {MAX_VALUES} values in ( )")
            for v in items:
                _check(_VALUE, v, "value", at)
            _check(_KEY, key, "key", at)
            expressions.append(
                {"key": key, "operator": "In" if op == "in" else "NotIn", "values": items}
            )
        else:
            match = _PLAIN.match(text, at)
            if not match or match.end() == at:
                raise SelectorInvalid(f"at column {at + 1}: expected a requirement")
            bang, key, op, value = match.group(1), match.group(2), match.group(3), match.group(4)
            _check(_KEY, key, "key", at)
            if op is None:
                expressions.append({"key": key, "operator": "DoesNotExist" if bang else "Exists"})
            elif bang:
                raise SelectorInvalid(f"at column {at + 1}: '!' goes only before a bare key")
            else:
                _check(_VALUE, value, "value", at)
                expressions.append(
                    {"key": key, "operator": "NotIn" if op == "!=" else "In", "values": [value]}
                )
        at = match.end()
        if match.group(match.lastindex) == "," and at >= len(text):
            raise SelectorInvalid(f"at column {at}: a requirement is missing after ','")
    return {"matchExpressions": expressions}


def _check(pattern: re.Pattern[str], text: str, what: str, at: int) -> None:
    if not pattern.fullmatch(text) or (what == "key" and len(text.rsplit("/", 1)[-1]) > 63):
        raise SelectorInvalid(f"at column {at + 1}: {text[:80]!r} is not a valid label {what}")


def bucket(uid: str) -> int:
    """The pod's place in 0..9999: sha256(uid) mod 10000, the same in every process."""
    return int.from_bytes(hashlib.sha256(uid.encode()).digest()[:8], "big") % BUCKETS


@dataclass(frozen=True, slots=True)
class Split:
    """A canary's share: `percent` (1-99) of pods by uid, or the pods `selector` matches."""

    percent: float | None = None
    selector: Mapping[str, Any] | None = None

    @classmethod
    def of(cls, share: Mapping[str, Any]) -> Split:
        """From a stored share ({"percent": 25} or {"selector": "team=a"}), already checked."""
        if share.get("selector"):
            return cls(selector=selector_parse(share["selector"]))
        return cls(percent=float(share["percent"]))

    def canary(self, uid: str, namespace: str, labels: Mapping[str, str]) -> bool:
        """Whether the canary judges this pod."""
        if self.selector is not None:
            return label_selector_matches(self.selector, {**labels, NAMESPACE_KEY: namespace})
        return bucket(uid) < round((self.percent or 0) * 100)

    def canary_of_object(self, pod: Mapping[str, Any]) -> bool:
        """`canary` for a raw Pod as kube-scheduler sends it."""
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        return self.canary(
            str(meta.get("uid") or ""),
            str(meta.get("namespace") or ""),
            labels if isinstance(labels, Mapping) else {},
        )
