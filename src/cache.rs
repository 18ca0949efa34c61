//! Hints to the host CPU's caches, for loops whose next reads are known ahead and would
//! otherwise wait on one cache miss after another. A hint changes no result.

/// Asks the host CPU to bring the cache line holding `p` into its caches. `p` need not be
/// valid: a prefetch reads nothing and never faults.
#[inline(always)]
pub fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch instruction accesses no memory the program can observe and does
    // not fault, whatever the address.
    unsafe {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        _mm_prefetch::<_MM_HINT_T0>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
