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


SERVER_SIDE = "ssa"  # helm 4's release field apply_method for a release applied server-side


def server_side(spec: PackageSpec, action: str, method: str = "") -> bool:
    """Does helm 4 apply ``action``'s objects (``install``, ``upgrade``, ``rollback``) server-side for ``spec``?
    The one rule, as helm-controller v1.6.3 decides it: an install by ``install.serverSideApply`` (default true:
    helm 4's, internal/action/install.go ``newInstall`` without the UseHelm3Defaults gate); an upgrade or a rollback
    by its ``serverSideApply``, ``auto`` (the default) taking ``method``, the ``apply_method`` helm stored on the
    revision the action starts from: the latest for an upgrade, the one it goes back to for a rollback
    (internal/action/upgrade.go ``Upgrade``, rollback.go ``Rollback``, resolving "auto" as helm does). Conflicts
    with other field managers are forced exactly when this is true (Flux: ``ForceConflicts = serverSideApply``)."""
    if action == "install":
        return spec.install.server_side_apply is not False
    mode = spec.rollback.server_side_apply if action == "rollback" else spec.upgrade.server_side_apply
    return mode == "enabled" or (mode == "auto" and method == SERVER_SIDE)


def _needs_helm4(spec: PackageSpec, action: str) -> str:
    """The field of ``spec`` that asks ``action`` for what helm 3 does not do ("" none): server-side apply, or
    hooks sent to the post-renderers (helm 3 never sends them: Flux's postRenderStrategy nohooks)."""
    if action != "rollback" and spec.rendering.sends_hooks:
        return f"spec.postRenderStrategy: {spec.rendering.strategy} sends hooks to the post-renderers"
    if action == "install":
        return "spec.install.serverSideApply: true asks for server-side apply" \
            if spec.install.server_side_apply else ""
    mode = spec.rollback.server_side_apply if action == "rollback" else spec.upgrade.server_side_apply
    return f"spec.{action}.serverSideApply: enabled asks for server-side apply" if mode == "enabled" else ""


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
        server_side=server_side(spec, "install"), force_conflicts=server_side(spec, "install"),
        needs_helm4=_needs_helm4(spec, "install"),
    )


def upgrade_options(
    spec: PackageSpec, *, labels: Mapping[str, str], post_renderer: PostRenderer | None,
    install: bool = False, method: str | None = None,
) -> UpgradeOptions:
    """``helm upgrade`` for ``spec``. With ``install`` (``upgrade --install``, as the release service runs it)
    the install fields apply where they exist. ``method``: the latest revision's ``apply_method`` (None: there is
    none, the upgrade installs); whether it applies server-side is :func:`server_side`'s, and then, as
    helm-controller's internal/action/upgrade.go ``Upgrade``, conflicts are forced and ``upgrade.force`` (a
    replacement) is ignored."""
    action = "install" if method is None else "upgrade"
    ssa = server_side(spec, action, method or "")
    section = spec.install if install else spec.upgrade
    wait = not section.disable_wait
    return UpgradeOptions(
        timeout=spec.action_timeout("install" if install else "upgrade"), wait=wait,
        wait_for_jobs=wait and not section.disable_wait_for_jobs,
        install=install, create_namespace=install and spec.creates_namespace,
        force=spec.upgrade.force and not install and not ssa,
        cleanup_on_fail=spec.upgrade.cleanup_on_fail and not install,
        reuse_values=spec.upgrade.preserve_values, reset_values=not spec.upgrade.preserve_values,
        disable_hooks=section.disable_hooks, max_history=spec.max_history, labels=dict(labels),
        post_renderer=post_renderer, server_side=ssa, force_conflicts=ssa, needs_helm4=_needs_helm4(spec, action),
        skip_crds=helm_skips(spec.crds.for_action(install), labelled=bool(crd_labels(spec))),
        kube_as_user=kube_user(spec),
        wait_strategy=spec.wait_strategy,
        take_ownership=not section.disable_take_ownership,
    )


def rollback_options(spec: PackageSpec | None, *, timeout: float | None = None, method: str = "") -> RollbackOptions:
    """``helm rollback`` for ``spec`` (None: a release no package declares — helm's defaults, waiting) to a
    revision stored with the ``apply_method`` ``method``: server-side by :func:`server_side`, and then, as
    helm-controller's internal/action/rollback.go ``Rollback``, conflicts forced and ``rollback.force`` (a
    replacement) ignored."""
    if spec is None:
        return RollbackOptions(timeout=timeout or 300.0, wait=True, wait_for_jobs=True)
    ssa = server_side(spec, "rollback", method)
    wait = not spec.rollback.disable_wait
    return RollbackOptions(
        timeout=timeout or spec.action_timeout("rollback"), wait=wait,
        wait_for_jobs=wait and not spec.rollback.disable_wait_for_jobs,
        force=spec.rollback.force and not ssa, recreate=spec.rollback.recreate,
        cleanup_on_fail=spec.rollback.cleanup_on_fail,
        disable_hooks=spec.rollback.disable_hooks, max_history=spec.max_history, kube_as_user=kube_user(spec),
        wait_strategy=spec.wait_strategy, server_side=ssa, force_conflicts=ssa,
        needs_helm4=_needs_helm4(spec, "rollback"),
    )


def uninstall_options(spec: PackageSpec) -> UninstallOptions:
    """``helm uninstall`` for ``spec``."""
    return UninstallOptions(timeout=spec.action_timeout("uninstall"), wait=not spec.uninstall.disable_wait,
                            keep_history=spec.uninstall.keep_history, disable_hooks=spec.uninstall.disable_hooks,
                            kube_as_user=kube_user(spec), wait_strategy=spec.wait_strategy,
                            cascade=spec.uninstall.deletion_propagation)
