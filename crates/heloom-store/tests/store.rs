//! The store under budgets that force spills: round trips, exact statistics, Belady and LRU
//! eviction, prefetch, damaged files, concurrency and the edge cases of the configuration.

// A failing unwrap is a failing test.
#![allow(clippy::unwrap_used)]

use heloom_store::format::HEADER_LEN;
use heloom_store::{Spill, Store, StoreConfig, StoreError};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Test value: bytes, with the memory size equal to their length.
#[derive(Debug, PartialEq)]
struct Blob(Vec<u8>);

impl Spill for Blob {
    fn to_spill(&self) -> Vec<u8> {
        self.0.clone()
    }
    fn memory_bytes(&self) -> usize {
        self.0.len()
    }
}

fn blob(key: u64, len: usize) -> Blob {
    // Distinct, key-dependent content: a mixed-up reload cannot pass.
    let mut x = key.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    Blob(
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect(),
    )
}

fn store(budget: Option<u64>, prefetch_depth: usize) -> Store<Blob> {
    let config = StoreConfig {
        budget_bytes: budget,
        io_threads: 2,
        prefetch_depth,
        ..StoreConfig::default()
    };
    Store::new(config, |b: &[u8]| Ok(Blob(b.to_vec()))).unwrap()
}

/// Keys 0..5, 100 bytes each, inserted and flushed in a store with room for two and no
/// automatic prefetch: 0, 1 and 2, the least recently used, are spilled.
fn five_with_room_for_two() -> Store<Blob> {
    let s = store(Some(250), 0);
    for k in 0..5 {
        s.insert(k, blob(k, 100)).unwrap();
    }
    s.flush().unwrap();
    s
}

/// Polls `cond` (the store works in the background); fails after 10 s.
fn wait_for(what: &str, cond: impl Fn() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

const FILE: u64 = HEADER_LEN as u64 + 100;

#[test]
fn round_trip_under_a_budget_forcing_spills() {
    let sizes: Vec<usize> = (0..20).map(|k| 1000 + 211 * k).collect();
    let total: u64 = sizes.iter().map(|&s| s as u64).sum();
    let s = store(Some(total / 4), 4);
    for (k, &n) in sizes.iter().enumerate() {
        s.insert(k as u64, blob(k as u64, n)).unwrap();
    }
    s.flush().unwrap();
    assert_eq!(s.len(), 20);
    assert_eq!(s.total_bytes(), total);
    assert!(s.resident_bytes() <= total / 4);
    assert!(s.stats().bytes_written > 0);
    for round in 0..2 {
        for k in [
            7u64, 0, 19, 3, 3, 12, 5, 18, 1, 2, 4, 6, 8, 9, 10, 11, 13, 14, 15, 16, 17,
        ] {
            let v = s.get(k).unwrap();
            assert_eq!(*v, blob(k, sizes[k as usize]), "key {k}, round {round}");
        }
    }
    s.flush().unwrap();
    assert!(s.resident_bytes() <= total / 4);
}

#[test]
fn statistics_are_exact_in_a_deterministic_scenario() {
    let s = five_with_room_for_two();
    let st = s.stats();
    // Without an order, LRU: 0, 1 and 2 were written and dropped.
    assert_eq!((st.evictions, st.bytes_written, st.gets), (3, 3 * FILE, 0));
    assert_eq!(st.peak_resident_bytes, 300);
    assert_eq!(s.resident_bytes(), 200);
    assert!(s.is_resident(3) && s.is_resident(4) && !s.is_resident(0));

    s.reset_stats();
    s.set_access_order(&[0, 1, 2, 3, 4]);
    for k in 0..5 {
        assert_eq!(*s.get(k).unwrap(), blob(k, 100));
    }
    s.flush().unwrap();
    let st = s.stats();
    // 0, 1, 2 are read (misses) and, never used again, dropped at once (clean: no write).
    assert_eq!(
        (st.gets, st.hits, st.misses, st.prefetch_hits),
        (5, 2, 3, 0)
    );
    assert_eq!(
        (st.evictions, st.bytes_written, st.bytes_read),
        (3, 0, 3 * FILE)
    );
    assert_eq!(st.peak_resident_bytes, 300);
    assert!(st.stall_s > 0.0 && st.read_s > 0.0);

    // Reverse order: 4, 3 hit; then every value is used up, so LRU picks the victims: 4 and
    // 3 (dirty, never written: written now), then 2 (clean: dropped).
    s.reset_stats();
    s.set_access_order(&[4, 3, 2, 1, 0]);
    for k in (0..5).rev() {
        assert_eq!(*s.get(k).unwrap(), blob(k, 100));
    }
    s.flush().unwrap();
    let st = s.stats();
    assert_eq!((st.gets, st.hits, st.misses, st.evictions), (5, 2, 3, 3));
    assert_eq!((st.bytes_written, st.bytes_read), (2 * FILE, 3 * FILE));
    assert!(s.is_resident(1) && s.is_resident(0) && !s.is_resident(2));
}

#[test]
fn belady_evicts_the_value_used_furthest_away() {
    let s = store(Some(300), 0);
    for k in 0..3 {
        s.insert(k, blob(k, 100)).unwrap();
    }
    s.set_access_order(&[3, 0, 1, 2]);
    s.insert(3, blob(3, 100)).unwrap();
    s.flush().unwrap();
    assert!(!s.is_resident(2), "2 is used last");
    assert!(s.is_resident(0) && s.is_resident(1) && s.is_resident(3));

    // A value with no next use goes first, whatever its recency.
    s.set_access_order(&[0, 3, 1]);
    s.get(2).unwrap(); // 2 is back, most recent, and not in the order
    s.flush().unwrap();
    assert!(!s.is_resident(2));
    // 4 is not in the order either: it goes, though it is the newest.
    s.insert(4, blob(4, 100)).unwrap();
    s.flush().unwrap();
    assert!(!s.is_resident(4));
    assert!(s.is_resident(0) && s.is_resident(1) && s.is_resident(3));
    // With 4 in the order after 1, 1 (used last) goes when 4 comes back.
    s.set_access_order(&[0, 3, 4, 1]);
    s.get(0).unwrap();
    s.get(3).unwrap();
    s.get(4).unwrap();
    s.flush().unwrap();
    assert!(s.is_resident(4) && s.is_resident(1));
    assert!(!s.is_resident(0) || !s.is_resident(3));

    // No order: least recently used.
    let s = store(Some(300), 0);
    for k in 0..3 {
        s.insert(k, blob(k, 100)).unwrap();
    }
    s.get(0).unwrap();
    s.insert(3, blob(3, 100)).unwrap();
    s.flush().unwrap();
    assert!(!s.is_resident(1) && s.is_resident(0));
}

#[test]
fn explicit_prefetch_makes_the_get_a_hit() {
    let s = five_with_room_for_two();
    s.reset_stats();
    s.prefetch(&[0]);
    wait_for("prefetch of 0", || s.is_resident(0));
    assert_eq!(*s.get(0).unwrap(), blob(0, 100));
    let st = s.stats();
    assert_eq!(
        (st.gets, st.hits, st.misses, st.prefetch_hits),
        (1, 1, 0, 1)
    );
    assert_eq!(st.bytes_read, FILE);
    // The next get of 0 is a plain hit.
    s.get(0).unwrap();
    assert_eq!(s.stats().prefetch_hits, 1);
}

#[test]
fn access_order_prefetch_turns_every_get_into_a_hit() {
    let s = store(Some(250), 2);
    for k in 0..8 {
        s.insert(k, blob(k, 100)).unwrap();
    }
    s.flush().unwrap();
    s.reset_stats();
    let order = [0u64, 1, 2, 3, 4, 5, 6, 7, 0, 2, 4, 6];
    s.set_access_order(&order);
    for &k in &order {
        wait_for("prefetch", || s.is_resident(k));
        assert_eq!(*s.get(k).unwrap(), blob(k, 100));
    }
    let st = s.stats();
    assert_eq!((st.gets, st.misses), (12, 0));
    assert_eq!(st.hits, 12);
    // 6 was resident from the start (its first use) and after the first pass; the rest
    // came from prefetches.
    assert!(st.prefetch_hits >= 9, "{st:?}");
    // Prefetch never pushed the budget beyond what pending writes explain.
    assert!(st.peak_resident_bytes <= 400, "{st:?}");
}

#[test]
fn prefetch_never_evicts_a_value_needed_sooner() {
    // Budget for 2; resident 3 and 4 are needed before 0 in the order: no room, no prefetch.
    let s = five_with_room_for_two();
    s.set_access_order(&[3, 4, 0]);
    s.prefetch(&[0]);
    s.flush().unwrap();
    assert!(!s.is_resident(0) && s.is_resident(3) && s.is_resident(4));
    // Once 3 is used up, 0 may push it out.
    s.get(3).unwrap();
    s.prefetch(&[0]);
    s.flush().unwrap();
    assert!(s.is_resident(0) && s.is_resident(4) && !s.is_resident(3));
}

fn flip_byte(path: &std::path::Path, at: u64) {
    let mut data = std::fs::read(path).unwrap();
    data[at as usize] ^= 0x40;
    std::fs::write(path, data).unwrap();
}

#[test]
fn a_corrupted_file_is_an_error_naming_the_key() {
    let s = five_with_room_for_two();
    let path = s.spill_path(1).unwrap();
    flip_byte(&path, HEADER_LEN as u64 + 50);
    match s.get(1) {
        Err(e @ StoreError::Corrupt { key: 1, .. }) => {
            let msg = e.to_string();
            assert!(msg.contains("0x1") && msg.contains("checksum"), "{msg}");
            assert!(msg.contains(&path.display().to_string()), "{msg}");
        }
        other => panic!("expected Corrupt for key 1, got {other:?}"),
    }
    // The error is stable and the other values are intact.
    assert!(matches!(s.get(1), Err(StoreError::Corrupt { key: 1, .. })));
    assert_eq!(*s.get(0).unwrap(), blob(0, 100));

    // A damaged header: the key field.
    let path = s.spill_path(2).unwrap();
    flip_byte(&path, 9);
    assert!(matches!(s.get(2), Err(StoreError::Corrupt { key: 2, .. })));
}

#[test]
fn a_truncated_file_is_an_error() {
    let s = five_with_room_for_two();
    for (key, len) in [(0u64, 90u64), (1, 10), (2, 0)] {
        let path = s.spill_path(key).unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(len)
            .unwrap();
        match s.get(key) {
            Err(e @ StoreError::Corrupt { .. }) => {
                assert!(e.to_string().contains("truncated"), "{e}")
            }
            other => panic!("expected Corrupt for key {key}, got {other:?}"),
        }
    }
}

#[test]
fn a_deleted_file_is_an_io_error_with_its_path() {
    let s = five_with_room_for_two();
    let path = s.spill_path(0).unwrap();
    std::fs::remove_file(&path).unwrap();
    match s.get(0) {
        Err(e @ StoreError::Io { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains(&path.display().to_string()) && msg.contains("HELOOM_STORE_DIR"));
        }
        other => panic!("expected Io, got {other:?}"),
    }
}

#[test]
fn a_loader_error_names_key_and_file() {
    let config = StoreConfig {
        budget_bytes: Some(150),
        ..StoreConfig::default()
    };
    let s: Store<Blob> = Store::new(config, |b: &[u8]| {
        if b.first() == Some(&0xff) {
            Err("first byte 0xff is reserved".to_string())
        } else {
            Ok(Blob(b.to_vec()))
        }
    })
    .unwrap();
    s.insert(1, Blob(vec![0xff; 100])).unwrap();
    s.insert(2, Blob(vec![0x01; 100])).unwrap();
    s.flush().unwrap();
    match s.get(1) {
        Err(e @ StoreError::Load { key: 1, .. }) => {
            assert!(e.to_string().contains("reserved"), "{e}")
        }
        other => panic!("expected Load, got {other:?}"),
    }
}

#[test]
fn concurrent_gets_from_several_threads() {
    let n = 32u64;
    let s = store(Some(8 * 1000), 4);
    for k in 0..n {
        s.insert(k, blob(k, 1000)).unwrap();
    }
    s.flush().unwrap();
    s.reset_stats();
    // A shared access order that the threads walk in interleaved fashion.
    let order: Vec<u64> = (0..4 * n).map(|i| (i * 7) % n).collect();
    s.set_access_order(&order);
    std::thread::scope(|sc| {
        for t in 0..4 {
            let s = &s;
            let order = &order;
            sc.spawn(move || {
                for &k in order.iter().skip(t).step_by(4) {
                    let v: Arc<Blob> = s.get(k).unwrap();
                    assert_eq!(*v, blob(k, 1000), "thread {t}, key {k}");
                }
            });
        }
        // A fifth thread inserts, replaces and removes keys of its own meanwhile.
        let s = &s;
        sc.spawn(move || {
            for round in 0..20u64 {
                let k = 1000 + round % 5;
                s.insert(k, blob(k + round, 500)).unwrap();
                if round % 3 == 0 {
                    let v = s.remove(k).unwrap().unwrap();
                    assert_eq!(*v, blob(k + round, 500));
                }
            }
        });
    });
    s.flush().unwrap();
    let st = s.stats();
    assert_eq!(st.gets, 4 * n);
    assert_eq!(st.hits + st.misses, st.gets);
    for k in 0..n {
        assert_eq!(*s.get(k).unwrap(), blob(k, 1000));
    }
}

#[test]
fn unknown_keys() {
    let s = store(Some(1000), 4);
    assert!(matches!(s.get(99), Err(StoreError::UnknownKey(99))));
    assert!(s.get(99).unwrap_err().to_string().contains("0x63"));
    assert!(s.remove(99).unwrap().is_none());
    assert!(!s.discard(99));
    assert!(!s.contains(99));
    assert!(s.is_empty());
    s.prefetch(&[99]); // skipped
    s.set_access_order(&[99, 98]);
    s.insert(5, blob(5, 10)).unwrap();
    assert!(s.contains(5) && s.len() == 1);
}

#[test]
fn a_value_larger_than_the_budget_is_kept_on_disk() {
    let s = store(Some(100), 4);
    s.insert(1, blob(1, 1000)).unwrap();
    s.insert(2, blob(2, 50)).unwrap();
    s.flush().unwrap();
    assert_eq!(s.total_bytes(), 1050);
    assert!(!s.is_resident(1) && s.is_resident(2));
    assert!(s.spill_path(1).is_some());
    for _ in 0..2 {
        let v = s.get(1).unwrap();
        assert_eq!(*v, blob(1, 1000));
        s.flush().unwrap();
        // Dropped again right after the get; the caller's Arc keeps it alive.
        assert!(!s.is_resident(1));
        assert_eq!(v.0.len(), 1000);
    }
    // The small value was never pushed out for the large one.
    assert!(s.is_resident(2));
    assert!(s.resident_bytes() <= 100);
    assert_eq!(s.stats().misses, 2);
}

#[test]
fn configuration_errors() {
    let bad = |c: StoreConfig| Store::new(c, |b: &[u8]| Ok(Blob(b.to_vec()))).err();
    let e = bad(StoreConfig {
        budget_bytes: Some(0),
        ..StoreConfig::default()
    });
    assert!(matches!(e, Some(StoreError::Config(m)) if m.contains("None")));
    let e = bad(StoreConfig {
        io_threads: 0,
        budget_bytes: Some(10),
        ..StoreConfig::default()
    });
    assert!(matches!(e, Some(StoreError::Config(_))));
}

#[test]
fn no_budget_never_spills() {
    let s = store(None, 4);
    for k in 0..10 {
        s.insert(k, blob(k, 1000)).unwrap();
    }
    s.flush().unwrap();
    assert_eq!(s.resident_bytes(), 10_000);
    assert_eq!(s.total_bytes(), 10_000);
    assert_eq!(s.dir(), std::path::Path::new(""));
    for k in 0..10 {
        assert_eq!(*s.get(k).unwrap(), blob(k, 1000));
    }
    let st = s.stats();
    assert_eq!(
        (st.hits, st.misses, st.evictions, st.bytes_written),
        (10, 0, 0, 0)
    );
}

#[test]
fn remove_replace_and_cleanup() {
    let s = five_with_room_for_two();
    let dir = s.dir().to_path_buf();
    let path0 = s.spill_path(0).unwrap();
    // Remove of a spilled value reads it back and deletes its file.
    assert_eq!(*s.remove(0).unwrap().unwrap(), blob(0, 100));
    assert!(!path0.exists() && !s.contains(0));
    assert_eq!(s.total_bytes(), 400);
    // Replacing a spilled value: the new one wins, the old file goes.
    let path1 = s.spill_path(1).unwrap();
    s.insert(1, blob(11, 100)).unwrap();
    s.flush().unwrap();
    assert!(!path1.exists());
    assert_eq!(*s.get(1).unwrap(), blob(11, 100));
    assert!(s.discard(2));
    s.flush().unwrap();
    let files = std::fs::read_dir(&dir).unwrap().count();
    assert!(files <= 4, "{files} files left in {}", dir.display());
    // The private directory goes with the store.
    drop(s);
    assert!(!dir.exists());
}

#[test]
fn a_given_directory_is_kept_but_emptied() {
    let dir = std::env::temp_dir().join(format!("heloom-store-test-{}", std::process::id()));
    let config = StoreConfig {
        budget_bytes: Some(150),
        dir: Some(dir.clone()),
        ..StoreConfig::default()
    };
    let s: Store<Blob> = Store::new(config, |b: &[u8]| Ok(Blob(b.to_vec()))).unwrap();
    for k in 0..4 {
        s.insert(k, blob(k, 100)).unwrap();
    }
    s.flush().unwrap();
    assert!(std::fs::read_dir(&dir).unwrap().count() >= 3);
    drop(s);
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    std::fs::remove_dir(&dir).unwrap();
}

#[test]
fn values_in_use_are_evicted_last_when_asked() {
    // LRU alone evicts 0 (least recent) even while a caller holds it, which frees nothing.
    let s = store(Some(250), 0);
    s.insert(0, blob(0, 100)).unwrap();
    s.insert(1, blob(1, 100)).unwrap();
    let held = s.get(0).unwrap();
    s.get(1).unwrap();
    s.insert(2, blob(2, 100)).unwrap();
    s.flush().unwrap();
    assert!(!s.is_resident(0) && s.is_resident(1));
    drop(held);
    // Asked to prefer values nobody holds: 1 goes although 0 is less recent.
    let s = store(Some(250), 0);
    s.set_prefer_unheld(true);
    s.insert(0, blob(0, 100)).unwrap();
    s.insert(1, blob(1, 100)).unwrap();
    let held = s.get(0).unwrap();
    s.get(1).unwrap();
    s.insert(2, blob(2, 100)).unwrap();
    s.flush().unwrap();
    assert!(s.is_resident(0) && !s.is_resident(1) && s.is_resident(2));
    assert_eq!(*held, blob(0, 100));
    // Once nobody holds it, 0 is an ordinary value again (least recent: next to go).
    drop(held);
    s.insert(3, blob(3, 100)).unwrap();
    s.flush().unwrap();
    assert!(!s.is_resident(0));
}

#[test]
fn the_budget_can_change() {
    let s = store(Some(300), 0);
    for k in 0..3 {
        s.insert(k, blob(k, 100)).unwrap();
    }
    s.flush().unwrap();
    assert_eq!(s.resident_bytes(), 300);
    s.set_budget_bytes(150).unwrap();
    s.flush().unwrap();
    assert_eq!(s.budget_bytes(), Some(150));
    assert!(s.resident_bytes() <= 150, "{}", s.resident_bytes());
    for k in 0..3 {
        assert_eq!(*s.get(k).unwrap(), blob(k, 100), "nothing lost");
    }
    s.set_budget_bytes(1000).unwrap();
    assert!(s.set_budget_bytes(0).is_err());
    let unlimited = store(None, 0);
    let e = unlimited.set_budget_bytes(100).unwrap_err().to_string();
    assert!(e.contains("without a budget"), "{e}");
}
