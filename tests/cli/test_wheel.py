"""A non-editable install works outside the source tree: the wheel carries the themes and the examples.

The wheel is built offline (``--no-build-isolation``: the dev venv's setuptools) from a copy of the
source, and installed without dependencies into a fresh venv that reuses the dev venv's packages through
a ``.pth`` line (a plain path: the dev venv's editable-install hook is not run, so helmdeck itself can only
come from the wheel). Commands then run from a directory outside the source tree.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from helmdeck import __version__

ROOT = Path(__file__).resolve().parents[2]
SKIP = shutil.ignore_patterns(".venv", ".git", "build", "dist", "*.egg-info", "__pycache__", ".*_cache",
                              ".hypothesis", "tests", "testkit", "bench")


def run(*args: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=240,
                          env=env, check=False)
    assert proc.returncode == 0, f"{args} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout + proc.stderr


def test_wheel_installs_and_runs_outside_the_source_tree(tmp_path: Path) -> None:
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, symlinks=True, ignore=SKIP)
    build_log = run(sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation",
                    "--no-index", "-w", tmp_path / "dist", src, cwd=tmp_path)
    assert "deprecat" not in build_log.lower() and "SetuptoolsWarning" not in build_log, build_log
    (wheel,) = (tmp_path / "dist").glob("helmdeck-*.whl")

    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp_path)
    run(sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "install", "--quiet", "--no-deps",
        "--no-index", wheel, cwd=tmp_path)
    site = Path(run(venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])",
                    cwd=tmp_path).strip())
    (site / "dev-venv.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    outside = tmp_path / "elsewhere"
    outside.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["COLUMNS"] = "1000"  # argparse would wrap the path at its hyphens
    version = run(venv / "bin" / "helmdeck", "--version", cwd=outside, env=env)
    assert version.startswith(f"helmdeck {__version__}\nhelm ")
    demo = run(venv / "bin" / "helmdeck", "demo", "--help", cwd=outside, env=env)
    examples = site / "helmdeck" / "examples" / "packages"
    assert f"(default: the examples, {examples})" in demo  # the help names the installed examples
    assert (examples.parent / "sources" / "web-oci.yaml").is_file()  # the demo's packages from repositories
    # The installed code finds its data in the venv, not in the source tree.
    probe = ("from pathlib import Path; import helmdeck.cli, tui.themes, engine.package.load as p;"
             "from tui.themes import SHIPPED_DIR, load_themes;"
             "themes, errors = load_themes([SHIPPED_DIR]);"
             "specs, bad = p.load_packages(helmdeck.cli.example_packages());"
             "print(SHIPPED_DIR); print(sorted(t.name for t in themes), errors);"
             "print(sorted(s.name for s in specs), bad, all(Path(s.chart_path).is_dir() for s in specs))")
    lines = run(venv / "bin" / "python", "-c", probe, cwd=outside, env=env).splitlines()
    assert lines[0] == str(site / "tui" / "themes")
    assert lines[1] == "['helmdeck-dark', 'helmdeck-high-contrast', 'helmdeck-light'] []"
    assert lines[2] == "['flaky', 'settings', 'web'] [] True"
