//! The system executor's rules against numbers worked out by hand: pipelined batches, async
//! reads, open arrivals, the ownership switch and the DPU lock. Machine: the PrIM machine
//! (call 100 us, launch 150 us, ownership switch 67 us per rank, poll every 10 us, 32 host
//! threads, DPU->CPU 0.12 GB/s per DPU and 4.74 GB/s per rank), cut to the ranks a test needs.

mod common;

use pimdes::engine::Time;
use pimdes::system::exec::{
    Arrival, Executor, LaunchMode, LaunchTiming, PastCeiling, Protocol, Timeline, Track,
};
use pimdes::system::program::{Class, Direction, Program, Stage, Step, TransferKind};

const US: u64 = 1_000_000;

fn stages() -> Vec<Stage> {
    ["host", "transfer", "kernel"]
        .iter()
        .zip([Class::Cpu, Class::Communication, Class::Pim])
        .map(|(&name, class)| Stage { name, class })
        .collect()
}

fn host(us: u64, threads: u32) -> Step {
    Step::Host {
        stage: 0,
        label: "host work",
        work_ps: us * US * threads as u64,
        threads,
    }
}

fn launch(dpu_us: &[u64]) -> Step {
    Step::Launch {
        stage: 2,
        dpu_time: dpu_us.iter().map(|&t| Time(t * US)).collect(),
    }
}

fn run(
    machine: &pimdes::machine::Machine,
    protocol: Protocol,
    batches: u64,
    program: Program,
) -> Timeline {
    Executor::<PastCeiling>::run(machine, protocol, batches, |_, _| Ok(program.clone())).unwrap()
}

fn protocol(launch: LaunchMode, in_flight: u32, arrival: Arrival) -> Protocol {
    Protocol {
        launch,
        batches_in_flight: in_flight,
        arrival,
        batch_size: 1000,
        poll_interval: None,
    }
}

/// Intervals between consecutive batch ends, after the first `skip` batches.
fn intervals(t: &Timeline, skip: usize) -> Vec<u64> {
    let mut ends: Vec<u64> = t.batches.iter().map(|b| b.end.ps()).collect();
    ends.sort();
    ends.windows(2).skip(skip).map(|w| w[1] - w[0]).collect()
}

#[test]
fn pipelined_batches_take_the_larger_of_host_and_dpu_time_not_their_sum() {
    // One rank. Host stage 1,000 us on all 32 threads; DPU phase: 150 us launch + 1,050 us
    // kernel = 1,200 us. One batch in flight: 2,200 us a batch. Two: the host stage of the
    // next batch runs during the DPU phase of this one, so batches end 1,200 us apart.
    let m = common::machine(&["ranks=1", "usable_dpus=64"]);
    let program = Program {
        stages: stages(),
        steps: vec![host(1000, 32), launch(&[1050; 64])],
    };
    let one = run(
        &m,
        protocol(LaunchMode::Sync, 1, Arrival::Closed),
        8,
        program.clone(),
    );
    assert!(intervals(&one, 0).iter().all(|&i| i == 2200 * US));
    let two = run(
        &m,
        protocol(LaunchMode::Sync, 2, Arrival::Closed),
        8,
        program,
    );
    assert_eq!(intervals(&two, 2), vec![1200 * US; 5]);
    // The pipelined batch waited for the DPUs: its breakdown has a waiting segment, and its
    // segments still tile its time.
    let b = two.batches.iter().find(|b| b.batch == 5).unwrap();
    let waited: u64 = b
        .segments
        .iter()
        .filter(|s| s.stage.is_none())
        .map(|s| (s.end - s.start).ps())
        .sum();
    assert_eq!(
        waited,
        200 * US,
        "host 1,000 us, then 200 us until the DPUs are free"
    );
}

#[test]
fn two_batches_routing_at_once_share_the_host_threads() {
    // Both batches start at 0 and ask for all 32 threads: each gets 16, so both routing
    // stages end at 2,000 us instead of 1,000.
    let m = common::machine(&["ranks=1", "usable_dpus=64"]);
    let program = Program {
        stages: stages(),
        steps: vec![host(1000, 32), launch(&[10; 64])],
    };
    let t = run(
        &m,
        protocol(LaunchMode::Sync, 2, Arrival::Closed),
        2,
        program,
    );
    let routes: Vec<&pimdes::system::exec::Span> =
        t.spans.iter().filter(|s| s.name == "host work").collect();
    assert_eq!(routes.len(), 2);
    assert!(routes.iter().all(|s| s.end == Time(2000 * US)));
}

fn read_after_launch(launch_mode: LaunchMode) -> Timeline {
    read_after_launch_polled(launch_mode, None)
}

/// [`read_after_launch`], polling every `poll` instead of the machine's 10 us.
fn read_after_launch_polled(launch_mode: LaunchMode, poll: Option<Time>) -> Timeline {
    // Two ranks; rank 0's DPUs run 100 us, rank 1's 3,000 us; each DPU returns 64 KiB.
    let m = common::machine(&["ranks=2", "usable_dpus=128"]);
    let mut dpu_us = vec![100u64; 64];
    dpu_us.extend([3000u64; 64]);
    let program = Program {
        stages: stages(),
        steps: vec![
            launch(&dpu_us),
            Step::Transfer {
                stage: 1,
                direction: Direction::DpuCpu,
                kind: TransferKind::Parallel,
                sizes_bytes: vec![65_536; 128],
            },
        ],
    };
    let mut p = protocol(launch_mode, 1, Arrival::Closed);
    p.poll_interval = poll;
    run(&m, p, 1, program)
}

fn span_end(t: &Timeline, track: Track, name: &str) -> Time {
    t.spans
        .iter()
        .find(|s| s.track == track && s.name == name)
        .map(|s| s.end)
        .unwrap()
}

#[test]
fn async_reads_the_fast_rank_while_the_slow_one_runs() {
    // A rank's read: 4 MiB (64 x 64 KiB) at 4.74 GB/s = 884,874,261.6 ps (the cap of 25 GB/s
    // does not bind), after the 100 us call and the 67 us ownership switch.
    let read = Time(884_874_262);
    let sync = read_after_launch(LaunchMode::Sync);
    // Sync: the host waits for rank 1 (150 + 3,000 us), switches both ranks (134 us), then
    // reads both at once (call, then the two flows share nothing that binds).
    let sync_end = Time((150 + 3000 + 134 + 100) * US) + read;
    assert_eq!(sync.batches[0].end, sync_end);
    let fast = read_after_launch(LaunchMode::Async);
    // Async: rank 0 ends at 250 us, seen at the next poll (every 10 us: 250 us), switched
    // (67 us) and read (100 us call + the flow): done long before rank 1 ends at 3,150 us.
    let rank0_read = span_end(&fast, Track::Rank(0), "pull");
    assert_eq!(rank0_read, Time((250 + 67 + 100) * US) + read);
    assert!(rank0_read < span_end(&fast, Track::Rank(1), "kernel"));
    // Rank 1 is seen at 3,150 us, switched and read: the batch ends one switch earlier than
    // in sync mode.
    assert_eq!(fast.batches[0].end, Time((3150 + 67 + 100) * US) + read);
}

#[test]
fn a_launch_splits_into_its_fixed_cost_the_slowest_dpu_and_the_wait_to_see_it() {
    // Sync: the launch (150 us), then rank 1's 3,000 us; the host sees it as it ends.
    let sync = read_after_launch(LaunchMode::Sync);
    let split = LaunchTiming {
        stage: 2,
        fixed: Time(150 * US),
        slowest_dpu: Time(3000 * US),
        until_seen: Time::ZERO,
    };
    assert_eq!(sync.batches[0].launches, vec![split]);
    // Async, polling every 400 us: rank 1 ends at 3,150 us and is seen at the eighth poll,
    // 3,200 us; rank 0, seen at 400 us, is read meanwhile (the launch and read are done as
    // one), and the launch's segment ends when rank 1 is seen.
    let seen = LaunchTiming {
        until_seen: Time(50 * US),
        ..split
    };
    let fused = read_after_launch_polled(LaunchMode::Async, Some(Time(400 * US)));
    assert_eq!(fused.batches[0].launches, vec![seen]);
    let kernel = &fused.batches[0].segments[0];
    assert_eq!(
        (kernel.stage, kernel.end - kernel.start),
        (Some(2), Time(3200 * US))
    );
    // Not followed by a read, the same launch ends the same way.
    let m = common::machine(&["ranks=2", "usable_dpus=128"]);
    let mut dpu_us = vec![100u64; 64];
    dpu_us.extend([3000u64; 64]);
    let program = Program {
        stages: stages(),
        steps: vec![launch(&dpu_us), host(10, 1)],
    };
    let mut polled = protocol(LaunchMode::Async, 1, Arrival::Closed);
    polled.poll_interval = Some(Time(400 * US));
    let t = run(&m, polled, 1, program);
    assert_eq!(t.batches[0].launches, vec![seen]);
    // Two launches in a stage: each its own split, in order.
    let program = Program {
        stages: stages(),
        steps: vec![launch(&dpu_us), host(10, 1), launch(&[20; 128])],
    };
    let t = run(
        &m,
        protocol(LaunchMode::Sync, 1, Arrival::Closed),
        1,
        program,
    );
    let second = LaunchTiming {
        slowest_dpu: Time(20 * US),
        ..split
    };
    assert_eq!(t.batches[0].launches, vec![split, second]);
}

#[test]
fn open_arrivals_below_capacity_wait_at_most_one_batch() {
    // A batch costs 1,000 us whatever its size; queries arrive every 2 us (500 k/s, half of
    // the 1 M/s a batch of 1,000 could serve). Each batch takes the ~500 queries that
    // arrived during the previous one; a query waits at most one batch, so its latency is
    // at most two batch times.
    let m = common::machine(&["ranks=1", "usable_dpus=64"]);
    let program = Program {
        stages: stages(),
        steps: vec![host(1000, 1)],
    };
    let open = Arrival::Open {
        fs_per_query: 2_000_000_000,
    };
    let t = run(&m, protocol(LaunchMode::Sync, 1, open), 20, program);
    for b in &t.batches[2..] {
        assert_eq!(b.end - b.start, Time(1000 * US));
        assert!((499..=501).contains(&b.queries), "{}", b.queries);
        let first = pimdes::system::exec::arrival_time(open, b.first_query);
        assert!(b.end - first <= Time(2000 * US));
    }
    assert!(t.backlog_at_end < 1000);
}

#[test]
fn open_arrivals_above_capacity_leave_a_growing_backlog() {
    // Queries every 0.5 us (2 M/s) against 1 M/s of service: every batch is full and the
    // backlog grows by about 1,000 queries a batch.
    let m = common::machine(&["ranks=1", "usable_dpus=64"]);
    let program = Program {
        stages: stages(),
        steps: vec![host(1000, 1)],
    };
    let open = Arrival::Open {
        fs_per_query: 500_000_000,
    };
    let t = run(&m, protocol(LaunchMode::Sync, 1, open), 10, program);
    assert!(t.batches[1..].iter().all(|b| b.queries == 1000));
    assert!(t.backlog_at_end >= 1000 * 8, "{}", t.backlog_at_end);
}

#[test]
fn spans_on_one_rank_never_overlap_and_segments_tile_each_batch() {
    for mode in [LaunchMode::Sync, LaunchMode::Async] {
        let t = read_after_launch(mode);
        for r in 0..2 {
            let mut spans: Vec<_> = t
                .spans
                .iter()
                .filter(|s| s.track == Track::Rank(r))
                .collect();
            spans.sort_by_key(|s| s.start);
            for w in spans.windows(2) {
                assert!(
                    w[0].end <= w[1].start,
                    "{mode:?} rank {r}: {:?} {:?}",
                    w[0],
                    w[1]
                );
            }
        }
        let b = &t.batches[0];
        assert!(b.segments.len() > 1, "{mode:?}: {:?}", b.segments);
        assert_eq!(b.segments.first().unwrap().start, b.start);
        assert_eq!(b.segments.last().unwrap().end, b.end);
        // No gap and no overlap between consecutive segments.
        for w in b.segments.windows(2) {
            assert_eq!(w[0].end, w[1].start, "{mode:?}: {:?} {:?}", w[0], w[1]);
        }
    }
}

#[test]
fn a_batch_without_dpu_work_does_not_hold_up_the_next_batches_turn() {
    // Two batches in flight: batch 0 launches for 1,000 us; batch 1 only computes on the
    // host and ends while batch 0 still holds the DPUs; batch 2 must get the DPUs after
    // batch 0, not wait for batch 1's turn forever.
    let m = common::machine(&["ranks=1", "usable_dpus=64"]);
    let with_dpus = Program {
        stages: stages(),
        steps: vec![host(10, 32), launch(&[1000; 64])],
    };
    let host_only = Program {
        stages: stages(),
        steps: vec![host(10, 32)],
    };
    let t = Executor::<PastCeiling>::run(
        &m,
        protocol(LaunchMode::Sync, 2, Arrival::Closed),
        4,
        |b, _| {
            Ok(if b % 2 == 1 {
                host_only.clone()
            } else {
                with_dpus.clone()
            })
        },
    )
    .unwrap();
    assert_eq!(t.batches.len(), 4);
    let end = |b: u64| t.batches.iter().find(|x| x.batch == b).unwrap().end;
    assert!(end(1) < end(0), "the host-only batch ends first");
    // Batch 2 launches right when batch 0's kernel ends.
    assert_eq!(end(2) - end(0), Time(1150 * US));
}

/// Simulated time has a ceiling, 2^62 ps: batches that pass it end the run with an error
/// naming the batch, however large the step (no overflow, no panic); times before it are
/// exact.
#[test]
fn time_past_the_ceiling_is_an_error_not_an_overflow() {
    let m = common::machine(&["ranks=1", "usable_dpus=64"]);
    let ceiling = pimdes::engine::CEILING.ps();
    let step = |work_ps: u64| Program {
        stages: stages(),
        steps: vec![Step::Host {
            stage: 0,
            label: "host work",
            work_ps,
            threads: 1,
        }],
    };
    // Two batches of a quarter of the ceiling each fit exactly.
    let t = run(&m, Protocol::sequential(1), 2, step(ceiling / 4));
    assert_eq!(t.batches[1].end, Time(ceiling / 2));
    // The third of four batches of 0.4 x the ceiling passes it.
    let past = Executor::<PastCeiling>::run(&m, Protocol::sequential(1), 4, |_, _| {
        Ok(step(ceiling / 10 * 4))
    });
    assert_eq!(past.unwrap_err(), PastCeiling { batch: 2 });
    // A step of u64::MAX picoseconds (a saturated cost) stops in its own batch.
    let past =
        Executor::<PastCeiling>::run(&m, Protocol::sequential(1), 3, |_, _| Ok(step(u64::MAX)));
    assert_eq!(past.unwrap_err(), PastCeiling { batch: 0 });
    // With two batches in flight, the later ones end while batch 0 still runs: the error
    // names batch 0, the one that passed the ceiling, not the last one started.
    let two_in_flight = Protocol {
        batches_in_flight: 2,
        ..Protocol::sequential(1)
    };
    let past = Executor::<PastCeiling>::run(&m, two_in_flight, 4, |b, _| {
        Ok(step(if b == 0 { u64::MAX } else { 1_000_000 }))
    });
    assert_eq!(past.unwrap_err(), PastCeiling { batch: 0 });
}

#[test]
fn concurrent_switches_overlap_when_ranks_finish_together() {
    // Four ranks whose DPUs all run 100 us; each returns 64 x 64 KiB. With serial switches
    // the async reads, each seen at 250 us, queue their switches on the one host thread
    // (67 us each, one after another); with concurrent switches each rank switches on its
    // own lane, all four at once.
    let run_with = |switch: &str| {
        let set = format!("transfer.ownership_switch=\"{switch}\"");
        let m = common::machine(&["ranks=4", "usable_dpus=256", &set]);
        let program = Program {
            stages: stages(),
            steps: vec![
                launch(&[100; 256]),
                Step::Transfer {
                    stage: 1,
                    direction: Direction::DpuCpu,
                    kind: TransferKind::Parallel,
                    sizes_bytes: vec![65_536; 256],
                },
            ],
        };
        run(
            &m,
            protocol(LaunchMode::Async, 1, Arrival::Closed),
            1,
            program,
        )
    };
    let serial = run_with("serial");
    let concurrent = run_with("concurrent");
    let switches = |t: &Timeline| {
        let mut ends: Vec<Time> = t
            .spans
            .iter()
            .filter(|s| s.name == "ownership switch")
            .map(|s| s.end)
            .collect();
        ends.sort();
        ends
    };
    // Serial: the host's switches end 67 us apart, from 250 + 67 us.
    let s = switches(&serial);
    assert_eq!(s.len(), 4);
    for (i, end) in s.iter().enumerate() {
        assert_eq!(*end, Time((250 + 67 * (i as u64 + 1)) * US));
    }
    // Concurrent: all four end at 250 + 67 us, on the ranks' lanes.
    let c = switches(&concurrent);
    assert_eq!(c, vec![Time((250 + 67) * US); 4]);
    assert!(
        concurrent
            .spans
            .iter()
            .filter(|s| s.name == "ownership switch")
            .all(|s| matches!(s.track, Track::Rank(_)))
    );
    assert!(concurrent.batches[0].end < serial.batches[0].end);
}
