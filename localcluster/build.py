"""Build the control plane and helm from their Go modules, cached by version.

Each component is built in a small wrapper Go module of its own (so their
dependency versions do not pull on each other) under the cache directory, and
its binaries land in ``<cache>/bin/<component>-<version>/``. A component with a
``source`` is a Go module of this repository (its ``go.mod`` and ``go.sum``
committed, e.g. the tests' Flux oracle, tests/oracle/), built where it is. A component whose
binaries are all present is not rebuilt, so a warm run takes well under a
second; the Go module and build caches make a rebuild after a version bump
incremental.

The cache directory is :func:`engine.base.paths.cache_root`: outside the repository, so a fresh clone
reuses it and a fresh machine rebuilds it. The versions are pinned in :mod:`engine.base.tools`.

Run as ``python -m localcluster.build [component ...]``.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from engine.base import tools
from engine.base.paths import cache_root
from engine.base.tools import (
    COSIGN_VERSION,
    ETCD_VERSION,
    HELM3_VERSION,
    HELM4_VERSION,
    KUBERNETES_VERSION,
    KUSTOMIZE_VERSION,
    KWOK_VERSION,
    REGISTRY_VERSION,
)

# Staging modules k8s.io/kubernetes requires at v0.0.0; each is served at
# v0.<minor>.<patch> matching the kubernetes release (as its go.mod lists them).
_K8S_STAGING = (
    "api", "apiextensions-apiserver", "apimachinery", "apiserver", "cli-runtime", "client-go",
    "cloud-provider", "cluster-bootstrap", "code-generator", "component-base", "component-helpers",
    "controller-manager", "cri-api", "cri-client", "csi-translation-lib",
    "dynamic-resource-allocation", "endpointslice", "externaljwt", "kms", "kube-aggregator",
    "kube-controller-manager", "kube-proxy", "kube-scheduler", "kubectl", "kubelet", "metrics",
    "mount-utils", "pod-security-admission", "sample-apiserver",
)


class BuildError(RuntimeError):
    """A component failed to build; the message names component, version and log."""


def _k8s_ldflags(version: str) -> list[str]:
    major, minor = version.lstrip("v").split(".")[:2]
    stamps = {
        "k8s.io/component-base/version.gitVersion": version,
        "k8s.io/component-base/version.gitMajor": major,
        "k8s.io/component-base/version.gitMinor": minor,
        "k8s.io/component-base/version.gitTreeState": "clean",
        "k8s.io/component-base/version.buildDate": "1970-01-01T00:00:00Z",
        "k8s.io/client-go/pkg/version.gitVersion": version,
        "k8s.io/client-go/pkg/version.gitMajor": major,
        "k8s.io/client-go/pkg/version.gitMinor": minor,
    }
    return [f"-X {k}={v}" for k, v in stamps.items()]


def _helm3_ldflags(version: str) -> list[str]:
    k8s_major, k8s_minor = KUBERNETES_VERSION.lstrip("v").split(".")[:2]
    return [
        f"-X helm.sh/helm/v3/internal/version.version={version}",
        f"-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor={k8s_major}",
        f"-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor={k8s_minor}",
        f"-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor={k8s_major}",
        f"-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor={k8s_minor}",
    ]


@dataclass(frozen=True)
class Component:
    """One Go-built component: a wrapper module requiring ``module@version``.

    ``binaries`` maps output binary name to the Go package path that builds it.
    """

    name: str
    module: str
    version: str
    binaries: dict[str, str]
    ldflags: tuple[str, ...] = ()
    replaces: dict[str, str] = field(default_factory=dict)
    on_demand: bool = False  # not built by a plain `make build` (`make demo` needs it not)
    # A module of this repository built in place (no wrapper module; its go.sum must be complete), and the
    # Go toolchain its go.mod needs when newer than the machine's (GOTOOLCHAIN: the go command fetches it
    # from the Go module proxy).
    source: Path | None = None
    toolchain: str = ""

    @classmethod
    def commands(cls, name: str, module: str, version: str, *commands: str, version_var: str = "",
                 ldflags: tuple[str, ...] = (), replaces: dict[str, str] | None = None,
                 on_demand: bool = False) -> Component:
        """A component whose binaries are the module's ``cmd/<command>`` packages; ``version_var``
        (a Go variable relative to the module, e.g. ``internal/version.version``) is stamped with the version."""
        stamp = (f"-X {module}/{version_var}={version}",) if version_var else ()
        return cls(name, module, version, {c: f"{module}/cmd/{c}" for c in commands}, ldflags + stamp,
                   dict(replaces or {}), on_demand)

    @property
    def key(self) -> str:
        return f"{self.name}-{self.version}"

    def bin_dir(self, root: Path | None = None) -> Path:
        return tools.bin_dir(self.name, self.version, root)

    def work_dir(self, root: Path | None = None) -> Path:
        return (root or cache_root()) / "build" / self.key

    def path(self, binary: str, root: Path | None = None) -> Path:
        return self.bin_dir(root) / binary

    def is_built(self, root: Path | None = None) -> bool:
        return all(os.access(self.path(b, root), os.X_OK) for b in self.binaries)


COMPONENTS: dict[str, Component] = {
    c.name: c
    for c in (
        Component(
            name="etcd",
            module="go.etcd.io/etcd/server/v3",
            version=ETCD_VERSION,
            binaries={"etcd": "go.etcd.io/etcd/server/v3"},
        ),
        Component.commands("kwok", "sigs.k8s.io/kwok", KWOK_VERSION, "kwok"),
        Component.commands("helm3", "helm.sh/helm/v3", HELM3_VERSION, "helm",
                           ldflags=tuple(_helm3_ldflags(HELM3_VERSION))),
        Component.commands("helm4", "helm.sh/helm/v4", HELM4_VERSION, "helm",
                           version_var="internal/version.version"),
        Component.commands("registry", "github.com/distribution/distribution/v3", REGISTRY_VERSION, "registry",
                           version_var="version.version"),
        Component(
            name="kustomize",
            module="sigs.k8s.io/kustomize/kustomize/v5",
            version=KUSTOMIZE_VERSION,
            binaries={"kustomize": "sigs.k8s.io/kustomize/kustomize/v5"},
        ),
        # Verifies OCIRepository signatures (spec.verify); its own version package is sigstore's release-utils.
        Component.commands("cosign", "github.com/sigstore/cosign/v2", COSIGN_VERSION, "cosign",
                           ldflags=(f"-X sigs.k8s.io/release-utils/version.gitVersion={COSIGN_VERSION}",),
                           on_demand=True),
        Component.commands(
            "kubernetes", "k8s.io/kubernetes", KUBERNETES_VERSION,
            "kube-apiserver", "kube-controller-manager", "kube-scheduler",
            ldflags=tuple(_k8s_ldflags(KUBERNETES_VERSION)),
            replaces={
                f"k8s.io/{m}": f"k8s.io/{m} v0.{KUBERNETES_VERSION.split('.', 1)[1]}"
                for m in _K8S_STAGING
            },
        ),
    )
}


def binary(component: str, name: str | None = None) -> Path:
    """Path of a component's cached binary (built or not).

    ``name`` defaults to the component's only binary; raises KeyError for an
    unknown component or binary.
    """
    comp = COMPONENTS[component]
    if name is None:
        (name,) = comp.binaries
    if name not in comp.binaries:
        raise KeyError(f"{component} has no binary {name!r}")
    return comp.path(name)


def _go_env(comp: Component) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("GOFLAGS", "-buildvcs=false")
    env["CGO_ENABLED"] = "0"
    env["GOWORK"] = "off"
    if comp.toolchain:
        env["GOTOOLCHAIN"] = comp.toolchain
    if comp.source is not None:
        env["GOFLAGS"] = "-buildvcs=false -mod=readonly"  # the committed go.sum, never rewritten
    return env


def _run(
    cmd: Sequence[str], cwd: Path, log: TextIO, env: dict[str, str],
    tick: Callable[[float], None] | None = None,
) -> None:
    """Run ``cmd`` with output to ``log``; call ``tick(elapsed)`` every 30 s while it runs."""
    log.write(f"$ {' '.join(cmd)}\n")
    log.flush()
    proc = subprocess.Popen(list(cmd), cwd=cwd, stdout=log, stderr=subprocess.STDOUT, env=env)
    started = time.monotonic()
    while True:
        try:
            proc.wait(timeout=30)
            break
        except subprocess.TimeoutExpired:
            if tick is not None:
                tick(time.monotonic() - started)
    if proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, cmd)


def _count_lines(path: Path) -> int:
    try:
        with path.open("rb") as fh:
            return sum(1 for _ in fh)
    except OSError:
        return 0


def _write_gomod(comp: Component, work: Path) -> None:
    lines = [f"module helmdeck.local/build/{comp.name}", "", "go 1.24", ""]
    for old, new in sorted(comp.replaces.items()):
        lines.append(f"replace {old} => {new}")
    (work / "go.mod").write_text("\n".join(lines) + "\n")


def build(comp: Component, *, root: Path | None = None, progress: Callable[[str], None] = print) -> Path:
    """Build ``comp`` unless cached; return its bin directory.

    Raises BuildError naming the component, version and the build log.
    """
    bin_dir = comp.bin_dir(root)
    if comp.is_built(root):
        return bin_dir
    work = comp.work_dir(root)
    work.mkdir(parents=True, exist_ok=True)
    # Two builds of one component at once (make demo beside make test, two pytest sessions on a fresh machine)
    # would rewrite each other's go.mod mid-build: the second waits, then finds the first one's binaries.
    with (work.parent / f"{comp.key}.lock").open("a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            progress(f"waiting for another build of {comp.name} {comp.version} to end ...")
            fcntl.flock(lock, fcntl.LOCK_EX)
        if comp.is_built(root):
            return bin_dir
        return _build_locked(comp, work, bin_dir, progress)


def _build_locked(comp: Component, work: Path, bin_dir: Path, progress: Callable[[str], None]) -> Path:
    if shutil.which("go") is None:
        raise BuildError(f"{comp.key}: the 'go' command is not on PATH; install Go 1.26+")
    log_path = work / "build.log"
    env = _go_env(comp)
    started = time.monotonic()
    progress(f"building {comp.name} {comp.version} (log: {log_path}) ...")
    tmp_bin = bin_dir.with_name(bin_dir.name + ".tmp")
    shutil.rmtree(tmp_bin, ignore_errors=True)
    tmp_bin.mkdir(parents=True)
    try:
        with log_path.open("w") as log:
            if comp.source is None:
                _write_gomod(comp, work)
                (work / "go.sum").unlink(missing_ok=True)
                tools = sorted(set(comp.binaries.values()))
                _run(["go", "get", "-tool", *[f"{t}@{comp.version}" for t in tools]], work, log, env)
            where = comp.source or work
            ldflags = " ".join(["-s", "-w", *comp.ldflags])
            for name, pkg in comp.binaries.items():
                progress(f"  compiling {name} ...")
                base = _count_lines(log_path)

                def tick(elapsed: float, name: str = name, base: int = base) -> None:
                    # `go build -v` logs one line per package it compiles.
                    done = _count_lines(log_path) - base
                    progress(f"  still compiling {name}: {done} packages built, {elapsed / 60:.1f} min")

                _run(
                    ["go", "build", "-v", "-trimpath", "-ldflags", ldflags, "-o", str(tmp_bin / name), pkg],
                    where, log, env, tick,
                )
    except (subprocess.CalledProcessError, OSError) as exc:
        shutil.rmtree(tmp_bin, ignore_errors=True)
        tail = _tail(log_path, 15)
        raise BuildError(
            f"building {comp.name} {comp.version} ({comp.module}) failed: {exc}\n"
            f"log: {log_path}\n{tail}"
        ) from exc
    shutil.rmtree(bin_dir, ignore_errors=True)
    tmp_bin.rename(bin_dir)
    progress(f"built {comp.name} {comp.version} in {time.monotonic() - started:.0f}s")
    return bin_dir


def _tail(path: Path, n: int) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return ""


def build_all(names: Iterable[str] | None = None, *, progress: Callable[[str], None] = print) -> None:
    """Build the named components (by default all but the ``on_demand`` ones); raises BuildError on the first
    failure."""
    for name in names or [c.name for c in COMPONENTS.values() if not c.on_demand]:
        build(COMPONENTS[name], progress=progress)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    on_demand = [c.name for c in COMPONENTS.values() if c.on_demand]
    parser.add_argument("components", nargs="*", metavar="COMPONENT",
                        help=f"of {', '.join(COMPONENTS)}; default: all but {', '.join(on_demand)}")
    args = parser.parse_args(argv)
    unknown = [c for c in args.components if c not in COMPONENTS]
    if unknown:
        parser.error(f"unknown component(s) {', '.join(unknown)}; choose from {', '.join(COMPONENTS)}")
    try:
        build_all(args.components or None, progress=lambda m: print(m, flush=True))
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
