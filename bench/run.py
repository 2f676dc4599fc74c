#!/usr/bin/env python3
"""autoloader performance benchmark (issue 7).

One command:  python3 bench/run.py            (full sizes, about 1 GiB per big set)
              python3 bench/run.py --quick    (about 1/20 of the sizes)
              python3 bench/run.py --only bulk,small

It builds the release binary, generates deterministic data (cached under
/tmp/autoloader-bench/data/<set>-<size>), then for each data set runs autoloader and,
when installed, DuckDB -> Delta and Polars -> Delta, one measured process at a time.
The `silver` set reads a Delta table instead (bronze -> silver), against Python
`deltalake` copying the table (and, after one small commit, its `load_cdf`).
The `cdc` set applies change records (APPLY CHANGES, SCD type 1) to a keyed target, against
Python `deltalake`'s `merge`, and compares both tables with the expected final state.
Each run gets a fresh table directory; every table is read back with Python `deltalake`
in a separate process and its row count and sum(order_id) are checked against what was
generated, so a fast wrong answer cannot win. Prints one table of figures and the
targets of issue 7 with PASS/FAIL.

Peak RSS is the child's ru_maxrss from os.wait4 (one child per measurement). Wall time
is the whole process. For the competitors the Python interpreter start and imports are
excluded from the throughput they are credited with (their in-process "work" time), which
can only make our ratio smaller.
"""

import argparse
import base64
import datetime as dt
import io
import json
import multiprocessing
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(REPO, "target", "release", "autoloader")
ROOT = "/tmp/autoloader-bench"
DATA = os.path.join(ROOT, "data")
RUNS = os.path.join(ROOT, "runs")

GEN_VERSION = 3  # bump when the generator changes: cached data is regenerated
SEED = 20260307
AVG_JSON_ROW = 502  # measured mean JSON line length of the generator (bytes, with newline)
GIB = 1 << 30
MIB = 1 << 20

LOADS = []  # 1-minute load average just before each measured process
OUR_TIMEOUT = 1800

SETS = ["bulk", "csv", "drift", "small", "restart", "wide", "silver", "cdc", "expect"]
# `expect`: the bulk data ingested without rules and with three (warn, drop, quarantine),
# the runs interleaved, to price the expectations (EXPECT_RULES).
# `cdc`: APPLY CHANGES (SCD type 1) batches against Python deltalake's merge (CDC_SIZES).
# `silver`: a Delta table as the source (bronze -> silver). The bronze table is the bulk
# data set ingested by autoloader in up to SILVER_COMMITS commits (cached); then a first
# catch-up into a fresh silver table, and an incremental run after one small commit.
SILVER_COMMITS = 20
SILVER_EXTRA_ROWS = 1_000       # rows of the small commit appended to (a copy of) bronze
SILVER_EXTRA_ID_OFFSET = 100_000_000  # added to their order_id, so every id stays unique
# `wide`: each file holds one order whose note is ~48 MB of text among ordinary orders,
# for the memory target ("whatever the line sizes"); only autoloader is run on it.
WIDE_NOTE_BYTES = 36_000_000  # random bytes, base64-encoded to 48 MB

# (files, rows per file) per data set and size; bulk is ~1 GiB in 200 files.
BULK_ROWS_PER_FILE = round(GIB / 200 / AVG_JSON_ROW)
SIZES = {
    "full": {
        "bulk": (200, BULK_ROWS_PER_FILE),
        "csv": (200, BULK_ROWS_PER_FILE),
        "drift": (200, BULK_ROWS_PER_FILE),
        "small": (20_000, 4),
        "restart": (100_000, 1),
        "wide": (8, 2_000),
    },
    "quick": {
        "bulk": (10, BULK_ROWS_PER_FILE),
        "csv": (10, BULK_ROWS_PER_FILE),
        "drift": (10, BULK_ROWS_PER_FILE),
        "small": (1_000, 4),
        "restart": (10_000, 1),
        "wide": (2, 2_000),
    },
}

# ---------------------------------------------------------------------------------------
# Deterministic order generator
# ---------------------------------------------------------------------------------------

FIRST = ["Minjun", "Seoyeon", "Jiho", "Haeun", "Olivia", "Liam", "Emma", "Noah", "Yuki",
         "Hiroshi", "Sofia", "Lucas", "Mia", "Mateo", "Ava", "Ethan", "지민", "서준", "하윤"]
LAST = ["Kim", "Lee", "Park", "Choi", "Jung", "Smith", "Garcia", "Müller", "Tanaka",
        "Rossi", "Dubois", "Nguyen", "Brown", "Wilson", "김", "이", "박"]
CITIES = [("Seoul", "KR"), ("Busan", "KR"), ("Incheon", "KR"), ("Daegu", "KR"),
          ("Tokyo", "JP"), ("Osaka", "JP"), ("Berlin", "DE"), ("Paris", "FR"),
          ("New York", "US"), ("Austin", "US"), ("Boston", "US")]
STREETS = ["Gangnam-daero", "Teheran-ro", "Main St", "Oak Ave", "Hauptstraße",
           "Rue de Rivoli", "Sakura-dori", "Sejong-daero", "Elm St", "Market St"]
CURRENCIES = ["KRW"] * 6 + ["USD"] * 2 + ["EUR", "JPY"]
STATUSES = ["pending", "paid", "paid", "shipped", "shipped", "delivered", "delivered",
            "delivered", "cancelled", "refunded"]
NOTES = ["Leave at the door", "Call before delivery, please", "Fragile", "No plastic bag",
         "Deliver after 6 pm, thanks"]
GIFTS = ["Happy birthday!", "Congratulations", "With love, from Seoul", "Thank you"]
COUPONS = ["SPRING25", "WELCOME10", "VIP-2026", "FREESHIP"]
T0 = int(dt.datetime(2026, 3, 1, tzinfo=dt.timezone.utc).timestamp())


def ts(sec, ms):
    d = dt.datetime.fromtimestamp(sec, dt.timezone.utc)
    return "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ" % (d.year, d.month, d.day, d.hour,
                                                   d.minute, d.second, ms)


def gen_order(rng, order_id):
    """One order as a dict of plain values (None = JSON null, missing key = absent)."""
    city, country = rng.choice(CITIES)
    n_items = rng.choice((1, 1, 2, 2, 2, 3, 3, 4, 5))
    items = []
    total = 0.0
    for _ in range(n_items):
        qty = rng.randint(1, 5)
        price = rng.randrange(199, 99999) / 100
        total += qty * price
        items.append(("SKU-%06d" % rng.randrange(1_000_000), qty, price))
    created = T0 + rng.randrange(30 * 86400)
    status = rng.choice(STATUSES)
    cust = rng.randrange(1, 400_000)
    o = {
        "order_id": order_id,
        "user_id": "u%07d" % cust,
        "amount": round(total + rng.choice((0, 0, 3.5, 4.99)), 2),
        "currency": rng.choice(CURRENCIES),
        "created_at": ts(created, rng.randrange(1000)),
        "status": status,
        "shipped_at": ts(created + rng.randrange(3600, 3 * 86400), rng.randrange(1000))
        if status in ("shipped", "delivered") else None,
        "note": rng.choice(NOTES) if rng.random() < 0.1 else None,
        "customer_id": cust,
        "customer_name": "%s %s" % (rng.choice(FIRST), rng.choice(LAST)),
        "customer_email": "user%d@example.com" % cust if rng.random() < 0.85 else "ABSENT",
        "street": "%d %s" % (rng.randrange(1, 999), rng.choice(STREETS)),
        "city": city,
        # Korean-style 5-digit zips: many start with 0, which a number would lose.
        "zip": "%05d" % rng.randrange(1000, 64000),
        "country": country,
        "items": items,
    }
    if rng.random() < 0.05:
        o["gift_message"] = rng.choice(GIFTS)
    return o


def js(s):
    return "null" if s is None else json.dumps(s, ensure_ascii=False)


def json_line(o, drift=None):
    email = ("" if o["customer_email"] == "ABSENT"
             else ', "email": "%s"' % o["customer_email"])
    items = ", ".join('{"sku": "%s", "qty": %d, "price": %.2f}' % it for it in o["items"])
    amount = "%.2f" % o["amount"]
    extra = ""
    if drift:
        if drift.get("amount_text"):
            amount = js(drift["amount_text"])
        if "coupon_code" in drift:
            extra = ', "coupon_code": "%s", "discount_rate": %.2f' % (
                drift["coupon_code"], drift["discount_rate"])
    gift = ', "gift_message": %s' % js(o["gift_message"]) if "gift_message" in o else ""
    return (
        '{"order_id": %d, "user_id": "%s", "amount": %s, "currency": "%s", '
        '"created_at": "%s", "status": "%s", "shipped_at": %s, "note": %s, '
        '"customer": {"id": %d, "name": %s%s, "address": {"street": "%s", "city": "%s", '
        '"zip": "%s", "country": "%s"}}, "items": [%s]%s%s}\n'
    ) % (o["order_id"], o["user_id"], amount, o["currency"], o["created_at"], o["status"],
         js(o["shipped_at"]), js(o["note"]), o["customer_id"], js(o["customer_name"]), email,
         o["street"], o["city"], o["zip"], o["country"], items, gift, extra)


CSV_HEADER = ("order_id,user_id,amount,currency,created_at,status,shipped_at,note,"
              "customer_id,customer_name,customer_email,customer_street,customer_city,"
              "customer_zip,customer_country,item_count,items,gift_message\n")


def csv_field(v):
    if v is None or v == "ABSENT":
        return ""
    s = str(v)
    return '"%s"' % s if ("," in s or '"' in s) else s


def csv_line(o):
    items = ";".join("%sx%d@%.2f" % it for it in o["items"])
    vals = [o["order_id"], o["user_id"], "%.2f" % o["amount"], o["currency"],
            o["created_at"], o["status"], o["shipped_at"], o["note"], o["customer_id"],
            o["customer_name"], o["customer_email"], o["street"], o["city"], o["zip"],
            o["country"], len(o["items"]), items, o.get("gift_message")]
    return ",".join(csv_field(v) for v in vals) + "\n"


def write_file(job):
    """Writes file `i` of a set into `tmp` (its generator seeded by the set's stream and
    the file's number, so files can be written in any order, on any core); returns what it
    adds to the manifest."""
    name, size, i, tmp = job
    files, rows_per_file = SIZES[size][name]
    ext = "csv" if name == "csv" else "json"
    # Sets derived from the bulk stream share its orders: csv is bulk flattened, drift is
    # bulk with drift in the second half. small/restart have their own streams.
    stream = "bulk" if name in ("bulk", "csv", "drift") else name
    order_id = {"bulk": 1, "small": 10_000_001, "restart": 20_000_001,
                "wide": 30_000_001}[stream] + i * rows_per_file
    mtime0 = 1_772_323_200  # 2026-03-01; file i gets mtime0 + i, so ingestion order is fixed
    rng = random.Random("%d-%s-%d" % (SEED, stream, i))
    part = ""
    drift_rng = None
    if name == "drift":
        part = "part1" if i < files // 2 else "part2"
        if part == "part2":
            drift_rng = random.Random("%d-drift-%d" % (SEED, i))
    d = os.path.join(tmp, "landing", part)
    os.makedirs(d, exist_ok=True)
    fname = os.path.join(d, "orders-%06d.%s" % (i, ext))
    added = {"part": part, "order_id_sum": 0, "note_count": 0, "gift_message_count": 0,
             "rescued_expected": 0}
    out = []
    if ext == "csv":
        out.append(CSV_HEADER)
    for k in range(rows_per_file):
        o = gen_order(rng, order_id)
        if name == "wide" and k == rows_per_file // 2:
            o["note"] = base64.b64encode(rng.randbytes(WIDE_NOTE_BYTES)).decode()
        added["order_id_sum"] += order_id
        added["note_count"] += o["note"] is not None
        added["gift_message_count"] += "gift_message" in o
        order_id += 1
        if ext == "csv":
            out.append(csv_line(o))
        else:
            drift = None
            if drift_rng is not None:
                drift = {}
                if drift_rng.random() < 0.3:
                    drift["coupon_code"] = drift_rng.choice(COUPONS)
                    drift["discount_rate"] = drift_rng.randrange(5, 31) / 100
                if drift_rng.random() < 0.1:
                    # "5000 KRW": the amount in won as text (the type mismatch).
                    drift["amount_text"] = "%d KRW" % (round(o["amount"]) * 10)
                    added["rescued_expected"] += 1
            out.append(json_line(o, drift))
    data = "".join(out).encode()
    with open(fname, "wb") as f:
        f.write(data)
    os.utime(fname, (mtime0 + i, mtime0 + i))
    added["bytes"] = len(data)
    return added


def generate(name, size, path):
    """Writes the data set into `path` (atomically), its files on every core (`wide`, whose
    files each hold a 48 MB line, two at a time), and returns its manifest."""
    files, rows_per_file = SIZES[size][name]
    tmp = path + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    manifest = {"set": name, "size": size, "gen_version": GEN_VERSION, "files": files,
                "rows": 0, "bytes": 0, "order_id_sum": 0, "rescued_expected": 0,
                "note_count": 0, "gift_message_count": 0,
                "parts": {}}
    t = time.time()
    workers = 2 if name == "wide" else os.cpu_count()
    jobs = [(name, size, i, tmp) for i in range(files)]
    with multiprocessing.Pool(workers) as pool:
        done = pool.imap(write_file, jobs, chunksize=max(1, files // (8 * workers)))
        for i, added in enumerate(done):
            manifest["rows"] += rows_per_file
            manifest["bytes"] += added["bytes"]
            for key in ("order_id_sum", "note_count", "gift_message_count",
                        "rescued_expected"):
                manifest[key] += added[key]
            if added["part"]:
                p = manifest["parts"].setdefault(added["part"],
                                                 {"files": 0, "rows": 0, "bytes": 0})
                p["files"] += 1
                p["rows"] += rows_per_file
                p["bytes"] += added["bytes"]
            if (i + 1) % max(1, files // 10) == 0:
                print("  generated %s-%s: %d/%d files, %.0f MB, %.0f s" % (
                    name, size, i + 1, files, manifest["bytes"] / 1e6, time.time() - t),
                    flush=True)
    with open(os.path.join(tmp, "manifest.json"), "w") as f:
        json.dump(manifest, f)
    shutil.rmtree(path, ignore_errors=True)
    os.rename(tmp, path)
    return manifest


def dataset(name, size):
    path = os.path.join(DATA, "%s-%s" % (name, size))
    mpath = os.path.join(path, "manifest.json")
    if os.path.exists(mpath):
        with open(mpath) as f:
            m = json.load(f)
        if m.get("gen_version") == GEN_VERSION:
            return path, m
    print("generating %s-%s into %s" % (name, size, path), flush=True)
    return path, generate(name, size, path)


def data_files(path, sub=""):
    d = os.path.join(path, "landing", sub)
    out = []
    for root, _, names in os.walk(d):
        for n in names:
            if n.endswith((".json", ".csv")):
                out.append(os.path.join(root, n))
    return sorted(out)


def warm(files):
    """Reads every input file once so the page cache is warm for the measured run."""
    buf = bytearray(1 << 20)
    for p in files:
        with open(p, "rb", buffering=0) as f:
            while f.readinto(buf):
                pass


# ---------------------------------------------------------------------------------------
# Measured child processes
# ---------------------------------------------------------------------------------------

def measure(cmd, log_prefix, timeout):
    """Runs one child; returns (exit code or 'timeout', wall s, peak RSS MiB, stdout, stderr)."""
    out_path, err_path = log_prefix + ".out", log_prefix + ".err"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                             start_new_session=True)
        deadline = t0 + timeout
        status = None
        while True:
            pid, st, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                status = st
                break
            if time.perf_counter() > deadline:
                os.killpg(p.pid, signal.SIGKILL)
                pid, st, ru = os.wait4(p.pid, 0)
                status = "timeout"
                break
            time.sleep(0.002)
        wall = time.perf_counter() - t0
        p.returncode = 0  # reaped by wait4 already
    rc = status if status == "timeout" else os.waitstatus_to_exitcode(status)
    with open(out_path, errors="replace") as f:
        stdout = f.read()
    with open(err_path, errors="replace") as f:
        stderr = f.read()
    return rc, wall, ru.ru_maxrss / 1024.0, stdout, stderr


def short(text, n=160):
    lines = [l.strip() for l in text.strip().splitlines() if l.strip()]
    # prefer the line that carries the exception / error message
    for l in reversed(lines):
        if re.search(r"error|exception|failed|panicked", l, re.I):
            return l[:n]
    return (lines[-1] if lines else "")[:n]


def last_json(stdout):
    for line in reversed(stdout.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                pass
    return None


def readback(table, name):
    rc, wall, rss, out, err = measure(
        [sys.executable, os.path.abspath(__file__), "--readback", table],
        os.path.join(RUNS, name + "-readback"), 600)
    r = last_json(out)
    if r is None:
        return {"error": "readback failed (exit %s): %s" % (rc, short(err))}
    return r


def count_table_files(table):
    parquet = 0
    for root, dirs, names in os.walk(table):
        dirs[:] = [d for d in dirs if not d.startswith("_")]
        parquet += sum(1 for n in names if n.endswith(".parquet"))
    log = os.path.join(table, "_delta_log")
    commits = len([n for n in os.listdir(log) if n.endswith(".json")]) if os.path.isdir(log) else 0
    return parquet, commits


def autoloader_cmd(src, table, extra=()):
    return [BIN, "ingest", src, table, "--once", "--json", "-o", "cloudFiles.inferColumnTypes=true",
            *extra]


def summary(out):
    """The run's `--json` summary object, or None."""
    for line in reversed(out.splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None


def run_ours(name, path, m, args):
    """autoloader on a fresh table. drift runs in two phases (part2 lands after part1)."""
    table = os.path.join(RUNS, name, "autoloader")
    shutil.rmtree(os.path.join(RUNS, name), ignore_errors=True)
    os.makedirs(os.path.join(RUNS, name))
    res = {"tool": "autoloader", "wall": 0.0, "rss": 0.0, "phases": [], "rescued": 0}
    if name == "drift":
        # Stage hard links so that the second half appears after the first was ingested.
        src = os.path.join(RUNS, name, "landing")
        os.makedirs(src)
        phases = ["part1", "part2"]
    else:
        src = os.path.join(path, "landing")
        phases = [""]
    for ph in phases:
        if ph:
            for f in data_files(path, ph):
                os.link(f, os.path.join(src, os.path.basename(f)))
        files = data_files(path, ph) if ph else data_files(path)
        warm(files)
        LOADS.append(os.getloadavg()[0])
        rc, wall, rss, out, err = measure(autoloader_cmd(src, table),
                                          os.path.join(RUNS, name, "autoloader" + ph), OUR_TIMEOUT)
        inf = re.search(r"Inferred schema\..*?seconds=([0-9.]+)", err)
        if inf:
            res["infer_s"] = res.get("infer_s", 0.0) + float(inf.group(1))
        # A large first run infers while reading its first batch (one pass).
        if "provisional schema" in err:
            res["one_pass"] = res.get("one_pass", 0) + 1
            if "reading the batch again" in err:
                res["reread"] = res.get("reread", 0) + 1
        res["wall"] += wall
        res["rss"] = max(res["rss"], rss)
        res["phases"].append(round(wall, 2))
        s = summary(out)
        if rc != 0 or not s or s.get("status") != "done":
            res["error"] = "exit %s: %s" % (rc, short(err or out))
            res["cmd"] = " ".join(autoloader_cmd(src, table))
            return res
        res["rescued"] += s["rescuedRows"]
        res["schema_version"] = s["schemaVersion"]
        res["batches"] = res.get("batches", 0) + s["batches"]
    res["check"] = readback(table, name + "-autoloader")
    res["parquet_files"], res["commits"] = count_table_files(table)
    res["table"] = table
    res["src"] = src
    return res


# Three rules on the bulk orders: a warn rule that fails the refunded orders (~10%), a
# drop rule no row fails, and a quarantine rule that takes the JPY orders (~10%).
EXPECT_RULES = ["--expect", "not_refunded=status != 'refunded'",
                "--expect-or-drop", "positive=amount > 0",
                "--expect-or-quarantine", "known_currency=currency IN ('KRW', 'USD', 'EUR')"]


def run_expect(size, args):
    """The bulk set without rules and with EXPECT_RULES, alternately, at least 3 times
    each; every run's rows + dropped + quarantined must be the set's rows."""
    path, m = dataset("bulk", size)
    src = os.path.join(path, "landing")
    out = {"plain": [], "rules": []}
    for i in range(max(3, args.repeat)):
        for kind in ("plain", "rules"):
            table = os.path.join(RUNS, "expect", kind)
            shutil.rmtree(table, ignore_errors=True)
            os.makedirs(os.path.join(RUNS, "expect"), exist_ok=True)
            extra = EXPECT_RULES if kind == "rules" else []
            warm(data_files(path))
            LOADS.append(os.getloadavg()[0])
            cmd = autoloader_cmd(src, table, extra)
            rc, wall, rss, stdout, err = measure(cmd, os.path.join(RUNS, "expect", kind),
                                                 OUR_TIMEOUT)
            s = summary(stdout) or {}
            landed = s.get("rows", 0) + s.get("droppedRows", 0) + s.get("quarantinedRows", 0)
            ok = rc == 0 and landed == m["rows"]
            out[kind].append({"wall": wall, "rss": rss, "ok": ok, "rows": s.get("rows"),
                              "quarantined": s.get("quarantinedRows"),
                              "error": None if ok else "exit %s: %s" % (rc, short(err))})
            print("  %s run %d: %.2f s, %.0f MiB%s" % (kind, i + 1, wall, rss,
                  "" if ok else ", " + out[kind][-1]["error"]), flush=True)
    return {"m": m, "runs": out}


def expect_report(e):
    """Lines and a target for the `expect` set."""
    best = {k: min(r["wall"] for r in v) for k, v in e["runs"].items()}
    median = {k: sorted(r["wall"] for r in v)[len(v) // 2] for k, v in e["runs"].items()}
    rss = {k: max(r["rss"] for r in v) for k, v in e["runs"].items()}
    ok = all(r["ok"] for v in e["runs"].values() for r in v)
    cost = best["rules"] / best["plain"] - 1
    lines = ["", "expect: the bulk set (%d rows) without rules and with 3 (warn, drop, "
             "quarantine; %s rows quarantined), runs interleaved" % (
                 e["m"]["rows"], e["runs"]["rules"][0]["quarantined"]), "",
             "| run | best s | median s | peak RSS MiB |", "|---|---|---|---|"]
    for k in ("plain", "rules"):
        lines.append("| %s | %.2f | %.2f | %.0f |" % (k, best[k], median[k], rss[k]))
    target = "| expectations cost < 10%% on bulk (3 rules) | %+.1f%% (best), %+.1f%% (median)%s | %s |" % (
        cost * 100, (median["rules"] / median["plain"] - 1) * 100,
        "" if ok else "; a run's counts were wrong", "met" if ok and cost < 0.10 else "NOT met")
    return lines, [target]


def run_competitor(tool, name, path, m, args):
    table = os.path.join(RUNS, name, tool)
    shutil.rmtree(table, ignore_errors=True)
    fmt = "csv" if name == "csv" else "json"
    ext = "." + fmt
    if name == "drift":
        phases = [os.path.join(path, "landing", p, "*" + ext) for p in ("part1", "part2")]
    else:
        phases = [os.path.join(path, "landing", "*" + ext)]
    spec = {"tool": tool, "fmt": fmt, "table": table, "phases": phases}
    spec_path = os.path.join(RUNS, name, tool + "-spec.json")
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    warm(data_files(path))
    LOADS.append(os.getloadavg()[0])
    rc, wall, rss, out, err = measure(
        [sys.executable, os.path.abspath(__file__), "--worker", spec_path],
        os.path.join(RUNS, name, tool), args.timeout)
    res = {"tool": tool, "wall": wall, "rss": rss}
    r = last_json(out)
    if rc == "timeout":
        res["error"] = "timeout: capped at %d s" % args.timeout
        return res
    if r is None:
        res["error"] = "exit %s: %s" % (rc, short(err or out))
        return res
    if not r.get("ok"):
        res["error"] = r.get("error", "failed")[:160]
        return res
    res["work"] = r["work_s"]
    res["phases"] = r.get("phase_s")
    res["check"] = readback(table, name + "-" + tool)
    return res


def table_parquet(table):
    """(count, bytes) of the Parquet files below a table, `_` folders left out."""
    n = b = 0
    for root, dirs, names in os.walk(table):
        dirs[:] = [d for d in dirs if not d.startswith("_")]
        for x in names:
            if x.endswith(".parquet"):
                n += 1
                b += os.path.getsize(os.path.join(root, x))
    return n, b


def bronze_table(size):
    """The bronze Delta table of the `silver` set: the bulk data set ingested by
    autoloader in up to SILVER_COMMITS commits (cloudFiles.maxFilesPerTrigger), cached in
    data/silver-<size>/bronze with a manifest of what it holds."""
    bulk_path, bm = dataset("bulk", size)
    path = os.path.join(DATA, "silver-%s" % size)
    mpath = os.path.join(path, "manifest.json")
    if os.path.exists(mpath):
        with open(mpath) as f:
            m = json.load(f)
        if m.get("gen_version") == GEN_VERSION:
            return os.path.join(path, "bronze"), m
    tmp = path + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    per = -(-bm["files"] // SILVER_COMMITS)
    bronze = os.path.join(tmp, "bronze")
    cmd = autoloader_cmd(os.path.join(bulk_path, "landing"), bronze,
                         ("-o", "cloudFiles.maxFilesPerTrigger=%d" % per))
    print("building the bronze table into %s (%d files per commit)" % (bronze, per), flush=True)
    rc, wall, rss, out, err = measure(cmd, os.path.join(tmp, "build"), OUR_TIMEOUT)
    if rc != 0:
        sys.exit("building the bronze table failed (exit %s): %s\n  %s" % (
            rc, short(err or out), " ".join(cmd)))
    check = readback(bronze, "silver-bronze")
    if check.get("rows") != bm["rows"] or check.get("order_id_sum") != bm["order_id_sum"]:
        sys.exit("the bronze table does not hold the bulk data set: %s" % check)
    files, nbytes = table_parquet(bronze)
    m = {k: bm[k] for k in ("rows", "order_id_sum", "note_count", "gift_message_count")}
    m.update({"set": "silver", "size": size, "gen_version": GEN_VERSION,
              "files": files, "bytes": nbytes, "version": check["version"],
              "commits": check["version"] + 1, "landing_bytes": bm["bytes"]})
    with open(os.path.join(tmp, "manifest.json"), "w") as f:
        json.dump(m, f)
    shutil.rmtree(path, ignore_errors=True)
    os.rename(tmp, path)
    return os.path.join(path, "bronze"), m


def silver_python(tool, spec, log, args):
    spec = dict(spec, tool=tool)
    spec_path = log + "-spec.json"
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    LOADS.append(os.getloadavg()[0])
    rc, wall, rss, out, err = measure(
        [sys.executable, os.path.abspath(__file__), "--worker", spec_path], log, args.timeout)
    res = {"tool": tool, "wall": wall, "rss": rss}
    r = last_json(out)
    if rc == "timeout":
        res["error"] = "timeout: capped at %d s" % args.timeout
    elif r is None:
        res["error"] = "exit %s: %s" % (rc, short(err or out))
    elif not r.get("ok"):
        res["error"] = r.get("error", "failed")[:160]
    else:
        res["work"] = r["work_s"]
        res["out"] = r
    return res


def run_silver_try(bronze, m, args, python):
    """One try of the `silver` set, every step its own process, one at a time, on a
    hard-linked copy of the cached bronze table (a commit only adds files, so the cache is
    never written): the first catch-up by each tool into a fresh silver table, then one
    small commit appended to the copy, then each tool's incremental run. Returns
    {(phase, tool): result} and what the small commit holds (rows, sums, Parquet bytes)."""
    base = os.path.join(RUNS, "silver")
    shutil.rmtree(base, ignore_errors=True)
    os.makedirs(base)
    src = os.path.join(base, "bronze")
    subprocess.run(["cp", "-al", bronze, src], check=True)
    shutil.rmtree(os.path.join(src, "_autoloader"))  # the bronze stream's, not needed
    ours_t, py_t = os.path.join(base, "autoloader"), os.path.join(base, "deltalake")
    parquet = [os.path.join(r, x) for r, _, ns in os.walk(src) for x in ns if x.endswith(".parquet")]
    out = {}

    def ours(phase):
        warm(parquet)
        LOADS.append(os.getloadavg()[0])
        cmd = [BIN, "ingest", src, ours_t, "--once", "--json"]
        rc, wall, rss, o, err = measure(cmd, os.path.join(base, "autoloader-" + phase), OUR_TIMEOUT)
        res = {"tool": "autoloader", "wall": wall, "rss": rss}
        s = summary(o)
        if rc != 0 or not s or s.get("status") != "done":
            res["error"] = "exit %s: %s" % (rc, short(err or o))
            res["cmd"] = " ".join(cmd)
        else:
            res["files"] = s.get("files")
            res["batches"] = s.get("batches")
            res["check"] = readback(ours_t, "silver/autoloader-" + phase)
            res["parquet_files"], res["commits"] = count_table_files(ours_t)
        out[(phase, "autoloader")] = res

    def theirs(phase, tool, **kw):
        warm(parquet)
        res = silver_python(tool, {"source": src, "table": py_t, **kw},
                            os.path.join(base, "%s-%s" % (tool, phase)), args)
        if "error" not in res:
            res["check"] = readback(py_t, "silver/%s-%s" % (tool, phase))
        out[(phase, tool)] = res

    ours("catchup")
    if python:
        theirs("catchup", "deltalake-copy")
    # the small commit (not measured)
    r = silver_python("append", {"source": src, "rows": SILVER_EXTRA_ROWS,
                                 "id_offset": SILVER_EXTRA_ID_OFFSET},
                      os.path.join(base, "append"), args)
    if "error" in r:
        sys.exit("appending the small commit to %s failed: %s" % (src, r["error"]))
    extra = r["out"]
    extra["bytes"] = table_parquet(src)[1] - m["bytes"]  # the new commit's Parquet
    parquet[:] = [os.path.join(rt, x) for rt, _, ns in os.walk(src) for x in ns if x.endswith(".parquet")]
    ours("incremental")
    if python:
        # load_cdf first: it appends to the silver table the copy above left
        theirs("incremental", "deltalake-cdf", after_version=m["version"])
        theirs("incremental", "deltalake-copy")
    return out, extra


def run_silver(size, args, python):
    bronze, m = bronze_table(size)
    tries = [run_silver_try(bronze, m, args, python) for _ in range(args.repeat)]
    extra = tries[0][1]
    after = {k: m[k] + extra[k] for k in ("rows", "order_id_sum", "note_count", "gift_message_count")}
    after.update(bytes=extra["bytes"], files=1)
    best = {}
    for key in tries[0][0]:
        rs = [t[0][key] for t in tries]
        good = [r for r in rs if "error" not in r]
        b = min(good, key=lambda r: r.get("work", r["wall"])) if good else rs[-1]
        b["rss"] = max(r["rss"] for r in rs)
        if len(rs) > 1:
            b["tries"] = [round(r.get("work", r["wall"]), 2) for r in rs]
        best[key] = b
    return {"bronze": bronze, "m": m, "after": after, "extra": extra, "best": best}


def best_of(n, run):
    """Runs a measurement n times; keeps the fastest successful one (a failure if all
    fail), with the highest peak RSS seen over all of them."""
    tries = [run() for _ in range(n)]
    good = [t for t in tries if "error" not in t]
    best = min(good, key=lambda t: t.get("work", t["wall"])) if good else tries[-1]
    best["rss"] = max(t["rss"] for t in tries)
    if n > 1:
        best["tries"] = [round(t.get("work", t["wall"]), 2) for t in tries]
    return best


def git(*a):
    r = subprocess.run(["git", "-C", REPO, *a], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else ""


def build(args):
    """Builds the binary and copies it out of target/, so that a rebuild by someone else
    during the run cannot swap it. Returns (binary path, description of what was built)."""
    bindir = os.path.join(ROOT, "bin")
    os.makedirs(bindir, exist_ok=True)
    if args.bin:
        built = os.path.abspath(args.bin)
        if not os.path.exists(built):
            sys.exit("no binary at %s" % built)
        h = subprocess.run(["sha256sum", built], capture_output=True, text=True).stdout[:12]
        note = "prebuilt %s (sha256 %s)" % (built, h)
    elif args.rev:
        sha = git("rev-parse", "--verify", args.rev + "^{commit}")
        if not sha:
            sys.exit("unknown revision %r" % args.rev)
        src = os.path.join(ROOT, "build", "src-" + sha[:12])
        target = os.path.join(ROOT, "build", "target")
        if not os.path.isdir(src):
            # a plain export of the commit: read-only for the repository
            os.makedirs(src + ".tmp", exist_ok=True)
            arch = subprocess.Popen(["git", "-C", REPO, "archive", sha], stdout=subprocess.PIPE)
            subprocess.run(["tar", "-x", "-C", src + ".tmp"], stdin=arch.stdout, check=True)
            if arch.wait() != 0:
                sys.exit("git archive failed")
            # git archive stamps files with the commit time, older than the copied build
            # artefacts, which cargo would then take as up to date: stamp them now.
            subprocess.run(["find", src + ".tmp", "-exec", "touch", "{}", "+"], check=True)
            os.rename(src + ".tmp", src)
        if not os.path.isdir(target) and os.path.isdir(os.path.join(REPO, "target")):
            print("copying target/ to reuse compiled dependencies", flush=True)
            subprocess.run(["cp", "-a", os.path.join(REPO, "target"), target], check=True)
        print("cargo build --release (commit %s)" % sha[:12], flush=True)
        r = subprocess.run(["cargo", "build", "--release"], cwd=src,
                           env={**os.environ, "CARGO_TARGET_DIR": target})
        if r.returncode != 0:
            sys.exit("cargo build --release failed")
        built = os.path.join(target, "release", "autoloader")
        note = "commit %s" % sha[:12]
    else:
        if not args.no_build:
            print("cargo build --release", flush=True)
            r = subprocess.run(["cargo", "build", "--release"], cwd=REPO)
            if r.returncode != 0:
                sys.exit("cargo build --release failed")
        built = os.path.join(REPO, "target", "release", "autoloader")
        if not os.path.exists(built):
            sys.exit("no binary at %s" % built)
        dirty = git("status", "--porcelain", "--", "src", "Cargo.toml", "Cargo.lock")
        note = "working tree at %s%s" % (git("rev-parse", "--short=12", "HEAD") or "?",
                                         " + uncommitted changes" if dirty else "")
    dest = os.path.join(bindir, "autoloader")
    shutil.copy2(built, dest + ".tmp")
    os.replace(dest + ".tmp", dest)
    return dest, note


def installed(mod):
    r = subprocess.run([sys.executable, "-c", "import %s, os; print(%s.__version__, flush=True); os._exit(0)"
                        % (mod, mod)], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 and r.stdout.strip() else None


# ---------------------------------------------------------------------------------------
# Worker modes (run in their own processes)
# ---------------------------------------------------------------------------------------

def sample_lines(glob_pattern, n):
    """The first n lines of the files matching the pattern, in name order."""
    import glob as globmod
    out, count = [], 0
    for p in sorted(globmod.glob(glob_pattern)):
        with open(p, "rb") as f:
            for line in f:
                out.append(line)
                count += 1
                if count >= n:
                    return b"".join(out)
    return b"".join(out)


def worker(spec_path):
    with open(spec_path) as f:
        spec = json.load(f)
    if spec["tool"] == "cdc-merge":
        cdc_worker(spec)
    if spec["tool"].startswith("deltalake") or spec["tool"] == "append":
        silver_worker(spec)
    code = 0
    phase = 0
    try:
        t_imports = time.perf_counter()
        if spec["tool"] == "duckdb":
            import duckdb
            from deltalake import write_deltalake
        else:
            import polars as pl
        t0 = time.perf_counter()
        phase_s = []
        for i, glob in enumerate(spec["phases"]):
            phase = i + 1
            tp = time.perf_counter()
            mode = "overwrite" if i == 0 else "append"
            if spec["tool"] == "duckdb":
                con = duckdb.connect()
                fn = "read_csv_auto" if spec["fmt"] == "csv" else "read_json_auto"
                rel = con.sql("SELECT * FROM %s('%s')" % (fn, glob))
                reader = rel.to_arrow_reader(122_880)
                kw = {"schema_mode": "merge"} if i > 0 else {}
                write_deltalake(spec["table"], reader, mode=mode, **kw)
                con.close()
            else:
                # Polars infers from the first 100 rows by default, which makes an
                # all-null-so-far column Null and then fails to write it; DuckDB samples
                # 20,480 rows, so give Polars a comparable 10,000.
                # Its scan over many files takes the schema of the first file only, so
                # for JSON the schema is inferred from the first 10,000 lines across files.
                if spec["fmt"] == "csv":
                    lf = pl.scan_csv(glob, infer_schema_length=10_000)
                else:
                    schema = pl.read_ndjson(io.BytesIO(sample_lines(glob, 10_000)),
                                            infer_schema_length=None).schema
                    lf = pl.scan_ndjson(glob, schema=schema)
                lf.sink_delta(spec["table"], mode=mode,
                              delta_write_options={"schema_mode": "merge"} if i > 0 else None)
            phase_s.append(round(time.perf_counter() - tp, 3))
        res = {"ok": True, "work_s": time.perf_counter() - t0, "phase_s": phase_s,
               "import_s": t0 - t_imports}
    except BaseException as e:  # noqa: BLE001 - report any failure as a result
        msg = "%s: %s" % (type(e).__name__, str(e).strip().splitlines()[0] if str(e).strip() else "")
        if len(spec["phases"]) > 1:
            msg = "phase %d of %d: %s" % (phase, len(spec["phases"]), msg)
        res = {"ok": False, "error": msg}
        code = 1
    sys.stdout.write(json.dumps(res) + "\n")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # deltalake + pyarrow may abort at interpreter exit (delta-rs#2184)


def silver_worker(spec):
    """Python deltalake, bronze -> silver, as a user without a streaming reader would:
    `copy`: the whole table as of its latest version, streamed into write_deltalake
    (overwrite); `cdf`: the rows of the commits after `after_version`, from load_cdf,
    appended; `append`: the small commit added to the bronze copy (not measured)."""
    code = 0
    try:
        t_imports = time.perf_counter()
        import pyarrow as pa
        from deltalake import DeltaTable, write_deltalake
        t0 = time.perf_counter()
        res = {"ok": True}
        src = DeltaTable(spec["source"])
        if spec["tool"] == "append":
            import pyarrow.compute as pc
            t = src.to_pyarrow_dataset().head(spec["rows"])
            i = t.schema.get_field_index("order_id")
            ids = pc.add(t["order_id"], pa.scalar(spec["id_offset"], t["order_id"].type))
            t = t.set_column(i, t.schema.field(i), ids)
            write_deltalake(spec["source"], t, mode="append")
            res.update(rows=t.num_rows, order_id_sum=int(pc.sum(ids).as_py()),
                       note_count=t.num_rows - t["note"].null_count,
                       gift_message_count=(t.num_rows - t["gift_message"].null_count)
                       if "gift_message" in t.schema.names else 0,
                       version=DeltaTable(spec["source"]).version())
        elif spec["tool"] == "deltalake-copy":
            reader = src.to_pyarrow_dataset().scanner(batch_size=131_072).to_reader()
            write_deltalake(spec["table"], reader, mode="overwrite")
            res["source_version"] = src.version()
        else:  # deltalake-cdf: the changes since the version the last run read
            cdf = pa.RecordBatchReader.from_stream(
                src.load_cdf(starting_version=spec["after_version"] + 1))
            keep = [n for n in cdf.schema.names
                    if n not in ("_change_type", "_commit_version", "_commit_timestamp")]
            schema = pa.schema([cdf.schema.field(n) for n in keep])
            rows = [0]

            def batches():
                for b in cdf:
                    rows[0] += b.num_rows
                    yield b.select(keep)
            write_deltalake(spec["table"], pa.RecordBatchReader.from_batches(schema, batches()),
                            mode="append")
            res["rows_read"] = rows[0]
            res["source_version"] = src.version()
        res["work_s"] = time.perf_counter() - t0
        res["import_s"] = t0 - t_imports
    except BaseException as e:  # noqa: BLE001 - report any failure as a result
        res = {"ok": False, "error": "%s: %s" % (
            type(e).__name__, str(e).strip().splitlines()[0] if str(e).strip() else "")}
        code = 1
    sys.stdout.write(json.dumps(res) + "\n")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # deltalake + pyarrow may abort at interpreter exit (delta-rs#2184)


def readback_main(table):
    code = 0
    try:
        import pyarrow.compute as pc
        from deltalake import DeltaTable
        dt_ = DeltaTable(table)
        ds = dt_.to_pyarrow_dataset()
        names = ds.schema.names
        sparse = [c for c in ("note", "gift_message") if c in names]
        cols = ["order_id"] + sparse + (["_rescued_data"] if "_rescued_data" in names else [])
        t = ds.to_table(columns=cols)
        res = {"rows": t.num_rows,
               "order_id_sum": int(pc.sum(pc.cast(t["order_id"], "int64")).as_py() or 0),
               "columns": names, "version": dt_.version()}
        for c in ("note", "gift_message"):
            res[c + "_count"] = (t.num_rows - t[c].null_count) if c in names else 0
        if "_rescued_data" in names:
            res["rescued"] = t.num_rows - t["_rescued_data"].null_count
    except BaseException as e:  # noqa: BLE001
        res = {"error": "%s: %s" % (type(e).__name__, e)}
        code = 1
    sys.stdout.write(json.dumps(res) + "\n")
    sys.stdout.flush()
    os._exit(code)


# ---------------------------------------------------------------------------------------
# `cdc`: APPLY CHANGES (SCD type 1) against Python deltalake's merge
# ---------------------------------------------------------------------------------------
# An SCD 1 target of N rows (built from an "insert all" change file), then B batch files
# of C change records each (one file per batch), then one batch of C consecutive ids.
# Records: {"id", "op" (I/U/D), "seq", "name", "amount_cents", "city"}. Per batch: 70%
# updates of random live keys, 10% late updates (a sequence below an already-arrived
# record of a key touched in this or the previous batch: stale, must be ignored; some of
# those keys were deleted since), 15% inserts of new ids, 5% deletes of random live keys.
CDC_SIZES = {"full": (1_000_000, 100, 10_000), "quick": (100_000, 10, 10_000)}
CDC_COLS = ["id", "name", "amount_cents", "city"]  # the target's columns (op, seq dropped)
CDC_GEN_VERSION = 1  # bump when generate_cdc changes: cached cdc data is regenerated
CDC_INITIAL_FILES = 10  # the insert-all records, consecutive ids, one commit each
CDC_SEQ_STEP = 10  # fresh sequences are multiples of 10; a late one is 1..9 below one


def cdc_record(rng, key, op, seq):
    if op == "D":
        return '{"id": %d, "op": "D", "seq": %d, "name": null, "amount_cents": null, ' \
               '"city": null}\n' % (key, seq)
    return '{"id": %d, "op": "%s", "seq": %d, "name": %s, "amount_cents": %d, "city": "%s"}\n' % (
        key, op, seq, json.dumps("%s %s" % (rng.choice(FIRST), rng.choice(LAST)),
                                 ensure_ascii=False),
        rng.randrange(100, 10_000_000), rng.choice(CITIES)[0])


def generate_cdc(size, path):
    n, batches, per = CDC_SIZES[size]
    tmp = path + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(os.path.join(tmp, "files"))
    rng = random.Random("%d-cdc" % SEED)
    seq = 0
    live = list(range(1, n + 1))      # live keys, swap-remove by position
    pos = {k: i for i, k in enumerate(live)}
    last_seq = {}                     # key -> greatest sequence emitted so far
    used = set()                      # (key, seq) emitted, so no two records tie
    next_id = n + 1

    def kill(k):
        i = pos.pop(k)
        j = live.pop()
        if j != k:
            live[i] = j
            pos[j] = i

    def emit(out, key, op):
        nonlocal seq
        seq += CDC_SEQ_STEP
        last_seq[key] = seq
        used.add((key, seq))
        out.append(cdc_record(rng, key, op, seq))

    files = []
    step = -(-n // CDC_INITIAL_FILES)
    for i, lo in enumerate(range(1, n + 1, step)):
        out = []
        for k in range(lo, min(n + 1, lo + step)):
            emit(out, k, "I")
        files.append(("initial-%02d.json" % i, out))
    counts = {"updates": 0, "late": 0, "inserts": 0, "deletes": 0}
    prev_touched = []
    for b in range(batches):
        out, touched = [], []
        kinds = ["U"] * (per * 70 // 100) + ["L"] * (per * 10 // 100) + \
                ["I"] * (per * 15 // 100) + ["D"] * (per - per * 95 // 100)
        rng.shuffle(kinds)
        for kind in kinds:
            if kind == "L" and not (touched or prev_touched):
                kind = "U"
            if kind == "U":
                key = live[rng.randrange(len(live))]
                emit(out, key, "U")
                counts["updates"] += 1
            elif kind == "I":
                key = next_id
                next_id += 1
                emit(out, key, "I")
                live.append(key)
                pos[key] = len(live) - 1
                counts["inserts"] += 1
            elif kind == "D":
                key = live[rng.randrange(len(live))]
                emit(out, key, "D")
                kill(key)
                counts["deletes"] += 1
            else:  # late: below a sequence of this key that already arrived
                while True:
                    key = rng.choice(touched if touched and rng.random() < 0.5
                                     else (prev_touched or touched))
                    s = last_seq[key] - rng.randrange(1, CDC_SEQ_STEP)
                    if (key, s) not in used:
                        break
                used.add((key, s))
                out.append(cdc_record(rng, key, "U", s))
                counts["late"] += 1
                continue
            touched.append(key)
        prev_touched = touched
        files.append(("batch-%04d.json" % b, out))
    # the clustered batch: updates (upserts) of `per` consecutive ids in the middle
    lo = n // 2
    out = []
    for key in range(lo, lo + per):
        emit(out, key, "U")
    files.append(("clustered.json", out))
    mtime0 = 1_772_323_200
    total_bytes = 0
    for i, (name, lines) in enumerate(files):
        p = os.path.join(tmp, "files", name)
        data = "".join(lines).encode()
        total_bytes += len(data)
        with open(p, "wb") as f:
            f.write(data)
        os.utime(p, (mtime0 + i, mtime0 + i))
    # The expected final states, computed from the files alone (not the generator's state):
    # per key the greatest sequence wins, a delete removes the row.
    import pyarrow as pa
    import pyarrow.parquet as pq

    def expected(names):
        best = {}
        for name in names:
            with open(os.path.join(tmp, "files", name), encoding="utf-8") as f:
                for line in f:
                    r = json.loads(line)
                    cur = best.get(r["id"])
                    if cur is None or r["seq"] > cur["seq"]:
                        best[r["id"]] = r
        rows = sorted((r for r in best.values() if r["op"] != "D"), key=lambda r: r["id"])
        return pa.table({c: [r[c] for r in rows] for c in CDC_COLS},
                        schema=pa.schema([("id", pa.int64()), ("name", pa.string()),
                                          ("amount_cents", pa.int64()), ("city", pa.string())]))
    names = [f[0] for f in files]
    ni = len(names) - batches - 1
    for label, sel in (("initial", names[:ni]), ("batches", names[:ni + batches]),
                       ("clustered", names), ("fresh-clustered", names[:ni] + names[-1:])):
        pq.write_table(expected(sel), os.path.join(tmp, "expected-%s.parquet" % label))
    m = {"set": "cdc", "size": size, "gen_version": GEN_VERSION,
         "cdc_gen_version": CDC_GEN_VERSION, "rows": n, "batches": batches,
         "per_batch": per, "counts": counts, "bytes": total_bytes, "clustered_ids": [lo, lo + per - 1],
         "batch_bytes": sum(len("".join(l)) for nm, l in files if nm.startswith("batch-"))}
    with open(os.path.join(tmp, "manifest.json"), "w") as f:
        json.dump(m, f)
    shutil.rmtree(path, ignore_errors=True)
    os.rename(tmp, path)
    return m


def cdc_dataset(size):
    path = os.path.join(DATA, "cdc-%s" % size)
    mpath = os.path.join(path, "manifest.json")
    if os.path.exists(mpath):
        with open(mpath) as f:
            m = json.load(f)
        if m.get("gen_version") == GEN_VERSION and m.get("cdc_gen_version") == CDC_GEN_VERSION:
            return path, m
    print("generating cdc-%s into %s" % (size, path), flush=True)
    t = time.time()
    # in a child process: the parent stays small (a forked child's ru_maxrss starts at
    # the parent's RSS) and keeps pyarrow out of it
    subprocess.run([sys.executable, os.path.abspath(__file__), "--gen-cdc", size], check=True)
    with open(mpath) as f:
        m = json.load(f)
    print("  generated in %.0f s" % (time.time() - t), flush=True)
    return path, m


def cdc_readback(table, expected, name):
    rc, wall, rss, out, err = measure(
        [sys.executable, os.path.abspath(__file__), "--readback", table,
         "--expected", expected], os.path.join(RUNS, name + "-readback"), 600)
    r = last_json(out)
    if r is None:
        return {"error": "readback failed (exit %s): %s" % (rc, short(err))}
    return r


def cdc_readback_main(table, expected):
    """Compares the table's CDC_COLS with the expected parquet: counts of missing, extra
    and differing rows (0, 0, 0 is correct)."""
    code = 0
    try:
        import pyarrow.parquet as pq
        from deltalake import DeltaTable
        dt_ = DeltaTable(table)
        got = dt_.to_pyarrow_table(columns=CDC_COLS)
        exp = pq.read_table(expected)
        g = {r["id"]: (r["name"], r["amount_cents"], r["city"]) for r in got.to_pylist()}
        e = {r["id"]: (r["name"], r["amount_cents"], r["city"]) for r in exp.to_pylist()}
        res = {"rows": got.num_rows, "expected_rows": exp.num_rows,
               "distinct_ids": len(g), "missing": len(e.keys() - g.keys()),
               "extra": len(g.keys() - e.keys()),
               "differ": sum(1 for k in e.keys() & g.keys() if e[k] != g[k]),
               "version": dt_.version(), "files": len(dt_.file_uris())}
        res["ok"] = (res["missing"] == res["extra"] == res["differ"] == 0
                     and res["rows"] == res["expected_rows"])
    except BaseException as e:  # noqa: BLE001
        res = {"error": "%s: %s" % (type(e).__name__, e)}
        code = 1
    sys.stdout.write(json.dumps(res) + "\n")
    sys.stdout.flush()
    os._exit(code)


def cdc_commit_infos(table, after_version):
    """The autoloader CDC metrics (filesRewritten ...) of the commits after a version."""
    out = []
    log = os.path.join(table, "_delta_log")
    for n in sorted(os.listdir(log)):
        if not n.endswith(".json") or int(n[:-5]) <= after_version:
            continue
        with open(os.path.join(log, n)) as f:
            for line in f:
                a = json.loads(line)
                if "commitInfo" in a:
                    found = find_key(a["commitInfo"], "filesRewritten")
                    if found is not None:
                        out.append(found)
    return out


def find_key(obj, key):
    """The innermost dict holding `key`, searched depth first."""
    if isinstance(obj, dict):
        if key in obj:
            return obj
        for v in obj.values():
            r = find_key(v, key)
            if r is not None:
                return r
    elif isinstance(obj, list):
        for v in obj:
            r = find_key(v, key)
            if r is not None:
                return r
    return None


# The change records' schema, as the Python side reads them (`cdc_worker`).
CDC_SCHEMA = "id BIGINT, op STRING, seq BIGINT, name STRING, amount_cents BIGINT, city STRING"


def cdc_autoloader_cmd(src, table, schema_given=False):
    """Schema inferred (Auto Loader's default), or given as the Python side gives it (then
    there is no `_rescued_data` column, as in Auto Loader with a schema)."""
    except_list = "op,seq,_metadata" if schema_given else "op,seq,_rescued_data,_metadata"
    given = ["-o", "schema=" + CDC_SCHEMA] if schema_given else []
    return [BIN, "ingest", src, table, "--once", "--json",
            "-o", "cloudFiles.inferColumnTypes=true", "-o", "cloudFiles.maxFilesPerTrigger=1",
            "-o", "cdc.keys=id", "-o", "cdc.sequence_by=seq",
            "-o", "cdc.apply_as_deletes=op = 'D'",
            "-o", "cdc.except_column_list=" + except_list] + given


def run_cdc(size, args, python):
    """Three phases per tool, each one measured process: the initial insert-all file, the B
    batch files (autoloader: one --once run, one file per batch), the clustered batch."""
    path, m = cdc_dataset(size)
    files = os.path.join(path, "files")
    batch_files = sorted(f for f in os.listdir(files) if f.startswith("batch-"))
    initial_files = sorted(f for f in os.listdir(files) if f.startswith("initial-"))
    # the last two: the clustered batch again, on a fresh copy of the initial table (its
    # CDC_INITIAL_FILES files of consecutive ids), to count the files it rewrites there
    # and the initial files once more into a table of their own, the schema given to
    # autoloader as the Python side gives it to pyarrow (no inference).
    phases = [("initial", "", initial_files), ("batches", "", batch_files),
              ("clustered", "", ["clustered.json"]), ("fresh-initial", "fresh", initial_files),
              ("fresh-clustered", "fresh", ["clustered.json"]),
              ("schema-initial", "schema", initial_files)]
    base = os.path.join(RUNS, "cdc")
    shutil.rmtree(base, ignore_errors=True)
    os.makedirs(base)
    res = {"m": m, "autoloader": {}, "deltalake-merge": {}}
    # autoloader: hard links appear in its landing folder phase by phase
    for ph, t, names in phases:
        src = os.path.join(base, "landing" + t)
        os.makedirs(src, exist_ok=True)
        table = os.path.join(base, "autoloader" + t)
        for nm in names:
            os.link(os.path.join(files, nm), os.path.join(src, nm))
        warm([os.path.join(files, nm) for nm in names])
        version = -1
        if os.path.isdir(os.path.join(table, "_delta_log")):
            version = max(int(n[:-5]) for n in os.listdir(os.path.join(table, "_delta_log"))
                          if n.endswith(".json"))
        LOADS.append(os.getloadavg()[0])
        cmd = cdc_autoloader_cmd(src, table, schema_given=(t == "schema"))
        rc, wall, rss, out, err = measure(cmd, os.path.join(base, "autoloader-" + ph),
                                          OUR_TIMEOUT)
        r = {"wall": wall, "rss": rss, "files": len(names)}
        s = summary(out)
        if rc != 0 or not s or s.get("status") != "done":
            r["error"] = "exit %s: %s" % (rc, short(err or out, 400))
            r["cmd"] = " ".join("'%s'" % c if " " in c else c for c in cmd)
            res["autoloader"][ph] = r
            print("  autoloader %s FAILED: %s\n    %s" % (ph, r["error"], r["cmd"]), flush=True)
            break
        r["summary"] = s
        r["batches"] = s.get("batches")
        r["cdc"] = cdc_commit_infos(table, version)
        r["check"] = cdc_readback(table, os.path.join(
            path, "expected-%s.parquet" % cdc_expected(ph)), "cdc-autoloader-" + ph)
        res["autoloader"][ph] = r
        print("  autoloader %s: %.2f s, %.0f MiB, %s batches, check %s" % (
            ph, wall, rss, r["batches"], r["check"]), flush=True)
    if not python:
        return res
    for ph, t, names in phases:
        if t == "schema":
            continue  # the Python side is always given the schema: its `initial` is that
        table = os.path.join(base, "deltalake" + t)
        spec = {"tool": "cdc-merge", "table": table, "phase": ph.replace("fresh-", ""),
                "files": [os.path.join(files, nm) for nm in names]}
        spec_path = os.path.join(base, "deltalake-%s-spec.json" % ph)
        with open(spec_path, "w") as f:
            json.dump(spec, f)
        warm(spec["files"])
        LOADS.append(os.getloadavg()[0])
        rc, wall, rss, out, err = measure(
            [sys.executable, os.path.abspath(__file__), "--worker", spec_path],
            os.path.join(base, "deltalake-" + ph), args.timeout * max(1, len(names) // 10))
        r = {"wall": wall, "rss": rss, "files": len(names)}
        w = last_json(out)
        if rc == "timeout":
            r["error"] = "timeout"
        elif w is None or not w.get("ok"):
            r["error"] = (w or {}).get("error") or "exit %s: %s" % (rc, short(err or out))
        if "error" in r:
            res["deltalake-merge"][ph] = r
            print("  deltalake %s FAILED: %s" % (ph, r["error"]), flush=True)
            break
        r["work"] = w["work_s"]
        r["out"] = w
        r["check"] = cdc_readback(table, os.path.join(
            path, "expected-%s.parquet" % cdc_expected(ph)), "cdc-deltalake-" + ph)
        res["deltalake-merge"][ph] = r
        print("  deltalake %s: %.2f s (work %.2f s), %.0f MiB, check %s" % (
            ph, wall, r["work"], rss, r["check"]), flush=True)
    return res


def cdc_expected(phase):
    """The expected-state file's phase of `phase` (an initial load again is the initial)."""
    return "initial" if phase.endswith("initial") else phase


def run_cdc_tries(size, args, python):
    """`--repeat N` runs of every phase, each try both tools in turn (interleaved, so a
    slow minute of the machine hits both); per tool and phase the try of the median time
    is reported, with every try's time."""
    tries = []
    for i in range(args.repeat):
        if args.repeat > 1:
            print("  try %d of %d" % (i + 1, args.repeat), flush=True)
        tries.append(run_cdc(size, args, python))
    res = tries[0]
    if len(tries) == 1:
        return res
    for tool in ("autoloader", "deltalake-merge"):
        for ph in list(res.get(tool, {})):
            rs = [t.get(tool, {}).get(ph) for t in tries]
            if any(r is None or "error" in r for r in rs):
                continue
            secs = lambda r: r["wall"] if tool == "autoloader" else r["work"]  # noqa: E731
            ordered = sorted(rs, key=secs)
            median = dict(ordered[len(ordered) // 2])
            median["tries"] = [round(secs(r), 2) for r in rs]
            res[tool][ph] = median
    return res


def cdc_worker(spec):
    """Python deltalake as a user would write it: read a batch file with pyarrow, keep the
    latest record per key, MERGE with a sequence guard. The target keeps `op` and `seq`
    (the guard needs seq); a late record of a key deleted in an earlier batch inserts it
    again, since nothing remembers the delete."""
    code = 0
    try:
        t_imports = time.perf_counter()
        import pyarrow as pa
        import pyarrow.compute  # noqa: F401 (pa.compute)
        import pyarrow.json as pj
        from deltalake import DeltaTable, write_deltalake
        t0 = time.perf_counter()
        schema = pa.schema([("id", pa.int64()), ("op", pa.string()), ("seq", pa.int64()),
                            ("name", pa.string()), ("amount_cents", pa.int64()),
                            ("city", pa.string())])
        opts = pj.ParseOptions(explicit_schema=schema)
        per = []
        metrics = []
        for p in spec["files"]:
            tp = time.perf_counter()
            t = pj.read_json(p, parse_options=opts)
            if spec["phase"] == "initial":
                t = t.filter(pa.compute.not_equal(t["op"], "D"))
                write_deltalake(spec["table"], t, mode="append")
            else:
                t = t.sort_by([("id", "ascending"), ("seq", "descending")])
                ids = t["id"].combine_chunks()
                keep = pa.concat_arrays([pa.array([True]), pa.compute.not_equal(
                    ids.slice(1), ids.slice(0, len(ids) - 1))])
                t = t.filter(keep)
                dt_ = DeltaTable(spec["table"])
                mt = (dt_.merge(source=t, predicate="t.id = s.id", source_alias="s",
                                target_alias="t")
                      .when_matched_delete(predicate="s.op = 'D' AND s.seq > t.seq")
                      .when_matched_update_all(predicate="s.op != 'D' AND s.seq > t.seq")
                      .when_not_matched_insert_all(predicate="s.op != 'D'")
                      .execute())
                metrics.append({k: mt.get(k) for k in (
                    "num_target_rows_inserted", "num_target_rows_updated",
                    "num_target_rows_deleted", "num_target_files_added",
                    "num_target_files_removed")})
            per.append(round(time.perf_counter() - tp, 3))
        res = {"ok": True, "work_s": time.perf_counter() - t0, "batch_s": per,
               "import_s": t0 - t_imports, "metrics": metrics}
    except BaseException as e:  # noqa: BLE001
        res = {"ok": False, "error": "%s: %s" % (type(e).__name__, str(e).strip()[:300])}
        code = 1
    sys.stdout.write(json.dumps(res) + "\n")
    sys.stdout.flush()
    os._exit(code)


# ---------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------

def fmt_num(x, digits=1):
    if x is None:
        return "—"
    if x >= 100:
        return "{:,.0f}".format(x)
    return "{:,.{}f}".format(x, digits)


def check_ok(res, m):
    c = res.get("check")
    if not c or "error" in c:
        return False, (c or {}).get("error", "no readback")
    bad = []
    for key in ("rows", "order_id_sum", "note_count", "gift_message_count"):
        if c.get(key) != m[key]:
            bad.append("%s %s (expected %s)" % (key, c.get(key), m[key]))
    return not bad, ", ".join(bad)


def cdc_report(cdc):
    """(table lines, target lines) of the `cdc` set."""
    m = cdc["m"]
    n, b, c = m["rows"], m["batches"], m["per_batch"]
    head = ["phase", "tool", "wall s", "timed s", "per batch s", "changes/s", "peak RSS MiB",
            "table ok?", "ratio ours/theirs", "notes"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    labels = {"initial": "initial insert-all (%d rows, %d files)" % (n, CDC_INITIAL_FILES),
              "batches": "%d batches x %d changes" % (b, c),
              "clustered": "1 batch, %d consecutive ids, after the batches" % c,
              "fresh-initial": "initial insert-all again (fresh table)",
              "fresh-clustered": "1 batch, %d consecutive ids, on the fresh table" % c,
              "schema-initial": "initial insert-all, the schema given (fresh table)"}
    ours_secs = {}
    prev_files = {}
    for ph in ("initial", "batches", "clustered", "fresh-initial", "fresh-clustered",
               "schema-initial"):
        for tool in ("autoloader", "deltalake-merge"):
            r = cdc.get(tool, {}).get(ph)
            if r is None:
                continue
            key = (tool, ph.split("-")[0] if "-" in ph else "")
            if "error" in r:
                lines.append("| %s | %s | %s | failed | | | %s | — | — | %s |" % (
                    labels[ph], tool, fmt_num(r["wall"], 2), fmt_num(r["rss"], 0),
                    r["error"][:200]))
                continue
            secs = r["wall"] if tool == "autoloader" else r["work"]
            ck = r.get("check", {})
            ok = bool(ck.get("ok"))
            nb = r["files"]
            notes = []
            if not ok:
                notes.append("%s rows (expected %s): %s extra, %s missing, %s differ" % (
                    ck.get("rows"), ck.get("expected_rows"), ck.get("extra"),
                    ck.get("missing"), ck.get("differ")) if "error" not in ck else ck["error"])
            before = prev_files.get(key)
            if tool == "autoloader":
                ours_secs[ph] = secs
                ratio = "—"
                rw = [x.get("filesRewritten", 0) for x in r.get("cdc", [])]
                stale = sum(x.get("recordsStale", 0) for x in r.get("cdc", []))
                if not ph.endswith("initial") and rw:
                    notes.append("filesRewritten %s%s of %s table file(s) before; %d stale" % (
                        "/".join(str(x) for x in rw) if len(rw) <= 3 else
                        "mean %.1f, max %d" % (sum(rw) / len(rw), max(rw)),
                        " per batch" if len(rw) > 1 else "", before, stale))
                notes.append("%s commits, table now %s file(s)" % (r.get("batches"), ck.get("files")))
                if ph == "schema-initial":
                    # Against the Python side's append, which is always given the schema.
                    d = cdc.get("deltalake-merge", {}).get("initial")
                    if d and "error" not in d:
                        ratio = "%.2fx" % (d["work"] / secs)
                        notes.append("ratio against deltalake's initial append")
            else:
                o = ours_secs.get(ph)
                ratio = "%.2fx" % (secs / o) if o else "—"
                mt = r["out"].get("metrics") or []
                if mt:
                    rm = [x.get("num_target_files_removed") or 0 for x in mt]
                    notes.append("files removed %s%s of %s before" % (
                        "/".join(str(x) for x in rm) if len(rm) <= 3 else
                        "mean %.1f, max %d" % (sum(rm) / len(rm), max(rm)),
                        " per batch" if len(rm) > 1 else "", before))
                if ph.endswith("initial"):
                    notes.append("write_deltalake append per file (no merge)")
                notes.append("work excludes %.2f s of imports; table now %s file(s)" % (
                    r["out"].get("import_s", 0), ck.get("files")))
            if r.get("tries"):
                notes.append("median of %d interleaved tries: %s s" % (
                    len(r["tries"]), "/".join(str(t) for t in r["tries"])))
            prev_files[key] = ck.get("files")
            changes = nb * c if ph in ("batches", "clustered", "fresh-clustered") else n
            lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                labels[ph], tool, fmt_num(r["wall"], 2), fmt_num(secs, 2),
                fmt_num(secs / nb, 3), fmt_num(changes / secs, 0), fmt_num(r["rss"], 0),
                "yes" if ok else "NO", ratio, "; ".join(notes)))
    targets = []
    a, d = cdc["autoloader"].get("batches"), cdc["deltalake-merge"].get("batches")
    if a and d and "error" not in a and "error" not in d:
        ratio = d["work"] / a["wall"]
        dok = d["check"].get("ok")
        targets.append("| cdc: >= 2.5x deltalake merge throughput (%d x %d changes%s) | %.2fx "
                       "(%.3f s vs %.3f s per batch%s) | %s |" % (
                           b, c, ", median of %d" % len(a["tries"]) if a.get("tries") else "",
                           ratio, a["wall"] / b, d["work"] / b,
                           "" if dok else "; deltalake's table is wrong",
                           "PASS" if ratio >= 2.5 else "FAIL"))
    else:
        targets.append("| cdc: >= 2.5x deltalake merge throughput | n/a | n/a |")
    a, d = cdc["autoloader"].get("initial"), cdc["deltalake-merge"].get("initial")
    if a and d and "error" not in a and "error" not in d:
        ratio = d["work"] / a["wall"]
        targets.append("| cdc: first load >= 1x write_deltalake append (%d rows, %d files) | "
                       "%.2fx (%.2f s vs %.2f s) | %s |" % (
                           n, CDC_INITIAL_FILES, ratio, a["wall"], d["work"],
                           "PASS" if ratio >= 1 else "FAIL"))
    a = cdc["autoloader"].get("schema-initial")
    if a and d and "error" not in a and "error" not in d:
        targets.append("| cdc: first load, the schema given to both (information) | "
                       "%.2fx (%.2f s vs %.2f s) | — |" % (d["work"] / a["wall"], a["wall"],
                                                            d["work"]))
    peaks = [(ph, r["rss"]) for ph, r in cdc["autoloader"].items()]
    worst = max(peaks, key=lambda p: p[1])
    targets.append("| cdc: peak RSS <= 512 MiB (ours) | max %.0f MiB (%s) | %s |" % (
        worst[1], worst[0], "PASS" if worst[1] <= 512 else "FAIL"))
    bad = [ph for ph, r in cdc["autoloader"].items()
           if "error" in r or not r.get("check", {}).get("ok")]
    done = len(cdc["autoloader"]) == 6
    targets.append("| cdc: autoloader's table = the expected SCD 1 state after every phase | %s | %s |"
                   % ("all correct" if not bad and done else "wrong/failed: " + ", ".join(bad or ["incomplete"]),
                      "PASS" if not bad and done else "FAIL"))
    return lines, targets


SILVER_LABELS = {"deltalake-copy": "deltalake: whole table", "deltalake-cdf": "deltalake: load_cdf"}


def silver_table_rows(silver):
    """The silver set's rows of the report table, and whether every table checked out.
    MB/s, rows/s and files/s are of what the run had to deliver: the bronze table's Parquet
    for the catch-up, the small commit for the incremental runs (also for the whole-table
    copy, which reads everything again to deliver it)."""
    m, after = silver["m"], silver["after"]
    rows, all_ok = [], True
    for phase in ("catchup", "incremental"):
        deliver = m if phase == "catchup" else after
        work = m if phase == "catchup" else {"rows": silver["extra"]["rows"],
                                              "bytes": silver["extra"]["bytes"], "files": 1}
        if phase == "catchup":
            label = "silver first catch-up (bronze: %d versions, %d parquet, %.0f MB, %d rows)" % (
                m["commits"], m["files"], m["bytes"] / 1e6, m["rows"])
        else:
            label = "silver incremental (+1 commit: 1 parquet, %.2f MB, %d rows)" % (
                work["bytes"] / 1e6, work["rows"])
        ours_secs = None
        for tool in ("autoloader", "deltalake-cdf", "deltalake-copy"):
            r = silver["best"].get((phase, tool))
            if r is None:
                continue
            name = SILVER_LABELS.get(tool, tool)
            if "error" in r:
                all_ok = False
                rows.append([label, name, fmt_num(r["wall"], 2), "failed", "", "", "",
                             fmt_num(r["rss"], 0), "—", "—", r["error"]])
                continue
            secs = r["wall"] if tool == "autoloader" else r["work"]
            ok, why = check_ok(r, deliver)
            all_ok = all_ok and ok
            notes = []
            if tool == "autoloader":
                ours_secs = secs if ok else None
                ratio = "—"
                notes.append("%s files in %s batch(es); silver now %d parquet, %d commits" % (
                    r.get("files"), r.get("batches"), r["parquet_files"], r["commits"]))
            else:
                ratio = "%.2fx" % (secs / ours_secs) if ours_secs and ok else "—"
                if tool == "deltalake-copy":
                    notes.append("to_pyarrow_dataset() streamed into write_deltalake, overwrite"
                                 + ("; reads all %d rows again" % after["rows"]
                                    if phase == "incremental" else ""))
                else:
                    notes.append("load_cdf(starting_version=%d), %s rows, appended" % (
                        m["version"] + 1, r["out"].get("rows_read")))
            if r.get("tries"):
                notes.append("tries %s s" % "/".join(str(x) for x in r["tries"]))
            if why:
                notes.append(why)
            rows.append([label, name, fmt_num(r["wall"], 2), fmt_num(secs, 2),
                         fmt_num(work["bytes"] / secs / 1e6), fmt_num(work["rows"] / secs),
                         fmt_num(work["files"] / secs), fmt_num(r["rss"], 0),
                         "yes" if ok else "NO", ratio, "; ".join(notes)])
    return rows, all_ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="about 1/20 of the sizes")
    ap.add_argument("--only", default=",".join(SETS),
                    help="comma-separated data sets: %s" % ",".join(SETS))
    ap.add_argument("--tools", default="autoloader,duckdb,polars,deltalake",
                    help="comma-separated tools (autoloader always runs; deltalake is the "
                    "Python bronze -> silver copy of the silver set)")
    ap.add_argument("--timeout", type=int, default=300,
                    help="cap per competitor process, seconds (default 300)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="measure each tool N times, keep the fastest (default 1)")
    ap.add_argument("--no-build", action="store_true",
                    help="skip cargo build --release (use target/release/autoloader as it is)")
    ap.add_argument("--rev", help="benchmark a git revision instead of the working tree: "
                    "exported with git archive and built in /tmp/autoloader-bench/build")
    ap.add_argument("--bin", help="benchmark this prebuilt binary (no cargo build)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--readback", help=argparse.SUPPRESS)
    ap.add_argument("--expected", help=argparse.SUPPRESS)
    ap.add_argument("--gen-cdc", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker)
    if args.gen_cdc:
        generate_cdc(args.gen_cdc, os.path.join(DATA, "cdc-%s" % args.gen_cdc))
        sys.exit(0)
    if args.readback and args.expected:
        cdc_readback_main(args.readback, args.expected)
    if args.readback:
        readback_main(args.readback)

    size = "quick" if args.quick else "full"
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    for s in only:
        if s not in SETS:
            ap.error("unknown data set %r (choose from %s)" % (s, ", ".join(SETS)))
    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    os.makedirs(DATA, exist_ok=True)
    os.makedirs(RUNS, exist_ok=True)

    global BIN
    BIN, build_note = build(args)

    versions = {"duckdb": installed("duckdb"), "polars": installed("polars"),
                "deltalake": installed("deltalake"), "pyarrow": installed("pyarrow")}
    if not versions["deltalake"]:
        sys.exit("Python deltalake is needed to read tables back: "
                 "python3 -m pip install -r bench/requirements.txt")
    print("versions: %s" % ", ".join("%s %s" % (k, v or "n/a") for k, v in versions.items()),
          flush=True)

    rows = []     # table rows
    results = {}  # set -> {tool -> res}
    restart = {}
    silver = None
    cdc = None
    expect = None
    for name in only:
        if name == "expect":
            print("\n== expect-%s: bulk without and with 3 rules" % size, flush=True)
            expect = run_expect(size, args)
            continue
        if name == "cdc":
            n, b, c = CDC_SIZES[size]
            print("\n== cdc-%s: SCD 1 target of %d rows, %d batches of %d changes, "
                  "then one clustered batch" % (size, n, b, c), flush=True)
            cdc = run_cdc_tries(size, args, "deltalake" in tools)
            continue
        if name == "silver":
            print("\n== silver-%s: a Delta table as the source" % size, flush=True)
            silver = run_silver(size, args, "deltalake" in tools)
            sm = silver["m"]
            print("  bronze: %d versions, %d parquet files, %.1f MB, %d rows; small commit %d rows"
                  % (sm["commits"], sm["files"], sm["bytes"] / 1e6, sm["rows"],
                     silver["extra"]["rows"]), flush=True)
            for (phase, tool), r in silver["best"].items():
                print("  %s %s: %.2f s (work %s s), %.0f MiB%s" % (
                    phase, tool, r["wall"], fmt_num(r.get("work", r["wall"]), 2), r["rss"],
                    (", " + r["error"]) if "error" in r else ""), flush=True)
            continue
        path, m = dataset(name, size)
        results[name] = {}
        print("\n== %s-%s: %d files, %d rows, %.1f MB" % (name, size, m["files"], m["rows"],
                                                        m["bytes"] / 1e6), flush=True)
        ours = best_of(args.repeat, lambda: run_ours(name, path, m, args))
        results[name]["autoloader"] = ours
        print("  autoloader: %.2f s, %.0f MiB%s" % (ours["wall"], ours["rss"],
              (", " + ours["error"]) if "error" in ours else ""), flush=True)
        if name in ("small", "restart") and "error" not in ours:
            reruns = []
            for _ in range(3):
                warm(data_files(path))
                LOADS.append(os.getloadavg()[0])
                rc, wall, rss, out, err = measure(
                    autoloader_cmd(ours["src"], ours["table"]),
                    os.path.join(RUNS, name, "rerun"), OUR_TIMEOUT)
                s = summary(out)
                reruns.append({"rc": rc, "wall": wall, "rss": rss,
                               "files": s.get("files") if s else None,
                               "error": None if rc == 0 else short(err)})
            restart[name] = {"files": m["files"], "reruns": reruns}
            print("  rerun, nothing new: %s s" % ", ".join("%.2f" % r["wall"] for r in reruns),
                  flush=True)
        if name not in ("restart", "wide"):
            for tool in ("duckdb", "polars"):
                if tool not in tools:
                    continue
                if not versions[tool]:
                    results[name][tool] = {"tool": tool, "na": True}
                    continue
                r = best_of(args.repeat, lambda: run_competitor(tool, name, path, m, args))
                results[name][tool] = r
                print("  %s: %.2f s (work %s s), %.0f MiB%s" % (
                    tool, r["wall"], fmt_num(r.get("work"), 2), r["rss"],
                    (", " + r["error"]) if "error" in r else ""), flush=True)

    # ---- table
    header = ["set", "tool", "wall s", "timed s", "MB/s", "rows/s", "files/s", "peak RSS MiB",
              "rows ok?", "ratio ours/theirs", "notes"]
    for name in only:
        if name in ("silver", "cdc", "expect"):
            continue
        m = dataset(name, size)[1]
        ours = results[name]["autoloader"]
        our_thr = None
        label = "%s (%d files, %.0f MB, %d rows)" % (name, m["files"], m["bytes"] / 1e6, m["rows"])
        for tool in ("autoloader", "duckdb", "polars"):
            r = results[name].get(tool)
            if r is None:
                continue
            if r.get("na"):
                rows.append([label, tool, "n/a", "", "", "", "", "", "", "", "not installed"])
                continue
            if "error" in r:
                rows.append([label, tool, fmt_num(r["wall"], 2),
                             "failed" if not r["error"].startswith("timeout") else "capped",
                             "", "", "", fmt_num(r["rss"], 0), "—", "—", r["error"]])
                continue
            secs = r["wall"] if tool == "autoloader" else r["work"]
            thr = m["bytes"] / secs / 1e6
            ok, why = check_ok(r, m)
            notes = []
            if tool == "autoloader":
                our_thr = thr if ok else None
                c = r.get("check", {})
                notes.append("%d parquet, %d commits" % (r["parquet_files"], r["commits"]))
                if r.get("one_pass"):
                    notes.append("schema inferred while reading%s" % (
                        " (batch read again)" if r.get("reread") else ", one pass"))
                elif "infer_s" in r:
                    notes.append("inference %.2f s" % r["infer_s"])
                if name == "drift":
                    notes.append("rescued %s (expected %d), schema v%s, phases %s s" % (
                        c.get("rescued"), m["rescued_expected"], r.get("schema_version"),
                        "+".join(str(p) for p in r["phases"])))
                ratio = "—"
            else:
                ratio = ("%.2fx" % (our_thr / thr)) if (our_thr and ok) else "—"
            if r.get("tries"):
                notes.append("tries %s s" % "/".join(str(x) for x in r["tries"]))
            if why:
                notes.append(why)
            rows.append([label, tool, fmt_num(r["wall"], 2), fmt_num(secs, 2), fmt_num(thr), fmt_num(m["rows"] / secs),
                         fmt_num(m["files"] / secs), fmt_num(r["rss"], 0),
                         "yes" if ok else "NO", ratio, "; ".join(notes)])
    for name, rs in restart.items():
        walls = [r["wall"] for r in rs["reruns"]]
        bad = [r for r in rs["reruns"] if r["rc"] != 0 or r["files"] != 0]
        rows.append(["%s rerun, nothing new (%d files)" % (name, rs["files"]), "autoloader",
                     "/".join("%.2f" % w for w in walls), "", "", "", "", fmt_num(max(r["rss"] for r in rs["reruns"]), 0),
                     "yes" if not bad else "NO", "—",
                     "3 reruns" + ("" if not bad else "; %s" % bad[0])])

    silver_ok = None
    if silver:
        srows, silver_ok = silver_table_rows(silver)
        rows += srows
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]

    # ---- targets
    def ratio_of(setname, tool):
        o, t = results.get(setname, {}).get("autoloader"), results.get(setname, {}).get(tool)
        if not o or not t or "error" in o or "error" in t or t.get("na"):
            return None
        m = dataset(setname, size)[1]
        if not (check_ok(o, m)[0] and check_ok(t, m)[0]):
            return None
        return (m["bytes"] / o["wall"]) / (m["bytes"] / t["work"])

    targets = []

    def target(desc, value, ok):
        targets.append("| %s | %s | %s |" % (desc, value, "n/a" if ok is None else ("PASS" if ok else "FAIL")))

    if "bulk" in results:
        r = ratio_of("bulk", "duckdb")
        target("bulk JSON >= 1.5x DuckDB->Delta throughput", "%.2fx" % r if r else "n/a",
               None if r is None else r >= 1.5)
    if "small" in results:
        o = results["small"]["autoloader"]
        m = dataset("small", size)[1]
        fps = m["files"] / o["wall"] if "error" not in o and check_ok(o, m)[0] else None
        target("small files >= 5,000 files/s", fmt_num(fps) + " files/s" if fps else "failed",
               None if fps is None and "error" not in o else (fps or 0) >= 5000)
    if "csv" in results:
        r = ratio_of("csv", "polars")
        target("CSV >= Polars CSV->Delta throughput", "%.2fx" % r if r else "n/a",
               None if r is None else r >= 1.0)
    if "drift" in results and "bulk" in results:
        d, b = results["drift"]["autoloader"], results["bulk"]["autoloader"]
        if "error" in d or "error" in b:
            target("drift at most 30% slower than clean bulk", "failed", False)
        else:
            md, mb = dataset("drift", size)[1], dataset("bulk", size)[1]
            # per row, so a different row count would not skew it (they are equal here)
            slow = (d["wall"] / md["rows"]) / (b["wall"] / mb["rows"]) - 1
            target("drift at most 30% slower than clean bulk", "%+.0f%% (%.2f s vs %.2f s)" % (
                slow * 100, d["wall"], b["wall"]), slow <= 0.30)
    peaks = [(n, results[n]["autoloader"]["rss"]) for n in results]
    if silver:
        peaks += [("silver " + ph, r["rss"]) for (ph, t), r in silver["best"].items()
                  if t == "autoloader"]
    if peaks:
        worst = max(peaks, key=lambda p: p[1])
        target("peak RSS < 512 MiB for every data set (ours)",
               "max %.0f MiB (%s)" % (worst[1], worst[0]), worst[1] < 512)
    if "restart" in restart:
        rs = restart["restart"]
        w = max(r["wall"] for r in rs["reruns"])
        ok = all(r["rc"] == 0 and r["files"] == 0 for r in rs["reruns"]) and w < 2.0
        target("rerun over %s ingested files, nothing new, < 2 s%s" % (
            "{:,}".format(rs["files"]), "" if rs["files"] >= 100_000 else " (quick: not the target size)"),
            "%.2f s (worst of 3)" % w, ok)
    bad = [n for n in results if "error" in results[n]["autoloader"]
           or not check_ok(results[n]["autoloader"], dataset(n, size)[1])[0]]
    if results:
        target("autoloader row counts and sum(order_id) correct on every set",
               "all correct" if not bad else "wrong/failed: " + ", ".join(bad), not bad)
    if "drift" in results and "error" not in results["drift"]["autoloader"]:
        md = dataset("drift", size)[1]
        got = results["drift"]["autoloader"].get("check", {}).get("rescued")
        target("drift: rescued rows = generated type mismatches",
               "%s of %d" % (got, md["rescued_expected"]), got == md["rescued_expected"])

    if silver:
        target("silver: every silver table holds bronze's rows and sum(order_id), "
               "after the catch-up and after the small commit",
               "all correct" if silver_ok else "wrong/failed (see the table)", silver_ok)
    cdc_lines = []
    if cdc:
        cdc_lines, cdc_targets = cdc_report(cdc)
        targets += cdc_targets
        n, b, c = CDC_SIZES[size]
        cdc_lines = ["", "cdc: APPLY CHANGES (SCD 1) on %d rows; autoloader: one --once run per "
                     "phase, cloudFiles.maxFilesPerTrigger=1 (one file = one MERGE commit); "
                     "deltalake: one process per phase, per file read_json, latest per key, "
                     "merge with s.seq > t.seq (target keeps op and seq)" % n, ""] + cdc_lines
    if expect:
        expect_lines, expect_targets = expect_report(expect)
        cdc_lines = cdc_lines + expect_lines
        targets += expect_targets
    now = dt.datetime.now().strftime("%Y-%m-%d %H:%M")
    head = ("%s run%s, %s, autoloader built from %s, %d cores; duckdb %s, polars %s, deltalake %s, pyarrow %s; MB = 10^6 bytes; "
            "1-min load average before the measured runs: %.1f to %.1f"
            % (size, "" if args.repeat == 1 else " (best of %d; cdc: the median of %d interleaved)" % (args.repeat, args.repeat), now, build_note, os.cpu_count(), versions["duckdb"], versions["polars"],
               versions["deltalake"], versions["pyarrow"], min(LOADS or [0]), max(LOADS or [0])))
    if not rows:
        lines = []
    report = "\n".join([head, "", *lines, *cdc_lines, "", "| target | measured | result |", "|---|---|---|",
                        *targets])
    print("\n" + report)
    with open(os.path.join(ROOT, "results-%s.md" % size), "w") as f:
        f.write(report + "\n")
    with open(os.path.join(ROOT, "results-%s.json" % size), "w") as f:
        json.dump({"results": results, "restart": restart, "versions": versions,
                   "cdc": cdc,
                   "silver": silver and dict(silver, best={"%s/%s" % k: v for k, v in
                                                          silver["best"].items()})},
                  f, indent=1, default=str)
    print("\n(written to %s/results-%s.md and .json)" % (ROOT, size))


if __name__ == "__main__":
    main()
