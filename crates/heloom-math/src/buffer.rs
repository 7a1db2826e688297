//! [`AlignedVec`]: the word buffer under every polynomial, NTT table and pooled scratch,
//! 64-byte aligned (one cache line, one AVX-512 register) and allocated from mimalloc whatever
//! the program's global allocator is.
//!
//! Why mimalloc inside the library: mimalloc backs its segments with transparent huge pages,
//! the system allocator (glibc) does not, and key switching streams through tens of megabytes
//! of keys, digits and tables per call. Measured on an Intel Xeon at N = 2^14: a process on
//! glibc held 0 kB of huge pages against 168 MiB of 171 MiB under mimalloc, and its
//! relinearizations and rotations ran 7-13% slower (`bench/results/memory-intel-xeon/`).
//! Allocating the large buffers here, as SEAL's memory pools do, gives a program on the system
//! allocator the speed of a mimalloc build.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Alignment of every buffer in bytes.
const ALIGN: usize = 64;

/// A growable, 64-byte aligned buffer of plain words (`u32`, `u64`), allocated from mimalloc.
pub struct AlignedVec<W: Copy> {
    /// The first word; dangling (and never freed) while `cap == 0`.
    ptr: NonNull<W>,
    /// Initialized words.
    len: usize,
    /// Allocated words.
    cap: usize,
}

// SAFETY: an AlignedVec owns its allocation exclusively (like `Vec<W>`), and mimalloc frees
// blocks from any thread.
unsafe impl<W: Copy + Send> Send for AlignedVec<W> {}
// SAFETY: shared references only read the words.
unsafe impl<W: Copy + Sync> Sync for AlignedVec<W> {}

/// Bytes of all live aligned buffers (polynomials, keys, scratch), and their peak.
static LIVE: AtomicUsize = AtomicUsize::new(0);
static LIVE_PEAK: AtomicUsize = AtomicUsize::new(0);

/// Bytes held by live polynomial buffers right now (what the allocator keeps for reuse is
/// not counted): memory measurements that tell live data from allocator caching.
pub fn live_buffer_bytes() -> usize {
    LIVE.load(Ordering::Relaxed)
}

/// The most bytes [`live_buffer_bytes`] reached since the last call (or the start), and a
/// new start.
pub fn take_peak_buffer_bytes() -> usize {
    LIVE_PEAK.swap(LIVE.load(Ordering::Relaxed), Ordering::Relaxed)
}

impl<W: Copy> AlignedVec<W> {
    /// An empty buffer with room for `cap` words.
    pub fn with_capacity(cap: usize) -> Self {
        let mut v = Self {
            ptr: NonNull::dangling(),
            len: 0,
            cap: 0,
        };
        v.reserve_exact(cap);
        v
    }

    /// Words held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no word is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Words the allocation has room for.
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Grows the allocation to exactly `cap` words if it is smaller.
    fn reserve_exact(&mut self, cap: usize) {
        if cap <= self.cap {
            return;
        }
        let bytes = cap
            .checked_mul(size_of::<W>())
            .unwrap_or_else(|| panic!("buffer of {cap} words overflows the address space"));
        let old = if self.cap == 0 {
            std::ptr::null_mut()
        } else {
            self.ptr.as_ptr().cast()
        };
        // SAFETY: `old` is null or a block this buffer got from mimalloc with the same
        // alignment; mimalloc keeps the first `len` words (the block may move).
        let p = unsafe { libmimalloc_sys::mi_realloc_aligned(old, bytes, ALIGN) };
        match NonNull::new(p.cast::<W>()) {
            Some(p) => self.ptr = p,
            None => std::alloc::handle_alloc_error(
                std::alloc::Layout::from_size_align(bytes, ALIGN)
                    .unwrap_or(std::alloc::Layout::new::<W>()),
            ),
        }
        let grown = (cap - self.cap) * size_of::<W>();
        let now = LIVE.fetch_add(grown, Ordering::Relaxed) + grown;
        LIVE_PEAK.fetch_max(now, Ordering::Relaxed);
        self.cap = cap;
    }

    /// Appends `x` (growing the allocation by doubling when full).
    pub fn push(&mut self, x: W) {
        if self.len == self.cap {
            self.reserve_exact((2 * self.cap).max(16));
        }
        // SAFETY: len < cap after the reservation: the word lies in the allocation.
        unsafe { self.ptr.as_ptr().add(self.len).write(x) };
        self.len += 1;
    }

    /// Sets the length to `new_len`, filling new words with `value`.
    pub fn resize(&mut self, new_len: usize, value: W) {
        if new_len > self.len {
            self.reserve_exact(new_len);
            // SAFETY: words len..new_len lie in the allocation (cap >= new_len); they are
            // written before the length covers them.
            let tail = unsafe {
                std::slice::from_raw_parts_mut(
                    self.ptr
                        .as_ptr()
                        .add(self.len)
                        .cast::<std::mem::MaybeUninit<W>>(),
                    new_len - self.len,
                )
            };
            for t in tail {
                t.write(value);
            }
        }
        self.len = new_len;
    }

    /// Keeps the first `len` words (no effect when already shorter).
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Drops every word, keeping the allocation.
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// A buffer holding a copy of `s`.
    pub fn from_slice(s: &[W]) -> Self {
        let mut v = Self::with_capacity(s.len());
        // SAFETY: the allocation has room for s.len() words and does not overlap `s`.
        unsafe { std::ptr::copy_nonoverlapping(s.as_ptr(), v.ptr.as_ptr(), s.len()) };
        v.len = s.len();
        v
    }
}

impl<'a, W: Copy> IntoIterator for &'a AlignedVec<W> {
    type Item = &'a W;
    type IntoIter = std::slice::Iter<'a, W>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<'a, W: Copy> IntoIterator for &'a mut AlignedVec<W> {
    type Item = &'a mut W;
    type IntoIter = std::slice::IterMut<'a, W>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter_mut()
    }
}

impl<W: Copy> FromIterator<W> for AlignedVec<W> {
    fn from_iter<I: IntoIterator<Item = W>>(iter: I) -> Self {
        let iter = iter.into_iter();
        let mut v = Self::with_capacity(iter.size_hint().0);
        for x in iter {
            v.push(x);
        }
        v
    }
}

impl<W: Copy + Default> AlignedVec<W> {
    /// A buffer of `n` words set to `W::default()` (zero for the word types).
    pub fn zeroed(n: usize) -> Self {
        let mut v = Self::with_capacity(n);
        v.resize(n, W::default());
        v
    }
}

impl<W: Copy> Drop for AlignedVec<W> {
    fn drop(&mut self) {
        if self.cap > 0 {
            LIVE.fetch_sub(self.cap * size_of::<W>(), Ordering::Relaxed);
            // SAFETY: the block came from mimalloc (`mi_realloc_aligned`) and is freed once.
            unsafe { libmimalloc_sys::mi_free(self.ptr.as_ptr().cast()) };
        }
    }
}

impl<W: Copy> Deref for AlignedVec<W> {
    type Target = [W];
    fn deref(&self) -> &[W] {
        // SAFETY: the first `len` words are initialized; a dangling pointer is valid for an
        // empty slice.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<W: Copy> DerefMut for AlignedVec<W> {
    fn deref_mut(&mut self) -> &mut [W] {
        // SAFETY: as in `deref`, and `&mut self` is exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<W: Copy> Clone for AlignedVec<W> {
    fn clone(&self) -> Self {
        Self::from_slice(self)
    }
}

impl<W: Copy> Default for AlignedVec<W> {
    fn default() -> Self {
        Self::with_capacity(0)
    }
}

impl<W: Copy + fmt::Debug> fmt::Debug for AlignedVec<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<W: Copy + PartialEq> PartialEq for AlignedVec<W> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl<W: Copy + Eq> Eq for AlignedVec<W> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_keeps_words_and_stays_aligned() {
        let mut v = AlignedVec::<u64>::with_capacity(3);
        assert!(v.is_empty() && v.capacity() == 3);
        for i in 0..1000u64 {
            v.push(i * 3);
            assert_eq!(v.as_ptr() as usize % ALIGN, 0);
        }
        assert_eq!(v.len(), 1000);
        assert!(v.iter().enumerate().all(|(i, &x)| x == 3 * i as u64));
        v.truncate(10);
        v.resize(20, 7);
        assert_eq!(&v[8..12], &[24, 27, 7, 7]);
        let big = 1 << 20;
        v.resize(big, 1);
        assert_eq!((v.len(), v[9], v[10], v[big - 1]), (big, 27, 7, 1));
        assert_eq!(v.as_ptr() as usize % ALIGN, 0);
        let w = v.clone();
        assert_eq!(w, v);
        assert_eq!(w.as_ptr() as usize % ALIGN, 0);
        v.clear();
        assert!(v.is_empty() && v.capacity() >= big);
        let c: AlignedVec<u32> = (0..40).collect();
        assert_eq!((c.len(), c[39]), (40, 39));
        assert_eq!(&*AlignedVec::<u64>::zeroed(3), &[0, 0, 0]);
        let e = AlignedVec::<u32>::default();
        assert!(e.is_empty() && e.capacity() == 0 && e.iter().next().is_none());
        assert_eq!(
            format!("{:?}", AlignedVec::from_slice(&[1u32, 2])),
            "[1, 2]"
        );
    }

    #[test]
    fn moves_between_threads() {
        let v = AlignedVec::from_slice(&[5u32; 100]);
        let v = std::thread::spawn(move || {
            let mut v = v;
            v.push(6);
            v
        })
        .join()
        .expect("thread");
        assert_eq!((v.len(), v[0], v[100]), (101, 5, 6));
    }
}
