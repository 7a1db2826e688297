//! The built-in applications as jobs of a real server on a loopback port: a matrix product and
//! CryptoNets inference with batch and single-image packing, submitted over HTTP, run by the
//! worker through heloom-runtime's scheduler, fetched, decrypted and checked on the client;
//! jobs with the wrong inputs or keys are refused with what to do.
//!
//! Parameters: N = 2^10 with six 29-bit primes over a 30-bit `q_0` (test-only security) for
//! the matrix product and the batch packing; N = 2^14 with seven 29-bit primes (128-bit
//! secure) for the single-image packing, which needs 8192 slots.
//! Bounds: matrix product, 1e-3 absolute (entries in [-1, 1], d = 5, scale 2^29); logits,
//! 1e-3 of the largest f64 logit, and the f64 model's class for every image.

use heloom_apps::cryptonets::model::argmax;
use heloom_apps::cryptonets::CryptoNet;
use heloom_apps::matmul::{max_abs_error, Matrix};
use heloom_apps::mnist::Mnist;
use heloom_ckks::{
    keygen, Ciphertext, CkksParameters, Context, Decryptor, Encryptor, KeySet, SecurityLevel,
};
use heloom_serve::apps::{self, CryptonetsPacking};
use heloom_serve::client::{Client, ClientError, SubmitJob};
use heloom_serve::worker::Task;
use heloom_serve::{Server, ServerConfig};
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Tenant {
    ctx: Arc<Context<u64>>,
    keys: KeySet<u64>,
}

impl Tenant {
    fn new(params: CkksParameters, steps: &[i64]) -> Self {
        let ctx = Context::<u64>::new(params).expect("context");
        let keys = keygen(&ctx, steps, false).expect("keys");
        Self { ctx, keys }
    }

    fn encrypt(&self, v: &[f64]) -> Ciphertext<u64> {
        Encryptor::new(&self.ctx)
            .encrypt_symmetric(v, &self.keys.secret_key)
            .expect("encrypt")
    }

    fn decrypt(&self, ct: &Ciphertext<u64>) -> Vec<f64> {
        Decryptor::new(&self.ctx, &self.keys.secret_key)
            .expect("decryptor")
            .decrypt(ct)
            .expect("decrypt")
    }

    fn upload(&self, client: &Client, cts: &[Ciphertext<u64>]) -> Vec<String> {
        cts.iter()
            .map(|c| client.upload_ciphertext(c).expect("upload").id)
            .collect()
    }
}

fn small_params() -> CkksParameters {
    CkksParameters::builder(1 << 10)
        .levels(6)
        .scale_bits(29)
        .first_bits(30)
        .security(SecurityLevel::None)
        .build()
        .expect("params")
}

/// A server on a loopback port (two threads, test parameters allowed) and tenant alice's
/// client.
fn start(dir: &std::path::Path) -> (Server, Client) {
    let model = Arc::new(heloom_runtime::Profile::load("xeon-phi-7230f").expect("profile"));
    let mut config = ServerConfig::new(dir.to_path_buf(), model);
    config.listen = "127.0.0.1:0".parse().expect("addr");
    config.threads = 2;
    config.allow_insecure = true;
    let server = Server::start(config).expect("server");
    let url = format!("http://{}", server.addr());
    let client =
        Client::new(&url, &server.state().create_token("alice").expect("token")).expect("client");
    (server, client)
}

fn run(client: &Client, job: &SubmitJob) -> i64 {
    let j = client.submit(job).expect("submit");
    let done = client.wait(j.id, Duration::from_secs(300)).expect("wait");
    assert_eq!(
        done.state, "done",
        "{}: {:?}",
        job.idempotency_key, done.error
    );
    j.id
}

fn refused(e: ClientError) -> String {
    match e {
        ClientError::Api {
            status, message, ..
        } => {
            assert_eq!(status, 400, "{message}");
            message
        }
        other => panic!("expected a 400, got {other}"),
    }
}

/// The f64 model's logits and the largest of them in absolute value.
fn check_logits(net: &CryptoNet, image: &[u8], got: &[f64; 10]) -> f64 {
    let want = net.logits(image).expect("plain");
    let scale = want.iter().fold(1.0f64, |a, v| a.max(v.abs()));
    let err = (0..10)
        .map(|k| (got[k] - want[k]).abs() / scale)
        .fold(0.0, f64::max);
    assert!(
        err < 1e-3,
        "relative logit error {err:e}: {got:?} vs {want:?}"
    );
    assert_eq!(argmax(got), argmax(&want), "{got:?} vs {want:?}");
    err
}

#[test]
fn matmul_and_cryptonets_jobs() {
    let t0 = Instant::now();
    let dir = tempfile::tempdir().expect("dir");
    let (_server, client) = start(dir.path());
    let net = CryptoNet::embedded().expect("model");
    let mnist = Mnist::load_default_test().expect("MNIST");

    // Matrix product and batch packing share a key set with the product's rotations.
    let d = 5;
    let m = Matrix::random(d, 3);
    let rows: Vec<Vec<f64>> = m.data().chunks(d).map(<[f64]>::to_vec).collect();
    let matmul = Task::Matmul {
        matrix: rows.clone(),
    };
    let steps = apps::required_rotations(&matmul).expect("steps");
    let a = Tenant::new(small_params(), &steps);
    let key = client
        .upload_keys(a.ctx.params(), &a.keys.evaluation_keys)
        .expect("keys");
    let vs: Vec<Vec<f64>> = (0..2)
        .map(|k| Matrix::random(d, 10 + k).data()[..d].to_vec())
        .collect();
    let vcts: Vec<Ciphertext<u64>> = vs
        .iter()
        .map(|v| a.encrypt(&apps::pack_vector(v, d).expect("pack")))
        .collect();
    let vids = a.upload(&client, &vcts);
    let id = run(
        &client,
        &SubmitJob::new("matmul-1", &key.id, vids.clone(), matmul.clone()),
    );
    let out = client.result(id, &a.ctx).expect("result");
    assert_eq!(out.len(), 2);
    for (v, ct) in vs.iter().zip(&out) {
        let got = apps::unpack_vector(&a.decrypt(ct), d).expect("unpack");
        let err = max_abs_error(&got, &m.mul_vec(v).expect("M v"));
        assert!(err < 1e-3, "M v error {err}");
    }
    // The same product again: the graph comes from the cache.
    let id = run(
        &client,
        &SubmitJob::new("matmul-2", &key.id, vids.clone(), matmul.clone()),
    );
    assert_eq!(client.result(id, &a.ctx).expect("result").len(), 2);
    let t_matmul = t0.elapsed().as_secs_f64();

    let ids: Vec<usize> = (5000..5004).collect();
    let images: Vec<&[u8]> = ids
        .iter()
        .map(|&i| mnist.image(i).expect("image"))
        .collect();
    let pixels: Vec<Ciphertext<u64>> = apps::batch_inputs(&images)
        .expect("pixels")
        .iter()
        .map(|v| a.encrypt(v))
        .collect();
    let pids = a.upload(&client, &pixels);
    let t_up = Instant::now();
    let batch = Task::Cryptonets {
        packing: CryptonetsPacking::Batch,
    };
    let id = run(
        &client,
        &SubmitJob::new("cn-batch", &key.id, pids.clone(), batch.clone()),
    );
    let t_batch = t_up.elapsed().as_secs_f64();
    let out = client.result(id, &a.ctx).expect("result");
    let slots: Vec<Vec<f64>> = out.iter().map(|c| a.decrypt(c)).collect();
    let logits = apps::batch_logits(&slots, images.len()).expect("logits");
    for (image, got) in images.iter().zip(&logits) {
        check_logits(&net, image, got);
    }

    // Wrong inputs and keys: refused at submission with what to do.
    let msg = refused(
        client
            .submit(&SubmitJob::new(
                "cn-few",
                &key.id,
                pids[..3].to_vec(),
                batch.clone(),
            ))
            .expect_err("3 inputs"),
    );
    assert!(msg.contains("784"), "{msg}");
    let msg = refused(
        client
            .submit(&SubmitJob::new(
                "mm-slots",
                &key.id,
                pids[..1].to_vec(),
                matmul.clone(),
            ))
            .expect_err("slots"),
    );
    assert!(msg.contains("exactly 8 slots"), "{msg}");
    let bare = Tenant {
        ctx: Arc::clone(&a.ctx),
        keys: keygen(&a.ctx, &[], false).expect("keys"),
    };
    let bare_key = client
        .upload_keys(bare.ctx.params(), &bare.keys.evaluation_keys)
        .expect("keys");
    let msg = refused(
        client
            .submit(&SubmitJob::new("mm-keys", &bare_key.id, vids, matmul))
            .expect_err("no rotation keys"),
    );
    assert!(msg.contains(&format!("rotation steps {steps:?}")), "{msg}");
    let msg = refused(
        client
            .submit(&SubmitJob::new(
                "cn-single-small",
                &key.id,
                pids[..1].to_vec(),
                Task::Cryptonets {
                    packing: CryptonetsPacking::Single,
                },
            ))
            .expect_err("single at N = 2^10"),
    );
    assert!(msg.contains("8192"), "{msg}");

    // Single-image packing at N = 2^14.
    let t_single = Instant::now();
    let single = Task::Cryptonets {
        packing: CryptonetsPacking::Single,
    };
    let params = CkksParameters::builder(1 << 14)
        .levels(7)
        .scale_bits(29)
        .first_bits(29)
        .build()
        .expect("params");
    let b = Tenant::new(params, &apps::required_rotations(&single).expect("steps"));
    let key = client
        .upload_keys(b.ctx.params(), &b.keys.evaluation_keys)
        .expect("keys");
    let image = mnist.image(5004).expect("image");
    let ct = b.encrypt(&apps::single_input(image).expect("input"));
    let input = b.upload(&client, &[ct]);
    let id = run(
        &client,
        &SubmitJob::new("cn-single", &key.id, input, single),
    );
    let out = client.result(id, &b.ctx).expect("result");
    assert_eq!(out.len(), 1);
    let got = apps::single_logits(&b.decrypt(&out[0])).expect("logits");
    check_logits(&net, image, &got);
    eprintln!(
        "matmul {t_matmul:.1} s, batch job {t_batch:.1} s, single (keys, upload, job) {:.1} s, \
         total {:.1} s",
        t_single.elapsed().as_secs_f64(),
        t0.elapsed().as_secs_f64()
    );
}

#[test]
fn encrypted_matmul_jobs() {
    // An encrypted 5 x 5 matrix times another (JKLS18), packed in 8 x 8 = 64 slots at
    // N = 2^10 (six levels: the product uses three). Bound: 1e-3 absolute, entries in [-1, 1].
    let dir = tempfile::tempdir().expect("dir");
    let (_server, client) = start(dir.path());
    let d = 5;
    let task = Task::MatmulEncrypted { side: d };
    let steps = apps::required_rotations(&task).expect("steps");
    assert!(!steps.is_empty());
    let t = Tenant::new(small_params(), &steps);
    let key = client
        .upload_keys(t.ctx.params(), &t.keys.evaluation_keys)
        .expect("keys");
    let (ma, mb) = (Matrix::random(d, 21), Matrix::random(d, 22));
    let cts: Vec<Ciphertext<u64>> = [&ma, &mb]
        .iter()
        .map(|m| t.encrypt(&apps::pack_matrix(m).expect("pack")))
        .collect();
    let level = cts[0].level();
    let ids = t.upload(&client, &cts);
    let id = run(
        &client,
        &SubmitJob::new("mme-1", &key.id, ids.clone(), task.clone()),
    );
    let out = client.result(id, &t.ctx).expect("result");
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].level(), level - apps::ENCRYPTED_MATMUL_LEVELS);
    let got = apps::unpack_matrix(&t.decrypt(&out[0]), d).expect("unpack");
    let want = ma.mul(&mb).expect("A B");
    let err = max_abs_error(got.data(), want.data());
    assert!(err < 1e-3, "A B error {err}");
    // B A too (the order of the inputs is the order of the product).
    let id = run(
        &client,
        &SubmitJob::new(
            "mme-2",
            &key.id,
            vec![ids[1].clone(), ids[0].clone()],
            task.clone(),
        ),
    );
    let out = client.result(id, &t.ctx).expect("result");
    let got = apps::unpack_matrix(&t.decrypt(&out[0]), d).expect("unpack");
    let err = max_abs_error(got.data(), mb.mul(&ma).expect("B A").data());
    assert!(err < 1e-3, "B A error {err}");

    // Refused with what to do: one input, the wrong packing, a bad side, missing keys.
    let msg = refused(
        client
            .submit(&SubmitJob::new(
                "mme-one",
                &key.id,
                ids[..1].to_vec(),
                task.clone(),
            ))
            .expect_err("one input"),
    );
    assert!(msg.contains("two input ciphertexts"), "{msg}");
    let vec8 = t.encrypt(&[0.5; 8]);
    let small = t.upload(&client, &[vec8]);
    let msg = refused(
        client
            .submit(&SubmitJob::new(
                "mme-slots",
                &key.id,
                vec![ids[0].clone(), small[0].clone()],
                task.clone(),
            ))
            .expect_err("slots"),
    );
    assert!(msg.contains("exactly 64 slots"), "{msg}");
    let msg = refused(
        client
            .submit(&SubmitJob::new(
                "mme-side",
                &key.id,
                ids.clone(),
                Task::MatmulEncrypted { side: 0 },
            ))
            .expect_err("side 0"),
    );
    assert!(msg.contains("side 0"), "{msg}");
    let bare = keygen(&t.ctx, &[], false).expect("keys");
    let bare_key = client
        .upload_keys(t.ctx.params(), &bare.evaluation_keys)
        .expect("keys");
    let msg = refused(
        client
            .submit(&SubmitJob::new("mme-keys", &bare_key.id, ids, task))
            .expect_err("no rotation keys"),
    );
    assert!(msg.contains(&format!("rotation steps {steps:?}")), "{msg}");
}
