//! The counter cell behind the flow-control statistics: a plain integer, since every counter
//! lives under its queue's lock (`FlowState`). The counters' algorithms (`take_upto`,
//! `add_bounded`, `take_all`) are written once, on top of [`Plain::update`].

use std::cell::Cell;

/// A plain counter: no atomic instruction anywhere.
#[derive(Default, Clone, PartialEq, Eq)]
pub struct Plain(Cell<u64>);

impl std::hash::Hash for Plain {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.0.get().hash(h)
    }
}

impl std::fmt::Debug for Plain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.get().fmt(f)
    }
}

impl Plain {
    pub fn get(&self) -> u64 {
        self.0.get()
    }
    pub fn set(&self, v: u64) {
        self.0.set(v)
    }
    /// Replaces the value with `f(current)` unless `f` returns None; returns the old value
    /// when the update happened.
    pub fn update(&self, f: impl FnOnce(u64) -> Option<u64>) -> Option<u64> {
        let old = self.0.get();
        let new = f(old)?;
        self.0.set(new);
        Some(old)
    }
    pub fn add(&self, n: u64) {
        self.update(|v| Some(v.wrapping_add(n)));
    }
    pub fn sub(&self, n: u64) {
        self.update(|v| Some(v.wrapping_sub(n)));
    }
    /// Takes up to `want` units; returns how many were taken.
    pub fn take_upto(&self, want: u64) -> u64 {
        let old = self.update(|v| Some(v - v.min(want))).unwrap_or(0);
        old.min(want)
    }
    /// Adds `n` unless the sum would pass `max`; false (and nothing changed) when refused.
    pub fn add_bounded(&self, n: u64, max: u64) -> bool {
        self.update(|v| v.checked_add(n).filter(|&s| s <= max))
            .is_some()
    }
    /// Takes everything, leaving zero.
    pub fn take_all(&self) -> u64 {
        self.update(|_| Some(0)).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counters_algorithms() {
        let w = Plain::default();
        let mut seen = vec![];
        w.add(5);
        seen.push(w.take_upto(3));
        seen.push(w.take_upto(9));
        seen.push(w.add_bounded(4, 4) as u64);
        seen.push(w.add_bounded(1, 4) as u64);
        seen.push(w.take_all());
        seen.push(w.get());
        assert_eq!(seen, vec![3, 2, 1, 0, 4, 0]);
    }
}
