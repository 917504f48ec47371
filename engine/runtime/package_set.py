"""A package set's identity: which releases are its own (cleanup's scope) and which Lease it holds.

A package set is the packages of one folder. Its identity is written on each
of its releases as the ``wire.PACKAGE_SET`` release label, and names
the set's Lease (``helmdeck-<identity>``). It must be unique per folder:
before, it was ``helmdeck-<folder base name>``, so two unrelated folders
called ``pkgs`` were one set and one's ``cleanup`` uninstalled the other's
releases. Now it is, by default, the base name (readable) plus 12 hex of the
sha256 of the folder's resolved absolute path (unique); ``--package-set NAME``
names it for operators who move folders.

The identity an older helmdeck gave the folder (:attr:`PackageSet.legacy`) is
kept so that such releases are recognised: a release labelled the old way is
relabelled by its own set's next pass when that set declares it, and never
removed by a cleanup (it cannot be told apart from another folder's of the same
base name).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from engine.base.fields import PackageError

# A label value and the tail of a Lease name: a DNS-1123 label, "helmdeck-" + it within 63 characters.
_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
MAX_NAME = 53
_STEM = 40
_DIGEST = 12


class PackageSetNameError(ValueError):
    """``--package-set`` is not a valid name; the message says the rule and the fix."""


class OtherPackageSet(PackageError):
    """A package names a release another package set owns (its storage label says which): refused, and the
    refusal is never persisted, since the stored status is the owning set's (a second folder's refused pass
    showed the owner's release as Failed)."""


@dataclass(frozen=True)
class PackageSet:
    """``identity``: the ``wire.PACKAGE_SET`` label value of the set's releases;
    ``legacy``: the value an older helmdeck wrote for the same folder (``helmdeck-<base name>``)."""

    identity: str
    legacy: str

    @property
    def lease_name(self) -> str:
        """The set's Lease: ``helmdeck-<identity>`` (at most 63 characters)."""
        return f"helmdeck-{self.identity}"

    def adopts(self, label: str | None) -> bool:
        """True when a release labelled ``label`` was this folder's under an older helmdeck."""
        return label is not None and label == self.legacy != self.identity


def _stem(folder: Path) -> str:
    """The folder's base name made a DNS label fragment (lower case, ``-`` for anything else)."""
    return re.sub(r"[^a-z0-9-]+", "-", folder.name.lower()).strip("-") or "packages"


def legacy_identity(folder: Path) -> str:
    """What helmdeck before package-set identities labelled ``folder``'s releases with."""
    return f"helmdeck-{_stem(folder)}"[:63].rstrip("-")


def check_name(name: str) -> str:
    """``name`` if it is a valid ``--package-set``: lower-case letters, digits and ``-``, starting and
    ending with a letter or digit, at most 53 characters. Raises PackageSetNameError naming the fix."""
    if len(name) > MAX_NAME or not _NAME.match(name):
        raise PackageSetNameError(
            f"--package-set {name!r}: use at most {MAX_NAME} lower-case letters, digits and '-', "
            "starting and ending with a letter or digit (it becomes a label value and a Lease name)")
    return name


def package_set_for(folder: Path, name: str | None = None) -> PackageSet:
    """The identity of the package set in ``folder``: ``name`` when given (checked with :func:`check_name`),
    else ``<base name>-<12 hex of sha256(resolved absolute path)>``. Stable for a folder that stays put;
    two folders of the same base name get different identities. Raises PackageSetNameError."""
    resolved = folder.expanduser().resolve()
    if name is not None:
        return PackageSet(check_name(name), legacy_identity(resolved))
    digest = hashlib.sha256(str(resolved).encode()).hexdigest()[:_DIGEST]
    stem = _stem(resolved)[:_STEM].rstrip("-") or "packages"
    return PackageSet(f"{stem}-{digest}", legacy_identity(resolved))


CLUSTER = "cluster"  # the package set of `helmdeck controller` watching every namespace


def cluster_package_set(name: str | None = None, namespaces: list[str] | None = None) -> PackageSet:
    """The package set of the API server's Package objects (``helmdeck controller``): ``name`` when given
    (checked with :func:`check_name`), else ``cluster`` for every namespace, or ``cluster-<12 hex of the
    sorted namespaces>`` for a ``--watch-namespace`` list, so one controller acts per cluster or namespace
    set (its Lease is named after it). Raises PackageSetNameError."""
    if name is None:
        name = CLUSTER if not namespaces else (
            f"{CLUSTER}-{hashlib.sha256(','.join(sorted(set(namespaces))).encode()).hexdigest()[:_DIGEST]}")
    check_name(name)
    return PackageSet(name, name)
