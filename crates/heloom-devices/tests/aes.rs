//! AES engines against known-answer vectors (NIST SP 800-38A F.2, McGrew-Viega GCM test cases), the `soft`
//! engine against the `cpu` engine on random items, and the error paths of both.

use heloom_devices::aes::cpu::CpuEngine;
use heloom_devices::aes::soft::SoftEngine;
use heloom_devices::aes::{random_ivs, AesWorkload, Cipher, Direction};
use heloom_devices::{open_aes_devices, DeviceError, DeviceSpec, Workload};

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

fn iv16(v: &[u8]) -> [u8; 16] {
    let mut iv = [0u8; 16];
    iv[..v.len()].copy_from_slice(v);
    iv
}

const SP800_38A_PLAIN: &str = "6bc1bee22e409f96e93d7e117393172a ae2d8a571e03ac9c9eb76fac45af8e51
    30c81c46a35ce411e5fbc1191a0a52ef f69f2445df4f9b17ad2b417be66c3710";

/// SP 800-38A F.2.1, F.2.3, F.2.5: CBC-AES128/192/256.Encrypt.
fn cbc_vectors() -> Vec<(Cipher, &'static str, &'static str)> {
    vec![
        (
            Cipher::Aes128Cbc,
            "2b7e151628aed2a6abf7158809cf4f3c",
            "7649abac8119b246cee98e9b12e9197d 5086cb9b507219ee95db113a917678b2
             73bed6b8e3c1743b7116e69e22229516 3ff1caa1681fac09120eca307586e1a7",
        ),
        (
            Cipher::Aes192Cbc,
            "8e73b0f7da0e6452c810f32b809079e562f8ead2522c6b7b",
            "4f021db243bc633d7178183a9fa071e8 b4d9ada9ad7dedf4e5e738763f69145a
             571b242012fb7ae07fa9baac3df102e0 08b0e27988598881d920a9e64f5615cd",
        ),
        (
            Cipher::Aes256Cbc,
            "603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4",
            "f58c4c04d6e5f1ba779eabfb5f7bfbd6 9cfc4e967edb808d679f777bc6702c7d
             39f23369a9d9bacfa530e26304231461 b2eb05e2c39be9fcda6c19078c6a9d1b",
        ),
    ]
}

/// McGrew-Viega GCM test cases 13, 14 and 15 (AES-256, no AAD).
fn gcm_vectors() -> Vec<(
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
)> {
    let k0 = "0000000000000000000000000000000000000000000000000000000000000000";
    vec![
        (
            k0,
            "000000000000000000000000",
            "",
            "",
            "530f8afbc74536b9a963b4f1c4cb738b",
        ),
        (
            k0,
            "000000000000000000000000",
            "00000000000000000000000000000000",
            "cea7403d4d606b6e074ec5d3baf39d18",
            "d0d1c8a799996bf0265b98b5d48ab919",
        ),
        (
            "feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308",
            "cafebabefacedbaddecaf888",
            "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72
             1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b391aafd255",
            "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa
             8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662898015ad",
            "b094dac5d93471bdec1a502270e3cc6c",
        ),
    ]
}

#[test]
fn cbc_known_answers_on_both_engines() {
    let iv = iv16(&hex("000102030405060708090a0b0c0d0e0f"));
    let plain = hex(SP800_38A_PLAIN);
    for (cipher, key, ct) in cbc_vectors() {
        let (key, ct) = (hex(key), hex(ct));
        let cpu = CpuEngine::new(cipher, &key)
            .expect("cpu key")
            .encrypt(&iv, &plain)
            .expect("cpu");
        let soft = SoftEngine::new(cipher, &key)
            .expect("soft key")
            .encrypt(&iv, &plain)
            .expect("soft");
        // 64 bytes of vector, then one block of PKCS#7 padding (16 x 0x10).
        assert_eq!(cpu.len(), 80, "{cipher:?}");
        assert_eq!(&cpu[..64], ct.as_slice(), "cpu {cipher:?}");
        assert_eq!(cpu, soft, "soft {cipher:?}");
        for dec in [
            CpuEngine::new(cipher, &key)
                .expect("k")
                .decrypt(&iv, &cpu)
                .expect("cpu dec"),
            SoftEngine::new(cipher, &key)
                .expect("k")
                .decrypt(&iv, &cpu)
                .expect("soft dec"),
        ] {
            assert_eq!(dec, plain, "{cipher:?}");
        }
    }
}

#[test]
fn gcm_known_answers_on_both_engines() {
    for (key, iv, pt, ct, tag) in gcm_vectors() {
        let (key, iv, pt) = (hex(key), iv16(&hex(iv)), hex(pt));
        let mut want = hex(ct);
        want.extend(hex(tag));
        let cpu = CpuEngine::new(Cipher::Aes256Gcm, &key)
            .expect("k")
            .encrypt(&iv, &pt)
            .expect("cpu");
        let soft = SoftEngine::new(Cipher::Aes256Gcm, &key)
            .expect("k")
            .encrypt(&iv, &pt)
            .expect("soft");
        assert_eq!(cpu, want);
        assert_eq!(soft, want);
        assert_eq!(
            SoftEngine::new(Cipher::Aes256Gcm, &key)
                .expect("k")
                .decrypt(&iv, &want)
                .expect("dec"),
            pt
        );
        assert_eq!(
            CpuEngine::new(Cipher::Aes256Gcm, &key)
                .expect("k")
                .decrypt(&iv, &want)
                .expect("dec"),
            pt
        );
    }
}

#[test]
fn soft_matches_cpu_on_random_items_every_cipher_and_direction() {
    for cipher in Cipher::ALL {
        for direction in [Direction::Encrypt, Direction::Decrypt] {
            let sizes = [0usize, 1, 8, 15, 16, 17, 64, 255, 1000, 4096, 16384];
            let work = AesWorkload::generate(cipher, direction, &sizes, 7).expect("workload");
            let devices = open_aes_devices(&DeviceSpec::parse_list("cpu:1,soft:1").expect("spec"))
                .expect("open");
            for dev in &devices {
                let mut workers = dev.open(&work).expect("open workers");
                let outs: Vec<Vec<u8>> = (0..work.len())
                    .map(|i| workers[0].run(i).expect("run"))
                    .collect();
                work.verify(&outs, &|_| dev.info().name.clone())
                    .expect("matches reference");
            }
            // Encryption outputs have the promised lengths.
            if direction == Direction::Encrypt {
                for (i, &s) in sizes.iter().enumerate() {
                    assert_eq!(work.expected(i).len(), cipher.ciphertext_len(s));
                }
            }
        }
    }
}

#[test]
fn tampering_and_wrong_keys_are_detected() {
    let key = [3u8; 32];
    let iv = [9u8; 16];
    let ct = CpuEngine::new(Cipher::Aes256Gcm, &key)
        .expect("k")
        .encrypt(&iv, b"attack at dawn")
        .expect("enc");
    let mut bad = ct.clone();
    bad[2] ^= 1;
    for r in [
        CpuEngine::new(Cipher::Aes256Gcm, &key)
            .expect("k")
            .decrypt(&iv, &bad),
        SoftEngine::new(Cipher::Aes256Gcm, &key)
            .expect("k")
            .decrypt(&iv, &bad),
    ] {
        assert!(r.expect_err("tag must fail").contains("tag mismatch"));
    }
    // CBC: a wrong key almost always breaks the padding; a truncated ciphertext always fails.
    let ct = CpuEngine::new(Cipher::Aes128Cbc, &key[..16])
        .expect("k")
        .encrypt(&iv, &[1u8; 40])
        .expect("enc");
    let e = SoftEngine::new(Cipher::Aes128Cbc, &key[..16])
        .expect("k")
        .decrypt(&iv, &ct[..ct.len() - 3]);
    assert!(e.expect_err("truncated").contains("multiple of 16"));
    let e = CpuEngine::new(Cipher::Aes128Cbc, &key[..16])
        .expect("k")
        .decrypt(&iv, &[]);
    assert!(e.is_err());
    // Wrong key length: a clear error.
    assert!(matches!(
        CpuEngine::new(Cipher::Aes192Cbc, &key[..16]),
        Err(DeviceError::InvalidParameter(_))
    ));
    assert!(matches!(
        SoftEngine::new(Cipher::Aes192Cbc, &key[..16]),
        Err(DeviceError::InvalidParameter(_))
    ));
}

#[test]
fn user_workloads_and_corrupted_outputs() {
    let key = [1u8; 16];
    let items: Vec<&[u8]> = vec![b"one", b"second item", &[0u8; 100]];
    let work = AesWorkload::from_items(
        Cipher::Aes128Cbc,
        Direction::Encrypt,
        &key,
        random_ivs(3),
        &items,
    )
    .expect("w");
    assert_eq!(work.len(), 3);
    assert_eq!(work.weight(1), 11);
    let mut outs: Vec<Vec<u8>> = (0..3).map(|i| work.expected(i).to_vec()).collect();
    work.verify(&outs, &|_| "x".into())
        .expect("reference verifies");
    outs[1][5] ^= 0x80;
    match work.verify(&outs, &|_| "cpu:1".into()) {
        Err(DeviceError::Mismatch { item, device, .. }) => {
            assert_eq!((item, device.as_str()), (1, "cpu:1"))
        }
        other => panic!("expected a mismatch, got {other:?}"),
    }
    assert!(AesWorkload::from_items(
        Cipher::Aes128Cbc,
        Direction::Encrypt,
        &key[..8],
        random_ivs(3),
        &items
    )
    .is_err());
    assert!(AesWorkload::from_items(
        Cipher::Aes128Cbc,
        Direction::Encrypt,
        &key,
        random_ivs(2),
        &items
    )
    .is_err());
    // Corrupted ciphertexts given for decryption are refused when the workload is built.
    let bad: Vec<&[u8]> = vec![&[7u8; 32]];
    let r = AesWorkload::from_items(
        Cipher::Aes256Gcm,
        Direction::Decrypt,
        &[0u8; 32],
        random_ivs(1),
        &bad,
    );
    assert!(matches!(r, Err(DeviceError::Crypto { .. })));
}

#[test]
fn device_specs_and_missing_hardware() {
    let s = DeviceSpec::parse_list("cpu:2, soft").expect("parse");
    assert_eq!(s.len(), 2);
    assert_eq!(s[0].workers, Some(2));
    for bad in ["", "cpu:0", "cpu:x", "tpu", "cpu:5000"] {
        assert!(
            matches!(
                DeviceSpec::parse_list(bad),
                Err(DeviceError::BadSpec { .. })
            ),
            "{bad}"
        );
    }
    let names = heloom_devices::spec::device_names(
        &DeviceSpec::parse_list("cpu:1,cpu:1,soft:1").expect("p"),
    );
    assert_eq!(names, vec!["cpu:1", "cpu:1#2", "soft:1"]);
    // This build has no CUDA AES: a clear error either way.
    match open_aes_devices(&DeviceSpec::parse_list("gpu").expect("p")) {
        Err(DeviceError::Unavailable { device, reason, .. }) => {
            assert_eq!(device, "gpu");
            assert!(!reason.is_empty());
        }
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("gpu AES cannot open in this build"),
    }
}
