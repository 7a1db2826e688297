//! Every GPU kernel and operation against the CPU backend on the same inputs: equal word for
//! word. Runs on the host emulator (the same kernel source, compiled for the CPU) everywhere,
//! and on a real GPU too when one is present.

use heloom_ckks::{
    keygen, CkksParameters, Context, Decryptor, Encryptor, Evaluator, KeySet, SecurityLevel,
};
use heloom_gpu::{Gpu, GpuContext, GpuError, GpuEvaluator, GpuWord, NttShape};
use heloom_math::{Form, RnsPoly};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;

/// The emulator, plus the first CUDA device when there is one.
fn gpus() -> Vec<Gpu> {
    let mut v = vec![Gpu::emulator()];
    match Gpu::cuda(0) {
        Ok(g) => v.push(g),
        Err(e) => {
            eprintln!("GPU part of this test skipped (kernels still checked on the emulator): {e}")
        }
    }
    v
}

fn params(n: usize, levels: usize, word: u32, dnum: Option<usize>) -> CkksParameters {
    let mut b = CkksParameters::builder(n)
        .levels(levels)
        .word_bits(word)
        .scale_bits(if word == 32 { 28 } else { 40 })
        .first_bits(if word == 32 { 30 } else { 45 });
    if let Some(d) = dnum {
        b = b.dnum(d);
    }
    if n < 1 << 13 {
        b = b.security(SecurityLevel::None);
    }
    b.build().expect("parameters")
}

/// Like [`params`] with the widest primes the word allows (60-bit for u64, 31-bit for u32):
/// the lazy sums of the base conversion and the key inner product then carry high words near
/// their bound.
fn wide_prime_params(n: usize, levels: usize, word: u32, dnum: usize) -> CkksParameters {
    let (scale, first) = if word == 32 { (30, 31) } else { (60, 60) };
    CkksParameters::builder(n)
        .levels(levels)
        .word_bits(word)
        .scale_bits(scale)
        .first_bits(first)
        .dnum(dnum)
        .security(SecurityLevel::None)
        .build()
        .expect("parameters")
}

struct Setup<W: GpuWord> {
    ctx: Arc<Context<W>>,
    keys: KeySet<W>,
}

fn setup<W: GpuWord>(p: CkksParameters) -> Setup<W> {
    let ctx = Context::<W>::new(p).expect("context");
    let keys = keygen(&ctx, &[1, -3, 5], false).expect("keys");
    Setup { ctx, keys }
}

fn values(seed: u64, n: usize) -> Vec<f64> {
    let mut r = ChaCha8Rng::seed_from_u64(seed);
    (0..n).map(|_| r.gen_range(-1.0..1.0)).collect()
}

fn random_poly<W: GpuWord>(ctx: &Context<W>, level: usize, seed: u64) -> RnsPoly<W> {
    random_poly_in(ctx, level, seed, Form::Ntt)
}

fn random_poly_in<W: GpuWord>(ctx: &Context<W>, level: usize, seed: u64, form: Form) -> RnsPoly<W> {
    let basis = ctx.q_basis(level).expect("basis");
    let mut r = ChaCha8Rng::seed_from_u64(seed);
    let words: Vec<u64> = basis
        .moduli()
        .iter()
        .flat_map(|m| {
            let q = m.value();
            (0..ctx.n()).map(|_| r.gen_range(0..q)).collect::<Vec<_>>()
        })
        .collect();
    basis.poly_from_words(&words, form).expect("poly")
}

fn same<W: GpuWord>(a: &heloom_ckks::Ciphertext<W>, b: &heloom_ckks::Ciphertext<W>, what: &str) {
    assert_eq!(a.level(), b.level(), "{what}: level");
    assert_eq!(a.size(), b.size(), "{what}: size");
    assert!(
        (a.scale() - b.scale()).abs() <= 1e-12 * a.scale(),
        "{what}: scale"
    );
    for (i, (x, y)) in a.polys().iter().zip(b.polys()).enumerate() {
        if x.as_slice() != y.as_slice() {
            let first = x
                .as_slice()
                .iter()
                .zip(y.as_slice())
                .position(|(u, v)| u != v)
                .unwrap_or(0);
            panic!("{what}: polynomial {i} differs first at word {first}");
        }
    }
}

fn check_ntt<W: GpuWord>(gpu: &Gpu, p: CkksParameters) {
    let ctx = Context::<W>::new(p).expect("context");
    let g = GpuContext::new(gpu, &ctx).expect("gpu context");
    let level = ctx.max_level();
    let basis = ctx.q_basis(level).expect("basis");
    let a = random_poly_in(&ctx, level, 1, Form::Coeff);
    let b = random_poly_in(&ctx, level, 2, Form::Coeff);
    // Forward, two polynomials at once.
    let mut buf = g.upload_polys(&[&a, &b], level).expect("upload");
    g.ntt_forward(&mut buf, level).expect("forward");
    let got = gpu.download(&buf).expect("download");
    let (mut ea, mut eb) = (a.clone(), b.clone());
    basis.forward(&mut ea).expect("cpu forward");
    basis.forward(&mut eb).expect("cpu forward");
    let want: Vec<W> = [ea.as_slice(), eb.as_slice()].concat();
    assert!(
        got == want,
        "forward NTT differs (N = {}, u{})",
        ctx.n(),
        W::BITS
    );
    // Inverse of the CPU's NTT gives the inputs back; and equals the CPU inverse.
    g.ntt_inverse(&mut buf, level).expect("inverse");
    let back = gpu.download(&buf).expect("download");
    let orig: Vec<W> = [a.as_slice(), b.as_slice()].concat();
    assert!(
        back == orig,
        "inverse NTT does not invert (N = {}, u{})",
        ctx.n(),
        W::BITS
    );
    let mut ia = a.clone();
    ia.set_form(Form::Ntt);
    basis.inverse(&mut ia).expect("cpu inverse");
    let mut one = g.upload_polys(&[&a], level).expect("upload");
    g.ntt_inverse(&mut one, level).expect("inverse");
    assert!(
        gpu.download(&one).expect("download") == ia.as_slice(),
        "inverse NTT differs from the CPU's"
    );
}

#[test]
fn emulator_has_every_kernel() {
    let mut a = heloom_gpu::gpu::emulator_kernels();
    let mut b = heloom_gpu::source::kernel_names();
    a.sort();
    b.sort();
    assert_eq!(a, b);
}

#[test]
fn ntt_bit_exact_both_words() {
    for gpu in gpus() {
        for log_n in [10, 11, 13] {
            check_ntt::<u64>(&gpu, params(1 << log_n, 2, 64, None));
            check_ntt::<u32>(&gpu, params(1 << log_n, 2, 32, None));
        }
    }
}

#[test]
fn ntt_and_key_switching_bit_exact_at_every_radix() {
    // Rounds of 4, 8 and 16 words a thread (HELOOM_GPU_NTT_RADIX), each on its own emulator,
    // and forward and inverse kernels with different radices (the default is 8,4): the
    // transforms, and the ops whose fused NTTs (rescale's spread, the mod-down's sub-scale
    // store) use them.
    for (fwd, inv) in [(4, 4), (8, 8), (16, 16), (8, 4), (4, 16)] {
        let gpu = Gpu::emulator_with_ntt_radix(fwd, inv).expect("radix");
        for log_n in [10, 11, 13] {
            check_ntt::<u64>(&gpu, params(1 << log_n, 2, 64, None));
            check_ntt::<u32>(&gpu, params(1 << log_n, 2, 32, None));
        }
        check_ops::<u64>(&gpu, params(1 << 11, 3, 64, Some(2)));
        check_ops::<u32>(&gpu, params(1 << 11, 3, 32, Some(2)));
    }
    assert!(Gpu::emulator_with_ntt_radix(32, 4).is_err());
    assert!(Gpu::emulator_with_ntt_radix(8, 2).is_err());
}

#[test]
fn ntt_phase_split_covers_every_bit_once() {
    // Not a GPU run: the phase plan itself, for every size and every tile size in use (6 on the
    // emulator, 8 to 13 on GPUs), upper phases with tiles of their own and rows of 1 to 64
    // consecutive words (HELOOM_GPU_NTT_TILE).
    for base in 6u32..=13 {
        for upper in [base, 6, 9, 10, 12, 13] {
            for run in [0, 3, 4, 6] {
                for log_n in 4..=17u32 {
                    let ph = heloom_gpu::context::phase_plan(log_n, base, upper, run);
                    let mut bits = vec![0u32; log_n as usize];
                    for (i, p) in ph.iter().enumerate() {
                        assert!(p.0 < p.1 && p.2 <= p.0, "phase {p:?}");
                        let limit = if i + 1 == ph.len() { base } else { upper };
                        assert!(p.1 - p.0 + p.2 <= limit, "tile too large: {p:?}");
                        if i + 1 < ph.len() && p.1 - p.0 < upper.saturating_sub(run) {
                            // A short upper phase only where it meets the base phase.
                            assert_eq!(p.0, base.min(log_n), "{ph:?}");
                        }
                        for b in p.0..p.1 {
                            bits[b as usize] += 1;
                        }
                    }
                    assert!(
                        bits.iter().all(|&c| c == 1),
                        "log_n {log_n} tiles {base}/{upper}/{run}: {ph:?}"
                    );
                    assert_eq!(ph.last().map(|p| p.0), Some(0));
                }
            }
        }
    }
}

#[test]
fn ntt_and_key_switching_bit_exact_in_every_shape() {
    // Tiles of other sizes in the phase of bit 0 and above it, short and long rows, other block
    // sizes (HELOOM_GPU_NTT_TILE, HELOOM_GPU_NTT_THREADS): the transforms and the ops with fused
    // NTTs. The emulator's default tiles are 2^6; on a GPU, shapes around its default.
    let shape = |t: u32, u: u32, r: u32, threads: u32| NttShape {
        tile_log: Some(t),
        upper_tile_log: Some(u),
        run_log: r,
        threads: Some(threads),
    };
    for gpu in gpus() {
        let shapes = if gpu.kind() == heloom_gpu::GpuKind::Emulator {
            vec![shape(7, 6, 2, 64), shape(6, 8, 5, 32), shape(8, 7, 0, 128)]
        } else {
            vec![
                shape(12, 10, 4, 256),
                shape(13, 12, 4, 512),
                shape(10, 9, 3, 128),
                shape(11, 11, 6, 1024),
            ]
        };
        for s in shapes {
            gpu.set_ntt_shape(s).expect("shape");
            assert_eq!(gpu.ntt_shape(), s);
            for log_n in [10, 13] {
                check_ntt::<u64>(&gpu, params(1 << log_n, 2, 64, None));
                check_ntt::<u32>(&gpu, params(1 << log_n, 2, 32, None));
            }
            check_ops::<u64>(&gpu, params(1 << 11, 3, 64, Some(2)));
        }
        gpu.set_ntt_shape(NttShape::default()).expect("default");
        for bad in [
            shape(5, 6, 4, 256),
            shape(12, 14, 4, 256),
            shape(12, 12, 7, 256),
        ] {
            let e = gpu.set_ntt_shape(bad).expect_err("refused").to_string();
            assert!(e.contains("NTT"), "{e}");
        }
        assert!(gpu.set_ntt_shape(shape(12, 12, 4, 48)).is_err());
        assert_eq!(gpu.ntt_shape(), NttShape::default());
    }
}

fn check_ops<W: GpuWord>(gpu: &Gpu, p: CkksParameters) {
    let s = setup::<W>(p);
    let ctx = &s.ctx;
    let n = ctx.n();
    let enc = Encryptor::new(ctx);
    let x = enc
        .encrypt(&values(1, n / 2), &s.keys.public_key)
        .expect("encrypt");
    let y = enc
        .encrypt(&values(2, n / 2), &s.keys.public_key)
        .expect("encrypt");
    let cpu = Evaluator::new(ctx, Arc::new(s.keys.evaluation_keys.clone())).expect("evaluator");
    let g = GpuContext::new(gpu, ctx).expect("gpu context");
    let ge = GpuEvaluator::new(&g, &s.keys.evaluation_keys).expect("gpu keys");
    let (gx, gy) = (g.upload(&x).expect("up"), g.upload(&y).expect("up"));
    let tag = format!("N={n} u{} dnum={}", W::BITS, ctx.params().dnum());
    if ctx.params().dnum() == 1 {
        assert!(
            ctx.params().alpha() > 8,
            "this case is meant to use a conversion of more than 8 primes"
        );
    }

    same(
        &g.download(&g.add(&gx, &gy).expect("add")).expect("dl"),
        &cpu.add(&x, &y).expect("add"),
        &format!("add {tag}"),
    );
    same(
        &g.download(&g.sub(&gx, &gy).expect("sub")).expect("dl"),
        &cpu.sub(&x, &y).expect("sub"),
        &format!("sub {tag}"),
    );
    let m = g.multiply(&gx, &gy).expect("multiply");
    let cm = cpu.multiply(&x, &y).expect("multiply");
    same(
        &g.download(&m).expect("dl"),
        &cm,
        &format!("multiply {tag}"),
    );
    let r = ge.relinearize(&m).expect("relinearize");
    let cr = cpu.relinearize(&cm).expect("relinearize");
    same(
        &g.download(&r).expect("dl"),
        &cr,
        &format!("relinearize {tag}"),
    );
    let rs = g.rescale(&r).expect("rescale");
    let crs = cpu.rescale(&cr).expect("rescale");
    same(
        &g.download(&rs).expect("dl"),
        &crs,
        &format!("rescale {tag}"),
    );
    // Rescale of a three-polynomial ciphertext too (any polynomial count).
    same(
        &g.download(&g.rescale(&m).expect("rescale3")).expect("dl"),
        &cpu.rescale(&cm).expect("rescale3"),
        &format!("rescale size 3 {tag}"),
    );
    for step in [1i64, -3, 5] {
        let gr = ge.rotate(&gx, step).expect("rotate");
        let cr = cpu.rotate(&x, step).expect("rotate");
        same(
            &g.download(&gr).expect("dl"),
            &cr,
            &format!("rotate {step} {tag}"),
        );
    }
    // Key switching of one raw polynomial, level below the top.
    let level = ctx.max_level() - 1;
    let d = random_poly(ctx, level, 9);
    let gd = g.upload_polys(&[&d], level).expect("upload");
    let key = s.keys.evaluation_keys.relin_key().expect("relin key");
    let gk = g.upload_key(key).expect("key");
    let out = gpu
        .download(&g.key_switch(&gd, level, &gk).expect("key switch"))
        .expect("dl");
    let (c0, c1) = ctx.key_switch(&d, level, key).expect("cpu key switch");
    assert!(
        out == [c0.as_slice(), c1.as_slice()].concat(),
        "key switch {tag}"
    );
    // Decryption makes sense too: x*y within CKKS noise.
    let dec = Decryptor::new(ctx, &s.keys.secret_key).expect("decryptor");
    let got = dec.decrypt(&g.download(&rs).expect("dl")).expect("decrypt");
    let (vx, vy) = (values(1, n / 2), values(2, n / 2));
    let bound = if W::BITS == 32 { 1e-2 } else { 1e-6 };
    for i in 0..n / 2 {
        assert!(
            (got[i] - vx[i] * vy[i]).abs() < bound,
            "slot {i}: {} vs {}",
            got[i],
            vx[i] * vy[i]
        );
    }
    // The naive baseline (64-bit only) is exact too.
    if W::BITS == 64 {
        same(
            &g.download(&g.rescale_naive(&r).expect("naive"))
                .expect("dl"),
            &crs,
            &format!("naive rescale {tag}"),
        );
    } else {
        assert!(matches!(g.rescale_naive(&r), Err(GpuError::Invalid(_))));
    }
}

#[test]
fn ops_bit_exact_u64() {
    for gpu in gpus() {
        // Cost-model dnum, one prime per digit (single-prime conversions), two per digit.
        check_ops::<u64>(&gpu, params(1 << 11, 3, 64, None));
        check_ops::<u64>(&gpu, params(1 << 11, 3, 64, Some(4)));
        check_ops::<u64>(&gpu, params(1 << 11, 3, 64, Some(2)));
        // One digit of 10 primes and 10 special primes: the 16-prime conversion kernel.
        check_ops::<u64>(&gpu, params(1 << 11, 9, 64, Some(1)));
        // One digit of 18 primes: the wide (local-memory) conversion, with a fold of the lazy
        // sums' high words after 16 terms.
        check_ops::<u64>(&gpu, params(1 << 11, 17, 64, Some(1)));
        // 60-bit primes: 18 lazy terms of almost 2^120 each, folded after 16.
        check_ops::<u64>(&gpu, wide_prime_params(1 << 11, 17, 64, 1));
    }
}

#[test]
fn ops_bit_exact_u32() {
    for gpu in gpus() {
        check_ops::<u32>(&gpu, params(1 << 11, 3, 32, None));
        check_ops::<u32>(&gpu, params(1 << 11, 3, 32, Some(2)));
        // 10 and 18 primes per digit: the 16-prime and the wide conversion on 32-bit words.
        check_ops::<u32>(&gpu, params(1 << 11, 9, 32, Some(1)));
        check_ops::<u32>(&gpu, params(1 << 11, 17, 32, Some(1)));
        check_ops::<u32>(&gpu, wide_prime_params(1 << 11, 9, 32, 1));
    }
}

#[test]
fn ops_bit_exact_secure_size() {
    // N = 2^13 at 128-bit security: five NTT phases on the emulator.
    for gpu in gpus() {
        check_ops::<u64>(&gpu, params(1 << 13, 2, 64, None));
    }
}

#[test]
fn bad_inputs_are_refused() {
    let gpu = Gpu::emulator();
    let s = setup::<u64>(params(1 << 10, 2, 64, None));
    let other = setup::<u64>(params(1 << 10, 1, 64, None));
    let g = GpuContext::new(&gpu, &s.ctx).expect("gpu context");
    let enc = Encryptor::new(&s.ctx);
    let x = enc.encrypt(&[0.5], &s.keys.public_key).expect("encrypt");
    let gx = g.upload(&x).expect("upload");
    // A ciphertext of other parameters.
    let ox = Encryptor::new(&other.ctx)
        .encrypt(&[0.5], &other.keys.public_key)
        .expect("encrypt");
    assert!(matches!(g.upload(&ox), Err(GpuError::Mismatch(_))));
    // Scales that cannot be aligned (same level), levels that cannot be raised.
    let low = g.drop_to_level(&gx, 0).expect("drop");
    let odd = g.with_scale(&gx, gx.scale() * 3.0).expect("relabel");
    let e = g.add(&gx, &odd).expect_err("scales differ at one level");
    assert!(e.to_string().contains("scale"), "{e}");
    assert!(g.with_scale(&gx, f64::NAN).is_err());
    assert!(matches!(g.rescale(&low), Err(GpuError::Invalid(_))));
    assert!(matches!(
        g.drop_to_level(&low, 1),
        Err(GpuError::Invalid(_))
    ));
    // Relinearize a two-polynomial ciphertext; a rotation without its key.
    let ge = GpuEvaluator::new(&g, &s.keys.evaluation_keys).expect("keys");
    assert!(matches!(ge.relinearize(&gx), Err(GpuError::Invalid(_))));
    let e = ge.rotate(&gx, 7).expect_err("no key for step 7");
    assert!(
        e.to_string().contains("no Galois key for rotation step 7"),
        "{e}"
    );
    // Keys of other parameters.
    let okey = other.keys.evaluation_keys.relin_key().expect("key");
    assert!(matches!(g.upload_key(okey), Err(GpuError::Mismatch(_))));
    // A ciphertext from another device handle.
    let g2 = GpuContext::new(&Gpu::emulator(), &s.ctx).expect("second context");
    assert!(matches!(g2.add(&gx, &gx), Err(GpuError::Mismatch(_))));
}

#[test]
fn missing_gpu_is_a_clear_error() {
    match Gpu::cuda(0) {
        Ok(g) => eprintln!(
            "a GPU is present ({}); nothing to check here",
            g.info().name
        ),
        Err(e) => {
            let msg = e.to_string();
            assert!(
                msg.contains("no GPU available") || msg.contains("NVRTC"),
                "unclear error: {msg}"
            );
        }
    }
    assert!(Gpu::cuda(999).is_err());
}

/// The benchmark's full-size parameter sets (N = 2^15 with 15 limbs, N = 2^16 with 30 limbs,
/// 128-bit secure, 64-bit words) through every op on the emulator: slow (many minutes), so
/// run by hand with `cargo test --release -p heloom-gpu --test bit_exact -- --ignored`.
#[test]
#[ignore = "slow: full-size parameters on the host emulator"]
fn full_size_parameter_sets_on_the_emulator() {
    let gpu = Gpu::emulator();
    for (log_n, limbs) in [(15u32, 15usize), (16, 30)] {
        let p = CkksParameters::builder(1 << log_n)
            .levels(limbs - 1)
            .scale_bits(40)
            .first_bits(50)
            .build()
            .expect("parameters");
        eprintln!("N = 2^{log_n}, {limbs} limbs, dnum {}", p.dnum());
        check_ops::<u64>(&gpu, p);
    }
}
