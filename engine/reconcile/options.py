"""Package spec -> helm action options: the one mapping (as Flux's ``internal/action``).

Every caller that runs an install, upgrade, rollback or uninstall for a
package (the reconcilers, the release service, the operator's rollback)
takes its options from here, so a field means the same wherever it acts.
Flux's defaults: helm waits for resources unless ``disableWait``, and for
Jobs unless ``disableWaitForJobs`` (helm's ``--wait-for-jobs`` needs ``--wait``).
"""

from __future__ import annotations

from collections.abc import Mapping

from engine.helm.cli import InstallOptions, PostRenderer, RollbackOptions, UninstallOptions, UpgradeOptions
from engine.helm.crds import helm_skips
from engine.package.identity import service_account_user
from engine.package.model import PackageSpec
from engine.resolve.release import crd_labels


def kube_user(spec: PackageSpec | None) -> str:
    """The user helm impersonates for ``spec``: its ``serviceAccountName`` in the package's namespace
    (as Flux), "" for none (helm acts as the kubeconfig's user)."""
    if spec is None or not spec.service_account_name:
        return ""
    return service_account_user(spec.namespace, spec.service_account_name)


def install_options(
    spec: PackageSpec, *, labels: Mapping[str, str], post_renderer: PostRenderer | None, replace: bool = False,
) -> InstallOptions:
    """``helm install`` for ``spec``; ``replace`` reuses a name held by an uninstalled release."""
    wait = not spec.install.disable_wait
    return InstallOptions(
        timeout=spec.action_timeout("install"), wait=wait,
        wait_for_jobs=wait and not spec.install.disable_wait_for_jobs,
        create_namespace=spec.creates_namespace, disable_hooks=spec.install.disable_hooks,
        replace=spec.install.replace or replace, labels=dict(labels), post_renderer=post_renderer,
        skip_crds=helm_skips(spec.crds.install, labelled=bool(crd_labels(spec))), kube_as_user=kube_user(spec),
        wait_strategy=spec.wait_strategy,
        take_ownership=not spec.install.disable_take_ownership,
        # helm 4 installs with server-side apply (helmdeck never asks otherwise), and Flux always forces
        # conflicts then (helm-controller internal/action/install.go Install); helm 3 drops the flag.
        force_conflicts=True,
    )


def upgrade_options(
    spec: PackageSpec, *, labels: Mapping[str, str], post_renderer: PostRenderer | None,
    force_conflicts: bool = False, install: bool = False, server_side: bool = False,
) -> UpgradeOptions:
    """``helm upgrade`` for ``spec``. With ``install`` (``upgrade --install`` of an absent release,
    as the release service runs it) the install fields apply where they exist. ``server_side``: the upgrade
    applies server-side (helm 4's "auto": the last revision did): as helm-controller's internal/action/upgrade.go
    Upgrade, conflicts are then forced and ``upgrade.force`` (a replacement) is ignored."""
    section = spec.install if install else spec.upgrade
    wait = not section.disable_wait
    return UpgradeOptions(
        timeout=spec.action_timeout("install" if install else "upgrade"), wait=wait,
        wait_for_jobs=wait and not section.disable_wait_for_jobs,
        install=install, create_namespace=install and spec.creates_namespace,
        force=spec.upgrade.force and not install and not server_side,
        cleanup_on_fail=spec.upgrade.cleanup_on_fail and not install,
        reuse_values=spec.upgrade.preserve_values, reset_values=not spec.upgrade.preserve_values,
        disable_hooks=section.disable_hooks, max_history=spec.max_history, labels=dict(labels),
        post_renderer=post_renderer, force_conflicts=force_conflicts or server_side,
        skip_crds=helm_skips(spec.crds.for_action(install), labelled=bool(crd_labels(spec))),
        kube_as_user=kube_user(spec),
        wait_strategy=spec.wait_strategy,
        take_ownership=not section.disable_take_ownership,
    )


def rollback_options(spec: PackageSpec | None, *, timeout: float | None = None) -> RollbackOptions:
    """``helm rollback`` for ``spec`` (None: a release no package declares — helm's defaults, waiting)."""
    if spec is None:
        return RollbackOptions(timeout=timeout or 300.0, wait=True, wait_for_jobs=True)
    wait = not spec.rollback.disable_wait
    return RollbackOptions(
        timeout=timeout or spec.action_timeout("rollback"), wait=wait,
        wait_for_jobs=wait and not spec.rollback.disable_wait_for_jobs,
        force=spec.rollback.force, recreate=spec.rollback.recreate, cleanup_on_fail=spec.rollback.cleanup_on_fail,
        disable_hooks=spec.rollback.disable_hooks, max_history=spec.max_history, kube_as_user=kube_user(spec),
        wait_strategy=spec.wait_strategy,
    )


def uninstall_options(spec: PackageSpec) -> UninstallOptions:
    """``helm uninstall`` for ``spec``."""
    return UninstallOptions(timeout=spec.action_timeout("uninstall"), wait=not spec.uninstall.disable_wait,
                            keep_history=spec.uninstall.keep_history, disable_hooks=spec.uninstall.disable_hooks,
                            kube_as_user=kube_user(spec), wait_strategy=spec.wait_strategy,
                            cascade=spec.uninstall.deletion_propagation)
