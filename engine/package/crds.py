"""Flux's CRD policy: ``spec.install.crds`` and ``spec.upgrade.crds``, both ``Create`` when unset, as Flux's
helm-controller's code (internal/action/crds.go ``crdPolicyOrDefault``: ``DefaultCRDPolicy``; its API docs say
``Skip`` for upgrade, its code does not).

``Skip``: no CRD from the chart's ``crds/`` folders is created or changed (helm ``--skip-crds``).
``Create``: the missing ones are created, existing ones left as they are (helm's own behaviour on
install; on upgrade helm never touches ``crds/``, so helmdeck creates the missing ones).
``CreateReplace``: helmdeck applies every CRD of ``crds/`` (chart and subcharts) server-side and
helm skips them. Either way helmdeck waits for them to be Established and never deletes a CRD
(as Flux's ``internal/action/crds.go``). The policies and their applying live in :mod:`engine.helm.crds`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.base.fields import Fields
from engine.helm.crds import CREATE, POLICIES


@dataclass(frozen=True)
class CrdPolicy:
    """The CRD policy of each release action: ``install`` and ``upgrade``, each one of :data:`POLICIES`."""

    install: str = CREATE
    upgrade: str = CREATE

    def for_action(self, install: bool) -> str:
        """The policy of an install (``install``) or of an upgrade."""
        return self.install if install else self.upgrade


def parse_crds(doc: Fields, spec: dict[str, Any]) -> CrdPolicy:
    """``spec.install.crds`` and ``spec.upgrade.crds``; raises PackageError on another value."""
    def policy(section: str, default: str) -> str:
        raw = spec.get(section)
        value = raw.get("crds") if isinstance(raw, dict) else None
        return doc.choice(value, f"spec.{section}.crds", POLICIES, default)

    return CrdPolicy(install=policy("install", CREATE), upgrade=policy("upgrade", CREATE))
