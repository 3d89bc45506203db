//! Running a baseline's server and client as two processes on this host, the way the
//! baselines' own tools are run by hand: they find each other over a TCP port on 127.0.0.1.

use std::process::{Command, Stdio};
use std::time::Duration;

/// Whether `tool` can be started here (it runs with `-h`).
pub fn installed(tool: &str) -> bool {
    Command::new(tool)
        .arg("-h")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// A TCP port nobody listens on right now, for the out-of-band address exchange.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(47592)
}

/// Starts `server`, then runs `client()` until it succeeds (a client gives up at once when the
/// server is not listening yet, so it is retried a few times); returns the client's stdout.
/// `tool` names the program in errors.
pub fn run(
    tool: &str,
    mut server: Command,
    client: impl Fn() -> Command,
) -> Result<String, String> {
    let mut server = server
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start {tool}: {e}"))?;
    let mut last = String::new();
    for attempt in 0..20 {
        std::thread::sleep(Duration::from_millis(if attempt == 0 { 100 } else { 250 }));
        let out = client()
            .output()
            .map_err(|e| format!("cannot start {tool}: {e}"))?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if out.status.success() {
            let _ = server.wait();
            return Ok(text);
        }
        last = format!("{text}{}", String::from_utf8_lossy(&out.stderr));
    }
    let _ = server.kill();
    let _ = server.wait();
    Err(format!("{tool} client failed: {last}"))
}
