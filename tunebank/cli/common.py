"""What every command shares: the --db and --json options, error handling, tables and JSON."""

from __future__ import annotations

import functools
import json
import math
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, ParamSpec, TypeVar

import typer

from tunebank.bank.names import one_line

if TYPE_CHECKING:
    from tunebank.bank import Bank

P = ParamSpec("P")
R = TypeVar("R")

DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        help="Bank file or URL (sqlite:///PATH, postgresql://USER@HOST/DB). Default: env TUNEBANK_DB, else "
        "$TUNE_BANK_PATH/bank.db, $ASCEND_CACHE_PATH/aoe_data/bank.db, "
        "~/Ascend/latest/data/aoe/custom/bank.db.",
        show_default=False,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON for scripts instead of a table.")]
LimitOption = Annotated[int | None, typer.Option("--limit", min=1, help="Show the first N rows only.")]
SortOption = Annotated[str | None, typer.Option(
    "--sort", metavar="COLUMN", help="Sort the rows by this column (-COLUMN: descending).")]
CsvOption = Annotated[bool, typer.Option(
    "--csv", help="Print CSV (the table's columns) instead of a table. A text cell starting with "
                  "= + - @ tab or CR gets a leading ' so that a spreadsheet shows it as text, and "
                  "control characters are shown escaped; --raw prints the cells as they are.")]
RawOption = Annotated[bool, typer.Option(
    "--raw", help="With --csv: print every cell as the bank holds it (no leading ', no escapes).")]


def complete_soc(ctx: typer.Context, incomplete: str) -> list[tuple[str, str]]:
    """Shell completion of ``--soc-version``: the chips of the bank ``--db`` names (or the
    default bank), read without writing, and the chips the cost model knows. A bank's names
    are data from other people: only plain names are offered, never one with a control
    character or a shell's special one."""
    from tunebank.bank.names import is_plain_name
    from tunebank.bank.quick import quick_socs
    from tunebank.tuner.measure.socs import SOCS

    db = ctx.params.get("db")
    offered = {name: "in the bank" for name in quick_socs(db if isinstance(db, str) else None)}
    for name in SOCS:
        offered[name] = "in the bank; the cost model knows it" if name in offered \
            else "the cost model knows it"
    return [(name, why) for name, why in sorted(offered.items())
            if name.startswith(incomplete) and is_plain_name(name)]


def soc_option(help_text: str) -> Any:
    """A ``--soc-version`` option with ``help_text`` whose values complete (:func:`complete_soc`)."""
    return typer.Option("--soc-version", help=help_text, autocompletion=complete_soc)


SocOption = Annotated[str | None, soc_option("Only this chip, e.g. Ascend910B2.")]


def say(message: str = "", *, err: bool = False) -> None:
    """Print one line, its control characters made visible (:func:`bank.names.one_line`)."""
    typer.echo(one_line(message), err=err)


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print ``message`` as one error line on stderr and return the Exit to raise."""
    typer.echo(f"bank: error: {one_line(message)}", err=True)
    return typer.Exit(code)


def user_errors(command: Callable[P, R]) -> Callable[P, R]:
    """Turn the bank's own errors into one line on stderr and exit code 1, never a traceback."""

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        from tunebank.bank.errors import BankError

        try:
            return command(*args, **kwargs)
        except BankError as exc:
            raise fail(str(exc)) from None
        except BrokenPipeError:  # the reader went (`bank events --json | head -1`); click's own
            closed_pipe()        # handling would say nothing and exit 1

    return wrapper


def closed_pipe() -> NoReturn:
    """Exit as a shell's pipeline expects when the reader of stdout went away: 141 (128 +
    SIGPIPE), quietly, with nothing left to flush into the closed pipe."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(141)


def open_bank(db: str | None, *, create: bool = False) -> Bank:
    """Open the bank the options name (see :meth:`tunebank.bank.Bank.open`)."""
    from tunebank.bank import Bank

    return Bank.open(db, create=create)


def write_to_bank(db: str | None, work: Callable[[Bank], R]) -> R:
    """Run ``work`` on the bank the options name, made if need be, all or nothing (see
    :func:`tunebank.bank.api.write_to_bank`)."""
    from tunebank.bank.api import write_to_bank as write

    written: R = write(db, work)
    return written


def check_socs(bank: Bank, names: Iterable[str | None], *, allow_unknown: bool = False,
               hint: str = "") -> None:
    """Refuse chip names no command should take (see :func:`tunebank.tuner.measure.socs.check_socs`);
    ``hint`` names what the command offers for an unknown one, where it offers something."""
    from tunebank.tuner.measure.socs import check_socs as check

    check({task.soc_version for task in bank.tasks()}, names, allow_unknown=allow_unknown, hint=hint)


def print_json(value: Any) -> None:
    """Print one JSON document."""
    typer.echo(json.dumps(value, indent=2, ensure_ascii=False))


def show_rows(headers: Sequence[str], rows: Iterable[Sequence[Any]], *, limit: int | None = None,
              sort: str | None = None, as_csv: bool = False, raw: bool = False,
              as_json: bool = False, records: Sequence[Any] = (), json_lines: bool = False) -> None:
    """A command's rows as a table, as CSV, or with ``as_json`` as the JSON ``records`` (one per
    row): sorted by a table column (``-name`` descending, an empty cell last either way), then
    cut to ``limit``, whatever the form, so ``--json`` lists the rows the table would show.
    ``json_lines``: one JSON object a line rather than one document. CSV text cells are made
    safe for a spreadsheet and a terminal unless ``raw`` (see :mod:`bank.formats.spreadsheet`).

    Raises:
        typer.Exit: ``sort`` names no column, or two forms were asked for (the error is printed).
    """
    refuse_two_forms(as_json, as_csv)
    listed = list(rows)
    order = chosen_rows(headers, listed, sort=sort, limit=limit)
    if as_json:
        if json_lines:
            for n in order:  # as the streamed lines are printed (bank events --json)
                say(json.dumps(records[n], ensure_ascii=False))
        else:
            print_json([records[n] for n in order])
        return
    listed = [listed[n] for n in order]
    if as_csv:
        from tunebank.bank.formats.spreadsheet import csv_writer, safe_cell

        writer = csv_writer(sys.stdout)
        writer.writerow(headers)
        for row, text in zip(listed, _formatted(listed, blank="", escape=str), strict=True):
            writer.writerow([safe_cell(cell) if isinstance(value, str) and not raw else cell
                             for value, cell in zip(row, text, strict=True)])
        return
    print_table(headers, listed)


def chosen_rows(headers: Sequence[str], rows: Sequence[Sequence[Any]], *, sort: str | None,
                limit: int | None) -> list[int]:
    """The positions of the rows to show, in order: sorted by the column ``sort`` names
    (``-name`` descending, an empty cell last either way, ties in their first order), then the
    first ``limit``.

    Raises:
        typer.Exit: ``sort`` names no column (the error is printed).
    """
    order = list(range(len(rows)))
    if sort is not None:
        name = sort.removeprefix("-")
        if name not in headers:
            raise fail(f"--sort: no column {name!r} (columns: {', '.join(headers)})", code=2)
        column = list(headers).index(name)
        present = [n for n in order if rows[n][column] is not None]
        present.sort(key=lambda n: _sort_key(rows[n][column]), reverse=sort.startswith("-"))
        order = present + [n for n in order if rows[n][column] is None]
    return order if limit is None else order[:limit]


def refuse_two_forms(as_json: bool, as_csv: bool) -> None:
    """``--json`` and ``--csv`` together: a usage error, before anything is read.

    Raises:
        typer.Exit: both were given (the error is printed).
    """
    if as_json and as_csv:
        raise fail("--json and --csv: give one (JSON for scripts, CSV for a spreadsheet)", code=2)


def _sort_key(value: Any) -> tuple[int, Any]:
    """Numbers by value, before text by its characters."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return (0, value)
    return (1, str(value))


def print_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Print rows under headers, columns padded to their widest cell; a column that holds a
    fraction shows all its numbers with three decimals."""
    cells = _formatted(list(rows), blank="-", escape=one_line)
    widths = [len(h) for h in headers]
    for row in cells:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    lines = [_line(headers, widths), _line(["-" * w for w in widths], widths)]
    lines.extend(_line(row, widths) for row in cells)
    sys.stdout.write("\n".join(lines) + "\n")


def _line(cells: Sequence[str], widths: Sequence[int]) -> str:
    return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()


def _formatted(rows: Sequence[Sequence[Any]], blank: str,
               escape: Callable[[str], str]) -> list[list[str]]:
    """Each cell as text, one number format per column: three decimals in a column holding a
    fraction (``8.000`` beside ``7.812``), else as it is; ``blank`` for nothing; other values
    through ``escape``."""
    fractional = {i for row in rows for i, value in enumerate(row)
                  if isinstance(value, float) and math.isfinite(value) and not value.is_integer()}
    return [[_cell(value, i in fractional, blank, escape) for i, value in enumerate(row)]
            for row in rows]


def _cell(value: Any, decimals: bool, blank: str, escape: Callable[[str], str]) -> str:
    if value is None:
        return blank
    if isinstance(value, float) and not math.isfinite(value):
        return blank
    if isinstance(value, int | float) and not isinstance(value, bool):
        if decimals:
            return f"{value:.3f}"
        return str(int(value)) if isinstance(value, float) else str(value)
    return escape(str(value))


def short_time(stamp: str | None) -> str:
    """A log time shown to people: date and time to the second; ``-`` where the log does not
    know it (an imported report whose content carries no time is dated 1970-01-01)."""
    if not stamp or stamp.startswith("1970-01-01T00:00:00.000000"):
        return "-"
    return stamp[:19].replace("T", " ")
