"""`python manage.py policy import FILE... | export NAME | test FILE... | publish NAME | rollback
NAME | deactivate NAME` for git-based workflows.

    policy import policies/*.yaml          create or replace drafts from files
    policy export NAME [--version N|--active] [-o FILE]   the document with its recorded test cases
    policy test FILE... [--allow-empty] [--scheduler-config FILE] [--budget SECONDS]
                                           run each document's `tests:` (kube-scheduler modelled
                                           with the configuration `schedulerconfig` prints, or
                                           FILE); exit 1 on a failure or when there is no test
                                           case at all (CI)
    policy publish NAME -m MESSAGE         publish the draft (its test cases must pass)
    policy rollback NAME --version N [-m REASON]   activate an earlier version again; the
                                           reason (optional) is kept in the audit log
    policy deactivate NAME                 take the policy out of service
    policy backtest NAME [--last N] [--version V | --file PATH] [--json] [--fail-on-change]
                                           the draft (or version V, or a file) over the pods of
                                           the last N recorded decisions and the pending pods,
                                           on the current cluster: one line per pod that would
                                           differ; exit 1 on a difference only with
                                           --fail-on-change (CI)
    policy publish NAME --shadow -m MSG    publish the draft as the shadow of the active version
                                           (judged after every answer and recorded, never
                                           answering; issue 25)
    policy shadow promote NAME -m MSG      the shadow becomes the active version (its test
                                           cases must pass)
    policy shadow discard NAME [-m MSG]    end the shadow
    policy publish NAME --canary 20% -m MSG  publish the draft as a canary deciding 20% of the
                                           pods (by pod uid), the active version the rest; or
                                           --canary-selector 'team=a' (a label selector); with
                                           --guard-rejected-rate 5% --guard-error-rate 5%
                                           --guard-min-pods 20 and --promote-after 1h
    policy canary promote|abort|status NAME [-m MSG]
                                           the canary decides every pod / none; or its status

publish, rollback, deactivate and shadow promote|discard return once every live extender process serves the change
(at most SCHEDWEB_PUBLISH_CONFIRM_SECONDS) and print which have not confirmed; the exit status
is then 3 (the change itself is made), so a pipeline that creates pods next can stop.

Only the files named here are read (regular files, at most MAX_DOCUMENT_BYTES), and by `test`
the cluster files their cases name, relative to the document's folder and inside it.

`test` compiles each document and runs each case under a budget (`--budget SECONDS`, by default
SCHEDWEB_PREVIEW_SECONDS; deadline.py `budget`): a case whose evaluation runs past it fails
saying so, a document that takes longer to compile is reported like an invalid one. Texts from
documents, pods and clusters are printed with control and bidi characters escaped.

Exit status 2 when a document is invalid (every error printed) or an input cannot be used.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from policies import selectors, services
from policies.backtest.jobs import BACKGROUND_SECONDS
from policies.backtest.run import DEFAULT_LAST, DIFFERS, MAX_LAST, backtest_now, last_check
from policies.cluster.files import read_regular_file
from policies.engine.cel.deadline import EvaluationTimeout, budget
from policies.engine.document import MAX_DOCUMENT_BYTES, FieldError, PolicyInvalid
from policies.engine.testcases import POLICY_LEVEL_KEYS
from policies.engine.tests_section import TestsSectionError
from policies.errors import InputError, ServiceError, TestsFailed
from policies.evaluation import policy_compile, profile_from_file, test_case_run
from policies.formatting import printable
from policies.models import Policy, PolicyVersion
from policies.publishing import ServedReport
from policies.schedmodel.profile import profile_default
from policies.textformat import located, located_all


class Command(BaseCommand):
    help = "Import, export and test policy documents (for policies kept in git)."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        imp = sub.add_parser("import", help="create or replace drafts from files")
        imp.add_argument("files", nargs="+")
        imp.add_argument(
            "--user", default="", help="username recorded in the audit log (default: system)"
        )
        exp = sub.add_parser(
            "export", help="print a policy's document, with the test cases recorded in schedweb"
        )
        exp.add_argument("name")
        which = exp.add_mutually_exclusive_group()
        which.add_argument("--version", type=int, help="a published version (default: the draft)")
        which.add_argument("--active", action="store_true", help="the active version")
        exp.add_argument("-o", "--output", help="write to this file instead of stdout")
        test = sub.add_parser("test", help="run the documents' test cases; exit 1 if any fails")
        test.add_argument("files", nargs="+")
        test.add_argument(
            "--allow-empty",
            action="store_true",
            help="exit 0 when the documents have no test case (default: exit 1)",
        )
        test.add_argument(
            "--scheduler-config",
            metavar="FILE",
            help="a KubeSchedulerConfiguration to model (default: the one `schedulerconfig` "
            "prints), for landsIn, unschedulable and rejectedBy a plugin",
        )
        test.add_argument(
            "--budget",
            type=float,
            metavar="SECONDS",
            help="wall-clock budget of compiling a document, and of each case (default: "
            "SCHEDWEB_PREVIEW_SECONDS; 0: none); a case past it fails",
        )
        pub = sub.add_parser("publish", help="publish a policy's draft")
        pub.add_argument("name")
        pub.add_argument("-m", "--message", required=True, help="what changed and why")
        pub.add_argument(
            "--shadow",
            action="store_true",
            help="publish as the shadow of the active version: judged and recorded, never answering",
        )
        share = pub.add_mutually_exclusive_group()
        share.add_argument(
            "--canary", metavar="PERCENT", help="publish as a canary deciding this share (1-99%%)"
        )
        share.add_argument(
            "--canary-selector",
            metavar="SELECTOR",
            help="publish as a canary deciding the pods this label selector matches",
        )
        for flag, what in (
            ("--guard-rejected-rate", "rejected on every node"),
            ("--guard-error-rate", "with evaluation errors"),
        ):
            pub.add_argument(
                flag,
                metavar="POINTS",
                help=f"roll the canary back when its rate of pods {what} is this many points "
                "above the stable version's (default 5%%)",
            )
        pub.add_argument(
            "--guard-min-pods", metavar="N", help="pods the canary judges before the guard acts"
        )
        pub.add_argument(
            "--promote-after",
            metavar="DURATION",
            help="promote the canary after this long without a guard trip (90s, 30m, 1h, 2d)",
        )
        back = sub.add_parser("rollback", help="activate an earlier version again")
        back.add_argument("name")
        back.add_argument("--version", type=int, required=True)
        back.add_argument(
            "-m",
            "--message",
            default="",
            help="why (optional, like publish's message); kept in the audit log",
        )
        off = sub.add_parser("deactivate", help="take a policy out of service")
        off.add_argument("name")
        bt = sub.add_parser(
            "backtest",
            help="judge the draft over recent decisions' pods and the pending pods, now",
        )
        bt.add_argument("name")
        bt.add_argument(
            "--last",
            default=None,
            metavar="N",
            help=f"recorded decisions to read (default {DEFAULT_LAST}, at most {MAX_LAST})",
        )
        bt_which = bt.add_mutually_exclusive_group()
        bt_which.add_argument("--version", type=int, help="a published version (default: draft)")
        bt_which.add_argument("--file", metavar="PATH", help="a document file instead")
        bt.add_argument("--json", action="store_true", help="print the whole result as JSON")
        bt.add_argument(
            "--fail-on-change",
            action="store_true",
            help="exit 1 when any pod would differ (default: exit 0 whatever differs)",
        )
        shadow = sub.add_parser("shadow", help="promote or discard a policy's shadow version")
        shadow.add_argument("shadow_action", choices=("promote", "discard"))
        shadow.add_argument("name")
        shadow.add_argument("-m", "--message", default="", help="why (required to promote)")
        canary = sub.add_parser("canary", help="promote, abort or show a policy's canary")
        canary.add_argument("canary_action", choices=("promote", "abort", "status"))
        canary.add_argument("name")
        canary.add_argument("-m", "--message", default="", help="why (optional)")
        for parser_ in (pub, back, off, shadow, canary):
            parser_.add_argument(
                "--user", default="", help="username recorded in the audit log (default: system)"
            )

    def handle(self, *args, **options) -> None:
        getattr(self, f"_{options['action']}")(options)

    def _read(self, path: str) -> str:
        """A document named on the command line: a regular file (not /dev/zero, a FIFO) of at
        most MAX_DOCUMENT_BYTES, UTF-8."""
        try:
            data = read_regular_file(path, limit=MAX_DOCUMENT_BYTES)
            return data.decode("utf-8")
        except OSError as exc:
            self.stderr.write(f"{printable(path)}: cannot read: {exc.strerror or exc}")
            sys.exit(2)
        except UnicodeDecodeError as exc:
            self.stderr.write(
                f"{printable(path)}: cannot read: not UTF-8 ({exc.reason} at byte {exc.start})"
            )
            sys.exit(2)

    def _invalid(self, path: str, exc: PolicyInvalid) -> None:
        for line in located_all(path, exc.errors, exc.warnings):
            self.stderr.write(line)

    def _warn(self, path: str, warnings: list[FieldError]) -> None:
        """A document's YAML 1.1 readings (document.coercion_warnings), on stderr."""
        for warning in warnings:
            self.stderr.write(located(path, warning, kind="warning"))

    def _actor(self, options):
        if not options["user"]:
            return None
        actor = get_user_model().objects.filter(username=options["user"]).first()
        if actor is None:
            raise CommandError(f"no user named {options['user']!r}")
        return actor

    def _import(self, options) -> None:
        actor = self._actor(options)
        documents = [(path, self._read(path)) for path in options["files"]]
        failed = False
        for path, text in documents:
            try:
                policy, created = services.policy_import(actor=actor, document=text)
            except PolicyInvalid as exc:
                self._invalid(path, exc)
                failed = True
                continue
            self.stdout.write(
                f"{printable(path)}: {'created' if created else 'updated'} policy {policy.name}"
            )
            self._warn(path, policy_compile(text).warnings)
        if failed:
            sys.exit(2)

    def _export(self, options) -> None:
        policy = Policy.objects.filter(name=options["name"]).first()
        if policy is None:
            raise CommandError(f"no policy named {options['name']!r}")
        if options["active"]:
            version = selectors.policy_get_active(policy=policy)
            if version is None:
                raise CommandError(f"policy {policy.name} has no active version")
            text = version.document
        elif options["version"]:
            version = PolicyVersion.objects.filter(policy=policy, number=options["version"]).first()
            if version is None:
                raise CommandError(f"policy {policy.name} has no version {options['version']}")
            text = version.document
        else:
            text = policy.draft
        try:
            text = selectors.policy_export_text(policy=policy, text=text)
        except TestsSectionError as exc:
            raise CommandError(f"{policy.name}: {exc}") from None
        if options["output"]:
            Path(options["output"]).write_text(text, encoding="utf-8")
        else:
            self.stdout.write(text, ending="" if text.endswith("\n") else "\n")

    def _test(self, options) -> None:
        seconds = options["budget"]
        if seconds is None:
            seconds = settings.SCHEDWEB_PREVIEW_SECONDS
        total = failures = 0
        invalid = False
        try:
            profile = (
                profile_from_file(options["scheduler_config"])
                if options["scheduler_config"]
                else profile_default()  # a CI job has no installation to read one from
            )
        except InputError as exc:
            self.stderr.write(printable(str(exc)))
            sys.exit(2)
        policy_level = False
        for path in options["files"]:
            shown = printable(path)
            text = self._read(path)
            try:
                with budget(seconds):
                    compiled = policy_compile(text)
            except PolicyInvalid as exc:
                self._invalid(path, exc)
                invalid = True
                continue
            except EvaluationTimeout as exc:
                self.stderr.write(
                    f"{shown}: the policy took longer than {exc.seconds:g} s (--budget) to "
                    "compile and was stopped"
                )
                invalid = True
                continue
            self._warn(path, compiled.warnings)
            if not compiled.spec.tests:
                self.stdout.write(f"{shown}: no tests")
                continue
            base = Path(path).resolve().parent
            for case in compiled.spec.tests:
                total += 1
                try:
                    with budget(seconds):  # each case is a request of its own
                        problems = test_case_run(
                            compiled=compiled, base=base, profile=profile, **case
                        )["failures"]
                except EvaluationTimeout as exc:  # outside the evaluation: the queue key
                    problems = [f"stopped: the case took longer than {exc.seconds:g} s (--budget)"]
                status = "ok" if not problems else "FAIL"
                expect = case["expect"] if isinstance(case["expect"], dict) else {}
                level = [k for k in POLICY_LEVEL_KEYS if k in expect]
                policy_level |= bool(level)
                note = f"  (policy-level: {', '.join(level)})" if level else ""
                self.stdout.write(f"{shown}: {printable(str(case['name']))}: {status}{note}")
                for problem in problems:
                    self.stdout.write(f"    {printable(problem)}")
                failures += bool(problems)
        if policy_level:
            self.stdout.write(
                "policy-level: the policy alone over every node, before kube-scheduler's "
                "filters and plugins; landsIn and unschedulable state where the pod lands"
            )
        self.stdout.write(f"{total - failures} of {total} test cases passed")
        if invalid:
            sys.exit(2)
        if failures:
            sys.exit(1)
        if not total and not options["allow_empty"]:
            # a CI job that checks nothing must not look green
            self.stderr.write("no test cases found (pass --allow-empty if that is intended)")
            sys.exit(1)

    # -- publish, rollback, deactivate ----------------------------------------------------------

    def _policy(self, name: str) -> Policy:
        policy = Policy.objects.filter(name=name).first()
        if policy is None:
            raise CommandError(f"no policy named {name!r}")
        return policy

    def _publish(self, options) -> None:
        policy = self._policy(options["name"])
        try:
            result = services.policy_publish(
                actor=self._actor(options),
                policy=policy,
                message=options["message"],
                revision=policy.draft_revision,
                shadow=options.get("shadow", False),
                canary=_canary(options),
            )
        except TestsFailed as exc:
            self._tests_failed(policy, exc)
        except PolicyInvalid as exc:
            self._invalid(policy.name, exc)
            sys.exit(2)
        except ServiceError as exc:
            raise CommandError(f"{policy.name}: {printable(exc.message)}") from None
        count = len(result.test_results)
        role = " as its shadow" if options.get("shadow") else ""
        if options.get("canary") or options.get("canary_selector"):
            role = " as a canary"
        self._served(
            f"published {policy.name} v{result.version.number}{role} ({count} test case"
            f"{'s' if count != 1 else ''} passed)",
            result.served,
        )

    def _rollback(self, options) -> None:
        policy = self._policy(options["name"])
        try:
            result = services.policy_rollback(
                actor=self._actor(options),
                policy=policy,
                number=options["version"],
                message=options["message"],
            )
        except ServiceError as exc:
            raise CommandError(f"{policy.name}: {printable(exc.message)}") from None
        self._served(f"rolled back {policy.name} to v{options['version']}", result.served)

    def _deactivate(self, options) -> None:
        policy = self._policy(options["name"])
        try:
            served = services.policy_deactivate(actor=self._actor(options), policy=policy)
        except ServiceError as exc:
            raise CommandError(f"{policy.name}: {printable(exc.message)}") from None
        self._served(f"deactivated {policy.name}", served)

    def _backtest(self, options) -> None:
        policy = self._policy(options["name"])
        if options["file"]:
            document, label = self._read(options["file"]), options["file"]
        elif options["version"] is not None:
            document = selectors.policy_version_document(
                policy_name=policy.name, number=options["version"]
            )
            if document is None:
                raise CommandError(f"{policy.name} has no version {options['version']}")
            label = f"v{options['version']}"
        else:
            document, label = policy.draft, "the draft"
        try:
            last = last_check(options["last"])
            result = backtest_now(document=document, last=last, seconds=BACKGROUND_SECONDS)
        except PolicyInvalid as exc:
            self._invalid(label, exc)
            sys.exit(2)
        except InputError as exc:
            details = "; ".join(f"--{d['path']}: {d['message']}" for d in exc.details or [])
            raise CommandError(details or printable(exc.message)) from None
        except ServiceError as exc:
            raise CommandError(printable(exc.message)) from None
        body = result.to_dict()
        if options["json"]:
            self.stdout.write(json.dumps(body, indent=2))
        else:
            self._backtest_text(policy.name, label, body)
        if options["fail_on_change"] and body["summary"]["differ"]:
            sys.exit(1)

    def _backtest_text(self, name: str, label: str, body: dict) -> None:
        """A summary line, then one line per pod that would differ."""
        summary = body["summary"]
        counts = ", ".join(f"{n} {c}" for c, n in summary["counts"].items() if n)
        self.stdout.write(
            f"{printable(name)} {printable(label)}: {summary['recorded']} recorded pods, "
            f"{summary['pending']} pending, {summary['differ']} would differ"
            + (f" ({counts})" if counts else "")
        )
        for note in (body["empty"], summary["stopped"]):
            if note:
                self.stdout.write(note)
        for row in body["rows"]:
            if row["class"] not in DIFFERS:
                continue
            was, now = row["recorded"], row["now"] or {}
            if was is None:
                before = "pending"
            elif was["bound"] or was["feasible"]:
                before = was["bound"] or f"{was['feasible']} feasible"
            else:
                before = "unschedulable"
            after = ", ".join(now.get("pick") or []) or "unschedulable"
            if now.get("errors"):
                after += f" ({now['errors']} rule errors)"
            self.stdout.write(
                f"{row['class']}\t{printable(row['pod'])}\t"
                f"{printable(before)} -> {printable(after)}"
            )

    def _shadow(self, options) -> None:
        from policies.rollout.services import policy_shadow_discard, policy_shadow_promote

        policy = self._policy(options["name"])
        try:
            if options["shadow_action"] == "promote":
                result = policy_shadow_promote(
                    actor=self._actor(options), policy=policy, message=options["message"]
                )
                done = f"promoted {policy.name} v{result.activation.version.number} to active"
                served = result.served
            else:
                served = policy_shadow_discard(
                    actor=self._actor(options), policy=policy, message=options["message"]
                )
                done = f"discarded the shadow of {policy.name}"
        except TestsFailed as exc:
            self._tests_failed(policy, exc)
        except ServiceError as exc:
            raise CommandError(f"{policy.name}: {printable(exc.message)}") from None
        self._served(done, served)

    def _canary(self, options) -> None:
        from policies.rollout.canary import (
            canary_status,
            policy_canary_abort,
            policy_canary_promote,
        )

        policy = self._policy(options["name"])
        if options["canary_action"] == "status":
            status = canary_status(policy=policy)
            self.stdout.write(
                json.dumps(status, indent=2) if status else f"{policy.name} has no canary"
            )
            return
        try:
            if options["canary_action"] == "promote":
                result = policy_canary_promote(
                    actor=self._actor(options), policy=policy, message=options["message"]
                )
                done = f"promoted {policy.name} v{result.activation.version.number} to active"
                served = result.served
            else:
                served = policy_canary_abort(
                    actor=self._actor(options), policy=policy, message=options["message"]
                )
                done = f"aborted the canary of {policy.name}: the stable version decides"
        except ServiceError as exc:
            raise CommandError(f"{policy.name}: {printable(exc.message)}") from None
        self._served(done, served)

    def _tests_failed(self, policy: Policy, exc: TestsFailed) -> None:
        """The gate refused: each failing case's problems on stderr, exit 1."""
        self.stderr.write(f"{policy.name}: {printable(exc.message)}")
        for case in exc.details:
            for problem in case["failures"]:
                self.stderr.write(f"  {printable(str(case['name']))}: {printable(problem)}")
        sys.exit(1)

    def _served(self, done: str, served: ServedReport) -> None:
        """What was done, then whether every extender process serves it; exit 3 if not."""
        self.stdout.write(done)
        if served.served_by_all:
            self.stdout.write(served.summary())
            return
        self.stderr.write(served.summary())
        for pending in served.pending:
            self.stderr.write(f"  not confirmed: {pending['process']}")
        sys.exit(3)


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _canary(options) -> dict | None:
    """The canary rollout the publish options name (policies.rollout.canary.canary_rollout:
    a ServiceError naming the field when out of range); None without --canary/-selector."""
    from policies.rollout.canary import canary_rollout

    guard_flags = ("guard_rejected_rate", "guard_error_rate", "guard_min_pods", "promote_after")
    if not options.get("canary") and not options.get("canary_selector"):
        if any(options.get(flag) for flag in guard_flags):
            raise ServiceError(
                "--guard-* and --promote-after go with --canary or --canary-selector"
            )
        return None
    guard = {
        key: options[flag]
        for key, flag in (
            ("rejectedRate", "guard_rejected_rate"),
            ("errorRate", "guard_error_rate"),
            ("minPods", "guard_min_pods"),
        )
        if options.get(flag) is not None
    }
    after = options.get("promote_after")
    if after is not None:
        text = after.strip().lower()
        unit = _UNITS.get(text[-1:])
        number = text[:-1] if unit else text
        if not number.isdigit() or len(number) > 9:
            raise ServiceError(
                f"canary.promoteAfterSeconds: {after[:40]!r} is not a duration (90s, 30m, 1h, 2d)"
            )
        after = int(number) * (unit or 1)
    return canary_rollout(
        percent=options.get("canary"),
        selector=options.get("canary_selector"),
        guard=guard,
        promote_after=after,
    )
