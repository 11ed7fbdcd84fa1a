"""The ``bank`` command: one Typer app, its commands kept in one module per group."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

import typer
from typer.core import TyperGroup

from cli import audit_cmds, exchange_cmds, inspect_cmds, tune_cmds
from cli.common import one_line


class BankGroup(TyperGroup):
    """The command group, with usage errors (a missing argument, a directory given as a file, a
    bad option value) as one line on stderr, like every other error of ``bank``."""

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True,
             windows_expand_args: bool = True, **extra: Any) -> Any:
        def run(standalone: bool) -> Any:
            return super(BankGroup, self).main(args=args, prog_name=prog_name, complete_var=complete_var,
                                               standalone_mode=standalone,
                                               windows_expand_args=windows_expand_args, **extra)

        if not standalone_mode:
            return run(False)
        try:
            returned = run(False)
        except typer.Abort:
            typer.echo("bank: aborted", err=True)
            sys.exit(1)
        except typer.TyperException as exc:
            if type(exc).__name__ == "NoArgsIsHelpError":  # plain `bank`: the help, as usual
                typer.echo(exc.format_message() if hasattr(exc, "format_message") else str(exc),
                           err=True)
            else:
                typer.echo(f"bank: error: {_one_line(exc)}", err=True)
            sys.exit(getattr(exc, "exit_code", 1))
        sys.exit(returned if isinstance(returned, int) else 0)


def _one_line(exc: Exception) -> str:
    """Click's message, and the command's --help as the hint, on one line."""
    message = one_line(" ".join(getattr(exc, "format_message", lambda: str(exc))().split()))
    ctx = getattr(exc, "ctx", None)
    return f"{message} (see `{ctx.command_path} --help`)" if ctx is not None else message


app = typer.Typer(
    name="bank",
    cls=BankGroup,
    help="tunebank: keep, audit and reuse operator-tuning knowledge (AOE custom banks).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

for command in (audit_cmds.init, tune_cmds.tune, tune_cmds.plan, tune_cmds.socs, inspect_cmds.tasks,
                inspect_cmds.summary, inspect_cmds.query,
                inspect_cmds.history, inspect_cmds.events, audit_cmds.verify, audit_cmds.rebuild,
                audit_cmds.upgrade):
    app.command()(command)
app.command(name="import")(exchange_cmds.import_)
app.command()(exchange_cmds.export)
app.command()(exchange_cmds.merge)


def run() -> None:
    """Console-script entry point: the app, with a quiet exit when the reader of stdout goes
    away (``bank events --json | head``)."""
    try:
        app()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(141)
