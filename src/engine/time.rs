//! [`Cycles`] (one clock domain) and [`Time`] (picoseconds, across domains).

use serde::Serialize;
use std::fmt;
use std::ops::{Add, AddAssign, Sub};

/// Picoseconds in one second.
pub const PS_PER_S: u64 = 1_000_000_000_000;

/// The latest simulated time a simulation may reach: 2^62 ps, about 53 days. Conversions
/// and sums of [`Time`] saturate at `u64::MAX` instead of overflowing, so a configuration
/// whose costs would pass the end of u64 picoseconds produces times beyond the ceiling,
/// never a wrapped or panicking one; the system executor stops with an error at the first
/// event past the ceiling, while every time before it is exact.
pub const CEILING: Time = Time(1 << 62);

/// A count of cycles of one clock domain (a DPU's clock).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize)]
pub struct Cycles(pub u64);

/// Simulated time in integer picoseconds, shared by every clock domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize)]
pub struct Time(pub u64);

impl Time {
    pub const ZERO: Time = Time(0);

    pub fn from_ps(ps: u64) -> Time {
        Time(ps)
    }

    pub const fn ps(self) -> u64 {
        self.0
    }

    /// Microseconds, as a float for reports only (never fed back into the model).
    pub fn as_us_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }

    pub fn as_s_f64(self) -> f64 {
        self.0 as f64 / PS_PER_S as f64
    }

    /// Time to move `bytes` at `bytes_per_s`, rounded up to a whole picosecond.
    /// `bytes_per_s` must be positive (machine validation guarantees it).
    pub fn for_bytes(bytes: u64, bytes_per_s: u64) -> Time {
        debug_assert!(bytes_per_s > 0);
        Time(div_ceil_u128(
            bytes as u128 * PS_PER_S as u128,
            bytes_per_s as u128,
        ))
    }

    pub fn saturating_sub(self, other: Time) -> Time {
        Time(self.0.saturating_sub(other.0))
    }
}

/// Saturates at `u64::MAX` (see [`CEILING`]).
impl Add for Time {
    type Output = Time;
    fn add(self, rhs: Time) -> Time {
        Time(self.0.saturating_add(rhs.0))
    }
}

impl AddAssign for Time {
    fn add_assign(&mut self, rhs: Time) {
        *self = *self + rhs;
    }
}

impl Sub for Time {
    type Output = Time;
    fn sub(self, rhs: Time) -> Time {
        Time(
            self.0
                .checked_sub(rhs.0)
                .expect("time went backwards in a subtraction"),
        )
    }
}

impl Add for Cycles {
    type Output = Cycles;
    fn add(self, rhs: Cycles) -> Cycles {
        Cycles(
            self.0
                .checked_add(rhs.0)
                .expect("cycle count overflowed u64"),
        )
    }
}

impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.3} us", self.as_us_f64())
    }
}

impl fmt::Display for Cycles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} cycles", self.0)
    }
}

/// A clock domain: converts its cycle counts to picoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clock {
    hz: u64,
}

impl Clock {
    /// A clock of `hz` cycles per second; `hz` must be positive.
    pub fn from_hz(hz: u64) -> Clock {
        assert!(hz > 0, "a clock needs a positive frequency");
        Clock { hz }
    }

    pub fn hz(self) -> u64 {
        self.hz
    }

    /// The picoseconds `cycles` take, rounded up (the one conversion rule of the scheme).
    pub fn to_time(self, cycles: Cycles) -> Time {
        Time(div_ceil_u128(
            cycles.0 as u128 * PS_PER_S as u128,
            self.hz as u128,
        ))
    }
}

/// `num / den` rounded up, saturated at `u64::MAX` (see [`CEILING`]).
fn div_ceil_u128(num: u128, den: u128) -> u64 {
    u64::try_from(num.div_ceil(den)).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversion_rounds_up_once() {
        let clock = Clock::from_hz(350_000_000);
        // 1 cycle = 2857.142857... ps -> 2858; 7 cycles = 20,000 ps exactly.
        assert_eq!(clock.to_time(Cycles(1)), Time(2858));
        assert_eq!(clock.to_time(Cycles(7)), Time(20_000));
        assert_eq!(clock.to_time(Cycles(350_000_000)), Time(PS_PER_S));
        assert_eq!(Time::for_bytes(1000, 1_000_000_000), Time(1_000_000));
        assert_eq!(Time::for_bytes(1, 3), Time(333_333_333_334));
    }
}
