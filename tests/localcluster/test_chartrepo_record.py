"""``helmdeck cluster status`` shows the HTTP chart repository the demo serves (``chartrepo``) while the process
serving it lives, and not once it stopped or died (localcluster/chartrepo.py's record in the cluster directory)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from localcluster.chartrepo import ChartRepoServer, serving
from localcluster.cluster import LocalCluster
from localcluster.process import proc_start_time


def cluster_status(state: Path, *output: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "helmdeck", "cluster", "status", *output, "--cluster-dir", str(state)],
                          capture_output=True, text=True, timeout=60, check=False)


def test_status_shows_the_served_repository_until_it_stops(tmp_path: Path) -> None:
    state = tmp_path / "cluster"
    state.mkdir()
    cluster = LocalCluster(state)
    assert cluster.status().chartrepo is None
    server = ChartRepoServer(tmp_path / "repo", record=cluster.chartrepo_record)
    try:
        assert cluster.status().chartrepo == server.url
        shown = cluster_status(state, "-o", "json")
        assert shown.returncode == 3, shown.stderr  # no cluster runs here: not ready, the repository all the same
        assert json.loads(shown.stdout)["chartrepo"] == server.url
        assert f"chartrepo:  {server.url}" in cluster_status(state).stdout.splitlines()
    finally:
        server.stop()
    assert not cluster.chartrepo_record.exists()
    assert json.loads(cluster_status(state, "-o", "json").stdout)["chartrepo"] is None
    assert "chartrepo:  -" in cluster_status(state).stdout.splitlines()


def test_a_record_of_a_dead_or_reused_process_is_not_shown(tmp_path: Path) -> None:
    record = tmp_path / "chartrepo.json"
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    record.write_text(json.dumps({"url": "http://127.0.0.1:1", "pid": child.pid, "startTime": 1}))
    assert serving(record) is None
    me = os.getpid()
    record.write_text(json.dumps({"url": "http://127.0.0.1:1", "pid": me, "startTime": (proc_start_time(me) or 0) + 1}))
    assert serving(record) is None  # the PID lives, but it is another process than the one recorded
    record.write_text(json.dumps({"url": "http://127.0.0.1:1", "pid": me, "startTime": proc_start_time(me)}))
    assert serving(record) == "http://127.0.0.1:1"
    for bad in ("", "[]", "{\"url\": 1}", "not json"):
        record.write_text(bad)
        assert serving(record) is None
