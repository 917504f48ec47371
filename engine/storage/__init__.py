"""Helm release storage: the record codec, observations and the observer."""

from engine.storage.codec import (
    RELEASE_TYPE,
    StorageDecodeError,
    StorageKey,
    decode_payload,
    encode_payload,
    record_name,
)
from engine.storage.observation import Hook, Observation, observation_from_release

__all__ = [
    "RELEASE_TYPE",
    "Hook",
    "Observation",
    "StorageDecodeError",
    "StorageKey",
    "decode_payload",
    "encode_payload",
    "observation_from_release",
    "record_name",
]
