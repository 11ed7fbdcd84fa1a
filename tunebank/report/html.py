"""``bank report``'s page: one self-contained HTML file (inline CSS, SVG and a few lines of
script to sort the tables), nothing fetched, readable offline and fit to attach to a ticket.

Laid out for a 1400 px window: the numbers an AOE user looks for first (repo_summary, model
time before and after, the speed-up) stay in view, the rest of a task's columns fold away, and
every chart names its rows in words.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

from tunebank.bank.tasks import TaskView
from tunebank.report.gather import BankReport, ChipReport, KeyTimes, ModelVersion
from tunebank.report.svg import Panel, Series, bar_rows, scatter_loglog

NOTHING = "No task to show: the bank holds none (of that chip, with --soc-version)."

MAX_POINTS = 3000
"""The most keys the scatter draws; more are thinned evenly, and the page says so."""

CHART_TASKS = 40
"""The most tasks a chip's chart draws (the latest); the table below it lists them all."""

CHART_MODELS = 40
"""The most model versions the models-across-chips chart draws (those tuned last)."""

NOT_TUNED = "not tuned here"
"""What a chip's row says for a model version with no task on that chip (it was an empty row,
alike to a model too fast to draw)."""

CHIPS_PER_CHART = 3
"""Chips set side by side in one chart of the models-across-chips view."""

OP_TYPES_IN_VIEW = 12
"""Operator types the table beside the scatter shows before it scrolls (it lists them all, the
most keys first; it stopped at 12 before, with no way to see the rest)."""

TASK_COLUMNS = ("#", "model", "tuning_name", "job", "status", "started (UTC)", "add", "hit", "update",
                "reserved", "unsat", "total", "before ms", "after ms", "improvement", "invariants")
"""The tasks table's columns in view at 1400 px: repo_summary, model time and speed-up."""

TASK_MORE = ("task", "model hash", "mode", "measurements", "tuning s", "origin")
"""The columns folded away until the reader asks for them."""

ADD, UPDATE, RESERVED, UNSAT = "#2e7d32", "#1565c0", "#90a4ae", "#e57373"
BEFORE, AFTER, SPENT = "#b0bec5", "#00897b", "#5c6bc0"

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 16px auto; padding: 0 24px; max-width: 1350px;
       color: #222; }
h1 { font-size: 22px; margin: 8px 0 4px; } h2 { margin-top: 36px; border-bottom: 2px solid #ddd; }
h3, summary { margin: 22px 0 6px; font-size: 16px; font-weight: 700; } summary { cursor: pointer; }
.meta, .note { color: #666; }
nav > span { margin-right: 18px; } nav { margin: 6px 0 0; }
table { border-collapse: collapse; margin: 8px 0 16px; font-size: 13px; }
th, td { padding: 3px 6px; border-bottom: 1px solid #eee; text-align: left; white-space: nowrap; }
th { white-space: normal; vertical-align: bottom; }
th { background: #f5f5f5; cursor: pointer; user-select: none; } td.n, th.n { text-align: right; }
th.sorted-asc::after { content: " \\25B2"; } th.sorted-desc::after { content: " \\25BC"; }
td.cut { max-width: 210px; overflow: hidden; text-overflow: ellipsis; }
.bad { color: #c62828; font-weight: 600; } .ok { color: #2e7d32; } .wide { overflow-x: auto; }
.more { display: none; } .tasks:has(input.unfold:checked) .more { display: table-cell; }
label.unfold { font-size: 13px; color: #444; cursor: pointer; }
.scroll { max-height: 340px; overflow-y: auto; } .scroll th { position: sticky; top: 0; }
.pair { display: grid; grid-template-columns: auto 1fr; gap: 28px; align-items: start; }
svg.chart { display: block; margin: 4px 0 12px; max-width: 100%; height: auto; }
svg .grid { stroke: #eee; } svg .frame { stroke: #999; } svg .band { fill: #f7f9fa; }
svg .diagonal { stroke: #c62828; stroke-dasharray: 4 3; }
svg .tick { font-size: 11px; fill: #555; } svg .axis { font-size: 12px; fill: #333; }
svg .label { font-size: 12px; fill: #222; } svg .title { font-size: 12px; font-weight: 600; fill: #333; }
svg .note { font-size: 11px; fill: #00695c; }
svg circle.mark { fill: #00897b; fill-opacity: .65; }
"""

SCRIPT = """
document.querySelectorAll("table.sortable").forEach(function (table) {
  table.querySelectorAll("th").forEach(function (th, column) {
    th.addEventListener("click", function () {
      var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
      var down = !th.classList.contains("sorted-desc");
      table.querySelectorAll("th").forEach(function (h) { h.classList.remove("sorted-asc", "sorted-desc"); });
      th.classList.add(down ? "sorted-desc" : "sorted-asc");
      rows.sort(function (a, b) {
        var x = a.cells[column].dataset.v || a.cells[column].textContent;
        var y = b.cells[column].dataset.v || b.cells[column].textContent;
        var nx = parseFloat(x), ny = parseFloat(y);
        var c = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
        return down ? -c : c;
      });
      rows.forEach(function (row) { body.appendChild(row); });
    });
  });
});
"""

Cell = Any
"""A table cell: a value, (shown, sort value) for a number, or a _Text (text with a class and
a tooltip)."""


@dataclass(frozen=True)
class _Text:
    """A cell's text with a CSS class (``cut``: cut to the column with an ellipsis) and a tooltip."""

    shown: str
    css: str = ""
    tip: str = ""


def render(report: BankReport, generated_at: str) -> str:
    """The report page."""
    versions = report.version_of()
    across = _models_across_chips(report) if len(report.chips) > 1 and report.models else ""
    chips = "".join(_chip(chip, versions) for chip in report.chips) or f"<p>{NOTHING}</p>"
    links = (['<span><a href="#models">Models across chips</a></span>'] if across else []) + [
        f'<span><a href="#{escape(c.soc_version)}">{escape(c.soc_version)}</a> '
        f'<span class="meta">({len(c.tasks)} task{"s" if len(c.tasks) != 1 else ""})</span></span>'
        for c in report.chips]
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>tunebank report: bank {escape(report.bank_id)}</title><style>{STYLE}</style></head><body>"
        f"<h1>tunebank report</h1><p class=\"meta\">bank {escape(report.bank_id)}, {report.head_seq:,} "
        f"events, head {escape(report.head_hash[:16])}..., generated {escape(generated_at)}; "
        f"{len(report.chips)} chip(s)</p><nav>{''.join(links)}</nav>"
        f"{across}{chips}<script>{SCRIPT}</script></body></html>\n")


# -- one model across chips ---------------------------------------------------------------------


def _models_across_chips(report: BankReport) -> str:
    chips = [c.soc_version for c in report.chips]
    models = report.models
    shown = {m: {soc: _latest_timed(m, soc) for soc in chips} for m in models}
    parts = ['<section id="models"><h2>Models across chips</h2>',
             '<p class="note">Each model version on each chip: the model\'s time before and after its '
             "latest task there that timed it, and the speed-up, (before - after) / after as AOE gives "
             "it. A version is a model's content (its hash): v1 is the first content tuned under that "
             "name. Each chip has its own scale.</p>"]
    latest = sorted(models, key=lambda m: max(t.started_at for t in m.tasks))[-CHART_MODELS:]
    charted = [m for m in models if m in latest]  # in name order, as the table
    labels = [m.label for m in charted]
    tips = [f"{m.label}, model {m.model_hash[:8] or '?'}" for m in charted]
    for start in range(0, len(chips), CHIPS_PER_CHART):
        panels = []
        for soc in chips[start:start + CHIPS_PER_CHART]:
            tasks = [shown[m][soc] for m in charted]
            panels.append(Panel(f"{soc}, model ms", [
                Series("before", [t.model_baseline_ms if t else None for t in tasks], BEFORE),
                Series("after", [t.model_result_ms if t else None for t in tasks], AFTER)],
                stacked=False, unit=" ms",
                notes=[_improvement(t) if t else ("not timed" if _on(m, soc) else NOT_TUNED)
                       for m, t in zip(charted, tasks, strict=True)]))
        parts.append(bar_rows(labels, panels, tips=tips))
    if len(charted) < len(models):
        parts.append(f'<p class="note">The chart shows the {len(charted)} model versions tuned last, of '
                     f"{len(models)}; the table lists them all.</p>")
    rows = []
    for m in models:
        row: list[Cell] = [_Text(m.name, "cut", m.name), m.version, m.model_hash[:8]]
        for soc in chips:
            row.append(_across_cell(m, soc, shown[m][soc]))
        rows.append(row)
    parts.append(_table(["model", "version", "model hash", *chips], rows))
    parts.append("</section>")
    return "".join(parts)


def _on(model: ModelVersion, soc: str) -> list[TaskView]:
    return [t for t in model.tasks if t.soc_version == soc]


def _latest_timed(model: ModelVersion, soc: str) -> TaskView | None:
    timed = [t for t in _on(model, soc) if t.model_baseline_ms and t.model_result_ms]
    return timed[-1] if timed else None


def _across_cell(model: ModelVersion, soc: str, task: TaskView | None) -> Cell:
    tasks = _on(model, soc)
    if not tasks:
        return _Text(NOT_TUNED, "", f"{model.label} has no task on {soc}")
    count = f"{len(tasks)} task{'s' if len(tasks) != 1 else ''}"
    tip = ", ".join(t.tuning_name or t.task_id for t in tasks)
    if task is None:
        return _Text(f"not timed ({count})", "", tip)
    speed = task.speed_up_pct
    return _Text(f"{_improvement(task)}: {task.model_baseline_ms:,.3f} → {task.model_result_ms:,.3f} ms "
                 f"({count})", "", tip + (f"; speed-up {speed:.2f}%" if speed is not None else ""))


# -- one chip -----------------------------------------------------------------------------------


def _chip(chip: ChipReport, versions: dict[str, ModelVersion]) -> str:
    tasks = chip.tasks
    spent = sum(chip.measurements.values())
    timed = sum(1 for k in chip.keys if k.before_us is not None and k.best_us is not None)
    parts = [f'<section class="chip" id="{escape(chip.soc_version)}"><h2>{escape(chip.soc_version)}</h2>',
             f'<p class="meta">{len(tasks)} task(s), {len(chip.keys):,} keys with a policy ({timed:,} '
             f"with both times), {spent:,} measurements spent</p>"]
    if tasks:
        parts.append(f"<h3>Tasks, in the order they started</h3>{_task_chart(chip, versions)}")
        parts.append(_task_table(tasks, chip.measurements, versions))
    parts.append(_keys(chip.keys))
    by_id = {t.task_id: t.tuning_name or t.task_id for t in tasks}
    parts.append(f"<details><summary>Latest policy changes ({len(chip.changes)}, the last appended first)"
                 "</summary>")
    parts.append(_table(["seq", "recorded (UTC)", "kind", "op_type", "repo_key", "before us", "after us",
                         "task", "origin", "borrowed from"],
                        [[(c.seq, c.seq), _when(c.recorded_at, zone=False), c.kind, c.op_type, c.repo_key,
                          _num(c.before_us), _num(c.after_us), _Text(by_id.get(c.task_id, c.task_id), "cut",
                                                                     c.task_id),
                          _Text(c.origin, "cut", c.origin), _Text(c.borrowed or "-", "cut", c.borrowed or "")]
                         for c in chip.changes]))
    parts.append("</details></section>")
    return "".join(parts)


def _task_chart(chip: ChipReport, versions: dict[str, ModelVersion]) -> str:
    numbered = list(enumerate(chip.tasks, 1))[-CHART_TASKS:]
    tasks = [t for _, t in numbered]
    spent = [chip.measurements.get(t.task_id, 0) for t in tasks]
    chart = bar_rows(
        [_task_label(n, t, versions) for n, t in numbered],
        [Panel("repo_summary, keys", [
            Series("add", [t.add_num for t in tasks], ADD),
            Series("update", [t.update_num for t in tasks], UPDATE),
            Series("reserved", [t.reserved_num for t in tasks], RESERVED),
            Series("unsatisfied", [t.unsatisfied_num for t in tasks], UNSAT)],
            stacked=True, notes=[f"{t.total_num:,}" for t in tasks]),
         Panel("model time, ms", [
             Series("before", [t.model_baseline_ms for t in tasks], BEFORE),
             Series("after", [t.model_result_ms for t in tasks], AFTER)],
             stacked=False, unit=" ms", notes=[_improvement(t) or "not timed" for t in tasks]),
         Panel("measurements spent", [Series("measurements", spent, SPENT)], stacked=False,
               notes=[f"{n:,}" for n in spent])],
        tips=[_task_tip(n, t, versions) for n, t in numbered])
    shown = (f" The chart shows the latest {CHART_TASKS} of {len(chip.tasks)} tasks; the table lists "
             "them all." if len(chip.tasks) > CHART_TASKS else "")
    return (chart + '<p class="note">Rows are numbered as the table\'s #. After each bar: total (add + hit '
            "+ unsatisfied; hit = update + reserved), the model's speed-up (before - after) / after as "
            f"AOE gives it, and the measurements the task's searches made.{shown}</p>")


def _task_label(n: int, task: TaskView, versions: dict[str, ModelVersion]) -> str:
    model = versions.get(task.task_id)
    what = model.label if model else (task.tuning_name or task.task_id)
    return f"{n} · {what}" + (" · subgraph" if task.job_type == "sgat" else "")


def _task_tip(n: int, task: TaskView, versions: dict[str, ModelVersion]) -> str:
    model = versions.get(task.task_id)
    version = f", {model.label} (model {model.model_hash[:8]})" if model else ""
    return (f"#{n} {task.tuning_name or '-'} (task {task.task_id}){version}, {task.job_type or '-'}, "
            f"started {_when(task.started_at)}")


def _task_table(tasks: Sequence[TaskView], measurements: dict[str, int],
                versions: dict[str, ModelVersion]) -> str:
    rows: list[list[Cell]] = []
    problems: list[str] = []
    for n, t in enumerate(tasks, 1):
        found = t.invariant_problems() if t.finished else []
        problems.extend(f"#{n}: {p}" for p in found)
        model = versions.get(t.task_id)
        speed = t.speed_up_pct
        rows.append([
            n, _Text(model.label if model else "-", "cut", t.model_name or ""),
            _Text(t.tuning_name or "-", "cut", t.tuning_name or ""), t.job_type, t.status,
            _when(t.started_at, zone=False), t.add_num, t.hit_num, t.update_num, t.reserved_num,
            t.unsatisfied_num, t.total_num, _num(t.model_baseline_ms), _num(t.model_result_ms),
            (f"{speed:.2f}%", speed) if speed is not None else "",
            _Text(f"{len(found)} problem(s)", "bad", "; ".join(found)) if found else _Text("ok", "ok"),
            t.task_id, (t.model_hash or "")[:8], t.search_mode, measurements.get(t.task_id, 0),
            _num(t.tuning_time_s), t.origin])
    headers = [*TASK_COLUMNS, *TASK_MORE]
    listed = "".join(f"<li>{escape(p)}</li>" for p in problems)
    unfold = ('<label class="unfold"><input type="checkbox" class="unfold"> more columns: '
              + ", ".join(TASK_MORE) + "</label>")
    table = _table(headers, rows, set(range(len(TASK_COLUMNS), len(headers))))
    listing = f'<ul class="bad">{listed}</ul>' if listed else ""
    return f'<div class="tasks">{unfold}{table}{listing}</div>'


def _keys(keys: Sequence[KeyTimes]) -> str:
    both = [(k.before_us, k.best_us, f"{k.op_type or '?'} {k.repo_key}") for k in keys
            if k.before_us is not None and k.best_us is not None]
    head = f"<h3>Best time per key against its default ({len(both):,} of {len(keys):,} keys have both)</h3>"
    if not both:
        return head + '<p class="note">No key has both times (imported keys may have none).</p>'
    stride = -(-len(both) // MAX_POINTS)  # a big bank's keys, thinned to a page that opens fast
    shown = sorted(both, key=lambda point: point[2])[::stride]
    faster = sum(1 for b, a, _ in both if a < b)
    thinned = f" Shown: {len(shown):,} of them, one in {stride} in key order." if stride > 1 else ""
    chart = scatter_loglog(shown, x_label="default, us (log)", y_label="best, us (log)")
    return (f'{head}<div class="pair"><div>{chart}<p class="note">{faster:,} keys are faster than their '
            f"default (below the dashed line); keys imported without times have no point.{thinned}</p></div>"
            f"<div>{_op_types(keys)}</div></div>")


def _op_types(keys: Sequence[KeyTimes]) -> str:
    groups: dict[str, list[KeyTimes]] = {}
    for k in keys:
        groups.setdefault(k.op_type or "?", []).append(k)
    ranked = sorted(groups.items(), key=lambda item: (-len(item[1]), item[0]))
    rows = []
    for op_type, of_type in ranked:
        pairs = [(k.before_us, k.best_us) for k in of_type
                 if k.before_us and k.best_us and k.before_us > 0 and k.best_us > 0]
        mean = math.exp(sum(math.log(b / a) for b, a in pairs) / len(pairs)) if pairs else None
        faster = sum(1 for b, a in pairs if a < b)
        rows.append([_Text(op_type, "cut", op_type), len(of_type), len(pairs), faster,
                     (f"{mean:.3f}x", mean) if mean is not None else "-"])
    many = len(ranked) > OP_TYPES_IN_VIEW
    note = f" All {len(ranked)} operator types are listed: the table scrolls." if many else ""
    return ("<p><b>By operator type</b></p>"
            + _table(["op_type", "keys", "with both times", "faster", "speed-up (geomean)"], rows,
                     box="wide scroll" if many else "wide")
            + '<p class="note">Speed-up: default / best, the geometric mean over the keys with both '
              f"times.{note}</p>")


# -- cells --------------------------------------------------------------------------------------


def _table(headers: Sequence[str], rows: Iterable[Sequence[Cell]], folded: set[int] | None = None,
           box: str = "wide") -> str:
    """A sortable table in a box of CSS class ``box`` (``wide``: it scrolls sideways when the
    window is narrow; ``scroll``: down too, under a header that stays), its ``folded`` columns
    hidden until unfolded."""
    folded = folded or set()
    rows = list(rows)
    numeric = {i for i in range(len(headers))
               if rows and all(isinstance(r[i], int | float | tuple) and not isinstance(r[i], bool)
                               for r in rows)}

    def css(i: int) -> str:
        names = " ".join(name for name, on in (("more", i in folded), ("n", i in numeric)) if on)
        return f' class="{names}"' if names else ""

    head = "".join(f"<th{css(i)}>{escape(h)}</th>" for i, h in enumerate(headers))
    body = "".join("<tr>" + "".join(_cell(v, "more" if i in folded else "") for i, v in enumerate(row))
                   + "</tr>" for row in rows)
    return (f'<div class="{box}"><table class="sortable"><thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table></div>")


def _cell(value: Cell, folded: str) -> str:
    def td(css: str, text: str, extra: str = "") -> str:
        names = " ".join(c for c in (css, folded) if c)
        return f"<td{f' class={chr(34)}{names}{chr(34)}' if names else ''}{extra}>{escape(text)}</td>"

    if isinstance(value, _Text):
        return td(value.css, value.shown, f' title="{escape(value.tip)}"' if value.tip else "")
    if isinstance(value, tuple):  # (shown, sort value)
        shown, extra = value
        return td("n", str(shown), f' data-v="{escape(str(extra))}"')
    if isinstance(value, int | float) and not isinstance(value, bool):
        return td("n", f"{value:,}" if isinstance(value, int) else f"{value:g}")
    return td("", "" if value is None else str(value))


def _num(value: float | None) -> Any:
    return "" if value is None else (f"{value:,.3f}", value)


def _improvement(task: TaskView) -> str:
    speed = task.speed_up_pct
    return "" if speed is None else f"{speed:+.1f}%"


def _when(stamp: str | None, *, zone: bool = True) -> str:
    """A log time as people read it: date and time to the second, in UTC (said after the time,
    or, with ``zone=False``, by the column's header)."""
    return "-" if not stamp else stamp[:19].replace("T", " ") + (" UTC" if zone else "")
