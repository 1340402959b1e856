"""The listings of `status` and `trials` at any terminal width: what is read or copied (ids, G, statuses) stays whole.

A column has a rank: at a width that cannot hold them all, the columns of the highest rank are left out first (and
said, on stderr), a name column gives way down to a few characters with an ellipsis, and a rank-0 column is never left
out or cut. No rules between columns (two spaces), as ``kubectl get`` and ``docker ps`` print theirs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from rich.table import Table

from service.cli.app import err, out

GAP = 2  # characters between two columns: padding (0, 1) on each side, no rule, none at the edges
SHRUNK = 8  # the fewest characters a shrinking column (a name) is cut to, its ellipsis included


@dataclass(frozen=True)
class Col:
    """A column: its header, its rank (0: always shown whole; the highest is left out first), alignment, and whether it
    gives way (cut with an ellipsis, never below SHRUNK characters) to keep the other columns whole."""

    header: str
    rank: int = 0
    justify: Literal["left", "right"] = "left"
    shrink: bool = False


def listing(cols: Sequence[Col], rows: Sequence[Sequence[str]], width: int) -> tuple[Table, list[str]]:
    """(the table of ``rows`` within ``width`` characters when its rank-0 columns fit, the headers left out).

    Columns are left out from the highest rank (the rightmost first among equals) until the rest fit, a shrinking
    column counted at its cut width; what is left over goes back to the shrinking columns, up to their widest cell.
    """
    natural = [max([len(c.header), *(len(r[i]) for r in rows)]) for i, c in enumerate(cols)]
    least = [min(n, SHRUNK) if c.shrink else n for c, n in zip(cols, natural)]
    shown = list(range(len(cols)))

    def need(idx: list[int]) -> int:
        return sum(least[i] for i in idx) + GAP * (len(idx) - 1)

    for i in sorted(shown, key=lambda i: (-cols[i].rank, -i)):
        if need(shown) <= width or cols[i].rank == 0:
            break
        shown.remove(i)
    widths, spare = {i: least[i] for i in shown}, max(0, width - need(shown))
    for i in shown:
        if cols[i].shrink:
            widths[i] += (grow := min(natural[i] - least[i], spare))
            spare -= grow
    table = Table(box=None, padding=(0, 1), pad_edge=False, show_edge=False, header_style="bold")
    for i in shown:
        table.add_column(cols[i].header, width=widths[i], no_wrap=True, overflow="ellipsis", justify=cols[i].justify)
    for row in rows:
        table.add_row(*(row[i] for i in shown))
    return table, [cols[i].header for i in range(len(cols)) if i not in shown]


def print_listing(cols: Sequence[Col], rows: Sequence[Sequence[str]]) -> None:
    """The listing at the terminal's width (``out``), and on stderr which columns it left out."""
    table, left_out = listing(cols, rows, out.width)
    out.print(table)
    if left_out:
        err.print(f"not shown at {out.width} columns: {', '.join(left_out)} (--json has every field)", highlight=False)
