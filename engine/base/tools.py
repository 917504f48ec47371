"""The tools helmdeck pins, and where its own builds of them live.

``make build`` (:mod:`localcluster.build`) builds each from its Go module into
``<cache>/bin/<component>-<version>/``; the engine runs the pinned kustomize and cosign from there
(:func:`locate`), so a render and its manifest checksum, or a signature check, do not depend on what happens
to be installed, and the command line falls back to the built helm (:func:`helm`). The versions and places
are here, not in localcluster, because the engine and the command line need them and never import the local
cluster.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from engine.base.paths import cache_root

KUBERNETES_VERSION = "v1.34.4"
ETCD_VERSION = "v3.6.16"
KWOK_VERSION = "v0.7.0"
HELM3_VERSION = "v3.22.0"
HELM4_VERSION = "v4.3.2"
REGISTRY_VERSION = "v3.1.2"
# v5.8.x needs Go 1.27; v5.7.1 builds with Go 1.26.
KUSTOMIZE_VERSION = "v5.7.1"
# cosign verifies OCIRepository signatures (spec.verify); built on first need, not by a plain `make build`.
COSIGN_VERSION = "v2.6.5"


def bin_dir(component: str, version: str, root: Path | None = None) -> Path:
    """The folder of ``component``'s binaries built at ``version`` below ``root`` (default the cache)."""
    return (root or cache_root()) / "bin" / f"{component}-{version}"


def helm(major: int) -> Path:
    """The pinned helm ``major`` (3 or 4) helmdeck builds (built or not); KeyError for another major."""
    version = {3: HELM3_VERSION, 4: HELM4_VERSION}[major]
    return bin_dir(f"helm{major}", version) / "helm"


def kustomize() -> Path:
    """The pinned kustomize helmdeck builds (built or not)."""
    return bin_dir("kustomize", KUSTOMIZE_VERSION) / "kustomize"


def cosign() -> Path:
    """The pinned cosign helmdeck builds (built or not)."""
    return bin_dir("cosign", COSIGN_VERSION) / "cosign"


class ToolMissing(LookupError):
    """A tool helmdeck runs was not found; the message says where it looked and the fixes."""


def locate(name: str, env_var: str, cached: Path, *, needed_by: str, fix: str,
           env: Mapping[str, str] | None = None) -> Path:
    """The ``name`` binary to run: ``$env_var`` (empty counts as unset; a name is looked up on ``PATH``), then
    helmdeck's pinned build ``cached``, then ``name`` on ``PATH``. An explicit choice that cannot be found is an
    error. Raises ToolMissing naming ``needed_by`` (what needs the tool) and ending with ``fix``."""
    env = os.environ if env is None else env
    explicit = env.get(env_var)
    if explicit:
        found = shutil.which(explicit, path=env.get("PATH", "")) if os.sep not in explicit else explicit
        if found is None or not os.access(found, os.X_OK):
            raise ToolMissing(f"{name} {explicit!r} given by ${env_var} not found or not executable; "
                              f"fix ${env_var} or leave it unset")
        return Path(found).absolute()
    if os.access(cached, os.X_OK):
        return cached
    on_path = shutil.which(name, path=env.get("PATH", ""))
    if on_path is not None:
        return Path(on_path).absolute()
    raise ToolMissing(f"{needed_by} needs {name}: ${env_var} is unset, {cached} is not built and PATH has no "
                      f"{name}; {fix}")
