"""A yes/no dialog that says what an action will touch before it runs."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static

from tui.confirmations import Confirmation
from tui.widgets.text_view import TextView, fold_diff, styled_diff

_DIALOG_TEXT = 86  # the details' width in a 96-column dialog, until the layout says
_SCROLLBAR = 2  # a long diff scrolls: its lines leave room for the scrollbar


class ConfirmScreen(ModalScreen[str]):
    """Dismisses with "confirm" (``y``, or enter on the confirm button), "alternative" (``b``, when the
    confirmation offers a second way) or "" on cancel (``n``/escape).

    Cancel has the focus at first, so a stray enter never confirms.
    """

    BINDINGS = [
        Binding("y", "confirm", "Confirm"),
        Binding("b", "alternative", "Alternative", show=False),
        Binding("n,escape", "cancel", "Cancel"),
    ]

    def __init__(self, confirmation: Confirmation):
        super().__init__()
        self.confirmation = confirmation

    def compose(self) -> ComposeResult:
        c = self.confirmation
        with Vertical(id="dialog"):
            yield Label(c.title, id="dialog-title")
            yield Static(c.body, id="dialog-body", markup=False)
            if c.details is not None:
                yield Label(c.details.title, id="dialog-details-title")
                if c.details.text:
                    yield TextView(id="dialog-details")
            with Horizontal(id="dialog-buttons"):
                yield Button(f"{c.confirm_label} (y)", variant="warning", id="confirm")
                if c.alternative_label:
                    yield Button(f"{c.alternative_label} (b)", variant="warning", id="alternative")
                yield Button(f"{c.dismiss_label} (n)", id="cancel")

    def on_mount(self) -> None:
        details = self.confirmation.details
        if details is not None and details.text:
            if details.diff:
                self.call_after_refresh(self._first_diff)  # folded at the width the layout gives it
            else:
                self.query_one("#dialog-details", TextView).show(details.text)
        self.query_one("#cancel", Button).focus()

    def _first_diff(self) -> None:
        self._show_diff()
        self.query_one("#cancel", Button).focus()  # a stray enter never confirms

    def on_resize(self) -> None:
        details = self.confirmation.details
        if details is not None and details.text and details.diff:
            self._show_diff()

    def _show_diff(self) -> None:
        """The diff folded at the view's width: a long line continues with its +/- marker (never wrapped bare)."""
        details = self.confirmation.details
        assert details is not None
        view = self.query_one("#dialog-details", TextView)
        width = view.content_region.width or _DIALOG_TEXT
        view.show(styled_diff(fold_diff(details.text, width - _SCROLLBAR)))

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id if event.button.id in ("confirm", "alternative") else "")

    def action_confirm(self) -> None:
        self.dismiss("confirm")

    def action_alternative(self) -> None:
        if self.confirmation.alternative_label:
            self.dismiss("alternative")

    def action_cancel(self) -> None:
        self.dismiss("")
