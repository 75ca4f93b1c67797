//! A real systemd timer firing the runner, on a private user manager (tests/it/systemd.rs has the
//! rest). Its own module, named to sort first: libtest starts tests in name order, and this one
//! mostly waits — 10 to 70 s for a whole minute on the wall clock — so begun first, the rest of the
//! suite runs during its wait instead of after it.

use std::time::{Duration, Instant};

use crate::systemd::{UserManager, assert_pty_ok, install, shipped};

/// A real timer fires the runner: a one-minute grid, and  a list of times, the first
/// at least 10 s ahead; after it fires, systemd's next elapse is the list's other time.
#[test]
#[ignore = "a real component: a private systemd user manager (root)"]
fn fires_the_runner() {
    let mut sb = shipped();
    let Some(m) = UserManager::start(&mut sb, "a_real_timer::fires_the_runner") else {
        return;
    };
    sb.definition(
        "minutely",
        "name = \"minutely\"\ncommand = [\"sh\", \"-c\", \"echo fired\"]\n[schedule]\nevery_minutes = 1\n",
    );
    assert_pty_ok(&install(&sb, "minutely"));
    // Local wall-clock times (the manager has no TZ: it reads the zone from /etc/localtime, as
    // this process does unless TZ says otherwise), the first a whole minute 10 to 70 s ahead
    // of the install that follows at once (which takes well under a second).
    let soon = chrono::Utc::now() + chrono::Duration::seconds(70);
    let first = soon
        - chrono::Duration::seconds(i64::from(chrono::Timelike::second(&soon)))
        - chrono::Duration::nanoseconds(i64::from(chrono::Timelike::nanosecond(&soon)));
    let other = first + chrono::Duration::hours(12);
    let (first_local, other_local) = (
        first.with_timezone(&chrono::Local),
        other.with_timezone(&chrono::Local),
    );
    sb.definition(
        "twice",
        &format!(
            "name = \"twice\"\ncommand = [\"sh\", \"-c\", \"echo twice\"]\n[schedule]\ndaily_at = [\"{}\", \"{}\"]\n",
            other_local.format("%H:%M"),
            first_local.format("%H:%M")
        ),
    );
    assert_pty_ok(&install(&sb, "twice"));
    let until = Instant::now() + Duration::from_secs(180);
    loop {
        let done = sb.events("finished");
        let of = |name: &str| done.iter().find(|f| f["name"] == name).cloned();
        if let (Some(minutely), Some(twice)) = (of("minutely"), of("twice")) {
            assert_eq!(minutely["outcome"], "ok", "{minutely}");
            assert_eq!(minutely["stdout_tail"], "fired\n");
            assert_eq!(twice["outcome"], "ok", "{twice}");
            assert_eq!(twice["stdout_tail"], "twice\n");
            let at = automations::runlog::parse_stamp(twice["started_at"].as_str().unwrap());
            assert!(at.unwrap() >= first, "{twice}");
            break;
        }
        assert!(
            Instant::now() < until,
            "the timers did not fire within 180 s: {:?}",
            sb.log_lines()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let started = sb.events("started");
    assert!(started.iter().all(|s| s["trigger"] == "schedule"));
    // "Wed 2026-12-02 03:03:00 UTC": the local time, between the weekday and the zone.
    let next = m.prop("local.automations.twice.timer", "NextElapseUSecRealtime");
    let next_local = next
        .split_once(' ')
        .and_then(|(_, t)| t.rsplit_once(' '))
        .map(|(t, _)| t.to_owned());
    assert_eq!(
        next_local.as_deref(),
        Some(other_local.format("%Y-%m-%d %H:%M:%S").to_string().as_str()),
        "next elapse: {next}"
    );
    sb.assert_log_verifies();
}
