#!/usr/bin/env python3
"""APPLY CHANGES into an SCD type 2 table, on the `cdc` set's data (bench/run.py): the
insert-all files, the B random batches, then the clustered batch, each phase one measured
`autoloader ingest --once` process, one file per batch. There is no peer to compare with
(Python deltalake has no SCD type 2 merge; dlt refuses scd2 on Delta), so the figures are
ours alone. Checked after each phase: the current versions (`__END_AT` null) equal the
SCD type 1 expected table, and every key's versions chain (each closed version ends where
the next starts, or at a delete).

    python3 bench/scd2.py [--quick] [--bin PATH]
"""
import argparse
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402  (the cdc set's generator, measurement and paths)


def check_main(table, expected):
    """Prints {current ok, versions, keys, chained} for the SCD type 2 table."""
    code = 0
    try:
        import pyarrow.parquet as pq
        from deltalake import DeltaTable

        dt = DeltaTable(table)
        got = dt.to_pyarrow_table(columns=run.CDC_COLS + ["__START_AT", "__END_AT"]).to_pylist()
        exp = {r["id"]: (r["name"], r["amount_cents"], r["city"])
               for r in pq.read_table(expected).to_pylist()}
        current = {r["id"]: (r["name"], r["amount_cents"], r["city"])
                   for r in got if r["__END_AT"] is None}
        by_key = {}
        for r in got:
            by_key.setdefault(r["id"], []).append((r["__START_AT"], r["__END_AT"]))
        broken = 0
        for spans in by_key.values():
            spans.sort()
            for (s1, e1), (s2, _) in zip(spans, spans[1:]):
                if e1 is None or e1 > s2:
                    broken += 1
        res = {"versions": len(got), "keys": len(by_key), "current": len(current),
               "expected": len(exp), "overlapping": broken,
               "current_ok": current == exp, "files": len(dt.file_uris())}
        res["ok"] = res["current_ok"] and broken == 0
    except BaseException as e:  # noqa: BLE001
        res = {"error": "%s: %s" % (type(e).__name__, e)}
        code = 1
    sys.stdout.write(json.dumps(res) + "\n")
    sys.stdout.flush()
    os._exit(code)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--bin", help="a prebuilt autoloader binary")
    ap.add_argument("--check", nargs=2, metavar=("TABLE", "EXPECTED"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.check:
        check_main(*args.check)
    if args.bin:
        run.BIN = args.bin
    size = "quick" if args.quick else "full"
    path, _ = run.cdc_dataset(size)
    files = os.path.join(path, "files")
    names = sorted(os.listdir(files))
    phases = [("initial", [n for n in names if n.startswith("initial-")]),
              ("batches", [n for n in names if n.startswith("batch-")]),
              ("clustered", ["clustered.json"])]
    base = os.path.join(run.RUNS, "scd2")
    shutil.rmtree(base, ignore_errors=True)
    src = os.path.join(base, "landing")
    table = os.path.join(base, "table")
    os.makedirs(src)
    rows = []
    for ph, phase_files in phases:
        for n in phase_files:
            os.link(os.path.join(files, n), os.path.join(src, n))
        run.warm([os.path.join(files, n) for n in phase_files])
        load = os.getloadavg()[0]
        cmd = run.cdc_autoloader_cmd(src, table) + ["-o", "cdc.stored_as_scd_type=2"]
        rc, wall, rss, out, err = run.measure(cmd, os.path.join(base, ph), run.OUR_TIMEOUT)
        if rc != 0:
            print("%s FAILED (exit %s): %s" % (ph, rc, run.short(err or out, 400)))
            return 1
        rc2, _, _, cout, cerr = run.measure(
            [sys.executable, os.path.abspath(__file__), "--check", table,
             os.path.join(path, "expected-%s.parquet" % ph)],
            os.path.join(base, ph + "-check"), 900)
        check = run.last_json(cout) or {"error": run.short(cerr)}
        infos = run.cdc_commit_infos(table, -1)
        rows.append((ph, len(phase_files), wall, rss, load, check, infos))
        print("%s: %d files, %.2f s (%.3f s a batch), %.0f MiB, load %.1f, check %s" % (
            ph, len(phase_files), wall, wall / max(1, len(phase_files)), rss, load, check),
            flush=True)
    print("\n| phase | batches | wall s | per batch s | peak RSS MiB | load | versions | current = SCD 1 expected | files |")
    print("|---|---|---|---|---|---|---|---|---|")
    for ph, n, wall, rss, load, check, _ in rows:
        print("| %s | %d | %.2f | %.3f | %.0f | %.1f | %s | %s | %s |" % (
            ph, n, wall, wall / max(1, n), rss, load, check.get("versions"),
            "yes" if check.get("ok") else "NO", check.get("files")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
