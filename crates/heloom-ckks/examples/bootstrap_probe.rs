//! Bootstrapping probe: builds a chain for `LOG_N` (default 12) with a secret of Hamming weight
//! `H` (default 192), `COMP` computation levels of 40 bits (default 2), and prints the time of
//! each phase, the precision over all slots of uniform complex inputs in [-1, 1] and the key
//! memory, with `THREADS` threads (default: every core). Such chains are experiments, not
//! checked for 128-bit security. `PRESET=1` runs the 128-bit preset of `LOG_N` instead
//! (`circuits::bootstrap::preset`); `SSE=1` a dense secret with encapsulation under weight
//! `H`; `DIAG=1` splits the error by phase; `WARM=n` runs n bootstraps first; `FEWER=1` fewer keys; `COMPACT=1` compact diagonals; `SLOTS` sparse packing; `PAIRAB=n` times EvalMod's halves one after the other against side by side; `Q0`, `R` (double angles), `DEG`, `CTS`, `STC`
//! override the chain and the settings.
use heloom_ckks::circuits::bootstrap::{BootstrapConfig, Bootstrapper};
use heloom_ckks::*;
use num_complex::Complex64;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;
use std::time::Instant;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Peak bytes of live polynomial buffers since the last call, GB.
fn live_peak() -> f64 {
    heloom_math::take_peak_buffer_bytes() as f64 / 1e9
}

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Resident and peak resident memory so far.
fn rss() -> String {
    let gb = |k| heloom_pool::proc_status_bytes(None, k).unwrap_or(0) as f64 / 1e9;
    format!("resident {:.2} GB, peak {:.2} GB", gb("VmRSS"), gb("VmHWM"))
}

fn main() -> Result<()> {
    let log_n = env("LOG_N", 12) as u32;
    let h = env("H", 192);
    let comp = env("COMP", 2);
    let threads = Threads::new(env("THREADS", heloom_pool::cores()));
    let mut config = BootstrapConfig::for_hamming_weight(h);
    config.cts_levels = env("CTS", 3);
    config.stc_levels = env("STC", 3);
    config.double_angle = env("R", config.double_angle as usize) as u32;
    config.degree = env(
        "DEG",
        if config.double_angle == 0 {
            ((2.0 * std::f64::consts::PI * config.k * 1.3) as usize + 40).next_power_of_two() - 1
        } else {
            BootstrapConfig::degree_for(config.k, config.double_angle)
        },
    );
    let preset = if env("PRESET", 0) == 1 {
        Some(heloom_ckks::circuits::bootstrap::preset(log_n)?)
    } else {
        None
    };
    let mut h = h;
    if let Some(p) = &preset {
        config = p.config;
        h = p.sparse_weight;
    }
    config.arcsine_degree = env("ASIN", config.arcsine_degree);
    config.message_ratio_bits = env("RATIO", config.message_ratio_bits as usize) as u32;
    // `FEWER=1`: power-of-two baby-step keys only.
    config.fewer_keys = env("FEWER", 0) == 1;
    // `COMPACT=1`: the transforms' diagonals stored compactly.
    config.compact_diagonals = env("COMPACT", 0) == 1;
    if preset.is_some() {
        // `R` and `DEG` override the preset's EvalMod too.
        if let Ok(r) = std::env::var("R") {
            config.double_angle = r.parse().unwrap_or(0);
            config.degree = BootstrapConfig::degree_for(config.k, config.double_angle);
        }
        config.degree = env("DEG", config.degree);
    }
    let comp_bits = env("COMPBITS", 40) as u32;
    let bits = config.chain_bits(env("Q0", 50) as u32, &vec![comp_bits; comp]);
    let params = match &preset {
        // `BITS=60,45x9,...` (and `SPECIALBITS`, `SPECIAL`): the preset's settings on another
        // chain, e.g. to weigh prime sizes (security is still checked).
        Some(p) if std::env::var("BITS").is_ok() => {
            let spec = std::env::var("BITS").unwrap_or_default();
            let mut chain = Vec::new();
            for part in spec.split(',') {
                let (b, n) = part.split_once('x').unwrap_or((part, "1"));
                let (b, n): (u32, usize) = (b.parse().unwrap_or(45), n.parse().unwrap_or(1));
                chain.extend(std::iter::repeat_n(b, n));
            }
            CkksParameters::builder(1 << log_n)
                .prime_bits(chain)
                .scale_bits(p.params.scale().log2().round() as u32)
                .special_bits(env("SPECIALBITS", 61) as u32)
                .special_count(env("SPECIAL", p.params.special_moduli().len()))
                .build()?
        }
        Some(p) => p.params.clone(),
        None if env("SSE", 0) == 1 => CkksParameters::builder(1 << log_n)
            .prime_bits(bits.clone())
            .special_bits(61)
            .special_count(env("SPECIAL", 7))
            .scale_bits(comp_bits)
            .security(SecurityLevel::None)
            .build()?,
        None => CkksParameters::builder(1 << log_n)
            .prime_bits(bits.clone())
            .special_bits(60)
            .security(SecurityLevel::None)
            .secret(SecretDistribution::FixedHamming(h))
            .build()?,
    };
    let bits: Vec<u32> = params
        .moduli()
        .iter()
        .map(|&q| 64 - q.leading_zeros())
        .collect();
    let total: u32 = bits.iter().sum();
    println!(
        "N = 2^{log_n}, h = {h}{}, K = {}, EvalMod degree {} (depth {}), CtS {} + StC {} levels, {} primes ({total} bits) + {} special, dnum {}, {} threads",
        if preset.is_some() || env("SSE", 0) == 1 {
            " (sparse secret of ModRaise; the computation's is dense ternary)"
        } else {
            ""
        },
        config.k,
        config.degree,
        config.eval_mod_depth(),
        config.cts_levels,
        config.stc_levels,
        bits.len(),
        params.special_moduli().len(),
        params.dnum(),
        threads.get()
    );
    let ctx = Context::<u64>::new(params)?;
    let t = Instant::now();
    // `SLOTS`: sparse packing on that many slots (default N/2, full).
    let mut boot = Bootstrapper::with_slots(&ctx, config, env("SLOTS", ctx.n() / 2), threads)?;
    println!(
        "transforms encoded: {:.2} s, {:.2} GB ({})",
        t.elapsed().as_secs_f64(),
        boot.memory_bytes() as f64 / 1e9,
        rss()
    );
    let steps = boot.rotation_steps();
    let t = Instant::now();
    let keys = keygen(&ctx, &steps, true)?;
    println!(
        "keys: {} rotations + conjugation + relinearization, {:.2} GB, {:.2} s ({})",
        steps.len(),
        keys.evaluation_keys.memory_bytes() as f64 / 1e9,
        t.elapsed().as_secs_f64(),
        rss()
    );
    let sse = preset
        .as_ref()
        .map(|p| p.sparse_weight)
        .or(if env("SSE", 0) == 1 { Some(h) } else { None });
    if let Some(weight) = sse {
        let t = Instant::now();
        let sparse =
            heloom_ckks::circuits::bootstrap::sparse_secret_keys(&ctx, &keys.secret_key, weight)?;
        boot = boot.with_sparse_keys(Arc::new(sparse))?;
        println!(
            "sparse-secret encapsulation keys (h' = {}): {:.2} s; log QP = {:.0} bits, security {:?}",
            weight,
            t.elapsed().as_secs_f64(),
            ctx.params().log_qp(),
            ctx.params().security()
        );
    }
    let KeySet {
        secret_key,
        public_key,
        evaluation_keys,
    } = keys;
    let mut ev = Evaluator::new(&ctx, Arc::new(evaluation_keys))?.with_threads(threads);
    if let Ok(b) = std::env::var("HOISTED_MB") {
        // `HOISTED_MB`: the hoisted-key budget, MB.
        ev = ev.with_hoisted_key_budget(b.parse::<usize>().unwrap_or(0) << 20);
    }
    let dec = Decryptor::new(&ctx, &secret_key)?;
    let slots = boot.slots();
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let z: Vec<Complex64> = (0..slots)
        .map(|_| Complex64::new(rng.gen_range(-1.0..1.0), rng.gen_range(-1.0..1.0)))
        .collect();
    let ct = Encryptor::new(&ctx).encrypt_complex(&z, &public_key)?;
    let ct = ev.drop_to_level(&ct, 0)?;
    let fresh = dec
        .decrypt_complex(&ct)?
        .iter()
        .zip(&z)
        .map(|(g, w)| (g - w).norm())
        .fold(0.0, f64::max);
    println!(
        "the input at level 0: precision {:.1} bits worst",
        -fresh.log2()
    );
    // `WARM=n`: n timed bootstraps first (a fresh process's first one also pays for faulting
    // its working memory in).
    for i in 0..env("WARM", 0) {
        let (_, times) = boot.bootstrap_timed(&ev, &ct)?;
        println!(
            "warm-up {i}: {times:?} total {:.2} s ({})",
            times.total_s(),
            rss()
        );
    }
    // The most resident memory seen (sampled every 5 ms) since the last `phase_peak()`.
    let seen = Arc::new(std::sync::atomic::AtomicU64::new(0));
    {
        let seen = Arc::clone(&seen);
        std::thread::spawn(move || loop {
            let r = heloom_pool::proc_status_bytes(None, "VmRSS").unwrap_or(0);
            seen.fetch_max(r, std::sync::atomic::Ordering::Relaxed);
            std::thread::sleep(std::time::Duration::from_millis(5));
        });
    }
    let phase_peak = || {
        std::thread::sleep(std::time::Duration::from_millis(10));
        let r = seen.swap(0, std::sync::atomic::Ordering::Relaxed) as f64 / 1e9;
        (r, live_peak())
    };
    phase_peak();
    if slots < ctx.n() / 2 {
        // Sparse packing: its phases are internal; time the whole bootstrap.
        let (out, times) = boot.bootstrap_timed(&ev, &ct)?;
        let got = dec.decrypt_complex(&out)?;
        let errs: Vec<f64> = got.iter().zip(&z).map(|(g, w)| (g - w).norm()).collect();
        let worst = errs.iter().copied().fold(0.0, f64::max);
        let mean = errs.iter().sum::<f64>() / errs.len() as f64;
        println!(
            "bootstrap of {slots} slots {:.2} s ({times:?}); level {} left; precision {:.1} bits worst, {:.1} mean; peak memory {:.2} GB resident",
            times.total_s(),
            out.level(),
            -worst.log2(),
            -mean.log2(),
            phase_peak().0
        );
        return Ok(());
    }
    let total_t = Instant::now();
    let t = Instant::now();
    let raised = boot.mod_raise(&ev, &ct)?;
    let t_raise = t.elapsed().as_secs_f64();
    let m_raise = phase_peak();
    let t = Instant::now();
    let (re, im) = boot.coeffs_to_slots(&ev, &raised)?;
    let t_cts = t.elapsed().as_secs_f64();
    let m_cts = phase_peak();
    // `PAIRAB=n`: n rounds timing EvalMod's two halves one after the other on every thread
    // against side by side on a share each.
    for round in 0..env("PAIRAB", 0) {
        let real = |e: &Evaluator<u64>, v: &Ciphertext<u64>| boot.eval_mod_real(e, v);
        let t = Instant::now();
        real(&ev, &re)?;
        real(&ev, &im)?;
        let seq = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let (a, b) = threads.join(
            |t| real(&ev.with_threads(t), &re),
            |t| real(&ev.with_threads(t), &im),
        );
        a?;
        b?;
        let par = t.elapsed().as_secs_f64();
        println!(
            "EvalMod pair round {round}: one after the other {seq:.2} s, side by side {par:.2} s"
        );
    }
    let t = Instant::now();
    let (mut re, mut im) = boot.eval_mod_pair(&ev, &re, &im)?;
    let t_mod = t.elapsed().as_secs_f64();
    let m_mod = phase_peak();
    if env("DIAG", 0) == 1 && slots == ctx.n() / 2 {
        // Exact expectations from the level-0 plaintext's coefficients m_k: CoeffToSlot's slot t
        // holds I + m_(br(t)) / q0 (real part; + L for the imaginary part), EvalMod's output
        // is proportional to sin(2 pi m / q0).
        let q0 = ctx.params().moduli()[0];
        let pt = dec.decrypt_to_plaintext(&ct)?;
        let b0 = ctx.q_basis(0)?;
        let mut poly = pt.poly().clone();
        b0.inverse(&mut poly)?;
        let m: Vec<f64> = poly
            .limb(0)
            .iter()
            .map(|&v| {
                if v > q0 / 2 {
                    -((q0 - v) as f64)
                } else {
                    v as f64
                }
            })
            .collect();
        let bits = slots.trailing_zeros();
        let br = |t: usize| ((t as u32).reverse_bits() >> (32 - bits)) as usize;
        let (xr, xi) = boot.coeffs_to_slots(&ev, &raised)?;
        // CoeffToSlot leaves x / K.
        let kk = boot.config().k;
        let scaled = |v: Vec<Complex64>| v.into_iter().map(|z| z * kk).collect::<Vec<_>>();
        let (x_re, x_im) = (
            scaled(dec.decrypt_complex(&xr)?),
            scaled(dec.decrypt_complex(&xi)?),
        );
        // With the arcsine correction EvalMod's output is 2 pi (x - I) / (2 pi), not the sine.
        let asin = boot.config().arcsine_degree > 0;
        let target = |f: f64| {
            if asin {
                2.0 * std::f64::consts::PI * f
            } else {
                (2.0 * std::f64::consts::PI * f).sin()
            }
        };
        let (y_re, y_im) = (dec.decrypt_complex(&re)?, dec.decrypt_complex(&im)?);
        let mut cts_err = 0.0f64;
        let mut want = Vec::new();
        let mut got = Vec::new();
        // EvalMod's own error: against the sine of its decrypted input, by |I|.
        let mut own = Vec::new();
        for t in 0..slots {
            for (x, y, k) in [(&x_re, &y_re, br(t)), (&x_im, &y_im, br(t) + slots)] {
                let f = m[k] * boot.message_factor() as f64 / q0 as f64;
                cts_err = cts_err.max((x[t].re - x[t].re.round() - f).abs());
                want.push(target(f));
                got.push(y[t].re);
                own.push((x[t].re, y[t].re));
            }
        }
        {
            let c = got.iter().zip(&want).map(|(g, w)| g * w).sum::<f64>()
                / want.iter().map(|w| w * w).sum::<f64>();
            let mut by_i: std::collections::BTreeMap<i64, (f64, f64, usize)> = Default::default();
            for &(x, y) in &own {
                let e = (y / c - target(x - x.round())).abs();
                let b = by_i.entry(x.round() as i64).or_insert((0.0, 0.0, 0));
                b.0 = b.0.max(e);
                b.1 += e * e;
                b.2 += 1;
            }
            for (i, (mx, ss, n)) in by_i {
                println!(
                    "  EvalMod own error at I = {i}: max 2^{:.1}, rms 2^{:.1} ({n} coefficients)",
                    mx.log2(),
                    (ss / n as f64).sqrt().log2()
                );
            }
        }
        let c = got.iter().zip(&want).map(|(g, w)| g * w).sum::<f64>()
            / want.iter().map(|w| w * w).sum::<f64>();
        let mod_err = got
            .iter()
            .zip(&want)
            .map(|(g, w)| (g - c * w).abs() / c.abs())
            .fold(0.0, f64::max);
        let max_f = m.iter().map(|v| v.abs()).fold(0.0, f64::max) * boot.message_factor() as f64
            / q0 as f64;
        println!(
            "CoeffToSlot error 2^{:.1} in x (max |m/q0| 2^{:.1}); EvalMod error 2^{:.1} relative to sin(2 pi m/q0) (factor {c:.5}); both times q0/Delta = 2^{:.1}",
            cts_err.log2(),
            max_f.log2(),
            mod_err.log2(),
            (q0 as f64 / (ct.scale() * boot.message_factor() as f64)).log2()
        );
    }
    re.set_scale(ct.scale());
    im.set_scale(ct.scale());
    let t = Instant::now();
    let out = boot.slots_to_coeffs(&ev, &re, &im)?;
    let m_stc = phase_peak();
    println!(
        "peak memory by phase (GB resident sampled / live buffers): ModRaise {:.2} / {:.2}, CoeffToSlot {:.2} / {:.2}, EvalMod {:.2} / {:.2}, SlotToCoeff {:.2} / {:.2}",
        m_raise.0, m_raise.1, m_cts.0, m_cts.1, m_mod.0, m_mod.1, m_stc.0, m_stc.1
    );
    if env("DIAG", 0) == 1 && slots == ctx.n() / 2 {
        // Split the final error: SlotToCoeff done in the clear on the decrypted EvalMod outputs
        // against z (the error before SlotToCoeff) and against the decrypted output (its own).
        let (yr, yi) = (dec.decrypt_complex(&re)?, dec.decrypt_complex(&im)?);
        let bits = slots.trailing_zeros();
        let q0 = ctx.params().moduli()[0] as f64;
        let f = if boot.config().double_angle == 0 {
            0.5 * q0 / (boot.eval_scale() * boot.message_factor() as f64)
        } else {
            f64::NAN
        };
        let mut w = vec![Complex64::new(0.0, 0.0); slots];
        for t in 0..slots {
            let k = ((t as u32).reverse_bits() >> (32 - bits)) as usize;
            w[k] = Complex64::new(yr[t].re, yi[t].re) * f;
        }
        let n = ctx.n();
        let two_n = 2 * n as u64;
        let mut g = 1u64;
        let mut before = 0.0f64;
        let got = dec.decrypt_complex(&out)?;
        let mut own = 0.0f64;
        for j in 0..slots {
            let mut acc = Complex64::new(0.0, 0.0);
            for (k, wk) in w.iter().enumerate() {
                let e = g * k as u64 % two_n;
                acc += Complex64::from_polar(1.0, std::f64::consts::PI * e as f64 / n as f64) * wk;
            }
            before = before.max((acc - z[j]).norm());
            own = own.max((acc - got[j]).norm());
            g = g * 5 % two_n;
        }
        println!(
            "error before SlotToCoeff (its input, transformed exactly) 2^{:.1}; SlotToCoeff's own 2^{:.1}",
            before.log2(),
            own.log2()
        );
    }
    let t_stc = t.elapsed().as_secs_f64();
    let all = total_t.elapsed().as_secs_f64();
    let got = dec.decrypt_complex(&out)?;
    let errs: Vec<f64> = got.iter().zip(&z).map(|(g, w)| (g - w).norm()).collect();
    let worst = errs.iter().copied().fold(0.0, f64::max);
    let mean = errs.iter().sum::<f64>() / errs.len() as f64;
    println!(
        "bootstrap {all:.2} s (ModRaise {t_raise:.2}, CoeffToSlot {t_cts:.2}, EvalMod {t_mod:.2}, SlotToCoeff {t_stc:.2}); level {} left; precision {:.1} bits worst, {:.1} mean",
        out.level(),
        -worst.log2(),
        -mean.log2()
    );
    println!(
        "scratch buffers kept: {:.2} GB",
        ctx.scratch_bytes() as f64 / 1e9
    );
    println!(
        "peak resident memory: {:.2} GB",
        heloom_pool::proc_status_bytes(None, "VmHWM").unwrap_or(0) as f64 / 1e9
    );
    Ok(())
}
