"""The observer against records written by the real helm 3 and helm 4 binaries, both storage drivers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from engine.helm import Helm
from engine.kube.client import KubeTarget, api_client
from engine.storage import decode_payload, encode_payload
from engine.storage.codec import Driver
from engine.storage.observer import Observer
from tests.storage_cluster import helm_cli, wait_for
from tests.storage_records import write_chart

pytestmark = pytest.mark.cluster


@pytest.mark.parametrize("driver", ["secret", "configmap"])
def test_observer_reads_what_helm_wrote(
    any_helm: Helm, driver: Driver, namespace: str, kube_target: KubeTarget, tmp_path: Path
) -> None:
    chart = write_chart(tmp_path)
    observer = Observer(api_client(kube_target), [namespace], driver=driver)
    other = Observer(api_client(kube_target), [namespace], driver="configmap" if driver == "secret" else "secret")
    observer.start()
    other.start()
    try:
        assert observer.wait_synced(20) and other.wait_synced(20)

        def helm(*args: str) -> str:
            return helm_cli(any_helm, *args, "-n", namespace, driver=driver)

        helm("install", "probe", str(chart), "--set", "greeting=hi", "--labels", "team=platform")
        helm("upgrade", "probe", str(chart), "--set", "greeting=hey", "--set", "extra.n=3")
        if driver == "secret":  # test hooks are driver-independent; run them once per helm
            helm("test", "probe", "--timeout", "60s")
        status = json.loads(helm("status", "probe", "-o", "json"))
        history = json.loads(helm("history", "probe", "-o", "json"))

        def seen() -> bool:
            latest = observer.latest(namespace, "probe")
            return latest is not None and latest.version == 2 and (
                driver != "secret" or latest.test_hooks[0].phase == "Succeeded")

        wait_for(seen, what="revision 2 (tested) in the observer")
        obs = observer.latest(namespace, "probe")
        assert obs is not None
        info = status["info"]
        assert (obs.status, obs.description, obs.notes) == (info["status"], info["description"], info["notes"])
        assert obs.notes == "Release probe says hey.\n"
        assert (obs.first_deployed, obs.last_deployed) == (info["first_deployed"], info["last_deployed"])
        assert (obs.chart_name, obs.chart_version, obs.app_version) == ("probe", "0.3.0", "2.1")
        assert (obs.chart_description, obs.kube_version) == ("Storage test chart", ">=1.20.0-0")
        assert obs.config == json.loads(helm("get", "values", "probe", "-o", "json"))
        assert obs.config == {"greeting": "hey", "extra": {"n": 3}}
        assert obs.label_map == {"team": "platform"}  # helm keeps labels across upgrades
        test_hook = obs.test_hooks[0]
        assert test_hook.name == "probe-probe-test" and test_hook.kind == "Job"
        if driver == "secret":
            run = status["hooks"][0]["last_run"]
            assert (test_hook.phase, test_hook.started_at, test_hook.completed_at) == (
                run["phase"], run["started_at"], run["completed_at"])

        assert [(o.version, o.status) for o in observer.history(namespace, "probe")] == [
            (h["revision"], h["status"]) for h in reversed(history)] == [(2, "deployed"), (1, "superseded")]
        assert observer.manifest(namespace, "probe", 2).rstrip() == helm("get", "manifest", "probe").rstrip()
        assert observer.chart_values(namespace, "probe", 1) == yaml.safe_load((chart / "values.yaml").read_text())
        assert observer.unreadable() == [] and other.releases() == {}

        # Our encoder's output decodes to exactly what helm wrote.
        release = observer.load_release(namespace, "probe", 2)
        assert decode_payload(encode_payload(release)) == release
    finally:
        observer.stop()
        other.stop()
