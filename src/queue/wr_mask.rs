//! One bit per WR of a post: which need credit, which carry a user immediate. As many bits as
//! the exported revision's batch (`limits::BATCH`): one word for December's 64, four for July
//! 2026's 256; with one word every method compiles to the plain `u64` operation.

const WORDS: usize = (crate::limits::BATCH as usize).div_ceil(64);

#[derive(Clone, Copy, Default)]
pub(crate) struct WrMask([u64; WORDS]);

impl WrMask {
    #[inline(always)]
    pub fn set(&mut self, i: usize) {
        self.0[i / 64] |= 1 << (i % 64);
    }

    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|&w| w == 0)
    }

    /// Set bits in positions `from..to`.
    pub fn count_between(&self, from: usize, to: usize) -> u64 {
        (0..WORDS)
            .map(|w| {
                let (lo, hi) = (w * 64, w * 64 + 64);
                let (a, b) = (from.max(lo), to.min(hi));
                if a >= b {
                    return 0;
                }
                ((self.0[w] >> (a - lo)) & low_bits(b - a)).count_ones() as u64
            })
            .sum()
    }

    /// The position of the set bit after the `k` lowest ones (the mask's length, 64 a word, if
    /// there is none). Only for the rare short window: a batch that gets all its credit needs
    /// no bit walk.
    pub fn after_lowest(&self, mut k: u32) -> usize {
        for (w, &word) in self.0.iter().enumerate() {
            let ones = word.count_ones();
            if k < ones {
                let mut m = word;
                for _ in 0..k {
                    m &= m - 1;
                }
                return w * 64 + m.trailing_zeros() as usize;
            }
            k -= ones;
        }
        WORDS * 64
    }

    /// The set bits below `n`, lowest first.
    pub fn ones_below(&self, n: usize) -> impl Iterator<Item = usize> + '_ {
        (0..WORDS).flat_map(move |w| {
            let lo = w * 64;
            let mut m = if n <= lo {
                0
            } else {
                self.0[w] & low_bits(n - lo)
            };
            std::iter::from_fn(move || {
                (m != 0).then(|| {
                    let i = m.trailing_zeros() as usize;
                    m &= m - 1;
                    lo + i
                })
            })
        })
    }
}

/// Bits 0..n set (all of them for n >= 64).
fn low_bits(n: usize) -> u64 {
    if n >= 64 { u64::MAX } else { (1u64 << n) - 1 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mask(bits: &[usize]) -> WrMask {
        let mut m = WrMask::default();
        bits.iter().for_each(|&b| m.set(b));
        m
    }

    #[test]
    fn counts_and_walks_agree_with_a_list_of_bits() {
        let top = WORDS * 64 - 1;
        let bits = [0, 3, 62, top];
        let m = mask(&bits);
        assert_eq!(m.count_between(0, top + 1), 4);
        assert_eq!(m.count_between(1, 62), 1);
        assert_eq!(m.count_between(3, 63), 2);
        assert_eq!(m.after_lowest(0), 0);
        assert_eq!(m.after_lowest(2), 62);
        assert_eq!(m.after_lowest(3), top);
        assert_eq!(m.after_lowest(4), WORDS * 64);
        assert_eq!(m.ones_below(63).collect::<Vec<_>>(), [0, 3, 62]);
        assert_eq!(m.ones_below(top + 1).count(), 4);
        assert!(!m.is_empty() && WrMask::default().is_empty());
    }
}
