//! The binary format of a [`TaskGraph`]: what a client sends a server to say what to compute.
//!
//! The bytes are a heloom object of kind [`ObjectKind::TaskGraph`] (format version 2 of
//! `heloom_ckks::serialize`: the 32-byte header, the payload, an XXH3-64 checksum over both).
//! The header's word size is 0 (a graph does not depend on it) and its parameter fingerprint
//! is the XXH3-64 of the modulus chain the graph was recorded for; the object fingerprint
//! covers the node, input, output and task counts.
//!
//! Payload (little-endian):
//!
//! | field      | encoding                                                                |
//! |------------|-------------------------------------------------------------------------|
//! | name       | `len u32` (at most 4096), UTF-8 bytes                                   |
//! | moduli     | `count u16` (1..=1024), `q u64` each                                    |
//! | nodes      | `count u32`, then per node: `op u8`, its operands and constant (below), `level u16, scale f64, size u8` |
//! | boundaries | `count u32`, `node u32` each: the task outputs                          |
//! | outputs    | `count u32`, `node u32` each                                            |
//!
//! Ops: 0 input (`index u32`), 1 add, 2 sub, 7 multiply (`a u32, b u32`), 3 add-const,
//! 6 mul-const, 12 set-scale (`a u32, c f64`), 4 mul-int (`a u32, k i64`), 5 mul-const-exact
//! (`a u32, k i128`), 8 square, 9 relinearize, 10 rescale (`a u32`), 11 drop (`a u32,
//! level u16`), 13 rotate (`a u32, step i64`), 14 mul-plain (`a u32, plain u32`, then, when
//! `plain` is the number of plaintext vectors defined so far, the new vector: `len u32`
//! (1..=65536), `value f64` each), 15 bootstrap (`a u32`; the level after it is where the
//! bootstrap lands). Plaintext vectors are thus numbered in order of first use and written
//! once; a graph without ops 13 to 15 has the bytes it had before they existed.
//!
//! Nothing stored is trusted: the loader replays every node through a [`GraphBuilder`] on the
//! stored chain, which recomputes each level, scale and size and refuses what the evaluator
//! would refuse (a rescale at level 0, a product of three-polynomial ciphertexts, ...), checks
//! that each replayed node lands at its stored index with its stored level, scale and size,
//! rebuilds the tasks and checks them against the stored boundaries. A loaded graph is
//! therefore exactly one the builder could have recorded.

use crate::graph::{GraphBuilder, GraphError, NodeOp, Result, TaskGraph, Value};
use heloom_ckks::serialize::{self, ObjectKind};
use heloom_ckks::{CkksError, PolyOps};
use xxhash_rust::xxh3::xxh3_64;

/// Longest graph name in bytes.
const MAX_NAME: usize = 4096;
/// Most primes in the chain.
const MAX_PRIMES: usize = 1024;
/// Fewest payload bytes a node takes (op, operand, level, scale, size).
const MIN_NODE_BYTES: usize = 16;
/// Most values in a plaintext vector: the slots of the largest ring degree, 2^17 / 2.
const MAX_PLAIN: usize = 1 << 16;

fn bad(msg: String) -> GraphError {
    GraphError::Ckks(CkksError::Format(format!("task graph: {msg}")))
}

/// The header's parameter fingerprint of a graph: XXH3-64 of its modulus chain.
fn chain_fingerprint(moduli: &[u64]) -> u64 {
    let bytes: Vec<u8> = moduli.iter().flat_map(|q| q.to_le_bytes()).collect();
    xxh3_64(&bytes)
}

impl TaskGraph {
    fn descriptor(&self) -> [u64; 4] {
        [
            self.nodes().len() as u64,
            self.num_inputs() as u64,
            self.outputs().len() as u64,
            self.tasks().len() as u64,
        ]
    }

    /// The graph in heloom's binary format (see [`crate::serialize`]).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut p = Vec::with_capacity(64 + 24 * self.nodes().len());
        let name = self.name().as_bytes();
        let name = &name[..name.len().min(MAX_NAME)];
        p.extend_from_slice(&(name.len() as u32).to_le_bytes());
        p.extend_from_slice(name);
        p.extend_from_slice(&(self.moduli().len() as u16).to_le_bytes());
        for q in self.moduli() {
            p.extend_from_slice(&q.to_le_bytes());
        }
        p.extend_from_slice(&(self.nodes().len() as u32).to_le_bytes());
        let id = |p: &mut Vec<u8>, v: usize| p.extend_from_slice(&(v as u32).to_le_bytes());
        // Every node: its op code, its first node id (the index of an input), then the op's
        // own bytes.
        let op = |p: &mut Vec<u8>, code: u8, a: usize, rest: &[u8]| {
            p.push(code);
            id(p, a);
            p.extend_from_slice(rest);
        };
        let mut plains_written = 0;
        for node in self.nodes() {
            match node.op {
                NodeOp::Input(i) => op(&mut p, 0, i, &[]),
                NodeOp::Add(a, b) | NodeOp::Sub(a, b) | NodeOp::Multiply(a, b) => {
                    let code = match node.op {
                        NodeOp::Add(..) => 1,
                        NodeOp::Sub(..) => 2,
                        _ => 7,
                    };
                    op(&mut p, code, a, &[]);
                    id(&mut p, b);
                }
                NodeOp::AddConst(a, c) | NodeOp::MulConst(a, c) | NodeOp::SetScale(a, c) => {
                    let code = match node.op {
                        NodeOp::AddConst(..) => 3,
                        NodeOp::MulConst(..) => 6,
                        _ => 12,
                    };
                    op(&mut p, code, a, &c.to_le_bytes());
                }
                NodeOp::MulInt(a, k) => op(&mut p, 4, a, &k.to_le_bytes()),
                NodeOp::MulConstExact(a, k) => op(&mut p, 5, a, &k.to_le_bytes()),
                NodeOp::Square(a) | NodeOp::Relinearize(a) | NodeOp::Rescale(a) => {
                    let code = match node.op {
                        NodeOp::Square(..) => 8,
                        NodeOp::Relinearize(..) => 9,
                        _ => 10,
                    };
                    op(&mut p, code, a, &[]);
                }
                NodeOp::DropToLevel(a, l) => op(&mut p, 11, a, &(l as u16).to_le_bytes()),
                NodeOp::Rotate(a, step) => op(&mut p, 13, a, &step.to_le_bytes()),
                NodeOp::Bootstrap(a) => op(&mut p, 15, a, &[]),
                NodeOp::MulPlain(a, k) => {
                    op(&mut p, 14, a, &[]);
                    id(&mut p, k);
                    // Ids are numbered in order of first use: the first use defines it.
                    if k == plains_written {
                        let values = self.plain(k).unwrap_or(&[]);
                        p.extend_from_slice(&(values.len() as u32).to_le_bytes());
                        for x in values {
                            p.extend_from_slice(&x.to_le_bytes());
                        }
                        plains_written += 1;
                    }
                }
            }
            p.extend_from_slice(&(node.level as u16).to_le_bytes());
            p.extend_from_slice(&node.scale.to_le_bytes());
            p.push(node.size as u8);
        }
        let outputs: Vec<usize> = self.tasks().iter().map(|t| t.output).collect();
        for list in [&outputs[..], self.outputs()] {
            p.extend_from_slice(&(list.len() as u32).to_le_bytes());
            for &v in list {
                id(&mut p, v);
            }
        }
        serialize::seal(
            ObjectKind::TaskGraph,
            0,
            chain_fingerprint(self.moduli()),
            &self.descriptor(),
            &p,
        )
    }

    /// Loads a graph written by [`TaskGraph::to_bytes`], replaying every node (see
    /// [`crate::serialize`]). Bad bytes give a `CkksError::Format` inside
    /// [`GraphError::Ckks`].
    pub fn from_bytes(bytes: &[u8]) -> Result<TaskGraph> {
        let (info, payload) = serialize::open(bytes, ObjectKind::TaskGraph)?;
        if info.word_bits != 0 {
            return Err(bad(format!(
                "word size {} in the header: task graphs store 0",
                info.word_bits
            )));
        }
        let mut r = Cursor { b: payload, at: 0 };
        let name_len = r.u32("name length")? as usize;
        if name_len > MAX_NAME {
            return Err(bad(format!(
                "name of {name_len} bytes, at most {MAX_NAME} are allowed"
            )));
        }
        let name = std::str::from_utf8(r.take(name_len, "name")?)
            .map_err(|_| bad("the name is not UTF-8".into()))?
            .to_string();
        let primes = usize::from(r.u16("prime count")?);
        if primes == 0 || primes > MAX_PRIMES {
            return Err(bad(format!(
                "{primes} primes in the chain: 1..={MAX_PRIMES} are allowed"
            )));
        }
        let mut moduli = Vec::with_capacity(primes);
        for _ in 0..primes {
            let q = r.u64("prime")?;
            if q < 3 || q % 2 == 0 {
                return Err(bad(format!("chain prime {q} is not an odd number >= 3")));
            }
            moduli.push(q);
        }
        if chain_fingerprint(&moduli) != info.params_fingerprint {
            return Err(bad(
                "the header's chain fingerprint does not match the stored primes".into(),
            ));
        }
        let count = r.u32("node count")? as usize;
        if count.saturating_mul(MIN_NODE_BYTES) > r.remaining() {
            return Err(bad(format!(
                "{count} nodes declared, but the {} remaining bytes hold fewer",
                r.remaining()
            )));
        }
        let b = GraphBuilder::new(name, &moduli);
        let mut values: Vec<Value> = Vec::with_capacity(count);
        let mut plains: Vec<Vec<f64>> = Vec::new();
        for i in 0..count {
            let v = replay(&b, &mut r, &values, &mut plains, i).map_err(|e| as_format(e, i))?;
            let level = usize::from(r.u16("level")?);
            let scale = r.f64("scale")?;
            let size = usize::from(r.u8("size")?);
            if v.node != i
                || v.level != level
                || v.scale.to_bits() != scale.to_bits()
                || v.size != size
            {
                return Err(bad(format!(
                    "node {i} replays as node {} at level {}, scale 2^{:.3}, size {}, but is stored at level {level}, scale 2^{:.3}, size {size}",
                    v.node,
                    v.level,
                    v.scale.log2(),
                    v.size,
                    scale.log2()
                )));
            }
            if !(v.scale.is_finite() && v.scale > 0.0) {
                return Err(bad(format!("node {i} has scale {}", v.scale)));
            }
            values.push(v);
        }
        let node_list = |r: &mut Cursor<'_>, what: &str| -> Result<Vec<usize>> {
            let n = r.u32(what)? as usize;
            if n.saturating_mul(4) > r.remaining() {
                return Err(bad(format!("{n} {what} declared, the bytes hold fewer")));
            }
            (0..n)
                .map(|_| {
                    let v = r.u32(what)? as usize;
                    if v >= values.len() {
                        return Err(bad(format!("{what}: node {v} does not exist")));
                    }
                    Ok(v)
                })
                .collect()
        };
        let boundaries = node_list(&mut r, "task outputs")?;
        let outputs = node_list(&mut r, "graph outputs")?;
        if r.remaining() != 0 {
            return Err(bad(format!("{} unused bytes at the end", r.remaining())));
        }
        for &v in &boundaries {
            b.end_task(&values[v]);
        }
        let outs: Vec<Value> = outputs.iter().map(|&v| values[v]).collect();
        let g = b
            .finish(&outs)
            .map_err(|e| bad(format!("the graph does not fuse: {e}")))?;
        let rebuilt: Vec<usize> = g.tasks().iter().map(|t| t.output).collect();
        if rebuilt != boundaries {
            return Err(bad(
                "the stored task outputs are not the tasks the graph fuses into".into(),
            ));
        }
        serialize::check_fingerprint(
            &info,
            serialize::object_fingerprint(
                info.params_fingerprint,
                ObjectKind::TaskGraph,
                0,
                &g.descriptor(),
            ),
        )?;
        Ok(g)
    }
}

/// A refusal of the builder while replaying node `i` is a format error of the bytes.
fn as_format(e: GraphError, i: usize) -> GraphError {
    match e {
        GraphError::Ckks(CkksError::Format(_)) => e,
        other => bad(format!("node {i} cannot be replayed: {other}")),
    }
}

/// Replays the op of node `i` on the builder; `plains` are the plaintext vectors defined so
/// far.
fn replay(
    b: &GraphBuilder,
    r: &mut Cursor<'_>,
    values: &[Value],
    plains: &mut Vec<Vec<f64>>,
    i: usize,
) -> Result<Value> {
    let op = r.u8("op")?;
    let operand = |r: &mut Cursor<'_>| -> Result<Value> {
        let a = r.u32("operand")? as usize;
        values.get(a).copied().ok_or_else(|| {
            bad(format!(
                "node {i} reads node {a}, which does not precede it"
            ))
        })
    };
    let constant = |r: &mut Cursor<'_>| -> Result<f64> {
        let c = r.f64("constant")?;
        if !c.is_finite() {
            return Err(bad(format!("node {i} has the constant {c}")));
        }
        Ok(c)
    };
    let v = match op {
        0 => {
            let k = r.u32("input index")? as usize;
            if k != b.num_inputs() {
                return Err(bad(format!(
                    "node {i} is input {k}, but inputs are numbered in order ({} next)",
                    b.num_inputs()
                )));
            }
            // The input's level and scale follow the op; peek them.
            let level = usize::from(u16::from_le_bytes(r.peek(0, "level")?));
            let scale = f64::from_le_bytes(r.peek(2, "scale")?);
            b.input(level, scale)?
        }
        1 | 2 | 7 => {
            let (x, y) = (operand(r)?, operand(r)?);
            match op {
                1 => b.add(&x, &y)?,
                2 => b.sub(&x, &y)?,
                _ => b.multiply(&x, &y)?,
            }
        }
        3 | 6 | 12 => {
            let x = operand(r)?;
            let c = constant(r)?;
            match op {
                3 => b.add_const(&x, c)?,
                6 => b.multiply_const(&x, c)?,
                _ => {
                    if c <= 0.0 {
                        return Err(bad(format!("node {i} sets the scale {c}")));
                    }
                    b.with_scale(x, c)?
                }
            }
        }
        4 => {
            let x = operand(r)?;
            b.multiply_int(&x, r.i64("integer")?)?
        }
        5 => {
            let x = operand(r)?;
            b.multiply_const_exact(&x, r.i128("integer")?)?
        }
        8 => b.square(&operand(r)?)?,
        9 => b.relinearize(&operand(r)?)?,
        10 => b.rescale(&operand(r)?)?,
        11 => {
            let x = operand(r)?;
            b.drop_to_level(&x, usize::from(r.u16("level")?))?
        }
        13 => {
            let x = operand(r)?;
            let step = r.i64("rotation step")?;
            if step == 0 {
                // The builder records no node for it.
                return Err(bad(format!("node {i} rotates by 0")));
            }
            b.rotate(&x, step)?
        }
        14 => {
            let x = operand(r)?;
            let k = r.u32("plaintext id")? as usize;
            if k > plains.len() {
                return Err(bad(format!(
                    "node {i} reads plaintext {k}, but only {} are defined before it",
                    plains.len()
                )));
            }
            if k == plains.len() {
                plains.push(plain_vector(r, i, &constant)?);
            }
            let v = b.multiply_plain_slots(&x, &plains[k])?;
            // The builder shares equal vectors: a second copy would get another id.
            if b.num_plains() != plains.len() {
                return Err(bad(format!(
                    "node {i} defines plaintext {k}, equal to an earlier one"
                )));
            }
            v
        }
        15 => {
            let x = operand(r)?;
            // The level it lands on follows the op, as an input's does.
            let level = usize::from(u16::from_le_bytes(r.peek(0, "level")?));
            b.bootstrap_to(&x, level)?
        }
        k => return Err(bad(format!("node {i} has op {k}: ops 0..=15 exist"))),
    };
    Ok(v)
}

/// A plaintext vector defined by node `i`: `len u32` (1..=[`MAX_PLAIN`]), then the values,
/// each read by `constant` (finite).
fn plain_vector(
    r: &mut Cursor<'_>,
    i: usize,
    constant: &dyn Fn(&mut Cursor<'_>) -> Result<f64>,
) -> Result<Vec<f64>> {
    let len = r.u32("plaintext length")? as usize;
    if len == 0 || len > MAX_PLAIN {
        return Err(bad(format!(
            "node {i} defines a plaintext of {len} values: 1..={MAX_PLAIN} are allowed"
        )));
    }
    if len.saturating_mul(8) > r.remaining() {
        return Err(bad(format!(
            "truncated: node {i} defines a plaintext of {len} values, the {} remaining bytes hold fewer",
            r.remaining()
        )));
    }
    (0..len).map(|_| constant(r)).collect()
}

/// `fn $t(&mut self, what) -> Result<$t>` for each listed number type: the next value,
/// little-endian.
macro_rules! le_readers {
    ($($t:ident),*) => {
        $(
            fn $t(&mut self, what: &str) -> Result<$t> {
                Ok($t::from_le_bytes(self.array(what)?))
            }
        )*
    };
}

/// A bounds-checked reader over the payload.
struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn remaining(&self) -> usize {
        self.b.len() - self.at
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(bad(format!(
                "truncated: {what} needs {n} bytes at offset {}, {} remain",
                self.at,
                self.remaining()
            )));
        }
        let s = &self.b[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }

    fn array<const K: usize>(&mut self, what: &str) -> Result<[u8; K]> {
        let mut a = [0u8; K];
        a.copy_from_slice(self.take(K, what)?);
        Ok(a)
    }

    le_readers!(u8, u16, u32, u64, i64, i128, f64);

    /// The `K` bytes `skip` bytes past the cursor, without moving it (an input's level and
    /// scale, which follow its op).
    fn peek<const K: usize>(&self, skip: usize, what: &str) -> Result<[u8; K]> {
        let s = self
            .b
            .get(self.at + skip..self.at + skip + K)
            .ok_or_else(|| bad(format!("truncated: an input's {what} is missing")))?;
        let mut a = [0u8; K];
        a.copy_from_slice(s);
        Ok(a)
    }
}
