"""KubeSchedulerConfiguration (v1), second-scheduler manifests and the extender's own RBAC: every
Kubernetes manifest schedweb generates, shared by `manage.py schedulerconfig` and the Connect page.

Two ways to scope which pods reach the extender (extender-protocol.md section 6.3):
- `profile`: a scheduler profile per schedulerName; extenders are shared by all profiles, so
  the extender passes other pods through at once (it does).
- `resource`: `managedResources` with an extended resource that opted-in pods request
  (ignoredByScheduler, so no node needs to advertise it); only those pods reach the extender.
And two ways to run it (section 6.4 and seed 001): as extra profiles of an existing scheduler,
or as a second, isolated kube-scheduler Deployment (`--manifests`).
"""

from __future__ import annotations

import base64
import ipaddress
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import yaml

KUBE_SCHEDULER_IMAGE = "registry.k8s.io/kube-scheduler:v1.35.8"
MANAGED_RESOURCE = "schedweb.io/scheduled"
# A second scheduler's extender TLS files: a Secret (keys below) mounted here, read-only, readable
# by the container's group only (fsGroup). Kept out of the ConfigMap's /etc/schedweb mount.
TLS_MOUNT = "/etc/schedweb-tls"
TLS_SECRET_KEYS = {"tls_ca_file": "ca.crt", "tls_cert_file": "tls.crt", "tls_key_file": "tls.key"}
SCHEDULER_UID = 65532


class BindScopeError(ValueError):
    """bindVerb with a profile kube-scheduler runs but no schedweb policy targets.

    kube-scheduler's extenders are global, not per profile: a binder extender binds every pod it
    is interested in, of every profile (v1.35.8 pkg/scheduler/schedule_one.go extendersBinding:
    only IsBinder and IsInterested are checked; extender.go IsInterested looks at
    managedResources alone). schedweb refuses to bind pods no policy targets, so such a pod would
    never be bound. Scope by resource, or run a second scheduler whose every profile is schedweb's.
    """


@dataclass(frozen=True)
class SchedulerSetup:
    """What the generated configuration needs to know about this installation."""

    extender_url: str  # ends with /extender/
    scheduler_names: tuple[str, ...] = ("schedweb",)
    scoping: str = "profile"  # profile | resource
    keep_default_profile: bool = True
    kubeconfig: str = "/etc/kubernetes/scheduler.conf"
    leader_elect: bool = True
    lease_name: str = "schedweb-scheduler"
    namespace: str = "kube-system"
    ignorable: bool = False
    node_cache_capable: bool = True
    http_timeout: str = "2s"
    weight: int = 1
    bind: bool = False
    preempt: bool = True
    percentage_of_nodes_to_score: int | None = None
    # Extender tlsConfig (https URLs only), as kube-scheduler sees the files: the CA that signed
    # the extender's certificate, and kube-scheduler's client certificate and key (mutual TLS).
    tls_ca_file: str = ""
    tls_cert_file: str = ""
    tls_key_file: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def extender_tls_config(setup: SchedulerSetup) -> dict[str, str]:
    """The extender's tlsConfig (KubeSchedulerConfiguration v1 ExtenderTLSConfig): file paths."""
    tls = {
        "caFile": setup.tls_ca_file,
        "certFile": setup.tls_cert_file,
        "keyFile": setup.tls_key_file,
    }
    return {key: value for key, value in tls.items() if value}


def scheduler_configuration(setup: SchedulerSetup) -> dict[str, Any]:
    """The KubeSchedulerConfiguration as a dict (strictly decoded by kube-scheduler: exact keys)."""
    profiles: list[dict[str, Any]] = []
    if setup.keep_default_profile and "default-scheduler" not in setup.scheduler_names:
        profiles.append({"schedulerName": "default-scheduler"})
    for name in setup.scheduler_names:
        profile: dict[str, Any] = {"schedulerName": name}
        if setup.percentage_of_nodes_to_score is not None:
            # Let the extender judge every feasible node, not a sample (protocol P7).
            profile["percentageOfNodesToScore"] = setup.percentage_of_nodes_to_score
        profiles.append(profile)
    extender: dict[str, Any] = {
        "urlPrefix": setup.extender_url,
        "filterVerb": "filter",
        "prioritizeVerb": "prioritize",
        "weight": setup.weight,
        "enableHTTPS": setup.extender_url.startswith("https://"),
        "httpTimeout": setup.http_timeout,
        "nodeCacheCapable": setup.node_cache_capable,
        "ignorable": setup.ignorable,
    }
    if extender["enableHTTPS"] and (tls := extender_tls_config(setup)):
        extender["tlsConfig"] = tls
    if setup.preempt:
        extender["preemptVerb"] = "preempt"
    if setup.bind:
        others = [
            p["schedulerName"] for p in profiles if p["schedulerName"] not in setup.scheduler_names
        ]
        if setup.scoping == "profile" and others:
            raise BindScopeError(
                f"bind is on, but kube-scheduler would send the binds of every profile to the "
                f"extender, {', '.join(others)} included (extenders are not per profile), and "
                "schedweb binds only the pods of its policies' schedulerNames: use a second "
                "scheduler (--second-scheduler or --manifests) or --scoping resource"
            )
        extender["bindVerb"] = "bind"
    if setup.scoping == "resource":
        extender["managedResources"] = [{"name": MANAGED_RESOURCE, "ignoredByScheduler": True}]
    config: dict[str, Any] = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": setup.kubeconfig},
        "leaderElection": {"leaderElect": setup.leader_elect},
        "profiles": profiles,
        "extenders": [extender],
    }
    if setup.leader_elect:
        # A second scheduler must not take the default scheduler's lease.
        config["leaderElection"].update(
            {
                "resourceLock": "leases",
                "resourceNamespace": setup.namespace,
                "resourceName": setup.lease_name,
            }
        )
    return config


def second_scheduler_manifests(setup: SchedulerSetup) -> list[dict[str, Any]]:
    """ServiceAccount, RBAC, ConfigMap and Deployment of an isolated second kube-scheduler (seed 001)."""
    name = setup.lease_name
    secret_files = tls_secret_files(setup)
    # In the pod, the TLS files are the Secret's, at TLS_MOUNT.
    in_pod = {field: f"{TLS_MOUNT}/{TLS_SECRET_KEYS[field]}" for field in secret_files}
    in_cluster = SchedulerSetup(
        **{**setup.__dict__, "kubeconfig": "", "keep_default_profile": False, **in_pod}
    )
    config = scheduler_configuration(in_cluster)
    del config["clientConnection"]  # in-cluster: the ServiceAccount's token
    labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "schedweb"}
    mounts: list[dict[str, Any]] = [
        {"name": "config", "mountPath": "/etc/schedweb", "readOnly": True}
    ]
    volumes: list[dict[str, Any]] = [{"name": "config", "configMap": {"name": f"{name}-config"}}]
    pod_security: dict[str, Any] = {"seccompProfile": {"type": "RuntimeDefault"}}
    if secret_files:
        mounts.append({"name": "extender-tls", "mountPath": TLS_MOUNT, "readOnly": True})
        volumes.append(
            {
                "name": "extender-tls",
                # 0440 and the pod's fsGroup: the non-root container reads the key, nobody else.
                "secret": {"secretName": tls_secret_name(setup), "defaultMode": 0o440},
            }
        )
        pod_security["fsGroup"] = SCHEDULER_UID
    return [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": name, "namespace": setup.namespace},
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": f"{name}-as-kube-scheduler"},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": setup.namespace}],
            "roleRef": {
                "kind": "ClusterRole",
                "name": "system:kube-scheduler",
                "apiGroup": "rbac.authorization.k8s.io",
            },
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": f"{name}-as-volume-scheduler"},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": setup.namespace}],
            "roleRef": {
                "kind": "ClusterRole",
                "name": "system:volume-scheduler",
                "apiGroup": "rbac.authorization.k8s.io",
            },
        },
        {
            # system:kube-scheduler only allows its own lease name; this one may use ours.
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": f"{name}-lease", "namespace": setup.namespace},
            "rules": [
                {
                    "apiGroups": ["coordination.k8s.io"],
                    "resources": ["leases"],
                    "verbs": ["create"],
                },
                {
                    "apiGroups": ["coordination.k8s.io"],
                    "resources": ["leases"],
                    "resourceNames": [name],
                    "verbs": ["get", "update"],
                },
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": f"{name}-lease", "namespace": setup.namespace},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": setup.namespace}],
            "roleRef": {
                "kind": "Role",
                "name": f"{name}-lease",
                "apiGroup": "rbac.authorization.k8s.io",
            },
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"{name}-config", "namespace": setup.namespace},
            "data": {"scheduler-config.yaml": dump_yaml(config)},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "namespace": setup.namespace, "labels": labels},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "serviceAccountName": name,
                        "priorityClassName": "system-cluster-critical",
                        "containers": [
                            {
                                "name": "kube-scheduler",
                                "image": KUBE_SCHEDULER_IMAGE,
                                "command": [
                                    "kube-scheduler",
                                    "--config=/etc/schedweb/scheduler-config.yaml",
                                    "--v=2",
                                ],
                                "livenessProbe": {
                                    "httpGet": {
                                        "path": "/healthz",
                                        "port": 10259,
                                        "scheme": "HTTPS",
                                    },
                                    "initialDelaySeconds": 15,
                                },
                                "readinessProbe": {
                                    "httpGet": {
                                        "path": "/healthz",
                                        "port": 10259,
                                        "scheme": "HTTPS",
                                    }
                                },
                                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                                # Nothing privileged: kube-scheduler writes no file (its
                                # serving certificate is generated in memory).
                                "securityContext": {
                                    "privileged": False,
                                    "allowPrivilegeEscalation": False,
                                    "runAsNonRoot": True,
                                    "runAsUser": SCHEDULER_UID,
                                    "readOnlyRootFilesystem": True,
                                    "capabilities": {"drop": ["ALL"]},
                                },
                                "volumeMounts": mounts,
                            }
                        ],
                        "volumes": volumes,
                        "securityContext": pod_security,
                    },
                },
            },
        },
    ]


def tls_secret_files(setup: SchedulerSetup) -> dict[str, str]:
    """The extender TLS files a second scheduler needs, field -> path where schedweb runs them
    (empty for plain HTTP)."""
    if not setup.extender_url.startswith("https://"):
        return {}
    return {field: getattr(setup, field) for field in TLS_SECRET_KEYS if getattr(setup, field)}


def tls_secret_name(setup: SchedulerSetup) -> str:
    return f"{setup.lease_name}-extender-tls"


def tls_secret_command(setup: SchedulerSetup) -> str:
    """The kubectl command creating the Secret the second scheduler mounts, from the local files;
    empty when it needs none. The key never appears in generated output (the Connect page shows
    it to viewers)."""
    files = tls_secret_files(setup)
    if not files:
        return ""
    sources = " ".join(f"--from-file={TLS_SECRET_KEYS[f]}={path}" for f, path in files.items())
    return f"kubectl -n {setup.namespace} create secret generic {tls_secret_name(setup)} {sources}"


def second_scheduler_yaml(setup: SchedulerSetup) -> str:
    """second_scheduler_manifests as YAML, led by the Secret's kubectl command as a comment."""
    text = dump_yaml(second_scheduler_manifests(setup))
    command = tls_secret_command(setup)
    if not command:
        return text
    return (
        "# First create the Secret with the extender's CA and kube-scheduler's client certificate:\n"
        f"#   {command}\n{text}"
    )


MAX_URL_LENGTH = 2048


def extender_url_problem(url: str) -> str:
    """Why `url` cannot be an extender urlPrefix ("" when it can), for the CLI's --url and the
    Connect page's field alike: http(s) with a host, no query, fragment or credentials, the path
    ending in /extender/ (the listener answers /extender/<verb> only). Plain http stays allowed
    (the Connect page says the listener speaks it on loopback only)."""
    if len(url) > MAX_URL_LENGTH:
        return f"at most {MAX_URL_LENGTH} characters"
    if any(c.isspace() for c in url):
        return "no spaces"
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        parts.port  # noqa: B018  (raises ValueError for a port that is not a number)
    except ValueError as exc:
        return f"not a URL: {exc}"
    if parts.scheme not in ("https", "http") or not host:
        return "an https:// URL with a host, e.g. https://schedweb-extender.schedweb.svc:8443/extender/"
    if parts.username is not None or parts.query or parts.fragment:
        return "no user, query or fragment: the verbs are appended to it"
    if not parts.path.endswith("/extender/"):
        return "the path ends with /extender/ (the listener answers /extender/<verb>)"
    return ""


# The chart's extender Service (release "schedweb" in namespace "schedweb", as the README installs
# it): what in-cluster manifests name when the configured URL is a loopback address, which a
# scheduler pod cannot reach (its own loopback is not schedweb's).
IN_CLUSTER_EXTENDER_URL = "https://schedweb-extender.schedweb.svc:8443/extender/"


def url_is_loopback(url: str) -> bool:
    """True when `url`'s host is a loopback address (127.0.0.0/8, ::1) or localhost."""
    try:
        host = urlsplit(url).hostname or ""
    except ValueError:
        return False
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def extender_urls(*, prefix: str) -> dict[str, str]:
    """The exact URLs kube-scheduler calls: prefix + verb, no trailing slash (protocol P14)."""
    base = prefix if prefix.endswith("/") else prefix + "/"
    return {verb: base + verb for verb in ("filter", "prioritize", "preempt", "bind")}


# The requeue nudge's annotation (policies/extender/requeue.py ANNOTATION): the only change the
# worker makes to a pod, which the chart's admission policy holds it to.
REQUEUE_ANNOTATION = "schedweb.io/requeue"


def _cluster_role(name: str, rules: list[dict[str, Any]], subject: str, namespace: str) -> list:
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name},
            "rules": rules,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "subjects": [{"kind": "ServiceAccount", "name": subject, "namespace": namespace}],
            "roleRef": {
                "kind": "ClusterRole",
                "name": name,
                "apiGroup": "rbac.authorization.k8s.io",
            },
        },
    ]


def worker_cluster_role(
    *, queue: bool, name: str = "schedweb-worker", namespace: str = "schedweb"
) -> list[dict[str, Any]]:
    """The worker's ClusterRole and its binding to the ServiceAccount `name`: list/watch nodes
    and pods (the snapshot), and namespaces, services, replicationcontrollers, apps replicasets
    and statefulsets (what kube-scheduler's InterPodAffinity namespaceSelector and
    PodTopologySpread system defaults read, so the preview models them), patch pods (the
    requeue nudge's annotation: RBAC cannot narrow a patch, the chart's admission policy does,
    deploy/helm/schedweb/templates/admission-policy.yaml); only with `queue` (policies with
    queue: or gang:), list and create priorityclasses and workloads (under the same policy)."""
    rules: list[dict[str, Any]] = [
        {
            "apiGroups": [""],
            "resources": ["nodes", "pods", "namespaces", "services", "replicationcontrollers"],
            "verbs": ["list", "watch"],
        },
        {
            "apiGroups": ["apps"],
            "resources": ["replicasets", "statefulsets"],
            "verbs": ["list", "watch"],
        },
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["patch"]},
    ]
    if queue:
        # the queue keys' PriorityClasses (policies/queue_classes.py) and the gangs' Workloads
        # (policies/gangs.py; an alpha API in 1.35): listed, created if missing
        rules.append(
            {
                "apiGroups": ["scheduling.k8s.io"],
                "resources": ["priorityclasses", "workloads"],
                "verbs": ["list", "create"],
            }
        )
    return _cluster_role(name, rules, name, namespace)


def extender_cluster_role(
    *, name: str = "schedweb-extender", namespace: str = "schedweb"
) -> list[dict[str, Any]]:
    """The extender's ClusterRole when it binds (SCHEDWEB_EXTENDER_BIND), bound to the
    ServiceAccount `name`: create pods/binding, and get pods (a bind answered 409 reads the pod
    to tell "already on that node" from a conflict, policies/cluster/live.py). Without bind the
    extender calls no Kubernetes API and has no role, nor a token."""
    rules = [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["pods/binding"], "verbs": ["create"]},
    ]
    return _cluster_role(name, rules, name, namespace)


def schedweb_rbac(
    *, bind: bool, queue: bool = False, fullname: str = "schedweb", namespace: str = "schedweb"
) -> list[dict[str, Any]]:
    """Least privilege for what is enabled, one ServiceAccount per component as the Helm chart
    runs them (release `fullname` in `namespace`): the worker's role and, with bind, the
    extender's; the web pods, beat and the migrations need none. The chart's roles are these
    (tests/deploy/test_rbac_live.py compares them and runs each with a token of its account)."""
    roles = worker_cluster_role(queue=queue, name=f"{fullname}-worker", namespace=namespace)
    if bind:
        roles += extender_cluster_role(name=f"{fullname}-extender", namespace=namespace)
    return roles


def rbac_command(*, bind: bool, queue: bool = False) -> str:
    """The `schedulerconfig` command line that prints schedweb_rbac(bind=, queue=)."""
    command = "python manage.py schedulerconfig --rbac " + ("--bind" if bind else "--no-bind")
    return command + (" --queue" if queue else "")


class _PlainDumper(yaml.SafeDumper):
    """YAML a person pastes and reads: no anchors or aliases (`&id001`; a dict used twice, such
    as a Deployment's labels, is written out twice) and multi-line strings as literal blocks
    (`|`: the ConfigMap's KubeSchedulerConfiguration reads as YAML, not one escaped string)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_PlainDumper.add_representer(str, _represent_str)


def dump_yaml(documents: list[dict[str, Any]] | dict[str, Any]) -> str:
    """Generated objects as plain YAML (_PlainDumper), in the order they were built."""
    if isinstance(documents, dict):
        return yaml.dump(documents, Dumper=_PlainDumper, sort_keys=False)
    return yaml.dump_all(documents, Dumper=_PlainDumper, sort_keys=False)


# --- the queue webhook (issue 11) ------------------------------------------------------------

WEBHOOK_PATH = "/admission/queue"
# Namespaces whose pods never reach the webhook: the control plane's own, whatever the policies
# say, so a webhook that is down under failurePolicy Fail cannot block kube-system.
PROTECTED_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease")
QUEUE_OPT_OUT_LABEL = "schedweb.io/queue"  # a pod labelled schedweb.io/queue=off is not sent


@dataclass(frozen=True)
class QueuePolicy:
    """An active policy with a `queue:` as the webhook configuration needs it."""

    name: str
    failure_policy: str  # Ignore | Fail
    scheduler_names: tuple[str, ...]


def webhook_url(extender_url: str) -> str:
    """The webhook's URL on the extender's listener: same scheme, host and port."""
    base = extender_url.split("/extender/", 1)[0].rstrip("/")
    return base + WEBHOOK_PATH


def queue_webhook_configuration(
    *,
    extender_url: str,
    policies: list[QueuePolicy],
    ca_bundle: str = "",
    name: str = "schedweb-queue",
    extra_namespaces: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The MutatingWebhookConfiguration giving pods their queue key as priority: one webhook
    per policy, so each follows its policy's failurePolicy, matching only pods of its
    schedulerNames (matchConditions: other pods are never sent, so a webhook that is down never
    blocks them), only on CREATE, never in PROTECTED_NAMESPACES (nor `extra_namespaces`,
    e.g. schedweb's own), and not for pods labelled schedweb.io/queue=off. `ca_bundle` is the
    PEM of the CA that signed the listener's certificate."""
    client: dict[str, Any] = {"url": webhook_url(extender_url)}
    if ca_bundle:
        client["caBundle"] = base64.b64encode(ca_bundle.encode()).decode()
    webhooks = []
    for policy in policies:
        names = ", ".join(f"'{n}'" for n in policy.scheduler_names)
        webhooks.append(
            {
                "name": f"{policy.name}.queue.schedweb.io",
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": policy.failure_policy,
                "reinvocationPolicy": "Never",
                "timeoutSeconds": 2,
                "clientConfig": client,
                "rules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["pods"],
                        "scope": "Namespaced",
                    }
                ],
                "namespaceSelector": {
                    "matchExpressions": [
                        {
                            "key": "kubernetes.io/metadata.name",
                            "operator": "NotIn",
                            "values": [*PROTECTED_NAMESPACES, *extra_namespaces],
                        }
                    ]
                },
                "objectSelector": {
                    "matchExpressions": [
                        {"key": QUEUE_OPT_OUT_LABEL, "operator": "NotIn", "values": ["off"]}
                    ]
                },
                "matchConditions": [
                    {
                        "name": "scheduler-name",
                        "expression": f"object.spec.schedulerName in [{names}]",
                    }
                ],
            }
        )
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "schedweb"}},
        "webhooks": webhooks,
    }


def webhook_admission_configuration(*, webhook_url: str, cert_file: str, key_file: str) -> str:
    """kube-apiserver's AdmissionConfiguration (--admission-control-config-file) and the
    kubeconfig it names: the client certificate kube-apiserver presents to the webhook when the
    listener requires mutual TLS. As YAML, two documents, the kubeconfig's path a placeholder."""
    host = webhook_url.split("://", 1)[-1].split("/", 1)[0]
    admission = {
        "apiVersion": "apiserver.config.k8s.io/v1",
        "kind": "AdmissionConfiguration",
        "plugins": [
            {
                "name": "MutatingAdmissionWebhook",
                "configuration": {
                    "apiVersion": "apiserver.config.k8s.io/v1",
                    "kind": "WebhookAdmissionConfiguration",
                    "kubeConfigFile": "/etc/kubernetes/schedweb-webhook.kubeconfig",
                },
            }
        ],
    }
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "users": [
            {
                "name": host,
                "user": {"client-certificate": cert_file, "client-key": key_file},
            }
        ],
    }
    return dump_yaml([admission, kubeconfig])
