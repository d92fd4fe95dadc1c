//! Progress on stderr: indicatif bars on a terminal (the phase with its elapsed time, and
//! one line per probe with its state and budget), plain periodic lines otherwise. Log lines
//! go through `suspend`, because indicatif drops `println` when its target is hidden.

use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use tokio::time::Instant;

use gates_engine::chaos::reporters::{ProbeLine, Reporter, RunEvent};

/// The per-controller workload probes folded into one line, so the display stays short.
pub fn fold_workloads(lines: Vec<ProbeLine>) -> Vec<ProbeLine> {
    let (workloads, mut out): (Vec<ProbeLine>, Vec<ProbeLine>) = lines
        .into_iter()
        .partition(|l| l.name.starts_with("workloads::"));
    if let Some(first) = workloads.first() {
        let down = workloads.iter().filter(|l| l.state == "DOWN").count();
        let unknown = workloads.iter().filter(|l| l.state == "unknown").count();
        let state = if down > 0 {
            "DOWN"
        } else if unknown > 0 {
            "unknown"
        } else {
            first.state
        };
        out.push(ProbeLine {
            name: format!("workloads ({} controllers, {down} down)", workloads.len()),
            state,
            longest: workloads
                .iter()
                .map(|l| l.longest)
                .max()
                .unwrap_or_default(),
            total: workloads.iter().map(|l| l.total).max().unwrap_or_default(),
            budget_longest: first.budget_longest,
            budget_total: first.budget_total,
        });
    }
    out
}

pub struct Progress {
    bars: Option<Bars>,
    origin: Instant,
    plain_every: Duration,
    last_plain: Mutex<Option<Instant>>,
    phase: Mutex<String>,
}

struct Bars {
    multi: MultiProgress,
    phase: ProgressBar,
    probes: Mutex<Vec<ProgressBar>>,
}

impl Progress {
    /// Bars only on a terminal and outside CI.
    pub fn new(origin: Instant) -> Progress {
        let interactive = std::io::stderr().is_terminal() && std::env::var_os("CI").is_none();
        let bars = interactive.then(|| {
            let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr_with_hz(10));
            let phase = multi.add(ProgressBar::new_spinner());
            phase.set_style(
                ProgressStyle::with_template("{spinner} {elapsed_precise} {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            phase.enable_steady_tick(Duration::from_millis(200));
            Bars {
                multi,
                phase,
                probes: Mutex::new(Vec::new()),
            }
        });
        Progress {
            bars,
            origin,
            plain_every: Duration::from_secs(5),
            last_plain: Mutex::new(None),
            phase: Mutex::new(String::new()),
        }
    }

    /// A log line, above the bars on a terminal, plain otherwise; never dropped.
    pub fn line(&self, text: &str) {
        match &self.bars {
            Some(bars) => bars.multi.suspend(|| eprintln!("{text}")),
            None => eprintln!("{text}"),
        }
    }

    pub fn phase(&self, phase: &str) {
        if let Ok(mut p) = self.phase.lock() {
            *p = phase.to_string();
        }
        match &self.bars {
            Some(bars) => bars.phase.set_message(phase.to_string()),
            None => eprintln!("[{:>6.1}s] {phase}", self.origin.elapsed().as_secs_f64()),
        }
    }

    /// The probes' states; on a terminal every call redraws, otherwise a line every few
    /// seconds.
    pub fn probes(&self, lines: Vec<ProbeLine>) {
        let lines = fold_workloads(lines);
        match &self.bars {
            Some(bars) => {
                let Ok(mut probe_bars) = bars.probes.lock() else {
                    return;
                };
                while probe_bars.len() < lines.len() {
                    let bar = bars.multi.add(ProgressBar::new_spinner());
                    bar.set_style(
                        ProgressStyle::with_template("    {msg}")
                            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                    );
                    probe_bars.push(bar);
                }
                for (bar, line) in probe_bars.iter().zip(&lines) {
                    bar.set_message(line.to_string());
                }
            }
            None => {
                let Ok(mut last) = self.last_plain.lock() else {
                    return;
                };
                if last.is_some_and(|t| t.elapsed() < self.plain_every) {
                    return;
                }
                *last = Some(Instant::now());
                let phase = self.phase.lock().map(|p| p.clone()).unwrap_or_default();
                let states: Vec<String> = lines.iter().map(ToString::to_string).collect();
                eprintln!(
                    "[{:>6.1}s] {phase}: {}",
                    self.origin.elapsed().as_secs_f64(),
                    states
                        .iter()
                        .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
                        .collect::<Vec<_>>()
                        .join("; ")
                );
            }
        }
    }

    pub fn finish(&self) {
        if let Some(bars) = &self.bars {
            if let Ok(probes) = bars.probes.lock() {
                for bar in probes.iter() {
                    bar.finish_and_clear();
                }
            }
            bars.phase.finish_and_clear();
        }
    }
}

/// The progress display as a run's reporter: a display of its own for each part of the run
/// (the plan, then the experiment), each counting from the instant its part began.
#[derive(Default)]
pub struct Terminal {
    progress: Mutex<Option<Progress>>,
}

impl Reporter for Terminal {
    fn report(&self, event: &RunEvent<'_>) {
        let Ok(mut progress) = self.progress.lock() else {
            return;
        };
        if let RunEvent::Begin(origin) = event {
            *progress = Some(Progress::new(*origin));
            return;
        }
        let Some(progress) = progress.as_ref() else {
            return;
        };
        match event {
            RunEvent::Phase(text) => progress.phase(text),
            RunEvent::Log(text) => progress.line(text),
            RunEvent::Probes(lines) => progress.probes(lines.to_vec()),
            RunEvent::Quiet => progress.finish(),
            RunEvent::Begin(_)
            | RunEvent::Plan(_)
            | RunEvent::Timeline(_)
            | RunEvent::Finished(_)
            | RunEvent::Note(_)
            | RunEvent::Record { .. } => {}
        }
    }
}
