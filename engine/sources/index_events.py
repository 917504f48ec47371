"""An ``index.yaml`` read on libyaml's events: only what helmdeck keeps is built.

Composing a whole index holds every node with its marks: a 25 MB index of 100,000 versions took about
1 GB and a minute. :func:`read_entries` walks the parser's events once instead (libyaml, C speed) and
keeps, per entry, ``version``, ``appVersion``, ``created``, ``digest`` and ``urls``, as written (a
scalar's text: ``1.10`` stays ``1.10``, a timestamp stays RFC 3339); every other field is skipped
without being built. The loader's bounds (:class:`engine.base.loader.Limits`) are counted on the
events: nodes (``HELMDECK_MAX_INDEX_NODES``) and nesting depth. helm writes indexes without YAML
aliases; an index with one is left to the bounded loader, which limits what aliases expand to.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import yaml

from engine.base.loader import Limits, Loader, YamlLimitError, syntax_error

FIELDS = ("version", "appVersion", "created", "digest", "urls")
_NULLS = frozenset(("", "~", "null", "Null", "NULL"))  # YAML 1.1's plain nulls, as PyYAML resolves them


class Aliased(Exception):
    """The index uses YAML aliases: read it with the bounded loader instead."""


class NotAnIndex(ValueError):
    """The document is not a mapping with an ``entries`` mapping (or none)."""


Entry = dict[str, object]  # FIELDS present in the entry: str, None (null or not a scalar), or tuple of URLs


class _Events:
    """The parser's events, with nodes and nesting depth counted against ``limits``."""

    def __init__(self, text: str, file: Path, limits: Limits):
        self._events: Iterator[yaml.Event] = yaml.parse(text, Loader=Loader)
        self.file = file
        self.limits = limits
        self.nodes = 0
        self.depth = 0

    def next(self) -> yaml.Event:
        event = next(self._events)
        if isinstance(event, yaml.ScalarEvent):
            self.nodes += 1
        elif isinstance(event, yaml.CollectionStartEvent):
            self.nodes += 1
            self.depth += 1
            if self.depth > self.limits.max_depth:
                raise self.limits.depth_error(self.file, _line(event))
        elif isinstance(event, yaml.CollectionEndEvent):
            self.depth -= 1
        elif isinstance(event, yaml.AliasEvent):
            raise Aliased
        if self.nodes > self.limits.max_nodes:
            raise YamlLimitError(self.file, f"more than {self.limits.max_nodes} nodes", _line(event),
                                 f"set {self.limits.nodes_env} to raise the limit")
        return event

    def skip(self, event: yaml.Event) -> None:
        """Skip the rest of the node ``event`` starts (nothing for a scalar)."""
        if not isinstance(event, yaml.CollectionStartEvent):
            return
        depth = 1
        while depth:
            current = self.next()
            if isinstance(current, yaml.CollectionStartEvent):
                depth += 1
            elif isinstance(current, yaml.CollectionEndEvent):
                depth -= 1

    def key(self) -> str | None:
        """The next mapping key as text (None: a collection key, skipped). Raises ``_End`` at the
        mapping's end."""
        event = self.next()
        if isinstance(event, yaml.MappingEndEvent):
            raise _End
        if isinstance(event, yaml.ScalarEvent):
            return event.value
        self.skip(event)
        return None


class _End(Exception):
    """The mapping being read ended."""


def _line(event: yaml.Event) -> int | None:
    mark = event.start_mark
    return mark.line + 1 if mark is not None else None


def _text(event: yaml.Event) -> str | None:
    """A scalar's text; None for a plain null or anything else than a scalar."""
    if not isinstance(event, yaml.ScalarEvent) or (not event.style and event.value in _NULLS):
        return None
    return str(event.value)


def read_entries(text: str, file: Path, limits: Limits) -> dict[str, list[Entry]]:
    """Chart name -> its entries (the :data:`FIELDS` each has; a chart whose value is not a list is left
    out, as an entry that is not a mapping). Raises YamlLimitError (limits, syntax), NotAnIndex, Aliased."""
    events = _Events(text, file, limits)
    try:
        events.next()  # the stream's start
        if isinstance(events.next(), yaml.StreamEndEvent):
            raise NotAnIndex
        charts: dict[str, list[Entry]] = {}
        root = events.next()
        index = isinstance(root, yaml.MappingStartEvent)
        if index:
            try:
                while True:
                    name = events.key()
                    value = events.next()
                    if name == "entries" and isinstance(value, yaml.MappingStartEvent):
                        charts = _charts(events)
                    else:
                        index = index and name != "entries"
                        events.skip(value)
            except _End:
                pass
        else:
            events.skip(root)  # the whole document is read: its syntax and limits are reported first
        events.next()  # the document's end
        if not isinstance(events.next(), yaml.StreamEndEvent):
            raise YamlLimitError(file, "YAML error: more than one document", None,
                                 "serve one document as index.yaml")
    except yaml.YAMLError as exc:
        raise syntax_error(file, exc) from None
    if not index:
        raise NotAnIndex
    return charts


def _charts(events: _Events) -> dict[str, list[Entry]]:
    charts: dict[str, list[Entry]] = {}
    try:
        while True:
            name = events.key()
            value = events.next()
            if name is None or not isinstance(value, yaml.SequenceStartEvent):
                events.skip(value)
                if name is not None:
                    charts.pop(name, None)  # the last value of a repeated key counts, as YAML's
                continue
            found: list[Entry] = []
            while not isinstance(item := events.next(), yaml.SequenceEndEvent):
                if isinstance(item, yaml.MappingStartEvent):
                    found.append(_entry(events))
                else:
                    events.skip(item)
            charts[name] = found
    except _End:
        return charts


def _entry(events: _Events) -> Entry:
    entry: Entry = {}
    try:
        while True:
            key = events.key()
            value = events.next()
            if key == "urls":
                urls: list[str] = []
                if isinstance(value, yaml.SequenceStartEvent):
                    while not isinstance(item := events.next(), yaml.SequenceEndEvent):
                        url = _text(item)
                        if url is not None:
                            urls.append(url)
                        events.skip(item)
                else:
                    events.skip(value)
                entry["urls"] = tuple(urls)
            elif key in FIELDS:
                entry[key] = _text(value)
                events.skip(value)
            else:
                events.skip(value)
    except _End:
        return entry
