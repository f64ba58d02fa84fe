//! A counting global allocator: it records the largest single allocation (or reallocation)
//! made while counting is on, on any thread, so a fuzz run can check that no decoder allocates
//! past the limit it is bounded by.
//!
//! It counts only where a binary installs it:
//!
//! ```text
//! #[global_allocator]
//! static ALLOC: secinfer_fuzz::peak::PeakAllocator = secinfer_fuzz::peak::PeakAllocator;
//! ```
//!
//! [`crate::mutate_and_run`] turns counting on around each execution and reads the largest
//! allocation it made; without the allocator installed every reading is 0 ([`installed`]
//! says which).
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// The system allocator, recording the largest request made while counting is on.
pub struct PeakAllocator;

static COUNTING: AtomicBool = AtomicBool::new(false);
static LARGEST: AtomicUsize = AtomicUsize::new(0);
/// Set by the allocator on any counted call: tells a run whether it is installed at all.
static SEEN: AtomicBool = AtomicBool::new(false);

#[inline]
fn record(size: usize) {
    if COUNTING.load(Ordering::Relaxed) {
        LARGEST.fetch_max(size, Ordering::Relaxed);
        SEEN.store(true, Ordering::Relaxed);
    }
}

#[allow(unsafe_code)]
// SAFETY: every call is forwarded unchanged to the system allocator, which upholds the
// GlobalAlloc contract; the wrapper only reads the requested size.
unsafe impl GlobalAlloc for PeakAllocator {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        record(l.size());
        // SAFETY: the caller's layout is passed through unchanged.
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        record(l.size());
        // SAFETY: the caller's layout is passed through unchanged.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: `p` was allocated by System with layout `l` (every allocation goes there).
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        record(n);
        // SAFETY: forwarded unchanged from the caller, who upholds realloc's contract.
        unsafe { System.realloc(p, l, n) }
    }
}

/// Starts counting from zero.
pub fn start() {
    LARGEST.store(0, Ordering::Relaxed);
    COUNTING.store(true, Ordering::SeqCst);
}

/// Stops counting; returns the largest single allocation since [`start`].
pub fn stop() -> usize {
    COUNTING.store(false, Ordering::SeqCst);
    LARGEST.load(Ordering::Relaxed)
}

/// Whether a [`PeakAllocator`] has counted anything in this process: `false` means it is not
/// the global allocator (or nothing ran with counting on), so the readings mean nothing.
pub fn installed() -> bool {
    SEEN.load(Ordering::Relaxed)
}
