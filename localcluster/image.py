"""The controller image, built on this machine: ``localhost/helmdeck:<version>`` from the Containerfile.

The Containerfile's defaults take their stages from Docker Hub; here each comes from this machine instead and
is passed as a build argument (the recipe after its last ``FROM`` is the same either way):

- ``BASE_IMAGE``: a Debian root filesystem made by ``mmdebstrap`` from Debian's packages: the essential set
  and the Containerfile's ``BASE_PACKAGES`` (its one list), imported with ``podman import``. The tarball is
  cached in ``<cache>/image/`` by a digest of what mmdebstrap is asked (suite, variant, packages, options).
- ``TOOLS_IMAGE``: helm 4, kustomize and cosign at ``/out``, the static binaries :mod:`localcluster.build`
  makes (``CGO_ENABLED=0``; a dynamically linked one is refused), keyed by their versions.
- ``WHEELS_IMAGE``: helmdeck's wheel, its dependencies' and pip's at ``/wheels``, built by ``pip wheel`` from a
  copy of the wheel's inputs, keyed by a digest of those inputs.

The image is labelled with a digest of all three keys and the Containerfile (:data:`INPUTS_LABEL`); a build
whose image exists with the same digest is skipped, so a warm ``make image`` takes seconds.

podman runs with the flags this kind of machine needs (:data:`PODMAN`): the vfs storage driver and runc with
cgroupfs (crun refuses hybrid cgroups). Missing commands are installed with apt-get when root on Debian, else
named (:func:`ensure_commands`).

Run as ``python -m localcluster.image``.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import os
import shlex
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from engine.base.paths import cache_root
from localcluster import build

ROOT = Path(__file__).resolve().parent.parent
CONTAINERFILE = ROOT / "Containerfile"
REPOSITORY = "localhost/helmdeck"
INPUTS_LABEL = "dev.helmdeck.image.inputs"
# vfs: no overlay mounts needed (none inside this kind of container); runc + cgroupfs: crun refuses hybrid
# cgroups, and there is no systemd to manage them.
PODMAN = ("podman", "--storage-driver", "vfs", "--runtime", "runc", "--cgroup-manager", "cgroupfs")
# The commands the build needs, each from the Debian package of the same name.
COMMANDS = ("podman", "buildah", "runc", "mmdebstrap")
SUITE = "bookworm"
# Debian's essential set and BASE_PACKAGES, without docs, manuals and translations; merged /usr set up by
# mmdebstrap's hook instead of the usrmerge package (which would pull in perl).
MMDEBSTRAP_OPTIONS = (
    "--variant=essential", "--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr",
    *(f"--dpkgopt=path-exclude=/usr/share/{d}/*" for d in ("doc", "man", "locale", "info")),
)
# The image's tools: the components of localcluster.build, each one binary, at /out in TOOLS_IMAGE (the
# Containerfile's tools stage installs them there too).
TOOLS = {"helm": "helm4", "kustomize": "kustomize", "cosign": "cosign"}
# What the wheel is built from (pyproject.toml's packages and package data, its readme).
WHEEL_FILES = ("pyproject.toml", "README.md")
# Copied for the build, left out of the key: the readme is only the wheel's long description, and is edited
# far more often than the code.
UNKEYED = ("README.md",)
WHEEL_DIRS = ("helmdeck", "engine", "tui", "localcluster", "examples", "themes")
_SKIPPED = ("__pycache__", ".mypy_cache", ".pytest_cache")


class ImageError(RuntimeError):
    """The image could not be built; the message says why and what to do."""


def podman(*args: str, check: bool = True, capture: bool = True, timeout: float = 3600
           ) -> subprocess.CompletedProcess[str]:
    """Run ``podman`` with :data:`PODMAN`'s flags; raises ImageError naming the command when ``check`` and it
    fails."""
    out = subprocess.run([*PODMAN, *args], capture_output=capture, text=True, timeout=timeout, check=False)
    if check and out.returncode != 0:
        raise ImageError(f"{shlex.join(['podman', *args])} failed ({out.returncode}):\n{out.stderr or ''}")
    return out


def missing_commands() -> list[str]:
    """The commands of :data:`COMMANDS` not on PATH."""
    return [c for c in COMMANDS if shutil.which(c) is None]


def ensure_commands(progress: Callable[[str], None] = print) -> None:
    """Install the missing :data:`COMMANDS` with apt-get when running as root on Debian; otherwise raise
    ImageError naming the packages to install."""
    missing = missing_commands()
    if not missing:
        return
    if os.geteuid() != 0 or not Path("/etc/debian_version").exists() or shutil.which("apt-get") is None:
        raise ImageError(f"building the image needs {', '.join(missing)}: install the package(s) "
                         f"{' '.join(missing)} (Debian: apt-get install {' '.join(missing)})")
    progress(f"installing {' '.join(missing)} with apt-get ...")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", *missing]):
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800, check=False)
        if out.returncode != 0:
            raise ImageError(f"{shlex.join(cmd)} failed:\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
    if still := missing_commands():
        raise ImageError(f"apt-get installed {' '.join(missing)}, but {', '.join(still)} is still not on PATH")


def build_args(text: str) -> dict[str, str]:
    """The Containerfile's global ``ARG NAME=default`` lines (before the first ``FROM``): name → default."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("FROM "):
            break
        if line.startswith("ARG ") and "=" in line:
            name, value = line[4:].split("=", 1)
            found[name.strip()] = shlex.split(value)[0] if value.strip() else ""
    return found


def base_packages(text: str | None = None) -> list[str]:
    """The Containerfile's ``BASE_PACKAGES``: what the base holds beside Debian's essential set."""
    return build_args(text if text is not None else CONTAINERFILE.read_text())["BASE_PACKAGES"].split()


def _digest(*parts: str | bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "big"))
        h.update(data)
    return h.hexdigest()[:16]


def wheel_inputs(root: Path = ROOT) -> Iterator[tuple[str, Path]]:
    """(relative path, file) of everything the wheel is built from, sorted; symlinked folders (helmdeck/examples)
    followed."""
    for name in WHEEL_FILES:
        yield name, root / name
    for top in WHEEL_DIRS:
        found: list[tuple[str, Path]] = []
        for folder, dirs, files in os.walk(root / top, followlinks=True):
            dirs[:] = [d for d in dirs if d not in _SKIPPED]
            for f in files:
                if not f.endswith((".pyc", ".pyo")):
                    path = Path(folder) / f
                    found.append((path.relative_to(root).as_posix(), path))
        yield from sorted(found)


def is_static(path: Path) -> bool:
    """Whether the ELF executable ``path`` is statically linked: no PT_INTERP program header (what ``file``
    reports as "statically linked"; ``ldd`` says "not a dynamic executable"). Raises ImageError if it is not a
    64-bit little-endian ELF file."""
    with path.open("rb") as fh:
        head = fh.read(64)
        if head[:6] != b"\x7fELF\x02\x01":
            raise ImageError(f"{path} is not a 64-bit little-endian ELF executable")
        phoff, = struct.unpack_from("<Q", head, 0x20)
        phentsize, phnum = struct.unpack_from("<HH", head, 0x36)
        for i in range(phnum):
            fh.seek(phoff + i * phentsize)
            p_type, = struct.unpack("<I", fh.read(4))
            if p_type == 3:  # PT_INTERP: the dynamic loader's path
                return False
    return True


@dataclass(frozen=True)
class Plan:
    """What one build of the image uses: each input's tag (named by its key) and the image's digest."""

    version: str
    base: str
    tools: str
    wheels: str
    inputs: str

    @property
    def tag(self) -> str:
        return f"{REPOSITORY}:{self.version}"


def plan(version: str | None = None) -> Plan:
    """The tags and keys of a build from the working tree (nothing is built)."""
    if version is None:
        version = str(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"])
    text = CONTAINERFILE.read_text()
    base = _digest(SUITE, *MMDEBSTRAP_OPTIONS, "--include=" + ",".join(base_packages(text)))
    tools = _digest(*(f"{name}={build.COMPONENTS[c].version}" for name, c in TOOLS.items()))
    wheel = _digest(*(part for rel, path in wheel_inputs() if rel not in UNKEYED for part in (rel, path.read_bytes())))
    return Plan(version, f"{REPOSITORY}-base:{base}", f"{REPOSITORY}-tools:{tools}",
                f"{REPOSITORY}-wheels:{wheel}", _digest(text, base, tools, wheel))


def image_exists(ref: str) -> bool:
    return podman("image", "exists", ref, check=False).returncode == 0


def built_inputs(ref: str) -> str | None:
    """The :data:`INPUTS_LABEL` of image ``ref``; None when there is no such image."""
    out = podman("image", "inspect", "--format", "{{index .Labels \"" + INPUTS_LABEL + "\"}}", ref, check=False)
    return out.stdout.strip() if out.returncode == 0 else None


def _import(files: Iterable[tuple[str, Path]], tag: str, work: Path) -> None:
    """A one-layer image ``tag`` holding ``files`` (path in the image, source), owned by root."""
    tar_path = work / (tag.rsplit("/", 1)[-1].replace(":", "-") + ".tar")

    def owned_by_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        return info

    with tarfile.open(tar_path, "w") as tar:
        dirs: set[str] = set()
        for arc, src in files:
            parts = arc.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                d = "/".join(parts[:i])
                if d not in dirs:
                    dirs.add(d)
                    info = tarfile.TarInfo(d)
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    tar.addfile(owned_by_root(info))
            tar.add(src, arcname=arc, filter=owned_by_root)
    podman("import", str(tar_path), tag)
    tar_path.unlink()


def base_image(tag: str, progress: Callable[[str], None]) -> None:
    """Import the mmdebstrap tarball as ``tag``, making it first unless cached."""
    if image_exists(tag):
        return
    cache = cache_root() / "image"
    cache.mkdir(parents=True, exist_ok=True)
    tarball = cache / f"base-{tag.rsplit(':', 1)[1]}.tar"
    if not tarball.exists():
        packages = base_packages()
        progress(f"making the base with mmdebstrap: Debian {SUITE}, essential + {' '.join(packages)} ...")
        tmp = tarball.with_suffix(".tmp.tar")
        cmd = ["mmdebstrap", *MMDEBSTRAP_OPTIONS, "--include=" + ",".join(packages), SUITE, str(tmp)]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, check=False)
        if out.returncode != 0:
            tmp.unlink(missing_ok=True)
            raise ImageError(f"{shlex.join(cmd)} failed:\n{out.stderr[-3000:]}")
        tmp.rename(tarball)
    podman("import", str(tarball), tag)


def tools_image(tag: str, work: Path, progress: Callable[[str], None]) -> None:
    """helm, kustomize and cosign (built unless cached) at /out as ``tag``; raises ImageError for a binary that
    is not static (it would need the build machine's libraries)."""
    if image_exists(tag):
        return
    files = []
    for name, component in TOOLS.items():
        build.build(build.COMPONENTS[component], progress=progress)
        path = build.binary(component, name)
        if not is_static(path):
            raise ImageError(f"{path} is dynamically linked: rebuild it with CGO_ENABLED=0 "
                             f"(remove {path.parent} and run `python -m localcluster.build {component}`)")
        files.append((f"out/{name}", path))
    _import(files, tag, work)


def wheels_image(tag: str, work: Path, progress: Callable[[str], None]) -> None:
    """``pip wheel`` of a copy of the wheel's inputs (helmdeck, its dependencies, pip) at /wheels as ``tag``."""
    if image_exists(tag):
        return
    progress("building the wheels (helmdeck, its dependencies, pip) ...")
    src, out = work / "src", work / "wheels"
    for rel, path in wheel_inputs():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, src / rel)
    cmd = [sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check", "--no-cache-dir",
           "--wheel-dir", str(out), str(src), "pip"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, check=False)
    if done.returncode != 0:
        raise ImageError(f"pip wheel failed:\n{done.stdout[-2000:]}{done.stderr[-3000:]}")
    _import(((f"wheels/{w.name}", w) for w in sorted(out.glob("*.whl"))), tag, work)


def _drop_other_tags(repository: str, keep: str) -> None:
    """Remove this repository's images other than ``keep`` (older inputs: vfs storage holds each layer whole)."""
    out = podman("images", "--format", "{{.Repository}}:{{.Tag}}", repository, check=False)
    for ref in out.stdout.split():
        if ref != keep and ref.startswith(repository + ":"):
            podman("rmi", ref, check=False)


def build_image(version: str | None = None, *, progress: Callable[[str], None] = print) -> Plan:
    """Build ``localhost/helmdeck:<version>`` unless it exists from the same inputs; returns the plan.

    Raises ImageError (a missing command, a failed step), build.BuildError (a Go build)."""
    ensure_commands(progress)
    p = plan(version)
    if built_inputs(p.tag) == p.inputs:
        progress(f"{p.tag} is current (inputs {p.inputs})")
        return p
    # Two builds at once (the xdist workers of one test session, make image beside make test) would tag and
    # remove each other's images: the second waits, then finds the first one's image current.
    locks = cache_root() / "build"
    locks.mkdir(parents=True, exist_ok=True)
    with (locks / "image.lock").open("a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            progress(f"waiting for another build of {p.tag} to end ...")
            fcntl.flock(lock, fcntl.LOCK_EX)
        if built_inputs(p.tag) == p.inputs:
            progress(f"{p.tag} is current (inputs {p.inputs})")
            return p
        return _build_image_locked(p, progress)


def _build_image_locked(p: Plan, progress: Callable[[str], None]) -> Plan:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="helmdeck-image-") as tmp:
        work = Path(tmp)
        base_image(p.base, progress)
        tools_image(p.tools, work, progress)
        wheels_image(p.wheels, work, progress)
        progress(f"building {p.tag} ...")
        context = work / "context"  # the shared stage copies nothing from the context
        context.mkdir()
        old = podman("image", "inspect", "--format", "{{.Id}}", p.tag, check=False).stdout.strip()
        podman("build", "--network", "host", "--layers=false", "-f", str(CONTAINERFILE),
               "--build-arg", f"BASE_IMAGE={p.base}", "--build-arg", f"TOOLS_IMAGE={p.tools}",
               "--build-arg", f"WHEELS_IMAGE={p.wheels}", "--label", f"{INPUTS_LABEL}={p.inputs}",
               "-t", p.tag, str(context))
    if old and old != podman("image", "inspect", "--format", "{{.Id}}", p.tag).stdout.strip():
        podman("rmi", old, check=False)  # untagged by the build
    for repository, keep in ((f"{REPOSITORY}-base", p.base), (f"{REPOSITORY}-tools", p.tools),
                             (f"{REPOSITORY}-wheels", p.wheels)):
        _drop_other_tags(repository, keep)
    progress(f"built {p.tag} in {time.monotonic() - started:.0f}s ({size(p.tag) / 1e6:.0f} MB)")
    return p


def size(ref: str) -> int:
    """The image's size in bytes (its layers, uncompressed)."""
    return int(podman("image", "inspect", "--format", "{{.Size}}", ref).stdout.strip())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args(argv)
    try:
        build_image(progress=lambda m: print(m, flush=True))
    except (ImageError, build.BuildError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
