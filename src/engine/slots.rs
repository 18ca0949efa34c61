//! [`SlotQueue`]: pending events of a few small-integer keys (a DPU's tasklets), with the
//! same ordering contract as [`super::EventQueue`] but no heap and no hashing: each key has
//! one slot holding its due (time, insertion sequence), and the earliest slot is cached.
//!
//! A DPU has at most 32 tasklets, each pending at most once, so a linear scan over the
//! slots after a pop is cheaper than keeping an indexed binary heap (whose pop, with its
//! index map, was the largest single cost of the DPU engine).
//!
//! # Ordering contract
//!
//! [`pop`](SlotQueue::pop) returns the key with the smallest time; keys with **equal times
//! come out first-in first-out**, in the order they were scheduled. Scheduling a pending key
//! moves it to its new time with a new insertion sequence. Time never goes backwards
//! (asserted). Complexity with `n` slots: `schedule` O(1) (O(n) when it moves the earliest
//! key later), `pop` O(n), `peek_time` O(1).

use super::QueueFull;

const IDLE: (u64, u64) = (u64::MAX, u64::MAX);

/// See the module documentation.
#[derive(Debug, Clone)]
pub struct SlotQueue {
    /// (time, sequence) of each key; [`IDLE`] when not pending.
    due: Vec<(u64, u64)>,
    /// The pending key with the smallest (time, sequence).
    first: Option<u32>,
    next_seq: u64,
    now: u64,
}

impl SlotQueue {
    /// Keys `0..capacity`, none pending, at time 0.
    pub fn new(capacity: usize) -> SlotQueue {
        SlotQueue {
            due: vec![IDLE; capacity],
            first: None,
            next_seq: 0,
            now: 0,
        }
    }

    /// Schedules `key` at `at`, or moves it there if it is pending. A key outside the
    /// queue's capacity is refused.
    ///
    /// Panics if `at` is before [`now`](Self::now): time never goes backwards.
    pub fn schedule(&mut self, key: u32, at: u64) -> Result<(), QueueFull> {
        assert!(
            at >= self.now,
            "key {key} scheduled at {at}, before the current time {}",
            self.now
        );
        let capacity = self.due.len();
        let slot = self
            .due
            .get_mut(key as usize)
            .ok_or(QueueFull { capacity })?;
        *slot = (at, self.next_seq);
        self.next_seq += 1;
        match self.first {
            // The earliest key moved (later, since its sequence grew): find the new one.
            Some(f) if f == key => self.first = self.scan(),
            Some(f) if self.due[f as usize] <= (at, self.next_seq - 1) => {}
            _ => self.first = Some(key),
        }
        Ok(())
    }

    /// Removes and returns the earliest event, advancing [`now`](Self::now) to its time.
    pub fn pop(&mut self) -> Option<(u64, u32)> {
        let key = self.first?;
        let (at, _) = std::mem::replace(&mut self.due[key as usize], IDLE);
        assert!(at >= self.now, "time went backwards: {at} < {}", self.now);
        self.now = at;
        self.first = self.scan();
        Some((at, key))
    }

    /// The time of the earliest pending event.
    pub fn peek_time(&self) -> Option<u64> {
        self.first.map(|k| self.due[k as usize].0)
    }

    /// The time of the last popped event.
    pub fn now(&self) -> u64 {
        self.now
    }

    pub fn is_pending(&self, key: u32) -> bool {
        self.due.get(key as usize).is_some_and(|&d| d != IDLE)
    }

    pub fn is_empty(&self) -> bool {
        self.first.is_none()
    }

    fn scan(&self) -> Option<u32> {
        // IDLE sorts after every pending (time, sequence), and sequences are unique, so the
        // smallest entry is the earliest pending key, if any.
        let mut best = IDLE;
        let mut key = 0;
        for (k, &d) in self.due.iter().enumerate() {
            if d < best {
                best = d;
                key = k;
            }
        }
        (best != IDLE).then_some(key as u32)
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
