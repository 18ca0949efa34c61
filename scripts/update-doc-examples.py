#!/usr/bin/env python3
"""Rewrites the output under every `$ pimdes ...` line of the ```console blocks in README.md
and docs/*.md with what the command prints now (stdout on success, stderr on failure).
tests/docs_examples.rs checks that the two agree; run this after an intended change:

    cargo build --release && python3 scripts/update-doc-examples.py
"""
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
BINARY = ROOT / "target" / "release" / "pimdes"


def run(command: str) -> str:
    args = command.split()[1:]
    done = subprocess.run([str(BINARY), *args], cwd=ROOT, capture_output=True, text=True)
    shown = done.stdout if done.returncode == 0 else done.stderr
    return "".join(line.rstrip() + "\n" for line in shown.splitlines())


def update(path: pathlib.Path) -> bool:
    lines = path.read_text().splitlines(keepends=True)
    out, i, changed, in_console = [], 0, False, False
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            in_console = (not in_console) and line.strip() == "```console"
            out.append(line)
            i += 1
            continue
        if in_console and (line.startswith("$ pimdes ") or line.strip() == "$ pimdes"):
            out.append(line)
            i += 1
            old = []
            while i < len(lines) and not lines[i].startswith("$ ") and not lines[i].startswith("```"):
                old.append(lines[i])
                i += 1
            new = run(line[2:].strip())
            changed |= "".join(old) != new
            out.append(new)
            continue
        out.append(line)
        i += 1
    if changed:
        path.write_text("".join(out))
    return changed


def main() -> int:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for f in files:
        if update(f):
            print(f"updated {f.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
