"""How the CLI prints: a line on stderr, a listing on stdout (a table on a terminal, plain columns
in a pipe or a file). Every command module prints through these."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from neobench.protocol import listing

console = Console(stderr=True)
out = Console()

# data verify's and data check's statuses, on a terminal.
STATUS_COLORS = {"ok": "green", "present": "green", "other-revision": "yellow"}
STATUS_COLORS |= dict.fromkeys(("missing", "load-failed", "problem"), "red")
STATUS_COLORS["not checked"] = "yellow"


def say(text: str, markup: bool = True) -> None:
    """One line on stderr, never wrapped, so a path in it stays whole and can be copied."""
    console.print(text, highlight=False, soft_wrap=True, markup=markup)


def print_listing(found: listing.Listing) -> None:
    """A listing on stdout: on a terminal a table that wraps long names to fit (never an
    ellipsis); in a pipe or a file plain padded columns, as wide as the widest row needs."""
    if out.is_terminal:
        table = Table(title=found.title)
        for column in found.columns:
            table.add_column(column, overflow="fold")
        for row in found.rows:
            table.add_row(*(Text(cell, style=STATUS_COLORS.get(cell, "")) for cell in row))
        out.print(table)
        return
    out.print(found.title, markup=False, highlight=False, soft_wrap=True)
    for text in found.plain():
        out.print(text, markup=False, highlight=False, soft_wrap=True)
