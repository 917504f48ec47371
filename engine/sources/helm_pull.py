"""``helm pull`` with helmdeck's own helm configuration.

Every pull runs in a private temporary folder (mode 0700, inside the helm
runner's private folder, removed afterwards) that holds the only helm
configuration the run sees: ``HELM_REPOSITORY_CONFIG`` (one repository entry,
with its credentials, mode 0600), ``HELM_REPOSITORY_CACHE`` (the index helmdeck
already fetched, so helm does not fetch it again), ``HELM_REGISTRY_CONFIG`` (the
registry's credentials, 0600) and helm's cache and config homes.
The user's ``~/.config/helm`` is never read or written, and no credential is on a
command line.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from engine.helm import Helm
from engine.helm.cli import values_dir
from engine.sources.credentials import Credentials, tls_files
from engine.sources.errors import PullFailed, SourceAuthFailed, SourceError, SourceUnreachable
from engine.sources.index import IndexEntry
from engine.sources.verify import KeySet, key_files

_REPO_NAME = "helmdeck-source"
_AUTH = re.compile(r"\b(401|403)\b|unauthorized|forbidden|authentication required|denied", re.I)
_NET = re.compile(r"connection refused|no such host|i/o timeout|timeout|dial tcp|tls:|x509:|"
                  r"server gave HTTP response to HTTPS client|EOF", re.I)
_SWEPT: set[Path] = set()


def _private_dir() -> Path:
    base = values_dir()
    if base not in _SWEPT:
        _SWEPT.add(base)
        for stale in base.glob("pull-*"):
            pid = stale.name.split("-")[1]
            if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                shutil.rmtree(stale, ignore_errors=True)  # left by a killed helmdeck: may hold credentials
    return Path(tempfile.mkdtemp(prefix=f"pull-{os.getpid()}-", dir=base))


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to a new 0600 file ``path`` (credentials: never readable by others, not even briefly)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)


@contextlib.contextmanager
def workspace() -> Iterator[Path]:
    """A private 0700 folder for one run of a tool (helm, cosign) and its credentials, inside the helm runner's
    private folder; removed afterwards (and, left by a killed helmdeck, at the next process's first run)."""
    folder = _private_dir()
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _env(folder: Path) -> dict[str, str]:
    return {
        "HELM_REPOSITORY_CONFIG": str(folder / "repositories.yaml"),
        "HELM_REPOSITORY_CACHE": str(folder / "repository"),
        "HELM_REGISTRY_CONFIG": str(folder / "registry.json"),
        "HELM_CONFIG_HOME": str(folder / "config"),
        "HELM_CACHE_HOME": str(folder / "cache"),
        "HELM_DATA_HOME": str(folder / "data"),
        "HELM_CONTENT_CACHE": str(folder / "content"),
    }


async def run_tool(binary: str, args: Sequence[str], env: Mapping[str, str], timeout: float) -> tuple[int, str, str]:
    """Run ``binary`` (helm, cosign) with only ``env``, no stdin, in a session of its own: its return code, stdout
    and stderr. Killed on cancellation or past ``timeout`` seconds (TimeoutError); OSError when it cannot start."""
    proc = await asyncio.create_subprocess_exec(
        binary, *args, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env=dict(env), start_new_session=True)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except (TimeoutError, asyncio.CancelledError):
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        raise
    return proc.returncode or 0, out.decode(errors="replace"), err.decode(errors="replace")


async def _run(helm: Helm, args: Sequence[str], env: Mapping[str, str], timeout: float, what: str) -> str:
    """Run helm; its output is classified into SourceAuthFailed / SourceUnreachable / PullFailed."""
    try:
        code, out, err = await run_tool(helm.binary, args, {**os.environ, **helm.env, **env}, timeout)
    except OSError as exc:
        raise PullFailed(f"{what}: cannot run helm ({exc})", repository=what) from exc
    if code == 0:
        return out
    text = (err or out).strip()
    lines = [ln.removeprefix("Error:").strip() for ln in text.splitlines() if ln.strip()]
    message = f"{what}: helm {args[0]} failed: {lines[-1] if lines else 'exit ' + str(code)}"
    raise (transport_failure(text) or PullFailed)(message, repository=what)


def transport_failure(text: str) -> type[SourceError] | None:
    """SourceAuthFailed or SourceUnreachable when a tool's output (helm's, cosign's) says the repository refused
    access or could not be reached; None when the failure is something else."""
    if _AUTH.search(text):
        return SourceAuthFailed
    if _NET.search(text):
        return SourceUnreachable
    return None


def _single_archive(folder: Path, what: str) -> Path:
    found = [p for p in folder.iterdir() if p.suffix == ".tgz"]  # (a verified pull leaves the .prov too)
    if len(found) != 1:
        raise PullFailed(f"{what}: helm pull left {len(found)} archives", repository=what)
    return found[0]


async def pull_http(
    helm: Helm, *, url: str, entry: IndexEntry, creds: Credentials, pass_credentials: bool, dest: Path,
    timeout: float, what: str, keys: KeySet | None = None,
) -> str:
    """``helm pull helmdeck-source/<chart> --version <version>`` of the index ``entry`` helmdeck resolved,
    from the repository at ``url``. The archive is moved to ``dest`` (a file path); returns helm's output.

    With ``keys`` (a ``pubring.gpg`` key set), ``--verify --keyring <0600 file>``: helm fetches the chart's
    ``.prov`` next to it and checks its signature and the archive's hash, and says who signed; a failed
    check raises PullFailed with helm's message and moves nothing to ``dest``."""
    with workspace() as folder, tls_files(creds, folder) as tls, \
            key_files(keys or KeySet({}, ""), folder) as keyring:
        repo: dict[str, object] = {"name": _REPO_NAME, "url": url, "pass_credentials_all": pass_credentials}
        if creds.basic:
            repo.update(username=creds.username, password=creds.password)
        for key, field in (("ca", "caFile"), ("cert", "certFile"), ("key", "keyFile")):
            if key in tls:
                repo[field] = str(tls[key])
        # JSON is YAML: repositories.yaml without a YAML writer.
        write_private(folder / "repositories.yaml", json.dumps({"apiVersion": "", "repositories": [repo]}))
        # An index of the one resolved version, so helm neither fetches nor parses the whole index again.
        one = {"apiVersion": "v1", "entries": {entry.name: [{
            "apiVersion": "v2", "name": entry.name, "version": entry.version, "urls": list(entry.urls),
            **({"digest": entry.digest} if entry.digest else {}),
        }]}}
        (folder / "repository").mkdir(mode=0o700)
        (folder / "repository" / f"{_REPO_NAME}-index.yaml").write_text(json.dumps(one))
        out = folder / "out"
        out.mkdir()
        verify = ["--verify", "--keyring", str(keyring["pubring.gpg"])] if "pubring.gpg" in keyring else []
        said = await _run(helm, ["pull", f"{_REPO_NAME}/{entry.name}", "--version", entry.version, *verify,
                                 "-d", str(out)], _env(folder), timeout, what)
        shutil.move(_single_archive(out, what), dest)
    return said


async def pull_oci(
    helm: Helm, *, location: str, digest: str, creds: Credentials, plain_http: bool, dest: Path, timeout: float,
    what: str,
) -> Path:
    """``helm pull oci://<location>@<digest>``, the credentials in helmdeck's registry config.
    The archive is moved to ``dest``; returns ``dest``."""
    host = location.split("/", 1)[0]
    with workspace() as folder, tls_files(creds, folder) as tls:
        tls_args: list[str] = []
        for key, flag in (("ca", "--ca-file"), ("cert", "--cert-file"), ("key", "--key-file")):
            if key in tls:
                tls_args += [flag, str(tls[key])]
        plain = ["--plain-http"] if plain_http else []
        env = _env(folder)
        # The registry config helm's login would write (docker's format), written directly: `helm registry
        # login` takes the password on stdin but the user name only as an argument.
        write_private(folder / "registry.json", registry_config(creds, host))
        out = folder / "out"
        out.mkdir()
        await _run(helm, ["pull", f"oci://{location}@{digest}", *tls_args, *plain, "-d", str(out)],
                   env, timeout, what)
        shutil.move(_single_archive(out, what), dest)
    return dest


def registry_config(creds: Credentials, host: str) -> str:
    """Docker's config.json (``{"auths": {host: {"auth": base64(user:password)}}}``) with ``creds`` for ``host``:
    what helm's registry config and cosign's ``$DOCKER_CONFIG`` read."""
    auths = {host: {"auth": creds.authorization().removeprefix("Basic ")}} if creds.basic else {}
    return json.dumps({"auths": auths})


def signer(output: str) -> str:
    """Who signed, from ``helm pull --verify``'s output (``Signed by: <user ID>`` lines and ``Using Key With
    Fingerprint: <hex>``): ``Name <mail>, key <fingerprint>``; "" when helm said neither."""
    names = [ln.split(":", 1)[1].strip() for ln in output.splitlines() if ln.startswith("Signed by:")]
    prints = [ln.split(":", 1)[1].strip() for ln in output.splitlines() if ln.startswith("Using Key With Fingerprint:")]
    who = ", ".join(n for n in names if n)
    key = f"key {prints[0]}" if prints and prints[0] else ""
    return f"{who}, {key}" if who and key else who or key
