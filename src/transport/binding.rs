//! The other end of a queue's binding, one type for every provider. A peer queue in this
//! process is served by the loopback provider, which runs the sender's WRs against the peer's
//! wire under both wire locks; a peer in another process by the `Link` beside our wire. The
//! queue layer has the binding lock what a round needs (`Binding::lock`) and works through the
//! `Held` it gets back: it never names a provider, and never asks which kind of peer it has
//! beyond "is there one in this process whose sender I must move" (`peer_here`).

use super::link::Provider;
use super::loopback;
use super::spin::{SpinGuard, SpinMutex};
use super::target::LoneSend;
use super::wire::{Outcome, Side, Wire};
use super::wired::Wired;
use crate::abi::types::umq_buf_t;
use crate::buf::pool::Pool;
use crate::flow::{Area, FlowState};
use std::sync::Arc;

/// A queue end as the bindings see it (the queue layer implements it for its queues).
pub trait Station {
    /// The lock over the queue's wire and link.
    fn wired(&self) -> &SpinMutex<Wired>;
    /// Where the queue stands in the order two wires are locked together in.
    fn lock_order(&self) -> u32;
    /// The flow-control area its peer reads.
    fn area(&self) -> &Area;
    fn handle(&self) -> u64;
    /// Whether it takes a long message in several library-posted buffers (the base API).
    fn takes_fragments(&self) -> bool;
    /// A sender in this process stopped for want of this queue's receive buffers or credit:
    /// this queue's next receive post (or credit) has to move it.
    fn note_sender_waiting(&self);
}

/// The other end of a bound queue.
pub enum Binding<S> {
    /// A queue of this process, served by the loopback provider.
    Here(Arc<S>),
    /// A queue of another process, reached through the `Link` beside our wire
    /// (`Wired::link`) by the provider named.
    Linked(Provider),
}

impl<S: Station> Binding<S> {
    /// The binding for `provider`; `here` finds the peer queue when that is loopback.
    pub fn new<E>(provider: Provider, here: impl FnOnce() -> Result<Arc<S>, E>) -> Result<Self, E> {
        Ok(match provider {
            Provider::Loopback => Binding::Here(here()?),
            _ => Binding::Linked(provider),
        })
    }

    pub fn provider(&self) -> Provider {
        match self {
            Binding::Here(_) => Provider::Loopback,
            Binding::Linked(provider) => *provider,
        }
    }

    /// The peer queue when it is in this process: it is the sender that our receive posts
    /// move, and the one an unbind flushes with us.
    pub fn peer_here(&self) -> Option<&Arc<S>> {
        match self {
            Binding::Here(peer) => Some(peer),
            Binding::Linked(_) => None,
        }
    }

    /// Unbinds `me` from `peer`, the peer here (`peer_here`): what it flushes
    /// (`loopback::unbind`).
    pub fn unbind_here(me: &S, peer: &S, peer_bound_to_us: bool) -> loopback::Flushed {
        loopback::unbind(me, peer, peer_bound_to_us)
    }

    /// Runs `sender`'s WRs that were waiting for `receiver`, its peer here, under both wire
    /// locks (`loopback::deliver_pair`).
    pub fn deliver_pair(sender: &S, receiver: &S, pool: &Pool) -> Outcome {
        loopback::deliver_pair(sender, receiver, pool)
    }

    /// Locks what a round over the binding works on: our wire and, for a peer in this
    /// process, the peer's with it (in lock order, so two senders never wait on each other).
    #[inline(always)]
    pub fn lock<'a>(&'a self, me: &'a S) -> Held<'a, S> {
        match self {
            Binding::Here(peer) => {
                let (mine, theirs) = lock_pair(me, &**peer);
                Held {
                    mine,
                    here: Some((theirs, &**peer)),
                }
            }
            Binding::Linked(_) => Held {
                mine: me.wired().lock(),
                here: None,
            },
        }
    }

    /// A post's send round in one pass, the hot path of every binding: locks what the round
    /// needs, has `admit` take WRs into our send queue against the peer's flow-control area,
    /// sends them (the loopback delivery to a peer here, `link_round` through a link), and
    /// runs `settle` before the locks go. Returns what `admit` returned, the round's outcome
    /// and the peer here, to wake; None when no link is in place yet.
    #[inline(always)]
    pub fn send<'a, A>(
        &'a self,
        me: &'a S,
        pool: &Pool,
        admit: impl FnOnce(&mut Wire, &Area) -> A,
        link_round: impl FnOnce(&mut Wired) -> Outcome,
        settle: impl FnOnce(&mut Wired, &A, &Outcome),
    ) -> Option<(A, Outcome, Option<&'a S>)> {
        match self {
            Binding::Here(peer) => {
                let (mut mine, mut theirs) = lock_pair(me, &**peer);
                let credit = matches!(mine.flow, Some(FlowState::Credit(..)));
                if credit {
                    loopback::exchange_credit(&mut mine, &mut theirs);
                }
                let admitted = admit(&mut mine, peer.area());
                let out = loopback::deliver_to(&mut mine, &mut theirs, &**peer, pool);
                if credit {
                    loopback::exchange_credit(&mut mine, &mut theirs);
                }
                settle(&mut mine, &admitted, &out);
                Some((admitted, out, Some(&**peer)))
            }
            Binding::Linked(_) => {
                let mut mine = me.wired().lock();
                let Wired { wire, link, .. } = &mut *mine;
                let admitted = admit(wire, link.as_deref()?.peer_area());
                let out = link_round(&mut mine);
                settle(&mut mine, &admitted, &out);
                Some((admitted, out, None))
            }
        }
    }

    /// A post's only WR in one pass to a peer here (`loopback::send_one_if`), under both wire
    /// locks, with `settle` run before they go; returns the round's outcome and the peer, to
    /// wake. None, with nothing changed, when the WR cannot go so, or under the credit
    /// protocol (whose messages the general `send` carries), or through a link (a link's post
    /// has its own: `Link::send_one_if`).
    #[inline(always)]
    pub fn send_one_if<'a>(
        &'a self,
        me: &'a S,
        wr: *mut umq_buf_t,
        admit: impl FnOnce(&mut Wire, &Area) -> bool,
        settle: impl FnOnce(&mut Wired),
    ) -> Option<(Outcome, &'a S)> {
        let Binding::Here(peer) = self else {
            return None;
        };
        let lone = LoneSend::of(wr)?;
        let (mut mine, mut theirs) = lock_pair(me, &**peer);
        if matches!(mine.flow, Some(FlowState::Credit(..))) {
            return None;
        }
        let out = loopback::send_one_if(&mut mine, &mut theirs, &**peer, lone, admit)?;
        settle(&mut mine);
        Some((out, &**peer))
    }

    /// `send_one_if` for a caller that holds `mine`, our wire, already and found `peer`, the
    /// peer here, beside it: the peer's wire is only tried, as waiting for it while holding
    /// ours could deadlock against the peer sending to us. Returns the round's outcome, the
    /// peer's lock released; None, with nothing changed, when the peer's wire is busy, under
    /// the credit protocol, or when the WR cannot go so.
    #[inline(always)]
    pub fn send_one_beside(
        mine: &mut Wired,
        peer: &S,
        lone: LoneSend,
        admit: impl FnOnce(&mut Wire, &Area) -> bool,
    ) -> Option<Outcome> {
        let mut theirs = peer.wired().try_lock()?;
        if matches!(mine.flow, Some(FlowState::Credit(..))) {
            return None;
        }
        loopback::send_one_if(mine, &mut theirs, peer, lone, admit)
    }

    /// Carries out the WRITEs and READs at the front of `wrs`, `me`'s WRs, against a peer in
    /// this process and completes them, under both wire locks (`loopback::run_one_sided`); how
    /// many ran. A peer through a link: none (the post's link path has its own,
    /// `Link::run_one_sided`).
    #[inline]
    pub fn run_one_sided(
        &self,
        me: &S,
        wrs: &[*mut umq_buf_t],
        room: usize,
        pool: &Pool,
        out: &mut Outcome,
    ) -> usize {
        match self {
            Binding::Here(peer) => {
                let (mut mine, mut theirs) = lock_pair(me, &**peer);
                loopback::run_one_sided(&mut mine, &mut theirs, &**peer, wrs, room, pool, out)
            }
            Binding::Linked(_) => 0,
        }
    }

    /// Reads the peer's flow-control area into the send-side view of `w`, our locked wire.
    pub fn refresh_window(&self, w: &mut Wired) {
        let Wired { wire, link, .. } = w;
        let Some(f) = wire.flow.as_mut() else {
            return;
        };
        match (self, link.as_deref()) {
            (Binding::Here(peer), _) => f.refresh(peer.area()),
            (Binding::Linked(_), Some(link)) => f.refresh(link.peer_area()),
            (Binding::Linked(_), None) => {}
        }
    }

    /// Whether the peer's initial window can be read yet (`w` is our locked wire).
    pub fn window_known(&self, w: &Wired) -> bool {
        // Credit requests start from nothing: there is no initial window to wait for.
        if matches!(w.flow, Some(FlowState::Credit(..))) {
            return true;
        }
        match self {
            Binding::Here(peer) => peer.area().initial_window() > 0,
            Binding::Linked(_) => w
                .link
                .as_ref()
                .is_some_and(|l| l.peer_area().initial_window() > 0),
        }
    }
}

/// What `Binding::lock` holds: our wire (with its link), and a peer's in this process.
pub struct Held<'a, S> {
    pub mine: SpinGuard<'a, Wired>,
    here: Option<(SpinGuard<'a, Wired>, &'a S)>,
}

impl<'a, S: Station> Held<'a, S> {
    /// Our wire, and the peer's flow-control area (None: a link not in place yet).
    #[inline(always)]
    pub fn wire_and_peer_area(&mut self) -> (&mut Wire, Option<&Area>) {
        let Wired { wire, link, .. } = &mut *self.mine;
        match &self.here {
            Some((_, peer)) => (wire, Some(peer.area())),
            None => (wire, link.as_deref().map(|l| l.peer_area())),
        }
    }

    /// Whether a standalone window update can go out now (a peer here takes one whenever it
    /// has a buffer posted, which `send_update` looks at itself).
    pub fn can_send_update(&self) -> bool {
        match (&self.here, self.mine.link.as_deref()) {
            (Some(_), _) => true,
            (None, Some(link)) => link.can_send_update(),
            (None, None) => false,
        }
    }

    /// Sends a standalone window update; returns whether a peer here received it (and is to
    /// be woken for it).
    pub fn send_update(&mut self, imm: u64) -> bool {
        match (&mut self.here, self.mine.link.as_deref_mut()) {
            (Some((theirs, peer)), _) => loopback::deliver_update(theirs, *peer, imm),
            (None, Some(link)) => {
                link.send_update(imm);
                false
            }
            (None, None) => false,
        }
    }

    /// Carries the credit protocol's messages (July 2026 flow control): with a peer here, both
    /// ways under the two locks until neither side has one left; through a link, ours as
    /// control frames. Returns whether any moved.
    pub fn exchange_credit(&mut self) -> bool {
        match &mut self.here {
            Some((theirs, _)) => loopback::exchange_credit(&mut self.mine, theirs),
            None => self.mine.send_credit(),
        }
    }

    /// Runs our unsent WRs against a peer here (the loopback provider's round); None through a
    /// link, whose round the queue runs itself.
    #[inline(always)]
    pub fn deliver(&mut self, pool: &Pool) -> Option<Outcome> {
        let (theirs, peer) = self.here.as_mut()?;
        Some(loopback::deliver_to(&mut self.mine, theirs, *peer, pool))
    }

    /// The peer here and its locked wire (None through a link).
    #[inline(always)]
    pub fn theirs(&mut self) -> Option<(&mut Wired, &'a S)> {
        self.here
            .as_mut()
            .map(|(theirs, peer)| (&mut **theirs, *peer))
    }

    /// Releases the locks; returns the peer here, whom the round may have given work.
    pub fn release(self) -> Option<&'a S> {
        self.here.map(|(_, peer)| peer)
    }
}

/// Locks two stations' wires in lock order (so two threads never wait on each other),
/// returning them in argument order.
#[inline(always)]
pub fn lock_pair<'a, S: Station>(
    a: &'a S,
    b: &'a S,
) -> (SpinGuard<'a, Wired>, SpinGuard<'a, Wired>) {
    if a.lock_order() < b.lock_order() {
        let ga = a.wired().lock();
        (ga, b.wired().lock())
    } else {
        let gb = b.wired().lock();
        (a.wired().lock(), gb)
    }
}

/// The receiving side a loopback delivery lands in.
pub(super) fn side<'w, S: Station>(wire: &'w mut Wire, receiver: &S) -> Side<'w> {
    Side::new(receiver.handle(), wire, receiver.takes_fragments())
}
