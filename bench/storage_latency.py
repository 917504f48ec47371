"""Event latency: a storage record written -> the observer's callback fired, over 500 writes.

Each write is a new revision record created through the API (as helm's
secrets driver does); latency runs from just before the create request is
sent to the callback, so it includes the write's own round trip (printed
too). Writes are sequential: each waits for its callback.

    python -m bench.storage_latency [--writes 500]
"""

from __future__ import annotations

import argparse
import threading
import time
from functools import partial

from bench.storage_common import (
    add_cluster_args,
    bench_cluster,
    core_api,
    ensure_namespace,
    percentile,
    release_record,
    secret_body,
)
from engine.kube.client import api_client
from engine.storage.codec import record_name
from engine.storage.observer import Observer, StorageChange

NAMESPACE = "bench-latency"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=500)
    add_cluster_args(parser)
    args = parser.parse_args()
    with bench_cluster(args) as target:
        core = core_api(target)
        ensure_namespace(core, NAMESPACE)
        observer = Observer(api_client(target), [NAMESPACE], driver="secret")
        fired: dict[str, float] = {}
        unreadable: list[str] = []
        arrived = threading.Condition()

        def on_change(change: StorageChange) -> None:
            now = time.perf_counter()
            if change.unreadable is not None:  # the generated records must decode
                unreadable.append(str(change.unreadable))
            with arrived:
                fired.setdefault(change.key.name, now)
                arrived.notify_all()

        observer.subscribe(on_change)
        observer.start()
        assert observer.wait_synced(30)
        latencies: list[float] = []
        round_trips: list[float] = []
        run = f"lat-{int(time.time())}"
        try:
            for version in range(1, args.writes + 1):
                body = secret_body(release_record(run, NAMESPACE, version, version))
                name = record_name(run, version)
                start = time.perf_counter()
                core.create_namespaced_secret(NAMESPACE, body)
                round_trips.append(time.perf_counter() - start)
                with arrived:
                    if not arrived.wait_for(partial(fired.__contains__, name), 30):
                        raise SystemExit(f"no callback for {name} within 30 s")
                latencies.append(fired[name] - start)
        finally:
            observer.stop()
    if unreadable:
        raise SystemExit(f"{len(unreadable)} generated records did not decode, e.g. {unreadable[0]}")
    ms = 1000.0
    print(f"{args.writes} writes, write -> callback latency:"
          f" p50 {percentile(latencies, 50) * ms:.1f} ms, p99 {percentile(latencies, 99) * ms:.1f} ms,"
          f" max {max(latencies) * ms:.1f} ms")
    print(f"  (the create request's own round trip: p50 {percentile(round_trips, 50) * ms:.1f} ms,"
          f" p99 {percentile(round_trips, 99) * ms:.1f} ms)")


if __name__ == "__main__":
    main()
