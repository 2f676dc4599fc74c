#!/usr/bin/env python3
"""What a running watcher's glibc heap holds, by chunk size: to tell what grows in a long run.

    python3 bench/heap_walk.py PID [--out FILE.json] [--base EARLIER.json] [--show SIZE ...]

Stops the process (SIGSTOP) for the second it takes to read its heaps from /proc/PID/mem
(as root, or the process's owner with ptrace allowed), walks every glibc malloc chunk of
the main heap and of each arena heap, and counts the chunks in use by size; allocations of
128 KiB or more have mappings of their own in a watcher (`src/memory.rs`) and are counted
from /proc/PID/maps as anonymous mappings outside the arena heaps. With `--base`, prints
the sizes whose bytes in use grew most since an earlier walk. With `--show SIZE`, prints
the printable text in a few chunks of that size, to name what they hold.

Chunks in the tcache and fastbins look in use to a walk (glibc keeps their bit set); there
are at most a few hundred such, so a size class that grows by thousands is live memory.
"""
import argparse
import json
import os
import re
import signal
import struct
import sys
import time

HEAP_MAX = 64 << 20  # glibc's HEAP_MAX_SIZE on 64-bit: arena heaps are aligned to it


def mappings(pid):
    out = []
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            parts = line.split()
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            out.append((lo, hi, parts[1], parts[5] if len(parts) > 5 else ""))
    return out


def walk(mem, lo, hi, first):
    """Chunks from `first` to the heap's top: {size: [count, [addresses...]]} of those in use."""
    mem.seek(first)
    data = mem.read(hi - first)
    sizes = {}
    off = 0
    prev = None  # (offset, size) of the chunk before, its in-use bit is in the next header
    while off + 16 <= len(data):
        size_field = struct.unpack_from("<Q", data, off + 8)[0]
        size = size_field & ~7
        if size < 32 or size % 16 or off + size > len(data):
            break
        if prev is not None and size_field & 1:
            p_off, p_size = prev
            entry = sizes.setdefault(p_size, [0, []])
            entry[0] += 1
            if len(entry[1]) < 64:
                entry[1].append(first + p_off)
        prev = (off, size)
        off += size
    # The last chunk reached is the top (free); a walk that stopped early is reported.
    return sizes, first + off


def chain_ok(data, start, limit):
    off, n = start, 0
    while off + 16 <= limit:
        size = struct.unpack_from("<Q", data, off + 8)[0] & ~7
        if size < 32 or size % 16 or off + size > limit:
            return False
        off += size
        n += 1
        if off == limit or (off + 16 > limit and n > 2):
            return True
    return off >= limit - 16 and n > 2


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pid", type=int)
    ap.add_argument("--out")
    ap.add_argument("--base")
    ap.add_argument("--show", type=int, action="append", default=[])
    ap.add_argument("--top", type=int, default=15)
    args = ap.parse_args()
    pid = args.pid
    os.kill(pid, signal.SIGSTOP)
    t0 = time.perf_counter()
    try:
        maps = mappings(pid)
        totals, samples, regions = {}, {}, []
        with open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
            arena_heaps = []
            for lo, hi, perms, name in maps:
                if name == "[heap]":
                    sizes, end = walk(mem, lo, hi, lo)
                    regions.append(("main", lo, hi, end, sizes))
                elif name == "" and perms.startswith("rw") and lo % HEAP_MAX == 0:
                    arena_heaps.append((lo, hi))
            for lo, hi in arena_heaps:
                # heap_info: ar_ptr, prev, size (bytes of the heap in use), mprotect_size, ...
                mem.seek(lo)
                head = mem.read(hi - lo)
                used = struct.unpack_from("<Q", head, 16)[0]
                limit = min(used, hi - lo)
                start = next((o for o in range(32, 8192, 16) if chain_ok(head, o, limit)), None)
                if start is None:
                    print(f"arena heap at {lo:#x}: no chunk chain found", file=sys.stderr)
                    continue
                sizes, end = walk(mem, lo, lo + limit, lo + start)
                regions.append(("arena", lo, lo + limit, end, sizes))
            for _, _, _, _, sizes in regions:
                for size, (count, addrs) in sizes.items():
                    totals[size] = totals.get(size, 0) + count
                    samples.setdefault(size, []).extend(addrs[:8])
            heap_ranges = [(lo, hi) for _, lo, hi, *_ in regions] + [(lo, lo + HEAP_MAX) for lo, _ in arena_heaps]
            big = [hi - lo for lo, hi, perms, name in maps
                   if name == "" and perms.startswith("rw")
                   and not any(a <= lo < b for a, b in heap_ranges)]
            shows = {}
            for size in args.show:
                texts = []
                for addr in samples.get(size, [])[:6]:
                    mem.seek(addr + 16)
                    body = mem.read(size - 16)
                    words = [w.decode() for w in re.findall(rb"[\x20-\x7e]{4,}", body)[:12]]
                    texts.append(" ".join(words) or body[:64].hex())
                shows[size] = texts
    finally:
        os.kill(pid, signal.SIGCONT)
    paused = time.perf_counter() - t0
    in_use = sum(s * c for s, c in totals.items())
    report = {
        "pid": pid,
        "time": time.time(),
        "paused_s": round(paused, 3),
        "heaps": [{"kind": k, "bytes": hi - lo, "walked_to": end - lo} for k, lo, hi, end, _ in regions],
        "chunks_in_use": sum(totals.values()),
        "bytes_in_use": in_use,
        "anon_mappings_outside_heaps": {"count": len(big), "bytes": sum(big)},
        "by_size": {str(s): c for s, c in sorted(totals.items())},
    }
    print(f"paused {paused:.2f} s; heaps {[(h['kind'], h['bytes'] >> 10, h['walked_to'] >> 10) for h in report['heaps']]} KiB;"
          f" {report['chunks_in_use']} chunks, {in_use / 2**20:.1f} MiB in use;"
          f" {len(big)} other anonymous mappings, {sum(big) / 2**20:.1f} MiB")
    if args.base:
        with open(args.base) as f:
            base = json.load(f)
        before = {int(k): v for k, v in base["by_size"].items()}
        grew = sorted(((s * (totals.get(s, 0) - before.get(s, 0)), s) for s in set(totals) | set(before)),
                      reverse=True)
        print(f"since the base: {(in_use - base['bytes_in_use']) / 2**20:+.2f} MiB in use,"
              f" {report['chunks_in_use'] - base['chunks_in_use']:+d} chunks")
        print("size | chunks before -> now | bytes grown")
        for delta, s in grew[:args.top]:
            print(f"{s} | {before.get(s, 0)} -> {totals.get(s, 0)} | {delta / 1024:+.1f} KiB")
    else:
        print("size | chunks | KiB")
        for s, c in sorted(totals.items(), key=lambda x: -x[0] * x[1])[:args.top]:
            print(f"{s} | {c} | {s * c / 1024:.1f}")
    for size, texts in shows.items():
        print(f"-- chunks of {size} bytes:")
        for t in texts:
            print("   ", t[:300])
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f)


if __name__ == "__main__":
    main()
