"""``helmdeck controller``'s Prometheus metrics (prometheus-client), made from the engine's signals.

- ``helmdeck_reconcile_duration_seconds`` (histogram): one pass of a package;
- ``helmdeck_reconciles_total{result}``: passes by result (``success``, ``failure``);
- ``helmdeck_queue_depth``: packages whose pass is due now, as controller-runtime's ``workqueue_depth`` (an idle
  controller reads 0);
- ``helmdeck_queue_waiting``: packages queued for a later pass (their interval, or an error's backoff);
- ``helmdeck_releases{state}``: the engine's packages by release state (InSync, Failed, ...), read at scrape;
  with shards (``--shards auto``, ``--watch-label-selector``) only those placed on this replica, and none on a
  replica standing by for its Lease, so the sum over the replicas counts every package once;
- ``helmdeck_helm_action_duration_seconds{action,result}`` (histogram): each helm action (install, upgrade,
  test, rollback, uninstall...) from its start to its end, ``result`` ``succeeded`` or ``failed``.

Per signal the work is a dictionary lookup and an observation, whatever the number of releases.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Gauge, Histogram
from prometheus_client import Counter as PromCounter
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from engine.runtime.state import EngineSignal, EntryLogged, PassFinished, ReleaseKey, ReleaseView

# Helm actions take seconds to minutes (--wait); passes without an action take milliseconds.
BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)


class _Releases(Collector):
    def __init__(self, views: Callable[[], list[ReleaseView]], placed_here: Callable[[ReleaseKey], bool]):
        self._views = views
        self._placed_here = placed_here

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily("helmdeck_releases", "Packages by release state", labels=["state"])
        counts = Counter(v.state for v in self._views()
                         if v.package is not None and v.state and self._placed_here((v.namespace, v.name)))
        for state, count in sorted(counts.items()):
            family.add_metric([str(state)], count)
        yield family


class ControllerMetrics:
    """The metrics of one engine: follow its signals with :meth:`on_signal`; ``views()`` gives the release rows
    (read at scrape), ``queue_depth()`` the packages due now, ``queue_waiting()`` those queued for later,
    ``placed_here(key)`` whether this replica reconciles ``key``'s package (shards; default: every package).
    Registered in :attr:`registry` (its own)."""

    def __init__(self, views: Callable[[], list[ReleaseView]], queue_depth: Callable[[], int],
                 placed_here: Callable[[ReleaseKey], bool] = lambda _key: True,
                 queue_waiting: Callable[[], int] = lambda: 0):
        self.registry = CollectorRegistry()
        self.reconcile_seconds = Histogram("helmdeck_reconcile_duration_seconds", "One pass of a package",
                                           buckets=BUCKETS, registry=self.registry)
        self.reconciles = PromCounter("helmdeck_reconciles", "Passes by result", ["result"], registry=self.registry)
        self.queue = Gauge("helmdeck_queue_depth", "Packages whose pass is due now", registry=self.registry)
        self.queue.set_function(lambda: float(queue_depth()))
        self.waiting = Gauge("helmdeck_queue_waiting", "Packages queued for a later pass (interval, backoff)",
                             registry=self.registry)
        self.waiting.set_function(lambda: float(queue_waiting()))
        self.actions = Histogram("helmdeck_helm_action_duration_seconds", "Helm actions by action and result",
                                 ["action", "result"], buckets=BUCKETS, registry=self.registry)
        self.registry.register(_Releases(views, placed_here))
        self._started: dict[tuple[ReleaseKey, str], float] = {}

    def on_signal(self, signal: EngineSignal) -> None:
        if isinstance(signal, PassFinished):
            self.reconcile_seconds.observe(signal.seconds)
            self.reconciles.labels(signal.result).inc()
        elif isinstance(signal, EntryLogged):
            entry = signal.event
            slot = (entry.key, entry.action)
            if entry.outcome == "started":
                self._started[slot] = entry.at
            elif entry.outcome in ("succeeded", "failed") and slot in self._started:
                began = self._started.pop(slot)
                self.actions.labels(entry.action, entry.outcome).observe(max(0.0, entry.at - began))
