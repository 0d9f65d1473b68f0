"""The errors schedweb's services, selectors and cluster loaders raise, as one family.

Each has a `code` (a word clients can branch on) and no HTTP status: the API
(`policies/api/errors.py`) and the pages map codes to statuses, the commands to exit codes.
This module imports nothing from schedweb, so every layer may raise these.
"""

from __future__ import annotations

from typing import Any


class ServiceError(Exception):
    """A refused operation; `details` is a list of field errors or a mapping for the client."""

    code = "invalid"

    def __init__(self, message: str, *, details: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


class InputError(ServiceError, ValueError):
    """Input that cannot be used: a pod that is not a Pod, an unreadable cluster file."""

    code = "invalid"


class ClusterUnavailable(ServiceError, RuntimeError):
    """No snapshot of the requested cluster source exists yet."""

    code = "cluster_unavailable"


class EvaluationTooSlow(ServiceError):
    """A preview or validation request ran past SCHEDWEB_PREVIEW_SECONDS and was stopped."""

    code = "too_slow"


class NotFound(ServiceError):
    code = "not_found"


class Conflict(ServiceError):
    code = "conflict"


class PreconditionFailed(ServiceError):
    code = "precondition_failed"


class PreconditionRequired(ServiceError):
    code = "precondition_required"


class TestsFailed(ServiceError):
    """Publishing refused because test cases failed; `details` lists each result."""

    __test__ = False  # not a pytest class
    code = "tests_failed"
