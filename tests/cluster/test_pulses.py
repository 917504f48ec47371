"""The controller's pulses (the app's P view): its metrics read as `helmdeck controller` serves them, rates per
minute, quantiles as Prometheus' histogram_quantile, a rising failure rate, bounded and hostile responses."""

from __future__ import annotations

import asyncio
import http.server
import threading
from collections.abc import Iterator

import pytest
from prometheus_client import generate_latest

from engine.runtime.cockpit.pulses import MAX_BYTES, PulseMeter, check_url, fetch, parse, quantile, reachable
from engine.runtime.state import ControllerInfo, Pulse
from helmdeck.cli import build_parser
from helmdeck.metrics import ControllerMetrics


def exposition(success: int, failure: int, queue: int, durations: list[float]) -> str:
    """The /metrics text of a controller that made these passes and helm actions."""
    metrics = ControllerMetrics(lambda: [], lambda: queue)
    if success:
        metrics.reconciles.labels("success").inc(success)
    if failure:
        metrics.reconciles.labels("failure").inc(failure)
    for seconds in durations:
        metrics.actions.labels("upgrade", "succeeded").observe(seconds)
    return generate_latest(metrics.registry).decode()


def test_a_controllers_metrics_are_read_by_name() -> None:
    reading = parse(exposition(7, 2, 3, [1.5, 4.0]), at=100.0)
    assert reading.reconciles == {"success": 7.0, "failure": 2.0}
    assert reading.queue == 3.0
    buckets = dict(reading.buckets)
    assert buckets[1.0] == 0 and buckets[2.5] == 1 and buckets[5.0] == 2 and buckets[float("inf")] == 2


def test_quantiles_interpolate_within_the_bucket_as_prometheus() -> None:
    before = parse(exposition(0, 0, 0, [0.3] * 50), 0).buckets
    after = parse(exposition(0, 0, 0, [0.3] * 50 + [2.0] * 10), 10).buckets
    # Only the ten 2 s actions fell between the readings: all in the (1, 2.5] bucket.
    assert quantile(0.5, before, after) == pytest.approx(1.75)
    assert quantile(0.99, before, after) == pytest.approx(1 + 1.5 * 0.99)
    assert quantile(0.5, after, after) == 0.0  # nothing observed between two equal readings


def test_rates_per_minute_and_a_rising_failure_rate() -> None:
    texts = iter([exposition(0, 0, 4, []), exposition(5, 0, 2, [1.0]), exposition(10, 1, 1, [1.0, 3.0]),
                  exposition(15, 4, 0, [1.0, 3.0])])
    clock = iter([0.0, 10.0, 20.0, 30.0])
    meter = PulseMeter(lambda: [("ctl-0", "http://127.0.0.1:1/metrics")], read=lambda _url: next(texts),
                       clock=lambda: next(clock))
    pulses: tuple[Pulse, ...] = ()
    for _ in range(4):
        pulses = asyncio.run(meter.sample())
    pulse = pulses[0]
    assert pulse.succeeded == (30.0, 30.0, 30.0)  # 5 per 10 s
    assert pulse.failed == (0.0, 6.0, 18.0)
    assert pulse.queue == (4.0, 2.0, 1.0, 0.0)
    assert pulse.p50[1] == pytest.approx(2.5 + 2.5 * 0.5 * 1 / 1)  # the 3 s action: (2.5, 5] bucket, halfway
    assert pulse.failing_more
    assert not Pulse("x", "u", failed=(6.0, 6.0, 0.0)).failing_more
    assert not Pulse("x", "u", failed=(6.0, 18.0, 6.0)).failing_more


def test_a_restarted_controller_counts_from_zero_and_a_failed_reading_is_said() -> None:
    texts: list[str | Exception] = [exposition(100, 0, 0, []), exposition(3, 0, 0, []),
                                    OSError("connection refused")]
    clock = iter([0.0, 60.0, 120.0])

    def read(_url: str) -> str:
        item = texts.pop(0)
        if isinstance(item, Exception):
            raise item
        return item

    meter = PulseMeter(lambda: [("ctl-0", "http://127.0.0.1:1/metrics")], read=read, clock=lambda: next(clock))
    for _ in range(3):
        pulse = asyncio.run(meter.sample())[0]
    assert pulse.succeeded == (3.0,)  # not -97: the counter restarted
    assert "connection refused" in pulse.problem


class _Huge(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        chunk = b"# " + b"x" * 65534 + b"\n"
        for _ in range(MAX_BYTES // len(chunk) + 2):
            self.wfile.write(chunk)

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture
def huge_server() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Huge)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/metrics"
    server.shutdown()


def test_hostile_responses_are_refused(huge_server: str) -> None:
    with pytest.raises(ValueError, match="more than"):
        fetch(huge_server)
    with pytest.raises(ValueError):
        parse("garbage {{{ x", 0)
    with pytest.raises(ValueError):
        parse("\x00\xff", 0)
    meter = PulseMeter(lambda: [("ctl", huge_server)])
    assert "more than" in asyncio.run(meter.sample())[0].problem


def test_metrics_urls() -> None:
    assert check_url("127.0.0.1:8080") == "http://127.0.0.1:8080/metrics"
    assert check_url("https://ctl.example/metrics") == "https://ctl.example/metrics"
    for bad in ("ftp://x/metrics", "http://", "file:///etc/passwd"):
        with pytest.raises(ValueError, match="--controller-metrics"):
            check_url(bad)
    local = ControllerInfo("laptop-1-ab", "default/helmdeck-cluster", 0, 15, (), "http://127.0.0.1:9100")
    pod = ControllerInfo("helmdeck-7f9c", "helmdeck/helmdeck-cluster", 0, 15, (), "http://0.0.0.0:8080")
    assert reachable(local) == "http://127.0.0.1:9100/metrics"
    assert reachable(pod) == ""  # every address of the pod: not reachable from here without a port-forward
    assert reachable(ControllerInfo("x", "y", 0, 15)) == ""


def test_the_controller_metrics_flag_is_checked_by_the_parser() -> None:
    args = build_parser().parse_args(["--controller-metrics", "127.0.0.1:8080", "--controller-metrics",
                                      "http://10.0.0.5:8080/metrics"])
    assert args.controller_metrics == ["http://127.0.0.1:8080/metrics", "http://10.0.0.5:8080/metrics"]
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["--controller-metrics", "file:///etc/passwd"])
    assert exited.value.code == 2
