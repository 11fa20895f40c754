"""The table in a terminal: a rich table that fits the width, split into parts (the model column
repeated) when it does not, or printed whole when the output is not a terminal."""

from __future__ import annotations

from dataclasses import dataclass, field

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from neobench.report.table import LeaderTable

# A model name narrower than _MODEL_MIN wraps; a header word longer than _HEADER_CAP folds.
_MODEL_MIN = 20
_HEADER_CAP = 16
_KEY_FLOOR = 8
_GAP = 3  # padding either side of a column plus the space between columns


def print_rich(table: LeaderTable, console: Console) -> None:
    """Print the table whole, never an ellipsis: piped, one line per row and note (a log stays
    greppable); in a terminal, fitted to ``console.width`` in parts, ``--per-task`` transposed
    first (56 task columns fit no terminal, 56 rows scroll fine)."""
    if not console.is_terminal:
        grid = _grid(table)
        widths = grid.natural_widths()
        everything = list(range(len(grid.headers)))
        wide = Console(
            file=console.file,
            width=_table_width(widths, everything),
            color_system=console.color_system,  # type: ignore[arg-type]
            force_terminal=False,
            legacy_windows=False,
        )
        wide.print(_rich_part(grid, widths, everything, table.benchmark))
        for note in table.notes:
            console.print(note, soft_wrap=True, markup=False, highlight=False)
        return
    grid = _transposed(table) if table.per_task else _grid(table)
    for i, (widths, columns) in enumerate(_fit(grid, console.width)):
        if i:
            console.print()
        console.print(_rich_part(grid, widths, columns, table.benchmark if i == 0 else None))
    console.print()
    for note in table.notes:
        console.print(note, markup=False, highlight=False, overflow="fold")


@dataclass
class _Grid:
    """A table as text before layout: a name column (``keys``) and value columns."""

    key_header: str
    keys: list[str]
    key_min: int  # narrowest the name column may be before its names wrap
    headers: list[str]
    cells: list[list[str]]  # cells[row][column]
    dim_rows: set[int] = field(default_factory=set)
    dim_columns: set[int] = field(default_factory=set)
    rule_after: int | None = None  # a line under this row (per task: before Avg. and Missing)

    def natural_widths(self) -> list[int]:
        """Key width, then each value column's, everything on one line."""
        key = max(map(cell_len, [self.key_header, *self.keys]))
        return [key, *(_longest(h, c, words=False) for h, c in self._columns())]

    def compact_widths(self) -> list[int]:
        """Value columns as narrow as they get with every cell on one line and headers wrapped."""
        return [_longest(h, c, words=True) for h, c in self._columns()]

    def _columns(self) -> list[tuple[str, list[str]]]:
        return [(h, [row[i] for row in self.cells]) for i, h in enumerate(self.headers)]


def _longest(header: str, cells: list[str], *, words: bool) -> int:
    """Widest cell; the header counts whole, or (words) by its longest word up to _HEADER_CAP."""
    head = max(map(cell_len, header.split())) if words else cell_len(header)
    return max([min(head, _HEADER_CAP) if words else head, *map(cell_len, cells)])


def _grid(table: LeaderTable) -> _Grid:
    rows = [table.cells(row) for row in table.rows]
    return _Grid(
        key_header=table.header()[0],
        keys=[r[0] for r in rows],
        key_min=_MODEL_MIN,
        headers=table.header()[1:],
        cells=[r[1:] for r in rows],
        dim_rows={i for i, row in enumerate(table.rows) if row.quoted},
    )


def _transposed(table: LeaderTable) -> _Grid:
    """Per task: one row per task (then Avg. and Missing), one column per table row."""
    columns = [table.cells(row)[1:] for row in table.rows]
    keys = table.header()[1:]
    return _Grid(
        key_header="Task",
        keys=keys,
        key_min=max(map(cell_len, keys)),  # task names stay whole
        headers=[row.name for row in table.rows],
        cells=[[column[i] for column in columns] for i in range(len(keys))],
        dim_columns={i for i, row in enumerate(table.rows) if row.quoted},
        rule_after=len(table.task_names) - 1,
    )


def _fit(grid: _Grid, width: int) -> list[tuple[list[int], list[int]]]:
    """Greedily group the value columns into parts that each fit ``width``: per part, the widths
    (name column first, taking what is left up to its natural width) and the columns shown."""
    compact = grid.compact_widths()
    key_natural = grid.natural_widths()[0]
    key_min = min(grid.key_min, key_natural)
    groups: list[list[int]] = []
    for column in range(len(compact)):
        if groups and _table_width([key_min, *compact], [*groups[-1], column]) <= width:
            groups[-1].append(column)
        else:
            groups.append([column])
    parts = []
    for group in groups:
        spare = width - _table_width([0, *compact], group)
        # A terminal narrower than one column plus the names: fold the names rather than fail.
        key = max(_KEY_FLOOR, min(key_natural, spare))
        parts.append(([key, *compact], group))
    return parts or [([min(key_natural, width)], [])]  # no value columns: the names alone


def _table_width(widths: list[int], columns: list[int]) -> int:
    """Printed width of _rich_part: the name column, the chosen columns, 3 between each."""
    return widths[0] + sum(widths[c + 1] + _GAP for c in columns)


def _rich_part(grid: _Grid, widths: list[int], columns: list[int], title: str | None) -> Table:
    """A rich Table of the name column and ``columns``, widths fixed; strings go in as Text, not
    markup ("org/m [max_seq_length_256]" would lose its brackets as a style tag)."""
    out = Table(
        title=Text(title) if title else None,
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        title_justify="left",
    )
    out.add_column(Text(grid.key_header), width=widths[0], overflow="fold")
    for c in columns:
        dim = "dim" if c in grid.dim_columns else None
        out.add_column(
            Text(grid.headers[c]),
            width=widths[c + 1],
            justify="right",
            overflow="fold",
            style=dim,
            header_style=dim or "bold",
        )
    for r, key in enumerate(grid.keys):
        out.add_row(
            Text(key),
            *(Text(grid.cells[r][c]) for c in columns),
            style="dim" if r in grid.dim_rows else None,
            end_section=r == grid.rule_after,
        )
    return out
