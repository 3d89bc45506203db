//! A queue's record of when the pieces of messages passed it: at a receiving queue each packet
//! of a rate-limited peer's message (and each fragment of a long network message), its bytes
//! and the time the library took it from the provider; at a sending queue each of its own, and
//! the time its provider put it on the wire. Off unless asked for (`umq-perf --test
//! pacing --wire` turns it on at the receiver to measure how a paced message crossed); the data
//! path then pays one test of an empty option per piece, and only on the packet paths.

use crate::os::clock_ns;

/// One piece that arrived: when (`os::clock_ns`) and its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arrival {
    pub at_ns: u64,
    pub bytes: u32,
}

/// The pieces recorded so far, up to a limit the caller chose (later ones are counted, not
/// kept, so a forgotten log cannot grow without bound).
pub struct ArrivalLog {
    kept: Vec<Arrival>,
    limit: usize,
    dropped: u64,
}

impl ArrivalLog {
    pub fn new(limit: usize) -> ArrivalLog {
        ArrivalLog {
            kept: Vec::with_capacity(limit.min(1 << 16)),
            limit,
            dropped: 0,
        }
    }

    /// A piece of `bytes` now.
    pub fn note(&mut self, bytes: u64) {
        if self.kept.len() < self.limit {
            self.kept.push(Arrival {
                at_ns: clock_ns(),
                bytes: bytes.min(u32::MAX as u64) as u32,
            });
        } else {
            self.dropped += 1;
        }
    }

    /// The pieces kept so far, and how many more arrived past the limit; the log starts over.
    pub fn take(&mut self) -> (Vec<Arrival>, u64) {
        let kept = std::mem::take(&mut self.kept);
        (kept, std::mem::take(&mut self.dropped))
    }
}

/// The most bytes that arrived within any window of `window_ns` (both ends included), for
/// arrivals in time order: how bursty a paced stream was at the receiver.
pub fn burst_bytes_max(arrivals: &[Arrival], window_ns: u64) -> u64 {
    let mut first = 0;
    let mut inside = 0u64;
    let mut most = 0u64;
    for a in arrivals {
        inside += a.bytes as u64;
        while a.at_ns - arrivals[first].at_ns > window_ns {
            inside -= arrivals[first].bytes as u64;
            first += 1;
        }
        most = most.max(inside);
    }
    most
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t: &[(u64, u32)]) -> Vec<Arrival> {
        t.iter()
            .map(|&(at_ns, bytes)| Arrival { at_ns, bytes })
            .collect()
    }

    #[test]
    fn the_burst_is_the_most_bytes_in_any_window() {
        let a = at(&[(0, 100), (10, 100), (25, 100), (26, 50), (100, 100)]);
        // Window 10: (0,10) 200, (25,26) 150 -> 200; window 16: (10,25,26) 250.
        assert_eq!(burst_bytes_max(&a, 10), 200);
        assert_eq!(burst_bytes_max(&a, 16), 250);
        assert_eq!(burst_bytes_max(&a, 0), 100);
        assert_eq!(burst_bytes_max(&a, 1000), 450);
        assert_eq!(burst_bytes_max(&[], 5), 0);
    }

    #[test]
    fn a_log_keeps_up_to_its_limit_and_counts_the_rest() {
        let mut log = ArrivalLog::new(2);
        for n in [10, 20, 30] {
            log.note(n);
        }
        let (kept, dropped) = log.take();
        assert_eq!(kept.iter().map(|a| a.bytes).collect::<Vec<_>>(), [10, 20]);
        assert!(kept[0].at_ns <= kept[1].at_ns);
        assert_eq!(dropped, 1);
        assert_eq!(log.take(), (vec![], 0));
    }
}
