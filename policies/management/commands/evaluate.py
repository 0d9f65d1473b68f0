"""`python manage.py evaluate --policy FILE --pod FILE [--cluster FILE|live|demo] [--json]`.

Prints the answer first: where kube-scheduler puts the pod with the policy served by its
extender (`answer` in the REST preview), and its cycle (`kubeScheduler`): per node the filters'
verdict and rejecting plugin, the plugins' total, the extender's contribution, the final total
and the policy's own score and rank; the pick starred. Then the policy alone over every node
(policy-level, the REST preview's `result`): verdicts and every score's arithmetic. Exit status
0 on success; 2 when the policy is invalid (every error printed) or an input file cannot be used.
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
from policies.evaluation import policy_compile, preview_dict, preview_run, profile_from_file
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
        if options["json"]:
            body = preview_dict(preview)
            payload = {
                "pod": f"{pod['namespace']}/{pod['name']}",
                "cluster": cluster.describe(),
                "answer": body["answer"],
                **body["result"],  # the policy alone over every node (policy-level)
                "kubeScheduler": body["kubeScheduler"],
            }
            self.stdout.write(json.dumps(payload, indent=2))
        else:
            label = cluster.describe()
            self.stdout.write(
                f"pod {pod['namespace']}/{pod['name']} · policy {preview.compiled.name} · "
                f"cluster {label} ({len(preview.placement.nodes)} nodes)\n"
            )
            self.stdout.write(format_cycle(preview.cycle, preview.placement))
            self.stdout.write("\n" + format_evaluation(preview.evaluation, pod=pod, cluster=label))


def _read(path: str, what: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read the {what} file {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise InputError(f"the {what} file {path} is not UTF-8 text") from None
