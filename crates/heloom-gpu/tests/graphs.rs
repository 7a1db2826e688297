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

#[test]
fn constants_alignment_and_squares_bit_exact() {
    let p = CkksParameters::builder(1 << 11)
        .levels(4)
        .scale_bits(40)
        .first_bits(45)
        .security(SecurityLevel::None)
        .build()
        .expect("params");
    let ctx = Context::<u64>::new(p).expect("context");
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
