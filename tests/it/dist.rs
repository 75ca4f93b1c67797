//! The release artifacts `make dist` leaves in target/dist/ (docs/install.md), used as a person
//! who downloads them would: the checksums hold, the static binary runs, each completion loads in
//! its shell, a manual page renders, the .deb installs with dpkg and passes lintian, and the
//! container image's folder holds the binary, the definitions and only the scripts they run.
//! `make test` runs `make dist` first.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::harness::*;

/// target/dist, when `make dist` has filled it.
fn dist(test: &str) -> Option<PathBuf> {
    let dir = repo_root().join("target/dist");
    if dir.join("SHA256SUMS").exists() {
        return Some(dir);
    }
    skip(
        test,
        "target/dist holds no artifacts: run `make dist` (make test does)",
    );
    None
}

/// Runs `program args…`, failing with its output when it fails.
#[track_caller]
fn ok(program: &str, args: &[&str], dir: &Path) -> String {
    let o = Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(
        o.status.success(),
        "{program} {args:?}: {}{}",
        stdout(&o),
        stderr(&o)
    );
    stdout(&o)
}

/// Whether an ELF file names a program interpreter (PT_INTERP): a dynamically linked program.
fn has_interpreter(elf: &[u8]) -> bool {
    assert_eq!(&elf[..4], b"\x7fELF", "not an ELF file");
    let u16_at = |at: usize| u16::from_le_bytes([elf[at], elf[at + 1]]) as usize;
    let phoff = u64::from_le_bytes(elf[0x20..0x28].try_into().unwrap()) as usize;
    let (entsize, count) = (u16_at(0x36), u16_at(0x38));
    (0..count).any(|i| {
        let at = phoff + i * entsize;
        u32::from_le_bytes(elf[at..at + 4].try_into().unwrap()) == 3
    })
}

#[test]
#[ignore = "a real component: make dist's artifacts (musl-tools, cargo-deb), zsh, fish, man-db, lintian, dpkg"]
fn the_release_artifacts_are_whole_and_install() {
    let test = "the_release_artifacts_are_whole_and_install";
    let Some(dir) = dist(test) else { return };
    let version = env!("CARGO_PKG_VERSION");
    let name = format!("automations-{version}-x86_64-unknown-linux-musl");
    let tarball = format!("{name}.tar.gz");
    let deb = format!("automations_{version}-1_amd64.deb");
    // The two artifacts, and checksums that hold for both.
    let sums = std::fs::read_to_string(dir.join("SHA256SUMS")).unwrap();
    let listed: Vec<&str> = sums
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    assert_eq!(listed, [tarball.as_str(), deb.as_str()], "{sums}");
    ok("sha256sum", &["--check", "--strict", "SHA256SUMS"], &dir);

    // The tarball: one folder, the binary, its pages, its completions, README and LICENSE.
    let sb = Sandbox::new();
    let unpacked = sb.path("unpacked");
    std::fs::create_dir(&unpacked).unwrap();
    ok(
        "tar",
        &["-xzf", dir.join(&tarball).to_str().unwrap()],
        &unpacked,
    );
    let top = unpacked.join(&name);
    for f in [
        "automations",
        "README.md",
        "LICENSE",
        "man/automations.1",
        "man/automations-run.1",
        "man/automations-log-verify.1",
        "completions/automations.bash",
        "completions/_automations",
        "completions/automations.fish",
    ] {
        assert!(top.join(f).is_file(), "{tarball} lacks {f}");
    }
    let bin = top.join("automations");
    assert!(
        !has_interpreter(&std::fs::read(&bin).unwrap()),
        "the release binary is statically linked"
    );
    let v = ok(bin.to_str().unwrap(), &["--version"], &unpacked);
    assert_eq!(v.trim(), format!("automations {version}"));
    // It runs a firing, from a data root of its own.
    let mut run = Command::new(&bin);
    run.args(["--root"])
        .arg(repo_root())
        .arg("--data-root")
        .arg(&sb.data)
        .args(["run", "heartbeat"])
        .env("AUTOMATIONS_NOTIFY", "off");
    let o = run.output().unwrap();
    assert_code(&o, 0);
    assert!(
        stdout(&o).starts_with("heartbeat: ok in "),
        "{}",
        stdout(&o)
    );

    // Each completion loads in its own shell and completes the subcommands.
    let completions = top.join("completions");
    let bash = format!(
        "source '{}' && complete -p automations",
        completions.join("automations.bash").display()
    );
    assert!(ok("bash", &["-c", &bash], &unpacked).contains("automations"));
    ok(
        "zsh",
        &["-n", completions.join("_automations").to_str().unwrap()],
        &unpacked,
    );
    let zsh = format!(
        "autoload -Uz compinit && compinit -u -d '{}' && source '{}' && print -r -- ${{_comps[automations]}}",
        sb.path("zcompdump").display(),
        completions.join("_automations").display()
    );
    assert!(ok("zsh", &["-c", &zsh], &unpacked).contains("_automations"));
    let fish = completions.join("automations.fish");
    ok("fish", &["-n", fish.to_str().unwrap()], &unpacked);
    let listed = ok(
        "fish",
        &[
            "-c",
            &format!("source '{}'; complete -C 'automations '", fish.display()),
        ],
        &unpacked,
    );
    for sub in ["run", "install", "health", "man"] {
        assert!(
            listed.lines().any(|l| l.split('\t').next() == Some(sub)),
            "fish completes no {sub}: {listed}"
        );
    }

    // A manual page renders.
    let page = Command::new("man")
        .arg("-l")
        .arg(top.join("man/automations-run.1"))
        .env("MANWIDTH", "80")
        .output()
        .unwrap();
    assert!(page.status.success(), "{}", stderr(&page));
    // Bold and underline are overstruck (`x\bx`): what a reader sees is the last of each pair.
    let mut text = String::new();
    for c in stdout(&page).chars() {
        if c == '\u{8}' {
            text.pop();
        } else {
            text.push(c);
        }
    }
    let text = text.replace(['\u{2010}', '\u{2212}'], "-");
    assert!(
        text.contains("automations-run") && text.contains("SYNOPSIS") && text.contains("--unit"),
        "{text}"
    );

    // The .deb installs with dpkg (into a root of its own) and puts each file in Debian's place.
    let root = sb.path("dpkg-root");
    std::fs::create_dir_all(root.join("var/lib/dpkg/updates")).unwrap();
    std::fs::create_dir_all(root.join("var/lib/dpkg/info")).unwrap();
    std::fs::write(root.join("var/lib/dpkg/status"), "").unwrap();
    let admin = root.join("var/lib/dpkg");
    ok(
        "dpkg",
        &[
            &format!("--instdir={}", root.display()),
            &format!("--admindir={}", admin.display()),
            "--force-script-chrootless",
            "--force-not-root",
            "-i",
            dir.join(&deb).to_str().unwrap(),
        ],
        &dir,
    );
    for f in [
        "usr/bin/automations",
        "usr/share/man/man1/automations.1.gz",
        "usr/share/man/man1/automations-run.1.gz",
        "usr/share/bash-completion/completions/automations",
        "usr/share/zsh/vendor-completions/_automations",
        "usr/share/fish/vendor_completions.d/automations.fish",
        "usr/share/doc/automations/copyright",
        "usr/share/doc/automations/changelog.Debian.gz",
    ] {
        assert!(root.join(f).is_file(), "the .deb did not install {f}");
    }
    let v = ok(
        root.join("usr/bin/automations").to_str().unwrap(),
        &["--version"],
        &root,
    );
    assert_eq!(v.trim(), format!("automations {version}"));
    // lintian: no errors (E:); its warnings are said in docs/install.md.
    let lint = Command::new("lintian")
        .arg(dir.join(&deb))
        .output()
        .unwrap();
    let errors: Vec<String> = stdout(&lint)
        .lines()
        .filter(|l| l.starts_with("E:"))
        .map(str::to_owned)
        .collect();
    assert!(errors.is_empty(), "lintian: {errors:#?}\n{}", stderr(&lint));

    // The image's folder: the binary, every definition, and the scripts they run, no more.
    let image = dir.join("image");
    assert_eq!(
        std::fs::read(image.join("usr/local/bin/automations")).unwrap(),
        std::fs::read(&bin).unwrap()
    );
    let mut defs: Vec<String> = std::fs::read_dir(image.join("app/automations"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    defs.sort();
    let mut ours: Vec<String> = std::fs::read_dir(repo_root().join("automations"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    ours.sort();
    assert_eq!(defs, ours);
    let scripts: Vec<String> = std::fs::read_dir(image.join("app/scripts"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        scripts,
        ["heartbeat.sh"],
        "only the scripts the definitions run"
    );
    use automations::units::kubernetes::{BIN_IN_IMAGE, ROOT_IN_IMAGE};
    assert!(image.join(BIN_IN_IMAGE.trim_start_matches('/')).is_file());
    assert!(
        image
            .join(ROOT_IN_IMAGE.trim_start_matches('/'))
            .join("automations")
            .is_dir()
    );
}
