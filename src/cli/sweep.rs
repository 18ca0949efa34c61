//! `pimdes sweep`: run, list or collect the points of a manifest.

use super::{shell_quote, write_stdout};
use crate::config::InputError;
use crate::error::Error;
use crate::experiments::plot::plot_dir;
use crate::experiments::sweep::collect::{CSV_FILE, JSONL_FILE, collect, remove_derived};
use crate::experiments::sweep::{
    INDEX_FILE, Manifest, Outcome, Point, SweepCommand, SweepIndex, check_collected_files, index,
    load_manifest, read_index, remove_stale_temps, run_points, write_atomically,
};
use clap::Args;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

#[derive(Debug, Args)]
pub struct SweepArgs {
    /// The sweep's manifest (TOML; see docs/sweeps.md).
    #[arg(value_name = "MANIFEST", required_unless_present = "collect")]
    manifest: Option<PathBuf>,
    /// The sweep directory: one result file per point, `sweep.json`, `results.csv`,
    /// `results.jsonl`.
    #[arg(long, value_name = "DIR", required_unless_present = "collect")]
    out: Option<PathBuf>,
    /// Print one self-contained `pimdes run`/`pimdes partition` command line per point (for GNU
    /// parallel or a Slurm array) instead of running; writes DIR/sweep.json for `--collect`.
    /// A manifest that records refusals gets `pimdes sweep MANIFEST --out DIR --point I` lines.
    #[arg(long, conflicts_with_all = ["point", "jobs"])]
    list: bool,
    /// Run point I alone (numbered from 0, as `--list` prints them); no collection.
    #[arg(
        long,
        value_name = "I",
        allow_negative_numbers = true,
        conflicts_with = "jobs"
    )]
    point: Option<usize>,
    /// Points run at once, at most (threads; a point waits while the points running leave
    /// it too little host memory); the results do not depend on it.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 1,
        allow_negative_numbers = true
    )]
    jobs: usize,
    /// Only collect: write DIR/results.csv and DIR/results.jsonl from the points' result
    /// files, and redraw the figures the manifest declares.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["manifest", "out", "list", "point", "jobs"])]
    collect: Option<PathBuf>,
    /// No line per point on stderr (warnings and errors still print).
    #[arg(long)]
    quiet: bool,
}

/// The command line that runs point `p` alone and writes its result file: the command
/// itself, or, when the manifest records refusals, `pimdes sweep --point` (a plain command
/// that is refused exits without a record, which collecting then misses).
fn point_command(m: &Manifest, p: &Point, dir: &Path) -> String {
    let path = |p: &Path| shell_quote(&p.display().to_string());
    if m.record_refused {
        let manifest = Path::new(&m.origin);
        let manifest = std::fs::canonicalize(manifest).unwrap_or_else(|_| manifest.to_owned());
        let point = p.index.to_string();
        return [
            "pimdes sweep",
            &path(&manifest),
            "--out",
            &path(dir),
            "--point",
            &point,
        ]
        .join(" ");
    }
    let mut words = vec![
        "pimdes".to_owned(),
        m.command.name().to_owned(),
        "--machine".to_owned(),
        path(&m.machine),
        "--workload".to_owned(),
        path(&m.workload),
    ];
    if let Some(name) = &m.partitioner {
        words.extend(["--partitioner".to_owned(), shell_quote(name)]);
    }
    for s in &p.sets {
        words.extend(["--set".to_owned(), shell_quote(s)]);
    }
    if m.command == SweepCommand::Run {
        words.push("--quiet".to_owned());
    }
    words.extend(["--out".to_owned(), path(&dir.join(&p.file))]);
    words.join(" ")
}

/// Refuses an `--out` that is there but not a directory (a file, a device, FIFO or socket,
/// a symbolic link to nothing, or unreadable); `Ok(false)` when nothing is there yet, so
/// the directory can be made.
pub(crate) fn check_dir_path(out: &Path) -> Result<bool, Error> {
    let refuse = |reason: String| Err(InputError::plain("--out", reason).into());
    let shown = out.display();
    match std::fs::metadata(out) {
        // A symbolic link to nothing: the directory could not be made there.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && out.is_symlink() => refuse(format!(
            "{shown} is a symbolic link to nothing; give a directory, or a path to create one"
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => refuse(format!("cannot read {shown}: {e}")),
        Ok(m) if m.is_file() => refuse(format!("{shown} is a file, not a directory")),
        Ok(m) if !m.is_dir() => refuse(format!(
            "{shown} is not a directory (a device, FIFO or socket); give a directory"
        )),
        Ok(_) => Ok(true),
    }
}

/// Refuses an `--out` a sweep must not write into: a file, a directory that is neither
/// empty nor a sweep's (one holding a sweep index), or the directory of a sweep of another
/// command or other parameters than `index`'s, so that no file of the user's, and no
/// other sweep's results, are overwritten.
fn check_out_dir(out: &Path, index: &SweepIndex) -> Result<(), Error> {
    if !check_dir_path(out)? {
        return Ok(());
    }
    if out.join(INDEX_FILE).exists() {
        return check_sweep_of(out, index);
    }
    if empty_but_for_an_index_temporary(out) {
        return Ok(());
    }
    // A `--point` job started beside this one may have put its index in place since.
    if out.join(INDEX_FILE).exists() {
        return check_sweep_of(out, index);
    }
    let shown = out.display();
    let reason = format!(
        "{shown} is not empty and holds no {INDEX_FILE}, so it is not a sweep's directory; give a new or empty directory"
    );
    Err(InputError::plain("--out", reason).into())
}

/// Refuses `out`'s sweep index unless it is a sweep of `index`'s command and parameters,
/// and of the same manifest (by its file and directory names) when the index names one.
fn check_sweep_of(out: &Path, index: &SweepIndex) -> Result<(), Error> {
    let refuse = |reason: String| Err(InputError::plain("--out", reason).into());
    let shown = out.display();
    match read_index(out) {
        Ok(old) if (&old.command, &old.parameters) != (&index.command, &index.parameters) => {
            refuse(format!(
                "{shown} holds a sweep of another command or other parameters (`{}` over [{}]; this manifest's is `{}` over [{}]); give another directory, or delete that one to replace it",
                old.command,
                old.parameters.join(", "),
                index.command,
                index.parameters.join(", ")
            ))
        }
        Ok(old) => match (&old.manifest, &index.manifest) {
            (Some(theirs), Some(ours)) if theirs != ours => refuse(format!(
                "{shown} holds the sweep of manifest {theirs}, and this is {ours}: its results would replace that sweep's; give another directory, or delete that one to replace it"
            )),
            _ => Ok(()),
        },
        Err(e) => refuse(format!(
            "{shown} holds a {INDEX_FILE} that is not a sweep's ({}); give a new or empty directory",
            e.reason
        )),
    }
}

/// Whether directory `out` is empty but for the temporary index of a sweep killed while
/// writing it (a whole sweep removes it with the other leftovers; `--point` leaves it), or
/// of one starting now: the `--point` jobs of a sweep may all start at once, each writing
/// the same index. An entry that cannot be read counts as someone's file.
fn empty_but_for_an_index_temporary(out: &Path) -> bool {
    let index_temporary = |name: &str| {
        let target = crate::output::temporary_target(name)
            .or_else(|| crate::output::legacy_temporary_target(name));
        target == Some(INDEX_FILE)
    };
    std::fs::read_dir(out)
        .map(|mut entries| {
            entries.all(|e| e.is_ok_and(|e| index_temporary(&e.file_name().to_string_lossy())))
        })
        .unwrap_or(false)
}

/// Creates the sweep directory, made absolute so `--list` lines run from anywhere.
fn sweep_dir(out: &Path, index: &SweepIndex) -> Result<PathBuf, Error> {
    check_out_dir(out, index)?;
    // Before anything is written: a directory that cannot be made is a bad `--out`.
    let bad = |e: std::io::Error| -> Error {
        InputError::plain("--out", format!("cannot create {}: {e}", out.display())).into()
    };
    // The directories this creates, innermost first, so that a failure removes them.
    let new: Vec<&Path> = out.ancestors().take_while(|p| !p.exists()).collect();
    if let Err(e) = std::fs::create_dir_all(out) {
        for dir in new.iter().filter(|p| !p.as_os_str().is_empty()) {
            // Only empty directories go: one made meanwhile by someone else stays.
            let _ = std::fs::remove_dir(dir);
        }
        return Err(bad(e));
    }
    std::fs::canonicalize(out).map_err(bad)
}

pub fn run(args: SweepArgs) -> Result<(), Error> {
    if let Some(dir) = &args.collect {
        return write_stdout(&collect_and_draw(dir)?);
    }
    let (Some(manifest), Some(out)) = (&args.manifest, &args.out) else {
        return Err(InputError::plain(
            "pimdes sweep",
            "give MANIFEST and --out DIR, or --collect DIR",
        )
        .into());
    };
    if args.jobs == 0 {
        return Err(InputError::plain("--jobs", "must be at least 1").into());
    }
    let m = load_manifest(manifest)?;
    let indices: Vec<usize> = match args.point {
        Some(i) if i >= m.points.len() => {
            let reason = format!(
                "the sweep has points 0 to {}",
                m.points.len().saturating_sub(1)
            );
            return Err(InputError::plain("--point", reason).into());
        }
        Some(i) => vec![i],
        None => (0..m.points.len()).collect(),
    };
    let dir = write_index(&m, out)?;
    if args.list {
        let lines: String = m
            .points
            .iter()
            .map(|p| point_command(&m, p, &dir) + "\n")
            .collect();
        return write_stdout(&lines);
    }
    let run = Execution {
        jobs: args.jobs,
        whole: args.point.is_none(),
        quiet: args.quiet,
    };
    let summary = execute(&m, &indices, &dir, &run)?;
    write_stdout(&summary)
}

/// Creates the sweep directory and writes its index; returns the directory, absolute.
fn write_index(m: &Manifest, out: &Path) -> Result<PathBuf, Error> {
    let index = index(m)?;
    let dir = sweep_dir(out, &index)?;
    // Another manifest's index (or this one's, edited): its tables and figures go with it.
    // An index from before indexes named their manifest is this one's if all else agrees.
    let changed = |old: &SweepIndex| {
        let named = SweepIndex {
            manifest: old.manifest.clone().or_else(|| index.manifest.clone()),
            ..old.clone()
        };
        named != index
    };
    if let Some(old) = read_index(&dir).ok().filter(changed) {
        remove_derived(&dir, &old)?;
    }
    let text = serde_json::to_string_pretty(&index).map_err(|e| Error::Output {
        path: INDEX_FILE.into(),
        reason: e.to_string(),
    })?;
    write_atomically(&dir.join(INDEX_FILE), &(text + "\n"))?;
    Ok(dir)
}

/// Checks, without writing anything, that the manifest at `path` loads and that `out` can
/// take its sweep: what an experiment checks for every part before running the first.
pub(crate) fn check_sweep(path: &Path, out: &Path) -> Result<(), Error> {
    let m = load_manifest(path)?;
    check_out_dir(out, &index(&m)?)
}

/// Runs every point of the manifest at `path` into `out` on `jobs` threads, collects them
/// and draws the manifest's figures; returns the summary.
pub(crate) fn sweep_whole(
    path: &Path,
    out: &Path,
    jobs: usize,
    quiet: bool,
) -> Result<String, Error> {
    let m = load_manifest(path)?;
    let dir = write_index(&m, out)?;
    let all: Vec<usize> = (0..m.points.len()).collect();
    let run = Execution {
        jobs,
        whole: true,
        quiet,
    };
    execute(&m, &all, &dir, &run)
}

/// How [`execute`] runs a sweep's points.
struct Execution {
    /// Points run at once.
    jobs: usize,
    /// Every point (not `--point`): stale temporary files cleared first, collected after.
    whole: bool,
    /// No line per point on stderr.
    quiet: bool,
}

/// Runs the points, reporting each on stderr; a whole sweep also clears a killed run's
/// temporary files first, collects at the end and draws the manifest's figures. Returns
/// the summary for stdout.
fn execute(m: &Manifest, indices: &[usize], dir: &Path, run: &Execution) -> Result<String, Error> {
    if run.whole {
        remove_stale_temps(dir, m)?;
        check_collected_files(m, dir)?;
    }
    // Points finish in any order under `--jobs`: each line names its point (numbered from
    // 0, as `--point` takes it) and counts the points finished so far.
    // The count is taken and printed under one lock, so the lines count up in order.
    let (total, finished) = (indices.len(), Mutex::new(0usize));
    let line = |p: &Point, what: &str| {
        let mut n = finished.lock().unwrap_or_else(|e| e.into_inner());
        *n += 1;
        if !run.quiet {
            let (index, file) = (p.index, &p.file);
            eprintln!("pimdes sweep: point {index}, {file}: {what} ({n} of {total})");
        }
    };
    let said = SaidWarnings::default();
    let done = |p: &Point, o: &Outcome| match o {
        Outcome::UpToDate { other_build: None } => line(p, "up to date"),
        Outcome::UpToDate {
            other_build: Some(build),
        } => line(p, &format!("up to date (written by {build})")),
        Outcome::Ran { warnings } => {
            line(p, "done");
            said.say(p.index, warnings);
        }
        Outcome::Refused { reason } => {
            line(p, &format!("refused ({reason}); recorded as such"));
        }
    };
    let reproduce = |p: &Point| point_command(m, p, dir);
    let outcomes = run_points(m, indices, dir, run.jobs, &reproduce, &done).map_err(|e| {
        // Which point, before the error itself (with `--jobs`, others ran beside it).
        eprintln!("pimdes sweep: point {}, {}: failed", e.point, e.file);
        e.error
    })?;
    let count = |f: fn(&Outcome) -> bool| outcomes.iter().filter(|o| f(o)).count();
    let ran = count(|o| matches!(o, Outcome::Ran { .. }));
    let refused = count(|o| matches!(o, Outcome::Refused { .. }));
    let refused_text = match refused {
        0 => String::new(),
        n => format!(", {n} refused"),
    };
    let mut summary = format!(
        "{} in {}: {ran} run{refused_text}, {} up to date\n",
        crate::config::counted(outcomes.len() as u64, "point"),
        dir.display(),
        outcomes.len() - ran - refused
    );
    said.say_repeats();
    if let Some(w) = other_builds_warning(&outcomes, m.points.len()) {
        eprintln!("warning: {w}");
    }
    if run.whole {
        summary.push_str(&collect_and_draw(dir)?);
    }
    Ok(summary)
}

/// The points' warnings on stderr, each text once: by text, the point it was first said
/// for and the later points that had it too. (A map, not a search of a list: a sweep of
/// 100,000 points whose warnings all differ would make the search quadratic.)
#[derive(Default)]
struct SaidWarnings(Mutex<std::collections::BTreeMap<String, (usize, Vec<usize>)>>);

impl SaidWarnings {
    /// Says point `point`'s warnings, but those an earlier point had, which are counted.
    fn say(&self, point: usize, warnings: &[String]) {
        let mut said = self.0.lock().unwrap_or_else(|e| e.into_inner());
        for w in warnings {
            match said.get_mut(w) {
                Some((_, again)) => again.push(point),
                None => {
                    eprintln!("warning: point {point}: {w}");
                    said.insert(w.clone(), (point, Vec::new()));
                }
            }
        }
    }

    /// Says which later points had a warning already said, in the order of the points
    /// that first had them.
    fn say_repeats(self) {
        let said = self.0.into_inner().unwrap_or_else(|e| e.into_inner());
        let mut repeated: Vec<(usize, Vec<usize>)> = said
            .into_values()
            .filter(|(_, again)| !again.is_empty())
            .collect();
        repeated.sort_by_key(|(first, _)| *first);
        for (first, mut again) in repeated {
            again.sort_unstable();
            let points: Vec<String> = again.iter().map(usize::to_string).collect();
            eprintln!(
                "warning: point {first}'s warning above came for {} too: {}",
                crate::config::counted(again.len() as u64, "more point"),
                points.join(", ")
            );
        }
    }
}

/// When points were kept from another pimdes build: how many of the sweep's `points`, which
/// build, and what to do.
fn other_builds_warning(outcomes: &[Outcome], points: usize) -> Option<String> {
    let builds: Vec<&String> = (outcomes.iter())
        .filter_map(|o| match o {
            Outcome::UpToDate { other_build } => other_build.as_ref(),
            _ => None,
        })
        .collect();
    let first = builds.first()?;
    let ours = crate::experiments::sweep::build_name(
        crate::experiments::VERSION,
        crate::experiments::git_commit(),
    );
    Some(format!(
        "{} of the sweep's {} kept from another pimdes build ({first}{}; this is {ours}): their numbers are that build's; to get this build's, delete their files or sweep into a fresh --out",
        builds.len(),
        crate::config::counted(points as u64, "point"),
        match builds.iter().any(|b| b != first) {
            true => " and others",
            false => "",
        }
    ))
}

/// Collects the sweep in `dir` and draws the figures its manifest declares, so that the
/// figures never show other numbers than the tables; says what it wrote.
fn collect_and_draw(dir: &Path) -> Result<String, Error> {
    let c = collect(dir)?;
    let (csv, jsonl) = (dir.join(CSV_FILE), dir.join(JSONL_FILE));
    let mut summary = match c.written {
        true => format!(
            "collected {} into {} and {}\n",
            crate::config::counted(c.points as u64, "point"),
            csv.display(),
            jsonl.display()
        ),
        false => format!(
            "{} and {} are up to date ({})\n",
            csv.display(),
            jsonl.display(),
            crate::config::counted(c.points as u64, "point")
        ),
    };
    if c.has_figures {
        for figure in plot_dir(dir)? {
            summary.push_str(&format!("{figure}\n"));
        }
    }
    Ok(summary)
}
