//! [`SortedRing`]: at most [`RING_CAPACITY`] small items kept in order in a fixed ring, for
//! the per-DPU sets that the executor touches on every event (the wake-up queue and the
//! pipeline's computing tasklets; a DPU has at most 32 tasklets).
//!
//! Both sets mostly receive items that sort after every item they hold (wake-ups come due
//! in about the order they were scheduled; a compute started now usually finishes after
//! those started before), and give up their first item. So an insertion searches from the
//! back and usually stops at once, and the front leaves by moving the ring's head. The
//! fixed array with a power-of-two capacity needs neither wrap-around branches nor bounds
//! checks, which a `VecDeque` pays on every access.

/// Items a [`SortedRing`] holds at most.
pub const RING_CAPACITY: usize = 32;

/// See the module documentation.
#[derive(Debug, Clone)]
pub struct SortedRing<T> {
    items: [T; RING_CAPACITY],
    head: usize,
    len: usize,
}

impl<T: Copy + Default> Default for SortedRing<T> {
    fn default() -> Self {
        SortedRing {
            items: [T::default(); RING_CAPACITY],
            head: 0,
            len: 0,
        }
    }
}

impl<T: Copy + Default> SortedRing<T> {
    pub fn new() -> Self {
        Self::default()
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The item at position `i` from the front (`i < len`).
    #[inline]
    pub fn get(&self, i: usize) -> T {
        debug_assert!(i < self.len);
        self.items[(self.head + i) % RING_CAPACITY]
    }

    #[inline]
    pub fn front(&self) -> Option<T> {
        (self.len > 0).then(|| self.items[self.head])
    }

    #[inline]
    pub fn pop_front(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        let item = self.items[self.head];
        self.head = (self.head + 1) % RING_CAPACITY;
        self.len -= 1;
        Some(item)
    }

    /// Inserts `item` after every item that does not sort after it, where
    /// `sorts_after(existing)` tells whether `existing` belongs after `item`: among equals,
    /// the newest is last.
    ///
    /// Panics if the ring is full (every user bounds its items by the tasklets).
    #[inline]
    pub fn insert(&mut self, item: T, sorts_after: impl Fn(T) -> bool) {
        assert!(self.len < RING_CAPACITY, "sorted ring full");
        let mut place = self.len;
        while place > 0 && sorts_after(self.get(place - 1)) {
            // Move the item one place towards the back to make room.
            let from = (self.head + place - 1) % RING_CAPACITY;
            self.items[(from + 1) % RING_CAPACITY] = self.items[from];
            place -= 1;
        }
        self.items[(self.head + place) % RING_CAPACITY] = item;
        self.len += 1;
    }

    /// Removes the item at position `i` from the front (`i < len`).
    pub fn remove(&mut self, i: usize) -> T {
        assert!(i < self.len, "sorted ring index out of range");
        let item = self.get(i);
        for j in i..self.len - 1 {
            let to = (self.head + j) % RING_CAPACITY;
            self.items[to] = self.items[(to + 1) % RING_CAPACITY];
        }
        self.len -= 1;
        item
    }

    /// The position of the first item that satisfies `matches`.
    pub fn position(&self, matches: impl Fn(T) -> bool) -> Option<usize> {
        (0..self.len).find(|&i| matches(self.get(i)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_order_across_the_wrap_and_puts_equals_last() {
        let mut ring: SortedRing<(u32, u32)> = SortedRing::new();
        let mut reference: Vec<(u32, u32)> = Vec::new();
        let mut x = 0x2545_f491u32;
        for step in 0..5_000u32 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            if ring.len() == RING_CAPACITY || (x.is_multiple_of(3) && !ring.is_empty()) {
                assert_eq!(ring.pop_front(), Some(reference.remove(0)));
            } else if x % 7 == 1 && !ring.is_empty() {
                let i = (x as usize / 7) % ring.len();
                assert_eq!(ring.remove(i), reference.remove(i));
            } else {
                // Keys collide often, so the order among equal keys is exercised.
                let item = (x % 8, step);
                ring.insert(item, |e| e.0 > item.0);
                let at = reference.partition_point(|e| e.0 <= item.0);
                reference.insert(at, item);
            }
            let held: Vec<_> = (0..ring.len()).map(|i| ring.get(i)).collect();
            assert_eq!(held, reference);
            assert_eq!(ring.front(), reference.first().copied());
        }
    }

    #[test]
    #[should_panic(expected = "sorted ring full")]
    fn a_full_ring_refuses_more() {
        let mut ring: SortedRing<u64> = SortedRing::new();
        for i in 0..=RING_CAPACITY as u64 {
            ring.insert(i, |e| e > i);
        }
    }
}
