"""Charts from real repositories: an HTTP chart repository, the local cluster's OCI registry, and a
registry with basic auth and TLS; Secrets on the local cluster; every pull through helm 4."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import logging
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from engine.helm import Helm
from engine.helm.cli import values_dir
from engine.kube.client import KubeTarget, api_client
from engine.sources.cache import chart_meta, sha256_file
from engine.sources.credentials import kube_secret_reader
from engine.sources.errors import NoMatchingVersion, SourceAuthFailed, SourceUnreachable
from engine.sources.repository import ChartRequest, HelmRepositorySpec, OCIReference, OCIRepositorySpec
from engine.sources.source import ChartSource
from localcluster.cluster import LocalCluster
from localcluster.process import free_port
from testkit.chart_sources import (
    ChartRepoServer,
    Clock,
    CmdlineWatch,
    TestRegistry,
    package_chart,
    publish_http,
    push_oci,
)
from tests.conftest import helm_binary

pytestmark = pytest.mark.cluster
FILE = Path("/pk/sources.yaml")
PASSWORD = "s3cret-" + uuid.uuid4().hex[:10]


@pytest.fixture(scope="module")
def helm4() -> str:
    return str(helm_binary("helm4"))


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def source(tmp_path: Path, kube_target: KubeTarget, helm_home: dict[str, str], helm4: str, clock: Clock) -> ChartSource:
    return ChartSource(Helm(helm4, kube_target, helm_home), tmp_path / "cache",
                       secrets=kube_secret_reader(api_client(kube_target)), clock=clock)


@pytest.fixture(scope="module")
def auth_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestRegistry]:
    reg = TestRegistry(tmp_path_factory.mktemp("auth-registry"), "deployer", PASSWORD)
    yield reg
    reg.stop()


def http_repo(url: str, **kw: object) -> HelmRepositorySpec:
    return HelmRepositorySpec(FILE, "charts", kw.pop("namespace", "default"), url, **kw)  # type: ignore[arg-type]


def secret(core: client.CoreV1Api, namespace: str, name: str, data: dict[str, bytes]) -> None:
    core.create_namespaced_secret(namespace, client.V1Secret(
        metadata=client.V1ObjectMeta(name=name),
        data={k: base64.b64encode(v).decode() for k, v in data.items()}))


async def test_http_range_newest_match_once_per_interval(
    source: ChartSource, repo: ChartRepoServer, helm4: str, tmp_path: Path, clock: Clock,
) -> None:
    for version in ("1.0.0", "1.1.0", "1.2.0-rc.1", "2.0.0"):
        publish_http(helm4, package_chart(helm4, tmp_path, version), repo)
    request = ChartRequest(http_repo(repo.url, interval=60.0), "web", "^1.0.0")
    art = await source.pull(request)
    assert (art.version, art.app_version, art.revision) == ("1.1.0", "app-1.1.0", "1.1.0")  # no pre-release
    assert art.digest == "sha256:" + hashlib.sha256(art.path.read_bytes()).hexdigest()
    assert art.source == f"web 1.1.0 from HelmRepository default/charts ({repo.url})"
    assert source.pulls == 1 and len(repo.requests) == 2  # the index, then helm's download of the archive
    # Within the interval: no request, no pull.
    assert await source.pull(request) == art
    assert source.pulls == 1 and len(repo.requests) == 2
    # After it: one conditional request (304), still no pull.
    clock.now += 61
    assert await source.pull(request) == art
    assert repo.not_modified == 1 and source.pulls == 1
    # A newer version inside the range is picked; one outside is not.
    publish_http(helm4, package_chart(helm4, tmp_path, "1.3.0"), repo)
    publish_http(helm4, package_chart(helm4, tmp_path, "3.0.0"), repo)
    clock.now += 61
    newer = await source.pull(request)
    assert newer.version == "1.3.0" and newer.digest != art.digest and source.pulls == 2
    # A fresh ChartSource on the same cache asks conditionally and pulls nothing.
    again = ChartSource(source.helm, source.cache.root.parent, clock=clock)
    assert (await again.pull(request)).digest == newer.digest
    assert again.pulls == 0 and repo.not_modified == 2
    listed = await source.versions(request)
    assert [v.version for v in listed] == ["3.0.0", "2.0.0", "1.3.0", "1.2.0-rc.1", "1.1.0", "1.0.0"]
    assert listed[0].app_version == "app-3.0.0" and listed[0].created
    # The repository goes away: resolving fails, the last good artifact is still known.
    repo.stop()
    clock.now += 61
    with pytest.raises(SourceUnreachable):
        await source.pull(request)
    assert source.last(request) == newer and newer.path.is_file()


async def test_oci_range_and_repushed_tag(
    source: ChartSource, local_cluster: LocalCluster, helm4: str, helm_home: dict[str, str], tmp_path: Path,
    clock: Clock,
) -> None:
    registry = local_cluster.registry
    assert registry is not None
    base = f"{registry}/t-{uuid.uuid4().hex[:8]}"
    for version in ("1.0.0", "1.1.0", "1.2.0-rc.1", "2.0.0"):
        push_oci(helm4, package_chart(helm4, tmp_path, version), base, env=helm_home)
    typed = ChartRequest(http_repo(f"oci://{base}", type="oci", insecure=True), "web", "~1.1")
    art = await source.pull(typed)
    # a HelmRepository of type oci keeps the chart's version, as Flux (issue 34, behaviour 9)
    assert art.version == "1.1.0" and art.revision == "1.1.0"
    oci = ChartRequest(OCIRepositorySpec(FILE, "web", "default", f"oci://{base}/web",
                                         OCIReference(semver=">=1.0.0 <2.0.0"), insecure=True))
    same = await source.pull(oci)
    assert same.revision.startswith("1.1.0+") and len(same.revision) == 18  # its archive says the revision
    # Re-pushing the tag with new content: a new digest and revision, same version.
    pushed = push_oci(helm4, package_chart(helm4, tmp_path, "1.1.0", marker="again"), base, env=helm_home)
    assert await source.pull(oci) == same  # within the interval: not asked
    clock.now += 61
    moved = await source.pull(oci)
    assert moved.version == "1.1.0" and moved.digest != same.digest
    assert moved.revision == f"1.1.0+{pushed.removeprefix('sha256:')[:12]}" and source.pulls == 2
    # The archive helm installs says the revision as its version (Flux's mutateChartWithSourceRevision), so a
    # re-pushed tag is a new chart version in the release too; the same archive and version give the same bytes.
    assert chart_meta(moved.path).version == moved.revision and chart_meta(same.path).version == same.revision
    assert moved.digest == f"sha256:{sha256_file(moved.path)}"
    by_tag = ChartRequest(OCIRepositorySpec(FILE, "web", "default", f"oci://{base}/web", OCIReference(tag="2.0.0"),
                                            insecure=True))
    assert (await source.pull(by_tag)).version == "2.0.0"
    by_digest = ChartRequest(OCIRepositorySpec(FILE, "web", "default", f"oci://{base}/web",
                                               OCIReference(digest=pushed), insecure=True))
    assert (await source.pull(by_digest)).digest == moved.digest and source.pulls == 3
    listed = await source.versions(typed)
    assert [v.version for v in listed] == ["2.0.0", "1.2.0-rc.1", "1.1.0", "1.0.0"]
    assert listed[0].app_version == "app-2.0.0" and listed[0].created


async def test_no_matching_version_and_missing_chart(
    source: ChartSource, repo: ChartRepoServer, local_cluster: LocalCluster, helm4: str, helm_home: dict[str, str],
    tmp_path: Path,
) -> None:
    publish_http(helm4, package_chart(helm4, tmp_path, "1.0.0"), repo)
    with pytest.raises(NoMatchingVersion) as err:
        await source.pull(ChartRequest(http_repo(repo.url), "web", ">=5.0.0"))
    assert repo.url in str(err.value) and "'>=5.0.0'" in str(err.value) and "newest: 1.0.0" in str(err.value)
    with pytest.raises(NoMatchingVersion, match="no chart 'api'"):
        await source.pull(ChartRequest(http_repo(repo.url), "api", "*"))
    base = f"{local_cluster.registry}/t-{uuid.uuid4().hex[:8]}"
    push_oci(helm4, package_chart(helm4, tmp_path, "1.0.0"), base, env=helm_home)
    with pytest.raises(NoMatchingVersion) as err:
        await source.pull(ChartRequest(http_repo(f"oci://{base}", type="oci", insecure=True), "web", "^2"))
    assert base in str(err.value) and "'^2'" in str(err.value)
    with pytest.raises(NoMatchingVersion, match="no chart"):
        await source.pull(ChartRequest(http_repo(f"oci://{base}", type="oci", insecure=True), "api", "*"))
    assert source.pulls == 0


async def test_unreachable_repositories(source: ChartSource) -> None:
    port = free_port()
    with pytest.raises(SourceUnreachable) as err:
        await source.pull(ChartRequest(http_repo(f"http://127.0.0.1:{port}", timeout=5.0), "web", "*"))
    assert f"127.0.0.1:{port}" in str(err.value) and err.value.reason == "SourceNotReady"
    oci = OCIRepositorySpec(FILE, "web", "default", f"oci://127.0.0.1:{port}/charts/web", insecure=True, timeout=5.0)
    with pytest.raises(SourceUnreachable, match="OCIRepository default/web"):
        await source.pull(ChartRequest(oci))


async def test_http_basic_auth_credentials_stay_hidden(
    source: ChartSource, helm4: str, tmp_path: Path, core_api: client.CoreV1Api, namespace: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    repo = ChartRepoServer(tmp_path / "private", auth=("reader", PASSWORD))
    try:
        publish_http(helm4, package_chart(helm4, tmp_path, "1.0.0"), repo)
        secret(core_api, namespace, "repo-auth", {"username": b"reader", "password": PASSWORD.encode()})
        secret(core_api, namespace, "wrong-auth", {"username": b"reader", "password": b"nope"})
        with pytest.raises(SourceAuthFailed) as err:
            await source.pull(ChartRequest(http_repo(repo.url, namespace=namespace), "web", "*"))
        assert "401" in str(err.value) and err.value.reason == "SourceNotReady"
        with pytest.raises(SourceAuthFailed):
            await source.pull(ChartRequest(http_repo(repo.url, namespace=namespace, secret_ref="wrong-auth"),
                                              "web", "*"))
        with CmdlineWatch(PASSWORD) as watch:
            art = await source.pull(ChartRequest(http_repo(repo.url, namespace=namespace,
                                                              secret_ref="repo-auth"), "web", "*"))
        assert art.version == "1.0.0" and "pull" in watch.helm_runs
        assert watch.leaks == []
    finally:
        repo.stop()
    assert PASSWORD not in caplog.text


async def test_oci_basic_auth_and_tls_credentials_stay_hidden(
    source: ChartSource, auth_registry: TestRegistry, helm4: str, tmp_path: Path, core_api: client.CoreV1Api,
    namespace: str, caplog: pytest.LogCaptureFixture, helm_home: dict[str, str],
) -> None:
    caplog.set_level(logging.DEBUG)
    home = {"HELM_REGISTRY_CONFIG": str(tmp_path / "push-registry.json")}
    tls = ("--ca-file", str(auth_registry.tls.ca_cert))
    login = [helm4, "registry", "login", auth_registry.host, "--username", auth_registry.user, "--password-stdin",
             *tls]
    subprocess.run(login, input=PASSWORD, text=True, check=True, capture_output=True,  # noqa: ASYNC221 - setup
                   env={**os.environ, **home})
    base = f"{auth_registry.host}/charts"
    push_oci(helm4, package_chart(helm4, tmp_path, "1.0.0"), base, env=home, extra=tls)
    push_oci(helm4, package_chart(helm4, tmp_path, "1.1.0"), base, env=home, extra=tls)
    secret(core_api, namespace, "reg-auth", {".dockerconfigjson": (
        '{"auths": {"%s": {"auth": "%s"}}}' % (auth_registry.host,  # noqa: UP031
                                               base64.b64encode(f"deployer:{PASSWORD}".encode()).decode())
    ).encode()})
    secret(core_api, namespace, "reg-ca", {"ca.crt": auth_registry.tls.ca_cert.read_bytes()})
    secret(core_api, namespace, "reg-wrong", {"username": b"deployer", "password": b"nope"})

    def oci(**kw: object) -> ChartRequest:
        return ChartRequest(OCIRepositorySpec(FILE, "web", namespace, f"oci://{base}/web",
                                              OCIReference(semver="^1.0.0"), **kw))  # type: ignore[arg-type]

    with pytest.raises(SourceUnreachable, match="TLS"):  # the test CA is not trusted without certSecretRef
        await source.pull(oci(secret_ref="reg-auth"))
    with pytest.raises(SourceAuthFailed, match=r"set spec\.secretRef"):
        await source.pull(oci(cert_secret_ref="reg-ca"))
    with pytest.raises(SourceAuthFailed, match=r"check spec\.secretRef"):
        await source.pull(oci(secret_ref="reg-wrong", cert_secret_ref="reg-ca"))
    with CmdlineWatch(PASSWORD) as watch:
        art = await source.pull(oci(secret_ref="reg-auth", cert_secret_ref="reg-ca"))
    assert art.version == "1.1.0" and "pull" in watch.helm_runs
    assert watch.leaks == []
    assert PASSWORD not in caplog.text
    listed = await source.versions(oci(secret_ref="reg-auth", cert_secret_ref="reg-ca"))
    assert [v.version for v in listed] == ["1.1.0", "1.0.0"]
    # The private helm configuration (with the credentials) is gone after each pull, and the helm home the
    # runner was given (standing for the user's) got no repository or registry configuration.
    assert list(values_dir().glob(f"pull-{os.getpid()}-*")) == []
    assert list(values_dir().glob(f"tls-{os.getpid()}-*")) == []
    config_home = Path(helm_home["HELM_CONFIG_HOME"])
    assert not [p for p in config_home.rglob("*") if p.name in ("config.json", "repositories.yaml")]  # noqa: ASYNC240


async def test_packages_resolving_together_share_one_request_and_one_pull(
    source: ChartSource, repo: ChartRepoServer, local_cluster: LocalCluster, helm4: str, helm_home: dict[str, str],
    tmp_path: Path,
) -> None:
    publish_http(helm4, package_chart(helm4, tmp_path, "1.0.0"), repo)
    base = f"{local_cluster.registry}/t-{uuid.uuid4().hex[:8]}"
    push_oci(helm4, package_chart(helm4, tmp_path, "1.0.0", marker="oci"), base, env=helm_home)
    http_req = ChartRequest(http_repo(repo.url), "web", "^1")
    oci_req = ChartRequest(http_repo(f"oci://{base}", type="oci", insecure=True), "web", "^1")
    arts = await asyncio.gather(*[source.pull(r) for r in [http_req, oci_req] * 5])
    assert len({a.digest for a in arts}) == 2
    assert source.pulls == 2
    assert repo.requests.count("/index.yaml") == 1
    assert source.requests == 1 + 2  # the index; the OCI tag list and one manifest
