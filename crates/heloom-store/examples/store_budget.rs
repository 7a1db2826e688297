//! Fills a store with 64 values of 4 MiB, then walks them three times in a known (shuffled)
//! order doing fixed CPU work per value (calibrated to about the time of reading one value
//! back), under budgets of 100%, 25% and 10% of the working set, without and with
//! `set_access_order` (LRU and demand reads vs Belady and prefetch). Prints a table.
//!
//! `cargo run --release -p heloom-store --example store_budget [values] [MiB per value]`
//!
//! The spill files go through the OS page cache (buffered `std::fs`); when the machine has
//! free memory for them, reads come from the cache, not the SSD. Set `HELOOM_STORE_DIR` to
//! choose the disk.

use heloom_store::{format::hash64, Store, StoreConfig, StoreStats};
use std::hint::black_box;
use std::time::Instant;

/// Fixed work on a value: `passes` sweeps of a multiply-xor over its words.
fn work(data: &[u8], passes: usize) -> u64 {
    let mut acc = 0u64;
    for p in 0..passes {
        for w in data.chunks_exact(8) {
            let mut b = [0u8; 8];
            b.copy_from_slice(w);
            acc = (acc ^ u64::from_le_bytes(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15 + p as u64);
        }
    }
    acc
}

fn value(key: u64, len: usize) -> Vec<u8> {
    let mut x = key.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len / 8)
        .flat_map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x.to_le_bytes()
        })
        .collect()
}

fn shuffled(n: u64, seed: u64) -> Vec<u64> {
    let mut v: Vec<u64> = (0..n).collect();
    let mut x = seed | 1;
    for i in (1..v.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.swap(i, (x % (i as u64 + 1)) as usize);
    }
    v
}

struct Row {
    label: String,
    secs: f64,
    stats: StoreStats,
}

fn run(
    n: u64,
    len: usize,
    budget: Option<u64>,
    ordered: bool,
    order: &[u64],
    passes: usize,
) -> Result<(f64, StoreStats), Box<dyn std::error::Error>> {
    let config = StoreConfig {
        budget_bytes: budget,
        ..StoreConfig::default()
    };
    let store: Store<Vec<u8>> = Store::new(config, |b: &[u8]| Ok(b.to_vec()))?;
    for k in 0..n {
        store.insert(k, value(k, len))?;
    }
    store.flush()?;
    store.reset_stats();
    if ordered {
        store.set_access_order(order);
    }
    let t0 = Instant::now();
    let mut sink = 0u64;
    for &k in order {
        let v = store.get(k)?;
        sink ^= work(&v, passes);
    }
    let secs = t0.elapsed().as_secs_f64();
    black_box(sink);
    Ok((secs, store.stats()))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let n: u64 = args.get(1).map_or(Ok(64), |s| s.parse())?;
    let mib: usize = args.get(2).map_or(Ok(4), |s| s.parse())?;
    let len = mib << 20;
    let total = n * len as u64;

    // Calibrate the work to the cost of reading one value back: file read + checksum + copy.
    let probe = value(0, len);
    let path = std::env::temp_dir().join(format!("heloom-store-probe-{}", std::process::id()));
    std::fs::write(&path, &probe)?;
    let t = Instant::now();
    for _ in 0..3 {
        let b = std::fs::read(&path)?;
        black_box(hash64(&b));
        black_box(b.to_vec());
    }
    let read_s = t.elapsed().as_secs_f64() / 3.0;
    std::fs::remove_file(&path)?;
    let t = Instant::now();
    black_box(work(&probe, 1));
    let pass_s = t.elapsed().as_secs_f64();
    let passes = ((read_s / pass_s).round() as usize).max(1);

    let order: Vec<u64> = (0..3).flat_map(|p| shuffled(n, 7 + p)).collect();
    println!(
        "{n} values x {mib} MiB = {} MiB; walk of {} gets (3 shuffled passes); work per value {passes} pass(es) = {:.2} ms (one read back {:.2} ms)",
        total >> 20,
        order.len(),
        pass_s * passes as f64 * 1e3,
        read_s * 1e3
    );

    let mut rows = Vec::new();
    let (base, st) = run(n, len, None, false, &order, passes)?;
    rows.push(Row {
        label: "100% (no budget)".into(),
        secs: base,
        stats: st,
    });
    for pct in [25u64, 10] {
        for ordered in [false, true] {
            let (secs, stats) = run(n, len, Some(total * pct / 100), ordered, &order, passes)?;
            let how = if ordered {
                "access order"
            } else {
                "LRU, no order"
            };
            rows.push(Row {
                label: format!("{pct}% {how}"),
                secs,
                stats,
            });
        }
    }
    println!(
        "\n| budget             | time s | slowdown | stall s | hits | misses | prefetch hits | read MiB | written MiB | peak MiB |"
    );
    println!(
        "|--------------------|--------|----------|---------|------|--------|---------------|----------|-------------|----------|"
    );
    for r in &rows {
        let s = &r.stats;
        println!(
            "| {:<18} | {:>6.3} | {:>7.3}x | {:>7.3} | {:>4} | {:>6} | {:>13} | {:>8.0} | {:>11.0} | {:>8.0} |",
            r.label,
            r.secs,
            r.secs / base,
            s.stall_s,
            s.hits,
            s.misses,
            s.prefetch_hits,
            s.bytes_read as f64 / 1048576.0,
            s.bytes_written as f64 / 1048576.0,
            s.peak_resident_bytes as f64 / 1048576.0,
        );
    }
    Ok(())
}
