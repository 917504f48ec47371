"""RBAC on Helm's storage: the permission a refused list or watch lacks, and asking the API server first."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import MaxRetryError

from engine.kube import rest
from engine.storage.codec import Driver

RESOURCE: dict[Driver, str] = {"secret": "secrets", "configmap": "configmaps"}
_FORBIDDEN_VERB = re.compile(r'cannot (\S+) resource')


@dataclass(frozen=True)
class MissingPermission:
    """An RBAC permission the observer lacks: ``verb`` on ``resource`` in ``namespace`` (None: all)."""

    verb: str
    resource: str
    namespace: str | None

    def __str__(self) -> str:
        where = f'in namespace "{self.namespace}"' if self.namespace else "across all namespaces (cluster scope)"
        return f"missing RBAC permission: {self.verb} {self.resource} {where}"



class Denied(Exception):
    """The API server refused a list or watch (HTTP 403); ``permission`` is what is missing."""

    def __init__(self, permission: MissingPermission, detail: str):
        super().__init__(f"{permission} (API server: {detail})")
        self.permission = permission

    @classmethod
    def from_api(cls, exc: ApiException, verb: str, driver: Driver, namespace: str | None) -> Denied:
        """From a 403 answer; the verb the API server names wins over ``verb`` (a watch is a list)."""
        detail = status_message(exc)
        match = _FORBIDDEN_VERB.search(detail)
        return cls(MissingPermission(match[1] if match else verb, RESOURCE[driver], namespace), detail)


def check_access(api: client.ApiClient, namespaces: Sequence[str | None], driver: Driver,
                 verbs: Sequence[str] = ("list", "watch")) -> list[MissingPermission]:
    """Ask the API server (SelfSubjectAccessReview, allowed to every authenticated user) whether each
    ``verb`` on the driver's resource is allowed in each namespace (None: all namespaces).

    Returns the missing permissions; raises ApiException when a review itself fails.
    """
    missing = []
    for ns in namespaces:
        for verb in verbs:
            attributes = {"verb": verb, "resource": RESOURCE[driver], **({"namespace": ns} if ns else {})}
            review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                      "spec": {"resourceAttributes": attributes}}
            result = rest.send(api, "POST", rest.path("authorization.k8s.io/v1", "selfsubjectaccessreviews"), review)
            if not (result.get("status") or {}).get("allowed"):
                missing.append(MissingPermission(verb, RESOURCE[driver], ns))
    return missing


def status_message(exc: ApiException) -> str:
    """The ``message`` of the API server's Status body, else the HTTP reason."""
    with contextlib.suppress(ValueError, TypeError, AttributeError):
        message = json.loads(exc.body or "").get("message")
        if isinstance(message, str):
            return message
    return str(exc.reason)


def describe(exc: Exception) -> str:
    """One line for an API call's failure: the API server's status and message, or which server could not
    be reached and why (urllib3's MaxRetryError, shorn of its pool and URL: "connection refused", not three
    lines of repr)."""
    if isinstance(exc, MaxRetryError):
        pool = exc.pool
        where = f" at {pool.scheme}://{pool.host}:{pool.port}" if pool is not None else ""
        why = str(exc.reason).rpartition("): ")[2] if exc.reason is not None else "no answer"
        return f"cannot reach the API server{where} ({why})"
    if isinstance(exc, ApiException):
        if exc.status == 401:
            return f"unauthorized: the API server rejected the credentials ({status_message(exc)})"
        return f"API error {exc.status}: {status_message(exc)}"
    return f"{type(exc).__name__}: {exc}"
