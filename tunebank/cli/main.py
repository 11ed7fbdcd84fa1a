"""The ``bank`` command: one Typer app, its commands kept in one module per group."""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from tunebank.bank.names import one_line
from tunebank.cli import audit_cmds, diff_cmds, exchange_cmds, inspect_cmds, tune_cmds
from tunebank.cli.common import closed_pipe, say


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
            say("bank: aborted", err=True)
            sys.exit(1)
        except typer.TyperException as exc:
            if type(exc).__name__ == "NoArgsIsHelpError":  # plain `bank`: the help, as usual
                typer.echo(exc.format_message() if hasattr(exc, "format_message") else str(exc),
                           err=True)  # the help, many lines by design
            else:
                say(f"bank: error: {_one_line(exc)}", err=True)
            sys.exit(getattr(exc, "exit_code", 1))
        sys.exit(returned if isinstance(returned, int) else 0)


def _one_line(exc: Exception) -> str:
    """Click's message, and the command's --help as the hint, on one line."""
    message = one_line(" ".join(getattr(exc, "format_message", lambda: str(exc))().split()))
    ctx = getattr(exc, "ctx", None)
    return f"{message} (see `{ctx.command_path} --help`)" if ctx is not None else message


COMMANDS: dict[str, Callable[..., None]] = {
    "init": audit_cmds.init, "tune": tune_cmds.tune, "plan": tune_cmds.plan, "socs": tune_cmds.socs,
    "tasks": inspect_cmds.tasks, "summary": inspect_cmds.summary, "query": inspect_cmds.query,
    "history": inspect_cmds.history, "events": inspect_cmds.events, "verify": audit_cmds.verify,
    "rebuild": audit_cmds.rebuild, "upgrade": audit_cmds.upgrade, "import": exchange_cmds.import_,
    "export": exchange_cmds.export, "merge": exchange_cmds.merge, "diff": diff_cmds.diff,
    "report": inspect_cmds.report,
}
"""Every command of ``bank``, by name, in the order ``bank --help`` lists them."""


def make_app(names: Iterable[str] = COMMANDS) -> typer.Typer:
    """The ``bank`` app with the commands named (all by default)."""
    made = typer.Typer(
        name="bank",
        cls=BankGroup,
        help="tunebank: keep, audit and reuse operator-tuning knowledge (AOE custom banks).",
        no_args_is_help=True,
        add_completion=True,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    made.callback()(_group)  # a group even with one command, so `bank NAME` stays the usage
    for name in names:
        made.command(name=name)(COMMANDS[name])
    return made


def _group(version: Annotated[bool, typer.Option(
        "--version", is_eager=True, callback=lambda shown: _version(shown),
        help="Show tunebank's version and exit.")] = False) -> None:
    """tunebank: keep, audit and reuse operator-tuning knowledge (AOE custom banks)."""


def _version(shown: bool) -> None:
    if shown:
        from tunebank import tool_version

        say(f"bank (tunebank) {tool_version()}")
        raise typer.Exit()


app = make_app()


def _terminated(signum: int, frame: Any) -> None:
    """SIGTERM ends a command as Ctrl-C does: its ``finally`` blocks run (a transaction rolls
    back, temporary files and workers go) and it says in one line what became of its work."""
    raise KeyboardInterrupt


def run() -> None:
    """Console-script entry point: the app, with a quiet exit when the reader of stdout goes
    away (``bank events --json | head``)."""
    name = sys.argv[1] if len(sys.argv) > 1 else ""
    signal.signal(signal.SIGTERM, _terminated)
    try:
        # `bank NAME ...` runs an app of that one command: Typer builds every command's options
        # before it runs one, which was a third of a quick command's start-up
        (make_app([name]) if name in COMMANDS else app)()
    except BrokenPipeError:  # raised outside a command: flushing stdout as the app returned
        closed_pipe()
