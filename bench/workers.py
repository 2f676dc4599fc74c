#!/usr/bin/env python3
"""Competing workers, scaling: N = 1, 2, 4, 8 worker processes of the release binary on one
stream (one SQS queue, one Delta table, the checkpoint on S3), against a moto server on
127.0.0.1 (S3 + SQS + bucket notifications), with a per-file read delay standing in for S3
latency (`AUTOLOADER_TEST_READ_DELAY_MS`, `src/testing/read_delay.rs`).

Per N, on a fresh moto server:
  1. a bucket whose `ObjectCreated` events under `landing/` go to a queue with a
     dead-letter queue (visibility 60 s, 5 receives);
  2. each worker slot's first start, `--once --worker K`, one after the other, on the prefix
     holding one primer file (a slot lists the prefix at its first start; the first lands
     the primer, creating the table and its schema; so every file below comes through the
     queue, as in a stream that has been running);
  3. FILES files of ROWS rows uploaded (each PUT sends its event to the queue);
  4. N watchers started together (`--worker K --poll-interval 0.2`, each with a state
     folder of its own, as pods have; one that exits 75 because another one's start-up
     look at the slots held its slot is started again at once, as a StatefulSet would),
     timed from the start until the batches committed hold every file (the workers'
     "Committed batch." log lines), then stopped with SIGTERM.
Watchers, not `--once`: a `--once` worker exits as soon as it finds the queue empty, which
it does while the other workers still hold the last messages, so the time of the slowest
one would not be the time to drain the queue.

Reported per N: files/s (FILES over the time from the start to the last commit), the
efficiency files/s(N) / (N x files/s(1)), the moto requests during step 4 per file (from
moto's request log: SQS is every `POST /`, S3 the rest, by method), Delta commits and
commit retries (delta-rs logs `num_retries` for each commit it lands; our outer retries
log "Delta commit reported an error"), and duplicates / losses from the table read back with Python deltalake (rows per file), the
queue and the dead-letter queue at the end.

    python3 bench/workers.py                       # N = 1,2,4,8, 2,000 files, 100 ms delay
    python3 bench/workers.py --workers 1,2 --files 200 --delay-ms 50   # a quick look
"""

import argparse
import glob
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORK = "/tmp/autoloader-workers"
REGION = "us-east-1"
ACCOUNT = "123456789012"
BUCKET = "lake"


# ---------------------------------------------------------------- moto and the bucket


class Moto:
    """`python3 -m moto.server` on a free port of 127.0.0.1; its request log in `log`."""

    def __init__(self, log):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.port = s.getsockname()[1]
        s.close()
        self.log = log
        self.region = REGION
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=open(log, "w"),
        )
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.1)
        raise SystemExit("moto did not start (python3 -m pip install 'moto[server]')")

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.port}"

    def env(self):
        """The AWS environment the binary, the AWS CLI and boto3 all read."""
        return {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_REGION": REGION,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ALLOW_HTTP": "true",
        }

    def client(self, service):
        import boto3

        return boto3.client(
            service,
            region_name=self.region,
            endpoint_url=self.endpoint,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )

    def log_lines(self):
        with open(self.log, errors="replace") as f:
            return [l for l in f if '" ' in l and "HTTP/1.1" in l]

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def notified_bucket(moto, queue_name, prefix="landing/", visibility=60, max_receives=5):
    """The bucket, the queue `queue_name` with `queue_name-dlq`, and the bucket's
    `ObjectCreated` events under `prefix` into the queue. Returns (queue_url, dlq_url)."""
    s3, sqs = moto.client("s3"), moto.client("sqs")
    s3.create_bucket(Bucket=BUCKET)
    dlq = sqs.create_queue(QueueName=f"{queue_name}-dlq")["QueueUrl"]
    dlq_arn = f"arn:aws:sqs:{REGION}:{ACCOUNT}:{queue_name}-dlq"
    queue = sqs.create_queue(
        QueueName=queue_name,
        Attributes={
            "VisibilityTimeout": str(visibility),
            "RedrivePolicy": json.dumps(
                {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": str(max_receives)}
            ),
        },
    )["QueueUrl"]
    s3.put_bucket_notification_configuration(
        Bucket=BUCKET,
        NotificationConfiguration={
            "QueueConfigurations": [
                {
                    "Id": f"autoloader-{queue_name}",
                    "QueueArn": f"arn:aws:sqs:{REGION}:{ACCOUNT}:{queue_name}",
                    "Events": ["s3:ObjectCreated:*"],
                    "Filter": {"Key": {"FilterRules": [{"Name": "prefix", "Value": prefix}]}},
                }
            ]
        },
    )
    return queue, dlq


def depth(moto, url):
    """(visible, in flight) messages of a queue."""
    a = moto.client("sqs").get_queue_attributes(
        QueueUrl=url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(a["ApproximateNumberOfMessages"]), int(a["ApproximateNumberOfMessagesNotVisible"])


def file_body(n, rows):
    """File n: `rows` JSON lines, ids n*rows .. n*rows+rows-1, each naming its file."""
    return "".join(
        json.dumps({"id": n * rows + r, "file": n, "amount": (n * 7 + r) % 1000 / 10, "note": "x" * 40})
        + "\n"
        for r in range(rows)
    ).encode()


def upload(moto, keys_and_bodies, threads=8):
    s3 = moto.client("s3")
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda kb: s3.put_object(Bucket=BUCKET, Key=kb[0], Body=kb[1]), keys_and_bodies))


# ---------------------------------------------------------------- the workers


def worker_args(bin_path, queue, slot, once, extra=()):
    a = [
        bin_path,
        "ingest",
        f"s3://{BUCKET}/landing",
        f"s3://{BUCKET}/bronze/orders",
        "--checkpoint",
        f"s3://{BUCKET}/checkpoints/orders",
        "--worker",
        str(slot),
        "-o",
        "cloudFiles.format=json",
        "-o",
        "cloudFiles.useNotifications=true",
        "-o",
        f"cloudFiles.queueUrl={queue}",
    ]
    for e in extra:
        a += ["-o", e]
    a += ["--once"] if once else ["--poll-interval", "0.2"]
    return a


def committed(logs):
    """(time, files) of every batch the workers committed, from their logs' "Committed
    batch." lines (an S3 checkpoint's shared event log is not read: see bench/README.md)."""
    out = []
    for path in logs:
        if not os.path.exists(path):
            continue
        with open(path, errors="replace") as f:
            for l in f:
                if "Committed batch." in l:
                    m = re.search(r" files=(\d+)", l)
                    out.append((parse_time(l.split()[0]), int(m.group(1)) if m else 0))
    return out


def parse_time(t):
    from datetime import datetime

    return datetime.fromisoformat(t.replace("Z", "+00:00")[:26] + "+00:00").timestamp()


READER = r"""
import json, os, sys
try:
    from deltalake import DeltaTable
    import pyarrow.compute as pc
    t = DeltaTable(sys.argv[1]).to_pyarrow_table(columns=["id", "file"])
    counts = {}
    for f, n in zip(*[c.to_pylist() for c in pc.value_counts(t["file"]).flatten()]):
        counts[f] = n
    out = {"rows": t.num_rows, "distinct_ids": pc.count_distinct(t["id"]).as_py(), "files": counts}
    sys.stdout.write(json.dumps(out)); sys.stdout.flush(); code = 0
except Exception as e:
    sys.stderr.write(repr(e)); sys.stderr.flush(); code = 1
os._exit(code)  # delta-rs#2184: never wait on the runtime's exit
"""


def read_table(moto, table=f"s3://{BUCKET}/bronze/orders"):
    """Rows, distinct ids and rows per file of the table, read by Python deltalake."""
    env = dict(os.environ, **moto.env())
    out = subprocess.run([sys.executable, "-c", READER, table], env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"reading the table failed: {out.stderr}")
    r = json.loads(out.stdout)
    r["files"] = {int(k): v for k, v in r["files"].items()}
    return r


PRIMER = -1


def check_rows(table, files, rows):
    """(duplicated files, lost files) against files 0..files-1 of `rows` rows each (and the
    primer, file -1)."""
    dup = sum(1 for f, n in table["files"].items() if n > rows)
    lost = sum(1 for f in list(range(files)) + [PRIMER] if table["files"].get(f, 0) < rows)
    return dup, lost
    dup = sum(1 for f, n in table["files"].items() if n > rows)
    lost = sum(1 for f in range(files) if table["files"].get(f, 0) < rows)
    return dup, lost


def classify(lines):
    """moto's request log lines by kind: SQS (JSON protocol, all `POST /`), S3 by method."""
    kinds = {}
    for l in lines:
        m = re.search(r'"([A-Z]+) (\S+) HTTP', l)
        if not m:
            continue
        method, path = m.groups()
        if method == "POST" and path.split("?")[0] == "/":
            k = "sqs"
        elif method == "GET" and ("list-type" in path or path.rstrip("/").count("/") <= 1):
            k = "s3 LIST"
        else:
            k = f"s3 {method}"
        kinds[k] = kinds.get(k, 0) + 1
    return kinds


def commit_stats(logs):
    """(delta-rs commits, their retries, our outer commit retries) from worker logs."""
    commits = retries = outer = 0
    for path in logs:
        with open(path, errors="replace") as f:
            for l in f:
                if "transaction committed successfully" in l:
                    commits += 1
                    m = re.search(r"num_retries=(\d+)", l)
                    retries += int(m.group(1)) if m else 0
                elif "Delta commit reported an error" in l:
                    outer += 1
    return commits, retries, outer


def run_n(args, n):
    run_dir = os.path.join(WORK, f"n{n}")
    shutil.rmtree(run_dir, ignore_errors=True)
    os.makedirs(run_dir)
    moto = Moto(os.path.join(run_dir, "moto.log"))
    try:
        queue, dlq = notified_bucket(moto, "orders-landing")
        base_env = dict(os.environ, **moto.env())
        base_env["RUST_LOG"] = "autoloader=info,deltalake_core::kernel::transaction=info"
        base_env.pop("AUTOLOADER_FAILPOINT", None)
        extra = [f"cloudFiles.maxFilesPerTrigger={args.max_files_per_trigger}"]
        states = [os.path.join(run_dir, f"state{k}") for k in range(n)]
        # Each slot's first start, on a prefix holding one file: the first slot lands it
        # (creating the table and the schema), the others find it claimed. A first start
        # whose listing found nothing would list the prefix again at the next start.
        upload(moto, [("landing/primer.json", file_body(PRIMER, args.rows))])
        for k in range(n):
            env = dict(base_env, AUTOLOADER_STATE_DIR=states[k])
            out = subprocess.run(worker_args(args.bin, queue, k, True, extra), env=env, capture_output=True, text=True)
            if out.returncode != 0:
                raise SystemExit(f"first start of slot {k} failed: {out.stderr[-3000:]}")
        upload(moto, [(f"landing/{i:05}.json", file_body(i, args.rows)) for i in range(args.files)])
        before = len(moto.log_lines())
        env = dict(base_env, AUTOLOADER_TEST_READ_DELAY_MS=str(args.delay_ms))
        logs = [os.path.join(run_dir, f"w{k}.log") for k in range(n)]
        t0 = time.time()
        restarts = [0]

        def spawn(k):
            return subprocess.Popen(
                worker_args(args.bin, queue, k, False, extra),
                env=dict(env, AUTOLOADER_STATE_DIR=states[k]),
                stdout=subprocess.DEVNULL,
                stderr=open(logs[k], "a"),
            )

        procs = [spawn(k) for k in range(n)]
        deadline = t0 + args.timeout
        while True:
            done = committed(logs)
            files_done = sum(f for _, f in done)
            if files_done >= args.files:
                break
            if time.time() > deadline:
                break
            for k, p in enumerate(procs):
                # A starting worker looks into every slot it can lock (adoption), and a
                # pinned worker whose slot is being looked at exits 75 (EX_TEMPFAIL):
                # started again at once, as an orchestrator would.
                if p.poll() == 75 and restarts[0] < 10 * n:
                    restarts[0] += 1
                    procs[k] = spawn(k)
                elif p.poll() is not None and p.returncode != 75:
                    raise SystemExit(f"worker {k} exited {p.returncode}: {open(logs[k]).read()[-3000:]}")
            time.sleep(0.2)
        t_last = max((t for t, _ in done), default=time.time())
        elapsed = t_last - t0
        # Let a last redelivery (there should be none) be seen, then stop the watchers.
        time.sleep(1)
        for p in procs:
            p.send_signal(signal.SIGTERM)
        codes = [p.wait(timeout=120) for p in procs]
        worker_lines = moto.log_lines()[before:]
        kinds = classify(worker_lines)
        table = read_table(moto)
        dup, lost = check_rows(table, args.files, args.rows)
        commits, retries, outer = commit_stats(logs)
        per_worker = {}
        for k in range(n):
            per_worker[k] = sum(f for _, f in committed([logs[k]]))
        left_others = sum(open(l, errors="replace").read().count("Files another worker's batch owns") for l in logs)
        result = {
            "n": n,
            "files_done": files_done,
            "seconds": round(elapsed, 2),
            "restarts_after_75": restarts[0],
            "files_per_s": round(files_done / elapsed, 1) if elapsed > 0 else None,
            "requests": sum(kinds.values()),
            "requests_per_file": round(sum(kinds.values()) / args.files, 2),
            "kinds_per_file": {k: round(v / args.files, 2) for k, v in sorted(kinds.items())},
            "batches": len(done),
            "commits": commits,
            "commit_retries": retries,
            "outer_retries": outer,
            "batches_with_files_left_to_others": left_others,
            "per_worker_files": per_worker,
            "rows": table["rows"],
            "distinct_ids": table["distinct_ids"],
            "duplicated_files": dup,
            "lost_files": lost,
            "queue": depth(moto, queue),
            "dlq": depth(moto, dlq),
            "exit_codes": codes,
        }
        print(json.dumps(result), flush=True)
        return result
    finally:
        moto.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", default="1,2,4,8")
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--rows", type=int, default=10)
    ap.add_argument("--delay-ms", type=int, default=100)
    ap.add_argument("--max-files-per-trigger", type=int, default=10)
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--bin", help="a prebuilt binary (default: build, copy to /tmp/autoloader-workers/bin)")
    args = ap.parse_args()
    os.makedirs(WORK, exist_ok=True)
    if not args.bin:
        subprocess.run(["cargo", "build", "--release"], cwd=ROOT, check=True)
        os.makedirs(os.path.join(WORK, "bin"), exist_ok=True)
        args.bin = os.path.join(WORK, "bin", "autoloader")
        shutil.copy2(os.path.join(ROOT, "target/release/autoloader"), args.bin)
    results = [run_n(args, int(n)) for n in args.workers.split(",")]
    base = results[0]["files_per_s"] / results[0]["n"]
    print()
    print(f"{args.files} files of {args.rows} rows, read delay {args.delay_ms} ms, maxFilesPerTrigger {args.max_files_per_trigger}")
    print("| N | s (restarts) | files/s | x N=1 | efficiency | requests/file | S3 / SQS per file | batches | commit retries | dup files | lost files | queue | DLQ |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        s3 = sum(v for k, v in r["kinds_per_file"].items() if k.startswith("s3"))
        sqs = r["kinds_per_file"].get("sqs", 0)
        speedup = r["files_per_s"] / (base * results[0]["n"]) if r["files_per_s"] else 0
        print(
            f"| {r['n']} | {r['seconds']} ({r['restarts_after_75']}) | {r['files_per_s']} | {speedup:.2f} | {speedup / r['n']:.2f} | "
            f"{r['requests_per_file']} | {s3:.2f} / {sqs:.2f} | {r['batches']} | {r['commit_retries']} (+{r['outer_retries']}) | "
            f"{r['duplicated_files']} | {r['lost_files']} | {r['queue']} | {r['dlq']} |"
        )
    with open(os.path.join(WORK, "results.json"), "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
