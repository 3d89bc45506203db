//! A rate-limited queue's WRs that wait for the pacer (`Paced`), in order behind its send
//! queue. They hold their flow-control credit already; the pacer's grants release them into
//! the send queue packet by packet (`Paced::grant`), and the provider sends each WR's packets
//! as they are granted (`PacketGate`).

use super::wire::PacketGate;
use crate::abi::types::umq_buf_t;
use crate::flow::pacing::{self, Left};
use std::collections::VecDeque;
use std::ptr;

#[derive(Default)]
pub struct Paced {
    held: VecDeque<*mut umq_buf_t>,
    /// Packets granted so far of the WR a grant ended inside (`open`, or else the first held
    /// WR): its progress, written back when a grant ends inside it.
    progress: u32,
    /// The queue's PMTU, as of the last grant.
    pmtu: u32,
    /// Over a link, a WR goes to the send queue with its first packet granted, and its
    /// provider sends its packets as they are granted: the WR whose packets are granted in
    /// part, and its bytes granted so far.
    open: Option<(*mut umq_buf_t, u64)>,
}

/// What a grant did: the packets it used and the bytes they cover, the WRs it released into
/// the send queue (in order), and what the queue has left.
pub struct Granted {
    pub packets: u32,
    pub bytes: u64,
    pub released: Vec<*mut umq_buf_t>,
    pub left: Left,
}

impl Paced {
    pub fn new(pmtu: u32) -> Paced {
        Paced {
            pmtu,
            ..Default::default()
        }
    }

    pub fn set_pmtu(&mut self, pmtu: u32) {
        self.pmtu = pmtu;
    }

    /// Holds `wr` behind the others until a grant covers its first packet.
    pub fn hold(&mut self, wr: *mut umq_buf_t) {
        self.held.push_back(wr);
    }

    /// How many WRs wait for a grant.
    pub fn held_len(&self) -> usize {
        self.held.len()
    }

    /// The WRs that wait for a grant, oldest first.
    pub fn held(&self) -> impl Iterator<Item = *mut umq_buf_t> + '_ {
        self.held.iter().copied()
    }

    /// How the provider sends the queue's WRs: in packets of the PMTU, and of the open WR no
    /// more than its granted bytes.
    pub fn gate(&self) -> PacketGate {
        let (open, granted) = self.open.unwrap_or((ptr::null_mut(), 0));
        PacketGate {
            pmtu: self.pmtu as usize,
            open,
            granted,
        }
    }

    /// Every held WR, all its packets granted; nothing stays open.
    pub fn release_all(&mut self) -> impl Iterator<Item = *mut umq_buf_t> + '_ {
        self.progress = 0;
        self.open = None;
        self.held.drain(..)
    }

    /// Uses a grant of `packets` of `pmtu` bytes on the held WRs, in order: a WR is released
    /// with its first packet granted, and a grant that ends inside a WR writes its progress
    /// back. The bytes reported are those the grant adds, the open WR's granted before not
    /// counted again.
    pub fn grant(&mut self, packets: u32, pmtu: u32) -> Granted {
        let size = |wr: *mut umq_buf_t| unsafe { (*wr).total_data_size };
        let open = self.open.map(|(wr, _)| wr);
        // The WR the grant starts inside (if any), and the bytes of it granted before.
        let first = open.or(self.held.front().copied());
        let before = first.map_or(0, |wr| granted_bytes(self.progress, pmtu, size(wr)));
        let sizes = open.iter().chain(self.held.iter()).map(|&wr| size(wr));
        let c = pacing::cover(sizes, self.progress, pmtu, packets);
        let mut whole = c.messages;
        if open.is_some() && whole > 0 {
            self.open = None;
            whole -= 1;
        }
        let mut released: Vec<_> = self.held.drain(..whole).collect();
        self.progress = c.progress;
        self.pmtu = pmtu;
        let mut partial = 0;
        if c.progress > 0 {
            let wr = open
                .filter(|_| self.open.is_some())
                .or(self.held.front().copied());
            if let Some(wr) = wr {
                partial = granted_bytes(c.progress, pmtu, size(wr));
                if self.open.is_none() {
                    released.extend(self.held.pop_front());
                }
                self.open = Some((wr, partial));
            }
        }
        let left = if self.held.is_empty() && self.open.is_none() {
            Left::Nothing
        } else {
            Left::More
        };
        Granted {
            packets: c.packets,
            bytes: c.bytes + partial - before,
            released,
            left,
        }
    }

    /// The WR whose packets are granted in part, and its bytes granted so far.
    pub fn open(&self) -> Option<(*mut umq_buf_t, u64)> {
        self.open
    }

    /// Sets the open WR by hand: the providers' tests grant packets without a pacer.
    #[cfg(test)]
    pub fn set_open(&mut self, open: Option<(*mut umq_buf_t, u64)>) {
        self.open = open;
    }
}

/// The bytes `packets` packets of `pmtu` cover of a message of `size` bytes.
fn granted_bytes(packets: u32, pmtu: u32, size: u32) -> u64 {
    (packets as u64 * pmtu as u64).min(size as u64)
}
