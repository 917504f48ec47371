"""Shared fixtures: one local control plane per session, one namespace per test.

The cluster is built from the cached Go binaries and started in a temporary
state directory. Set ``HELMDECK_TEST_CLUSTER_DIR`` to reuse a directory (and
``HELMDECK_TEST_KEEP_CLUSTER=1`` to leave the cluster running afterwards,
which makes repeated local runs start in a second).

helmdeck's cache (pulled charts, index copies, the post-renderer) is a temporary
directory per session (``session_cache``), never the user's; its ``bin/`` and
``build/`` lead to the user's cache, so the Go binaries are built once for all.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from engine.base.paths import cache_root
from engine.helm import Helm
from engine.kube.client import KubeTarget, api_client
from localcluster import build, image
from localcluster.cluster import LocalCluster
from testkit.chart_sources import ChartRepoServer
from tests import flux_oracle

pytest.register_assert_rewrite("tests.shared_session")  # a plugin (below) imported here first
from tests.shared_session import attach_cluster, is_worker, keep_cluster, shared_dir, shared_lock  # noqa: E402

# the controller tests' fixtures; what xdist's workers share (the cluster, the serial mark)
pytest_plugins = ("tests.controller_fixtures", "tests.shared_session")

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
HELM_COMPONENTS = {"helm4": "helm4", "helm3": "helm3"}
BUILD_FAILED = 7  # the session's exit code when a build failed: not one of pytest's own (0 to 5)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Build the Go binaries the selected tests need before the first test starts: the default components when
    one needs the local cluster (``cluster`` mark or fixture), and those a ``binaries`` mark names (the tests' Flux
    oracle, ``oracle``, among them: :mod:`tests.flux_oracle`); and the controller image when one has the
    ``image`` mark (in each xdist worker: the first builds, the others wait and find it built). A cold build
    takes minutes, more than pytest-timeout allows one test's setup (``make test`` builds first; a test file run
    alone on a fresh machine did not). A failed build ends the session before any test, with exit code
    :data:`BUILD_FAILED`."""
    components = {**build.COMPONENTS, flux_oracle.COMPONENT.name: flux_oracle.COMPONENT}
    needed: set[str] = set()
    for item in session.items:
        if item.get_closest_marker("cluster") or "local_cluster" in getattr(item, "fixturenames", ()):
            needed.update(c.name for c in build.COMPONENTS.values() if not c.on_demand)
        for mark in item.iter_markers("binaries"):
            needed.update(mark.args)
    missing = sorted(name for name in needed if not components[name].is_built())
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if missing:
        try:
            for name in missing:
                build.build(components[name],
                            progress=lambda m: reporter.write_line(m) if reporter is not None else None)
        except build.BuildError as exc:
            pytest.exit(f"the selected tests need binaries that could not be built: {exc}", returncode=BUILD_FAILED)
    if any(item.get_closest_marker("image") for item in session.items):
        try:  # current: seconds; cold: minutes (the Debian base, the wheels, cosign)
            image.build_image(progress=lambda m: reporter.write_line(m) if reporter is not None else None)
        except (image.ImageError, build.BuildError) as exc:
            pytest.exit(f"the selected tests need the controller image, which could not be built: {exc}",
                        returncode=BUILD_FAILED)


@pytest.fixture(scope="session", autouse=True)
def session_cache(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config) -> Iterator[Path]:
    """``$HELMDECK_CACHE`` for the session (the engine, helmdeck run as a command): a fresh directory whose
    ``bin/`` and ``build/`` are links to the user's cache (the Go binaries are not built again); one for all
    xdist workers, as the local cluster they share runs its binaries by this path (``LocalCluster.up`` takes
    another path for another version and restarts it)."""
    binaries = cache_root()  # before the change: the user's
    where = shared_dir(tmp_path_factory, pytestconfig)
    cache = where / "helmdeck-cache"
    with shared_lock(where / "helmdeck-cache.lock"):
        if not cache.exists():
            made = Path(tempfile.mkdtemp(dir=where))
            for sub in ("bin", "build"):
                (binaries / sub).mkdir(parents=True, exist_ok=True)
                (made / sub).symlink_to(binaries / sub, target_is_directory=True)
            made.rename(cache)
    before = os.environ.get("HELMDECK_CACHE")
    os.environ["HELMDECK_CACHE"] = str(cache)
    yield cache
    if before is None:
        os.environ.pop("HELMDECK_CACHE", None)
    else:
        os.environ["HELMDECK_CACHE"] = before


@pytest.fixture(scope="session")
def flux_oracle_process() -> Iterator[flux_oracle.Oracle]:
    """One Flux oracle process for the session (:mod:`tests.flux_oracle`; its tests carry
    ``pytest.mark.binaries("oracle")``, so it is built before the first test)."""
    oracle = flux_oracle.Oracle(flux_oracle.COMPONENT.path("oracle"))
    yield oracle
    oracle.close()


@pytest.fixture(scope="session")
def local_cluster(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config) -> Iterator[LocalCluster]:
    """The session's local cluster, one for all xdist workers (stopped by the controller after the last one:
    :mod:`tests.shared_session`)."""
    cluster = attach_cluster(tmp_path_factory, pytestconfig)
    yield cluster
    if not is_worker(pytestconfig) and not keep_cluster():
        cluster.down()


@pytest.fixture(scope="session")
def kube_target(local_cluster: LocalCluster) -> KubeTarget:
    return KubeTarget(local_cluster.kubeconfig)


@pytest.fixture(scope="session")
def core_api(kube_target: KubeTarget) -> client.CoreV1Api:
    return client.CoreV1Api(api_client(kube_target))


@pytest.fixture(scope="session")
def helm_home(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """An isolated helm config/cache/data home, so tests never touch the user's."""
    home = tmp_path_factory.mktemp("helm-home")
    return {
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_DATA_HOME": str(home / "data"),
    }


def helm_binary(component: str) -> Path:
    comp = build.COMPONENTS[component]
    build.build(comp, progress=lambda _m: None)
    return build.binary(component)


@pytest.fixture(params=["helm4", "helm3"])
def any_helm(request: pytest.FixtureRequest, kube_target: KubeTarget, helm_home: dict[str, str]) -> Helm:
    """Each test using it runs once with helm 4 and once with helm 3."""
    return Helm(helm_binary(request.param), kube_target, helm_home)


@pytest.fixture
def helm(kube_target: KubeTarget, helm_home: dict[str, str]) -> Helm:
    """helm 4, the default for integration tests."""
    return Helm(helm_binary("helm4"), kube_target, helm_home)


@pytest.fixture
def namespace(core_api: client.CoreV1Api, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace for one test, deleted afterwards."""
    stem = "".join(c if c.isalnum() else "-" for c in request.node.name.lower())[:40].strip("-")
    name = f"t-{stem}-{uuid.uuid4().hex[:6]}"
    core_api.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    yield name
    core_api.delete_namespace(name, propagation_policy="Background")


def run_helm(helm: Helm, *args: str) -> str:
    """Run the test's helm binary directly (as a user in another terminal would)."""
    proc = subprocess.run(
        [helm.binary, *args, *helm.target.helm_args()],
        capture_output=True, text=True, env={**os.environ, **helm.env}, timeout=180, check=False,
    )
    if proc.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed:\n{proc.stderr}")
    return proc.stdout


@pytest.fixture
def repo(tmp_path: Path) -> Iterator[ChartRepoServer]:
    """An HTTP chart repository on 127.0.0.1, stopped after the test."""
    server = ChartRepoServer(tmp_path / "repo")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def helmdeck_crds(kube_target: KubeTarget, local_cluster: LocalCluster) -> list[str]:
    """helmdeck's CRDs (Package, HelmRepository, OCIRepository) applied server-side and Established, from the
    committed files of deploy/chart/crds/ (what `helm install` of the chart would create); one xdist worker at
    a time (two replaces of one CRD at once conflict)."""
    import yaml

    from engine.helm.crds import CREATE_REPLACE, apply_crds

    crds = [yaml.safe_load(p.read_text()) for p in sorted((ROOT / "deploy" / "chart" / "crds").glob("*.yaml"))]
    with shared_lock(local_cluster.state_dir.parent / "crds.lock"):
        return apply_crds(api_client(kube_target), crds, CREATE_REPLACE, 60)
