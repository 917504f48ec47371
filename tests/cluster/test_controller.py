"""`helmdeck controller` on the local cluster, run as a subprocess: Package objects are installed and upgraded
by the same engine as the app, one controller acts through its Lease and a second takes over."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from prometheus_client.parser import text_string_to_metric_families

from engine.base.wire import FINALIZER
from engine.kube.client import KubeTarget, api_client
from engine.kube.rest import get_json
from engine.package.load import object_origin
from engine.reconcile.status import EngineStatus
from engine.reconcile.store import DATA_KEY, object_name
from engine.runtime.cluster.finalizer import Finalizers
from engine.runtime.cluster.objects import PackageObjects
from helmdeck.parser import EXIT_USAGE
from testkit.chart_sources import ChartRepoServer, package_chart, publish_http
from testkit.controller import (
    GROUP,
    VERSION,
    create,
    endpoint,
    eventually,
    get_package,
    lease_holder,
    package,
    passes_ended,
    released,
    releases,
    start_controller,
)
from testkit.packages import package_doc
from tests.controller_fixtures import ControllerEnv

pytestmark = pytest.mark.cluster
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


def _condition(status: dict[str, Any], type_: str) -> dict[str, Any]:
    found: dict[str, Any] = next(c for c in status.get("conditions", []) if c["type"] == type_)
    return found


def _ready_status(objects: client.CustomObjectsApi, namespace: str, name: str,
                  generation: int) -> dict[str, Any] | None:
    """The Package's status once Ready is True or False for ``generation`` (None before)."""
    obj = get_package(objects, namespace, name) or {}
    status: dict[str, Any] = obj.get("status") or {}
    ready = next((c for c in status.get("conditions", []) if c["type"] == "Ready"), None)
    if status.get("observedGeneration") != generation or ready is None or ready["status"] == "Unknown":
        return None
    return status


def _reasons(core: client.CoreV1Api, namespace: str, name: str) -> list[str]:
    """The reasons of the Events on Package ``name``, oldest first."""
    found: Any = core.list_namespaced_event(
        namespace, field_selector=f"involvedObject.kind=Package,involvedObject.name={name}").items
    return [e.reason for e in sorted(found, key=lambda e: e.metadata.creation_timestamp)]


def _messages(core: client.CoreV1Api, namespace: str, name: str, reason: str) -> list[str]:
    """The messages of the Events of ``reason`` on Package ``name``, oldest first."""
    found: Any = core.list_namespaced_event(
        namespace, field_selector=f"involvedObject.kind=Package,involvedObject.name={name},reason={reason}").items
    return [e.message for e in sorted(found, key=lambda e: e.metadata.creation_timestamp)]


def test_a_package_object_is_installed_and_an_edit_upgrades_once(
    controller_env: ControllerEnv, kube_target: KubeTarget,
) -> None:
    env = controller_env
    objects, core, _, namespace = env.objects, env.core, env.coordination, env.namespace
    env.web_source()
    create(objects, package(namespace, "web", values={"replicas": 1}))
    ctl = env.start()
    try:
        eventually(lambda: releases(core, namespace, "web") == [(1, "deployed")], 90, "web installed",
                   logs=ctl.text)
        status = eventually(lambda: _ready_status(objects, namespace, "web", 1), 30, "Ready for generation 1",
                            logs=ctl.text)
        ready = _condition(status, "Ready")
        assert ready["reason"] == "InstallSucceeded" and "web" in ready["message"], status
        assert _condition(status, "Released")["status"] == "True"
        [first] = status["history"]
        # An OCI chart's version carries its digest as build metadata (0.1.0+<12 hex>), as Flux records it.
        assert (first["version"], first["status"]) == (1, "deployed") and first["chart"].startswith("web@0.1.0")
        assert status["lastAttemptedRevision"] == status["lastAppliedRevision"] == first["chartVersion"]
        assert first["chartVersion"].startswith("0.1.0")
        assert status["lastAttemptedReleaseAction"] == "install" and status["failures"] == 0
        # Flux's snapshot fields, kept by the CRD: the action, the OCI artifact's digest (also the status's
        # lastAttemptedRevisionDigest), metav1 times; no deleted time (a zero metav1.Time is dropped).
        assert first["action"] == "install" and first["ociDigest"].startswith("sha256:"), first
        assert status["lastAttemptedRevisionDigest"] == first["ociDigest"], status
        metav1 = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"
        assert all(re.fullmatch(metav1, first[k]) for k in ("firstDeployed", "lastDeployed")), first
        assert "deleted" not in first, first
        row = get_json(api_client(kube_target), f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/packages",
                       accept=TABLE)["rows"][0]["cells"]
        assert row[0] == "web" and row[2:] == ["True", ready["message"], 1, first["chart"]]
        assert eventually(lambda: "InstallSucceeded" in _reasons(core, namespace, "web"), 10, "an Event")

        objects.patch_namespaced_custom_object(GROUP, VERSION, namespace, "packages", "web",
                                               {"spec": {"values": {"replicas": 2}}})
        eventually(lambda: releases(core, namespace, "web") == [(1, "superseded"), (2, "deployed")], 60,
                   "web upgraded", logs=ctl.text)
        status = eventually(lambda: _ready_status(objects, namespace, "web", 2), 30, "Ready for generation 2",
                            logs=ctl.text)
        assert _condition(status, "Ready")["reason"] == "UpgradeSucceeded"
        assert [(h["version"], h["status"], h.get("action")) for h in status["history"]] == [
            (2, "deployed", "upgrade"), (1, "superseded", None)]
        time.sleep(5)  # more passes would make more revisions: the edit upgrades once
        assert releases(core, namespace, "web") == [(1, "superseded"), (2, "deployed")]
        assert _reasons(core, namespace, "web").count("UpgradeSucceeded") == 1

        health, metrics = endpoint(ctl.text(), "health probes"), endpoint(ctl.text(), "metrics")
        for probe in ("/healthz", "/readyz"):
            with urllib.request.urlopen(health + probe, timeout=5) as resp:
                assert resp.status == 200
        with urllib.request.urlopen(metrics + "/metrics", timeout=5) as resp:
            samples = {f"{s.name}{sorted(s.labels.items())}": s.value
                       for family in text_string_to_metric_families(resp.read().decode()) for s in family.samples}
        assert samples["helmdeck_reconciles_total[('result', 'success')]"] >= 2
        assert samples["helmdeck_reconcile_duration_seconds_count[]"] >= 2
        for action in ("install", "upgrade"):
            key = f"helmdeck_helm_action_duration_seconds_count[('action', '{action}'), ('result', 'succeeded')]"
            assert samples[key] == 1, samples
        assert samples["helmdeck_releases[('state', 'InSync')]"] == 1
        assert "helmdeck_queue_depth[]" in samples
    finally:
        assert ctl.stop() == 0, ctl.text()


def test_a_second_controller_takes_over_within_20s_of_sigkill(
    controller_env: ControllerEnv,
) -> None:
    env = controller_env
    objects, core, coordination, namespace = env.objects, env.core, env.coordination, env.namespace
    env.web_source()
    first = env.start(name="a")
    second = None
    try:
        holder = eventually(lambda: lease_holder(coordination, namespace), 30, "a controller holds the Lease",
                            logs=first.text)
        assert f"-{first.pid}-" in holder
        create(objects, package(namespace, "before"))
        second = env.start(name="b")
        eventually(lambda: releases(core, namespace, "before") == [(1, "deployed")], 90, "installed by the first",
                   logs=first.text)
        assert lease_holder(coordination, namespace) == holder  # the second one waits
        # ... and counts no package as its own: the replicas' sum of helmdeck_releases is every package once.
        assert eventually(lambda: released(first) == 1, 30, "the leader counts the package", logs=first.text)
        assert released(second) == 0
        first.stop(signal.SIGKILL)
        killed = time.monotonic()

        def taken_over() -> str | None:
            now = lease_holder(coordination, namespace)
            return now if now and now != holder else None

        new = eventually(taken_over, 20, "the second controller holds the Lease", logs=second.text)
        assert f"-{second.pid}-" in new and time.monotonic() - killed < 20
        create(objects, package(namespace, "after"))  # and it acts
        eventually(lambda: releases(core, namespace, "after") == [(1, "deployed")], 90, "installed by the second",
                   logs=second.text)
    finally:
        first.stop(signal.SIGKILL)
        if second is not None:
            assert second.stop() == 0, second.text()


def test_without_cluster_access_it_says_what_is_missing(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_SERVICE") and k != "KUBECONFIG"}
    proc = subprocess.run([sys.executable, "-m", "helmdeck", "controller", "--serviceaccount-dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=60, check=False, env={**env, "HOME": str(tmp_path)})
    assert proc.returncode == EXIT_USAGE, proc.stderr
    assert "no --kubeconfig, $KUBECONFIG is not set, no in-cluster config" in proc.stderr, proc.stderr
    assert f"no {tmp_path / '.kube' / 'config'}" in proc.stderr


@pytest.mark.parametrize("where", ["--kubeconfig before the command", "$KUBECONFIG", "~/.kube/config"])
def test_outside_a_pod_it_finds_its_cluster_as_controller_runtime_does(where: str,
                                                                       controller_env: ControllerEnv) -> None:
    """The flag given before `controller` was dropped and $KUBECONFIG ignored: the controller only tried
    in-cluster config. It takes the first of --kubeconfig, $KUBECONFIG, in-cluster config, ~/.kube/config
    (controller-runtime's pkg/client/config loadConfig) and says which in its log."""
    env, kubeconfig = controller_env, str(controller_env.kubeconfig)
    home = env.work / "home"
    (home / ".kube").mkdir(parents=True)
    before: tuple[str, ...] = ()
    extra = {"HOME": str(home), "KUBERNETES_SERVICE_HOST": "", "KUBECONFIG": ""}
    if where.startswith("--kubeconfig"):
        before, says = ("--kubeconfig", kubeconfig), f"cluster: --kubeconfig {kubeconfig}"
    elif where == "$KUBECONFIG":
        extra["KUBECONFIG"], says = kubeconfig, f"cluster: $KUBECONFIG ({kubeconfig})"
    else:
        (home / ".kube" / "config").write_text(Path(kubeconfig).read_text())
        says = f"cluster: ~/.kube/config ({home / '.kube' / 'config'}; no in-cluster config"
    ctl = start_controller(None, env.namespace, env.helm, env.work, "--lease-namespace", env.namespace,
                           "--serviceaccount-dir", str(env.work / "no-mount"), env=extra, before=before)
    try:
        eventually(lambda: "controller started" in ctl.text(), 60, "the controller started", logs=ctl.text)
        assert says in ctl.text(), ctl.text()
        eventually(lambda: lease_holder(env.coordination, env.namespace), 30, "it holds its Lease", logs=ctl.text)
    finally:
        assert ctl.stop() == 0, ctl.text()


def test_a_bad_reference_is_ready_false_naming_the_field_and_the_others_carry_on(
    controller_env: ControllerEnv,
) -> None:
    env = controller_env
    objects, core, _, namespace = env.objects, env.core, env.coordination, env.namespace
    env.web_source()
    create(objects, package(namespace, "lost", chartRef={"kind": "OCIRepository", "name": "nowhere"}))
    create(objects, package(namespace, "loop-a", dependsOn=[{"name": "loop-b"}]))
    create(objects, package(namespace, "loop-b", dependsOn=[{"name": "loop-a"}]))
    create(objects, package(namespace, "web"))
    ctl = env.start()
    try:
        eventually(lambda: releases(core, namespace, "web") == [(1, "deployed")], 90, "web installed",
                   logs=ctl.text)
        lost = _condition(eventually(lambda: _ready_status(objects, namespace, "lost", 1), 30, "lost refused",
                                     logs=ctl.text), "Ready")
        assert (lost["status"], lost["reason"]) == ("False", "InvalidPackage")
        assert lost["message"].startswith(f"spec.chartRef: OCIRepository {namespace}/nowhere does not exist"), lost
        loop = _condition(eventually(lambda: _ready_status(objects, namespace, "loop-a", 1), 30, "cycle refused",
                                     logs=ctl.text), "Ready")
        assert loop["reason"] == "InvalidPackage" and "dependency cycle" in loop["message"], loop
        assert eventually(lambda: "InvalidPackage" in _reasons(core, namespace, "lost"), 10, "a Warning Event")
        assert releases(core, namespace, "lost") == []
        # Fixing the reference makes it install, and Ready follows.
        objects.patch_namespaced_custom_object(GROUP, VERSION, namespace, "packages", "lost",
                                               {"spec": {"chartRef": {"kind": "OCIRepository", "name": "web"}}})
        eventually(lambda: releases(core, namespace, "lost") == [(1, "deployed")], 90, "lost installed once fixed",
                   logs=ctl.text)
        fixed = eventually(lambda: _ready_status(objects, namespace, "lost", 2), 30, "Ready for the fix",
                           logs=ctl.text)
        assert _condition(fixed, "Ready")["status"] == "True"
    finally:
        assert ctl.stop() == 0, ctl.text()


def test_an_install_stalled_after_its_uninstall_remediations_stays_stalled_across_a_restart(
    controller_env: ControllerEnv,
) -> None:
    # The stored status ended with the revision the remediation uninstalled and was dropped on load: the restarted
    # controller wrote an empty status on the Package, then installed (and remediated) twice more.
    env = controller_env
    objects, core, namespace = env.objects, env.core, env.namespace
    env.flaky_source()
    create(objects, package(namespace, "bad", timeout="20s", values={"fail": True},  # an object name the API refuses
                            install={"remediation": {"retries": 1, "remediateLastFailure": True}}))

    def stalled() -> dict[str, Any] | None:
        status = (get_package(objects, namespace, "bad") or {}).get("status") or {}
        found = [c for c in status.get("conditions", []) if c["type"] == "Stalled" and c["status"] == "True"]
        return status if found else None

    ctl = env.start()
    try:
        eventually(stalled, 90, "bad stalled", logs=ctl.text)
    finally:
        assert ctl.stop() == 0, ctl.text()
    assert _reasons(core, namespace, "bad").count("InstallStarted") == 2
    ctl = env.start(name="again")
    try:
        # Its first pass ended, no other due: no install (the retries are spent).
        eventually(lambda: (passes_ended(ctl) or 0) >= 1, 60, "the restarted controller's first pass", logs=ctl.text)
        status = stalled()
        assert status is not None, get_package(objects, namespace, "bad")
        assert (status["installFailures"], status["lastAttemptedReleaseAction"]) == (2, "install"), status
        assert _condition(status, "Stalled")["reason"] == "RetriesExceeded", status
        assert _reasons(core, namespace, "bad").count("InstallStarted") == 2, ctl.text()
    finally:
        assert ctl.stop() == 0, ctl.text()


def test_deleting_a_package_uninstalls_its_release_with_its_uninstall_options(
    controller_env: ControllerEnv,
) -> None:
    env = controller_env
    objects, core, _, namespace = env.objects, env.core, env.coordination, env.namespace
    env.web_source()
    create(objects, package(namespace, "kept", uninstall={"keepHistory": True}))
    create(objects, package(namespace, "gone"))
    ctl = env.start()
    try:
        for name in ("kept", "gone"):
            def installed(n: str = name) -> bool:
                return releases(core, namespace, n) == [(1, "deployed")]

            def finalizers(n: str = name) -> list[str] | None:
                found: list[str] | None = (get_package(objects, namespace, n) or {}).get("metadata", {}).get(
                    "finalizers")
                return found

            def deleted(n: str = name) -> bool:
                return get_package(objects, namespace, n) is None

            eventually(installed, 90, f"{name} installed", logs=ctl.text)
            assert eventually(finalizers, 10, "the finalizer", logs=ctl.text) == ["helmdeck.dev/finalizer"]
            objects.delete_namespaced_custom_object(GROUP, VERSION, namespace, "packages", name)
            eventually(deleted, 60, f"{name} deleted", logs=ctl.text)
        assert releases(core, namespace, "kept") == [(1, "uninstalled")]  # spec.uninstall.keepHistory
        assert releases(core, namespace, "gone") == []
        def logged() -> str | None:
            said = ctl.text()
            return said if all(f"{n}: orphan info: its Package object was deleted; the finalizer uninstalls the "
                               "release" in said for n in ("kept", "gone")) else None

        said = eventually(logged, 10, "each deletion logged as such", logs=ctl.text)
        assert "package file" not in said and "--prune" not in said, said
    finally:
        assert ctl.stop() == 0, ctl.text()


def _annotate(objects: client.CustomObjectsApi, namespace: str, name: str, **annotations: str) -> None:
    objects.patch_namespaced_custom_object(GROUP, VERSION, namespace, "packages", name,
                                           {"metadata": {"annotations": annotations}})


def _acknowledged(objects: client.CustomObjectsApi, namespace: str, name: str, field: str, value: str) -> bool:
    return ((get_package(objects, namespace, name) or {}).get("status") or {}).get(field) == value


def test_each_request_annotation_is_handled_once_and_acknowledged(
    controller_env: ControllerEnv,
) -> None:
    env = controller_env
    objects, core, _, namespace = env.objects, env.core, env.coordination, env.namespace
    env.web_source()
    create(objects, package(namespace, "web"))
    create(objects, package(namespace, "broken", values={"replicas": "many"}))  # the API server refuses it
    ctl = env.start()
    try:
        eventually(lambda: releases(core, namespace, "web") == [(1, "deployed")], 90, "web installed",
                   logs=ctl.text)
        # reconcile now (helmdeck's and Flux's annotation): a pass, in sync, so no revision; acknowledged.
        _annotate(objects, namespace, "web", **{"reconcile.fluxcd.io/requestedAt": "t1"})
        eventually(lambda: _acknowledged(objects, namespace, "web", "lastHandledReconcileAt", "t1"), 30,
                   "requestedAt acknowledged", logs=ctl.text)
        # force: an upgrade although in sync, exactly one.
        _annotate(objects, namespace, "web", **{"reconcile.helmdeck.dev/forceAt": "t2",
                                               "reconcile.helmdeck.dev/requestedAt": "t2"})
        eventually(lambda: _acknowledged(objects, namespace, "web", "lastHandledForceAt", "t2"), 60,
                   "forceAt acknowledged", logs=ctl.text)
        assert releases(core, namespace, "web") == [(1, "superseded"), (2, "deployed")]
        _annotate(objects, namespace, "web", other="touched")  # the same request value again: nothing
        time.sleep(4)
        assert releases(core, namespace, "web") == [(1, "superseded"), (2, "deployed")]

        # reset: a package stalled on its failures is attempted exactly once more.
        eventually(lambda: ((get_package(objects, namespace, "broken") or {}).get("status") or {}).get("failures"),
                   60, "broken failed", logs=ctl.text)
        before = releases(core, namespace, "broken")
        time.sleep(4)
        assert releases(core, namespace, "broken") == before  # stalled: no retries
        _annotate(objects, namespace, "broken", **{"reconcile.helmdeck.dev/resetAt": "t3",
                                                  "reconcile.helmdeck.dev/requestedAt": "t3"})
        eventually(lambda: _acknowledged(objects, namespace, "broken", "lastHandledResetAt", "t3"), 60,
                   "resetAt acknowledged", logs=ctl.text)
        after = releases(core, namespace, "broken")
        assert len(after) == len(before) + 1, (before, after)
        time.sleep(4)
        assert releases(core, namespace, "broken") == after
    finally:
        assert ctl.stop() == 0, ctl.text()
    # A restarted controller does not handle them again: the acknowledgements are in status.
    ctl = env.start(name="again")
    try:
        eventually(lambda: (passes_ended(ctl) or 0) >= 2, 60, "the restarted controller's first passes",
                   logs=ctl.text)
        assert releases(core, namespace, "web") == [(1, "superseded"), (2, "deployed")]
        assert releases(core, namespace, "broken") == after
    finally:
        assert ctl.stop() == 0, ctl.text()


def test_sigterm_during_an_upgrade_that_waits_leaves_nothing_pending(
    controller_env: ControllerEnv,
) -> None:
    env = controller_env
    objects, core, coordination, namespace = env.objects, env.core, env.coordination, env.namespace
    env.flaky_source()
    create(objects, package(namespace, "flaky", timeout="5m"))
    ctl = env.start("--stop-deadline", "3")
    try:
        eventually(lambda: releases(core, namespace, "flaky") == [(1, "deployed")], 90, "flaky installed",
                   logs=ctl.text)
        objects.patch_namespaced_custom_object(GROUP, VERSION, namespace, "packages", "flaky",
                                               {"spec": {"values": {"hang": True}}})  # --wait never ends
        eventually(lambda: (2, "pending-upgrade") in releases(core, namespace, "flaky"), 60, "upgrade waiting",
                   logs=ctl.text)
        began = time.monotonic()
        code = ctl.stop(signal.SIGTERM, timeout=60)
        took = time.monotonic() - began
    finally:
        ctl.stop(signal.SIGKILL)
    assert code == 1, ctl.text()  # a running action had to be cancelled
    assert took < 3 + 20, took  # the deadline, then helm's stop grace and the unlock
    stored = releases(core, namespace, "flaky")
    assert not [s for _, s in stored if s.startswith("pending-")], stored
    assert stored[-1] == (2, "failed"), stored
    assert lease_holder(coordination, namespace) == ""  # given up, not left to expire
    # The engine's status kept revision 2 as its own failed upgrade: the next controller does not take it
    # for a change made outside helmdeck.
    data = core.read_namespaced_config_map(object_name("flaky"), namespace).data
    assert data is not None
    kept = EngineStatus.from_json(data[DATA_KEY])
    assert [(s.version, s.status) for s in kept.history][:2] == [(2, "failed"), (1, "deployed")], kept
    assert kept.last is not None and "cancelled as helmdeck stopped" in kept.last.message, kept.last
    # So does the Package object, written before the controller gave the Lease up: it said Ready=True
    # InstallSucceeded with revision 1 on top until another controller's first pass.
    status = (get_package(objects, namespace, "flaky") or {}).get("status") or {}
    released_ = _condition(status, "Released")
    assert (released_["status"], released_["reason"]) == ("False", "UpgradeFailed"), status
    assert "cancelled as helmdeck stopped" in released_["message"], released_
    assert _condition(status, "Ready")["status"] == "False", status
    assert [(h["version"], h["status"]) for h in status["history"]][:2] == [(2, "failed"), (1, "deployed")], status
    assert (status["lastAttemptedReleaseAction"], status["upgradeFailures"], status["failures"]) == (
        "upgrade", 1, 1), status
    assert "UpgradeFailed" in _reasons(core, namespace, "flaky")  # the cancel's Event too


def test_rollback_cancel_unlock_and_monitor_requests(
    controller_env: ControllerEnv,
) -> None:
    env = controller_env
    objects, core, _, namespace = env.objects, env.core, env.coordination, env.namespace
    env.flaky_source()
    create(objects, package(namespace, "flaky", timeout="5m"))
    ctl = env.start()
    try:
        eventually(lambda: releases(core, namespace, "flaky") == [(1, "deployed")], 90, "installed", logs=ctl.text)
        _annotate(objects, namespace, "flaky", **{"reconcile.helmdeck.dev/forceAt": "f1",
                                                 "reconcile.helmdeck.dev/requestedAt": "f1"})
        eventually(lambda: _acknowledged(objects, namespace, "flaky", "lastHandledForceAt", "f1"), 60, "forced",
                   logs=ctl.text)
        # Roll back to revision 1: revision 3, and the package is held (no pass undoes it).
        _annotate(objects, namespace, "flaky", **{"rollback.helmdeck.dev/requestedAt": "r1",
                                                  "rollback.helmdeck.dev/revision": "1"})
        eventually(lambda: _acknowledged(objects, namespace, "flaky", "lastHandledRollbackAt", "r1"), 60,
                   "rollback acknowledged", logs=ctl.text)
        assert releases(core, namespace, "flaky") == [(1, "superseded"), (2, "superseded"), (3, "deployed")]
        for request, ack in (("monitor.helmdeck.dev/pauseAt", "lastHandledPauseAt"),
                             ("monitor.helmdeck.dev/resumeAt", "lastHandledResumeAt")):
            _annotate(objects, namespace, "flaky", **{request: "m1"})

            def handled(field: str = ack) -> bool:
                return _acknowledged(objects, namespace, "flaky", field, "m1")

            eventually(handled, 30, ack, logs=ctl.text)
        time.sleep(3)
        assert releases(core, namespace, "flaky")[-1] == (3, "deployed")
        # An upgrade hanging on --wait, cancelled by request: its pending revision is unlocked at once.
        objects.patch_namespaced_custom_object(GROUP, VERSION, namespace, "packages", "flaky",
                                               {"spec": {"values": {"hang": True}}})
        _annotate(objects, namespace, "flaky", **{"reconcile.helmdeck.dev/forceAt": "f2",
                                                 "reconcile.helmdeck.dev/requestedAt": "f2"})
        eventually(lambda: (4, "pending-upgrade") in releases(core, namespace, "flaky"), 60, "upgrade waiting",
                   logs=ctl.text)
        _annotate(objects, namespace, "flaky", **{"cancel.helmdeck.dev/requestedAt": "c1"})
        eventually(lambda: _acknowledged(objects, namespace, "flaky", "lastHandledCancelAt", "c1"), 30,
                   "cancel acknowledged", logs=ctl.text)
        eventually(lambda: (4, "failed") in releases(core, namespace, "flaky"), 20, "unlocked by the cancel",
                   logs=ctl.text)
        # Revision 4 is the engine's own failed upgrade (not "changed outside helmdeck"), and the Events say what
        # stays live and how to roll back by request.
        def recorded() -> dict[str, Any] | None:
            status: dict[str, Any] = (get_package(objects, namespace, "flaky") or {}).get("status") or {}
            return status if (status.get("history") or [{}])[0].get("version") == 4 else None

        status = eventually(recorded, 30, "revision 4 in status.history", logs=ctl.text)
        assert status["history"][0]["status"] == "failed" and status["upgradeFailures"] == 1, status
        released = _condition(status, "Released")
        assert released["reason"] == "UpgradeFailed" and "cancelled by request" in released["message"], status
        cancelled = eventually(lambda: _messages(core, namespace, "flaky", "UpgradeCancelled"), 30,
                               "the UpgradeCancelled Event", logs=ctl.text)
        assert "The objects keep what revision 4 applied" in cancelled[-1], cancelled
        assert 'rollback.helmdeck.dev/revision: "3"' in cancelled[-1], cancelled
        assert "Unmanaged" not in json.dumps(status) and "outside helmdeck" not in json.dumps(status), status
        # An upgrade left pending by a killed controller, unlocked by request on the next one.
        _annotate(objects, namespace, "flaky", **{"reconcile.helmdeck.dev/forceAt": "f3",
                                                 "reconcile.helmdeck.dev/requestedAt": "f3"})
        eventually(lambda: (5, "pending-upgrade") in releases(core, namespace, "flaky"), 60, "upgrade waiting",
                   logs=ctl.text)
        ctl.stop(signal.SIGKILL)
        ctl = env.start(name="next")
        eventually(lambda: "controller started" in ctl.text(), 30, "the next controller", logs=ctl.text)
        assert (5, "pending-upgrade") in releases(core, namespace, "flaky")  # not stale before its timeout
        _annotate(objects, namespace, "flaky", **{"unlock.helmdeck.dev/requestedAt": "u1"})
        eventually(lambda: _acknowledged(objects, namespace, "flaky", "lastHandledUnlockAt", "u1"), 60,
                   "unlock acknowledged", logs=ctl.text)
        assert (5, "failed") in releases(core, namespace, "flaky")
    finally:
        ctl.stop(signal.SIGKILL)


def test_a_helm_repository_chart_with_values_from_a_config_map_and_a_secret(
    controller_env: ControllerEnv, kube_target: KubeTarget,
) -> None:
    """The two parts only OCIRepository packages had not shown in controller mode: a chart from an HTTP Helm
    repository (a HelmRepository object) and values from a ConfigMap and a Secret (spec.valuesFrom), whose
    change upgrades once; the Secret's value never reaches the log."""
    env = controller_env
    objects, core, namespace, helm, tmp_path = env.objects, env.core, env.namespace, env.helm, env.work
    secret_tag = "1.26-s3cr3t-tag"
    repo = ChartRepoServer(tmp_path / "repo")
    try:
        publish_http(helm.binary, package_chart(helm.binary, tmp_path, "0.1.0", marker="http"), repo)
        create(objects, {"apiVersion": f"{GROUP}/{VERSION}", "kind": "HelmRepository",
                         "metadata": {"name": "charts", "namespace": namespace},
                         "spec": {"url": repo.url, "interval": "1m"}})
        config_map: Any = {"metadata": {"name": "web-values"}, "data": {"values.yaml": "replicas: 3\n"}}
        secret: Any = {"metadata": {"name": "web-secret"}, "stringData": {"tag": secret_tag}}
        core.create_namespaced_config_map(namespace, config_map)
        core.create_namespaced_secret(namespace, secret)
        create(objects, package_doc(
            "web", namespace,
            chart={"spec": {"chart": "web", "version": "0.1.x",
                            "sourceRef": {"kind": "HelmRepository", "name": "charts"}}},
            valuesFrom=[{"kind": "ConfigMap", "name": "web-values"},
                        {"kind": "Secret", "name": "web-secret", "valuesKey": "tag", "targetPath": "image.tag"}],
            timeout="1m"))
        apps = client.AppsV1Api(api_client(kube_target))

        def deployment() -> tuple[int, str] | None:
            try:
                found: Any = apps.read_namespaced_deployment("web", namespace)
            except client.ApiException:
                return None
            return found.spec.replicas, found.spec.template.spec.containers[0].image

        ctl = env.start()
        try:
            eventually(lambda: releases(core, namespace, "web") == [(1, "deployed")], 90, "installed from the "
                       "HelmRepository", logs=ctl.text)
            assert deployment() == (3, f"nginx:{secret_tag}")
            status = eventually(lambda: _ready_status(objects, namespace, "web", 1), 30, "Ready", logs=ctl.text)
            assert status["lastAttemptedRevision"] == "0.1.0" and status["history"][0]["chart"] == "web@0.1.0"
            core.patch_namespaced_config_map("web-values", namespace, {"data": {"values.yaml": "replicas: 4\n"}})
            eventually(lambda: deployment() == (4, f"nginx:{secret_tag}"), 60, "upgraded by the ConfigMap's change",
                       logs=ctl.text)
            time.sleep(3)
            assert releases(core, namespace, "web") == [(1, "superseded"), (2, "deployed")]  # once
            assert secret_tag not in ctl.text()
        finally:
            assert ctl.stop() == 0, ctl.text()
    finally:
        repo.stop()


def test_the_finalizer_is_written_on_an_object_changed_since_it_was_read(
    apis: tuple[client.CustomObjectsApi, client.CoreV1Api, client.CoordinationV1Api], namespace: str,
    kube_target: KubeTarget,
) -> None:
    """A status write between the read and the finalizer's write (a conflict) must not leave the finalizer in
    place: it is written on the object as it is now (no later change may come to trigger another look)."""
    objects, _, _ = apis
    stale = create(objects, {**package(namespace, "stale"),
                             "metadata": {"name": "stale", "namespace": namespace, "finalizers": [FINALIZER]}})
    objects.patch_namespaced_custom_object(GROUP, VERSION, namespace, "packages", "stale",
                                           {"metadata": {"labels": {"changed": "since"}}})  # a newer resourceVersion
    api = api_client(kube_target)
    spawned: list[Any] = []
    watched = PackageObjects(api, [namespace])
    watched.load()  # the newer version, as the watch holds it
    finalizers = Finalizers(api, watched, uninstall=_never, record=_never, acting=lambda: True,
                            spawn=spawned.append)
    origin = object_origin("packages", namespace, "stale")
    asyncio.run(finalizers._patch(origin, stale, lambda found: [f for f in found if f != FINALIZER]))
    now = get_package(objects, namespace, "stale") or {}
    assert now["metadata"].get("finalizers") in (None, []) and now["metadata"]["labels"] == {"changed": "since"}


async def _never(*_args: Any) -> Any:
    raise AssertionError("not called")
