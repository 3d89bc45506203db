//! How much of a peer's inbox a binding may fill: the network's counterpart of shared memory's
//! bounded ring.
//!
//! A message that reaches a node waits in its channel's inbox until the binding's round takes
//! it into a receive buffer. Without a bound, a sender whose receiver posts no buffers (flow
//! control off, or a peer that ignores its window) filled the receiver's memory: 20,000 SENDs
//! of 64 KiB grew it by 1.2 GiB. So each side counts the bytes of the messages of a binding:
//! the sender those it handed to the provider, the receiver those its rounds took out of the
//! inbox, which it ships with its flow-control area (the landing words' last word). A sender
//! hands a message over only while what the peer has not taken stays within `ALLOWANCE`; the
//! rest waits in its send queue, uncompleted, as WRs wait for a full ring over shared memory
//! (and as RDMA's RNR retry holds them), and the application's posts meet the queue's depth.
//! The link's control frames (PFC) go whatever the allowance says: they must overtake.
//!
//! A receiver trusts nothing of this: a peer whose messages in one inbox exceed
//! `INBOX_AT_MOST` ignores the allowance, and its binding breaks. Nor does a peer's READ
//! stream make us copy without bound: while `ANSWERS_AT_MOST` of our answers wait to go, its
//! READs wait in the inbox.

/// Bytes of a binding's messages that may wait in the peer's inbox, not yet taken: 128
/// fragments of 64 KiB. With flow control on, a peer's window keeps its inbox far below it.
pub const ALLOWANCE: u64 = 8 << 20;

/// How far the bytes taken may run ahead of what the sender was last told before a round
/// ships them at once: a sender that used the whole allowance learns of its room within a
/// round of the receiver's taking it all. Smaller steps ride along with the area's other
/// changes, so a ping-pong adds no write of its own.
pub const SHIP_TAKEN_AFTER: u64 = ALLOWANCE / 4;

/// Bytes one inbox may hold before its peer counts as ignoring the allowance: twice the
/// allowance, room for the control frames that go whatever it says.
pub const INBOX_AT_MOST: u64 = 2 * ALLOWANCE;

/// Bytes of our answers to a peer's READs (each a copy of the bytes read) that may wait to go
/// before the binding runs no more of its READs: the rest wait in our inbox, where the peer's
/// allowance holds up what it sends next. A READ asks for up to a buffer in a message of a
/// header's length, so a peer that reads and does not take our answers made us copy without
/// bound.
pub const ANSWERS_AT_MOST: u64 = ALLOWANCE;

/// The sender's count: what it handed to the provider for the peer's channel, and what the
/// peer said it took.
#[derive(Default)]
pub struct Allowance {
    sent: u64,
    peer_took: u64,
}

impl Allowance {
    /// Whether a message of `len` bytes may go now. One always may when the peer has taken
    /// all before it, however long.
    pub fn room_for(&self, len: usize) -> bool {
        let waiting = self.sent.saturating_sub(self.peer_took);
        waiting == 0 || waiting + len as u64 <= ALLOWANCE
    }

    /// A message of `len` bytes went to the provider.
    pub fn sent(&mut self, len: usize) {
        self.sent += len as u64;
    }

    /// The peer's landing words say it took `taken` bytes (a count that only grows: an older
    /// write, or a hostile one that says less, changes nothing).
    pub fn peer_took(&mut self, taken: u64) {
        self.peer_took = self.peer_took.max(taken);
    }

    /// Whether `taken`, the peer's count, tells more than it said so far.
    pub fn news(&self, taken: u64) -> bool {
        taken > self.peer_took
    }

    /// Bytes sent that the peer has not said it took.
    #[cfg(test)]
    pub fn waiting(&self) -> u64 {
        self.sent.saturating_sub(self.peer_took)
    }
}

/// The receiver's count: what its rounds took out of the inbox, and what it last shipped.
#[derive(Default)]
pub struct Taken {
    taken: u64,
    shipped: u64,
}

impl Taken {
    /// A round took a message of `len` bytes out of the inbox.
    pub fn took(&mut self, len: usize) {
        self.taken += len as u64;
    }

    /// What to ship with the area.
    pub fn now(&self) -> u64 {
        self.taken
    }

    /// The count went out to the peer.
    pub fn shipped(&mut self, taken: u64) {
        self.shipped = taken;
    }

    /// Whether the peer has not heard of `SHIP_TAKEN_AFTER` bytes or more: a round ships the
    /// area for it.
    pub fn due(&self) -> bool {
        self.taken - self.shipped >= SHIP_TAKEN_AFTER
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sender_stops_at_the_allowance_and_goes_on_as_the_peer_takes() {
        let mut a = Allowance::default();
        assert!(a.room_for(1 << 30), "nothing waits: any message goes");
        a.sent(ALLOWANCE as usize - 100);
        assert!(a.room_for(100));
        assert!(!a.room_for(101));
        a.peer_took(50);
        assert!(a.room_for(150) && !a.room_for(151));
        a.peer_took(10);
        assert_eq!(
            a.waiting(),
            ALLOWANCE - 150,
            "an older count changes nothing"
        );
        a.peer_took(u64::MAX);
        assert_eq!(
            a.waiting(),
            0,
            "a peer that says it took more harms only itself"
        );
    }

    #[test]
    fn the_count_taken_is_due_a_quarter_of_the_allowance_after_its_last_shipping() {
        let mut t = Taken::default();
        t.took(SHIP_TAKEN_AFTER as usize - 1);
        assert!(!t.due());
        t.took(1);
        assert!(t.due());
        t.shipped(t.now());
        assert!(!t.due());
    }
}
