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
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
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
