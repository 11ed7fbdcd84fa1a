"""`bank diff`: two banks policy by policy, or two versions of a model key by key."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from tunebank.cli.common import (
    CsvOption,
    DbOption,
    JsonOption,
    LimitOption,
    RawOption,
    SortOption,
    check_socs,
    chosen_rows,
    fail,
    open_bank,
    print_json,
    refuse_two_forms,
    say,
    show_rows,
    soc_option,
    user_errors,
)

if TYPE_CHECKING:
    from tunebank.bank import Bank, Policy
    from tunebank.bank.exchange.diff import DiffEntry

BANK_COLUMNS = ["change", "soc_version", "repo_key", "op_type", "what", "a_best_us", "b_best_us",
                "faster", "a_recorded_by", "b_recorded_by"]
MODEL_COLUMNS = ["change", "op_type", "v1_repo_key", "v2_repo_key", "ops", "bank", "op_names"]
CHANGES = {"only_a": "only in A", "only_b": "only in B", "differ": "differ", "new": "new",
           "gone": "gone", "changed_key": "changed key"}


class Shown:
    """How the rows are to be shown: the readers' shared --limit, --sort, --csv, --raw and
    --json, held together so the two kinds of diff apply them alike."""

    def __init__(self, limit: int | None, sort: str | None, as_csv: bool, raw: bool,
                 as_json: bool) -> None:
        self.limit, self.sort, self.as_csv, self.raw, self.as_json = limit, sort, as_csv, raw, as_json

    def show(self, headers: list[str], rows: list[list[Any]], records: list[dict[str, Any]],
             document: dict[str, Any], heading: str, total: str) -> None:
        """The chosen rows as a table (``heading``, the rows, ``total``), as CSV (the rows
        alone), or in the ``--json`` document under ``rows``."""
        chosen = chosen_rows(headers, rows, sort=self.sort, limit=self.limit)
        if self.as_json:
            print_json({**document, "rows": [records[n] for n in chosen], "total": total})
            return
        if self.as_csv:
            show_rows(headers, [rows[n] for n in chosen], as_csv=True, raw=self.raw)
            return
        say(heading)
        if chosen:  # no difference: the total alone says so
            show_rows(headers, [rows[n] for n in chosen])
        say(total)


@user_errors
def diff(
    banks: Annotated[list[str] | None, typer.Argument(
        metavar="[A B]", help="Two banks (files or URLs) or AOE bank trees (folders or "
                              "*_runtime_kb.json files), compared entry by entry.",
        show_default=False)] = None,
    model: Annotated[list[Path] | None, typer.Option(
        "--model", exists=True, dir_okay=False,
        help="Two versions of a model (--model V1 --model V2), compared key by key.")] = None,
    soc_version: Annotated[str | None, soc_option(
        "Banks: only this chip. Models: the chip to plan for (required).")] = None,
    db: DbOption = None,
    job_type: Annotated[str, typer.Option(
        "--job-type", metavar="<operator|subgraph|2|1>",
        help="Models: subgraph (1) or operator (2) keys.")] = "operator",
    input_shape: Annotated[str | None, typer.Option(
        "--input-shape", help='Models: fix input shapes, "name:1,3,224,224;other:8,128".')] = None,
    exit_code: Annotated[bool, typer.Option(
        "--exit-code", help="Exit 1 when there is a difference, 0 when there is none.")] = False,
    limit: LimitOption = None,
    sort: SortOption = None,
    as_csv: CsvOption = False,
    raw: RawOption = False,
    as_json: JsonOption = False,
) -> None:
    """Compare two banks or AOE bank trees (A B: keys only in one, keys whose policy or time
    differs, and who recorded each; two releases' trees: the entries added, changed and gone)
    or two versions of a model (--model twice: keys kept, gone and new, and what
    the bank knows of the new ones).

    Of two banks: "only in A" and "only in B" are keys one side holds and the other does not;
    "differ" are keys both hold with another policy ("what" is policy: other knowledge) or the
    same policy at another time ("what" is time); "faster" names the side whose time is lower
    (equal: the same). Nothing is written: it is what a merge would weigh, key by key.

    One row a difference, in one table: "change" says which kind (only in A, only in B, differ;
    for models new, gone, changed key). --sort and --limit choose the rows of every form; the
    closing total counts them all. --json prints one document: the counts, the chosen "rows",
    and the total line."""
    from tunebank.bank.errors import BankError

    refuse_two_forms(as_json, as_csv)
    shown = Shown(limit, sort, as_csv, raw, as_json)
    banks, models = banks or [], model or []
    try:  # as diff(1) has it: 0 the same, 1 different (with --exit-code), 2 trouble
        if len(banks) == 2 and not models:
            differs = _diff_banks(banks[0], banks[1], soc_version, shown)
        elif len(models) == 2 and not banks:
            if soc_version is None:
                raise fail("--soc-version: needed to plan the models (see `bank socs`)", code=2)
            differs = _diff_models(models, soc_version, db, job_type, input_shape, shown)
        else:
            raise fail("give two banks (bank diff A B) or two models (bank diff --model V1 --model V2 "
                       f"--soc-version S), not {len(banks)} bank(s) and {len(models)} model(s)", code=2)
    except BankError as exc:
        raise fail(str(exc), code=2) from None
    if exit_code and differs:
        raise typer.Exit(1)


def _open(name: str, which: str) -> Bank:
    if "://" not in name and not Path(name).expanduser().exists():
        raise fail(f"{which}: no bank at {name}", code=2)
    return open_bank(name)


def _diff_banks(a: str, b: str, soc_version: str | None, shown: Shown) -> bool:
    from contextlib import ExitStack

    from tunebank.bank.exchange.diff import diff_policies
    from tunebank.bank.location import shown_source

    with ExitStack() as stack:
        (found_a, names_a, bank_a, home_a), (found_b, names_b, bank_b, home_b) = (
            _side(name, which, soc_version, stack) for name, which in ((a, "A"), (b, "B")))
        if soc_version is not None and not (found_a or found_b):
            for bank in (bank_a, bank_b):
                if bank is not None:
                    check_socs(bank, [soc_version])
        found = diff_policies(found_a, found_b)
    names = {"a": names_a, "b": names_b}
    shown_a, shown_b = shown_source(a), shown_source(b)  # a URL's password stays unprinted
    entries = found.entries()
    shown.show(BANK_COLUMNS, [_bank_row(e, names, home_a, home_b) for e in entries],
               [e.as_json(names) for e in entries], {"a": shown_a, "b": shown_b, **found.counts()},
               f"A is {shown_a}, B is {shown_b}", found.total_line())
    return not found.identical


def _side(name: str, which: str, soc_version: str | None,
          stack: Any) -> tuple[list[Policy], dict[str, str | None], Bank | None, str]:
    """One side's policies, task names, bank, and home origin (the origin of what was recorded
    there, not brought from elsewhere): a bank's, or an AOE bank tree's entries."""
    from tunebank.bank import PolicyFilter
    from tunebank.bank.formats.runtime_kb import SUFFIX

    path = Path(name).expanduser()
    if "://" not in name and (path.is_dir() or path.name.endswith(SUFFIX)):
        from tunebank.bank.exchange.diff import tree_policies
        from tunebank.bank.formats.aoe_repo import read_tree

        tree = read_tree(path)
        return tree_policies(tree, soc_version), {}, None, str(tree.path)
    bank = stack.enter_context(_open(name, which))
    return (bank.policies(PolicyFilter(soc_version=soc_version)),
            {t.task_id: t.tuning_name for t in bank.tasks()}, bank, bank.origin)


def _bank_row(entry: DiffEntry, names: dict[str, dict[str, str | None]], home_a: str,
              home_b: str) -> list[Any]:
    def by(policy: Policy | None, side: str, home: str) -> str | None:
        if policy is None:
            return None
        return _recorded(names[side].get(policy.task_id) or policy.task_id, policy.origin, home)

    key, faster = entry.either, entry.faster
    return [CHANGES[entry.change], key.soc_version, key.repo_key, key.op_type, entry.what,
            _us(entry.a), _us(entry.b), faster.upper() if faster in ("a", "b") else faster,
            by(entry.a, "a", home_a), by(entry.b, "b", home_b)]


def _recorded(by: str, origin: str, home: str) -> str:
    """Who recorded an entry, and where when that was not this side (a merge or an import
    brought it): the side's own entries are named by their task alone, a tree's by file and line."""
    return by if origin == home else f"{by} ({origin})"


def _diff_models(models: list[Path], soc_version: str, db: str | None, job_type: str,
                 input_shape: str | None, shown: Shown) -> bool:
    from tunebank.bank.location import resolve
    from tunebank.tuner.model.reading import parse_input_shapes
    from tunebank.tuner.options import job_type_of
    from tunebank.tuner.plan.coverage import plan_of
    from tunebank.tuner.plan.versions import diff_models

    kind, shapes = job_type_of(job_type), parse_input_shapes(input_shape)
    v1, v2 = (plan_of(path, soc_version, shapes, kind) for path in models)
    if db is None and not resolve(None).exists:  # no bank named and none where it would be
        found = diff_models(v1, v2)
    else:
        with open_bank(db) as bank:
            found = diff_models(v1, v2, bank, soc_version)
    entries = found.entries()
    rows = [[CHANGES[e.change], e.op_type, e.v1_key, e.v2_key, len(e.op_names),
             e.coverage.status if e.coverage is not None else None, _names(e.op_names)]
            for e in entries]
    shown.show(MODEL_COLUMNS, rows, [e.as_json() for e in entries],
               {"v1": str(models[0]), "v2": str(models[1]), **found.counts()},
               f"V1 is {models[0]}, V2 is {models[1]}", found.total_line())
    return bool(found.new or found.gone)


def _names(names: list[str]) -> str:
    return ", ".join(names[:3]) + (" ..." if len(names) > 3 else "")


def _us(policy: Policy | None) -> float | None:
    if policy is None or policy.best_us == float("inf"):
        return None
    return round(policy.best_us, 3)
