"""The packages folder (PackageFolder): live folder watching, debounce, bad files keep their last good spec."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from engine.runtime.drive.folder import PackageFolder
from engine.runtime.drive.ports import InputUpdate, PackageInput

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def package(name: str, chart: Path, values: str = "{}") -> str:
    return (f"apiVersion: helmdeck.dev/v1alpha1\nkind: Package\nmetadata:\n  name: {name}\n  namespace: ns\n"
            f"spec:\n  chart: {chart}\n  values: {values}\n")


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    charts = tmp_path / "charts"
    shutil.copytree(EXAMPLES / "charts" / "settings", charts / "a")
    shutil.copytree(EXAMPLES / "charts" / "settings", charts / "b")
    pkgs = tmp_path / "packages"
    pkgs.mkdir()
    (pkgs / "a.yaml").write_text(package("a", charts / "a"))
    (pkgs / "b.yaml").write_text(package("b", charts / "b"))
    return pkgs


class Watching:
    """Consumes ``source.watch()`` in a task so the watcher runs while the test writes files."""

    def __init__(self, source: PackageInput):
        self.source = source
        self.updates: asyncio.Queue[InputUpdate] = asyncio.Queue()
        self.task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Watching:
        async def consume() -> None:
            async for update in self.source.watch():
                self.updates.put_nowait(update)

        self.task = asyncio.create_task(consume())
        await asyncio.sleep(0.4)  # let the watcher start
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.source.stop()
        assert self.task is not None
        await asyncio.wait_for(self.task, 5)

    async def next(self, timeout: float = 10.0) -> InputUpdate:
        return await asyncio.wait_for(self.updates.get(), timeout)

    async def collect_for(self, seconds: float) -> list[InputUpdate]:
        await asyncio.sleep(seconds)
        out = []
        while not self.updates.empty():
            out.append(self.updates.get_nowait())
        return out


async def test_changes_reach_only_affected_packages_and_bursts_are_one(folder: Path) -> None:
    source = PackageFolder(folder, debounce_ms=800, step_ms=150)
    first = source.load()
    assert set(first.specs) == {("ns", "a"), ("ns", "b")} and first.changed == set(first.specs)
    async with Watching(source) as w:
        for i in range(5):  # an editor's save burst
            (folder / "a.yaml").write_text(package("a", folder.parent / "charts" / "a", f"{{n: {i}}}"))
        updates = await w.collect_for(2.5)
        assert len(updates) == 1
        assert updates[0].changed == {("ns", "a")}
        assert updates[0].specs[("ns", "a")].values == {"n": 4}

        # A chart file of b changes: only b.
        (folder.parent / "charts" / "b" / "templates" / "configmap.yaml").write_text("# changed\n")
        update = await w.next()
        assert update.changed == {("ns", "b")}


async def test_bad_file_keeps_last_good_spec_then_fix_and_removal(folder: Path) -> None:
    source = PackageFolder(folder, debounce_ms=600, step_ms=100)
    good = source.load().specs[("ns", "a")]
    async with Watching(source) as w:
        (folder / "a.yaml").write_text("apiVersion: helmdeck.dev/v1alpha1\nkind: Package\nspec: [\n")
        update = await w.next()
        assert [e.file.name for e in update.errors] == ["a.yaml"]
        assert update.specs[("ns", "a")] == good and not update.changed
        assert ("ns", "b") in update.specs

        (folder / "a.yaml").write_text(package("a", folder.parent / "charts" / "a", "{fixed: true}"))
        update = await w.next()
        assert update.errors == () and update.changed == {("ns", "a")}

        (folder / "b.yaml").unlink()
        update = await w.next()
        assert update.removed == {("ns", "b")} and ("ns", "b") not in update.specs


async def test_new_chart_folder_is_watched_after_a_package_points_at_it(folder: Path, tmp_path: Path) -> None:
    other = tmp_path / "elsewhere" / "c"
    shutil.copytree(EXAMPLES / "charts" / "settings", other)
    source = PackageFolder(folder, debounce_ms=600, step_ms=100)
    source.load()
    async with Watching(source) as w:
        (folder / "c.yaml").write_text(package("c", other))
        update = await w.next()
        assert update.changed == {("ns", "c")}
        await asyncio.sleep(0.5)  # the watcher restarts with the new chart folder
        (other / "values.yaml").write_text("settings: {x: y}\n")
        update = await w.next()
        assert update.changed == {("ns", "c")}


def test_subfolders_holding_yaml_are_named_not_read(folder: Path) -> None:
    (folder / "apps" / "base").mkdir(parents=True)
    (folder / "apps" / "base" / "web.yaml").write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n")
    (folder / "charts-only").mkdir()
    (folder / "charts-only" / "README.md").write_text("no YAML here\n")
    shutil.copytree(EXAMPLES / "charts" / "settings", folder / "local-chart")  # a chart's templates: its own
    (folder / "values").mkdir()
    (folder / "values" / "a.yaml").write_text("x: 1\n")  # a values file a package names: its own
    (folder / "a.yaml").write_text((folder / "a.yaml").read_text() + "  valuesFiles: [values/a.yaml]\n")
    update = PackageFolder(folder).load()
    assert len(update.specs) == 2  # the folder's own files are read as before
    assert update.left_out == (f"subfolders of {folder} are not read: apps (--packages reads the folder's own files; "
                               "--kustomize DIR builds a repository path with its subfolders, as Flux does)",)


async def test_a_symlink_loop_or_a_dangling_link_is_a_bad_file_and_the_watch_goes_on(folder: Path) -> None:
    # A `loop.yaml -> loop.yaml` link ended the watcher (Path.resolve raised RuntimeError): no later change was
    # ever applied, and reconcile --once passed over the link without a word.
    source = PackageFolder(folder, debounce_ms=600, step_ms=100)
    source.load()
    async with Watching(source) as w:
        (folder / "loop.yaml").symlink_to("loop.yaml")
        (folder / "gone.yaml").symlink_to("nowhere.yaml")
        update = await w.next()
        assert sorted(e.file.name for e in update.errors) == ["gone.yaml", "loop.yaml"], update.errors
        assert "cannot read file" in str(update.errors[1]) and set(update.specs) == {("ns", "a"), ("ns", "b")}
        (folder / "loop.yaml").unlink()
        (folder / "c.yaml").write_text(package("c", folder.parent / "charts" / "a"))
        update = await w.next()
        while ("ns", "c") not in update.changed:  # the unlink may come as a burst of its own
            update = await w.next()
        assert [e.file.name for e in update.errors] == ["gone.yaml"]
