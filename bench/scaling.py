#!/usr/bin/env python3
"""Scaling with cores (issue 40): the `bulk` and `small` sets of bench/run.py ingested by
one binary pinned to 1, 2, 4, ... cores with `taskset`, each a fresh `--once` run into a
fresh table. Prints, per core count, the best wall time of `--repeat` tries, throughput,
speedup over one core, efficiency (speedup / cores) and peak RSS, then the issue's
targets with PASS/FAIL:

- small files: files/s at n cores >= 0.5 x n x files/s at one core, for n up to 8;
- bulk: efficiency >= 0.8 at the largest core count (16 on the machine it was made for);
- bulk: peak RSS growing by no more than 32 MiB a core.

Standard library only, and the data is generated here on every core, so that it runs as
one prepared command on a lent machine that can install nothing and reach nothing:

    mkdir -p out && strip -o out/autoloader target/release/autoloader && xz -T0 -f out/autoloader
    python3 bench/scaling.py --bin out/autoloader.xz --out "$OUT"    # carry out/autoloader.xz

The data is byte for byte bench/run.py's (same seed, same generator) and shares its cache
(/tmp/autoloader-bench/data); every run's row count is checked against the set's manifest
(the `--json` summary's `rows`), so a fast wrong answer cannot count.
"""

import argparse
import json
import lzma
import multiprocessing
import os
import random
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as bench  # noqa: E402  (the generator and the data cache of bench/run.py)

SETS = ("bulk", "small")
# The first order id of each set's stream, as bench/run.py numbers them.
FIRST_ORDER_ID = {"bulk": 1, "small": 10_000_001}
MTIME0 = 1_772_323_200  # 2026-03-01; file i gets MTIME0 + i, as in bench/run.py


def write_file(job):
    """Writes file `i` of a set exactly as bench/run.py's `generate` does; returns its
    bytes and how many of its orders have a note and a gift message."""
    name, i, rows_per_file, landing = job
    rng = random.Random("%d-%s-%d" % (bench.SEED, name, i))
    order_id = FIRST_ORDER_ID[name] + i * rows_per_file
    lines, notes, gifts = [], 0, 0
    for k in range(rows_per_file):
        o = bench.gen_order(rng, order_id + k)
        notes += o["note"] is not None
        gifts += "gift_message" in o
        lines.append(bench.json_line(o))
    data = "".join(lines).encode()
    path = os.path.join(landing, "orders-%06d.json" % i)
    with open(path, "wb") as f:
        f.write(data)
    os.utime(path, (MTIME0 + i, MTIME0 + i))
    return len(data), notes, gifts


def dataset(name, size):
    """The set's folder and manifest: bench/run.py's cache when it holds the set, else
    generated here on every core into that cache."""
    path = os.path.join(bench.DATA, "%s-%s" % (name, size))
    mpath = os.path.join(path, "manifest.json")
    if os.path.exists(mpath):
        with open(mpath) as f:
            m = json.load(f)
        if m.get("gen_version") == bench.GEN_VERSION:
            return path, m
    files, rows_per_file = bench.SIZES[size][name]
    tmp = path + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    landing = os.path.join(tmp, "landing")
    os.makedirs(landing)
    t = time.time()
    jobs = [(name, i, rows_per_file, landing) for i in range(files)]
    with multiprocessing.Pool() as pool:
        done = pool.map(write_file, jobs, chunksize=max(1, files // (8 * os.cpu_count())))
    first = FIRST_ORDER_ID[name]
    rows = files * rows_per_file
    manifest = {"set": name, "size": size, "gen_version": bench.GEN_VERSION, "files": files,
                "rows": rows, "bytes": sum(d[0] for d in done),
                "order_id_sum": rows * first + rows * (rows - 1) // 2,
                "rescued_expected": 0, "note_count": sum(d[1] for d in done),
                "gift_message_count": sum(d[2] for d in done), "parts": {}}
    with open(os.path.join(tmp, "manifest.json"), "w") as f:
        json.dump(manifest, f)
    shutil.rmtree(path, ignore_errors=True)
    os.rename(tmp, path)
    print("generated %s-%s: %d files, %.0f MB, %.1f s on %d cores" % (
        name, size, files, manifest["bytes"] / 1e6, time.time() - t, os.cpu_count()),
        flush=True)
    return path, manifest


def binary(path):
    """The binary to run: `path`, or decompressed from it when it ends in `.xz`."""
    if not path.endswith(".xz"):
        return os.path.abspath(path)
    out = os.path.join(bench.ROOT, "scaling-bin", "autoloader")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with lzma.open(path) as src, open(out + ".tmp", "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    os.chmod(out + ".tmp", 0o755)
    os.replace(out + ".tmp", out)
    return out


def run_child(binary_path, landing, cores):
    """One `--once` ingest into a fresh table, pinned to the first `cores` cores: (wall s,
    the child's peak RSS MiB and CPU s from os.wait4, the `--json` summary or None when
    it failed, the tail of its stderr)."""
    runs = os.path.join(bench.ROOT, "scaling-runs")
    shutil.rmtree(runs, ignore_errors=True)
    os.makedirs(runs)
    cmd = ["taskset", "-c", "0-%d" % (cores - 1), binary_path, "ingest", landing,
           os.path.join(runs, "table"), "--once", "--json",
           "-o", "cloudFiles.inferColumnTypes=true"]
    out_path, err_path = os.path.join(runs, "stdout"), os.path.join(runs, "stderr")
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - t0
    with open(out_path, errors="replace") as f:
        lines = f.read().splitlines()
    with open(err_path, errors="replace") as f:
        err_tail = f.read()[-2000:]
    summary = None
    if os.waitstatus_to_exitcode(status) == 0:
        summary = next((json.loads(l) for l in reversed(lines) if l.startswith("{")), None)
    # ru_maxrss is in KiB on Linux.
    return wall, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime, summary, err_tail


def measure(binary_path, name, path, manifest, cores, repeat):
    """The best wall time of `repeat` runs at `cores` cores (with that run's CPU time),
    and the largest peak RSS of them; every run's row count checked."""
    best = None
    rss = 0.0
    for _ in range(repeat):
        wall, rss_mib, cpu, summary, err = run_child(binary_path, os.path.join(path, "landing"),
                                                     cores)
        if summary is None or summary.get("rows") != manifest["rows"]:
            raise SystemExit("%s at %d cores: %s rows (expected %d)\n%s" % (
                name, cores, summary and summary.get("rows"), manifest["rows"], err))
        rss = max(rss, rss_mib)
        if best is None or wall < best["wall"]:
            best = {"cores": cores, "wall": wall, "cpu": cpu}
    best["rss_mib"] = rss
    return best


def core_counts(available, asked):
    if asked:
        counts = [int(c) for c in asked.split(",")]
    else:
        counts, n = [], 1
        while n < available:
            counts.append(n)
            n *= 2
        counts.append(available)
    too_many = [c for c in counts if c < 1 or c > available]
    if too_many:
        raise SystemExit("asked for %s cores; this machine has %d" % (too_many, available))
    return counts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", required=True, help="the release binary, or it xz-compressed")
    ap.add_argument("--cores", help="core counts, e.g. 1,2,4 (default: 1, 2, 4, ... and all)")
    ap.add_argument("--repeat", type=int, default=2, help="tries per core count (best kept)")
    ap.add_argument("--only", default=",".join(SETS), help="sets: bulk, small")
    ap.add_argument("--quick", action="store_true", help="bench/run.py's quick sizes")
    ap.add_argument("--out", default=os.environ.get("OUT") or bench.ROOT,
                    help="where scaling.md and scaling.json go (default $OUT, else %s)"
                    % bench.ROOT)
    args = ap.parse_args()
    available = len(os.sched_getaffinity(0))
    counts = core_counts(available, args.cores)
    size = "quick" if args.quick else "full"
    binary_path = binary(args.bin)
    results = {"cores_available": available, "size": size, "sets": {}}
    for name in args.only.split(","):
        path, m = dataset(name, size)
        rows = []
        for n in counts:
            r = measure(binary_path, name, path, m, n, args.repeat)
            rows.append(r)
            print("%s %2d cores: %6.2f s, %5.0f MiB, CPU %.1f s" % (
                name, n, r["wall"], r["rss_mib"], r["cpu"]), flush=True)
        results["sets"][name] = {"files": m["files"], "rows": m["rows"], "bytes": m["bytes"],
                                 "runs": rows}
    report = render(results, counts)
    print(report)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "scaling.md"), "w") as f:
        f.write(report)
    with open(os.path.join(args.out, "scaling.json"), "w") as f:
        json.dump(results, f, indent=1)


def render(results, counts):
    lines = ["Scaling with cores: `taskset -c 0-(n-1)`, best of the tries, %d cores on this "
             "machine, %s sizes" % (results["cores_available"], results["size"]), ""]
    targets = []
    for name, s in results["sets"].items():
        base = s["runs"][0]
        lines += ["%s: %d files, %.0f MB, %d rows" % (name, s["files"], s["bytes"] / 1e6,
                                                       s["rows"]), "",
                  "| cores | wall s | files/s | MB/s | speedup | efficiency | peak RSS MiB "
                  "| CPU s |", "|---|---|---|---|---|---|---|---|"]
        for r in s["runs"]:
            speedup = base["wall"] / r["wall"] * base["cores"]
            r["speedup"], r["efficiency"] = speedup, speedup / r["cores"]
            lines.append("| %d | %.2f | %.0f | %.0f | %.2fx | %.2f | %.0f | %.1f |" % (
                r["cores"], r["wall"], s["files"] / r["wall"], s["bytes"] / 1e6 / r["wall"],
                speedup, r["efficiency"], r["rss_mib"], r["cpu"]))
        lines.append("")
        if base["cores"] != 1:
            continue
        if name == "small":
            upto8 = [r for r in s["runs"] if 1 < r["cores"] <= 8]
            if upto8:
                worst = min(upto8, key=lambda r: r["speedup"] / (0.5 * r["cores"]))
                ok = all(r["speedup"] >= 0.5 * r["cores"] for r in upto8)
                targets.append(("small files: speedup >= 0.5 x cores up to 8",
                                "%.2fx at %d cores (needs %.1fx)" % (
                                    worst["speedup"], worst["cores"], 0.5 * worst["cores"]),
                                ok))
        if name == "bulk" and len(s["runs"]) > 1:
            last = s["runs"][-1]
            targets.append(("bulk: efficiency >= 0.8 at %d cores" % last["cores"],
                            "%.2f (%.2fx)" % (last["efficiency"], last["speedup"]),
                            last["efficiency"] >= 0.8))
            slope = (last["rss_mib"] - base["rss_mib"]) / (last["cores"] - 1)
            targets.append(("bulk: peak RSS grows <= 32 MiB a core",
                            "%.1f MiB a core (%.0f to %.0f MiB)" % (
                                slope, base["rss_mib"], last["rss_mib"]), slope <= 32))
    if targets:
        lines += ["| target | measured | result |", "|---|---|---|"]
        lines += ["| %s | %s | %s |" % (t, m, "PASS" if ok else "FAIL") for t, m, ok in targets]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
