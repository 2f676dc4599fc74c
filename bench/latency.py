#!/usr/bin/env python3
"""Watch-mode latency: how long from a file renamed into a landing folder to its rows being
visible in the Delta table (a new commit in _delta_log), and whether the watcher's memory
stays flat while it runs.

    python3 bench/latency.py [--files 200] [--interval 0.2] [--preload 0] [--idle 0] [--no-build]

Starts `autoloader ingest LANDING TABLE` (watch mode) on an empty folder, then, one file at a
time, writes a small JSON-lines file under a temporary name, renames it in, and polls the
table's log until the commit that holds it appears. Prints p50/p95/p99/max and the
watcher's RSS at the start and at the end.

`--preload N` first lands N files (in folders of 1,000) and ingests them with `--once`, so
the watcher starts on a folder holding N already-ingested files (a landing zone nobody
cleans). `--idle S` then measures the watcher's CPU over S idle seconds.
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_idle(pid, quiet=1.0, timeout=600):
    """Waits until the process has used no CPU for `quiet` seconds (its start-up is over)."""
    deadline = time.time() + timeout
    last = cpu_seconds(pid)
    while time.time() < deadline:
        time.sleep(quiet)
        now = cpu_seconds(pid)
        if now == last:
            return
        last = now


def commits(table):
    log = os.path.join(table, "_delta_log")
    try:
        return sum(1 for n in os.listdir(log) if n.endswith(".json"))
    except FileNotFoundError:
        return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument("--interval", type=float, default=0.2, help="pause between files, seconds")
    ap.add_argument("--preload", type=int, default=0, help="already-ingested files left in the folder")
    ap.add_argument("--idle", type=float, default=0, help="seconds of idle CPU to measure")
    ap.add_argument("--no-build", action="store_true")
    args = ap.parse_args()
    if not args.no_build:
        subprocess.run(["cargo", "build", "--release", "-q"], cwd=ROOT, check=True)
    binary = os.environ.get("AUTOLOADER_BIN") or os.path.join(ROOT, "target", "release", "autoloader")
    work = tempfile.mkdtemp(prefix="autoloader-latency-")
    landing, table = os.path.join(work, "landing"), os.path.join(work, "table")
    os.makedirs(landing)
    if args.preload:
        for i in range(args.preload):
            folder = os.path.join(landing, f"old{i // 1000:04d}")
            if i % 1000 == 0:
                os.makedirs(folder)
            with open(os.path.join(folder, f"o{i:07d}.json"), "w") as f:
                f.write(json.dumps({"order_id": -1 - i, "amount": 1}) + "\n")
        t0 = time.perf_counter()
        subprocess.run([binary, "-q", "ingest", landing, table, "--once", "-o", "cloudFiles.format=json",
                        "-o", "cloudFiles.maxFilesPerTrigger=10000"],
                       check=True, stdout=subprocess.DEVNULL)
        print(f"preloaded {args.preload} files, ingested once in {time.perf_counter() - t0:.1f} s")
    proc = subprocess.Popen(
        [binary, "-q", "ingest", landing, table, "-o", "cloudFiles.format=json"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(0.5)
        t0 = time.perf_counter()
        wait_idle(proc.pid)
        if args.preload:
            print(f"watcher start-up (first listing of {args.preload} files): "
                  f"{time.perf_counter() - t0 - 1.0:.1f} s, {cpu_seconds(proc.pid):.1f} CPU-s")
        rss_start = rss_kib(proc.pid)
        latencies = []
        rss_points = []
        for i in range(args.files):
            rows = "".join(json.dumps({"order_id": i * 10 + k, "amount": 1000 + k}) + "\n" for k in range(10))
            tmp = os.path.join(landing, f".f{i:05d}.tmp")
            with open(tmp, "w") as f:
                f.write(rows)
            before = commits(table)
            # The first file also creates the table (one more commit).
            want = before + (2 if before == 0 else 1)
            start = time.perf_counter()
            os.rename(tmp, os.path.join(landing, f"f{i:05d}.json"))
            deadline = start + 30
            while commits(table) < want:
                if time.perf_counter() > deadline:
                    sys.exit(f"file {i} never became visible")
                time.sleep(0.002)
            latencies.append(time.perf_counter() - start)
            if (i + 1) % 100 == 0:
                rss_points.append((i + 1, rss_kib(proc.pid)))
            time.sleep(args.interval)
        rss_end = rss_kib(proc.pid)
        if args.idle:
            time.sleep(1.0)
            c0, t0 = cpu_seconds(proc.pid), time.perf_counter()
            time.sleep(args.idle)
            idle_cpu = (cpu_seconds(proc.pid) - c0) / (time.perf_counter() - t0)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    lat = sorted(latencies)
    q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))]
    print(f"files: {len(lat)}  (one per batch, {args.interval}s apart)")
    print(f"rename -> visible: p50 {q(0.50)*1000:.0f} ms, p95 {q(0.95)*1000:.0f} ms, "
          f"p99 {q(0.99)*1000:.0f} ms, max {lat[-1]*1000:.0f} ms, mean {statistics.mean(lat)*1000:.0f} ms")
    print(f"watcher RSS: {rss_start/1024:.1f} MiB after start, {rss_end/1024:.1f} MiB after {len(lat)} batches")
    print("RSS by batches: " + ", ".join(f"{n}: {k/1024:.0f} MiB" for n, k in rss_points))
    if args.idle:
        print(f"idle watcher CPU over {args.idle:.0f} s: {idle_cpu * 100:.2f}% of a core")
    print(f"watcher exit: {proc.returncode}; summary: {out.decode().strip()}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
