"""A Deployment's pod spec run with podman, as the kubelet would run it: the one translation of the fields the
controller's pod uses, so what runs follows the chart when it changes.

:func:`podman_run` reads, for one container: the image and ``imagePullPolicy``, ``command`` (the entrypoint)
and ``args``, ``env`` (plain values), the security context (the container's over the pod's: user and group,
``runAsNonRoot`` checked, ``readOnlyRootFilesystem``, dropped and added capabilities, ``allowPrivilegeEscalation``), the
``emptyDir`` volumes it mounts (tmpfs, ``sizeLimit`` as its size, world-writable as the kubelet makes them),
the ServiceAccount's token, ``ca.crt`` and ``namespace`` at ``/var/run/secrets/kubernetes.io/serviceaccount``
(read-only), ``KUBERNETES_SERVICE_HOST``/``_PORT``, the probes' ports (the host network: the container's ports
are the host's), and ``terminationGracePeriodSeconds`` (``podman stop -t``). A field it does not translate
and that changes how the container runs (``valueFrom``, another volume type, ``hostPath``) raises
:class:`Untranslatable` rather than being dropped.
"""

from __future__ import annotations

import json
import resource
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SERVICE_ACCOUNT_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
# Kubernetes' default terminationGracePeriodSeconds.
DEFAULT_GRACE = 30
_UNITS = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "k": 1000, "M": 10**6, "G": 10**9}


class Untranslatable(ValueError):
    """The pod spec asks for something this translation does not do; the message names the field."""


@dataclass(frozen=True)
class PodmanRun:
    """``podman run`` of one container: ``args`` (after ``podman run``, the image and its arguments last), the
    seconds ``podman stop -t`` gives it, and its probes as ``(kind, URL)`` on the host."""

    args: list[str]
    stop_timeout: int
    probes: dict[str, str] = field(default_factory=dict)


def quantity(text: str | int) -> int:
    """A Kubernetes quantity ("512Mi", "1G", 100) in bytes; raises Untranslatable for another form."""
    value = str(text)
    for suffix, factor in _UNITS.items():
        if value.endswith(suffix) and value[: -len(suffix)].isdigit():
            return int(value[: -len(suffix)]) * factor
    if value.isdigit():
        return int(value)
    raise Untranslatable(f"quantity {value!r}: not a whole number of Ki, Mi, Gi, k, M or G")


def host_ulimits() -> list[str]:
    """The ``--ulimit`` flags this machine's runc accepts: podman's defaults (a million open files, unlimited
    processes) are refused inside a container whose own limits are lower, so the files limit is this process's
    hard limit and processes are capped at 1000."""
    _, files = resource.getrlimit(resource.RLIMIT_NOFILE)
    return ["--ulimit", f"nofile={files}:{files}", "--ulimit", "nproc=1000:1000"]


def _security(pod: dict[str, Any], ctr: dict[str, Any]) -> list[str]:
    merged = {**(pod.get("securityContext") or {}), **(ctr.get("securityContext") or {})}
    out: list[str] = []
    user, group = merged.get("runAsUser"), merged.get("runAsGroup")
    if merged.get("runAsNonRoot") and user in (None, 0):
        raise Untranslatable("securityContext.runAsNonRoot is true but runAsUser is not a non-zero uid "
                             "(the kubelet would check the image's user; give runAsUser)")
    if user is not None:
        out += ["--user", f"{user}:{group}" if group is not None else str(user)]
    if merged.get("fsGroup") is not None:
        out += ["--group-add", str(merged["fsGroup"])]
    if merged.get("readOnlyRootFilesystem"):
        out += ["--read-only", "--read-only-tmpfs=false"]  # no /tmp, /run tmpfs a pod would not have
    caps = merged.get("capabilities") or {}
    out += [a for c in caps.get("drop") or [] for a in ("--cap-drop", c)]
    out += [a for c in caps.get("add") or [] for a in ("--cap-add", c)]
    if merged.get("allowPrivilegeEscalation") is False:
        out += ["--security-opt", "no-new-privileges"]
    profile = (merged.get("seccompProfile") or {}).get("type")
    if profile not in (None, "RuntimeDefault"):  # podman's default profile is the runtime's default
        raise Untranslatable(f"securityContext.seccompProfile.type {profile!r}")
    return out


def _volumes(pod: dict[str, Any], ctr: dict[str, Any]) -> list[str]:
    volumes = {v["name"]: v for v in pod.get("volumes") or []}
    out: list[str] = []
    for mount in ctr.get("volumeMounts") or []:
        volume = volumes[mount["name"]]
        if set(volume) != {"name", "emptyDir"} or (volume["emptyDir"] or {}).get("medium") not in (None, ""):
            raise Untranslatable(f"volume {mount['name']!r}: only emptyDir volumes are translated")
        options = ["rw" if not mount.get("readOnly") else "ro", "mode=1777"]
        limit = (volume["emptyDir"] or {}).get("sizeLimit")
        if limit is not None:
            options.append(f"size={quantity(limit)}")
        out += ["--tmpfs", f"{mount['mountPath']}:{','.join(options)}"]
    return out


def _env(ctr: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for var in ctr.get("env") or []:
        if "value" not in var:
            raise Untranslatable(f"env {var['name']!r}: only plain values are translated (not valueFrom)")
        out += ["--env", f"{var['name']}={var['value']}"]
    return out


def _probes(ctr: dict[str, Any], host: str) -> dict[str, str]:
    ports = {p["name"]: p["containerPort"] for p in ctr.get("ports") or [] if "name" in p}
    found: dict[str, str] = {}
    for kind in ("livenessProbe", "readinessProbe", "startupProbe"):
        get = (ctr.get(kind) or {}).get("httpGet")
        if get is not None:
            port = ports[get["port"]] if isinstance(get["port"], str) else get["port"]
            found[kind] = f"http://{host}:{port}{get.get('path', '/')}"
    return found


def podman_run(pod: dict[str, Any], *, name: str, service_account_dir: Path, api_server: tuple[str, int],
               container: str | None = None, image: str | None = None) -> PodmanRun:
    """``podman run`` arguments for ``container`` (default: the only one) of pod spec ``pod`` (a Deployment's
    ``spec.template.spec``), named ``name``, on the host network, with ``service_account_dir`` (token, ca.crt,
    namespace: as the kubelet projects them) mounted at :data:`SERVICE_ACCOUNT_MOUNT` and
    ``KUBERNETES_SERVICE_HOST``/``_PORT`` naming ``api_server``. ``image`` replaces the spec's (e.g. the same
    image by another name). Raises Untranslatable, KeyError for a volume or port the spec names but lacks."""
    containers = {c["name"]: c for c in pod["containers"]}
    if container is None:
        [ctr] = containers.values()
    else:
        ctr = containers[container]
    args = ["--name", name, "--network", "host", *host_ulimits(), *_security(pod, ctr), *_volumes(pod, ctr),
            "--volume", f"{service_account_dir}:{SERVICE_ACCOUNT_MOUNT}:ro",
            "--env", f"KUBERNETES_SERVICE_HOST={api_server[0]}", "--env", f"KUBERNETES_SERVICE_PORT={api_server[1]}",
            *_env(ctr)]
    pull = {"Always": "always", "IfNotPresent": "missing", "Never": "never"}[ctr.get("imagePullPolicy", "IfNotPresent")]
    args += ["--pull", pull]
    grace = int(pod.get("terminationGracePeriodSeconds", DEFAULT_GRACE))
    args += ["--stop-timeout", str(grace)]
    if ctr.get("command"):  # as the kubelet: command replaces the image's ENTRYPOINT (and its CMD goes)
        args += ["--entrypoint", json.dumps(ctr["command"])]
    # With the host network the container's ports are the host's.
    return PodmanRun([*args, image or ctr["image"], *(ctr.get("args") or [])], grace, _probes(ctr, "127.0.0.1"))
