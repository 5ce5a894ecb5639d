//! Property: any log the benchmark generator writes (every format version), stored into a
//! SQLite store the way DSH's store writes it (packed rows within random append batches,
//! zstd `data`, varint sources; or schema 15's JSON text), reads back as the same logical
//! log, and validates as the JSONL log does.

mod common;

#[path = "../benches/gen/mod.rs"]
mod generator;
#[path = "../benches/store/mod.rs"]
mod store;

use dshs::log::scan::Status;
use dshs::log::sqlite::Store;
use proptest::prelude::*;

/// Store, read back, compare; the number of packed rows and of zstd `data` rows stored.
fn roundtrip(
    version: u8,
    seed: u64,
    bytes: u64,
    schema: i64,
    compress: bool,
    batches: &[usize],
) -> Result<(i64, i64), TestCaseError> {
    let mut buf = Vec::new();
    let mut g = generator::Generator::new(&mut buf, version, seed);
    g.run(bytes).expect("generate");
    let text = String::from_utf8(buf).expect("UTF-8");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("store.db");
    let mut conn = store::create(&path, schema).expect("create");
    let policy = store::Policy {
        schema,
        compress,
        pack: true,
    };
    let mut sizes = batches.iter().copied().cycle();
    let (id, events) =
        store::store_log(&mut conn, &text, policy, || sizes.next().unwrap_or(1)).expect("store");
    let count = |sql: &str| {
        conn.query_row(sql, [], |r| r.get::<_, i64>(0))
            .expect("count")
    };
    let stats = (
        count("SELECT count(*) FROM events WHERE ignorable = 0"),
        count("SELECT count(*) FROM events WHERE typeof(data) = 'blob'"),
    );
    drop(conn);
    let header = text.lines().next().expect("header");
    let want = format!("{header}\n{events}");

    let mut s = Store::open(&path).expect("open");
    let mut r = s.read(&id).expect("read");
    let derived = r.derive_is_seeded().expect("derive");
    prop_assert_eq!(derived.is_some(), version >= 2);
    let mut got = Vec::new();
    std::io::Read::read_to_end(&mut r, &mut got).expect("stream");
    let end = r.finish().expect("finish");
    let got = String::from_utf8(got).expect("UTF-8");
    if got != want {
        for (i, (a, b)) in got.lines().zip(want.lines()).enumerate() {
            prop_assert_eq!(a, b, "line {}", i + 1);
        }
        prop_assert_eq!(got.lines().count(), want.lines().count());
    }
    prop_assert!(!end.refused && end.snapshot.torn.is_none());
    let (scan, findings) = common::scan_text(&got);
    prop_assert_eq!(scan.status(), Status::Valid, "{:?}", findings);
    prop_assert!(findings.is_empty(), "{:?}", findings);
    // The seed check of v2+ would have refused the header without the derived field.
    let unseeded = end
        .findings
        .iter()
        .filter(|f| f.code.as_str() == "sqlite-is-seeded-derived")
        .count();
    prop_assert_eq!(unseeded, usize::from(version >= 2));
    Ok(stats)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn a_generated_log_stored_like_dsh_reads_back_as_the_same_logical_log(
        version in 0u8..=4,
        seed in 1u64..10_000,
        compress in any::<bool>(),
        batches in proptest::collection::vec(1usize..300, 1..6),
    ) {
        roundtrip(version, seed, 60_000, 17, compress, &batches)?;
    }

    #[test]
    fn a_generated_log_stored_in_schema_15_reads_back_as_the_same_logical_log(
        version in 0u8..=4,
        seed in 1u64..10_000,
    ) {
        roundtrip(version, seed, 40_000, 15, false, &[64])?;
    }
}

#[test]
fn a_large_log_crosses_many_refills_and_packed_row_bounds() {
    // Batches far above 1,024 members make the writer cut long runs; ~3 MB of log makes the
    // reader refill its 256 KiB buffer many times.
    let (packed, blobs) =
        roundtrip(0, 42, 3_000_000, 17, true, &[5000, 3, 700]).expect("round trip");
    assert!(
        packed > 50 && blobs > 10,
        "{packed} packed rows, {blobs} zstd rows"
    );
}
