"""`python manage.py schedulerconfig [--manifests | --rbac]`: kube-scheduler configuration for
this extender.

Without options: a KubeSchedulerConfiguration (v1) to start kube-scheduler with
(`kube-scheduler --config FILE`). With --manifests: the ServiceAccount, RBAC, ConfigMap and
Deployment of a second, isolated scheduler (seed 001), configured the same way. With --rbac: the
ClusterRoles and ClusterRoleBindings schedweb's own accounts need (the worker's; with --bind
the extender's pods/binding), as the Connect page's RBAC tab shows them. With --advise
POLICY_FILE: the smallest extender weight at which kube-scheduler picks one of the nodes the
policy scores highest, for the example pods (or the pods given with --pod, or the cluster's
pending pods with --pending).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from policies.cluster.manifest import pod_view_from_source
from policies.cluster.sources import cluster_load
from policies.engine.document import PolicyInvalid
from policies.errors import ClusterUnavailable, InputError
from policies.evaluation import example_pod_views, pods_pending, weight_advise_run
from policies.formatting import printable
from policies.schedulerconfig import (
    IN_CLUSTER_EXTENDER_URL,
    BindScopeError,
    SchedulerSetup,
    dump_yaml,
    extender_url_problem,
    queue_webhook_configuration,
    scheduler_configuration,
    schedweb_rbac,
    second_scheduler_yaml,
    url_is_loopback,
    webhook_url,
)
from policies.selectors import scheduler_names_active


class Command(BaseCommand):
    help = "Print a KubeSchedulerConfiguration (or, with --manifests, a second scheduler's manifests; with --rbac, the RBAC of schedweb's accounts) using this extender."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--url",
            default=settings.SCHEDWEB_EXTENDER_URL,
            help="the extender URL prefix (ends with /extender/)",
        )
        parser.add_argument(
            "--scheduler-name",
            action="append",
            dest="names",
            help="profile schedulerName (repeatable); default: those of the active policies",
        )
        parser.add_argument(
            "--scoping",
            choices=["profile", "resource"],
            default="profile",
            help="profile: pass other pods through; resource: only pods requesting schedweb.io/scheduled reach the extender",
        )
        parser.add_argument(
            "--second-scheduler",
            action="store_true",
            help="a separate scheduler instance: no default-scheduler profile, its own lease",
        )
        output = parser.add_mutually_exclusive_group()
        output.add_argument(
            "--manifests",
            action="store_true",
            help="print Kubernetes manifests of a second scheduler Deployment instead",
        )
        output.add_argument(
            "--advise",
            metavar="POLICY_FILE",
            help="print the smallest extender weight at which kube-scheduler picks a node the "
            "policy scores highest (for the example pods unless --pod or --pending)",
        )
        output.add_argument(
            "--rbac",
            action="store_true",
            help="print the ClusterRoles and bindings schedweb's own accounts need instead "
            "(the worker's; with --bind, the extender's pods/binding)",
        )
        parser.add_argument(
            "--kubeconfig",
            default="/etc/kubernetes/scheduler.conf",
            help="clientConnection.kubeconfig",
        )
        parser.add_argument(
            "--no-leader-elect",
            action="store_true",
            help="disable leader election (single replica, tests)",
        )
        parser.add_argument("--namespace", default="kube-system")
        parser.add_argument(
            "--name",
            default="schedweb-scheduler",
            help="lease and Deployment name of a second scheduler (the main one keeps kube-scheduler)",
        )
        parser.add_argument(
            "--ignorable",
            action="store_true",
            help="fail open: scheduling continues when the extender is down",
        )
        parser.add_argument(
            "--full-nodes",
            action="store_true",
            help="nodeCacheCapable: false (send full Node objects; slower)",
        )
        parser.add_argument(
            "--ca-file",
            default=settings.SCHEDWEB_EXTENDER_SCHEDULER_CA,
            help="tlsConfig.caFile: the CA of the extender's server certificate "
            "(default: SCHEDWEB_EXTENDER_SCHEDULER_CA)",
        )
        parser.add_argument(
            "--cert-file",
            default=settings.SCHEDWEB_EXTENDER_SCHEDULER_CERT,
            help="tlsConfig.certFile: kube-scheduler's client certificate for mutual TLS "
            "(default: SCHEDWEB_EXTENDER_SCHEDULER_CERT)",
        )
        parser.add_argument(
            "--key-file",
            default=settings.SCHEDWEB_EXTENDER_SCHEDULER_KEY,
            help="tlsConfig.keyFile: its key (default: SCHEDWEB_EXTENDER_SCHEDULER_KEY)",
        )
        parser.add_argument("--timeout", default="2s", help="httpTimeout")
        parser.add_argument(
            "--weight",
            type=int,
            default=1,
            help="extender weight (its 0-10 score x weight x 10 is added)",
        )
        parser.add_argument(
            "--bind",
            action=argparse.BooleanOptionalAction,
            default=settings.SCHEDWEB_EXTENDER_BIND,
            help="let the extender bind pods (bindVerb); the default follows SCHEDWEB_EXTENDER_BIND",
        )
        parser.add_argument(
            "--queue",
            action="store_true",
            help="with --rbac: also list and create PriorityClasses and Workloads (policies with queue: or gang:)",
        )
        parser.add_argument(
            "--no-preempt", action="store_true", help="do not call the extender during preemption"
        )
        parser.add_argument(
            "--all-nodes",
            action="store_true",
            help="percentageOfNodesToScore: 100 on schedweb profiles",
        )

        parser.add_argument(
            "--pod", action="append", dest="pods", help="with --advise: a Pod manifest file"
        )
        parser.add_argument(
            "--pending", action="store_true", help="with --advise: the cluster's pending pods"
        )
        parser.add_argument(
            "--cluster",
            default="demo",
            help="with --advise: demo (default), live, or a `kubectl get nodes,pods -A -o json` file",
        )

    def handle(self, *args, **options) -> None:
        if options["advise"]:
            self._advise(options)
            return
        if options["rbac"]:
            rbac = schedweb_rbac(bind=options["bind"], queue=options["queue"])
            self.stdout.write(dump_yaml(rbac), ending="")
            return
        if problem := extender_url_problem(options["url"]):
            self.stderr.write(
                f"error: --url {options['url'][:200]!r} is not an extender URL: {problem}"
            )
            sys.exit(2)
        names = tuple(options["names"] or scheduler_names_active() or ["schedweb"])
        separate = options["second_scheduler"] or options["manifests"]
        setup = SchedulerSetup(
            extender_url=options["url"],
            scheduler_names=names,
            scoping=options["scoping"],
            keep_default_profile=not separate,
            kubeconfig=options["kubeconfig"],
            leader_elect=not options["no_leader_elect"],
            # Replacing the main scheduler's configuration keeps its lease: system:kube-scheduler
            # may only update the lease named kube-scheduler.
            lease_name=(separate and options["name"]) or "kube-scheduler",
            namespace=options["namespace"],
            ignorable=options["ignorable"],
            node_cache_capable=not options["full_nodes"],
            http_timeout=options["timeout"],
            weight=options["weight"],
            bind=options["bind"],
            preempt=not options["no_preempt"],
            percentage_of_nodes_to_score=100 if options["all_nodes"] else None,
            tls_ca_file=options["ca_file"],
            tls_cert_file=options["cert_file"],
            tls_key_file=options["key_file"],
        )
        if separate and url_is_loopback(options["url"]):
            self.stderr.write(
                f"warning: --url {options['url']} is a loopback address: a scheduler pod calling "
                "it calls itself, not schedweb; give the address the pod reaches the extender at"
                f" (the chart's Service: {IN_CLUSTER_EXTENDER_URL})"
            )
        try:
            if options["manifests"]:
                self.stdout.write(second_scheduler_yaml(setup), ending="")
                self._queue_webhook(setup)
            else:
                self.stdout.write(dump_yaml(scheduler_configuration(setup)), ending="")
        except BindScopeError as exc:
            self.stderr.write(f"error: {exc}")
            sys.exit(2)

    def _queue_webhook(self, setup: SchedulerSetup) -> None:
        """With --manifests and an active policy with `queue:`: the MutatingWebhookConfiguration
        that gives its pods their queue key as priority (caBundle: the --ca-file's CA)."""
        from policies.queue_classes import queue_policies_active

        policies = queue_policies_active()
        if not policies:
            return
        ca = Path(setup.tls_ca_file).read_text() if setup.tls_ca_file else ""
        config = queue_webhook_configuration(
            extender_url=setup.extender_url, policies=policies, ca_bundle=ca
        )
        self.stdout.write(
            "---\n# The queue webhook (policies with queue:): kube-apiserver sends new pods of "
            "their schedulerNames to\n# "
            + webhook_url(setup.extender_url)
            + "; with mutual TLS, kube-apiserver needs --admission-control-config-file\n"
            "# naming a kubeconfig with its client certificate (docs/policies.md, section 5b).\n"
            + dump_yaml(config),
            ending="",
        )

    def _advise(self, options) -> None:
        try:
            document = Path(options["advise"]).read_text(encoding="utf-8")
            cluster = cluster_load(options["cluster"])
            if options["pods"]:
                pods = [pod_view_from_source(Path(f).read_text()) for f in options["pods"]]
            elif options["pending"]:
                pods = pods_pending(cluster=cluster)
            else:
                pods = example_pod_views()
            advice = weight_advise_run(document=document, pods=pods, cluster=cluster)
        except OSError as exc:
            self.stderr.write(f"error: cannot read {exc.filename}: {exc.strerror}")
            sys.exit(2)
        except PolicyInvalid as exc:
            self.stderr.write(f"{options['advise']}: the policy is invalid:")
            for error in exc.errors:
                self.stderr.write(f"  {error}")
            sys.exit(2)
        except (InputError, ClusterUnavailable) as exc:
            self.stderr.write(f"error: {printable(str(exc))}")
            sys.exit(2)
        for pod, a in advice.pods:  # names from pods and clusters, escaped for the terminal
            ref = printable(f"{pod['namespace']}/{pod['name']}")
            if a.weight is None:
                self.stdout.write(f"{ref}: no advice ({printable(a.reason)})")
            else:
                top = printable(", ".join(a.preferred[:3])) + (
                    " ..." if len(a.preferred) > 3 else ""
                )
                self.stdout.write(
                    f"{ref}: weight >= {a.weight} (kube-scheduler then picks one of the nodes "
                    f"the policy scores highest: {top})"
                )
        if advice.weight is None:
            self.stdout.write(
                "advice: none - the policy scores no node of these pods above another"
            )
        else:
            self.stdout.write(
                f"advice: extender weight {advice.weight} "
                f"(schedulerconfig --weight {advice.weight})"
            )
