//! Which slot of a chunk an address names, without a division.
//!
//! A buffer's allocation and free (the application's, and the library's of what the base API
//! sent) find its slot from the header's address: whether the offset from the chunk's first
//! header is a whole number of strides, and which. A stride is a chunk's own (the header, or the
//! header and its data area), so the compiler knows no constant: `%` and `/` were two 64-bit
//! divisions a lookup, tens of cycles each.
//!
//! A stride is `2^shift * odd`. An offset that is a multiple of it has its low `shift` bits
//! clear, and what remains, times the inverse of `odd` modulo 2^64, is its quotient; for any
//! other value the product is larger than `u64::MAX / odd` (Granlund and Montgomery, "Division
//! by invariant integers using multiplication", 1994, section 9), so larger than any slot count.
//! One comparison with the count then checks both.

/// A chunk's slot stride, ready to divide offsets by.
#[derive(Clone, Copy, Debug)]
pub struct Stride {
    stride: usize,
    shift: u32,
    /// The inverse of the stride's odd part modulo 2^64.
    inverse: u64,
}

impl Stride {
    /// `stride` must not be 0.
    pub fn new(stride: usize) -> Stride {
        assert!(stride > 0, "a slot stride of 0");
        let shift = stride.trailing_zeros();
        let odd = (stride >> shift) as u64;
        // An odd number is its own inverse modulo 8; each Newton step doubles the bits that are
        // right: 3, 6, 12, 24, 48, 96.
        let mut inverse = odd;
        for _ in 0..5 {
            inverse = inverse.wrapping_mul(2u64.wrapping_sub(odd.wrapping_mul(inverse)));
        }
        debug_assert_eq!(odd.wrapping_mul(inverse), 1);
        Stride {
            stride,
            shift,
            inverse,
        }
    }

    pub fn get(self) -> usize {
        self.stride
    }

    /// `off / stride` when `off` is a whole number of strides and fewer than `count`; None
    /// otherwise.
    #[inline(always)]
    pub fn index_of(self, off: usize, count: usize) -> Option<usize> {
        if off & ((1usize << self.shift) - 1) != 0 {
            return None;
        }
        let quotient = ((off >> self.shift) as u64).wrapping_mul(self.inverse);
        (quotient < count as u64).then_some(quotient as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the divisions said.
    fn divided(stride: usize, off: usize, count: usize) -> Option<usize> {
        (off.is_multiple_of(stride) && off / stride < count).then(|| off / stride)
    }

    #[test]
    fn agrees_with_division_on_every_offset_near_the_slots() {
        // Powers of two, odd strides, and a header with data areas of the pool's classes.
        for stride in [
            1,
            2,
            3,
            7,
            128,
            136,
            192,
            640,
            4224,
            8320,
            65664,
            1 << 20,
            3 << 20,
        ] {
            let s = Stride::new(stride);
            for count in [1, 2, 5, 64, 4096] {
                let end = stride * (count + 2);
                let probes = (0..4 * stride.min(300))
                    .chain((0..=count + 1).flat_map(|i| {
                        let at = i * stride;
                        [at.saturating_sub(1), at, at + 1, at + stride / 2]
                    }))
                    .chain([end, usize::MAX, usize::MAX - stride + 1, usize::MAX / 2]);
                for off in probes {
                    assert_eq!(
                        s.index_of(off, count),
                        divided(stride, off, count),
                        "stride {stride}, count {count}, offset {off}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_multiple_past_the_count_is_no_slot() {
        let s = Stride::new(136);
        assert_eq!(s.index_of(136 * 9, 10), Some(9));
        assert_eq!(s.index_of(136 * 10, 10), None);
        assert_eq!(s.index_of(136 * 9 + 8, 10), None);
    }
}
