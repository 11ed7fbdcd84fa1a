"""The `bank` command through typer's CliRunner: tables, --json, errors and exit codes."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from freezegun import freeze_time
from typer.testing import CliRunner

from fixtures.demo_bank import build
from tunebank.bank import Bank
from tunebank.cli import main
from tunebank.cli.main import app, make_app

runner = CliRunner()
COMMANDS = {info.name or info.callback.__name__: info for info in app.registered_commands
            if info.callback is not None}


@pytest.fixture
def demo(tmp_path: Path) -> tuple[str, list[str]]:
    db = str(tmp_path / "demo.db")
    with freeze_time("2026-11-30 08:15:00"):
        tasks = build(db)
    return db, tasks


def ok(*args: str) -> str:
    """Run a command that must succeed; return what it printed."""
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_every_command_is_registered_by_name() -> None:
    assert set(COMMANDS) == set(main.COMMANDS)


@pytest.mark.parametrize("args", [["--help"], ["--db"], ["--no-such-option"]])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_the_one_command_app_answers_as_the_whole_app(command: str, args: list[str]) -> None:
    """`bank NAME ...` is run by an app of that command alone (cli.main.run): the same help, the
    same one-line usage errors, the same exit codes."""
    alone = runner.invoke(make_app([command]), [command, *args])
    whole = runner.invoke(app, [command, *args])
    assert (alone.exit_code, alone.stdout, alone.stderr) == (whole.exit_code, whole.stdout, whole.stderr)
    assert alone.exit_code == (0 if args == ["--help"] else 2)


def test_run_gives_a_command_its_own_app(monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    built: list[list[str]] = []
    real = main.make_app
    monkeypatch.setattr(main, "make_app", lambda names: built.append(list(names)) or real(names))
    monkeypatch.setattr("sys.argv", ["bank", "socs", "--json"])
    with pytest.raises(SystemExit) as exited:
        main.run()
    assert exited.value.code == 0 and built == [["socs"]]
    assert "Ascend310P3" in capsys.readouterr().out
    monkeypatch.setattr("sys.argv", ["bank", "nosuch"])
    with pytest.raises(SystemExit) as exited:
        main.run()
    assert exited.value.code == 2 and built == [["socs"]]
    assert "No such command 'nosuch'" in capsys.readouterr().err


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_is_documented(command: str) -> None:
    out = ok(command, "--help")
    assert "Usage:" in out
    callback = COMMANDS[command].callback
    assert callback is not None and callback.__doc__


def test_init_creates_and_reports(tmp_path: Path) -> None:
    db = str(tmp_path / "new" / "bank.db")
    result = runner.invoke(app, ["init", "--db", db])
    assert result.exit_code == 1 and "does not exist" in result.stderr
    assert not (tmp_path / "new").exists()
    (tmp_path / "new").mkdir()
    out = ok("init", "--db", db)
    assert "0 events" in out
    assert Path(db).exists()


def test_tasks_table_and_json(demo: tuple[str, list[str]]) -> None:
    db, (first, second) = demo
    out = ok("tasks", "--db", db)
    assert first in out and "2026-11-30 08:15:00" in out and "successful" in out
    out = ok("tasks", "--db", db, "--json")
    rows = json.loads(out)
    assert [r["task_id"] for r in rows] == [first, second]
    assert rows[1]["repo_summary"]["repo_update_num"] == 1


def test_summary_json_has_aoe_fields(demo: tuple[str, list[str]]) -> None:
    db, (_, second) = demo
    out = ok("summary", second[:6], "--db", db, "--json")
    assert json.loads(out) == {"repo_add_num": 1, "repo_hit_num": 2, "repo_reserved_num": 1,
                               "repo_unsatisfied_num": 0, "repo_update_num": 1, "total_num": 3}


def test_query_filters_and_time_travel(demo: tuple[str, list[str]]) -> None:
    db, _ = demo
    out = ok("query", "--db", db, "--op-type", "Conv", "--json")
    assert [p["best_us"] for p in json.loads(out)] == [91.5]
    out = ok("query", "--db", db, "--op-type", "Conv", "--at-seq", "6", "--json")
    assert [p["best_us"] for p in json.loads(out)] == [99.0]
    out = ok("query", "--db", db, "--as-of", "2026-11-29", "--json")
    assert json.loads(out) == []
    out = ok("query", "--db", db, "--as-of", "2026-11-30T09:00", "--json")
    assert len(json.loads(out)) == 4


def test_history_names_tasks_and_models(demo: tuple[str, list[str]]) -> None:
    db, _ = demo
    out = ok("history", "--db", db, "--op-name", "Conv_0")
    lines = out.splitlines()[2:]
    assert [line.split()[3] for line in lines] == ["add", "hit", "update"]
    assert "demo_net_v1" in lines[0] and "demo_net_v2" in lines[2]


def test_events_since_streams_json_lines(demo: tuple[str, list[str]]) -> None:
    db, _ = demo
    out = ok("events", "--db", db, "--since", "10", "--json")
    events = [json.loads(line) for line in out.splitlines()]
    assert [e["seq"] for e in events] == [11, 12, 13]
    assert events[-1]["kind"] == "task_finished"


def test_verify_and_rebuild(demo: tuple[str, list[str]]) -> None:
    db, _ = demo
    out = ok("verify", "--db", db)
    assert out.startswith("OK: 13 events")
    out = ok("rebuild", "--db", db, "--json")
    assert json.loads(out) == {"events": 13, "tasks": 2, "policies": 4, "reindexed": False,
                               "log_problems_adopted": [], "projections_replaced": []}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["tasks", "--db", "{tmp}/absent.db"], "no bank at"),
        (["summary", "zzz", "--db", "{db}"], "task 'zzz': no such task"),
        (["query", "--db", "{db}", "--as-of", "yesterday"], "--as-of: 'yesterday' is not"),
        (["history", "--db", "{db}"], "give --repo-key, --op-name or --op-type"),
        (["tasks", "--db", "mysql://h/x"], "scheme 'mysql' is not supported"),
    ],
)
def test_user_errors_are_one_line(demo: tuple[str, list[str]], tmp_path: Path,
                                  args: list[str], message: str) -> None:
    db, _ = demo
    result = runner.invoke(app, [a.format(tmp=tmp_path, db=db) for a in args])
    assert result.exit_code != 0
    assert result.exception is None or isinstance(result.exception, SystemExit)
    errors = [line for line in result.output.splitlines() if line.startswith("bank: error:")]
    assert len(errors) == 1 and message in errors[0]
    assert "Traceback" not in result.output


@pytest.mark.parametrize(("args", "message"), [
    (["tune", ".", "--soc-version", "Ascend310"], "Invalid value for 'model...': file '.' is a directory."),
    (["tune"], "Missing argument 'model'."),
    (["tune", "m.onnx", "--soc-version", "Ascend310", "--budget", "0"], "Invalid value for '--budget'"),
    (["tune", "m.onnx", "--soc-version", "Ascend310", "--tuning-config", "."],
     "Invalid value for '--tuning-config': file '.' is a directory."),
    (["query", "--limit-to-nothing"], "No such option: --limit-to-nothing"),
    (["nosuch"], "No such command 'nosuch'."),
])
def test_usage_errors_are_one_line(args: list[str], message: str, tmp_path: Path) -> None:
    (tmp_path / "m.onnx").write_bytes(b"")
    result = runner.invoke(app, [a.replace("m.onnx", str(tmp_path / "m.onnx")) for a in args])
    assert result.exit_code == 2
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    # Typer's own messages changed case between versions ("File '.' is", "file '.' is")
    assert line.lower().startswith(f"bank: error: {message}".lower()) and line.endswith("--help`)")


def test_version_and_short_help() -> None:
    from tunebank import tool_version

    version = runner.invoke(app, ["--version"])
    assert version.exit_code == 0 and version.stdout == f"bank (tunebank) {tool_version()}\n"
    for args in (["-h"], ["tune", "-h"], ["query", "-h"]):
        shown = runner.invoke(app, args)
        assert shown.exit_code == 0 and shown.stdout.startswith("Usage: bank"), args


def test_shell_completion_is_shown_and_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    shown = runner.invoke(app, ["--show-completion", "bash"])
    assert shown.exit_code == 0 and "_bank_completion" in shown.stdout
    installed = runner.invoke(app, ["--install-completion", "bash"])
    assert installed.exit_code == 0, installed.output
    assert "bank" in (tmp_path / ".bashrc").read_text(encoding="utf-8")


def completed(line: str, env: dict[str, str] | None = None) -> list[str]:
    """What bash's Tab offers at the end of ``line`` (a trailing space: a new word)."""
    words = line.split()
    result = runner.invoke(app, [], prog_name="bank", env={
        "_BANK_COMPLETE": "complete_bash", "COMP_WORDS": line,
        "COMP_CWORD": str(len(words) if line.endswith(" ") else len(words) - 1), **(env or {})})
    assert result.exit_code == 0, result.output
    return result.stdout.split()


def test_chip_names_complete_from_the_cost_model_and_the_bank(tmp_path: Path) -> None:
    from tests.cli.test_diff import bank_with
    from tunebank.tuner.measure.socs import SOCS

    known = sorted(SOCS)
    assert completed("bank tune --soc-version ") == known
    assert completed("bank plan m.onnx --soc-version Ascend91") == \
        [name for name in known if name.startswith("Ascend91")]
    db = bank_with(tmp_path / "b.db", "imported", [("1", 5.0, None)], soc="Ascend950PR_9589")
    before = sorted(p.name for p in tmp_path.iterdir())
    for command in ("query", "tasks", "history", "report", "diff", "import x", "export"):
        offered = completed(f"bank {command} --db {db} --soc-version Ascend9")
        assert offered == sorted(["Ascend950PR_9589", *(n for n in known if n.startswith("Ascend9"))])
    assert "Ascend950PR_9589" in completed("bank query --soc-version A", env={"TUNEBANK_DB": db})
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # read, never written beside
    (tmp_path / "not-a-bank.db").write_text("hello")
    for bad in (str(tmp_path / "not-a-bank.db"), str(tmp_path / "none.db"), "postgresql://x@h:1/d"):
        assert completed(f"bank query --db {bad} --soc-version ") == known
    hostile = tmp_path / "hostile.db"  # a bank edited by hand: its chip names are data
    hostile.write_bytes(Path(db).read_bytes())
    with sqlite3.connect(hostile) as conn:
        conn.execute("UPDATE task SET soc_version = ?", ("Ascend\x1b[31m; rm -rf ~",))
        conn.execute("UPDATE policy SET soc_version = ?", ("../Ascend910",))
    assert completed(f"bank query --db {hostile} --soc-version ") == known


@pytest.mark.parametrize("command", ["tune", "plan", "diff", "export"])
def test_options_with_a_fixed_set_of_values_show_them(command: str) -> None:
    shown = runner.invoke(app, [command, "--help"], terminal_width=200)
    assert shown.exit_code == 0
    for option in ("--job-type", "--result-format", "--mode", "--format"):
        assert f"{option} <str>" not in shown.stdout, (command, option)
    if command != "export":
        assert "--job-type <operator|subgraph|2|1>" in shown.stdout
    if command == "tune":  # several models make a campaign; the usage line says so
        assert shown.stdout.startswith("Usage: bank tune [OPTIONS] [MODEL...]")


@pytest.mark.parametrize("url", ["postgres://nobody:secret@127.0.0.1:1/x",
                                 "postgresql://nobody@127.0.0.1:1/x"])
def test_a_server_bank_is_named_as_the_user_gave_it(url: str) -> None:
    result = runner.invoke(app, ["tasks", "--db", url])
    assert result.exit_code == 1
    assert url.replace(":secret@", ":***@") in result.stderr
    assert "psycopg" not in result.stderr and "secret" not in result.stderr


@pytest.fixture(scope="module")
def tuned_bank(tmp_path_factory: pytest.TempPathFactory) -> str:
    folder = tmp_path_factory.mktemp("tuned")
    db = str(folder / "b.db")
    model = str(Path(__file__).resolve().parents[2] / "fixtures" / "models" / "squeezenet.onnx")
    result = runner.invoke(app, ["tune", model, "--soc-version", "Ascend310", "--db", db,
                                 "--budget", "8", "--progress-bar", "off"],
                           env={"ASCEND_WORK_PATH": str(folder)})  # its result files there
    assert result.exit_code == 0, result.output
    return db


def test_query_sorts_limits_and_writes_csv(tuned_bank: str) -> None:
    import csv
    import io

    table = runner.invoke(app, ["query", "--db", tuned_bank, "--sort", "-best_us", "--limit", "3"])
    assert table.exit_code == 0, table.output
    times = [float(line.split()[3]) for line in table.stdout.splitlines()[2:]]
    assert len(times) == 3 and times == sorted(times, reverse=True)
    everything = json.loads(runner.invoke(app, ["query", "--db", tuned_bank, "--json"]).stdout)
    assert times[0] == round(max(p["best_us"] for p in everything), 3)
    written = runner.invoke(app, ["query", "--db", tuned_bank, "--csv", "--sort", "seq"])
    rows = list(csv.reader(io.StringIO(written.stdout)))
    assert rows[0][:4] == ["soc_version", "repo_key", "op_type", "best_us"]
    assert len(rows) - 1 == len(everything)
    assert all(len(row[3].split(".")[1]) == 3 for row in rows[1:])  # one format for the column
    assert [int(row[7]) for row in rows[1:]] == sorted(int(row[7]) for row in rows[1:])


def test_tasks_take_limit_sort_and_csv(tmp_path: Path) -> None:
    import csv
    import io

    from fixtures.demo_bank import build

    db = str(tmp_path / "demo.db")
    ids = build(db)
    listed = json.loads(runner.invoke(app, ["tasks", "--db", db, "--json"]).stdout)
    assert [t["task_id"] for t in listed] == ids
    rows = list(csv.reader(io.StringIO(runner.invoke(app, ["tasks", "--db", db, "--csv"]).stdout)))
    assert rows[0][0] == "task" and [row[0] for row in rows[1:]] == ids
    largest = max(listed, key=lambda t: t["repo_summary"]["total_num"])
    top = runner.invoke(app, ["tasks", "--db", db, "--sort", "-total", "--limit", "1"])
    assert top.exit_code == 0 and [line.split()[0] for line in top.stdout.splitlines()[2:]] == [
        largest["task_id"]]
    wrong = runner.invoke(app, ["tasks", "--db", db, "--sort", "size"])
    assert wrong.exit_code == 2 and "--sort: no column 'size'" in wrong.stderr


def test_history_and_events_take_limit_sort_and_csv(tuned_bank: str) -> None:
    history = runner.invoke(app, ["history", "--db", tuned_bank, "--op-type", "Conv", "--csv",
                                  "--limit", "2"])
    assert history.exit_code == 0 and len(history.stdout.splitlines()) == 3
    newest = runner.invoke(app, ["events", "--db", tuned_bank, "--sort", "-seq", "--limit", "1"])
    assert "task_finished" in newest.stdout.splitlines()[2]
    streamed = runner.invoke(app, ["events", "--db", tuned_bank, "--json", "--limit", "2"])
    assert [json.loads(line)["seq"] for line in streamed.stdout.splitlines()] == [1, 2]
    wrong = runner.invoke(app, ["events", "--db", tuned_bank, "--sort", "when"])
    assert wrong.exit_code == 2 and wrong.stderr.startswith("bank: error: --sort: no column 'when'")


def test_a_column_holding_a_fraction_shows_every_number_with_three_decimals() -> None:
    from tunebank.cli.common import _formatted

    rows = [[1, 8.0, 1200.0, None], [2, 7.8125, 47.0, "x"]]
    assert _formatted(rows, blank="-", escape=str) == [["1", "8.000", "1200", "-"], ["2", "7.812", "47", "x"]]


@pytest.mark.parametrize(("command", "key"), [
    (["query"], "seq"), (["tasks"], None), (["history", "--op-type", "Conv"], "seq"),
    (["events"], "seq")])
def test_json_lists_the_rows_the_table_shows(tuned_bank: str, command: list[str],
                                             key: str | None) -> None:
    """Issue 31: --json ignored --limit and --sort (query --limit 1 --json printed 129 rows)."""
    def records(*extra: str) -> list[dict[str, object]]:
        done = runner.invoke(app, [*command, "--db", tuned_bank, "--json", *extra])
        assert done.exit_code == 0, done.output
        text = done.stdout.strip()
        return [json.loads(line) for line in text.splitlines()] if command == ["events"] \
            else json.loads(text)

    every = records()
    assert len(records("--limit", "1")) == 1 <= len(every)
    if key is not None:  # the table's column "seq" is the records' "seq"
        assert len(every) > 2
        newest = records("--sort", "-seq", "--limit", "2")
        assert [r[key] for r in newest] == sorted((r[key] for r in every), reverse=True)[:2]


@pytest.mark.parametrize("command", [["query"], ["tasks"], ["history", "--op-type", "Conv"],
                                     ["events"]])
def test_json_and_csv_together_are_refused(tuned_bank: str, command: list[str]) -> None:
    done = runner.invoke(app, [*command, "--db", tuned_bank, "--json", "--csv"])
    assert done.exit_code == 2 and done.stdout == ""
    assert done.stderr.strip() == ("bank: error: --json and --csv: give one (JSON for scripts, "
                                   "CSV for a spreadsheet)")


def test_a_closed_pipe_exits_141_quietly(tmp_path: Path) -> None:
    """Issue 31: `bank events --json | head -1` exited 1 (click's own handling of EPIPE). The
    JSON lines are written one by one, so a reader gone after the first meets the next write."""
    import subprocess
    import sys

    from bench.workload import events

    db = str(tmp_path / "big.db")
    with Bank.open(db, create=True) as bank:  # a log far longer than a pipe's 64 KiB
        bank.append_stream(lambda: (event.row() for event in events(3000)), checked=True)
    reader = subprocess.Popen(
        [sys.executable, "-c", "from tunebank.cli.main import run; run()", "events", "--db", db, "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    assert reader.stdout is not None and reader.stdout.readline()
    reader.stdout.close()  # as `head -1` does once it has its line
    _, err = reader.communicate(timeout=60)
    assert reader.returncode == 141 and err == b""
