//! xorshift64*: small, seeded, reproducible. Shared by the integration tests (through
//! `support`) and the library's own unit tests (`src/transport/shm/mod.rs` includes this file).
#![allow(dead_code)]

pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// One of `from`.
    pub fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.below(from.len() as u64) as usize]
    }

    /// Mostly values at the edges of what a field may hold (near one of `near`, or a classic
    /// boundary), sometimes anything.
    pub fn edgy(&mut self, near: &[u64]) -> u64 {
        match self.below(4) {
            0 => self.next(),
            1 => self.pick(&[0, 1, 63, 64, 4095, 4096, u32::MAX as u64, u64::MAX]),
            _ => self.pick(near).wrapping_add(self.below(3)).wrapping_sub(1),
        }
    }
}
