"""Logging filters named in settings.LOGGING."""

from __future__ import annotations

import logging


class ValidationAnswersAreNotWarnings(logging.Filter):
    """Drops django.request's WARNING for 422 answers: a 422 is the product telling a user what
    is wrong with their input (the playground answers one on every keystroke that leaves the
    document invalid), not a server problem worth an operator's attention."""

    def filter(self, record: logging.LogRecord) -> bool:
        return getattr(record, "status_code", None) != 422
