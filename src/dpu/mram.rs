//! [`Mram`]: a DPU's MRAM as a sparse, lazily allocated byte store, so that thousands of
//! simulated 64 MiB banks cost only the pages a workload touches. Pages are 64 KiB
//! ([`PAGE_BYTES`]), so a 64 MiB bank's page table has 1,024 slots while a touched page costs
//! little; their host memory comes from [`super::pages`].

/// A host access beyond the end of a DPU's MRAM.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "MRAM overflow: {size_bytes} bytes at {addr:#x} end beyond the {mram_size_bytes}-byte MRAM"
)]
pub struct MramOverflow {
    pub addr: u64,
    pub size_bytes: u64,
    pub mram_size_bytes: u64,
}

use super::pages::{PAGE_BYTES, Page};

/// The MRAM of one DPU. Bytes never written read as zero (real MRAM holds whatever was there;
/// a correct kernel never reads what it did not write).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Mram {
    size_bytes: u64,
    pages: Vec<Option<Page>>,
}

impl Mram {
    pub fn new(size_bytes: u64) -> Mram {
        Mram {
            size_bytes,
            pages: Vec::new(),
        }
    }

    pub fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    /// Bytes of host memory the touched pages hold.
    pub fn resident_bytes(&self) -> u64 {
        self.pages.iter().flatten().count() as u64 * PAGE_BYTES as u64
    }

    /// Whether `size` bytes at `addr` lie inside the bank.
    pub fn contains(&self, addr: u64, size: u64) -> bool {
        addr.checked_add(size)
            .is_some_and(|end| end <= self.size_bytes)
    }

    fn check(&self, addr: u64, size: usize) -> Result<(), MramOverflow> {
        if self.contains(addr, size as u64) {
            Ok(())
        } else {
            Err(MramOverflow {
                addr,
                size_bytes: size as u64,
                mram_size_bytes: self.size_bytes,
            })
        }
    }

    /// [`read`](Self::read), or an error if the range is not inside the bank.
    pub fn try_read(&self, addr: u64, out: &mut [u8]) -> Result<(), MramOverflow> {
        self.check(addr, out.len())?;
        self.read(addr, out);
        Ok(())
    }

    /// [`write`](Self::write), or an error if the range is not inside the bank (host code
    /// placing data should use this, so that data larger than MRAM is an error).
    pub fn try_write(&mut self, addr: u64, data: &[u8]) -> Result<(), MramOverflow> {
        self.check(addr, data.len())?;
        self.write(addr, data);
        Ok(())
    }

    /// Asks the host CPU to bring `size` bytes at `addr` into its caches, ahead of a read
    /// that will follow. No simulated effect: simulated time, stats and bytes are unchanged,
    /// and a range outside the bank or on an untouched page is ignored.
    #[inline]
    pub fn prefetch(&self, addr: u64, size: u64) {
        if !self.contains(addr, size) {
            return;
        }
        let (first, end) = (addr as usize, (addr + size) as usize);
        let mut at = first & !63;
        while at < end {
            let (page, offset) = (at / PAGE_BYTES, at % PAGE_BYTES);
            if let Some(Some(p)) = self.pages.get(page) {
                crate::cache::prefetch(p.as_ptr().wrapping_add(offset));
            }
            at += 64;
        }
    }

    /// Copies `out.len()` bytes at `addr` into `out`.
    ///
    /// # Panics
    ///
    /// If the range is not inside the bank; use [`try_read`](Self::try_read) when it may not be.
    pub fn read(&self, addr: u64, out: &mut [u8]) {
        assert!(
            self.contains(addr, out.len() as u64),
            "MRAM read out of range"
        );
        let mut done = 0;
        while done < out.len() {
            let at = addr as usize + done;
            let (page, offset) = (at / PAGE_BYTES, at % PAGE_BYTES);
            let n = (PAGE_BYTES - offset).min(out.len() - done);
            match self.pages.get(page).and_then(Option::as_ref) {
                Some(p) => out[done..done + n].copy_from_slice(&p[offset..offset + n]),
                None => out[done..done + n].fill(0),
            }
            done += n;
        }
    }

    /// Writes `data` at `addr`, allocating pages on first touch.
    ///
    /// # Panics
    ///
    /// If the range is not inside the bank; use [`try_write`](Self::try_write) when it may
    /// not be.
    pub fn write(&mut self, addr: u64, data: &[u8]) {
        assert!(
            self.contains(addr, data.len() as u64),
            "MRAM write out of range"
        );
        let mut done = 0;
        while done < data.len() {
            let at = addr as usize + done;
            let (page, offset) = (at / PAGE_BYTES, at % PAGE_BYTES);
            let n = (PAGE_BYTES - offset).min(data.len() - done);
            if self.pages.len() <= page {
                self.pages.resize(page + 1, None);
            }
            let p = self.pages[page].get_or_insert_with(Page::zeroed);
            p[offset..offset + n].copy_from_slice(&data[done..done + n]);
            done += n;
        }
    }

    /// Gives back the host memory of every page that lies wholly at or above `addr` (those
    /// bytes read as zero again); a page that begins below `addr` keeps its bytes. For host
    /// code that is done with a region, such as a streamed batch's buffers.
    pub fn discard_from(&mut self, addr: u64) {
        let first = (addr as usize).div_ceil(PAGE_BYTES);
        if first < self.pages.len() {
            self.pages.truncate(first);
            self.pages.shrink_to_fit();
        }
    }

    /// Convenience for host code: writes 64-bit little-endian words at `addr`.
    pub fn write_u64s(&mut self, addr: u64, words: &[u64]) {
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        self.write(addr, &bytes);
    }

    /// Convenience for host code: reads `count` 64-bit little-endian words at `addr`.
    pub fn read_u64s(&self, addr: u64, count: usize) -> Vec<u64> {
        let mut bytes = vec![0u8; count * 8];
        self.read(addr, &mut bytes);
        bytes
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8-byte chunk")))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparse_pages_cross_boundaries_and_read_zero_when_untouched() {
        let mut m = Mram::new(64 << 20);
        let data: Vec<u8> = (0..200u8).collect();
        let addr = PAGE_BYTES as u64 - 100;
        m.write(addr, &data);
        let mut back = vec![0u8; 200];
        m.read(addr, &mut back);
        assert_eq!(back, data);
        assert_eq!(m.resident_bytes(), 2 * PAGE_BYTES as u64);
        let mut far = [7u8; 8];
        m.read((60 << 20) as u64, &mut far);
        assert_eq!(far, [0; 8]);
        assert!(!m.contains(64 << 20, 1));
        let e = m.try_write((64 << 20) - 4, &[0; 8]).unwrap_err();
        assert_eq!(e.mram_size_bytes, 64 << 20);
        assert!(m.try_read(0, &mut [0; 8]).is_ok());
    }

    #[test]
    fn a_prefetch_changes_nothing_and_ignores_what_is_not_there() {
        let mut m = Mram::new(1 << 20);
        m.write(PAGE_BYTES as u64 - 8, &[3u8; 16]);
        let before = m.clone();
        m.prefetch(PAGE_BYTES as u64 - 8, 16); // across two touched pages
        m.prefetch(4 * PAGE_BYTES as u64, 2048); // an untouched page
        m.prefetch((1 << 20) - 8, 64); // beyond the bank
        m.prefetch(u64::MAX - 8, 64); // beyond the address space
        assert_eq!(m, before);
        assert_eq!(m.resident_bytes(), 2 * PAGE_BYTES as u64);
    }

    #[test]
    fn discarding_frees_whole_pages_above_the_address_and_keeps_the_rest() {
        let mut m = Mram::new(1 << 20);
        m.write(0, &[7u8; 3 * PAGE_BYTES]);
        let addr = PAGE_BYTES as u64 + 10;
        m.discard_from(addr);
        assert_eq!(m.resident_bytes(), 2 * PAGE_BYTES as u64);
        let mut out = [0u8; 4];
        m.read(addr, &mut out);
        assert_eq!(out, [7; 4], "the page holding the address keeps its bytes");
        m.read(2 * PAGE_BYTES as u64, &mut out);
        assert_eq!(out, [0; 4], "a discarded page reads as zero");
        m.discard_from(0);
        assert_eq!(m.resident_bytes(), 0);
    }
}
