//! The built-in applications as jobs: `matmul` (a plaintext matrix times encrypted vectors),
//! `matmul_encrypted` (an encrypted matrix times an encrypted matrix, JKLS18) and
//! `cryptonets` (MNIST inference with heloom's trained network, batch or single-image
//! packing). Their task graphs come from [`heloom_apps::graphs`] and run through
//! heloom-runtime's scheduler like every other job; a graph is built once per (application,
//! weights, parameters, input level and scale, input count) and kept (a small LRU of
//! `Arc<TaskGraph>`s, so the scheduler's cache by `Arc` identity hits as well).
//!
//! Clients: generate Galois keys for [`required_rotations`] (plus the relinearization key),
//! encrypt the values of [`heloom_apps::graphs::batch_inputs`],
//! [`heloom_apps::graphs::single_input`], [`heloom_apps::matmul::diag::pack_vector`] or
//! [`heloom_apps::matmul::jiang::pack_matrix`], and read results with
//! [`heloom_apps::graphs::batch_logits`], [`heloom_apps::graphs::single_logits`],
//! [`heloom_apps::matmul::diag::unpack_vector`] or [`heloom_apps::matmul::jiang::unpack_matrix`]
//! (re-exported here).

use crate::worker::Task;
use crate::{Result, ServeError};
use heloom_apps::cryptonets::evaluate::Packing;
use heloom_apps::cryptonets::CryptoNet;
use heloom_apps::graphs;
use heloom_apps::matmul::padded;
use heloom_math::automorphism::galois_element_for_step;
use heloom_runtime::TaskGraph;
use sha2::{Digest, Sha256};
use std::sync::{Arc, Mutex, OnceLock};

pub use heloom_apps::cryptonets::evaluate::Packing as CryptonetsPacking;
pub use heloom_apps::graphs::{
    batch_inputs, batch_logits, classes, single_input, single_logits, SINGLE_SLOTS,
};
pub use heloom_apps::matmul::diag::{pack_vector, unpack_vector};
pub use heloom_apps::matmul::jiang::{pack_matrix, unpack_matrix};
pub use heloom_apps::matmul::Matrix;

/// Largest matrix side a `matmul` job takes inline (the JSON body limit of 1 MiB is reached
/// first for dense matrices; larger products: build the graph with
/// [`heloom_apps::graphs::matmul_graph`] and submit it as a `graph` job).
pub const MAX_MATMUL_SIDE: usize = 4096;

/// Largest side of a `matmul_encrypted` job's matrices: `D^2` slots (`D` = the side rounded
/// up to a power of two) must fit in one ciphertext, `N / 2` slots: 256 at N = 2^17.
pub const MAX_ENCRYPTED_MATMUL_SIDE: usize = 256;

/// Levels a `matmul_encrypted` job uses (its inputs' level must be at least this).
pub const ENCRYPTED_MATMUL_LEVELS: usize = graphs::MATMUL_ENCRYPTED_LEVELS;

/// Built graphs kept at once (a CryptoNets batch graph is the large one, a few MB).
const CACHE: usize = 32;

fn invalid(msg: impl Into<String>) -> ServeError {
    ServeError::InvalidRequest(msg.into())
}

/// The network `cryptonets` jobs run (compiled in).
fn network() -> Result<&'static CryptoNet> {
    static NET: OnceLock<std::result::Result<CryptoNet, String>> = OnceLock::new();
    NET.get_or_init(|| CryptoNet::embedded().map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|e| invalid(format!("the built-in CryptoNets model: {e}")))
}

/// A `matmul` task's matrix, checked: square, finite, at most [`MAX_MATMUL_SIDE`].
pub fn matmul_matrix(rows: &[Vec<f64>]) -> Result<Matrix> {
    let d = rows.len();
    if d == 0 || d > MAX_MATMUL_SIDE {
        return Err(invalid(format!(
            "matmul: the matrix has {d} rows; give 1 to {MAX_MATMUL_SIDE} rows of as many \
             numbers (a square matrix, row by row)"
        )));
    }
    if let Some(i) = rows.iter().position(|r| r.len() != d) {
        return Err(invalid(format!(
            "matmul: row {i} has {} numbers; the matrix must be square, {d} x {d} (pad it with \
             zeros)",
            rows[i].len()
        )));
    }
    Matrix::from_rows(rows).map_err(|e| invalid(format!("matmul: {e}")))
}

/// A `matmul_encrypted` task's side, checked: 1 to [`MAX_ENCRYPTED_MATMUL_SIDE`].
pub fn encrypted_matmul_side(side: usize) -> Result<usize> {
    if side == 0 || side > MAX_ENCRYPTED_MATMUL_SIDE {
        return Err(invalid(format!(
            "matmul_encrypted: side {side}; give the matrices' side d, 1 to \
             {MAX_ENCRYPTED_MATMUL_SIDE} (both d x d, packed with pack_matrix)"
        )));
    }
    Ok(side)
}

/// The rotation steps (Galois keys) a `matmul`, `matmul_encrypted` or `cryptonets` job needs, sorted; empty for
/// the other kinds (`exp` and `polynomial` need only the relinearization key; an uploaded
/// graph needs what it rotates by).
pub fn required_rotations(task: &Task) -> Result<Vec<i64>> {
    match task {
        Task::Matmul { matrix } => graphs::matmul_rotations(&matmul_matrix(matrix)?)
            .map_err(|e| invalid(format!("matmul: {e}"))),
        Task::MatmulEncrypted { side } => {
            graphs::matmul_encrypted_rotations(encrypted_matmul_side(*side)?)
                .map_err(|e| invalid(format!("matmul_encrypted: {e}")))
        }
        Task::Cryptonets {
            packing: Packing::Single,
        } => {
            static STEPS: OnceLock<std::result::Result<Vec<i64>, String>> = OnceLock::new();
            STEPS
                .get_or_init(|| {
                    let net = network().map_err(|e| e.to_string())?;
                    graphs::cryptonets_rotations(net, Packing::Single).map_err(|e| e.to_string())
                })
                .clone()
                .map_err(invalid)
        }
        _ => Ok(Vec::new()),
    }
}

/// Whether a job of `task` needs the relinearization key.
pub fn needs_relinearization(task: &Task) -> bool {
    !matches!(task, Task::Matmul { .. } | Task::Graph { .. })
}

/// What a key set offers, for the checks.
pub(crate) struct KeyFacts {
    /// Ring degree.
    pub n: usize,
    /// Whether it has a relinearization key.
    pub relin: bool,
    /// Its Galois elements.
    pub galois: Vec<u64>,
}

/// What an input ciphertext is, for the checks.
pub(crate) struct InputFacts {
    pub level: usize,
    pub scale: f64,
    pub slots: usize,
}

impl KeyFacts {
    /// From a key object's `info` (`ring_degree`, `relinearization`, `galois_elements`).
    pub fn from_info(info: &serde_json::Value) -> Self {
        Self {
            n: info["ring_degree"].as_u64().unwrap_or(0) as usize,
            relin: info["relinearization"].as_bool().unwrap_or(false),
            galois: info["galois_elements"]
                .as_array()
                .map(|a| a.iter().filter_map(serde_json::Value::as_u64).collect())
                .unwrap_or_default(),
        }
    }
}

impl InputFacts {
    /// From a ciphertext object's `info` (`level`, `scale`, `slots`).
    pub fn from_info(info: &serde_json::Value) -> Self {
        Self {
            level: info["level"].as_u64().unwrap_or(0) as usize,
            scale: info["scale"].as_f64().unwrap_or(0.0),
            slots: info["slots"].as_u64().unwrap_or(0) as usize,
        }
    }
}

/// Checks a `matmul`, `matmul_encrypted` or `cryptonets` job against its key set and inputs (count, levels,
/// slots, keys), with a message that says what to do; other kinds pass.
pub(crate) fn check(task: &Task, keys: &KeyFacts, inputs: &[InputFacts]) -> Result<()> {
    let what = match task {
        Task::Matmul { matrix } => {
            let d = matmul_matrix(matrix)?.rows();
            let size = padded(d);
            if inputs.is_empty() {
                return Err(invalid(
                    "matmul takes one or more input ciphertexts (encrypted vectors), none given",
                ));
            }
            for (k, x) in inputs.iter().enumerate() {
                if x.slots != size {
                    return Err(invalid(format!(
                        "matmul: input {k} holds {} slots; a {d} x {d} product takes vectors \
                         packed in exactly {size} slots (encrypt the {size} values of \
                         pack_vector(v, {d}), so that rotations wrap at {size})",
                        x.slots
                    )));
                }
                if x.level == 0 {
                    return Err(invalid(format!(
                        "matmul: input {k} is at level 0; the product uses one level: encrypt \
                         at a higher level"
                    )));
                }
            }
            "matmul"
        }
        Task::MatmulEncrypted { side } => {
            let d = encrypted_matmul_side(*side)?;
            let size = padded(d) * padded(d);
            if inputs.len() != 2 {
                return Err(invalid(format!(
                    "matmul_encrypted takes two input ciphertexts (A, then B), {} given",
                    inputs.len()
                )));
            }
            for (k, x) in inputs.iter().enumerate() {
                if x.slots != size {
                    return Err(invalid(format!(
                        "matmul_encrypted: input {k} holds {} slots; {d} x {d} matrices are \
                         packed in exactly {size} slots (encrypt the {size} values of \
                         pack_matrix, so that rotations wrap at {size})",
                        x.slots
                    )));
                }
                if x.level < ENCRYPTED_MATMUL_LEVELS {
                    return Err(invalid(format!(
                        "matmul_encrypted: input {k} is at level {}; the product uses \
                         {ENCRYPTED_MATMUL_LEVELS} levels: encrypt at level \
                         {ENCRYPTED_MATMUL_LEVELS} or higher",
                        x.level
                    )));
                }
            }
            "matmul_encrypted"
        }
        Task::Cryptonets { packing } => {
            let want = graphs::cryptonets_inputs(*packing);
            if inputs.len() != want {
                let how = match packing {
                    Packing::Batch => {
                        "one ciphertext per pixel, image s in slot s (batch_inputs)".to_string()
                    }
                    Packing::Single => format!(
                        "the image's {SINGLE_SLOTS} values of single_input in one ciphertext"
                    ),
                };
                return Err(invalid(format!(
                    "cryptonets with {} packing takes {want} input ciphertexts ({how}), {} given",
                    packing_name(*packing),
                    inputs.len()
                )));
            }
            let levels = graphs::cryptonets_levels(*packing);
            for (k, x) in inputs.iter().enumerate() {
                if x.level < levels {
                    return Err(invalid(format!(
                        "cryptonets: input {k} is at level {}; the network uses {levels} levels \
                         with {} packing: use parameters with at least {levels} levels above \
                         q_0 (heloom_apps::cryptonets::evaluate::params) and fresh ciphertexts",
                        x.level,
                        packing_name(*packing)
                    )));
                }
                if *packing == Packing::Single && x.slots != SINGLE_SLOTS {
                    return Err(invalid(format!(
                        "cryptonets: input {k} holds {} slots; single-image packing takes \
                         exactly {SINGLE_SLOTS} (encrypt the values of single_input, with N >= \
                         2^14)",
                        x.slots
                    )));
                }
            }
            "cryptonets"
        }
        _ => return Ok(()),
    };
    if let Some(first) = inputs.first() {
        let rel = |a: f64, b: f64| ((a - b) / a.abs().max(b.abs()).max(f64::MIN_POSITIVE)).abs();
        if let Some(k) = inputs.iter().position(|x| {
            x.level != first.level || x.slots != first.slots || rel(x.scale, first.scale) > 1e-9
        }) {
            return Err(invalid(format!(
                "{what}: input {k} differs from input 0 in level, scale or slots; encrypt all \
                 inputs alike (fresh, same parameters)"
            )));
        }
    }
    if needs_relinearization(task) && !keys.relin {
        return Err(invalid(format!(
            "{what} needs a relinearization key; the key set has none: generate one"
        )));
    }
    let steps = required_rotations(task)?;
    let missing: Vec<i64> = steps
        .iter()
        .copied()
        .filter(|&s| {
            let g = galois_element_for_step(keys.n, s);
            g != 1 && !keys.galois.contains(&g)
        })
        .collect();
    if !missing.is_empty() {
        return Err(invalid(format!(
            "{what}: the key set has no Galois keys for rotation steps {missing:?}; generate \
             keys for all of {steps:?} (heloom_serve::apps::required_rotations) and upload \
             them"
        )));
    }
    Ok(())
}

fn packing_name(p: Packing) -> &'static str {
    match p {
        Packing::Batch => "batch",
        Packing::Single => "single",
    }
}

/// What a built graph depends on.
#[derive(Clone, PartialEq, Eq)]
struct GraphKey {
    /// Application and weights (SHA-256 of a matrix's entries).
    what: String,
    moduli: Vec<u64>,
    level: usize,
    scale_bits: u64,
    count: usize,
}

/// SHA-256 (hex) of `head` then the bits of `xs`: a graph cache key for numbers a job carries.
fn f64_digest<'a>(head: &[u8], xs: impl IntoIterator<Item = &'a f64>) -> String {
    let mut h = Sha256::new();
    h.update(head);
    for x in xs {
        h.update(x.to_bits().to_le_bytes());
    }
    crate::hex(&h.finalize())
}

/// Built graphs, least recently used first.
type GraphCache = Vec<(GraphKey, Arc<TaskGraph>)>;

/// The graph of a built-in job (`exp`, `polynomial`, `matmul`, `matmul_encrypted`,
/// `cryptonets`; the last three checked with [`check`] first) on `moduli` for `inputs`, from the cache or built; `None` for
/// `graph` jobs.
pub(crate) fn graph(
    task: &Task,
    moduli: &[u64],
    inputs: &[InputFacts],
) -> Result<Option<Arc<TaskGraph>>> {
    let first = match (task, inputs.first()) {
        (Task::Graph { .. }, _) => return Ok(None),
        (_, Some(f)) => f,
        (_, None) => return Err(invalid("the job has no inputs")),
    };
    let what = match task {
        // Slot-wise jobs too: a server running the same e^x job for every client builds and
        // prices its graph once (the scheduler's cost table is cached by the graph's `Arc`).
        Task::Exp { variant } => format!("exp/{}", variant.as_deref().unwrap_or("horner")),
        Task::Polynomial { coefficients } => {
            format!("polynomial/{}", f64_digest(&[], coefficients))
        }
        Task::Matmul { matrix } => format!(
            "matmul/{}",
            f64_digest(
                &(matrix.len() as u64).to_le_bytes(),
                matrix.iter().flatten()
            )
        ),
        Task::MatmulEncrypted { side } => format!("matmul_encrypted/{side}"),
        Task::Cryptonets { packing } => format!("cryptonets/{}", packing_name(*packing)),
        _ => return Ok(None),
    };
    let key = GraphKey {
        what,
        moduli: moduli.to_vec(),
        level: first.level,
        scale_bits: first.scale.to_bits(),
        count: inputs.len(),
    };
    static GRAPHS: OnceLock<Mutex<GraphCache>> = OnceLock::new();
    let cache = GRAPHS.get_or_init(|| Mutex::new(Vec::new()));
    let lookup = |c: &mut GraphCache| {
        let i = c.iter().position(|(k, _)| *k == key)?;
        let hit = c.remove(i);
        let g = Arc::clone(&hit.1);
        c.push(hit);
        Some(g)
    };
    if let Some(g) = lookup(&mut cache.lock().unwrap_or_else(|p| p.into_inner())) {
        return Ok(Some(g));
    }
    // Built outside the lock (a CryptoNets batch graph takes a while); a graph another job
    // built meanwhile wins, so equal jobs share one Arc.
    let built = match task {
        Task::Matmul { matrix } => graphs::matmul_graph(
            &matmul_matrix(matrix)?,
            moduli,
            first.level,
            first.scale,
            inputs.len(),
        )
        .map_err(|e| e.to_string()),
        Task::MatmulEncrypted { side } => graphs::matmul_encrypted_graph(
            encrypted_matmul_side(*side)?,
            moduli,
            first.level,
            first.scale,
        )
        .map_err(|e| e.to_string()),
        Task::Cryptonets { packing } => {
            graphs::cryptonets_graph(network()?, *packing, moduli, first.level, first.scale)
                .map_err(|e| e.to_string())
        }
        Task::Exp { .. } | Task::Polynomial { .. } => {
            match crate::worker::slotwise_graph(task, moduli, first.level, first.scale) {
                Some(g) => g,
                None => return Ok(None),
            }
        }
        Task::Graph { .. } => return Ok(None),
    }
    .map_err(|e| invalid(format!("{}: {e}", task.kind())))?;
    let mut c = cache.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(g) = lookup(&mut c) {
        return Ok(Some(g));
    }
    let g = Arc::new(built);
    if c.len() >= CACHE {
        c.remove(0);
    }
    c.push((key, Arc::clone(&g)));
    Ok(Some(g))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(level: usize, slots: usize, count: usize) -> Vec<InputFacts> {
        (0..count)
            .map(|_| InputFacts {
                level,
                scale: 2f64.powi(29),
                slots,
            })
            .collect()
    }

    #[test]
    fn graphs_are_cached_and_checked() {
        let moduli = [(1u64 << 30) - 35, (1 << 29) - 3, (1 << 29) - 33];
        let task = Task::Matmul {
            matrix: vec![
                vec![1.0, 2.0, 0.0],
                vec![0.0, 1.0, 0.0],
                vec![3.0, 0.0, 1.0],
            ],
        };
        let inputs = facts(2, 4, 2);
        let a = graph(&task, &moduli, &inputs)
            .expect("graph")
            .expect("built in");
        let b = graph(&task, &moduli, &inputs)
            .expect("graph")
            .expect("built in");
        assert!(
            Arc::ptr_eq(&a, &b),
            "the second job reuses the first one's graph"
        );
        assert_eq!(a.num_inputs(), 2);
        let other = graph(&task, &moduli, &facts(1, 4, 2))
            .expect("graph")
            .expect("built in");
        assert!(!Arc::ptr_eq(&a, &other), "another level, another graph");
        // Slot-wise jobs share their graph too; an uploaded graph has none here.
        let exp_moduli = [(1u64 << 30) - 35, 1 << 29, 1 << 28, 1 << 27, 1 << 26];
        let exp = |level| {
            graph(
                &Task::Exp { variant: None },
                &exp_moduli,
                &facts(level, 4, 1),
            )
        };
        let e1 = exp(4).expect("graph").expect("built in");
        let e2 = exp(4).expect("graph").expect("built in");
        assert!(Arc::ptr_eq(&e1, &e2), "equal e^x jobs share one graph");
        assert!(
            matches!(exp(2), Err(ServeError::InvalidRequest(m)) if m.contains("out of levels")),
            "too few levels is the job's error"
        );
        let g = Task::Graph {
            graph_id: "0".repeat(64),
        };
        assert!(graph(&g, &moduli, &inputs).expect("no graph").is_none());

        let steps = required_rotations(&task).expect("steps");
        let n = 1 << 10;
        let all = KeyFacts {
            n,
            relin: false,
            galois: steps
                .iter()
                .map(|&s| galois_element_for_step(n, s))
                .collect(),
        };
        check(&task, &all, &inputs).expect("keys and inputs fit");
        let none = KeyFacts {
            n,
            relin: true,
            galois: Vec::new(),
        };
        let e = check(&task, &none, &inputs).expect_err("no Galois keys");
        assert!(e.to_string().contains(&format!("{steps:?}")), "{e}");
        let e = check(&task, &all, &facts(2, 8, 1)).expect_err("slots");
        assert!(e.to_string().contains("exactly 4 slots"), "{e}");
        let batch = Task::Cryptonets {
            packing: Packing::Batch,
        };
        let e = check(&batch, &none, &facts(6, 4, 1)).expect_err("one input");
        assert!(e.to_string().contains("784"), "{e}");
        let e = check(&batch, &none, &facts(4, 4, 784)).expect_err("levels");
        assert!(e.to_string().contains("5 levels"), "{e}");
        assert!(matmul_matrix(&[vec![1.0, 2.0]]).is_err());
        assert!(matmul_matrix(&[]).is_err());
        assert!(matmul_matrix(&[vec![f64::NAN]]).is_err());
    }
}
