//! Test helpers: a small seeded random generator and knobs a person can
//! turn by hand.

/// A small seeded PRNG (xorshift64*) for the property and fuzz tests:
/// reproducible, and no new dependency.
pub(crate) struct TestRng(pub(crate) u64);

impl TestRng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// True one time in `n`.
    pub(crate) fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }
}

/// The number in environment variable `k`, else `default`: lets a person
/// run a bounded test longer or with another seed by hand.
pub(crate) fn env_or(k: &str, default: u64) -> u64 {
    std::env::var(k)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
