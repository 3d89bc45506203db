//! Draws docs/fc_trace.svg: A's credit window toward B and B's unannounced posted buffers, step
//! by step, while A streams bursts of SENDs and B drains and reposts in smaller bites.
//! Run: cargo run --release --example fc_trace -- docs/fc_trace.svg

#[path = "../tests/support/mod.rs"]
mod support;
use support::*;
use umq::abi::types::*;

fn main() {
    let path = std::env::args()
        .nth(1)
        .unwrap_or("docs/fc_trace.svg".into());
    init_flow_control(16, 4, false);
    let (a, b) = (create("trace-a", 32), create("trace-b", 32));
    bind_pair(a, b);
    let mut held = alloc(32, 64);
    assert_eq!(
        post(b, UMQ_IO_RX, &held.drain(..16).collect::<Vec<_>>()).unwrap(),
        16
    );
    let (mut window, mut posted) = (vec![], vec![]);
    let mut seq = 0;
    for step in 0..120u64 {
        if step % 3 == 0 {
            let wrs = sends(seq, 6);
            let n = post(a, UMQ_IO_TX, &wrs).unwrap();
            free_all(&wrs[n..]);
            seq += n as u64;
            free_all(&poll(a, UMQ_IO_TX, 64));
        } else {
            held.extend(poll(b, UMQ_IO_RX, 2));
            let k = held.len().min(if step % 3 == 1 { 1 } else { 2 });
            let bufs: Vec<_> = held.drain(..k).collect();
            post(b, UMQ_IO_RX, &bufs).unwrap();
        }
        window.push(stats(a).remote_rx_window);
        posted.push(stats(b).local_rx_posted);
    }
    let (w, h, sx, sy) = (720.0, 260.0, 6.0, 7.0);
    let line = |v: &[u64], colour: &str| {
        let pts: Vec<String> = v
            .iter()
            .enumerate()
            .map(|(i, &y)| {
                format!(
                    "{:.0},{:.0}",
                    40.0 + i as f64 * sx,
                    h - 30.0 - y as f64 * sy
                )
            })
            .collect();
        format!(
            "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\" points=\"{}\"/>",
            pts.join(" ")
        )
    };
    let svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <line x1=\"40\" y1=\"{y0}\" x2=\"{x1}\" y2=\"{y0}\" stroke=\"black\"/><line x1=\"40\" y1=\"{y0}\" x2=\"40\" y2=\"20\" stroke=\"black\"/>\n\
         <text x=\"44\" y=\"16\">credits (rx depth 32, initial window 16, notify interval 4)</text>\n\
         <text x=\"{x1}\" y=\"{yl}\" text-anchor=\"end\">step</text>\n{}\n{}\n\
         <text x=\"480\" y=\"40\" fill=\"#1f77b4\">A: remote_rx_window</text>\n\
         <text x=\"480\" y=\"56\" fill=\"#d62728\">B: local_rx_posted</text>\n</svg>\n",
        line(&window, "#1f77b4"),
        line(&posted, "#d62728"),
        y0 = h - 30.0,
        x1 = 40.0 + 120.0 * sx,
        yl = h - 12.0,
    );
    std::fs::write(&path, svg).unwrap();
    println!(
        "wrote {path}: {} messages sent, final window {}",
        seq,
        window.last().unwrap()
    );
}
