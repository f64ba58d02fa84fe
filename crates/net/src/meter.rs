//! Cost accounting: bytes, messages, rounds and wall time, per named phase.
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// The protocol phases of DESIGN.md §4.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Keys, base OTs: once per session.
    Setup,
    /// Input-independent work: OT extension, garbling, triples.
    Offline,
    /// Input-dependent work.
    Online,
}

impl Phase {
    pub const ALL: [Phase; 3] = [Phase::Setup, Phase::Offline, Phase::Online];
    pub fn name(self) -> &'static str {
        match self {
            Phase::Setup => "setup",
            Phase::Offline => "offline",
            Phase::Online => "online",
        }
    }
}

/// What one party saw in one phase.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PhaseCost {
    /// Wall time spent in this phase (seconds).
    pub time_s: f64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub messages_sent: u64,
    pub messages_received: u64,
    /// Runs of traffic in one direction: a new round starts at each change of direction in this
    /// party's traffic (the first message starts round 1).
    pub rounds: u64,
}

impl PhaseCost {
    pub fn bytes(&self) -> u64 {
        self.bytes_sent + self.bytes_received
    }
    pub fn add(&mut self, other: &PhaseCost) {
        self.time_s += other.time_s;
        self.bytes_sent += other.bytes_sent;
        self.bytes_received += other.bytes_received;
        self.messages_sent += other.messages_sent;
        self.messages_received += other.messages_received;
        self.rounds += other.rounds;
    }
}

/// One party's cost report: a [`PhaseCost`] per phase.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Cost {
    pub setup: PhaseCost,
    pub offline: PhaseCost,
    pub online: PhaseCost,
}

impl Cost {
    pub fn phase(&self, p: Phase) -> &PhaseCost {
        match p {
            Phase::Setup => &self.setup,
            Phase::Offline => &self.offline,
            Phase::Online => &self.online,
        }
    }
    fn phase_mut(&mut self, p: Phase) -> &mut PhaseCost {
        match p {
            Phase::Setup => &mut self.setup,
            Phase::Offline => &mut self.offline,
            Phase::Online => &mut self.online,
        }
    }
    /// Sum over all phases.
    pub fn total(&self) -> PhaseCost {
        let mut t = PhaseCost::default();
        for p in Phase::ALL {
            t.add(self.phase(p));
        }
        t
    }
    /// Element-wise sum (e.g. to merge the costs of sub-protocols run on separate channels).
    pub fn add(&mut self, other: &Cost) {
        for p in Phase::ALL {
            self.phase_mut(p).add(other.phase(p));
        }
    }
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Direction {
    Send,
    Recv,
}

/// Live meter owned by a channel.
#[derive(Debug)]
pub struct Meter {
    cost: Cost,
    phase: Phase,
    phase_started: Instant,
    last: Option<Direction>,
}

impl Default for Meter {
    fn default() -> Self {
        Meter {
            cost: Cost::default(),
            phase: Phase::Setup,
            phase_started: Instant::now(),
            last: None,
        }
    }
}

impl Meter {
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// Closes the running phase's clock and starts `p`'s. Setting the same phase again is a no-op.
    pub fn set_phase(&mut self, p: Phase) {
        if p == self.phase {
            return;
        }
        self.flush_time();
        self.phase = p;
        // A new phase starts a new round count: the first message in it opens a round.
        self.last = None;
    }

    fn flush_time(&mut self) {
        let now = Instant::now();
        let dt = now.duration_since(self.phase_started).as_secs_f64();
        self.cost.phase_mut(self.phase).time_s += dt;
        self.phase_started = now;
    }

    pub fn record_send(&mut self, bytes: usize) {
        let c = self.cost.phase_mut(self.phase);
        c.bytes_sent += bytes as u64;
        c.messages_sent += 1;
        if self.last != Some(Direction::Send) {
            c.rounds += 1;
            self.last = Some(Direction::Send);
        }
    }

    pub fn record_recv(&mut self, bytes: usize) {
        let c = self.cost.phase_mut(self.phase);
        c.bytes_received += bytes as u64;
        c.messages_received += 1;
        if self.last != Some(Direction::Recv) {
            c.rounds += 1;
            self.last = Some(Direction::Recv);
        }
    }

    /// The cost so far, with the running phase's clock read now.
    pub fn snapshot(&self) -> Cost {
        let mut c = self.cost;
        c.phase_mut(self.phase).time_s += self.phase_started.elapsed().as_secs_f64();
        c
    }

    /// Zeroes all counters and restarts the clock in phase `Setup`.
    pub fn reset(&mut self) {
        *self = Meter::default();
    }
}
