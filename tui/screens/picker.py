"""A modal list to pick one value: a namespace, a revision to roll back to."""

from __future__ import annotations

from typing import Generic, TypeVar

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList
from textual.widgets.option_list import Option

T = TypeVar("T")


class PickerScreen(ModalScreen[T | None], Generic[T]):
    """Dismisses with the chosen value (enter) or None (escape)."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, title: str, choices: list[tuple[str, T]], initial: int = 0, note: str = ""):
        super().__init__()
        self._title = title
        self._choices = choices
        self._initial = initial
        self._note = note

    def compose(self) -> ComposeResult:
        with Vertical(id="picker"):
            yield Label(self._title, id="picker-title")
            yield OptionList(*(Option(label, id=str(i)) for i, (label, _) in enumerate(self._choices)))
            if self._note:
                yield Label(self._note, id="picker-note")

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        options.highlighted = self._initial if self._choices else None
        options.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(self._choices[event.option_index][1])

    def action_cancel(self) -> None:
        self.dismiss(None)
