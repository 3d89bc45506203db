//! A first-in first-out ring of small `Copy` values for the send, receive and completion queues.
//!
//! Why not `VecDeque`: every queue here is bounded by a depth fixed at create time, so the ring
//! is sized once to a power of two and indexed with a mask. Its push and pop are a few
//! instructions with no wrap-around branch, and taking a burst of completions is at most two
//! slice copies. It still grows (cold path) rather than overwrite if a bound is ever exceeded.

pub struct Fifo<T: Copy> {
    slots: Box<[T]>,
    /// `slots.len() - 1` (the length is a power of two).
    mask: usize,
    /// Position of the oldest value; wraps freely, masked on every access.
    head: usize,
    len: usize,
    /// Value the unused slots hold (never observable: only `len` slots from `head` are read).
    fill: T,
}

impl<T: Copy> Fifo<T> {
    /// A ring holding at least `capacity` values before it has to grow.
    pub fn with_capacity(capacity: usize, fill: T) -> Self {
        let n = capacity.max(1).next_power_of_two();
        Fifo {
            slots: vec![fill; n].into_boxed_slice(),
            mask: n - 1,
            head: 0,
            len: 0,
            fill,
        }
    }

    fn slot(&self, i: usize) -> usize {
        self.head.wrapping_add(i) & self.mask
    }

    /// The value in slot `at`, which `slot()` masked into range.
    fn read(&self, at: usize) -> T {
        debug_assert!(at < self.slots.len());
        // SAFETY: `at` is masked by `mask`, which is slots.len() - 1, so it is in bounds.
        unsafe { *self.slots.get_unchecked(at) }
    }

    fn write(&mut self, at: usize, v: T) {
        debug_assert!(at < self.slots.len());
        // SAFETY: as in `read`.
        unsafe { *self.slots.get_unchecked_mut(at) = v }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// (Inlined: a call cost a ping-pong's send queue push about as much as the push.)
    #[inline]
    pub fn push_back(&mut self, v: T) {
        if self.len > self.mask {
            self.grow();
        }
        let at = self.slot(self.len);
        self.write(at, v);
        self.len += 1;
    }

    /// Puts `v` first in line (a value taken and given back).
    pub fn push_front(&mut self, v: T) {
        if self.len > self.mask {
            self.grow();
        }
        self.head = self.head.wrapping_sub(1);
        let at = self.slot(0);
        self.write(at, v);
        self.len += 1;
    }

    pub fn pop_front(&mut self) -> Option<T> {
        let v = self.front()?;
        self.head = self.head.wrapping_add(1);
        self.len -= 1;
        Some(v)
    }

    pub fn front(&self) -> Option<T> {
        (self.len > 0).then(|| self.read(self.slot(0)))
    }

    /// The `i`th value from the front.
    pub fn get(&self, i: usize) -> Option<T> {
        (i < self.len).then(|| self.read(self.slot(i)))
    }

    pub fn iter(&self) -> impl Iterator<Item = T> + '_ {
        (0..self.len).map(|i| self.read(self.slot(i)))
    }

    /// Moves the oldest values into `out` (as many as fit); returns how many.
    pub fn pop_into(&mut self, out: &mut [T]) -> usize {
        self.pop_map_into(out, |v| v)
    }

    /// `pop_into` through `f`: one length check for the whole burst, not one per value.
    #[inline]
    pub fn pop_map_into<U>(&mut self, out: &mut [U], mut f: impl FnMut(T) -> U) -> usize {
        let n = out.len().min(self.len);
        // A plain loop, not slice copies: a poll usually takes a handful, and two calls into
        // memcpy cost more than moving them. A ping-pong takes one at a time: that case skips
        // the loop's set-up (the compiler unrolls and vectorises it).
        if n == 1 {
            out[0] = f(self.read(self.slot(0)));
        } else {
            for (i, slot) in out[..n].iter_mut().enumerate() {
                *slot = f(self.read(self.slot(i)));
            }
        }
        self.head = self.head.wrapping_add(n);
        self.len -= n;
        n
    }

    /// Empties the ring, oldest first.
    pub fn drain(&mut self) -> impl Iterator<Item = T> + '_ {
        let (head, len) = (self.head, self.len);
        self.head = 0;
        self.len = 0;
        let (slots, mask) = (&self.slots, self.mask);
        (0..len).map(move |i| slots[head.wrapping_add(i) & mask])
    }

    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        let mut bigger = vec![self.fill; self.slots.len() * 2].into_boxed_slice();
        for (i, v) in self.iter().enumerate() {
            bigger[i] = v;
        }
        self.slots = bigger;
        self.mask = self.slots.len() - 1;
        self.head = 0;
    }
}

impl<T: Copy> std::ops::Index<usize> for Fifo<T> {
    type Output = T;

    fn index(&self, i: usize) -> &T {
        assert!(i < self.len, "Fifo index {i} out of {}", self.len);
        // SAFETY: as in `read`.
        unsafe { self.slots.get_unchecked(self.slot(i)) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    #[test]
    fn behaves_like_a_deque_across_wraps_and_growth() {
        // A fixed pseudo-random walk of operations checked against VecDeque.
        let mut f = Fifo::with_capacity(3, 0u32);
        let mut model = VecDeque::new();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut out = [0u32; 5];
        for step in 0..20_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            match x % 6 {
                0 | 1 => {
                    f.push_back(step);
                    model.push_back(step);
                }
                2 => assert_eq!(f.pop_front(), model.pop_front()),
                3 => {
                    f.push_front(step);
                    model.push_front(step);
                }
                4 => {
                    let k = (x >> 8) as usize % 6;
                    let n = f.pop_into(&mut out[..k.min(5)]);
                    let want: Vec<u32> = (0..n).filter_map(|_| model.pop_front()).collect();
                    assert_eq!(&out[..n], &want[..]);
                    assert_eq!(n, k.min(5).min(n + model.len()));
                }
                _ => {
                    if model.len() > 40 {
                        assert!(f.drain().eq(model.drain(..)));
                    }
                }
            }
            assert_eq!(f.len(), model.len());
            assert_eq!(f.front(), model.front().copied());
            let i = (x >> 20) as usize % (model.len() + 1);
            assert_eq!(f.get(i), model.get(i).copied());
            if i < model.len() {
                assert_eq!(f[i], model[i]);
            }
        }
        assert!(f.iter().eq(model.iter().copied()));
    }

    #[test]
    fn pop_into_takes_both_halves_of_a_wrapped_ring() {
        let mut f = Fifo::with_capacity(4, 0u8);
        for v in [1, 2, 3] {
            f.push_back(v);
        }
        f.pop_front();
        f.pop_front();
        for v in [4, 5, 6] {
            f.push_back(v);
        }
        let mut out = [0u8; 8];
        assert_eq!(f.pop_into(&mut out), 4);
        assert_eq!(&out[..4], &[3, 4, 5, 6]);
        assert!(f.is_empty());
        assert_eq!(f.pop_into(&mut out), 0);
    }
}
