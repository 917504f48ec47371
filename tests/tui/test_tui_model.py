"""Unit tests of the app's pure parts: texts, filters, sorting, masking, manifests, dialogs, themes, settings."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest
import yaml

from engine.base.masking import Masker, is_secret_key
from engine.monitor.manifest import manifest_objects
from engine.monitor.status import MonitorStatus, ResourceStatus
from engine.reconcile.conditions import Condition
from engine.reconcile.status import EngineStatus
from engine.runtime.chart_versions import Pin
from engine.runtime.diff import unified
from engine.runtime.ledger.book import ReleaseBook
from engine.runtime.state import (
    ActionOutcome,
    CleanupItem,
    EngineSignal,
    ReleaseKey,
    ReleaseRemoved,
    ReleasesListed,
    ReleaseView,
    RunningAction,
)
from engine.storage.helmtime import helm_time
from engine.storage.observation import Observation
from engine.storage.observer import Observer
from engine.storage.records import ListedRevision
from testkit.fixtures import FIXED_NOW, FLAKY, LEGACY, SETTINGS, WEB, fixed_engine
from tests.storage_records import release
from tests.storage_records import secret as storage_secret
from tui import confirmations
from tui import format as fmt
from tui.manifest import placed
from tui.model import (
    COLUMNS,
    Cell,
    RowFilter,
    SortOrder,
    TextFilter,
    cells,
    first_rows,
    namespaces,
    natural_key,
    quick_match,
    quick_set,
    row_cells,
    row_id,
    search_text,
    state_counts,
)
from tui.screens.help import HelpFacts, help_content
from tui.settings import Settings
from tui.themes import SHIPPED_DIR, ThemeError, load_theme_file, load_themes


def views() -> dict[tuple[str, str], ReleaseView]:
    return {v.key: v for v in fixed_engine().releases()}


# -- texts ---------------------------------------------------------------------------


def test_durations_are_short_and_ages_drop_seconds_past_a_minute() -> None:
    assert [fmt.duration(s) for s in (0, 45, 120, 150, 3 * 3600 + 240, 2 * 86400 + 5 * 3600)] == \
        ["0s", "45s", "2m", "2m30s", "3h4m", "2d5h"]
    assert fmt.duration(150, coarse=True) == "2m"
    assert fmt.duration(59, coarse=True) == "59s"


def test_every_cell_reads_without_colour() -> None:
    row = cells(views()[WEB], FIXED_NOW)
    assert row["status"].text == "✔ deployed"
    assert row["state"].text == "≠ Drifted"
    assert row["ready"].text == "✖ no"
    assert row["monitor"].text == "! 1 absent"
    assert row["suspended"].text == "⏸ yes"
    assert row["action"].text == "✔ rollback"
    assert row["age"].text == "15m"
    settings = cells(views()[SETTINGS], FIXED_NOW)
    assert settings["maintenance"].text == "✎ on"
    assert settings["action"].text == "⟳ upgrade 12s / 5m"
    assert cells(views()[FLAKY], FIXED_NOW)["monitor"].text == "‖ paused ×2"
    assert cells(views()[LEGACY], FIXED_NOW)["state"].text == "-"


def test_helm_times_with_nanoseconds_and_offsets() -> None:
    assert fmt.helm_time_text("2026-11-30T09:30:00.123456789Z") == "2026-11-30 09:30:00"
    assert fmt.helm_time_text("2026-11-29T18:12:44+01:00") == "2026-11-29 17:12:44"
    assert fmt.helm_time_text("yesterday") == "-"
    assert helm_time("2026-11-30T09:30:00.5Z") == helm_time("2026-11-30T10:30:00.5+01:00") == 1796031000.5
    assert helm_time("") is None and helm_time("yesterday") is None


# -- filters and sorting -------------------------------------------------------------


def shown(filter_: RowFilter) -> list[str]:
    pred = filter_.predicate(FIXED_NOW)
    return sorted(name for (_, name), v in views().items() if pred(v))


def test_plain_text_filters_are_substring_tests_of_the_lower_cased_search_text() -> None:
    match = TextFilter("Helmdeck-DEMO").compile()
    row = search_text([Cell("helmdeck-demo"), Cell("Web")])
    assert row == "helmdeck-demo\nweb" and match(row)
    assert TextFilter("!web").compile()(row) is False
    assert TextFilter("w.b").compile()(row)  # regex syntax: the regex engine


def test_text_filter_is_a_regex_or_literal_text_when_invalid_and_can_exclude() -> None:
    # ^ and $ anchor at a cell's bounds: the release named web, not every row holding "web" (the row's
    # cells were one tab-separated line, so ^web$ found nothing).
    assert shown(RowFilter(TextFilter("^web$"))) == ["web"]
    assert shown(RowFilter(TextFilter("^fla"))) == ["flaky"]
    assert shown(RowFilter(TextFilter("PENDING"))) == ["legacy-api"]
    assert TextFilter("web(").error is not None
    assert shown(RowFilter(TextFilter("web("))) == []  # literal: no row contains "web("
    assert shown(RowFilter(TextFilter("!helmdeck-demo"))) == ["legacy-api"]


def test_a_filter_selects_from_the_kept_row_keys_in_their_order() -> None:
    rows = {row_id(v.key): v for v in views().values()}
    search = {rid: search_text(row_cells(v, FIXED_NOW)) for rid, v in rows.items()}
    quick = {rid: quick_set(v) for rid, v in rows.items()}
    order = sorted(rows, reverse=True)
    for filter_ in (RowFilter(TextFilter("e")), RowFilter(TextFilter("!web")), RowFilter(TextFilter("^helmdeck.*\tf")),
                    RowFilter(quick="pending"), RowFilter(TextFilter("a"), quick="pending", namespace="helmdeck-demo"),
                    RowFilter(namespace="legacy"), RowFilter()):
        text = filter_.text.compile()
        expected = [rid for rid in order if (filter_.namespace in (None, rows[rid].namespace))
                    and (filter_.quick == "all" or quick_match(rows[rid], filter_.quick)) and text(search[rid])]
        assert filter_.select(order, search, quick) == expected, filter_
    assert RowFilter(TextFilter("a"), quick="pending", namespace="helmdeck-demo").select(order, search, quick) == [
        "helmdeck-demo/settings"]


def test_quick_filters() -> None:
    assert shown(RowFilter(quick="failed")) == ["flaky"]
    assert shown(RowFilter(quick="pending")) == ["legacy-api", "settings"]  # pending status, running action
    assert shown(RowFilter(quick="drifted")) == ["web"]
    assert shown(RowFilter(quick="maintenance")) == ["settings"]
    assert shown(RowFilter(namespace="legacy")) == ["legacy-api"]
    assert shown(RowFilter(TextFilter("web"), quick="failed")) == []


def test_failed_quick_filter_counts_a_failed_last_action() -> None:
    view = dataclasses.replace(views()[WEB], state=None, last=ActionOutcome("test", False, "tests failed"))
    assert quick_match(view, "failed")
    assert not quick_match(dataclasses.replace(view, running=RunningAction("test", 0, 1)), "failed")


def test_a_stalled_release_being_upgraded_shows_the_upgrade_not_stalled() -> None:
    # The operator's u on a Stalled package runs an upgrade: STATE said "‼ Stalled" all along, as if the engine had
    # given up on it, while LAST ACTION said the upgrade ran. It says the action, in the table, the Overview and
    # the detail's title, and the row is no failed one meanwhile (it is pending); once it ends, the pass's state.
    stalled = dataclasses.replace(views()[WEB], state="Stalled", running=None, last=None)  # helm: deployed
    assert cells(stalled, FIXED_NOW)["state"].text == "‼ Stalled" and quick_match(stalled, "failed")
    upgrading = dataclasses.replace(stalled, running=RunningAction("upgrade", FIXED_NOW - 3, 300.0))
    assert cells(upgrading, FIXED_NOW)["state"] == ("⟳ upgrade", "busy")
    assert fmt.state_text(upgrading) == ("⟳ upgrade", "busy")
    assert not quick_match(upgrading, "failed") and quick_match(upgrading, "pending")
    running = dataclasses.replace(upgrading, state="OutOfSync")  # a row not stalled keeps its state, as before
    assert cells(running, FIXED_NOW)["state"].text == "↻ OutOfSync"


def test_a_package_that_cannot_be_resolved_shows_failed_and_a_failed_resolve() -> None:
    """A missing valuesFrom Secret or a source error stops the pass before any action. The book's view says
    so (STATE Failed, LAST ACTION ✖ resolve, the reason in its message): it showed ``-`` twice and counted
    as "no state"; the failed filter counts it."""
    book = fixed_engine().book
    key = WEB  # Drifted, its last action a good one
    before = ActionOutcome("upgrade", True, "upgraded", revision=2)
    for reason in ("ValuesError", "InvalidPackage", "SourceNotReady", "ArtifactFailed"):
        ready = Condition("Ready", "False", reason, "Secret demo/x not found")
        book.set_status(key, EngineStatus(conditions=(ready,), last=before))
        view = book.view(key)
        assert view is not None and view.state == "Failed" and view.last is not None
        assert (view.last.action, view.last.ok) == ("resolve", False)
        assert view.last.message == f"{reason}: Secret demo/x not found"
        row = cells(view, FIXED_NOW)
        assert (row["state"].text, row["action"].text) == ("✖ Failed", "✖ resolve")
        assert state_counts([view]) == {"Failed": 1}
        assert quick_match(view, "failed")
    for ready in (Condition("Ready", "False", "DependencyNotReady", "waits"), Condition("Ready", "True", "ok")):
        book.set_status(key, EngineStatus(conditions=(ready,), last=before))
        view = book.view(key)
        assert view is not None and view.state == "Drifted" and view.last == before
        assert not quick_match(view, "failed")


def sorted_names(order: SortOrder) -> list[str]:
    return [v.name for v in sorted(views().values(), key=lambda v: order.key(v, FIXED_NOW), reverse=order.reverse)]


def test_sort_by_revision_age_and_state() -> None:
    assert sorted_names(SortOrder("revision")) == ["flaky", "settings", "web", "legacy-api"]
    assert sorted_names(SortOrder("age")) == ["web", "flaky", "settings", "legacy-api"]
    assert sorted_names(SortOrder("state")) == ["settings", "web", "flaky", "legacy-api"]
    assert sorted_names(SortOrder("name", reverse=True)) == ["web", "settings", "legacy-api", "flaky"]
    assert SortOrder("age").next_column().column == "namespace"


def test_names_sort_naturally_as_k9s_does() -> None:
    names = ["rel-10", "rel-2", "rel-1", "rel-100", "Rel-3", "rel", "rel-02", "a10b2", "a10b10", "a9"]
    assert sorted(names, key=natural_key) == [
        "a9", "a10b2", "a10b10", "rel", "rel-1", "rel-02", "rel-2", "Rel-3", "rel-10", "rel-100"]
    base = next(iter(views().values()))
    rows = [dataclasses.replace(base, namespace=ns, name=name) for ns, name in
            (("ns-10", "rel-10"), ("ns-2", "rel-2"), ("ns-2", "rel-10"), ("ns-2", "rel-1"))]
    by_name = sorted(rows, key=lambda v: SortOrder("name").key(v, FIXED_NOW))
    assert [v.key for v in by_name] == [("ns-2", "rel-1"), ("ns-2", "rel-2"), ("ns-2", "rel-10"), ("ns-10", "rel-10")]
    by_ns = sorted(rows, key=lambda v: SortOrder("namespace").key(v, FIXED_NOW))
    assert [v.key for v in by_ns] == [("ns-2", "rel-1"), ("ns-2", "rel-2"), ("ns-2", "rel-10"), ("ns-10", "rel-10")]
    assert namespaces(rows) == ["ns-2", "ns-10"]


def test_counts_per_state() -> None:
    assert state_counts(views().values()) == {"InSync": 1, "Drifted": 1, "Failed": 1, "-": 1}


# -- masking ---------------------------------------------------------------------------


def test_secret_keys_are_decided_by_their_last_word() -> None:
    assert all(is_secret_key(k) for k in ("password", "dbPassword", "API_KEY", "client-secret", "authToken"))
    assert not any(is_secret_key(k) for k in ("secretName", "tokenTtl", "keyboard", "replicas", "monkey"))


def test_values_are_masked_with_tags_that_differ_exactly_when_values_differ() -> None:
    masker = Masker(b"k")
    out = masker.mask_values({
        "dbPassword": "hunter2", "other": {"password": "hunter2"}, "apiKey": "x", "secretName": "db-creds",
        "tokenEnabled": True, "secrets": {"a": 1, "nested": {"b": "c"}}, "cert": "-----BEGIN EC PRIVATE KEY-----",
        "replicas": 3,
    })
    assert out["dbPassword"].startswith("••••••") and out["dbPassword"] == out["other"]["password"]
    assert out["apiKey"] != out["dbPassword"]
    assert out["secretName"] == "db-creds" and out["tokenEnabled"] is True and out["replicas"] == 3
    assert out["secrets"]["a"].startswith("••••••") and out["secrets"]["nested"]["b"].startswith("••••••")
    assert out["cert"].startswith("••••••")
    assert Masker(b"other").mask("hunter2") != masker.mask("hunter2")
    assert "hunter2" in masker.values_yaml({"password": "hunter2"}, reveal=True)
    assert "hunter2" not in masker.values_yaml({"password": "hunter2"}, reveal=False)


def test_manifest_masks_secret_data_and_secret_looking_keys() -> None:
    manifest = ("---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: s\ndata:\n  password: aGk=\n"
                "  cert: |\n    line one\n    line two\nstringData:\n  token: abc\ntype: Opaque\n"
                "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  DB_PASSWORD: \"hidden\"\n"
                "  url: postgres://app:pw123@db/x\n  logLevel: info\n  secretName: visible\n")
    out = Masker(b"k").mask_manifest(manifest)
    assert "aGk=" not in out and "line one" not in out and "abc" not in out
    assert "hidden" not in out and "pw123" not in out and "postgres://app:••••••" in out
    assert "logLevel: info" in out and "secretName: visible" in out
    assert "type: Opaque" in out and "name: s" in out
    docs = list(yaml.safe_load_all(out))
    assert docs[0]["data"]["password"].startswith("••••••") and set(docs[0]["data"]) == {"password", "cert"}


# -- manifests and diffs ---------------------------------------------------------------


def test_notes_mask_the_values_secrets_wherever_they_appear() -> None:
    masker = Masker(b"k")
    values = {"auth": {"adminPassword": "hunter2", "user": "admin"}, "secrets": {"short": "ab", "pin": 12345},
              "enabled": True, "replicas": 2}
    notes = ("Log in as admin with hunter2 (pin 12345, replicas 2).\n"
             "curl http://bob:s3cret@web/\n"
             "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\ndone\n")
    shown = masker.mask_text(notes, values)
    for secret in ("hunter2", "12345", "s3cret", "MIIE"):
        assert secret not in shown
    assert masker.mask("hunter2") in shown and masker.mask("s3cret") in shown
    assert "Log in as admin" in shown and "replicas 2" in shown and "done" in shown and "http://bob:" in shown
    assert masker.mask_text("no secrets here", values) == "no secrets here"


def test_manifest_objects_get_the_release_namespace_unless_cluster_scoped() -> None:
    manifest = ("kind: Deployment\nmetadata: {name: a}\n---\nkind: ClusterRole\nmetadata: {name: r, namespace: x}\n"
                "---\nkind: ConfigMapList\nitems:\n- kind: ConfigMap\n  metadata: {name: c, namespace: other}\n"
                "---\n# only a comment\n")
    found = placed(manifest_objects(manifest), "ns", {})  # no discovery: the built-in list of cluster-scoped kinds
    assert [o.ref for o in found] == ["Deployment/ns/a", "ClusterRole/r", "ConfigMap/other/c"]


def test_unified_diff() -> None:
    assert unified("a\nb\n", "a\nb\n", "x", "y") == ""
    diff = unified("a\nb\n", "a\nc", "x", "y")
    assert "-b\n" in diff and "+c\n" in diff and diff.startswith("--- x\n+++ y\n")


# -- dialogs ---------------------------------------------------------------------------


def obs(version: int, status: str) -> Observation:
    return Observation("web", "ns", version, status, chart_name="web", chart_version="1.0.0", app_version="2")


def test_rollback_dialog_names_both_revisions_and_the_suspension() -> None:
    view = views()[WEB]
    text = confirmations.rollback(view, obs(3, "deployed"), obs(1, "superseded")).body
    assert "from revision 3 (deployed" in text and "to   revision 1 (superseded" in text
    assert "revision 4" in text and "suspended" in text


def test_cleanup_and_uninstall_dialogs_list_what_goes() -> None:
    c = confirmations.cleanup([CleanupItem("a", "one", "would-remove"), CleanupItem("b", "two", "would-remove")])
    assert c.details is not None and c.details.text == "a/one\nb/two" and c.confirm_label == "Uninstall 2"
    assert confirmations.cleanup([]).title == "Nothing to clean up"
    skipped = confirmations.cleanup([CleanupItem("a", "one", "would-remove"),
                                     CleanupItem("kube-system", "x", "skipped", "namespace ignored")])
    assert skipped.details == confirmations.Details("Releases that would be uninstalled", "a/one")
    assert "Left alone: kube-system/x (namespace ignored)." in skipped.body
    service = placed(manifest_objects("kind: Service\nmetadata: {name: web}\n"), "ns", {})
    u = confirmations.uninstall(views()[WEB], service, None)
    assert u.details == confirmations.Details("Resources deleted (1)", "Service/ns/web")
    broken = confirmations.uninstall(views()[WEB], None, "no such revision")
    assert "cannot be listed: no such revision" in broken.body


def test_upgrade_dialog_explains_maintenance_and_a_missing_diff() -> None:
    text = confirmations.upgrade(views()[SETTINGS], None, "no diff yet")
    assert "maintenance mode" in text.body and "cannot be shown: no diff yet" in text.body and text.details is None
    with_diff = confirmations.upgrade(views()[WEB], "--- a\n+++ b\n", None)
    assert with_diff.details is not None and with_diff.details.diff and with_diff.details.title


def test_maintenance_dialog_says_what_entering_and_leaving_do() -> None:
    enter = confirmations.maintenance(views()[WEB], entering=True).body
    leave = confirmations.maintenance(views()[SETTINGS], entering=False).body
    assert "stops the resource monitor" in enter and "does not upgrade, remediate or correct drift" in enter
    assert "overwritten" in leave and "monitor starts again" in leave


def test_unlock_dialog_says_how_long_it_is_pending() -> None:
    text = confirmations.unlock(views()[LEGACY], FIXED_NOW).body
    assert "Revision 7 is pending-upgrade since 2026-11-29 17:12:44 UTC (16h47m ago)" in text


def test_cancel_dialog_words_an_install_and_a_release_no_package_declares() -> None:
    view = dataclasses.replace(views()[WEB], running=RunningAction("reconcile", FIXED_NOW - 65, 120),
                               observation=obs(1, "pending-install"))
    install = confirmations.cancel(view, FIXED_NOW, None)
    text = " ".join(install.body.split())  # unwrapped
    assert install.title == "Stop the install?" and "has been running for 1m5s" in text
    assert "revision 1 is marked failed at once (so helm can act again) and counts as a failed install" in text
    # What follows, in the package's settings' terms: install retries 0 keep the failed release (no remediation)
    assert ("no retry and nothing undone; the release stays failed and the package Stalled until you upgrade it "
            "again (u) (install.remediation.retries 0)") in text
    assert install.alternative_label == "" and "roll back" not in install.body  # nothing deployed to go back to
    bare = dataclasses.replace(views()[LEGACY], running=RunningAction("rollback", FIXED_NOW - 5, 60))
    text = " ".join(confirmations.cancel(bare, FIXED_NOW, obs(6, "deployed")).body.split())
    assert "remediation" not in text and "suspend the package" not in text  # no package: no settings
    assert confirmations.cancel(bare, FIXED_NOW, obs(6, "deployed")).alternative_label == "Stop and roll back to 6"
    assert "so its objects come back." in text
    testing = dataclasses.replace(views()[WEB], running=RunningAction("test", FIXED_NOW - 5, 60))
    dialog = confirmations.cancel(testing, FIXED_NOW, None)
    assert dialog.title == "Stop the test?" and "nothing is undone" in dialog.body
    assert "the test is recorded as stopped" in dialog.body and "remediation" not in dialog.body


def test_the_cancel_dialogs_buttons_say_stop_and_let_run() -> None:
    # Its buttons read "Cancel upgrade (y)" beside "Cancel (n)": both cancel something. They say what each does,
    # and what follows the stop is said in the package's settings (rollback and retry, or a stall).
    view = dataclasses.replace(views()[FLAKY], running=RunningAction("upgrade", FIXED_NOW - 5, 60))
    dialog = confirmations.cancel(view, FIXED_NOW, obs(2, "deployed"))
    assert (dialog.confirm_label, dialog.alternative_label, dialog.dismiss_label) == (
        "Stop upgrade", "Stop and roll back to 2", "Let it run")
    assert confirmations.rollback(views()[WEB], obs(3, "deployed"), obs(2, "superseded")).dismiss_label == "Cancel"
    package = view.package
    assert package is not None
    retried = dataclasses.replace(view, package=dataclasses.replace(package, upgrade=dataclasses.replace(
        package.upgrade, retries=3)))
    text = " ".join(confirmations.cancel(retried, FIXED_NOW, None).body.split())
    assert ("as after any failed upgrade, the release is rolled back to the revision before and the upgrade tried "
            "again, 3 times at most since the last success") in text
    retry = dataclasses.replace(view, package=dataclasses.replace(package, upgrade=dataclasses.replace(
        package.upgrade, on_failure="RetryOnFailure", retry_interval=120.0)))
    assert "it is tried again after 2m, nothing undone meanwhile" in " ".join(
        confirmations.cancel(retry, FIXED_NOW, None).body.split())


def test_the_resume_dialog_says_what_the_next_pass_does() -> None:
    # It promised an upgrade back in every case; the pass acts only on a difference, not in maintenance, not on a
    # Stalled package, and not at all while the file's spec.suspend holds it.
    web = views()[WEB]
    said = " ".join(confirmations.resume(web).body.split())
    assert "only if they differ is the release upgraded (a hand rollback undone) or installed again" in said
    assert "a release that matches the package is left as it is" in said
    held = " ".join(confirmations.resume(dataclasses.replace(web, maintenance="NoResourceReconciliation")).body
                    .split())
    assert "the release is left as it is until you leave maintenance (m)" in held and "upgraded" not in held
    stalled = " ".join(confirmations.resume(dataclasses.replace(web, state="Stalled")).body.split())
    assert "not upgraded again until you force an upgrade (u)" in stalled
    assert web.package is not None
    by_file = dataclasses.replace(web, package=dataclasses.replace(web.package, suspend=True))
    text = " ".join(confirmations.resume(by_file).body.split())
    assert f"spec.suspend: true in {web.package.declared_in}" in text and "nothing is reconciled" in text


def test_shipped_themes_load() -> None:
    themes, errors = load_themes([SHIPPED_DIR])
    assert errors == []
    assert {t.name for t in themes} >= {"helmdeck-dark", "helmdeck-light", "helmdeck-high-contrast"}
    assert not next(t for t in themes if t.name == "helmdeck-light").dark


@pytest.mark.parametrize(("text", "field", "fix"), [
    ('name = "x"\nprimary = "#123456"\nbackgroud = "#000000"\n', "backgroud", "backgroud: did you mean background?"),
    ('name = "x"\nprimary = "#123456"\nbackgroud = "#000000"\nzzz = 1\n', "backgroud, zzz", "valid fields"),
    ('name = "x"\nprimary = "blurple"\n', "primary", "#rrggbb"),
    ('name = "Bad Name"\nprimary = "#123456"\n', "name", "letters, digits and -"),
    ('name = "x"\n', "primary", "add a colour"),
    ('name = "x"\nprimary = "#123456"\ndark = "yes"\n', "dark", "dark = true"),
    ('name = "x"\nprimary = "#123456"\ntext_alpha = 2\n', "text_alpha", "0.15"),
    ('name = "x"\nprimary = "#123456"\nvariables = 3\n', "variables", "[variables]"),
    ('name = "x\nprimary = 1', "", "fix the syntax"),
])
def test_bad_theme_files_name_the_file_field_and_fix(tmp_path: Path, text: str, field: str, fix: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ThemeError) as err:
        load_theme_file(path)
    assert err.value.field == field
    assert str(path) in str(err.value) and fix in str(err.value)


def test_user_theme_overrides_a_shipped_one_and_bad_files_do_not_stop_the_others(tmp_path: Path) -> None:
    (tmp_path / "mine.toml").write_text('name = "helmdeck-dark"\nprimary = "#ff0000"\n')
    (tmp_path / "broken.toml").write_text("name = ")
    themes, errors = load_themes([SHIPPED_DIR, tmp_path])
    assert next(t for t in themes if t.name == "helmdeck-dark").primary == "#ff0000"
    assert len(themes) == 3 and [e.file.name for e in errors] == ["broken.toml"]


def test_settings_remember_the_theme(tmp_path: Path) -> None:
    settings = Settings(tmp_path / "helmdeck")
    assert settings.load_theme() == (None, None)
    settings.save_theme("helmdeck-light")
    assert settings.load_theme() == ("helmdeck-light", None)
    settings.file.write_text("theme = [")
    name, problem = settings.load_theme()
    assert name is None and problem is not None and str(settings.file) in problem


def test_monitor_summaries_match_the_engine_status_type() -> None:
    absent = MonitorStatus("active", 0, (ResourceStatus("v1", "Service", "ns", "a", False, False),))
    assert fmt.monitor_text(absent) == ("! 1 absent", "bad")
    assert fmt.monitor_text(MonitorStatus("paused", 3)) == ("‖ paused ×3", "warn")
    assert fmt.monitor_text(MonitorStatus()) == ("○ off", "plain")


def test_help_names_the_log_and_settings_files() -> None:
    facts = HelpFacts(dict.fromkeys(("upgrade",)), False, "/var/log/helmdeck.log", "/home/op/.config/helmdeck",
                      "helmdeck-light")
    text = str(help_content(facts))
    assert "log        /var/log/helmdeck.log" in text
    assert "/home/op/.config/helmdeck/config.toml (theme: helmdeck-light)" in text
    assert "Rollback     disabled: " not in text and "Upgrade      available" in text
    without = str(help_content(dataclasses.replace(facts, settings_dir=None, readonly=True)))
    assert "settings   none in this run (theme: helmdeck-light)" in without
    assert "Upgrade      removed (read-only)" in without


def test_pin_confirmation_says_an_upgrade_only_when_the_version_is_not_deployed() -> None:
    view = dataclasses.replace(views()[WEB], suspended=False)
    assert view.observation is not None
    deployed = view.observation.chart_version
    planned = Pin(Path("web.yaml"), "OCIRepository", "spec.ref.semver", "~0.2", deployed, (), "")
    same = " ".join(confirmations.pin(view, deployed, True, planned, "", None).body.split())  # unwrapped
    assert f"{deployed} is deployed already, so the pin only holds it there (no upgrade)" in same
    assert "upgraded" not in same
    dialog = confirmations.pin(view, "9.9.9", False, planned, "", None)
    assert "the release is upgraded to 9.9.9." in " ".join(dialog.body.split())
    assert dialog.confirm_label == "Pin and reconcile"


def test_pin_confirmation_promises_no_upgrade_the_engine_does_not_make() -> None:
    # Suspended, it said "the release is upgraded to 9.9.9" beside "the pin applies when it is resumed"; in
    # maintenance and on a release Flux owns it promised an upgrade the pass never makes.
    view = views()[WEB]  # suspended (a hand rollback)
    assert view.observation is not None and view.suspended
    deployed = view.observation.chart_version
    planned = Pin(Path("web.yaml"), "OCIRepository", "spec.ref.semver", "~0.2", "9.9.9", (), "")
    for held, words in ((view, f"the package is suspended: nothing is upgraded now; the release stays at {deployed} "
                               "until it is resumed (s), which upgrades it to 9.9.9."),
                        (dataclasses.replace(view, suspended=False, maintenance="NoResourceReconciliation"),
                         f"the package is in maintenance: nothing is upgraded now; the release stays at {deployed} "
                         "until you leave maintenance (m), which upgrades it to 9.9.9."),
                        (dataclasses.replace(view, suspended=False, flux_owned=True),
                         "Flux owns the release: only the file changes here, and helmdeck does not upgrade it")):
        dialog = confirmations.pin(held, "9.9.9", False, planned, "", None)
        text = " ".join(dialog.body.split())
        assert words in text and "the release is upgraded to" not in text, text
        assert dialog.confirm_label == "Pin"


def test_the_chart_column_has_one_form_before_and_after_a_pin() -> None:
    # A chart from a repository read "web@0.2.0 ⇡0.3.0" (the repo/ dropped to fit the marker) and, once pinned to
    # 0.3.0, "charts/web@0.3.0": the form changed with the pin. It is chart@version throughout, as in the Overview,
    # History and the dialogs; the repository is the Overview's to name.
    from engine.sources.updates import ChartUpdate
    from testkit.chart_sources import SHOP_API, SHOP_WEB, sources_engine

    engine = sources_engine()
    for key in (SHOP_WEB, SHOP_API):
        view = engine.release(key)
        assert view is not None and view.observation is not None and view.package is not None
        assert view.package.chart_request is not None  # a chart from a repository
        chart = f"{view.observation.chart_name}@{view.observation.chart_version}"
        before = dataclasses.replace(view, chart_update=ChartUpdate("0.3.0", False))
        assert cells(before, FIXED_NOW)["chart"].text == f"{chart} ⇡0.3.0"
        pinned = dataclasses.replace(view, chart_update=None, observation=dataclasses.replace(
            view.observation, chart_version="0.3.0"))
        assert cells(pinned, FIXED_NOW)["chart"].text == f"{view.observation.chart_name}@0.3.0"


def test_a_release_listed_from_storage_labels_shows_what_helm_list_shows_first_and_waits_for_the_rest() -> None:
    view = ReleaseView("demo", "web", listed=ListedRevision("demo", "web", 7, "pending-upgrade", int(FIXED_NOW) - 120))
    row = cells(view, FIXED_NOW)
    assert {k: c.text for k, c in row.items() if c.text != "…"} == {
        "namespace": "demo", "name": "web", "revision": "7", "status": "⧗ pending-upgrade", "age": "2m"}
    assert row["status"].tone == fmt.status_tone("pending-upgrade") == "warn"
    assert set(row) == set(cells(dataclasses.replace(view, listed=None), FIXED_NOW))  # every column, in order
    decoded = cells(dataclasses.replace(view, observation=views()[WEB].observation), FIXED_NOW)
    assert decoded["chart"].text != "…"  # the record, once decoded, wins
    # The table's kept row (made directly, 10,000 at start-up) is the same cells, as plain tuples.
    assert row_cells(view, FIXED_NOW) == tuple(row.values())
    assert [type(c) for c in row_cells(view, FIXED_NOW)] == [tuple] * len(row)  # untracked by the collector
    fast = ReleaseView.from_listed(view.listed)  # type: ignore[arg-type]
    assert fast == view and hash(fast) == hash(view) and fast.monitor == view.monitor


def test_the_book_lists_releases_from_labels_only_while_the_engine_starts() -> None:
    observer = Observer(None, driver="secret")
    book = ReleaseBook(observer)
    said: list[EngineSignal] = []
    book.subscribe(said.append)
    web, gone = ListedRevision("demo", "web", 2, "deployed"), ListedRevision("demo", "gone", 1, "deployed")
    book.preview([web])
    assert said == []  # not while the engine runs: the views come from the records
    book.reading = True
    book.preview([ListedRevision("demo", "web", 1, "superseded"), web, gone])
    listed = [e for e in said if isinstance(e, ReleasesListed)]
    assert listed == said  # one event for the page, not one per release
    assert [[(v.key, v.listed) for v in e.views] for e in listed] == [
        [(("demo", "web"), web), (("demo", "gone"), gone)]]  # the newest revision of each
    observer.apply_object(storage_secret(release(2, "deployed"), rv="2"))
    book.reading = False
    book.refresh_all()
    shown = book.view(("demo", "web"))
    assert shown is not None and shown.listed is None and shown.observation is not None
    assert book.view(("demo", "gone")) is None and isinstance(said[-1], ReleaseRemoved)


def test_the_records_are_decoded_once_the_app_drew_the_labels_views() -> None:
    engine = fixed_engine()
    engine.book.reading = True
    engine._preview([ListedRevision("demo", "fresh", 1, "deployed")])  # no loop running: made at once
    done = threading.Event()

    def list_records() -> None:  # the storage list thread, once the labels are listed
        engine._previewed()
        done.set()

    lister = threading.Thread(target=list_records)
    lister.start()
    assert not done.wait(0.3)  # the app has not drawn them yet: decoding would compete with that
    engine.preview_shown()
    assert done.wait(5)
    lister.join()
    engine._preview([])  # a page that announces nothing waits for no drawing
    assert engine._preview_shown.is_set()


def test_rows_drawn_while_the_first_records_are_read_are_read_next() -> None:
    # The app drew the first page's rows (5,000 labels of 10,000), then the table with every page: the rows on
    # screen changed. Those first rows were read; the rows now on screen must be read too before every other
    # record (they waited for the whole list, seconds at 10,000 releases: bench/tui_launch.py).
    engine = fixed_engine()
    engine.book.reading = True
    early, late = ("demo", "rel-1"), ("demo", "rel-2")
    engine._preview([ListedRevision(*early, 1, "deployed")])  # no loop running: made at once
    reads: list[tuple[ReleaseKey, ...]] = []

    def read_first(releases: Sequence[ReleaseKey]) -> None:
        reads.append(tuple(releases))
        if len(reads) == 1:
            engine.preview_shown([early, late])  # the next page's rows drawn while the first are read

    engine.observer.read_first = read_first  # type: ignore[method-assign]
    engine.preview_shown([early])
    engine._previewed()
    assert reads == [(early,), (late,)]


def test_the_first_rows_are_those_the_table_shows_first() -> None:
    # What the app asks the labels list ahead to read first (helmdeck.app): the table's first rows, in its order.
    keys = [("demo", f"rel-{i}") for i in (10, 2, 1, 30, 3)] + [("a", "z")]
    in_order = sorted((ReleaseView(*key) for key in keys), key=lambda view: SortOrder().key(view, FIXED_NOW))
    assert first_rows(keys, 4) == [view.key for view in in_order[:4]] == [
        ("a", "z"), ("demo", "rel-1"), ("demo", "rel-2"), ("demo", "rel-3")]


def test_a_labels_view_shows_the_record_read_first() -> None:
    # The records of the first screen's rows are decoded before the labels are handed on (LabelsAhead): the views
    # made from the labels carry them, so that screen shows their charts at once.
    observer = Observer(None, driver="secret")
    observer.apply_object(storage_secret(release(2, "deployed", name=WEB[1], namespace=WEB[0]), rv="2"))
    book = ReleaseBook(observer)
    book.reading = True
    web, other = ListedRevision(*WEB, 2, "deployed"), ListedRevision("demo", "other", 1, "deployed")
    book.preview([web, other])
    shown = book.view(WEB)
    assert shown is not None and shown.listed is None and shown.observation == observer.latest(*WEB)
    assert book.view(("demo", "other")) == ReleaseView.from_listed(other)


def test_packages_loaded_after_the_labels_keep_the_labels_view_until_the_start_refreshes() -> None:
    book = ReleaseBook(Observer(None, driver="secret"))
    package = views()[WEB].package
    assert package is not None
    book.reading = True  # the engine lists storage first, then loads the packages folder
    listed = ListedRevision(*WEB, 3, "deployed")
    book.preview([listed])
    book.set_packages({WEB: package})
    book.refresh(WEB)  # the folder loaded (Controller.apply_input) while storage is read
    shown = book.view(WEB)
    assert shown is not None and shown.listed == listed and shown.package is None
    book.reading = False
    book.refresh_all()  # the start's refresh: the package's view, from what storage holds (no record here)
    shown = book.view(WEB)
    assert shown is not None and shown.package == package and shown.listed is None


def test_a_package_view_made_before_storage_was_read_gives_way_to_the_labels() -> None:
    book = ReleaseBook(Observer(None, driver="secret"))
    package = views()[WEB].package
    assert package is not None
    key = WEB
    book.set_packages({key: package})
    book.refresh(key)  # the folder loaded as the engine was built: storage not read yet
    early = book.view(key)
    assert early is not None and early.observation is None and early.listed is None
    book.reading = True
    listed = ListedRevision(*key, 3, "deployed")
    book.preview([listed])
    shown = book.view(key)
    assert shown is not None and shown.listed == listed  # not "not installed" while the records decode
    assert cells(shown, FIXED_NOW)["revision"].text == "3"


def test_the_upgrade_dialog_of_a_release_not_installed_speaks_of_an_install() -> None:
    # `u` on an uninstalled release installs it: its dialog still said "What the upgrade would change".
    absent = ReleaseView("ns", "app")
    shown = confirmations.upgrade(absent, "--- a\n+++ b\n", None)
    assert (shown.title, shown.confirm_label) == ("Install?", "Install")
    assert shown.details is not None and shown.details.title == "What the install would change (deployed → desired)"
    unknown = confirmations.upgrade(absent, None, "no renderer")
    assert "What the install changes cannot be shown: no renderer." in unknown.body and "upgrade" not in unknown.body


def test_the_header_names_the_namespaces_watched_rather_than_all() -> None:
    # With -n team-b the header said "view: all namespaces".
    assert RowFilter().describe() == "all namespaces"
    assert RowFilter().describe(("team-b",)) == "ns team-b"
    assert RowFilter().describe(("a", "b")) == "ns a, b"
    assert RowFilter(namespace="a").describe(("a", "b")) == "ns a"  # the n key's choice among them


def test_the_state_of_a_release_flux_owns_says_so_in_the_columns_room() -> None:
    """STATE showed ↻ OutOfSync for a release Flux owns (OWNER flux, a column left out first on a narrow
    terminal), as for one helmdeck is about to upgrade; "(Flux owns it)" has no room in it. It shows ⚑ (Flux
    owns it) with the state, in the column's width; the detail keeps the long form."""
    width = next(c.width for c in COLUMNS if c.key == "state") - 1
    for state in ("OutOfSync", "InSync", "Failed", "Unmanaged", None):
        text, tone = cells(ReleaseView("ns", "web", state=state, flux_owned=True), 0.0)["state"]
        assert text == (f"⚑ {state}" if state else "⚑") and len(text) <= width
        assert tone == fmt.engine_state_text(state)[1]
    assert cells(ReleaseView("ns", "web", state="OutOfSync"), 0.0)["state"].text == "↻ OutOfSync"
    assert fmt.engine_state_text("OutOfSync", flux_owned=True)[0] == "↻ OutOfSync (Flux owns it)"
