"""cosign on the local cluster: charts pushed to the local OCI registry and signed by the real cosign
(``generate-key-pair``, ``sign --key --tlog-upload=false``), an OCIRepository's ``spec.verify`` checked by
``cosign verify`` against a Secret's ``*.pub`` keys: verified once (then kept by manifest digest and key set),
refused when unsigned, signed by another key, or when a tag is pushed again with other content (the last
verified chart kept and the release left on it); a digest pin verified; the keys never on a command line or in
a log."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import logging
import uuid
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from engine.base.tools import ToolMissing
from engine.helm import Helm
from engine.helm.cli import values_dir
from engine.kube.client import KubeTarget, api_client
from engine.runtime.assemble import build_engine
from engine.runtime.state import ActionOutcome
from engine.sources.cosign import cosign_message, find_cosign, fingerprint
from engine.sources.credentials import kube_key_reader
from engine.sources.repository import ChartRequest, OCIReference, OCIRepositorySpec
from engine.sources.source import ChartSource
from engine.sources.verify import VerifyError, VerifySpec
from localcluster.cluster import LocalCluster
from testkit.chart_sources import Clock, CmdlineWatch, CosignSigner, package_chart, push_oci, write
from testkit.packages import package_yaml
from tests.conftest import helm_binary

pytestmark = [pytest.mark.cluster, pytest.mark.binaries("cosign")]
FILE = Path("/pk/sources.yaml")


@pytest.fixture(scope="module")
def cosign() -> Path:
    return helm_binary("cosign")  # built before the session (the binaries mark)


@pytest.fixture(scope="module")
def signer(cosign: Path, tmp_path_factory: pytest.TempPathFactory) -> CosignSigner:
    return CosignSigner(cosign, tmp_path_factory.mktemp("cosign-signer"))


@pytest.fixture(scope="module")
def stranger(cosign: Path, tmp_path_factory: pytest.TempPathFactory) -> CosignSigner:
    return CosignSigner(cosign, tmp_path_factory.mktemp("cosign-stranger"), password="another-password")


def keys_secret(core: client.CoreV1Api, namespace: str, keys: dict[str, CosignSigner],
                name: str = "cosign-keys") -> None:
    core.create_namespaced_secret(namespace, client.V1Secret(
        metadata=client.V1ObjectMeta(name=name),
        data={k: base64.b64encode(s.pub.read_bytes()).decode() for k, s in keys.items()}))


def needle(signer: CosignSigner) -> str:
    """A piece of the public key as its PEM holds it: what would show if it reached an argument or a log."""
    return signer.pub.read_text().splitlines()[1][8:48]


def request_for(base: str, namespace: str, ref: OCIReference, *, user: str = "") -> ChartRequest:
    verify = VerifySpec("cosign", "cosign-keys", namespace, user=user)
    return ChartRequest(OCIRepositorySpec(FILE, "web", namespace, f"oci://{base}/web", ref, insecure=True,
                                          verify=verify), verify=verify)


def chart_source(helm4: Path, kube_target: KubeTarget, helm_home: dict[str, str], cache: Path,
                 clock: Clock) -> ChartSource:
    return ChartSource(Helm(str(helm4), kube_target, helm_home), cache,
                       keys=kube_key_reader(api_client(kube_target)), clock=clock)


async def test_a_signed_chart_verifies_once_with_the_key_that_signed_it(
    kube_target: KubeTarget, helm_home: dict[str, str], core_api: client.CoreV1Api, namespace: str, tmp_path: Path,
    local_cluster: LocalCluster, signer: CosignSigner, stranger: CosignSigner, caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    helm4 = helm_binary("helm4")
    base = f"{local_cluster.registry}/cosign-{uuid.uuid4().hex[:8]}"
    pushed = push_oci(str(helm4), package_chart(str(helm4), tmp_path, "1.0.0"), base, env=helm_home)
    signer.sign(f"{base}/web@{pushed}")
    # Two keys: the one that did not sign comes first (names sorted), and the second names the signer.
    keys_secret(core_api, namespace, {"a-retired.pub": stranger, "cosign.pub": signer})
    clock = Clock()
    source = chart_source(helm4, kube_target, helm_home, tmp_path / "cache", clock)
    request = request_for(base, namespace, OCIReference(tag="1.0.0"))
    with CmdlineWatch(needle(signer)) as watch:
        art = await source.pull(request)
    found = art.verification
    assert (found.provider, found.outcome) == ("cosign", "Verified")
    assert found.identity == f"key cosign.pub of Secret {namespace}/cosign-keys ({signer.fingerprint})"
    assert found.artifact_digest == pushed and found.keys_digest.startswith("sha256:")
    assert source.verifications.runs == 1 and source.pulls == 1
    # Each key reached cosign as a path to a 0600 file of a private folder, removed after the check; the image
    # by digest, so what was verified is what is pulled.
    verifying = sorted(c for c in watch.cosign_commands if c[0] == "verify")
    assert len(verifying) == 2, watch.cosign_commands
    for command in verifying:
        key = Path(command[command.index("--key") + 1])
        assert key.is_relative_to(values_dir()) and not await asyncio.to_thread(key.parent.exists)
        assert command[-1] == f"{base}/web@{pushed}" and "--insecure-ignore-tlog=true" in command
    assert watch.leaks == [] and needle(signer) not in caplog.text and needle(stranger) not in caplog.text
    # A no-op pass, within the interval and after it (the tag unchanged): nothing verified again.
    assert (await source.pull(request)).verification == found
    clock.now += 61
    assert (await source.pull(request)).verification == found
    assert source.verifications.runs == 1 and source.pulls == 1
    # Another process on the same cache: the Verified result is kept on disk.
    again = chart_source(helm4, kube_target, helm_home, tmp_path / "cache", clock)
    assert (await again.pull(request)).verification == found and again.verifications.runs == 0
    # The picker's mark: the version's manifest digest is known to verify with these keys.
    listed = await source.versions(request)
    known = source.verification_of(request, listed[0].digest)
    assert known is not None and known.verified
    # A digest pin verifies the same manifest: the kept result answers.
    pinned = await source.pull(request_for(base, namespace, OCIReference(digest=pushed)))
    assert pinned.verification == found and source.verifications.runs == 1


async def test_unsigned_foreign_and_repushed_charts_are_refused_and_the_verified_one_kept(
    kube_target: KubeTarget, helm_home: dict[str, str], core_api: client.CoreV1Api, namespace: str, tmp_path: Path,
    local_cluster: LocalCluster, signer: CosignSigner, stranger: CosignSigner,
) -> None:
    helm4 = helm_binary("helm4")
    h = str(helm4)
    base = f"{local_cluster.registry}/cosign-{uuid.uuid4().hex[:8]}"
    pushed = push_oci(h, package_chart(h, tmp_path, "1.0.0"), base, env=helm_home)
    signer.sign(f"{base}/web@{pushed}")
    keys_secret(core_api, namespace, {"cosign.pub": signer})
    clock = Clock()
    source = chart_source(helm4, kube_target, helm_home, tmp_path / "cache", clock)
    request = request_for(base, namespace, OCIReference(tag="1.0.0"))
    good = await source.pull(request)

    async def refused(match: str) -> VerifyError:
        clock.now += 61  # the registry is asked again
        pulls = source.pulls
        with pytest.raises(VerifyError, match=match) as err:
            await source.pull(request)
        assert err.value.reason == "VerificationError" and f"OCIRepository {namespace}/web" in err.value.message
        assert source.last(request) == good and good.path.is_file()  # the last verified chart is kept
        assert source.pulls == pulls  # checked before the pull: the refused chart is never fetched
        return err.value

    # The tag pushed again with other content, unsigned: its new manifest has no signature.
    repushed = push_oci(h, package_chart(h, tmp_path, "1.0.0", marker="tampered"), base, env=helm_home)
    err = await refused(f"no cosign signature of {repushed} verifies with the keys of Secret {namespace}/cosign-keys "
                        r"\(cosign.pub: no signatures found\)")
    assert err.verification is not None and err.verification.outcome == "Failed"
    assert err.verification.artifact_digest == repushed
    runs = source.verifications.runs
    with pytest.raises(VerifyError):  # kept as failed for the interval: not checked again
        await source.pull(request)
    assert source.verifications.runs == runs
    # Signed by a key the Secret does not hold.
    foreign = push_oci(h, package_chart(h, tmp_path, "1.0.0", marker="foreign"), base, env=helm_home)
    stranger.sign(f"{base}/web@{foreign}")
    await refused("cosign.pub: no matching signatures")
    # Signed again, properly: verified and used.
    fixed = push_oci(h, package_chart(h, tmp_path, "1.0.0", marker="fixed"), base, env=helm_home)
    signer.sign(f"{base}/web@{fixed}")
    clock.now += 61
    art = await source.pull(request)
    assert art.verification.verified and art.verification.artifact_digest == fixed and art.digest != good.digest


async def test_keys_are_read_as_the_service_account(
    kube_target: KubeTarget, helm_home: dict[str, str], core_api: client.CoreV1Api, namespace: str, tmp_path: Path,
    local_cluster: LocalCluster, signer: CosignSigner,
) -> None:
    helm4 = helm_binary("helm4")
    base = f"{local_cluster.registry}/cosign-{uuid.uuid4().hex[:8]}"
    pushed = push_oci(str(helm4), package_chart(str(helm4), tmp_path, "1.0.0"), base, env=helm_home)
    signer.sign(f"{base}/web@{pushed}")
    keys_secret(core_api, namespace, {"cosign.pub": signer})
    source = chart_source(helm4, kube_target, helm_home, tmp_path / "cache", Clock())
    account = f"system:serviceaccount:{namespace}:deployer"  # allowed nothing: the Secret cannot be read
    with pytest.raises(VerifyError, match=f"Secret {namespace}/cosign-keys.*403"):
        await source.pull(request_for(base, namespace, OCIReference(tag="1.0.0"), user=account))
    assert source.pulls == 0 and source.verifications.runs == 0


def _folder(pkgs: Path, namespace: str, base: str, ref: str, *, service_account: str = "") -> None:
    head = "apiVersion: helmdeck.dev/v1alpha1\n"
    write(pkgs, "source.yaml", head + f"kind: OCIRepository\nmetadata: {{name: web, namespace: {namespace}}}\n"
          f"spec:\n  url: oci://{base}/web\n  insecure: true\n  interval: 1s\n  ref: {ref}\n"
          "  verify: {provider: cosign, secretRef: {name: cosign-keys}}\n")
    account: dict[str, Any] = {"serviceAccountName": service_account} if service_account else {}
    write(pkgs, "web.yaml", package_yaml("web", namespace, chartRef={"kind": "OCIRepository", "name": "web"},
                                         timeout="1m", **account))


async def test_a_package_installs_verified_and_a_repushed_tag_leaves_the_release(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path, local_cluster: LocalCluster,
    helm_home: dict[str, str], core_api: client.CoreV1Api, signer: CosignSigner, caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    h = helm.binary
    base = f"{local_cluster.registry}/cosign-{uuid.uuid4().hex[:8]}"
    pushed = push_oci(h, package_chart(h, tmp_path, "1.0.0", marker="signed"), base, env=helm_home)
    signer.sign(f"{base}/web@{pushed}")
    keys_secret(core_api, namespace, {"cosign.pub": signer})
    pkgs = tmp_path / "packages"
    _folder(pkgs, namespace, base, "{tag: 1.0.0}")
    engine = build_engine(kube_target, helm, pkgs, namespaces=[namespace])
    key = (namespace, "web")
    await engine.start(reconcile=False)
    try:
        with CmdlineWatch(needle(signer)) as watch:
            done = await engine.reconcile(key)
        assert isinstance(done, ActionOutcome) and done.ok, done
        view = engine.release(key)
        assert view is not None
        verified = view.condition("SourceVerified")
        assert verified is not None and (verified.status, verified.reason) == ("True", "Succeeded"), verified
        assert f"key cosign.pub of Secret {namespace}/cosign-keys ({signer.fingerprint})" in verified.message
        digest12 = pushed.removeprefix("sha256:")[:12]
        obs = engine.observer.latest(*key)
        assert obs is not None and (obs.version, obs.chart_version) == (1, f"1.0.0+{digest12}")
        # The tag pushed again with other content, unsigned: refused, the release stays on the verified chart.
        push_oci(h, package_chart(h, tmp_path, "1.0.0", marker="tampered"), base, env=helm_home)
        await asyncio.sleep(1.2)  # the OCIRepository's interval: the tag is asked again
        with CmdlineWatch(needle(signer)) as second:
            failed = await engine.reconcile(key)
        assert failed is None or (isinstance(failed, ActionOutcome) and not failed.ok), failed
        view = engine.release(key)
        assert view is not None
        verified = view.condition("SourceVerified")
        assert verified is not None and (verified.status, verified.reason) == ("False", "VerificationError")
        assert "no signatures found" in verified.message, verified.message
        obs = engine.observer.latest(*key)
        assert obs is not None and (obs.version, obs.chart_version) == (1, f"1.0.0+{digest12}")
        data = core_api.read_namespaced_config_map("web-marker", namespace).data or {}
        assert data == {"marker": "signed"}
        assert watch.leaks == second.leaks == [] and needle(signer) not in caplog.text
        assert watch.cosign_commands and second.cosign_commands  # cosign ran, keys by path only
    finally:
        await engine.stop()


async def test_an_unsigned_chart_is_never_installed(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path, local_cluster: LocalCluster,
    helm_home: dict[str, str], core_api: client.CoreV1Api, signer: CosignSigner,
) -> None:
    h = helm.binary
    base = f"{local_cluster.registry}/cosign-{uuid.uuid4().hex[:8]}"
    pushed = push_oci(h, package_chart(h, tmp_path, "1.0.0"), base, env=helm_home)
    keys_secret(core_api, namespace, {"cosign.pub": signer})
    pkgs = tmp_path / "packages"
    _folder(pkgs, namespace, base, f"{{digest: '{pushed}'}}")
    engine = build_engine(kube_target, helm, pkgs, namespaces=[namespace])
    key = (namespace, "web")
    await engine.start(reconcile=False)
    try:
        failed = await engine.reconcile(key)
        assert failed is None or (isinstance(failed, ActionOutcome) and not failed.ok), failed
        assert engine.observer.latest(*key) is None  # nothing installed
        view = engine.release(key)
        verified = view.condition("SourceVerified") if view is not None else None
        assert verified is not None and verified.status == "False" and pushed in verified.message, verified
    finally:
        await engine.stop()


def test_cosign_is_found_as_kustomize_is_and_its_errors_are_read_without_warnings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    on_path = tmp_path / "bin" / "cosign"
    on_path.parent.mkdir()
    on_path.write_text("#!/bin/sh\n")
    on_path.chmod(0o755)
    assert find_cosign({"HELMDECK_COSIGN": str(on_path)}) == on_path  # explicit first
    monkeypatch.setenv("HELMDECK_CACHE", str(tmp_path / "empty-cache"))  # the pinned build absent
    assert find_cosign({"PATH": str(on_path.parent)}) == on_path
    with pytest.raises(ToolMissing, match=r"spec.verify \(provider cosign\) needs cosign: .*localcluster.build cosign"):
        find_cosign({"PATH": ""})
    with pytest.raises(ToolMissing, match="HELMDECK_COSIGN"):
        find_cosign({"HELMDECK_COSIGN": "/nowhere/cosign", "PATH": str(on_path.parent)})
    # cosign's warnings (the skipped log; a TUF repository it could not reach) are not its error: a failed
    # check must not read as an unreachable registry.
    output = ("WARNING: Skipping tlog verification is an insecure practice\nWARNING: Could not fetch trusted_root.json"
              " from the TUF repository: dial tcp: lookup tuf-repo-cdn.sigstore.dev: no such host\n"
              "Error: no signatures found\nerror during command execution: no signatures found\n")
    assert cosign_message(output) == "no signatures found"
    pem = b"-----BEGIN PUBLIC KEY-----\nAAEC\nAwQ=\n-----END PUBLIC KEY-----\n"
    assert fingerprint(pem) == "SHA256:" + hashlib.sha256(bytes([0, 1, 2, 3, 4])).hexdigest()
