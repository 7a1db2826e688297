//! HE jobs on the device layer: the cpu-pool device runs whole task graphs, and every result is checked by
//! decryption.

use heloom_devices::he::{gpu_unavailable, parse_variant, CpuPoolDevice, HeJobs};
use heloom_devices::{Device, DeviceError, DeviceKind, Workload};
use heloom_runtime::workload::EXP_TOLERANCE;
use heloom_runtime::ExpVariant;

/// Small ring (N = 2^12) so the suite stays fast; the graphs and levels are the real ones.
const LOG_N: u32 = 12;

fn run_all(dev: &CpuPoolDevice, jobs: &HeJobs) -> Vec<heloom_devices::he::HeCiphertext> {
    let mut workers = dev.open(jobs).expect("open");
    assert_eq!(workers.len(), 1, "one job at a time per cpu-pool device");
    (0..jobs.len())
        .map(|i| workers[0].run(i).expect("job runs"))
        .collect()
}

#[test]
fn cpu_pool_results_decrypt_within_tolerance() {
    // Every variant, and a budget of several pool threads (results are bit-identical whatever the budget).
    let jobs = HeJobs::mixed(LOG_N, 4, 1).expect("workload");
    for threads in [1, 3] {
        let dev = CpuPoolDevice::new(threads).expect("device");
        assert_eq!(dev.info().kind, DeviceKind::CpuPool);
        assert_eq!(dev.info().workers, 1);
        assert_eq!(dev.threads(), threads);
        let outs = run_all(&dev, &jobs);
        for (i, out) in outs.iter().enumerate() {
            let err = jobs.error(i, out).expect("decrypts");
            assert!(
                err <= EXP_TOLERANCE,
                "job {i} on {threads} threads: error {err:e}"
            );
            assert_eq!(out.level(), 0, "results leave the device at level 0");
        }
        let worst = jobs.verify(&outs).expect("verify");
        assert!((0.0..=EXP_TOLERANCE).contains(&worst));
    }
}

#[test]
fn weights_are_positive_and_follow_the_graph() {
    let jobs = HeJobs::mixed(LOG_N, 6, 2).expect("workload");
    assert_eq!(jobs.len(), 6);
    for i in 0..jobs.len() {
        assert!(jobs.weight(i) >= 1, "job {i}");
        // Same variant, same weight.
        assert_eq!(jobs.variant(i), jobs.variant(i % 3));
        assert_eq!(jobs.weight(i), jobs.weight(i % 3));
    }
    // Horner (3 products) is the least work of the three, seed 000's Fig. 3 (5 products) the most.
    let w = |v| {
        let i = (0..3)
            .find(|&i| jobs.variant(i) == Some(v))
            .expect("variant present");
        jobs.weight(i)
    };
    assert!(w(ExpVariant::Horner) < w(ExpVariant::Paper));
    assert!(w(ExpVariant::Bsgs) < w(ExpVariant::Paper));
    // Out of range: no job, no graph, weight stays positive.
    assert!(jobs.variant(6).is_none() && jobs.graph(6).is_none() && jobs.input(6).is_none());
    assert!(jobs.weight(6) >= 1);
}

#[test]
fn verify_rejects_wrong_outputs() {
    let jobs = HeJobs::new(LOG_N, 3, ExpVariant::Horner, 3).expect("workload");
    let dev = CpuPoolDevice::new(2).expect("device").with_name("pool-a");
    assert_eq!(dev.info().name, "pool-a");
    let outs = run_all(&dev, &jobs);
    jobs.verify(&outs).expect("correct outputs pass");

    // Job 0's result handed in as job 1's: the inputs differ, so it decrypts far from job 1's e^x.
    let mut swapped = outs.clone();
    swapped[1] = outs[0].clone();
    let msg = jobs
        .verify(&swapped)
        .expect_err("swapped output refused")
        .to_string();
    assert!(msg.contains("job 1"), "{msg}");
    assert!(msg.contains("tolerance"), "{msg}");

    // A tampered scale decrypts to twice the value.
    let mut tampered = outs.clone();
    let s = tampered[2].scale();
    tampered[2].set_scale(s * 0.5);
    let msg = jobs
        .verify(&tampered)
        .expect_err("tampered output refused")
        .to_string();
    assert!(msg.contains("job 2"), "{msg}");

    // Wrong count.
    assert!(matches!(
        jobs.verify(&outs[..2]),
        Err(DeviceError::InvalidParameter(_))
    ));
}

#[test]
fn worker_refuses_a_job_past_the_end() {
    let jobs = HeJobs::new(LOG_N, 1, ExpVariant::Bsgs, 4).expect("workload");
    let dev = CpuPoolDevice::new(1).expect("device");
    let mut workers = dev.open(&jobs).expect("open");
    assert!(matches!(
        workers[0].run(1),
        Err(DeviceError::InvalidParameter(_))
    ));
}

#[test]
fn bad_parameters_are_refused() {
    assert!(matches!(
        CpuPoolDevice::new(0),
        Err(DeviceError::InvalidParameter(_))
    ));
    assert!(matches!(
        HeJobs::new(LOG_N, 0, ExpVariant::Paper, 0),
        Err(DeviceError::InvalidParameter(_))
    ));
    assert!(matches!(
        HeJobs::new(40, 1, ExpVariant::Paper, 0),
        Err(DeviceError::InvalidParameter(_))
    ));
    assert_eq!(
        parse_variant("paper").expect("paper"),
        Some(ExpVariant::Paper)
    );
    assert_eq!(parse_variant("BSGS").expect("bsgs"), Some(ExpVariant::Bsgs));
    assert_eq!(
        parse_variant("horner").expect("horner"),
        Some(ExpVariant::Horner)
    );
    assert_eq!(parse_variant("mixed").expect("mixed"), None);
    assert!(parse_variant("taylor").is_err());
}

#[test]
fn gpu_explains_why_it_cannot_run_he_jobs() {
    if heloom_gpu::Gpu::cuda(0).is_ok() {
        eprintln!("a GPU is present: nothing to explain");
        return;
    }
    match gpu_unavailable() {
        DeviceError::Unavailable {
            device,
            reason,
            hint,
        } => {
            assert_eq!(device, "gpu");
            assert!(
                reason.contains("GPU") || reason.contains("NVRTC"),
                "{reason}"
            );
            assert!(hint.contains("cpu-pool"), "{hint}");
        }
        other => panic!("expected Unavailable, got {other}"),
    }
}

/// The GPU device (on the kernel emulator here, a real GPU where one is present) pulls jobs
/// from the same queue as a cpu-pool device; every result equals the CPU's word for word.
#[test]
fn gpu_device_shares_the_queue_with_the_cpu_pool() {
    use heloom_devices::balance::{Balancer, Method};
    use heloom_devices::he_gpu::GpuHeDevice;
    let jobs = HeJobs::mixed(11, 4, 5).expect("workload");
    let cpu = CpuPoolDevice::new(1).expect("cpu");
    let want = run_all(&cpu, &jobs);
    let gpu = match GpuHeDevice::cuda(0) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("no GPU ({e}); the device runs on the kernel emulator");
            GpuHeDevice::emulator()
        }
    };
    assert_eq!(gpu.info().kind, DeviceKind::Gpu);
    let devices: [&dyn Device<HeJobs>; 2] = [&cpu, &gpu];
    for method in [Method::Single(1), Method::RoundRobin, Method::Pull] {
        let out = Balancer::new(method).run(&devices, &jobs).expect("run");
        assert_eq!(out.outputs.len(), 4);
        for (i, (got, exp)) in out.outputs.iter().zip(&want).enumerate() {
            for (a, b) in got.polys().iter().zip(exp.polys()) {
                assert!(
                    a.as_slice() == b.as_slice(),
                    "{method:?}: job {i} differs from the CPU's"
                );
            }
        }
        assert!(jobs.verify(&out.outputs).expect("verify") <= EXP_TOLERANCE);
        if matches!(method, Method::Single(1) | Method::RoundRobin) {
            assert!(
                out.report.items_per_device[1] > 0,
                "{method:?}: the GPU ran nothing"
            );
        }
    }
}

#[test]
fn he_jobs_through_every_balancer() {
    use heloom_devices::he::{compare_he, open_he_devices, HeCompareConfig};
    use heloom_devices::DeviceSpec;
    let devices =
        open_he_devices(&DeviceSpec::parse_list("cpu-pool:1,cpu:1").expect("spec")).expect("open");
    assert_eq!(devices[0].info().name, "cpu-pool:1");
    assert_eq!(devices[1].info().name, "cpu-pool:1#2");
    let refs: Vec<&dyn Device<HeJobs>> = devices.iter().map(|d| d.as_ref()).collect();
    let cfg = HeCompareConfig {
        log_n: 11,
        jobs: 6,
        reps: 1,
        ..Default::default()
    };
    let rows = compare_he(&refs, &cfg, &mut |_, _, _| {}).expect("compare");
    assert_eq!(rows.len(), 6, "two singles and four balancers");
    for r in &rows {
        assert!(
            r.max_error <= heloom_runtime::workload::EXP_TOLERANCE,
            "{}: {}",
            r.method,
            r.max_error
        );
        let total: f64 = r.items_per_device.values().sum();
        assert!((total - 6.0).abs() < 1e-9, "{}: {total}", r.method);
        assert!(r.ms > 0.0 && r.efficiency > 0.0);
    }
    // AES-only engines give clear errors for HE jobs; so does `gpu` on a machine without one.
    assert!(open_he_devices(&DeviceSpec::parse_list("soft").expect("spec")).is_err());
    if heloom_gpu::Gpu::cuda(0).is_err() {
        assert!(matches!(
            open_he_devices(&DeviceSpec::parse_list("gpu").expect("spec")),
            Err(heloom_devices::DeviceError::Unavailable { .. })
        ));
    }
}
