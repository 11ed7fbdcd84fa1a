"""Commands that keep the bank honest: init, verify, rebuild."""

from __future__ import annotations

from typing import Annotated

import typer

from tunebank.cli.common import DbOption, JsonOption, open_bank, print_json, say, user_errors


@user_errors
def init(db: DbOption = None, as_json: JsonOption = False) -> None:
    """Create an empty bank (or report the one already there)."""
    with open_bank(db, create=True) as bank:
        where, head = bank.location.shown, bank.head()
        if as_json:
            print_json({"bank": where, "bank_id": bank.bank_id, "events": head})
        else:
            say(f"Bank at {bank.location.describe()}: {head} events, id {bank.bank_id}")


@user_errors
def verify(db: DbOption = None, head: Annotated[bool, typer.Option(
        "--head", help="Also print the bank id and the last link of the hash chain (SEQ:HASH), to "
                       "record elsewhere and check exports against (import --expect-head).")] = False,
           expect_head: Annotated[str | None, typer.Option(
               "--expect-head", metavar="[SEQ:]HASH",
               help="Also check that the log passes through this link, as `bank verify --head` "
                    "printed it earlier: a cut or rewritten history fails.")] = None,
           as_json: JsonOption = False) -> None:
    """Check the database's own structure, then replay the whole log and check it: hash chain,
    outcome rules, projections, invariants.

    Exits 1 and lists every problem if anything is wrong.
    """
    from tunebank.bank.formats.jsonl import Anchor

    anchor = Anchor.parse(expect_head) if expect_head is not None else None
    with open_bank(db) as bank:
        report = bank.verify(anchor)
        bank_id = bank.bank_id
    if as_json:
        print_json({"ok": report.ok, "events": report.events, "tasks": report.tasks,
                    "policies": report.policies, "first_bad_seq": report.first_bad_seq,
                    "problems": report.problems, "repair": report.repair, "anchor": report.anchor,
                    "structure_checked": report.structure_unchecked is None, "bank_id": bank_id,
                    "head": f"{report.head_seq}:{report.head_hash}"})
    elif report.ok:
        checked = "database structure checked, " if report.structure_unchecked is None else ""
        say(f"OK: {report.events} events, {checked}hash chain intact, {report.tasks} tasks "
            f"and {report.policies} policies match a replay of the log")
        if report.structure_unchecked is not None:
            say(f"database structure not checked: {report.structure_unchecked}")
        if report.anchor is not None:
            say(f"anchor: {report.anchor}")
        if head:
            say(f"head of bank {bank_id}: {report.head_seq}:{report.head_hash}")
    else:
        where = f" (first bad seq: {report.first_bad_seq})" if report.first_bad_seq else ""
        say(f"FAILED: {len(report.problems)} problem(s){where}")
        for problem in report.problems:
            say(f"  {problem}")
        if report.repair is not None:
            say(f"repair: {report.repair}")
    if not report.ok:
        raise typer.Exit(1)


@user_errors
def rebuild(db: DbOption = None,
            force: Annotated[bool, typer.Option(
                "--force", help="Adopt the log as it is even where verify finds it broken (a cut, "
                                "an edit, events tunebank did not append), listing what that "
                                "discards.")] = False,
            reindex: Annotated[bool, typer.Option(
                "--reindex", help="First rebuild the database's indexes (REINDEX): the repair "
                                  "for damage `bank verify` found in them.")] = False,
            as_json: JsonOption = False) -> None:
    """Derive the projections again from the log, after checking the log as verify does.

    A log that fails verify is refused (exit 1, nothing changed) unless --force is given.
    """
    with open_bank(db) as bank:
        done = bank.rebuild(force=force, reindex=reindex)
        counts = {"events": done.head, "tasks": done.tasks, "policies": done.policies}
    if as_json:
        print_json({**counts, "reindexed": done.reindexed, "log_problems_adopted": done.log_problems,
                    "projections_replaced": done.replaced})
        return
    if done.reindexed:
        say("Indexes rebuilt (REINDEX)")
    for problem in done.log_problems:
        say(f"adopted despite verify (--force): {problem}")
    for problem in done.replaced:
        say(f"replaced: {problem}")
    say(f"Rebuilt from {done.head} events: {counts['tasks']} tasks, "
        f"{counts['policies']} policies")


@user_errors
def upgrade(db: DbOption = None, as_json: JsonOption = False) -> None:
    """Bring a bank written by an older tunebank to this version's schema, then verify it.

    The log is kept as it is; what the schema change needs is derived again from it, all in one
    transaction. A bank already at this version is left alone.
    """
    from tunebank.bank import upgrade_bank

    report = upgrade_bank(db)
    with open_bank(db) as bank:
        verdict = bank.verify()
        where = bank.location.describe()
    if as_json:
        print_json({**report.as_json(), "verify_ok": verdict.ok, "problems": verdict.problems})
    elif report.from_version == report.to_version:
        say(f"{where}: already at schema {report.to_version}; nothing to do")
    else:
        say(f"Upgraded {where} from schema {report.from_version} to {report.to_version}, "
            f"{report.last_seq} events kept:")
        for step in report.steps:
            say(f"  {step}")
    if not as_json:
        say(f"verify: {'OK' if verdict.ok else 'FAILED: ' + '; '.join(verdict.problems[:3])}")
    if not verdict.ok:
        raise typer.Exit(1)


__all__ = ["init", "rebuild", "upgrade", "verify"]
