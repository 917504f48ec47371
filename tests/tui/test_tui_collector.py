"""The app's garbage collection policy (tui/collector.py): survivors of full collections frozen, whole
collections only when the operator is idle and rarely."""

from __future__ import annotations

import gc
import weakref

from tui.collector import IDLE_BEFORE_RECLAIM, RECLAIM_INTERVAL, Collector


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


def cycle() -> weakref.ref[Node]:
    """A reference cycle nothing else refers to once this returns; a weak reference to one of its nodes."""
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def test_survivors_of_a_full_collection_are_frozen_and_reclaim_frees_their_cycles() -> None:
    now = [1000.0]
    collector = Collector(clock=lambda: now[0])
    try:
        collector.start()
        kept = Node()
        kept.other = Node()
        gc.collect()  # a full collection: what survived it is frozen, the next ones do not walk it
        assert len(gc.get_objects(2)) == 0
        frozen = gc.get_freeze_count()
        assert frozen > 0
        assert not any(o is kept for o in gc.get_objects())  # frozen objects are not walked

        a, b = Node(), Node()
        a.other, b.other = b, a
        gc.collect()  # the cycle is alive: frozen with the rest
        dead = weakref.ref(a)
        del a, b
        gc.collect()
        assert dead() is not None  # garbage now, but frozen: a full collection leaves it

        now[0] += RECLAIM_INTERVAL - 1
        assert not collector.reclaim()  # the last whole collection (at start) is too recent
        now[0] += 1
        collector.input_seen()
        assert not collector.reclaim()  # the operator was active just now
        now[0] += IDLE_BEFORE_RECLAIM
        assert collector.reclaim()
        assert dead() is None  # a whole collection, frozen objects included
        assert gc.get_freeze_count() > 0  # its survivors frozen again
        assert not collector.reclaim()  # not again before RECLAIM_INTERVAL
        fresh = cycle()
        gc.collect()
        assert fresh() is None  # a cycle that died before a full collection goes as usual
    finally:
        collector.stop()
    assert gc.get_freeze_count() == 0
    assert collector._collected not in gc.callbacks


def test_a_pause_stops_collections_until_start_which_collects_once_and_freezes() -> None:
    assert gc.isenabled()
    collector = Collector()
    try:
        collector.pause()
        assert not gc.isenabled()  # the engine starts: no full passes over the growing heap
        dead = cycle()
        assert dead() is not None
        collector.start()
        assert gc.isenabled() and dead() is None  # one whole collection took the start's garbage
        assert gc.get_freeze_count() > 0
    finally:
        collector.stop()
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_a_pause_ended_by_stop_restores_the_collector_and_leaves_it_off_when_it_was_off() -> None:
    collector = Collector()
    collector.pause()
    collector.stop()  # the app quit while its engine was starting
    assert gc.isenabled() and gc.get_freeze_count() == 0
    gc.disable()  # as the command line's own start does
    try:
        collector.pause()
        collector.stop()
        assert not gc.isenabled()
    finally:
        gc.enable()
