"""The tools helmdeck pins, and where its own builds of them live.

``make build`` (:mod:`localcluster.build`) builds each from its Go module into
``<cache>/bin/<component>-<version>/``; the engine runs the pinned kustomize from there, so a render and
its manifest checksum do not depend on what happens to be installed. The versions are here, not in
localcluster, because the engine needs them and never imports the local cluster.
"""

from __future__ import annotations

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


def kustomize() -> Path:
    """The pinned kustomize helmdeck builds (built or not)."""
    return bin_dir("kustomize", KUSTOMIZE_VERSION) / "kustomize"


def cosign() -> Path:
    """The pinned cosign helmdeck builds (built or not)."""
    return bin_dir("cosign", COSIGN_VERSION) / "cosign"
