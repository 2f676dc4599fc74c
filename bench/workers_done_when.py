#!/usr/bin/env python3
"""Issue 17's "Done when", tried as a new user would, following README.md: a bucket with
notifications into a queue (with a dead-letter queue), three identical worker processes
(watch mode, `--worker auto`), a producer uploading 3,000 files while workers are SIGKILLed
and restarted at random moments; at the end every row is in the table exactly once, nothing
is left in the queue (visible or in flight) and the dead-letter queue is empty.

Everything the user would type comes from README.md itself, against a moto server on
127.0.0.1 (S3 + SQS + STS + bucket notifications):
  - the setup: the ```sh block after "autoloader sets nothing up itself yet" (AWS CLI:
    the dead-letter queue, the queue, its policy, the bucket notification), run by bash as
    it stands (REGION=eu-west-1, BUCKET=lake, ...); its last command, a single-process
    `autoloader ingest`, is left out (the workers replace it); `aws` on PATH is a wrapper
    adding `--endpoint-url` (AWS CLI v1 ignores AWS_ENDPOINT_URL for SQS);
  - the worker command: the ```sh block under "#### Competing workers", run three times.
The bucket itself is created first (the README assumes it exists). Each start of a worker
gets a fresh AUTOLOADER_STATE_DIR, as a new pod would.

    python3 bench/workers_done_when.py                 # 3,000 files, seed 17
    python3 bench/workers_done_when.py --files 300 --kills 3   # a quick look
"""

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import workers as w  # noqa: E402

ROOT = w.ROOT
WORK = "/tmp/autoloader-done-when"
README = os.path.join(ROOT, "README.md")
# The README's example values (its setup block sets them; the worker block needs them too).
SETTINGS = "REGION=eu-west-1 BUCKET=lake PREFIX=landing/orders/ QUEUE=lake-landing-orders"


def readme_blocks():
    """(setup script, worker command) from README.md, as a user would copy them."""
    text = open(README).read()
    at = text.index("autoloader sets nothing up itself yet")
    setup = re.search(r"```sh\n(.*?)```", text[at:], re.S).group(1)
    at = text.index("#### Competing workers")
    worker = re.search(r"```sh\n(.*?)```", text[at:], re.S).group(1)
    # The setup's last command is one autoloader process; the workers replace it.
    cut = setup.index("autoloader ingest")
    setup, single = setup[:cut], setup[cut:]
    assert "--worker" not in single, single
    worker = "\n".join(l for l in worker.splitlines() if not l.lstrip().startswith("#"))
    return setup, worker


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=3000)
    ap.add_argument("--rows", type=int, default=10)
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--rate", type=float, default=50, help="files uploaded per second")
    ap.add_argument("--kills", type=int, default=12, help="SIGKILLs while the producer uploads")
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--timeout", type=float, default=600, help="seconds to wait for the drain")
    ap.add_argument("--bin", help="a prebuilt binary (default: target/release/autoloader, copied)")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(os.path.join(WORK, "bin"))
    # The user's `autoloader` on PATH: a copy, so a rebuild meanwhile cannot swap it.
    shutil.copy2(args.bin or os.path.join(ROOT, "target/release/autoloader"), os.path.join(WORK, "bin", "autoloader"))
    moto = w.Moto(os.path.join(WORK, "moto.log"))
    moto.region = "eu-west-1"
    env = dict(os.environ, **moto.env())
    env["PATH"] = os.path.join(WORK, "bin") + os.pathsep + env["PATH"]
    env["AWS_REGION"] = env["AWS_DEFAULT_REGION"] = "eu-west-1"
    real_aws = shutil.which("aws")
    if not real_aws:
        raise SystemExit("the AWS CLI is needed: python3 -m pip install awscli")
    wrapper = os.path.join(WORK, "bin", "aws")
    with open(wrapper, "w") as f:
        f.write(f'#!/bin/sh\nexec {real_aws} --endpoint-url "$AWS_ENDPOINT_URL" "$@"\n')
    os.chmod(wrapper, 0o755)
    env["RUST_LOG"] = "autoloader=info"
    env.pop("AUTOLOADER_FAILPOINT", None)
    try:
        setup, worker = readme_blocks()
        moto.client("s3").create_bucket(
            Bucket="lake", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"}
        )
        script = f"set -euo pipefail\ncd {WORK}\n{setup}\necho \"$QUEUE_URL\"\n"
        out = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(f"the README's setup failed:\n{out.stdout}\n{out.stderr}")
        queue = out.stdout.strip().splitlines()[-1]
        dlq = queue + "-dlq"
        print(f"setup from the README: queue {queue}", flush=True)
        worker_script = f"set -euo pipefail\n{SETTINGS}\nQUEUE_URL={queue}\nexec {worker.strip()}\n"

        starts = [0]
        procs = {}

        def start(i):
            starts[0] += 1
            n = starts[0]
            state = os.path.join(WORK, f"state{n}")
            log = open(os.path.join(WORK, f"worker{n}.log"), "w")
            procs[i] = (
                subprocess.Popen(["bash", "-c", worker_script], env=dict(env, AUTOLOADER_STATE_DIR=state), stdout=log, stderr=log),
                n,
            )

        for i in range(args.workers):
            start(i)
        t0 = time.time()
        # The producer: FILES files at RATE a second, 8 at a time.
        s3 = moto.client("s3")
        produced = [0]

        def produce():
            for i in range(args.files):
                target = t0 + i / args.rate
                if time.time() < target:
                    time.sleep(target - time.time())
                s3.put_object(Bucket="lake", Key=f"landing/orders/{i:05}.json", Body=w.file_body(i, args.rows))
                produced[0] = i + 1

        producer = threading.Thread(target=produce)
        producer.start()
        # Kills at random moments while the producer runs (and restarts, at once or after
        # up to 3 s, as an orchestrator would).
        span = args.files / args.rate
        moments = sorted(rng.uniform(1, span) for _ in range(args.kills))
        kills = []
        for m in moments:
            delay = t0 + m - time.time()
            if delay > 0:
                time.sleep(delay)
            i = rng.randrange(args.workers)
            p, n = procs[i]
            p.send_signal(signal.SIGKILL)
            # bash execs the binary, so the pid is the worker's.
            p.wait()
            kills.append({"at_s": round(time.time() - t0, 1), "worker_start": n, "uploaded": produced[0]})
            time.sleep(rng.choice([0, 0, 1, 3]))
            start(i)
        producer.join()
        uploaded_s = time.time() - t0
        print(f"uploaded {args.files} files in {uploaded_s:.1f} s; {len(kills)} SIGKILLs: {kills}", flush=True)
        # Drained: the queue empty (messages a killed worker held come back after the
        # queue's visibility timeout, 60 s in the README's setup) and every row in.
        deadline = time.time() + args.timeout
        table = None
        while time.time() < deadline:
            if w.depth(moto, queue) == (0, 0):
                table = w.read_table(moto)
                if table["rows"] >= args.files * args.rows:
                    break
            time.sleep(3)
        drained_s = time.time() - t0
        time.sleep(5)
        status = subprocess.run(
            ["autoloader", "status", "--checkpoint", "s3://lake/checkpoints/orders"],
            env=dict(env, AUTOLOADER_STATE_DIR=os.path.join(WORK, "status")),
            capture_output=True,
            text=True,
        )
        for p, _ in procs.values():
            p.send_signal(signal.SIGTERM)
        codes = [p.wait(timeout=120) for p, _ in procs.values()]
        table = w.read_table(moto)
        counts = table["files"]
        dup = sum(1 for n in counts.values() if n > args.rows)
        lost = sum(1 for f in range(args.files) if counts.get(f, 0) < args.rows)
        logs = [os.path.join(WORK, f"worker{n}.log") for n in range(1, starts[0] + 1)]
        text = "".join(open(l, errors="replace").read() for l in logs)
        result = {
            "files": args.files,
            "rows_expected": args.files * args.rows,
            "rows": table["rows"],
            "distinct_ids": table["distinct_ids"],
            "duplicated_files": dup,
            "lost_files": lost,
            "queue": w.depth(moto, queue),
            "dlq": w.depth(moto, dlq),
            "sigkills": len(kills),
            "worker_starts": starts[0],
            "uploaded_s": round(uploaded_s, 1),
            "drained_s": round(drained_s, 1),
            "adoptions": text.count("Adopting a dead worker's slot"),
            "replays": text.count("Re-running an unfinished batch exactly as planned"),
            "left_to_others": text.count("Files another worker's batch owns are left to it"),
            "batches_committed": text.count("Committed batch."),
            "messages_left_warnings": text.count("Queue message left in the queue"),
            "final_exit_codes": codes,
        }
        print(status.stdout + status.stderr)
        print(json.dumps(result, indent=1))
        ok = (
            table["rows"] == args.files * args.rows
            and table["distinct_ids"] == args.files * args.rows
            and dup == 0
            and lost == 0
            and result["queue"] == (0, 0)
            and result["dlq"] == (0, 0)
        )
        print("PASS: every row once, the queue and the dead-letter queue empty" if ok else "FAIL")
        with open(os.path.join(WORK, "result.json"), "w") as f:
            json.dump(result, f, indent=1)
        return 0 if ok else 1
    finally:
        moto.stop()


if __name__ == "__main__":
    sys.exit(main())
