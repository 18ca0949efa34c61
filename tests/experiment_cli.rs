//! `pimdes experiment` and `pimdes plot`: a manifest's figures are drawn from the collected
//! results alone, the same results give the same bytes, and bad figure specs or names are
//! bad input.

mod common;

use common::{assert_bad, pimdes};
use std::path::{Path, PathBuf};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pimdes-exp-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A two-point sweep on the tiny workload with one line figure and one stacked figure.
fn manifest(dir: &Path, plot_extra: &str) -> PathBuf {
    let root = env!("CARGO_MANIFEST_DIR");
    let text = format!(
        r#"machine = "{root}/machines/paper-2rank.toml"
workload = "{root}/workloads/tiny.toml"
command = "run"

[set]
machine.ranks = 1
machine.usable_dpus = 8
data.pairs = 20000
queries.batch_size = 500

[grid]
queries.skew = [0.6, 1.2]

[[plot]]
name = "time"
title = "Batch time"
x = "queries.skew"
y = ["batch_time_us.mean"]
error = ["batch_time_us.stddev"]
y_label = "us"
{plot_extra}

[[plot]]
name = "split"
title = "Breakdown"
x = "queries.skew"
y = ["breakdown_us.cpu", "breakdown_us.pim"]
y_label = "us"
stacked = true
"#
    );
    let path = dir.join("m.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_sweep_draws_its_figures_and_plot_redraws_the_same_bytes() {
    let dir = scratch("plot");
    let m = manifest(&dir, "");
    let out = dir.join("sweep");
    let o = pimdes(&["sweep", m.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(
        o.stdout.contains("time.svg") && o.stdout.contains("split.md"),
        "{}",
        o.stdout
    );
    let svg = std::fs::read(out.join("time.svg")).unwrap();
    let md = std::fs::read_to_string(out.join("time.md")).unwrap();
    assert!(svg.starts_with(b"<svg") && svg.ends_with(b"</svg>\n"));
    // One line of two points, each with its error bar when the sigma is positive.
    assert_eq!(String::from_utf8_lossy(&svg).matches("<circle").count(), 2);
    assert_eq!(
        md.lines()
            .filter(|l| l.starts_with("| 0.6 ") || l.starts_with("| 1.2 "))
            .count(),
        2,
        "{md}"
    );
    // A rerun clears what a killed one left of its figures, and nothing of the user's.
    let left = [
        ".time.svg.tmp-999-0",
        ".split.md.tmp-998-1",
        "time.svg.tmp-keep",
    ];
    for name in left {
        std::fs::write(out.join(name), "half").unwrap();
    }
    let o = pimdes(&["sweep", m.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let kept: Vec<bool> = left.iter().map(|n| out.join(n).exists()).collect();
    assert_eq!(kept, [false, false, true]);
    std::fs::remove_file(out.join(left[2])).unwrap();
    // Collecting again (points run on a cluster, say) redraws the figures with the tables.
    std::fs::remove_file(out.join("time.svg")).unwrap();
    let o = pimdes(&["sweep", "--collect", out.to_str().unwrap()]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let drew = format!("drew {}\n", out.join("time.svg").display());
    assert!(o.stdout.contains(&drew), "{}", o.stdout);
    let kept = format!("{} is up to date\n", out.join("time.md").display());
    assert!(o.stdout.contains(&kept), "{}", o.stdout);
    assert_eq!(std::fs::read(out.join("time.svg")).unwrap(), svg);
    // Redrawn from the collected results only, without the result files: same bytes.
    for entry in std::fs::read_dir(&out).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("queries.skew=") || name.ends_with(".svg") {
            std::fs::remove_file(path).unwrap();
        }
    }
    let o = pimdes(&["plot", out.to_str().unwrap()]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert_eq!(std::fs::read(out.join("time.svg")).unwrap(), svg);
    refuses_a_tampered_index_and_results(&dir, &out);
}

/// `plot` on a sweep whose index names a figure outside the directory, or whose collected
/// results are empty or not results: refused, and nothing written.
fn refuses_a_tampered_index_and_results(dir: &Path, out: &Path) {
    let plot = || pimdes(&["plot", out.to_str().unwrap()]);
    let index = out.join("sweep.json");
    let text = std::fs::read_to_string(&index).unwrap();
    let outside = text.replace("\"name\": \"time\"", "\"name\": \"../evil\"");
    assert_ne!(outside, text);
    std::fs::write(&index, outside).unwrap();
    assert_bad(&plot(), &["sweep.json", "`plot[0].name`"]);
    assert!(!dir.join("evil.svg").exists() && !dir.join("evil.md").exists());
    // A column no result has would draw an empty figure.
    let misspelt = text.replace("\"batch_time_us.mean\"", "\"batch_time_us.meen\"");
    assert_ne!(misspelt, text);
    std::fs::write(&index, misspelt).unwrap();
    assert_bad(
        &plot(),
        &["sweep.json", "`plot[0].y[0]`", "batch_time_us.meen"],
    );
    // The manifest's other checks hold for the index too: two figures of one name (the
    // second overwrote the first), a series that is not a parameter.
    let twice = text.replace("\"name\": \"split\"", "\"name\": \"time\"");
    assert_ne!(twice, text);
    std::fs::write(&index, twice).unwrap();
    assert_bad(
        &plot(),
        &["sweep.json", "`plot[1].name`", "names two figures"],
    );
    let series = text.replacen("\"series\": null", "\"series\": \"batch_time_us.mean\"", 1);
    assert_ne!(series, text);
    std::fs::write(&index, series).unwrap();
    assert_bad(
        &plot(),
        &["sweep.json", "`plot[0].series`", "not a parameter"],
    );
    std::fs::write(&index, text).unwrap();
    refuses_tampered_results(out);
    // An experiment's directory holds its sweeps a level down: the error points there.
    let o = pimdes(&["plot", dir.to_str().unwrap()]);
    assert_bad(&o, &["a sweep directory?"]);
    let experiment = dir.join("experiment");
    std::fs::create_dir_all(&experiment).unwrap();
    std::fs::rename(out, experiment.join("run")).unwrap();
    let o = pimdes(&["plot", experiment.to_str().unwrap()]);
    let run = experiment.join("run").display().to_string();
    assert_bad(&o, &["is an experiment's directory; its sweeps are", &run]);
}

/// `plot` on collected results that were edited: refused, naming the file.
fn refuses_tampered_results(out: &Path) {
    let plot = || pimdes(&["plot", out.to_str().unwrap()]);
    let results = out.join("results.jsonl");
    // A row lost from the collected results would drop its point from every figure.
    let rows = std::fs::read_to_string(&results).unwrap();
    let first_only = rows.lines().next().unwrap().to_owned() + "\n";
    std::fs::write(&results, first_only).unwrap();
    assert_bad(
        &plot(),
        &["results.jsonl", "its 1 rows are not the 2 points"],
    );
    // Text on a line figure's x has no place on its axis (it drew an empty figure).
    let text_x = rows.replacen("\"queries.skew\":0.6", "\"queries.skew\":\"low\"", 1);
    assert_ne!(text_x, rows);
    std::fs::write(&results, text_x).unwrap();
    assert_bad(
        &plot(),
        &["sweep.json", "`plot[0].x`", "holds low, not a number"],
    );
    // Text in a y column would drop the point from the figure unseen.
    let text_y = rows.replacen(
        "\"batch_time_us.mean\":",
        "\"batch_time_us.mean\":\"abc\",\"x\":",
        1,
    );
    assert_ne!(text_y, rows);
    std::fs::write(&results, text_y).unwrap();
    assert_bad(
        &plot(),
        &[
            "results.jsonl",
            "`batch_time_us.mean`",
            "line 1: holds abc, not a number",
        ],
    );
    // A value too large to scale an axis by drew coordinates of NaN.
    let huge_y = rows.replacen(
        "\"batch_time_us.mean\":",
        "\"batch_time_us.mean\":1.7e308,\"x\":",
        1,
    );
    assert_ne!(huge_y, rows);
    std::fs::write(&results, huge_y).unwrap();
    assert_bad(
        &plot(),
        &[
            "results.jsonl",
            "`batch_time_us.mean`",
            "line 1: holds 1.7e+308, beyond what a figure scales",
        ],
    );
    std::fs::write(&results, "").unwrap();
    assert_bad(&plot(), &["results.jsonl", "holds no results"]);
    std::fs::write(&results, "[1, 2]\n").unwrap();
    assert_bad(&plot(), &["results.jsonl", "line 1: not a result"]);
}

#[test]
fn bad_figures_and_names_are_bad_input() {
    let dir = scratch("bad");
    let m = manifest(&dir, "series = \"queries.kind\"");
    let out = dir.join("sweep");
    let o = pimdes(&["sweep", m.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert_bad(
        &o,
        &["m.toml", "`plot[0].series`", "not a parameter of the sweep"],
    );
    // A column the sweep does not collect, in each place a figure names columns: refused
    // before any point runs.
    let text = std::fs::read_to_string(manifest(&dir, "")).unwrap();
    for (from, to, key) in [
        ("x = \"queries.skew\"", "x = \"queries.skw\"", "`plot[0].x`"),
        (
            "\"breakdown_us.pim\"",
            "\"breakdown_us.pimm\"",
            "`plot[1].y[1]`",
        ),
        (
            "[\"batch_time_us.stddev\"]",
            "[\"stddev\"]",
            "`plot[0].error[0]`",
        ),
    ] {
        let bad = text.replacen(from, to, 1);
        assert_ne!(bad, text);
        std::fs::write(&m, bad).unwrap();
        let o = pimdes(&["sweep", m.to_str().unwrap(), "--out", out.to_str().unwrap()]);
        assert_bad(
            &o,
            &[
                "m.toml",
                key,
                "neither a parameter of the sweep nor a result",
            ],
        );
        assert!(!out.exists(), "nothing ran");
    }
    // A flag column on an axis: refused before any point runs (a stacked figure's x is a
    // label and may take it).
    for (from, to, key) in [
        (
            "x = \"queries.skew\"",
            "x = \"answers_verified\"",
            "`plot[0].x`",
        ),
        (
            "y = [\"batch_time_us.mean\"]",
            "y = [\"answers_verified\"]",
            "`plot[0].y[0]`",
        ),
        (
            "y = [\"batch_time_us.mean\"]",
            "y = [\"saturated\"]",
            "`plot[0].y[0]`",
        ),
    ] {
        std::fs::write(&m, text.replacen(from, to, 1)).unwrap();
        let o = pimdes(&["sweep", m.to_str().unwrap(), "--out", out.to_str().unwrap()]);
        assert_bad(&o, &["m.toml", key, "holds true/false or text"]);
        assert!(!out.exists(), "nothing ran");
    }
    // A text parameter on a line figure's x: refused before any point runs.
    let texts =
        "queries.skew = [0.6, 1.2]\npartition.partitioner = [\"ccp-capped\", \"qdd-greedy\"]";
    let bad = (text.replacen("queries.skew = [0.6, 1.2]", texts, 1)).replacen(
        "x = \"queries.skew\"",
        "x = \"partition.partitioner\"",
        1,
    );
    std::fs::write(&m, bad).unwrap();
    let o = pimdes(&["sweep", m.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert_bad(
        &o,
        &[
            "m.toml",
            "`plot[0].x`",
            "takes \"ccp-capped\", not a number",
        ],
    );
    assert!(!out.exists(), "nothing ran");
    // A text value that the key itself refuses is named as such, before the figure.
    let typo = text.replacen(
        "queries.skew = [0.6, 1.2]",
        "queries.skew = [0.6, \"high\"]",
        1,
    );
    std::fs::write(&m, typo).unwrap();
    let o = pimdes(&["sweep", m.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert_bad(
        &o,
        &["m.toml", "point 1 (`queries.skew=high`)", "invalid type"],
    );
    assert!(!o.stderr.contains("plot[0]"), "{}", o.stderr);
    assert!(!out.exists(), "nothing ran");
    let m = manifest(&dir, "stacked = 3");
    let o = pimdes(&["sweep", m.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert_bad(&o, &["m.toml", "stacked"]);
    // Stacked bars draw no error bars: error columns there would be silently dropped.
    let m = manifest(&dir, "stacked = true");
    let o = pimdes(&["sweep", m.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert_bad(
        &o,
        &[
            "m.toml",
            "`plot[0].error`",
            "a stacked figure draws no error bars",
        ],
    );
    assert!(!out.exists(), "nothing ran");
    assert_bad(
        &pimdes(&["experiment", "nosuch"]),
        &["unknown experiment `nosuch`", "imbalance-vs-skew"],
    );
    assert_bad(
        &pimdes(&["experiment", "batch-size", "--scale", "huge"]),
        &["--scale", "quick, paper"],
    );
    // A later part's directory that cannot be used is refused before the first part runs
    // (the partition part's 20 points ran and wrote their files first).
    let ex = dir.join("experiment");
    std::fs::create_dir_all(&ex).unwrap();
    std::fs::write(ex.join("run"), "mine").unwrap();
    assert_bad(
        &pimdes(&[
            "experiment",
            "imbalance-vs-skew",
            "--out",
            ex.to_str().unwrap(),
        ]),
        &["--out", "run is a file, not a directory"],
    );
    assert!(!ex.join("partition").exists(), "the first part did not run");
    assert_eq!(std::fs::read_to_string(ex.join("run")).unwrap(), "mine");
    // A file as the experiment's own directory is named as one, as sweep names it.
    let file = ex.join("run");
    assert_bad(
        &pimdes(&["experiment", "zcamp", "--out", file.to_str().unwrap()]),
        &["--out", "run is a file, not a directory"],
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "mine");
    assert_bad(&pimdes(&["plot", dir.to_str().unwrap()]), &["sweep.json"]);
    let o = pimdes(&["experiment", "--list"]);
    assert_eq!(o.code, Some(0));
    assert!(o.stdout.contains("get-vs-pim-tree") && o.stdout.contains("quick-run.toml"));
}

/// `--list` from a directory whose `experiments` folder lacks the manifests marks them
/// missing and says where to run from (`experiment NAME` would fail on them).
#[test]
fn list_marks_manifests_that_are_not_there() {
    let dir = scratch("list");
    std::fs::create_dir_all(dir.join("experiments")).unwrap();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_pimdes"))
        .args(["experiment", "--list"])
        .current_dir(&dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{stdout}");
    assert!(
        stdout.contains("experiments/zcamp/quick-partition.toml   (missing)"),
        "{stdout}"
    );
    assert!(
        stdout
            .contains("manifest(s) missing under experiments: run pimdes from its checkout's root")
    );
    let here = pimdes(&["experiment", "--list"]);
    assert!(!here.stdout.contains("missing"), "{}", here.stdout);
}
