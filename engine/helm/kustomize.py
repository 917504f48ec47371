"""Which kustomize binary the post-renderer runs for ``spec.postRenderers``.

Order: ``$HELMDECK_KUSTOMIZE`` (empty counts as unset), then helmdeck's own
build in its cache (``make build``: the pinned version, so a render and its
manifest checksum do not depend on what happens to be installed), then
``kustomize`` on ``PATH``. An explicit choice that cannot be found is an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from engine.base import tools
from engine.helm.errors import HelmError

ENV_VAR = "HELMDECK_KUSTOMIZE"


class KustomizeMissing(HelmError):
    """No kustomize binary was found; the message says where helmdeck looked and the fixes."""


def find_kustomize(env: Mapping[str, str] | None = None, *, needed_by: str = "spec.postRenderers") -> Path:
    """The kustomize binary (see the module docstring); ``needed_by`` names what needs it in the error.
    Raises KustomizeMissing."""
    try:
        return tools.locate("kustomize", ENV_VAR, tools.kustomize(), needed_by=needed_by, env=env,
                            fix=f"run `make build`, set ${ENV_VAR}, or install kustomize v5")
    except tools.ToolMissing as exc:
        raise KustomizeMissing(str(exc)) from None
