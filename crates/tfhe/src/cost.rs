//! The cost model behind `--tfhe-mode auto`: recorded single-core seconds per boolean gate
//! bootstrap and per shortint lookup (both tfhe-rs default 128-bit parameter sets), measured
//! with `cargo run --release -p secinfer-tfhe --example cost` on this project's 2-core machine
//! while other builds ran (loaded; the ratio is what the choice uses).
//!
//! The plan is per step (a linear layer with its requantisation, or a max-pool): each step's
//! gate bootstraps and lookups are counted on the two circuits, and a switch between the bit
//! encoding and the digit encoding after a step costs one lookup per digit of its outputs (two
//! bits `b0 + 2·b1` are a digit once refreshed; a digit's two bits come from one many-LUT
//! bootstrap). That conversion needs the bits as shortint ciphertexts under the digit key: the
//! gate path runs on tfhe-rs boolean keys, and tfhe-rs has no key switch between boolean and
//! shortint, so a plan that mixes the paths is reported, and a run takes the cheaper uniform
//! path ([`Plan::run_path`]).
use serde::Serialize;

use crate::counter::Counter;
use crate::network::Network;
use crate::pbs::{PbsCount, PbsNetwork};

/// Seconds per boolean gate bootstrap (tfhe-rs `DEFAULT_PARAMETERS`, one core).
pub const GATE_S: f64 = 0.0423;
/// Seconds per shortint lookup (`PARAM_MESSAGE_2_CARRY_2_KS_PBS`, one core).
pub const PBS_S: f64 = 0.0455;

/// Which evaluator runs a network (or a step of it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Path {
    Gates,
    Pbs,
}

/// Predicted single-core seconds of each path.
pub fn predict(gates: &Counter, pbs: &PbsCount) -> (f64, f64) {
    (gates.pbs() as f64 * GATE_S, pbs.pbs as f64 * PBS_S)
}

/// The path predicted to be faster.
pub fn choose(gates: &Counter, pbs: &PbsCount) -> Path {
    let (g, p) = predict(gates, pbs);
    if p < g {
        Path::Pbs
    } else {
        Path::Gates
    }
}

/// One step of a per-step plan.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StepPlan {
    /// First and last network layer of the step (the output refresh is in the last step).
    pub layers: (usize, usize),
    pub kind: &'static str,
    pub gate_bootstraps: u64,
    pub lookups: u64,
    pub gates_s: f64,
    pub pbs_s: f64,
    /// Seconds to switch this step's outputs to the other encoding.
    pub convert_s: f64,
    pub choice: Path,
}

/// A network's per-step plan and its predicted single-core seconds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Plan {
    pub steps: Vec<StepPlan>,
    pub predicted_s: f64,
    pub all_gates_s: f64,
    pub all_pbs_s: f64,
}

impl Plan {
    /// Counts both circuits step by step and assigns each step its path.
    pub fn new(net: &Network, pbs: &PbsNetwork) -> Self {
        let gates = net.count_layers();
        let counted = pbs.count_steps();
        let refresh_gates = gates.last().copied().unwrap_or(0);
        let refresh_pbs = counted
            .iter()
            .find(|s| s.layers.is_none())
            .map_or(0, |s| s.pbs);
        let mut steps: Vec<StepPlan> = counted
            .iter()
            .filter_map(|s| {
                let (first, last) = s.layers?;
                let g: u64 = gates.get(first..=last).map_or(0, |v| v.iter().sum());
                Some(StepPlan {
                    layers: (first, last),
                    kind: s.kind,
                    gate_bootstraps: g,
                    lookups: s.pbs,
                    gates_s: g as f64 * GATE_S,
                    pbs_s: s.pbs as f64 * PBS_S,
                    convert_s: (s.outputs * s.digits) as f64 * PBS_S,
                    choice: Path::Pbs,
                })
            })
            .collect();
        if let Some(last) = steps.last_mut() {
            last.gate_bootstraps += refresh_gates;
            last.lookups += refresh_pbs;
            last.gates_s += refresh_gates as f64 * GATE_S;
            last.pbs_s += refresh_pbs as f64 * PBS_S;
            // Nothing follows the last step: its outputs are decrypted as they are.
            last.convert_s = 0.0;
        }
        let costs: Vec<(f64, f64)> = steps.iter().map(|s| (s.gates_s, s.pbs_s)).collect();
        let convert: Vec<f64> = steps.iter().map(|s| s.convert_s).collect();
        let (choice, predicted_s) = assign(&costs, &convert);
        for (s, c) in steps.iter_mut().zip(choice) {
            s.choice = c;
        }
        Self {
            all_gates_s: costs.iter().map(|c| c.0).sum(),
            all_pbs_s: costs.iter().map(|c| c.1).sum(),
            steps,
            predicted_s,
        }
    }

    /// Whether every step takes the same path.
    pub fn uniform(&self) -> Option<Path> {
        let first = self.steps.first()?.choice;
        self.steps
            .iter()
            .all(|s| s.choice == first)
            .then_some(first)
    }

    /// The path a run takes: the plan's own when it is uniform, else the cheaper uniform one
    /// (the two encodings live under different tfhe-rs keys; see the module note).
    pub fn run_path(&self) -> Path {
        self.uniform()
            .unwrap_or(if self.all_pbs_s < self.all_gates_s {
                Path::Pbs
            } else {
                Path::Gates
            })
    }
}

/// The cheapest assignment of paths to steps, `costs[i] = (gates_s, pbs_s)` of step i and
/// `convert[i]` the price of switching encodings after step i: dynamic programming over the
/// encoding each step leaves its outputs in. Ties go to the PBS path. Returns the choice per
/// step and the total seconds.
pub fn assign(costs: &[(f64, f64)], convert: &[f64]) -> (Vec<Path>, f64) {
    if costs.is_empty() {
        return (Vec::new(), 0.0);
    }
    // best[i][p]: cheapest seconds of steps 0..=i with step i on path p (0 gates, 1 pbs), and
    // the path of step i - 1 on that route.
    let mut best = vec![[(0.0f64, 0usize); 2]; costs.len()];
    best[0] = [(costs[0].0, 0), (costs[0].1, 1)];
    for i in 1..costs.len() {
        let switch = convert.get(i - 1).copied().unwrap_or(0.0);
        for (p, own) in [costs[i].0, costs[i].1].into_iter().enumerate() {
            let stay = best[i - 1][p].0;
            let cross = best[i - 1][1 - p].0 + switch;
            best[i][p] = if stay <= cross {
                (stay + own, p)
            } else {
                (cross + own, 1 - p)
            };
        }
    }
    let last = best.len() - 1;
    let mut p = usize::from(best[last][1].0 <= best[last][0].0);
    let total = best[last][p].0;
    let mut choice = vec![Path::Pbs; costs.len()];
    for i in (0..costs.len()).rev() {
        choice[i] = if p == 1 { Path::Pbs } else { Path::Gates };
        p = best[i][p].1;
    }
    (choice, total)
}
