//! The binary format of task graphs: round trips that rebuild the same graph and compute the
//! same result, every single-bit flip refused, and stored fields the replay contradicts.

#![allow(clippy::unwrap_used)]

use heloom_ckks::serialize::{peek_header, ObjectKind, CHECKSUM_LEN, HEADER_LEN};
use heloom_ckks::*;
use heloom_runtime::graph::{exp_graph, ExpVariant, GraphError};
use heloom_runtime::TaskGraph;
use std::sync::Arc;
use xxhash_rust::xxh3::xxh3_64;

fn moduli() -> Vec<u64> {
    fuzz_graph::seed_params().moduli().to_vec()
}

fn graphs() -> Vec<TaskGraph> {
    fuzz_graph::seed_graphs()
}

fn same(a: &TaskGraph, b: &TaskGraph) {
    assert_eq!(a.name(), b.name());
    assert_eq!(a.moduli(), b.moduli());
    assert_eq!(a.nodes(), b.nodes());
    assert_eq!(a.tasks(), b.tasks());
    assert_eq!(a.input_nodes(), b.input_nodes());
    assert_eq!(a.outputs(), b.outputs());
}

#[track_caller]
fn format_msg(r: std::result::Result<TaskGraph, GraphError>) -> String {
    match r {
        Err(GraphError::Ckks(CkksError::Format(m))) => m,
        Err(e) => panic!("expected a format error, got {e:?}"),
        Ok(_) => panic!("expected a format error, got a graph"),
    }
}

fn reseal(b: &mut [u8]) {
    let end = b.len() - CHECKSUM_LEN;
    let sum = xxh3_64(&b[..end]);
    b[end..].copy_from_slice(&sum.to_le_bytes());
}

#[test]
fn graphs_round_trip() {
    for g in graphs() {
        let bytes = g.to_bytes();
        let h = peek_header(&bytes).unwrap();
        assert_eq!(h.kind, ObjectKind::TaskGraph);
        assert_eq!(h.word_bits, 0);
        let back = TaskGraph::from_bytes(&bytes).unwrap();
        same(&g, &back);
        assert_eq!(back.to_bytes(), bytes);
    }
}

#[test]
fn a_loaded_graph_computes_the_same() {
    let params = fuzz_graph::seed_params();
    let ctx = Context::<u64>::new(params).unwrap();
    let keys = keygen(&ctx, &[], false).unwrap();
    let ev = Evaluator::new(&ctx, Arc::new(keys.evaluation_keys.clone())).unwrap();
    let xs: Vec<f64> = (0..64).map(|i| i as f64 / 64.0 - 0.5).collect();
    let ct = Encryptor::new(&ctx).encrypt(&xs, &keys.public_key).unwrap();
    let g = exp_graph(ExpVariant::Bsgs, ctx.params().moduli(), 5, ct.scale()).unwrap();
    let back = TaskGraph::from_bytes(&g.to_bytes()).unwrap();
    let a = g.run(&ev, std::slice::from_ref(&ct)).unwrap();
    let b = back.run(&ev, std::slice::from_ref(&ct)).unwrap();
    assert!(a[0].polys() == b[0].polys());
}

#[test]
fn every_single_bit_flip_is_refused() {
    let mut flips = 0;
    for g in graphs() {
        let mut b = g.to_bytes();
        for i in 0..b.len() {
            for bit in 0..8 {
                b[i] ^= 1 << bit;
                format_msg(TaskGraph::from_bytes(&b));
                b[i] ^= 1 << bit;
                flips += 1;
            }
        }
    }
    assert!(flips > 10_000, "{flips}");
}

/// Offsets of the first node of a graph named `name` over `primes` primes.
fn first_node(name: &str, primes: usize) -> usize {
    HEADER_LEN + 4 + name.len() + 2 + 8 * primes + 4
}

#[test]
fn replay_refuses_what_the_builder_would_not_record() {
    let m = moduli();
    let g = exp_graph(ExpVariant::Horner, &m, 5, 2f64.powi(40)).unwrap();
    let good = g.to_bytes();
    let load = |b: &[u8]| {
        let mut b = b.to_vec();
        reseal(&mut b);
        TaskGraph::from_bytes(&b)
    };
    let n0 = first_node(g.name(), m.len());
    // Node 0 is input 0: op 0, index u32, level u16, scale f64, size u8; node 1 follows.
    assert_eq!(good[n0], 0);
    let n1 = n0 + 1 + 4 + 2 + 8 + 1;
    // Input numbered out of order.
    let mut b = good.clone();
    b[n0 + 1] = 3;
    assert!(format_msg(load(&b)).contains("inputs are numbered in order"));
    // An input above the chain's top level.
    let mut b = good.clone();
    b[n0 + 5..n0 + 7].copy_from_slice(&9u16.to_le_bytes());
    assert!(format_msg(load(&b)).contains("cannot be replayed"));
    // Unknown op, and a node that reads itself.
    let mut b = good.clone();
    b[n1] = 99;
    assert!(format_msg(load(&b)).contains("op 99"));
    let mut b = good.clone();
    b[n1 + 1..n1 + 5].copy_from_slice(&1u32.to_le_bytes());
    assert!(format_msg(load(&b)).contains("does not precede it"));
    // A stored size the replay contradicts: the last byte of node 0.
    let mut b = good.clone();
    b[n1 - 1] = 3;
    assert!(format_msg(load(&b)).contains("replays as"));
    // A node count the bytes cannot hold.
    let mut b = good.clone();
    b[n0 - 4..n0].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(format_msg(load(&b)).contains("nodes declared"));
    // The chain fingerprint.
    let mut b = good.clone();
    b[n0 - 12] ^= 4;
    assert!(format_msg(load(&b)).contains("chain"));
    // The output list (count, then one node) at the end of the payload: a count the bytes
    // cannot hold, an output that does not exist.
    let end = good.len() - CHECKSUM_LEN;
    let mut b = good.clone();
    b[end - 8..end - 4].copy_from_slice(&2u32.to_le_bytes());
    assert!(format_msg(load(&b)).contains("2 graph outputs declared"));
    let mut b = good.clone();
    b[end - 4..end].copy_from_slice(&100_000u32.to_le_bytes());
    assert!(format_msg(load(&b)).contains("does not exist"));
    // A header object fingerprint that disagrees with the counts.
    let mut b = good.clone();
    b[16] ^= 1;
    assert!(format_msg(load(&b)).contains("object fingerprint"));
    // Trailing bytes inside the payload.
    let mut b = good[..end].to_vec();
    b.push(0);
    b.extend_from_slice(&[0; CHECKSUM_LEN]);
    let len = (b.len() - HEADER_LEN - CHECKSUM_LEN) as u64;
    b[24..32].copy_from_slice(&len.to_le_bytes());
    assert!(format_msg(load(&b)).contains("unused bytes"));
    // A ciphertext is not a graph.
    assert!(format_msg(TaskGraph::from_bytes(
        &CkksParameters::builder(1 << 10)
            .levels(1)
            .security(SecurityLevel::None)
            .build()
            .unwrap()
            .to_bytes()
    ))
    .contains("not a TaskGraph"));
}

#[path = "../../../fuzz/src/graph.rs"]
mod fuzz_graph;

/// The fuzz target's body on its seeds and on random mutations (never a panic), and the
/// seed corpus written to `fuzz/corpus/task_graph/` when `HELOOM_FUZZ_CORPUS=1`.
#[test]
fn fuzz_body_on_seeds_and_mutations() {
    use rand::{Rng, SeedableRng};
    let seeds = fuzz_graph::graph_seeds();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
    for s in &seeds {
        fuzz_graph::task_graph(s);
        fuzz_graph::task_graph(&s[..s.len() / 2]);
        for _ in 0..500 {
            let mut b = s.clone();
            let i = rng.gen_range(0..b.len());
            b[i] = rng.gen();
            fuzz_graph::task_graph(&b);
        }
    }
    // The committed corpus (seeds and what the hour-long fuzzing run kept).
    let corpus =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/task_graph");
    let mut files = 0;
    for e in std::fs::read_dir(&corpus).unwrap() {
        fuzz_graph::task_graph(&std::fs::read(e.unwrap().path()).unwrap());
        files += 1;
    }
    assert!(files > 0, "{}: empty corpus", corpus.display());
    if std::env::var("HELOOM_FUZZ_CORPUS").as_deref() == Ok("1") {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/task_graph");
        std::fs::create_dir_all(&dir).unwrap();
        for (i, s) in seeds.iter().enumerate() {
            std::fs::write(dir.join(format!("seed-{i:02}")), s).unwrap();
        }
    }
}

fn fixture(i: usize) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/data/v2/graph-{i}.bin"))
}

/// Frozen format-version-2 graphs (`tests/data/v2`, the fuzz seed graphs): each loads to the
/// graph the builder makes today and is written back byte for byte, so neither the format nor
/// the graph builders drift unnoticed. A deliberate change regenerates them with
/// `HELOOM_WRITE_FIXTURES=1 cargo test -p heloom-runtime --test graph_bytes frozen`.
#[test]
fn frozen_v2_graphs() {
    let write = std::env::var("HELOOM_WRITE_FIXTURES").as_deref() == Ok("1");
    for (i, g) in graphs().into_iter().enumerate() {
        let path = fixture(i);
        if write {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, g.to_bytes()).unwrap();
        }
        let frozen = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let back = TaskGraph::from_bytes(&frozen).unwrap();
        same(&g, &back);
        assert_eq!(back.to_bytes(), frozen, "{}", path.display());
        assert_eq!(g.to_bytes(), frozen, "{}", path.display());
    }
}

/// A graph with rotations and slot-wise plaintext products, one vector used twice:
/// `rot(x, 3) * v`, rescaled, plus `rot(x, -1) * v`, rescaled, times `w`.
fn rotate_plain_graph() -> TaskGraph {
    use heloom_runtime::GraphBuilder;
    let m = moduli();
    let b = GraphBuilder::new("rot", &m);
    let x = b.input(m.len() - 1, 2f64.powi(40)).unwrap();
    let v: Vec<f64> = (0..64).map(|i| f64::from(i) / 8.0 - 4.0).collect();
    let r = b.rotate_many(&x, &[3, -1]).unwrap();
    let a = b
        .rescale(&b.multiply_plain_slots(&r[0], &v).unwrap())
        .unwrap();
    let c = b
        .rescale(&b.multiply_plain_slots(&r[1], &v).unwrap())
        .unwrap();
    let s = b.add(&a, &c).unwrap();
    let y = b
        .rescale(&b.multiply_plain_slots(&s, &[3.0, 1e-3]).unwrap())
        .unwrap();
    b.finish(&[y]).unwrap()
}

#[test]
fn rotations_and_plaintexts_round_trip() {
    let g = rotate_plain_graph();
    assert_eq!(g.plains().len(), 2);
    let bytes = g.to_bytes();
    let back = TaskGraph::from_bytes(&bytes).unwrap();
    same(&g, &back);
    assert_eq!(back.plains(), g.plains());
    assert_eq!(back.to_bytes(), bytes);
    // The shared vector is written once.
    let v: Vec<u8> = g
        .plain(0)
        .unwrap()
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    assert_eq!(bytes.windows(v.len()).filter(|w| *w == &v[..]).count(), 1);
    let old = exp_graph(ExpVariant::Horner, &moduli(), 5, 2f64.powi(40)).unwrap();
    assert!(old.plains().is_empty());
    // And the loaded graph computes the same on the CPU.
    let params = fuzz_graph::seed_params();
    let ctx = Context::<u64>::new(params).unwrap();
    let keys = keygen(&ctx, &[3, -1], false).unwrap();
    let ev = Evaluator::new(&ctx, Arc::new(keys.evaluation_keys.clone())).unwrap();
    let xs: Vec<f64> = (0..64).map(|i| i as f64 / 64.0 - 0.5).collect();
    let ct = Encryptor::new(&ctx).encrypt(&xs, &keys.public_key).unwrap();
    let a = g.run(&ev, std::slice::from_ref(&ct)).unwrap();
    let b = back.run(&ev, std::slice::from_ref(&ct)).unwrap();
    assert!(a[0].polys() == b[0].polys());
}

#[test]
fn corrupt_rotations_and_plaintexts_are_refused() {
    let g = rotate_plain_graph();
    let good = g.to_bytes();
    let load = |b: &[u8]| {
        let mut b = b.to_vec();
        reseal(&mut b);
        TaskGraph::from_bytes(&b)
    };
    // Node 0 is the input (16 bytes); nodes 1 and 2 the rotations (op, a u32, step i64,
    // level, scale, size: 24 bytes each); node 3 the first product, which defines plaintext 0.
    let n1 = first_node(g.name(), moduli().len()) + 16;
    assert_eq!(good[n1], 13);
    let n3 = n1 + 2 * 24;
    assert_eq!(good[n3], 14);
    let (id, len) = (n3 + 5, n3 + 9);
    // A rotation by 0 (the builder records none).
    let mut b = good.clone();
    b[n1 + 5..n1 + 13].copy_from_slice(&0i64.to_le_bytes());
    assert!(format_msg(load(&b)).contains("rotates by 0"));
    // A plaintext id that is not defined yet.
    let mut b = good.clone();
    b[id..id + 4].copy_from_slice(&1u32.to_le_bytes());
    assert!(format_msg(load(&b)).contains("reads plaintext 1"));
    // Vector lengths: none, too many, more than the bytes hold.
    for (n, msg) in [
        (0u32, "1..=65536 are allowed"),
        (70_000, "1..=65536 are allowed"),
        (60_000, "truncated"),
    ] {
        let mut b = good.clone();
        b[len..len + 4].copy_from_slice(&n.to_le_bytes());
        let m = format_msg(load(&b));
        assert!(m.contains(msg), "{n}: {m}");
    }
    // A non-finite value.
    let mut b = good.clone();
    b[len + 4..len + 12].copy_from_slice(&f64::NAN.to_le_bytes());
    assert!(format_msg(load(&b)).contains("constant NaN"));
    // The payload cut inside the vector (header length fixed).
    let mut b = good[..len + 4 + 8 * 40].to_vec();
    b.extend_from_slice(&[0; CHECKSUM_LEN]);
    let plen = (b.len() - HEADER_LEN - CHECKSUM_LEN) as u64;
    b[24..32].copy_from_slice(&plen.to_le_bytes());
    let m = format_msg(load(&b));
    assert!(m.contains("truncated"), "{m}");
    // Any single-bit change, resealed, loads or is refused without a panic.
    for i in HEADER_LEN..good.len() - CHECKSUM_LEN {
        for bit in 0..8 {
            let mut b = good.clone();
            b[i] ^= 1 << bit;
            let _ = load(&b);
        }
    }
}
