"""Keep secrets out of reprs, log lines and exception messages.

A ``Redactor`` knows the exact secret values a client holds and also masks
anything shaped like a bearer credential, so a server that echoes a header
back cannot leak it through an error message.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping

REDACTED = "<redacted>"

# A token ends at whitespace, a quote (a backtick too: Markdown quotes code with it) or a
# separator. A placeholder such as ``<key>`` is no credential: a message may show what to send.
_BEARER = re.compile(r"(?i)(bearer\s+)(?!<[\w-]+>(?:[\s\"'`,;]|$))[^\s\"'`,;]+")
_SENSITIVE_HEADERS = frozenset({"authorization", "x-api-key", "x-runner-token", "cookie", "set-cookie"})


class Redactor:
    """Replaces known secret values and bearer tokens in text."""

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        # Very short strings would redact ordinary words; real keys are long.
        self._secrets = sorted({s for s in secrets if s and len(s) >= 6}, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, REDACTED)
        return _BEARER.sub(lambda m: m.group(1) + REDACTED, text)

    def headers(self, headers: Mapping[str, str]) -> dict[str, str]:
        """A copy of ``headers`` safe to log: sensitive values keep only their scheme."""
        safe: dict[str, str] = {}
        for name, value in headers.items():
            if name.lower() in _SENSITIVE_HEADERS:
                scheme = value.split(" ", 1)[0] if " " in value else ""
                safe[name] = f"{scheme} {REDACTED}".strip()
            else:
                safe[name] = self(value)
        return safe


class RedactingFilter(logging.Filter):
    """A logging filter that scrubs bearer tokens from every record it sees."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = _BEARER.sub(lambda m: m.group(1) + REDACTED, message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


logger = logging.getLogger("fleet_sdk")
logger.addFilter(RedactingFilter())
