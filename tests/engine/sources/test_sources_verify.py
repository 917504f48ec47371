"""The verification core's own rules (engine/sources/verify.py), on small in-memory inputs: which Secret keys
count, the bounds, the 0600 key files, what is kept and for how long. The real checks (gpg, helm) are in
tests/engine/sources/test_sources_provenance.py."""

from __future__ import annotations

import asyncio
import stat
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

import pytest

from engine.sources.errors import CredentialsError
from engine.sources.verify import (
    FAILED,
    MAX_KEY_BYTES,
    VERIFIED,
    KeyReader,
    KeySet,
    Verification,
    VerificationCache,
    Verifications,
    VerifyError,
    VerifySpec,
    key_files,
    wanted,
)
from testkit.chart_sources import Clock

SPEC = VerifySpec("helm", "keys", "apps", field="spec.chart.spec.verify")
DIGEST = "sha256:" + "a" * 64


def reader(data: Mapping[str, bytes] | None, seen: list[tuple[str, str, str]]) -> KeyReader:
    async def read(user: str, namespace: str, name: str) -> Mapping[str, bytes] | None:
        seen.append((user, namespace, name))
        return data
    return read


def verifications(tmp_path: Path, data: Mapping[str, bytes] | None, clock: Clock,
                  seen: list[tuple[str, str, str]] | None = None) -> Verifications:
    return Verifications(VerificationCache(tmp_path / "verified", clock), reader(data, [] if seen is None else seen))



def test_keys_are_the_providers_own_read_once_per_interval(tmp_path: Path) -> None:
    clock, seen = Clock(), list[tuple[str, str, str]]()
    v = verifications(tmp_path, {"pubring.gpg": b"ring", "cosign.pub": b"pub", "note": b"x"}, clock, seen)
    keys = asyncio.run(v.keys(SPEC, wanted("helm"), 60, "repo"))
    assert dict(keys.files) == {"pubring.gpg": b"ring"} and "ring" not in repr(keys)
    assert asyncio.run(v.keys(SPEC, wanted("helm"), 60, "repo")) == keys and len(seen) == 1
    clock.now += 61
    asyncio.run(v.keys(SPEC, wanted("helm"), 60, "repo"))
    assert len(seen) == 2
    assert [wanted("cosign")(k) for k in ("a.pub", "pubring.gpg")] == [True, False]
    assert KeySet.of({"a": b"1"}).digest != KeySet.of({"b": b"1"}).digest != KeySet.of({"a": b"2"}).digest


@pytest.mark.parametrize(("data", "words"), [
    (None, "Secret apps/keys does not exist or cannot be read"),
    ({"ca.crt": b"x"}, "holds no public keys for helm (keys: ca.crt)"),
    ({"pubring.gpg": b"x" * (MAX_KEY_BYTES + 1)}, f"over {MAX_KEY_BYTES} bytes"),
])
def test_key_problems_are_named_without_their_content(tmp_path: Path, data: Mapping[str, bytes] | None,
                                                      words: str) -> None:
    v = verifications(tmp_path, data, Clock())
    with pytest.raises(VerifyError, match=r"spec\.chart\.spec\.verify") as err:
        asyncio.run(v.keys(SPEC, wanted("helm"), 60, "repo"))
    assert words in err.value.message and err.value.reason == "VerificationError"
    assert "xxxx" not in err.value.message


def test_a_refused_read_and_no_cluster_are_verification_errors(tmp_path: Path) -> None:
    async def refused(user: str, namespace: str, name: str) -> Mapping[str, bytes] | None:
        raise CredentialsError(f"cannot read Secret {namespace}/{name}: HTTP 403")

    v = Verifications(VerificationCache(tmp_path, Clock()), refused)
    with pytest.raises(VerifyError, match="HTTP 403"):
        asyncio.run(v.keys(SPEC, wanted("helm"), 60, "repo"))
    with pytest.raises(VerifyError, match="needs the cluster's Secrets"):
        asyncio.run(Verifications(VerificationCache(tmp_path, Clock()), None).keys(SPEC, wanted("helm"), 60, "r"))


def test_key_files_are_private_and_removed(tmp_path: Path) -> None:
    keys = KeySet.of({"pubring.gpg": b"ring", "../../etc/passwd.pub": b"pub"})
    with key_files(keys, tmp_path) as files:
        assert sorted(files) == ["../../etc/passwd.pub", "pubring.gpg"]
        for path in files.values():
            assert path.parent.parent == tmp_path and stat.S_IMODE(path.stat().st_mode) == 0o600
            assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        assert files["pubring.gpg"].read_bytes() == b"ring" and files["pubring.gpg"].suffix == ".gpg"
        folder = files["pubring.gpg"].parent
    assert not folder.exists() and list(tmp_path.iterdir()) == []


def test_verified_is_kept_on_disk_failed_for_the_interval(tmp_path: Path) -> None:
    clock = Clock()
    keys = KeySet.of({"pubring.gpg": b"ring"})
    v = verifications(tmp_path, {}, clock)
    runs: list[str] = []

    def run_with(outcome: str, digest: str = DIGEST) -> Callable[[KeySet], Awaitable[Verification]]:
        async def run(k: KeySet) -> Verification:
            runs.append(outcome)
            return Verification("helm", outcome, "Signer", "" if outcome == VERIFIED else "bad", digest, k.digest)
        return run

    good = asyncio.run(v.check(SPEC, keys, DIGEST, 60, "repo", run_with(VERIFIED)))
    assert good.verified and asyncio.run(v.check(SPEC, keys, DIGEST, 60, "repo", run_with(FAILED))) == good
    assert runs == [VERIFIED]
    # Another process on the same folder: kept; a damaged or foreign file is not taken for a result.
    fresh = VerificationCache(tmp_path / "verified", clock)
    assert fresh.get("helm", DIGEST, keys.digest, 60) == good
    assert fresh.get("helm", DIGEST, KeySet.of({"pubring.gpg": b"other"}).digest, 60) is None
    for path in (tmp_path / "verified").iterdir():
        path.write_text("{not json")
    assert VerificationCache(tmp_path / "verified", clock).get("helm", DIGEST, keys.digest, 60) is None
    # A failure is kept for the interval, then checked again.
    bad_digest = "sha256:" + "b" * 64
    with pytest.raises(VerifyError, match="repo: bad") as err:
        asyncio.run(v.check(SPEC, keys, bad_digest, 60, "repo", run_with(FAILED, bad_digest)))
    assert err.value.verification is not None and err.value.verification.outcome == FAILED
    with pytest.raises(VerifyError):
        asyncio.run(v.check(SPEC, keys, bad_digest, 60, "repo", run_with(FAILED, bad_digest)))
    assert runs == [VERIFIED, FAILED]
    clock.now += 61
    with pytest.raises(VerifyError):
        asyncio.run(v.check(SPEC, keys, bad_digest, 60, "repo", run_with(FAILED, bad_digest)))
    assert runs == [VERIFIED, FAILED, FAILED]
    # A failure before the artifact's digest was known is not kept (it would stand for any artifact).
    with pytest.raises(VerifyError):
        asyncio.run(v.check(SPEC, keys, "", 60, "repo", run_with(FAILED, "")))
    assert v.cache.get("helm", "", keys.digest, 60) is None
