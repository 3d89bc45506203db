//! Link-level pause and PFC (flow-control system 5) as the queue layer sees it: a queue bound
//! to another process joins the link to that process (`transport::pause`) with its priority;
//! its rounds report its receive backlog and pending work to the link, send the link's frames
//! and raise the storm watchdog's events; the `umq_user_ctl` opcodes of `umq_ext.h` set the
//! priority and the link's settings, read its counters, and send and receive raw frames.

use super::bind_info::BindInfo;
use super::{Queue, lock};
use crate::abi::ext::*;
use crate::abi::types::*;
use crate::error::{UmqResult, einval};
use crate::flow::pfc::link::{Config, Event, PassControl};
use crate::transport::link::Provider;
use crate::transport::pause::{self, MAX_FRAME, MIN_FRAME, PauseGate, Settings};
use crate::transport::wired::Wired;
use std::sync::atomic::Ordering;

const F: &str = "umq_user_ctl";

/// A backlog reported for a queue whose peer waits for a receive buffer of ours: over any XOFF
/// (posted receive buffers running short).
const NO_RX_BUFFER: u64 = pause::BACKLOG_MAX;

impl Queue {
    /// The queue's place on the link to the peer `remote` reached through `provider`: one link
    /// per peer process (its host, pid and library instance).
    pub(super) fn pause_gate(&self, provider: Provider, remote: &BindInfo) -> PauseGate {
        let key = format!(
            "{provider:?}:{:x}:{}:{:x}",
            remote.boot_id, remote.pid, remote.instance
        );
        let priority = self.pfc_priority.load(Ordering::Relaxed);
        PauseGate {
            link: pause::attach(key.into_bytes(), self.handle, priority),
            priority,
        }
    }

    /// The link's part of a round, while it has something to do: reports our backlog and
    /// pending work, sends its frames, raises the watchdog's events.
    #[cold]
    #[inline(never)]
    pub(super) fn pause_round_if_busy(&self, w: &mut Wired) {
        let Some(g) = w.pause.clone().filter(|g| g.link.busy()) else {
            return;
        };
        g.link.report(
            self.handle,
            g.priority,
            rx_backlog(w),
            w.sq.uncompleted() + w.held() > 0,
        );
        if let Some(link) = w.link.as_mut() {
            let mut sent = false;
            while let Some(frame) = g.link.take_frame() {
                if !link.send_control(&frame) {
                    g.link.put_back(frame);
                    break;
                }
                sent = true;
            }
            // The peer's application may poll only its other queues, or none: its progress
            // thread takes the frame in.
            if sent {
                link.call_peer_now();
            }
        }
        while let Some(event) = g.link.take_event() {
            let code = match event {
                Event::StormDetected(p) => UMQ_EXT_EVENT_PFC_STORM + p as i32,
                Event::StormRestored(p) => UMQ_EXT_EVENT_PFC_STORM_RESTORED + p as i32,
            };
            crate::log_warn!(F, "link of queue {:#x}: {event:?}", self.handle);
            self.rt
                .events
                .raise(UMQ_EVENT_OTHER, self.handle, self.cfg.trans_mode, code);
        }
    }
}

/// Bytes the peer sent that the application has not taken: completed receives not yet polled;
/// and when a message of the peer's also waits for a receive buffer, as good as over XOFF.
/// (A message waiting while the application has taken everything is a fast stream, not a slow
/// receiver: credit, not pause, is for that.)
fn rx_backlog(w: &Wired) -> u64 {
    let waiting: u64 =
        w.rq.completions()
            .map(|(b, _)| unsafe { (*b).total_data_size } as u64)
            .sum();
    let starved = waiting > 0 && w.link.as_ref().is_some_and(|l| l.waits_for_rx_buffer());
    waiting + if starved { NO_RX_BUFFER } else { 0 }
}

/// The link of a queue bound to another process, or the error for one that is not.
fn gate(q: &Queue) -> UmqResult<PauseGate> {
    lock(&q.wire).pause.clone().ok_or_else(|| {
        einval(
            F,
            format_args!(
                "queue {:#x} is not bound to another process: it has no link",
                q.handle
            ),
        )
    })
}

/// Sets the queue's priority (0..=7), bound or not.
pub fn set_priority(q: &Queue, priority: u64) -> UmqResult<()> {
    let p = u8::try_from(priority)
        .ok()
        .filter(|&p| p < 8)
        .ok_or_else(|| einval(F, format_args!("priority must be 0..=7, not {priority}")))?;
    q.pfc_priority.store(p, Ordering::Relaxed);
    if let Some(g) = lock(&q.wire).pause.as_mut() {
        g.priority = p;
    }
    Ok(())
}

/// Sets the link's settings from `in` when given; writes them to `out` when given.
pub fn config(q: &Queue, input: &umq_user_ctl_in_t, out: &umq_user_ctl_out_t) -> UmqResult<()> {
    let g = gate(q)?;
    if input.addr != 0 {
        let c: umq_ext_pfc_config_t = super::ctl::read_in(input, "umq_ext_pfc_config_t")?;
        g.link.set_settings(settings_from(&c)?);
        // A link that now emits has its watch run from now, not from the engine's next wake.
        crate::transport::progress::wake();
    }
    if out.addr != 0 {
        super::ctl::write_out(out, "umq_ext_pfc_config_t", config_of(&g.link.settings()))?;
    }
    Ok(())
}

fn settings_from(c: &umq_ext_pfc_config_t) -> UmqResult<Settings> {
    let known = UMQ_EXT_PFC_RFE | UMQ_EXT_PFC_PFCE | UMQ_EXT_PFC_UNICAST | UMQ_EXT_PFC_EMIT;
    let bad = |why: &str| Err(einval(F, format_args!("PFC config: {why}")));
    if c.flags & !known != 0 {
        return bad("unknown flags");
    }
    let pass = match c.pass_control {
        0 => PassControl::None,
        1 => PassControl::AllButPause,
        2 => PassControl::All,
        _ => return bad("pass_control must be 0, 1 or 2"),
    };
    if c.speed_bps == 0 || c.xon_bytes > c.xoff_bytes || c.pause_quanta == 0 {
        return bad("speed and pause quanta must be above 0, XON at most XOFF");
    }
    if c.watchdog_detect_ns == 0 || c.watchdog_restore_ns == 0 {
        return bad("watchdog times must be above 0");
    }
    Ok(Settings {
        machine: Config {
            rfe: c.flags & UMQ_EXT_PFC_RFE != 0,
            pfce: c.flags & UMQ_EXT_PFC_PFCE != 0,
            unicast_pause: c.flags & UMQ_EXT_PFC_UNICAST != 0,
            address: c.address,
            speed_bps: c.speed_bps,
            pass,
            xoff_bytes: c.xoff_bytes,
            xon_bytes: c.xon_bytes,
            pause_quanta: c.pause_quanta,
            watchdog_detect_ns: c.watchdog_detect_ns,
            watchdog_restore_ns: c.watchdog_restore_ns,
        },
        emit: c.flags & UMQ_EXT_PFC_EMIT != 0,
    })
}

fn config_of(s: &Settings) -> umq_ext_pfc_config_t {
    let m = &s.machine;
    let flag = |on: bool, f: u32| if on { f } else { 0 };
    umq_ext_pfc_config_t {
        flags: flag(m.rfe, UMQ_EXT_PFC_RFE)
            | flag(m.pfce, UMQ_EXT_PFC_PFCE)
            | flag(m.unicast_pause, UMQ_EXT_PFC_UNICAST)
            | flag(s.emit, UMQ_EXT_PFC_EMIT),
        pass_control: match m.pass {
            PassControl::None => 0,
            PassControl::AllButPause => 1,
            PassControl::All => 2,
        },
        speed_bps: m.speed_bps,
        xoff_bytes: m.xoff_bytes,
        xon_bytes: m.xon_bytes,
        watchdog_detect_ns: m.watchdog_detect_ns,
        watchdog_restore_ns: m.watchdog_restore_ns,
        pause_quanta: m.pause_quanta,
        address: m.address,
    }
}

/// The link's counters.
pub fn stats(q: &Queue) -> UmqResult<umq_ext_pfc_stats_t> {
    let (s, paused, queues, passed_dropped) = gate(q)?.link.stats();
    let mut out = umq_ext_pfc_stats_t {
        link_pauses: s.link_pauses,
        link_paused_ns: s.link_paused_ns,
        other_control: s.other_control,
        passed_dropped,
        paused_now: paused as u32,
        queues: queues as u32,
        ..Default::default()
    };
    for (o, p) in out.priority.iter_mut().zip(s.priorities) {
        *o = umq_ext_pfc_priority_stats_t {
            indications: p.indications,
            requests: p.requests,
            paused_ns: p.paused_ns,
            watchdog_trips: p.watchdog_trips,
        };
    }
    Ok(out)
}

/// Sends the application's raw control frame over the link.
pub fn send_frame(q: &Queue, input: &umq_user_ctl_in_t) -> UmqResult<()> {
    let g = gate(q)?;
    let f: umq_ext_pfc_frame_t = super::ctl::read_in(input, "umq_ext_pfc_frame_t")?;
    let len = f.len as usize;
    if !(MIN_FRAME..=MAX_FRAME).contains(&len) {
        return Err(einval(
            F,
            format_args!("frame length {len} outside {MIN_FRAME}..={MAX_FRAME}"),
        ));
    }
    g.link.send_raw(&f.bytes[..len]);
    // Now, not with the queue's next round: the application may not call in again soon.
    q.background_round();
    Ok(())
}

/// The oldest control frame passed to the application (`len` 0 when none).
pub fn recv_frame(q: &Queue, out: &umq_user_ctl_out_t) -> UmqResult<()> {
    let g = gate(q)?;
    q.service_link();
    let mut f = umq_ext_pfc_frame_t::default();
    if let Some(bytes) = g.link.take_passed() {
        f.len = bytes.len() as u32;
        f.bytes[..bytes.len()].copy_from_slice(&bytes);
    }
    super::ctl::write_out(out, "umq_ext_pfc_frame_t", f)
}
