//! Private genome search: the PBWT reference against brute force, the encrypted protocol
//! (interactive and non-interactive) against the reference, malformed messages, and a socket
//! round trip.

use heloom_apps::genome::protocol::{answer, serve_frame, LocalTransport};
use heloom_apps::genome::wire::{Message, Mode, HEADER_LEN};
use heloom_apps::genome::{brute_force, net, run_query, Client, Panel, Pbwt, Server};
use heloom_apps::AppError;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use std::sync::OnceLock;

fn panel() -> &'static Panel {
    static P: OnceLock<Panel> = OnceLock::new();
    P.get_or_init(|| Panel::synthetic(64, 200, 7).expect("panel"))
}

fn server() -> &'static Server {
    static S: OnceLock<Server> = OnceLock::new();
    S.get_or_init(|| Server::new(panel()).expect("server"))
}

fn client() -> &'static Client {
    static C: OnceLock<Client> = OnceLock::new();
    C.get_or_init(|| Client::new().expect("client"))
}

/// A query copying haplotype `h` from `start`, with the allele at offset `flip` flipped.
fn query_from(h: usize, start: usize, len: usize, flip: Option<usize>) -> Vec<u8> {
    let mut q = panel().haplotype_segment(h, start, len);
    if let Some(j) = flip {
        if j < q.len() {
            q[j] ^= 1;
        }
    }
    q
}

#[test]
fn panel_round_trips_and_rejects_corruption() {
    let p = panel();
    let bytes = p.to_bytes();
    assert_eq!(&Panel::from_bytes(&bytes).expect("parse"), p);
    let mut bad = bytes.clone();
    bad[30] ^= 1;
    assert!(matches!(Panel::from_bytes(&bad), Err(AppError::Format(_))));
    assert!(matches!(
        Panel::from_bytes(&bytes[..bytes.len() - 3]),
        Err(AppError::Format(_))
    ));
    assert!(matches!(
        Panel::from_bytes(b"nonsense"),
        Err(AppError::Format(_))
    ));
}

#[test]
fn embedded_panel_has_the_papers_shape() {
    let p = Panel::embedded().expect("embedded panel");
    assert_eq!((p.haplotypes(), p.sites()), (2184, 10_000));
}

#[test]
fn pbwt_matches_brute_force() {
    let p = panel();
    let pbwt = Pbwt::build(p).expect("pbwt");
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    for _ in 0..300 {
        let start = rng.gen_range(0..p.sites());
        let len = rng.gen_range(1..=(p.sites() - start).min(60));
        let h = rng.gen_range(0..p.haplotypes());
        let flip = if rng.gen_bool(0.7) {
            Some(rng.gen_range(0..len))
        } else {
            None
        };
        let mut q = query_from(h, start, len, flip);
        if rng.gen_bool(0.1) {
            q = (0..len).map(|_| rng.gen_range(0..2)).collect();
        }
        assert_eq!(
            pbwt.longest_match(start, &q).expect("reference"),
            brute_force(p, start, &q),
            "start {start}, query {q:?}"
        );
    }
    assert!(pbwt.longest_match(p.sites() - 1, &[0, 0]).is_err());
    assert!(pbwt.longest_match(0, &[2]).is_err());
}

fn check_interactive(start: usize, q: &[u8]) {
    let mut t = LocalTransport::new(server());
    let out = run_query(client(), &mut t, Mode::Interactive, start, q).expect("query");
    let want = server().pbwt().longest_match(start, q).expect("reference");
    assert_eq!(out.result, want, "start {start}, query {q:?}");
    let iv = server().pbwt().intervals(start, q).expect("intervals");
    let counts: Vec<usize> = iv.iter().map(|&(f, g)| g - f).collect();
    assert_eq!(out.counts, counts);
    assert!(
        out.largest_error < 1e-3,
        "angle error {}",
        out.largest_error
    );
}

#[test]
fn interactive_protocol_equals_reference() {
    let p = panel();
    // A full-length match (a panel haplotype), a mismatch at the first site (length 0 when the
    // flipped allele is absent), queries starting mid-panel with a mismatch inside.
    check_interactive(0, &query_from(3, 0, 6, None));
    let mut q0 = query_from(5, 17, 3, None);
    let all_same = (0..p.haplotypes()).all(|h| p.allele(17, h) == q0[0]);
    if all_same {
        q0[0] ^= 1;
    }
    check_interactive(17, &q0);
    check_interactive(120, &query_from(9, 120, 7, Some(4)));
    check_interactive(p.sites() - 5, &query_from(40, p.sites() - 5, 5, Some(2)));
}

#[test]
fn immediate_mismatch_gives_length_zero() {
    // A site where every haplotype has allele 0, queried with allele 1.
    let alleles = vec![vec![0u8; 8], vec![1u8, 0, 1, 0, 1, 0, 1, 0]];
    let p = Panel::from_sites(&alleles).expect("panel");
    let s = Server::new(&p).expect("server");
    let mut t = LocalTransport::new(&s);
    let out = run_query(client(), &mut t, Mode::Interactive, 0, &[1, 1]).expect("query");
    assert_eq!((out.result.length, out.result.count), (0, 8));
    assert_eq!(out.result, brute_force(&p, 0, &[1, 1]));
}

#[test]
fn noninteractive_protocol_equals_reference() {
    for (start, q) in [
        (0, query_from(2, 0, 4, None)),
        (60, query_from(11, 60, 6, Some(3))),
    ] {
        let mut t = LocalTransport::new(server());
        let out = run_query(client(), &mut t, Mode::NonInteractive, start, &q).expect("query");
        assert_eq!(
            out.result,
            server().pbwt().longest_match(start, &q).expect("reference")
        );
        assert_eq!(out.rounds.len(), 1);
    }
}

#[test]
fn malformed_messages_get_errors() {
    let c = client();
    let expect = c.expect();
    let hello = c
        .hello(Mode::Interactive, 0, 3)
        .expect("hello")
        .encode(expect.0, expect.1);
    let refused = |frame: &[u8]| {
        let mut session = server().session();
        let (back, go_on) = serve_frame(&mut session, frame);
        assert!(!go_on);
        let err = answer(&back, expect).expect_err("refusal");
        assert!(matches!(err, AppError::Protocol(_)), "{err}");
        err.to_string()
    };
    // Truncated, corrupted, wrong magic, wrong version, oversized.
    refused(&hello[..hello.len() - 1]);
    refused(&hello[..HEADER_LEN - 2]);
    let mut bad = hello.clone();
    bad[HEADER_LEN + 100] ^= 0x40;
    assert!(refused(&bad).contains("checksum"));
    let mut bad = hello.clone();
    bad[0] = b'X';
    assert!(refused(&bad).contains("magic"));
    let mut bad = hello.clone();
    bad[4] = 9;
    assert!(refused(&bad).contains("version"));
    let mut bad = hello.clone();
    bad[24..28].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(refused(&bad).contains("exceeds"));
    // Wrong parameter fingerprint in the Hello.
    let wrong_fp = c
        .hello(Mode::Interactive, 0, 3)
        .expect("hello")
        .encode(expect.0 ^ 1, expect.1);
    assert!(refused(&wrong_fp).contains("parameters"));
    // A Query before Hello; a query that does not fit; garbage ciphertexts.
    let q = Message::Query {
        round: 0,
        cts: vec![vec![1, 2, 3], vec![4]],
    }
    .encode(expect.0, expect.1);
    assert!(refused(&q).contains("before Hello"));
    let far = c
        .hello(Mode::Interactive, 199, 3)
        .expect("hello")
        .encode(expect.0, expect.1);
    refused(&far);

    let mut session = server().session();
    let (back, go_on) = serve_frame(&mut session, &hello);
    assert!(go_on);
    assert!(matches!(
        answer(&back, expect),
        Ok(Message::HelloAck { .. })
    ));
    let (back, _) = serve_frame(&mut session, &q);
    assert!(answer(&back, expect).is_err());
    // A message of another session (other keys) is refused.
    let mut session = server().session();
    serve_frame(&mut session, &hello);
    let other = Message::Query {
        round: 0,
        cts: vec![],
    }
    .encode(expect.0, expect.1 ^ 7);
    let (back, _) = serve_frame(&mut session, &other);
    assert!(answer(&back, expect)
        .expect_err("other keys")
        .to_string()
        .contains("keys"));
    // Wrong round number.
    let mut session = server().session();
    serve_frame(&mut session, &hello);
    let ct = c
        .encrypt_one_hot(0, heloom_ckks::Complex64::new(1.0, 0.0))
        .expect("ct");
    let r5 = Message::Query {
        round: 5,
        cts: vec![ct.clone(), ct],
    }
    .encode(expect.0, expect.1);
    let (back, _) = serve_frame(&mut session, &r5);
    assert!(answer(&back, expect)
        .expect_err("round")
        .to_string()
        .contains("round"));
}

#[test]
fn socket_round_trip_equals_reference() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let q = query_from(21, 40, 5, Some(3));
    let want = server().pbwt().longest_match(40, &q).expect("reference");
    std::thread::scope(|s| {
        s.spawn(|| net::serve(server(), &listener, 2, &mut |_| {}).expect("serve"));
        let mut t =
            net::TcpTransport::connect(&addr, std::time::Duration::from_secs(5)).expect("connect");
        let out = run_query(client(), &mut t, Mode::Interactive, 40, &q).expect("query");
        assert_eq!(out.result, want);
        assert!(out
            .rounds
            .iter()
            .all(|r| r.bytes_up > 100_000 && r.bytes_down > 100_000));
        // A garbage connection gets an error frame, and the server keeps serving.
        let mut raw = std::net::TcpStream::connect(&addr).expect("connect");
        std::io::Write::write_all(&mut raw, &[0u8; 64]).expect("write");
        let back = net::read_frame(&mut raw, 1 << 20)
            .expect("frame")
            .expect("some frame");
        assert!(matches!(
            Message::decode(&back, None),
            Ok((Message::Error { .. }, _))
        ));
    });
}

#[test]
fn tiered_store_under_a_budget_gives_the_same_answers() {
    let dir = std::env::temp_dir().join(format!("heloom-genome-test-{}", std::process::id()));
    let s = heloom_apps::genome::tiered::with_budget(
        Server::new(panel()).expect("server"),
        0.25,
        Some(dir.clone()),
    )
    .expect("store");
    let q = query_from(13, 30, 12, Some(9));
    let mut t = LocalTransport::new(&s);
    let out = run_query(client(), &mut t, Mode::Interactive, 30, &q).expect("query");
    assert_eq!(
        out.result,
        s.pbwt().longest_match(30, &q).expect("reference")
    );
    let st = &out.server_stats["store"];
    assert_eq!(st["gets"], 12);
    assert!(st["bytes_written"].as_u64().unwrap_or(0) > 0, "{st}");
    assert!(
        st["budget_bytes"].as_u64().unwrap_or(0) < st["working_set_bytes"].as_u64().unwrap_or(0)
    );
    assert!(heloom_apps::genome::tiered::with_budget(
        Server::new(panel()).expect("server"),
        0.0,
        None
    )
    .is_err());
    let _ = std::fs::remove_dir_all(dir);
}
