"""Which kustomize binary the post-renderer runs for ``spec.postRenderers``.

Order: ``$HELMDECK_KUSTOMIZE`` (empty counts as unset), then helmdeck's own
build in its cache (``make build``: the pinned version, so a render and its
manifest checksum do not depend on what happens to be installed), then
``kustomize`` on ``PATH``. An explicit choice that cannot be found is an error.
"""

from __future__ import annotations

import os
import shutil
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
    env = os.environ if env is None else env
    explicit = env.get(ENV_VAR)
    if explicit:
        found = shutil.which(explicit, path=env.get("PATH", "")) if os.sep not in explicit else explicit
        if found is None or not os.access(found, os.X_OK):
            raise KustomizeMissing(f"kustomize {explicit!r} given by ${ENV_VAR} not found or not executable; "
                                   f"fix ${ENV_VAR} or leave it unset")
        return Path(found).absolute()
    cached = tools.kustomize()
    if os.access(cached, os.X_OK):
        return cached
    on_path = shutil.which("kustomize", path=env.get("PATH", ""))
    if on_path is not None:
        return Path(on_path).absolute()
    raise KustomizeMissing(f"{needed_by} needs kustomize: ${ENV_VAR} is unset, {cached} is not built and "
                           f"PATH has no kustomize; run `make build`, set ${ENV_VAR}, or install kustomize v5")
