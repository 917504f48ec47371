"""The help screen (``?``): every key, whether each action is available and why not, and the rules."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Label

from tui.model import QUICK_FILTER_HELP, QUICK_FILTERS
from tui.operations import OPERATIONS
from tui.widgets.text_view import TextView

NAVIGATION: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    ("Release list", (
        ("enter", "open the release's detail"),
        ("/", "filter rows: a regular expression over every cell (literal text when it is not a valid "
              "regex); !text hides matching rows; enter keeps, escape clears"),
        *((str(i), f"quick filter {q}: {QUICK_FILTER_HELP[q]}") for i, q in enumerate(QUICK_FILTERS)),
        ("n", "show one namespace, or all"),
        ("o / O", "sort by the next column / reverse the order (or click a column header)"),
        ("+N", "at the right of the table header: N columns do not fit the terminal (the header line names "
               "them; they go least needed first: APP, OWNER, AGE, SUSP, MONITOR, …); sort and filter still use them"),
        ("↑ / ⇡", "in CHART: the repository offers a newer chart version inside the package's range (the next "
                  "reconcile installs it) / outside it (v pins it); the Overview names the source"),
    )),
    ("Release detail", (
        ("1 … 8", "Overview, History, Values, Manifest, Diff, Resources, Events, Notes"),
        ("enter", "History: show that revision in Values, Manifest and Notes; Resources: open the object "
                  "(live YAML, events, pods and logs; r refreshes, x reveals secrets, escape goes back)"),
        ("r", "History: roll back to the highlighted revision (elsewhere: pick one)"),
        ("a", "Values: user-supplied or computed values"),
        ("x", "Values, Manifest, Diff, Notes: reveal or mask secrets"),
        ("escape", "back to the release list"),
    )),
    ("Anywhere", (
        ("home / end", "first / last row of a table (release list, History, Resources); the top / bottom of a "
                       "text"),
        ("C", "switch the cluster context: the kubeconfig's contexts, as k9s's :ctx (filter and sort stay)"),
        ("P", "the controller view, as k9s's pulses: each helmdeck controller replica's reconciles per minute "
              "(succeeded, failed: red when failures rise), queue depth, helm action p50/p99; its metrics come "
              "from --controller-metrics URL or, for a controller on this machine, its Lease"),
        ("ctrl+p", "command palette: every action, and Theme to change the theme"),
        ("?", "this help"),
        ("q", "quit"),
    )),
)

MASKING = (
    "Secrets are masked until revealed with x: values whose key ends in password, passwd, pwd, passphrase, "
    "secret, token, credential(s) or dsn, or in an api, private, access, tls... key (camelCase, snake_case and "
    "kebab-case are split into words; secretName, key and topologyKey stay visible); everything under a map "
    "named secrets, secret or credentials; strings holding a PEM private key; in manifests, the data/stringData "
    "of every Secret and the values' secrets wherever the chart put them (the YAML stays valid). "
    "A masked value shows a short tag that differs exactly when the values differ, so diffs still show a "
    "secret changed."
)


WIDTH = 100  # the help box is 110 wide, less border and padding


def _indented(text: str, indent: int = 13) -> str:
    """``text`` wrapped to the help box, every line indented (a hanging indent under the key column)."""
    return textwrap.fill(text, WIDTH, initial_indent=" " * indent, subsequent_indent=" " * indent) + "\n"


@dataclass(frozen=True)
class HelpFacts:
    """What the help screen reports about this run: each action's availability and where things live."""

    reasons: dict[str, str | None]  # action name -> None (available) or why not
    readonly: bool
    log_file: str
    settings_dir: str | None  # None: this run reads and writes no settings
    theme: str
    release: str = ""  # the selected release the availability is for ("" none: only the run-wide rules)


def help_content(facts: HelpFacts) -> Content:
    """The whole help text, readable without colour."""
    parts: list[str | tuple[str, str]] = [("Actions", "bold $text-primary")]
    if facts.release:
        parts.append(f"  on {facts.release}")
    if facts.readonly:
        parts.append(("  read-only mode: every action is removed and refused", "$text-warning"))
    parts.append("\n")
    for a in OPERATIONS:
        reason = facts.reasons.get(a.name)
        if facts.readonly:
            state: tuple[str, str] = ("removed (read-only)", "$text-warning")
        elif reason is None:
            state = ("available", "$text-success")
        else:
            state = (textwrap.fill(f"disabled: {reason}", WIDTH - 26, subsequent_indent=" " * 26), "$text-warning")
        parts += [(f"  {a.key_display:<11}", "bold"), f"{a.label:<13}", state, "\n", _indented(a.summary)]
    for title, rows in NAVIGATION:
        parts.append((f"\n{title}\n", "bold $text-primary"))
        for key, text in rows:
            parts += [(f"  {key:<11}", "bold"), _indented(text).lstrip()]
    parts += [("\nSecrets\n", "bold $text-primary"), _indented(MASKING, 2)]
    parts += [("\nFiles\n", "bold $text-primary"),
              f"  log        {facts.log_file}\n",
              *((f"  settings   {facts.settings_dir}/config.toml (theme: {facts.theme})\n",
                 f"  themes     {facts.settings_dir}/themes/*.toml (format: themes/README.md)\n")
                if facts.settings_dir else (f"  settings   none in this run (theme: {facts.theme})\n",))]
    return Content.assemble(*parts)


class HelpScreen(ModalScreen[None]):
    """Scrollable help; escape, ``?`` or ``q`` closes it."""

    BINDINGS = [Binding("escape,question_mark,q", "close", "Close help")]

    def __init__(self, facts: HelpFacts):
        super().__init__()
        self._facts = facts

    def compose(self) -> ComposeResult:
        with Vertical(id="help"):
            yield Label("helmdeck keys", id="help-title")
            yield TextView(id="help-body")

    def on_mount(self) -> None:
        body = self.query_one("#help-body", TextView)
        body.show(help_content(self._facts))
        body.focus()

    def action_close(self) -> None:
        self.dismiss(None)
