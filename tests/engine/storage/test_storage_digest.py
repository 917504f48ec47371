"""Canonical JSON (RFC 8785) and the observation digest test vector of docs/storage.md (Flux's digest)."""

from __future__ import annotations

import hashlib
import json

import pytest

from engine.storage.canonical import canonical_json, format_number
from engine.storage.observation import observation_from_release

# The test vector of docs/storage.md: a stored release and its labels ...
VECTOR_RELEASE = r'''{"name":"demo","namespace":"apps","version":3,
 "info":{"status":"deployed","first_deployed":"2026-01-02T03:04:05Z",
  "last_deployed":"2026-01-03T00:00:00.5+01:00","deleted":"","description":"Upgrade complete",
  "notes":"h\u00e9llo \ud83d\ude80\n"},
 "chart":{"metadata":{"name":"demo","version":"1.2.3","appVersion":"2.0","description":"Demo chart"},
  "values":{"replicas":1}},
 "config":{"replicas":2,"ratio":0.5,"big":1e21,"quote":"a\"b<c>","list":[true,null,1.0]},
 "manifest":"kind: ConfigMap\n",
 "hooks":[
  {"name":"demo-test","kind":"Pod","path":"demo/templates/tests/t.yaml","manifest":"kind: Pod","events":["test"],
   "last_run":{"phase":"Failed","started_at":"2026-01-03T00:01:00Z","completed_at":"2026-01-03T00:02:00Z"}},
  {"name":"demo-migrate","kind":"Job","path":"demo/templates/m.yaml","manifest":"kind: Job",
   "events":["pre-upgrade"],"weight":-5,"delete_policies":["hook-succeeded"],
   "last_run":{"phase":"Succeeded","started_at":"2026-01-03T00:00:10Z","completed_at":"2026-01-03T00:00:20Z"}}]}'''
VECTOR_LABELS = {"team": "platform"}
# ... the bytes Flux's digest hashes (helm-controller internal/release/digest.go Digest: Go's JSON of its Observation
# and the encoder's newline; the test hook left out; <, > escaped), as the oracle's "observe" op wrote them ...
VECTOR_OBSERVATION = (
    '{"name":"demo","version":3,"info":{"first_deployed":"2026-01-02T03:04:05Z",'
    '"last_deployed":"2026-01-03T00:00:00.5+01:00","description":"Upgrade complete","status":"deployed",'
    '"notes":"h\u00e9llo \U0001f680\\n"},'
    '"chartMetadata":{"name":"demo","version":"1.2.3","description":"Demo chart","appVersion":"2.0"},'
    '"config":{"big":1e+21,"list":[true,null,1],"quote":"a\\"b\\u003cc\\u003e","ratio":0.5,"replicas":2},'
    '"manifest":"kind: ConfigMap\\n","hooks":[{"name":"demo-migrate","kind":"Job","path":"demo/templates/m.yaml",'
    '"manifest":"kind: Job","events":["pre-upgrade"],"last_run":{"started_at":"2026-01-03T00:00:10Z",'
    '"completed_at":"2026-01-03T00:00:20Z","phase":"Succeeded"},"weight":-5,"delete_policies":["hook-succeeded"]}],'
    '"namespace":"apps"}\n'
).encode()
# ... and the digests.
VECTOR_DIGEST = "sha256:9b612836b61b2b086ebf53a053624c8274ecaf0f28582482c614f8c48885576d"  # Flux's oracle's
VECTOR_CONFIG_DIGEST = "sha256:ff0a491deab5b57a9eeede3adf482202720479698ed7acf29584f66262899316"  # Flux's oracle's


def test_observation_digest_vector() -> None:
    obs = observation_from_release(json.loads(VECTOR_RELEASE), labels=VECTOR_LABELS)
    assert obs.digest == VECTOR_DIGEST == "sha256:" + hashlib.sha256(VECTOR_OBSERVATION).hexdigest()
    assert obs.manifest_digest == "sha256:" + hashlib.sha256(b"kind: ConfigMap\n").hexdigest()
    assert obs.config_json == '{"big":1e+21,"list":[true,null,1],"quote":"a\\"b<c>","ratio":0.5,"replicas":2}'
    assert obs.config_digest == VECTOR_CONFIG_DIGEST


def test_digest_survives_a_test_run_key_order_and_labels() -> None:
    rel = json.loads(VECTOR_RELEASE)
    rel["hooks"][0]["last_run"] = {"phase": "Succeeded", "started_at": "2026-02-01T00:00:00Z"}
    rel["config"] = dict(reversed(list(rel["config"].items())))
    assert observation_from_release(rel, labels={"other": "label"}).digest == VECTOR_DIGEST


@pytest.mark.parametrize(
    ("value", "text"),
    # Number examples from RFC 8785 appendix B and ECMAScript's rules.
    [(0.0, "0"), (-0.0, "0"), (1.0, "1"), (-1.5, "-1.5"), (1e21, "1e+21"), (1e20, "100000000000000000000"),
     (1e-6, "0.000001"), (1e-7, "1e-7"), (5e-324, "5e-324"), (1.7976931348623157e308, "1.7976931348623157e+308"),
     (333333333.33333329, "333333333.3333333"), (1e23, "1e+23"), (295147905179352830000.0, "295147905179352830000"),
     (4.50, "4.5"), (2e-3, "0.002"), (0.000001234, "0.000001234"), (-1.25e-9, "-1.25e-9")],
)
def test_numbers_print_as_ecmascript_does(value: float, text: str) -> None:
    assert format_number(value) == text


def test_canonical_json_rules() -> None:
    value = {"b": [1, 2**60, "\u2028\x7f\x1f"], "a": {"\U0001f600": 1, "\ue000": 2}, "": None, 1: True}
    assert canonical_json(value) == (
        '{"":null,"1":true,"a":{"\U0001f600":1,"\ue000":2},"b":[1,1152921504606847000,"\u2028\x7f\\u001f"]}'
    ).encode()
    with pytest.raises(ValueError, match="not a JSON number"):
        canonical_json(float("nan"))
    with pytest.raises(TypeError):
        canonical_json({"a": object()})
