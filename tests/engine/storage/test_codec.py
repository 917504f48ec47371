"""Unit tests of the storage codec and observations (small in-memory inputs)."""

from __future__ import annotations

import base64
import gzip
import json
from typing import Any

import pytest

from engine.package.model import shorten_release_name
from engine.storage import (
    MissingPayloadError,
    PayloadBase64Error,
    PayloadGzipError,
    PayloadJSONError,
    RecordMismatchError,
    RecordTooLargeError,
    ReleaseFieldError,
    ReleaseNameError,
    StorageDecodeError,
    UnknownStatusError,
    UnsupportedDriverError,
    codec,
    decode_payload,
    driver_from_env,
    encode_payload,
    observation_from_release,
)
from engine.storage.codec import (
    MAX_PAYLOAD_BYTES,
    parse_record_name,
    record_name,
    release_labels,
    secret_payload,
    validate_release_name,
)
from engine.storage.observation import chart_default_values
from engine.storage.observer import decode_object, decode_record
from tests.storage_records import release, secret, sized_release


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_round_trip_keeps_every_field() -> None:
    rel = release()
    assert decode_payload(encode_payload(rel)) == rel


def test_plain_json_payload_is_accepted_as_helm_does() -> None:
    rel = release()
    assert decode_payload(b64(json.dumps(rel).encode())) == rel


@pytest.mark.parametrize(
    ("payload", "error", "step"),
    [
        ("not base64!!", PayloadBase64Error, "base64"),
        ("QUJD\n", PayloadBase64Error, "base64"),
        (b64(b"\x1f\x8b\x08garbage"), PayloadGzipError, "gzip"),
        (b64(gzip.compress(b'{"name": "x"}')[:-6]), PayloadGzipError, "gzip"),
        (b64(gzip.compress(b"{not json")), PayloadJSONError, "JSON"),
        (b64(gzip.compress(b"[1, 2]")), PayloadJSONError, "not an object"),
        (b64(b'{"config": {"a": NaN}}'), PayloadJSONError, "JSON"),
        (b64(b'{"config": {"a": 1e400}}'), PayloadJSONError, "out of range"),
        (b64(b'{"config": {"a": 1' + b"0" * 400 + b"}}"), PayloadJSONError, "out of range"),
        (b64(b'{"a": ' * 100_000), PayloadJSONError, "JSON"),
        ("A" * (MAX_PAYLOAD_BYTES + 4), RecordTooLargeError, "1 MiB"),
    ],
    ids=["base64", "newline", "gzip-header", "gzip-truncated", "json", "json-array", "nan", "huge-float",
         "huge-int", "deep-nesting", "over-1MiB"],
)
def test_bad_payloads_raise_the_typed_error(payload: str, error: type[StorageDecodeError], step: str) -> None:
    with pytest.raises(error) as err:
        decode_payload(payload, "ns/sh.helm.release.v1.x.v1")
    assert step in err.value.reason
    assert str(err.value).startswith("ns/sh.helm.release.v1.x.v1: ")
    assert err.value.code == error.code


def test_gzip_bomb_is_refused_not_inflated(monkeypatch: pytest.MonkeyPatch) -> None:
    # The real limit is 128 MiB; a smaller one keeps the test fast and proves the same path.
    monkeypatch.setattr(codec, "MAX_RELEASE_JSON_BYTES", 1024 * 1024)
    bomb = gzip.compress(b"{" + b" " * (2 * 1024 * 1024) + b"}", compresslevel=9)
    assert len(bomb) < 4096
    with pytest.raises(RecordTooLargeError, match="more than 1048576 bytes"):
        decode_payload(b64(bomb))


def test_payload_just_under_the_limit_decodes() -> None:
    rel = sized_release(MAX_PAYLOAD_BYTES)
    payload = encode_payload(rel)
    assert MAX_PAYLOAD_BYTES - 4096 < len(payload) <= MAX_PAYLOAD_BYTES
    assert decode_payload(payload)["manifest"] == rel["manifest"]


def test_lone_surrogates_become_replacement_characters_as_in_go() -> None:
    rel = decode_payload(b64(b'{"name": "a", "config": {"k\\ud800": "\\udfff x", "ok": "\\ud83d\\ude00"}}'))
    assert rel["config"] == {"k\ufffd": "\ufffd x", "ok": "\U0001f600"}
    assert decode_payload(b64(b'{"name": "\xff\xfe"}'))["name"] == "\ufffd\ufffd"


def test_observation_fields() -> None:
    obs = observation_from_release(release(), labels={"helmdeck.dev/managed-by": "helmdeck"})
    assert (obs.name, obs.namespace, obs.version, obs.status) == ("web", "demo", 1, "deployed")
    assert (obs.chart_name, obs.chart_version, obs.app_version) == ("web", "0.2.0", "1.27")
    assert (obs.chart_description, obs.kube_version) == ("A web server", ">=1.30.0-0")
    assert obs.notes == "Open http://web.demo/"
    assert obs.first_deployed == "2026-11-30T10:00:00.123456789Z"
    assert obs.last_deployed == "2026-11-30T10:05:00.5+01:00"
    assert obs.config == {"replicas": 2, "image": {"tag": "1.27.3"}}
    assert obs.label_map == {"helmdeck.dev/managed-by": "helmdeck"}
    test_hook, migrate = obs.hooks
    assert (test_hook.is_test, test_hook.phase, test_hook.weight) == (True, "Succeeded", 1)
    assert test_hook.delete_policies == ("before-hook-creation",)
    assert (migrate.is_test, migrate.started_at) == (False, "")
    assert obs.test_hooks == (test_hook,)
    assert obs.digest.startswith("sha256:") and len(obs.digest) == 7 + 64
    assert chart_default_values(release()) == {"replicas": 1, "image": {"tag": "latest"}}


def test_helm4_zero_times_read_as_unset() -> None:
    rel = release()
    rel["info"]["deleted"] = "0001-01-01T00:00:00Z"
    del rel["hooks"][1]["last_run"]
    obs = observation_from_release(rel)
    assert obs.deleted == "" and obs.hooks[1].phase == ""


def test_config_copy_is_detached() -> None:
    obs = observation_from_release(release())
    obs.config["replicas"] = 99
    assert obs.config["replicas"] == 2


def test_digest_ignores_test_hook_runs_but_not_other_hooks() -> None:
    base = observation_from_release(release())
    rel = release()
    rel["hooks"][0]["last_run"] = {"phase": "Failed", "started_at": "2026-12-01T00:00:00Z",
                                   "completed_at": "2026-12-01T00:01:00Z"}
    tested = observation_from_release(rel)
    assert tested.digest == base.digest and tested != base
    rel = release()
    rel["hooks"][1]["last_run"] = {"phase": "Failed"}
    assert observation_from_release(rel).digest != base.digest


def test_digest_changes_with_status_values_notes_and_manifest_not_labels() -> None:
    # Flux's Observation has no labels (helm keeps them in the storage object's metadata, not the release JSON).
    base = observation_from_release(release()).digest
    assert observation_from_release(release(status="superseded")).digest != base
    assert observation_from_release(release(config={"replicas": 3})).digest != base
    rel = release()
    rel["info"]["notes"] = "other"
    assert observation_from_release(rel).digest != base
    rel = release()
    rel["manifest"] += "# changed\n"
    assert observation_from_release(rel).digest != base
    assert observation_from_release(release(), labels={"a": "b"}).digest == base


def test_release_labels_drop_helm_system_labels() -> None:
    labels = {"name": "a", "owner": "helm", "status": "deployed", "version": "1", "createdAt": "1",
              "modifiedAt": "2", "team": "x"}
    assert release_labels(labels) == {"team": "x"}


def test_record_names() -> None:
    assert record_name("web", 12) == "sh.helm.release.v1.web.v12"
    assert parse_record_name("sh.helm.release.v1.a.b.v3") == ("a.b", 3)
    assert parse_record_name("sh.helm.release.v1.web") is None


# -- one typed error per corrupt record ---------------------------------------------
def _with(path: str, value: Any) -> dict[str, Any]:
    rel = release()
    target = rel
    *parents, last = path.split(".")
    for part in parents:
        target = target[part]
    if value is _DELETE:
        del target[last]
    else:
        target[last] = value
    return rel


_DELETE = object()


@pytest.mark.parametrize(
    ("rel", "error", "needle"),
    [
        (_with("name", _DELETE), ReleaseFieldError, "'name' is missing"),
        (_with("version", _DELETE), ReleaseFieldError, "'version' is missing"),
        (_with("version", "1"), ReleaseFieldError, "'version' is a JSON string"),
        (_with("version", 1.0), ReleaseFieldError, "'version' is a JSON number, not an integer"),
        (_with("version", -2), ReleaseFieldError, "positive"),
        (_with("info", _DELETE), ReleaseFieldError, "'info' is missing"),
        (_with("info", []), ReleaseFieldError, "'info' is a JSON array"),
        (_with("info.status", "exploded"), UnknownStatusError, "unknown release status 'exploded'"),
        (_with("info.status", _DELETE), UnknownStatusError, "unknown release status ''"),
        (_with("info.last_deployed", "yesterday"), ReleaseFieldError, "RFC 3339"),
        (_with("config", ["a"]), ReleaseFieldError, "'config' is a JSON array"),
        (_with("chart.metadata.version", 2), ReleaseFieldError, "'chart.metadata.version' is a JSON number"),
        (_with("hooks", {}), ReleaseFieldError, "'hooks' is a JSON object"),
        (_with("hooks", [None]), ReleaseFieldError, "'hooks[0]' is not an object"),
        (_with("manifest", True), ReleaseFieldError, "'manifest' is a JSON boolean"),
        (_with("name", "Web"), ReleaseNameError, "not a valid Helm release name"),
        (_with("name", "a" * 54), ReleaseNameError, "54 characters; Helm allows 53"),
    ],
)
def test_corrupt_releases_raise_one_typed_error(
    rel: dict[str, Any], error: type[StorageDecodeError], needle: str
) -> None:
    with pytest.raises(error) as err:
        observation_from_release(rel)
    assert needle in err.value.reason


def test_null_fields_read_as_go_zero_values() -> None:
    rel = release(config=None, hooks=None, manifest=None, chart=None)
    rel["info"]["notes"] = None
    obs = observation_from_release(rel)
    assert (obs.config, obs.hooks, obs.chart_name, obs.notes) == ({}, (), "", "")


def test_name_of_exactly_53_characters_is_fine() -> None:
    name = "a" * 51 + "-z"
    assert len(name) == 53
    obj = secret(release(name=name))
    assert decode_record(obj, "secret").name == name


def test_record_level_errors() -> None:
    obj = secret(release())
    del obj["data"]["release"]
    with pytest.raises(MissingPayloadError):
        decode_record(obj, "secret")
    obj = secret(release(version=2))
    obj["metadata"]["name"] = record_name("web", 3)
    with pytest.raises(RecordMismatchError, match="object name says web v3, payload holds web v2"):
        decode_record(obj, "secret")


def test_configmap_records_hold_the_payload_directly() -> None:
    rel = release()
    obj = {"metadata": {"name": record_name("web", 1), "namespace": "demo", "labels": {"team": "a"}},
           "data": {"release": encode_payload(rel)}}
    obs = decode_record(obj, "configmap")
    assert (obs.name, obs.version, obs.label_map) == ("web", 1, {"team": "a"})


def test_secret_payload_of_undecodable_data_is_reported() -> None:
    obj = secret(release())
    obj["data"]["release"] = "%%%"
    key, obs, error = decode_object(obj, "secret")
    assert obs is None and error is not None and "base64" in error
    assert str(key) == "demo/sh.helm.release.v1.web.v1"
    assert secret_payload({"data": {}}) is None


def test_missing_fields_give_an_error_not_an_exception() -> None:
    obj = secret(release(), payload=encode_payload({"name": "web"}))
    _, obs, error = decode_object(obj, "secret")
    assert obs is None and error is not None and "version" in error


def test_release_namespace_defaults_to_the_storage_namespace() -> None:
    rel = release()
    del rel["namespace"]
    obj = secret({**rel, "namespace": "store"}, payload=encode_payload(rel))
    obs = decode_record(obj, "secret")
    assert (obs.namespace, obs.storage_namespace) == ("store", "store")


@pytest.mark.parametrize(
    ("value", "driver"),
    [(None, "secret"), ("", "secret"), ("secret", "secret"), ("secrets", "secret"),
     ("configmap", "configmap"), ("configmaps", "configmap")],
)
def test_helm_driver_env_is_read_as_helm_does(value: str | None, driver: str) -> None:
    env = {} if value is None else {"HELM_DRIVER": value}
    assert driver_from_env(env) == driver


@pytest.mark.parametrize("value", ["memory", "sql", "Secret", "etcd"])
def test_unobservable_helm_drivers_are_refused(value: str) -> None:
    with pytest.raises(UnsupportedDriverError, match=f"HELM_DRIVER='{value}'"):
        driver_from_env({"HELM_DRIVER": value})


def test_flux_shortened_names_are_valid_release_names() -> None:
    long_name = "a-very-long-package-name-that-goes-on-and-on-past-the-helm-limit"
    short = shorten_release_name(long_name)
    assert len(short) == 53
    validate_release_name(short)
    with pytest.raises(ReleaseNameError):
        validate_release_name(long_name)


def test_integers_past_64_bits_stay_integers_and_the_fast_decoder_agrees_with_the_stdlib() -> None:
    # orjson (the fast path) reads integers past 64 bits as floats; such payloads take the stdlib path.
    big = 123456789012345678901234567890
    release = decode_payload(b64(b'{"config": {"big": %d, "small": 7, "f": 0.1, "s": "\\u00e9"}}' % big))
    assert release["config"] == {"big": big, "small": 7, "f": 0.1, "s": "é"}
    assert isinstance(release["config"]["big"], int)
