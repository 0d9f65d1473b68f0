"""`python manage.py evaluate --policy FILE --pod FILE [--cluster FILE|live|demo] [--json]`.

Prints every node's verdict and score breakdown for one pod (the policy over every node, as the
REST preview's `result`), then kube-scheduler's cycle around it (`kubeScheduler` in the REST
preview): the in-tree verdict and rejecting plugin, the plugins' total, the extender's
contribution, the final total and the node it picks. Exit status 0 on success; 2 when the policy is invalid (every error printed) or
an input file cannot be used.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandParser

from policies.cluster.manifest import pod_view_from_text
from policies.cluster.sources import cluster_load
from policies.engine.document import PolicyInvalid
from policies.errors import ClusterUnavailable, InputError
from policies.evaluation import policy_compile, preview_run, profile_from_file
from policies.textformat import format_cycle, format_evaluation


class Command(BaseCommand):
    help = "Evaluate a policy for one pod over a cluster and print the per-node table."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--policy", required=True, help="policy document (YAML or JSON)")
        parser.add_argument("--pod", required=True, help="Pod manifest (YAML or JSON)")
        parser.add_argument(
            "--cluster",
            default="demo",
            help="demo (default), live, or a `kubectl get nodes,pods -A -o json` file",
        )
        parser.add_argument(
            "--scheduler-config",
            metavar="FILE",
            help="a KubeSchedulerConfiguration to model (default: the one `schedulerconfig` prints)",
        )
        parser.add_argument("--json", action="store_true", help="print JSON instead of a table")

    def handle(self, *args, **options) -> None:
        try:
            policy_text = _read(options["policy"], "policy")
            pod_text = _read(options["pod"], "pod")
            pod = pod_view_from_text(pod_text)
            policy_compile(policy_text)
            cluster = cluster_load(options["cluster"])
            profile = (
                profile_from_file(options["scheduler_config"])
                if options["scheduler_config"]
                else None
            )
        except PolicyInvalid as exc:
            # in document order, so the first error printed is the first one in the file
            errors = sorted(exc.errors, key=lambda e: (e.doc_line or 0, e.doc_column or 0))
            if options["json"]:
                payload = {"valid": False, "errors": [e.to_dict() for e in errors]}
                self.stdout.write(json.dumps(payload, indent=2))
                sys.exit(2)
            self.stderr.write(
                f"{options['policy']}: the policy is invalid ({len(errors)} error{'s' if len(errors) != 1 else ''}):"
            )
            for error in errors:
                where = f"line {error.doc_line}: " if error.doc_line else ""
                self.stderr.write(f"  {where}{error}")
            sys.exit(2)
        except (InputError, ClusterUnavailable) as exc:
            if options["json"]:
                self.stdout.write(json.dumps({"valid": None, "error": str(exc)}, indent=2))
            else:
                self.stderr.write(f"error: {exc}")
            sys.exit(2)

        preview = preview_run(document=policy_text, pod=pod, cluster=cluster, profile=profile)
        evaluation = preview.evaluation
        if options["json"]:
            payload = {
                "pod": f"{pod['namespace']}/{pod['name']}",
                "admissionDefaults": list(pod.get("admitted") or ()),
                "cluster": cluster.describe(),
                **evaluation.to_dict(),
                "kubeScheduler": preview.cycle.to_dict(),
            }
            self.stdout.write(json.dumps(payload, indent=2))
        else:
            self.stdout.write(format_evaluation(evaluation, pod=pod, cluster=cluster.describe()))
            self.stdout.write("\n" + format_cycle(preview.cycle))


def _read(path: str, what: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read the {what} file {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise InputError(f"the {what} file {path} is not UTF-8 text") from None
