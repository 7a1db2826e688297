//! Uploaded ciphertexts as their validation parsed them, kept for the jobs that use them.
//!
//! A job's start otherwise reads the object file and parses it again (checksums included):
//! about a third of a millisecond per input at N = 2^13, on the path from a submission to its
//! job in the executor. Objects are content-addressed, so an id always names the same bytes;
//! the cache is bounded in bytes and forgets the oldest entries first.

use heloom_ckks::Ciphertext;
use heloom_store::Spill;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

/// Parsed input ciphertexts by (tenant, object id).
pub(crate) struct InputCache {
    inner: Mutex<Inner>,
    budget: usize,
}

/// (tenant, object id).
type Key = (String, String);

#[derive(Default)]
struct Inner {
    /// Each entry with its size in bytes.
    map: HashMap<Key, (Arc<Ciphertext<u64>>, usize)>,
    /// Insertion order (oldest first); entries already removed are skipped.
    order: VecDeque<Key>,
    bytes: usize,
}

impl InputCache {
    /// A cache holding at most `budget` bytes.
    pub(crate) fn new(budget: usize) -> Self {
        Self {
            inner: Mutex::new(Inner::default()),
            budget,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // Only map operations run under the lock.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps `ct`, the tenant's object `id` (nothing when it alone exceeds the budget).
    pub(crate) fn insert(&self, tenant: &str, id: &str, ct: Ciphertext<u64>) {
        let size = ct.memory_bytes();
        if size > self.budget {
            return;
        }
        let key = (tenant.to_string(), id.to_string());
        let mut g = self.lock();
        if let Some((_, old)) = g.map.insert(key.clone(), (Arc::new(ct), size)) {
            g.bytes -= old;
        } else {
            g.order.push_back(key);
        }
        g.bytes += size;
        while g.bytes > self.budget {
            let Some(k) = g.order.pop_front() else {
                break;
            };
            if let Some((_, n)) = g.map.remove(&k) {
                g.bytes -= n;
            }
        }
    }

    /// The tenant's object `id`, if kept.
    pub(crate) fn get(&self, tenant: &str, id: &str) -> Option<Arc<Ciphertext<u64>>> {
        let key = (tenant.to_string(), id.to_string());
        self.lock().map.get(&key).map(|(c, _)| Arc::clone(c))
    }

    /// Forgets the tenant's object `id` (deleted).
    pub(crate) fn remove(&self, tenant: &str, id: &str) {
        let key = (tenant.to_string(), id.to_string());
        let mut g = self.lock();
        if let Some((_, n)) = g.map.remove(&key) {
            g.bytes -= n;
            g.order.retain(|k| k != &key);
        }
    }

    /// Bytes held.
    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.lock().bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use heloom_ckks::{keygen, Context, Encryptor};

    #[test]
    fn bounded_oldest_first_and_forgets_deleted_objects() {
        let params = heloom_runtime::workload::default_params(11).expect("params");
        let ctx = Context::<u64>::new(params).expect("context");
        let keys = keygen(&ctx, &[], false).expect("keys");
        let enc = Encryptor::new(&ctx);
        let ct = enc.encrypt(&[0.5; 4], &keys.public_key).expect("encrypt");
        let one = ct.memory_bytes();
        let cache = InputCache::new(2 * one);
        cache.insert("a", "x", ct.clone());
        cache.insert("a", "y", ct.clone());
        assert_eq!(cache.bytes(), 2 * one);
        // Another tenant's id is another entry; the oldest goes.
        cache.insert("b", "x", ct.clone());
        assert!(cache.get("a", "x").is_none());
        assert!(cache.get("a", "y").is_some() && cache.get("b", "x").is_some());
        cache.remove("a", "y");
        assert!(cache.get("a", "y").is_none());
        assert_eq!(cache.bytes(), one);
        // Too large for the budget: not kept.
        let small = InputCache::new(one - 1);
        small.insert("a", "x", ct);
        assert!(small.get("a", "x").is_none());
    }
}
