//! Who waits for which job: `GET /v1/jobs/{id}/wait` sleeps on its job's own notifier, so a
//! job's end wakes its waiters only. (One broadcast of every end to every waiter costs each
//! end O(waiters) wake-ups: with thousands of long-polling clients under a flood, that work
//! competed with the jobs themselves.)

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

/// The waiters of the jobs that have any.
#[derive(Default)]
pub(crate) struct Waiters {
    /// Job id to its notifier and the number of waiters holding it.
    map: Mutex<HashMap<i64, (Arc<Notify>, usize)>>,
}

/// A waiter's registration; dropping it unregisters.
pub(crate) struct Watch<'a> {
    waiters: &'a Waiters,
    id: i64,
    /// Notified when job `id` ends.
    pub(crate) notify: Arc<Notify>,
}

impl Waiters {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<i64, (Arc<Notify>, usize)>> {
        // Nothing but map operations runs under the lock.
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a waiter of job `id`. Create (and `enable`) a `notified()` future on the
    /// returned notifier before reading the job's state, so an end between the two is seen.
    pub(crate) fn watch(&self, id: i64) -> Watch<'_> {
        let mut map = self.map();
        let entry = map
            .entry(id)
            .or_insert_with(|| (Arc::new(Notify::new()), 0));
        entry.1 += 1;
        Watch {
            waiters: self,
            id,
            notify: Arc::clone(&entry.0),
        }
    }

    /// Job `id` ended (or changed state a waiter must see): wakes its waiters.
    pub(crate) fn notify(&self, id: i64) {
        if let Some((n, _)) = self.map().get(&id) {
            n.notify_waiters();
        }
    }

    /// Jobs with waiters now.
    #[cfg(test)]
    fn watched(&self) -> usize {
        self.map().len()
    }
}

impl Drop for Watch<'_> {
    fn drop(&mut self) {
        let mut map = self.waiters.map();
        if let Some(entry) = map.get_mut(&self.id) {
            entry.1 = entry.1.saturating_sub(1);
            if entry.1 == 0 {
                map.remove(&self.id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn an_end_wakes_its_waiters_only() {
        let w = Waiters::default();
        let (a, b) = (w.watch(1), w.watch(2));
        let a2 = w.watch(1);
        assert_eq!(w.watched(), 2);
        let (na, na2, nb) = (
            Arc::clone(&a.notify),
            Arc::clone(&a2.notify),
            Arc::clone(&b.notify),
        );
        let (na, na2, nb) = (na.notified(), na2.notified(), nb.notified());
        tokio::pin!(na, na2, nb);
        na.as_mut().enable();
        na2.as_mut().enable();
        nb.as_mut().enable();
        // Notified after `enable` and before the await: not missed.
        w.notify(1);
        let short = Duration::from_millis(50);
        assert!(tokio::time::timeout(short, na).await.is_ok());
        assert!(tokio::time::timeout(short, na2).await.is_ok());
        assert!(tokio::time::timeout(short, nb).await.is_err());
        // Unknown jobs: nothing to wake, nothing kept.
        w.notify(99);
        drop((a, a2));
        assert_eq!(w.watched(), 1);
        drop(b);
        assert_eq!(w.watched(), 0);
    }
}
