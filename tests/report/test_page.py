"""The report page from gathered values, without a bank: model versions, labels, the folded
columns, long names and the limits on what a chart draws."""

from __future__ import annotations

import re

from tunebank.bank.tasks import TaskView
from tunebank.report.gather import BankReport, ChipReport, model_versions
from tunebank.report.html import CHART_TASKS, TASK_COLUMNS, TASK_MORE, render


def task(n: int, soc: str = "Ascend310", model: str | None = "net", model_hash: str | None = "h1",
         **fields: object) -> TaskView:
    values: dict[str, object] = {"status": "successful", "add_num": 3, "model_baseline_ms": 2.0,
                                 "model_result_ms": 1.6, "job_type": "opat", **fields}
    return TaskView(f"t{n}", soc, "bank:x", f"2026-01-01T00:00:{n:02d}Z", n, n, tuning_name=f"tune{n}",
                    model_name=model, model_hash=model_hash, **values)  # type: ignore[arg-type]


def page(*chips: ChipReport, every: list[TaskView] | None = None) -> str:
    tasks = every if every is not None else [t for chip in chips for t in chip.tasks]
    return render(BankReport("b", 1, "0" * 64, chips, model_versions(tasks)), "now")


def labels(html: str) -> list[str]:
    return re.findall(r'<text class="label"[^>]*>([^<]*)<title>', html)


def test_a_version_is_a_content_numbered_per_name_in_the_order_first_tuned() -> None:
    tasks = [task(1, model_hash="a"), task(2, model_hash="b"), task(3, model_hash="a", soc="Ascend910B2"),
             task(4, model="other", model_hash="c"), task(5, model=None, model_hash=None)]
    found = model_versions(reversed(tasks))  # the order given does not matter: start times do
    assert [(m.label, m.model_hash, [t.task_id for t in m.tasks]) for m in found] == [
        ("net v1", "a", ["t1", "t3"]), ("net v2", "b", ["t2"]), ("other v1", "c", ["t4"])]
    only = model_versions(tasks, shown={"t2"})  # a report of fewer tasks keeps the numbers
    assert [(m.label, [t.task_id for t in m.tasks]) for m in only] == [("net v2", ["t2"])]


def test_rows_are_labelled_with_model_and_version_and_cut_names_keep_a_tooltip() -> None:
    long_name = "a_model_name_far_longer_than_any_label_column_holds_" * 2
    tasks = [task(1, model_hash="a"), task(2, model_hash="b", job_type="sgat"),
             task(3, model=None, model_hash=None), task(4, model=long_name)]
    html = page(ChipReport("Ascend310", tasks=tasks))
    shown = labels(html)
    assert shown[:3] == ["1 · net v1", "2 · net v2 · subgraph", "3 · tune3"]
    assert shown[3].startswith(f"4 · {long_name[:20]}") and shown[3].endswith("…") and len(shown[3]) < 40
    assert f"<title>#4 tune4 (task t4), {long_name} v1" in html
    assert f'class="cut" title="{long_name}"' in html  # the table cuts it too, with the whole name on hover


def test_the_key_columns_come_first_and_the_rest_fold() -> None:
    html = page(ChipReport("Ascend310", tasks=[task(1)]))
    headers = re.findall(r"<th( class=\"[^\"]*\")?>([^<]*)</th>", html.split('<div class="tasks">')[1])
    names = [name for _, name in headers][:len(TASK_COLUMNS) + len(TASK_MORE)]
    assert names == [*TASK_COLUMNS, *TASK_MORE]
    folded = [name for css, name in headers if "more" in css]
    assert folded == [*TASK_MORE]
    assert "+25.0%" in html and "25.00%" in html  # (2.0 - 1.6) / 1.6, in the chart and the table


def test_a_broken_task_is_flagged_in_the_table_and_listed_below_it() -> None:
    html = page(ChipReport("Ascend310", tasks=[task(1, hit_num=2, update_num=1, reserved_num=0)]))
    assert '<td class="bad" title="task t1: repo_hit_num 2 != repo_update_num 1 + ' in html
    assert "<li>#1: task t1: repo_hit_num 2" in html


def test_a_chip_with_many_tasks_charts_the_latest_and_says_so() -> None:
    tasks = [task(n) for n in range(1, CHART_TASKS + 6)]
    html = page(ChipReport("Ascend310", tasks=tasks))
    assert labels(html)[0] == "6 · net v1" and len(labels(html)) == CHART_TASKS
    assert f"the latest {CHART_TASKS} of {CHART_TASKS + 5} tasks" in html


def test_models_are_set_across_chips_only_when_there_are_several() -> None:
    one = page(ChipReport("Ascend310", tasks=[task(1)]))
    assert 'id="models"' not in one
    two = page(ChipReport("Ascend310", tasks=[task(1)]),
               ChipReport("Ascend910B2", tasks=[task(2, soc="Ascend910B2", model_result_ms=1.0)]))
    across = two.split('<section id="models">')[1].split("</section>")[0]
    assert labels(across) == ["net v1"]
    assert "+25.0%: 2.000 → 1.600 ms (1 task)" in across and "+100.0%: 2.000 → 1.000 ms (1 task)" in across


def test_many_models_chart_those_tuned_last_and_the_table_lists_all() -> None:
    from tunebank.report.html import CHART_MODELS

    tasks = [task(n, model=f"m{n:02d}", soc=("Ascend310", "Ascend910B2")[n % 2])
             for n in range(1, CHART_MODELS + 4)]
    html = page(ChipReport("Ascend310", tasks=tasks[1::2]), ChipReport("Ascend910B2", tasks=tasks[::2]))
    across = html.split('<section id="models">')[1].split("</section>")[0]
    assert labels(across) == [f"m{n:02d} v1" for n in range(4, CHART_MODELS + 4)]
    assert f"the {CHART_MODELS} model versions tuned last, of {CHART_MODELS + 3}" in across
    assert across.count("<tr>") == 1 + CHART_MODELS + 3  # the table: a header and every version


def test_a_model_without_a_task_on_a_chip_says_so_in_that_chip_s_chart() -> None:
    from tunebank.report.html import NOT_TUNED

    html = page(ChipReport("Ascend310", tasks=[task(1), task(2, model="only310", model_hash="h2")]),
                ChipReport("Ascend910B2", tasks=[task(3, soc="Ascend910B2")]))
    across = html.split('<section id="models">')[1].split("</section>")[0]
    notes = re.findall(r'<text class="note"[^>]*>([^<]*)</text>', across)
    assert notes == ["+25.0%", "+25.0%", "+25.0%", NOT_TUNED]  # net, only310 on 310; on 910B2
    assert f'title="only310 v1 has no task on Ascend910B2">{NOT_TUNED}</td>' in across


def test_the_op_type_table_lists_every_type_and_scrolls_past_a_screenful() -> None:
    from tunebank.report.gather import KeyTimes
    from tunebank.report.html import OP_TYPES_IN_VIEW

    many = OP_TYPES_IN_VIEW + 5
    keys = [KeyTimes(str(n), f"Op{n:02d}", 2.0, 1.0) for n in range(many) for _ in range(n + 1)]
    html = page(ChipReport("Ascend310", tasks=[task(1)], keys=keys))
    table = html.split("<b>By operator type</b>")[1].split("</table>")[0]
    assert re.findall(r'<td class="cut" title="(Op\d\d)">', table) == \
        [f"Op{n:02d}" for n in reversed(range(many))]  # all of them, the most keys first
    assert table.startswith('</p><div class="wide scroll">')
    assert f"All {many} operator types are listed" in html
    few = page(ChipReport("Ascend310", tasks=[task(1)], keys=keys[:3]))
    assert '<div class="wide scroll">' not in few and "operator types are listed" not in few
