//! The service's durable state: tokens stored hashed, checked, revoked; the database reopened.

#![allow(clippy::unwrap_used)]

use heloom_serve::{ServeError, State, TOKEN_PREFIX};

#[test]
fn tokens_authenticate_their_tenant_only() {
    let dir = tempfile::tempdir().unwrap();
    let state = State::open(dir.path()).unwrap();
    let a = state.create_token("alice").unwrap();
    let a2 = state.create_token("alice").unwrap();
    let b = state.create_token("bob-2").unwrap();
    // 256 random bits as 64 hex digits after the prefix; never the same twice.
    assert!(a.starts_with(TOKEN_PREFIX) && a.len() == TOKEN_PREFIX.len() + 64);
    assert!(a[TOKEN_PREFIX.len()..]
        .bytes()
        .all(|c| c.is_ascii_hexdigit()));
    assert_ne!(a, a2);
    assert_eq!(state.authenticate(&a).unwrap().as_deref(), Some("alice"));
    assert_eq!(state.authenticate(&a2).unwrap().as_deref(), Some("alice"));
    assert_eq!(state.authenticate(&b).unwrap().as_deref(), Some("bob-2"));
    // One changed digit, a missing prefix, garbage, an overlong string: unknown alike.
    let mut wrong = a.clone().into_bytes();
    let last = wrong.len() - 1;
    wrong[last] = if wrong[last] == b'0' { b'1' } else { b'0' };
    for t in [
        String::from_utf8(wrong).unwrap(),
        a[TOKEN_PREFIX.len()..].to_string(),
        String::new(),
        "hlm_".repeat(100),
    ] {
        assert_eq!(state.authenticate(&t).unwrap(), None, "{t}");
    }
    assert_eq!(
        state.tenants().unwrap(),
        vec![("alice".to_string(), 2), ("bob-2".to_string(), 1)]
    );
    // Revoked: refused from then on, the other token of the tenant still works.
    assert!(state.revoke_token(&a).unwrap());
    assert!(!state.revoke_token(&a).unwrap());
    assert_eq!(state.authenticate(&a).unwrap(), None);
    assert_eq!(state.authenticate(&a2).unwrap().as_deref(), Some("alice"));
}

#[test]
fn only_hashes_are_stored_and_state_survives_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let token = {
        let state = State::open(dir.path()).unwrap();
        state.create_token("carol").unwrap()
    };
    // The token itself appears in no file of the data directory (database, WAL, shm).
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if !path.is_file() {
            continue;
        }
        let bytes = std::fs::read(path).unwrap();
        let secret = &token.as_bytes()[TOKEN_PREFIX.len()..];
        assert!(!bytes.windows(secret.len()).any(|w| w == secret));
    }
    let state = State::open(dir.path()).unwrap();
    assert_eq!(
        state.authenticate(&token).unwrap().as_deref(),
        Some("carol")
    );
    assert_eq!(state.dir(), dir.path());
}

#[test]
fn bad_names_and_unusable_state_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let state = State::open(dir.path()).unwrap();
    for name in ["", "Alice", "-x", "_x", "a b", "a/b", "é", &"x".repeat(65)] {
        let e = state.create_token(name).unwrap_err();
        assert!(matches!(e, ServeError::InvalidTenant { .. }), "{name}: {e}");
        assert!(e.to_string().contains("1 to 64 characters"));
    }
    assert!(state.create_token(&"x".repeat(64)).is_ok());
    // A database from a newer heloom is refused, not rewritten.
    drop(state);
    set_schema_version_99(dir.path());
    let e = State::open(dir.path()).unwrap_err();
    assert!(
        matches!(e, ServeError::NewerSchema { found: 99, .. }),
        "{e}"
    );
    // A file where the directory should be.
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, b"x").unwrap();
    let e = State::open(&file).unwrap_err();
    assert!(matches!(e, ServeError::DataDir { .. }), "{e}");
    // A damaged database file is reported, never used.
    let bad = tempfile::tempdir().unwrap();
    std::fs::write(bad.path().join("heloom.db"), vec![0x5a; 8192]).unwrap();
    let e = State::open(bad.path()).unwrap_err();
    assert!(matches!(e, ServeError::Database { .. }), "{e}");
}

/// Sets the schema version to 99 in the database file's header (`user_version` is the
/// big-endian u32 at byte 60). The state was closed, so SQLite folded its WAL into the file.
fn set_schema_version_99(dir: &std::path::Path) {
    let path = dir.join("heloom.db");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[60..64].copy_from_slice(&99u32.to_be_bytes());
    std::fs::write(&path, bytes).unwrap();
}

#[test]
fn scratch_state_stores_and_reads_like_a_durable_one() {
    // A node server's store (`--scratch`): nothing synced, the same content and ids.
    let dir = tempfile::tempdir().unwrap();
    let scratch = State::open_scratch(dir.path()).unwrap();
    assert!(!scratch.durable());
    let token = scratch.create_token("front").unwrap();
    assert_eq!(
        scratch.authenticate(&token).unwrap().as_deref(),
        Some("front")
    );
    let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let info = scratch.store_result("front", &data, 0x1234).unwrap();
    assert_eq!(info.bytes, data.len() as u64);
    assert_eq!(
        scratch.read_object("front", &info.id).unwrap().as_deref(),
        Some(&data[..])
    );
    drop(scratch);
    // The same directory opened durably afterwards: everything is there.
    let durable = State::open(dir.path()).unwrap();
    assert!(durable.durable());
    assert_eq!(
        durable.authenticate(&token).unwrap().as_deref(),
        Some("front")
    );
    let again = durable.store_result("front", &data, 0x1234).unwrap();
    assert_eq!(again.id, info.id);
    assert_eq!(
        durable.read_object("front", &info.id).unwrap().as_deref(),
        Some(&data[..])
    );
}

/// The segment files (`DIR/segments/<id>.seg`) there are now, by id.
fn segment_ids(dir: &std::path::Path) -> Vec<i64> {
    let mut ids: Vec<i64> = std::fs::read_dir(dir.join("segments"))
        .unwrap()
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            name.strip_suffix(".seg")?.parse().ok()
        })
        .collect();
    ids.sort_unstable();
    ids
}

#[test]
fn results_live_in_segments_and_their_space_comes_back() {
    let dir = tempfile::tempdir().unwrap();
    let state = State::open(dir.path()).unwrap();
    state.create_token("alice").unwrap();
    state.create_token("bob").unwrap();
    let make = |i: u32| -> Vec<u8> { (0..50_000u32).map(|j| (j * 31 + i * 7) as u8).collect() };
    let mut stored = Vec::new();
    for i in 0..8u32 {
        let tenant = if i % 2 == 0 { "alice" } else { "bob" };
        let info = state.store_result(tenant, &make(i), 1).unwrap();
        stored.push((tenant, info.id, make(i)));
    }
    // No file per result: one segment holds all eight.
    assert!(!dir.path().join("objects").join("alice").exists());
    assert_eq!(segment_ids(dir.path()), vec![1]);
    for (tenant, id, data) in &stored {
        assert_eq!(
            state.read_object(tenant, id).unwrap().as_deref(),
            Some(&data[..])
        );
        // Another tenant's result does not exist for them.
        let other = if *tenant == "alice" { "bob" } else { "alice" };
        assert_eq!(state.read_object(other, id).unwrap(), None);
        assert!(!state.delete_object(other, id).unwrap());
    }
    drop(state);

    // After a restart segment 1 is sealed: records go to a new segment once there are any.
    let state = State::open(dir.path()).unwrap();
    assert_eq!(segment_ids(dir.path()), vec![1]);
    // Deleting down to a quarter of the segment's bytes keeps it; below that, its last
    // result moves to a new segment and the file goes.
    for (tenant, id, _) in &stored[..6] {
        assert!(state.delete_object(tenant, id).unwrap());
    }
    assert_eq!(segment_ids(dir.path()), vec![1]);
    assert!(state.delete_object(stored[6].0, &stored[6].1).unwrap());
    assert_eq!(segment_ids(dir.path()), vec![2]);
    let (tenant, id, data) = &stored[7];
    assert_eq!(
        state.read_object(tenant, id).unwrap().as_deref(),
        Some(&data[..])
    );
    assert_eq!(state.read_object("alice", &stored[0].1).unwrap(), None);
    drop(state);

    // A segment no row names (a crash before its rows were committed) is removed when the
    // server starts (`reclaim_segments`); opening the state alone (token commands) touches
    // nothing.
    std::fs::write(dir.path().join("segments").join("7.seg"), b"torn").unwrap();
    let state = State::open(dir.path()).unwrap();
    assert_eq!(segment_ids(dir.path()), vec![2, 7]);
    state.reclaim_segments().unwrap();
    assert_eq!(segment_ids(dir.path()), vec![2]);
    // New records go after every segment there; a sealed segment whose results are all
    // deleted goes.
    let fresh = state.store_result("bob", b"fresh", 1).unwrap();
    assert_eq!(segment_ids(dir.path()), vec![2, 3]);
    assert!(state.delete_object(tenant, id).unwrap());
    assert_eq!(segment_ids(dir.path()), vec![3]);
    assert_eq!(
        state.read_object("bob", &fresh.id).unwrap().as_deref(),
        Some(&b"fresh"[..])
    );
}

#[test]
fn a_damaged_result_is_reported_never_served() {
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().unwrap();
    let state = State::open(dir.path()).unwrap();
    state.create_token("alice").unwrap();
    let data = vec![0x42u8; 4096];
    let info = state.store_result("alice", &data, 1).unwrap();
    let seg = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.path().join("segments").join("1.seg"))
        .unwrap();
    seg.write_all_at(&[0x43], 24 + 100).unwrap();
    // Fresh results are read from memory, as written (the fetch after a job's end).
    assert_eq!(state.read_object("alice", &info.id).unwrap(), Some(data));
    assert_eq!(state.result_memory_reads(), 1);
    // After a restart the disk is read: the damage is found.
    drop(state);
    let state = State::open(dir.path()).unwrap();
    let e = state.read_object("alice", &info.id).unwrap_err();
    assert!(matches!(e, ServeError::Damaged { .. }), "{e}");
    assert!(e.to_string().contains("checksum mismatch"), "{e}");
    // Cut short: damaged too.
    seg.set_len(1000).unwrap();
    let e = state.read_object("alice", &info.id).unwrap_err();
    assert!(matches!(e, ServeError::Damaged { .. }), "{e}");
}

#[test]
fn results_a_crash_lost_are_found_and_their_jobs_run_again() {
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().unwrap();
    let state = State::open(dir.path()).unwrap();
    state.create_token("alice").unwrap();
    let mut ended = Vec::new();
    for (key, byte) in [("kept", 1u8), ("torn", 2u8)] {
        let id = state.submit_job("alice", &exp_job(key)).unwrap().0.id;
        assert_eq!(state.start_next().unwrap().unwrap().id, id);
        let (info, now) = state
            .finish_job_with_result(id, "alice", &vec![byte; 5000], 1)
            .unwrap();
        assert!(now);
        ended.push((id, info.id));
    }
    // A crash: no clean stop, so the segment keeps its marker. The second record never
    // reached the disk (simulated: its bytes are zeros), though its row did.
    std::mem::forget(state);
    let seg = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.path().join("segments").join("1.seg"))
        .unwrap();
    seg.write_all_at(&[0u8; 5024], 5024).unwrap();
    assert!(dir.path().join("segments").join("1.open").exists());

    let state = State::open(dir.path()).unwrap();
    assert_eq!(state.verify_segments().unwrap(), 1);
    assert!(!dir.path().join("segments").join("1.open").exists());
    // The sound result stays; the torn one is gone and its job is queued again.
    let (kept, torn) = (&ended[0], &ended[1]);
    assert_eq!(
        state.read_object("alice", &kept.1).unwrap().as_deref(),
        Some(&vec![1u8; 5000][..])
    );
    assert_eq!(state.read_object("alice", &torn.1).unwrap(), None);
    let again = state.job("alice", torn.0).unwrap().unwrap();
    assert_eq!(
        (again.state, again.result_ref.as_deref()),
        (heloom_serve::JobState::Accepted, None)
    );
    assert_eq!(
        state.job("alice", kept.0).unwrap().unwrap().state,
        heloom_serve::JobState::Done
    );
    // It runs again to the same bytes, under the same id.
    assert_eq!(state.start_next().unwrap().unwrap().id, torn.0);
    let (info, _) = state
        .finish_job_with_result(torn.0, "alice", &vec![2u8; 5000], 1)
        .unwrap();
    assert_eq!(info.id, torn.1);
    // Checked once: nothing is left to check at the next start.
    assert_eq!(state.verify_segments().unwrap(), 0);
}

#[test]
fn deleting_a_job_flushes_its_fresh_result_first() {
    let dir = tempfile::tempdir().unwrap();
    let state = State::open(dir.path()).unwrap();
    state.create_token("alice").unwrap();
    let id = state.submit_job("alice", &exp_job("a")).unwrap().0.id;
    state.start_next().unwrap().unwrap();
    let (info, _) = state
        .finish_job_with_result(id, "alice", &[5u8; 3000], 1)
        .unwrap();
    let failed = state.submit_job("alice", &exp_job("b")).unwrap().0.id;
    state.start_next().unwrap().unwrap();
    state.finish_job(failed, Err("no")).unwrap();
    // Records are not flushed one by one: deleting the job that could redo one flushes it.
    let before = state.segment_flushes();
    assert_eq!(state.delete_job("alice", id).unwrap(), Some(true));
    assert_eq!(state.segment_flushes(), before + 1);
    assert_eq!(
        state.read_object("alice", &info.id).unwrap().as_deref(),
        Some(&[5u8; 3000][..])
    );
    // No result, nothing to flush; another tenant's job is not found (and not flushed).
    assert_eq!(state.delete_job("alice", failed).unwrap(), Some(true));
    assert_eq!(state.segment_flushes(), before + 1);
    assert_eq!(state.delete_job("bob", id).unwrap(), None);
    assert_eq!(state.segment_flushes(), before + 1);
}

/// An e^x job record keyed (and digested) by `key`.
fn exp_job(key: &str) -> heloom_serve::NewJob<'_> {
    heloom_serve::NewJob {
        idempotency_key: key,
        kind: "exp",
        input_digest: key,
        priority: 0,
        deadline_unix: None,
        spec: "{}",
    }
}

#[test]
fn results_stored_together_are_one_write_and_each_job_ends_once() {
    use heloom_serve::{JobState, NewResult};
    let dir = tempfile::tempdir().unwrap();
    let state = State::open(dir.path()).unwrap();
    state.create_token("alice").unwrap();
    let mut ids = Vec::new();
    for key in ["a", "b", "c", "d"] {
        let id = state.submit_job("alice", &exp_job(key)).unwrap().0.id;
        assert_eq!(state.start_next().unwrap().unwrap().id, id);
        ids.push(id);
    }
    // The third is cancelled while it runs; the fourth computed the same bytes as the first.
    assert!(state.cancel_job("alice", ids[2]).unwrap());
    let data = |b: u8| {
        (0..5000u32)
            .map(|i| b ^ (i % 253) as u8)
            .collect::<Vec<u8>>()
    };
    let item = |job: i64, b: u8| NewResult {
        job: Some(job),
        tenant: "alice".into(),
        data: data(b),
        parameters: 1,
        known: None,
    };
    // Asked before: the tenant's stored bytes are summed now, then kept up to date.
    assert_eq!(state.stored_bytes("alice").unwrap(), 0);
    let writes = state.result_writes();
    let stored = state
        .store_results(vec![
            item(ids[0], 1),
            item(ids[1], 2),
            item(ids[2], 3),
            item(ids[3], 1),
        ])
        .unwrap();
    assert_eq!(state.result_writes(), writes + 1, "one write for the group");
    let ended: Vec<bool> = stored.iter().map(|(_, e)| *e).collect();
    assert_eq!(ended, [true, true, false, true]);
    assert_eq!(
        stored[0].0.id, stored[3].0.id,
        "the same bytes, the same id"
    );
    assert_ne!(stored[0].0.id, stored[1].0.id);
    for (k, (b, want)) in [
        (1u8, JobState::Done),
        (2, JobState::Done),
        (3, JobState::Cancelled),
        (1, JobState::Done),
    ]
    .into_iter()
    .enumerate()
    {
        let job = state.job("alice", ids[k]).unwrap().unwrap();
        assert_eq!(job.state, want, "job {k}");
        if want == JobState::Done {
            assert_eq!(job.result_ref.as_deref(), Some(stored[k].0.id.as_str()));
            let bytes = state
                .read_object("alice", &stored[k].0.id)
                .unwrap()
                .unwrap();
            assert_eq!(bytes, data(b));
        } else {
            assert_eq!(job.result_ref, None);
        }
    }
    // Three records in one segment, not four: the repeated bytes were not written again
    // (records are 24 + 5000 bytes, or a 4 KiB-padded 8 KiB with direct I/O).
    let seg = std::fs::metadata(dir.path().join("segments").join("1.seg"))
        .unwrap()
        .len();
    assert!(seg == 3 * 5024 || seg == 3 * 8192, "{seg}");
    // Three results of 5000 bytes are stored (the cancelled job's too); a deleted one leaves
    // the count, and a repeated delete changes nothing.
    assert_eq!(state.stored_bytes("alice").unwrap(), 15_000);
    assert!(state.delete_object("alice", &stored[2].0.id).unwrap());
    assert!(!state.delete_object("alice", &stored[2].0.id).unwrap());
    assert_eq!(state.stored_bytes("alice").unwrap(), 10_000);
    // After a reopen (summed from the rows again), the same; every stored result reads back.
    drop(state);
    let state = State::open(dir.path()).unwrap();
    assert_eq!(state.stored_bytes("alice").unwrap(), 10_000);
    let again = state.read_object("alice", &stored[1].0.id).unwrap();
    assert_eq!(again.unwrap(), data(2));
}
