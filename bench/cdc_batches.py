#!/usr/bin/env python3
"""A CDC flow over many one-file batches: does a batch cost more the longer the flow runs?

    python3 bench/cdc_batches.py [--batches 5000] [--scd 1,2] [--pool 300] [--bin BIN]

Lands BATCHES JSON-lines files of RECORDS change records each (`id` from a pool of POOL
keys, `op` U or D (5% deletes), `seq` rising from file to file, 2% of records late by up to
a few files), then runs one `autoloader ingest --once` per SCD type with
`cloudFiles.maxFilesPerTrigger=1`, so every file is a batch (and a MERGE) of its own. The
time of each batch is the `seconds=` of its "Committed batch." line; the report gives, per
thousand batches, the mean, median and 95th percentile, and the last thousand's mean over
the first's (the target: at most 1.5). The table is then read back with Python
`deltalake`: SCD type 1 must equal the expected state (each key's record of the greatest
sequence, gone when that is a delete), SCD type 2's current versions (`__END_AT` null) too.
"""
import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORK = "/tmp/autoloader-bench/cdc-batches"


def generate(landing, batches, records, pool, seed=7):
    """The files, and the expected SCD type 1 state {id: (seq, row or None)}."""
    rng = random.Random(seed)
    os.makedirs(landing)
    state = {}
    for b in range(batches):
        lines = []
        for r in range(records):
            key = rng.randrange(pool)
            seq = (b * records + r) * 10 + 10
            if rng.random() < 0.02:
                seq -= rng.randrange(1, 5) * records * 10  # a late record
            op = "D" if rng.random() < 0.05 else "U"
            row = {"id": key, "op": op, "seq": seq, "name": "n%d" % rng.randrange(1000),
                   "amount_cents": rng.randrange(10 ** 6), "city": "c%d" % rng.randrange(50)}
            lines.append(json.dumps(row))
            if key not in state or seq > state[key][0]:
                state[key] = (seq, None if op == "D" else (row["name"], row["amount_cents"],
                                                          row["city"]))
        # zero-padded names: the files are listed, and so batched, in this order
        with open(os.path.join(landing, "b%06d.json" % b), "w") as f:
            f.write("\n".join(lines) + "\n")
    return {k: v[1] for k, v in state.items() if v[1] is not None}


def check(table, expected, scd):
    code = r"""
import json, os, sys
from deltalake import DeltaTable
t = DeltaTable(sys.argv[1]).to_pyarrow_table()
rows = t.to_pylist()
if sys.argv[2] == "2":
    rows = [r for r in rows if r["__END_AT"] is None]
out = {str(r["id"]): [r["name"], r["amount_cents"], r["city"]] for r in rows}
sys.stdout.write(json.dumps({"rows": len(rows), "distinct": len(out), "state": out,
                             "versions": t.num_rows}) + "\n")
sys.stdout.flush()
os._exit(0)
"""
    out = subprocess.run([sys.executable, "-c", code, table, str(scd)], capture_output=True,
                         text=True)
    if out.returncode != 0:
        return {"ok": False, "error": out.stderr[-400:]}
    got = json.loads(out.stdout)
    want = {str(k): list(v) for k, v in expected.items()}
    return {"ok": got["rows"] == got["distinct"] == len(want) and got["state"] == want,
            "rows": got["rows"], "expected_rows": len(want), "versions": got["versions"]}


def run(binary, landing, table, scd, batches):
    cmd = [binary, "ingest", landing, table, "--once", "--json",
           "-o", "cloudFiles.inferColumnTypes=true", "-o", "cloudFiles.maxFilesPerTrigger=1",
           "-o", "cdc.keys=id", "-o", "cdc.sequence_by=seq",
           "-o", "cdc.apply_as_deletes=op = 'D'",
           "-o", "cdc.except_column_list=op,seq,_rescued_data,_metadata",
           "-o", "cdc.stored_as_scd_type=%d" % scd]
    env = dict(os.environ, RUST_LOG="autoloader=info")
    started = time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=env)
    per = {}
    pat = re.compile(r"Committed batch\. batch=(\d+) .*seconds=([0-9.e-]+)")
    for line in proc.stderr:
        m = pat.search(line)
        if m:
            per[int(m.group(1))] = float(m.group(2))
            if len(per) % 500 == 0:
                print("    %d batches, %.0f s" % (len(per), time.time() - started), flush=True)
    _, status, usage = os.wait4(proc.pid, 0)
    return {"rc": os.waitstatus_to_exitcode(status), "wall": time.time() - started,
            "rss_mib": usage.ru_maxrss / 1024, "per": [per[b] for b in sorted(per)]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=5000)
    ap.add_argument("--records", type=int, default=20)
    ap.add_argument("--pool", type=int, default=300)
    ap.add_argument("--scd", default="1,2")
    ap.add_argument("--every", type=int, default=1000)
    ap.add_argument("--bin", default=os.path.join(ROOT, "target/release/autoloader"))
    args = ap.parse_args()
    shutil.rmtree(WORK, ignore_errors=True)
    landing = os.path.join(WORK, "landing")
    expected = generate(landing, args.batches, args.records, args.pool)
    print("%d files of %d records, %d keys" % (args.batches, args.records, args.pool))
    lines = []
    for scd in [int(s) for s in args.scd.split(",")]:
        table = os.path.join(WORK, "scd%d" % scd)
        print("  SCD type %d ..." % scd, flush=True)
        r = run(args.bin, landing, table, scd, args.batches)
        c = check(table, expected, scd)
        per = r["per"]
        chunks = [per[i:i + args.every] for i in range(0, len(per), args.every)]
        stats = ["%d-%d: mean %.1f, median %.1f, p95 %.1f ms" % (
            i * args.every, i * args.every + len(ch) - 1, 1000 * statistics.mean(ch),
            1000 * statistics.median(ch), 1000 * sorted(ch)[int(0.95 * (len(ch) - 1))])
            for i, ch in enumerate(chunks) if ch]
        ratio = statistics.mean(chunks[-1]) / statistics.mean(chunks[0]) if chunks else 0
        lines.append({"scd": scd, "rc": r["rc"], "batches": len(per), "wall": r["wall"],
                      "rss_mib": r["rss_mib"], "chunks": stats, "ratio": ratio, "check": c})
        print("  SCD type %d: exit %s, %d batches in %.1f s, peak %.0f MiB, last/first %.2f, "
              "check %s" % (scd, r["rc"], len(per), r["wall"], r["rss_mib"], ratio, c),
              flush=True)
        for s in stats:
            print("    " + s)
    ok = all(x["rc"] == 0 and x["check"].get("ok") and x["ratio"] <= 1.5 for x in lines)
    print("target (last thousand <= 1.5x first, tables correct): %s" % ("PASS" if ok else "FAIL"))
    with open(os.path.join(WORK, "results.json"), "w") as f:
        json.dump(lines, f, indent=1)


if __name__ == "__main__":
    main()
