//! [`FluidShare`]: a resource whose capacity concurrent flows share, max-min fairly, each
//! flow also bounded by a rate limit of its own. The host's memory system (bytes per second
//! shared by concurrent rank transfers) and the host's thread pool (threads shared by
//! concurrent host tasks) are both of this kind.
//!
//! # Units and exactness
//!
//! A flow's work is an integer count of *units*, and a rate is units per picosecond, both
//! integers: for bytes at `r` bytes per second a flow of `b` bytes is `b x 10^12` units and
//! progresses `r` units per picosecond; for host work of `w` single-thread picoseconds on
//! up to `k` threads the work is `w x 1000` units and the rate is in thousandths of a
//! thread. Nothing is rounded except a completion time, which is rounded **up** to a whole
//! picosecond (a flow never finishes before its bytes could have moved).
//!
//! # Sharing rule (water-filling)
//!
//! Flows are served in order of their limits, lowest first (equal limits: earliest added
//! first); each gets `min(limit, capacity left / flows left)`. So flows under their fair
//! share run at their own limit and the rest split what remains equally. Rates are
//! recomputed whenever a flow starts or ends. A rate is at least 1 unit per picosecond, so
//! every flow progresses whatever the number of flows (the capacity may then be exceeded by
//! at most one unit per picosecond per flow, far below any realistic rate).

use super::Time;

/// One flow of a [`FluidShare`].
#[derive(Debug, Clone)]
struct Flow<K> {
    key: K,
    /// Units still to move.
    remaining: u128,
    limit_per_ps: u64,
    rate_per_ps: u64,
    /// Insertion order, for ties.
    seq: u64,
}

/// Flows sharing one capacity; see the module documentation.
#[derive(Debug, Clone)]
pub struct FluidShare<K> {
    capacity_per_ps: u64,
    flows: Vec<Flow<K>>,
    /// The time up to which `remaining` is accounted.
    updated_at: Time,
    next_seq: u64,
    max_flows: usize,
}

impl<K: Copy + PartialEq + std::fmt::Debug> FluidShare<K> {
    /// A resource of `capacity_per_ps` units per picosecond that holds at most `max_flows`
    /// flows at once (more is a model bug: callers bound their concurrency).
    pub fn new(capacity_per_ps: u64, max_flows: usize) -> Self {
        assert!(capacity_per_ps > 0, "a shared resource needs capacity");
        FluidShare {
            capacity_per_ps,
            flows: Vec::with_capacity(max_flows),
            updated_at: Time::ZERO,
            next_seq: 0,
            max_flows,
        }
    }

    pub fn len(&self) -> usize {
        self.flows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.flows.is_empty()
    }

    /// Starts a flow of `units` at `now`, at most `limit_per_ps` units per picosecond.
    /// A flow of zero units completes at the next [`FluidShare::take_completed`].
    pub fn add(&mut self, now: Time, key: K, units: u128, limit_per_ps: u64) {
        assert!(
            self.flows.len() < self.max_flows,
            "more than {} concurrent flows on one resource",
            self.max_flows
        );
        assert!(limit_per_ps > 0, "flow {key:?} has no rate");
        self.advance(now);
        self.flows.push(Flow {
            key,
            remaining: units,
            limit_per_ps,
            rate_per_ps: 0,
            seq: self.next_seq,
        });
        self.next_seq += 1;
        self.reallocate();
    }

    /// The earliest time a flow completes, if any flow is active.
    pub fn next_completion(&self) -> Option<Time> {
        self.flows
            .iter()
            .map(|f| {
                let ps = f.remaining.div_ceil(f.rate_per_ps as u128);
                // Saturates (see `engine::CEILING`): the executor stops before such a time.
                let ps = u64::try_from(ps).unwrap_or(u64::MAX);
                self.updated_at + Time(ps)
            })
            .min()
    }

    /// Advances to `now` and removes the flows that are complete, in the order they were
    /// added; the others share the freed capacity from `now` on.
    pub fn take_completed(&mut self, now: Time, done: &mut Vec<K>) {
        self.advance(now);
        done.clear();
        done.extend(
            self.flows
                .iter()
                .filter(|f| f.remaining == 0)
                .map(|f| f.key),
        );
        if !done.is_empty() {
            self.flows.retain(|f| f.remaining != 0);
            self.reallocate();
        }
    }

    /// Current rate of the flow `key` (for reports and tests).
    pub fn rate_of(&self, key: K) -> Option<u64> {
        self.flows
            .iter()
            .find(|f| f.key == key)
            .map(|f| f.rate_per_ps)
    }

    fn advance(&mut self, now: Time) {
        assert!(now >= self.updated_at, "time went backwards");
        let dt = (now - self.updated_at).ps() as u128;
        for f in &mut self.flows {
            f.remaining = f.remaining.saturating_sub(dt * f.rate_per_ps as u128);
        }
        self.updated_at = now;
    }

    fn reallocate(&mut self) {
        let mut order: Vec<usize> = (0..self.flows.len()).collect();
        order.sort_by_key(|&i| (self.flows[i].limit_per_ps, self.flows[i].seq));
        let mut left = self.capacity_per_ps;
        let mut count = order.len() as u64;
        for i in order {
            let fair = left / count;
            let rate = self.flows[i].limit_per_ps.min(fair).max(1);
            self.flows[i].rate_per_ps = rate;
            left = left.saturating_sub(rate);
            count -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(s: &mut FluidShare<u32>) -> Vec<(u64, u32)> {
        let mut out = Vec::new();
        let mut done = Vec::new();
        while let Some(t) = s.next_completion() {
            s.take_completed(t, &mut done);
            out.extend(done.iter().map(|&k| (t.ps(), k)));
        }
        out
    }

    #[test]
    fn one_flow_runs_at_its_limit() {
        let mut s = FluidShare::new(100, 4);
        s.add(Time(0), 1, 1000, 10);
        assert_eq!(drain(&mut s), vec![(100, 1)]);
    }

    #[test]
    fn flows_split_the_capacity_and_speed_up_when_one_ends() {
        // Capacity 10 per ps, two unlimited flows of 100 and 300 units: 5 each until the
        // first ends at 20; the second then has 200 left at 10 per ps: ends at 40.
        let mut s = FluidShare::new(10, 4);
        s.add(Time(0), 1, 100, 1000);
        s.add(Time(0), 2, 300, 1000);
        assert_eq!(drain(&mut s), vec![(20, 1), (40, 2)]);
    }

    #[test]
    fn a_flow_under_its_fair_share_keeps_its_limit() {
        // Capacity 10: a flow limited to 2 and an unlimited one: 2 and 8.
        let mut s = FluidShare::new(10, 4);
        s.add(Time(0), 1, 20, 2);
        s.add(Time(0), 2, 80, 100);
        assert_eq!(s.rate_of(1), Some(2));
        assert_eq!(s.rate_of(2), Some(8));
        assert_eq!(drain(&mut s), vec![(10, 1), (10, 2)]);
    }

    #[test]
    fn completion_times_round_up() {
        let mut s = FluidShare::new(3, 1);
        s.add(Time(0), 7, 10, 3);
        assert_eq!(drain(&mut s), vec![(4, 7)]);
    }

    #[test]
    fn a_late_flow_shares_from_its_start() {
        // Flow 1 alone at 10 per ps for 5 ps (50 of 100 done), then two at 5 each: flow 1's
        // last 50 take 10 ps (ends at 15); flow 2 has 100 - 50 = 50 left at 10: ends at 20.
        let mut s = FluidShare::new(10, 2);
        s.add(Time(0), 1, 100, 10);
        s.add(Time(5), 2, 100, 10);
        assert_eq!(drain(&mut s), vec![(15, 1), (20, 2)]);
    }
}
