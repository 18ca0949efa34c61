//! `pimdes soak`: the randomized soak ([`crate::experiments::soak`]).

use super::write_stdout;
use crate::error::Error;
use crate::experiments::run::Progress;
use crate::experiments::soak::{Case, Outcome, check, draw};
use clap::Args;

/// At most this many cases in one command (about a day at a second each).
const MAX_CASES: u64 = 100_000;

#[derive(Debug, Args)]
pub struct SoakArgs {
    /// The first case's seed; case i has seed SEED + i, so a failing case reruns alone with
    /// `--seed` set to its seed and `--cases 1`.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
    seed: u64,
    /// How many cases to draw and run, 1 to 100,000 (each about a second or less).
    #[arg(long, default_value_t = 100, allow_negative_numbers = true)]
    cases: u64,
    /// Print every case's outcome as it ends (without it: each failure as it ends, and the
    /// totals).
    #[arg(long)]
    verbose: bool,
    /// No progress on stderr.
    #[arg(long)]
    quiet: bool,
}

pub fn run(args: SoakArgs) -> Result<(), Error> {
    if args.cases == 0 || args.cases > MAX_CASES {
        let reason = format!("{} is not between 1 and {MAX_CASES}", args.cases);
        return Err(crate::config::InputError::plain("--cases", reason).into());
    }
    let Some(last) = args.seed.checked_add(args.cases - 1) else {
        let reason = "the cases' seeds (SEED + i) would pass 2^64 - 1";
        return Err(crate::config::InputError::plain("--seed", reason).into());
    };
    let phase = format!("soaking {}", crate::config::counted(args.cases, "case"));
    let progress = super::progress::heartbeat("pimdes soak", args.quiet, &phase);
    let meter = progress.as_ref().map(|p| p.meter()).unwrap_or_default();
    meter.start(args.cases);
    let (mut held, mut refused, mut failed) = (0u64, 0u64, Vec::new());
    for seed in args.seed..=last {
        let case = draw(seed);
        let outcome = check(&case);
        let what = match &outcome {
            Outcome::Held => "held every invariant".to_owned(),
            Outcome::Refused(why) => format!("refused as infeasible: {why}"),
            Outcome::Failed(what) => format!("FAILED: {what}"),
        };
        match &outcome {
            Outcome::Held => held += 1,
            Outcome::Refused(_) => refused += 1,
            Outcome::Failed(what) => failed.push((case.clone(), what.clone())),
        }
        // As each case ends, so that a long soak shows its failures at once and an
        // interrupted one keeps the lines it printed.
        if args.verbose || matches!(outcome, Outcome::Failed(_)) {
            let line = format!("seed {seed}: {what}\n  {}\n", case.command_line());
            let written = match &progress {
                Some(p) => p.above(|| write_stdout(&line)),
                None => write_stdout(&line),
            };
            // A closed stdout ends the soak; a failure found is still what it reports.
            if let Err(e) = written {
                return Err(failure(&failed).unwrap_or(e));
            }
        }
        meter.add(1);
    }
    drop(progress);
    let totals = write_stdout(&format!(
        "soak from seed {}: {}, {held} held every invariant, {refused} refused as infeasible input, {} failed\n",
        args.seed,
        crate::config::counted(args.cases, "case"),
        failed.len()
    ));
    failure(&failed).map_or(totals, Err)
}

/// The soak's verdict when a case failed: the first failure, how to rerun it, and how many
/// more failed.
fn failure(failed: &[(Case, String)]) -> Option<Error> {
    let (case, what) = failed.first()?;
    Some(Error::Verification(format!(
        "soak case {} failed: {what}; rerun it with `pimdes soak --seed {} --cases 1` (its run on one and on two threads, and with the warm-up batches unsimulated where they may be); its run on one thread alone, from the repository's root: `RAYON_NUM_THREADS=1 {}`{}",
        case.seed,
        case.seed,
        case.command_line(),
        match failed.len() {
            1 => String::new(),
            n => format!(" ({} more failed)", n - 1),
        }
    )))
}
