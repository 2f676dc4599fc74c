#!/usr/bin/env python3
"""Scaling with cores (issue 40): the `bulk` and `small` sets of bench/run.py ingested by
one binary pinned to 1, 2, 4, ... of the CPUs it may use with `taskset`, each a fresh `--once` run into a
fresh table. Prints, per core count, the best wall time of `--repeat` tries, throughput,
speedup over one core, efficiency (speedup / cores) and peak RSS, then the issue's
targets with PASS/FAIL:

- small files: files/s at n cores >= 0.5 x n x files/s at one core, for n up to 8;
- bulk: efficiency >= 0.8 at the largest core count (16 on the machine it was made for);
- bulk: peak RSS growing by no more than 32 MiB a core.

Standard library only (bench/run.py generates the data, on every core), so that it runs as
one prepared command on a lent machine that can install nothing and reach nothing:

    mkdir -p out && strip -o out/autoloader target/release/autoloader && xz -T0 -f out/autoloader
    python3 bench/scaling.py --bin out/autoloader.xz --out "$OUT"    # carry out/autoloader.xz

The data sets and their cache (/tmp/autoloader-bench/data) are bench/run.py's; every run's row count is checked against the set's manifest
(the `--json` summary's `rows`), so a fast wrong answer cannot count.
"""

import argparse
import json
import lzma
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as bench  # noqa: E402  (the data sets and their cache, bench/run.py's)

SETS = ("bulk", "small")


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


def run_child(binary_path, landing, cpus):
    """One `--once` ingest into a fresh table, pinned to `cpus`: (wall s,
    the child's peak RSS MiB and CPU s from os.wait4, the `--json` summary or None when
    it failed, the tail of its stderr)."""
    runs = os.path.join(bench.ROOT, "scaling-runs")
    shutil.rmtree(runs, ignore_errors=True)
    os.makedirs(runs)
    cmd = ["taskset", "-c", ",".join(map(str, cpus)), binary_path, "ingest", landing,
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
    """The best wall time of `repeat` runs on the first `cores` of the CPUs this process
    may use (with that run's CPU time), and the largest peak RSS of them; every run's row
    count checked."""
    cpus = sorted(os.sched_getaffinity(0))[:cores]
    best = None
    rss = 0.0
    for _ in range(repeat):
        wall, rss_mib, cpu, summary, err = run_child(binary_path, os.path.join(path, "landing"),
                                                     cpus)
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
        path, m = bench.dataset(name, size)
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
    lines = ["Scaling with cores: `taskset` to the first n CPUs, best of the tries, %d cores on this "
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
