//! What umq-perf prints: a progress bar on a terminal, one line (or one JSON object) per result
//! as it is measured, and a closing table with the flow-control statistics of both sides.

use crate::api::SideStats;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::ser::{Serialize, SerializeMap, Serializer};
use std::io::IsTerminal;

/// A progress bar on stderr (indicatif), drawn only when stderr is a terminal, at most ten times
/// a second, and cleared when the measurement ends.
pub struct Progress {
    bar: Option<ProgressBar>,
    calls: u32,
    short: bool,
}

impl Progress {
    pub fn new(label: String, total: u64, quiet: bool) -> Progress {
        let on = !quiet && std::io::stderr().is_terminal();
        let bar = on.then(|| {
            let bar = ProgressBar::with_draw_target(
                Some(total.max(1)),
                ProgressDrawTarget::stderr_with_hz(10),
            );
            let style = ProgressStyle::with_template("{msg:<28} [{bar:30}] {percent:>3}%")
                .expect("a valid template")
                .progress_chars("# ");
            bar.set_style(style);
            bar.set_message(label);
            bar
        });
        Progress {
            bar,
            calls: 0,
            short: total < 1024,
        }
    }

    /// Cheap enough for a hot loop: callers pass every iteration, and the bar hears of it every
    /// 1024 calls (every call when the whole run is short).
    #[inline]
    pub fn tick(&mut self, done: u64) {
        let Some(bar) = &self.bar else { return };
        self.calls = self.calls.wrapping_add(1);
        if self.calls.is_multiple_of(1024) || self.short {
            bar.set_position(done);
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// One value of a result.
#[derive(Clone, Debug)]
pub enum Value {
    Num(f64),
    Text(String),
}

/// One measured result: which test, where, and named values (in print order).
#[derive(Clone, Debug)]
pub struct Row {
    pub test: &'static str,
    pub provider: &'static str,
    pub size: u32,
    pub flow_control: bool,
    pub values: Vec<(&'static str, Value)>,
    /// The flow-control statistics of the two queues after the run: (side, stats).
    pub sides: Vec<(&'static str, SideStats)>,
}

impl Row {
    pub fn new(test: &'static str, provider: &'static str, size: u32, flow_control: bool) -> Row {
        Row {
            test,
            provider,
            size,
            flow_control,
            values: Vec::new(),
            sides: Vec::new(),
        }
    }

    pub fn num(mut self, name: &'static str, v: f64) -> Row {
        self.values.push((name, Value::Num(v)));
        self
    }

    pub fn text(mut self, name: &'static str, v: impl Into<String>) -> Row {
        self.values.push((name, Value::Text(v.into())));
        self
    }

    pub fn get(&self, name: &str) -> Option<f64> {
        self.values.iter().find_map(|(n, v)| match v {
            Value::Num(x) if *n == name => Some(*x),
            _ => None,
        })
    }

    /// The row as one JSON object: the row's identity, its values in order, then each side's
    /// flow-control counters and copy counts.
    pub fn json(&self) -> String {
        serde_json::to_string(self).expect("a row is plain data")
    }

    /// The one-line human form printed as soon as the result is known.
    pub fn line(&self) -> String {
        let mut s = format!(
            "{:<4} {:<8} {:>6} B  fc {:<3}",
            self.test,
            self.provider,
            self.size,
            if self.flow_control { "on" } else { "off" }
        );
        for (name, v) in &self.values {
            match v {
                Value::Num(x) => s += &format!("  {name} {}", human(*x)),
                Value::Text(t) => s += &format!("  {name} {t}"),
            }
        }
        s
    }
}

/// A JSON number as the rows have always printed them: whole numbers (and anything of 1000 or
/// more) as integers, four decimals otherwise, small values in full.
fn json_number(x: f64) -> serde_json::Value {
    if !x.is_finite() {
        serde_json::Value::Null
    } else if x.fract() == 0.0 || x.abs() >= 1000.0 {
        (x.round() as i64).into()
    } else if x.abs() < 0.01 {
        x.into()
    } else {
        ((x * 1e4).round() / 1e4).into()
    }
}

impl Serialize for Value {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Value::Num(x) => json_number(*x).serialize(s),
            Value::Text(t) => t.serialize(s),
        }
    }
}

/// One side's counters of how its messages were copied.
#[derive(serde::Serialize)]
struct Copies {
    by_ref_wr: u64,
    placed_wr: u64,
    placed_rx: u64,
}

/// One side's flow-control counters, by their JSON names.
struct FlowCounters<'a>(&'a SideStats);

impl Serialize for FlowCounters<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let fields = counters(self.0);
        let mut map = s.serialize_map(Some(fields.len()))?;
        for (name, _, v) in fields {
            map.serialize_entry(name, &v)?;
        }
        map.end()
    }
}

impl Serialize for Row {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("test", self.test)?;
        map.serialize_entry("provider", self.provider)?;
        map.serialize_entry("size", &self.size)?;
        map.serialize_entry("flow_control", &self.flow_control)?;
        for (name, v) in &self.values {
            map.serialize_entry(name, v)?;
        }
        for (side, st) in &self.sides {
            map.serialize_entry(&format!("{side}_fc"), &FlowCounters(st))?;
            let t = &st.transport;
            let copies = Copies {
                by_ref_wr: t.by_ref_wr,
                placed_wr: t.placed_wr,
                placed_rx: t.placed_rx,
            };
            map.serialize_entry(&format!("{side}_copies"), &copies)?;
        }
        map.end()
    }
}

fn human(x: f64) -> String {
    if x != 0.0 && x.abs() < 0.01 {
        format!("{x:.2e}")
    } else if x.fract() == 0.0 || x.abs() >= 100.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.3}")
    }
}

const COUNTER_WIDTH: usize = 10;

/// One side's flow-control counters: JSON name, table heading, value.
fn counters(st: &SideStats) -> [(&'static str, &'static str, u64); 8] {
    [
        (
            "total_local_rx_posted",
            "rx_posted",
            st.fc.total_local_rx_posted,
        ),
        (
            "total_local_rx_notified",
            "notified",
            st.fc.total_local_rx_notified,
        ),
        (
            "total_remote_rx_received",
            "received",
            st.fc.total_remote_rx_received,
        ),
        (
            "total_remote_rx_consumed",
            "consumed",
            st.fc.total_remote_rx_consumed,
        ),
        (
            "total_flow_controlled_wr",
            "fc_wr",
            st.fc.total_flow_controlled_wr,
        ),
        ("piggybacked", "piggyback", st.ext.piggybacked),
        ("standalone", "standalone", st.ext.standalone),
        ("area_only", "area_only", st.ext.area_only),
    ]
}

/// The closing table: every result, then both sides' flow-control counters per run.
pub fn table(rows: &[Row]) -> String {
    let mut s = String::from("\nresults\n");
    for r in rows {
        s += &r.line();
        s.push('\n');
    }
    if rows.iter().any(|r| r.flow_control && !r.sides.is_empty()) {
        s += &format!(
            "\nflow control, both sides after each run\n{:<4} {:<8} {:>7} {:<6}",
            "test", "provider", "size", "side"
        );
        for (_, heading, _) in counters(&SideStats::default()) {
            s += &format!(" {heading:>COUNTER_WIDTH$}");
        }
        s += "\n";
        for r in rows.iter().filter(|r| r.flow_control) {
            for (side, st) in &r.sides {
                s += &format!("{:<4} {:<8} {:>7} {:<6}", r.test, r.provider, r.size, side);
                for (_, _, v) in counters(st) {
                    s += &format!(" {v:>COUNTER_WIDTH$}");
                }
                s += "\n";
            }
        }
    }
    s
}

/// The median of a few rounds' results: for each numeric value, the median across rounds
/// (the rows must be of one kind); the last round's statistics.
pub fn median(mut rounds: Vec<Row>) -> Row {
    let n = rounds.len();
    let mut out = rounds.pop().expect("at least one round");
    if n == 1 {
        return out;
    }
    for (name, v) in out.values.iter_mut() {
        if let Value::Num(x) = v {
            let mut all: Vec<f64> = rounds.iter().filter_map(|r| r.get(name)).collect();
            all.push(*x);
            all.sort_by(|a, b| a.total_cmp(b));
            *x = all[all.len() / 2];
        }
    }
    out.values.push(("rounds", Value::Num(n as f64)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_one_object_with_every_value() {
        let r = Row::new("lat", "shm", 64, true)
            .num("p50_ns", 151.0)
            .num("ratio", 0.4567)
            .num("tiny", 0.00012345)
            .num("rate", 1234.56)
            .text("baseline", "fi_pingpong \"shm\"");
        assert_eq!(
            r.json(),
            r#"{"test":"lat","provider":"shm","size":64,"flow_control":true,"p50_ns":151,"ratio":0.4567,"tiny":0.00012345,"rate":1235,"baseline":"fi_pingpong \"shm\""}"#
        );
    }

    #[test]
    fn json_carries_each_sides_counters() {
        let mut r = Row::new("bw", "shm", 64, true).num("msgs_per_s", f64::NAN);
        let mut st = SideStats::default();
        st.fc.total_local_rx_posted = 7;
        st.ext.standalone = 2;
        st.transport.placed_rx = 3;
        r.sides = vec![("server", st)];
        let v: serde_json::Value = serde_json::from_str(&r.json()).unwrap();
        assert_eq!(v["msgs_per_s"], serde_json::Value::Null);
        assert_eq!(v["server_fc"]["total_local_rx_posted"], 7);
        assert_eq!(v["server_fc"]["standalone"], 2);
        assert_eq!(v["server_fc"].as_object().unwrap().len(), 8);
        assert_eq!(v["server_copies"]["placed_rx"], 3);
        assert_eq!(v["server_copies"]["by_ref_wr"], 0);
    }

    #[test]
    fn median_takes_the_middle_of_each_value() {
        let rows = [3.0, 1.0, 2.0]
            .iter()
            .map(|&x| {
                Row::new("bw", "shm", 64, false)
                    .num("a", x)
                    .num("b", 10.0 * x)
            })
            .collect();
        let m = median(rows);
        assert_eq!(m.get("a"), Some(2.0));
        assert_eq!(m.get("b"), Some(20.0));
        assert_eq!(m.get("rounds"), Some(3.0));
    }

    #[test]
    fn table_lists_both_sides_only_for_flow_controlled_runs() {
        let mut on = Row::new("bw", "shm", 64, true).num("msgs_per_s", 1e6);
        let mut st = SideStats::default();
        st.fc.total_local_rx_posted = 4242;
        on.sides = vec![("client", SideStats::default()), ("server", st)];
        let mut off = Row::new("lat", "shm", 64, false);
        off.sides = vec![("client", SideStats::default())];
        let t = table(&[on, off]);
        assert!(t.contains("server"), "{t}");
        assert!(t.contains("4242"), "{t}");
        assert_eq!(t.matches("client").count(), 1, "{t}");
    }
}
