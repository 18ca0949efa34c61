//! Records the git commit the binary was built from (`PIMDES_GIT_COMMIT`, empty when the
//! source is not a git checkout or git is missing), with `-dirty` when tracked files differ
//! from it. Reports carry it as `git_commit`, so a result names the code that made it.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    Some(String::from_utf8(out.stdout).ok()?.trim().to_owned())
}

fn main() {
    // Rerun when HEAD moves, when the index changes (a commit, a checkout) and when sources
    // change (the dirty mark).
    // `machines` and `workloads`: the binary embeds some of their files.
    for path in [
        ".git/HEAD",
        ".git/index",
        "src",
        "machines",
        "workloads",
        "Cargo.toml",
        "Cargo.lock",
    ] {
        println!("cargo:rerun-if-changed={path}");
    }
    if let Some(head) = git(&["symbolic-ref", "-q", "HEAD"]) {
        println!("cargo:rerun-if-changed=.git/{head}");
    }
    // Only this crate's own checkout counts, not a repository it happens to sit in.
    let own = git(&["rev-parse", "--show-toplevel"]).is_some_and(|top| {
        let here = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
        std::fs::canonicalize(top).ok() == std::fs::canonicalize(here).ok()
    });
    let commit = if own {
        git(&["rev-parse", "HEAD"]).unwrap_or_default()
    } else {
        String::new()
    };
    let dirty = !commit.is_empty()
        && git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    let suffix = if dirty { "-dirty" } else { "" };
    println!("cargo:rustc-env=PIMDES_GIT_COMMIT={commit}{suffix}");
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    let line = if commit.is_empty() {
        version
    } else {
        format!("{version} (git {commit}{suffix})")
    };
    println!("cargo:rustc-env=PIMDES_VERSION_LINE={line}");
}
