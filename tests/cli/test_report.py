"""`bank report`: the page's content, that it stands alone, and that a real browser renders it
with its plots and no console error."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fixtures.demo_bank import build
from tests.browser import Chromium, chromium_path
from tunebank.bank.store import reads
from tunebank.cli.main import app

runner = CliRunner()
MODELS = Path(__file__).resolve().parents[2] / "fixtures" / "models"


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A bank with imported and tuned tasks on two chips (one of them a subgraph tune and a
    name that needs escaping), and its report."""
    folder = tmp_path_factory.mktemp("report")
    db = str(folder / "bank.db")
    build(db)
    for soc, args in (("Ascend310", ["--tuning-name", "vgg <b>19</b>"]),
                      ("Ascend310", ["--job-type", "subgraph"]), ("Ascend910B2", [])):
        tuned = runner.invoke(app, ["tune", str(MODELS / "vgg19.onnx"), "--soc-version", soc,
                                    "--db", db, "--budget", "16", "--progress-bar", "off", *args],
                              env={"ASCEND_WORK_PATH": str(folder)})
        assert tuned.exit_code == 0, tuned.output
    out = folder / "tunebank.report.html"
    result = runner.invoke(app, ["report", "--out", str(out), "--db", db])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"Report: {out} (")
    return out, db


def test_the_page_says_which_log_it_shows(report: tuple[Path, str]) -> None:
    from tunebank.bank import Bank

    with Bank.open(report[1]) as bank:
        seq, link = reads.head(bank.store)
    assert f"{seq:,} events, head {link[:16]}..." in report[0].read_text(encoding="utf-8")


def test_the_page_stands_alone(report: tuple[Path, str]) -> None:
    page = report[0].read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", page)  # nothing fetched
    assert "<link" not in page and "<script src" not in page
    assert "vgg &lt;b&gt;19&lt;/b&gt;" in page and "<b>19</b>" not in page


def _task_rows(body: str) -> list[dict[str, str]]:
    """The tasks table of a chip's section, as one {column: text} per row."""
    table = re.search(r'<div class="tasks">.*?<thead>(.*?)</thead><tbody>(.*?)</tbody>', body, re.S)
    assert table is not None
    headers = re.findall(r"<th[^>]*>([^<]*)</th>", table.group(1))
    return [dict(zip(headers, re.findall(r"<td[^>]*>([^<]*)</td>", row), strict=True))
            for row in re.findall(r"<tr>(.*?)</tr>", table.group(2))]


def _sections(page: str) -> dict[str, str]:
    return dict(re.findall(r'<section class="chip" id="([^"]+)">(.*?)</section>', page, re.S))


def test_each_chip_has_its_tasks_plots_and_trail(report: tuple[Path, str]) -> None:
    out, db = report
    page = out.read_text(encoding="utf-8")
    tasks = json.loads(runner.invoke(app, ["tasks", "--db", db, "--json"]).stdout)
    sections = _sections(page)
    assert sorted(sections) == sorted({t["soc_version"] for t in tasks}) == ["Ascend310", "Ascend910B2"]
    for name, body in sections.items():
        rows = {row["task"]: row for row in _task_rows(body)}
        mine = [t for t in tasks if t["soc_version"] == name]
        assert sorted(rows) == sorted(t["task_id"] for t in mine)
        for task in mine:  # each task's row holds its counts under AOE's names
            row, summary = rows[task["task_id"]], task["repo_summary"]
            assert [row[c] for c in ("add", "hit", "update", "reserved", "unsat", "total")] == [
                str(summary[f]) for f in ("repo_add_num", "repo_hit_num", "repo_update_num",
                                          "repo_reserved_num", "repo_unsatisfied_num", "total_num")]
            assert row["invariants"] == "ok"
        assert body.count("<svg") == 2 and "Latest policy changes" in body  # tasks chart, keys scatter
    assert "Conv+Relu" in sections["Ascend310"]  # the subgraph tune's changes are in the trail


def test_bars_name_the_model_and_its_version(report: tuple[Path, str]) -> None:
    """Each chart row says which task it is in words: its number in the table, the model and its
    version, and `subgraph` for a subgraph tune; the tooltip adds the tuning name and task id."""
    out, db = report
    sections = _sections(out.read_text(encoding="utf-8"))
    tasks = json.loads(runner.invoke(app, ["tasks", "--db", db, "--json"]).stdout)
    for soc, body in sections.items():
        mine = sorted((t for t in tasks if t["soc_version"] == soc), key=lambda t: t["started_at"])
        labels = re.findall(r'<text class="label"[^>]*>([^<]*)<title>([^<]*)</title>', body)
        assert [shown for shown, _ in labels] == [
            f"{n} · {t['model_name']} v1" + (" · subgraph" if t["job_type"] == "sgat" else "")
            for n, t in enumerate(mine, 1)]
        assert all(t["task_id"] in tip for t, (_, tip) in zip(mine, labels, strict=True))
    assert "3 · vgg19 v1" in sections["Ascend310"] and "1 · vgg19 v1" in sections["Ascend910B2"]


def test_one_model_is_set_beside_itself_across_chips(report: tuple[Path, str]) -> None:
    page = report[0].read_text(encoding="utf-8")
    across = re.search(r'<section id="models">(.*?)</section>', page, re.S)
    assert across is not None and page.index('id="models"') < page.index('class="chip"')
    rows = {cells[0]: cells for cells in (re.findall(r"<td[^>]*>([^<]*)</td>", row)
                                          for row in re.findall(r"<tr>(.*?)</tr>", across.group(1))) if cells}
    assert sorted(rows) == ["demo_net_v1", "demo_net_v2", "vgg19"]
    vgg = rows["vgg19"]  # model, version, hash, Ascend310, Ascend910B2
    assert vgg[1] == "1" and "(2 tasks)" in vgg[3] and "(1 task)" in vgg[4]
    assert re.match(r"[+-]\d+\.\d%: [\d.]+ → [\d.]+ ms", vgg[4])
    assert rows["demo_net_v1"][4] == "not tuned here"  # never tuned on Ascend910B2


def test_a_bank_without_tasks_says_so(tmp_path: Path) -> None:
    db = str(tmp_path / "empty.db")
    assert runner.invoke(app, ["init", "--db", db]).exit_code == 0
    out = tmp_path / "empty.html"
    assert runner.invoke(app, ["report", "--out", str(out), "--db", db]).exit_code == 0
    assert "No task to show" in out.read_text(encoding="utf-8")


def test_a_missing_bank_writes_no_report(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    result = runner.invoke(app, ["report", "--out", str(out), "--db", str(tmp_path / "none.db")])
    assert result.exit_code == 1 and "no bank at" in result.stderr
    assert not out.exists()


def browser() -> str:
    path = chromium_path()
    if path is None:
        why = "no Chromium (Debian's chromium package; .ci/chromium installs it)"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI=true: {why}")
        pytest.skip(why)
    return path


LAYOUT = """JSON.stringify({
  page: document.documentElement.scrollWidth, window: window.innerWidth,
  column: document.querySelector('section.chip').clientWidth,
  tables: Array.from(document.querySelectorAll('.tasks div.wide')).map(function (d) {
    return [d.scrollWidth, d.clientWidth]; }),
  headers: Array.from(document.querySelectorAll('.tasks th')).map(function (th) {
    var box = th.getBoundingClientRect(); return [th.textContent, box.left, box.right, box.width]; }),
  charts: Array.from(document.querySelectorAll('svg.chart')).map(function (svg) {
    var box = svg.getBoundingClientRect();
    return [svg.getAttribute('class'), box.width, box.height, svg.querySelectorAll('g.row').length,
            svg.querySelectorAll('.mark').length]; }),
  bars: Array.from(document.querySelectorAll('svg.rows rect.mark')).map(function (bar) {
    var label = bar.closest('g.row') && bar.closest('g.row').querySelector('text.label');
    var b = bar.getBoundingClientRect(), l = label ? label.getBoundingClientRect() : null;
    var text = label ? Array.from(label.childNodes).filter(function (n) { return n.nodeType === 3; })
      .map(function (n) { return n.textContent; }).join('') : '';
    return [text, b.top, b.bottom, b.left, l ? l.top : 0, l ? l.bottom : 0, l ? l.left : -1,
            l ? l.right : 0, bar.closest('svg').getBoundingClientRect().left]; })
})"""


def test_a_real_browser_renders_it_without_errors(report: tuple[Path, str], tmp_path: Path) -> None:
    """At 1400 px: no table runs past its column, repo_summary, model times and the speed-up are
    in view (the rest folded until asked for), every bar has its row's label beside it, the
    charts use the page's width, and a chip with one task gets a short chart, not an empty frame."""
    from tunebank.report.html import TASK_COLUMNS, TASK_MORE

    with Chromium(browser(), width=1400) as page:
        page.open(report[0])
        layout = json.loads(page.evaluate(LAYOUT))
        assert layout["page"] <= layout["window"] == 1400
        assert layout["tables"] and all(scroll <= width for scroll, width in layout["tables"])
        shown = [(name, right) for name, _, right, width in layout["headers"] if width > 0]
        assert [name for name, _ in shown] == [*TASK_COLUMNS] * 2  # two chips, the rest folded
        assert all(right <= layout["window"] for _, right in shown)
        page.evaluate("document.querySelector('input.unfold').click()")
        unfolded = json.loads(page.evaluate(LAYOUT))["headers"]
        assert [name for name, _, _, width in unfolded if width > 0][:len(TASK_COLUMNS) + len(TASK_MORE)] == [
            *TASK_COLUMNS, *TASK_MORE]

        charts = layout["charts"]
        assert len(charts) == report[0].read_text(encoding="utf-8").count("<svg") == 5
        assert all(w > 300 and h > 60 and marks > 0 for _, w, h, _, marks in charts)
        rows = [(w, h, n) for kind, w, h, n, _ in charts if kind == "chart rows"]
        assert len(rows) == 3 and all(w >= 0.97 * layout["column"] for w, _, _ in rows)
        assert min(h for _, h, n in rows if n == 1) < 110  # Ascend910B2's one task: a strip
        assert layout["bars"] and all(  # beside its bar, whole, inside the chart
            label and label_top < bottom and top < label_bottom and chart <= label_left < label_right <= left
            for label, top, bottom, left, label_top, label_bottom, label_left, label_right, chart
            in layout["bars"])

        trail = "document.querySelector('details table').checkVisibility()"
        assert page.evaluate(trail) is False  # the audit trail is folded until asked for
        page.evaluate("document.querySelector('details summary').click()")
        assert page.evaluate(trail) is True

        add = TASK_COLUMNS.index("add") + 1
        first = f"document.querySelector('table.sortable tbody tr td:nth-child({add})').textContent"
        column = "Array.from(document.querySelector('.tasks table.sortable').tBodies[0].rows)" \
                 f".map(function (r) {{ return parseFloat(r.cells[{add - 1}].textContent); }})"
        page.evaluate(f"document.querySelector('.tasks table.sortable th:nth-child({add})').click()")
        added = page.evaluate(column)
        assert added == sorted(added, reverse=True)
        assert page.evaluate(first.replace("table.sortable", ".tasks table.sortable")) == str(max(added))
        shot = page.screenshot()
        assert page.problems() == []
    assert shot.startswith(b"\x89PNG\r\n\x1a\n") and len(shot) > 20_000
    (tmp_path / "report.png").write_bytes(shot)


def test_the_tasks_tables_fit_a_1280_px_window_too(report: tuple[Path, str]) -> None:
    """A laptop's window: header cells wrap and times leave their zone to the header, so the
    key columns still fit without scrolling."""
    with Chromium(browser(), width=1280) as page:
        page.open(report[0])
        layout = json.loads(page.evaluate(LAYOUT))
        assert layout["page"] <= layout["window"] == 1280
        assert layout["tables"] and all(scroll <= width for scroll, width in layout["tables"])
        assert page.problems() == []


def test_the_browser_check_sees_a_broken_page(tmp_path: Path) -> None:
    broken = tmp_path / "broken.html"
    broken.write_text("<!DOCTYPE html><html><body><script>console.error('bad'); noSuchFunction();"
                      "</script></body></html>", encoding="utf-8")
    with Chromium(browser()) as page:
        page.open(broken)
        found = page.problems()
    assert len(found) == 2 and found[0].startswith("console.error") and "noSuchFunction" in found[1]


def test_a_big_bank_s_keys_are_thinned_and_the_page_says_so() -> None:
    from tunebank.report.gather import BankReport, ChipReport, KeyTimes
    from tunebank.report.html import MAX_POINTS, render

    keys = [KeyTimes(str(n), "Conv", 10.0 + n % 7, 5.0 + n % 5) for n in range(2 * MAX_POINTS + 1)]
    page = render(BankReport("b", 1, "0" * 64, (ChipReport("Ascend310", keys=keys),)), "now")
    assert page.count("<circle") == len(keys[::3]) <= MAX_POINTS
    assert f"Shown: {len(keys[::3]):,} of them, one in 3 in key order." in page
    assert f"{sum(1 for k in keys if k.best_us < k.before_us):,} keys are faster" in page


def test_the_changes_say_what_a_search_borrowed(tmp_path: Path) -> None:
    """VGG-19's keys borrow from SqueezeNet's, tuned before on the same chip; the page's
    change list names the key and task each search started from, and its distance."""
    db = str(tmp_path / "bank.db")
    for model in ("squeezenet", "vgg19"):
        tuned = runner.invoke(app, ["tune", str(MODELS / f"{model}.onnx"), "--soc-version",
                                    "Ascend310", "--db", db, "--budget", "16", "--progress-bar", "off"],
                              env={"ASCEND_WORK_PATH": str(tmp_path)})
        assert tuned.exit_code == 0, tuned.output
    out = tmp_path / "report.html"
    assert runner.invoke(app, ["report", "--out", str(out), "--db", db]).exit_code == 0
    page = out.read_text(encoding="utf-8")
    tasks = json.loads(runner.invoke(app, ["tasks", "--db", db, "--json"]).stdout)
    (donor,) = [t["task_id"] for t in tasks if t["model_name"] == "squeezenet"]
    assert "borrowed from" in page
    assert re.search(rf"\d+ of {donor} \(\d+(\.\d+)?\)", page)


def test_times_are_shown_to_the_second(report: tuple[Path, str]) -> None:
    import re

    page = report[0].read_text(encoding="utf-8")
    assert re.search(r"\d\d:\d\d:\d\d\.\d", page) is None  # no fractions of a second
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", page)
