#!/usr/bin/env python3
"""Small-file compaction: a table of N small files (N one-file batches ingested by
autoloader), scanned by Python deltalake (and DuckDB / Polars reading the same Parquet
files, when installed) before and after `autoloader optimize`; compared with Python
deltalake's `DeltaTable.optimize.compact()` on a copy of the same table.

    python3 bench/compaction.py                 # 2,000 files (about 2 minutes)
    python3 bench/compaction.py --files 200     # quick
    python3 bench/compaction.py --bin /tmp/autoloader --repeat 5

Each measured step runs in its own process; time is wall-clock, memory the process's
peak RSS (os.wait4's ru_maxrss). Everything goes under /tmp/autoloader-bench/compaction.
Python deltalake may abort at interpreter exit (delta-rs#2184): the child scripts flush
and leave with os._exit.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

ROOT = "/tmp/autoloader-bench/compaction"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def measured(cmd, env=None):
    """Runs cmd; returns (seconds, peak RSS MiB, stdout)."""
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    out = proc.stdout.read()
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.monotonic() - start
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.stderr.write(err.decode(errors="replace"))
        raise SystemExit(f"failed ({code}): {' '.join(cmd)}")
    return seconds, usage.ru_maxrss / 1024.0, out.decode()


def python_step(code, *args):
    script = (
        "import os, sys, json, time\n" + code + "\nsys.stdout.flush()\nos._exit(0)\n"
    )
    return measured([sys.executable, "-c", script, *args])


SCAN = {
    "deltalake": """
from deltalake import DeltaTable
t = time.monotonic()
table = DeltaTable(sys.argv[1]).to_pyarrow_table()
print(json.dumps({"seconds": time.monotonic() - t, "rows": table.num_rows}))
""",
    "duckdb": """
import duckdb
from deltalake import DeltaTable
files = DeltaTable(sys.argv[1]).file_uris()
t = time.monotonic()
con = duckdb.connect()
rows = con.execute("SELECT count(*), sum(amount), count(DISTINCT user_id) FROM read_parquet(?)", [files]).fetchall()[0][0]
print(json.dumps({"seconds": time.monotonic() - t, "rows": rows}))
""",
    "polars": """
import polars as pl
from deltalake import DeltaTable
files = DeltaTable(sys.argv[1]).file_uris()
t = time.monotonic()
df = pl.read_parquet(files)
print(json.dumps({"seconds": time.monotonic() - t, "rows": df.height}))
""",
}

COUNT_FILES = """
from deltalake import DeltaTable
print(len(DeltaTable(sys.argv[1]).file_uris()))
"""

PY_COMPACT = """
from deltalake import DeltaTable
dt = DeltaTable(sys.argv[1])
m = dt.optimize.compact()
print(json.dumps({"added": m["numFilesAdded"], "removed": m["numFilesRemoved"]}))
"""

PY_OPEN_ONLY = """
from deltalake import DeltaTable
dt = DeltaTable(sys.argv[1])
print(dt.version())
"""


def available(module):
    return subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True).returncode == 0


def scan_all(table, tools, repeat):
    out = {}
    for tool in tools:
        best = None
        for _ in range(repeat):
            _, _, text = python_step(SCAN[tool], table)
            r = json.loads(text)
            best = r if best is None or r["seconds"] < best["seconds"] else best
        out[tool] = best
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--rows-per-file", type=int, default=50)
    ap.add_argument("--bin", help="a prebuilt autoloader binary (default: build release)")
    ap.add_argument("--repeat", type=int, default=3, help="scans per tool, fastest kept")
    args = ap.parse_args()

    if args.bin:
        binary = args.bin
    else:
        subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=REPO, check=True)
        os.makedirs("/tmp/autoloader-bench/bin", exist_ok=True)
        binary = "/tmp/autoloader-bench/bin/autoloader-compaction"
        shutil.copy2(os.path.join(REPO, "target/release/autoloader"), binary)

    shutil.rmtree(ROOT, ignore_errors=True)
    landing, table, copy = f"{ROOT}/landing", f"{ROOT}/table", f"{ROOT}/table-python"
    os.makedirs(landing)
    order = 0
    for i in range(args.files):
        with open(f"{landing}/orders-{i:05}.json", "w") as f:
            for _ in range(args.rows_per_file):
                f.write(json.dumps({
                    "order_id": order, "user_id": f"u{order % 977}",
                    "amount": round(order * 1.37 % 1000, 2), "currency": ["KRW", "USD", "EUR"][order % 3],
                    "status": ["new", "paid", "shipped"][order % 3],
                }) + "\n")
                order += 1
    total_rows = order
    env = dict(os.environ, RUST_LOG="warn")
    ingest_s, _, _ = measured([binary, "ingest", landing, table, "--once", "-q",
                               "-o", "cloudFiles.maxFilesPerTrigger=1",
                               "-o", "cloudFiles.inferColumnTypes=true"], env)
    shutil.copytree(table, copy)
    tools = [t for t in ["deltalake", "duckdb", "polars"] if available(t)]
    files_before = int(python_step(COUNT_FILES, table)[2])
    before = scan_all(table, tools, args.repeat)

    opt_s, opt_mib, text = measured([binary, "optimize", table, "--json"], env)
    report = json.loads(text)
    py_s, py_mib, text = python_step(PY_COMPACT, copy)
    py_report = json.loads(text)
    _, py_base_mib, _ = python_step(PY_OPEN_ONLY, copy)

    files_after = int(python_step(COUNT_FILES, table)[2])
    files_py = int(python_step(COUNT_FILES, copy)[2])
    after = scan_all(table, tools, args.repeat)
    after_py = scan_all(copy, tools, args.repeat)
    for scans in (before, after, after_py):
        for tool, r in scans.items():
            assert r["rows"] == total_rows, f"{tool} read {r['rows']} rows, expected {total_rows}"

    lines = [
        f"{args.files} one-file batches of {args.rows_per_file} rows ({total_rows} rows), "
        f"ingested in {ingest_s:.1f} s; scans the fastest of {args.repeat}.",
        "",
        "| | files | " + " | ".join(f"{t} scan" for t in tools) + " |",
        "|---|---|" + "---|" * len(tools),
        f"| before | {files_before} | " + " | ".join(f"{before[t]['seconds']*1000:.0f} ms" for t in tools) + " |",
        f"| after `autoloader optimize` | {files_after} | " + " | ".join(f"{after[t]['seconds']*1000:.0f} ms" for t in tools) + " |",
        f"| after deltalake `optimize.compact()` | {files_py} | " + " | ".join(f"{after_py[t]['seconds']*1000:.0f} ms" for t in tools) + " |",
        "",
        "| compaction | time | peak RSS | files removed -> added |",
        "|---|---|---|---|",
        f"| `autoloader optimize` | {opt_s:.2f} s | {opt_mib:.0f} MiB | {report['filesRemoved']} -> {report['filesAdded']} |",
        f"| Python deltalake `optimize.compact()` | {py_s:.2f} s | {py_mib:.0f} MiB (interpreter and table open alone: {py_base_mib:.0f} MiB) | {py_report['removed']} -> {py_report['added']} |",
    ]
    text = "\n".join(lines)
    print(text)
    with open(f"{ROOT}/results.md", "w") as f:
        f.write(text + "\n")
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
