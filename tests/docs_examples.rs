//! Examples in the README and docs are real: every `$ pimdes ...` line inside a ```console
//! block is run, and its output (stdout on success, stderr on failure) must equal the lines
//! shown under it.

use std::path::Path;
use std::process::Command;

struct Example {
    file: String,
    command: String,
    expected: String,
}

fn examples() -> Vec<Example> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("README.md")];
    let mut docs: Vec<_> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    let mut out = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let mut in_console = false;
        let mut current: Option<Example> = None;
        for line in text.lines() {
            if line.starts_with("```") {
                if let Some(e) = current.take() {
                    out.push(e);
                }
                in_console = !in_console && line.trim() == "```console";
                continue;
            }
            if !in_console {
                continue;
            }
            if let Some(cmd) = line.strip_prefix("$ ") {
                if let Some(e) = current.take() {
                    out.push(e);
                }
                if cmd.starts_with("pimdes ") || cmd.trim() == "pimdes" {
                    current = Some(Example {
                        file: file.display().to_string(),
                        command: cmd.to_owned(),
                        expected: String::new(),
                    });
                }
            } else if let Some(e) = current.as_mut() {
                e.expected.push_str(line.trim_end());
                e.expected.push('\n');
            }
        }
    }
    out
}

#[test]
fn documented_commands_print_what_the_docs_show() {
    let examples = examples();
    assert!(examples.len() >= 4, "the docs have examples");
    for e in examples {
        let args: Vec<&str> = e.command.split_whitespace().skip(1).collect();
        let out = Command::new(env!("CARGO_BIN_EXE_pimdes"))
            .args(&args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .unwrap();
        let shown = if out.status.success() {
            &out.stdout
        } else {
            &out.stderr
        };
        let got: String = String::from_utf8_lossy(shown)
            .lines()
            .map(|l| format!("{}\n", l.trim_end()))
            .collect();
        assert_eq!(
            got.trim_end(),
            e.expected.trim_end(),
            "{}: `{}`",
            e.file,
            e.command
        );
    }
}
