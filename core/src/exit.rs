//! The one mapping from how a run ended to the number the shell sees.
//!
//! Every command ends in an [`ExitCode`]: CI jobs, promotion scripts and the nightly chaos job
//! branch on it, so the numbers are a contract (the README's table) and live here only.

/// How a run ended, as the shell that started it sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitCode {
    /// Every trial passed (skips allowed), every host's loss is survivable, the command did
    /// what it was asked.
    Passed,
    /// A gate failed, promotion is blocked, or a host's loss is known not to be survivable.
    Failed,
    /// Something could not be evaluated, read or restored, or the input was bad.
    CannotTell,
    /// The run was ended by this signal (after restoring what it had stopped).
    Signalled(i32),
}

impl ExitCode {
    /// The number the process exits with: 0, 1, 2, or 128 + the signal.
    pub fn code(self) -> u8 {
        match self {
            ExitCode::Passed => 0,
            ExitCode::Failed => 1,
            ExitCode::CannotTell => 2,
            ExitCode::Signalled(signal) => 128u8.saturating_add(signal.clamp(0, 127) as u8),
        }
    }

    /// The worse of two runs' codes, for a command that runs several (a signal ends the rest).
    pub fn worst(self, other: ExitCode) -> ExitCode {
        fn rank(code: ExitCode) -> u8 {
            match code {
                ExitCode::Passed => 0,
                ExitCode::Failed => 1,
                ExitCode::CannotTell => 2,
                ExitCode::Signalled(_) => 3,
            }
        }
        if rank(other) > rank(self) {
            other
        } else {
            self
        }
    }

    /// The run's code from what it found: cannot-tell outranks a failure, which outranks a pass.
    pub fn from_findings(failed: bool, cannot_tell: bool) -> ExitCode {
        match (failed, cannot_tell) {
            (_, true) => ExitCode::CannotTell,
            (true, false) => ExitCode::Failed,
            (false, false) => ExitCode::Passed,
        }
    }
}

impl From<ExitCode> for std::process::ExitCode {
    fn from(code: ExitCode) -> Self {
        std::process::ExitCode::from(code.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_numbers_are_the_readmes() {
        let codes: Vec<u8> = [
            ExitCode::Passed,
            ExitCode::Failed,
            ExitCode::CannotTell,
            ExitCode::Signalled(2),
            ExitCode::Signalled(15),
        ]
        .into_iter()
        .map(ExitCode::code)
        .collect();
        assert_eq!(codes, vec![0, 1, 2, 130, 143]);
    }

    #[test]
    fn cannot_tell_outranks_a_failure_which_outranks_a_pass() {
        assert_eq!(ExitCode::from_findings(true, true), ExitCode::CannotTell);
        assert_eq!(ExitCode::from_findings(true, false), ExitCode::Failed);
        assert_eq!(ExitCode::from_findings(false, false), ExitCode::Passed);
    }

    #[test]
    fn several_runs_end_in_the_worst_of_their_codes() {
        let worst = |codes: &[ExitCode]| codes.iter().fold(ExitCode::Passed, |a, b| a.worst(*b));
        assert_eq!(
            worst(&[ExitCode::Failed, ExitCode::Passed]),
            ExitCode::Failed
        );
        assert_eq!(
            worst(&[ExitCode::CannotTell, ExitCode::Failed]),
            ExitCode::CannotTell
        );
        assert_eq!(
            worst(&[ExitCode::Signalled(15), ExitCode::CannotTell]),
            ExitCode::Signalled(15)
        );
        assert_eq!(worst(&[]), ExitCode::Passed);
    }

    #[test]
    fn a_signal_number_out_of_range_still_reads_as_a_signal() {
        assert_eq!(ExitCode::Signalled(400).code(), 255);
        assert_eq!(ExitCode::Signalled(-1).code(), 128);
    }
}
