"""Fuzz the storage decoder: whatever a record holds, the only exception is the typed one.

Hypothesis draws batches of inputs (its per-example overhead dominates a
single decode), 10,000 inputs in all.
"""

from __future__ import annotations

import base64
import gzip
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.storage import Snapshot, StorageDecodeError, encode_payload
from engine.storage.observer import decode_record
from tests.storage_records import release, secret

INPUTS = 10_000
BATCH = 16
# One record object whose payload each input replaces (building it is not what is tested).
TEMPLATE = secret(release())

json_scalars = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
                | st.text(max_size=8))

# Two levels of nesting, built without st.recursive (whose draws cost more than the decoding under test).
_flat = (json_scalars | st.lists(json_scalars, max_size=3)
         | st.dictionaries(st.text(max_size=8), json_scalars, max_size=3))
json_values = _flat | st.dictionaries(st.text(max_size=8), _flat, max_size=3) | st.lists(_flat, max_size=3)
FIELD_PATHS = [
    ("name",), ("version",), ("namespace",), ("info",), ("info", "status"), ("info", "first_deployed"),
    ("info", "deleted"), ("info", "notes"), ("chart",), ("chart", "metadata"), ("chart", "metadata", "version"),
    ("config",), ("manifest",), ("hooks",), ("hooks", 0), ("hooks", 0, "events"), ("hooks", 0, "last_run"),
    ("hooks", 0, "weight"), ("hooks", 1, "last_run", "started_at"),
]
STATUSES = st.sampled_from(["deployed", "failed", "pending-upgrade", "superseded", "uninstalled", "Deployed", ""])


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@st.composite
def mutated_release(draw: st.DrawFn) -> str:
    """A helm-like release with one field replaced by any JSON value (or removed)."""
    rel: Any = release(version=draw(st.integers(1, 3)), status=draw(STATUSES))
    path = draw(st.sampled_from(FIELD_PATHS))
    target = rel
    for part in path[:-1]:
        target = target[part]
    if draw(st.booleans()):
        target[path[-1]] = draw(json_values)
    elif isinstance(target, dict):
        target.pop(path[-1], None)
    return _b64(gzip.compress(json.dumps(rel).encode(), compresslevel=1, mtime=0))


VALID_GZIP = base64.b64decode(encode_payload(release()))


@st.composite
def flipped_gzip(draw: st.DrawFn) -> str:
    """A valid payload with a few bytes of its gzip stream changed or cut."""
    raw = bytearray(VALID_GZIP)
    for _ in range(draw(st.integers(1, 3))):
        raw[draw(st.integers(0, len(raw) - 1))] = draw(st.integers(0, 255))
    return _b64(bytes(raw[: draw(st.integers(1, len(raw)))]))


payloads = st.one_of(
    st.binary(max_size=64).map(_b64),
    st.text(max_size=32),
    json_values.map(lambda v: _b64(json.dumps(v).encode())),
    json_values.map(lambda v: _b64(gzip.compress(json.dumps(v).encode(), compresslevel=1, mtime=0))),
    st.binary(max_size=64).map(lambda b: _b64(gzip.compress(b, compresslevel=1, mtime=0))),
    mutated_release(),
    flipped_gzip(),
)


def check(payload: str, raw_secret_data: bool) -> None:
    # raw_secret_data: the Secret's own base64 layer is missing (broken) too.
    obj = {**TEMPLATE, "data": {"release": payload if raw_secret_data else _b64(payload.encode())}}
    try:
        obs = decode_record(obj, "secret")
    except StorageDecodeError as exc:
        assert exc.reason and exc.code
        return
    # Whatever decoded must be usable all the way to a snapshot.
    assert obs.digest.startswith("sha256:")
    assert Snapshot.from_observation(obs).config_digest == obs.config_digest


def test_decoder_raises_only_the_typed_error() -> None:
    checked = 0

    @settings(max_examples=-(-INPUTS // BATCH), deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(batch=st.lists(st.tuples(payloads, st.booleans()), min_size=BATCH, max_size=BATCH))
    def run(batch: list[tuple[str, bool]]) -> None:
        nonlocal checked
        for payload, raw_secret_data in batch:
            check(payload, raw_secret_data)
        checked += len(batch)

    run()
    assert checked >= INPUTS
