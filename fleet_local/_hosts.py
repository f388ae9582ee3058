"""Which URLs and hosts a browser lease may reach: its ``allowed_hosts``, read the way a browser reads a URL.

Every place that checks a URL against a lease's hosts goes through :func:`host_allowed`: the
``computer`` tool's ``navigate``, an instance browser's ``start_page``, the route guard on the
lease's page, the CDP proxy (``_cdp_policy``) and the SOCKS proxy Chromium's traffic goes through
(``_socks``, by host and port).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from urllib.parse import urlsplit

__all__ = ["browser_url", "host_allowed", "host_port_allowed"]

# WHATWG URL parsing: ASCII tab and newline are removed anywhere, C0 controls and space stripped
# from both ends, and in a URL of a special scheme a backslash is a path separator. Python's
# urlsplit keeps "\" inside the netloc, so "http://a:1\@b:2/" would read as host b while a
# browser opens host a.
_TAB_OR_NEWLINE = re.compile(r"[\t\n\r]")
_C0_OR_SPACE = "".join(chr(c) for c in range(0x21))
_SPECIAL_SCHEMES = ("http", "https", "ws", "wss", "ftp", "file")
_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.\-]*):")

# about: pages other than these are rewritten to chrome:// pages (about:version, about:settings).
_ABOUT_PAGES = frozenset({"about:blank", "about:srcdoc"})


def browser_url(url: str) -> str:
    """``url`` as a browser reads it, for checking: controls stripped, ``\\`` a ``/`` in special schemes.

    Args:
        url: The URL as given (by an agent, a CDP client, a request).
    """
    cleaned = _TAB_OR_NEWLINE.sub("", url).strip(_C0_OR_SPACE)
    scheme = _SCHEME.match(cleaned)
    if scheme is not None and scheme[1].lower() in _SPECIAL_SCHEMES:
        cleaned = cleaned.replace("\\", "/")
    return cleaned


def _entry_matches(entry: str, host: str, netloc: str) -> bool:
    if entry in (host, netloc):
        return True
    return entry.startswith("*.") and (host.endswith(entry[1:]) or host == entry[2:])


def host_port_allowed(host: str, port: int, allowed_hosts: Sequence[str]) -> bool:
    """Whether a connection to ``host:port`` may be made under ``allowed_hosts``.

    Args:
        host: A host name or IP literal (IPv6 without brackets), as a proxy request names it.
        port: The port.
        allowed_hosts: The lease's hosts, as :func:`host_allowed` reads them.
    """
    host = host.lower()
    shown = f"[{host}]" if ":" in host else host
    netloc = f"{shown}:{port}"
    return any(_entry_matches(e.strip().lower(), host, netloc) for e in allowed_hosts if e.strip())


def host_allowed(url: str, allowed_hosts: Sequence[str]) -> bool:
    """Whether ``url`` may be opened under ``allowed_hosts``.

    An entry matches the URL's ``host:port`` or its bare host; ``*.example.com`` matches subdomains.
    ``about:blank``, ``data:`` and ``blob:`` URLs never leave the browser and are always allowed;
    every other scheme but http(s) and ws(s) is refused (``file:``, ``chrome:``, ``javascript:``,
    other ``about:`` pages, which are ``chrome:`` pages).

    Args:
        url: The URL (read as :func:`browser_url` reads it).
        allowed_hosts: The lease's hosts.
    """
    url = browser_url(url)
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. an unclosed IPv6 bracket
        return False
    if parts.scheme in ("data", "blob"):
        return True
    if parts.scheme == "about":
        return url.split("#", 1)[0].split("?", 1)[0].lower() in _ABOUT_PAGES
    if parts.scheme not in ("http", "https", "ws", "wss"):
        return False
    host = (parts.hostname or "").lower()
    if not host:
        return False
    netloc = parts.netloc.rsplit("@", 1)[-1].lower()
    return any(_entry_matches(e.strip().lower(), host, netloc) for e in allowed_hosts if e.strip())
