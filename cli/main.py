"""The ``bank`` command: one Typer app, its commands kept in one module per group."""

from __future__ import annotations

import os
import sys

import typer

from cli import audit_cmds, exchange_cmds, inspect_cmds, tune_cmds

app = typer.Typer(
    name="bank",
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
