"""Dates and durations as the CLI accepts them: ISO 8601 or Unix seconds; `90s`/`30m`/`6h`/`7d` or ISO `P7D`."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from lakegc.errors import InvalidArgument

_SIMPLE = re.compile(r"^(\d+)([smhdw])$")
_MAX_DURATION = timedelta(days=365_000)
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_ISO_DURATION = re.compile(
    r"^P(?:(?P<w>\d+)W)?(?:(?P<d>\d+)D)?(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?$"
)


def utcnow() -> datetime:
    return datetime.now(UTC)


def as_utc(value: datetime) -> datetime:
    """Naive datetimes (as SQLite returns them) are UTC by our convention."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def parse_date(text: str) -> datetime:
    text = text.strip()
    if re.fullmatch(r"-?\d+", text):
        try:
            return datetime.fromtimestamp(int(text), UTC)
        except (OverflowError, OSError, ValueError):
            raise InvalidArgument(f"invalid date {text!r}: Unix seconds out of range") from None
    try:
        return as_utc(datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text))
    except ValueError:
        raise InvalidArgument(f"invalid date {text!r}: use ISO 8601 (2026-01-02T03:04:05Z) or Unix seconds") from None


def parse_duration(text: str) -> timedelta:
    text = text.strip()
    try:
        if m := _SIMPLE.match(text):
            return _bounded(timedelta(seconds=int(m.group(1)) * _UNIT_SECONDS[m.group(2)]), text)
        m = _ISO_DURATION.match(text.upper())
        if m and not text.upper().endswith("T") and any(m.groupdict().values()):
            parts = {k: float(v) if v else 0.0 for k, v in m.groupdict().items()}
            return _bounded(
                timedelta(weeks=parts["w"], days=parts["d"], hours=parts["h"], minutes=parts["m"], seconds=parts["s"]),
                text,
            )
    except OverflowError:
        raise InvalidArgument(f"invalid duration {text!r}: too long") from None
    raise InvalidArgument(f"invalid duration {text!r}: use 90s, 30m, 6h, 7d or ISO 8601 (P7D, PT2H)")


def _bounded(value: timedelta, text: str) -> timedelta:
    """Durations get added to now; anything past a thousand years is a typo, not a policy."""
    if value > _MAX_DURATION:
        raise InvalidArgument(f"invalid duration {text!r}: too long")
    return value


def epoch_seconds(value: datetime) -> int:
    return int(as_utc(value).timestamp())


def shown_time(value: datetime | str | None) -> str:
    """A time as people read it in tables and reports: ISO 8601 to the second, in UTC, with its
    zone (`2026-11-26T14:06:38Z`); `-` for none. Accepts what records hold (ISO text)."""
    if value is None or value == "":
        return "-"
    when = datetime.fromisoformat(value) if isinstance(value, str) else value
    return as_utc(when).strftime("%Y-%m-%dT%H:%M:%SZ")
