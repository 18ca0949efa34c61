//! The executor's batches: top-level host threads start batches, issue their steps in
//! order, hold and release the DPUs, and run their host work on the pool.

use super::*;

impl<E: From<PastCeiling>> Executor<'_, E> {
    // ---- batches and slots ----

    pub(super) fn slot_free(&mut self, s: u32, now: Time) -> Result<(), E> {
        if self.next_batch >= self.total_batches {
            return Ok(());
        }
        let n = match self.protocol.arrival {
            Arrival::Closed => self.protocol.batch_size,
            Arrival::Open { fs_per_query } => {
                let waiting = arrived_by(fs_per_query, now).saturating_sub(self.consumed);
                if waiting == 0 {
                    let next = arrival_time(self.protocol.arrival, self.consumed);
                    self.schedule(Key::Start(s), next.max(now));
                    return Ok(());
                }
                waiting.min(self.protocol.batch_size)
            }
        };
        self.start_batch(s, now, n)
    }

    pub(super) fn start_batch(&mut self, s: u32, now: Time, queries: u64) -> Result<(), E> {
        let batch = self.next_batch;
        self.next_batch += 1;
        let program = (self.prepare)(batch, queries)?;
        program.assert_valid(self.p.dpus);
        self.events_allowed = (self.events_allowed)
            .saturating_add(MAX_EVENTS_PER_BATCH)
            .saturating_add(program_events_bound(&program));
        if program.dpu_phase().is_none() {
            self.without_phase.insert(batch);
        }
        let first_query = self.consumed;
        self.consumed += queries;
        self.slots[s as usize].active = Some(Active {
            timing: BatchTiming {
                batch,
                slot: s,
                queries,
                first_query,
                start: now,
                end: now,
                stages: program.stages.clone(),
                segments: Vec::new(),
                launches: Vec::new(),
            },
            program,
            pc: 0,
            outstanding: 0,
            step_start: now,
            holds_dpus: false,
            waiting_since: None,
            plan: Vec::new(),
            serial: VecDeque::new(),
            fused: None,
            launch: None,
        });
        self.skip_turns_without_phase();
        self.issue_step(s, now)
    }

    pub(super) fn finish_batch(&mut self, s: u32, now: Time) -> Result<(), E> {
        let mut active = self.slots[s as usize]
            .active
            .take()
            .expect("the slot runs a batch");
        active.timing.end = now;
        let t = &active.timing;
        let mut at = t.start;
        for seg in &t.segments {
            assert_eq!(seg.start, at, "segments of batch {} tile its time", t.batch);
            at = seg.end;
        }
        assert_eq!(at, t.end, "segments of batch {} end with it", t.batch);
        self.timeline.batches.push(active.timing);
        self.slot_free(s, now)
    }

    /// Batches without a DPU phase do not take a turn on the DPUs.
    /// (They are remembered from their start on, so one that has already ended is skipped
    /// too.)
    pub(super) fn skip_turns_without_phase(&mut self) {
        while self.without_phase.remove(&self.dpu_turn) {
            self.dpu_turn += 1;
        }
    }

    /// Starts the step at the slot's program counter (or ends the batch).
    pub(super) fn issue_step(&mut self, s: u32, now: Time) -> Result<(), E> {
        let a = self.active(s);
        if a.pc == a.program.steps.len() {
            return self.finish_batch(s, now);
        }
        let phase_start = a.program.dpu_phase().map(|(first, _)| first);
        if phase_start == Some(a.pc) && !a.holds_dpus {
            let batch = a.timing.batch;
            if self.dpu_holder.is_some() || self.dpu_turn != batch {
                self.active(s).waiting_since = Some(now);
                return Ok(());
            }
            self.dpu_holder = Some(s);
            self.active(s).holds_dpus = true;
        }
        let a = self.active(s);
        a.step_start = now;
        match a.program.steps[a.pc].clone() {
            Step::Host {
                stage,
                label,
                work_ps,
                threads,
            } => {
                let task = HostTask {
                    stage,
                    name: label,
                    work_ps,
                    threads,
                    then: Then::StepDone,
                };
                self.slots[s as usize].control.push_back(task);
                self.run_control(s, now);
                Ok(())
            }
            Step::Transfer { .. } => self.begin_transfer(s, now),
            Step::Launch { stage, dpu_time } => self.begin_launch(s, now, stage, &dpu_time),
        }
    }

    /// The current step (or fused pair) is complete at `now`.
    pub(super) fn step_done(&mut self, s: u32, now: Time) -> Result<(), E> {
        let a = self.active(s);
        let stage = a.program.steps[a.pc].stage();
        let start = a.step_start;
        let launch_end = match a.fused.take() {
            Some(f) => {
                let read_stage = a.program.steps[a.pc + 1].stage();
                // The kernel's share ends when the host has seen the last rank finish.
                let split = f
                    .detected
                    .iter()
                    .flatten()
                    .copied()
                    .max()
                    .unwrap_or(now)
                    .clamp(start, now);
                a.timing.segments.push(Segment {
                    stage: Some(f.launch_stage),
                    start,
                    end: split,
                });
                a.timing.segments.push(Segment {
                    stage: Some(read_stage),
                    start: split,
                    end: now,
                });
                a.pc += 2;
                split
            }
            None => {
                a.timing.segments.push(Segment {
                    stage: Some(stage),
                    start,
                    end: now,
                });
                a.pc += 1;
                now
            }
        };
        if let Some((fixed, slowest_dpu)) = a.launch.take() {
            let took = launch_end - start;
            assert!(
                took >= fixed + slowest_dpu,
                "a launch ends after its slowest DPU"
            );
            a.timing.launches.push(LaunchTiming {
                stage,
                fixed,
                slowest_dpu,
                until_seen: took - fixed - slowest_dpu,
            });
        }
        let phase_end = a.program.dpu_phase().map(|(_, end)| end);
        if a.holds_dpus && phase_end == Some(a.pc) {
            a.holds_dpus = false;
            self.release_dpus(now)?;
        }
        self.issue_step(s, now)
    }

    pub(super) fn release_dpus(&mut self, now: Time) -> Result<(), E> {
        self.dpu_holder = None;
        self.dpu_turn += 1;
        self.skip_turns_without_phase();
        let turn = self.dpu_turn;
        let next = (0..self.slots.len() as u32).find(|&s| {
            self.slots[s as usize]
                .active
                .as_ref()
                .is_some_and(|a| a.timing.batch == turn && a.waiting_since.is_some())
        });
        if let Some(s) = next {
            let since = self.active(s).waiting_since.take().expect("found waiting");
            self.active(s).timing.segments.push(Segment {
                stage: None,
                start: since,
                end: now,
            });
            if since < now {
                let batch = self.active(s).timing.batch;
                self.span(Span {
                    batch,
                    track: Track::Slot(s),
                    name: "waiting for the DPUs",
                    stage: None,
                    start: since,
                    end: now,
                    bytes: 0,
                    threads: 0,
                });
            }
            self.issue_step(s, now)?;
        }
        Ok(())
    }

    // ---- host work ----

    pub(super) fn run_control(&mut self, s: u32, now: Time) {
        let slot = &mut self.slots[s as usize];
        if slot.running.is_some() {
            return;
        }
        let Some(task) = slot.control.pop_front() else {
            return;
        };
        slot.running = Some((task, now));
        let threads = task.threads.clamp(1, self.p.threads) as u64;
        self.pool
            .add(now, s, task.work_ps as u128 * 1000, threads * 1000);
        self.reschedule(Key::Pool);
    }

    pub(super) fn host_task_done(&mut self, s: u32, now: Time) -> Result<(), E> {
        let (task, start) = self.slots[s as usize]
            .running
            .take()
            .expect("a host task was running");
        let batch = self.active(s).timing.batch;
        self.span(Span {
            batch,
            track: Track::Slot(s),
            name: task.name,
            stage: Some(task.stage),
            start,
            end: now,
            bytes: 0,
            threads: task.threads,
        });
        match task.then {
            Then::StepDone => self.step_done(s, now)?,
            Then::Transfer => self.start_transfer_lanes(s, now)?,
            Then::ReadRank(r) => self.read_rank(s, r, now),
        }
        self.run_control(s, now);
        Ok(())
    }

    pub(super) fn switch_task(&self, stage: usize, ranks: u64, then: Then) -> HostTask {
        HostTask {
            stage,
            name: "ownership switch",
            // Concurrent switches take one rank's time however many ranks switch.
            work_ps: self.p.switch_per_rank.ps()
                * if self.p.switch_concurrent {
                    ranks.min(1)
                } else {
                    ranks
                },
            threads: 1,
            then,
        }
    }
}
