"""Helm's timestamps: RFC 3339 with nanoseconds, as Helm's ``helmtime`` package writes them."""

from __future__ import annotations

import datetime as dt


def parse_helm_time(value: str) -> dt.datetime | None:
    """A Helm timestamp (``2026-11-30T09:30:00.123456789Z``, offsets allowed) as an aware datetime.

    None when ``value`` is empty or not RFC 3339; a naive time is taken as UTC.
    """
    if not value:
        return None
    text = value.replace("Z", "+00:00")
    # Helm writes nanoseconds; fromisoformat takes at most microseconds.
    if "." in text:
        head, rest = text.split(".", 1)
        frac = rest[:len(rest) - len(rest.lstrip("0123456789"))]  # the digits before the zone
        text = f"{head}.{frac[:6].ljust(6, '0')}{rest[len(frac):]}"
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=dt.UTC)


def helm_time(value: str) -> float | None:
    """Unix seconds of a Helm timestamp (see :func:`parse_helm_time`); None when unset or unparsable."""
    when = parse_helm_time(value)
    return when.timestamp() if when is not None else None
