"""Storage codec against records written by the real helm 3 and helm 4 binaries."""

from __future__ import annotations

import json

import pytest
from kubernetes import client

from engine.helm import Helm
from engine.storage import decode_payload, encode_payload, observation_from_release, record_name
from engine.storage.codec import release_labels, secret_payload
from tests.conftest import EXAMPLES, run_helm

pytestmark = pytest.mark.cluster


def test_decode_records_written_by_helm(any_helm: Helm, namespace: str, core_api: client.CoreV1Api) -> None:
    chart = EXAMPLES / "charts" / "settings"
    run_helm(any_helm, "install", "cfg", str(chart), "-n", namespace, "--set", "settings.a=1",
             "--labels", "team=platform")
    run_helm(any_helm, "upgrade", "cfg", str(chart), "-n", namespace, "--set", "settings.a=2")
    secret = core_api.read_namespaced_secret(record_name("cfg", 2), namespace)
    assert secret.type == "helm.sh/release.v1" and secret.metadata is not None
    obj = {"data": secret.data}
    payload = secret_payload(obj)
    assert payload is not None
    release = decode_payload(payload)
    obs = observation_from_release(release, labels=release_labels(secret.metadata.labels))

    status = json.loads(run_helm(any_helm, "status", "cfg", "-n", namespace, "-o", "json"))
    assert (obs.name, obs.namespace, obs.version) == ("cfg", namespace, 2)
    assert obs.status == status["info"]["status"] == "deployed"
    assert obs.description == status["info"]["description"]
    assert (obs.chart_name, obs.chart_version, obs.app_version) == ("settings", "0.1.0", "1.0")
    assert obs.config == json.loads(run_helm(any_helm, "get", "values", "cfg", "-n", namespace, "-o", "json"))
    # helm keeps the labels of the upgraded release unless given new ones.
    assert obs.label_map.get("team") == "platform"

    first = decode_payload(secret_payload({"data": core_api.read_namespaced_secret(
        record_name("cfg", 1), namespace).data}) or "")
    assert first["info"]["status"] == "superseded"
    # Our encoder's output decodes to exactly what helm wrote.
    assert decode_payload(encode_payload(release)) == release
