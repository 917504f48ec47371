"""helmdeck's own start-up: the cycle collector paused while a command starts, and on again after."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path

from helmdeck.cli import main

# Runs helmdeck as its command line does, then prints whether the collector is on and start-up frozen.
_AT_EXIT = """
import atexit, gc, json, runpy, sys
atexit.register(lambda: print(json.dumps([gc.isenabled(), gc.get_freeze_count() > 0])))
sys.argv[0] = "helmdeck"
runpy.run_module("helmdeck", run_name="__main__")
"""


def test_a_command_turns_the_collector_back_on_with_start_up_frozen(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", _AT_EXIT, "cluster", "status", "--cluster-dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 3, proc.stderr  # no local cluster there: "not ready"
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == [True, True]


def test_main_called_with_arguments_leaves_the_callers_collector_alone(tmp_path: Path) -> None:
    frozen = gc.get_freeze_count()
    assert main(["cluster", "status", "--cluster-dir", str(tmp_path)]) == 3
    assert gc.isenabled() and gc.get_freeze_count() == frozen  # a test process's objects are not frozen
