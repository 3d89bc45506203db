//! A SEND the network provider refuses at its post (`FI_EAGAIN`: the first message to a peer
//! whose connection is still being made, as UCX's first send on a new endpoint often is) goes
//! once the provider takes sends again, though its application only polls the receiver: the
//! post leaves a round of its queue to the progress engine. Before, nothing ran the sender's
//! queue until a liveness ping half a second later, and a program that posts one message and
//! then polls for it waited that long (the fork test failed over the UCX engine, 124 runs in
//! 200, after a million polls).
//!
//! The provider's refusal and the pings' rounds are the test's own doing
//! (`umq::fuzzing::network_faults`), so the refusal happens every time and nothing but the
//! post's round can send the message: without it, none arrives.
#![cfg(feature = "fuzzing")]

mod support;
use std::ptr;
use std::time::{Duration, Instant};
use support::*;
use umq::abi::ext::UMQ_EXT_TRANSPORT_FABRIC;
use umq::abi::pro_types::*;
use umq::abi::types::*;
use umq::ffi::api::*;
use umq::fuzzing::network_faults;

const MESSAGES: usize = 3;

fn message(text: &[u8]) -> *mut umq_buf_t {
    let b = umq_buf_alloc(text.len() as u32, 1, 0, ptr::null_mut());
    assert!(!b.is_null());
    unsafe {
        ptr::copy_nonoverlapping(text.as_ptr(), (*b).buf_data as *mut u8, text.len());
        (*b).qbuf_ext = [0; 8];
        (*b).pro_mut().opcode = UMQ_OPC_SEND;
    }
    b
}

/// Polls `h` until one completion in `dir` comes; None after 10 s (the message is lost).
fn poll_one(h: u64, dir: umq_io_direction_t) -> Option<*mut umq_buf_t> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let [b] = poll(h, dir, 1)[..] {
            return Some(b);
        }
    }
    None
}

#[test]
fn a_send_the_provider_refused_at_its_post_goes_while_only_its_receiver_is_polled() {
    // SAFETY: set before the library reads them (umq_init), in this binary's only test. The
    // sweep at an hour: its rounds would hide the missing one as the pings' did.
    unsafe {
        std::env::set_var("UMQ_PROVIDER", "fabric");
        std::env::set_var("UMQ_PROGRESS_SWEEP_MS", "3600000");
    }
    network_faults(false, true);
    init_pro();
    let (a, b) = (create("refused_a", 16), create("refused_b", 16));
    bind_pair(a, b);
    assert_eq!(transport_stats(a).transport, UMQ_EXT_TRANSPORT_FABRIC);
    assert_eq!(post(b, UMQ_IO_RX, &alloc(MESSAGES, 64)), Ok(MESSAGES));
    for i in 0..MESSAGES {
        let text = format!("refused-{i}");
        network_faults(true, true);
        assert_eq!(post(a, UMQ_IO_TX, &[message(text.as_bytes())]), Ok(1));
        network_faults(false, true);
        let got = poll_one(b, UMQ_IO_RX).unwrap_or_else(|| panic!("{text} never arrived"));
        let bytes = unsafe {
            assert_eq!((*got).status(), 0, "{text}");
            std::slice::from_raw_parts((*got).buf_data as *const u8, (*got).data_size as usize)
        };
        assert_eq!(bytes, text.as_bytes());
        free_all(&[got]);
    }
    let sent: Vec<_> = (0..MESSAGES)
        .map(|i| poll_one(a, UMQ_IO_TX).unwrap_or_else(|| panic!("SEND {i} never completed")))
        .collect();
    assert!(sent.iter().all(|&s| unsafe { (*s).status() } == 0));
    free_all(&sent);
    assert_eq!(umq_destroy(a), 0);
    assert_eq!(umq_destroy(b), 0);
    umq_uninit();
}
