//! Host memory for the pages of simulated MRAM ([`Page`]).
//!
//! A paper-scale run fills about 8 GiB of MRAM pages. Taken one by one from the allocator,
//! each 4 KiB of them costs a page fault on first touch, a quarter of such a run's time. So
//! pages are carved in order from large blocks mapped once and advised as transparent huge
//! pages (one fault per 2 MiB where the kernel allows it). A freed page goes on a free list
//! and is zeroed when handed out again; when no page is in use, every block is unmapped, so
//! memory goes back to the system between runs in one process.

use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::sync::Mutex;

/// Bytes of one page.
pub const PAGE_BYTES: usize = 64 * 1024;

/// Bytes of one block: 512 pages, 16 huge pages of 2 MiB.
const BLOCK_BYTES: usize = 32 << 20;

/// The alignment that lets the kernel back a block with huge pages.
const HUGE_PAGE_BYTES: usize = 2 << 20;

/// `PAGE_BYTES` bytes of host memory, zero when new, owned alone (not shared).
pub struct Page {
    ptr: NonNull<u8>,
}

// SAFETY: a page's bytes are reachable only through its one owner.
unsafe impl Send for Page {}
// SAFETY: shared access hands out `&[u8]` only.
unsafe impl Sync for Page {}

impl Page {
    /// A page of zeros.
    pub fn zeroed() -> Page {
        let (ptr, reused) = POOL.lock().unwrap_or_else(|e| e.into_inner()).take();
        if reused {
            // SAFETY: the pool hands out `ptr` to this page alone, `PAGE_BYTES` long.
            unsafe { std::ptr::write_bytes(ptr.as_ptr(), 0, PAGE_BYTES) };
        }
        Page { ptr }
    }
}

impl Deref for Page {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: `ptr` is `PAGE_BYTES` of mapped memory owned by this page.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), PAGE_BYTES) }
    }
}

impl DerefMut for Page {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `deref`, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), PAGE_BYTES) }
    }
}

impl Drop for Page {
    fn drop(&mut self) {
        POOL.lock()
            .unwrap_or_else(|e| e.into_inner())
            .give_back(self.ptr);
    }
}

impl Clone for Page {
    fn clone(&self) -> Page {
        let mut page = Page::zeroed();
        page.copy_from_slice(self);
        page
    }
}

impl PartialEq for Page {
    fn eq(&self, other: &Page) -> bool {
        **self == **other
    }
}

impl std::fmt::Debug for Page {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let touched = self.iter().filter(|&&b| b != 0).count();
        write!(f, "Page({touched} nonzero bytes)")
    }
}

/// The blocks pages come from. Addresses are kept as `usize` so the pool is `Send`.
struct Pool {
    /// Every mapped block: its start and length.
    blocks: Vec<(usize, usize)>,
    /// The next never-used page of the newest block, and that block's end.
    next: usize,
    end: usize,
    /// Pages given back, to be zeroed and handed out again.
    free: Vec<usize>,
    in_use: usize,
}

static POOL: Mutex<Pool> = Mutex::new(Pool {
    blocks: Vec::new(),
    next: 0,
    end: 0,
    free: Vec::new(),
    in_use: 0,
});

impl Pool {
    /// A page, and whether it was used before (so holds old bytes).
    fn take(&mut self) -> (NonNull<u8>, bool) {
        let (addr, reused) = match self.free.pop() {
            Some(addr) => (addr, true),
            None => {
                if self.next == self.end {
                    let (start, len) = map_block();
                    self.blocks.push((start, len));
                    (self.next, self.end) = (start, start + len);
                }
                self.next += PAGE_BYTES;
                (self.next - PAGE_BYTES, false)
            }
        };
        self.in_use += 1;
        let ptr = NonNull::new(addr as *mut u8).expect("a mapped page is not at address 0");
        (ptr, reused)
    }

    fn give_back(&mut self, ptr: NonNull<u8>) {
        assert!(
            self.in_use > 0,
            "a page given back that the pool did not hand out"
        );
        self.in_use -= 1;
        self.free.push(ptr.as_ptr() as usize);
        if self.in_use == 0 {
            for (start, len) in self.blocks.drain(..) {
                unmap(start, len);
            }
            self.free = Vec::new();
            (self.next, self.end) = (0, 0);
        }
    }
}

/// Maps a fresh block of zeros, `BLOCK_BYTES` long and aligned to a huge page, and advises
/// it as huge pages. Returns its start and length. Running out of address space aborts, as
/// any allocation failure does.
fn map_block() -> (usize, usize) {
    let len = BLOCK_BYTES + HUGE_PAGE_BYTES;
    // SAFETY: an anonymous private mapping; no existing memory is touched.
    let raw = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if raw == libc::MAP_FAILED {
        std::alloc::handle_alloc_error(
            std::alloc::Layout::from_size_align(BLOCK_BYTES, HUGE_PAGE_BYTES).expect("layout"),
        );
    }
    // Trim the mapping to an aligned block: unmap the bytes before and after it.
    let raw = raw as usize;
    let start = raw.next_multiple_of(HUGE_PAGE_BYTES);
    if start > raw {
        unmap(raw, start - raw);
    }
    let tail = raw + len - (start + BLOCK_BYTES);
    if tail > 0 {
        unmap(start + BLOCK_BYTES, tail);
    }
    advise_huge(start, BLOCK_BYTES);
    (start, BLOCK_BYTES)
}

#[cfg(target_os = "linux")]
fn advise_huge(start: usize, len: usize) {
    // SAFETY: advice on a range this pool mapped; a refusal only leaves small pages.
    unsafe { libc::madvise(start as *mut libc::c_void, len, libc::MADV_HUGEPAGE) };
}

#[cfg(not(target_os = "linux"))]
fn advise_huge(_start: usize, _len: usize) {}

fn unmap(start: usize, len: usize) {
    // SAFETY: the range was mapped by `map_block` and no page in it is in use.
    let r = unsafe { libc::munmap(start as *mut libc::c_void, len) };
    assert_eq!(r, 0, "munmap of a block this pool mapped");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reused_page_reads_as_zero_and_clones_are_independent() {
        let mut pages: Vec<Page> = (0..600).map(|_| Page::zeroed()).collect();
        assert!(pages.iter().all(|p| p.iter().all(|&b| b == 0)));
        for (i, p) in pages.iter_mut().enumerate() {
            p.fill(i as u8 | 1);
        }
        let mut copy = pages[3].clone();
        assert_eq!(copy, pages[3]);
        // Writes to the clone and to the original do not reach each other.
        copy[1] = 0xee;
        pages[3][2] = 0xdd;
        assert_eq!((copy[1], copy[2]), (0xee, 3 | 1));
        assert_eq!((pages[3][1], pages[3][2]), (3 | 1, 0xdd));
        pages.truncate(10);
        let again: Vec<Page> = (0..600).map(|_| Page::zeroed()).collect();
        assert!(again.iter().all(|p| p.iter().all(|&b| b == 0)));
        assert_eq!(copy[0], 3 | 1);
        assert!(
            pages
                .iter()
                .enumerate()
                .all(|(i, p)| p[PAGE_BYTES - 1] == i as u8 | 1)
        );
    }
}
