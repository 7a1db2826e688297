//! The evaluator's remaining ops (constants, alignment, squaring, negation) and whole task
//! graphs of the runtime on the GPU, against the CPU: equal word for word. Runs on the host
//! emulator everywhere and on a real GPU too when one is present.

use heloom_ckks::{keygen, CkksParameters, Context, Encryptor, Evaluator, PolyOps, SecurityLevel};
use heloom_gpu::{Gpu, GpuContext, GpuEvaluator};
use heloom_runtime::workload::{default_params, ExpWorkload};
use std::sync::Arc;

fn gpus() -> Vec<Gpu> {
    let mut v = vec![Gpu::emulator()];
    match Gpu::cuda(0) {
        Ok(g) => v.push(g),
        Err(e) => eprintln!("GPU part of this test skipped (emulator still runs): {e}"),
    }
    v
}

fn same(a: &heloom_ckks::Ciphertext<u64>, b: &heloom_ckks::Ciphertext<u64>, what: &str) {
    assert_eq!(
        (a.level(), a.size()),
        (b.level(), b.size()),
        "{what}: shape"
    );
    assert!(
        (a.scale() - b.scale()).abs() <= 1e-12 * a.scale(),
        "{what}: scale"
    );
    for (x, y) in a.polys().iter().zip(b.polys()) {
        assert!(x.as_slice() == y.as_slice(), "{what}: words differ");
    }
}

/// N = 2^11 with `levels` 40-bit primes over a 45-bit `q_0`, 64-bit words, no security check.
fn small_context(levels: usize) -> Arc<Context<u64>> {
    let p = CkksParameters::builder(1 << 11)
        .levels(levels)
        .scale_bits(40)
        .first_bits(45)
        .security(SecurityLevel::None)
        .build()
        .expect("params");
    Context::<u64>::new(p).expect("context")
}

#[test]
fn constants_alignment_and_squares_bit_exact() {
    let ctx = small_context(4);
    let keys = keygen(&ctx, &[], false).expect("keys");
    let cpu = Evaluator::new(&ctx, Arc::new(keys.evaluation_keys.clone())).expect("evaluator");
    let enc = Encryptor::new(&ctx);
    let xs: Vec<f64> = (0..ctx.n() / 2).map(|i| (i as f64 / 700.0).sin()).collect();
    let x = enc.encrypt(&xs, &keys.public_key).expect("encrypt");
    for gpu in gpus() {
        let g = GpuContext::new(&gpu, &ctx).expect("gpu context");
        let ge = GpuEvaluator::new(&g, &keys.evaluation_keys).expect("keys");
        let gx = g.upload(&x).expect("upload");
        let dl = |c: &heloom_gpu::GpuCiphertext<u64>| g.download(c).expect("download");
        same(
            &dl(&g.add_const(&gx, -0.375).expect("gpu")),
            &cpu.add_const(&x, -0.375).expect("cpu"),
            "add_const",
        );
        same(
            &dl(&g.multiply_int(&gx, -7).expect("gpu")),
            &cpu.multiply_int(&x, -7).expect("cpu"),
            "multiply_int",
        );
        same(
            &dl(&g.multiply_const(&gx, 0.1234).expect("gpu")),
            &cpu.multiply_const(&x, 0.1234).expect("cpu"),
            "multiply_const",
        );
        same(
            &dl(&PolyOps::multiply_const_exact(&ge, &gx, -(1i128 << 100) + 12345).expect("gpu")),
            &PolyOps::multiply_const_exact(&cpu, &x, -(1i128 << 100) + 12345).expect("cpu"),
            "multiply_const_exact",
        );
        same(
            &dl(&g.negate(&gx).expect("gpu")),
            &cpu.negate(&x).expect("cpu"),
            "negate",
        );
        same(
            &dl(&g.square(&gx).expect("gpu")),
            &cpu.square(&x).expect("cpu"),
            "square",
        );
        // Different levels, same scale: dropped to the lower one.
        let low = cpu.drop_to_level(&x, 2).expect("drop");
        let glow = g.drop_to_level(&gx, 2).expect("drop");
        same(
            &dl(&g.add(&gx, &glow).expect("gpu")),
            &cpu.add(&x, &low).expect("cpu"),
            "add across levels",
        );
        // Different scales: the higher one moved by an integer multiple and a rescale.
        let sq = cpu
            .rescale(
                &cpu.relinearize(&cpu.square(&x).expect("sq"))
                    .expect("relin"),
            )
            .expect("rs");
        let gsq = g
            .rescale(&ge.relinearize(&g.square(&gx).expect("sq")).expect("relin"))
            .expect("rs");
        same(&dl(&gsq), &sq, "square-relin-rescale");
        same(
            &dl(&g.sub(&gx, &gsq).expect("gpu")),
            &cpu.sub(&x, &sq).expect("cpu"),
            "sub across scales",
        );
        // A three-polynomial minus a two-polynomial ciphertext (the third is negated).
        let mut m = cpu.multiply(&x, &x).expect("mul");
        m.set_scale(x.scale());
        let gm = g
            .with_scale(&g.multiply(&gx, &gx).expect("mul"), gx.scale())
            .expect("relabel");
        same(
            &dl(&g.sub(&gx, &gm).expect("gpu")),
            &cpu.sub(&x, &m).expect("cpu"),
            "sub of sizes 2 and 3",
        );
        same(
            &dl(&g.add(&gm, &gx).expect("gpu")),
            &cpu.add(&m, &x).expect("cpu"),
            "add of sizes 3 and 2",
        );
        // A constant too large to encode is refused with the CPU's message.
        let e = g.add_const(&gx, 1e300).expect_err("too large");
        assert!(e.to_string().contains("does not fit"), "{e}");
    }
}

#[test]
fn runtime_task_graphs_bit_exact_on_the_gpu() {
    // The runtime's e^x workload (8 limbs, 40-bit scale) at N = 2^11: every graph variant.
    let work =
        ExpWorkload::<u64>::new(default_params(11).expect("params"), 2, 7).expect("workload");
    let cpu = work.evaluator();
    let keys = cpu.evaluation_keys().expect("keys");
    for gpu in gpus() {
        let g = GpuContext::new(&gpu, work.context()).expect("gpu context");
        let ge = GpuEvaluator::new(&g, keys).expect("keys");
        for (v, graph) in work.variants().iter().enumerate() {
            for job in 0..2 {
                let input = work.input(job);
                let want = graph
                    .run(cpu, std::slice::from_ref(input.as_ref()))
                    .expect("cpu run");
                let gin = g.upload(input).expect("upload");
                let got = graph.run(&ge, &[gin]).expect("gpu run");
                assert_eq!(got.len(), want.len());
                for (a, b) in got.iter().zip(&want) {
                    same(
                        &g.download(a).expect("download"),
                        b,
                        &format!("graph {v} job {job}"),
                    );
                }
                let err = work
                    .error(job, &g.download(&got[0]).expect("download"))
                    .expect("error");
                assert!(
                    err < heloom_runtime::workload::EXP_TOLERANCE,
                    "e^x error {err}"
                );
            }
        }
    }
}

#[test]
fn rotations_and_plaintext_products_bit_exact() {
    let ctx = small_context(3);
    let steps = [1i64, -2, 7];
    let keys = keygen(&ctx, &steps, false).expect("keys");
    let cpu = Evaluator::new(&ctx, Arc::new(keys.evaluation_keys.clone())).expect("evaluator");
    let enc = Encryptor::new(&ctx);
    let slots = ctx.n() / 2;
    let xs: Vec<f64> = (0..slots).map(|i| (i as f64 / 300.0).cos()).collect();
    let x = enc.encrypt(&xs, &keys.public_key).expect("encrypt");
    let full: Vec<f64> = (0..slots).map(|i| (i as f64 / 90.0).sin()).collect();
    for gpu in gpus() {
        let g = GpuContext::new(&gpu, &ctx).expect("gpu context");
        let ge = GpuEvaluator::new(&g, &keys.evaluation_keys).expect("keys");
        let gx = g.upload(&x).expect("upload");
        let dl = |c: &heloom_gpu::GpuCiphertext<u64>| g.download(c).expect("download");
        for step in steps {
            same(
                &dl(&PolyOps::rotate(&ge, &gx, step).expect("gpu")),
                &PolyOps::rotate(&cpu, &x, step).expect("cpu"),
                &format!("rotate {step}"),
            );
        }
        // rotate_many: the GPU's per-step default against the CPU's hoisted override.
        let gm = PolyOps::rotate_many(&ge, &gx, &steps).expect("gpu");
        let cm = PolyOps::rotate_many(&cpu, &x, &steps).expect("cpu");
        for (a, b) in gm.iter().zip(&cm) {
            same(&dl(a), b, "rotate_many");
        }
        // Full, short (repeated) and padded vectors, on two and three polynomials, at two
        // levels, then rescaled.
        let sq = PolyOps::square(&cpu, &x).expect("cpu");
        let gsq = PolyOps::square(&ge, &gx).expect("gpu");
        let low = PolyOps::drop_to_level(&cpu, &x, 1).expect("cpu");
        let glow = PolyOps::drop_to_level(&ge, &gx, 1).expect("gpu");
        for values in [
            full.clone(),
            vec![0.25, -3.0, 1.5, 2.0],
            vec![0.7, -0.1, 4.0],
        ] {
            for (c, gc, what) in [
                (&x, &gx, "top"),
                (&sq, &gsq, "size 3"),
                (&low, &glow, "low"),
            ] {
                let cm = PolyOps::multiply_plain_slots(&cpu, c, &values).expect("cpu");
                let gm = PolyOps::multiply_plain_slots(&ge, gc, &values).expect("gpu");
                let what = format!("multiply_plain_slots {} values, {what}", values.len());
                same(&dl(&gm), &cm, &what);
                assert_eq!(dl(&gm).slots(), cm.slots(), "{what}");
                same(
                    &dl(&PolyOps::rescale(&ge, &gm).expect("gpu")),
                    &PolyOps::rescale(&cpu, &cm).expect("cpu"),
                    &format!("{what}, rescaled"),
                );
            }
        }
        // Both ops in a task graph run on the device.
        let graph = {
            let b = heloom_runtime::GraphBuilder::new("rot", ctx.params().moduli());
            let v = b.input(x.level(), x.scale()).expect("input");
            let r = b.rotate(&v, -2).expect("rotate");
            let m = b.multiply_plain_slots(&r, &full).expect("mul");
            let out = b.rescale(&m).expect("rescale");
            b.finish(&[out]).expect("graph")
        };
        let gout = graph
            .run(&ge, std::slice::from_ref(&gx))
            .expect("gpu graph");
        let cout = graph
            .run(&cpu, std::slice::from_ref(&x))
            .expect("cpu graph");
        same(&dl(&gout[0]), &cout[0], "graph with rotate and mul-plain");
        // The same errors as the CPU: bad lengths, level 0, missing keys.
        for bad in [vec![], vec![1.0; slots + 1]] {
            let e = PolyOps::multiply_plain_slots(&ge, &gx, &bad).expect_err("bad length");
            assert!(
                matches!(e, heloom_ckks::CkksError::InvalidInput(_)),
                "{e:?}"
            );
        }
        let g0 = g.drop_to_level(&gx, 0).expect("drop");
        assert!(matches!(
            PolyOps::multiply_plain_slots(g.as_ref(), &g0, &[1.0]),
            Err(heloom_ckks::CkksError::OutOfLevels { .. })
        ));
        for e in [
            PolyOps::rotate(&ge, &gx, 3).expect_err("no key for 3"),
            PolyOps::rotate(g.as_ref(), &gx, 1).expect_err("a context has no keys"),
        ] {
            assert!(
                matches!(
                    e,
                    heloom_ckks::CkksError::MissingKey {
                        key: heloom_ckks::MissingKeyKind::Galois { .. },
                        ..
                    }
                ),
                "{e:?}"
            );
        }
        // A whole period needs no key, even on a context.
        same(
            &dl(&PolyOps::rotate(g.as_ref(), &gx, slots as i64).expect("no-op")),
            &x,
            "rotate by the period",
        );
    }
}

/// Hoisted rotations (one mod-up for every step) on the GPU are the CPU's hoisted rotations
/// word for word, the identity step included.
#[test]
fn hoisted_rotations_bit_exact() {
    let ctx = small_context(3);
    let steps = [1i64, 2, 0, 5, -3];
    let keys = keygen(&ctx, &steps, false).expect("keys");
    let cpu = Evaluator::new(&ctx, Arc::new(keys.evaluation_keys.clone())).expect("evaluator");
    let xs: Vec<f64> = (0..ctx.n() / 2).map(|i| (i as f64 / 300.0).cos()).collect();
    let x = Encryptor::new(&ctx)
        .encrypt(&xs, &keys.public_key)
        .expect("encrypt");
    let want = cpu.rotate_many(&x, &steps).expect("cpu");
    for gpu in gpus() {
        let g = GpuContext::new(&gpu, &ctx).expect("gpu context");
        let ge = GpuEvaluator::new(&g, &keys.evaluation_keys).expect("keys");
        let got = ge
            .rotate_many(&g.upload(&x).expect("upload"), &steps)
            .expect("gpu");
        assert_eq!(got.len(), steps.len());
        for ((c, w), s) in got.iter().zip(&want).zip(steps) {
            same(&g.download(c).expect("download"), w, &format!("rotate {s}"));
        }
        let e = ge.rotate_many(&g.upload(&x).expect("upload"), &[7]);
        assert!(e.is_err(), "a step without its key is refused");
    }
}

/// The rescale merged into the relinearization's mod-down is the CPU's merged step word for
/// word, through `PolyOps` with the merged evaluator, and plain otherwise.
#[test]
fn merged_relinearize_rescale_bit_exact() {
    let ctx = small_context(3);
    let keys = keygen(&ctx, &[], false).expect("keys");
    let cpu = Evaluator::new(&ctx, Arc::new(keys.evaluation_keys.clone())).expect("evaluator");
    let xs: Vec<f64> = (0..ctx.n() / 2).map(|i| (i as f64 / 500.0).sin()).collect();
    let x = Encryptor::new(&ctx)
        .encrypt(&xs, &keys.public_key)
        .expect("encrypt");
    let sq = cpu.square(&x).expect("square");
    let merged = cpu.with_merged_rescale(true);
    let want = PolyOps::relinearize_rescale(&merged, &sq).expect("cpu");
    let plain = PolyOps::relinearize_rescale(&cpu, &sq).expect("cpu");
    for gpu in gpus() {
        let g = GpuContext::new(&gpu, &ctx).expect("gpu context");
        let ge = GpuEvaluator::new(&g, &keys.evaluation_keys).expect("keys");
        let gsq = g.upload(&sq).expect("upload");
        let gm = ge.with_merged_rescale(true);
        assert!(gm.merges_rescale() && !ge.merges_rescale());
        let got = PolyOps::relinearize_rescale(&gm, &gsq).expect("gpu merged");
        same(&g.download(&got).expect("download"), &want, "merged");
        let got = PolyOps::relinearize_rescale(&ge, &gsq).expect("gpu");
        same(
            &g.download(&got).expect("download"),
            &plain,
            "relinearize, rescale",
        );
        let low = g.drop_to_level(&gsq, 0).expect("drop");
        assert!(gm.relinearize_rescale(&low).is_err(), "level 0 is refused");
    }
}
