"""A package set's identity (pure): unique per folder, stable, named on request, the old one recognised."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.runtime.package_set import MAX_NAME, PackageSetNameError, legacy_identity, package_set_for


def test_two_folders_with_the_same_base_name_are_two_sets(tmp_path: Path) -> None:
    a, b = tmp_path / "a" / "pkgs", tmp_path / "b" / "pkgs"
    one, two = package_set_for(a), package_set_for(b)
    assert one.identity != two.identity and one.lease_name != two.lease_name
    assert one.identity.startswith("pkgs-") and two.identity.startswith("pkgs-")
    # Both were "helmdeck-pkgs" before: that is what each recognises as its old label.
    assert one.legacy == two.legacy == "helmdeck-pkgs"


def test_identity_is_stable_and_follows_the_resolved_path(tmp_path: Path) -> None:
    folder = tmp_path / "packages"
    folder.mkdir()
    link = tmp_path / "link"
    link.symlink_to(folder)
    assert package_set_for(folder) == package_set_for(folder)
    assert package_set_for(link) == package_set_for(folder)  # a link to the folder is the same set
    assert package_set_for(tmp_path / "." / "packages") == package_set_for(folder)


def test_identity_is_a_label_value_and_a_lease_name(tmp_path: Path) -> None:
    odd = tmp_path / ("Ünïcode Packages_" + "x" * 80)
    pset = package_set_for(odd)
    assert len(pset.identity) <= 63 and len(pset.lease_name) <= 63
    assert pset.identity[0].isalnum() and pset.identity[-1].isalnum()
    assert set(pset.identity) <= set("abcdefghijklmnopqrstuvwxyz0123456789-")
    assert package_set_for(Path("/")).identity.startswith("packages-")


def test_a_named_set_keeps_its_name_wherever_the_folder_is(tmp_path: Path) -> None:
    here, there = package_set_for(tmp_path / "a" / "pkgs", "platform"), package_set_for(tmp_path / "moved", "platform")
    assert here.identity == there.identity == "platform" and here.lease_name == "helmdeck-platform"
    assert here.legacy == "helmdeck-pkgs"  # an old release of the folder is still recognised


@pytest.mark.parametrize("name", ["", "Platform", "-a", "a-", "a_b", "a.b", "a\n", "x" * (MAX_NAME + 1), "ü"])
def test_a_bad_name_says_the_rule(name: str, tmp_path: Path) -> None:
    with pytest.raises(PackageSetNameError, match=r"--package-set .*lower-case letters, digits and '-'"):
        package_set_for(tmp_path, name)


def test_adopts_only_the_folders_old_label(tmp_path: Path) -> None:
    pset = package_set_for(tmp_path / "pkgs")
    assert pset.adopts("helmdeck-pkgs")
    assert not pset.adopts(pset.identity) and not pset.adopts("") and not pset.adopts(None)
    assert not pset.adopts("helmdeck-other") and not pset.adopts(package_set_for(tmp_path / "x" / "pkgs").identity)
    assert legacy_identity(Path("/srv/Platform Packages/")) == "helmdeck-platform-packages"
