"""Dates and durations as the CLI accepts them: ISO 8601 or Unix seconds; `90s`/`30m`/`6h`/`7d` or ISO `P7D`."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

from lakegc.errors import InvalidArgument

_SIMPLE = re.compile(r"^(\d+)([smhdw])$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_ISO_DURATION = re.compile(
    r"^P(?:(?P<w>\d+)W)?(?:(?P<d>\d+)D)?(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?$"
)


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def as_utc(value: datetime) -> datetime:
    """Naive datetimes (as SQLite returns them) are UTC by our convention."""
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


def parse_date(text: str) -> datetime:
    text = text.strip()
    if re.fullmatch(r"-?\d+", text):
        return datetime.fromtimestamp(int(text), timezone.utc)
    try:
        return as_utc(datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text))
    except ValueError:
        raise InvalidArgument(f"invalid date {text!r}: use ISO 8601 (2026-01-02T03:04:05Z) or Unix seconds") from None


def parse_duration(text: str) -> timedelta:
    text = text.strip()
    if m := _SIMPLE.match(text):
        return timedelta(seconds=int(m.group(1)) * _UNIT_SECONDS[m.group(2)])
    m = _ISO_DURATION.match(text.upper())
    if m and text.upper() not in ("P", "PT") and any(m.groupdict().values()):
        parts = {k: float(v) if v else 0.0 for k, v in m.groupdict().items()}
        return timedelta(weeks=parts["w"], days=parts["d"], hours=parts["h"], minutes=parts["m"], seconds=parts["s"])
    raise InvalidArgument(f"invalid duration {text!r}: use 90s, 30m, 6h, 7d or ISO 8601 (P7D, PT2H)")


def epoch_seconds(value: datetime) -> int:
    return int(as_utc(value).timestamp())
