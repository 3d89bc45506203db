//! Reproducible choices for the generators of hostile input: drawn from a seeded xorshift64*
//! (`Rng`, the tests) or from a fuzzer's bytes (`Tape`, the fuzz targets), so one generator
//! serves both and a fuzzer's mutations steer it. Compiled for tests and the `fuzzing` feature
//! only; the integration tests include this file through `tests/support`.
#![allow(dead_code)]

/// A source of choices. `next` is the only primitive; the rest shape it.
pub trait Draw {
    fn next(&mut self) -> u64;

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// One of `from`.
    fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.below(from.len() as u64) as usize]
    }

    /// Mostly values at the edges of what a field may hold (near one of `near`, or a classic
    /// boundary), sometimes anything.
    fn edgy(&mut self, near: &[u64]) -> u64 {
        match self.below(4) {
            0 => self.next(),
            1 => self.pick(&[0, 1, 63, 64, 4095, 4096, u32::MAX as u64, u64::MAX]),
            _ => self.pick(near).wrapping_add(self.below(3)).wrapping_sub(1),
        }
    }
}

/// xorshift64*: small, seeded, reproducible.
pub struct Rng(pub u64);

impl Draw for Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// A fuzzer's input read as choices: each `next` takes up to eight bytes (little-endian), then
/// zeros once the input is used up, so every input, however short, is a complete run.
pub struct Tape<'a> {
    bytes: &'a [u8],
}

impl<'a> Tape<'a> {
    pub fn new(bytes: &'a [u8]) -> Tape<'a> {
        Tape { bytes }
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The next `n` bytes as they are (fewer at the end of the input).
    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        let (head, rest) = self.bytes.split_at(n.min(self.bytes.len()));
        self.bytes = rest;
        head
    }

    /// One byte (zero at the end): the cheap choice, so short inputs steer many decisions.
    pub fn byte(&mut self) -> u8 {
        self.bytes(1).first().copied().unwrap_or(0)
    }
}

impl Tape<'_> {
    fn word(&mut self, n: usize) -> u64 {
        let mut word = [0u8; 8];
        let b = self.bytes(n);
        word[..b.len()].copy_from_slice(b);
        u64::from_le_bytes(word)
    }
}

impl Draw for Tape<'_> {
    fn next(&mut self) -> u64 {
        self.word(8)
    }

    /// As few bytes as the choice needs: a fuzzer's one-byte mutation changes one decision.
    fn below(&mut self, n: u64) -> u64 {
        let bytes = match n {
            0..=256 => 1,
            257..=65536 => 2,
            _ => 8,
        };
        self.word(bytes) % n.max(1)
    }
}
