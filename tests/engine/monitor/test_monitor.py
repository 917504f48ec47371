"""Monitors: readiness rules and manifest parsing (pure), shared watches on the real cluster."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import yaml
from kubernetes import client

from engine.kube.client import KubeTarget, api_client
from engine.kube.discovery import Discovery, ResourceType
from engine.monitor.manifest import ManifestLimitError, ManifestObject, load_document, manifest_objects, split_manifest
from engine.monitor.monitor import UNSERVED, ExpectedObject, ReleaseMonitor, expected_objects
from engine.monitor.readiness import PRESENT, Readiness, assess, needs_full_object
from engine.monitor.status import MonitorStatus, ResourceStatus
from engine.monitor.watch import WatchHub


def meta(generation: int = 1) -> dict[str, Any]:
    return {"name": "x", "generation": generation}


@pytest.mark.parametrize(("group", "kind", "obj", "want"), [
    ("apps", "Deployment", {"metadata": meta(2), "spec": {"replicas": 2},
                            "status": {"observedGeneration": 2, "updatedReplicas": 2, "availableReplicas": 2}},
     Readiness(True, "2/2 available")),
    ("apps", "Deployment", {"metadata": meta(2), "spec": {"replicas": 2},
                            "status": {"observedGeneration": 2, "updatedReplicas": 2, "availableReplicas": 1}},
     Readiness(False, "1/2 available")),
    ("apps", "Deployment", {"metadata": meta(2), "spec": {"replicas": 3},
                            "status": {"observedGeneration": 2, "updatedReplicas": 1, "availableReplicas": 3}},
     Readiness(False, "1/3 updated")),
    ("apps", "Deployment", {"metadata": meta(3), "spec": {},
                            "status": {"observedGeneration": 2, "updatedReplicas": 1, "availableReplicas": 1}},
     Readiness(False, "rollout not observed yet")),
    ("apps", "Deployment", {"metadata": meta(), "spec": {}, "status": {
        "observedGeneration": 1, "conditions": [{"type": "Progressing", "status": "False",
                                                 "reason": "ProgressDeadlineExceeded"}]}},
     Readiness(False, "progress deadline exceeded")),
    ("apps", "StatefulSet", {"metadata": meta(), "spec": {"replicas": 3},
                             "status": {"observedGeneration": 1, "readyReplicas": 3}}, Readiness(True, "3/3 ready")),
    ("apps", "StatefulSet", {"metadata": meta(), "spec": {"replicas": 3},
                             "status": {"observedGeneration": 1, "readyReplicas": 1}}, Readiness(False, "1/3 ready")),
    ("apps", "DaemonSet", {"metadata": meta(), "status": {
        "observedGeneration": 1, "desiredNumberScheduled": 2, "currentNumberScheduled": 1}},
     Readiness(False, "1/2 scheduled")),
    ("apps", "DaemonSet", {"metadata": meta(), "status": {
        "observedGeneration": 1, "desiredNumberScheduled": 2, "currentNumberScheduled": 2,
        "updatedNumberScheduled": 2, "numberReady": 2}}, Readiness(True, "2/2 ready")),
    ("batch", "Job", {"status": {"conditions": [{"type": "Complete", "status": "True"}]}},
     Readiness(True, "complete")),
    ("batch", "Job", {"status": {"conditions": [{"type": "Failed", "status": "True",
                                                 "reason": "BackoffLimitExceeded"}]}},
     Readiness(False, "Job failed: BackoffLimitExceeded")),
    ("batch", "Job", {"status": {"active": 1}}, Readiness(False, "running (1 active)")),
    ("", "Pod", {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}},
     Readiness(True, "ready")),
    ("", "Pod", {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]}},
     Readiness(False, "running, not ready")),
    ("", "Pod", {"status": {"phase": "Succeeded"}}, Readiness(True, "succeeded")),
    ("", "Pod", {}, Readiness(False, "Pending")),
    ("", "PersistentVolumeClaim", {"status": {"phase": "Bound"}}, Readiness(True, "bound")),
    ("", "PersistentVolumeClaim", {"status": {"phase": "Pending"}}, Readiness(False, "pending")),
    ("apiextensions.k8s.io", "CustomResourceDefinition",
     {"status": {"conditions": [{"type": "Established", "status": "True"}]}}, Readiness(True, "established")),
    ("apiextensions.k8s.io", "CustomResourceDefinition", {"status": {}}, Readiness(False, "not established")),
    ("", "ConfigMap", {}, PRESENT),
    ("example.com", "Deployment", {"status": {}}, PRESENT),  # same kind name, other group: presence only
])
def test_readiness_rules(group: str, kind: str, obj: dict[str, Any], want: Readiness) -> None:
    assert assess(group, kind, obj) == want


def test_only_status_kinds_need_whole_objects() -> None:
    assert needs_full_object("apps", "Deployment") and needs_full_object("", "Pod")
    assert not needs_full_object("", "ConfigMap") and not needs_full_object("example.com", "Deployment")


def test_monitor_status_summary() -> None:
    gone = ResourceStatus("v1", "ConfigMap", "ns", "a", False, False, "absent")
    here = ResourceStatus("v1", "Namespace", "", "b", True, True, "present")
    assert MonitorStatus("active", 0, (gone, here)).absent == ("ConfigMap/ns/a",)
    assert MonitorStatus("active", 0, (here,)).ready is True
    assert MonitorStatus("paused", 2).summary() == "paused ×2"


def test_manifest_objects_expand_lists_and_skip_the_rest() -> None:
    text = (
        "---\n# Source: x\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n"
        "---\napiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Secret, metadata: {name: s, namespace: o}}\n"
        "- {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}\n"
        "---\napiVersion: v1\nkind: Pod\nmetadata:\n  generateName: p-\n"
        "---\n- not an object\n"
    )
    assert manifest_objects(text) == [
        ManifestObject("v1", "ConfigMap", "", "a"), ManifestObject("v1", "Secret", "o", "s"),
    ]


def _alias_bomb() -> str:
    lines = ["apiVersion: v1", "kind: ConfigMap", "metadata: {name: bomb}", "a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    return "\n".join(lines) + "\n"


def test_manifest_alias_bombs_and_deep_nesting_are_refused() -> None:
    deep = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: deep}\ndata: " + "[" * 10_000 + "]" * 10_000 + "\n"
    good = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ok}\n---\n"
    started = time.monotonic()
    with pytest.raises(ManifestLimitError, match=r"rendered manifest:\d+: aliases expand past 1000000 nodes"):
        manifest_objects(good + _alias_bomb())
    with pytest.raises(ManifestLimitError, match=r"rendered manifest:\d+: .*nesting"):
        manifest_objects(good + deep)
    assert time.monotonic() - started < 10
    # A yaml.YAMLError: the diff and the app skip or report it as any bad document.
    assert issubclass(ManifestLimitError, yaml.YAMLError)
    # Deep but real: a CRD schema nests 100 levels of properties and parses as yaml.safe_load does.
    schema = "x: " + "{properties: " * 90 + "{}" + "}" * 90
    text = good + "apiVersion: v1\nkind: CustomResourceDefinition\nmetadata: {name: crd}\n" + schema + "\n"
    assert [load_document(t) for t in split_manifest(text)] == list(yaml.safe_load_all(text))


# -- against the cluster -------------------------------------------------------------------------------

MANIFEST = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: one}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: two, namespace: NS}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: dep}
---
apiVersion: v1
kind: Namespace
metadata: {name: NS}
---
apiVersion: example.com/v1
kind: Widget
metadata: {name: w}
"""


@pytest.mark.cluster
def test_expected_objects_resolve_scope_through_discovery(kube_target: KubeTarget, namespace: str) -> None:
    objs = expected_objects(MANIFEST.replace("NS", "other"), namespace, Discovery(api_client(kube_target)))
    got = [(o.kind, o.namespace, o.name, o.type.resource if o.type else None) for o in objs]
    assert got == [
        ("ConfigMap", namespace, "one", "configmaps"),   # no namespace: the release namespace
        ("ConfigMap", "other", "two", "configmaps"),
        ("Deployment", namespace, "dep", "deployments"),
        ("Namespace", "", "other", "namespaces"),         # cluster-scoped: none
        ("Widget", "", "w", None),                        # not served
    ]


@pytest.mark.cluster
def test_shared_watches_report_deletion_and_stop_cleanly(
    kube_target: KubeTarget, core_api: client.CoreV1Api, namespace: str,
) -> None:
    api = api_client(kube_target)
    for name in ("one", "two"):
        core_api.create_namespaced_config_map(namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name)))
    discovery = Discovery(api)
    hub = WatchHub(api)
    before = {t.name for t in threading.enumerate()}
    changes: dict[str, list[float]] = {"a": [], "b": []}
    manifest_a = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: one}\n---\n" \
                 "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n"
    manifest_b = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: two}\n---\n" \
                 "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: dep}\n"
    mon_a = ReleaseMonitor((namespace, "a"), expected_objects(manifest_a, namespace, discovery), hub,
                           lambda m: changes["a"].append(time.monotonic()))
    mon_b = ReleaseMonitor((namespace, "b"), expected_objects(manifest_b, namespace, discovery), hub,
                           lambda m: changes["b"].append(time.monotonic()))
    try:
        mon_a.start()
        mon_b.start()
        assert mon_a.wait_synced(10) and mon_b.wait_synced(10)
        # Both releases' ConfigMaps come from ONE shared metadata-only watch; Deployments have their own.
        keys = hub.keys()
        assert [(k.type.resource, k.namespace) for k in keys] == [("configmaps", namespace),
                                                                  ("deployments", namespace)]
        assert [getattr(hub.watch(k), "full", None) for k in keys] == [False, True]
        assert [mon_a.resources()[1].reason, mon_a.resources()[1].present] == [UNSERVED, False]
        assert [r.ref for r in mon_b.absent()] == [f"Deployment/{namespace}/dep"]
        seen_a = len(changes["a"])
        core_api.delete_namespaced_config_map("one", namespace)
        start = time.monotonic()
        while len(changes["a"]) == seen_a and time.monotonic() - start < 2:
            time.sleep(0.01)
        assert len(changes["a"]) > seen_a and changes["a"][-1] - start < 2.0
        assert f"ConfigMap/{namespace}/one" in [r.ref for r in mon_a.absent()]
        assert f"ConfigMap/{namespace}/two" not in [r.ref for r in mon_b.absent()]
        mon_a.close()
        assert len(hub.keys()) == 2  # b still needs the ConfigMap watch
        mon_b.close()
        assert hub.keys() == []
    finally:
        assert hub.stop(5)
    assert hub.threads_alive() == 0
    leftover = {t.name for t in threading.enumerate()} - before
    assert not [n for n in leftover if n.startswith("helmdeck-watch")]


@pytest.mark.cluster
def test_a_watch_that_cannot_list_fails_fast(kube_target: KubeTarget, namespace: str) -> None:
    hub = WatchHub(api_client(kube_target))
    bogus = ResourceType("example.com", "v1", "Widget", "widgets", True)  # the server answers 404
    mon = ReleaseMonitor((namespace, "r"), [ExpectedObject("example.com/v1", "Widget", namespace, "w", bogus)],
                         hub, lambda m: None)
    try:
        mon.start()
        start = time.monotonic()
        assert not mon.wait_synced(10) and time.monotonic() - start < 5
        (status,) = mon.resources()
        assert (status.present, status.ready) == (True, None) and status.reason.startswith("cannot watch: ")
        assert mon.absent() == ()  # unknown is not absent: no restore loop on a watch error
    finally:
        mon.close()
        assert hub.stop(5)


def test_a_monitor_problem_is_said_in_the_summary_the_overview_and_status() -> None:
    from engine.runtime.report import table
    from engine.runtime.state import ReleaseView
    from tui.format import monitor_text
    from tui.widgets.overview import overview_content

    unknown = ResourceStatus("v1", "ConfigMap", "ns", "a", True, None, "cannot watch: forbidden (403)")
    problem = 'cannot watch configmaps/ns: configmaps is forbidden: User "system:serviceaccount:ns:sa" (403)'
    mon = MonitorStatus("active", 0, (unknown,), problem)
    assert mon.summary() == "cannot watch" and mon.ready is None and mon.absent == ()
    assert monitor_text(mon) == ("! cannot watch", "bad")
    assert monitor_text(MonitorStatus("active", 0, (unknown,))) == ("● active", "ok")
    text = str(overview_content(ReleaseView("ns", "web", monitor=mon), [], 0.0))
    assert "! cannot watch" in text and problem in text
    row = {"namespace": "ns", "name": "web", "package": None, "revision": 1, "status": "deployed", "state": None,
           "ready": None, "maintenance": None, "suspended": False,
           "monitor": {"state": "active", "paused": 0, "absent": [], "problem": problem}}
    assert "cannot watch" in table([row])


def test_the_event_log_says_when_a_monitor_problem_starts_and_ends() -> None:
    from engine.runtime.ledger.book import ReleaseBook
    from engine.storage.observer import Observer

    book = ReleaseBook(Observer(None))
    key = ("ns", "web")
    fine = MonitorStatus("active", 0, ())
    bad = MonitorStatus("active", 0, (), "cannot watch configmaps/ns: forbidden (403)")
    for status in (fine, bad, bad, fine, fine):
        book.set_monitor(key, status)
    said = [(e.outcome, e.message) for e in book.events(key) if e.action == "monitor"]
    assert said == [("failed", "cannot watch configmaps/ns: forbidden (403): absent or unready objects go unnoticed"),
                    ("info", "the monitor watches every object again")]
