"""``plan --base GIT_REF``'s tree: the ref's whole tree exported with git itself (``git archive``), the folder found
in it; a bad ref, a folder the commit lacks, or no checkout are clear errors."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from helmdeck.commands.plan import GitError, base_tree, tree_root


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd=repo,
                   capture_output=True, check=True)


@pytest.fixture
def history(tmp_path: Path) -> Path:
    """A checkout of two commits: ``clusters/prod`` changed in the second, ``apps/new`` added in it."""
    repo = tmp_path / "repo"
    (repo / "clusters" / "prod").mkdir(parents=True)
    (repo / "apps" / "base").mkdir(parents=True)
    (repo / "clusters" / "prod" / "values.yaml").write_text("replicas: 1\n")
    (repo / "apps" / "base" / "web.yaml").write_text("kind: HelmRelease\n")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "one")
    (repo / "clusters" / "prod" / "values.yaml").write_text("replicas: 2\n")
    (repo / "apps" / "new").mkdir()
    (repo / "apps" / "new" / "x.yaml").write_text("a: 1\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "two")
    (repo / "clusters" / "prod" / "values.yaml").write_text("replicas: 3\n")  # the working tree, uncommitted
    return repo


def test_the_base_is_the_refs_whole_tree(history: Path) -> None:
    with base_tree(history / "clusters" / "prod", "HEAD~1") as base:
        assert (base / "values.yaml").read_text() == "replicas: 1\n"
        assert (base.parent.parent / "apps" / "base" / "web.yaml").is_file()  # what an overlay may read
        kept = base
    assert not kept.exists()  # removed after
    with base_tree(history / "clusters" / "prod", "HEAD") as base:
        assert (base / "values.yaml").read_text() == "replicas: 2\n"  # committed, not the working tree


def test_bad_refs_and_folders_are_named(history: Path, tmp_path: Path) -> None:
    with pytest.raises(GitError, match="names no commit of"), base_tree(history / "clusters", "nope"):
        pass
    with pytest.raises(GitError, match="a ref cannot start with '-'"), base_tree(history, "--output=/tmp/x"):
        pass
    with pytest.raises(GitError, match=r"apps/new is not in HEAD~1 \("), base_tree(history / "apps" / "new", "HEAD~1"):
        pass
    outside = tmp_path / "outside"
    outside.mkdir()
    with pytest.raises(GitError, match="not a git repository"), base_tree(outside, "HEAD"):
        pass


def test_the_trees_root_names_files_as_the_repository_does(history: Path) -> None:
    """plan --base --kustomize names the commit's files from the top of its tree (apps/base/web.yaml), never the
    temporary folder the tree is exported to (tree_root gives the --kustomize build its root)."""
    with base_tree(history / "clusters" / "prod", "HEAD~1") as base:
        root = tree_root(base, history / "clusters" / "prod")
        assert (root / "apps" / "base" / "web.yaml").is_file() and root == base.parent.parent
    with base_tree(history, "HEAD") as base:
        assert tree_root(base, history) == base
