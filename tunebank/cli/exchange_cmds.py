"""Commands that move knowledge between banks and files: import, export, merge."""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from tunebank.cli.common import (
    DbOption,
    JsonOption,
    check_socs,
    fail,
    open_bank,
    print_json,
    print_table,
    say,
    soc_option,
    user_errors,
    write_to_bank,
)


class ExportFormat(StrEnum):
    aoe_repo = "aoe-repo"
    jsonl = "jsonl"
    tuning_result = "tuning-result"
    opat = "opat"
    sgat = "sgat"
    csv = "csv"


@user_errors
def import_(
    paths: Annotated[list[Path], typer.Argument(
        metavar="PATH...",
        exists=True, help="AOE result files, AOE bank trees (folders of *_runtime_kb.json files) or "
                          "single bank files, or tunebank events files.")],
    soc_version: Annotated[str | None, soc_option(
        "Chip the AOE result files were tuned for (required for them).")] = None,
    model: Annotated[Path | None, typer.Option(
        exists=True, dir_okay=False, help="The ONNX model: op names resolve to real repo_keys.")] = None,
    input_shape: Annotated[str | None, typer.Option(
        "--input-shape", help="Fix the model's input shapes.")] = None,
    expect_head: Annotated[str | None, typer.Option(
        "--expect-head", metavar="[SEQ:]HASH",
        help="Events files: refuse one whose hash chain does not pass through this link, as "
             "`bank verify --head` printed it on the bank the file claims to come from.")] = None,
    allow_unknown_soc: Annotated[bool, typer.Option(
        "--allow-unknown-soc", help="Result files: accept a chip that `bank socs` does not list "
                                    "(AOE knows chips this tool does not); a wrong case is still "
                                    "refused. Bank trees take their chips as AOE names them.")] = False,
    mirror: Annotated[bool, typer.Option(
        "--mirror", help="Bank trees: take the trees given, together, as the whole new state of "
                         "the bank's AOE knowledge (a CANN release's tree): each entry without a "
                         "time that they no longer hold, of any chip, is withdrawn by a new "
                         "event. Measured entries are kept.")] = False,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Bank trees: say what the import would add, change and withdraw; "
                          "write nothing.")] = False,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Import AOE result files (OPAT v1/v2, SGAT), AOE bank trees or events files, all or nothing.
    A bank tree adds what it changes in the bank: importing it again adds nothing."""
    from tunebank.bank.exchange.imports import apply_import, read_imports
    from tunebank.bank.formats.jsonl import Anchor

    resolve = model_name = model_hash = None
    if model is not None:
        from tunebank.tuner.model.reading import parse_input_shapes
        from tunebank.tuner.plan.export import model_resolver

        resolve, model_name, model_hash = model_resolver(model, parse_input_shapes(input_shape))
    anchor = Anchor.parse(expect_head) if expect_head is not None else None

    try:
        prepared = read_imports(paths, soc_version, resolve, model_name, model_hash,  # before
                                anchor, None if mirror or not _any_tree(paths)        # writing
                                else _unchanged_files(db))
    except KeyboardInterrupt:
        say("bank: interrupted; nothing was imported, the bank is as it was", err=True)
        raise typer.Exit(130) from None
    if mirror or dry_run:
        others = [f.path for f in prepared.files if f.kind != "aoe-repo"]
        if others:
            flag = "--mirror" if mirror else "--dry-run"
            raise fail(f"{flag}: takes AOE bank trees only, not {others[0]}", 2)
    if dry_run:
        with _bank_or_empty(db) as bank:
            report = apply_import(bank, prepared, mirror=mirror, dry_run=True)
            _print_import(report, {t.soc_version for t in bank.tasks()}, as_json)
        return

    def work(bank: Any) -> Any:
        check_socs(bank, {e.soc_version for e in prepared.events}, allow_unknown=allow_unknown_soc,
                   hint="a chip the cost model does not know is imported with --allow-unknown-soc")
        return apply_import(bank, prepared, mirror=mirror), {t.soc_version for t in bank.tasks()}

    try:
        report, known = write_to_bank(db, work)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the transaction was rolled back
        say("bank: interrupted; nothing was imported, the bank is as it was", err=True)
        raise typer.Exit(130) from None
    try:
        _print_import(report, known, as_json)
    except KeyboardInterrupt:
        say(f"bank: interrupted after the import was written ({report.appended} event(s) "
            "added)", err=True)
        raise typer.Exit(130) from None


def _any_tree(paths: list[Path]) -> bool:
    from tunebank.bank.formats.runtime_kb import SUFFIX

    return any(path.is_dir() or path.name.endswith(SUFFIX) for path in paths)


def _unchanged_files(db: str | None) -> Any:
    """The bank files a tree import need not parse, as the bank at ``db`` holds them now (none
    for a bank that does not exist yet); checked again in the import's own transaction."""
    from tunebank.bank import BankLocationError
    from tunebank.bank.exchange.tree_imports import unchanged_files
    from tunebank.bank.location import resolve

    if not resolve(db).exists:
        return None
    try:
        with open_bank(db) as bank:
            return unchanged_files(bank)
    except BankLocationError:  # a server's empty database: the import makes the bank in it
        return None


def _bank_or_empty(db: str | None) -> Any:
    """The bank at ``db`` for reading, or an empty one in memory where there is none yet (what a
    dry run of an import into a new bank compares with)."""
    from tunebank.bank import Bank
    from tunebank.bank.location import resolve

    return open_bank(db) if resolve(db).exists else Bank.open("sqlite://", create=True)


def _print_import(report: Any, known: set[str], as_json: bool) -> None:
    if as_json:
        print_json(report.as_json())
        return
    print_table(["file", "kind", "tasks", "already_present", "events", "unresolved_names"],
                [[f.path, f.kind, f.tasks, f.tasks_present, f.events, f.unresolved]
                 for f in report.files])
    for f in report.files:
        if f.tree is not None:
            _tree_lines(f, known)
        if f.head is not None:
            checked = "matches --expect-head" if f.head["anchored"] else \
                "not checked against an anchor (--expect-head)"
            say(f"{f.path}: history of bank {f.head['bank_id']} up to seq {f.head['seq']}, "
                f"head {f.head['hash']}: {checked}")
    if report.withdrawn:
        _withdrawn_lines(report)
    if report.dry_run:
        say(f"dry run: {report.appended} event(s) would be added; nothing was written")
    else:
        say(f"{report.appended} event(s) added, {report.skipped} already present")


def _withdrawn_lines(report: Any) -> None:
    """The entries a mirror import withdraws (or would): a table with --dry-run, counts per chip
    otherwise."""
    verb = "would be withdrawn" if report.dry_run else "withdrawn"
    if report.dry_run:
        print_table(["soc_version", "repo_key", "op_type", "file", "action"],
                    [[w.soc_version, w.repo_key, w.op_type, w.file, verb] for w in report.withdrawn])
    per_chip: dict[str, int] = {}
    for w in report.withdrawn:
        per_chip[w.soc_version] = per_chip.get(w.soc_version, 0) + 1
    say(f"mirror: {len(report.withdrawn)} entries {verb}, no longer in the trees given ("
        + ", ".join(f"{soc} {n}" for soc, n in sorted(per_chip.items())) + ")")


def _tree_lines(f: Any, in_bank: set[str]) -> None:
    """What an AOE bank tree came to: its entries, the chips the tuner cannot tune (kept as
    data all the same), a chip named like another but for the case, and every place in it that
    holds no entry."""
    from tunebank.tuner.measure.socs import SOCS

    t = f.tree
    line = (f"{f.path}: {t.entries} entries: {t.new} new, {t.changed} changed, {t.unchanged} "
            "already in the bank as they are")
    if t.outranked:
        line += (f"; {t.outranked} of the changed stay behind an entry the bank holds with a "
                 "measured time (a faster entry wins)")
    say(line)
    untunable = [soc for soc in t.socs if soc not in SOCS]
    if untunable:
        say(f"{f.path}: chips tunebank's tuner cannot tune, kept as data: "
            f"{', '.join(untunable)}")
    for soc in t.socs:
        alike = sorted(name for name in set(SOCS) | in_bank
                       if name != soc and name.casefold() == soc.casefold())
        if alike:
            say(f"{soc} differs only in case from {', '.join(alike)}: AOE's chip names are "
                "case-sensitive, so the bank keeps them as different chips")
    for gap in f.gaps:
        say(f"no entry: {gap}")


@user_errors
def export(
    file_format: Annotated[ExportFormat, typer.Option("--format", help="What to write.")],
    out: Annotated[Path | None, typer.Option(
        help="File or folder to write (aoe-repo needs a folder); default: standard output.")] = None,
    task: Annotated[str | None, typer.Option(help="Task id or prefix (opat, sgat).")] = None,
    result_format: Annotated[str, typer.Option(
        "--result-format", metavar="<v1|v2>", help="opat: v2 or v1.")] = "v2",
    model: Annotated[Path | None, typer.Option(exists=True, dir_okay=False,
                                               help="tuning-result: the model.")] = None,
    soc_version: Annotated[str | None, soc_option("tuning-result: the chip.")] = None,
    input_shape: Annotated[str | None, typer.Option(
        "--input-shape", help="tuning-result: input shapes.")] = None,
    core_num: Annotated[int | None, typer.Option(
        "--core-num", min=1, help="aoe-repo: the core count in the file names of entries tunebank "
                                  "tuned (default: the chip's; AOE's own entries keep theirs).")] = None,
    merge: Annotated[bool, typer.Option(
        "--merge", help="aoe-repo: into a folder whose bank files hold entries the bank lacks, "
                        "keep those (without it such a folder is refused).")] = False,
    raw: Annotated[bool, typer.Option(
        "--raw", help="csv: write every cell as the bank holds it (by default a text cell "
                      "starting with = + - @ tab or CR gets a leading ' so that a spreadsheet "
                      "shows it as text, and control characters are shown escaped).")] = False,
    db: DbOption = None,
) -> None:
    """Export the bank: AOE's bank tree, the event log, tuning_result.json, result files or CSV."""
    with open_bank(db) as bank:
        if file_format == ExportFormat.aoe_repo:
            _export_repo(bank, out, core_num, merge)
        elif file_format == ExportFormat.jsonl:
            _to_output(out, lambda handle: _jsonl(bank, handle))
        elif file_format == ExportFormat.csv:
            from tunebank.bank.formats.csv_policies import write_policies

            _to_output(out, lambda handle: write_policies(handle, bank.policies(), raw=raw))
        elif file_format == ExportFormat.tuning_result:
            _export_tuning_result(bank, out, model, soc_version, input_shape)
        else:
            if task is None:
                raise fail(f"--format {file_format.value} needs --task", code=2)
            if result_format not in ("v1", "v2"):
                raise fail(f"--result-format: {result_format!r} is not v1 or v2", code=2)
            from tunebank.bank.exchange.exports import task_result

            _write_json(out, task_result(bank, task, file_format.value, result_format))


def _jsonl(bank: Any, handle: Any) -> int:
    from tunebank.bank.formats.jsonl import write_event_rows

    return write_event_rows(handle, bank.event_rows(), bank.bank_id)


def _to_output(out: Path | None, write: Any) -> None:
    if out is None:
        write(sys.stdout)
        return
    from tunebank.bank.atomic import atomic_file

    with atomic_file(out) as handle:
        write(handle)


def _write_json(out: Path | None, value: Any) -> None:
    if out is None:
        print_json(value)
        return
    from tunebank.bank.atomic import write_json_atomic

    write_json_atomic(out, value)


def _export_repo(bank: Any, out: Path | None, core_num: int | None, merge: bool) -> None:
    from tunebank.bank.exchange.exports import export_tree
    from tunebank.bank.formats.aoe_repo import TIMES_FILE
    from tunebank.tuner.measure.socs import SOCS

    if out is None:
        raise fail("--format aoe-repo needs --out DIR", code=2)
    done = export_tree(bank, out, {soc: spec.ai_cores for soc, spec in SOCS.items()}, core_num,
                       merge=merge)
    line = (f"{done.written.entries} entries of {len(done.socs)} chip(s) in "
            f"{len(done.written.files)} bank file(s) under {out}")
    if done.written.times_files:  # written too, so the count a user checks on disk adds up
        line += (f", and {len(done.written.times_files)} {TIMES_FILE} beside them (the repo keys "
                 "and times AOE's files cannot hold)")
    if done.written.kept:
        line += f"; {done.written.kept} entries the files held and the bank lacks kept (--merge)"
    say(line)
    if done.subgraphs:
        say(f"{done.subgraphs} subgraph entries left out: the operator bank does not "
            "hold them (`bank export --format sgat --task ID` writes a task's as a result file)")


def _export_tuning_result(bank: Any, out: Path | None, model: Path | None, soc_version: str | None,
                          input_shape: str | None) -> None:
    if model is None or soc_version is None:
        raise fail("--format tuning-result needs --model and --soc-version", code=2)
    from tunebank.tuner.model.reading import parse_input_shapes
    from tunebank.tuner.plan.export import model_tuning_result

    _write_json(out, model_tuning_result(bank, model, soc_version, parse_input_shapes(input_shape)))


@user_errors
def merge(
    sources: Annotated[list[str], typer.Argument(
        metavar="SOURCE...", help="Bank files or database URLs to merge in.")],
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Merge other banks into this one: the union of their events, the best policy per key wins.

    The table says what this run changed, per source: events_added (new to this bank),
    already_present (held already: merging the same banks again adds nothing and reports
    nothing more), new_keys (keys this bank did not hold), faster (the source's policy is
    strictly faster and now holds), newer (both held the key without a measured time, as AOE's
    own entries, with other knowledge: the entry recorded later holds), ties (both held
    different records of the same time: the smaller event id holds, no key gets faster or
    slower). A conflict is a key both banks held with different knowledge, listed with the rule
    that decided it (faster, newer, tie), the winner and the loser."""
    from tunebank.bank import Bank
    from tunebank.bank.errors import BankError
    from tunebank.bank.exchange.merge import merge_into
    from tunebank.bank.location import shown_source

    opened: list[Bank] = []

    def work(target: Bank) -> list[Any]:
        reports = []
        for source, other in zip(sources, opened, strict=True):
            if other.bank_id == target.bank_id and other.location.url == target.location.url:
                raise fail(f"{shown_source(source)}: is the bank being merged into")
            try:
                reports.append(merge_into(target, other))
            except BankError as exc:
                raise BankError(f"{shown_source(source)}: {exc}") from None
        return reports

    try:
        for source in sources:  # every source opens before the target is touched
            opened.append(Bank.open(source))
        reports = write_to_bank(db, work)  # a merge that fails into a new bank leaves none
    finally:
        for other in opened:
            other.close()
    if as_json:
        print_json([r.as_json() for r in reports])
        return
    print_table(["source", "events_added", "already_present", "new_keys", "faster", "newer",
                 "ties", "conflicts"],
                [[r.source, r.added, r.present, r.new_keys, r.faster, r.newer, r.ties,
                  len(r.conflicts)] for r in reports])
    if any(r.newer for r in reports):
        say("newer: keys both banks hold without a measured time (AOE's own entries); the "
            "entry recorded later (imported or tuned later) holds")
    for r in reports:
        if r.withdrawn:
            say(f"{r.source}: {r.withdrawn} entries of this bank withdrawn by the source's mirror "
                "imports (bank import --mirror): no longer current, kept in the log")
    if any(r.ties for r in reports):  # which side wins a tie varies run to run: --json says
        say("ties: keys both banks hold with records of the same time; the smaller event id "
            "decides which record stands, and no key gets faster or slower by it")
    conflicts = [c for r in reports for c in r.conflicts]
    if conflicts:
        say("")
        print_table(["soc_version", "repo_key", "op_type", "decided_by", "winner_us",
                     "winner_origin", "loser_us", "loser_origin"],
                    [[c.soc_version, c.repo_key, c.op_type, c.rule, c.winner.best_us,
                      c.winner.origin, c.loser.best_us, c.loser.origin] for c in conflicts])
