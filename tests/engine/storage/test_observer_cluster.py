"""The observer on the local control plane: live transitions, namespaces, big and corrupt records."""

from __future__ import annotations

import base64
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client

from engine.kube.client import KubeTarget, api_client
from engine.storage import encode_payload
from engine.storage.codec import MAX_PAYLOAD_BYTES
from engine.storage.observer import LabelsAhead, ListedRevision, Observer, StorageChange
from tests.storage_cluster import wait_for
from tests.storage_records import new_secret, release, sized_release

pytestmark = pytest.mark.cluster


@pytest.fixture
def second_namespace(core_api: client.CoreV1Api) -> Iterator[str]:
    name = f"t-second-{uuid.uuid4().hex[:6]}"
    core_api.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    yield name
    core_api.delete_namespace(name, propagation_policy="Background")


class Changes:
    """Collects observer callbacks; ``wait(n)`` blocks until ``n`` arrived."""

    def __init__(self, observer: Observer):
        self.items: list[StorageChange] = []
        self._cond = threading.Condition()
        observer.subscribe(self._add)

    def _add(self, change: StorageChange) -> None:
        with self._cond:
            self.items.append(change)
            self._cond.notify_all()

    def wait(self, n: int, timeout: float = 20) -> list[tuple[str, str]]:
        with self._cond:
            assert self._cond.wait_for(lambda: len(self.items) >= n, timeout), self.items
            return [(c.type, f"{c.key.namespace}/{c.key.name}") for c in self.items]


def test_live_transitions_in_the_watched_namespaces_only(
    kube_target: KubeTarget, core_api: client.CoreV1Api, namespace: str, second_namespace: str,
) -> None:
    observer = Observer(api_client(kube_target), [namespace], driver="secret", watch_timeout=1)
    changes = Changes(observer)
    observer.start()
    try:
        assert observer.wait_synced(20) and observer.problems() == {}
        core_api.create_namespaced_secret(second_namespace, new_secret(release(1, namespace=second_namespace)))
        core_api.create_namespaced_secret(namespace, new_secret(release(1, namespace=namespace)))
        core_api.patch_namespaced_secret("sh.helm.release.v1.web.v1", namespace, {
            "metadata": {"labels": {"status": "superseded"}},
            "data": new_secret(release(1, "superseded", namespace=namespace)).data})
        core_api.create_namespaced_secret(namespace, new_secret(release(2, namespace=namespace)))
        core_api.delete_namespaced_secret("sh.helm.release.v1.web.v2", namespace)
        ns = namespace
        assert changes.wait(4) == [
            ("ADDED", f"{ns}/sh.helm.release.v1.web.v1"), ("MODIFIED", f"{ns}/sh.helm.release.v1.web.v1"),
            ("ADDED", f"{ns}/sh.helm.release.v1.web.v2"), ("DELETED", f"{ns}/sh.helm.release.v1.web.v2")]
        assert changes.items[1].observation is not None and changes.items[1].observation.status == "superseded"
        assert list(observer.releases()) == [(ns, "web")]
        # Watch requests end every second here; each is resumed, not relisted, and repeats nothing.
        time.sleep(2.5)
        assert observer.relists == 1 and len(changes.items) == 4
    finally:
        observer.stop()


def test_big_and_corrupt_records(kube_target: KubeTarget, core_api: client.CoreV1Api, namespace: str) -> None:
    big = sized_release(MAX_PAYLOAD_BYTES - 1024, namespace=namespace, name="big")
    core_api.create_namespaced_secret(namespace, new_secret(big))
    bad = release(1, namespace=namespace, name="bad")
    junk = base64.b64encode(b"\x1f\x8b\x08junk").decode()
    core_api.create_namespaced_secret(namespace, new_secret(bad, payload=junk))
    observer = Observer(api_client(kube_target), [namespace], driver="secret")
    observer.start()
    try:
        assert observer.wait_synced(20)
        obs = observer.latest(namespace, "big")
        assert obs is not None and not hasattr(obs, "manifest")  # only its digest is held
        assert observer.manifest(namespace, "big", 1) == big["manifest"]
        assert observer.unreadable_releases()[(namespace, "bad")].code == "bad-gzip"
        core_api.create_namespaced_secret(namespace, new_secret(release(1, namespace=namespace, name="after")))
        wait_for(lambda: observer.latest(namespace, "after"), what="a record after the corrupt one")
        assert len(encode_payload(big)) > MAX_PAYLOAD_BYTES - 5 * 1024
    finally:
        observer.stop()


def test_labels_first_then_the_records_page_by_page(
    kube_target: KubeTarget, core_api: client.CoreV1Api, namespace: str,
) -> None:
    # Pages of 4; the labels of each release's newest revision come first, before any record is decoded.
    for i in range(5):
        for version in (1, 2):
            core_api.create_namespaced_secret(namespace, new_secret(release(
                version, "superseded" if version == 1 else "deployed", name=f"rel-{i}", namespace=namespace)))
    junk = base64.b64encode(b"\x1f\x8b\x08junk").decode()
    core_api.create_namespaced_secret(namespace, new_secret(release(1, namespace=namespace, name="bad"), junk))
    paged = Observer(api_client(kube_target), [namespace], driver="secret", page_size=4)
    listed: list[tuple[str, int, str, int]] = []
    decoded: list[StorageChange] = []
    paged.on_listed(lambda found: listed.extend((r.name, r.version, r.status, len(decoded)) for r in found))
    paged.subscribe(decoded.append)
    whole = Observer(api_client(kube_target), [namespace], driver="secret")
    paged.start()
    whole.start()
    try:
        assert paged.wait_synced(20) and whole.wait_synced(20)
        # superseded revisions are not listed: each release's newest is never one
        assert sorted(r[:3] for r in listed) == sorted([(f"rel-{i}", 2, "deployed") for i in range(5)]
                                                       + [("bad", 1, "deployed")])
        assert {r[3] for r in listed} == {0}  # every label before the first decoded record
        assert paged.observations() == whole.observations() and len(paged.observations()) == 10
        assert paged.unreadable_releases()[(namespace, "bad")].code == "bad-gzip"
        assert paged.relists == 1
    finally:
        paged.stop()
        whole.stop()


def test_labels_listed_ahead_are_handed_on_at_start_without_listing_again(
    kube_target: KubeTarget, core_api: client.CoreV1Api, namespace: str,
) -> None:
    # The app lists storage's labels as soon as its kubeconfig is read, before the engine (and its observer) is
    # built (LabelsAhead); start() hands those pages on. A release stored after that list is not in them (no
    # second labels list), but the records list that follows holds it.
    for name in ("a", "b"):
        core_api.create_namespaced_secret(namespace, new_secret(release(1, name=name, namespace=namespace)))
    ahead = LabelsAhead(api_client(kube_target), [namespace], driver="secret")
    wait_for(lambda: not any(t.name.startswith("helm-storage-labels-") for t in threading.enumerate()) or None,
             what="the labels list ahead done")
    core_api.create_namespaced_secret(namespace, new_secret(release(1, name="later", namespace=namespace)))
    observer = Observer(api_client(kube_target), [namespace], driver="secret", ahead=ahead)
    listed: list[str] = []
    observer.on_listed(lambda found: listed.extend(r.name for r in found))
    observer.start()
    try:
        assert observer.wait_synced(20)
        assert sorted(listed) == ["a", "b"]
        assert sorted(name for _, name in observer.releases()) == ["a", "b", "later"]
    finally:
        observer.stop()


def test_the_first_rows_records_listed_ahead_are_decoded_before_the_labels_are_handed_on(
    kube_target: KubeTarget, core_api: client.CoreV1Api, namespace: str,
) -> None:
    # Issue 36, goal 1: the app names the releases its first screen shows of those listed (LabelsAhead's first);
    # their records are listed next and decoded before the labels are handed on, so the views made from the
    # labels show them (the first screen needs no second round). The others wait for the full list.
    for name in ("a", "b", "c"):
        core_api.create_namespaced_secret(namespace, new_secret(release(1, name=name, namespace=namespace)))
    core_api.create_namespaced_secret(namespace, new_secret(release(2, name="b", namespace=namespace)))
    asked: list[list[tuple[str, str]]] = []

    def first(keys: list[tuple[str, str]]) -> list[tuple[str, str]]:
        asked.append(sorted(keys))
        return sorted(keys)[:2]

    ahead = LabelsAhead(api_client(kube_target), [namespace], driver="secret", first=first)
    wait_for(lambda: not any(t.name.startswith("helm-storage-labels-") for t in threading.enumerate()) or None,
             what="the labels list ahead done")  # as the app's imports take longer than it
    observer = Observer(api_client(kube_target), [namespace], driver="secret", ahead=ahead)
    held: list[dict[str, int | None]] = []

    def on_listed(found: list[ListedRevision]) -> None:
        held.append({r.name: (lambda o: o.version if o else None)(observer.latest(namespace, r.name)) for r in found})
    observer.on_listed(on_listed)
    observer.start()
    try:
        assert observer.wait_synced(20)
        assert asked == [[(namespace, "a"), (namespace, "b"), (namespace, "c")]]  # each release once, newest
        assert held == [{"a": 1, "b": 2, "c": None}]
        assert sorted(name for _, name in observer.releases()) == ["a", "b", "c"]
    finally:
        observer.stop()


def test_labels_listed_ahead_go_on_without_waiting_for_the_first_rows_records(
    kube_target: KubeTarget, core_api: client.CoreV1Api, namespace: str,
) -> None:
    # At 10,000 releases the labels come late: waiting for the first rows' records too put that list on the first
    # frame's path. The labels go on at once; the records, read ahead, are taken before the labels' end (the rows
    # drawn are read after it), not left to the full list.
    for name in ("a", "b"):
        core_api.create_namespaced_secret(namespace, new_secret(release(1, name=name, namespace=namespace)))
    handed_on = threading.Event()
    seen: list[bool] = []

    def first(keys: list[tuple[str, str]]) -> list[tuple[str, str]]:
        seen.append(handed_on.wait(10))  # the records list waits until the labels were handed on
        return [(namespace, "a")]

    ahead = LabelsAhead(api_client(kube_target), [namespace], driver="secret", first=first)
    observer = Observer(api_client(kube_target), [namespace], driver="secret", ahead=ahead)
    observer.on_listed(lambda _found: handed_on.set())
    at_labels_end: list[int | None] = []
    observer.on_labels_done(lambda: at_labels_end.extend(
        (o.version if o else None) for o in (observer.latest(namespace, n) for n in ("a", "b"))))
    observer.start()
    try:
        assert observer.wait_synced(20)
        assert seen == [True]
        assert at_labels_end == [1, None]  # a's record read ahead; b's with the full list, after
    finally:
        observer.stop()


def test_a_labels_list_ahead_that_fails_leaves_the_rows_to_the_full_list(
    kube_target: KubeTarget, core_api: client.CoreV1Api, namespace: str,
) -> None:
    # The list ahead failed (here: nothing answers where it asked; a server refusing the metadata-only list
    # alike): no labels are handed on, the first rows' records are not read ahead, and the full list that
    # follows reads every record, as without the list ahead.
    core_api.create_namespaced_secret(namespace, new_secret(release(1, name="a", namespace=namespace)))
    nowhere = client.ApiClient(client.Configuration(host="https://127.0.0.1:9"))
    asked: list[list[tuple[str, str]]] = []

    def first(keys: list[tuple[str, str]]) -> list[tuple[str, str]]:
        asked.append(keys)
        return keys

    ahead = LabelsAhead(nowhere, [namespace], driver="secret", first=first)
    observer = Observer(api_client(kube_target), [namespace], driver="secret", ahead=ahead)
    listed: list[str] = []
    observer.on_listed(lambda found: listed.extend(r.name for r in found))
    observer.start()
    try:
        assert observer.wait_synced(20)
        assert listed == [] and asked == []
        assert [name for _, name in observer.releases()] == ["a"]
    finally:
        observer.stop()


def test_labels_listed_ahead_for_other_records_are_listed_again(
    kube_target: KubeTarget, core_api: client.CoreV1Api, namespace: str,
) -> None:
    # An observer that holds some releases only (a command's: reconcile --once, plan) lists its own labels: the
    # pages listed ahead are every release's.
    for name in ("a", "b"):
        core_api.create_namespaced_secret(namespace, new_secret(release(1, name=name, namespace=namespace)))
    ahead = LabelsAhead(api_client(kube_target), [namespace], driver="secret")
    observer = Observer(api_client(kube_target), [namespace], driver="secret", releases={namespace: ["b"]},
                        ahead=ahead)
    listed: list[str] = []
    observer.on_listed(lambda found: listed.extend(r.name for r in found))
    observer.start()
    try:
        assert observer.wait_synced(20)
        assert listed == ["b"]
        assert [name for _, name in observer.releases()] == ["b"]
    finally:
        observer.stop()
