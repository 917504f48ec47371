"""spec.valuesFrom on the local cluster: values from Secrets and ConfigMaps (targetPath, optional), a change
reconciled from the watch, a missing object reported and then converged, Secret values masked in what is shown."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from engine.base.masking import Masker
from engine.helm import Helm
from engine.kube.client import KubeTarget, api_client
from engine.package.load import load_package
from engine.reconcile import conditions as cond
from engine.reconcile import state as st
from engine.resolve.values import ValuesError
from engine.runtime import Engine
from engine.runtime.assemble import build_engine
from engine.runtime.drive.values_objects import ValuesObjects
from engine.runtime.ledger.book import ReleaseBook
from engine.storage.observer import Observer
from localcluster.cluster import LocalCluster
from tests.cli.test_cli import cluster_args, helmdeck
from tests.engine.storage.test_observer_rbac import service_account_target
from tests.reconcile_harness import EXAMPLES
from tui.engine_client import EngineClient

pytestmark = pytest.mark.cluster

GREETING = "s3cr3t-hello-world"  # under a key no name rule masks: only its source (a Secret) does
MOTD = "motd-from-secret-42"


def package(folder: Path, namespace: str, name: str, values_from: str, values: str = "{}") -> None:
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.yaml").write_text(
        f"apiVersion: helmdeck.dev/v1alpha1\nkind: Package\nmetadata:\n  name: {name}\n  namespace: {namespace}\n"
        f"spec:\n  chart: {EXAMPLES / 'charts' / 'settings'}\n  timeout: 20s\n  values: {values}\n"
        + (f"  valuesFrom:\n{values_from}" if values_from else ""))


def secret(core: client.CoreV1Api, namespace: str, name: str, data: dict[str, str], *, replace: bool = False) -> None:
    body = client.V1Secret(metadata=client.V1ObjectMeta(name=name),
                           data={k: base64.b64encode(v.encode()).decode() for k, v in data.items()})
    if replace:
        core.replace_namespaced_secret(name, namespace, body)
    else:
        core.create_namespaced_secret(namespace, body)


def config_map(core: client.CoreV1Api, namespace: str, name: str, data: dict[str, str]) -> None:
    core.create_namespaced_config_map(namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name),
                                                                    data=data))


async def until(check: Callable[[], bool], timeout: float = 30.0) -> float:
    """Wait for ``check``; returns the seconds it took."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    while not check():
        assert loop.time() - start < timeout, "condition not met in time"
        await asyncio.sleep(0.1)
    return loop.time() - start


def revision(engine: Engine, key: tuple[str, str]) -> int:
    """The newest deployed revision (0: none): helm stores a revision pending before it applies its objects."""
    obs = engine.observer.latest(*key)
    return obs.version if obs and obs.status == "deployed" else 0


def deployed_settings(core: client.CoreV1Api, namespace: str, release: str) -> dict[str, Any]:
    return dict(core.read_namespaced_config_map(release, namespace).data or {})


FULL = ("    - {kind: ConfigMap, name: base}\n"
        "    - {kind: ConfigMap, name: base, valuesKey: level, targetPath: settings.level}\n"
        "    - {kind: Secret, name: creds}\n"
        "    - {kind: Secret, name: motd, valuesKey: text, targetPath: settings.motd}\n"
        "    - {kind: Secret, name: absent, optional: true}\n")


async def test_values_from_secrets_and_config_maps_and_a_change_reconciles_from_the_watch(
    helm: Helm, kube_target: KubeTarget, core_api: client.CoreV1Api, namespace: str, tmp_path: Path,
) -> None:
    config_map(core_api, namespace, "base", {"values.yaml": "settings: {color: blue, greeting: from-configmap}\n",
                                             "level": "debug"})
    secret(core_api, namespace, "creds", {"values.yaml": f"settings: {{greeting: {GREETING}}}\n"})
    secret(core_api, namespace, "motd", {"text": MOTD})
    pkgs = tmp_path / "p"
    package(pkgs, namespace, "app", FULL, values="{settings: {inline: yes-inline, color: red}}")
    package(pkgs, namespace, "second", "    - {kind: Secret, name: creds}\n")  # the same Secret, the same watch
    engine = build_engine(kube_target, helm, pkgs, namespaces=[namespace])
    key, second = (namespace, "app"), (namespace, "second")
    templates: list[str] = []
    real_template = engine.service.helm.template

    async def counting_template(*args: Any, **kwargs: Any) -> str:
        templates.append(args[0])
        return await real_template(*args, **kwargs)

    engine.service.helm.template = counting_template  # type: ignore[method-assign]
    await engine.start()
    try:
        await until(lambda: revision(engine, key) == 1 and engine.release(key) is not None
                    and engine.release(key).state == st.IN_SYNC and revision(engine, second) == 1)  # type: ignore[union-attr]
        # Merge order: valuesFrom in list order, then inline values; targetPath sets one value.
        assert deployed_settings(core_api, namespace, "app") == {
            "color": "red", "greeting": GREETING, "level": "debug", "motd": MOTD, "inline": "yes-inline",
            "logLevel": "info", "featureFlags": "search,export"}  # the last two: the chart's defaults
        assert engine.values_objects.watched() == [("ConfigMap", namespace, ""), ("Secret", namespace, "")]

        # A Secret change reconciles within seconds, from the watch (the interval is 10 minutes).
        secret(core_api, namespace, "creds", {"values.yaml": "settings: {greeting: s3cr3t-changed}\n"}, replace=True)
        took = await until(lambda: revision(engine, key) == 2 and revision(engine, second) == 2, timeout=15)
        assert took < 10  # both packages referring to it
        assert deployed_settings(core_api, namespace, "app")["greeting"] == "s3cr3t-changed"
        assert any(e.action == "valuesFrom" and f"Secret {namespace}/creds changed" in e.message
                   for e in engine.events(key))

        # An object touched without a change of content: the pass decides from the spec digest, no render.
        await until(lambda: engine.release(key).state == st.IN_SYNC)  # type: ignore[union-attr]
        before = len(templates)
        core_api.patch_namespaced_secret("creds", namespace, {"metadata": {"labels": {"touched": "yes"}}})
        await until(lambda: sum(f"Secret {namespace}/creds changed" in e.message for e in engine.events(key)) == 2)
        await asyncio.sleep(2.0)
        assert revision(engine, key) == 2 and len(templates) == before

        # Secret values are masked whatever their key, in values, manifests and diffs: the app's panes
        # (through its one door to the engine), revision 1 included, deployed from the older Secret.
        app = EngineClient(engine)
        panes = [await app.values_text(key, 2, computed=True), await app.manifest_text(key, 1),
                 await app.revision_diff(key, 1, 2), await app.desired_diff(key)]
        for text in panes:
            assert GREETING not in text and "s3cr3t-changed" not in text and MOTD not in text
        assert "•••••• #" in panes[0] and "yes-inline" in panes[0] and "greeting" in panes[2]
        assert GREETING in await app.manifest_text(key, 1, reveal=True)
        shown = engine.masker.values_yaml(await engine.values(key, 2), reveal=False,
                                          secret_paths=engine.secret_paths(key))
        assert "s3cr3t-changed" not in shown and MOTD not in shown and "yes-inline" in shown
        assert engine.secret_paths(key) == (("settings", "greeting"), ("settings", "motd"))
        manifest = engine.masker.mask_manifest(await engine.manifest(key, 2))
        assert "s3cr3t-changed" not in manifest and MOTD not in manifest and "debug" in manifest
        secret(core_api, namespace, "motd", {"text": "next-motd-value"}, replace=True)
        await until(lambda: revision(engine, key) == 3, timeout=15)
        rev_diff = engine.masker.values_yaml(await engine.values(key, 3), reveal=False,
                                             secret_paths=engine.secret_paths(key))
        assert "next-motd-value" not in rev_diff
    finally:
        await engine.stop()


async def test_a_missing_object_holds_the_package_and_creating_it_converges(
    helm: Helm, kube_target: KubeTarget, core_api: client.CoreV1Api, namespace: str, tmp_path: Path,
) -> None:
    pkgs = tmp_path / "p"
    package(pkgs, namespace, "app", "    - {kind: Secret, name: creds}\n")
    package(pkgs, namespace, "other", "")
    engine = build_engine(kube_target, helm, pkgs, namespaces=[namespace])
    key = (namespace, "app")
    await engine.start()
    try:
        def failed() -> bool:
            status = engine.status(key)
            ready = cond.get(status.conditions, cond.READY) if status is not None else None
            return ready is not None and ready.status == "False" and ready.reason == "ValuesError"

        await until(failed)
        ready = cond.get(engine.status(key).conditions, cond.READY)  # type: ignore[union-attr]
        assert ready is not None and f"Secret {namespace}/creds not found" in ready.message
        assert "spec.valuesFrom[0]" in ready.message and "optional: true" in ready.message
        assert revision(engine, key) == 0  # the release is left as it is (here: not installed)
        # The other package carries on.
        await until(lambda: revision(engine, (namespace, "other")) == 1)
        await asyncio.sleep(7.0)  # failures at 0, 2 and 6 s: the next retry is 8 s away
        secret(core_api, namespace, "creds", {"values.yaml": f"settings: {{greeting: {GREETING}}}\n"})
        took = await until(lambda: revision(engine, key) == 1, timeout=20)
        assert took < 6  # the watch, not the backoff
        assert any(f"Secret {namespace}/creds changed" in e.message for e in engine.events(key))
        await until(lambda: engine.release(key) is not None and engine.release(key).ready is True)  # type: ignore[union-attr]
        assert deployed_settings(core_api, namespace, "app")["greeting"] == GREETING
        assert not any(GREETING in e.message for e in engine.events(key))
    finally:
        await engine.stop()


def test_secret_values_are_masked_in_render_diff_and_plan(
    helm: Helm, kube_target: KubeTarget, core_api: client.CoreV1Api, namespace: str, tmp_path: Path,
) -> None:
    config_map(core_api, namespace, "base", {"values.yaml": "settings: {color: blue}\n", "level": "debug"})
    secret(core_api, namespace, "creds", {"values.yaml": f"settings: {{greeting: {GREETING}}}\n"})
    secret(core_api, namespace, "motd", {"text": MOTD})
    pkgs = tmp_path / "p"
    package(pkgs, namespace, "app", FULL)
    log = tmp_path / "log"
    args = cluster_args(helm, kube_target, namespace, pkgs, log)
    render = helmdeck("render", "app", *args)
    assert render.returncode == 0, render.stderr
    rendered = [d for d in yaml.safe_load_all(render.stdout) if d]  # masked, still YAML
    assert rendered[0]["data"]["color"] == "blue" and rendered[0]["data"]["greeting"].startswith("•••••• #")
    assert GREETING not in render.stdout and MOTD not in render.stdout
    shown = helmdeck("render", "app", "--show-secrets", *args)
    assert GREETING in shown.stdout and MOTD in shown.stdout

    plan = helmdeck("plan", "-o", "json", *args)
    assert plan.returncode == 2, plan.stdout + plan.stderr
    assert json.loads(plan.stdout)["packages"][0]["action"] == "install"
    reconcile = helmdeck("reconcile", "--once", "--no-lease", *args)
    assert reconcile.returncode == 0, reconcile.stdout + reconcile.stderr
    assert helmdeck("plan", *args).returncode == 0
    assert state_of(args, "app") == st.IN_SYNC  # status reads the objects too: its verdict counts them

    secret(core_api, namespace, "creds", {"values.yaml": "settings: {greeting: s3cr3t-next-greeting}\n"},
           replace=True)
    assert state_of(args, "app") == st.OUT_OF_SYNC
    plan = helmdeck("plan", *args)
    assert plan.returncode == 2 and "values changed" in plan.stdout, plan.stdout + plan.stderr
    diff = helmdeck("diff", "app", *args)
    assert diff.returncode == 2, diff.stderr
    assert "greeting" in diff.stdout and "•••••• #" in diff.stdout
    for text in (GREETING, "s3cr3t-next-greeting", MOTD):
        assert text not in diff.stdout and text not in plan.stdout
    assert GREETING not in log.read_text() and MOTD not in log.read_text()

    # A missing required object: the CLI says which, and the release is left as it is.
    core_api.delete_namespaced_secret("motd", namespace)
    failed = helmdeck("reconcile", "--once", "--no-lease", "--json", *args)
    assert failed.returncode != 0
    assert f"Secret {namespace}/motd not found" in failed.stdout + failed.stderr
    row = status_row(args, "app")
    assert row["revision"] == 1 and row["ready"] is False  # the release is left as it is
    ready = next(c for c in row["conditions"] if c["type"] == "Ready")
    assert ready["reason"] == "ValuesError" and f"Secret {namespace}/motd not found" in ready["message"]


def status_row(args: list[str], release: str) -> dict[str, Any]:
    rows = json.loads(helmdeck("status", "-o", "json", *args).stdout)
    return dict(next(r for r in rows if r["name"] == release))


def state_of(args: list[str], release: str) -> str:
    return str(status_row(args, release)["state"])


async def test_optional_ignores_not_found_only_a_refused_read_still_fails(
    local_cluster: LocalCluster, core_api: client.CoreV1Api, kube_target: KubeTarget, namespace: str,
    tmp_path: Path,
) -> None:
    rbac = client.RbacAuthorizationV1Api(api_client(kube_target))
    blind = service_account_target(local_cluster, core_api, rbac, namespace, "blind", [], tmp_path)
    pkgs = tmp_path / "p"
    package(pkgs, namespace, "app", "    - {kind: Secret, name: creds, optional: true}\n")
    spec = load_package(pkgs / "app.yaml")
    for target, problem in ((kube_target, None), (blind, f"cannot read Secret {namespace}/creds: Forbidden (403)")):
        sources = ValuesObjects(api_client(target), ReleaseBook(Observer(None)), Masker())
        await sources.fetch(spec)
        if problem is None:
            assert sources.layers(spec)[0].entries == ()  # NotFound, optional: skipped
        else:
            with pytest.raises(ValuesError, match=problem.replace("(", r"\(").replace(")", r"\)")):
                sources.layers(spec)


async def test_a_read_only_viewer_counts_the_objects_and_sees_a_change_as_out_of_sync(
    helm: Helm, kube_target: KubeTarget, core_api: client.CoreV1Api, namespace: str, tmp_path: Path,
) -> None:
    secret(core_api, namespace, "creds", {"values.yaml": f"settings: {{greeting: {GREETING}}}\n"})
    pkgs = tmp_path / "p"
    package(pkgs, namespace, "app", "    - {kind: Secret, name: creds}\n")
    done = helmdeck("reconcile", "--once", "--no-lease", *cluster_args(helm, kube_target, namespace, pkgs,
                                                                       tmp_path / "log"))
    assert done.returncode == 0, done.stdout + done.stderr
    engine = build_engine(kube_target, helm, pkgs, namespaces=[namespace], readonly=True)
    key = (namespace, "app")
    await engine.start()
    try:
        await until(lambda: engine.release(key) is not None
                    and engine.release(key).state == st.IN_SYNC)  # type: ignore[union-attr]
        secret(core_api, namespace, "creds", {"values.yaml": "settings: {greeting: s3cr3t-other}\n"}, replace=True)
        await until(lambda: engine.release(key).state == st.OUT_OF_SYNC, timeout=10)  # type: ignore[union-attr]
        assert revision(engine, key) == 1  # it acts on nothing
        assert any(e.message == f"Secret {namespace}/creds changed" for e in engine.events(key))
    finally:
        await engine.stop()
