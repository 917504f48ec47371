"""The app attached to a controller shows the action the controller's ``<Action>Started`` Event names as the
release's running action until an Event of that action ends it (engine.runtime.cockpit.attach ``started`` and
``still_running``, the rule in ReleaseBook's ``_controller_running``), in whatever order the Events are read:
small inputs, no cluster. The pilot test on the local cluster is tests/tui/test_app_attached_started.py's."""

from __future__ import annotations

import itertools
import time
from typing import Any

from kubernetes import client

from engine.monitor.events import KubeEvent, parse_event
from engine.package.load import load_objects
from engine.runtime.cockpit.attach import Attachment, attached_fields, ended_action, started, still_running
from engine.runtime.ledger.book import STARTED_GRACE, ReleaseBook
from engine.runtime.state import RunningAction
from engine.storage.observer import Observer
from testkit.controller import oci_repository, package


def _event(reason: str, at: float, action: str = "", warning: bool = False) -> KubeEvent:
    return KubeEvent(at, "team-a", "Package", "api", "Warning" if warning else "Normal", reason, reason.lower(),
                     action=action)


def test_a_started_event_names_the_action_and_an_event_of_that_action_ends_it() -> None:
    spec = _spec()
    begun = started(_event("UpgradeStarted", 100.0, "upgrade"), spec)
    assert begun == RunningAction("upgrade", 100.0, 120.0)
    assert started(_event("CorrectDriftStarted", 5.0), spec) == RunningAction("correct-drift", 5.0, 120.0)
    for other in (_event("UpgradeSucceeded", 1.0, "upgrade"), _event("UpgradeStarted", 1.0, "upgrade", True),
                  _event("Started", 1.0), _event("BackOff", 1.0)):
        assert started(other, spec) is None, other
    assert begun is not None
    assert ended_action(_event("UpgradeSucceeded", 101.0, "upgrade"), "succeeded") == "upgrade"
    assert ended_action(_event("UpgradeCancelled", 101.0, "upgrade", True), "failed") == "upgrade"
    assert ended_action(_event("RequestFailed", 101.0, "request", True), "failed") == "request"  # another action's
    assert ended_action(_event("UpgradeFailed", 101.0), "failed") == ""  # an older controller's name no action
    assert ended_action(_event("Noted", 101.0), "info") is None
    assert still_running(begun, {"request": 101.0, "ShardOverlap": 101.0})
    assert still_running(begun, {"upgrade": 99.0})  # an earlier upgrade's end
    assert not still_running(begun, {"upgrade": 100.0})
    assert not still_running(begun, {"": 101.0})  # any action's end, from a controller naming none

def test_the_event_object_gives_its_action_bounded() -> None:
    obj = {"metadata": {"name": "api.1", "namespace": "team-a"}, "reason": "UpgradeStarted",
           "involvedObject": {"kind": "Package", "name": "api", "namespace": "team-a"},
           "eventTime": "2026-12-01T10:00:00.250000Z", "action": "upgrade" * 100}
    event = parse_event(obj)
    assert event is not None and event.action.startswith("upgrade") and len(event.action) == 128
    assert event.at == 1796119200.25  # eventTime's microseconds, with no lastTimestamp
    # lastTimestamp has whole seconds: eventTime within that second orders an end and the next start in it.
    ended = parse_event({**obj, "reason": "InstallSucceeded", "lastTimestamp": "2026-12-01T10:00:00Z",
                         "eventTime": "2026-12-01T10:00:00.100000Z"})
    begun = parse_event({**obj, "lastTimestamp": "2026-12-01T10:00:00Z"})
    assert ended is not None and begun is not None and ended.at < begun.at == 1796119200.25
    later = parse_event({**obj, "lastTimestamp": "2026-12-01T10:05:00Z"})  # repeated since: its last time
    assert later is not None and later.at == 1796119500.0


def test_the_attached_row_runs_the_started_action_until_its_end_whatever_order_the_events_come_in() -> None:
    book, attachment, key = _attached()
    now = time.time()
    attachment._on_event(_event("InstallSucceeded", now - 2.5, "install"))  # the pass's previous action
    attachment._on_event(_event("UpgradeStarted", now - 2, "upgrade"))
    view = book.view(key)
    assert view is not None and view.running == RunningAction("upgrade", now - 2, 120.0)
    assert view.observation is None  # no pending revision says so: the Event alone
    attachment._on_event(_event("RequestFailed", now - 1, "request", warning=True))
    assert (book.view(key) or view).running is not None  # another action's Event: the upgrade still runs
    attachment._on_event(_event("UpgradeSucceeded", now, "upgrade"))
    assert (book.view(key) or view).running is None
    # Listed again (a new watch): the end first, then its start, both older: nothing runs.
    book, attachment, key = _attached()
    attachment._on_event(_event("TestSucceeded", now, "test"))
    attachment._on_event(_event("TestStarted", now - 5, "test"))
    assert (book.view(key) or view).running is None
    # A start whose end was lost with its controller runs only until its timeout (and the grace) has passed.
    attachment._on_event(_event("UpgradeStarted", now - 120 - STARTED_GRACE - 1, "upgrade"))
    assert (book.view(key) or view).running is None


def test_the_running_test_is_shown_whichever_order_a_new_watch_lists_the_install_and_test_events_in() -> None:
    now = time.time()
    events = (_event("InstallStarted", now - 3, "install"), _event("InstallSucceeded", now - 2, "install"),
              _event("TestStarted", now - 1, "test"))
    for order in itertools.permutations(events):  # CI: listed as started test, started install, its success
        book, attachment, key = _attached()
        for event in order:
            attachment._on_event(event)
        view = book.view(key)
        assert view is not None and view.running == RunningAction("test", now - 1, 120.0), order
        attachment._on_event(_event("TestFailed", now, "test", warning=True))
        assert (book.view(key) or view).running is None, order


def test_an_event_given_again_is_logged_once_and_an_older_end_read_late_is_not_the_last_action() -> None:
    book, attachment, key = _attached()
    now = time.time()
    installed = _event("InstallSucceeded", now - 3, "install")
    testing = _event("TestStarted", now - 2, "test")
    failed = _event("TestFailed", now - 1, "test", warning=True)
    for event in (testing, failed, installed, testing, installed):  # a watch joined late: replayed, then live
        attachment._on_event(event)
    view = book.view(key)
    assert view is not None and view.running is None
    assert view.last is not None and view.last.action == "test" and not view.last.ok
    assert [e.action for e in book.events(key)] == ["TestStarted", "TestFailed", "InstallSucceeded"]


def _spec() -> Any:
    specs, errors = load_objects([package("team-a", "api", timeout="2m")], [oci_repository("team-a", "127.0.0.1:1/x")])
    assert not errors
    return specs[0]


def _attached() -> tuple[ReleaseBook, Attachment, tuple[str, str]]:
    config = client.Configuration()
    config.host = "http://127.0.0.1:9"  # never called
    book = ReleaseBook(Observer(None))
    attachment = Attachment(client.ApiClient(config), book, None, lambda _ns, _cb: lambda: None)
    obj = package("team-a", "api", timeout="2m")
    obj["metadata"]["generation"] = 1
    spec = _spec()
    book.set_attached({spec.key: attached_fields(obj, spec, "pod-7f9c")})
    attachment._keys = {("team-a", "api"): spec.key}
    return book, attachment, spec.key
