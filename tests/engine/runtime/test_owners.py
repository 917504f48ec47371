"""Who owns a release: Flux's labels in the stored manifest, a helmdeck package, or nobody."""

from __future__ import annotations

from engine.runtime.ledger.owners import FLUX_REQUESTS, NONE, Owner, flux_refusal, has_key, owner_of
from engine.runtime.state import ReleaseView
from engine.storage.observation import Observation, flux_owner_of
from testkit.fixtures import LEGACY, WEB, fixed_engine

FLUX_CM = """---
apiVersion: v1
kind: ConfigMap
metadata:
  name: podinfo
  labels:
    app.kubernetes.io/name: podinfo
    helm.toolkit.fluxcd.io/name: podinfo
    helm.toolkit.fluxcd.io/namespace: "flux-system"
"""


def test_flux_labels_in_the_manifest_name_the_helmrelease() -> None:
    assert flux_owner_of(FLUX_CM) == "flux-system/podinfo"
    assert flux_owner_of(FLUX_CM.replace("    helm.toolkit.fluxcd.io/namespace: \"flux-system\"\n", "")) == ""
    assert flux_owner_of("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n") == ""


def test_owner_of_a_view() -> None:
    engine = fixed_engine()
    web, legacy = engine.release(WEB), engine.release(LEGACY)
    assert web is not None and legacy is not None
    assert owner_of(web).kind == "helmdeck" and owner_of(web).text.startswith("helmdeck package ")
    assert owner_of(legacy) == NONE and NONE.text == "none"
    obs = Observation("podinfo", "apps", 1, "deployed", flux_owner="flux-system/podinfo")
    flux = owner_of(ReleaseView(namespace="apps", name="podinfo", observation=obs))
    assert flux == Owner("flux", "flux-system", "podinfo")
    assert flux.text == "Flux HelmRelease flux-system/podinfo"


def test_a_release_of_a_package_set_not_loaded_here_is_owned_by_that_set() -> None:
    # Without --packages (or from another folder) a helmdeck release showed OWNER "-": its storage label says
    # which package set manages it.
    obs = Observation("web", "apps", 1, "deployed", labels=(("helmdeck.dev/package-set", "apps-b7ec6b4e8f13"),))
    owner = owner_of(ReleaseView(namespace="apps", name="web", observation=obs))
    assert owner == Owner("helmdeck", package_set="apps-b7ec6b4e8f13")
    # The folder's own release whose package file was removed is said the same way: "its packages are not
    # loaded here" was untrue for it (the demo's folder, its flaky.yaml moved away).
    assert owner.text == "helmdeck package set apps-b7ec6b4e8f13 (no package loaded here declares it)"


def test_a_flux_row_has_no_key_for_what_flux_would_undo() -> None:
    """The footer's one rule: a Flux row lacks the keys flux_refusal refuses (rollback, uninstall, maintenance);
    Flux's requests and helmdeck's own keys stay; every key stays on any other row."""
    flux, ours = Owner("flux", "apps", "web"), Owner("helmdeck", "apps", "web")
    actions = ("upgrade", "rollback", "test", "monitor", "maintenance", "suspend", "unlock", "cleanup", "uninstall",
               "cancel", "versions")
    assert {a for a in actions if not has_key(flux, a)} == {"rollback", "uninstall", "maintenance"}
    assert all(has_key(flux, a) for a in FLUX_REQUESTS)
    assert all(has_key(owner, a) for a in actions for owner in (ours, NONE, Owner("controller", "apps", "web")))
    assert all(has_key(flux, a) == (flux_refusal(a, "apps/web") is None) for a in actions)
