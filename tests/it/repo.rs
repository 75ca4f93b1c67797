//! The repository's own files: the docs hold together (links resolve, every `make` target they
//! name exists, no heading twice, a short README), and the Makefile works from a checkout whose
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
    std::fs::read_to_string(repo_root().join("Makefile"))
        .unwrap()
        .lines()
        .filter_map(|l| {
            let (t, _) = l.split_once(':')?;
            (!t.is_empty() && t.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
                .then(|| t.to_owned())
        })
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

#[test]
fn no_heading_twice_and_a_short_readme() {
    let mut seen: BTreeMap<String, PathBuf> = BTreeMap::new();
    let mut twice = Vec::new();
    for (file, text) in doc_files() {
        for line in text.lines().filter(|l| l.starts_with('#')) {
            if let Some(first) = seen.insert(line.to_owned(), file.clone()) {
                twice.push(format!(
                    "{line:?} in {} and {}",
                    first.display(),
                    file.display()
                ));
            }
        }
    }
    assert!(twice.is_empty(), "headings written twice: {twice:#?}");
    let readme = std::fs::metadata(repo_root().join("README.md"))
        .unwrap()
        .len();
    assert!(
        readme <= 8 * 1024,
        "README.md is {readme} bytes; at most 8 KiB"
    );
    let text = &doc_files()[Path::new("README.md")];
    for command in ["make automations-run NAME=heartbeat", "make test"] {
        assert!(text.contains(command), "the README gives `{command}`");
    }
}

/// Regression: the Makefile passed `--root $(CURDIR)` unquoted and installed with `install -D`
/// (which BSD install lacks), so a checkout under a folder with spaces broke.
#[test]
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
    // The real install copies the binary into a folder that does not exist yet, then stops at the
    // question (no terminal here).
    let o = make(&["automations-install", "NAME=heartbeat"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("needs a person at a terminal"),
        "{}",
        stderr(&o)
    );
    let meta = std::fs::metadata(&stable).expect("the binary was installed");
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o777,
        0o755
    );
    assert_eq!(
        std::fs::read(&stable).unwrap(),
        std::fs::read(bin()).unwrap()
    );
}

/// Issue 18: every make target echoed the long `RUSTFLAGS=… cargo build` line before its output.
#[test]
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

/// Issue 16: `make release` links musl where this machine can build for it (Rust's musl target,
/// musl-gcc, an lld) and otherwise glibc, saying once what the musl build lacks; `LIBC=gnu`
/// chooses glibc without a word. `make -n` prints the build it would run.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn release_links_musl_where_it_can_and_says_what_is_missing_where_not() {
    let sb = Sandbox::new();
    // A PATH with only what the Makefile's own checks run: rustc and sed, and musl-gcc (with
    // Debian's lld, where this machine has it) or not.
    let path_with = |musl_gcc: bool| {
        let dir = sb.path(if musl_gcc { "with" } else { "without" });
        std::fs::create_dir_all(&dir).unwrap();
        let mut tools = vec![("rustc", true), ("sed", true)];
        if musl_gcc {
            tools.extend([("musl-gcc", true), ("ld.lld", false)]);
        }
        for (tool, needed) in tools {
            match which(tool) {
                Some(real) => std::os::unix::fs::symlink(real, dir.join(tool)).unwrap(),
                None if needed => return None,
                None => {}
            }
        }
        Some(dir)
    };
    let make = |path: &Path, args: &[&str]| {
        let o = Command::new(which("make").expect("make"))
            .arg("-s")
            .args(args)
            .current_dir(repo_root())
            .env("PATH", path)
            // Not what a `make test LIBC=…` around this test says.
            .env_remove("MAKEFLAGS")
            .env_remove("MAKELEVEL")
            .env_remove("LIBC")
            .output()
            .unwrap();
        assert_code(&o, 0);
        o
    };
    let rustc = Command::new(which("rustc").expect("rustc"))
        .arg("-vV")
        .output()
        .unwrap();
    let host = stdout(&rustc)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_owned))
        .expect("rustc -vV names its host");
    let musl = host.replace("-linux-gnu", "-linux-musl");
    let without = path_with(false).expect("rustc and sed are on this machine's PATH");
    let o = make(&without, &["-n", "release"]);
    let plan = stdout(&o);
    assert!(
        plan.contains(&format!("--target {host}"))
            && plan.contains("building against glibc")
            && plan.contains("apt-get install musl-tools"),
        "{plan}"
    );
    assert_eq!(
        stdout(&make(&without, &["print-bin"])).trim(),
        format!("target/{host}/release/automations")
    );
    let plan = stdout(&make(&without, &["-n", "release", "LIBC=gnu"]));
    assert!(
        plan.contains(&format!("--target {host}")) && !plan.contains("glibc"),
        "{plan}"
    );

    let Some(with) = path_with(true) else {
        return skip(
            "release_links_musl_where_it_can_and_says_what_is_missing_where_not",
            "musl-gcc (apt-get install musl-tools)",
        );
    };
    let missing = stdout(&make(&with, &["print-musl-missing"]));
    if !missing.trim().is_empty() {
        // The Rust target (or an lld) is what this machine lacks; test-prereqs.sh adds the target.
        return skip(
            "release_links_musl_where_it_can_and_says_what_is_missing_where_not",
            &format!("the musl build's prerequisites: {missing}"),
        );
    }
    let plan = stdout(&make(&with, &["-n", "release"]));
    assert!(
        plan.contains(&format!("--target {musl}"))
            && plan.contains(&format!("CC_{}=musl-gcc", musl.replace('-', "_")))
            && plan.contains("scripts/firing-musl.order")
            && !plan.contains("glibc"),
        "{plan}"
    );
    assert_eq!(
        stdout(&make(&with, &["print-bin"])).trim(),
        format!("target/{musl}/release/automations")
    );
}

/// Issue 18: `scripts/systemd-sandbox.sh` pointed at a file outside the repository. Nothing the
/// repository ships may send a reader outside it.
#[test]
fn nothing_shipped_points_outside_the_repository() {
    let mut stack = vec![repo_root().join("scripts"), repo_root().join("src")];
    let mut files = vec![repo_root().join("Makefile"), repo_root().join("README.md")];
    files.extend(doc_files().into_keys().map(|k| repo_root().join(k)));
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                files.push(p);
            }
        }
    }
    for f in files {
        let text = String::from_utf8_lossy(&std::fs::read(&f).unwrap()).into_owned();
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
