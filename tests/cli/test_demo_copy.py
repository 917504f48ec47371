"""The demo's copy of the examples (helmdeck.demo.write_examples): rewritten at each start where the operator
left it as written, kept where they edited or deleted a file; this run's endpoints in repositories.yaml."""

from __future__ import annotations

import shutil
from pathlib import Path

from helmdeck.demo import write_examples

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_a_restart_keeps_the_operators_edits_and_takes_the_examples_changes(tmp_path: Path) -> None:
    # A `v` pin wrote `semver: '0.3.0'` into the copy's repositories.yaml; the next `make demo` wrote the
    # examples over it, and the release went back down to 0.2.0.
    examples = tmp_path / "examples"
    shutil.copytree(EXAMPLES, examples)
    dest = tmp_path / "copy"
    packages = write_examples(examples, dest, "http://127.0.0.1:4001", "127.0.0.1:5001")
    repositories = packages / "repositories.yaml"
    assert "'http://127.0.0.1:4001'" in repositories.read_text()
    repositories.write_text(repositories.read_text().replace("semver: '~0.2'", "semver: '0.3.0'"))
    (packages / "web.yaml").write_text((packages / "web.yaml").read_text().replace("replicas: 2", "replicas: 5"))
    (packages / "settings.yaml").unlink()
    (examples / "packages" / "flaky.yaml").write_text("# a newer example\n")  # helmdeck's own files moved on
    (dest / "values" / "extra.yaml").write_text("kept: true\n")  # the operator's own file

    write_examples(examples, dest, "http://127.0.0.1:4002", "127.0.0.1:5002")  # the next start: new ports
    text = repositories.read_text()
    assert "semver: '0.3.0'" in text  # the pin stays
    assert "'http://127.0.0.1:4002'" in text and "oci://127.0.0.1:5002/helmdeck-demo/web" in text
    assert "4001" not in text and "5001" not in text
    assert "replicas: 5" in (packages / "web.yaml").read_text()
    assert not (packages / "settings.yaml").exists()  # deleted stays deleted
    assert (packages / "flaky.yaml").read_text() == "# a newer example\n"  # unedited: the example's now
    assert (dest / "values" / "extra.yaml").read_text() == "kept: true\n"
    assert (packages / "web-oci.yaml").read_text() == (examples / "sources" / "web-oci.yaml").read_text()


def test_a_copy_made_before_the_record_is_rewritten_once(tmp_path: Path) -> None:
    dest = tmp_path / "copy"
    packages = write_examples(EXAMPLES, dest, "http://127.0.0.1:4001", "127.0.0.1:5001")
    (dest / ".demo-written.json").unlink()  # as an older helmdeck left it
    (packages / "web.yaml").write_text("# changed\n")
    write_examples(EXAMPLES, dest, "http://127.0.0.1:4001", "127.0.0.1:5001")
    assert (packages / "web.yaml").read_text() == (EXAMPLES / "packages" / "web.yaml").read_text()
