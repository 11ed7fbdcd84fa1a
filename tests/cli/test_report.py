"""`bank report`: the page's content, that it stands alone, and that a real browser renders it
with its plots and no console error."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.main import app
from fixtures.demo_bank import build
from tests.browser import Chromium, chromium_path

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
    out = folder / "report.html"
    result = runner.invoke(app, ["report", "--out", str(out), "--db", db])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"Report: {out} (")
    return out, db


def test_the_page_says_which_log_it_shows(report: tuple[Path, str]) -> None:
    from bank import Bank

    with Bank.open(report[1]) as bank:
        seq, link = bank.store.head()
    assert f"{seq:,} events, head {link[:16]}..." in report[0].read_text(encoding="utf-8")


def test_the_page_stands_alone(report: tuple[Path, str]) -> None:
    page = report[0].read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", page)  # nothing fetched
    assert "<link" not in page and "<script src" not in page
    assert "vgg &lt;b&gt;19&lt;/b&gt;" in page and "<b>19</b>" not in page


def test_each_chip_has_its_tasks_plots_and_trail(report: tuple[Path, str]) -> None:
    out, db = report
    page = out.read_text(encoding="utf-8")
    tasks = json.loads(runner.invoke(app, ["tasks", "--db", db, "--json"]).stdout)
    chips = sorted({t["soc_version"] for t in tasks})
    sections = re.findall(r'<section class="chip" id="([^"]+)">(.*?)</section>', page, re.S)
    assert [name for name, _ in sections] == chips
    for name, body in sections:
        mine = [t for t in tasks if t["soc_version"] == name]
        for task in mine:  # each task's row holds its id and its counts in AOE's order
            row = re.search(rf"<tr><td class=\"n\">\d+</td><td>{task['task_id']}</td>(.*?)</tr>", body)
            assert row is not None
            cells = re.findall(r"<td[^>]*>([^<]*)</td>", row.group(1))
            summary = task["repo_summary"]
            assert cells[7:13] == [str(summary[f]) for f in ("repo_add_num", "repo_hit_num",
                                                             "repo_update_num", "repo_reserved_num",
                                                             "repo_unsatisfied_num", "total_num")]
        assert body.count("<svg") >= 2 and "Latest policy changes" in body
    assert len(sections) == 2
    ascend310 = dict(sections)["Ascend310"]
    assert ascend310.count("<svg") == 4  # summaries, model times, measurements, keys
    assert "Conv+Relu" in ascend310  # the subgraph tune's changes are in the trail


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


def test_a_real_browser_renders_it_without_errors(report: tuple[Path, str], tmp_path: Path) -> None:
    with Chromium(browser()) as page:
        page.open(report[0])
        charts = page.evaluate("""JSON.stringify(Array.from(document.querySelectorAll('svg.chart'))
            .map(function (svg) { var box = svg.getBoundingClientRect();
              return [box.width, box.height, svg.querySelectorAll('.mark').length]; }))""")
        sizes = json.loads(charts)
        assert len(sizes) == report[0].read_text(encoding="utf-8").count("<svg") == 8
        assert all(w > 300 and h > 100 and marks > 0 for w, h, marks in sizes)
        first = "document.querySelector('table.sortable tbody tr td:nth-child(10)').textContent"
        column = "Array.from(document.querySelector('table.sortable').tBodies[0].rows)" \
                 ".map(function (r) { return parseFloat(r.cells[9].textContent); })"
        page.evaluate("document.querySelector('table.sortable th:nth-child(10)').click()")  # add, desc
        added = page.evaluate(column)
        assert added == sorted(added, reverse=True) and page.evaluate(first) == str(max(added))
        shot = page.screenshot()
        assert page.problems() == []
    assert shot.startswith(b"\x89PNG\r\n\x1a\n") and len(shot) > 20_000
    (tmp_path / "report.png").write_bytes(shot)


def test_the_browser_check_sees_a_broken_page(tmp_path: Path) -> None:
    broken = tmp_path / "broken.html"
    broken.write_text("<!DOCTYPE html><html><body><script>console.error('bad'); noSuchFunction();"
                      "</script></body></html>", encoding="utf-8")
    with Chromium(browser()) as page:
        page.open(broken)
        found = page.problems()
    assert len(found) == 2 and found[0].startswith("console.error") and "noSuchFunction" in found[1]


def test_a_big_bank_s_keys_are_thinned_and_the_page_says_so() -> None:
    from report.gather import BankReport, ChipReport, KeyTimes
    from report.html import MAX_POINTS, render

    keys = [KeyTimes(str(n), "Conv", 10.0 + n % 7, 5.0 + n % 5) for n in range(2 * MAX_POINTS + 1)]
    page = render(BankReport("b", 1, "0" * 64, (ChipReport("Ascend310", keys=keys),)), "now")
    assert page.count("<circle") == len(keys[::3]) <= MAX_POINTS
    assert f"Shown: {len(keys[::3]):,} of them, one in 3 in key order." in page
    assert f"{sum(1 for k in keys if k.best_us < k.before_us):,} keys are faster" in page


def test_the_changes_say_what_a_search_borrowed(report: tuple[Path, str]) -> None:
    """The Ascend910B2 tune of VGG-19 borrowed from the Ascend310 tune of the same keys (another
    chip: distance 4.0); the page's change list names the key and task it started from."""
    out, db = report
    page = out.read_text(encoding="utf-8")
    tasks = json.loads(runner.invoke(app, ["tasks", "--db", db, "--json"]).stdout)
    (donor,) = [t["task_id"] for t in tasks if t["tuning_name"] == "vgg <b>19</b>"]
    assert "borrowed from" in page
    assert re.search(rf"\d+ of {donor} \(4\.0\)", page)


def test_times_are_shown_to_the_second(report: tuple[Path, str]) -> None:
    import re

    page = report[0].read_text(encoding="utf-8")
    assert re.search(r"\d\d:\d\d:\d\d\.\d", page) is None  # no fractions of a second
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", page)
