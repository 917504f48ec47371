"""Which storage namespace the release book reads a declared package's release from (ReleaseBook over the
observer's readers): pure, over an offline observer."""

from __future__ import annotations

from pathlib import Path

from engine.package.flux import HELM_RELEASE
from engine.package.model import PackageSpec
from engine.runtime.ledger.book import ReleaseBook
from engine.storage.observer import Observer
from tests.storage_records import release, secret, stored_in


def test_a_declared_package_reads_the_release_from_the_storage_it_declares() -> None:
    """The release book tells the observer where a declared package's release is stored: a HelmRelease in
    ``flux-system`` with ``targetNamespace: apps`` is stored in ``flux-system`` (api/v2
    ``HelmRelease.GetStorageNamespace``), whatever a record of that name in ``apps`` holds; a release no package
    declares is read from its own namespace's storage."""
    observer = Observer(None, driver="secret")
    book = ReleaseBook(observer)
    observer.apply_object(stored_in("flux-system", 2, "deployed"))
    observer.apply_object(stored_in("apps", 7, "uninstalled"))
    latest = observer.latest("apps", "web")
    assert latest is not None and (latest.version, latest.storage_namespace) == (7, "apps")
    spec = PackageSpec(Path("/p/web.yaml"), "web", "flux-system", Path("chart"), "web", kind=HELM_RELEASE,
                       target_namespace="apps")
    book.set_packages({spec.key: spec})
    latest = observer.latest("apps", "web")
    assert latest is not None and (latest.version, latest.storage_namespace) == (2, "flux-system")
    assert observer.releases() == {("apps", "web"): latest}


def test_an_unreadable_record_in_a_declared_storage_marks_the_packages_row() -> None:
    """An unreadable record names only the namespace it is stored in: a HelmRelease stored in ``flux-system`` for
    ``apps`` whose newest record there is unreadable marks the release's row (``apps/web``), not a row of its own
    in ``flux-system``."""
    observer = Observer(None, driver="secret")
    book = ReleaseBook(observer)
    spec = PackageSpec(Path("/p/web.yaml"), "web", "flux-system", Path("chart"), "web", kind=HELM_RELEASE,
                       target_namespace="apps")
    book.set_packages({spec.key: spec})
    observer.apply_object(stored_in("flux-system", 1, "superseded"))
    bad = secret(release(2, name="web", namespace="apps"), rv="flux-system-2", payload="H4sI%%%")
    bad["metadata"]["namespace"] = "flux-system"
    observer.apply_object(bad)
    book.refresh_all()
    row = book.view(("apps", "web"))
    assert row is not None and row.unreadable is not None and row.unreadable.startswith("revision 2:")
    assert book.view(("flux-system", "web")) is None
