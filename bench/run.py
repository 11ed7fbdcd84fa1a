"""Every speed figure of docs/performance.md, measured side by side with its baseline.

Usage: python bench/run.py [--sizes 10000,100000,1000000] [--merge 1000000] [--out bench/results.json]
                        [--only scale,startup,merge,postgres,campaign,result_file,search,end_to_end]
                        [--pg-size 100000]

For each bank size it generates the workload (bench/workload.py) as an events file, then times:
plain sqlite3 inserting the same rows (the baseline) against `bank import` of the file and
`Bank.record` of the same outcomes; the tuner's lookup of 10,000 keys against a plain indexed
query; verify, rebuild and export of the whole log (events/s and peak memory); `bank report`'s
seconds; one task's summary through the API. Then `bank summary`'s start-up against
`python -c pass`, a merge of two banks of half the largest size against ATTACH + INSERT ...
SELECT, import and verify on PostgreSQL beside plain COPY (bench/postgres.py), campaigns on
Dask workers (bench/campaign.py), the result file's bytes during a tune
(bench/result_file.py), the search-quality suite (bench/search_quality.py) and whole models
tuned end to end (bench/end_to_end.py). Results go to bench/results.json and the tables in
docs/performance.md; ``--only`` measures the sections named and keeps the others' last
figures (each section records the command and date that measured it). Not a test: nothing
here asserts.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import campaign, end_to_end, postgres, result_file, search_quality  # noqa: E402
from bench.scale import (  # noqa: E402
    child,
    event_rows,
    plain_insert,
    plain_insert_by_task,
    plain_merge,
    wall,
    write_events_file,
)

LOOKUP_KEYS = 10_000
DOC = ROOT / "docs" / "performance.md"
BEGIN, END = "<!-- bench/run.py: begin -->", "<!-- bench/run.py: end -->"


def say(text: str) -> None:
    print(text, flush=True)


def bank_at(size: int, folder: Path) -> dict[str, Any]:
    """Every per-size figure."""
    source = folder / f"events-{size}.jsonl"
    count = write_events_file(source, size)
    rows = event_rows(source)
    plain_s = plain_insert(folder / f"plain-{size}.db", rows)
    plain_by_task_s = plain_insert_by_task(folder / f"plain-by-task-{size}.db", rows)
    del rows
    out: dict[str, Any] = {"events": count, "file_mb": round(source.stat().st_size / 2**20, 1),
                           "plain_insert_per_s": round(count / plain_s),
                           "plain_by_task_per_s": round(count / plain_by_task_s)}
    db = folder / f"imported-{size}.db"
    child("init", str(db))  # the bank made before the clock starts, as the baseline's table is
    imported = child("import", str(source), str(db))
    out["import_per_s"] = round(count / imported.seconds)
    out["import_peak_mb"] = round(imported.peak_mb)
    recorded = child("record", str(folder / f"recorded-{size}.db"), str(size))
    out["record_per_s"] = round(recorded.result["events"] / recorded.result["record_seconds"])
    for job in ("verify", "rebuild"):
        measured = child(job, str(db))
        out[f"{job}_per_s"] = round(count / measured.seconds)
        out[f"{job}_peak_mb"] = round(measured.peak_mb)
    exported = child("export", str(db), str(folder / f"export-{size}.jsonl"))
    out["export_per_s"] = round(count / exported.seconds)
    out["export_peak_mb"] = round(exported.peak_mb)
    reported = child("report", str(db), str(folder / f"report-{size}.html"))
    out["report_s"] = round(reported.seconds, 2)
    out["report_peak_mb"] = round(reported.peak_mb)
    looked = child("lookup", str(db), str(LOOKUP_KEYS))
    out["lookup_ms"] = round(looked.result["lookup_seconds"] * 1000, 1)
    keys_file = folder / "lookup-keys.json"
    keys_file.write_text(json.dumps(looked.result["known"]), encoding="utf-8")
    plain = child("plain-lookup", str(db), str(keys_file))  # a fresh process, as the lookup's
    out["plain_lookup_ms"] = round(plain.result["lookup_seconds"] * 1000, 1)
    summary = child("summary", str(db))
    out["summary_ms"] = round(summary.result["summary_seconds"] * 1000, 1)
    out["summary_task"] = summary.result["task"]
    out["_db"] = str(db)
    for name in (f"plain-{size}.db", f"plain-by-task-{size}.db", f"recorded-{size}.db",
                 f"export-{size}.jsonl", f"report-{size}.html", "lookup-keys.json"):
        (folder / name).unlink(missing_ok=True)
    source.unlink()
    return out


def merge_at(size: int, folder: Path) -> dict[str, Any]:
    """Two banks of ``size // 2`` events (different workloads) merged, against ATTACH + INSERT."""
    half = size // 2
    banks = []
    for seed in (1, 2):
        source = folder / f"merge-{seed}.jsonl"
        write_events_file(source, half, seed)
        db = folder / f"merge-{seed}.db"
        child("import", str(source), str(db))
        source.unlink()
        banks.append(db)
    target, theirs = banks
    copy = folder / "merge-target.db"
    shutil.copyfile(target, copy)
    merged = child("merge", str(copy), str(theirs))
    shutil.copyfile(target, copy)
    plain_s = plain_merge(copy, theirs)
    return {"events_each": half, "merge_s": round(merged.seconds, 2), "plain_merge_s": round(plain_s, 2),
            "merge_peak_mb": round(merged.peak_mb)}


def startup(db: str, task: str, events: int, repeat: int = 11) -> dict[str, Any]:
    """`bank summary`'s wall time, start-up included, against `python -c pass`: medians of
    ``repeat`` runs each, the two taking turns so that a busy spell of the machine weighs on
    both alike."""
    bank = shutil.which("bank") or "bank"
    passes, summaries = [], []
    for _ in range(repeat):
        passes.append(wall(sys.executable, "-c", "pass", repeat=1))
        summaries.append(wall(bank, "summary", task, "--db", db, repeat=1))
    return {"bank_events": events, "runs": repeat,
            "python_pass_s": round(sorted(passes)[repeat // 2], 3),
            "bank_summary_s": round(sorted(summaries)[repeat // 2], 3)}


def small_bank(folder: Path, size: int = 10_000) -> tuple[str, str, int]:
    """A bank of ``size`` events imported from the workload, one of its tasks, and its events."""
    source, db = folder / "startup.jsonl", folder / "startup.db"
    count = write_events_file(source, size)
    child("import", str(source), str(db))
    return str(db), child("summary", str(db)).result["task"], count


def table(results: dict[str, Any]) -> str:
    """The Markdown tables of docs/performance.md (those of the sections measured)."""
    sizes = results.get("sizes", {})
    head = "| | " + " | ".join(f"{int(n):,} events" for n in sizes) + " | target |"
    lines = [head, "|---" * (len(sizes) + 2) + "|"]

    def row(label: str, cell: Any, target: str) -> None:
        lines.append(f"| {label} | " + " | ".join(cell(s) for s in sizes.values()) + f" | {target} |")

    row("plain sqlite3 executemany, events/s (baseline)", lambda s: f"{s['plain_insert_per_s']:,}", "")
    row("`bank import` of the events file, events/s", lambda s: f"{s['import_per_s']:,} "
        f"({s['import_per_s'] / s['plain_insert_per_s']:.2f}x)", ">= 0.5x")
    row("plain sqlite3, `Bank.record`'s transactions, events/s (baseline)",
        lambda s: f"{s['plain_by_task_per_s']:,}" if "plain_by_task_per_s" in s else "-", "")
    row("`Bank.record`, one batch per task, events/s", lambda s: f"{s['record_per_s']:,} "
        f"({s['record_per_s'] / s.get('plain_by_task_per_s', s['plain_insert_per_s']):.2f}x)",
        ">= 0.6x")
    row("lookup of 10,000 keys, ms (plain indexed query)", lambda s: f"{s['lookup_ms']} "
        f"({s['plain_lookup_ms']}; {s['lookup_ms'] / max(s['plain_lookup_ms'], 0.1):.1f}x)", "<= 1.5x")
    row("verify, events/s (peak MB)", lambda s: f"{s['verify_per_s']:,} ({s['verify_peak_mb']})",
        ">= 60,000 (< 300)")
    row("rebuild, events/s (peak MB)", lambda s: f"{s['rebuild_per_s']:,} ({s['rebuild_peak_mb']})",
        ">= 100,000 (< 300)")
    row("export, events/s (peak MB)", lambda s: f"{s['export_per_s']:,} ({s['export_peak_mb']})",
        "(< 300)")
    row("`bank report`, s (peak MB)", lambda s: f"{s['report_s']} ({s['report_peak_mb']})"
        if "report_s" in s else "-", "<= 10 at 1M")
    row("import peak MB", lambda s: f"{s['import_peak_mb']}", "< 300")
    row("one task's summary through the API, ms", lambda s: f"{s['summary_ms']}", "< 50")
    out = "\n".join(lines) if sizes else "(bank at scale: not measured yet)"
    if "startup" in results:
        st = results["startup"]
        on = f" (a {st['bank_events']:,}-event bank)" if "bank_events" in st else ""
        out += (f"\n\n`bank summary` start-up{on}: {st['bank_summary_s']} s against `python -c pass` "
                f"{st['python_pass_s']} s ({st['bank_summary_s'] / st['python_pass_s']:.1f}x; target <= 3x).")
    if "merge" in results:
        m = results["merge"]
        out += (f"\n\nMerge of two {m['events_each']:,}-event banks: {m['merge_s']} s against ATTACH + "
                f"INSERT ... SELECT {m['plain_merge_s']} s ({m['merge_s'] / m['plain_merge_s']:.1f}x; "
                f"target <= 3x), peak {m['merge_peak_mb']} MB.")
    if "postgres" in results:
        out += "\n\n" + postgres.table(results["postgres"])
    if "campaign" in results:
        out += "\n\n### Campaigns on Dask (sim backend)\n\n" + campaign.table(results["campaign"])
    if "result_file" in results:
        r = results["result_file"]
        per_key, doubling = r["per_key"], r["doubling"]
        out += (f"\n\nResult file during a tune of {r['model']} ({doubling['keys']} keys): "
                f"{doubling['bytes']:,} bytes in {doubling['rewrites']} rewrites "
                f"({doubling['bytes'] / doubling['final_bytes']:.1f}x the final file) against "
                f"{per_key['bytes']:,} in {per_key['rewrites']} with a rewrite per key "
                f"({per_key['bytes'] / per_key['final_bytes']:.1f}x).")
    if "search" in results:
        out += "\n\n### Search quality (sim backend)\n\n" + search_quality.table(results["search"])
    if "end_to_end" in results:
        out += "\n\n### End to end (ga, sim backend)\n\n" + end_to_end.table(results["end_to_end"])
    later = [f"{name}: `{run['command']}`, {run['date']}" for name, run in results.get("runs", {}).items()
             if run["command"] != results["command"] or run["date"] != results["date"]]
    if later:
        out += "\n\nSections measured by another run: " + "; ".join(later) + "."
    return out


def write_doc(results: dict[str, Any]) -> None:
    text = DOC.read_text(encoding="utf-8")
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    block = (f"\n`{results['command']}` on {results['machine']}, {results['date']}:\n\n"
             f"{table(results)}\n")
    DOC.write_text(text[:start] + block + text[end:], encoding="utf-8")


SECTION_FIELDS = {"scale": "sizes", "startup": "startup", "merge": "merge", "postgres": "postgres",
                  "campaign": "campaign",
                  "result_file": "result_file", "search": "search", "end_to_end": "end_to_end"}
"""Each section of a run, and the field of results.json it fills."""
SECTIONS = tuple(SECTION_FIELDS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--merge", type=int, default=None, help="merge size (default: the largest)")
    parser.add_argument("--pg-size", type=int, default=100_000,
                        help="events in the PostgreSQL section's log")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results.json")
    parser.add_argument("--no-doc", action="store_true", help="leave docs/performance.md alone")
    parser.add_argument("--no-search", action="store_true", help="leave out the search-quality suite")
    parser.add_argument("--only", default=",".join(SECTIONS),
                        help="sections to measure; the others keep their figures from --out")
    args = parser.parse_args()
    only = set(args.only.split(","))
    if only - set(SECTIONS):
        parser.error(f"--only: no section {sorted(only - set(SECTIONS))[0]!r} "
                     f"(sections: {', '.join(SECTIONS)})")
    if args.no_search:
        only.discard("search")
    sizes = [int(s) for s in args.sizes.split(",")]
    stamp = {"command": "python bench/run.py" + "".join(f" {a}" for a in sys.argv[1:]),
             "date": time.strftime("%Y-%m-%d")}
    results: dict[str, Any] = json.loads(args.out.read_text(encoding="utf-8")) \
        if only != set(SECTIONS) and args.out.exists() else {}
    runs = results.setdefault("runs", {})
    for section, field in SECTION_FIELDS.items():  # figures from before runs were recorded
        if field in results and section not in runs:
            runs[section] = {"command": results["command"], "date": results["date"]}
    if "scale" in only or not results.get("command"):
        results.update(stamp)
        results["machine"] = f"{platform.machine()}, {_cores()} cores, Python {platform.python_version()}"
    with tempfile.TemporaryDirectory(prefix="tunebank-bench-") as tmp:
        folder = Path(tmp)
        if "scale" in only:
            results["sizes"] = {}
            for size in sizes:
                say(f"bank of {size:,} events ...")
                results["sizes"][str(size)] = bank_at(size, folder)
                say(json.dumps(results["sizes"][str(size)]))
        if "startup" in only:
            say("start-up ...")
            if "scale" in only:  # on the largest bank just measured
                largest = results["sizes"][str(sizes[-1])]
                results["startup"] = startup(largest["_db"], largest["summary_task"],
                                             largest["events"])
            else:
                results["startup"] = startup(*small_bank(folder))
            say(json.dumps(results["startup"]))
        for figures in results.get("sizes", {}).values():
            figures.pop("_db", None)
        if "merge" in only:
            say("merge ...")
            results["merge"] = merge_at(args.merge or sizes[-1], folder)
            say(json.dumps(results["merge"]))
        if "postgres" in only:
            say("postgresql ...")
            results["postgres"] = postgres.postgres_at(args.pg_size, folder)
            say(json.dumps(results["postgres"]))
    if "campaign" in only:
        say("campaign ...")
        results["campaign"] = {"zoo": campaign.zoo(), "scaling": campaign.scaling()}
        say(campaign.table(results["campaign"]))
    if "result_file" in only:
        say("result file ...")
        results["result_file"] = result_file.run(ROOT / "fixtures" / "models" / "resnet50.onnx")
        say(json.dumps(results["result_file"]))
    if "search" in only:
        say("search quality ...")
        results["search"] = search_quality.run(5, [16, 32, 64, 128], search_quality.has_optuna(),
                                               ("scratch", "heldout", "transfer"), tpe_seeds=5)
        say(search_quality.table(results["search"]))
    if "end_to_end" in only:
        say("end to end ...")
        results["end_to_end"] = end_to_end.run()
        say(end_to_end.table(results["end_to_end"]))
    for section in only:
        results["runs"][section] = stamp
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    say("\n" + table(results))
    if not args.no_doc:
        write_doc(results)


def _cores() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


if __name__ == "__main__":
    main()
