//! Benchmark records: one JSON object per measured case (`--json`), or a human table.
//!
//! Fields follow DESIGN.md §4: `bench`, `params`, `time_s`, `phases` (setup/offline/online with
//! `time_s` and `bytes`), `bytes_total`, `rounds`, then the bench's own fields. The JSON keeps
//! raw numbers (seconds, bytes); the table shows human units (ms/s, KB/MB), moves parameters
//! that every row shares to a line above it, and fits [`TABLE_WIDTH`] columns unless `--wide`.
use secinfer_net::{Cost, Phase};
use serde_json::{json, Map, Value};

/// One measured case.
pub struct BenchRecord {
    pub bench: String,
    pub params: Map<String, Value>,
    pub time_s: f64,
    pub phases: Map<String, Value>,
    pub bytes_total: u64,
    pub rounds: u64,
    pub extra: Map<String, Value>,
}

impl BenchRecord {
    /// A record from both parties' costs: bytes count both directions once (the client's sent plus
    /// received), phase time is the slower party's, rounds the larger count of the two.
    pub fn from_costs(bench: &str, time_s: f64, client: &Cost, server: &Cost) -> Self {
        let mut phases = Map::new();
        for p in Phase::ALL {
            let c = client.phase(p);
            let s = server.phase(p);
            phases.insert(
                p.name().to_string(),
                json!({
                    "time_s": c.time_s.max(s.time_s),
                    "bytes": c.bytes(),
                    "bytes_client_to_server": c.bytes_sent,
                    "bytes_server_to_client": c.bytes_received,
                    "rounds": c.rounds.max(s.rounds),
                }),
            );
        }
        let (ct, st) = (client.total(), server.total());
        BenchRecord {
            bench: bench.to_string(),
            params: Map::new(),
            time_s,
            phases,
            bytes_total: ct.bytes(),
            rounds: ct.rounds.max(st.rounds),
            extra: Map::new(),
        }
    }

    /// A record for a single-party (local) measurement.
    pub fn local(bench: &str, time_s: f64) -> Self {
        let mut phases = Map::new();
        for p in Phase::ALL {
            phases.insert(p.name().to_string(), json!({ "time_s": 0.0, "bytes": 0 }));
        }
        BenchRecord {
            bench: bench.to_string(),
            params: Map::new(),
            time_s,
            phases,
            bytes_total: 0,
            rounds: 0,
            extra: Map::new(),
        }
    }

    pub fn param(mut self, k: &str, v: impl Into<Value>) -> Self {
        self.params.insert(k.to_string(), v.into());
        self
    }
    pub fn field(mut self, k: &str, v: impl Into<Value>) -> Self {
        self.extra.insert(k.to_string(), v.into());
        self
    }

    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("bench".into(), json!(self.bench));
        m.insert("params".into(), Value::Object(self.params.clone()));
        m.insert("time_s".into(), json!(self.time_s));
        m.insert("phases".into(), Value::Object(self.phases.clone()));
        m.insert("bytes_total".into(), json!(self.bytes_total));
        m.insert("rounds".into(), json!(self.rounds));
        for (k, v) in &self.extra {
            m.insert(k.clone(), v.clone());
        }
        Value::Object(m)
    }
}

/// Widest table printed without `--wide`: a common terminal with room to spare.
pub const TABLE_WIDTH: usize = 100;

/// What the security-relevant and less obvious fields mean, printed under a table that has them.
const LEGEND: &[(&str, &str)] = &[
    (
        "flood_stat_bits",
        "statistical security s of the server's HE responses, in bits: they hide the \
         server's weights up to statistical distance 2^-s. The project's bar is 40; a lower \
         value, above all a negative one (the flooding noise is below the computation's \
         noise, as at n4096), does NOT statistically hide the weights (docs/he-parameters.md)",
    ),
    (
        "noise_budget_bits",
        "bits of BFV noise headroom left before decryption would fail (> 0: decrypts correctly)",
    ),
    (
        "max_ulp",
        "largest error against the exact function, in units of the output's last place",
    ),
    (
        "mean_ulp",
        "mean error against the exact function, in units of the output's last place",
    ),
    (
        "correct",
        "whether the decrypted result equals the plaintext computation",
    ),
];

/// Collects records and prints them as JSON lines or as one aligned table.
pub struct Reporter {
    json: bool,
    wide: bool,
    rows: Vec<BenchRecord>,
}

impl Reporter {
    /// `json`: one object per record as it comes; otherwise a table at [`Reporter::finish`],
    /// with every field when `wide`.
    pub fn new(json: bool, wide: bool) -> Self {
        Reporter {
            json,
            wide,
            rows: Vec::new(),
        }
    }

    pub fn emit(&mut self, r: BenchRecord) {
        if self.json {
            println!("{}", r.to_json());
        } else {
            self.rows.push(r);
        }
    }

    /// Prints the table (no-op in JSON mode).
    pub fn finish(self) {
        if self.json || self.rows.is_empty() {
            return;
        }
        print!("{}", render(&self.rows, self.wide));
    }
}

/// The standard columns after the parameters, in display order.
const STANDARD: [&str; 6] = [
    "time_s",
    "setup_s",
    "offline_s",
    "online_s",
    "bytes_total",
    "rounds",
];
/// Standard columns dropped first when a table is too wide (the total and online phase stay).
const DROP_FIRST: [&str; 2] = ["setup_s", "offline_s"];

fn raw_cell(r: &BenchRecord, c: &str) -> Value {
    match c {
        "bench" => json!(r.bench),
        "time_s" => json!(r.time_s),
        "bytes_total" => json!(r.bytes_total),
        "rounds" => json!(r.rounds),
        "setup_s" | "offline_s" | "online_s" if !r.extra.contains_key(c) => r
            .phases
            .get(c.trim_end_matches("_s"))
            .and_then(|p| p.get("time_s"))
            .cloned()
            .unwrap_or(Value::Null),
        _ => r
            .params
            .get(c)
            .or_else(|| r.extra.get(c))
            .cloned()
            .unwrap_or(Value::Null),
    }
}

/// A column's heading: times lose their `_s` (the cells carry the unit), `bytes_total` is `bytes`.
fn heading(c: &str) -> String {
    match c {
        "bytes_total" => "bytes".into(),
        _ if is_time(c) => c.trim_end_matches("_s").into(),
        _ => c.into(),
    }
}

fn is_time(c: &str) -> bool {
    c.ends_with("_s") && !c.starts_with("per_")
}

fn is_bytes(c: &str) -> bool {
    c == "bytes_total" || c.ends_with("_bytes") || c.starts_with("bytes_") && !c.contains("_per_")
}

/// The table as text: a line of the parameters all rows share, the table, then what hidden
/// columns and security fields mean.
pub fn render(rows: &[BenchRecord], wide: bool) -> String {
    let mut params: Vec<String> = Vec::new();
    let mut extras: Vec<String> = Vec::new();
    for r in rows {
        for k in r.params.keys() {
            if !params.contains(k) {
                params.push(k.clone());
            }
        }
    }
    for r in rows {
        for k in r.extra.keys() {
            if !params.contains(k) && !extras.contains(k) && !STANDARD.contains(&k.as_str()) {
                extras.push(k.clone());
            }
        }
    }
    let mut out = String::new();
    // Parameters every row shares go above the table (in a narrow table).
    let shared: Vec<String> = if wide {
        Vec::new()
    } else {
        params
            .iter()
            .filter(|p| rows.iter().all(|r| raw_cell(r, p) == raw_cell(&rows[0], p)))
            .cloned()
            .collect()
    };
    let one_bench = rows.iter().all(|r| r.bench == rows[0].bench);
    let mut cols: Vec<String> = Vec::new();
    if wide || !one_bench {
        cols.push("bench".into());
    }
    cols.extend(params.iter().filter(|p| !shared.contains(p)).cloned());
    cols.extend(STANDARD.iter().map(|s| s.to_string()));
    cols.extend(extras);
    let mut raw: Vec<(String, Vec<Value>)> = cols
        .into_iter()
        .map(|c| {
            let cells = rows.iter().map(|r| raw_cell(r, &c)).collect();
            (c, cells)
        })
        .collect();
    // A local measurement's phases, bytes and rounds are all zero: such columns say nothing.
    raw.retain(|(c, cells)| {
        !STANDARD.contains(&c.as_str())
            || c == "time_s"
            || cells
                .iter()
                .any(|v| !matches!(v.as_f64(), None | Some(0.0)))
    });
    let labels: Vec<String> = raw
        .iter()
        .filter(|(_, cells)| is_label(cells))
        .map(|(c, _)| c.clone())
        .collect();
    let mut table: Vec<(String, Vec<String>)> = raw
        .into_iter()
        .map(|(c, cells)| {
            let shown = cells.iter().map(|v| fmt_cell(&c, v)).collect();
            (c, shown)
        })
        .collect();
    if !wide && one_bench {
        let line: Vec<String> = shared
            .iter()
            .map(|p| format!("{p} {}", fmt_cell(p, &raw_cell(&rows[0], p))))
            .collect();
        out += &wrap(&format!("{}: {}", rows[0].bench, line.join(", ")));
    }
    let width = |t: &[(String, Vec<String>)]| -> usize {
        t.iter()
            .map(|(c, cells)| col_width(c, cells))
            .sum::<usize>()
            + 2 * t.len().saturating_sub(1)
    };
    let mut hidden: Vec<String> = Vec::new();
    if !wide {
        // Drop the bench's own fields from the last, then the setup and offline times, until
        // the table fits; a text field that names the rows (he-ops' `op`) goes last. The JSON
        // and --wide keep everything.
        while width(&table) > TABLE_WIDTH {
            let droppable = |c: &str| {
                c != "bench"
                    && !params.iter().any(|p| p == c)
                    && !STANDARD.contains(&c)
                    && !labels.iter().any(|l| l == c)
            };
            let pos = table
                .iter()
                .rposition(|(c, _)| droppable(c) && !is_key(c))
                .or_else(|| table.iter().rposition(|(c, _)| droppable(c)))
                .or_else(|| {
                    table
                        .iter()
                        .rposition(|(c, _)| DROP_FIRST.contains(&c.as_str()))
                })
                .or_else(|| table.iter().rposition(|(c, _)| labels.contains(c)));
            match pos {
                Some(i) => hidden.insert(0, table.remove(i).0),
                None => break,
            }
        }
    }
    let widths: Vec<usize> = table.iter().map(|(c, cells)| col_width(c, cells)).collect();
    let line = |cells: Vec<String>| {
        cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:>w$}"))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    out += &line(table.iter().map(|(c, _)| heading(c)).collect());
    out.push('\n');
    out += &widths
        .iter()
        .map(|w| "-".repeat(*w))
        .collect::<Vec<_>>()
        .join("  ");
    out.push('\n');
    for i in 0..rows.len() {
        out += &line(table.iter().map(|(_, cells)| cells[i].clone()).collect());
        out.push('\n');
    }
    if !hidden.is_empty() {
        out += &wrap(&format!(
            "not shown to fit {TABLE_WIDTH} columns: {} (--wide shows every field, --json the \
             raw numbers)",
            hidden.join(", ")
        ));
    }
    for (k, meaning) in LEGEND {
        let shown: Vec<String> = rows
            .iter()
            .filter_map(|r| r.extra.get(*k).or_else(|| r.params.get(*k)))
            .map(fmt_value)
            .collect();
        if !shown.is_empty() {
            let values = if table.iter().any(|(c, _)| c == k) {
                String::new()
            } else {
                format!(" (here {})", shown.join(", "))
            };
            out += &wrap(&format!("{k}{values}: {meaning}"));
        }
    }
    out
}

/// A field whose values (one per row) are text and differ between rows names the rows.
fn is_label(cells: &[Value]) -> bool {
    cells.iter().all(Value::is_string) && cells.iter().any(|v| *v != cells[0])
}

/// Fields kept longest when a table must drop columns: the security and accuracy margins.
fn is_key(c: &str) -> bool {
    LEGEND.iter().any(|(k, _)| *k == c)
}

/// `text` broken at spaces into lines of at most [`TABLE_WIDTH`] characters, each ending in a
/// newline; continuation lines are indented by two spaces.
fn wrap(text: &str) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split(' ') {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > TABLE_WIDTH {
            out += &line;
            out.push('\n');
            line = "  ".into();
        } else if !line.is_empty() {
            line.push(' ');
        }
        line += word;
    }
    out += &line;
    out.push('\n');
    out
}

fn col_width(c: &str, cells: &[String]) -> usize {
    cells
        .iter()
        .map(|s| s.chars().count())
        .max()
        .unwrap_or(0)
        .max(heading(c).chars().count())
}

/// A cell in human units: seconds as µs/ms/s, byte counts as B/KB/MB/GB (powers of 1000, as
/// the rest of the project's docs), other numbers as they are.
fn fmt_cell(c: &str, v: &Value) -> String {
    match v {
        Value::Number(n) if is_time(c) => n.as_f64().map_or_else(|| n.to_string(), fmt_seconds),
        Value::Number(n) if is_bytes(c) => match n.as_u64() {
            Some(b) => fmt_bytes(b),
            None => fmt_value(v),
        },
        _ => fmt_value(v),
    }
}

/// Seconds with three significant digits in the unit that keeps them readable.
pub fn fmt_seconds(s: f64) -> String {
    if !s.is_finite() {
        return "-".into();
    }
    let a = s.abs();
    let (x, unit) = if a == 0.0 {
        return "0 s".into();
    } else if a < 1e-3 {
        (s * 1e6, "µs")
    } else if a < 1.0 {
        (s * 1e3, "ms")
    } else {
        (s, "s")
    };
    format!("{} {unit}", sig3(x))
}

/// Bytes in B, KB, MB or GB (10^3 steps) with three significant digits.
pub fn fmt_bytes(b: u64) -> String {
    let x = b as f64;
    if b < 1000 {
        format!("{b} B")
    } else if x < 1e6 {
        format!("{} KB", sig3(x / 1e3))
    } else if x < 1e9 {
        format!("{} MB", sig3(x / 1e6))
    } else {
        format!("{} GB", sig3(x / 1e9))
    }
}

fn sig3(x: f64) -> String {
    let a = x.abs();
    if a >= 100.0 {
        format!("{x:.0}")
    } else if a >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

fn fmt_value(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        Value::Number(n) => {
            if let Some(i) = n.as_u64() {
                i.to_string()
            } else if let Some(i) = n.as_i64() {
                i.to_string()
            } else {
                let f = n.as_f64().unwrap_or(f64::NAN);
                if f != 0.0 && (f.abs() >= 1e6 || f.abs() < 1e-3) {
                    format!("{f:.3e}")
                } else if f.abs() >= 100.0 {
                    format!("{f:.1}")
                } else {
                    // 4 decimals at most, without trailing zeros: -9.3, not -9.3000
                    let t = format!("{f:.4}");
                    t.trim_end_matches('0').trim_end_matches('.').to_string()
                }
            }
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(i: u64) -> BenchRecord {
        let mut r = BenchRecord::local("demo", 0.0123 * i as f64)
            .param("method", format!("m{i}"))
            .param("net", "mem")
            .field("bytes_up", 2_500_000 * i)
            .field("flood_stat_bits", -3.5);
        r.bytes_total = 14_600_000;
        for k in 0..12 {
            r = r.field(&format!("a_long_field_name_{k}"), 123456.5);
        }
        r
    }

    #[test]
    fn units_are_human_and_json_stays_raw() {
        assert_eq!(fmt_seconds(0.0123), "12.3 ms");
        assert_eq!(fmt_seconds(2.5), "2.50 s");
        assert_eq!(fmt_seconds(0.000_045), "45.0 µs");
        assert_eq!(fmt_bytes(999), "999 B");
        assert_eq!(fmt_bytes(14_600_000), "14.6 MB");
        assert_eq!(fmt_bytes(31_749), "31.7 KB");
        let j = rec(1).to_json();
        assert_eq!(j["bytes_total"], json!(14_600_000u64));
        assert_eq!(j["bytes_up"], json!(2_500_000u64));
    }

    #[test]
    fn narrow_table_fits_and_wide_keeps_every_field() {
        let rows = vec![rec(1), rec(2)];
        let narrow = render(&rows, false);
        for l in narrow.lines() {
            assert!(
                l.chars().count() <= TABLE_WIDTH,
                "{l:?} is wider than {TABLE_WIDTH}"
            );
        }
        let table_lines: Vec<&str> = narrow.lines().take(4).collect();
        // the shared parameter moved above the table; the varying one stays a column
        assert!(narrow.starts_with("demo: net mem\n"), "{narrow}");
        assert!(table_lines[1].contains("method"), "{narrow}");
        assert!(
            narrow.contains("14.6 MB") && narrow.contains("12.3 ms"),
            "{narrow}"
        );
        assert!(narrow.contains("--wide shows every field"), "{narrow}");
        // the security margin is kept as a column and explained
        assert!(table_lines[1].contains("flood_stat_bits"), "{narrow}");
        assert!(
            narrow.contains("flood_stat_bits: statistical security"),
            "{narrow}"
        );
        let wide = render(&rows, true);
        for k in 0..12 {
            assert!(wide.contains(&format!("a_long_field_name_{k}")), "{wide}");
        }
        assert!(wide
            .lines()
            .next()
            .is_some_and(|l| l.chars().count() > TABLE_WIDTH));
        assert!(!wide.contains("not shown"), "{wide}");
    }

    /// A text field naming the rows (he-ops' `op`) outlasts the setup and offline times.
    #[test]
    fn a_row_naming_field_stays_in_a_narrow_table() {
        let row = |op: &str| {
            let mut r = BenchRecord::local("ops", 0.001).field("op", op);
            for k in 0..12 {
                r = r.field(&format!("a_long_field_name_{k}"), 123456.5);
            }
            r.field("some_long_cpu_figure", 1.5)
        };
        let rows = vec![row("rotate (Perm)"), row("decrypt (client)")];
        let narrow = render(&rows, false);
        let heading = narrow.lines().nth(1).expect("heading");
        assert!(heading.contains("op"), "{narrow}");
        assert!(narrow.contains("rotate (Perm)") && narrow.contains("decrypt (client)"));
        assert!(narrow.contains("not shown to fit"), "{narrow}");
        // all-zero phase, byte and round columns of a local measurement are left out
        assert!(
            !heading.contains("rounds") && !heading.contains("online"),
            "{narrow}"
        );
    }
}
