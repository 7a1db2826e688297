//! Balancers: every item exactly once and in order, for every method, on real AES devices and on test devices
//! with known per-item costs; errors stop a run cleanly; heloom's cost curves learn who is slow.

use std::time::{Duration, Instant};

use heloom_devices::aes::{AesWorkload, Cipher, Direction};
use heloom_devices::balance::{Balancer, Method};
use heloom_devices::device::{Device, DeviceInfo, DeviceKind, Worker, Workload};
use heloom_devices::{open_aes_devices, DeviceError, DeviceSpec};

/// Items 0..n; the output of item i is i*i + 1; weight i % 7 + 1.
struct Numbers(usize);

impl Workload for Numbers {
    type Output = u64;
    fn len(&self) -> usize {
        self.0
    }
    fn weight(&self, i: usize) -> u64 {
        (i % 7 + 1) as u64
    }
}

/// A test engine that spends `ns` per item (busy, like real compute) and can fail at one item.
struct SpinDevice {
    info: DeviceInfo,
    ns: u64,
    fail_at: Option<usize>,
    /// The very first item this device ever runs stalls this long (a cold start or a preemption).
    stall_once: std::sync::atomic::AtomicU64,
}

impl SpinDevice {
    fn new(name: &str, ns: u64, workers: usize, fail_at: Option<usize>) -> Self {
        let info = DeviceInfo {
            name: name.into(),
            kind: DeviceKind::Cpu,
            workers,
            engine: "spin".into(),
            uses_cpu: true,
        };
        SpinDevice {
            info,
            ns,
            fail_at,
            stall_once: std::sync::atomic::AtomicU64::new(0),
        }
    }
}

struct SpinWorker<'w> {
    ns: u64,
    fail_at: Option<usize>,
    stall: &'w std::sync::atomic::AtomicU64,
}

impl Worker<u64> for SpinWorker<'_> {
    fn run(&mut self, item: usize) -> heloom_devices::Result<u64> {
        let stall = self.stall.swap(0, std::sync::atomic::Ordering::Relaxed);
        if stall > 0 {
            std::thread::sleep(Duration::from_nanos(stall));
        }
        if Some(item) == self.fail_at {
            return Err(DeviceError::Crypto {
                device: "spin".into(),
                item,
                what: "injected failure".into(),
            });
        }
        let t = Instant::now();
        while t.elapsed() < Duration::from_nanos(self.ns) {
            std::hint::spin_loop();
        }
        Ok((item as u64) * (item as u64) + 1)
    }
}

impl Device<Numbers> for SpinDevice {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }
    fn open<'w>(
        &'w self,
        _work: &'w Numbers,
    ) -> heloom_devices::Result<Vec<Box<dyn Worker<u64> + 'w>>> {
        Ok((0..self.info.workers)
            .map(|_| {
                Box::new(SpinWorker {
                    ns: self.ns,
                    fail_at: self.fail_at,
                    stall: &self.stall_once,
                }) as Box<dyn Worker<u64> + 'w>
            })
            .collect())
    }
}

fn all_methods(devices: usize) -> Vec<Method> {
    let mut m: Vec<Method> = (0..devices).map(Method::Single).collect();
    m.extend(Method::COMBINED);
    m
}

#[test]
fn every_method_delivers_each_aes_item_once_in_order() {
    let devices =
        open_aes_devices(&DeviceSpec::parse_list("cpu:1,soft:1").expect("spec")).expect("open");
    let refs: Vec<&dyn Device<AesWorkload>> = devices.iter().map(|d| d.as_ref()).collect();
    for (cipher, direction) in [
        (Cipher::Aes128Cbc, Direction::Encrypt),
        (Cipher::Aes256Gcm, Direction::Decrypt),
    ] {
        let work =
            AesWorkload::mixed(cipher, direction, &[8, 64, 1024, 4096], 60, 3).expect("workload");
        for method in all_methods(2) {
            let mut b = Balancer::new(method);
            for _ in 0..2 {
                let out = b.run(&refs, &work).expect("run");
                work.verify(&out.outputs, &|i| {
                    format!("device {}", out.report.producer[i])
                })
                .expect("outputs");
                assert_eq!(
                    out.report.items_per_device.iter().sum::<usize>(),
                    work.len(),
                    "{method:?}"
                );
                let w: u64 = (0..work.len()).map(|i| work.weight(i)).sum();
                assert_eq!(out.report.weight_per_device.iter().sum::<u64>(), w);
                assert!(out.report.ms > 0.0);
                if let Method::Single(d) = method {
                    assert_eq!(out.report.items_per_device[d], work.len());
                }
                if method == Method::RoundRobin {
                    assert_eq!(out.report.items_per_device, vec![120, 120]);
                }
            }
        }
    }
}

#[test]
fn every_method_on_skewed_test_devices() {
    let fast = SpinDevice::new("fast", 2_000, 1, None);
    let slow = SpinDevice::new("slow", 40_000, 1, None);
    let devices: Vec<&dyn Device<Numbers>> = vec![&fast, &slow];
    let work = Numbers(1500);
    for method in all_methods(2) {
        let mut b = Balancer::new(method);
        let out = b.run(&devices, &work).expect("run");
        assert_eq!(out.outputs.len(), 1500);
        for (i, &o) in out.outputs.iter().enumerate() {
            assert_eq!(o, (i as u64) * (i as u64) + 1, "{method:?} item {i}");
        }
        let items = &out.report.items_per_device;
        assert_eq!(items.iter().sum::<usize>(), 1500);
        if matches!(method, Method::Pull | Method::Heloom) {
            // The fast device (20x faster) must take far more than half.
            assert!(items[0] > 1000, "{method:?}: {items:?}");
        }
        if method == Method::Heloom {
            let book = b.book();
            let f = book.curve("fast").predict(4).expect("fast learned");
            let s = book.curve("slow").predict(4).expect("slow learned");
            assert!(s > 5.0 * f, "slow {s} ns vs fast {f} ns");
        }
    }
}

#[test]
fn several_workers_per_device_and_empty_workloads() {
    let a = SpinDevice::new("a", 1_000, 2, None);
    let b = SpinDevice::new("b", 3_000, 3, None);
    let devices: Vec<&dyn Device<Numbers>> = vec![&a, &b];
    for method in all_methods(2) {
        let out = Balancer::new(method)
            .pin(false)
            .run(&devices, &Numbers(777))
            .expect("run");
        assert!(out
            .outputs
            .iter()
            .enumerate()
            .all(|(i, &o)| o == (i as u64) * (i as u64) + 1));
        let out = Balancer::new(method)
            .run(&devices, &Numbers(0))
            .expect("empty run");
        assert!(out.outputs.is_empty());
    }
}

#[test]
fn a_failing_device_stops_the_run_with_its_error() {
    let ok = SpinDevice::new("ok", 1_000, 1, None);
    let bad = SpinDevice::new("bad", 1_000, 1, Some(37));
    let devices: Vec<&dyn Device<Numbers>> = vec![&ok, &bad];
    // Item 37 may land on either device; only runs where it reaches `bad` fail, and then with its error.
    for method in [Method::Single(1), Method::RoundRobin] {
        match Balancer::new(method).run(&devices, &Numbers(200)) {
            Err(DeviceError::Crypto { item, .. }) => assert_eq!(item, 37),
            other => panic!(
                "{method:?}: expected the injected failure, got {:?}",
                other.map(|o| o.report)
            ),
        }
    }
    for method in [Method::Pull, Method::Polling, Method::Heloom] {
        match Balancer::new(method).run(&devices, &Numbers(200)) {
            Err(DeviceError::Crypto { item, .. }) => assert_eq!(item, 37),
            Err(e) => panic!("{method:?}: unexpected error {e}"),
            Ok(out) => assert_eq!(
                out.report.producer[37], 0,
                "{method:?}: item 37 succeeded on `bad`"
            ),
        }
    }
    assert!(matches!(
        Balancer::new(Method::Single(5)).run(&devices, &Numbers(3)),
        Err(DeviceError::InvalidParameter(_))
    ));
    let none: Vec<&dyn Device<Numbers>> = vec![];
    assert!(Balancer::new(Method::Pull).run(&none, &Numbers(3)).is_err());
}

#[test]
fn method_names_parse() {
    for (s, m) in [
        ("pull", Method::Pull),
        ("heloom", Method::Heloom),
        ("rr", Method::RoundRobin),
        ("polling", Method::Polling),
    ] {
        assert_eq!(Method::parse(s).expect("parse"), m);
    }
    assert!(Method::parse("random").is_err());
    assert_eq!(Method::Single(1).name(&["x".into(), "y".into()]), "y");
}

#[test]
fn one_stall_does_not_shut_a_fast_device_out() {
    // The fast device's first item ever stalls 30 ms; heloom's first estimate of it is then awful. Within a
    // few runs it must learn better and give the fast device most of the work again.
    let fast = SpinDevice::new("fast", 2_000, 1, None);
    fast.stall_once
        .store(30_000_000, std::sync::atomic::Ordering::Relaxed);
    let slow = SpinDevice::new("slow", 40_000, 1, None);
    let devices: Vec<&dyn Device<Numbers>> = vec![&fast, &slow];
    let mut b = Balancer::new(Method::Heloom);
    let mut last = Vec::new();
    for _ in 0..6 {
        let out = b.run(&devices, &Numbers(400)).expect("run");
        assert!(out
            .outputs
            .iter()
            .enumerate()
            .all(|(i, &o)| o == (i as u64) * (i as u64) + 1));
        last = out.report.items_per_device;
    }
    // The ideal share is 381 of 400 (2 us against 40 us per item); a shut-out device gets a
    // handful. Half the items leaves room for preemption on a loaded machine.
    assert!(last[0] > 200, "fast device still shut out: {last:?}");
}
