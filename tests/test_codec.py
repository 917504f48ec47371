"""Unit tests of the storage codec and observations (small in-memory inputs)."""

from __future__ import annotations

import base64
import gzip
import json
from typing import Any

import pytest

from engine.storage import StorageDecodeError, decode_payload, encode_payload, observation_from_release
from engine.storage.codec import release_labels, secret_payload
from engine.storage.observer import Observer, decode_object


def release(version: int = 1, status: str = "deployed", **extra: Any) -> dict[str, Any]:
    rel: dict[str, Any] = {
        "name": "web",
        "namespace": "demo",
        "version": version,
        "info": {
            "status": status,
            "first_deployed": "2026-11-30T10:00:00.123456789Z",
            "last_deployed": "2026-11-30T10:05:00.5Z",
            "deleted": "",
            "description": "Upgrade complete",
        },
        "chart": {"metadata": {"name": "web", "version": "0.2.0", "appVersion": "1.27"}},
        "config": {"replicas": 2, "image": {"tag": "1.27.3"}},
        "manifest": "---\nkind: ConfigMap\n",
        "hooks": [
            {"name": "web-test", "kind": "Job", "path": "web/templates/tests/t.yaml", "events": ["test"],
             "last_run": {"phase": "Succeeded", "started_at": "2026-11-30T10:06:00Z",
                          "completed_at": "2026-11-30T10:06:05Z"}},
            {"name": "web-migrate", "kind": "Job", "path": "web/templates/m.yaml", "events": ["pre-upgrade"],
             "last_run": {"phase": "Succeeded"}},
        ],
    }
    rel.update(extra)
    return rel


def secret(rel: dict[str, Any], labels: dict[str, str] | None = None, rv: str = "1") -> dict[str, Any]:
    payload = encode_payload(rel)
    return {
        "metadata": {
            "name": f"sh.helm.release.v1.{rel['name']}.v{rel['version']}",
            "namespace": rel["namespace"],
            "resourceVersion": rv,
            "labels": {"name": rel["name"], "owner": "helm", "status": rel["info"]["status"],
                       "version": str(rel["version"]), **(labels or {})},
        },
        "type": "helm.sh/release.v1",
        "data": {"release": base64.b64encode(payload.encode()).decode()},
    }


def test_round_trip_keeps_every_field() -> None:
    rel = release()
    assert decode_payload(encode_payload(rel)) == rel


def test_plain_json_payload_is_accepted_as_helm_does() -> None:
    rel = release()
    payload = base64.b64encode(json.dumps(rel).encode()).decode()
    assert decode_payload(payload) == rel


@pytest.mark.parametrize(
    ("payload", "step"),
    [
        ("not base64!!", "base64"),
        (base64.b64encode(b"\x1f\x8b\x08garbage").decode(), "gzip"),
        (base64.b64encode(gzip.compress(b"{not json")).decode(), "JSON"),
        (base64.b64encode(gzip.compress(b"[1, 2]")).decode(), "not an object"),
    ],
)
def test_bad_payloads_raise_the_typed_error(payload: str, step: str) -> None:
    with pytest.raises(StorageDecodeError) as err:
        decode_payload(payload, "ns/sh.helm.release.v1.x.v1")
    assert step in err.value.reason
    assert "ns/sh.helm.release.v1.x.v1" in str(err.value)


def test_observation_fields() -> None:
    obs = observation_from_release(release(), labels={"helmdeck.dev/managed-by": "helmdeck"})
    assert (obs.name, obs.namespace, obs.version, obs.status) == ("web", "demo", 1, "deployed")
    assert (obs.chart_name, obs.chart_version, obs.app_version) == ("web", "0.2.0", "1.27")
    assert obs.config == {"replicas": 2, "image": {"tag": "1.27.3"}}
    assert obs.label_map == {"helmdeck.dev/managed-by": "helmdeck"}
    assert obs.digest.startswith("sha256:") and len(obs.digest) == 7 + 64


def test_config_copy_is_detached() -> None:
    obs = observation_from_release(release())
    obs.config["replicas"] = 99
    assert obs.config["replicas"] == 2


def test_digest_ignores_test_hook_runs_but_not_other_hooks() -> None:
    base = observation_from_release(release())
    rel = release()
    rel["hooks"][0]["last_run"] = {"phase": "Failed", "started_at": "x", "completed_at": "y"}
    assert observation_from_release(rel).digest == base.digest
    rel = release()
    rel["hooks"][1]["last_run"] = {"phase": "Failed"}
    assert observation_from_release(rel).digest != base.digest


def test_digest_changes_with_status_and_values() -> None:
    base = observation_from_release(release()).digest
    assert observation_from_release(release(status="superseded")).digest != base
    assert observation_from_release(release(config={"replicas": 3})).digest != base


def test_release_labels_drop_helm_system_labels() -> None:
    labels = {"name": "a", "owner": "helm", "status": "deployed", "version": "1", "createdAt": "1",
              "modifiedAt": "2", "team": "x"}
    assert release_labels(labels) == {"team": "x"}


def test_secret_payload_of_undecodable_data_is_reported() -> None:
    obj = secret(release())
    obj["data"]["release"] = "%%%"
    key, obs, error = decode_object(obj, "secret")
    assert obs is None and error is not None and "base64" in error
    assert str(key) == "demo/sh.helm.release.v1.web.v1"
    assert secret_payload({"data": {}}) is None


def test_missing_fields_give_an_error_not_an_exception() -> None:
    obj = secret(release())
    obj["data"]["release"] = base64.b64encode(encode_payload({"name": "web"}).encode()).decode()
    _, obs, error = decode_object(obj, "secret")
    assert obs is None and error is not None and "version" in error


def test_offline_observer_indexes_revisions_per_release() -> None:
    observer = Observer(None)
    seen: list[str] = []
    observer.subscribe(lambda ch: seen.append(f"{ch.type} {ch.key.name}"))
    observer.apply_object(secret(release(1, "superseded"), rv="1"))
    observer.apply_object(secret(release(2, "deployed"), rv="2"))
    observer.apply_object(secret(release(2, "deployed"), rv="2"))  # replay: no new event
    assert seen == ["ADDED sh.helm.release.v1.web.v1", "ADDED sh.helm.release.v1.web.v2"]
    assert [o.version for o in observer.history("demo", "web")] == [2, 1]
    latest = observer.latest("demo", "web")
    assert latest is not None and latest.version == 2
    assert list(observer.releases()) == [("demo", "web")]
