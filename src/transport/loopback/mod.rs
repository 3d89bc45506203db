//! In-process loopback: the receive side and send queue of one queue, and the delivery engine
//! that executes a sender's WRs against its peer with the semantics of RDMA verbs (RC).
//!
//! The send queue `sq` holds every posted tx WR until the application polls its completion. The
//! first `delivered` entries have executed; the rest wait, in order, for receive buffers at the
//! peer (the RNR wait of RDMA). Completions are therefore FIFO per queue pair by construction.

use super::target::*;
use super::wire::*;
use crate::abi::errno::*;
use crate::abi::pro_types::*;
use crate::abi::types::*;
use crate::buf::pool::Pool;
use std::time::Instant;

/// Executes one WR with the shared target executor; None when it must wait for a receive
/// buffer. (Out of line: `send_one` takes the common case, and the loop around it stays small.)
#[inline(never)]
unsafe fn execute(
    wr: *mut umq_buf_t,
    dst: &mut Side,
    pool: &Pool,
    out: &mut Outcome,
) -> Option<umq_buf_status_t> {
    let pro = unsafe { *(*wr).pro() };
    let req = Request {
        opcode: pro.opcode,
        imm: pro.imm_data,
        len: unsafe { (*wr).total_data_size } as u64,
        src: pieces(wr),
        remote: pro.remote_sge,
    };
    let Executed::Done(status) = execute_wr(dst, &req, pool, &mut Poster(wr), out) else {
        return None;
    };
    if status == UMQ_BUF_SUCCESS {
        match pro.opcode {
            UMQ_OPC_READ => out.reads += 1,
            UMQ_OPC_NOP => {}
            _ => out.sends += 1,
        }
    }
    Some(status)
}

/// The WR's own side in this process: a READ lands in it directly.
struct Poster(*mut umq_buf_t);

impl Initiator for Poster {
    fn read_back(&mut self, from: *const u8, len: usize) -> Option<umq_buf_status_t> {
        land_read(self.0, from, len);
        Some(UMQ_BUF_SUCCESS)
    }
}

/// The common case in one pass: a one-buffer SEND or SEND_IMM into the next posted receive
/// buffer, which holds it. None (nothing done) when the WR needs the general path.
#[inline(always)]
unsafe fn send_one(
    wr: *mut umq_buf_t,
    dst: &mut Side,
    out: &mut Outcome,
) -> Option<umq_buf_status_t> {
    let w = unsafe { &*wr };
    let pro = w.pro();
    let op = pro.opcode;
    if (op != UMQ_OPC_SEND && op != UMQ_OPC_SEND_IMM)
        || w.data_size != w.total_data_size
        || dst.fragments
    {
        return None;
    }
    let rx = dst.wire.rx_posted.front()?;
    let len = w.total_data_size;
    if len > unsafe { (*rx).buf_size } || w.data_size != len {
        return None;
    }
    if unsafe { land_in(dst, rx, w.buf_data as *const u8, len, op, pro.imm_data) } {
        // The SEND carried our window update: it completes as the SEND it was posted as.
        let pro = unsafe { (*wr).pro_mut() };
        pro.opcode = UMQ_OPC_SEND;
        pro.imm_data = 0;
    }
    out.sends += 1;
    out.rx_done += 1;
    Some(UMQ_BUF_SUCCESS)
}

/// Runs the sender's undelivered WRs, in order, until one has to wait for a receive buffer.
pub fn deliver(src: &mut Wire, dst: &mut Side, pool: &Pool) -> Outcome {
    let mut out = Outcome::default();
    let mut credit = CreditGate::open(src);
    let flow_on = src.flow.is_some();
    while src.delivered < src.sq.len() {
        let wr = src.sq[src.delivered];
        let opcode = unsafe { (*wr).pro().opcode };
        if !credit.pass(src, opcode) {
            out.credit_wait = true;
            break;
        }
        // send_one restores a piggyback carrier itself, and only when it was one: no check of
        // every WR's immediate on the common path.
        let done = unsafe {
            send_one(wr, dst, &mut out).or_else(|| {
                execute(wr, dst, pool, &mut out).inspect(|_| restore_piggyback_carrier(wr, flow_on))
            })
        };
        let Some(status) = done else {
            credit.keep(opcode);
            src.blocked_since.get_or_insert_with(Instant::now);
            out.blocked = true;
            break;
        };
        unsafe { (*wr).set_status(status) };
        src.delivered += 1;
        src.blocked_since = None;
        out.tx_done += 1;
    }
    credit.close(src);
    if out.rx_done > 0
        && let Some(f) = dst.wire.flow.as_mut()
    {
        f.data_arrived(out.rx_done as u64);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::{Area, FlowState, Params};

    fn wr(opcode: umq_opcode_t) -> Box<umq_buf_t> {
        let mut b: Box<umq_buf_t> = Box::new(unsafe { std::mem::zeroed() });
        b.pro_mut().opcode = opcode;
        b
    }

    /// Queued mode admits WRs without credit behind WRs that hold it (a full ring keeps those
    /// waiting over shared memory): the gate must spend what the waiting WRs hold first and
    /// only then take from the window, in order, and stop when the window is empty.
    #[test]
    fn credit_gate_spends_held_credit_before_the_window() {
        let area = Area::default();
        let mut peer = FlowState::new(Params::new(4, 0, 8, 8), false);
        peer.rx_posted(4);
        peer.publish(&area);
        let mut f = FlowState::new(Params::new(0, 0, 8, 8), false);
        f.refresh(&area);
        assert_eq!(f.window(), 4);
        let mut w = Wire::new(8, 8);
        w.flow = Some(f);
        let mut wrs: Vec<Box<umq_buf_t>> = Vec::new();
        let mut admit = |w: &mut Wire, ops: &[umq_opcode_t], credited: u64| {
            let got = w.flow.as_mut().unwrap().take_credit(credited);
            assert_eq!(got, credited);
            let needy = ops.iter().filter(|&&op| needs_rx_buffer(op)).count();
            w.note_admitted(needy, credited as usize);
            for &op in ops {
                let mut b = wr(op);
                w.sq.push_back(&mut *b);
                wrs.push(b);
            }
        };
        // Two SENDs with credit wait: nothing to check for them.
        admit(&mut w, &[UMQ_OPC_SEND, UMQ_OPC_SEND], 2);
        assert_eq!(w.uncovered, 0);
        // Queued mode lets in three more and a WRITE, only the first with credit.
        admit(
            &mut w,
            &[
                UMQ_OPC_SEND,
                UMQ_OPC_SEND_IMM,
                UMQ_OPC_WRITE,
                UMQ_OPC_WRITE_IMM,
            ],
            1,
        );
        assert_eq!((w.uncovered, w.credited), (2, 3));
        let mut gate = CreditGate::open(&w);
        let ops: Vec<_> = w.sq.iter().map(|b| unsafe { (*b).pro().opcode }).collect();
        let passed: Vec<bool> = ops.iter().map(|&op| gate.pass(&mut w, op)).collect();
        // Three held credits, then the window's last one, the WRITE needs none, then empty.
        assert_eq!(passed, [true, true, true, true, true, false]);
        gate.close(&mut w);
        assert_eq!((w.uncovered, w.credited), (1, 0));
        assert_eq!(w.flow.as_mut().unwrap().window(), 0);
    }

    #[test]
    fn copy_bytes_copies_every_length_apart_and_overlapping() {
        let pattern: Vec<u8> = (0..200u32).map(|i| (i * 7 + 3) as u8).collect();
        for len in 0..=80usize {
            // Apart: the destination gets exactly `len` bytes, nothing around them moves.
            let mut dst = [0xeeu8; 100];
            unsafe { copy_bytes(pattern.as_ptr(), dst.as_mut_ptr().add(5), len) };
            assert_eq!(&dst[5..5 + len], &pattern[..len], "len {len}");
            assert!(dst[..5].iter().chain(&dst[5 + len..]).all(|&b| b == 0xee));
            // Overlapping both ways, and onto itself: memmove semantics.
            for shift in [-9isize, -1, 0, 1, 9] {
                let mut buf = pattern.clone();
                let (from, to) = (50usize, (50 + shift) as usize);
                let want: Vec<u8> = buf[from..from + len].to_vec();
                let p = buf.as_mut_ptr();
                unsafe { copy_bytes(p.add(from), p.add(to), len) };
                assert_eq!(&buf[to..to + len], &want[..], "len {len} shift {shift}");
            }
        }
    }
}
