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

/// What the binary's ELF headers say: its type (2 executable, 3 position-independent), whether it
/// names a program interpreter (the dynamic loader: it links the C library dynamically), and the
/// tags of its dynamic section (PT_DYNAMIC, which a static-pie binary has too).
#[cfg_attr(
    not(all(target_os = "linux", target_env = "gnu", target_arch = "x86_64")),
    allow(dead_code)
)]
struct Elf {
    kind: u16,
    interp: bool,
    dynamic_tags: Vec<u64>,
}

fn elf_facts(bin: &std::path::Path) -> Elf {
    let bytes = std::fs::read(bin).unwrap();
    assert_eq!(&bytes[..4], b"\x7fELF", "{} is no ELF file", bin.display());
    assert_eq!(bytes[4], 2, "64-bit");
    assert_eq!(bytes[5], 1, "little-endian");
    let u16_at = |o: usize| u16::from_le_bytes([bytes[o], bytes[o + 1]]);
    let u32_at = |o: usize| u32::from_le_bytes(bytes[o..o + 4].try_into().unwrap());
    let u64_at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().unwrap());
    let (phoff, phentsize) = (u64_at(32) as usize, u16_at(54) as usize);
    let headers: Vec<usize> = (0..u16_at(56) as usize)
        .map(|i| phoff + i * phentsize)
        .collect();
    let dynamic_tags = match headers.iter().find(|&&p| u32_at(p) == 2) {
        Some(&p) => {
            let (offset, size) = (u64_at(p + 8) as usize, u64_at(p + 32) as usize);
            (offset..offset + size)
                .step_by(16)
                .map(u64_at)
                .take_while(|&tag| tag != 0)
                .collect()
        }
        None => Vec::new(),
    };
    Elf {
        kind: u16_at(16),
        interp: headers.iter().any(|&p| u32_at(p) == 3), // PT_INTERP
        dynamic_tags,
    }
}

/// The binary handles keychain secrets: its own code gets ASLR like any other program's (an
/// earlier release build was linked non-PIE to save a firing microseconds).
#[test]
fn the_binary_is_position_independent() {
    let kind = elf_facts(&bin()).kind;
    assert_eq!(kind, 3, "ET_DYN (PIE) expected, found ELF type {kind}");
}

/// On x86-64 Linux the release binary carries its C library (glibc as static-pie,
/// docs/performance.md): a firing starts no dynamic loader. A binary that names one was built
/// outside the Makefile's recipe, which `make release` and `make test` both use. Its relocations are
/// packed (DT_RELR) when the glibc it links applies them (2.36 and later; build.rs).
#[cfg(all(target_os = "linux", target_env = "gnu", target_arch = "x86_64"))]
#[test]
fn the_linux_binary_carries_its_c_library() {
    let elf = elf_facts(&bin());
    assert!(
        !elf.interp,
        "{} names a dynamic loader: build it with make release (or test it with make test)",
        bin().display()
    );
    let version = Command::new("getconf")
        .arg("GNU_LIBC_VERSION")
        .output()
        .unwrap();
    let minor: u32 = String::from_utf8_lossy(&version.stdout)
        .trim()
        .strip_prefix("glibc 2.")
        .and_then(|m| m.split('.').next()?.parse().ok())
        .unwrap_or(0);
    assert_eq!(
        elf.dynamic_tags.contains(&36), // DT_RELR
        minor >= 36,
        "DT_RELR present exactly when glibc reads it (this one: 2.{minor})"
    );
}

/// The image recipe's final base has what the release binary needs to start on every architecture
/// the image is built for: on x86-64 it carries its C library, but an arm64 build (on an Apple
/// silicon Mac, say) links glibc dynamically (the Makefile), so the base is distroless' `cc` image,
/// of the Debian release the build stage uses.
#[test]
fn the_image_gives_the_binary_the_c_library_it_links() {
    let recipe = std::fs::read_to_string(repo_root().join("Containerfile")).unwrap();
    let froms: Vec<&str> = recipe.lines().filter(|l| l.starts_with("FROM ")).collect();
    let (build, last) = (froms[0], froms[froms.len() - 1]);
    assert!(last.contains("distroless/cc-debian12"), "{last}");
    assert!(
        build.contains("bookworm"),
        "built on Debian 12, as the base: {build}"
    );
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

/// Regression: on headless Linux the keyring the user manager starts is locked, and neither
/// docs/keys.md nor docs/healthchecks.md said what to do. Both routes are written down with what
/// each costs, and the Healthchecks page points there.
#[test]
fn the_docs_say_what_to_do_with_a_locked_keyring_on_a_headless_server() {
    let docs = doc_files();
    let keys = &docs[Path::new("docs/keys.md")];
    let section = keys
        .split("## On a headless Linux server")
        .nth(1)
        .expect("docs/keys.md has a section for headless servers");
    let section = section.split("\n## ").next().unwrap();
    for needed in [
        "gnome-keyring-daemon --unlock",
        "systemctl --user set-environment AUTOMATIONS_HEALTHCHECKS_PING_KEY",
        "Cost:",
    ] {
        assert!(
            section.contains(needed),
            "{needed:?} missing from:\n{section}"
        );
    }
    assert_eq!(section.matches("Cost:").count(), 2, "{section}");
    assert!(
        docs[Path::new("docs/healthchecks.md")].contains("keys.md#on-a-headless-linux-server"),
        "docs/healthchecks.md points at it"
    );
}

/// The test build reuses the release build's dependencies: every crate both builds compile is
/// compiled with the same features (a test-only dependency that turns on another feature of a
/// shared crate makes cargo build it, and everything above it, twice — a WebDriver crate once did,
/// for minutes of every fresh `make test`). Cargo.toml turns the test-only features on for the
/// release build too; this fails when they drift apart.
#[test]
fn the_test_build_reuses_the_release_builds_dependencies() {
    let tree = |edges: &str| {
        let o = Command::new(env!("CARGO"))
            .args(["tree", "--locked", "--offline", "--prefix", "none"])
            .args(["-e", edges, "-f", "{p} {f}"])
            .current_dir(repo_root())
            .output()
            .unwrap();
        assert!(o.status.success(), "cargo tree: {}", stderr(&o));
        let mut features = BTreeMap::new();
        for line in stdout(&o).lines() {
            let mut parts = line.split(' ');
            let (Some(name), Some(version)) = (parts.next(), parts.next()) else {
                continue;
            };
            let f = parts.collect::<Vec<_>>().join(" ").replace("(*)", "");
            features.insert(format!("{name} {version}"), f.trim().to_owned());
        }
        features
    };
    let (release, test) = (tree("normal,build"), tree("normal,build,dev"));
    let drifted: Vec<String> = release
        .iter()
        .filter(|(k, f)| test.get(*k).is_some_and(|t| t != *f))
        .map(|(k, f)| format!("{k}: release [{f}], tests [{}]", test[k]))
        .collect();
    assert!(
        drifted.is_empty(),
        "turn these features on in Cargo.toml's [dependencies] too:\n{}",
        drifted.join("\n")
    );
}

/// The functions of `text` with a body of their own lines, as (line, signature, length in lines
/// from `fn` to its closing brace): a function ends at the first line after its signature that is
/// its own indentation followed by `}` (rustfmt's layout). A signature ending in `;` (a trait's
/// declaration) or a body closed on its own line has no length to check.
fn function_lengths(text: &str) -> Vec<(usize, String, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        // What may come before `fn`: pub, pub(…), const, async, unsafe, extern "…".
        let mut rest = trimmed;
        loop {
            let word = rest.split_once(' ').map_or(rest, |(w, _)| w);
            let qualifier = word == "pub"
                || (word.starts_with("pub(") && word.ends_with(')'))
                || ["const", "async", "unsafe", "extern"].contains(&word)
                || (word.starts_with('"') && word.ends_with('"') && word.len() > 1);
            if !qualifier || word.len() == rest.len() {
                break;
            }
            rest = &rest[word.len() + 1..];
        }
        if !rest.starts_with("fn ") {
            continue;
        }
        let indent = &line[..line.len() - trimmed.len()];
        let Some(open) = lines[i..]
            .iter()
            .position(|l| l.trim_end().ends_with(['{', ';', '}']))
        else {
            continue;
        };
        if !lines[i + open].trim_end().ends_with('{') {
            continue;
        }
        let close = format!("{indent}}}");
        if let Some(end) = lines[i..].iter().position(|l| *l == close) {
            found.push((i + 1, trimmed.to_string(), end + 1));
        }
    }
    found
}

/// `text` without its test module, which must close the file: a `#[cfg(test)] mod tests;`
/// declaration or a `#[cfg(test)] mod tests { … }` block with nothing after it.
fn shipped_part<'t>(path: &Path, text: &'t str) -> &'t str {
    let Some(at) = text.find("\n#[cfg(test)]\nmod tests") else {
        return text;
    };
    let module = &text[at + "\n#[cfg(test)]\n".len()..];
    let after = if let Some(rest) = module.strip_prefix("mod tests;\n") {
        rest
    } else {
        assert!(
            module.starts_with("mod tests {\n"),
            "{}: an unexpected test module: {}",
            path.display(),
            module.lines().next().unwrap_or_default()
        );
        module.find("\n}\n").map_or("", |end| &module[end + 3..])
    };
    assert!(
        after.trim().is_empty(),
        "{}: code after the test module, which the function-length test would not see",
        path.display()
    );
    &text[..at]
}

/// Every production function fits in 80 lines (docs/ARCHITECTURE.md's house rule): src/,
/// without its test modules (`#[cfg(test)] mod tests` and the tests.rs files they name).
#[test]
fn no_production_function_is_over_80_lines() {
    let sample = [
        "fn two() -> u8 {",
        "    2",
        "}",
        "pub trait T {",
        "    fn f(&self);",
        "    fn g(&self) -> u8 { 1 }",
        "}",
        "impl S {",
        "    pub(crate) fn h(",
        "        &self,",
        "    ) -> u8 {",
        "        3",
        "    }",
        "}",
        "extern \"C\" fn on_signal(_: i32) {",
        "}",
    ]
    .join("\n");
    let lengths: Vec<(usize, usize)> = function_lengths(&sample)
        .into_iter()
        .map(|(line, _, n)| (line, n))
        .collect();
    assert_eq!(lengths, [(1, 3), (9, 5), (15, 2)], "the scanner itself");

    let sources: BTreeMap<PathBuf, String> = files_under(&repo_root().join("src"))
        .into_iter()
        .filter(|(p, _)| p.extension().is_some_and(|x| x == "rs"))
        .map(|(p, bytes)| (p, String::from_utf8(bytes).unwrap()))
        .collect();
    let (mut functions, mut long) = (0, Vec::new());
    for (p, text) in &sources {
        if p.file_name().unwrap() == "tests.rs" {
            // Only a test module's own file: its folder's module (mod.rs in it, or the .rs file
            // of its name beside it) declares it as one.
            let module_files = [
                p.with_file_name("mod.rs"),
                p.parent().unwrap().with_extension("rs"),
            ];
            assert!(
                module_files
                    .iter()
                    .filter_map(|m| sources.get(m))
                    .any(|t| t.contains("\n#[cfg(test)]\nmod tests;\n")),
                "{} is skipped as a test module, but its folder's module does not say so",
                p.display()
            );
            continue;
        }
        for (line, signature, n) in function_lengths(shipped_part(p, text)) {
            functions += 1;
            if n > 80 {
                long.push(format!("{}:{line}: {n} lines: {signature}", p.display()));
            }
        }
    }
    assert!(
        functions > 500,
        "only {functions} functions found under src/: the scanner is wrong"
    );
    assert!(
        long.is_empty(),
        "functions over 80 lines:\n{}",
        long.join("\n")
    );
}
