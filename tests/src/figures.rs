//! Figures that criterion does not measure (a p95 from a timed loop, recall of a search
//! evaluation, a size), written where `bench-report` finds them: one JSON object per line
//! in `target/figures/<file>.jsonl`, replaced as a whole by each run of the bench or test
//! that owns the file.
//!
//! ```json
//! {"figure": "hybrid query p95, 10k tools", "value": 4.1, "unit": "ms", "baseline": {"figure": "BM25 query p95, 10k tools", "value": 0.9}, "goal": "≤ 15 ms"}
//! ```

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

/// One figure.
#[derive(Clone, Debug)]
pub struct Figure {
    /// What was measured, with its conditions ("hybrid query p95, 10k tools").
    pub figure: String,
    /// The value, in `unit`.
    pub value: f64,
    /// Its unit ("ms", "µs", "MB", "" for ratios and scores).
    pub unit: String,
    /// The figure it is compared against, measured in the same run, in the same unit.
    pub baseline: Option<(String, f64)>,
    /// The goal, as text ("≤ 15 ms").
    pub goal: Option<String>,
}

impl Figure {
    /// A figure without baseline or goal.
    pub fn new(figure: impl Into<String>, value: f64, unit: impl Into<String>) -> Self {
        Self { figure: figure.into(), value, unit: unit.into(), baseline: None, goal: None }
    }

    /// Compare against `baseline` (same unit).
    pub fn against(mut self, figure: impl Into<String>, value: f64) -> Self {
        self.baseline = Some((figure.into(), value));
        self
    }

    /// State the goal.
    pub fn goal(mut self, goal: impl Into<String>) -> Self {
        self.goal = Some(goal.into());
        self
    }

    fn to_json(&self) -> Value {
        let mut line = json!({"figure": self.figure, "value": self.value, "unit": self.unit});
        if let Some((figure, value)) = &self.baseline {
            line["baseline"] = json!({"figure": figure, "value": value});
        }
        if let Some(goal) = &self.goal {
            line["goal"] = json!(goal);
        }
        line
    }
}

/// `target/figures`, from a bench's or test's `CARGO_TARGET_TMPDIR` (`target/tmp`).
pub fn dir(target_tmpdir: &str) -> PathBuf {
    Path::new(target_tmpdir).parent().unwrap_or(Path::new(".")).join("figures")
}

/// Replace `target/figures/<file>.jsonl` with `figures`. Pass `env!("CARGO_TARGET_TMPDIR")`.
pub fn record(target_tmpdir: &str, file: &str, figures: &[Figure]) -> std::io::Result<()> {
    let dir = dir(target_tmpdir);
    std::fs::create_dir_all(&dir)?;
    let text: String = figures.iter().map(|f| format!("{}\n", f.to_json())).collect();
    std::fs::write(dir.join(format!("{file}.jsonl")), text)
}
