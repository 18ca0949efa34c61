//! The executor's ranks: transfers (SDK calls and bytes through the memory system),
//! launches, async reads, and each rank's lane.

use super::*;

impl<E: From<PastCeiling>> Executor<'_, E> {
    // ---- transfers ----

    /// Per rank of a parallel or broadcast transfer: the bytes that cross the host's memory
    /// system (the padded bytes moved; a broadcast's buffer once) and their rate limit.
    pub(super) fn rank_plan(
        &self,
        direction: Direction,
        kind: TransferKind,
        sizes: &[u64],
    ) -> Vec<(u32, u64, u64)> {
        rank_parts(&self.p, direction, kind, sizes)
            .into_iter()
            .map(|part| {
                let (bytes, limit) = part.host_flow();
                (part.rank, bytes, limit)
            })
            .collect()
    }

    pub(super) fn begin_transfer(&mut self, s: u32, now: Time) -> Result<(), E> {
        let (stage, plan) = {
            let a = self.slots[s as usize]
                .active
                .as_ref()
                .expect("the slot runs a batch");
            let Step::Transfer {
                stage,
                direction,
                kind,
                sizes_bytes,
            } = &a.program.steps[a.pc]
            else {
                unreachable!("begin_transfer on a transfer step")
            };
            assert!(
                *kind != TransferKind::Broadcast || *direction == Direction::CpuDpu,
                "a broadcast goes from the host to the DPUs"
            );
            (*stage, self.rank_plan(*direction, *kind, sizes_bytes))
        };
        if plan.is_empty() {
            return self.step_done(s, now);
        }
        let mut owned: Vec<u32> = plan.iter().map(|&(r, _, _)| r).collect();
        owned.dedup();
        owned.retain(|&r| self.lanes[r as usize].dpus_own_mram);
        self.active(s).plan = plan;
        if owned.is_empty() {
            return self.start_transfer_lanes(s, now);
        }
        for &r in &owned {
            self.lanes[r as usize].dpus_own_mram = false;
        }
        let task = self.switch_task(stage, owned.len() as u64, Then::Transfer);
        self.slots[s as usize].control.push_back(task);
        self.run_control(s, now);
        Ok(())
    }
}

impl<E: From<PastCeiling>> Executor<'_, E> {
    /// The current transfer step's (name, stage, kind) for its lane ops.
    pub(super) fn transfer_of(&mut self, s: u32) -> (&'static str, usize, TransferKind, Direction) {
        let a = self.active(s);
        match &a.program.steps[a.pc] {
            Step::Transfer {
                stage,
                direction,
                kind,
                ..
            } => {
                let name = match (kind, direction) {
                    (TransferKind::Broadcast, _) => "broadcast",
                    (TransferKind::Parallel | TransferKind::ParallelAll, Direction::CpuDpu) => {
                        "push"
                    }
                    (TransferKind::Parallel | TransferKind::ParallelAll, Direction::DpuCpu) => {
                        "pull"
                    }
                    (TransferKind::Serial, Direction::CpuDpu) => "copy to",
                    (TransferKind::Serial, Direction::DpuCpu) => "copy from",
                };
                (name, *stage, *kind, *direction)
            }
            _ => unreachable!("a transfer step"),
        }
    }

    pub(super) fn start_transfer_lanes(&mut self, s: u32, now: Time) -> Result<(), E> {
        let (name, stage, kind, direction) = self.transfer_of(s);
        let plan = std::mem::take(&mut self.active(s).plan);
        if kind == TransferKind::Serial {
            self.active(s).serial = plan.into();
            self.active(s).outstanding = 1;
            self.next_serial(s, now);
            return Ok(());
        }
        self.active(s).outstanding = plan.len() as u32;
        // One call on every rank of the plan: each rank's part starts after the call's
        // fixed cost for that many ranks.
        let fixed = self.p.call_cost(plan.len() as u64);
        for (r, bytes, limit) in plan {
            let what = (name, stage, fixed);
            self.push_transfer_ops(s, r, what, (bytes, limit, direction), Job::Transfer, now);
        }
        Ok(())
    }

    /// Starts the next call of a serial transfer; false when none is left.
    pub(super) fn next_serial(&mut self, s: u32, now: Time) -> bool {
        let (name, stage, _, direction) = self.transfer_of(s);
        let Some((r, bytes, limit)) = self.active(s).serial.pop_front() else {
            return false;
        };
        let what = (name, stage, self.p.call_cost(1));
        self.push_transfer_ops(s, r, what, (bytes, limit, direction), Job::Transfer, now);
        true
    }

    /// One SDK call's part on rank `r`: the call's fixed cost (`what`: name, stage, fixed
    /// cost), then its bytes through the memory system of its direction (`flow`: bytes,
    /// rate limit, direction).
    pub(super) fn push_transfer_ops(
        &mut self,
        s: u32,
        r: u32,
        what: (&'static str, usize, Time),
        flow: (u64, u64, Direction),
        job: Job,
        now: Time,
    ) {
        let lane = &mut self.lanes[r as usize];
        lane.queue.push_back(LaneOp {
            slot: s,
            stage: what.1,
            name: "call",
            work: LaneWork::Fixed(what.2),
            ends_job: false,
            job,
        });
        lane.queue.push_back(LaneOp {
            slot: s,
            stage: what.1,
            name: what.0,
            work: LaneWork::Flow {
                bytes: flow.0,
                limit_bytes_per_s: flow.1,
                direction: flow.2,
            },
            ends_job: true,
            job,
        });
        self.kick_lane(r, now);
    }

    // ---- launches ----

    pub(super) fn begin_launch(
        &mut self,
        s: u32,
        now: Time,
        stage: usize,
        dpu_time: &[Time],
    ) -> Result<(), E> {
        let fused_reads = self.fused_reads(s);
        let ranks = self.p.dpus_per_rank.len();
        if let Some(reads) = fused_reads {
            self.active(s).fused = Some(Fused {
                launch_stage: stage,
                detected: vec![None; ranks],
                reads,
            });
        }
        let mut launched = 0;
        let with_dpus = (0..ranks)
            .filter(|&r| !self.p.rank_dpus(r).is_empty())
            .count();
        let fixed = self.p.launch_cost(with_dpus as u64);
        for r in 0..ranks {
            let range = self.p.rank_dpus(r);
            if range.is_empty() {
                continue;
            }
            let kernel = dpu_time[range].iter().copied().max().unwrap_or(Time::ZERO);
            let lane = &mut self.lanes[r];
            for (name, work, ends_job) in [
                ("launch", LaneWork::Fixed(fixed), false),
                ("kernel", LaneWork::Kernel(kernel), true),
            ] {
                lane.queue.push_back(LaneOp {
                    slot: s,
                    stage,
                    name,
                    work,
                    ends_job,
                    job: Job::Launch,
                });
            }
            launched += 1;
            self.kick_lane(r as u32, now);
        }
        // What the launch's share of the critical path is made of (nothing, if no rank ran).
        let slowest_dpu = dpu_time.iter().copied().max().unwrap_or(Time::ZERO);
        self.active(s).launch = Some(match launched {
            0 => (Time::ZERO, Time::ZERO),
            _ => (fixed, slowest_dpu),
        });
        self.active(s).outstanding = launched;
        if launched == 0 {
            return self.step_done(s, now);
        }
        Ok(())
    }

    /// In async mode, a launch followed by a parallel read is done as one: each rank is
    /// read as soon as the host sees it finished. The reads' plan per rank, if so.
    pub(super) fn fused_reads(&mut self, s: u32) -> Option<Vec<Option<(u64, u64)>>> {
        if self.protocol.launch != LaunchMode::Async {
            return None;
        }
        let a = self.slots[s as usize]
            .active
            .as_ref()
            .expect("the slot runs a batch");
        let Some(Step::Transfer {
            direction: Direction::DpuCpu,
            kind: TransferKind::Parallel,
            sizes_bytes,
            ..
        }) = a.program.steps.get(a.pc + 1)
        else {
            return None;
        };
        let mut reads = vec![None; self.p.dpus_per_rank.len()];
        for (r, bytes, limit) in
            self.rank_plan(Direction::DpuCpu, TransferKind::Parallel, sizes_bytes)
        {
            reads[r as usize] = Some((bytes, limit));
        }
        Some(reads)
    }

    /// When the host, polling from the launch on, sees a rank that finished at `done`.
    pub(super) fn seen_at(&self, launched: Time, done: Time) -> Time {
        let interval = self.p.poll_interval.ps();
        if interval == 0 {
            return done;
        }
        let polls = (done - launched).ps().div_ceil(interval);
        launched + Time(polls * interval)
    }

    // ---- lanes ----

    pub(super) fn kick_lane(&mut self, r: u32, now: Time) {
        let lane = &mut self.lanes[r as usize];
        if lane.running.is_some() {
            return;
        }
        let Some(op) = lane.queue.pop_front() else {
            return;
        };
        lane.running = Some((op, now));
        match op.work {
            LaneWork::Fixed(d) => self.schedule(Key::Lane(r), now + d),
            LaneWork::Kernel(d) => {
                lane.dpus_own_mram = true;
                self.schedule(Key::Lane(r), now + d);
            }
            LaneWork::Flow {
                bytes,
                limit_bytes_per_s,
                direction,
            } => {
                let units = bytes as u128 * PS_PER_S as u128;
                self.memory[direction as usize].add(now, r, units, limit_bytes_per_s);
                self.reschedule(Key::Memory(direction as u8));
            }
        }
    }

    pub(super) fn lane_op_done(&mut self, r: u32, now: Time) -> Result<(), E> {
        let (op, start) = self.lanes[r as usize]
            .running
            .take()
            .expect("an op was running on the lane");
        let bytes = match op.work {
            LaneWork::Flow { bytes, .. } => bytes,
            _ => 0,
        };
        let batch = self.active(op.slot).timing.batch;
        self.span(Span {
            batch,
            track: Track::Rank(r),
            name: op.name,
            stage: Some(op.stage),
            start,
            end: now,
            bytes,
            threads: 0,
        });
        if op.ends_job {
            self.job_done(op.slot, r, op.job, now)?;
        }
        self.kick_lane(r, now);
        Ok(())
    }

    pub(super) fn job_done(&mut self, s: u32, r: u32, job: Job, now: Time) -> Result<(), E> {
        match job {
            Job::Transfer => {
                if self.next_serial(s, now) {
                    return Ok(());
                }
            }
            Job::Launch if self.protocol.launch == LaunchMode::Async => {
                let launched = self.active(s).step_start;
                let at = self.seen_at(launched, now);
                self.schedule(Key::Detect(r), at);
                return Ok(());
            }
            Job::Launch | Job::Read => {}
        }
        self.one_job_less(s, now)
    }

    pub(super) fn one_job_less(&mut self, s: u32, now: Time) -> Result<(), E> {
        let a = self.active(s);
        a.outstanding -= 1;
        if a.outstanding == 0 {
            return self.step_done(s, now);
        }
        Ok(())
    }

    /// Async: the host has seen rank `r` finished.
    pub(super) fn detected(&mut self, r: u32, now: Time) -> Result<(), E> {
        let s = self
            .dpu_holder
            .expect("a batch holds the DPUs while they run");
        let a = self.active(s);
        let read = match a.fused.as_mut() {
            None => None,
            Some(f) => {
                f.detected[r as usize] = Some(now);
                f.reads[r as usize]
            }
        };
        if read.is_none() {
            return self.one_job_less(s, now);
        }
        let stage = {
            let a = self.active(s);
            a.program.steps[a.pc + 1].stage()
        };
        self.lanes[r as usize].dpus_own_mram = false;
        if self.p.switch_concurrent {
            // Ranks switch side by side: the switch is the rank's own work, on its lane,
            // before its read; ranks seen at the same poll switch at the same time.
            self.lanes[r as usize].queue.push_back(LaneOp {
                slot: s,
                stage,
                name: "ownership switch",
                work: LaneWork::Fixed(self.p.switch_per_rank),
                ends_job: false,
                job: Job::Read,
            });
            self.read_rank(s, r, now);
            return Ok(());
        }
        let task = self.switch_task(stage, 1, Then::ReadRank(r));
        self.slots[s as usize].control.push_back(task);
        self.run_control(s, now);
        Ok(())
    }

    pub(super) fn read_rank(&mut self, s: u32, r: u32, now: Time) {
        let a = self.active(s);
        let stage = a.program.steps[a.pc + 1].stage();
        let read = a.fused.as_ref().and_then(|f| f.reads[r as usize]);
        let (bytes, limit) = read.expect("only ranks with results are read");
        let what = ("pull", stage, self.p.call_cost(1));
        let flow = (bytes, limit, Direction::DpuCpu);
        self.push_transfer_ops(s, r, what, flow, Job::Read, now);
    }
}
