"""`python manage.py evaluate --policy FILE --pod FILE [--cluster FILE|live|demo] [--json]`.

Prints the answer first: where kube-scheduler puts the pod with the policy served by its
extender (`answer` in the REST preview; for an unschedulable pod, the FailedScheduling message
kube-scheduler writes), and its cycle (`kubeScheduler`): per node the filters' verdict and
rejecting plugin, the plugins' total, the extender's contribution, the final total and the
policy's own score and rank; the pick starred; the plugins PreScore skips and what API
admission added to a pod given as text. Then the policy alone over every node (policy-level,
the REST preview's `result`): verdicts and every score's arithmetic.

Exit status 0 on success; 2 when the policy is invalid (every error printed as
`FILE:LINE:COL: error: field: message`, the form editors and CI annotators read) or an input file
cannot be used; 3 when the evaluation ran past its budget (`--budget`, by default
SCHEDWEB_PREVIEW_SECONDS): the nodes it had not judged follow the policy's failurePolicy, as the
extender would answer, and the output says so.

Compiling and evaluating run under that budget (policies/engine/cel/deadline.py `budget`): the
engine looks at the clock between nodes and rules, every few thousand cost units and inside its
long loops (findAll's searches), so a hostile document cannot hold the terminal for minutes.
Every text from the document, the pod or the cluster is printed with control and bidi
characters escaped (policies/engine/printable.py).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from policies.cluster.manifest import pod_view_from_text
from policies.cluster.sources import cluster_load
from policies.engine.cel.deadline import EvaluationTimeout, budget
from policies.engine.document import FieldError, PolicyInvalid
from policies.errors import ClusterUnavailable, InputError
from policies.evaluation import policy_compile, preview_dict, preview_run, profile_from_file
from policies.formatting import printable
from policies.textformat import format_cycle, format_evaluation, located, located_all

EXIT_INVALID = 2
EXIT_OVER_BUDGET = 3


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
        parser.add_argument(
            "--budget",
            type=float,
            metavar="SECONDS",
            help="wall-clock budget of compiling and evaluating (default: "
            "SCHEDWEB_PREVIEW_SECONDS; 0: none); past it the nodes not judged follow "
            "failurePolicy and the exit status is 3",
        )

    def handle(self, *args, **options) -> None:
        seconds = options["budget"]
        if seconds is None:
            seconds = settings.SCHEDWEB_PREVIEW_SECONDS
        as_json = options["json"]
        try:
            policy_text = _read(options["policy"], "policy")
            pod_text = _read(options["pod"], "pod")
            pod = pod_view_from_text(pod_text)
            cluster = cluster_load(options["cluster"])
            profile = (
                profile_from_file(options["scheduler_config"])
                if options["scheduler_config"]
                else None
            )
            # the request's budget starts with the engine's work: compiling, then evaluating
            with budget(seconds):
                compiled = policy_compile(policy_text)
                preview = preview_run(
                    document=policy_text, pod=pod, cluster=cluster, profile=profile
                )
        except PolicyInvalid as exc:
            self._invalid(options["policy"], exc, as_json)
            sys.exit(EXIT_INVALID)
        except (InputError, ClusterUnavailable) as exc:
            if as_json:
                self.stdout.write(json.dumps({"valid": None, "error": str(exc)}, indent=2))
            else:
                self.stderr.write(f"error: {printable(str(exc))}")
            sys.exit(EXIT_INVALID)
        except EvaluationTimeout as exc:  # outside an evaluation: compiling
            message = (
                f"the policy took longer than {exc.seconds:g} s (--budget) to compile and was "
                "stopped; simplify it, or raise --budget"
            )
            if as_json:
                self.stdout.write(json.dumps({"valid": None, "error": message}, indent=2))
            else:
                self.stderr.write(f"error: {message}")
            sys.exit(EXIT_INVALID)

        evaluation = preview.evaluation
        in_cycle = preview.cycle.evaluation  # the policy over the in-tree-feasible nodes
        stopped = evaluation.stopped or (in_cycle.stopped if in_cycle is not None else None)
        if as_json:
            body = preview_dict(preview)
            payload = {
                "pod": f"{pod['namespace']}/{pod['name']}",
                "admissionDefaults": list(pod.get("admitted") or ()),
                "cluster": cluster.describe(),
                "answer": body["answer"],
                **body["result"],  # the policy alone over every node (policy-level)
                "kubeScheduler": body["kubeScheduler"],
            }
            if stopped:
                payload["stopped"] = stopped
            if compiled.warnings:
                payload["warnings"] = [w.to_dict() for w in compiled.warnings]
            self.stdout.write(json.dumps(payload, indent=2))
        else:
            self._warn(options["policy"], compiled.warnings)
            label = cluster.describe()
            self.stdout.write(
                printable(
                    f"pod {pod['namespace']}/{pod['name']} · policy {compiled.name} · "
                    f"cluster {label} ({len(preview.placement.nodes)} nodes)"
                )
                + "\n"
            )
            self.stdout.write(format_cycle(preview.cycle, preview.placement))
            self.stdout.write("\n" + format_evaluation(evaluation, pod=pod, cluster=label))
            if stopped:
                self.stderr.write(f"warning: {printable(stopped)} (--budget {seconds:g})")
        if stopped:
            sys.exit(EXIT_OVER_BUDGET)

    def _invalid(self, path: str, exc: PolicyInvalid, as_json: bool) -> None:
        # in document order, so the first error printed is the first one in the file
        errors = sorted(exc.errors, key=lambda e: (e.doc_line or 0, e.doc_column or 0))
        if as_json:
            payload = {"valid": False, "errors": [e.to_dict() for e in errors]}
            if exc.warnings:
                payload["warnings"] = [w.to_dict() for w in exc.warnings]
            self.stdout.write(json.dumps(payload, indent=2))
            return
        for line in located_all(path, errors, exc.warnings):
            self.stderr.write(line)

    def _warn(self, path: str, warnings: list[FieldError]) -> None:
        """The document's YAML 1.1 readings (document.coercion_warnings), on stderr."""
        for warning in warnings:
            self.stderr.write(located(path, warning, kind="warning"))


def _read(path: str, what: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read the {what} file {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise InputError(f"the {what} file {path} is not UTF-8 text") from None
