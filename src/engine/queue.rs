//! [`EventQueue`]: pending events ordered by (time, insertion sequence), built on the
//! `priority-queue` crate (an indexed binary heap).

use priority_queue::PriorityQueue;
use std::cmp::Reverse;
use std::fmt::Debug;
use std::hash::{BuildHasherDefault, Hash, Hasher};

/// The queue already holds its capacity of events. Scheduling more is a model bug (every
/// queue in pimdes has a bound derived from the machine), so the caller reports it and the
/// simulation stops.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("event queue full: {capacity} events pending")]
pub struct QueueFull {
    pub capacity: usize,
}

/// Pending events, each a key `K` due at a time `T`.
///
/// # Ordering contract
///
/// [`pop`](Self::pop) returns the event with the smallest time; events with **equal times
/// come out first-in first-out**, in the order they were scheduled. Rescheduling a key that
/// is already pending moves it to its new time and gives it a new insertion sequence, exactly
/// as if it had been cancelled and scheduled again.
///
/// Each key is pending at most once (the queue is addressable: a key names the event, such
/// as "wake tasklet 3"), so models can move or cancel an event without searching for it.
///
/// # Invariants (asserted)
///
/// - Time never goes backwards: an event is never scheduled before the time of the last
///   popped event, and pops come out in non-decreasing time.
/// - The queue never holds more than its capacity.
///
/// # Complexity
///
/// With `n` pending events: `schedule`, `pop` and `cancel` are O(log n); `peek_time`,
/// `now` and `len` are O(1). Keys are hashed with a fast multiplicative hash (keys are
/// small integers or enums of them).
pub struct EventQueue<K: Hash + Eq, T: Ord> {
    heap: PriorityQueue<K, Reverse<(T, u64)>, BuildHasherDefault<KeyHasher>>,
    next_seq: u64,
    now: T,
    capacity: usize,
}

impl<K: Hash + Eq + Debug, T: Ord + Copy + Debug + Default> EventQueue<K, T> {
    /// An empty queue at time `T::default()` that holds at most `capacity` events.
    pub fn new(capacity: usize) -> Self {
        EventQueue {
            heap: PriorityQueue::with_capacity_and_default_hasher(capacity),
            next_seq: 0,
            now: T::default(),
            capacity,
        }
    }

    /// Schedules `key` at `at`, or moves it there if it is already pending.
    ///
    /// Panics if `at` is before [`now`](Self::now): time never goes backwards.
    pub fn schedule(&mut self, key: K, at: T) -> Result<(), QueueFull> {
        assert!(
            at >= self.now,
            "event {key:?} scheduled at {at:?}, before the current time {:?}",
            self.now
        );
        let priority = Reverse((at, self.next_seq));
        self.next_seq += 1;
        // `push` moves a pending key; only a new key needs room (checked only when full,
        // so the common case costs one hash lookup).
        if self.heap.len() >= self.capacity && !self.heap.contains(&key) {
            return Err(QueueFull {
                capacity: self.capacity,
            });
        }
        self.heap.push(key, priority);
        Ok(())
    }

    /// Removes `key` if pending; returns the time it was due.
    pub fn cancel(&mut self, key: &K) -> Option<T> {
        self.heap.remove(key).map(|(_, Reverse((at, _)))| at)
    }

    /// Removes and returns the earliest event (FIFO among equal times), advancing
    /// [`now`](Self::now) to its time.
    pub fn pop(&mut self) -> Option<(T, K)> {
        let (key, Reverse((at, _))) = self.heap.pop()?;
        assert!(
            at >= self.now,
            "time went backwards: {at:?} < {:?}",
            self.now
        );
        self.now = at;
        Some((at, key))
    }

    /// The time of the earliest pending event.
    pub fn peek_time(&self) -> Option<T> {
        self.heap.peek().map(|(_, Reverse((at, _)))| *at)
    }

    /// The time of the last popped event (the simulation's present).
    pub fn now(&self) -> T {
        self.now
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    pub fn is_pending(&self, key: &K) -> bool {
        self.heap.contains(key)
    }
}

/// A fast, deterministic hasher for small keys (Fx-style multiply-rotate). Only used for
/// lookups, never iterated, so it cannot leak order into results.
#[derive(Default, Clone, Copy)]
pub struct KeyHasher(u64);

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.write_u64(i as u64);
    }
    fn write_u16(&mut self, i: u16) {
        self.write_u64(i as u64);
    }
    fn write_u32(&mut self, i: u32) {
        self.write_u64(i as u64);
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(SEED);
    }
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }
    fn write_isize(&mut self, i: isize) {
        self.write_u64(i as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_times_pop_first_in_first_out() {
        let mut q: EventQueue<u32, u64> = EventQueue::new(16);
        q.schedule(3, 10).unwrap();
        q.schedule(1, 5).unwrap();
        q.schedule(2, 10).unwrap();
        q.schedule(0, 10).unwrap();
        let order: Vec<(u64, u32)> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(order, vec![(5, 1), (10, 3), (10, 2), (10, 0)]);
        assert_eq!(q.now(), 10);
    }

    #[test]
    fn rescheduling_moves_the_event_and_requeues_it_last() {
        let mut q: EventQueue<u32, u64> = EventQueue::new(4);
        q.schedule(1, 10).unwrap();
        q.schedule(2, 10).unwrap();
        q.schedule(1, 10).unwrap();
        assert_eq!(q.len(), 2);
        assert_eq!(q.pop(), Some((10, 2)));
        assert_eq!(q.pop(), Some((10, 1)));
        q.schedule(5, 20).unwrap();
        assert_eq!(q.cancel(&5), Some(20));
        assert!(q.is_empty());
    }

    #[test]
    fn capacity_is_a_bound() {
        let mut q: EventQueue<u32, u64> = EventQueue::new(2);
        q.schedule(1, 1).unwrap();
        q.schedule(2, 1).unwrap();
        assert_eq!(q.schedule(3, 1), Err(QueueFull { capacity: 2 }));
        // Moving a pending key needs no room.
        q.schedule(2, 3).unwrap();
    }

    #[test]
    #[should_panic(expected = "before the current time")]
    fn scheduling_in_the_past_is_refused() {
        let mut q: EventQueue<u32, u64> = EventQueue::new(2);
        q.schedule(1, 10).unwrap();
        q.pop();
        let _ = q.schedule(2, 9);
    }
}
