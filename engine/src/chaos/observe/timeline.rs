//! Probe samples on one timeline, and the outage intervals they add up to.
//!
//! A sample is stamped with the moment its request was sent, so a slow failure does not
//! shift the outage. An outage is `[first down sample, first up sample after it)`; an
//! outage still open when sampling stops ends at the last sample time. Unknown samples
//! (for example workloads while the API itself is down) neither open nor close an outage
//! and are reported on their own.

use std::time::Duration;

pub use gates_core::record::timeline::{Interval, Observation, Sample};

/// The outage intervals of a probe, from samples in any order.
pub fn outages(samples: &[Sample]) -> Vec<Interval> {
    spans(
        samples,
        |o| matches!(o, Observation::Down(_)),
        |o| matches!(o, Observation::Up),
    )
}

/// The intervals in which a probe could not tell (e.g. the API it reads through was down).
pub fn unknowns(samples: &[Sample]) -> Vec<Interval> {
    spans(
        samples,
        |o| matches!(o, Observation::Unknown(_)),
        |o| !matches!(o, Observation::Unknown(_)),
    )
}

/// What a probe cannot rule out: the intervals it was down or could not tell.
pub fn worst_case(samples: &[Sample]) -> Vec<Interval> {
    spans(
        samples,
        |o| !matches!(o, Observation::Up),
        |o| matches!(o, Observation::Up),
    )
}

fn spans(
    samples: &[Sample],
    opens: impl Fn(&Observation) -> bool,
    closes: impl Fn(&Observation) -> bool,
) -> Vec<Interval> {
    let mut sorted: Vec<&Sample> = samples.iter().collect();
    sorted.sort_by_key(|s| s.at);
    let mut intervals = Vec::new();
    let mut open: Option<Duration> = None;
    for sample in &sorted {
        match open {
            None if opens(&sample.observation) => open = Some(sample.at),
            Some(start) if closes(&sample.observation) => {
                intervals.push(Interval {
                    start,
                    end: sample.at,
                });
                open = None;
            }
            _ => {}
        }
    }
    if let (Some(start), Some(last)) = (open, sorted.last()) {
        intervals.push(Interval {
            start,
            end: last.at.max(start),
        });
    }
    intervals
}

/// Longest and total length of a set of intervals.
pub fn longest_and_total(intervals: &[Interval]) -> (Duration, Duration) {
    let longest = intervals
        .iter()
        .map(Interval::length)
        .max()
        .unwrap_or_default();
    let total = intervals.iter().map(Interval::length).sum();
    (longest, total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn sample(at: u64, observation: Observation) -> Sample {
        Sample {
            at: ms(at),
            observation,
        }
    }

    fn up(at: u64) -> Sample {
        sample(at, Observation::Up)
    }

    fn down(at: u64) -> Sample {
        sample(at, Observation::Down("connection refused".into()))
    }

    fn unknown(at: u64) -> Sample {
        sample(at, Observation::Unknown("API down".into()))
    }

    #[test]
    fn no_down_sample_means_no_outage() {
        assert!(outages(&[up(0), up(500), up(1000)]).is_empty());
    }

    #[test]
    fn outage_runs_from_first_down_to_first_up_after_it() {
        let got = outages(&[up(0), down(500), down(1000), up(1500), up(2000)]);
        assert_eq!(
            got,
            vec![Interval {
                start: ms(500),
                end: ms(1500)
            }]
        );
    }

    #[test]
    fn samples_out_of_order_are_sorted_by_send_time() {
        let got = outages(&[up(1500), down(1000), up(0), down(500)]);
        assert_eq!(
            got,
            vec![Interval {
                start: ms(500),
                end: ms(1500)
            }]
        );
    }

    #[test]
    fn two_outages_are_kept_apart_and_summed() {
        let got = outages(&[down(0), up(200), up(400), down(600), down(800), up(1000)]);
        assert_eq!(got.len(), 2);
        assert_eq!(longest_and_total(&got), (ms(400), ms(600)));
    }

    #[test]
    fn an_outage_open_at_the_end_closes_at_the_last_sample() {
        let got = outages(&[up(0), down(500), down(900)]);
        assert_eq!(
            got,
            vec![Interval {
                start: ms(500),
                end: ms(900)
            }]
        );
    }

    #[test]
    fn unknown_samples_neither_open_nor_close_an_outage() {
        let samples = [
            up(0),
            down(100),
            unknown(200),
            up(300),
            unknown(400),
            unknown(500),
            up(600),
        ];
        assert_eq!(
            outages(&samples),
            vec![Interval {
                start: ms(100),
                end: ms(300)
            }]
        );
        assert_eq!(
            unknowns(&samples),
            vec![
                Interval {
                    start: ms(200),
                    end: ms(300)
                },
                Interval {
                    start: ms(400),
                    end: ms(600)
                }
            ]
        );
    }

    #[test]
    fn intervals_print_with_their_length() {
        let text = Interval {
            start: ms(1500),
            end: ms(13_250),
        }
        .to_string();
        assert_eq!(text, "[1.5s, 13.2s) 11.8s");
    }
}
