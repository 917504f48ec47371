"""The controller's pulses (the app's ``P`` view, as k9s' pulses): reconciles per minute by result, queue
depth and helm action durations (p50/p99), per replica, read from each controller's Prometheus metrics
endpoint (``helmdeck controller --metrics-addr``; the metric names are :mod:`helmdeck.metrics`').

Where the endpoints are: each URL given (``helmdeck --controller-metrics URL``, e.g. after ``kubectl
port-forward``), one replica each, and the address a live controller writes on its Lease
(:data:`engine.runtime.drive.lease.METRICS`) when it is reachable from here: a controller running on this
machine (bound to a loopback or a named address) needs no port-forward; one bound to every address
(``0.0.0.0``, in a pod) does.

A reading is one GET of ``/metrics`` (at most :data:`MAX_BYTES`, :data:`TIMEOUT` seconds), parsed with
prometheus-client's parser of the text format. Rates come from the difference of two readings (a counter
that went down is a restarted controller: its new value is the increase, as Prometheus' ``rate``), the
quantiles from the difference of the duration histogram's buckets, interpolated as Prometheus'
``histogram_quantile``.
"""

from __future__ import annotations

import asyncio
import ipaddress
import itertools
import time
import urllib.request
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from engine.runtime.state import ControllerInfo, Pulse

MAX_BYTES = 1 << 20  # a controller's /metrics is a few kB; more is not a controller's
TIMEOUT = 2.0
KEEP = 60  # readings kept per replica: the sparklines' width
RECONCILES = "helmdeck_reconciles_total"
QUEUE = "helmdeck_queue_depth"
ACTIONS = "helmdeck_helm_action_duration_seconds_bucket"


@dataclass(frozen=True)
class Reading:
    """One reading of a metrics endpoint: ``at`` Unix seconds; ``reconciles`` by result (counter values);
    ``queue`` the queue depth; ``buckets`` the helm action duration histogram summed over action and result,
    ``(upper bound, cumulative count)`` by bound."""

    at: float
    reconciles: dict[str, float]
    queue: float
    buckets: tuple[tuple[float, float], ...]


def parse(text: str, at: float) -> Reading:
    """The pulses of one ``/metrics`` text (Prometheus' text format). Raises ValueError when it is not."""
    # Imported on first use: prometheus_client's package loads its whole client, which headless commands never need.
    from prometheus_client.parser import text_string_to_metric_families

    reconciles: dict[str, float] = {}
    queue = 0.0
    buckets: dict[float, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == RECONCILES:
                result = sample.labels.get("result", "")
                reconciles[result] = reconciles.get(result, 0.0) + sample.value
            elif sample.name == QUEUE:
                queue = sample.value
            elif sample.name == ACTIONS:
                bound = float(sample.labels.get("le", "+Inf"))
                buckets[bound] = buckets.get(bound, 0.0) + sample.value
    return Reading(at, reconciles, queue, tuple(sorted(buckets.items())))


def fetch(url: str) -> str:
    """GET ``url`` (blocking): the body as text. Raises OSError (unreachable, an HTTP error), ValueError
    (larger than :data:`MAX_BYTES`)."""
    with urllib.request.urlopen(url, timeout=TIMEOUT) as response:
        body = response.read(MAX_BYTES + 1)
    if len(body) > MAX_BYTES:
        raise ValueError(f"{url}: more than {MAX_BYTES} bytes: not a helmdeck controller's metrics")
    return str(body.decode("utf-8", errors="replace"))


def check_url(url: str) -> str:
    """``url`` if it is an http(s) URL with a host; a bare ``host:port`` gets ``http://`` and ``/metrics``.
    Raises ValueError naming the fix."""
    if "://" not in url:
        url = f"http://{url}"
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"--controller-metrics {url!r}: give http://HOST:PORT/metrics (e.g. after kubectl "
                         "port-forward svc/helmdeck-metrics 8080)")
    return url if parts.path not in ("", "/") else f"{url.rstrip('/')}/metrics"


def reachable(controller: ControllerInfo) -> str:
    """The metrics URL ``controller`` wrote on its Lease when it can be read from here without a port-forward,
    "" otherwise (none written, or bound to every address: the pod's, not ours)."""
    if not controller.metrics:
        return ""
    host = urlsplit(controller.metrics).hostname or ""
    try:
        if ipaddress.ip_address(host).is_unspecified:
            return ""
    except ValueError:
        pass  # a name
    return check_url(controller.metrics)


def quantile(q: float, before: Iterable[tuple[float, float]], after: Iterable[tuple[float, float]]) -> float:
    """The ``q`` quantile (0..1) of the observations between two readings of a cumulative histogram, as
    Prometheus' ``histogram_quantile`` (linear within a bucket; the highest finite bound for the last); 0.0
    when nothing was observed."""
    old = dict(before)
    counts = [(bound, count - old.get(bound, 0.0) if count >= old.get(bound, 0.0) else count)
              for bound, count in after]
    total = counts[-1][1] if counts else 0.0
    if total <= 0:
        return 0.0
    rank, lower, below = q * total, 0.0, 0.0
    for bound, count in counts:
        if count >= rank:
            if bound == float("inf"):
                return lower
            return lower + (bound - lower) * ((rank - below) / (count - below) if count > below else 1.0)
        lower, below = bound, count
    return lower


def _increase(before: float, after: float) -> float:
    return after - before if after >= before else after


@dataclass
class PulseMeter:
    """Readings of each replica's endpoint, :data:`KEEP` each; ``endpoints()`` gives ``(replica, url)``
    pairs now; ``read(url)`` one body (:func:`fetch`); ``clock`` Unix seconds."""

    endpoints: Callable[[], list[tuple[str, str]]]
    read: Callable[[str], str] = fetch
    clock: Callable[[], float] = time.time
    _readings: dict[str, deque[Reading]] = field(default_factory=dict)
    _problems: dict[str, str] = field(default_factory=dict)

    async def sample(self) -> tuple[Pulse, ...]:
        """Read every endpoint once (in threads, at once), then the pulses of each replica."""
        endpoints = self.endpoints()
        texts = await asyncio.gather(*(asyncio.to_thread(self.read, url) for _, url in endpoints),
                                     return_exceptions=True)
        for (replica, url), text in zip(endpoints, texts, strict=True):
            try:
                if isinstance(text, BaseException):
                    raise text
                reading = parse(text, self.clock())
            except (OSError, ValueError) as exc:
                self._problems[replica] = f"{url}: {exc}"
                continue
            self._problems.pop(replica, None)
            self._readings.setdefault(replica, deque(maxlen=KEEP)).append(reading)
        return tuple(self.pulse(replica, url) for replica, url in endpoints)

    def pulse(self, replica: str, url: str) -> Pulse:
        """The series of ``replica`` from the readings kept (one value per two consecutive readings)."""
        readings = list(self._readings.get(replica, ()))
        ok, failed, p50, p99 = [], [], [], []
        for before, after in itertools.pairwise(readings):
            per_minute = 60.0 / max(after.at - before.at, 1e-3)
            ok.append(_increase(before.reconciles.get("success", 0.0), after.reconciles.get("success", 0.0))
                      * per_minute)
            failed.append(_increase(before.reconciles.get("failure", 0.0), after.reconciles.get("failure", 0.0))
                          * per_minute)
            p50.append(quantile(0.5, before.buckets, after.buckets))
            p99.append(quantile(0.99, before.buckets, after.buckets))
        return Pulse(replica, url, tuple(ok), tuple(failed), tuple(r.queue for r in readings), tuple(p50),
                     tuple(p99), self._problems.get(replica, ""))
