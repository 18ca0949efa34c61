//! Memory capacity faults: WRAM overflow (heap, stacks), WRAM accesses out of range or
//! misaligned, a kernel larger than IRAM.

mod common;

use pimdes::dpu::{Dpu, Kernel, KernelError, LaunchReport, Tasklet};

fn launch<K: Kernel>(kernel: &K, tasklets: u32) -> Result<LaunchReport, KernelError> {
    let m = common::machine(&[]);
    Dpu::new(&m.dpu, 0).launch(kernel, tasklets)
}

/// Allocates `bytes` of WRAM heap.
struct Alloc {
    bytes: u32,
}

impl Kernel for Alloc {
    async fn tasklet(&self, t: &Tasklet) -> Result<(), KernelError> {
        t.mem_alloc(self.bytes).map(|_| ())
    }
}

#[test]
fn wram_overflow_is_an_error() {
    // 64 KiB WRAM minus 1 KiB of stack: 64,512 bytes of heap.
    assert!(launch(&Alloc { bytes: 64_512 }, 1).is_ok());
    let e = launch(&Alloc { bytes: 64_520 }, 1).unwrap_err();
    assert!(
        matches!(
            e,
            KernelError::WramOverflow {
                requested_bytes: 64_520,
                available_bytes: 64_512,
                ..
            }
        ),
        "{e}"
    );
    // The stacks alone can overflow WRAM.
    let m = common::machine(&["dpu.stack_bytes_per_tasklet=4096"]);
    let e = Dpu::new(&m.dpu, 0)
        .launch(&Alloc { bytes: 8 }, 24)
        .unwrap_err();
    assert!(
        matches!(
            e,
            KernelError::WramOverflow {
                requested_bytes: 98_304,
                ..
            }
        ),
        "{e}"
    );
}

/// WRAM accessors out of range or misaligned.
struct BadWram {
    addr: u32,
}

impl Kernel for BadWram {
    async fn tasklet(&self, t: &Tasklet) -> Result<(), KernelError> {
        t.wram_write_u64(self.addr, 1)
    }
}

#[test]
fn wram_access_out_of_range_or_misaligned_is_an_error() {
    let e = launch(&BadWram { addr: 65_536 }, 1).unwrap_err();
    assert!(
        matches!(e, KernelError::WramOutOfRange { addr: 65_536, .. }),
        "{e}"
    );
    let e = launch(&BadWram { addr: 12 }, 1).unwrap_err();
    assert!(
        matches!(
            e,
            KernelError::WramMisaligned {
                addr: 12,
                size_bytes: 8,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn more_tasklets_than_the_machine_has_is_an_error() {
    let e = launch(&Alloc { bytes: 8 }, 25).unwrap_err();
    assert_eq!(
        e,
        KernelError::TooManyTasklets {
            requested: 25,
            max: 24
        }
    );
    assert!(e.to_string().contains("dpu.max_tasklets"), "{e}");
    assert!(launch(&Alloc { bytes: 8 }, 0).is_err());
    // A v1B-like machine has 16.
    let m = common::machine(&["dpu.max_tasklets=16"]);
    let e = Dpu::new(&m.dpu, 0)
        .launch(&Alloc { bytes: 8 }, 17)
        .unwrap_err();
    assert_eq!(
        e,
        KernelError::TooManyTasklets {
            requested: 17,
            max: 16
        }
    );
}

struct Big;

impl Kernel for Big {
    fn iram_instructions(&self) -> u32 {
        5000
    }
    async fn tasklet(&self, _t: &Tasklet) -> Result<(), KernelError> {
        Ok(())
    }
}

#[test]
fn a_kernel_larger_than_iram_is_an_error() {
    let e = launch(&Big, 1).unwrap_err();
    assert_eq!(
        e,
        KernelError::IramOverflow {
            instructions: 5000,
            capacity: 4096
        }
    );
}

#[test]
fn host_data_larger_than_mram_is_an_error() {
    let m = common::machine(&[]);
    let mut dpu = Dpu::new(&m.dpu, 0);
    let e = dpu
        .mram_mut()
        .try_write(60 << 20, &vec![1u8; 8 << 20])
        .unwrap_err();
    assert_eq!(e.size_bytes, 8 << 20);
    assert!(
        e.to_string().contains("beyond the 67108864-byte MRAM"),
        "{e}"
    );
    // Nothing was written.
    assert_eq!(dpu.mram().resident_bytes(), 0);
}
