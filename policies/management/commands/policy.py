"""`python manage.py policy import FILE... | export NAME | test FILE... | publish NAME | rollback
NAME | deactivate NAME` for git-based workflows.

    policy import policies/*.yaml          create or replace drafts from files
    policy export NAME [--version N|--active] [-o FILE]   the document with its recorded test cases
    policy test FILE... [--allow-empty]    run each document's `tests:`; exit 1 on a failure or
                                           when there is no test case at all (CI)
    policy publish NAME -m MESSAGE         publish the draft (its test cases must pass)
    policy rollback NAME --version N       activate an earlier version again
    policy deactivate NAME                 take the policy out of service

publish, rollback and deactivate return once every live extender process serves the change
(at most SCHEDWEB_PUBLISH_CONFIRM_SECONDS) and print which have not confirmed; the exit status
is then 3 (the change itself is made), so a pipeline that creates pods next can stop.

Only the files named here are read (regular files, at most MAX_DOCUMENT_BYTES), and by `test`
the cluster files their cases name, relative to the document's folder and inside it.

Exit status 2 when a document is invalid (every error printed) or an input cannot be used.
"""

from __future__ import annotations

import sys
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from policies import selectors, services
from policies.cluster.files import read_regular_file
from policies.engine.document import MAX_DOCUMENT_BYTES, PolicyInvalid
from policies.engine.tests_section import TestsSectionError
from policies.errors import ServiceError, TestsFailed
from policies.evaluation import policy_compile, test_case_run
from policies.models import Policy, PolicyVersion
from policies.publishing import ServedReport


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
        pub = sub.add_parser("publish", help="publish a policy's draft")
        pub.add_argument("name")
        pub.add_argument("-m", "--message", required=True, help="what changed and why")
        back = sub.add_parser("rollback", help="activate an earlier version again")
        back.add_argument("name")
        back.add_argument("--version", type=int, required=True)
        off = sub.add_parser("deactivate", help="take a policy out of service")
        off.add_argument("name")
        for parser_ in (pub, back, off):
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
            self.stderr.write(f"{path}: cannot read: {exc.strerror or exc}")
            sys.exit(2)
        except UnicodeDecodeError as exc:
            self.stderr.write(f"{path}: cannot read: not UTF-8 ({exc.reason} at byte {exc.start})")
            sys.exit(2)

    def _invalid(self, path: str, exc: PolicyInvalid) -> None:
        self.stderr.write(f"{path}: the policy is invalid:")
        for error in exc.errors:
            where = f"line {error.doc_line}: " if error.doc_line else ""
            self.stderr.write(f"  {where}{error}")

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
            self.stdout.write(f"{path}: {'created' if created else 'updated'} policy {policy.name}")
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
        total = failures = 0
        invalid = False
        for path in options["files"]:
            text = self._read(path)
            try:
                compiled = policy_compile(text)
            except PolicyInvalid as exc:
                self._invalid(path, exc)
                invalid = True
                continue
            if not compiled.spec.tests:
                self.stdout.write(f"{path}: no tests")
                continue
            base = Path(path).resolve().parent
            for case in compiled.spec.tests:
                total += 1
                problems = test_case_run(compiled=compiled, base=base, **case)["failures"]
                status = "ok" if not problems else "FAIL"
                self.stdout.write(f"{path}: {case['name']}: {status}")
                for problem in problems:
                    self.stdout.write(f"    {problem}")
                failures += bool(problems)
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
            )
        except TestsFailed as exc:
            self.stderr.write(f"{policy.name}: {exc.message}")
            for case in exc.details:
                for problem in case["failures"]:
                    self.stderr.write(f"  {case['name']}: {problem}")
            sys.exit(1)
        except PolicyInvalid as exc:
            self._invalid(policy.name, exc)
            sys.exit(2)
        except ServiceError as exc:
            raise CommandError(f"{policy.name}: {exc.message}") from None
        count = len(result.test_results)
        self._served(
            f"published {policy.name} v{result.version.number} ({count} test case"
            f"{'s' if count != 1 else ''} passed)",
            result.served,
        )

    def _rollback(self, options) -> None:
        policy = self._policy(options["name"])
        try:
            result = services.policy_rollback(
                actor=self._actor(options), policy=policy, number=options["version"]
            )
        except ServiceError as exc:
            raise CommandError(f"{policy.name}: {exc.message}") from None
        self._served(f"rolled back {policy.name} to v{options['version']}", result.served)

    def _deactivate(self, options) -> None:
        policy = self._policy(options["name"])
        try:
            served = services.policy_deactivate(actor=self._actor(options), policy=policy)
        except ServiceError as exc:
            raise CommandError(f"{policy.name}: {exc.message}") from None
        self._served(f"deactivated {policy.name}", served)

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
