//! What a queue's wire lock guards: the state every provider works on (`Wire`) and, beside it,
//! the link of the binding to another process. Beside, not inside: a round borrows the two
//! apart (`let Wired { wire, link, .. } = &mut *guard`), where a link kept inside the wire had to be
//! moved out and put back around every call that lends the provider both.

use crate::abi::errno::umq_buf_status_t;
use crate::transport::link::Link;
use crate::transport::wire::Wire;
use std::ops::{Deref, DerefMut};

pub struct Wired {
    pub wire: Wire,
    /// The binding to a queue in another process, while there is one.
    pub link: Option<Box<Link>>,
    /// Why the link's peer is gone, while its last words may still be arriving
    /// (`Link::last_words_grace`); the loss is reported when they are in.
    pub lost: Option<String>,
}

impl Wired {
    pub fn new(rx_depth: u32, tx_depth: u32) -> Wired {
        Wired {
            wire: Wire::new(rx_depth, tx_depth),
            link: None,
            lost: None,
        }
    }

    /// Completes every uncompleted WR with an error (`Wire::fail_uncompleted`), and has the
    /// link forget the ones it had in flight.
    pub fn fail_uncompleted(&mut self, first: umq_buf_status_t) -> usize {
        let n = self.wire.fail_uncompleted(first);
        if let Some(link) = self.link.as_mut() {
            link.forget_in_flight();
        }
        n
    }

    /// Whether a receive post that took buffers has something to do about the link
    /// (`round_after_rx_post`): a message of the peer waits for a buffer, or grants travel as
    /// messages (over the network).
    #[inline(always)]
    pub fn rx_post_concerns_link(&self) -> bool {
        self.link
            .as_deref()
            .is_some_and(|l| l.waits_for_rx_buffer() || l.grants_travel())
    }

    /// Whether a receive post that took buffers must run the link's round at once: a message
    /// of the peer waits for a buffer, or our area holds a grant the peer waits for
    /// (`Link::owes_peer_credit`; a grant left to the application's answer is not in it yet).
    #[inline(always)]
    pub fn round_after_rx_post(&mut self) -> bool {
        let Wired { wire, link, .. } = self;
        link.as_deref()
            .is_some_and(|l| l.waits_for_rx_buffer() || l.owes_peer_credit(wire))
    }
}

impl Wired {
    /// Sends the credit protocol's waiting messages (July 2026 flow control) as control frames
    /// on the link, and calls the peer's progress thread for them: its application may be
    /// away. A full link keeps the rest for the next round. Returns whether any went.
    pub fn send_credit(&mut self) -> bool {
        let Wired { wire, link, .. } = self;
        let (Some(c), Some(link)) = (
            wire.flow.as_mut().and_then(|f| f.credit()),
            link.as_deref_mut(),
        ) else {
            return false;
        };
        let mut sent = false;
        while let Some(m) = c.take_outgoing() {
            if !link.send_control(&m.frame()) {
                c.put_back(m);
                break;
            }
            sent = true;
        }
        if sent {
            link.flush_control(wire);
            link.call_peer_now();
        }
        sent
    }
}

// The link's raw buffer pointers, like the wire's, are the library's while posted, and used only
// under the queue's lock.
unsafe impl Send for Wired {}

/// The queue layer reads and changes the wire's state through the guard directly.
impl Deref for Wired {
    type Target = Wire;

    #[inline(always)]
    fn deref(&self) -> &Wire {
        &self.wire
    }
}

impl DerefMut for Wired {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut Wire {
        &mut self.wire
    }
}
