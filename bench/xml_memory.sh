#!/usr/bin/env bash
# One large XML file (SIZE_GB, default 2) ingested with cloudFiles.format=xml, to show the
# row-element streaming keeps memory bounded whatever the file size (budget: 512 MiB peak
# RSS). Prints peak RSS, wall time and rows. Everything goes in a temporary folder, removed
# at the end. Needs the release binary (cargo build --release) and about 2 x SIZE_GB free.
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${BIN:-target/release/autoloader}"
size_gb="${SIZE_GB:-2}"
work="$(mktemp -d "${TMPDIR:-/tmp}/xml-memory.XXXXXX")"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/landing"
python3 - "$work/landing/books.xml" "$size_gb" <<'PY'
import sys
path, size = sys.argv[1], float(sys.argv[2]) * (1 << 30)
rows = 0
with open(path, "w") as f:
    f.write('<?xml version="1.0" encoding="UTF-8"?>\n<catalog>\n')
    written = 0
    while written < size:
        chunk = []
        for i in range(rows, rows + 10000):
            chunk.append(
                f'  <book id="bk{i}" available="{"true" if i % 3 else "false"}">\n'
                f"    <author>Author {i % 977}, First</author>\n"
                + ("    <author>Second Author</author>\n" if i % 5 == 0 else "")
                + f"    <title>Title number {i} &amp; more</title>\n"
                f'    <price currency="{"USD" if i % 2 else "EUR"}">{i % 100}.{i % 97:02d}</price>\n'
                f"    <published>20{i % 25:02d}-0{i % 9 + 1}-1{i % 9}T10:00:00Z</published>\n"
                f"    <publisher><name>House {i % 41}</name><city>City {i % 13}</city></publisher>\n"
                "  </book>\n"
            )
        rows += 10000
        text = "".join(chunk)
        f.write(text)
        written += len(text)
    f.write("</catalog>\n")
print(f"generated {rows} rows, {written / (1 << 30):.2f} GiB", file=sys.stderr)
PY
/usr/bin/time -v "$bin" ingest "$work/landing" "$work/table" --once -q \
    -o cloudFiles.format=xml -o rowTag=book -o cloudFiles.inferColumnTypes=true \
    2> "$work/time.txt" | tee "$work/out.txt"
grep -E "Maximum resident set size|Elapsed \(wall clock\)" "$work/time.txt"
rss_kb=$(awk -F: '/Maximum resident set size/ {gsub(/ /, "", $2); print $2}' "$work/time.txt")
echo "peak RSS: $((rss_kb / 1024)) MiB (budget 512 MiB)"
