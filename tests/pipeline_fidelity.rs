//! How far the fluid pipeline model (docs/machine-model.md) strays from an exact
//! cycle-by-cycle revolver pipeline: one issue per cycle, round-robin over the ready
//! tasklets, a tasklet ready again 11 cycles after its last issue. For compute-only
//! tasklets of random lengths, every tasklet's end must be within one rotation
//! (max(11, tasklets) cycles) plus 11 of the exact schedule, and the DPU's end (the number
//! that reaches results) within one rotation.

mod common;

use pimdes::dpu::{Dpu, Kernel, KernelError, Tasklet};
use proptest::prelude::*;

struct Lengths(Vec<u64>);

impl Kernel for Lengths {
    async fn tasklet(&self, t: &Tasklet) -> Result<(), KernelError> {
        t.compute(self.0[t.id() as usize]).await
    }
}

/// End cycle of each tasklet under the exact revolver pipeline.
fn exact(lengths: &[u64], interval: u64) -> Vec<u64> {
    let n = lengths.len();
    let mut left = lengths.to_vec();
    let mut ready_at = vec![0u64; n];
    let mut end = vec![0u64; n];
    let mut last = n - 1;
    let mut cycle = 0u64;
    while left.iter().any(|&l| l > 0) {
        let pick = (1..=n)
            .map(|k| (last + k) % n)
            .find(|&i| left[i] > 0 && ready_at[i] <= cycle);
        if let Some(i) = pick {
            left[i] -= 1;
            ready_at[i] = cycle + interval;
            if left[i] == 0 {
                end[i] = cycle + interval;
            }
            last = i;
        }
        cycle += 1;
    }
    end
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn fluid_pipeline_stays_within_a_rotation_of_the_exact_revolver(
        lengths in prop::collection::vec(1u64..300, 1..=24)
    ) {
        let m = common::machine(&[]);
        let tasklets = lengths.len() as u32;
        let report = Dpu::new(&m.dpu, 0).launch(&Lengths(lengths.clone()), tasklets).unwrap();
        let exact = exact(&lengths, 11);
        let rotation = 11.max(lengths.len() as u64);
        for (i, (&fluid, &exact)) in report.tasklet_cycles.iter().zip(&exact).enumerate() {
            prop_assert!(
                fluid.abs_diff(exact) <= rotation + 11,
                "tasklet {i}: fluid {fluid}, exact {exact}, lengths {lengths:?}"
            );
        }
        let exact_end = exact.iter().copied().max().unwrap();
        prop_assert!(
            report.cycles.abs_diff(exact_end) <= rotation,
            "DPU end: fluid {}, exact {exact_end}", report.cycles
        );
    }
}
