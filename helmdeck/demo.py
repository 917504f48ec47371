"""The demo's chart sources: the example charts published to the local cluster's OCI registry and to an
HTTP chart repository, and the packages folder that pulls from them.

:func:`start_sources` (``helmdeck demo`` calls it once the cluster is up):

1. packages each chart of ``examples/charts`` (``helm package``) into ``<cluster dir>/demo/repo/``,
   once per chart version, and web a second time at a newer version (:data:`NEWER`);
2. indexes that folder (``helm repo index``, relative URLs, only when a chart was added) and serves it
   on 127.0.0.1 from a thread of the demo's process (:class:`localcluster.chartrepo.ChartRepoServer`),
   on the port it had last time when free, until :meth:`DemoSources.stop` (at the demo's exit); its URL is
   recorded in ``<cluster dir>/chartrepo.json``, which ``helmdeck cluster status`` shows while the demo lives;
3. pushes each archive to ``oci://<registry>/helmdeck-demo/<chart>`` (``helm push --plain-http``) unless
   the registry already has that version's tag;
4. copies the examples (``charts/``, ``values/``, ``packages/`` and the packages of ``sources/``) to
   ``<cluster dir>/demo/examples/`` and writes ``packages/repositories.yaml`` there: the HelmRepository
   ``demo-charts`` and the OCIRepository ``demo-web`` with this run's URLs (ports are chosen at start,
   so the packages find them through that file; the package files themselves name no URL).

helm runs with helmdeck's own configuration under ``<cluster dir>/demo/helm/`` (``HELM_CONFIG_HOME``,
``HELM_REGISTRY_CONFIG``, ...), never the user's. Re-runs publish nothing new and leave the copied files
as they are when unchanged: the demo packages do not upgrade because the demo restarted. A copied file the
operator edited or deleted is kept so (``.demo-written.json`` in the copy records what the demo wrote).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from engine.base.wire import API_VERSION
from localcluster.chartrepo import ChartRepoServer

NAMESPACE = "helmdeck-demo"  # the examples' namespace; also the path of the charts in the registry
INTERVAL = "30s"  # the demo repositories' spec.interval
# Charts also published at a newer (version, appVersion): web 0.3.0 is outside web-oci's range ~0.2, so its row
# shows the newer-version marker and the version picker (v) has two versions to pick from.
NEWER = {"web": ("0.3.0", "1.28")}


class DemoError(RuntimeError):
    """Publishing the example charts failed; the message names the step and helm's last output."""


@dataclass
class DemoSources:
    """The demo's running chart sources: ``packages`` is the folder to reconcile, ``charts_url`` the HTTP
    repository, ``registry`` the OCI registry (``host:port``); ``pushed`` / ``packaged`` list what this
    start published (empty on a re-run)."""

    packages: Path
    charts_url: str
    registry: str
    server: ChartRepoServer
    packaged: list[str] = field(default_factory=list)
    pushed: list[str] = field(default_factory=list)

    def stop(self) -> None:
        self.server.stop()


def helm_env(home: Path) -> dict[str, str]:
    """helmdeck's own helm configuration under ``home`` (the user's ``~/.config/helm`` is never read)."""
    return {
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_DATA_HOME": str(home / "data"),
        "HELM_REGISTRY_CONFIG": str(home / "config" / "registry" / "config.json"),
        "HELM_REPOSITORY_CONFIG": str(home / "config" / "repositories.yaml"),
        "HELM_REPOSITORY_CACHE": str(home / "cache" / "repository"),
    }


def _helm(helm: str, env: dict[str, str], *args: str) -> str:
    proc = subprocess.run([helm, *args], capture_output=True, text=True, env={**os.environ, **env}, timeout=120,
                          check=False)
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-5:])
        raise DemoError(f"helm {args[0]} {args[1] if len(args) > 1 else ''} failed: {tail}")
    return proc.stdout


def chart_dirs(charts: Path) -> list[tuple[str, str, Path]]:
    """``(name, version, directory)`` of each chart under ``charts``, by name."""
    out = []
    for chart_yaml in sorted(charts.glob("*/Chart.yaml")):
        meta = yaml.safe_load(chart_yaml.read_text())
        out.append((str(meta["name"]), str(meta["version"]), chart_yaml.parent))
    return out


def published(charts: Path) -> list[tuple[str, str, Path, str]]:
    """``(name, version, directory, appVersion)`` of every archive the demo publishes: each chart of ``charts``
    at its own version (appVersion ``""``: the chart's), then the :data:`NEWER` ones."""
    own = [(name, version, directory, "") for name, version, directory in chart_dirs(charts)]
    return own + [(name, NEWER[name][0], directory, NEWER[name][1]) for name, _, directory, _ in own if name in NEWER]


def package_charts(helm: str, env: dict[str, str], charts: Path, repo: Path) -> tuple[list[Path], list[str]]:
    """Every archive of :func:`published` packaged into ``repo`` (once per version); returns the archives and
    the ``name-version`` of those packaged now."""
    repo.mkdir(parents=True, exist_ok=True)
    archives, made = [], []
    for name, version, directory, app_version in published(charts):
        archive = repo / f"{name}-{version}.tgz"
        if not archive.is_file():
            again = ["--version", version, "--app-version", app_version] if app_version else []
            _helm(helm, env, "package", str(directory), "-d", str(repo), *again)
            made.append(f"{name}-{version}")
        archives.append(archive)
    return archives, made


def oci_tags(registry: str, repository: str) -> list[str]:
    """The tags of ``repository`` in the plain-HTTP ``registry`` (none when it does not exist)."""
    try:
        with urllib.request.urlopen(f"http://{registry}/v2/{repository}/tags/list", timeout=10) as resp:
            return list(json.load(resp).get("tags") or [])
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return []
        raise DemoError(f"registry {registry}: {exc}") from None
    except (OSError, ValueError) as exc:
        raise DemoError(f"registry {registry}: {exc}") from None


def push_charts(helm: str, env: dict[str, str], archives: list[Path], registry: str) -> list[str]:
    """Push each archive to ``oci://<registry>/helmdeck-demo`` unless its version's tag is there; returns
    the ``name:version`` pushed."""
    pushed = []
    for archive in archives:
        name, _, version = archive.name.removesuffix(".tgz").rpartition("-")
        if version.replace("+", "_") in oci_tags(registry, f"{NAMESPACE}/{name}"):
            continue
        _helm(helm, env, "push", str(archive), f"oci://{registry}/{NAMESPACE}", "--plain-http")
        pushed.append(f"{name}:{version}")
    return pushed


def repositories_yaml(charts_url: str, registry: str) -> str:
    """The demo's source documents, with this run's endpoints."""
    head = f"apiVersion: {API_VERSION}\nmetadata: {{name: %s, namespace: {NAMESPACE}}}\n"
    return (
        "# Written by `helmdeck demo` at each start: the chart sources of this run (ports are chosen at start).\n"
        + head % "demo-charts" + f"kind: HelmRepository\nspec: {{url: '{charts_url}', interval: {INTERVAL}}}\n"
        + "---\n"
        + head % "demo-web" + "kind: OCIRepository\n"
        f"spec:\n  url: oci://{registry}/{NAMESPACE}/web\n  ref: {{semver: '~0.2'}}\n"
        f"  insecure: true  # the local registry is plain HTTP\n  interval: {INTERVAL}\n"
    )


WRITTEN = ".demo-written.json"  # in the copy: the digest of each file as the demo last wrote it


class _Copy:
    """The demo's copy of the examples, keeping what the operator changed in it: a file is (re)written only
    when it is still as the demo last wrote it, or new. One the operator edited (a ``v`` pin, a value) or
    deleted stays so: the demo reverted such files at each start, and a pinned release went back down."""

    def __init__(self, dest: Path):
        self.dest = dest
        self.record = dest / WRITTEN
        try:
            self.written: dict[str, str] = dict(json.loads(self.record.read_text()))
        except (OSError, ValueError, TypeError):
            self.written = {}

    def edited(self, path: Path) -> bool:
        """True when the operator changed or deleted ``path`` since the demo wrote it (a copy from before the
        record was kept counts as unchanged: rewritten once)."""
        last = self.written.get(str(path.relative_to(self.dest)))
        if last is None:
            return False
        return not path.is_file() or _digest(path.read_bytes()) != last

    def write(self, path: Path, data: bytes) -> bool:
        """Write ``data`` unless the operator edited ``path``; unchanged files keep their time (no reload).
        True when ``path`` now holds ``data``."""
        if self.edited(path):
            return False
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file() or path.read_bytes() != data:
            path.write_bytes(data)
        self.written[str(path.relative_to(self.dest))] = _digest(data)
        return True

    def save(self) -> None:
        self.record.write_text(json.dumps(self.written, indent=1, sort_keys=True))


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_examples(examples: Path, dest: Path, charts_url: str, registry: str) -> Path:
    """Copy the examples to ``dest`` with the packages of ``examples/sources`` and ``repositories.yaml``
    among the packages; returns ``dest/packages``. A file the operator edited in ``dest`` is kept: in an
    edited ``repositories.yaml`` only the URLs of the last run are replaced by this run's."""
    copy = _Copy(dest)
    for sub in ("charts", "values"):
        for source in sorted(p for p in (examples / sub).rglob("*") if p.is_file()):
            copy.write(dest / sub / source.relative_to(examples / sub), source.read_bytes())
    packages = dest / "packages"
    packages.mkdir(parents=True, exist_ok=True)
    for source in sorted([*(examples / "packages").glob("*.yaml"), *(examples / "sources").glob("*.yaml")]):
        copy.write(packages / source.name, source.read_bytes())
    repositories = packages / "repositories.yaml"
    fresh = repositories_yaml(charts_url, registry)
    if not copy.write(repositories, fresh.encode()) and repositories.is_file():
        text = repositories.read_text()
        for old, new in _endpoints(text, charts_url, registry):
            text = text.replace(old, new)
        repositories.write_text(text)
    copy.save()
    return packages


def _endpoints(text: str, charts_url: str, registry: str) -> list[tuple[str, str]]:
    """The (last run's, this run's) pairs of the demo's endpoints found in an edited ``repositories.yaml``:
    the HTTP repository's URL and the registry's ``host:port``."""
    pairs = []
    charts = re.search(r"http://127\.0\.0\.1:\d+", text)
    if charts:
        pairs.append((charts.group(0), charts_url))
    oci = re.search(r"oci://([^/\s]+)/" + re.escape(NAMESPACE), text)
    if oci:
        pairs.append((oci.group(1), registry))
    return pairs


def _serve(repo: Path, port_file: Path, record: Path) -> ChartRepoServer:
    """Serve ``repo`` on the port of the last run when it is free, else on any; recorded in ``record`` for
    ``helmdeck cluster status`` while this process serves it."""
    try:
        server = ChartRepoServer(repo, port=int(port_file.read_text()), record=record)
    except (OSError, ValueError):
        server = ChartRepoServer(repo, record=record)
    port_file.write_text(str(server.port))
    return server


def start_sources(
    state_dir: Path, registry: str, helm: str, examples: Path, progress: Callable[[str], None] = lambda _m: None,
) -> DemoSources:
    """Publish the example charts and serve the HTTP repository (see the module docstring). Raises DemoError."""
    work = state_dir / "demo"
    env = helm_env(work / "helm")
    repo = work / "repo"
    archives, made = package_charts(helm, env, examples / "charts", repo)
    if made or not (repo / "index.yaml").is_file():
        _helm(helm, env, "repo", "index", str(repo))  # relative URLs: the index does not name the port
    server = _serve(repo, work / "repo.port", state_dir / "chartrepo.json")
    try:
        pushed = push_charts(helm, env, archives, registry)
        packages = write_examples(examples, work / "examples", server.url, registry)
    except DemoError:
        server.stop()
        raise
    except OSError as exc:
        server.stop()
        raise DemoError(f"copying the examples to {work / 'examples'}: {exc}") from None
    progress(f"chart repository {server.url} ({len(archives)} charts{', new: ' + ', '.join(made) if made else ''}); "
             f"OCI registry oci://{registry}/{NAMESPACE} ({', '.join(pushed) + ' pushed' if pushed else 'up to date'})")
    return DemoSources(packages, server.url, registry, server, made, pushed)
