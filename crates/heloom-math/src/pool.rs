//! Recycled polynomial buffers: the scratch of key switching and rescaling (raised digits,
//! inner-product sums, mod-down temporaries) taken from and returned to a pool owned by the
//! context, so an operation does not ask the allocator for megabytes each time. With glibc's
//! allocator a fresh multi-megabyte buffer can cost page faults on every call; a recycled one
//! is already mapped and warm in the TLB, so a program on the system allocator gets the speed
//! of one on mimalloc.

use crate::ntt::AlignedVec;
use crate::poly::{Form, RnsBasis, RnsPoly};
use crate::word::Word;
use std::ops::{Deref, DerefMut};
use std::sync::Mutex;

/// How many free buffers a pool keeps at most (beyond that, returned buffers are freed): a
/// few per thread of a key switch in flight.
const MAX_FREE: usize = 48;

/// A pool of 64-byte aligned word buffers of any size (best fit on take).
#[derive(Debug, Default)]
pub struct BufferPool<W: Word> {
    free: Mutex<Vec<AlignedVec<W>>>,
}

impl<W: Word> Clone for BufferPool<W> {
    /// A new, empty pool (buffers are not shared between clones).
    fn clone(&self) -> Self {
        Self::default()
    }
}

impl<W: Word> BufferPool<W> {
    /// An empty pool.
    pub fn new() -> Self {
        Self::default()
    }

    /// A buffer of `len` zero words: the smallest free one that fits, or a new one.
    pub fn take(&self, len: usize) -> AlignedVec<W> {
        let mut buf = self.find(len);
        buf.clear();
        buf.resize(len, W::ZERO);
        buf
    }

    /// A buffer of `len` words for an output that is written whole before it is read: a
    /// recycled buffer keeps its old words (initialized, just stale), so no time goes into
    /// zeroing it; only words it never held are zeroed.
    pub fn take_for_overwrite(&self, len: usize) -> AlignedVec<W> {
        let mut buf = self.find(len);
        if buf.len() >= len {
            buf.truncate(len);
        } else {
            buf.resize(len, W::ZERO);
        }
        buf
    }

    /// The smallest free buffer with room for `len` words, or a new empty one.
    fn find(&self, len: usize) -> AlignedVec<W> {
        let found = self.free.lock().ok().and_then(|mut free| {
            let best = free
                .iter()
                .enumerate()
                .filter(|(_, b)| b.capacity() >= len)
                .min_by_key(|(_, b)| b.capacity())
                .map(|(i, _)| i)?;
            Some(free.swap_remove(best))
        });
        found.unwrap_or_else(|| AlignedVec::with_capacity(len))
    }

    /// Returns a buffer for reuse (freed instead when the pool is full).
    pub fn give(&self, buf: AlignedVec<W>) {
        if buf.capacity() == 0 {
            return;
        }
        if let Ok(mut free) = self.free.lock() {
            if free.len() < MAX_FREE {
                free.push(buf);
            }
        }
    }

    /// The zero polynomial of `basis` in `form`, in a recycled buffer.
    pub fn zero(&self, basis: &RnsBasis<W>, form: Form) -> RnsPoly<W> {
        basis.poly_in(self.take(basis.n() * basis.len()), form)
    }

    /// A polynomial of `basis` in `form` whose words are unspecified (a recycled buffer's old
    /// words, or zeros), for an output every word of which is written before it is read.
    pub fn for_overwrite(&self, basis: &RnsBasis<W>, form: Form) -> RnsPoly<W> {
        basis.poly_in(self.take_for_overwrite(basis.n() * basis.len()), form)
    }

    /// Returns a polynomial's buffer for reuse.
    pub fn recycle(&self, p: RnsPoly<W>) {
        self.give(p.into_buffer());
    }

    /// A scratch slice of `len` zero words that goes back to the pool when dropped.
    pub fn scratch(&self, len: usize) -> Scratch<'_, W> {
        Scratch {
            pool: self,
            buf: Some(self.take(len)),
        }
    }

    /// Number of free buffers held.
    pub fn free_buffers(&self) -> usize {
        self.free.lock().map(|f| f.len()).unwrap_or(0)
    }

    /// Bytes held by the free buffers.
    pub fn free_bytes(&self) -> usize {
        self.free
            .lock()
            .map(|f| {
                f.iter()
                    .map(|b| b.capacity() * std::mem::size_of::<W>())
                    .sum()
            })
            .unwrap_or(0)
    }
}

/// A slice borrowed from a [`BufferPool`], returned to it on drop.
#[derive(Debug)]
pub struct Scratch<'a, W: Word> {
    pool: &'a BufferPool<W>,
    buf: Option<AlignedVec<W>>,
}

impl<W: Word> Deref for Scratch<'_, W> {
    type Target = [W];
    fn deref(&self) -> &[W] {
        self.buf.as_deref().unwrap_or(&[])
    }
}

impl<W: Word> DerefMut for Scratch<'_, W> {
    fn deref_mut(&mut self) -> &mut [W] {
        self.buf.as_deref_mut().unwrap_or(&mut [])
    }
}

impl<W: Word> Drop for Scratch<'_, W> {
    fn drop(&mut self) {
        if let Some(b) = self.buf.take() {
            self.pool.give(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recycled_buffers_come_back_zeroed_and_best_fit() {
        let pool = BufferPool::<u64>::new();
        let mut a = pool.take(1000);
        a.iter_mut().for_each(|x| *x = 7);
        let big = pool.take(5000);
        let (pa, pbig) = (a.as_ptr(), big.as_ptr());
        pool.give(big);
        pool.give(a);
        assert_eq!(pool.free_buffers(), 2);
        // The smallest buffer that fits, zeroed.
        let b = pool.take(900);
        assert_eq!(b.as_ptr(), pa);
        assert_eq!(b.len(), 900);
        assert!(b.iter().all(|&x| x == 0));
        let c = pool.take(4000);
        assert_eq!(c.as_ptr(), pbig);
        // Nothing fits: a new buffer.
        let d = pool.take(10_000);
        assert!(d.len() == 10_000 && d.iter().all(|&x| x == 0));
        assert_eq!(pool.free_buffers(), 0);
        {
            let mut s = pool.scratch(16);
            s[3] = 9;
            assert_eq!(s.len(), 16);
        }
        assert_eq!(pool.free_buffers(), 1);
        // The pool keeps at most MAX_FREE buffers.
        for _ in 0..MAX_FREE + 5 {
            pool.give(pool.take(8).clone());
        }
        assert!(pool.free_buffers() <= MAX_FREE);
        // A polynomial's buffer goes back and out again as a zero polynomial.
        let basis = crate::RnsBasis::<u64>::new(
            16,
            &crate::primes::ntt_primes::<u64>(30, 16, 2).expect("primes"),
        )
        .expect("basis");
        let mut p = pool.zero(&basis, Form::Ntt);
        p.as_mut_slice().iter_mut().for_each(|x| *x = 1);
        pool.recycle(p);
        let q = pool.zero(&basis, Form::Coeff);
        assert!(basis.owns(&q) && q.form() == Form::Coeff);
        assert!(q.as_slice().iter().all(|&x| x == 0));
    }

    #[test]
    fn buffers_for_overwrite_skip_the_zeroing_of_recycled_words_only() {
        let pool = BufferPool::<u32>::new();
        let mut a = pool.take(100);
        a.iter_mut().for_each(|x| *x = 5);
        let pa = a.as_ptr();
        pool.give(a);
        // Recycled: the same memory, its old words kept (shorter request: truncated).
        let b = pool.take_for_overwrite(60);
        assert_eq!((b.as_ptr(), b.len()), (pa, 60));
        assert!(b.iter().all(|&x| x == 5));
        pool.give(b);
        // Longer than the words it held (capacity 100, length 60): the new words are zero.
        let c = pool.take_for_overwrite(100);
        assert_eq!(c.as_ptr(), pa);
        assert!(c[..60].iter().all(|&x| x == 5) && c[60..].iter().all(|&x| x == 0));
        // Fresh: zeroed.
        let d = pool.take_for_overwrite(1000);
        assert!(d.len() == 1000 && d.iter().all(|&x| x == 0));
        // As a polynomial: right basis and form.
        let basis = crate::RnsBasis::<u32>::new(
            16,
            &crate::primes::ntt_primes::<u32>(30, 16, 2).expect("primes"),
        )
        .expect("basis");
        let p = pool.for_overwrite(&basis, Form::Ntt);
        assert!(basis.owns(&p) && p.form() == Form::Ntt);
    }
}
