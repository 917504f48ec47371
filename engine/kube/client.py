"""Kubernetes client construction with kubectl's kubeconfig and context rules.

``--kubeconfig`` wins, else ``$KUBECONFIG`` (a path list, merged), else
``~/.kube/config``; ``--context`` wins over the file's current-context.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import yaml
from kubernetes import client, config
from kubernetes.config import incluster_config
from kubernetes.config.config_exception import ConfigException


class KubeConfigError(RuntimeError):
    """The kubeconfig could not be loaded; the message names the file and context."""


@dataclass(frozen=True)
class KubeTarget:
    """Which cluster to talk to: kubeconfig path (None = kubectl's default) and context."""

    kubeconfig: Path | None = None
    context: str | None = None

    def helm_args(self) -> list[str]:
        """The same selection as helm CLI flags."""
        args: list[str] = []
        if self.kubeconfig is not None:
            args += ["--kubeconfig", str(self.kubeconfig)]
        if self.context:
            args += ["--kube-context", self.context]
        return args

    def describe(self) -> str:
        source = str(self.kubeconfig) if self.kubeconfig else os.environ.get("KUBECONFIG", "~/.kube/config")
        return f"{self.context or 'current context'} ({source})"


def current_context(target: KubeTarget) -> str:
    """Name of the context ``target`` selects; raises KubeConfigError."""
    if target.context:
        return target.context
    try:
        _, active = config.list_kube_config_contexts(  # type: ignore[no-untyped-call]
            config_file=str(target.kubeconfig) if target.kubeconfig else None
        )
    except (ConfigException, OSError) as exc:
        raise KubeConfigError(f"cannot read kubeconfig {target.describe()}: {exc}") from exc
    return str(active.get("name", "")) if active else ""


def contexts(target: KubeTarget) -> list[str]:
    """The names of every context in ``target``'s kubeconfig, in file order; raises KubeConfigError."""
    try:
        found, _ = config.list_kube_config_contexts(  # type: ignore[no-untyped-call]
            config_file=str(target.kubeconfig) if target.kubeconfig else None
        )
    except (ConfigException, OSError) as exc:
        raise KubeConfigError(f"cannot read kubeconfig {target.describe()}: {exc}") from exc
    return [str(c.get("name", "")) for c in found or [] if c.get("name")]


def context_namespace(target: KubeTarget) -> str:
    """The namespace ``target``'s context names, ``default`` when it names none (as kubectl and helm).

    Raises KubeConfigError when the kubeconfig cannot be read or has no such context.
    """
    try:
        contexts, active = config.list_kube_config_contexts(  # type: ignore[no-untyped-call]
            config_file=str(target.kubeconfig) if target.kubeconfig else None
        )
    except (ConfigException, OSError) as exc:
        raise KubeConfigError(f"cannot read kubeconfig {target.describe()}: {exc}") from exc
    chosen = next((c for c in contexts if c.get("name") == target.context), None) if target.context else active
    if chosen is None:
        raise KubeConfigError(f"kubeconfig {target.describe()} has no context {target.context!r}")
    return str((chosen.get("context") or {}).get("namespace") or "default")


def api_client(target: KubeTarget) -> client.ApiClient:
    """A new ApiClient for ``target``; raises KubeConfigError naming file and context."""
    try:
        api: Any = config.new_client_from_config(  # type: ignore[no-untyped-call]
            config_file=str(target.kubeconfig) if target.kubeconfig else None,
            context=target.context,
        )
        return cast(client.ApiClient, api)
    except (ConfigException, OSError, TypeError) as exc:
        raise KubeConfigError(f"cannot load kubeconfig {target.describe()}: {exc}") from exc


@functools.lru_cache(maxsize=64)
def impersonating(api: client.ApiClient, user: str) -> client.ApiClient:
    """A client of ``api``'s cluster and credentials that acts as ``user`` (Kubernetes impersonation:
    the ``Impersonate-User`` header, as kubectl's ``--as``); one per (client, user), kept. The
    credentials need the ``impersonate`` verb on that user."""
    out: Any = client.ApiClient(configuration=api.configuration)
    out.default_headers.update({**api.default_headers, "Impersonate-User": user})
    return cast(client.ApiClient, out)


def watch_lines(resp: Any) -> Iterator[bytes]:
    """The JSON lines of a streamed watch response (a urllib3 response opened without preloading).

    The watch stream is chunked; one chunk may hold several events or part of one.
    """
    buf = b""
    for chunk in resp.stream(amt=None, decode_content=False):
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            if line.strip():
                yield line
    if buf.strip():
        yield buf


SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


def in_cluster_kubeconfig(out: Path, token_dir: Path = SERVICE_ACCOUNT_DIR) -> KubeTarget:
    """Cluster access from inside a pod, as a kubeconfig helm and this client both read: the kubernetes
    package's in-cluster loader checks ``KUBERNETES_SERVICE_HOST``/``_PORT`` and reads ``token`` and ``ca.crt``
    of ``token_dir`` (the ServiceAccount's mount; tests give another), and ``out`` (written 0600) names the
    server, the CA file and the token *file*, so a rotated projected token is read again (client-go and the
    Python client both follow ``tokenFile``). Raises KubeConfigError naming what is missing."""
    loader = incluster_config.InClusterConfigLoader(  # type: ignore[no-untyped-call]
        token_filename=str(token_dir / "token"), cert_filename=str(token_dir / "ca.crt"))
    cfg = client.Configuration()
    try:
        loader.load_and_set(cfg)  # type: ignore[no-untyped-call]
    except (ConfigException, OSError) as exc:
        raise KubeConfigError(f"no in-cluster config ({token_dir}): {exc}") from exc
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": "in-cluster",
           "clusters": [{"name": "in-cluster", "cluster": {"server": cfg.host,
                                                            "certificate-authority": str(token_dir / "ca.crt")}}],
           "users": [{"name": "service-account", "user": {"tokenFile": str(token_dir / "token")}}],
           "contexts": [{"name": "in-cluster", "context": {"cluster": "in-cluster", "user": "service-account"}}]}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.touch(mode=0o600, exist_ok=True)
    out.write_text(yaml.safe_dump(doc))
    return KubeTarget(out)


def controller_target(kubeconfig: Path | None, context: str | None, private: Path,
                      token_dir: Path = SERVICE_ACCOUNT_DIR) -> tuple[KubeTarget, str]:
    """Where a controller finds its cluster, in controller-runtime's order (``pkg/client/config/config.go``,
    ``loadConfig`` behind ``GetConfig``, as Flux's controllers and kubebuilder operators find it):
    ``kubeconfig`` (``--kubeconfig``), else ``$KUBECONFIG`` (a path list, merged as kubectl merges it), else
    in-cluster config (:func:`in_cluster_kubeconfig`, written as ``private/kubeconfig``), else
    ``~/.kube/config`` when it exists. ``context`` selects a kubeconfig's context; in-cluster config has
    none, so there it is left out (as controller-runtime does), which the description says.

    Returns the target and which source it is, for the log (e.g. ``$KUBECONFIG (/path)``). Raises
    KubeConfigError naming every source tried when none serves.
    """
    if kubeconfig is not None:
        return KubeTarget(kubeconfig, context), f"--kubeconfig {kubeconfig}"
    if os.environ.get("KUBECONFIG"):
        return KubeTarget(None, context), f"$KUBECONFIG ({os.environ['KUBECONFIG']})"
    try:
        target = in_cluster_kubeconfig(private / "kubeconfig", token_dir)
    except KubeConfigError as exc:
        why = str(exc).rstrip(".")
        home = Path.home() / ".kube" / "config"
        if home.is_file():
            return KubeTarget(home, context), f"~/.kube/config ({home}; {why})"
        raise KubeConfigError(f"no cluster to talk to: no --kubeconfig, $KUBECONFIG is not set, {why}, and "
                              f"no {home}") from exc
    ignored = f"; --context {context} left out" if context else ""
    return target, f"in-cluster config ({token_dir}){ignored}"


def pod_namespace(token_dir: Path = SERVICE_ACCOUNT_DIR) -> str | None:
    """The namespace of the pod's ServiceAccount (its mount's ``namespace`` file), None outside a pod."""
    try:
        return (token_dir / "namespace").read_text().strip() or None
    except OSError:
        return None
