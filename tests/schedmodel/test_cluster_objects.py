"""What kube-scheduler reads besides nodes and pods, in the model: Namespaces' labels for pod
(anti-)affinity namespaceSelectors (InterPodAffinity), and the Services and controllers behind
PodTopologySpread's system default constraints (helper.DefaultSelector). Pure inputs: a
ClusterState built from JSON; arithmetic worked in the comments."""

from __future__ import annotations

from typing import Any

from policies.cluster.state import ClusterState
from policies.schedmodel import plugins as p
from policies.schedmodel import spread as sp
from policies.schedmodel.existing import existing_for
from policies.schedmodel.pipeline import cycle_run
from tests.builders import make_node, make_pod

HOST = "kubernetes.io/hostname"


def namespace(name: str, **labels: str) -> dict[str, Any]:
    return {
        "kind": "Namespace",
        "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name, **labels}},
    }


def service(name: str, selector: dict[str, str] | None, ns: str = "default") -> dict[str, Any]:
    spec = {} if selector is None else {"selector": selector}
    return {"kind": "Service", "metadata": {"name": name, "namespace": ns}, "spec": spec}


def replicaset(name: str, selector: dict[str, Any] | None, ns: str = "default") -> dict[str, Any]:
    spec = {} if selector is None else {"selector": selector}
    return {"kind": "ReplicaSet", "metadata": {"name": name, "namespace": ns}, "spec": spec}


def owned(pod: dict[str, Any], kind: str, name: str, api: str = "apps/v1") -> dict[str, Any]:
    pod["metadata"]["ownerReferences"] = [
        {"apiVersion": api, "kind": kind, "name": name, "uid": "u", "controller": True}
    ]
    return pod


def term(app: str, ns_selector: Any = None, key: str = HOST, **extra: Any) -> dict[str, Any]:
    t: dict[str, Any] = {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}
    if ns_selector is not None:
        t["namespaceSelector"] = ns_selector
    return {**t, **extra}


def required(kind: str, *terms: dict[str, Any]) -> dict[str, Any]:
    return {kind: {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}


def cycle(nodes, pod, pods=(), objects=()):
    state = ClusterState.from_objects(nodes, [*pods, pod], objects).freeze()
    view = next(v for v in state.pods() if v["name"] == pod["metadata"]["name"])
    return cycle_run(pod=view, nodes=state.nodes(), state=state, policy=None, profile=None)


def rejected(result) -> dict[str, str | None]:
    return {o.node: o.plugin for o in result.outcomes}


NODES = [make_node("n1"), make_node("n2"), make_node("n3")]
NAMESPACES = [
    namespace("shop", team="storefront", env="prod"),
    namespace("data", team="data", env="prod"),
    namespace("lab", team="data", env="dev"),
]
DB_PODS = [  # app=db in shop on n1, in data on n2; n3 holds nothing
    make_pod("db-shop", namespace="shop", labels={"app": "db"}, node_name="n1"),
    make_pod("db-data", namespace="data", labels={"app": "db"}, node_name="n2"),
]


# --- InterPodAffinity: the incoming pod's terms --------------------------------------------


def test_a_namespace_selector_resolves_against_the_namespaces_labels():
    # anti-affinity to app=db in namespaces labelled team=storefront -> only shop's db counts
    pod = make_pod(
        "p",
        namespace="lab",
        affinity=required("podAntiAffinity", term("db", {"matchLabels": {"team": "storefront"}})),
    )
    result = cycle(NODES, pod, DB_PODS, NAMESPACES)
    assert rejected(result) == {"n1": "InterPodAffinity", "n2": None, "n3": None}
    assert _outcome(result, "n1").reasons == (p.R_POD_ANTI,)


def test_listed_namespaces_and_a_selector_add_up():
    # namespaces [shop] + selector env=dev (lab only): db pods in shop count, data's do not
    t = term("db", {"matchLabels": {"env": "dev"}}, namespaces=["shop"])
    pod = make_pod("p", namespace="lab", affinity=required("podAntiAffinity", t))
    assert rejected(cycle(NODES, pod, DB_PODS, NAMESPACES)) == {
        "n1": "InterPodAffinity",
        "n2": None,
        "n3": None,
    }


def test_an_empty_namespace_selector_means_every_namespace_and_none_means_the_pods_own():
    every = make_pod("p", namespace="lab", affinity=required("podAntiAffinity", term("db", {})))
    assert rejected(cycle(NODES, every, DB_PODS, NAMESPACES)) == {
        "n1": "InterPodAffinity",
        "n2": "InterPodAffinity",
        "n3": None,
    }
    own = make_pod("p", namespace="data", affinity=required("podAntiAffinity", term("db")))
    assert rejected(cycle(NODES, own, DB_PODS, NAMESPACES)) == {
        "n1": None,
        "n2": "InterPodAffinity",
        "n3": None,
    }


def test_a_selector_that_nil_labels_satisfy_selects_every_namespace_as_v1_35_does():
    # mergeAffinityTermNamespacesIfNotEmpty takes the term by value in v1.35: the namespaces
    # are merged, but the selector is not reset to Nothing, and Matches(pod, nil) then asks it
    # about nil labels: "team NotIn (storefront)" holds for nil labels, so shop's db counts too
    t = term(
        "db", {"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["storefront"]}]}
    )
    pod = make_pod("p", namespace="lab", affinity=required("podAntiAffinity", t))
    assert rejected(cycle(NODES, pod, DB_PODS, NAMESPACES)) == {
        "n1": "InterPodAffinity",
        "n2": "InterPodAffinity",
        "n3": None,
    }


def test_the_first_pod_of_a_group_matches_itself_only_if_its_namespace_is_selected():
    # required affinity to app=web in team=data namespaces; no such pod exists anywhere.
    # In lab (team=data) the pod matches its own term: every node passes; in shop it does not.
    t = term("web", {"matchLabels": {"team": "data"}})
    inside = make_pod(
        "p", namespace="lab", labels={"app": "web"}, affinity=required("podAffinity", t)
    )
    assert set(rejected(cycle(NODES, inside, DB_PODS, NAMESPACES)).values()) == {None}
    outside = make_pod(
        "p", namespace="shop", labels={"app": "web"}, affinity=required("podAffinity", t)
    )
    result = cycle(NODES, outside, DB_PODS, NAMESPACES)
    assert set(rejected(result).values()) == {"InterPodAffinity"}
    assert _outcome(result, "n3").reasons == (p.R_POD_AFFINITY,)


# --- InterPodAffinity: existing pods' terms, matched with the incoming pod's namespace labels --


def test_an_existing_pods_anti_affinity_selector_reads_the_incoming_pods_namespace_labels():
    # the guard on n1 (namespace data) keeps app=web pods of env=prod namespaces off its node
    guard = make_pod(
        "guard",
        namespace="data",
        node_name="n1",
        affinity=required("podAntiAffinity", term("web", {"matchLabels": {"env": "prod"}})),
    )
    prod = make_pod("p", namespace="shop", labels={"app": "web"})
    result = cycle(NODES, prod, [guard], NAMESPACES)
    assert rejected(result) == {"n1": "InterPodAffinity", "n2": None, "n3": None}
    assert _outcome(result, "n1").reasons == (p.R_EXISTING_ANTI,)
    dev = make_pod("p", namespace="lab", labels={"app": "web"})
    assert set(rejected(cycle(NODES, dev, [guard], NAMESPACES)).values()) == {None}
    # a namespace the cluster does not list has no labels (GetNamespaceLabelsSnapshot)
    unknown = make_pod("p", namespace="ghost", labels={"app": "web"})
    assert set(rejected(cycle(NODES, unknown, [guard], NAMESPACES)).values()) == {None}


def test_preferred_terms_on_both_sides_use_the_namespace_labels():
    # incoming: prefer app=db in team=data namespaces, weight 10 -> n2 (db-data) gets 10.
    # existing: db-shop prefers app=web pods of env=prod namespaces, weight 4 -> n1 gets 4.
    # raw n1 4, n2 10, n3 0 -> 100 * (raw - 0) / 10: 40, 100, 0
    db_shop = make_pod(
        "db-shop",
        namespace="shop",
        labels={"app": "db"},
        node_name="n1",
        affinity={
            "podAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 4, "podAffinityTerm": term("web", {"matchLabels": {"env": "prod"}})}
                ]
            }
        },
    )
    pod = make_pod(
        "p",
        namespace="shop",
        labels={"app": "web"},
        affinity={
            "podAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 10, "podAffinityTerm": term("db", {"matchLabels": {"team": "data"}})}
                ]
            }
        },
    )
    result = cycle(NODES, pod, [db_shop, DB_PODS[1]], NAMESPACES)
    scores = [_outcome(result, n).scores["InterPodAffinity"] for n in ("n1", "n2", "n3")]
    assert scores == [40, 100, 0]


def test_without_namespace_objects_each_namespace_carries_its_name_label():
    # a file of nodes and pods only: kubernetes.io/metadata.name is inferred (the API server
    # sets it on every namespace), so the common "namespaces by name" selector still works
    sel = {
        "matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["shop"]}
        ]
    }
    pod = make_pod("p", namespace="lab", affinity=required("podAntiAffinity", term("db", sel)))
    assert rejected(cycle(NODES, pod, DB_PODS)) == {
        "n1": "InterPodAffinity",
        "n2": None,
        "n3": None,
    }


# --- PodTopologySpread: the system defaults' selector ----------------------------------------


def _selector(pod: dict[str, Any], objects: list[dict[str, Any]]) -> dict[str, Any] | None:
    state = ClusterState.from_objects([], [pod], objects).freeze()
    return sp.default_selector(state.pods()[0], existing_for(state))


def test_the_default_selector_merges_the_services_that_select_the_pod():
    pod = make_pod("p", labels={"app": "web", "tier": "fe", "v": "2"})
    objects = [
        service("web", {"app": "web"}),
        service("fe", {"tier": "fe"}),
        service("other", {"app": "db"}),  # does not select the pod
        service("elsewhere", {"app": "web"}, ns="shop"),  # another namespace
        service("headless", None),  # no selector: selects nothing
    ]
    assert _selector(pod, objects) == {
        "matchLabels": {"app": "web", "tier": "fe"},
        "matchExpressions": [],
    }
    assert _selector(pod, []) is None  # nothing selects it: no default constraint


def test_the_default_selector_adds_the_controllers_selector():
    rs_selector = {
        "matchLabels": {"app": "web"},
        "matchExpressions": [{"key": "v", "operator": "Exists"}],
    }
    pod = owned(make_pod("p", labels={"app": "web", "v": "2"}), "ReplicaSet", "web-1")
    assert _selector(pod, [replicaset("web-1", rs_selector)]) == {
        "matchLabels": {},
        "matchExpressions": [
            {"key": "app", "operator": "In", "values": ["web"]},
            {"key": "v", "operator": "Exists", "values": []},
        ],
    }
    # the owner must be in the snapshot, and named by apps/v1 exactly
    assert _selector(pod, []) is None
    old = owned(make_pod("p", labels={"app": "web"}), "ReplicaSet", "web-1", "extensions/v1beta1")
    assert _selector(old, [replicaset("web-1", rs_selector)]) is None
    # a ReplicationController's map merges into the services' labels
    rc = {
        "kind": "ReplicationController",
        "metadata": {"name": "rc", "namespace": "default"},
        "spec": {"selector": {"app": "web"}},
    }
    by_rc = owned(
        make_pod("p", labels={"app": "web", "v": "2"}), "ReplicationController", "rc", "v1"
    )
    assert _selector(by_rc, [rc, service("v", {"v": "2"})]) == {
        "matchLabels": {"v": "2", "app": "web"},
        "matchExpressions": [],
    }


def test_a_bare_pod_a_service_selects_is_spread_by_the_system_defaults():
    # a (zone z1) holds one app=web pod, b (z2) none. Constraints hostname maxSkew 3 and
    # zone maxSkew 5, both weighted ln(2 + 2) = 1.386 (2 candidate nodes, 2 zones):
    # a: 1 * 1.386 + 3 - 1 + 1 * 1.386 + 5 - 1 = 8.77 -> 9;  b: 0 + 2 + 0 + 4 = 6
    # normalized 100 * (max + min - raw) // max: a 100 * 6 // 9 = 66, b 100 * 9 // 9 = 100
    nodes = [make_node("a", zone="z1"), make_node("b", zone="z2")]
    web = make_pod("web-0", labels={"app": "web"}, node_name="a")
    pod = make_pod("p", labels={"app": "web"})
    result = cycle(nodes, pod, [web], [service("web", {"app": "web"})])
    assert [_outcome(result, n).scores["PodTopologySpread"] for n in "ab"] == [66, 100]
    # without the Service nothing selects the pod: PreScore skips the plugin (no score at all)
    alone = cycle(nodes, pod, [web])
    assert "PodTopologySpread" in alone.skipped
    assert all("PodTopologySpread" not in _outcome(alone, n).scores for n in "ab")


def _outcome(result, name):
    return next(o for o in result.outcomes if o.node == name)


def test_a_spread_constraint_with_an_empty_selector_counts_no_existing_pod():
    # countPodsMatchSelector returns 0 for an empty selector, while the pod still matches itself:
    # skew on every node = 0 + 1 - 0 = 1 <= maxSkew 1, so a, which holds 2 pods, passes too
    nodes = [make_node("a", zone="z1"), make_node("b", zone="z2")]
    busy = [make_pod(f"x{i}", labels={"app": "web"}, node_name="a") for i in range(2)]
    constraint = {
        "maxSkew": 1,
        "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {},
    }
    pod = make_pod("p", labels={"app": "web"}, topologySpreadConstraints=[constraint])
    assert set(rejected(cycle(nodes, pod, busy)).values()) == {None}
    # with a selector, a holds 2 matching pods: skew 2 + 1 - 0 = 3 > 1 rejects it
    constraint["labelSelector"] = {"matchLabels": {"app": "web"}}
    assert rejected(cycle(nodes, pod, busy)) == {"a": "PodTopologySpread", "b": None}
