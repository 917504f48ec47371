"""``cosign verify`` of an OCI chart with public keys: an OCIRepository's ``spec.verify`` (Flux's ``provider:
cosign`` with a ``secretRef``), run with the real cosign binary.

Each run sees only a private 0700 folder (:func:`engine.sources.helm_pull.workspace`), removed afterwards:
the public keys as 0600 files (:func:`engine.sources.verify.key_files`: a key reaches cosign by path, never on
its command line), the registry's credentials as docker's ``config.json`` (``DOCKER_CONFIG``), the registry's CA
as ``SSL_CERT_FILE``, and cosign's own homes (``HOME``, ``TUF_ROOT``). The user's environment reaches it only
through ``PATH`` and the proxy variables.

What is checked: a signature stored with the manifest (cosign's ``sha256-<digest>.sig`` tag) verifies with one of
the keys, and its payload names that manifest digest (cosign's claims check), so content pushed again under a
tag has no signature until someone with the key signs it. What is not: the transparency log
(``--insecure-ignore-tlog``: no Rekor instance is reachable from here, and a ``cosign sign --tlog-upload=false``
signature has no entry), and keyless signatures (the loader refuses ``matchOIDCIdentity``).

As Flux's source-controller, the keys are tried one after the other (here sorted by name), and the first that
verifies names the signer.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from collections.abc import Mapping
from pathlib import Path

from engine.base import tools
from engine.sources.credentials import Credentials, tls_files
from engine.sources.errors import SourceUnreachable
from engine.sources.helm_pull import registry_config, run_tool, transport_failure, workspace, write_private
from engine.sources.verify import COSIGN, FAILED, VERIFIED, KeySet, Verification, VerifyError, clip, key_files

ENV_VAR = "HELMDECK_COSIGN"
EMPTY_ROOT = '{"mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1"}'
_PASSED = ("PATH", "HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "https_proxy", "http_proxy", "no_proxy")


def find_cosign(env: Mapping[str, str] | None = None) -> Path:
    """The cosign binary: ``$HELMDECK_COSIGN``, then helmdeck's pinned build, then ``cosign`` on ``PATH``
    (:func:`engine.base.tools.locate`). Raises ToolMissing."""
    return tools.locate("cosign", ENV_VAR, tools.cosign(), needed_by="spec.verify (provider cosign)", env=env,
                        fix=f"run `python -m localcluster.build cosign` (make test does), set ${ENV_VAR}, "
                            "or install cosign v2")


def fingerprint(pem: bytes) -> str:
    """``SHA256:<hex>`` of a PEM public key's DER bytes (its SubjectPublicKeyInfo, as ``openssl pkey -pubin
    -outform DER | sha256sum``); of the bytes themselves when they are not PEM."""
    body = b"".join(ln.strip() for ln in pem.splitlines() if ln.strip() and not ln.startswith(b"-----"))
    try:
        der = base64.b64decode(body, validate=True) if body else pem
    except (binascii.Error, ValueError):
        der = pem
    return f"SHA256:{hashlib.sha256(der).hexdigest()}"


def cosign_message(text: str) -> str:
    """cosign's own error from its output (its ``Error:`` lines, else the last line), without its warnings (the
    skipped transparency log, said at every run)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("WARNING")]
    errors = [ln.removeprefix("Error:").strip() for ln in lines if ln.startswith("Error:")]
    return "; ".join(errors) if errors else (lines[-1] if lines else "no output")


async def verify_cosign(
    *, location: str, digest: str, keys: KeySet, secret: str, creds: Credentials, plain_http: bool, timeout: float,
    what: str,
) -> Verification:
    """``cosign verify --key <0600 file>`` of ``<location>@<digest>`` (``location``: ``host/repository``) with
    each key of ``keys`` in turn until one verifies. Returns Verified (``identity``: the key's name in
    ``secret``, ``namespace/name``, and its fingerprint) or Failed (cosign's message for each key).

    Raises VerifyError when cosign cannot run (not found, a client certificate it cannot present), and
    SourceUnreachable / SourceAuthFailed when the registry cannot be reached or refuses access (not the
    artifact's fault: nothing is kept)."""
    try:
        binary = find_cosign()
    except tools.ToolMissing as exc:
        raise VerifyError(f"{what}: {exc}", repository=what) from None
    if creds.cert_pem:
        raise VerifyError(f"{what}: cosign cannot present the client certificate of spec.certSecretRef; verify "
                          "from a registry that does not ask for one", repository=what)
    image = f"{location}@{digest}"
    failures = []
    with workspace() as folder, tls_files(creds, folder) as tls, key_files(keys, folder) as files:
        (folder / "docker").mkdir(mode=0o700)
        write_private(folder / "docker" / "config.json", registry_config(creds, location.split("/", 1)[0]))
        # An empty trusted root: a key needs no Fulcio, Rekor or CT material, and cosign fetches none (without one
        # it asks Sigstore's TUF repository first).
        (folder / "trusted_root.json").write_text(EMPTY_ROOT)
        env = {k: v for k, v in os.environ.items() if k in _PASSED}
        env.update(HOME=str(folder), DOCKER_CONFIG=str(folder / "docker"), TUF_ROOT=str(folder / "tuf"))
        if "ca" in tls:
            env["SSL_CERT_FILE"] = str(tls["ca"])
        plain = ["--allow-http-registry"] if plain_http else []
        for name, path in sorted(files.items()):
            args = ["verify", "--key", str(path), "--insecure-ignore-tlog=true", "--offline=true", "--trusted-root",
                    str(folder / "trusted_root.json"), *plain, image]
            try:
                code, out, err = await run_tool(str(binary), args, env, timeout)
            except OSError as exc:
                raise VerifyError(f"{what}: cannot run cosign ({exc})", repository=what) from None
            except TimeoutError:
                raise SourceUnreachable(f"{what}: cosign verify of {image} took longer than {timeout:g}s",
                                        repository=what) from None
            if code == 0:
                identity = f"key {name} of Secret {secret} ({fingerprint(keys.files[name])})"
                return Verification(COSIGN, VERIFIED, identity=identity, artifact_digest=digest,
                                    keys_digest=keys.digest)
            said = cosign_message(err or out)
            failed = transport_failure(said)
            if failed is not None:
                raise failed(f"{what}: cosign verify of {image}: {said}", repository=what)
            failures.append(f"{name}: {said}")
    return Verification(COSIGN, FAILED, message=clip(f"no cosign signature of {digest} verifies with the keys of "
                                                     f"Secret {secret} ({'; '.join(failures)})"),
                        artifact_digest=digest, keys_digest=keys.digest)
