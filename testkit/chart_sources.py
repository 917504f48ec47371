"""Chart sources for the tests: real chart repositories on 127.0.0.1, charts published to them, and a fixed
engine whose packages take their charts from repositories.

- :class:`ChartRepoServer` (:mod:`localcluster.chartrepo`): a small HTTP server serving a ``helm repo
  index`` folder, with optional basic auth, ETag / Last-Modified and 304s; it counts requests.
- :class:`TestRegistry`: a further instance of distribution's ``registry`` with
  htpasswd basic auth (bcrypt) and TLS (a CA made with ``cryptography``).
- :func:`package_chart`, :func:`publish_http`, :func:`push_oci`: charts made from
  ``examples/charts/web`` with a chosen version and content (signed by a :class:`GpgSigner`'s key),
  published with helm.
- :func:`write`, :func:`oci_folder`: package folders using them.
- :class:`CosignSigner`: a cosign key pair and ``cosign sign`` of a chart pushed to the registry.
- :class:`CmdlineWatch`: samples every process's command line while a test acts, to catch
  a credential passed as an argument.
- :func:`sources_engine`: fixed engine state with charts from repositories (tests/data/sources-packages), for
  the snapshot tests of where a chart comes from: the Overview's source line, the CHART column's
  newer-version marker, the picker. ``shop/web`` comes from a HelmRepository with range ``^0.2`` and has
  0.2.0 deployed: its repository offers 0.2.1 (inside the range) and 0.3.0 (outside). ``shop/api`` comes
  from an OCIRepository with semver ``~1.0`` and has 1.0.0 deployed: its registry offers 1.0.3 (inside).
  What the repositories offer is given as the engine learns it after a resolve (``book.set_offered``);
  their version lists as ``ChartSource.versions`` answers. ``shop/web`` verifies its charts (Helm provenance):
  0.2.0 (deployed, ``SourceVerified`` True) and 0.2.1 are known to verify, 0.3.0 to fail
  (``ChartSource.verification_of``), 0.1.0 is not known.

The command line is run as a user would by :func:`tests.cli.test_cli.helmdeck`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import bcrypt

from engine.base.wire import SOURCE_VERIFIED, SUCCEEDED
from engine.runtime import Engine
from engine.runtime.assemble import offline_engine
from engine.runtime.state import Condition, ReleaseKey
from engine.sources import ChartRequest, ChartVersionInfo
from engine.sources.cosign import fingerprint
from engine.sources.updates import available
from engine.sources.verify import FAILED, VERIFIED, Verification, verified_message
from engine.storage.observer import Observer
from localcluster import registry as local_registry
from localcluster.chartrepo import ChartRepoServer as ChartRepoServer  # re-exported for the tests
from localcluster.pki import ServingTls, serving_tls
from localcluster.process import ProcessRecord, free_port, port_open, proc_start_time, stop_processes
from testkit.fixtures import FIXED_NOW, set_engine_status, storage_secret
from testkit.packages import package_yaml

ROOT = Path(__file__).resolve().parent.parent
WEB_CHART = ROOT / "examples" / "charts" / "web"
SOURCES_PACKAGES = ROOT / "tests" / "data" / "sources-packages"
SHOP_WEB: ReleaseKey = ("shop", "web")
SHOP_API: ReleaseKey = ("shop", "api")
OFFERED = {
    "web": [ChartVersionInfo("0.3.0", "2.1.0", "2026-11-29T08:00:00Z", "sha256:" + "3" * 64),
            ChartVersionInfo("0.2.1", "2.0.1", "2026-11-20T08:00:00Z", "sha256:" + "21" * 32),
            ChartVersionInfo("0.2.0", "2.0.0", "2026-11-02T08:00:00Z", "sha256:" + "2" * 64),
            ChartVersionInfo("0.1.0", "1.9.0", "2026-10-01T08:00:00Z", "sha256:" + "1" * 64)],
    "api": [ChartVersionInfo("1.0.3", "5.2.3", "2026-11-28T12:00:00Z"),
            ChartVersionInfo("1.0.0", "5.2.0", "2026-11-01T12:00:00Z")],
}


class Clock:
    """A monotonic clock the test moves by hand (``now``, seconds): a repository's interval passes at once."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def helm_run(helm: str, *args: str, env: dict[str, str] | None = None) -> str:
    """Run helm; return stdout and stderr together (helm 3 reports some results on stderr)."""
    proc = subprocess.run([helm, *args], capture_output=True, text=True, env={**os.environ, **(env or {})},
                          timeout=120, check=False)
    if proc.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed:\n{proc.stderr}")
    return proc.stdout + proc.stderr


class GpgSigner:
    """An OpenPGP key made with the real gpg in a private GNUPGHOME (batch mode, no passphrase), for
    ``helm package --sign``: ``pubring`` is the public keyring (what a Secret's ``pubring.gpg`` holds),
    ``secring`` the secret keyring in the legacy format helm's ``--keyring`` reads, ``fingerprint`` its hex."""

    def __init__(self, work: Path, name: str = "Chart Signer", email: str = "signer@example.com"):
        self.home = work / "gnupg"
        self.home.mkdir(parents=True, mode=0o700)
        self.name = name
        spec = work / "key.spec"
        spec.write_text(f"%no-protection\nKey-Type: RSA\nKey-Length: 2048\nName-Real: {name}\n"
                        f"Name-Email: {email}\nExpire-Date: 0\n%commit\n")
        self._gpg("--gen-key", str(spec))
        self.pubring = work / "pubring.gpg"
        self.secring = work / "secring.gpg"
        self.pubring.write_bytes(self._gpg("--export"))
        self.secring.write_bytes(self._gpg("--export-secret-keys"))
        listed = self._gpg("--with-colons", "--fingerprint").decode()
        self.fingerprint = next(ln.split(":")[9] for ln in listed.splitlines() if ln.startswith("fpr:"))
        # gpg started an agent daemon for this home; helm signs from the exported secring, so it is not needed.
        subprocess.run(["gpgconf", "--kill", "gpg-agent"], capture_output=True, check=False, timeout=60,
                       env={**os.environ, "GNUPGHOME": str(self.home)})

    def _gpg(self, *args: str) -> bytes:
        return subprocess.run(["gpg", "--batch", "--quiet", *args], capture_output=True, check=True, timeout=120,
                              env={**os.environ, "GNUPGHOME": str(self.home)}).stdout


class CosignSigner:
    """A cosign key pair made by the real cosign (``generate-key-pair``; its password only in the environment, as
    ``COSIGN_PASSWORD``): ``pub`` the public key (what a Secret's ``*.pub`` holds), ``fingerprint`` as
    :func:`engine.sources.cosign.fingerprint` says it. :meth:`sign` signs ``host/repository@digest`` with
    ``cosign sign --key --tlog-upload=false`` (no transparency log is reachable here)."""

    def __init__(self, cosign: Path, work: Path, password: str = "cosign-test-password"):
        work.mkdir(parents=True, exist_ok=True)
        self.cosign = cosign
        self.work = work
        self.password = password
        self.env = {**os.environ, "COSIGN_PASSWORD": password, "HOME": str(work), "TUF_ROOT": str(work / "tuf"),
                    "DOCKER_CONFIG": str(work / "docker")}
        self._cosign("generate-key-pair")
        self.key = work / "cosign.key"
        self.pub = work / "cosign.pub"
        self.fingerprint = fingerprint(self.pub.read_bytes())

    def _cosign(self, *args: str) -> str:
        proc = subprocess.run([str(self.cosign), *args], cwd=self.work, env=self.env, capture_output=True, text=True,
                              timeout=120, check=False)
        if proc.returncode != 0:
            raise AssertionError(f"cosign {' '.join(args)} failed:\n{proc.stderr}")
        return proc.stdout + proc.stderr

    def sign(self, image: str) -> None:
        """Sign ``image`` (``host:port/repository@sha256:...``) in the registry, over plain HTTP."""
        self._cosign("sign", "--key", str(self.key), "--tlog-upload=false", "--allow-http-registry", "-y", image)


def package_chart(helm: str, work: Path, version: str, *, name: str = "web", marker: str = "",
                  signer: GpgSigner | None = None) -> Path:
    """Package the web example chart as ``name`` at ``version``; ``marker`` changes its content; ``signer``
    signs it (``helm package --sign``: the ``.prov`` is written next to the archive)."""
    src = work / f"src-{name}-{version}-{hashlib.sha256(marker.encode()).hexdigest()[:6]}"
    shutil.rmtree(src, ignore_errors=True)
    shutil.copytree(WEB_CHART, src / name)
    chart_yaml = src / name / "Chart.yaml"
    lines = [ln for ln in chart_yaml.read_text().splitlines() if not ln.startswith(("name:", "version:"))]
    chart_yaml.write_text("\n".join([f"name: {name}", f"version: {version}", *lines]) + "\n")
    if marker:  # content that renders: a re-pushed chart with another marker changes the manifest
        (src / name / "templates" / "marker.yaml").write_text(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-marker\n"
            f"data:\n  marker: {marker!r}\n")
    out = work / "packaged"
    out.mkdir(exist_ok=True)
    sign = ("--sign", "--key", signer.name, "--keyring", str(signer.secring)) if signer else ()
    (out / f"{name}-{version}.tgz.prov").unlink(missing_ok=True)  # an earlier signed package's
    helm_run(helm, "package", str(src / name), "-d", str(out), "--app-version", f"app-{version}", *sign)
    return out / f"{name}-{version}.tgz"


def publish_http(helm: str, archive: Path, repo: ChartRepoServer, *, prov: Path | None = None) -> None:
    """Copy ``archive`` into the served folder (with its ``.prov`` when there is one, or ``prov`` in its
    place) and rebuild its index (as ``helm repo index``)."""
    shutil.copy(archive, repo.folder / archive.name)
    served_prov = repo.folder / f"{archive.name}.prov"
    served_prov.unlink(missing_ok=True)
    given = prov or archive.with_name(f"{archive.name}.prov")
    if given.is_file():
        shutil.copy(given, served_prov)
    helm_run(helm, "repo", "index", str(repo.folder), "--url", repo.url)


def push_oci(helm: str, archive: Path, target: str, *, env: dict[str, str] | None = None,
             extra: tuple[str, ...] = ("--plain-http",)) -> str:
    """``helm push archive oci://target``; returns the pushed manifest digest."""
    out = helm_run(helm, "push", str(archive), f"oci://{target}", *extra, env=env)
    for line in out.splitlines():
        if line.startswith("Digest:"):
            return line.split()[-1]
    raise AssertionError(f"no digest in helm push output: {out}")


class TestRegistry:
    """A registry with htpasswd basic auth (``user`` / ``password``) and TLS (``tls.ca_cert`` trusts it)."""

    __test__ = False

    def __init__(self, work: Path, user: str, password: str):
        work.mkdir(parents=True, exist_ok=True)
        self.user = user
        self.password = password
        self.tls: ServingTls = serving_tls(work / "tls")
        htpasswd = work / "htpasswd"
        hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=5)).decode()
        htpasswd.write_text(f"{user}:{hashed}\n")
        self.port = free_port()
        config = local_registry.write_config(
            work / "config.yml", port=self.port, storage=work / "data",
            tls=local_registry.Tls(self.tls.cert, self.tls.key), htpasswd=local_registry.Htpasswd(htpasswd))
        log = (work / "registry.log").open("ab")
        proc = subprocess.Popen(local_registry.command(config), stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        self._record = ProcessRecord("test-registry", proc.pid, proc_start_time(proc.pid) or 0, str(work))
        self._proc = proc
        deadline = time.monotonic() + 20
        while not port_open(self.port):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"test registry did not start; see {work / 'registry.log'}")
            time.sleep(0.05)
        self.host = f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        stop_processes([self._record], 10)
        self._proc.wait()


class CmdlineWatch:
    """Samples every process's /proc/<pid>/cmdline while active; remembers the helm runs this process started,
    directly or through its children (their subcommands in ``helm_runs``, whole argument lists in
    ``helm_commands``), its cosign runs (``cosign_commands``), and leaks of ``needle`` by any process. Only
    descendants count as runs: tests run side by side (pytest-xdist), and another test's helm is not this one's."""

    def __init__(self, needle: str):
        self.needle = needle.encode()
        self.helm_runs: set[str] = set()
        self.helm_commands: set[tuple[str, ...]] = set()
        self.cosign_commands: set[tuple[str, ...]] = set()
        self.leaks: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for entry in os.scandir("/proc"):
                if not entry.name.isdigit():
                    continue
                try:
                    cmd = Path(f"/proc/{entry.name}/cmdline").read_bytes()
                except OSError:
                    continue
                if self.needle in cmd:
                    self.leaks.append(cmd.replace(b"\0", b" ").decode(errors="replace"))
                parts = cmd.split(b"\0")
                if len(parts) < 2 or not parts[0].endswith((b"/cosign", b"/helm")) or not _descends(entry.name):
                    continue
                if parts[0].endswith(b"/cosign"):
                    self.cosign_commands.add(tuple(p.decode(errors="replace") for p in parts[1:] if p))
                else:
                    self.helm_runs.add(parts[1].decode())
                    self.helm_commands.add(tuple(p.decode(errors="replace") for p in parts[1:] if p))

    def __enter__(self) -> CmdlineWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _descends(pid: str, ancestor: int | None = None) -> bool:
    """Whether process ``pid`` is a descendant of ``ancestor`` (this process), by /proc's parent links."""
    ancestor = os.getpid() if ancestor is None else ancestor
    for _ in range(64):  # a chain deeper than any test's
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])  # the name may hold spaces and parentheses
        if ppid == ancestor:
            return True
        if ppid <= 1:
            return False
        pid = str(ppid)
    return False


def write(folder: Path, name: str, text: str) -> None:
    """Write ``text`` to ``folder/name``, making the folder."""
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(text)


def oci_folder(pkgs: Path, namespace: str, base: str, ref: str) -> str:
    """An OCIRepository ``web`` at ``oci://base/web`` with ``ref`` (YAML lines under ``ref:``) and a Package
    using it; returns the OCIRepository's file text."""
    source = (f"apiVersion: helmdeck.dev/v1alpha1\nkind: OCIRepository\n"
              f"metadata: {{name: web, namespace: {namespace}}}\n"
              f"spec:\n  url: oci://{base}/web\n  insecure: true   # the local registry\n  ref:\n{ref}")
    write(pkgs, "source.yaml", source)
    write(pkgs, "web.yaml", package_yaml("web", namespace, chartRef={"kind": "OCIRepository", "name": "web"},
                                         timeout="1m"))
    return source


VERIFIED_WEB = Verification("helm", VERIFIED, "Shop Release Team <release@shop.example>, "
                             "key 5686A5B785CE526ACCDB131162D09BC064A1AC86", "", "sha256:" + "2" * 64,
                             "sha256:" + "9" * 64)


def _chart(request: ChartRequest) -> str:
    return request.chart or request.source.name


def sources_engine() -> Engine:
    """An engine that is never started, with the two remote packages deployed and InSync."""
    observer = Observer(None)
    engine = offline_engine(SOURCES_PACKAGES, observer=observer)
    observer.apply_object(storage_secret("web", "shop", 1, "deployed", "web", "0.2.0", "2.0.0", {"replicas": 2},
                                         "2026-11-30T09:10:00Z", "Install complete"))
    observer.apply_object(storage_secret("api", "shop", 1, "deployed", "api", "1.0.0", "5.2.0", {},
                                         "2026-11-30T09:12:00Z", "Install complete"))
    for key in (SHOP_WEB, SHOP_API):
        ready = Condition("Ready", "True", "InstallSucceeded", "Helm install succeeded for revision 1",
                          FIXED_NOW - 50 * 60)
        verified = Condition(SOURCE_VERIFIED, "True", SUCCEEDED, verified_message(VERIFIED_WEB), FIXED_NOW - 51 * 60)
        set_engine_status(engine, key, state="InSync", conditions=(ready, verified) if key == SHOP_WEB else (ready,))
        request = engine.packages[key].chart_request
        assert request is not None
        engine.book.set_offered(key, available(request, tuple(v.version for v in OFFERED[_chart(request)])))

    async def versions(request: ChartRequest) -> list[ChartVersionInfo]:
        return OFFERED[_chart(request)]

    def verification_of(request: ChartRequest, digest: str) -> Verification | None:
        outcome = {"sha256:" + "2" * 64: VERIFIED, "sha256:" + "21" * 32: VERIFIED, "sha256:" + "3" * 64: FAILED}
        known = outcome.get(digest) if request.verify is not None else None
        return dataclasses.replace(VERIFIED_WEB, outcome=known, artifact_digest=digest) if known else None

    engine.controller.charts.versions = versions  # type: ignore[method-assign]
    engine.controller.charts.verification_of = verification_of  # type: ignore[method-assign]
    return engine
