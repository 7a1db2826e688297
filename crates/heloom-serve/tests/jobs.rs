//! Job records: idempotent submission, tenant isolation, queue order, exactly one end per run,
//! cancellation, and recovery after a crash (the state reopened without a clean shutdown).

#![allow(clippy::unwrap_used)]

use heloom_serve::{JobState, NewJob, ServeError, State};

fn job<'a>(key: &'a str, digest: &'a str, priority: i32) -> NewJob<'a> {
    NewJob {
        idempotency_key: key,
        kind: "task-graph",
        input_digest: digest,
        priority,
        deadline_unix: None,
        spec: "{}",
    }
}

#[test]
fn submit_is_idempotent_and_tenants_are_isolated() {
    let dir = tempfile::tempdir().unwrap();
    let state = State::open(dir.path()).unwrap();
    state.create_token("alice").unwrap();
    state.create_token("bob").unwrap();
    let (a, new) = state.submit_job("alice", &job("k1", "d1", 0)).unwrap();
    assert!(new && a.state == JobState::Accepted && a.attempts == 0);
    // The same key and inputs: the same job, not a second one.
    let (again, new) = state.submit_job("alice", &job("k1", "d1", 0)).unwrap();
    assert!(!new && again == a);
    // The same key with other inputs is refused, naming the job.
    let e = state.submit_job("alice", &job("k1", "d2", 0)).unwrap_err();
    assert!(
        matches!(e, ServeError::IdempotencyConflict { job, .. } if job == a.id),
        "{e}"
    );
    // Another tenant may use the same key for its own job.
    let (b, new) = state.submit_job("bob", &job("k1", "d2", 0)).unwrap();
    assert!(new && b.id != a.id);
    // A tenant never sees another's job, and cannot cancel it.
    assert_eq!(state.job("bob", a.id).unwrap(), None);
    assert_eq!(state.job("alice", a.id).unwrap(), Some(a.clone()));
    assert!(!state.cancel_job("bob", a.id).unwrap());
    assert_eq!(state.jobs("alice").unwrap(), vec![a.clone()]);
    for bad in ["", "with space", &"k".repeat(129)] {
        let e = state.submit_job("alice", &job(bad, "d", 0)).unwrap_err();
        assert!(matches!(e, ServeError::InvalidRequest(_)), "{bad:?}: {e}");
    }
}

#[test]
fn queue_order_single_end_cancel_and_recovery() {
    let dir = tempfile::tempdir().unwrap();
    let ids = {
        let state = State::open(dir.path()).unwrap();
        state.create_token("t").unwrap();
        let low = state.submit_job("t", &job("low", "d", 0)).unwrap().0.id;
        let high = state.submit_job("t", &job("high", "d", 5)).unwrap().0.id;
        let low2 = state.submit_job("t", &job("low2", "d", 0)).unwrap().0.id;
        // Highest priority first, then oldest.
        let first = state.start_next().unwrap().unwrap();
        assert_eq!(
            (first.id, first.state, first.attempts),
            (high, JobState::Running, 1)
        );
        assert!(state.finish_job(high, Ok("results/high")).unwrap());
        // A run ends once: a second finish (e.g. a duplicate worker) changes nothing.
        assert!(!state.finish_job(high, Err("late")).unwrap());
        let done = state.job("t", high).unwrap().unwrap();
        assert_eq!(done.state, JobState::Done);
        assert_eq!(done.result_ref.as_deref(), Some("results/high"));
        assert_eq!(state.start_next().unwrap().unwrap().id, low);
        // Cancelled while queued: never started.
        assert!(state.cancel_job("t", low2).unwrap());
        assert!(!state.cancel_job("t", low2).unwrap());
        assert_eq!(state.start_next().unwrap(), None);
        // The process dies here, with `low` running (no shutdown, no finish).
        std::mem::forget(state);
        (low, low2, high)
    };
    let (low, low2, high) = ids;
    let state = State::open(dir.path()).unwrap();
    assert_eq!(
        state.job("t", low).unwrap().unwrap().state,
        JobState::Running
    );
    assert_eq!(state.recover().unwrap(), 1);
    let back = state.job("t", low).unwrap().unwrap();
    assert_eq!((back.state, back.started_ms), (JobState::Accepted, None));
    let again = state.start_next().unwrap().unwrap();
    assert_eq!((again.id, again.attempts), (low, 2));
    assert!(state.finish_job(low, Err("bad input")).unwrap());
    let failed = state.job("t", low).unwrap().unwrap();
    assert_eq!(
        (failed.state, failed.error.as_deref()),
        (JobState::Failed, Some("bad input"))
    );
    assert!(failed.state.is_final() && !JobState::Accepted.is_final());
    assert_eq!(
        state.job("t", low2).unwrap().unwrap().state,
        JobState::Cancelled
    );
    assert_eq!(state.job("t", high).unwrap().unwrap().state, JobState::Done);
    // Ended jobs cannot be cancelled.
    assert!(!state.cancel_job("t", high).unwrap());
    assert_eq!(state.recover().unwrap(), 0);
    // Only an ended job's record can be deleted, by its tenant only; its key is free again.
    let queued = state.submit_job("t", &job("queued", "d", 0)).unwrap().0.id;
    assert_eq!(state.delete_job("t", queued).unwrap(), Some(false));
    state.create_token("u").unwrap();
    assert_eq!(state.delete_job("u", high).unwrap(), None);
    for id in [high, low, low2] {
        assert_eq!(state.delete_job("t", id).unwrap(), Some(true));
        assert_eq!(state.delete_job("t", id).unwrap(), None);
        assert!(state.job("t", id).unwrap().is_none());
    }
    let (again, new) = state.submit_job("t", &job("high", "other", 0)).unwrap();
    assert!(new && again.id != high);
}

#[test]
fn express_slots_start_only_tenants_below_a_share() {
    let dir = tempfile::tempdir().unwrap();
    let state = State::open(dir.path()).unwrap();
    for t in ["heavy", "light"] {
        state.create_token(t).unwrap();
    }
    let h1 = state.submit_job("heavy", &job("h1", "d", 0)).unwrap().0.id;
    let h2 = state.submit_job("heavy", &job("h2", "d", 0)).unwrap().0.id;
    let h3 = state.submit_job("heavy", &job("h3", "d", 0)).unwrap().0.id;
    assert_eq!(state.start_next().unwrap().unwrap().id, h1);
    // Heavy has a job running: the express slot does not start its next one.
    assert_eq!(state.start_next_idle_tenant().unwrap(), None);
    let l1 = state.submit_job("light", &job("l1", "d", 0)).unwrap().0.id;
    let l2 = state.submit_job("light", &job("l2", "d", 0)).unwrap().0.id;
    // Light has nothing running: it starts, however old heavy's queue is.
    assert_eq!(state.start_next_idle_tenant().unwrap().unwrap().id, l1);
    assert_eq!(state.start_next_idle_tenant().unwrap(), None);
    // The regular order: fewest running first, then the oldest waiting job.
    assert_eq!(state.start_next().unwrap().unwrap().id, h2);
    assert_eq!(state.start_next().unwrap().unwrap().id, l2);
    assert_eq!(state.start_next().unwrap().unwrap().id, h3);
    assert_eq!(state.start_next().unwrap(), None);
    // Express slots for tenants below a share of two: light (one running) starts its next
    // job ahead of heavy's older one; heavy (two running) does not.
    let h4 = state.submit_job("heavy", &job("h4", "d", 0)).unwrap().0.id;
    let l3 = state.submit_job("light", &job("l3", "d", 0)).unwrap().0.id;
    let l4 = state.submit_job("light", &job("l4", "d", 0)).unwrap().0.id;
    assert!(state.finish_job(l2, Ok("r")).unwrap());
    assert_eq!(state.start_next_below(2).unwrap().unwrap().id, l3);
    assert_eq!(
        state.start_next_below(2).unwrap(),
        None,
        "light has two running now"
    );
    assert_eq!(state.start_next().unwrap().unwrap().id, l4);
    assert_eq!(state.start_next().unwrap().unwrap().id, h4);
    // Every tenant's gauges, zeros included.
    state.create_token("idle").unwrap();
    let depths = state.queue_depths().unwrap();
    let want = [("heavy", 0, 4), ("idle", 0, 0), ("light", 0, 3)];
    let got: Vec<(&str, u64, u64)> = depths
        .iter()
        .map(|(t, q, r)| (t.as_str(), *q, *r))
        .collect();
    assert_eq!(got, want);
    assert_eq!(state.queued_jobs(None).unwrap(), 0);
}
