//! The applications as task graphs (`heloom_apps::graphs`), run by heloom-runtime's online
//! executor (the `heloom` policy, two threads) on real keys, decrypted and checked against
//! the plaintext references and the in-process evaluators.
//!
//! - Matrix products, N = 2^11 (test-only security), a 40-bit `q_0` under two 30-bit primes:
//!   the graph's ciphertexts equal `DiagonalMatrix::multiply_rescaled`'s byte for byte, and
//!   the largest error against `M v` is below 1e-4 (entries in [-1, 1], d <= 16: fresh noise
//!   about 2^-20 per slot, grown by about sqrt(D) in the sums).
//! - CryptoNets, batch packing: N = 2^10, six 29-bit levels over a 30-bit `q_0` (the primes
//!   of `tests/batch.rs`, half its ring), the trained network on six MNIST images: the logits equal
//!   `BatchNet::infer`'s byte for byte, differ from the f64 model by under 1e-4 of the largest
//!   logit, and give the f64 model's classes.
//! - CryptoNets, single-image packing: N = 2^14 with seven 29-bit primes (the parameters of
//!   `tests/single.rs`, 128-bit secure), two images: logits within 1e-3 of the largest f64
//!   logit, same classes.

use heloom_apps::cryptonets::batch::{BatchNet, BatchTimes};
use heloom_apps::cryptonets::evaluate::Packing;
use heloom_apps::cryptonets::model::argmax;
use heloom_apps::cryptonets::{single, CryptoNet};
use heloom_apps::graphs;
use heloom_apps::matmul::{diag, max_abs_error, Matrix};
use heloom_apps::mnist::Mnist;
use heloom_ckks::{
    keygen, Ciphertext, CkksParameters, Context, Decryptor, Encryptor, Evaluator, KeySet,
    SecurityLevel, Threads,
};
use heloom_runtime::{OnlineConfig, OnlineExecutor, OnlineJob, Profile, TaskGraph};
use std::sync::{mpsc, Arc};
use std::time::Duration;

type R = Result<(), Box<dyn std::error::Error>>;

/// Runs `graph` on `inputs` through an online executor with two threads.
fn run(
    graph: TaskGraph,
    ev: &Evaluator<u64>,
    inputs: Vec<Ciphertext<u64>>,
) -> Vec<Ciphertext<u64>> {
    let model = Arc::new(Profile::load("xeon-phi-7230f").expect("profile"));
    let exec = OnlineExecutor::<u64>::start(OnlineConfig::new(2, model)).expect("executor");
    let (tx, rx) = mpsc::channel();
    let inputs = inputs.into_iter().map(Arc::new).collect();
    let job = OnlineJob::new(Arc::new(graph), ev.clone(), inputs, move |out| {
        let _ = tx.send(out);
    });
    exec.submit(job).expect("submit");
    let out = rx
        .recv_timeout(Duration::from_secs(600))
        .expect("job ended")
        .expect("job ran");
    exec.shutdown();
    out
}

fn setup(
    params: CkksParameters,
    steps: &[i64],
) -> (Arc<Context<u64>>, KeySet<u64>, Evaluator<u64>) {
    let ctx = Context::<u64>::new(params).expect("context");
    let keys = keygen(&ctx, steps, false).expect("keys");
    let ev = Evaluator::new(&ctx, Arc::new(keys.evaluation_keys.clone())).expect("evaluator");
    (ctx, keys, ev)
}

#[test]
fn matmul_graph_matches_the_in_process_product() -> R {
    let params = CkksParameters::builder(1 << 11)
        .levels(2)
        .scale_bits(30)
        .first_bits(40)
        .security(SecurityLevel::None)
        .build()?;
    let dims = [5usize, 16];
    let mut steps: Vec<i64> = dims.iter().flat_map(|&d| diag::rotation_steps(d)).collect();
    steps.sort_unstable();
    steps.dedup();
    let (ctx, keys, ev) = setup(params, &steps);
    let enc = Encryptor::new(&ctx);
    let dec = Decryptor::new(&ctx, &keys.secret_key)?;
    let top = ctx.max_level();
    for d in dims {
        let m = Matrix::random(d, 7 * d as u64);
        let vs: Vec<Vec<f64>> = (0..2)
            .map(|k| Matrix::random(d, 100 + k).data()[..d].to_vec())
            .collect();
        let cts = vs
            .iter()
            .map(|v| {
                enc.encrypt_symmetric(&diag::pack_vector(v, d)?, &keys.secret_key)
                    .map_err(Into::into)
            })
            .collect::<Result<Vec<_>, Box<dyn std::error::Error>>>()?;
        let g = graphs::matmul_graph(&m, ctx.params().moduli(), top, cts[0].scale(), 2)?;
        assert_eq!(
            graphs::required_rotations(&g),
            graphs::matmul_rotations(&m)?
        );
        assert!(!graphs::needs_relinearization(&g));
        let out = run(g, &ev, cts.clone());
        assert_eq!(out.len(), 2);
        let dm = diag::DiagonalMatrix::encode(&ctx, &m, top, Threads::single())?;
        for (k, v) in vs.iter().enumerate() {
            let want = dm.multiply_rescaled(&ev, &cts[k])?;
            assert_eq!(
                out[k].to_bytes(),
                want.to_bytes(),
                "d = {d}: graph and in-process differ"
            );
            let got = diag::unpack_vector(&dec.decrypt(&out[k])?, d)?;
            let err = max_abs_error(&got, &m.mul_vec(v)?);
            assert!(err < 1e-4, "d = {d}: error {err}");
        }
    }
    // A non-square matrix, no inputs, level 0: refused with what to do.
    let rect = Matrix::new(2, 3, vec![0.0; 6])?;
    let moduli = ctx.params().moduli().to_vec();
    assert!(graphs::matmul_graph(&rect, &moduli, 1, 1e9, 1).is_err());
    let sq = Matrix::random(4, 1);
    assert!(graphs::matmul_graph(&sq, &moduli, 1, 1e9, 0).is_err());
    let e = graphs::matmul_graph(&sq, &moduli, 0, 1e9, 1).expect_err("level 0");
    assert!(e.to_string().contains("level"), "{e}");
    Ok(())
}

/// Relative logit error of `got` against the f64 model on `image`, and whether the classes
/// agree (or the f64 model's top two are closer than `bound` allows to tell).
fn compare(net: &CryptoNet, image: &[u8], got: &[f64; 10], bound: f64) -> f64 {
    let want = net.logits(image).expect("plain");
    let scale = want.iter().fold(1.0f64, |a, v| a.max(v.abs()));
    let worst = (0..10)
        .map(|k| (got[k] - want[k]).abs() / scale)
        .fold(0.0, f64::max);
    assert_eq!(
        argmax(got),
        argmax(&want),
        "classes differ: {got:?} vs {want:?}"
    );
    assert!(
        worst < bound,
        "relative logit error {worst:e} (bound {bound:e})"
    );
    worst
}

#[test]
fn cryptonets_batch_graph_matches_batch_net() -> R {
    let params = CkksParameters::builder(1 << 10)
        .levels(6)
        .scale_bits(29)
        .first_bits(30)
        .security(SecurityLevel::None)
        .build()?;
    let (ctx, keys, ev) = setup(params, &[]);
    let net = CryptoNet::embedded()?;
    let mnist = Mnist::load_default_test()?;
    let images: Vec<&[u8]> = (5000..5006)
        .map(|i| mnist.image(i).expect("image"))
        .collect();
    let enc = Encryptor::new(&ctx);
    let cts = graphs::batch_inputs(&images)?
        .iter()
        .map(|v| enc.encrypt_symmetric(v, &keys.secret_key))
        .collect::<Result<Vec<_>, _>>()?;
    let top = ctx.max_level();
    let g = graphs::cryptonets_graph(
        &net,
        Packing::Batch,
        ctx.params().moduli(),
        top,
        cts[0].scale(),
    )?;
    assert_eq!(g.num_inputs(), graphs::cryptonets_inputs(Packing::Batch));
    assert!(graphs::required_rotations(&g).is_empty());
    assert!(graphs::needs_relinearization(&g));
    let t = std::time::Instant::now();
    let out = run(g, &ev, cts.clone());
    eprintln!("batch graph: {:.2} s", t.elapsed().as_secs_f64());
    let batch = BatchNet::new(&net, &ev)?;
    let want = batch.infer(cts, Threads::new(2), &mut BatchTimes::default())?;
    assert_eq!(out.len(), want.len());
    for (a, b) in out.iter().zip(&want) {
        assert_eq!(a.to_bytes(), b.to_bytes(), "graph and BatchNet differ");
    }
    let dec = Decryptor::new(&ctx, &keys.secret_key)?;
    let slots = out
        .iter()
        .map(|c| dec.decrypt(c))
        .collect::<Result<Vec<_>, _>>()?;
    let logits = graphs::batch_logits(&slots, images.len())?;
    let mut worst: f64 = 0.0;
    for (image, got) in images.iter().zip(&logits) {
        worst = worst.max(compare(&net, image, got, 1e-4));
    }
    eprintln!("batch graph: worst relative logit error {worst:.2e}");
    assert_eq!(
        graphs::classes(&logits),
        images
            .iter()
            .map(|im| net.predict(im).expect("plain"))
            .collect::<Vec<_>>()
    );
    // Too few levels: refused with what to do.
    let e = graphs::cryptonets_graph(&net, Packing::Batch, ctx.params().moduli(), 4, 1e9)
        .expect_err("too few levels");
    assert!(e.to_string().contains("5 levels"), "{e}");
    Ok(())
}

#[test]
fn cryptonets_single_graph_matches_plaintext() -> R {
    let params = CkksParameters::builder(1 << 14)
        .levels(single::LEVELS + 1)
        .scale_bits(29)
        .first_bits(29)
        .build()?;
    let net = CryptoNet::embedded()?;
    let steps = graphs::cryptonets_rotations(&net, Packing::Single)?;
    let (ctx, keys, ev) = setup(params, &steps);
    let mnist = Mnist::load_default_test()?;
    let enc = Encryptor::new(&ctx);
    let dec = Decryptor::new(&ctx, &keys.secret_key)?;
    let top = ctx.max_level();
    let scale = ctx.params().scale();
    let g = Arc::new(graphs::cryptonets_graph(
        &net,
        Packing::Single,
        ctx.params().moduli(),
        top,
        scale,
    )?);
    assert_eq!(graphs::required_rotations(&g), steps);
    for i in [5000usize, 5001] {
        let image = mnist.image(i).expect("image");
        let v = graphs::single_input(image)?;
        assert_eq!(v.len(), graphs::SINGLE_SLOTS);
        let ct = enc.encrypt_symmetric(&v, &keys.secret_key)?;
        let t = std::time::Instant::now();
        let out = run((*g).clone(), &ev, vec![ct]);
        eprintln!("single graph: {:.2} s", t.elapsed().as_secs_f64());
        let got = graphs::single_logits(&dec.decrypt(&out[0])?)?;
        let err = compare(&net, image, &got, 1e-3);
        eprintln!("single graph, image {i}: relative logit error {err:.2e}");
    }
    Ok(())
}
