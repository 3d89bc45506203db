//! Our MAC control frame codec (`umq::flow::pfc::frame`) on the command line, for checking it
//! against another implementation (`python/tests/test_mac_control.py` uses scapy's).
//! One request per line on stdin, one answer per line on stdout:
//!
//!     pause DST SRC QUANTA            -> the frame's 64 bytes in hex
//!     pfc DST SRC ENABLED Q0 .. Q7    -> the frame's 64 bytes in hex
//!     decode HEX [UNICAST]            -> "pause DST SRC QUANTA", "pfc DST SRC ENABLED Q0 .. Q7",
//!                                        or "not ..." with why
//!
//! Addresses are written aa:bb:cc:dd:ee:ff, numbers in decimal.

use std::io::BufRead;
use umq::flow::pfc::frame::{self, Pause, PauseFrame};

fn mac(s: &str) -> [u8; 6] {
    let v: Vec<u8> = s
        .split(':')
        .map(|h| u8::from_str_radix(h, 16).expect("a hex byte"))
        .collect();
    v.try_into().expect("six bytes")
}

fn show_mac(m: &[u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("hex"))
        .collect()
}

fn answer(words: &[&str]) -> String {
    let num = |i: usize| words[i].parse::<u16>().expect("a number");
    match words[0] {
        "pause" => hex(&frame::encode(&PauseFrame {
            dst: mac(words[1]),
            src: mac(words[2]),
            pause: Pause::Link { quanta: num(3) },
        })),
        "pfc" => hex(&frame::encode(&PauseFrame {
            dst: mac(words[1]),
            src: mac(words[2]),
            pause: Pause::Priorities {
                enabled: num(3) as u8,
                quanta: std::array::from_fn(|i| num(4 + i)),
            },
        })),
        "decode" => {
            let unicast = words.get(2).map(|m| mac(m));
            match frame::decode(&unhex(words[1]), unicast) {
                Ok(f) => {
                    let (dst, src) = (show_mac(&f.dst), show_mac(&f.src));
                    match f.pause {
                        Pause::Link { quanta } => format!("pause {dst} {src} {quanta}"),
                        Pause::Priorities { enabled, quanta } => {
                            let q: Vec<String> = quanta.iter().map(|q| q.to_string()).collect();
                            format!("pfc {dst} {src} {enabled} {}", q.join(" "))
                        }
                    }
                }
                Err(why) => format!("not {why:?}"),
            }
        }
        other => panic!("unknown request {other}"),
    }
}

fn main() {
    for line in std::io::stdin().lock().lines() {
        let line = line.expect("stdin");
        let words: Vec<&str> = line.split_whitespace().collect();
        if !words.is_empty() {
            println!("{}", answer(&words));
        }
    }
}
