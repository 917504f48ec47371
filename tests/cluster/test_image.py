"""The controller image (`make image`, localcluster/image.py) and the controller run in it as deploy/chart runs
it: the chart installed with ``image.repository`` naming the image pushed to the local registry, its
Deployment's pod spec run by podman through the one translation (localcluster/pod.py), the ServiceAccount's
TokenRequest token mounted where a pod has it. Where podman cannot build or run here, these tests fail naming
why (they are never skipped)."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shlex
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from kubernetes import client

from engine.helm import Helm
from engine.kube.client import KubeTarget, api_client
from engine.reconcile.status import EngineStatus
from engine.reconcile.store import DATA_KEY, object_name
from localcluster import image, pod
from localcluster.cluster import LocalCluster
from localcluster.process import listen_ports
from testkit.controller import GROUP, VERSION, create, eventually, get_package, package, releases
from tests.conftest import ROOT
from tests.controller_fixtures import ControllerEnv

pytestmark = pytest.mark.binaries("helm4")
CHART = ROOT / "deploy" / "chart"
LOCKED = ("--set", "rbac.clusterAdmin=false")
MANIFEST_TYPES = ("application/vnd.oci.image.manifest.v1+json",
                  "application/vnd.docker.distribution.manifest.v2+json")


@pytest.fixture(scope="session")
def controller_image() -> image.Plan:
    """``localhost/helmdeck:<version>``, built unless current (the session's start built it: tests/conftest.py)."""
    try:
        return image.build_image(progress=lambda _m: None)
    except image.ImageError as exc:
        pytest.fail(f"the controller image cannot be built here: {exc}")


def _run(*args: str, timeout: float = 120) -> str:
    """``podman run --rm`` of the image with this machine's flags; its output (AssertionError when it fails)."""
    out = image.podman("run", "--rm", *pod.host_ulimits(), *args, check=False, timeout=timeout)
    assert out.returncode == 0, f"podman run {shlex.join(args)}: {out.stdout}{out.stderr}"
    return out.stdout


# -- the image alone ------------------------------------------------------------------------------------------

@pytest.mark.image
def test_the_image_runs_helmdeck_and_the_pinned_tools_read_only_as_65532(controller_image: image.Plan) -> None:
    from engine.base import tools

    tag = controller_image.tag
    [config] = json.loads(image.podman("image", "inspect", tag).stdout)
    cfg = config["Config"]
    assert (cfg["User"], cfg["Entrypoint"], cfg["Cmd"]) == ("65532:65532", ["helmdeck"], ["controller"])
    env = dict(e.split("=", 1) for e in cfg["Env"])
    assert env["HOME"] == "/tmp/home" and env["PATH"].startswith("/opt/helmdeck/bin:")
    assert config["Labels"][image.INPUTS_LABEL] == controller_image.inputs
    ro = ("--read-only", "--read-only-tmpfs=false", "--tmpfs", "/tmp:rw,mode=1777")
    version = _run(*ro, tag, "--version")
    assert version.startswith("helmdeck 0.1.0\nhelm v4.3.2 at /usr/local/bin/helm (from $HELMDECK_HELM)"), version
    assert f'Version:"{tools.HELM4_VERSION}"' in _run(*ro, "--entrypoint", "helm", tag, "version")
    assert tools.KUSTOMIZE_VERSION in _run(*ro, "--entrypoint", "kustomize", tag, "version")
    assert tools.COSIGN_VERSION in _run(*ro, "--entrypoint", "cosign", tag, "version")
    # As 65532 on a read-only root: only the tmpfs takes a file. No build tools, package manager or caches.
    probe = ("id -u; touch /tmp/w && ! touch /opt/ro 2>/dev/null && echo ro; "
             "for p in /usr/bin/pip /usr/bin/pip3 /usr/bin/gcc /usr/bin/cc /usr/bin/go /usr/bin/apt-get /wheels "
             "~root/.cache /opt/helmdeck/bin/pip; do [ -e $p ] && echo left: $p; done; "
             "python3 -c 'import pip' 2>/dev/null && echo left: pip module; "
             "find / -xdev -name __pycache__ -path '/opt/*' | head -1; "
             "find /var/lib/apt/lists /var/cache/apt -type f ! -name lock 2>/dev/null; true")
    assert _run(*ro, "--entrypoint", "sh", tag, "-c", probe).split() == ["65532", "ro"]


def test_the_containerfile_serves_both_ways_from_one_recipe() -> None:
    """Docker Hub's stages and make image's images are alternatives for the same three build arguments; all
    after the last FROM is shared, and the base's packages are one list for apt-get and mmdebstrap."""
    text = image.CONTAINERFILE.read_text()
    args = image.build_args(text)
    stages = [line.split() for line in text.splitlines() if line.startswith("FROM ")]
    named = {s[3]: s[1] for s in stages if len(s) == 4}
    for arg, stage in (("BASE_IMAGE", "base"), ("TOOLS_IMAGE", "tools"), ("WHEELS_IMAGE", "wheels")):
        assert args[arg] == stage and stage in named, arg  # the default: Docker Hub's stage
    assert stages[-1] == ["FROM", "${BASE_IMAGE}"]
    assert named["tools-in"] == "${TOOLS_IMAGE}" and named["wheels-in"] == "${WHEELS_IMAGE}"
    assert "GOBIN=/out" in text and "--wheel-dir /wheels" in text  # where image.py puts them too
    assert image.TOOLS.keys() == {"helm", "kustomize", "cosign"}
    assert "apt-get install -y --no-install-recommends ${BASE_PACKAGES}" in text
    assert image.base_packages(text) == ["python3", "ca-certificates"]


@pytest.mark.image
def test_the_image_is_not_rebuilt_when_its_inputs_are_the_same(controller_image: image.Plan) -> None:
    began = time.monotonic()
    again = image.build_image(progress=lambda _m: None)
    assert again == controller_image and time.monotonic() - began < 30
    assert image.built_inputs(again.tag) == again.inputs


# -- the controller in it, as the chart runs it ------------------------------------------------------------------

@pytest.fixture(scope="session")
def pushed_image(controller_image: image.Plan, local_cluster: LocalCluster) -> Iterator[str]:
    """The image pushed to the local registry as ``localhost:<port>/helmdeck:<version>`` and pulled back; the
    registry serves its manifest. The pulled name is untagged afterwards (the port is the session's)."""
    assert local_cluster.registry is not None
    port = local_cluster.registry.rsplit(":", 1)[1]
    ref = f"localhost:{port}/helmdeck:{controller_image.version}"
    image.podman("push", "--tls-verify=false", controller_image.tag, ref, timeout=600)
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v2/helmdeck/manifests/{controller_image.version}",
                                     headers={"Accept": ", ".join(MANIFEST_TYPES)})
    with urllib.request.urlopen(request, timeout=10) as resp:
        assert resp.headers["Content-Type"] in MANIFEST_TYPES and json.load(resp)["layers"]
    image.podman("pull", "--tls-verify=false", ref, timeout=600)  # as the kubelet pulls it (IfNotPresent)
    yield ref
    image.podman("rmi", ref, check=False)


@contextlib.contextmanager
def _chart_installed(helm: Helm, namespace: str, ref: str, *values: str) -> Iterator[list[dict[str, Any]]]:
    """``helm install`` of the chart into ``namespace`` with ``image.repository`` from ``ref``, watching that
    namespace, its probe and metrics ports free on this machine; yields the release's manifest; uninstalled
    afterwards (its ClusterRoleBinding is cluster-wide)."""
    health, metrics = listen_ports(2)
    repository, tag = ref.rsplit(":", 1)
    sets = ("--set", f"image.repository={repository}", "--set", f"image.tag={tag}",
            "--set", f"controller.watchNamespaces={{{namespace}}}", "--set", f"controller.healthPort={health}",
            "--set", f"controller.metricsPort={metrics}", "--set", "controller.stopDeadline=5", *values)
    lint = subprocess.run([helm.binary, "lint", "--strict", str(CHART), *sets], capture_output=True, text=True,
                          timeout=60, check=False)
    assert lint.returncode == 0 and "0 chart(s) failed" in lint.stdout, lint.stdout + lint.stderr
    helm_args = [*helm.target.helm_args()]
    env = {**helm.env}
    run = [helm.binary, "install", "hd", str(CHART), "--namespace", namespace, *sets, *helm_args]
    out = subprocess.run(run, capture_output=True, text=True, timeout=180, check=False,
                         env={**os.environ, **env})
    assert out.returncode == 0, out.stderr
    try:
        manifest = subprocess.run([helm.binary, "get", "manifest", "hd", "--namespace", namespace, *helm_args],
                                  capture_output=True, text=True, timeout=60, check=True, env={**os.environ, **env})
        yield [d for d in yaml.safe_load_all(manifest.stdout) if d]
    finally:
        subprocess.run([helm.binary, "uninstall", "hd", "--namespace", namespace, *helm_args],
                       capture_output=True, timeout=120, check=False, env={**os.environ, **env})


def _service_account(core: client.CoreV1Api, namespace: str, account: str, cluster: LocalCluster,
                     where: Path) -> tuple[str, int]:
    """A TokenRequest token of ServiceAccount ``account``, the cluster's CA and ``namespace`` written in
    ``where`` as the kubelet projects them (readable by the pod's user); the API server's host and port."""
    assert cluster.kubeconfig is not None
    token: Any = core.create_namespaced_service_account_token(account, namespace, client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=3600)))
    where.mkdir(mode=0o755)
    server = json.loads(cluster.kubeconfig.read_text())["clusters"][0]["cluster"]
    for name, data in (("token", token.status.token.encode()), ("namespace", namespace.encode()),
                       ("ca.crt", base64.b64decode(server["certificate-authority-data"]))):
        (where / name).write_bytes(data)
        (where / name).chmod(0o644)
    url = urlsplit(server["server"])
    return str(url.hostname), int(url.port or 443)


class Container:
    """One container started by podman from a :class:`pod.PodmanRun`."""

    def __init__(self, run: pod.PodmanRun) -> None:
        self.run = run
        self.name = run.args[run.args.index("--name") + 1]
        image.podman("run", "--detach", *run.args)

    def logs(self) -> str:
        out = image.podman("logs", self.name, check=False)
        return out.stdout + out.stderr

    def state(self) -> dict[str, Any]:
        [found] = json.loads(image.podman("inspect", self.name).stdout)
        return dict(found["State"])

    def stop(self) -> float:
        """``podman stop -t <grace>``; the seconds it took."""
        began = time.monotonic()
        image.podman("stop", "-t", str(self.run.stop_timeout), self.name, timeout=self.run.stop_timeout + 60)
        return time.monotonic() - began

    def remove(self) -> None:
        image.podman("rm", "--force", self.name, check=False)


@contextlib.contextmanager
def _in_its_image(docs: list[dict[str, Any]], namespace: str, cluster: LocalCluster, work: Path,
                  core: client.CoreV1Api) -> Iterator[Container]:
    """The chart's Deployment run by podman from its pod spec, as its ServiceAccount; removed afterwards."""
    [deployment] = [d for d in docs if d["kind"] == "Deployment"]
    spec = deployment["spec"]["template"]["spec"]
    api = _service_account(core, namespace, spec["serviceAccountName"], cluster, work / "serviceaccount")
    run = pod.podman_run(spec, name=f"helmdeck-{namespace}"[:60] + uuid.uuid4().hex[:4],
                         service_account_dir=work / "serviceaccount", api_server=api)
    ctr = Container(run)
    try:
        yield ctr
    finally:
        (work / "container.log").write_text(ctr.logs())
        ctr.remove()


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return int(resp.status), resp.read().decode()
    except OSError:
        return 0, ""


def _ready(objects: client.CustomObjectsApi, namespace: str, name: str) -> dict[str, Any] | None:
    status = (get_package(objects, namespace, name) or {}).get("status") or {}
    ready = next((c for c in status.get("conditions", []) if c["type"] == "Ready"), None)
    return ready if ready is not None and ready["status"] == "True" else None


@pytest.mark.cluster
@pytest.mark.image
@pytest.mark.parametrize("values", [(), LOCKED], ids=["cluster-admin", "locked-down"])
def test_the_controller_in_its_image_installs_upgrades_and_uninstalls(
    values: tuple[str, ...], pushed_image: str, controller_env: ControllerEnv, kube_target: KubeTarget,
) -> None:
    env = controller_env
    objects, core, namespace = env.objects, env.core, env.namespace
    spec: dict[str, Any] = {}
    if values == LOCKED:  # every release applied as a ServiceAccount with rights in its namespace
        core.create_namespaced_service_account(namespace, client.V1ServiceAccount(
            metadata=client.V1ObjectMeta(name="deployer")))
        client.RbacAuthorizationV1Api(api_client(kube_target)).create_namespaced_role_binding(
            namespace, client.V1RoleBinding(
                metadata=client.V1ObjectMeta(name="deployer-admin"),
                role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="ClusterRole", name="admin"),
                subjects=[client.RbacV1Subject(kind="ServiceAccount", name="deployer", namespace=namespace)]))
        spec["serviceAccountName"] = "deployer"
    env.web_source()
    create(objects, package(namespace, "web", **spec))
    with _chart_installed(env.helm, namespace, pushed_image, *values) as docs, \
            _in_its_image(docs, namespace, env.cluster, env.work, core) as ctr:
        [deployment] = [d for d in docs if d["kind"] == "Deployment"]
        [container] = deployment["spec"]["template"]["spec"]["containers"]
        assert container["image"] == pushed_image
        assert ctr.run.args[ctr.run.args.index(pushed_image) + 1:] == container["args"]
        eventually(lambda: releases(core, namespace, "web") == [(1, "deployed")], 120, "web installed",
                   logs=ctr.logs)
        eventually(lambda: _ready(objects, namespace, "web"), 60, "web Ready", logs=ctr.logs)
        for kind in ("livenessProbe", "readinessProbe"):
            assert _get(ctr.run.probes[kind])[0] == 200, (kind, ctr.logs())
        metrics_port = next(p["containerPort"] for p in container["ports"] if p["name"] == "http-metrics")
        status, text = _get(f"http://127.0.0.1:{metrics_port}/metrics")
        assert status == 200 and "helmdeck_reconciles_total" in text, text[-2000:]

        objects.patch_namespaced_custom_object(GROUP, VERSION, namespace, "packages", "web",
                                               {"spec": {"values": {"replicas": 2}}})
        eventually(lambda: releases(core, namespace, "web") == [(1, "superseded"), (2, "deployed")], 120,
                   "web upgraded", logs=ctr.logs)

        objects.delete_namespaced_custom_object(GROUP, VERSION, namespace, "packages", "web")
        eventually(lambda: releases(core, namespace, "web") == [], 90, "web uninstalled", logs=ctr.logs)
        eventually(lambda: get_package(objects, namespace, "web") is None, 30, "the finalizer removed",
                   logs=ctr.logs)
        assert ctr.state()["Running"], ctr.logs()
        me = f"system:serviceaccount:{namespace}:helmdeck"
        assert not [line for line in ctr.logs().splitlines() if "forbidden" in line.lower() and me in line]


@pytest.mark.cluster
@pytest.mark.image
def test_podman_stop_mid_upgrade_ends_within_the_grace_period_leaving_nothing_pending(
    pushed_image: str, controller_env: ControllerEnv,
) -> None:
    env = controller_env
    objects, core, namespace = env.objects, env.core, env.namespace
    env.flaky_source()
    create(objects, package(namespace, "flaky", timeout="5m"))
    with _chart_installed(env.helm, namespace, pushed_image) as docs, \
            _in_its_image(docs, namespace, env.cluster, env.work, core) as ctr:
        eventually(lambda: releases(core, namespace, "flaky") == [(1, "deployed")], 120, "flaky installed",
                   logs=ctr.logs)
        objects.patch_namespaced_custom_object(GROUP, VERSION, namespace, "packages", "flaky",
                                               {"spec": {"values": {"hang": True}}})  # --wait never ends
        eventually(lambda: (2, "pending-upgrade") in releases(core, namespace, "flaky"), 90, "upgrade waiting",
                   logs=ctr.logs)
        took = ctr.stop()
        state = ctr.state()
        logs = ctr.logs()
    grace = ctr.run.stop_timeout
    assert took < grace, (took, grace, logs)
    assert state["ExitCode"] == 1, (state, logs)  # SIGTERM's deadline cancelled the action: not SIGKILL's 137
    stored = releases(core, namespace, "flaky")
    assert not [s for _, s in stored if s.startswith("pending-")] and stored[-1] == (2, "failed"), stored
    # The engine's status kept revision 2 as its own failed upgrade (the next controller does not take it for a
    # change made outside helmdeck), and the Package's status says so too, written before the container ended.
    data = core.read_namespaced_config_map(object_name("flaky"), namespace).data or {}
    kept = EngineStatus.from_json(data[DATA_KEY])
    assert [(s.version, s.status) for s in kept.history][:2] == [(2, "failed"), (1, "deployed")], kept
    status = (get_package(objects, namespace, "flaky") or {}).get("status") or {}
    assert [(h["version"], h["status"]) for h in status.get("history", [])][:1] == [(2, "failed")], \
        f"the Package's status was not written at SIGTERM: {status}\n{logs}"


# -- the translation alone ------------------------------------------------------------------------------------

def _pod(**container: Any) -> dict[str, Any]:
    ctr = {"name": "c", "image": "img:1", "args": ["a"], **container}
    return {"containers": [ctr], "volumes": [{"name": "tmp", "emptyDir": {}}]}


def _args(spec: dict[str, Any]) -> list[str]:
    return pod.podman_run(spec, name="n", service_account_dir=Path("/sa"), api_server=("10.0.0.1", 6443)).args


def test_the_translation_follows_the_kubelet_and_refuses_what_it_cannot_translate() -> None:
    plain = _args(_pod())
    assert plain[-2:] == ["img:1", "a"] and "--entrypoint" not in plain  # args replace CMD only
    assert "--stop-timeout" in plain and plain[plain.index("--stop-timeout") + 1] == "30"  # Kubernetes' default
    assert plain[plain.index("--pull") + 1] == "missing"  # IfNotPresent, the default for a tagged image
    with_command = _args(_pod(command=["sh", "-c"]))
    assert with_command[with_command.index("--entrypoint") + 1] == '["sh", "-c"]'
    with pytest.raises(pod.Untranslatable, match="env 'X': only plain values"):
        _args(_pod(env=[{"name": "X", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]))
    hostpath = {**_pod(volumeMounts=[{"name": "h", "mountPath": "/h"}]), "volumes": [{"name": "h", "hostPath": {}}]}
    with pytest.raises(pod.Untranslatable, match="volume 'h': only emptyDir"):
        _args(hostpath)
    with pytest.raises(pod.Untranslatable, match="runAsNonRoot is true but runAsUser"):
        _args(_pod(securityContext={"runAsNonRoot": True}))
    assert pod.quantity("512Mi") == 512 << 20 and pod.quantity("1G") == 10**9
    with pytest.raises(pod.Untranslatable):
        pod.quantity("1.5Gi")


def test_missing_commands_are_named_when_they_cannot_be_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("localcluster.image.shutil.which",
                        lambda c: None if c in ("runc", "mmdebstrap") else f"/usr/bin/{c}")
    monkeypatch.setattr("localcluster.image.os.geteuid", lambda: 1000)  # not root: nothing is installed
    with pytest.raises(image.ImageError, match=r"needs runc, mmdebstrap: install the package\(s\) runc mmdebstrap"):
        image.ensure_commands(progress=lambda _m: None)
