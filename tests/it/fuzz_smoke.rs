//! The short fuzz run CI can afford on stable Rust: each `cargo fuzz` target's function is
//! fed its seed corpus (`fuzz/corpus/<target>`, which also keeps every input that once
//! crashed) and a fixed, pseudo-random set of mutations of it. Deterministic, so a failure
//! reproduces; the failing input is printed. The long, coverage-guided run is
//! `fuzz/run.sh` (nightly and cargo-fuzz).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

use autoloader::testing::fuzzing::{fuzz_checkpoint, fuzz_csv, fuzz_hints, fuzz_json};

/// Tokens the mutations insert: the syntax of each input language and values at the edges
/// of what the decoders convert (multi-byte text next to fixed offsets, huge exponents).
const TOKENS: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b"\"",
    b",",
    b":",
    b"\\",
    b"\n",
    b"\r\n",
    b" ",
    b"`",
    b"<",
    b">",
    b"(",
    b")",
    b";",
    b"'",
    b"0",
    b"-",
    b"null",
    b"true",
    b"1e-2147483648",
    b"9e999999999",
    b"-0.0",
    b"18446744073709551616",
    b"\"2026-03-13T10:07:00Z\"",
    b"2026-03-13T10:0",
    b"2026-03-13 1",
    b"+09:00",
    b"\xc3\xa9",
    b"\xe2\x82\xac",
    b"\xf0\x9f\x98\x80",
    b"\xff",
    b"\x00",
    b"\xef\xbb\xbf",
    b"\x1f\x8b",
    b"ARRAY<",
    b"MAP<",
    b"STRUCT<",
    b"DECIMAL(38,38)",
    b"DECIMAL(",
    b"a.element.b",
    b"_rescued_data",
    b"{\"a\":",
    b"[{}]",
    b"\"\"",
];

/// xorshift64*: small, seedable, and the same on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

/// One to four byte-level edits of `base`, sometimes spliced with another seed.
fn mutate(rng: &mut Rng, base: &[u8], seeds: &[Vec<u8>]) -> Vec<u8> {
    let mut v = base.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(v.len() + 1);
        match rng.below(7) {
            0 if !v.is_empty() => {
                let i = at.min(v.len() - 1);
                v[i] ^= 1 << rng.below(8);
            }
            1 if !v.is_empty() => {
                let i = at.min(v.len() - 1);
                v[i] = rng.next() as u8;
            }
            2 | 3 => {
                let token = TOKENS[rng.below(TOKENS.len())];
                v.splice(at..at, token.iter().copied());
            }
            4 => {
                let end = (at + 1 + rng.below(16)).min(v.len());
                v.drain(at..end);
            }
            5 => v.truncate(at),
            _ => {
                let other = &seeds[rng.below(seeds.len())];
                let from = rng.below(other.len() + 1);
                v.truncate(at);
                v.extend_from_slice(&other[from..]);
            }
        }
    }
    v
}

fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("seed corpus {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    let seeds: Vec<Vec<u8>> = paths.iter().map(|p| std::fs::read(p).unwrap()).collect();
    assert!(!seeds.is_empty(), "{} has seeds", dir.display());
    seeds
}

/// Runs `fuzz_one` on every seed, then on `mutations` mutants; a panic fails the test
/// naming the input.
fn smoke(target: &str, fuzz_one: fn(&[u8]), seeds: &[Vec<u8>], mutations: usize) {
    let started = std::time::Instant::now();
    let run = |input: &[u8], what: &str| {
        if catch_unwind(AssertUnwindSafe(|| fuzz_one(input))).is_err() {
            panic!(
                "fuzz_{target} panicked on {what}: b\"{}\"",
                input.escape_ascii()
            );
        }
    };
    for (i, seed) in seeds.iter().enumerate() {
        run(seed, &format!("seed {i}"));
    }
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ target.len() as u64);
    for i in 0..mutations {
        let base = &seeds[rng.below(seeds.len())];
        let input = mutate(&mut rng, base, seeds);
        run(&input, &format!("mutation {i}"));
    }
    eprintln!(
        "fuzz_smoke {target}: {} seeds + {mutations} mutations in {:.2?}",
        seeds.len(),
        started.elapsed()
    );
}

#[test]
fn fuzz_smoke_hints() {
    smoke("hints", fuzz_hints, &corpus("hints"), 20_000);
}

#[test]
fn fuzz_smoke_json() {
    smoke("json", fuzz_json, &corpus("json"), 2_000);
}

#[test]
fn fuzz_smoke_csv() {
    smoke("csv", fuzz_csv, &corpus("csv"), 2_000);
}

/// Fewer mutations: each one writes and opens a state file of several megabytes.
#[test]
fn fuzz_smoke_checkpoint() {
    smoke("checkpoint", fuzz_checkpoint, &corpus("checkpoint"), 100);
}
