//! Bootstrapping on the GPU (`GpuBootstrapper`) at the CPU bootstrapping tests' small, insecure
//! ring (N = 2^10, Hamming weight 16): ModRaise and the whole bootstrap equal to the CPU's word
//! for word (with sparse-secret encapsulation, so its key switches too), and bootstraps of
//! sparse packing and of the lean key set within the CPU test's bound of 2^-20 on every slot.
//! Runs on the host emulator everywhere and on a real GPU too when one is present.

use heloom_ckks::circuits::bootstrap::{sparse_secret_keys, BootstrapConfig, Bootstrapper};
use heloom_ckks::{
    keygen, CkksParameters, Context, Decryptor, Encryptor, Evaluator, KeySet, SecretDistribution,
    SecurityLevel,
};
use heloom_gpu::{Gpu, GpuBootstrapper, GpuContext, GpuEvaluator};
use heloom_pool::Threads;
use num_complex::Complex64;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;

const H: usize = 16;

fn gpus() -> Vec<Gpu> {
    let mut v = vec![Gpu::emulator()];
    match Gpu::cuda(0) {
        Ok(g) => v.push(g),
        Err(e) => eprintln!("GPU part of this test skipped (emulator still runs): {e}"),
    }
    v
}

struct Setup {
    ctx: Arc<Context<u64>>,
    keys: KeySet<u64>,
    config: BootstrapConfig,
}

fn setup(secret: SecretDistribution, slots: &[usize]) -> Setup {
    let config = BootstrapConfig::for_hamming_weight(H);
    let params = CkksParameters::builder(1 << 10)
        .prime_bits(config.chain_bits(50, &[40]))
        .special_bits(60)
        .security(SecurityLevel::None)
        .secret(secret)
        .build()
        .expect("params");
    let ctx = Context::new(params).expect("context");
    let mut steps = Vec::new();
    for &n in slots {
        let b = Bootstrapper::with_slots(&ctx, config, n, Threads::new(2)).expect("bootstrapper");
        steps.extend(b.rotation_steps());
    }
    steps.sort_unstable();
    steps.dedup();
    let keys = keygen(&ctx, &steps, true).expect("keys");
    Setup { ctx, keys, config }
}

fn random(rng: &mut ChaCha8Rng, n: usize) -> Vec<Complex64> {
    (0..n)
        .map(|_| Complex64::new(rng.gen_range(-1.0..1.0), rng.gen_range(-1.0..1.0)))
        .collect()
}

fn max_error(got: &[Complex64], want: &[Complex64]) -> f64 {
    got.iter()
        .zip(want)
        .map(|(g, w)| (g - w).norm())
        .fold(0.0, f64::max)
}

/// A dense secret with sparse-secret encapsulation: the GPU's ModRaise (two key switches, the
/// lift) is the CPU's word for word, and the whole bootstrap is as precise as the CPU's.
#[test]
fn gpu_bootstrap_with_encapsulation_matches_the_cpu() {
    let s = setup(SecretDistribution::Ternary, &[1 << 9]);
    let sparse = sparse_secret_keys(&s.ctx, &s.keys.secret_key, H).expect("sparse keys");
    let boot = Bootstrapper::new(&s.ctx, s.config, Threads::new(2))
        .expect("bootstrapper")
        .with_sparse_keys(Arc::new(sparse))
        .expect("sparse");
    let cpu = Evaluator::new(&s.ctx, Arc::new(s.keys.evaluation_keys.clone())).expect("ev");
    let dec = Decryptor::new(&s.ctx, &s.keys.secret_key).expect("decryptor");
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let z = random(&mut rng, s.ctx.n() / 2);
    let ct = Encryptor::new(&s.ctx)
        .encrypt_complex(&z, &s.keys.public_key)
        .expect("encrypt");
    let low = cpu.drop_to_level(&ct, 0).expect("drop");
    let raised = boot.mod_raise(&cpu, &low).expect("cpu mod raise");
    let cpu_out = boot.bootstrap(&cpu, &low).expect("cpu");
    let cpu_err = max_error(&dec.decrypt_complex(&cpu_out).expect("decrypt"), &z);
    for gpu in gpus() {
        let g = GpuContext::new(&gpu, &s.ctx).expect("gpu context");
        let ge = GpuEvaluator::new(&g, &s.keys.evaluation_keys).expect("keys");
        let gb = GpuBootstrapper::new(&g, &boot).expect("gpu bootstrapper");
        let glow = g.upload(&low).expect("upload");
        let graised = g
            .download(&gb.mod_raise(&ge, &glow).expect("gpu mod raise"))
            .expect("download");
        assert_eq!(graised.level(), raised.level());
        assert_eq!(graised.scale(), raised.scale());
        for (x, y) in graised.polys().iter().zip(raised.polys()) {
            assert!(
                x.as_slice() == y.as_slice(),
                "{}: ModRaise differs from the CPU's",
                gpu.info().name
            );
        }
        let (out, times) = gb.bootstrap_timed(&ge, &glow, true).expect("gpu bootstrap");
        let out = g.download(&out).expect("download");
        assert_eq!(out.level(), boot.output_level());
        assert_eq!(out.scale(), ct.scale());
        assert_eq!(out.slots(), s.ctx.n() / 2);
        let err = max_error(&dec.decrypt_complex(&out).expect("decrypt"), &z);
        eprintln!(
            "{}: bootstrap max error 2^{:.1} (CPU 2^{:.1}), {:.3} s",
            gpu.info().name,
            err.log2(),
            cpu_err.log2(),
            times.total_s()
        );
        assert!(err < 2f64.powi(-20), "max error {err:e}");
        // The same circuit with the same (hoisted, merged) key switches: the same words.
        for (x, y) in out.polys().iter().zip(cpu_out.polys()) {
            assert!(
                x.as_slice() == y.as_slice(),
                "{}: the bootstrap differs from the CPU's (errors 2^{:.1} and 2^{:.1})",
                gpu.info().name,
                err.log2(),
                cpu_err.log2()
            );
        }
    }
}

/// Sparse packing (64 slots), the memory-lean key set (power-of-two baby steps, one rotation
/// after another) and a compact-diagonal bootstrapper on the GPU: within 2^-20, refusing
/// another slot count.
#[test]
fn gpu_bootstrap_sparse_packing_and_fewer_keys() {
    let n = 64;
    let s = setup(SecretDistribution::FixedHamming(H), &[n, 1 << 9]);
    let dec = Decryptor::new(&s.ctx, &s.keys.secret_key).expect("decryptor");
    let mut rng = ChaCha8Rng::seed_from_u64(12);
    let mut lean = s.config;
    lean.fewer_keys = true;
    let mut compact = s.config;
    compact.compact_diagonals = true;
    let cases = [
        (
            Bootstrapper::with_slots(&s.ctx, s.config, n, Threads::new(2)).expect("sparse"),
            n,
        ),
        (
            Bootstrapper::new(&s.ctx, lean, Threads::new(2)).expect("lean"),
            s.ctx.n() / 2,
        ),
        // Compact diagonals are expanded once, for the upload.
        (
            Bootstrapper::new(&s.ctx, compact, Threads::new(2)).expect("compact"),
            s.ctx.n() / 2,
        ),
    ];
    for gpu in gpus() {
        let g = GpuContext::new(&gpu, &s.ctx).expect("gpu context");
        let ge = GpuEvaluator::new(&g, &s.keys.evaluation_keys).expect("keys");
        for (boot, slots) in &cases {
            let gb = GpuBootstrapper::new(&g, boot).expect("gpu bootstrapper");
            let z = random(&mut rng, *slots);
            let ct = Encryptor::new(&s.ctx)
                .encrypt_complex(&z, &s.keys.public_key)
                .expect("encrypt");
            let gct = g.upload(&ct).expect("upload");
            let out = g
                .download(&gb.bootstrap(&ge, &gct).expect("gpu bootstrap"))
                .expect("download");
            assert_eq!(out.slots(), *slots);
            let err = max_error(&dec.decrypt_complex(&out).expect("decrypt"), &z);
            eprintln!(
                "{}: {slots} slots{}: max error 2^{:.1}",
                gpu.info().name,
                if boot.config().fewer_keys {
                    ", fewer keys"
                } else {
                    ""
                },
                err.log2()
            );
            assert!(err < 2f64.powi(-20), "{slots} slots: max error {err:e}");
        }
        // A ciphertext of another slot count is refused, with the fix in the message.
        let gb = GpuBootstrapper::new(&g, &cases[0].0).expect("gpu bootstrapper");
        let other = Encryptor::new(&s.ctx)
            .encrypt_complex(&random(&mut rng, 2 * n), &s.keys.public_key)
            .expect("encrypt");
        let e = gb
            .bootstrap(&ge, &g.upload(&other).expect("upload"))
            .expect_err("another slot count");
        assert!(e.to_string().contains("with_slots"), "{e}");
    }
}
