"""`bank diff`: two banks policy by policy, or two versions of a model key by key."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

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
    user_errors,
)

if TYPE_CHECKING:
    from tunebank.bank import Bank, Policy
    from tunebank.bank.exchange.diff import BankDiff
    from tunebank.tuner.plan.versions import ModelDiff


@user_errors
def diff(
    banks: Annotated[list[str] | None, typer.Argument(
        metavar="[A B]", help="Two banks (files or URLs) or AOE bank trees (folders or "
                              "*_runtime_kb.json files), compared entry by entry.",
        show_default=False)] = None,
    model: Annotated[list[Path] | None, typer.Option(
        "--model", exists=True, dir_okay=False,
        help="Two versions of a model (--model V1 --model V2), compared key by key.")] = None,
    soc_version: Annotated[str | None, typer.Option(
        "--soc-version", help="Banks: only this chip. Models: the chip to plan for (required).")] = None,
    db: DbOption = None,
    job_type: Annotated[str, typer.Option(
        "--job-type", metavar="<operator|subgraph|2|1>",
        help="Models: subgraph (1) or operator (2) keys.")] = "operator",
    input_shape: Annotated[str | None, typer.Option(
        "--input-shape", help='Models: fix input shapes, "name:1,3,224,224;other:8,128".')] = None,
    exit_code: Annotated[bool, typer.Option(
        "--exit-code", help="Exit 1 when there is a difference, 0 when there is none.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Compare two banks or AOE bank trees (A B: keys only in one, keys whose policy or time
    differs, and who recorded each; two releases' trees: the entries added, changed and gone)
    or two versions of a model (--model twice: keys kept, gone and new, and what
    the bank knows of the new ones).

    Of two banks: "only in A" and "only in B" are keys one side holds and the other does not;
    "differ" are keys both hold with another policy ("what" is policy: other knowledge) or the
    same policy at another time ("what" is time); "faster" names the side whose time is lower
    (equal: the same). Nothing is written: it is what a merge would weigh, key by key."""
    from tunebank.bank.errors import BankError

    banks, models = banks or [], model or []
    try:  # as diff(1) has it: 0 the same, 1 different (with --exit-code), 2 trouble
        if len(banks) == 2 and not models:
            differs = _diff_banks(banks[0], banks[1], soc_version, as_json)
        elif len(models) == 2 and not banks:
            if soc_version is None:
                raise fail("--soc-version: needed to plan the models (see `bank socs`)", code=2)
            differs = _diff_models(models, soc_version, db, job_type, input_shape, as_json)
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


def _diff_banks(a: str, b: str, soc_version: str | None, as_json: bool) -> bool:
    from contextlib import ExitStack

    from tunebank.bank.exchange.diff import diff_policies
    from tunebank.bank.location import shown_source

    with ExitStack() as stack:
        (found_a, names_a, bank_a), (found_b, names_b, bank_b) = (
            _side(name, which, soc_version, stack) for name, which in ((a, "A"), (b, "B")))
        if soc_version is not None and not (found_a or found_b):
            for bank in (bank_a, bank_b):
                if bank is not None:
                    check_socs(bank, [soc_version])
        found = diff_policies(found_a, found_b)
    names = {"a": names_a, "b": names_b}
    shown_a, shown_b = shown_source(a), shown_source(b)  # a URL's password stays unprinted
    if as_json:
        print_json({"a": shown_a, "b": shown_b, **found.as_json(names)})
    else:
        _print_bank_diff(found, shown_a, shown_b, names)
    return not found.identical


def _side(name: str, which: str, soc_version: str | None,
          stack: Any) -> tuple[list[Policy], dict[str, str | None], Bank | None]:
    """One side's policies and task names: a bank's, or an AOE bank tree's entries."""
    from tunebank.bank import PolicyFilter
    from tunebank.bank.formats.runtime_kb import SUFFIX

    path = Path(name).expanduser()
    if "://" not in name and (path.is_dir() or path.name.endswith(SUFFIX)):
        from tunebank.bank.exchange.diff import tree_policies
        from tunebank.bank.formats.aoe_repo import read_tree

        return tree_policies(read_tree(path), soc_version), {}, None
    bank = stack.enter_context(_open(name, which))
    return (bank.policies(PolicyFilter(soc_version=soc_version)),
            {t.task_id: t.tuning_name for t in bank.tasks()}, bank)


def _print_bank_diff(found: BankDiff, a: str, b: str, names: dict[str, dict[str, str | None]]) -> None:
    def by(policy: Policy, side: str) -> str:
        return names[side].get(policy.task_id) or policy.task_id

    for side, label, policies in (("a", f"only in A ({a})", found.only_a),
                                  ("b", f"only in B ({b})", found.only_b)):
        if policies:
            say(f"{label}: {len(policies)}")
            print_table(["soc_version", "repo_key", "op_type", "best_us", "recorded by", "origin"],
                        [[p.soc_version, p.repo_key, p.op_type, _us(p.best_us), by(p, side), p.origin]
                         for p in policies])
    if found.changed:
        say(f"differ: {len(found.changed)}")
        print_table(["soc_version", "repo_key", "op_type", "what", "A best_us", "B best_us", "faster",
                     "A recorded by", "B recorded by"],
                    [[c.a.soc_version, c.a.repo_key, c.a.op_type, c.what, _us(c.a.best_us),
                      _us(c.b.best_us), c.faster.upper() if c.faster != "equal" else "equal",
                      _recorded(by(c.a, 'a'), c.a.origin, a), _recorded(by(c.b, 'b'), c.b.origin, b)]
                     for c in found.changed])
    say(found.total_line())


def _recorded(by: str, origin: str, side: str) -> str:
    """Who recorded an entry, and where: a tree's entries are named by file and line alone."""
    return by if origin == side else f"{by} ({origin})"


def _diff_models(models: list[Path], soc_version: str, db: str | None, job_type: str,
                 input_shape: str | None, as_json: bool) -> bool:
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
    if as_json:
        print_json({"v1": str(models[0]), "v2": str(models[1]), **found.as_json()})
    else:
        _print_model_diff(found)
    return bool(found.new or found.gone)


def _print_model_diff(found: ModelDiff) -> None:
    status = found.bank_status
    if found.new:
        say(f"new in V2: {len(found.new)}")
        print_table(["repo_key", "op_type", "ops", "bank", "op_names"],
                    [[g.repo_key, g.op_type, len(g.op_names),
                      status[g.repo_key].status if status is not None else "-", _names(g.op_names)]
                     for g in found.new])
    if found.gone:
        say(f"gone from V1: {len(found.gone)}")
        print_table(["repo_key", "op_type", "ops", "op_names"],
                    [[g.repo_key, g.op_type, len(g.op_names), _names(g.op_names)] for g in found.gone])
    if found.changed:
        say(f"changed key: {len(found.changed)}")
        print_table(["op_name", "op_type", "V1 repo_key", "V2 repo_key"],
                    [[c.op_name, c.op_type, c.v1_key, c.v2_key] for c in found.changed])
    say(found.total_line())


def _names(names: list[str]) -> str:
    return ", ".join(names[:3]) + (" ..." if len(names) > 3 else "")


def _us(value: float) -> Any:
    return round(value, 3) if value != float("inf") else "-"
