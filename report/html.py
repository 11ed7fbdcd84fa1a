"""``bank report``'s page: one self-contained HTML file (inline CSS, SVG and a few lines of
script to sort the tables), nothing fetched, readable offline and fit to attach to a ticket."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape
from typing import Any

from bank.tasks import TaskView
from report.gather import BankReport, ChipReport
from report.svg import Series, bars, scatter_loglog

NOTHING = "No task to show: the bank holds none (of that chip, with --soc-version)."

MAX_POINTS = 3000
"""The most keys the scatter draws; more are thinned evenly, and the page says so."""

ADD, UPDATE, RESERVED, UNSAT = "#2e7d32", "#1565c0", "#90a4ae", "#e57373"
BEFORE, AFTER = "#b0bec5", "#00897b"

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px auto; max-width: 1100px; color: #222; }
h1 { font-size: 22px; margin-bottom: 4px; } h2 { margin-top: 36px; border-bottom: 2px solid #ddd; }
h3 { margin: 22px 0 6px; font-size: 16px; } .meta, .note { color: #666; }
table { border-collapse: collapse; margin: 8px 0 16px; font-size: 13px; }
th, td { padding: 3px 8px; border-bottom: 1px solid #eee; text-align: left; white-space: nowrap; }
th { background: #f5f5f5; cursor: pointer; user-select: none; } td.n { text-align: right; }
th.sorted-asc::after { content: " \\25B2"; } th.sorted-desc::after { content: " \\25BC"; }
.bad { color: #c62828; font-weight: 600; } .ok { color: #2e7d32; }
svg.chart { display: block; margin: 4px 0 12px; max-width: 100%; height: auto; }
svg .grid { stroke: #eee; } svg .frame { stroke: #999; }
svg .diagonal { stroke: #c62828; stroke-dasharray: 4 3; }
svg .tick { font-size: 11px; fill: #555; } svg .axis { font-size: 12px; fill: #333; }
svg .note { font-size: 10px; fill: #00695c; } .wide { overflow-x: auto; }
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


def render(report: BankReport, generated_at: str) -> str:
    """The report page."""
    chips = "".join(_chip(chip) for chip in report.chips) or f"<p>{NOTHING}</p>"
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>tunebank report: bank {escape(report.bank_id)}</title><style>{STYLE}</style></head><body>"
        f"<h1>tunebank report</h1><p class=\"meta\">bank {escape(report.bank_id)}, {report.head_seq:,} "
        f"events, head {escape(report.head_hash[:16])}..., generated {escape(generated_at)}; "
        f"{len(report.chips)} chip(s): {escape(', '.join(c.soc_version for c in report.chips))}</p>"
        f"{chips}<script>{SCRIPT}</script></body></html>\n")


def _chip(chip: ChipReport) -> str:
    tasks = chip.tasks
    number = {t.task_id: str(n) for n, t in enumerate(tasks, 1)}  # the charts' labels, the table's #
    labels, names = [number[t.task_id] for t in tasks], [_label(t) for t in tasks]
    parts = [f'<section class="chip" id="{escape(chip.soc_version)}"><h2>{escape(chip.soc_version)}</h2>']
    parts.append("<h3>repo_summary of each task, in the order they started</h3>")
    if tasks:
        parts.append(bars(labels, [
            Series("add", [t.add_num for t in tasks], ADD),
            Series("update", [t.update_num for t in tasks], UPDATE),
            Series("reserved", [t.reserved_num for t in tasks], RESERVED),
            Series("unsatisfied", [t.unsatisfied_num for t in tasks], UNSAT)],
            stacked=True, y_label="keys", names=names))
        parts.append('<p class="note">Bars are numbered as the tasks below; hit = update + reserved, '
                     'total = add + hit + unsatisfied.</p>')
    parts.append(_task_table(tasks, chip.measurements))
    timed = [t for t in tasks if t.model_baseline_ms and t.model_result_ms]
    parts.append("<h3>Model time before and after, per model version</h3>")
    if timed:
        parts.append(bars([number[t.task_id] for t in timed], [
            Series("before", [t.model_baseline_ms or 0.0 for t in timed], BEFORE),
            Series("after", [t.model_result_ms or 0.0 for t in timed], AFTER)],
            stacked=False, y_label="model ms", unit=" ms",
            names=[f"{_label(t)}, model {(t.model_hash or '?')[:8]}" for t in timed],
            notes=[_improvement(t) for t in timed]))
        parts.append('<p class="note">Above each pair: the speed-up, (before - after) / after as AOE '
                     'gives it. A model version is its content hash (the table\'s model hash).</p>')
    else:
        parts.append('<p class="note">No task of this chip recorded model times.</p>')
    parts.append("<h3>Measurements spent per task</h3>")
    parts.append(bars(labels, [Series("measurements", [chip.measurements.get(t.task_id, 0) for t in tasks],
                                      UPDATE)], stacked=False, y_label="measurements", names=names)
                 if any(chip.measurements.values()) else '<p class="note">No measurement recorded.</p>')
    both: list[tuple[float, float, str]] = [
        (k.before_us, k.best_us, f"{k.op_type or '?'} {k.repo_key}") for k in chip.keys
        if k.before_us is not None and k.best_us is not None]
    parts.append(f"<h3>Best time per key against its default ({len(both)} of {len(chip.keys)} keys "
                 "have both)</h3>")
    if both:
        stride = -(-len(both) // MAX_POINTS)  # a big bank's keys, thinned to a page that opens fast
        shown = sorted(both, key=lambda point: point[2])[::stride]
        parts.append(scatter_loglog(shown, x_label="default, us (log)", y_label="best, us (log)"))
        faster = sum(1 for b, a, _ in both if a < b)
        thinned = f" Shown: {len(shown):,} of them, one in {stride} in key order." if stride > 1 else ""
        parts.append(f'<p class="note">{faster:,} keys are faster than their default (below the '
                     f"dashed line); keys imported without times have no point.{thinned}</p>")
    by_id = {t.task_id: t.tuning_name or t.task_id for t in tasks}
    parts.append(f"<h3>Latest policy changes ({len(chip.changes)}, the last appended first)</h3>")
    parts.append(_table(["seq", "recorded_at", "kind", "op_type", "repo_key", "before us", "after us",
                         "task", "origin", "borrowed from"],
                        [[(c.seq, c.seq), _when(c.recorded_at), c.kind, c.op_type, c.repo_key,
                          _num(c.before_us), _num(c.after_us), by_id.get(c.task_id, c.task_id), c.origin,
                          c.borrowed or "-"]
                         for c in chip.changes]))
    parts.append("</section>")
    return "".join(parts)


def _task_table(tasks: Sequence[TaskView], measurements: dict[str, int]) -> str:
    rows = []
    for n, t in enumerate(tasks, 1):
        problems = t.invariant_problems() if t.finished else []
        speed = ((t.model_baseline_ms - t.model_result_ms) / t.model_result_ms * 100
                 if t.model_baseline_ms and t.model_result_ms else None)
        rows.append([n, t.task_id, t.tuning_name, t.model_name, (t.model_hash or "")[:8], t.job_type,
                     t.search_mode, t.status, _when(t.started_at), t.add_num, t.hit_num, t.update_num,
                     t.reserved_num, t.unsatisfied_num, t.total_num, measurements.get(t.task_id, 0),
                     _num(t.model_baseline_ms), _num(t.model_result_ms),
                     (f"{speed:.2f}%", speed) if speed is not None else "",
                     ("; ".join(problems), "bad") if problems else ("ok", "ok")])
    return _table(["#", "task", "tuning_name", "model", "model hash", "job", "mode", "status", "started",
                   "add", "hit", "update", "reserved", "unsat", "total", "measurements",
                   "before ms", "after ms", "improvement", "invariants"], rows)


def _table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(_cell(v) for v in row) + "</tr>" for row in rows)
    return (f'<div class="wide"><table class="sortable"><thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table></div>")


def _cell(value: Any) -> str:
    if isinstance(value, tuple):  # (shown, sort value) or (shown, css class)
        shown, extra = value
        if extra in ("ok", "bad"):
            return f'<td class="{extra}">{escape(str(shown))}</td>'
        return f'<td class="n" data-v="{escape(str(extra))}">{escape(str(shown))}</td>'
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f'<td class="n">{value:,}</td>' if isinstance(value, int) else f'<td class="n">{value:g}</td>'
    return f"<td>{escape('' if value is None else str(value))}</td>"


def _num(value: float | None) -> Any:
    return "" if value is None else (f"{value:,.3f}", value)


def _label(task: TaskView) -> str:
    name = task.tuning_name or task.task_id
    return f"{name} {task.started_at[5:16].replace('T', ' ')}"


def _improvement(task: TaskView) -> str:
    before, after = task.model_baseline_ms, task.model_result_ms
    return f"{(before - after) / after * 100:+.1f}%" if before and after else ""


def _when(stamp: str | None) -> str:
    """A log time as people read it: date and time to the second, in UTC."""
    return "-" if not stamp else stamp[:19].replace("T", " ") + " UTC"
