//! Unit tests of the protocols between two processes (`placement`, `presence`). They live
//! apart from those files because `tests/loom_placement.rs` compiles the files themselves
//! against loom's atomics, where these tests could not run.

mod placement {
    use crate::transport::shm::placement::*;
    use std::sync::atomic::Ordering;

    fn board() -> Box<Board> {
        // A zeroed board is an empty one, as in a fresh memfd.
        unsafe { Box::new_zeroed().assume_init() }
    }

    #[test]
    fn the_sender_finds_the_posting_for_its_entry_and_passes_over_older_ones() {
        let (b, me) = (board(), Publisher::default());
        b.publish(&me, 3, 4096, 128);
        b.publish(&me, 4, 8192, 64);
        b.publish(&me, 6, 12288, 4096);
        assert!(
            b.find(2, 8).is_none(),
            "entry 2's buffer was posted earlier, unpublished"
        );
        let c = b.find(4, 64).expect("entry 4");
        assert_eq!(c.offset, 8192);
        assert!(
            b.find(4, 65).is_none(),
            "too small: the message goes through the ring"
        );
        b.end(c);
        assert!(
            b.find(5, 8).is_none(),
            "entry 5's buffer is not on the board"
        );
        assert_eq!(b.find(6, 4096).map(|c| c.offset), Some(12288));
        assert!(b.find(7, 8).is_none(), "nothing published yet");
    }

    #[test]
    fn a_full_board_publishes_nothing_until_the_sender_moves_on() {
        let (b, me) = (board(), Publisher::default());
        for k in 0..SLOTS as u64 + 10 {
            b.publish(&me, k, 4096 * (k + 1), 64);
        }
        // The 10 past the end were dropped; the board still holds 0..SLOTS.
        assert_eq!(
            b.find(SLOTS as u64 - 1, 8).map(|c| c.offset),
            Some(4096 * SLOTS as u64)
        );
        b.publish(&me, SLOTS as u64 + 20, 1 << 20, 64);
        assert_eq!(
            b.find(SLOTS as u64 + 20, 8).map(|c| c.offset),
            Some(1 << 20)
        );
    }

    #[test]
    fn offsets_past_four_gib_are_never_published() {
        let (b, me) = (board(), Publisher::default());
        b.publish(&me, 0, 1 << 32, 64);
        assert!(b.find(0, 8).is_none());
    }

    #[test]
    fn a_sender_never_starts_writing_once_the_receiver_left() {
        let b = board();
        assert!(!b.begin(|| true));
        b.wait_idle(|| panic!("no placement is under way"));
        b.publish(&Publisher::default(), 0, 4096, 64);
        let claim = b.find(0, 64).expect("published");
        assert!(b.begin(|| false));
        let written = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            let t = s.spawn(|| {
                b.wait_idle(|| false);
                written.load(Ordering::Acquire)
            });
            std::thread::sleep(std::time::Duration::from_millis(20));
            written.store(true, Ordering::Release);
            b.end(claim);
            assert!(
                t.join().unwrap(),
                "the receiver waited for the write to end"
            );
        });
        assert!(b.begin(|| false));
        b.wait_idle(|| true); // a sender that died mid-copy does not hold the receiver
    }
}

mod presence {
    use crate::transport::shm::presence::*;

    #[test]
    fn a_peer_of_an_earlier_binding_sees_the_owner_gone_after_it_reopened() {
        let p = Presence::default();
        let first = p.binding();
        assert!(!p.left(first));
        p.reopen();
        assert_eq!(p.binding(), first, "an open inbox is not reopened");
        p.leave();
        assert!(p.left(first));
        p.reopen();
        let second = p.binding();
        assert_ne!(second, first);
        assert!(
            p.left(first),
            "the old peer must not write into the new binding"
        );
        assert!(!p.left(second));
        p.leave();
        assert!(
            p.left(p.binding()),
            "joining with stale bind info finds the owner gone"
        );
    }
}
