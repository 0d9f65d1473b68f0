"""The scheduler model against the stock kube-scheduler: a seeded corpus, placed one pod at a time.

A stock kube-scheduler (the test control plane's binary, percentageOfNodesToScore 100) runs with
schedweb's extender service (`policies/extender/service.py`, as is) behind a small HTTP server on
127.0.0.1 that records every filter call. For each pod, the model (`policies/schedmodel/`) runs
over exactly the cluster kube-scheduler sees at that moment (the nodes and the pods bound so far,
which is also the extender's snapshot), and the run compares:
(a) the nodes kube-scheduler sends to the extender's filter with the model's in-tree-feasible set;
(b) the node kube-scheduler binds with the model's tie group;
(c) for a pod it cannot place, the reasons of its FailedScheduling event with the model's
    rejection counts (in-tree plugins and the extender's failed nodes).
Unschedulable pods are deleted once their event is read, so that a retry never places them
later into a cluster the model did not see. Shared by tests/schedmodel/test_differential.py and
`python -m bench differential`.
"""

from __future__ import annotations

import contextlib
import json
import random
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import yaml

from tests.harness import resources

NAMESPACE = "diff"
# Namespaces for namespaceSelector terms, by labels; every corpus pod lives in one of these.
NAMESPACES = {
    NAMESPACE: {"team": "core", "env": "prod"},
    "diff-a": {"team": "a", "env": "prod"},
    "diff-b": {"team": "b", "env": "dev"},
}
# Services (name, spec.selector) in every corpus namespace: the pods they select get the
# system-default spreading (helper.DefaultSelector) even without a controller.
SERVICES = (
    ("svc-web", {"app": "web"}),
    ("svc-cache", {"app": "cache"}),
    ("svc-db-primary", {"app": "db", "role": "primary"}),  # selects no corpus pod
)
NS_SELECTORS = (
    {"matchLabels": {"team": "a"}},
    # the API server's own label on every Namespace
    {"matchLabels": {"kubernetes.io/metadata.name": "diff-b"}},
    {"matchExpressions": [{"key": "env", "operator": "In", "values": ["prod"]}]},
    {},
    # nil labels satisfy it: v1.35 then matches every namespace (see plugins.incoming_namespaces)
    {"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["b"]}]},
)
SCHEDULER = "schedweb-diff"
ZONES = ("zone-a", "zone-b", "zone-c")
APPS = ("web", "api", "db", "cache", "batch", "ml")
GPU = "example.com/gpu"
IMAGES = (
    ("registry.k8s.io/pause:3.10", 300 * 1024 * 1024),
    ("example.com/big:1.0", 900 * 1024 * 1024),
    # pods name it without a tag ("example.com/untagged"): ImageLocality reads it as :latest
    ("example.com/untagged:latest", 500 * 1024 * 1024),
)
RUNTIME_CLASS = "diff-overhead"  # a RuntimeClass whose overhead admission copies into the pod
OVERHEAD = {"cpu": "250m", "memory": "64Mi"}
# The extender's policy: a filter that rejects some nodes the in-tree plugins accept, a minmax
# score (so the candidate set matters) and a label score.
POLICY = """\
name: differential
schedulerNames: [schedweb-diff]
failurePolicy: Fail
filters:
  - name: not-avoided
    expression: '!("diff/avoid" in node.labels)'
    message: '"avoided"'
scores:
  - name: packed
    expression: >-
      node.allocatable.cpu > 0 ?
      (node.requested.cpu + pod.requests.cpu) * 100 / node.allocatable.cpu : 0
    weight: 2
    normalize: minmax
  - name: gold
    expression: '"diff/tier" in node.labels && node.labels["diff/tier"] == "gold" ? 100 : 0'
    weight: 1
    normalize: none
"""


# --- the corpus ------------------------------------------------------------------------------


def corpus_nodes(*, seed: int, count: int) -> list[dict[str, Any]]:
    """`count` Node manifests: zones (two nodes without one), sizes, a few small pod limits,
    GPUs (half of them tainted), NoSchedule/PreferNoSchedule/NoExecute taints, cordoned nodes,
    NotReady nodes with the node lifecycle controller's taints, images, policy labels."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        name = f"dn-{i:03d}"
        labels = {
            "diff/disk": rng.choice(("ssd", "hdd")),
            "diff/tier": rng.choice(("gold", "silver", "bronze")),
        }
        if i >= 2:  # dn-000 and dn-001 have no zone: spread's "missing required label"
            labels["topology.kubernetes.io/zone"] = ZONES[i % 3]
        if rng.random() < 0.08:
            labels["diff/avoid"] = "true"
        extra = {"ephemeral-storage": rng.choice(("20Gi", "50Gi", "100Gi"))}
        taints: list[dict[str, str]] = []
        if i % 9 == 4:
            extra[GPU] = rng.choice(("2", "4"))
            if rng.random() < 0.5:
                taints.append({"key": "gpu", "value": "true", "effect": "NoSchedule"})
        roll = rng.random()
        if roll < 0.08:
            taints.append({"key": "dedicated", "value": "infra", "effect": "NoSchedule"})
        elif roll < 0.18:
            taints.append({"key": "spot", "value": "true", "effect": "PreferNoSchedule"})
        elif roll < 0.21:
            taints.append({"key": "maintenance", "value": "", "effect": "NoExecute"})
        ready = True
        if i % 17 == 7:  # NotReady, as the node lifecycle controller leaves it
            ready = False
            taints += [
                {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
                {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"},
            ]
        manifest = resources.node_manifest(
            name=name,
            cpu=rng.choice(("2", "4", "8", "16")),
            memory=rng.choice(("4Gi", "8Gi", "16Gi", "32Gi")),
            pods=rng.choice((110,) * 9 + (3,)),
            extra_capacity=extra,
            labels=labels,
            taints=taints,
            ready=ready,
            unschedulable=i % 19 == 11,
        )
        if rng.random() < 0.4:
            manifest["status"]["images"] = [
                {"names": [image], "sizeBytes": size}
                for image, size in IMAGES
                if rng.random() < 0.7
            ]
        out.append(manifest)
    return out


def _quantity_choice(rng: random.Random, values: tuple[str, ...]) -> str:
    return rng.choice(values)


def corpus_pod(rng: random.Random, name: str, owners: dict[str, str]) -> dict[str, Any]:
    """One pod of the corpus; `owners` maps an app to the uid of its ReplicaSet."""
    app = rng.choice(APPS)
    labels = {"app": app}
    requests: dict[str, str] = {}
    if rng.random() < 0.9:
        requests["cpu"] = _quantity_choice(rng, ("50m", "100m", "250m", "500m", "1", "2", "3"))
    if rng.random() < 0.85:
        requests["memory"] = _quantity_choice(rng, ("64Mi", "256Mi", "512Mi", "1Gi", "3Gi"))
    if rng.random() < 0.1:
        requests["ephemeral-storage"] = rng.choice(("1Gi", "10Gi", "40Gi"))
    spec: dict[str, Any] = {"schedulerName": SCHEDULER, "terminationGracePeriodSeconds": 0}
    tolerations = []
    if rng.random() < 0.12:
        requests[GPU] = rng.choice(("1", "2"))
        tolerations.append({"key": "gpu", "operator": "Exists", "effect": "NoSchedule"})
    container = {
        "name": "main",
        "image": rng.choice([image for image, _ in IMAGES]),
        "resources": {
            "requests": requests,
            "limits": {GPU: requests[GPU]} if GPU in requests else {},
        },
    }
    if rng.random() < 0.08:
        container["ports"] = [{"containerPort": 80, "hostPort": rng.choice((8080, 9090))}]
    spec["containers"] = [container]
    if rng.random() < 0.1:
        spec["containers"].append(
            {
                "name": "side",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": "100m"}},
            }
        )
    if rng.random() < 0.08:
        spec["initContainers"] = [
            {
                "name": "init",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": rng.choice(("2", "4")), "memory": "128Mi"}},
            }
        ]
    roll = rng.random()
    if roll < 0.15:
        tolerations.append({"key": "dedicated", "operator": "Equal", "value": "infra"})
    elif roll < 0.2:
        tolerations.append({"operator": "Exists"})
    elif roll < 0.3:
        tolerations.append({"key": "spot", "operator": "Exists", "effect": "PreferNoSchedule"})
    if rng.random() < 0.03:
        tolerations.append({"key": "node.kubernetes.io/unschedulable", "operator": "Exists"})
    spec["tolerations"] = tolerations
    if rng.random() < 0.15:
        spec["nodeSelector"] = {"diff/disk": "ssd"}
    affinity: dict[str, Any] = {}
    node_affinity: dict[str, Any] = {}
    if rng.random() < 0.1:
        node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {
                            "key": "topology.kubernetes.io/zone",
                            "operator": "In",
                            "values": rng.sample(ZONES, 2),
                        }
                    ]
                }
            ]
        }
    elif rng.random() < 0.04:
        node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": [
                {
                    "matchFields": [
                        {"key": "metadata.name", "operator": "NotIn", "values": ["dn-003"]}
                    ]
                }
            ]
        }
    if rng.random() < 0.25:
        node_affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {
                "weight": rng.randint(1, 100),
                "preference": {
                    "matchExpressions": [
                        {
                            "key": "diff/tier",
                            "operator": "In",
                            "values": [rng.choice(("gold", "silver"))],
                        }
                    ]
                },
            }
        ]
    if node_affinity:
        affinity["nodeAffinity"] = node_affinity
    roll = rng.random()
    if roll < 0.05:
        other = rng.choice(APPS)
        affinity["podAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"app": other}},
                    "topologyKey": "topology.kubernetes.io/zone",
                }
            ]
        }
    elif roll < 0.13:
        affinity["podAntiAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"app": app}},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    elif roll < 0.23:
        kind = rng.choice(("podAffinity", "podAntiAffinity"))
        affinity[kind] = {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": rng.randint(1, 100),
                    "podAffinityTerm": {
                        "labelSelector": {"matchLabels": {"app": rng.choice(APPS)}},
                        "topologyKey": rng.choice(
                            ("kubernetes.io/hostname", "topology.kubernetes.io/zone")
                        ),
                    },
                }
            ]
        }
    if affinity:
        spec["affinity"] = affinity
    roll = rng.random()
    if roll < 0.15:
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": rng.choice((1, 2)),
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": app}},
            }
        ]
    elif roll < 0.25:
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": rng.choice(
                    ("kubernetes.io/hostname", "topology.kubernetes.io/zone")
                ),
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": {"app": app}},
            }
        ]
    # Namespaces and namespaceSelector terms draw from a generator of their own, so that the
    # rest of the corpus stays what it was before they were added.
    extra = random.Random(f"namespaces/{name}")
    namespace = NAMESPACE
    if extra.random() < 0.25:
        namespace = extra.choice(("diff-a", "diff-b"))
    if extra.random() < 0.2 and not (set(affinity) & {"podAffinity", "podAntiAffinity"}):
        t = {
            "labelSelector": {"matchLabels": {"app": extra.choice(APPS)}},
            "namespaceSelector": extra.choice(NS_SELECTORS),
            "topologyKey": extra.choice(("kubernetes.io/hostname", "topology.kubernetes.io/zone")),
        }
        roll = extra.random()
        if roll < 0.35:
            t["topologyKey"] = "kubernetes.io/hostname"
            affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [t]}
        elif roll < 0.5:
            t["topologyKey"] = "topology.kubernetes.io/zone"
            affinity["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [t]}
        else:
            kind = extra.choice(("podAffinity", "podAntiAffinity"))
            affinity[kind] = {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": extra.randint(1, 100), "podAffinityTerm": t}
                ]
            }
        spec["affinity"] = affinity
    constraints = spec.get("topologySpreadConstraints") or []
    if constraints and extra.random() < 0.25:
        # an empty selector: kube-scheduler counts no existing pod, but the pod matches itself
        constraints[0]["labelSelector"] = {}
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels}
    if rng.random() < 0.2 and app in owners and namespace == NAMESPACE:
        # A ReplicaSet's pod: the system-default spreading applies (its selector is app=<app>).
        meta["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": f"rs-{app}",
                "uid": owners[app],
                "controller": True,
            }
        ]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
    _issue23_fields(pod, random.Random(f"issue23/{name}"))
    return pod


def _issue23_fields(pod: dict[str, Any], rng: random.Random) -> None:
    """Fields the corpus lacked before issue 23, from a generator of their own: pod-level
    resources, sidecars, overhead (RuntimeClass), limits without requests, spread's minDomains,
    matchLabelKeys and inclusion policies, several required affinity terms, match/mismatch
    label keys, matchFields on metadata.name, host ports with hostIP and protocol, an untagged
    image, tolerations of every shape. `written` (person-written, judged through the model's
    admission defaults) or `stored` (judged as read back) goes in `pod["x-mode"]`."""
    spec, meta = pod["spec"], pod["metadata"]
    labels = meta["labels"]
    labels["rev"] = rng.choice(("r1", "r2"))
    main = spec["containers"][0]
    pod_level = rng.random() < 0.1
    if rng.random() < 0.1:  # limits only: the API server copies them into requests
        main["resources"] = {
            "limits": {**main["resources"]["requests"], **main["resources"]["limits"]}
        }
    if rng.random() < 0.08:  # a sidecar (restartable init container)
        spec.setdefault("initContainers", []).append(
            {
                "name": "sidecar",
                "image": "registry.k8s.io/pause:3.10",
                "restartPolicy": "Always",
                "resources": {"requests": {"cpu": rng.choice(("100m", "1")), "memory": "64Mi"}},
            }
        )
    if pod_level:
        # pod-level resources, as limits (requests defaulted) or requests; validation wants
        # them at least the containers' aggregate, so the containers ask little here
        for c in spec["containers"] + spec.get("initContainers", []):
            asked = c.setdefault("resources", {})
            for key in ("requests", "limits"):
                if key in asked:
                    asked[key] = {k: v for k, v in asked[key].items() if k not in ("cpu", "memory")}
            asked.setdefault("requests", {})["cpu"] = "100m"
        section = rng.choice(("requests", "limits"))
        spec["resources"] = {section: {"cpu": rng.choice(("1", "2")), "memory": "1Gi"}}
    if rng.random() < 0.06:
        spec["runtimeClassName"] = RUNTIME_CLASS
    if rng.random() < 0.06:
        main["image"] = "example.com/untagged"
    if rng.random() < 0.1:
        main["ports"] = [
            {
                "containerPort": 53,
                "hostPort": rng.choice((5353, 8080)),
                "hostIP": rng.choice(("127.0.0.1", "10.0.0.1", "0.0.0.0")),
                "protocol": rng.choice(("TCP", "UDP")),
            }
        ]
    tolerations = spec.setdefault("tolerations", [])
    roll = rng.random()
    if roll < 0.05:
        tolerations.append(
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoSchedule"}
        )
    elif roll < 0.1:
        tolerations.append({"key": "maintenance", "operator": "Exists"})
    elif roll < 0.14:
        tolerations.append(
            {"key": "maintenance", "operator": "Exists", "effect": "NoExecute",
             "tolerationSeconds": 60}
        )  # fmt: skip
    elif roll < 0.18:
        tolerations.append({"key": "gpu", "operator": "Equal", "value": "true"})
    affinity = spec.get("affinity") or {}
    if rng.random() < 0.12:
        constraint: dict[str, Any] = {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": rng.choice(("DoNotSchedule", "ScheduleAnyway")),
            "labelSelector": {"matchLabels": {"app": labels["app"]}},
        }
        if constraint["whenUnsatisfiable"] == "DoNotSchedule" and rng.random() < 0.5:
            constraint["minDomains"] = rng.choice((2, 3, 4))
        if rng.random() < 0.5:
            constraint["matchLabelKeys"] = ["rev"]
        if rng.random() < 0.5:
            constraint["nodeAffinityPolicy"] = rng.choice(("Honor", "Ignore"))
        if rng.random() < 0.5:
            constraint["nodeTaintsPolicy"] = rng.choice(("Honor", "Ignore"))
        # replaces the pod's own (one constraint per key and whenUnsatisfiable, validation)
        spec["topologySpreadConstraints"] = [constraint]
    if rng.random() < 0.06 and "podAffinity" not in affinity:
        affinity["podAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"app": rng.choice(APPS)}},
                    "topologyKey": "topology.kubernetes.io/zone",
                },
                {
                    "labelSelector": {"matchLabels": {"rev": rng.choice(("r1", "r2"))}},
                    "topologyKey": rng.choice(
                        ("topology.kubernetes.io/zone", "kubernetes.io/hostname")
                    ),
                },
            ]
        }
    elif rng.random() < 0.06 and "podAntiAffinity" not in affinity:
        term: dict[str, Any] = {
            "labelSelector": {"matchLabels": {"app": labels["app"]}},
            "topologyKey": "kubernetes.io/hostname",
        }
        term[rng.choice(("matchLabelKeys", "mismatchLabelKeys"))] = ["rev"]
        affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
    if rng.random() < 0.05:
        # one name per requirement (validation), the terms ORed
        terms = [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [name]}]}
            for name in (f"dn-{i:03d}" for i in rng.sample(range(40), 3))
        ]
        if rng.random() < 0.15:  # one term, two names no node has both of: a conflict
            terms = terms[:1]
            terms[0]["matchFields"].append(
                {"key": "metadata.name", "operator": "In", "values": ["dn-059"]}
            )
        node_affinity = affinity.setdefault("nodeAffinity", {})
        node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": terms
        }
    if affinity:
        spec["affinity"] = affinity
    pod["x-mode"] = "stored" if spec.get("runtimeClassName") else rng.choice(("written", "stored"))


# --- the recording extender ------------------------------------------------------------------


class RecordingExtender:
    """schedweb's Extender service over HTTP on 127.0.0.1; records the node names of every filter
    call by pod name. `snapshot` is set by the runner before each pod."""

    def __init__(self, policy_text: str) -> None:
        from policies.engine.policy import compile_policy
        from policies.extender.metrics import Metrics
        from policies.extender.service import Extender, ServedPolicy

        self.compiled = compile_policy(policy_text)
        served = ServedPolicy("differential", 1, self.compiled)
        self.snapshot: Any = None
        self.filtered: dict[str, list[list[str]]] = {}
        self.lock = threading.Lock()
        self.extender = Extender(
            policies=lambda: {SCHEDULER: served},
            snapshot=lambda: self.snapshot,
            metrics=Metrics(),
        )
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                verb = self.path.rstrip("/").rsplit("/", 1)[-1]
                if verb == "filter":
                    owner._record(body)
                answer = getattr(owner.extender, verb)(body)
                self.send_response(answer.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer.body)))
                self.end_headers()
                self.wfile.write(answer.body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/extender/"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def _record(self, body: bytes) -> None:
        args = json.loads(body)
        pod = (args.get("pod") or args.get("Pod") or {}).get("metadata", {}).get("name", "")
        names = args.get("nodenames") or args.get("NodeNames")
        if names is None:
            nodes = args.get("nodes") or args.get("Nodes") or {}
            names = [n["metadata"]["name"] for n in nodes.get("items") or []]
        with self.lock:
            self.filtered.setdefault(pod, []).append(sorted(names))

    def __enter__(self) -> RecordingExtender:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


# --- the run ---------------------------------------------------------------------------------

_REASON = re.compile(r"^(\d+) (.+)$")
# "0/56 nodes are available: <histogram>." then the PostFilter's text ("no new claims to
# deallocate, preemption: ...").
_HISTOGRAM = re.compile(r"nodes are available: (.*?)\.(?: |$)")


def event_reasons(message: str) -> dict[str, int]:
    """'0/56 nodes are available: 3 Insufficient cpu, 1 x. preemption: ...' -> {reason: n}."""
    found = _HISTOGRAM.search(message)
    if found is None:
        return {}
    body = found.group(1)
    out = {}
    # Reasons are sorted strings "<count> <reason>" joined by ", "; a reason may contain ", "
    # only in the extender's messages, which the policy here keeps free of commas.
    for part in body.split(", "):
        m = _REASON.match(part)
        if m:
            out[m.group(2)] = int(m.group(1))
    return out


@dataclass
class Disagreement:
    pod: str
    check: str  # feasible | pick | reasons
    scheduler: Any
    model: Any
    manifest: dict[str, Any] = field(default_factory=dict)


@dataclass
class RunReport:
    weight: int
    pods: int = 0
    feasible_checked: int = 0
    feasible_agree: int = 0
    bound: int = 0
    pick_agree: int = 0
    failed: int = 0
    reasons_agree: int = 0
    outcome_agree: int = 0  # bound vs unschedulable, as the model said
    message_agree: int = 0  # the whole FailedScheduling message
    written: int = 0  # pods judged from the person-written manifest
    disagreements: list[Disagreement] = field(default_factory=list)
    scheduler_log: str = ""
    rejected_by: dict[str, int] = field(default_factory=dict)  # filter plugin -> nodes rejected

    def figures(self) -> str:
        def pct(a: int, b: int) -> str:
            return f"{100 * a / b:.1f}% ({a}/{b})" if b else "n/a (0)"

        return (
            f"weight {self.weight}: {self.pods} pods ({self.written} as written); "
            f"(a) filter set {pct(self.feasible_agree, self.feasible_checked)}, "
            f"outcome {pct(self.outcome_agree, self.pods)}, "
            f"(b) bound node in tie group {pct(self.pick_agree, self.bound)}, "
            f"(c) FailedScheduling reasons {pct(self.reasons_agree, self.failed)}, "
            f"message {pct(self.message_agree, self.failed)}"
        )


def _wait(check, *, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.01)


def _failed_event(api, name: str, namespace: str) -> str:
    listed = api.get(
        f"/api/v1/namespaces/{namespace}/events?fieldSelector=involvedObject.name%3D{name}"
    )
    for event in listed.get("items", []):
        if event.get("reason") == "FailedScheduling":
            return event.get("message", "")
    return ""


def _outcome(api, name: str, namespace: str) -> tuple[str, str] | None:
    """('bound', node) or ('failed', message) once kube-scheduler has decided, else None."""
    pod = resources.pod_get(api=api, name=name, namespace=namespace)
    if pod["spec"].get("nodeName"):
        return "bound", pod["spec"]["nodeName"]
    for c in pod.get("status", {}).get("conditions", []):
        if c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable":
            message = _failed_event(api, name, namespace)
            if message:
                return "failed", message
    return None


def setup_cluster(plane, *, seed: int, nodes: int) -> tuple[list[dict], dict[str, str]]:
    """Creates the labelled namespaces with their Services, the nodes and one ReplicaSet per
    app; returns the stored nodes and app -> ReplicaSet uid."""
    for namespace, labels in NAMESPACES.items():
        with contextlib.suppress(resources.ApiError):  # already there: a second run on this plane
            plane.api.post(
                "/api/v1/namespaces",
                {
                    "apiVersion": "v1",
                    "kind": "Namespace",
                    "metadata": {"name": namespace, "labels": labels},
                },
            )
        for service, selector in SERVICES:
            with contextlib.suppress(resources.ApiError):
                plane.api.post(
                    f"/api/v1/namespaces/{namespace}/services",
                    {
                        "metadata": {"name": service},
                        "spec": {"selector": selector, "ports": [{"port": 80}]},
                    },
                )
    stored = []
    for manifest in corpus_nodes(seed=seed, count=nodes):
        try:
            stored.append(resources.node_create(api=plane.api, manifest=manifest))
        except resources.ApiError:
            stored.append(resources.node_get(api=plane.api, name=manifest["metadata"]["name"]))
    with contextlib.suppress(resources.ApiError):
        plane.api.post(
            "/apis/node.k8s.io/v1/runtimeclasses",
            {
                "apiVersion": "node.k8s.io/v1",
                "kind": "RuntimeClass",
                "metadata": {"name": RUNTIME_CLASS},
                "handler": "runc",
                "overhead": {"podFixed": OVERHEAD},
            },
        )
    owners = {}
    for app in APPS:
        rs = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": f"rs-{app}", "namespace": NAMESPACE},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": app}},
                "template": {
                    "metadata": {"labels": {"app": app}},
                    "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
                },
            },
        }
        path = f"/apis/apps/v1/namespaces/{NAMESPACE}/replicasets"
        try:
            owners[app] = plane.api.post(path, rs)["metadata"]["uid"]
        except resources.ApiError:
            owners[app] = plane.api.get(f"{path}/rs-{app}")["metadata"]["uid"]
    return stored, owners


def cluster_objects(plane) -> list[dict[str, Any]]:
    """The Namespaces, Services and controllers the API server holds, with their kinds (what
    the live watcher lists for the model besides nodes and pods)."""
    out = []
    for kind, path in (
        ("Namespace", "/api/v1/namespaces"),
        ("Service", "/api/v1/services"),
        ("ReplicationController", "/api/v1/replicationcontrollers"),
        ("ReplicaSet", "/apis/apps/v1/replicasets"),
        ("StatefulSet", "/apis/apps/v1/statefulsets"),
    ):
        out += [{**item, "kind": kind} for item in plane.api.get(path).get("items", [])]
    return out


def run_corpus(
    plane,
    *,
    weight: int,
    seed: int,
    pods: int,
    node_objects: list[dict],
    owners: dict[str, str],
    prefix: str,
    log=None,
    scheduler_args: tuple[str, ...] = (),
) -> RunReport:
    """Places `pods` generated pods one at a time under a fresh kube-scheduler with the extender
    at `weight`; every pod of the run is deleted at the end (the scheduler is stopped first)."""
    from policies.cluster.convert import pod_view
    from policies.cluster.loaded import LoadedCluster
    from policies.cluster.manifest import pod_view_from_object
    from policies.cluster.state import ClusterState
    from policies.schedmodel.pipeline import cycle_run
    from policies.schedmodel.profile import profile_parse
    from policies.schedulerconfig import SchedulerSetup, scheduler_configuration

    rng = random.Random(seed)
    report = RunReport(weight=weight)
    state = ClusterState.from_objects(node_objects, [], cluster_objects(plane))
    created: list[tuple[str, str]] = []  # (namespace, name)
    with RecordingExtender(POLICY) as extender:
        config = yaml.safe_dump(
            scheduler_configuration(
                SchedulerSetup(
                    extender_url=extender.url,
                    scheduler_names=(SCHEDULER,),
                    keep_default_profile=False,
                    kubeconfig=str(plane.kubeconfig),
                    leader_elect=False,
                    weight=weight,
                    preempt=False,
                    percentage_of_nodes_to_score=100,
                )
            ),
            sort_keys=False,
        )
        profile = profile_parse(config, scheduler_name=SCHEDULER)
        process = plane.start_scheduler(config, extra_args=scheduler_args)
        report.scheduler_log = str(process.log_path)
        try:
            for i in range(pods):
                name = f"{prefix}-{i:04d}"
                manifest = corpus_pod(rng, name, owners)
                written = manifest.pop("x-mode") == "written"
                snapshot = state.freeze()
                extender.snapshot = LoadedCluster(snapshot, "live", "differential")
                namespace = manifest["metadata"]["namespace"]
                obj = resources.pod_create(api=plane.api, manifest=manifest)
                created.append((namespace, name))
                # kube-scheduler sees the stored pod; the model the stored one or the one
                # written, through its own admission defaults
                report.written += written
                cycle = cycle_run(
                    pod=pod_view_from_object(manifest) if written else pod_view(obj),
                    nodes=snapshot.nodes(),
                    state=snapshot,
                    policy=extender.compiled,
                    profile=profile,
                )
                kind, value = _wait(
                    lambda name=name, namespace=namespace: _outcome(plane.api, name, namespace),
                    timeout=60,
                    what=f"{name} bound or FailedScheduling",
                )
                report.pods += 1
                if (kind == "bound") == bool(cycle.pick):
                    report.outcome_agree += 1
                else:
                    report.disagreements.append(
                        Disagreement(name, "outcome", (kind, value), cycle.pick, manifest)
                    )
                for o in cycle.outcomes:
                    if o.plugin:
                        report.rejected_by[o.plugin] = report.rejected_by.get(o.plugin, 0) + 1
                model_feasible = sorted(cycle.feasible())
                calls = extender.filtered.get(name, [])
                report.feasible_checked += 1
                got = calls[0] if calls else []
                if got == model_feasible and all(c == got for c in calls):
                    report.feasible_agree += 1
                else:
                    report.disagreements.append(
                        Disagreement(name, "feasible", calls, model_feasible, manifest)
                    )
                if kind == "bound":
                    report.bound += 1
                    if value in cycle.pick:
                        report.pick_agree += 1
                    else:
                        report.disagreements.append(
                            Disagreement(
                                name,
                                "pick",
                                value,
                                {
                                    "pick": cycle.pick,
                                    "totals": {
                                        o.node: (o.total, o.scores, o.extender)
                                        for o in cycle.outcomes
                                        if o.total is not None
                                    },
                                },
                                manifest,
                            )
                        )
                    bound = resources.pod_get(api=plane.api, name=name, namespace=namespace)
                    state.apply_pod(bound)
                else:
                    report.failed += 1
                    expected = cycle.rejection_counts()
                    if cycle.prefilter_message:  # the message names the PreFilter's text only
                        expected = {cycle.prefilter_message: len(cycle.outcomes)}
                    got_reasons = event_reasons(value)
                    if not got_reasons and value.startswith(f"0/{len(cycle.outcomes)} nodes"):
                        got_reasons = {
                            value.split(": ", 1)[1].split(". ", 1)[0]: len(cycle.outcomes)
                        }
                    if got_reasons == expected:
                        report.reasons_agree += 1
                    else:
                        report.disagreements.append(
                            Disagreement(name, "reasons", got_reasons, expected, manifest)
                        )
                    if value == cycle.failed_scheduling():
                        report.message_agree += 1
                    else:
                        report.disagreements.append(
                            Disagreement(
                                name, "message", value, cycle.failed_scheduling(), manifest
                            )
                        )
                    resources.pod_delete(api=plane.api, name=name, namespace=namespace)
                    created.remove((namespace, name))
                if (
                    log is not None
                    and report.disagreements
                    and report.disagreements[-1].pod == name
                ):
                    log(report.disagreements[-1])
        finally:
            process.stop()
            for namespace, name in created:
                resources.pod_delete(api=plane.api, name=name, namespace=namespace)
    return report
