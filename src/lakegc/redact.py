"""Text fit to show: credentials masked, control characters escaped.

Whatever lakegc prints, logs or records (error lines, tables, `--json`, summary.json, report.html,
the metastore's run rows) goes through `mask_secrets`: a database URL may carry its password in the
userinfo (`postgresql://u:pw@host/db`), in the query string (`?password=pw`), or in a libpq-style
DSN (`host=h password=pw`), and an error message may quote any of them. What reaches a terminal
also goes through `printable`, so an object name cannot move the cursor or recolour the screen.
"""

from __future__ import annotations

import re
from typing import Any

MASK = "***"

# userinfo: `scheme://user:PASSWORD@`. The password runs to the first "@", as SQLAlchemy parses it
# (so what it would send is what gets masked).
_USERINFO = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/?#@'\"]*:)[^@\s]*@")
# A query-string parameter (`?key=`, `&key=`, `;key=` as JDBC writes it) whose key names a credential.
# A value ends where the URL does, or at a colon before a space (`URL: what went wrong`).
_QUERY = re.compile(
    r"(?P<head>[?&;](?:[\w.\-]*(?:password|passwd|secret|token|credential|signature|access[_.\-]?key|api[_.\-]?key"
    r"|private[_.\-]?key)[\w.\-]*|pwd|pass|sig|auth)=)(?:[^&\s#'\"<>:]|:(?!\s|$))*",
    re.IGNORECASE,
)
# A `key=value` pair in free text (a libpq DSN, a Spark conf) whose key names a password or secret;
# a libpq value may be single-quoted, with backslash escapes.
_PAIR = re.compile(
    r"(?P<head>(?<![^\s'\"(,])[\w.\-]*(?:password|passwd|pwd|secret)[\w.\-]*\s*=\s*)(?:'(?:[^'\\]|\\.)*'|(?:[^\s'\"\\,):]|:(?!\s|$)|\\.)*)",
    re.IGNORECASE,
)


def mask_secrets(text: str) -> str:
    """`text` with every credential in a URL or DSN replaced by `***`."""
    if "=" not in text and "@" not in text:
        return text
    text = _USERINFO.sub(rf"\g<head>{MASK}@", text)
    return _PAIR.sub(rf"\g<head>{MASK}", _QUERY.sub(rf"\g<head>{MASK}", text))


def mask_doc(doc: Any) -> Any:
    """A JSON document with `mask_secrets` applied to every string in it (keys included)."""
    if isinstance(doc, str):
        return mask_secrets(doc)
    if isinstance(doc, dict):
        return {mask_doc(k): mask_doc(v) for k, v in doc.items()}
    if isinstance(doc, (list, tuple)):
        return [mask_doc(v) for v in doc]
    return doc


# C0 and C1 controls, DEL, and the invisible characters that reorder or break lines (bidi
# overrides and isolates, line and paragraph separators).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def printable(text: str) -> str:
    """`text` as one line a terminal shows as written: control characters escaped as Python writes
    them (`\\x1b`, `\\n`, `\\u202e`)."""
    return _CONTROL.sub(
        lambda m: _NAMED.get(m[0]) or (f"\\x{ord(m[0]):02x}" if ord(m[0]) < 0x100 else f"\\u{ord(m[0]):04x}"), text
    )


def shown(text: str) -> str:
    """For a terminal or a log: masked, then escaped."""
    return printable(mask_secrets(text))
