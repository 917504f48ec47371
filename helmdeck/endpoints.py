"""``helmdeck controller``'s HTTP endpoints: ``/healthz`` and ``/readyz`` on ``--health-addr``, Prometheus'
``/metrics`` on ``--metrics-addr`` (prometheus-client's server), each in a daemon thread.

``/healthz`` answers 200 while the event loop turns (a heartbeat within :data:`STUCK` seconds), so a wedged
process is restarted by the kubelet; ``/readyz`` answers 200 once the engine started and until it stops.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server

STUCK = 30.0  # seconds without a heartbeat before /healthz fails


def parse_addr(addr: str) -> tuple[str, int]:
    """``host:port`` (``:8080`` for every address, port 0 for any free one). Raises ValueError."""
    host, sep, port = addr.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"{addr!r} is not host:port (e.g. :8081 or 127.0.0.1:8081)")
    return host or "0.0.0.0", int(port)


class Health:
    """What the probes read: ``beat()`` from the event loop, ``ready`` set once started."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self._last = clock()
        self.ready = False

    def beat(self) -> None:
        self._last = self._clock()

    def alive(self) -> bool:
        return self._clock() - self._last < STUCK

    def is_ready(self) -> bool:
        return self.ready and self.alive()


def serve_health(addr: str, health: Health) -> tuple[str, int]:
    """Serve the probes on ``addr``; returns the address bound (the port chosen for port 0)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            probes: dict[str, Callable[[], bool]] = {"/healthz": health.alive, "/readyz": health.is_ready}
            probe = probes.get(self.path)
            code = 404 if probe is None else 200 if probe() else 503
            body = {404: b"not found\n", 200: b"ok\n", 503: b"not ready\n"}[code]
            self.send_response(code)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # probes every few seconds would flood the log

    server = ThreadingHTTPServer(parse_addr(addr), Handler)
    threading.Thread(target=server.serve_forever, name="helmdeck-health", daemon=True).start()
    host, port = server.server_address[:2]
    return str(host), int(port)


def serve_metrics(addr: str, registry: CollectorRegistry) -> tuple[str, int]:
    """Serve ``registry`` as ``/metrics`` on ``addr``; returns the address bound."""
    host, port = parse_addr(addr)
    server, _thread = start_http_server(port, host, registry)
    bound = server.server_address[:2]
    return str(bound[0]), int(bound[1])
