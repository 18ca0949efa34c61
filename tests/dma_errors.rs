//! DMA faults: a size that is not a multiple of 8, above 2,048 or zero, a misaligned
//! address, a transfer beyond MRAM. Each is an error naming the tasklet and the values.

mod common;

use pimdes::dpu::{Dpu, Kernel, KernelError, LaunchReport, Tasklet};
use pimdes::machine::DmaDirection;

fn launch<K: Kernel>(kernel: &K, tasklets: u32) -> Result<LaunchReport, KernelError> {
    let m = common::machine(&[]);
    Dpu::new(&m.dpu, 0).launch(kernel, tasklets)
}

/// One DMA with the given parameters from tasklet 0.
struct Dma {
    direction: DmaDirection,
    mram_addr: u64,
    wram_offset: u32,
    size: u32,
}

impl Kernel for Dma {
    async fn tasklet(&self, t: &Tasklet) -> Result<(), KernelError> {
        let buf = t.mem_alloc(4096)? + self.wram_offset;
        match self.direction {
            DmaDirection::Read => t.mram_read(self.mram_addr, buf, self.size).await,
            DmaDirection::Write => t.mram_write(buf, self.mram_addr, self.size).await,
        }
    }
}

fn dma(direction: DmaDirection, mram_addr: u64, wram_offset: u32, size: u32) -> KernelError {
    launch(
        &Dma {
            direction,
            mram_addr,
            wram_offset,
            size,
        },
        1,
    )
    .unwrap_err()
}

#[test]
fn dma_size_not_a_multiple_of_8_is_an_error() {
    let e = dma(DmaDirection::Read, 0, 0, 12);
    assert!(
        matches!(
            e,
            KernelError::DmaSize {
                size_bytes: 12,
                tasklet: 0,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("multiple of 8"), "{e}");
}

#[test]
fn dma_size_above_2048_or_zero_is_an_error() {
    let e = dma(DmaDirection::Write, 0, 0, 4096);
    assert!(
        matches!(
            e,
            KernelError::DmaSize {
                size_bytes: 4096,
                max: 2048,
                ..
            }
        ),
        "{e}"
    );
    let e = dma(DmaDirection::Read, 0, 0, 0);
    assert!(
        matches!(e, KernelError::DmaSize { size_bytes: 0, .. }),
        "{e}"
    );
}

#[test]
fn misaligned_dma_addresses_are_errors() {
    let e = dma(DmaDirection::Read, 4, 0, 8);
    assert!(
        matches!(e, KernelError::DmaAlignment { mram_addr: 4, .. }),
        "{e}"
    );
    let e = dma(DmaDirection::Write, 0, 4, 8);
    assert!(
        matches!(e, KernelError::DmaAlignment { alignment: 8, .. }),
        "{e}"
    );
}

#[test]
fn dma_beyond_mram_is_an_error() {
    let e = dma(DmaDirection::Read, (64 << 20) - 8, 0, 16);
    assert!(
        matches!(
            e,
            KernelError::MramOutOfRange {
                mram_size_bytes: 67_108_864,
                ..
            }
        ),
        "{e}"
    );
}
