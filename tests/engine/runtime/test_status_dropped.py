"""Which stored engine status a starting engine takes (ReleaseBook.load_statuses): pure, over an offline observer
and statuses held in memory. A status whose last action was helmdeck's own uninstall is the release's (an install
stalled after its uninstall remediations, as Flux's UninstallRemediation keeps the history); one left behind by
something else is dropped, and the view says which object and why."""

from __future__ import annotations

from engine.reconcile.status import ActionOutcome, EngineStatus
from engine.reconcile.store import StatusStore, StoredStatus
from engine.runtime.ledger.book import ReleaseBook
from engine.storage.observer import Observer
from engine.storage.snapshot import History, Snapshot
from testkit.fixtures import storage_secret

NS, NAME = "apps", "app"
KEY = (NS, NAME)


class MemoryStore(StatusStore):
    """Statuses held in memory (no API server): what ``list`` returns."""

    def __init__(self, *items: StoredStatus):
        self.home = "default"
        self._homed = set()
        self._items = list(items)

    def list(self, namespaces: list[str] | None = None) -> list[StoredStatus]:
        return [i for i in self._items if namespaces is None or i.namespace in namespaces]


def record(version: int, status: str, config: dict[str, str]) -> dict[str, object]:
    return storage_secret(NAME, NS, version, status, "bad", "0.1.0", "", config, "2026-11-30T10:00:00Z")


def snapshot(version: int, status: str, config: dict[str, str]) -> Snapshot:
    scratch = Observer(None)
    scratch.apply_object(record(version, status, config))
    obs = scratch.latest(NS, NAME)
    assert obs is not None
    return Snapshot.from_observation(obs)


def stalled(last: str) -> EngineStatus:
    """An install that failed at revision 1 (kept in the history), its last action ``last``."""
    return EngineStatus(history=History((snapshot(1, "failed", {"a": "1"}),)),
                        last=ActionOutcome(last, True, f"{last} succeeded"))


async def load(status: EngineStatus, *stored: dict[str, object]) -> ReleaseBook:
    observer = Observer(None)
    for obj in stored:
        observer.apply_object(obj)
    book = ReleaseBook(observer, store=MemoryStore(StoredStatus(NS, NAME, "app", status)))
    await book.load_statuses(None)
    book.refresh(KEY)
    return book


async def test_a_status_whose_last_action_was_the_uninstall_remediation_is_taken() -> None:
    book = await load(stalled("uninstall-remediation"))  # the remediation removed revision 1: nothing stored
    assert book.status(KEY) == stalled("uninstall-remediation")
    assert book.dropped(KEY) is None


async def test_a_status_whose_history_saw_its_revision_uninstalled_is_taken_whatever_came_after() -> None:
    # The remediation's uninstall recorded in the history (as Flux's observeUninstall); then an install that stored
    # nothing (say a render error after a spec change) was the last action.
    status = EngineStatus(history=History((snapshot(1, "uninstalling", {"a": "1"}),)),
                          last=ActionOutcome("install", False, "Helm install failed: nothing stored"))
    book = await load(status)
    assert book.status(KEY) == status and book.dropped(KEY) is None


async def test_a_status_whose_revision_was_uninstalled_outside_helmdeck_is_dropped_and_said() -> None:
    book = await load(stalled("install"))
    assert book.status(KEY) is None
    view = book.view(KEY)
    assert view is None or view.status_dropped is None  # no package, nothing stored: no row
    assert book.dropped(KEY) == (f"{NS}/helmdeck.status.{NAME}", "revision 1 its history ends with is gone and "
                                 "helmdeck did not uninstall it (uninstalled outside helmdeck)")


async def test_a_status_of_a_release_made_again_by_plain_helm_is_dropped_and_said() -> None:
    # helmdeck's remediation uninstalled revision 1, then plain helm installed another revision 1.
    book = await load(stalled("uninstall-remediation"), record(1, "deployed", {"a": "2"}))
    assert book.status(KEY) is None
    view = book.view(KEY)
    assert view is not None and view.status_dropped is not None
    where, why = view.status_dropped
    assert where == f"{NS}/helmdeck.status.{NAME}" and "made again or changed outside helmdeck" in why, why


async def test_a_status_whose_revision_is_stored_as_it_was_is_taken() -> None:
    status = stalled("install")
    book = await load(status, record(1, "failed", {"a": "1"}))
    assert book.status(KEY) == status and book.dropped(KEY) is None


async def test_a_status_persisted_before_fluxs_digest_is_taken_by_revision() -> None:
    """A status written before snapshots carried Flux's digest (no ``apiVersion``, helmdeck's older digest) is its
    release's while storage holds its revision (Flux's migration rule, internal/action/verify.go
    ``VerifyReleaseObject``: an older snapshot's digest is not compared), so an upgraded helmdeck does not take every
    release for one changed outside it."""
    old = Snapshot.from_dict({**snapshot(1, "failed", {"a": "1"}).to_dict(), "digest": "sha256:" + "0" * 64}
                             | {"api_version": ""})
    status = EngineStatus(history=History((old,)), last=ActionOutcome("install", True, "install succeeded"))
    book = await load(status, record(1, "failed", {"a": "2"}))
    assert book.status(KEY) == status and book.dropped(KEY) is None
