//! [`SlotQueue`]: pending events of a few small-integer keys (a DPU's tasklets), with the
//! same ordering contract as [`super::EventQueue`] but no heap and no hashing: the pending
//! events sit in a ring sorted by (time, insertion sequence), so the earliest is at the
//! front.
//!
//! A DPU has at most 32 tasklets, each pending at most once. A new event has the largest
//! sequence so far, so it goes after every pending event of the same or an earlier time;
//! DMA completions mostly come due in the order they were issued, so the search for its
//! place, from the back, usually stops at once. (An indexed binary heap, with its index map,
//! was the largest single cost of the DPU engine; a scan of every slot per pop was next.)
//!
//! # Ordering contract
//!
//! [`pop`](SlotQueue::pop) returns the key with the smallest time; keys with **equal times
//! come out first-in first-out**, in the order they were scheduled. Scheduling a pending key
//! moves it to its new time with a new insertion sequence. Time never goes backwards
//! (asserted). Complexity with `n` pending events: `pop` and `peek_time` O(1); `schedule`
//! O(1) when the new event is due no earlier than the latest pending one, O(n) at worst.

use super::QueueFull;
use super::ring::{RING_CAPACITY, SortedRing};

/// See the module documentation.
#[derive(Debug, Clone)]
pub struct SlotQueue {
    /// Pending (time, key) in increasing (time, sequence) order. Sequences are implicit:
    /// an event is placed after every event of its time, which is its sequence's place.
    order: SortedRing<(u64, u32)>,
    /// Whether each key is pending (its capacity is the queue's).
    pending: Vec<bool>,
    now: u64,
}

impl SlotQueue {
    /// Keys `0..capacity`, none pending, at time 0. At most [`RING_CAPACITY`] keys.
    pub fn new(capacity: usize) -> SlotQueue {
        assert!(
            capacity <= RING_CAPACITY,
            "a slot queue holds at most {RING_CAPACITY} keys"
        );
        SlotQueue {
            order: SortedRing::new(),
            pending: vec![false; capacity],
            now: 0,
        }
    }

    /// Schedules `key` at `at`, or moves it there if it is pending. A key outside the
    /// queue's capacity is refused.
    ///
    /// Panics if `at` is before [`now`](Self::now): time never goes backwards.
    #[inline]
    pub fn schedule(&mut self, key: u32, at: u64) -> Result<(), QueueFull> {
        assert!(
            at >= self.now,
            "key {key} scheduled at {at}, before the current time {}",
            self.now
        );
        let capacity = self.pending.len();
        let pending = self
            .pending
            .get_mut(key as usize)
            .ok_or(QueueFull { capacity })?;
        if std::mem::replace(pending, true) {
            let at = self.order.position(|(_, k)| k == key);
            self.order.remove(at.expect("a pending key is in the ring"));
        }
        // After every event due at or before `at`: the newest sequence among equal times.
        self.order.insert((at, key), |(due, _)| due > at);
        debug_assert!(self.order.len() <= capacity);
        Ok(())
    }

    /// Removes and returns the earliest event, advancing [`now`](Self::now) to its time.
    #[inline]
    pub fn pop(&mut self) -> Option<(u64, u32)> {
        let (at, key) = self.order.pop_front()?;
        assert!(at >= self.now, "time went backwards: {at} < {}", self.now);
        self.pending[key as usize] = false;
        self.now = at;
        Some((at, key))
    }

    /// The time of the earliest pending event.
    pub fn peek_time(&self) -> Option<u64> {
        self.order.front().map(|(at, _)| at)
    }

    /// The time of the last popped event.
    pub fn now(&self) -> u64 {
        self.now
    }

    pub fn is_pending(&self, key: u32) -> bool {
        self.pending.get(key as usize).copied().unwrap_or(false)
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::EventQueue;

    #[test]
    fn equal_times_pop_first_in_first_out() {
        let mut q = SlotQueue::new(4);
        q.schedule(3, 10).unwrap();
        q.schedule(1, 5).unwrap();
        q.schedule(2, 10).unwrap();
        q.schedule(0, 10).unwrap();
        let order: Vec<(u64, u32)> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(order, vec![(5, 1), (10, 3), (10, 2), (10, 0)]);
        assert_eq!(q.now(), 10);
    }

    #[test]
    fn rescheduling_moves_the_key_and_requeues_it_last() {
        let mut q = SlotQueue::new(4);
        q.schedule(1, 10).unwrap();
        q.schedule(2, 10).unwrap();
        q.schedule(1, 10).unwrap();
        assert_eq!(q.pop(), Some((10, 2)));
        assert_eq!(q.pop(), Some((10, 1)));
        assert!(q.is_empty());
        assert_eq!(q.schedule(4, 11), Err(QueueFull { capacity: 4 }));
    }

    #[test]
    fn the_same_order_as_the_heap_queue_on_random_schedules() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..200 {
            let mut slots = SlotQueue::new(24);
            let mut heap: EventQueue<u32, u64> = EventQueue::new(24);
            for _ in 0..500 {
                let r = next();
                if r % 3 == 0 {
                    assert_eq!(slots.pop(), heap.pop());
                } else {
                    let key = (r >> 8) as u32 % 24;
                    let at = slots.now() + (r >> 20) % 8;
                    slots.schedule(key, at).unwrap();
                    heap.schedule(key, at).unwrap();
                }
                assert_eq!(slots.peek_time(), heap.peek_time());
            }
            while let Some(e) = heap.pop() {
                assert_eq!(slots.pop(), Some(e));
            }
            assert!(slots.is_empty());
        }
    }
}
