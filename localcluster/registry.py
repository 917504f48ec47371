"""A local OCI registry: distribution's ``registry`` (built by :mod:`localcluster.build`).

The local cluster runs one on 127.0.0.1, plain HTTP, without auth, storing
blobs in ``<state dir>/registry/``. Tests run further instances with htpasswd
basic auth and TLS (:func:`write_config` with ``htpasswd`` / ``tls``).

The configuration is distribution's YAML (``version: 0.1``; ``storage.filesystem``,
``http.addr``, ``http.tls``, ``auth.htpasswd``), written as JSON (valid YAML).
"""

from __future__ import annotations

import json
import os
import secrets
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from localcluster import build


@dataclass(frozen=True)
class Tls:
    """PEM files the registry serves HTTPS with."""

    cert: Path
    key: Path


@dataclass(frozen=True)
class Htpasswd:
    """A htpasswd file (bcrypt hashes, as distribution requires) and the realm it names."""

    path: Path
    realm: str = "helmdeck"


def write_config(
    path: Path, *, port: int, storage: Path, tls: Tls | None = None, htpasswd: Htpasswd | None = None,
) -> Path:
    """Write a registry configuration listening on ``127.0.0.1:port``; returns ``path`` (mode 0600).

    Deletes are enabled so tests can re-push tags; the HTTP secret is random per file.
    """
    http: dict[str, object] = {
        "addr": f"127.0.0.1:{port}",
        "secret": secrets.token_hex(16),
        "headers": {"X-Content-Type-Options": ["nosniff"]},
    }
    if tls is not None:
        http["tls"] = {"certificate": str(tls.cert), "key": str(tls.key)}
    config: dict[str, object] = {
        "version": 0.1,
        "log": {"level": "warn", "accesslog": {"disabled": True}},
        "storage": {"filesystem": {"rootdirectory": str(storage)}, "delete": {"enabled": True}},
        "http": http,
    }
    if htpasswd is not None:
        config["auth"] = {"htpasswd": {"realm": htpasswd.realm, "path": str(htpasswd.path)}}
    storage.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(config, fh, indent=2)
    return path


def command(config: Path) -> list[str]:
    """The command line that serves ``config``."""
    return [str(build.binary("registry")), "serve", str(config)]


def ping(port: int) -> bool:
    """True when a plain-HTTP registry answers ``GET /v2/`` on ``127.0.0.1:port``."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=2) as resp:
            return bool(resp.status == 200)
    except (OSError, urllib.error.URLError):
        return False
