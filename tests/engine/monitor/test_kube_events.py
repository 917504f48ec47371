"""Unit tests of engine.monitor.events: parsing core/v1 Events, which belong to a release, bounded memory."""

from __future__ import annotations

from engine.monitor.events import EventHub, NamespaceEvents, WarningCounter, belongs, oldest_first, parse_event
from testkit.fixtures import kube_event


def test_events_of_a_workload_include_its_generated_children_only() -> None:
    objects = [("Deployment", "helmdeck-demo", "web"), ("StatefulSet", "helmdeck-demo", "db"),
               ("CronJob", "helmdeck-demo", "tick")]

    def of(kind: str, name: str) -> bool:
        event = parse_event(kube_event("e", kind, name, "Normal", "R", "m", 1))
        assert event is not None
        return belongs(event, objects)

    assert of("Deployment", "web") and of("ReplicaSet", "web-5d8f7c9b4") and of("Pod", "web-5d8f7c9b4-x2x5q")
    assert of("Pod", "db-0") and of("Job", "tick-29012345") and of("Pod", "tick-29012345-abcde")
    assert not of("Pod", "web-api-5d8f7c9b4-x2x5q-extra") and not of("Pod", "other-abcde")
    assert not of("Service", "db") and not of("Pod", "db-x")


def test_a_namespace_keeps_only_its_most_recent_events() -> None:
    events = NamespaceEvents(None, "helmdeck-demo", keep=3)
    seen: list[str] = []
    events.listeners.add(lambda e, gone: seen.append(("-" if gone else "+") + e.reason))
    for i in range(5):
        events.apply(kube_event(f"e{i}", "Pod", "p", "Warning", f"R{i}", "m", 10 - i))
    assert [e.reason for e in events.recent()] == ["R2", "R3", "R4"]
    assert seen == ["+R0", "+R1", "+R2", "+R3", "-R0", "+R4", "-R1"]  # the oldest go, said as gone
    warning = events.recent()[-1]
    assert warning.warning and warning.ref == "Pod/p"



def test_a_list_is_taken_oldest_first_not_in_the_name_order_the_api_server_gives() -> None:
    listed = [kube_event("pkg.f3", "Package", "api", "Normal", "TestStarted", "m", 1),
              kube_event("pkg.0a", "Package", "api", "Normal", "InstallStarted", "m", 3),
              {"metadata": {"name": "nameless"}, "involvedObject": {}},  # names no object: left out
              kube_event("pkg.7c", "Package", "api", "Normal", "InstallSucceeded", "m", 2)]
    assert [e.reason for e in oldest_first(listed)] == ["InstallStarted", "InstallSucceeded", "TestStarted"]


def test_an_offline_hub_shows_what_it_was_fed_to_its_subscribers() -> None:
    hub = EventHub(None)
    hub.feed(kube_event("e1", "Pod", "p", "Normal", "Pulled", "m", 2))
    got: list[str] = []
    unsubscribe = hub.subscribe("helmdeck-demo", lambda e, _gone: got.append(e.reason))
    hub.feed(kube_event("e2", "Pod", "p", "Warning", "BackOff", "m", 1))
    assert [e.reason for e in hub.recent("helmdeck-demo")] == ["Pulled", "BackOff"] and got == ["BackOff"]
    unsubscribe()
    assert hub.stop()


def test_a_late_subscriber_asking_for_a_replay_gets_what_the_shared_watch_kept_first() -> None:
    hub = EventHub(None)
    first: list[str] = []
    hub.subscribe("helmdeck-demo", lambda e, _gone: first.append(e.reason))  # the watch is shared from here
    hub.feed(kube_event("e1", "Package", "api", "Normal", "InstallSucceeded", "m", 3))
    hub.feed(kube_event("e2", "Package", "api", "Normal", "TestStarted", "m", 2))
    late: list[str] = []
    replayed: list[str] = []
    hub.subscribe("helmdeck-demo", lambda e, _gone: late.append(e.reason))
    hub.subscribe("helmdeck-demo", lambda e, gone: replayed.append(e.reason + ("-" if gone else "")), replay=True)
    assert first == ["InstallSucceeded", "TestStarted"] and late == []  # joined late: nothing of before
    assert replayed == ["InstallSucceeded", "TestStarted"]  # oldest first, as kept
    hub.feed(kube_event("e3", "Package", "api", "Warning", "TestFailed", "m", 1))
    assert late == ["TestFailed"] and replayed[-1] == "TestFailed"
    assert hub.stop()


def test_warning_counts_per_release_follow_its_objects_and_forget_gone_events() -> None:
    hub = EventHub(None)
    counts: dict[tuple[str, str], int] = {}
    counter = WarningCounter(hub, lambda key, n: counts.__setitem__(key, n))
    hub.feed(kube_event("old", "Pod", "web-5d8f7c9b4-x2x5q", "Warning", "FailedScheduling", "m", 3))
    counter.track(("helmdeck-demo", "web"), [("Deployment", "helmdeck-demo", "web")])
    counter.track(("helmdeck-demo", "web-api"), [("Deployment", "", "web-api")])
    assert counts == {("helmdeck-demo", "web"): 1}  # what was kept before it was tracked counts
    hub.feed(kube_event("e2", "ReplicaSet", "web-api-7f9c", "Warning", "FailedCreate", "m", 2))
    hub.feed(kube_event("e3", "Pod", "web-api-7f9c-abcde", "Normal", "Scheduled", "m", 1))
    assert counts == {("helmdeck-demo", "web"): 1, ("helmdeck-demo", "web-api"): 1}
    for watch in list(hub._watches.values()):
        watch.apply(kube_event("old", "Pod", "web-5d8f7c9b4-x2x5q", "Warning", "FailedScheduling", "m", 3),
                    deleted=True)
    assert counts[("helmdeck-demo", "web")] == 0
