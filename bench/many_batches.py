#!/usr/bin/env python3
"""A watcher over many one-file batches: its memory and CPU per batch as the table grows.

    python3 bench/many_batches.py [--batches 20000] [--auto-compact] [--every 1000] [--bin BIN]

A watcher (`autoloader ingest LANDING TABLE`, JSON) on a local folder; one 10-row file is
renamed in at a time, and the next only once the commit holding it is in `_delta_log`, so
every file is a batch of its own. Every `--every` batches it prints the watcher's RSS, the
batches per second, the CPU seconds the watcher used so far, its last logged heap totals
(in use / freed but held / mapped, `src/memory.rs`) and its threads (each keeps glibc's
cache of freed chunks, which counts as in use: see `bench/heap_walk.py`). All files stay in the
landing folder (in subfolders of 5,000). `--auto-compact` first lands one file with `--once`
and sets `delta.autoOptimize.autoCompact=true` on the table (`autoloader table set`), so
the watcher compacts it every 50 batches and the table keeps a few dozen files.

`--prior N` starts from a table that already has N versions, written straight into its
`_delta_log` (each removes the last version's file and adds one, as a compaction does, so
the table keeps one live file and N `remove` tombstones), then a Delta checkpoint
(Python `deltalake`): the state of a long run without the hours it takes.
`--prior-tombstones expired` dates those removes 8 days back, past the 7-day
`delta.deletedFileRetentionDuration`, so checkpoints drop them; `--prior-log cleaned`
deletes the commits the checkpoint covers, as the log cleanup does once they are 30 days
old. The three tell apart what a long run's memory and CPU grow with. `--prior-files N`
first lands N files with `--once` (so the landing folder and the file index start N files
in); `-o KEY=VALUE` passes an option to the watcher (`cloudFiles.backfillInterval=10s`);
`--set KEY=VALUE` sets a table property before the watcher starts (`autoloader table set`,
`delta.logRetentionDuration=interval 2 minutes`).
"""
import argparse
import glob
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def status_field(pid, name):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(name + ":"):
                return int(line.split()[1])
    return 0


def rss_kib(pid):
    return status_field(pid, "VmRSS")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def last_heap(stderr):
    """The watcher's last logged heap totals, in MiB: in use / free held / mapped."""
    with open(stderr) as f:
        lines = [line for line in f if "Heap after trimming" in line]
    if not lines:
        return "-"
    fields = dict(re.findall(r"(\w+)=(\d+)", lines[-1]))
    return " / ".join(f"{int(fields[k]) / 2**20:.1f}" for k in ("in_use", "free_held", "mapped"))


def latest_version(table):
    versions = [int(os.path.basename(p)[:20]) for p in glob.glob(os.path.join(table, "_delta_log", "*.json"))]
    return max(versions, default=-1)


def write_prior_history(table, versions, expired, cleaned):
    """`versions` commits on a new table, each swapping its one file, then a checkpoint."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from deltalake import DeltaTable, write_deltalake
    write_deltalake(table, pa.table({"order_id": pa.array([-2], pa.int64()),
                                     "amount": pa.array([0], pa.int64())}))
    base = DeltaTable(table).file_uris()[0]
    size = os.path.getsize(base)
    now_ms = int(time.time() * 1000)
    removed_at = now_ms - 8 * 86400 * 1000 if expired else now_ms
    previous = os.path.basename(base)
    log = os.path.join(table, "_delta_log")
    for v in range(1, versions + 1):
        name = f"prior-{v:07d}.parquet"
        actions = [
            {"commitInfo": {"timestamp": now_ms, "operation": "OPTIMIZE"}},
            {"remove": {"path": previous, "deletionTimestamp": removed_at, "dataChange": False,
                        "extendedFileMetadata": True, "partitionValues": {}, "size": size}},
            {"add": {"path": name, "partitionValues": {}, "size": size,
                     "modificationTime": now_ms, "dataChange": False}},
        ]
        with open(os.path.join(log, f"{v:020d}.json"), "w") as f:
            f.write("".join(json.dumps(a) + "\n" for a in actions))
        previous = name
    os.link(base, os.path.join(table, previous))
    DeltaTable(table).create_checkpoint()
    if cleaned:
        for v in range(versions):
            os.remove(os.path.join(log, f"{v:020d}.json"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=20000)
    ap.add_argument("--every", type=int, default=1000)
    ap.add_argument("--auto-compact", action="store_true")
    ap.add_argument("--prior", type=int, default=0)
    ap.add_argument("--prior-tombstones", choices=["kept", "expired"], default="kept")
    ap.add_argument("--prior-log", choices=["kept", "cleaned"], default="kept")
    ap.add_argument("--prior-files", type=int, default=0)
    ap.add_argument("--set", dest="properties", action="append", default=[])
    ap.add_argument("-o", dest="options", action="append", default=[])
    ap.add_argument("--bin", default=os.path.join(ROOT, "target", "release", "autoloader"))
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="autoloader-many-batches-")
    landing, table = os.path.join(work, "landing"), os.path.join(work, "table")
    os.makedirs(os.path.join(landing, "seed"))
    if args.prior:
        # Python deltalake can abort at exit (delta-rs#2184): build the history in a child.
        child = os.fork()
        if child == 0:
            try:
                write_prior_history(table, args.prior, args.prior_tombstones == "expired",
                                    args.prior_log == "cleaned")
                sys.stdout.flush()
                os._exit(0)
            except BaseException as e:
                print(f"prior history: {e!r}", file=sys.stderr, flush=True)
                os._exit(1)
        _, status = os.waitpid(child, 0)
        if status != 0:
            sys.exit("could not write the prior history")
    if args.prior_files:
        for i in range(args.prior_files):
            folder = os.path.join(landing, "prior", f"p{i // 5000:03d}")
            if i % 5000 == 0:
                os.makedirs(folder)
            with open(os.path.join(folder, f"p{i:06d}.json"), "w") as f:
                f.write(json.dumps({"order_id": -3 - i, "amount": 1}) + "\n")
        subprocess.run([args.bin, "-q", "ingest", landing, table, "--once", "-o", "cloudFiles.format=json",
                        "-o", "cloudFiles.maxFilesPerTrigger=20000"], check=True, stdout=subprocess.DEVNULL)
    properties = args.properties + (["delta.autoOptimize.autoCompact=true"] if args.auto_compact else [])
    if properties:
        with open(os.path.join(landing, "seed", "seed.json"), "w") as f:
            f.write(json.dumps({"order_id": -1, "amount": 1}) + "\n")
        subprocess.run([args.bin, "-q", "ingest", landing, table, "--once", "-o", "cloudFiles.format=json"],
                       check=True, stdout=subprocess.DEVNULL)
        subprocess.run([args.bin, "table", "set", table, *properties], check=True, stdout=subprocess.DEVNULL)
    options = [x for o in args.options for x in ("-o", o)]
    # The watcher logs its allocator's totals once a minute (`src/memory.rs`).
    env = dict(os.environ, RUST_LOG="error,deltalake_core=off,autoloader::memory=debug")
    stderr = os.path.join(work, "stderr")
    proc = subprocess.Popen([args.bin, "-q", "ingest", landing, table, "-o", "cloudFiles.format=json", *options],
                            stdout=subprocess.DEVNULL, stderr=open(stderr, "w"), env=env)
    try:
        time.sleep(1.0)
        print(f"work {work}; watcher RSS at start {rss_kib(proc.pid) / 1024:.1f} MiB", flush=True)
        print("batches | RSS MiB | heap in use / free held / mapped MiB | batches/s | CPU ms a batch | "
              "_delta_log entries | threads", flush=True)
        version = latest_version(table)
        last_t, last_cpu = time.perf_counter(), cpu_seconds(proc.pid)
        for i in range(args.batches):
            folder = os.path.join(landing, f"d{i // 5000:03d}")
            if i % 5000 == 0:
                os.makedirs(folder, exist_ok=True)
            tmp = os.path.join(landing, f".f{i:06d}.tmp")
            with open(tmp, "w") as f:
                f.write("".join(json.dumps({"order_id": i * 10 + k, "amount": 1000 + k}) + "\n"
                                for k in range(10)))
            os.rename(tmp, os.path.join(folder, f"f{i:06d}.json"))
            # Wait for the commit that adds data: the table's creation and auto
            # compactions (dataChange=false) commit too.
            deadline = time.perf_counter() + 60
            landed = False
            while not landed:
                commit = os.path.join(table, "_delta_log", f"{version + 1:020d}.json")
                while not os.path.exists(commit):
                    if proc.poll() is not None or time.perf_counter() > deadline:
                        sys.exit(f"file {i} never landed (see {work}/stderr)")
                    time.sleep(0.001)
                time.sleep(0.001)
                with open(commit) as f:
                    actions = [json.loads(line) for line in f if line.strip()]
                landed = any(a.get("add", {}).get("dataChange") for a in actions)
                version += 1
            if (i + 1) % args.every == 0:
                now, cpu = time.perf_counter(), cpu_seconds(proc.pid)
                print(f"{i + 1} | {rss_kib(proc.pid) / 1024:.1f} | {last_heap(stderr)} | "
                      f"{args.every / (now - last_t):.0f} | "
                      f"{(cpu - last_cpu) * 1000 / args.every:.1f} | {len(os.listdir(os.path.join(table, '_delta_log')))} | "
                      f"{status_field(proc.pid, 'Threads')}",
                      flush=True)
                last_t, last_cpu = now, cpu
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)


if __name__ == "__main__":
    main()
