//! The `kernel` device (Linux AF_ALG) against the reference engine and a NIST known answer.
//!
//! Where the kernel has no AF_ALG (or a sandbox forbids it), `KernelDevice::new` must refuse with a
//! clear `Unavailable` error naming AF_ALG; each test checks that and skips the rest. (The
//! corrupted-GCM test is a unit test in `src/aes/kernel.rs`: the public workload constructors
//! refuse items the reference cannot process.)
#![cfg(target_os = "linux")]

use heloom_devices::aes::kernel::KernelDevice;
use heloom_devices::aes::{AesWorkload, Cipher, Direction};
use heloom_devices::{Device, DeviceError, DeviceKind, Result, Workload};

/// The device, or `None` after checking that its unavailability is explained.
fn device(workers: usize) -> Option<KernelDevice> {
    match KernelDevice::new(workers) {
        Ok(d) => Some(d),
        Err(e @ DeviceError::Unavailable { .. }) => {
            let text = e.to_string();
            assert!(
                text.contains("AF_ALG"),
                "the unavailability message should name AF_ALG: {text}"
            );
            assert!(
                text.contains("--devices cpu,soft"),
                "the message should say what to use instead: {text}"
            );
            eprintln!("skipping: {e}");
            None
        }
        Err(e) => panic!("KernelDevice::new failed with something other than Unavailable: {e}"),
    }
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap_or_default())
        .collect()
}

/// Runs every item of `work` on the device's workers in turn and compares each output with the
/// reference.
fn check_all(device: &KernelDevice, work: &AesWorkload, what: &str) -> Result<()> {
    let mut workers = device.open(work)?;
    assert_eq!(workers.len(), device.info().workers);
    let n = workers.len();
    for i in 0..work.len() {
        let out = workers[i % n].run(i)?;
        assert!(
            out == work.expected(i),
            "{what}: item {i} differs from the reference ({} bytes vs {})",
            out.len(),
            work.expected(i).len()
        );
    }
    Ok(())
}

/// [`check_all`] on the workload `make` builds for every cipher in both directions; `what` ends
/// each failure's label.
fn check_every_cipher(
    device: &KernelDevice,
    what: &str,
    make: impl Fn(Cipher, Direction) -> Result<AesWorkload>,
) -> Result<()> {
    for cipher in Cipher::ALL {
        for direction in [Direction::Encrypt, Direction::Decrypt] {
            let label = format!("{} {} {what}", cipher.name(), direction.name());
            check_all(device, &make(cipher, direction)?, &label)?;
        }
    }
    Ok(())
}

#[test]
fn zero_workers_is_refused() {
    assert!(matches!(
        KernelDevice::new(0),
        Err(DeviceError::InvalidParameter(_))
    ));
}

#[test]
fn info_describes_the_kernel_driver() {
    let Some(dev) = device(3) else { return };
    let info = dev.info();
    assert_eq!(info.name, "kernel:3");
    assert_eq!(info.kind, DeviceKind::Kernel);
    assert_eq!(info.workers, 3);
    assert!(info.uses_cpu);
    assert!(
        info.engine.starts_with("kernel AF_ALG: cbc(aes)"),
        "{}",
        info.engine
    );
    assert!(info.engine.contains("gcm(aes)"), "{}", info.engine);
    eprintln!("engine: {}", info.engine);
    let dev = dev.with_name("kernel-b");
    assert_eq!(dev.info().name, "kernel-b");
}

/// NIST SP 800-38A F.2.1 (CBC-AES128.Encrypt): the first 64 bytes of the padded encryption are the
/// published ciphertext; the last block is the encrypted padding. Decryption takes the whole output
/// back.
#[test]
fn nist_sp800_38a_cbc_aes128() -> Result<()> {
    let Some(dev) = device(1) else { return Ok(()) };
    let key = hex("2b7e151628aed2a6abf7158809cf4f3c");
    let mut iv = [0u8; 16];
    iv.copy_from_slice(&hex("000102030405060708090a0b0c0d0e0f"));
    let plain = hex(
        "6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51\
         30c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710",
    );
    let want = hex(
        "7649abac8119b246cee98e9b12e9197d5086cb9b507219ee95db113a917678b2\
         73bed6b8e3c1743b7116e69e222295163ff1caa1681fac09120eca307586e1a7",
    );
    let enc = AesWorkload::from_items(
        Cipher::Aes128Cbc,
        Direction::Encrypt,
        &key,
        vec![iv],
        &[&plain],
    )?;
    let mut workers = dev.open(&enc)?;
    let out = workers[0].run(0)?;
    assert_eq!(out.len(), 80);
    assert_eq!(&out[..64], &want[..]);
    assert_eq!(out, enc.expected(0));

    let dec = AesWorkload::from_items(
        Cipher::Aes128Cbc,
        Direction::Decrypt,
        &key,
        vec![iv],
        &[&out],
    )?;
    let mut workers = dev.open(&dec)?;
    assert_eq!(workers[0].run(0)?, plain);
    Ok(())
}

/// Every cipher, both directions, sizes from empty to 16 KiB, on two workers: byte-for-byte the
/// reference.
#[test]
fn every_cipher_direction_and_size_matches_the_reference() -> Result<()> {
    let Some(dev) = device(2) else { return Ok(()) };
    for size in [0, 8, 16, 1000, 16384] {
        check_every_cipher(&dev, &format!("{size} B"), |cipher, direction| {
            AesWorkload::uniform(cipher, direction, size, 4, 42 + size as u64)
        })?;
    }
    Ok(())
}

/// A shuffled queue of mixed sizes on one worker: one operation socket serves requests of any
/// length in turn.
#[test]
fn mixed_sizes_on_one_socket() -> Result<()> {
    let Some(dev) = device(1) else { return Ok(()) };
    check_every_cipher(&dev, "mixed", |cipher, direction| {
        AesWorkload::mixed(cipher, direction, &[0, 1, 15, 17, 4096, 65536, 70000], 2, 9)
    })
}

/// Items beyond one socket request: CBC is split into chained requests and must match; GCM must
/// match or refuse with a clear error (the kernel takes an AEAD message whole, bounded by the
/// socket buffers).
#[test]
fn large_items_work_or_fail_clearly() -> Result<()> {
    let Some(dev) = device(1) else { return Ok(()) };
    for direction in [Direction::Encrypt, Direction::Decrypt] {
        let work = AesWorkload::uniform(Cipher::Aes256Cbc, direction, (1 << 20) + 5, 2, 3)?;
        check_all(
            &dev,
            &work,
            &format!("aes-256-cbc {} 1 MiB", direction.name()),
        )?;

        let work = AesWorkload::uniform(Cipher::Aes256Gcm, direction, 1 << 20, 2, 3)?;
        let mut workers = dev.open(&work)?;
        for i in 0..work.len() {
            match workers[0].run(i) {
                Ok(out) => assert!(
                    out == work.expected(i),
                    "aes-256-gcm {} 1 MiB item {i} differs",
                    direction.name()
                ),
                Err(DeviceError::Crypto { what, .. }) => {
                    assert!(
                        what.contains("net.core"),
                        "unclear refusal of a large GCM item: {what}"
                    );
                    eprintln!("large GCM item refused: {what}");
                }
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}
