//! Benchmark records: one JSON object per measured case (`--json`), or a human table.
//!
//! Fields follow DESIGN.md §4: `bench`, `params`, `time_s`, `phases` (setup/offline/online with
//! `time_s` and `bytes`), `bytes_total`, `rounds`, then the bench's own fields.
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

/// Collects records and prints them as JSON lines or as one aligned table.
pub struct Reporter {
    json: bool,
    rows: Vec<BenchRecord>,
}

impl Reporter {
    pub fn new(json: bool) -> Self {
        Reporter {
            json,
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
        let mut cols: Vec<String> = vec!["bench".into()];
        let push = |c: String, cols: &mut Vec<String>| {
            if !cols.contains(&c) {
                cols.push(c);
            }
        };
        for r in &self.rows {
            for k in r.params.keys() {
                push(k.clone(), &mut cols);
            }
        }
        for c in [
            "time_s",
            "setup_s",
            "offline_s",
            "online_s",
            "bytes_total",
            "rounds",
        ] {
            push(c.into(), &mut cols);
        }
        for r in &self.rows {
            for k in r.extra.keys() {
                push(k.clone(), &mut cols);
            }
        }
        let cell = |r: &BenchRecord, c: &str| -> String {
            let v = match c {
                "bench" => json!(r.bench),
                "time_s" => json!(r.time_s),
                "bytes_total" => json!(r.bytes_total),
                "rounds" => json!(r.rounds),
                "setup_s" | "offline_s" | "online_s" => r
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
            };
            fmt_value(&v)
        };
        let table: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|r| cols.iter().map(|c| cell(r, c)).collect())
            .collect();
        let widths: Vec<usize> = cols
            .iter()
            .enumerate()
            .map(|(i, c)| {
                table
                    .iter()
                    .map(|row| row[i].len())
                    .max()
                    .unwrap_or(0)
                    .max(c.len())
            })
            .collect();
        let line = |cells: &[String]| {
            cells
                .iter()
                .zip(&widths)
                .map(|(c, w)| format!("{c:>w$}"))
                .collect::<Vec<_>>()
                .join("  ")
        };
        println!("{}", line(&cols));
        println!(
            "{}",
            widths
                .iter()
                .map(|w| "-".repeat(*w))
                .collect::<Vec<_>>()
                .join("  ")
        );
        for row in &table {
            println!("{}", line(row));
        }
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
                } else {
                    format!("{f:.4}")
                }
            }
        }
        other => other.to_string(),
    }
}
