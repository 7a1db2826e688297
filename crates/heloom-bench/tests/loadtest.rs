//! The load test's arithmetic: Jain's index, percentiles, job mixes, tenant rates, the
//! `/metrics` reader and the option checks. The runs against a real server are in
//! heloom-cli's `loadtest_cli` tests (they need the `heloom` binary).

// A failing unwrap is a failing test.
#![allow(clippy::unwrap_used)]

use heloom_bench::loadtest::{
    jain_index, parse_metrics, parse_mix, percentile, tenant_rates, JobKind, LoadtestOptions,
    ServerTarget,
};

#[test]
fn jain_index_bounds() {
    assert!((jain_index(&[1.0, 1.0, 1.0, 1.0]) - 1.0).abs() < 1e-12);
    assert!((jain_index(&[3.0, 0.0, 0.0]) - 1.0 / 3.0).abs() < 1e-12);
    // (1 + 2)^2 / (2 * (1 + 4)) = 0.9
    assert!((jain_index(&[1.0, 2.0]) - 0.9).abs() < 1e-12);
    // Tenants without a value are left out; nothing at all counts as even.
    assert!((jain_index(&[2.0, f64::NAN, 2.0]) - 1.0).abs() < 1e-12);
    assert_eq!(jain_index(&[]), 1.0);
    assert_eq!(jain_index(&[0.0, 0.0]), 1.0);
    for xs in [[0.1, 5.0, 2.0, 0.0], [7.0, 7.0, 0.5, 1e-9]] {
        let j = jain_index(&xs);
        assert!((0.25..=1.0).contains(&j), "{j}");
    }
}

#[test]
fn percentiles_by_nearest_rank() {
    let xs: Vec<f64> = (1..=100).map(f64::from).collect();
    assert_eq!(percentile(&xs, 0.5), 50.0);
    assert_eq!(percentile(&xs, 0.99), 99.0);
    assert_eq!(percentile(&xs, 1.0), 100.0);
    assert_eq!(percentile(&[5.0, 1.0, 3.0], 0.5), 3.0);
    assert_eq!(percentile(&[4.0], 0.99), 4.0);
    assert!(percentile(&[], 0.5).is_nan());
}

#[test]
fn mixes_parse_and_normalize() {
    let m = parse_mix("exp=0.7,polynomial=0.3").unwrap();
    assert_eq!(m.len(), 2);
    assert_eq!(m[0].0, JobKind::Exp);
    assert!((m[0].1 - 0.7).abs() < 1e-12 && (m[1].1 - 0.3).abs() < 1e-12);
    let m = parse_mix("exp=3, poly=1").unwrap();
    assert!((m[0].1 - 0.75).abs() < 1e-12);
    assert_eq!(m[1].0, JobKind::Polynomial);
    for bad in [
        "",
        "exp",
        "exp=x",
        "exp=-1",
        "exp=0",
        "graph=1",
        "exp=1,exp=2",
    ] {
        assert!(parse_mix(bad).is_err(), "{bad:?} was accepted");
    }
    // e^x is checked against its Maclaurin polynomial: 1, 1, 1/2, 1/6, ...
    let c = JobKind::Exp.coefficients();
    assert_eq!(c.len(), 7);
    assert!((c[3] - 1.0 / 6.0).abs() < 1e-15);
}

#[test]
fn rates_split_with_a_heavy_tenant() {
    let r = tenant_rates(11.0, 2, 10.0);
    assert!((r[0] - 10.0).abs() < 1e-12 && (r[1] - 1.0).abs() < 1e-12);
    let r = tenant_rates(8.0, 4, 1.0);
    assert!(r.iter().all(|&x| (x - 2.0).abs() < 1e-12));
    assert_eq!(tenant_rates(3.0, 1, 10.0), vec![3.0]);
    assert!(tenant_rates(1.0, 0, 1.0).is_empty());
}

#[test]
fn metrics_text_is_read() {
    let text = "# HELP heloom_queue_depth Jobs accepted and not started.\n\
                # TYPE heloom_queue_depth gauge\n\
                heloom_queue_depth{tenant=\"tenant-0\"} 3\n\
                heloom_queue_depth{tenant=\"tenant-1\"} 0\n\
                heloom_jobs_running{tenant=\"tenant-0\"} 2\n\
                heloom_device_threads 2\n\
                heloom_device_busy_threads 1\n\
                heloom_device_utilisation 0.5\n";
    let s = parse_metrics(text);
    assert_eq!(s.queue_depth.get("tenant-0"), Some(&3.0));
    assert_eq!(s.queue_depth.get("tenant-1"), Some(&0.0));
    assert_eq!(s.queue_depth.len(), 2);
    assert_eq!(s.threads, 2.0);
    assert_eq!(s.busy_threads, 1.0);
    assert_eq!((s.gpu_jobs, s.gpu_busy), (None, None));
    // A server with a GPU.
    let gpu = "heloom_device_threads 2\n\
               # TYPE heloom_gpu_jobs_total counter\n\
               heloom_gpu_jobs_total{device=\"gpu\"} 41\n\
               heloom_gpu_failures_total{device=\"gpu\"} 1\n\
               heloom_gpu_busy_seconds_total{device=\"gpu\"} 3.5\n\
               heloom_gpu_busy{device=\"gpu\"} 1\n";
    let s = parse_metrics(gpu);
    assert_eq!((s.gpu_jobs, s.gpu_busy), (Some(41.0), Some(1.0)));
}

#[test]
fn options_are_checked() {
    let spawn = ServerTarget::Spawn {
        exe: "heloom".into(),
        threads: None,
    };
    let ok = LoadtestOptions::new(spawn.clone());
    ok.check().unwrap();
    assert!(ok.insecure(), "N = 2^13 is below 128-bit security");
    let running = ServerTarget::Running {
        url: "http://127.0.0.1:8787".into(),
        data: "data".into(),
    };
    let cases = [
        LoadtestOptions {
            kill_every_s: Some(1.0),
            ..LoadtestOptions::new(running.clone())
        },
        LoadtestOptions {
            server_profile: Some("measure".into()),
            ..LoadtestOptions::new(running)
        },
        LoadtestOptions {
            kills: Some(3),
            ..LoadtestOptions::new(spawn.clone())
        },
        LoadtestOptions {
            tenants: 0,
            ..LoadtestOptions::new(spawn.clone())
        },
        LoadtestOptions {
            rate: 0.0,
            ..LoadtestOptions::new(spawn.clone())
        },
        LoadtestOptions {
            log_n: 20,
            ..LoadtestOptions::new(spawn.clone())
        },
        LoadtestOptions {
            heavy: f64::NAN,
            ..LoadtestOptions::new(spawn.clone())
        },
        LoadtestOptions {
            warmup_s: 20.0,
            ..LoadtestOptions::new(spawn)
        },
    ];
    for o in cases {
        assert!(o.check().is_err(), "{o:?} passed the checks");
    }
}
