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


def metav1_time(value: str) -> str:
    """A Helm timestamp as Kubernetes' ``metav1.Time`` writes it to JSON: RFC 3339 in UTC, whole seconds (the
    fraction cut, as Go's ``Format(time.RFC3339)`` does), ``Z`` (``2026-11-30T09:30:00Z``); ``""`` for an unset
    or zero time (``metav1.Time`` writes ``null``, which the API server drops). A value already so written is
    returned as it is; one that is not RFC 3339 as ``""``. helm-controller's snapshots carry their times so
    (internal/release/observation.go ``ObservedToSnapshot``: ``metav1.NewTime``)."""
    if len(value) == 20 and value[-1] == "Z" and value[10] == "T" and value[:4] != "0001":
        return value
    when = parse_helm_time(value)
    if when is None or when.year == 1:  # Go's zero time is year 1
        return ""
    try:
        return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except OverflowError:  # past year 9999 in UTC: no RFC 3339 time
        return ""
