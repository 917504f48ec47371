"""Helm provenance on the local cluster: charts signed with ``helm package --sign`` by a key the real gpg made,
served by an HTTP chart repository, verified by ``helm pull --verify --keyring`` against a Secret's
``pubring.gpg``: verified once (then kept by digest and key set), refused when unsigned, signed by another
key or tampered, the last verified chart kept; the key material never on a command line or in a log; the
app's Overview and version picker saying so."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import shutil
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from textual.css.query import NoMatches
from textual.widgets import Static

from engine.helm import Helm
from engine.helm.cli import values_dir
from engine.kube.client import KubeTarget, api_client
from engine.sources.credentials import kube_key_reader
from engine.sources.repository import ChartRequest, HelmRepositorySpec
from engine.sources.source import ChartSource
from engine.sources.verify import VerifyError, VerifySpec
from testkit.chart_sources import ChartRepoServer, Clock, CmdlineWatch, GpgSigner, package_chart, publish_http, write
from testkit.packages import package_yaml
from tests.cli.test_cli import helmdeck
from tests.conftest import run_helm
from tests.tui.test_app_pilot import SIZE, cell, make_app, row, select, stored, wait_for
from tui.screens.picker import PickerScreen

pytestmark = pytest.mark.cluster
FILE = Path("/pk/sources.yaml")


@pytest.fixture(scope="module")
def signer(tmp_path_factory: pytest.TempPathFactory) -> GpgSigner:
    return GpgSigner(tmp_path_factory.mktemp("signer"))


@pytest.fixture(scope="module")
def stranger(tmp_path_factory: pytest.TempPathFactory) -> GpgSigner:
    return GpgSigner(tmp_path_factory.mktemp("stranger"), name="Someone Else", email="else@example.com")


def keys_secret(core: client.CoreV1Api, namespace: str, signer: GpgSigner, name: str = "chart-keys") -> None:
    core.create_namespaced_secret(namespace, client.V1Secret(
        metadata=client.V1ObjectMeta(name=name),
        data={"pubring.gpg": base64.b64encode(signer.pubring.read_bytes()).decode()}))


def needle(signer: GpgSigner) -> str:
    """A piece of the keyring as the Secret holds it (base64): what would show if it reached an argument."""
    return base64.b64encode(signer.pubring.read_bytes()).decode()[40:80]


def verified_request(url: str, namespace: str, *, user: str = "") -> ChartRequest:
    return ChartRequest(HelmRepositorySpec(FILE, "charts", namespace, url), "web", "^1",
                        VerifySpec("helm", "chart-keys", namespace, user=user))


def chart_source(helm: Helm, kube_target: KubeTarget, cache: Path, clock: Clock) -> ChartSource:
    return ChartSource(helm, cache, keys=kube_key_reader(api_client(kube_target)), clock=clock)


async def test_signed_chart_verifies_once_and_names_its_signer(
    helm: Helm, kube_target: KubeTarget, core_api: client.CoreV1Api, namespace: str,
    tmp_path: Path, repo: ChartRepoServer, signer: GpgSigner, caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    clock = Clock()
    publish_http(helm.binary, package_chart(helm.binary, tmp_path, "1.0.0", signer=signer), repo)
    keys_secret(core_api, namespace, signer)
    source = chart_source(helm, kube_target, tmp_path / "cache", clock)
    request = verified_request(repo.url, namespace)
    with CmdlineWatch(needle(signer)) as watch:
        art = await source.pull(request)
    found = art.verification
    assert found.outcome == "Verified" and found.provider == "helm"
    assert found.identity == f"Chart Signer <signer@example.com>, key {signer.fingerprint}"
    assert found.artifact_digest == art.digest and found.keys_digest.startswith("sha256:")
    assert source.verifications.runs == 1 and source.pulls == 1  # the verified pull is the only pull
    assert "/web-1.0.0.tgz.prov" in repo.requests  # helm fetched the .prov next to the chart
    # The keyring reached helm as a path to a file of the private folder, removed after the pull.
    verifying = [c for c in watch.helm_commands if "--verify" in c]
    assert verifying, watch.helm_commands
    keyring = Path(verifying[0][verifying[0].index("--keyring") + 1])
    assert keyring.is_relative_to(values_dir()) and not await asyncio.to_thread(keyring.parent.exists)
    assert watch.leaks == [] and needle(signer) not in caplog.text
    # A no-op pass, within the interval and after it (the index unchanged): nothing verified again.
    assert (await source.pull(request)).verification == found
    clock.now += 61
    assert (await source.pull(request)).verification == found
    assert source.verifications.runs == 1 and source.pulls == 1
    # Another process on the same cache: the Verified result is kept on disk.
    again = chart_source(helm, kube_target, tmp_path / "cache", clock)
    assert (await again.pull(request)).verification == found and again.verifications.runs == 0 and again.pulls == 0
    # The picker's mark: the version's digest is known to verify with these keys.
    listed = await source.versions(request)
    known = source.verification_of(request, listed[0].digest)
    assert known is not None and known.verified


async def test_unsigned_foreign_and_tampered_charts_are_refused_and_the_verified_one_kept(
    helm: Helm, kube_target: KubeTarget, core_api: client.CoreV1Api, namespace: str,
    tmp_path: Path, repo: ChartRepoServer, signer: GpgSigner, stranger: GpgSigner,
) -> None:
    clock = Clock()
    publish_http(helm.binary, package_chart(helm.binary, tmp_path, "1.0.0", signer=signer), repo)
    keys_secret(core_api, namespace, signer)
    source = chart_source(helm, kube_target, tmp_path / "cache", clock)
    request = verified_request(repo.url, namespace)
    good = await source.pull(request)

    async def refused(match: str) -> VerifyError:
        clock.now += 61  # the repository is asked again
        with pytest.raises(VerifyError, match=match) as err:
            await source.pull(request)
        assert err.value.reason == "VerificationError" and f"HelmRepository {namespace}/charts" in err.value.message
        assert source.last(request) == good and good.path.is_file()  # the last verified chart is kept
        return err.value

    # No .prov: helm cannot fetch the provenance file.
    publish_http(helm.binary, package_chart(helm.binary, tmp_path, "1.1.0"), repo)
    err = await refused("failed to fetch provenance")
    assert err.verification is not None and err.verification.outcome == "Failed"
    unsigned = err.verification.artifact_digest
    assert unsigned and not source.cache.has(unsigned.removeprefix("sha256:"))  # never stored, never used
    runs = source.verifications.runs
    with pytest.raises(VerifyError):  # kept as failed for the interval: not checked again
        await source.pull(request)
    assert source.verifications.runs == runs
    listed = await source.versions(request)
    marks = {v.version: source.verification_of(request, v.digest) for v in listed}
    assert marks["1.1.0"] is not None and marks["1.1.0"].outcome == "Failed" and marks["1.0.0"] is not None
    # Signed by a key the Secret does not hold.
    publish_http(helm.binary, package_chart(helm.binary, tmp_path, "1.2.0", signer=stranger), repo)
    await refused("unknown entity")
    # Tampered: another chart served under a .prov signed for the original.
    signed = package_chart(helm.binary, tmp_path, "1.3.0", signer=signer)
    prov = tmp_path / "original.prov"
    shutil.copy(signed.with_name(signed.name + ".prov"), prov)
    publish_http(helm.binary, package_chart(helm.binary, tmp_path, "1.3.0", marker="tampered"), repo, prov=prov)
    await refused("sha256 sum does not match")
    # Signed again, properly: verified and used.
    publish_http(helm.binary, package_chart(helm.binary, tmp_path, "1.3.0", signer=signer, marker="fixed"), repo)
    clock.now += 61
    fixed = await source.pull(request)
    assert fixed.version == "1.3.0" and fixed.verification.verified


async def test_keys_are_read_as_the_service_account(
    helm: Helm, kube_target: KubeTarget, core_api: client.CoreV1Api, namespace: str,
    tmp_path: Path, repo: ChartRepoServer, signer: GpgSigner,
) -> None:
    publish_http(helm.binary, package_chart(helm.binary, tmp_path, "1.0.0", signer=signer), repo)
    keys_secret(core_api, namespace, signer)
    source = chart_source(helm, kube_target, tmp_path / "cache", Clock())
    account = f"system:serviceaccount:{namespace}:deployer"  # allowed nothing: the Secret cannot be read
    with pytest.raises(VerifyError, match=f"Secret {namespace}/chart-keys.*403"):
        await source.pull(verified_request(repo.url, namespace, user=account))
    assert source.pulls == 0
    with pytest.raises(VerifyError, match=f"Secret {namespace}/missing does not exist"):
        await source.pull(ChartRequest(HelmRepositorySpec(FILE, "charts", namespace, repo.url), "web", "^1",
                                       VerifySpec("helm", "missing", namespace)))


def test_package_installs_verified_and_a_tampered_upgrade_leaves_the_release(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path, repo: ChartRepoServer,
    core_api: client.CoreV1Api, signer: GpgSigner,
) -> None:
    h = helm.binary
    publish_http(h, package_chart(h, tmp_path, "1.0.0", signer=signer), repo)
    keys_secret(core_api, namespace, signer)
    pkgs = tmp_path / "packages"
    head = "apiVersion: helmdeck.dev/v1alpha1\n"
    write(pkgs, "charts.yaml", head + f"kind: HelmRepository\nmetadata: {{name: charts, namespace: {namespace}}}\n"
          f"spec: {{url: '{repo.url}', interval: 1s}}\n")
    write(pkgs, "web.yaml", package_yaml("web", namespace, timeout="1m", chart={"spec": {
        "chart": "web", "version": "^1", "sourceRef": {"kind": "HelmRepository", "name": "charts"},
        "verify": {"provider": "helm", "secretRef": {"name": "chart-keys"}}}}))
    log = tmp_path / "helmdeck.log"
    common = ["--kubeconfig", str(kube_target.kubeconfig), "--helm", h, "-n", namespace, "--packages", str(pkgs)]
    args = ["reconcile", "--once", "--json", "--no-lease", *common, "--log-file", str(log), "--log-level", "debug"]
    with CmdlineWatch(needle(signer)) as watch:
        first = helmdeck(*args, timeout=300)
    assert first.returncode == 0, first.stdout + first.stderr
    assert watch.leaks == []

    def status() -> dict[str, dict[str, Any]]:
        proc = helmdeck("status", "-o", "json", *common)
        assert proc.returncode == 0, proc.stderr
        row = next(r for r in json.loads(proc.stdout) if r["name"] == "web")
        return {c["type"]: c for c in row["conditions"]} | {"row": row}

    conds = status()
    assert conds["SourceVerified"]["status"] == "True" and conds["SourceVerified"]["reason"] == "Succeeded"
    signed_by = f"signed by Chart Signer <signer@example.com>, key {signer.fingerprint} (helm)"
    assert signed_by in conds["SourceVerified"]["message"]
    assert conds["row"]["chart"] == "web-1.0.0" and conds["row"]["revision"] == 1
    # A tampered 1.1.0 (another chart under 1.1.0's signed .prov): refused, the release stays on 1.0.0.
    signed = package_chart(h, tmp_path, "1.1.0", signer=signer)
    prov = tmp_path / "original.prov"
    shutil.copy(signed.with_name(signed.name + ".prov"), prov)
    publish_http(h, package_chart(h, tmp_path, "1.1.0", marker="tampered"), repo, prov=prov)
    second = helmdeck(*args, timeout=300)
    assert second.returncode != 0
    results = [r for r in map(json.loads, second.stdout.splitlines()) if r["type"] == "result"]
    assert results[-1]["state"] == "Failed" and "sha256 sum does not match" in results[-1]["message"]
    conds = status()
    assert conds["SourceVerified"]["status"] == "False" and conds["SourceVerified"]["reason"] == "VerificationError"
    assert conds["Ready"]["status"] == "False" and conds["Ready"]["reason"] == "VerificationError"
    rows = json.loads(run_helm(helm, "list", "-n", namespace, "-o", "json"))
    assert [(r["name"], r["chart"], r["revision"]) for r in rows] == [("web", "web-1.0.0", "1")]
    # `helmdeck versions`, another process: 1.0.0's verification kept on disk; 1.1.0's failure is not kept.
    offered = helmdeck("versions", "web", "-o", "json", *common, "--log-file", str(log))
    assert offered.returncode == 0, offered.stderr
    assert [(v["version"], v["deployed"], v["verification"]) for v in json.loads(offered.stdout)["versions"]] == [
        ("1.1.0", False, None), ("1.0.0", True, "Verified")]
    text = helmdeck("versions", "web", *common, "--log-file", str(log)).stdout.splitlines()
    assert text[1].split()[-1] == "VERIFIED" and text[2].split()[-1] == "?" and text[3].split()[-2:] == ["*", "yes"]
    assert needle(signer) not in log.read_text()


async def test_app_shows_verified_then_failed_and_marks_the_picker(
    helm: Helm, namespace: str, kube_target: KubeTarget, core_api: client.CoreV1Api, tmp_path: Path,
    repo: ChartRepoServer, signer: GpgSigner,
) -> None:
    """The app on the local cluster: a signed chart installs and the Overview says who signed; a tampered
    patch release in range is refused (the release stays), the Overview says Failed with helm's message and
    the picker marks each version as verification found it."""
    h = helm.binary
    publish_http(h, package_chart(h, tmp_path, "1.0.0", signer=signer), repo)
    keys_secret(core_api, namespace, signer)
    pkgs = tmp_path / "packages"
    write(pkgs, "web.yaml", f"apiVersion: helmdeck.dev/v1alpha1\nkind: HelmRepository\n"
          f"metadata: {{name: charts, namespace: {namespace}}}\nspec: {{url: '{repo.url}', interval: 1s}}\n---\n"
          f"apiVersion: helmdeck.dev/v1alpha1\nkind: Package\nmetadata: {{name: web, namespace: {namespace}}}\n"
          "spec:\n  timeout: 1m\n  chart:\n    spec:\n      chart: web\n      version: '~1.0'\n"
          "      sourceRef: {kind: HelmRepository, name: charts}\n"
          "      verify: {provider: helm, secretRef: {name: chart-keys}}\n")
    app = make_app(kube_target, helm, namespace, pkgs)
    key = (namespace, "web")

    def overview() -> str:
        try:
            return str(app.screen.query_one("#overview-text", Static).render())
        except NoMatches:
            return ""

    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: cell(app, key, "status") == "✔ deployed", 90, seen=lambda: row(app, key))
        await select(app, key)
        await pilot.press("enter")
        await wait_for(lambda: "✔ Verified" in overview(), 30, seen=overview)
        assert f"signed by Chart Signer <signer@example.com>, key {signer.fingerprint} (helm)" in overview()
        signed = package_chart(h, tmp_path, "1.0.1", signer=signer)
        prov = tmp_path / "original.prov"
        shutil.copy(signed.with_name(signed.name + ".prov"), prov)
        publish_http(h, package_chart(h, tmp_path, "1.0.1", marker="tampered"), repo, prov=prov)
        await wait_for(lambda: "✖ Failed" in overview(), 60, seen=overview)
        assert "sha256 sum does not match" in overview()
        await pilot.press("escape")
        await wait_for(lambda: isinstance(app.screen, type(app.get_default_screen())), 10)
        await pilot.press("v")
        await wait_for(lambda: isinstance(app.screen, PickerScreen), 30)
        assert isinstance(app.screen, PickerScreen)
        labels = {label.lstrip("● ").split()[0]: label for label, _ in app.screen._choices}
        assert labels["1.0.1"].endswith("✖ fails verification") and labels["1.0.0"].endswith("✔ verified")
    assert stored(core_api, namespace, "web") == [(1, "deployed")]  # the tampered chart never installed
