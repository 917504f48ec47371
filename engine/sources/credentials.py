"""Credentials of a chart source, read from the Secrets its ``secretRef`` / ``certSecretRef`` name.

As Flux: ``secretRef`` holds ``username`` and ``password`` (or, for OCI, a
``.dockerconfigjson``); ``certSecretRef`` holds ``ca.crt`` and optionally
``tls.crt`` + ``tls.key`` (a client certificate). Values never reach a log or
a ``repr``; TLS material reaches files only through :func:`tls_files` (0600, removed).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import ssl
import tempfile
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.helm.cli import values_dir
from engine.sources.errors import CredentialsError
from engine.sources.verify import KeyReader

# (namespace, name) -> the Secret's data (decoded bytes), or None when there is no such Secret.
SecretReader = Callable[[str, str], Awaitable[Mapping[str, bytes] | None]]


@dataclass(frozen=True)
class Credentials:
    """Basic-auth user and password, and PEM TLS material; empty fields are unused."""

    username: str = ""
    password: str = field(default="", repr=False)
    ca_pem: bytes = b""
    cert_pem: bytes = b""
    key_pem: bytes = field(default=b"", repr=False)

    @property
    def basic(self) -> bool:
        return bool(self.username or self.password)

    @property
    def tls(self) -> bool:
        return bool(self.ca_pem or self.cert_pem)

    def authorization(self) -> str:
        """The ``Authorization`` header value for HTTP basic auth."""
        raw = f"{self.username}:{self.password}".encode()
        return "Basic " + base64.b64encode(raw).decode()

    def ssl_context(self) -> ssl.SSLContext:
        """A verifying client context trusting ``ca_pem`` (else the system CAs), with the client
        certificate when given."""
        ctx = ssl.create_default_context()
        if self.ca_pem:
            ctx.load_verify_locations(cadata=self.ca_pem.decode(errors="replace"))
        if self.cert_pem and self.key_pem:
            with tls_files(self) as files:
                ctx.load_cert_chain(str(files["cert"]), str(files["key"]))
        return ctx


@contextlib.contextmanager
def tls_files(creds: Credentials, directory: Path | None = None) -> Iterator[dict[str, Path]]:
    """Write the TLS material to 0600 files (keys ``ca``, ``cert``, ``key`` where present) in a private
    temporary folder (in ``directory``, default the helm runner's private folder); removed on exit."""
    folder = Path(tempfile.mkdtemp(prefix=f"tls-{os.getpid()}-", dir=directory or values_dir()))
    out: dict[str, Path] = {}
    try:
        for key, data in (("ca", creds.ca_pem), ("cert", creds.cert_pem), ("key", creds.key_pem)):
            if data:
                path = folder / f"{key}.pem"
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
                out[key] = path
        yield out
    finally:
        for path in out.values():
            path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            folder.rmdir()


async def load_credentials(
    reader: SecretReader | None, namespace: str, secret_ref: str, cert_secret_ref: str, *, host: str, what: str,
) -> Credentials:
    """Read the Secrets ``secret_ref`` and ``cert_secret_ref`` (names in ``namespace``; "" = none).

    ``host`` picks the entry of a ``.dockerconfigjson``; ``what`` names the repository in errors.
    Raises CredentialsError for a missing Secret or missing keys.
    """
    if not secret_ref and not cert_secret_ref:
        return Credentials()
    if reader is None:
        raise CredentialsError(f"{what}: secretRef needs access to the cluster's Secrets", repository=what)
    username = password = ""
    ca = cert = key = b""
    if secret_ref:
        data = await _read(reader, namespace, secret_ref, what)
        if ".dockerconfigjson" in data:
            username, password = _docker_auth(data[".dockerconfigjson"], host, namespace, secret_ref, what)
        elif "username" in data and "password" in data:
            username = data["username"].decode(errors="replace")
            password = data["password"].decode(errors="replace")
        else:
            raise CredentialsError(f"{what}: Secret {namespace}/{secret_ref} has neither username and password "
                                   "nor .dockerconfigjson", repository=what)
    if cert_secret_ref:
        data = await _read(reader, namespace, cert_secret_ref, what)
        ca, cert, key = data.get("ca.crt", b""), data.get("tls.crt", b""), data.get("tls.key", b"")
        if bool(cert) != bool(key):
            raise CredentialsError(f"{what}: Secret {namespace}/{cert_secret_ref} needs both tls.crt and tls.key",
                                   repository=what)
        if not (ca or cert):
            raise CredentialsError(f"{what}: Secret {namespace}/{cert_secret_ref} has no ca.crt nor tls.crt",
                                   repository=what)
    return Credentials(username, password, ca, cert, key)


async def _read(reader: SecretReader, namespace: str, name: str, what: str) -> Mapping[str, bytes]:
    data = await reader(namespace, name)
    if data is None:
        raise CredentialsError(f"{what}: Secret {namespace}/{name} does not exist", repository=what)
    return data


def _docker_auth(raw: bytes, host: str, namespace: str, name: str, what: str) -> tuple[str, str]:
    try:
        auths = json.loads(raw).get("auths") or {}
    except (ValueError, AttributeError):
        auths = None
    if not isinstance(auths, dict):
        raise CredentialsError(f"{what}: Secret {namespace}/{name}: .dockerconfigjson is not a docker config",
                               repository=what)
    for key, entry in auths.items():
        registry = str(key).removeprefix("https://").removeprefix("http://").split("/", 1)[0]
        if registry != host or not isinstance(entry, dict):
            continue
        if entry.get("username") is not None:
            return str(entry["username"]), str(entry.get("password", ""))
        if entry.get("auth"):
            user, _, password = base64.b64decode(str(entry["auth"])).decode(errors="replace").partition(":")
            return user, password
    raise CredentialsError(f"{what}: Secret {namespace}/{name}: .dockerconfigjson has no entry for {host}",
                           repository=what)


def kube_secret_reader(api_client: Any) -> SecretReader:
    """A SecretReader over a kubernetes ``ApiClient`` (calls run in a worker thread)."""
    from kubernetes.client.exceptions import ApiException

    from engine.kube import rest

    def read(namespace: str, name: str) -> Mapping[str, bytes] | None:
        try:
            secret = rest.get_json(api_client, rest.path("v1", "secrets", namespace, name))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise CredentialsError(f"cannot read Secret {namespace}/{name}: HTTP {exc.status}") from None
        data = secret.get("data") or {}
        return {str(k): base64.b64decode(str(v)) for k, v in data.items()} if isinstance(data, dict) else {}

    async def reader(namespace: str, name: str) -> Mapping[str, bytes] | None:
        return await asyncio.to_thread(read, namespace, name)

    return reader


def kube_key_reader(api_client: Any) -> KeyReader:
    """A :data:`~engine.sources.verify.KeyReader` over a kubernetes ``ApiClient``: a Secret read as the user
    named (Kubernetes impersonation, one client per user), or as ``api_client``'s own for ""."""
    from engine.kube.client import impersonating

    readers: dict[str, SecretReader] = {}

    async def reader(user: str, namespace: str, name: str) -> Mapping[str, bytes] | None:
        read = readers.get(user)
        if read is None:
            read = readers[user] = kube_secret_reader(impersonating(api_client, user) if user else api_client)
        return await read(namespace, name)

    return reader
