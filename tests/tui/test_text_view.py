"""The text view: a large text goes to a Log that draws only the lines in sight (a Static laid out all of
them: 132,000 lines of values took ~16 s with the app unresponsive); a small one stays a Static."""

from __future__ import annotations

import time

from textual.app import App, ComposeResult
from textual.widgets import Log, Static

from tui.widgets.text_view import LARGE_LINES, TextView


class _Shown(App[None]):
    CSS = "TextView { height: 1fr; }"

    def compose(self) -> ComposeResult:
        yield TextView()


async def test_a_large_text_is_drawn_by_a_log_and_scrolls_with_the_keys() -> None:
    app = _Shown()
    async with app.run_test(size=(80, 20)) as pilot:
        view = app.query_one(TextView)
        view.focus()
        text = "".join(f"key-{i}: value {i}\n" for i in range(100_000))
        started = time.perf_counter()
        view.show(text)
        await pilot.pause()
        assert time.perf_counter() - started < 5  # a Static took tens of seconds here
        log, body = view.query_one(Log), view.query_one(Static)
        assert log.display and not body.display and log.line_count == 100_000
        assert log.lines[0] == "key-0: value 0" and app.focused is log
        await pilot.press("pagedown")
        assert log.scroll_offset.y > 0
        view.show("small: 1\n" * (LARGE_LINES - 1))
        await pilot.pause()
        assert body.display and not log.display and log.line_count == 0
        assert app.focused is view
