"""Missing permissions must not look like "no releases".

Without ``-n`` (and without ``-A``), when the cluster scope of Helm's storage is forbidden, the commands
fall back to the kubeconfig context's namespace, as ``helm list`` and ``kubectl get`` default to it, and
say so. Permissions the API server refuses are printed on stderr by the headless commands (which then exit
non-zero) and shown by the app (the engine publishes them as ``AccessProblems``).
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING

from engine.kube.client import KubeTarget
from engine.runtime.state import AccessProblems

if TYPE_CHECKING:
    from kubernetes import client

log = logging.getLogger("helmdeck")


def scope_fallback(target: KubeTarget, api: client.ApiClient) -> tuple[list[str] | None, str]:
    """``(namespaces, note)``: ``(None, "")`` when storage may be listed and watched across all namespaces
    (or the question cannot be asked), else the context's namespace and a sentence saying why.

    Asks the API server (SelfSubjectAccessReview, which every authenticated user may create) rather than
    waiting for the watch to be refused, through ``api`` (a client of ``target``: the engine's, so the command
    reads its kubeconfig and opens its connection once). Raises KubeConfigError for an unreadable kubeconfig.
    """
    from engine.kube.client import context_namespace
    from engine.storage.observer import Observer

    try:
        missing = Observer(api).check_access(("list", "watch"))
    except Exception as exc:  # cannot ask (unreachable, driver, API error): the watch reports what it meets
        log.warning("cannot check storage access across all namespaces: %s", exc)
        return None, ""
    if not missing:
        return None, ""
    namespace = context_namespace(target)
    verbs = " and ".join(m.verb for m in missing)
    note = (f"cannot {verbs} {missing[0].resource} across all namespaces (missing RBAC permission); showing "
            f'namespace "{namespace}" only, the kubeconfig context\'s namespace (as helm list and kubectl get '
            "do); pass -n NAMESPACE for another")
    log.warning("%s", note)
    return [namespace], note


def report(access: AccessProblems, *, scope: bool = True) -> bool:
    """Print the scope note (``scope``), every refused permission and every storage never listed (the API
    server unreachable) on stderr; True when there was one of those (what the command shows is incomplete)."""
    if scope and access.scope:
        print(f"note: {access.scope}", file=sys.stderr)
    for problem in (*access.missing, *access.unread):
        print(f"error: {problem}", file=sys.stderr)
    return bool(access.missing or access.unread)
