"""The observer's bookkeeping, fed fixed records through its offline path (no cluster)."""

from __future__ import annotations

import pytest

from engine.storage import UnsupportedDriverError, encode_payload
from engine.storage.codec import record_name
from engine.storage.observer import Observer, StorageChange
from engine.storage.records import ListedRevision, listed_revision
from tests.storage_records import release, secret, stored_in


def recorder(observer: Observer) -> list[StorageChange]:
    seen: list[StorageChange] = []
    observer.subscribe(seen.append)
    return seen


def test_indexes_revisions_per_release_and_ignores_replays() -> None:
    observer = Observer(None, driver="secret")
    seen = recorder(observer)
    observer.apply_object(secret(release(1, "superseded"), rv="1"))
    observer.apply_object(secret(release(2, "deployed"), rv="2"))
    observer.apply_object(secret(release(2, "deployed"), rv="2"))  # replay: no new event
    observer.apply_object({"metadata": {"name": "unrelated", "namespace": "demo"}, "type": "Opaque"})
    assert [(c.type, c.key.name) for c in seen] == [
        ("ADDED", "sh.helm.release.v1.web.v1"), ("ADDED", "sh.helm.release.v1.web.v2")]
    assert [o.version for o in observer.history("demo", "web")] == observer.revisions("demo", "web") == [2, 1]
    latest = observer.latest("demo", "web")
    assert latest is not None and latest.version == 2 and latest.resource_version == "2"
    assert list(observer.releases()) == [("demo", "web")]
    assert observer.load_release("demo", "web", 1)["info"]["status"] == "superseded"
    assert observer.chart_values("demo", "web", 2) == {"replicas": 1, "image": {"tag": "latest"}}
    with pytest.raises(KeyError):
        observer.load_release("demo", "web", 3)


def test_getters_return_copies() -> None:
    observer = Observer(None, driver="secret")
    observer.apply_object(secret(release(1), rv="1"))
    observer.observations().clear()
    observer.releases().clear()
    observer.history("demo", "web").clear()
    assert len(observer.observations()) == 1 and observer.latest("demo", "web") is not None


def test_unreadable_record_is_marked_and_the_observer_keeps_going() -> None:
    observer = Observer(None, driver="secret")
    seen = recorder(observer)
    observer.apply_object(secret(release(1, "superseded"), rv="1"))
    observer.apply_object(secret(release(2), rv="2", payload="H4sI%%%"))
    observer.apply_object(secret(release(1, name="api"), rv="3"))
    bad = seen[1]
    assert (bad.type, bad.observation) == ("ADDED", None)
    assert bad.unreadable is not None and bad.error == bad.unreadable.reason
    assert (bad.unreadable.release, bad.unreadable.revision, bad.unreadable.code) == ("web", 2, "bad-base64")
    # The rest is still observed; the bad revision is not mistaken for the latest.
    assert {k[1] for k in observer.releases()} == {"web", "api"}
    latest = observer.latest("demo", "web")
    assert latest is not None and latest.version == 1
    assert observer.unreadable() == [bad.unreadable]
    assert observer.unreadable_releases() == {("demo", "web"): bad.unreadable}
    assert list(observer.errors().values()) == [bad.unreadable.reason]

    # A newer readable revision: the release works again, the old bad record stays listed.
    observer.apply_object(secret(release(3), rv="4"))
    assert observer.unreadable_releases() == {} and len(observer.unreadable()) == 1
    # Repairing the record clears it.
    observer.apply_object(secret(release(2, "superseded"), rv="5"))
    assert observer.unreadable() == [] and observer.revisions("demo", "web") == [3, 2, 1]


def test_record_of_a_release_with_no_readable_revision_names_it_from_the_object() -> None:
    observer = Observer(None, driver="secret")
    obj = secret(release(1, name="ghost"), rv="1", payload=encode_payload({"name": "ghost", "version": 1}))
    observer.apply_object(obj)
    unreadable = observer.unreadable_releases()[("demo", "ghost")]
    assert unreadable.code == "bad-field" and "'info' is missing" in unreadable.reason
    assert observer.releases() == {}


def test_recreated_object_is_two_transitions() -> None:
    observer = Observer(None, driver="secret")
    seen = recorder(observer)
    observer.apply_object(secret(release(1), rv="1", uid="a"))
    observer.apply_object(secret(release(1, "failed"), rv="7", uid="b"))
    assert [c.type for c in seen] == ["ADDED", "DELETED", "ADDED"]


def test_storage_namespace_may_differ_from_the_release_namespace() -> None:
    observer = Observer(None, driver="secret")
    rel = release(1, namespace="apps")
    stored = secret(rel, rv="1")
    stored["metadata"]["namespace"] = "flux-system"
    observer.apply_object(stored)
    obs = observer.latest("apps", "web")
    assert obs is not None and (obs.namespace, obs.storage_namespace) == ("apps", "flux-system")
    # The same revision also stored in the release namespace: that record wins.
    local = secret(release(1, "failed", namespace="apps"), rv="2")
    observer.apply_object(local)
    obs = observer.latest("apps", "web")
    assert obs is not None and (obs.status, obs.storage_namespace) == ("failed", "apps")
    assert observer.load_release("apps", "web", 1)["info"]["status"] == "failed"


def test_records_of_one_release_in_two_storage_namespaces_are_two_histories() -> None:
    """A storage namespace change, as Flux's helm-controller makes it (internal/action/verify.go
    ``ReleaseTargetChanged``: uninstall from the recorded storage, keeping its history with
    ``uninstall.keepHistory``; install into the new one): helm's storage is per namespace (its driver's
    namespace), so each holds a history of its own. A reader asking by release sees one of them whole, the
    release namespace's unless its package declares another (``storage_of``), never revisions of both."""
    observer = Observer(None, driver="secret")
    for version, status in ((1, "superseded"), (2, "superseded"), (3, "uninstalled")):
        observer.apply_object(stored_in("flux-system", version, status))
    observer.apply_object(stored_in("apps", 1, "deployed"))
    latest = observer.latest("apps", "web")
    assert latest is not None and (latest.version, latest.status, latest.storage_namespace) == (1, "deployed", "apps")
    assert [(o.version, o.storage_namespace) for o in observer.history("apps", "web")] == [(1, "apps")]
    assert observer.revisions("apps", "web") == [1] and observer.releases() == {("apps", "web"): latest}
    assert observer.load_release("apps", "web", 1)["info"]["status"] == "deployed"
    declared = {("apps", "web"): "flux-system"}
    observer.set_storage_of(lambda namespace, name: declared.get((namespace, name)))
    assert [(o.version, o.status) for o in observer.history("apps", "web")] == \
        [(3, "uninstalled"), (2, "superseded"), (1, "superseded")]
    assert observer.load_release("apps", "web", 1)["info"]["status"] == "superseded"



def test_helm_driver_env_selects_the_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HELM_DRIVER", "configmap")
    observer = Observer(None)
    assert observer.driver == "configmap"
    observer.apply_object(secret(release(1), rv="1"))  # a Secret: not this driver's record
    cm = {"metadata": {"name": record_name("web", 1), "namespace": "demo", "resourceVersion": "2"},
          "data": {"release": encode_payload(release(1))}}
    observer.apply_object(cm)
    assert [k.name for k in observer.observations()] == ["sh.helm.release.v1.web.v1"]
    monkeypatch.setenv("HELM_DRIVER", "sql")
    with pytest.raises(UnsupportedDriverError):
        Observer(None)


def test_offline_observer_is_synced_at_start() -> None:
    observer = Observer(None, ["a", "b"], driver="secret")
    assert not observer.wait_synced(0)
    observer.start()
    assert observer.wait_synced(0) and observer.namespaces == ("a", "b") and observer.check_access() == []


def test_listed_revisions_come_from_helms_labels_alone() -> None:
    obj = secret(release(3, "pending-upgrade"), labels={"modifiedAt": "1764500000"})
    del obj["data"]  # as a metadata-only list returns it: no payload
    assert listed_revision(obj) == ListedRevision("demo", "web", 3, "pending-upgrade", 1764500000)
    for labels in ({"version": "x"}, {"version": ""}, {"version": "9" * 20}, {"name": ""}):
        broken = secret(release(1))
        broken["metadata"]["labels"].update(labels)
        assert listed_revision(broken) is None
    no_time = secret(release(1), labels={"modifiedAt": "soon"})
    assert listed_revision(no_time) == ListedRevision("demo", "web", 1, "deployed", 0)
