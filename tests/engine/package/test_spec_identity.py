"""Unit tests of the CRD policy, targetNamespace and serviceAccountName fields and the helm flags they
become (engine.package.crds, engine.package.identity, engine.reconcile.options)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.base.fields import PackageError
from engine.helm.cli import _option_flags
from engine.helm.crds import helm_skips, needs_helmdeck
from engine.package.crds import CrdPolicy
from engine.package.load import load_package
from engine.reconcile.options import install_options, rollback_options, uninstall_options, upgrade_options
from tests.engine.package.test_package import pkg, write


def test_defaults_are_fluxs() -> None:
    # Create on upgrade too: what helm-controller's code applies when unset (its docs say Skip; issue 34, 10)
    assert CrdPolicy() == CrdPolicy(install="Create", upgrade="Create")


def test_target_namespace_moves_the_release_and_names_it_as_flux(tmp_path: Path) -> None:
    spec = load_package(write(tmp_path, "a.yaml", pkg(spec="  targetNamespace: apps\n")))
    assert (spec.namespace, spec.release_namespace, spec.storage_ns) == ("ns", "apps", "apps")
    assert spec.key == ("apps", "apps-app")  # Flux's <targetNamespace>-<name>
    named = load_package(write(tmp_path, "b.yaml", pkg(spec="  targetNamespace: apps\n  releaseName: web\n")))
    assert named.key == ("apps", "web")
    # The storage namespace may name the target namespace (where helm stores), not the package's.
    same = load_package(write(tmp_path, "c.yaml", pkg(spec="  targetNamespace: apps\n  storageNamespace: apps\n")))
    assert same.storage_ns == "apps"


@pytest.mark.parametrize(
    ("body", "field", "problem"),
    [
        ("  install: {crds: Always}\n", "spec.install.crds", "unknown value 'Always'"),
        ("  upgrade: {crds: createreplace}\n", "spec.upgrade.crds", "unknown value"),
        ("  targetNamespace: Apps\n", "spec.targetNamespace", "not a valid namespace name"),
        ("  serviceAccountName: deploy_er\n", "spec.serviceAccountName", "not a valid ServiceAccount name"),
        ("  targetNamespace: apps\n  storageNamespace: ns\n", "spec.storageNamespace",
         "differs from the release namespace 'apps'"),
    ],
)
def test_field_errors(tmp_path: Path, body: str, field: str, problem: str) -> None:
    with pytest.raises(PackageError) as err:
        load_package(write(tmp_path, "a.yaml", pkg(spec=body)))
    assert err.value.field == field and problem in str(err.value)
    assert err.value.line is not None


@pytest.mark.parametrize(("policy", "install", "helmdeck", "skip"), [
    ("Skip", True, False, True), ("Skip", False, False, True),
    ("Create", True, False, False), ("Create", False, True, False),
    ("CreateReplace", True, True, True), ("CreateReplace", False, True, True),
])
def test_who_acts_on_crds(policy: str, install: bool, helmdeck: bool, skip: bool) -> None:
    assert needs_helmdeck(policy, install=install) is helmdeck
    assert helm_skips(policy) is skip


def test_the_policy_and_the_service_account_become_helm_flags(tmp_path: Path) -> None:
    spec = load_package(write(tmp_path, "a.yaml", pkg(
        spec="  serviceAccountName: deployer\n  install: {crds: CreateReplace}\n  upgrade: {crds: Create}\n")))
    user = ["--kube-as-user", "system:serviceaccount:ns:deployer"]
    for major in (3, 4):
        install = _option_flags(install_options(spec, labels={}, post_renderer=None), major)
        assert "--skip-crds" in install and _has(install, user)
        upgrade = _option_flags(upgrade_options(spec, labels={}, post_renderer=None), major)
        assert "--skip-crds" not in upgrade and _has(upgrade, user)
        assert _has(_option_flags(rollback_options(spec), major), user)
        assert _has(_option_flags(uninstall_options(spec), major), user)
    plain = load_package(write(tmp_path, "b.yaml", pkg()))
    flags = _option_flags(install_options(plain, labels={}, post_renderer=None), 4)
    assert "--kube-as-user" not in flags and "--skip-crds" not in flags
    assert "--kube-as-user" not in _option_flags(rollback_options(None), 4)


def _has(flags: list[str], pair: list[str]) -> bool:
    return any(flags[i:i + 2] == pair for i in range(len(flags) - 1))
