"""Commands that read the bank: tasks, summary, query, history, events, report."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from tunebank.cli.common import (
    CsvOption,
    DbOption,
    JsonOption,
    LimitOption,
    RawOption,
    SocOption,
    SortOption,
    check_socs,
    fail,
    open_bank,
    print_json,
    print_table,
    refuse_two_forms,
    say,
    short_time,
    show_rows,
    user_errors,
)

if TYPE_CHECKING:
    from tunebank.bank import Bank, StoredEvent
    from tunebank.bank.where import Condition

WhereOption = Annotated[list[str] | None, typer.Option(
    "--where", metavar="FIELD=VALUE",
    help="Only entries whose info_dict field (knowledge.FIELD: knowledge field) has this value; "
         "also !=, <, <=, >, >= (quote them); repeat to require several. Shown as columns.")]


@user_errors
def tasks(db: DbOption = None, soc_version: SocOption = None, as_json: JsonOption = False,
          limit: LimitOption = None, sort: SortOption = None, as_csv: CsvOption = False,
          raw: RawOption = False) -> None:
    """List every tuning task with its status and repo_summary counts, in the order the bank
    recorded them (--sort started: by the time each started)."""
    from tunebank.bank import task_json

    refuse_two_forms(as_json, as_csv)
    with open_bank(db) as bank:
        check_socs(bank, [soc_version])
        found = [t for t in bank.tasks() if soc_version in (None, t.soc_version)]
    gone = ["withdrawn"] if any(t.withdrawn_num for t in found) else []  # bank import --mirror
    show_rows(
        ["task", "soc_version", "tuning_name", "model", "mode", "status", "started",
         "add", "hit", "update", "reserved", "unsat", "total", *gone],
        [[t.task_id, t.soc_version, t.tuning_name, t.model_name, t.search_mode, t.status,
          short_time(t.started_at), t.add_num, t.hit_num, t.update_num, t.reserved_num,
          t.unsatisfied_num, t.total_num, *([t.withdrawn_num] if gone else [])]
         for t in found], limit=limit, sort=sort, as_csv=as_csv,
        raw=raw, as_json=as_json, records=[task_json(t) for t in found])


@user_errors
def summary(
    task: Annotated[str, typer.Argument(metavar="TASK", help="Task id, or a unique prefix of one.")],
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Print a task's repo_summary under AOE's field names."""
    from tunebank.bank.quick import quick_task

    found = quick_task(db, task)  # an SQLite bank file: read with sqlite3 alone
    if found is None:
        with open_bank(db) as bank:
            found = bank.task(task)
    counts = found.repo_summary()
    if as_json:
        print_json(counts)
        return
    say(f"task {found.task_id} ({found.soc_version}, {found.status})")
    print_table(["field", "value"], counts.items())


@user_errors
def query(
    db: DbOption = None,
    soc_version: SocOption = None,
    op_type: Annotated[str | None, typer.Option(help="Only this operator type.")] = None,
    repo_key: Annotated[str | None, typer.Option(help="Only this repo_key.")] = None,
    backend: Annotated[str | None, typer.Option(help="Only entries measured by this backend.")] = None,
    cost_model_version: Annotated[str | None, typer.Option(
        "--cost-model-version", help="Only entries made by this cost-model version (e.g. sim-1).")] = None,
    as_of: Annotated[str | None, typer.Option(
        "--as-of", help="Show the bank as of this UTC time (ISO 8601), by recorded_at.")] = None,
    at_seq: Annotated[int | None, typer.Option(
        "--at-seq", min=0, help="Show the bank as it was right after this seq.")] = None,
    where: WhereOption = None,
    as_json: JsonOption = False,
    limit: LimitOption = None,
    sort: SortOption = None,
    as_csv: CsvOption = False,
    raw: RawOption = False,
) -> None:
    """List the best policy per key, now or as it was (--as-of, --at-seq)."""
    from tunebank.bank import PolicyFilter, policy_json
    from tunebank.bank.events import format_time, parse_time
    from tunebank.bank.where import all_hold, parse_conditions

    refuse_two_forms(as_json, as_csv)
    conditions = parse_conditions(where)

    until_time = None
    if as_of is not None:
        try:
            until_time = format_time(parse_time(as_of))
        except ValueError:
            raise fail(f"--as-of: {as_of!r} is not an ISO 8601 time (e.g. 2026-12-01T10:00)") from None
    chosen = PolicyFilter(soc_version=soc_version, op_type=op_type, repo_key=repo_key,
                          backend=backend, cost_model_version=cost_model_version)
    with open_bank(db) as bank:
        check_socs(bank, [soc_version])
        found = bank.policies(chosen, at_seq=at_seq, as_of=until_time)
        if not found and op_type is not None:
            _no_such_op_type(bank, op_type)
    found = [p for p in found if all_hold(conditions, p.info_dict, p.knowledge)]
    # the bank file's operator, shown where an entry's differs (CANN's FUSE banks)
    files = ["file_op"] if any(p.file_op for p in found) else []
    show_rows(
        ["soc_version", "repo_key", "op_type", *files, *_columns(conditions), "best_us", "mode",
         "backend", "task", "seq", "origin"],
        [[p.soc_version, p.repo_key, p.op_type, *([p.file_op] if files else []),
          *_values(conditions, p.info_dict, p.knowledge),
          p.best_us, p.tune_mode, p.backend, p.task_id, p.seq, p.origin] for p in found],
        limit=limit, sort=sort, as_csv=as_csv, raw=raw, as_json=as_json,
        records=[policy_json(p) for p in found])


def _no_such_op_type(bank: Any, op_type: str) -> None:
    """Say on stderr, when ``--op-type`` found nothing, whether the bank knows that type at all
    and which it does know (issue 41: a search that finds nothing said nothing)."""
    from tunebank.bank import op_types

    known = op_types(bank)
    if op_type not in known:
        listed = ", ".join(known[:12]) + (" ..." if len(known) > 12 else "")
        say(f"--op-type: no entry of the bank is of op type {op_type!r} or read from its "
            f"bank file (op types: {listed or 'none'})", err=True)


def _columns(conditions: list[Condition]) -> list[str]:
    """One column per field the conditions name, in their order."""
    return list(dict.fromkeys(c.column for c in conditions))


def _values(conditions: list[Condition], info: Any, knowledge: Any) -> list[object]:
    """The entry's value of each column :func:`_columns` gives (a bool as JSON writes it)."""
    by_column = {c.column: c for c in conditions}
    values = [by_column[column].value_of(info or {}, knowledge or {})
              for column in _columns(conditions)]
    return [json.dumps(v) if isinstance(v, bool) else v for v in values]


@user_errors
def history(
    db: DbOption = None,
    repo_key: Annotated[str | None, typer.Option(help="Every outcome of this repo_key.")] = None,
    op_name: Annotated[str | None, typer.Option(help="Every outcome of this op name.")] = None,
    op_type: Annotated[str | None, typer.Option(help="Every outcome of this op type.")] = None,
    soc_version: SocOption = None,
    where: WhereOption = None,
    as_json: JsonOption = False,
    limit: LimitOption = None,
    sort: SortOption = None,
    as_csv: CsvOption = False,
    raw: RawOption = False,
) -> None:
    """Show every outcome of a key or an operator, oldest first, with its task, model and
    source (the AOE bank tree, file and line an imported entry came from)."""
    from tunebank.bank.where import parse_conditions

    refuse_two_forms(as_json, as_csv)
    conditions = parse_conditions(where)
    if not (repo_key or op_name or op_type):
        raise fail("history: give --repo-key, --op-name or --op-type", code=2)
    with open_bank(db) as bank:
        check_socs(bank, [soc_version])
        found = bank.history(repo_key=repo_key, op_name=op_name, op_type=op_type,
                             soc_version=soc_version)
        if not found and op_type is not None:
            _no_such_op_type(bank, op_type)
        models = {t.task_id: t.model_name for t in bank.tasks()}
    if conditions:  # a hit carries the info_dict only: a knowledge condition is the entry's
        found = _matching(found, conditions)
    show_rows(
        ["seq", "time", "kind", "repo_key", "op_name", "task", "model", "before_us", "after_us",
         "origin", "borrowed from", "source"],
        [_history_row(s, models) for s in found], limit=limit, sort=sort, as_csv=as_csv, raw=raw,
        as_json=as_json,
        records=[{**s.as_dict(), "model_name": models.get(s.event.task_id)} for s in found])


def _matching(found: list[StoredEvent], conditions: list[Condition]) -> list[StoredEvent]:
    """Every event of the keys one of whose events meets the conditions: a key's info_dict is
    the same in all its events, its knowledge is each add's or update's."""
    from tunebank.bank.where import all_hold

    def key(s: StoredEvent) -> tuple[str, str | None]:
        return s.event.soc_version, s.event.repo_key

    infos: dict[tuple[str, str | None], Any] = {}
    for s in found:
        infos.setdefault(key(s), s.event.payload.get("info_dict"))
    chosen = {key(s) for s in found
              if all_hold(conditions, infos[key(s)], s.event.payload.get("knowledge"))}
    return [s for s in found if key(s) in chosen]


def _history_row(stored: StoredEvent, models: dict[str, str | None]) -> list[object]:
    event, payload = stored.event, stored.event.payload
    return [stored.seq, short_time(event.recorded_at), event.kind, event.repo_key, event.op_name,
            event.task_id, models.get(event.task_id), payload.get("performance_before_us"),
            payload.get("performance_after_us"), event.origin, _borrowed(payload),
            _source_text(payload.get("source"))]


def _source_text(source: Any) -> str | None:
    """Where an imported entry came from: ``TREE/FILE:LINE`` (a single file: ``FILE:LINE``)."""
    if not isinstance(source, dict) or not isinstance(source.get("tree"), str):
        return None
    tree, file, line = source["tree"], source.get("file"), source.get("line")
    path = tree if not isinstance(file, str) or tree.endswith(file) else f"{tree.rstrip('/')}/{file}"
    return f"{path}:{line}" if isinstance(line, int) else path


def _borrowed(payload: Mapping[str, Any]) -> str | None:
    from tunebank.report.gather import borrowed_summary

    return borrowed_summary(payload.get("borrowed_from"))


@user_errors
def events(
    db: DbOption = None,
    since: Annotated[int, typer.Option(min=0, help="Only events after this seq.")] = 0,
    as_json: JsonOption = False,
    limit: LimitOption = None,
    sort: SortOption = None,
    as_csv: CsvOption = False,
    raw: RawOption = False,
) -> None:
    """Print the raw log, oldest first (--json: one event per line, streamed unless sorted)."""
    refuse_two_forms(as_json, as_csv)
    with open_bank(db) as bank:
        _print_events(bank, since, as_json, limit, sort, as_csv, raw)


def _print_events(bank: Bank, since: int, as_json: bool, limit: int | None, sort: str | None,
                  as_csv: bool, raw: bool) -> None:
    headers = ["seq", "time", "kind", "soc_version", "task", "repo_key", "op_name", "hash"]
    if as_json and sort is None:  # the log in its own order: streamed, a line at a time
        for n, stored in enumerate(bank.events(since)):
            if limit is not None and n >= limit:
                break
            say(json.dumps(stored.as_dict(), ensure_ascii=False))
        return
    found = list(bank.events(since))
    show_rows(
        headers,
        [[s.seq, short_time(s.event.recorded_at), s.event.kind, s.event.soc_version,
          s.event.task_id, s.event.repo_key, s.event.op_name, s.hash[:12]] for s in found],
        limit=limit, sort=sort, as_csv=as_csv, raw=raw, as_json=as_json,
        records=[s.as_dict() for s in found] if as_json else (), json_lines=True)


@user_errors
def report(
    out: Annotated[Path, typer.Option("--out", dir_okay=False, help="The HTML file to write.")],
    db: DbOption = None,
    soc_version: SocOption = None,
) -> None:
    """Write one self-contained HTML report: each model version across chips, and per chip each
    task's repo_summary, model times and measurements, every key's best time against its
    default, and the latest policy changes."""
    from datetime import UTC, datetime

    from tunebank.bank.atomic import write_text_atomic
    from tunebank.report.gather import gather
    from tunebank.report.html import render

    with open_bank(db) as bank:
        check_socs(bank, [soc_version])
        found = gather(bank, soc_version)
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    write_text_atomic(out, render(found, stamp))
    say(f"Report: {out} ({len(found.chips)} chip(s), "
        f"{sum(len(c.tasks) for c in found.chips)} task(s), {found.head_seq:,} events)")
