use crate::platform::FileExt;
use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::Write;

use chrono::{DateTime, Utc};

use super::*;
use crate::clock;
use crate::definition::hex_sha256;

fn skipped(reason: SkipReason) -> Event {
    Event::Skipped(Skipped {
        trigger: Trigger::Manual,
        reason,
        after: None,
        held_by: None,
        slot: None,
    })
}

fn started(run: &str) -> Event {
    Event::Started(Started {
        run: run.into(),
        trigger: Trigger::Schedule,
        pid: 42,
        definition: Some("ab".into()),
        clock: clock::now(),
        jitter_ms: None,
        attempt: None,
        first_run: None,
        ended: None,
        paths: None,
        after: None,
        slot: None,
    })
}

fn fixed_time() -> DateTime<Utc> {
    parse_stamp("2026-03-29T01:30:00.200Z").unwrap()
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(String::from)
        .collect()
}

#[test]
fn appends_chain_and_verify() {
    let d = tempfile::tempdir().unwrap();
    let log = RunLog::new(d.path());
    log.append("a", started("r1"), Utc::now()).unwrap();
    log.append("a", skipped(SkipReason::Paused), Utc::now())
        .unwrap();
    log.append("b", skipped(SkipReason::AlreadyRunning), Utc::now())
        .unwrap();
    let l = lines(&log.path());
    assert_eq!(l.len(), 3);
    let first: serde_json::Value = serde_json::from_str(&l[0]).unwrap();
    assert_eq!(first["v"], 1);
    assert_eq!(first["event"], "started");
    assert_eq!(first["prev"], GENESIS);
    assert!(first["clock"]["awake_ms"].is_u64());
    let second: serde_json::Value = serde_json::from_str(&l[1]).unwrap();
    assert_eq!(second["prev"], hex_sha256(l[0].as_bytes()));
    assert_eq!(second["reason"], "paused");
    let v = verify(&log).unwrap();
    assert_eq!(v.lines, 3);
    assert!(
        v.breaks.is_empty() && v.unreadable.is_empty() && !v.torn_tail,
        "{v:?}"
    );
    assert_eq!(v.head.as_deref(), Some("matches the log"));

    let names: Vec<String> = log.backwards().map(|r| r.name).collect();
    assert_eq!(names, ["b", "a", "a"]);
}

#[test]
fn tampering_is_located() {
    let d = tempfile::tempdir().unwrap();
    let log = RunLog::new(d.path());
    for _ in 0..4 {
        log.append("a", skipped(SkipReason::Paused), Utc::now())
            .unwrap();
    }
    let mut l = lines(&log.path());
    l[1] = l[1].replace("paused", "stopped");
    std::fs::write(log.path(), l.join("\n") + "\n").unwrap();
    let v = verify(&log).unwrap();
    assert_eq!(v.breaks.len(), 1, "{:?}", v.breaks);
    assert!(
        v.breaks[0].starts_with("runs.jsonl line 3:"),
        "{:?}",
        v.breaks
    );

    // Deleting a line breaks the chain too.
    let l = lines(&log.path());
    std::fs::write(log.path(), [&l[0][..], &l[2], &l[3]].join("\n") + "\n").unwrap();
    assert!(!verify(&log).unwrap().breaks.is_empty());
}

#[test]
fn torn_final_line_is_sealed_and_counted_not_called_tampering() {
    let d = tempfile::tempdir().unwrap();
    let log = RunLog::new(d.path());
    log.append("a", skipped(SkipReason::Paused), Utc::now())
        .unwrap();
    let mut f = OpenOptions::new().append(true).open(log.path()).unwrap();
    f.write_all(b"{\"v\":1,\"event\":\"sta").unwrap();
    drop(f);
    let v = verify(&log).unwrap();
    assert!(v.torn_tail && v.breaks.is_empty(), "{v:?}");
    assert_eq!(v.unreadable.len(), 1);

    log.append("a", skipped(SkipReason::Stopped), Utc::now())
        .unwrap();
    let l = lines(&log.path());
    assert_eq!(l.len(), 3);
    let last: Record = serde_json::from_str(&l[2]).unwrap();
    assert_eq!(last.prev, hex_sha256(l[1].as_bytes()));
    let v = verify(&log).unwrap();
    assert!(!v.torn_tail && v.breaks.is_empty(), "{v:?}");
    assert_eq!(v.unreadable, ["runs.jsonl line 2"]);

    let mut back = log.backwards();
    let got: Vec<SkipReason> = back
        .by_ref()
        .map(|r| match r.event {
            Event::Skipped(s) => s.reason,
            _ => unreachable!(),
        })
        .collect();
    assert_eq!(got, [SkipReason::Stopped, SkipReason::Paused]);
    assert_eq!(back.unreadable, 1);
}

#[test]
fn rotation_keeps_the_chain_across_segments() {
    let d = tempfile::tempdir().unwrap();
    let log = RunLog::new(d.path()).with_rotation(600);
    for i in 0..12 {
        log.append(&format!("n{i}"), skipped(SkipReason::Paused), Utc::now())
            .unwrap();
    }
    let segs = log.segments();
    assert!(segs.len() >= 3, "{segs:?}");
    let first_live: Record = serde_json::from_str(&lines(&log.path())[0]).unwrap();
    assert!(matches!(first_live.event, Event::Rotated(_)));
    let v = verify(&log).unwrap();
    assert!(v.breaks.is_empty(), "{:?}", v.breaks);
    let names: Vec<String> = log
        .backwards()
        .filter(|r| !matches!(r.event, Event::Rotated(_)))
        .map(|r| r.name)
        .collect();
    let expected: Vec<String> = (0..12).rev().map(|i| format!("n{i}")).collect();
    assert_eq!(names, expected);
}

#[test]
fn backwards_reads_long_lines_across_blocks() {
    let d = tempfile::tempdir().unwrap();
    let log = RunLog::new(d.path());
    let big = "x".repeat(100_000);
    for i in 0..3 {
        log.append(
            "a",
            Event::Paused(Paused {
                by: By::Hand,
                reason: format!("{i}{big}"),
            }),
            Utc::now(),
        )
        .unwrap();
    }
    let reasons: Vec<char> = log
        .backwards()
        .map(|r| match r.event {
            Event::Paused(p) => p.reason.chars().next().unwrap(),
            _ => unreachable!(),
        })
        .collect();
    assert_eq!(reasons, ['2', '1', '0']);
}

/// Regression: a `runs.jsonl` link made appends write (output tails included) into its target, and
/// a dangling one created it. Links, FIFOs and directories are refused, naming the log. (A full
/// disk is tested for real, on a tmpfs, in tests/it.)
#[test]
fn a_linked_or_special_log_is_refused_never_written_through() {
    let d = tempfile::tempdir().unwrap();
    let target = d.path().join("elsewhere");
    std::fs::write(&target, "untouched").unwrap();
    std::os::unix::fs::symlink(&target, d.path().join(LOG_FILE)).unwrap();
    let log = RunLog::new(d.path());
    let err = log
        .append("a", skipped(SkipReason::Paused), Utc::now())
        .unwrap_err();
    let msg = format!("{err}: {}", std::error::Error::source(&err).unwrap());
    assert!(
        msg.contains("runs.jsonl") && msg.contains("symbolic link"),
        "{msg}"
    );
    assert_eq!(std::fs::read(&target).unwrap(), b"untouched");
    std::fs::remove_file(d.path().join(LOG_FILE)).unwrap();
    std::os::unix::fs::symlink(d.path().join("nowhere"), d.path().join(LOG_FILE)).unwrap();
    assert!(
        log.append("a", skipped(SkipReason::Paused), Utc::now())
            .is_err()
    );
    assert!(!d.path().join("nowhere").exists());
    std::fs::remove_file(d.path().join(LOG_FILE)).unwrap();
    nix::unistd::mkfifo(&d.path().join(LOG_FILE), nix::sys::stat::Mode::S_IRWXU).unwrap();
    let err = log
        .append("a", skipped(SkipReason::Paused), Utc::now())
        .unwrap_err();
    let msg = format!("{err}: {}", std::error::Error::source(&err).unwrap());
    assert!(msg.contains("FIFO"), "{msg}");
    assert_eq!(log.backwards().count(), 0);
}

#[test]
fn handles_interleaving_appends_keep_the_chain() {
    // Each handle remembers the line it wrote last; another writer in between must be noticed.
    let d = tempfile::tempdir().unwrap();
    let a = RunLog::new(d.path());
    let b = RunLog::new(d.path());
    a.append("a", skipped(SkipReason::Paused), Utc::now())
        .unwrap();
    b.append("b", skipped(SkipReason::Paused), Utc::now())
        .unwrap();
    a.append("a", skipped(SkipReason::Stopped), Utc::now())
        .unwrap();
    a.append("a", skipped(SkipReason::SlotDone), Utc::now())
        .unwrap();
    // A rotation by another handle replaces the file under the first one's cache.
    let small = RunLog::new(d.path()).with_rotation(1);
    small
        .append("c", skipped(SkipReason::Paused), Utc::now())
        .unwrap();
    a.append("a", skipped(SkipReason::Paused), Utc::now())
        .unwrap();
    let v = verify(&a).unwrap();
    assert!(v.breaks.is_empty(), "{:?}", v.breaks);
    assert_eq!(v.lines, 7);
}

#[test]
fn retention_deletes_the_oldest_segments_and_verify_accepts_the_seam() {
    let d = tempfile::tempdir().unwrap();
    let log = RunLog::new(d.path()).with_rotation(500).with_retention(2);
    // A fixed clock: every rotation falls in the same millisecond (with the real clock this
    // passed or failed by luck).
    let at = fixed_time();
    for i in 0..40 {
        log.append("a", started(&format!("r{i}")), at).unwrap();
    }
    let segments = log.segments();
    assert_eq!(segments.len(), 3, "{segments:?}");
    let v = verify(&log).unwrap();
    assert!(v.breaks.is_empty(), "{v:?}");
    let first = lines(segments.last().unwrap())[0].clone();
    let rotated: serde_json::Value = serde_json::from_str(&first).unwrap();
    assert_eq!(v.starts_after.as_deref(), rotated["previous"].as_str());
    assert_eq!(v.head.as_deref(), Some("matches the log"));
    // Editing the first remaining line is still caught: the seam is accepted, not trusted blindly.
    let oldest = segments.last().unwrap().clone();
    let mut l = lines(&oldest);
    l[1] = l[1].replace("\"r", "\"x");
    std::fs::write(&oldest, l.join("\n") + "\n").unwrap();
    assert!(!verify(&log).unwrap().breaks.is_empty());
}

#[test]
fn the_chain_head_catches_a_cut_tail_an_emptied_or_deleted_log() {
    let fresh = || {
        let d = tempfile::tempdir().unwrap();
        let log = RunLog::new(d.path());
        for i in 0..5 {
            log.append("a", started(&format!("r{i}")), Utc::now())
                .unwrap();
        }
        (d, log)
    };
    let (_d, log) = fresh();
    let head = head::read(&log.dir).unwrap();
    assert_eq!(head.lines, 5);
    // The last two lines cut: what is left still chains, but the head knows better.
    let l = lines(&log.path());
    std::fs::write(log.path(), l[..3].join("\n") + "\n").unwrap();
    let v = verify(&log).unwrap();
    assert!(v.breaks.iter().any(|b| b.contains("tail was cut")), "{v:?}");
    let (_d, log) = fresh();
    std::fs::write(log.path(), "").unwrap();
    assert!(!verify(&log).unwrap().breaks.is_empty());
    let (_d, log) = fresh();
    std::fs::remove_file(log.path()).unwrap();
    let v = verify(&log).unwrap();
    assert!(v.breaks.iter().any(|b| b.contains("emptied")), "{v:?}");
    // A head that lags (the append whose head write was lost) is fine.
    let (_d, log) = fresh();
    let h = head::read(&log.dir).unwrap();
    let l = lines(&log.path());
    head::write(
        &log.dir,
        &head::Head {
            lines: 4,
            bytes: h.bytes - l[4].len() as u64 - 1,
            hash: hex_sha256(l[3].as_bytes()),
            ..h
        },
    )
    .unwrap();
    let v = verify(&log).unwrap();
    assert!(v.breaks.is_empty(), "{v:?}");
    assert!(v.head.unwrap().starts_with("lags"));
    // The next append picks the count up again from the file.
    log.append("a", started("r9"), Utc::now()).unwrap();
    assert_eq!(head::read(&log.dir).unwrap().lines, 6);
}

/// Regression: a tampered `prev` that is not hex (a multi-byte character across byte 12) made
/// `log verify` panic, which the release build turns into an abort, instead of reporting it.
#[test]
fn verify_reports_a_non_hex_prev_instead_of_panicking() {
    let d = tempfile::tempdir().unwrap();
    let log = RunLog::new(d.path());
    log.append("a", started("r1"), Utc::now()).unwrap();
    log.append("a", started("r2"), Utc::now()).unwrap();
    let mut l = lines(&log.path());
    let mut second: serde_json::Value = serde_json::from_str(&l[1]).unwrap();
    second["prev"] = "a€€€€€€€".into();
    l[1] = second.to_string();
    std::fs::write(log.path(), l.join("\n") + "\n").unwrap();
    let v = verify(&log).unwrap();
    assert!(
        v.breaks
            .iter()
            .any(|b| b.contains("line 2: prev a€€€€€€€ does not match")),
        "{v:?}"
    );
}

/// Regression: a rotation cut off between the rename and its `rotated` line (a killed runner, a
/// full disk) left an empty live segment; the next append chained to "genesis" and `log verify`
/// reported a break at the seam forever. The next append now writes the seam first.
#[test]
fn a_rotation_cut_off_after_the_rename_is_completed_by_the_next_append() {
    let d = tempfile::tempdir().unwrap();
    let log = RunLog::new(d.path());
    log.append("a", started("r1"), Utc::now()).unwrap();
    log.append("a", started("r2"), Utc::now()).unwrap();
    // What the cut-off rotation left: the segment renamed, nothing in its place.
    std::fs::rename(log.path(), d.path().join("runs-20261130T120000.000Z.jsonl")).unwrap();
    let fresh = RunLog::new(d.path());
    fresh.append("a", started("r3"), Utc::now()).unwrap();
    let l = lines(&fresh.path());
    assert_eq!(l.len(), 2, "{l:?}");
    let seam: serde_json::Value = serde_json::from_str(&l[0]).unwrap();
    assert_eq!(seam["event"], "rotated");
    assert_eq!(seam["previous"], "runs-20261130T120000.000Z.jsonl");
    let v = verify(&fresh).unwrap();
    assert!(v.breaks.is_empty() && v.unreadable.is_empty(), "{v:?}");
    assert_eq!(v.lines, 4);
    assert_eq!(v.head.as_deref(), Some("matches the log"));
}

/// rotations within one millisecond, with retention deleting the oldest, once named the
/// next segment after a deleted one, so the newest sorted as the oldest and verify saw breaks.
#[test]
fn rotated_names_never_go_backwards_when_retention_deleted_the_oldest() {
    let d = tempfile::tempdir().unwrap();
    let log = RunLog::new(d.path()).with_rotation(300).with_retention(3);
    let at = fixed_time();
    let mut seen: Vec<String> = Vec::new();
    for i in 0..60 {
        log.append("a", started(&format!("r{i}")), at).unwrap();
        let rotated: Vec<String> = log.segments()[1..]
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        // Newest first, and strictly descending by name.
        assert!(
            rotated.windows(2).all(|w| w[0] > w[1]),
            "after append {i}: {rotated:?}"
        );
        if let Some(newest) = rotated.first()
            && seen.last() != Some(newest)
        {
            assert!(
                seen.last().is_none_or(|last| newest > last),
                "after append {i}: {newest} sorts before the earlier {:?}",
                seen.last()
            );
            seen.push(newest.clone());
        }
    }
    assert!(seen.len() > 10, "too few rotations to test: {seen:?}");
    let v = verify(&log).unwrap();
    assert!(v.breaks.is_empty(), "{v:?}");
    // Readers see the runs newest first across every segment.
    let runs: Vec<String> = log
        .backwards()
        .filter_map(|r| match r.event {
            Event::Started(s) => Some(s.run),
            _ => None,
        })
        .collect();
    let numbers: Vec<u32> = runs.iter().map(|r| r[1..].parse().unwrap()).collect();
    assert!(numbers.windows(2).all(|w| w[0] == w[1] + 1), "{numbers:?}");
    assert_eq!(numbers.first(), Some(&59));
}

/// Segments named out of order by an older version  are still read in the
/// order their `rotated` seams give, and verify follows the chain, not the names.
#[test]
fn readers_follow_the_chain_when_names_disagree() {
    let d = tempfile::tempdir().unwrap();
    let log = RunLog::new(d.path()).with_rotation(300).with_retention(100);
    let at = fixed_time();
    for i in 0..12 {
        log.append("a", started(&format!("r{i}")), at).unwrap();
    }
    let rotated: Vec<PathBuf> = log.segments()[1..].to_vec();
    assert!(rotated.len() >= 3, "{rotated:?}");
    // Give the newest rotated segment a name older than every other, as the bug did, and point the
    // live seam at it.
    let newest = &rotated[0];
    let old_name = newest.file_name().unwrap().to_string_lossy().into_owned();
    let new_name = "runs-20000101T000000.000Z.jsonl";
    std::fs::rename(newest, d.path().join(new_name)).unwrap();
    let live = lines(&log.path());
    let mut first: serde_json::Value = serde_json::from_str(&live[0]).unwrap();
    first["previous"] = new_name.into();
    let mut rewritten = vec![serde_json::to_string(&first).unwrap()];
    // Re-chain the rest of the live segment so only the names disagree.
    for l in &live[1..] {
        let mut r: serde_json::Value = serde_json::from_str(l).unwrap();
        r["prev"] = hex_sha256(rewritten.last().unwrap().as_bytes()).into();
        rewritten.push(serde_json::to_string(&r).unwrap());
    }
    std::fs::write(log.path(), rewritten.join("\n") + "\n").unwrap();
    std::fs::remove_file(d.path().join("state/head")).unwrap();
    assert_ne!(old_name, new_name);
    let order: Vec<String> = log
        .segments()
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(order[1], new_name, "{order:?}");
    let v = verify(&log).unwrap();
    assert!(v.breaks.is_empty(), "{v:?}");
    let numbers: Vec<u32> = log
        .backwards()
        .filter_map(|r| match r.event {
            Event::Started(s) => Some(s.run[1..].parse().unwrap()),
            _ => None,
        })
        .collect();
    assert_eq!(numbers, (0..12).rev().collect::<Vec<u32>>());
}

/// `head -n -4 runs.jsonl > x; mv x runs.jsonl`, then one append, and `verify` said
/// "chain ok": the append rewrote the head. Now the append finds the log short of its head and
/// writes a `break` into the chain first, so the cut stays visible for good — also when the log is
/// cut in place.
#[test]
fn a_cut_tail_is_written_into_the_chain_by_the_next_append() {
    for in_place in [false, true] {
        let d = tempfile::tempdir().unwrap();
        let log = RunLog::new(d.path());
        for i in 0..8 {
            log.append("a", started(&format!("r{i}")), Utc::now())
                .unwrap();
        }
        let l = lines(&log.path());
        let kept = l[..4].join("\n") + "\n";
        if in_place {
            let f = OpenOptions::new().write(true).open(log.path()).unwrap();
            f.set_len(0).unwrap();
            f.write_all_at(kept.as_bytes(), 0).unwrap();
        } else {
            let x = d.path().join("x");
            std::fs::write(&x, kept).unwrap();
            std::fs::rename(&x, log.path()).unwrap();
        }
        // A fresh handle, as the next firing has.
        let next = RunLog::new(d.path());
        next.append("a", started("r8"), Utc::now()).unwrap();
        let after = lines(&next.path());
        assert_eq!(after.len(), 6, "{after:?}");
        let brk: serde_json::Value = serde_json::from_str(&after[4]).unwrap();
        assert_eq!(brk["event"], "break", "{brk}");
        assert_eq!(brk["expected"]["lines"], 8);
        assert_eq!(brk["found"]["lines"], 4);
        let v = verify(&next).unwrap();
        assert!(
            v.breaks
                .iter()
                .any(|b| b.contains("was cut before this line")
                    && b.contains("4 line(s) were gone from its end")),
            "{v:?}"
        );
        assert_eq!(v.head.as_deref(), Some("matches the log"), "{v:?}");
        // And later appends neither repeat the break nor hide it.
        next.append("a", started("r9"), Utc::now()).unwrap();
        let v = verify(&next).unwrap();
        assert_eq!(v.breaks.len(), 1, "{v:?}");
    }
}

/// a FIFO, folder, link, garbage or an empty `state/head` made `verify` say "chain ok"
/// without a word of the head. Now it is a finding, and the log's appends go on.
#[test]
fn an_unreadable_head_is_a_finding() {
    type Make = fn(&Path);
    let makes: [(&str, Make); 5] = [
        ("fifo", |p| {
            nix::unistd::mkfifo(p, nix::sys::stat::Mode::S_IRWXU).unwrap()
        }),
        ("folder", |p| std::fs::create_dir(p).unwrap()),
        ("link", |p| {
            std::os::unix::fs::symlink("/etc/hostname", p).unwrap()
        }),
        ("garbage", |p| std::fs::write(p, "not a head").unwrap()),
        ("empty", |p| std::fs::write(p, "").unwrap()),
    ];
    for (what, make) in makes {
        let d = tempfile::tempdir().unwrap();
        let log = RunLog::new(d.path());
        log.append("a", started("r1"), Utc::now()).unwrap();
        let head = d.path().join("state/head");
        std::fs::remove_file(&head).unwrap();
        make(&head);
        let v = verify(&log).unwrap();
        assert!(
            v.breaks
                .iter()
                .any(|b| b.contains("state/head) cannot be read")),
            "{what}: {v:?}"
        );
        log.append("a", started("r2"), Utc::now()).unwrap();
        assert_eq!(lines(&log.path()).len(), 2, "{what}");
    }
}

/// after deleting the 4 oldest of 8 rotated segments by hand, `verify` said "chain ok"
/// from "a seam which retention deleted". Retention now records what it deletes in the seam it
/// writes; a seam nobody recorded deleting is a finding.
#[test]
fn history_deleted_by_hand_is_not_blamed_on_retention() {
    let d = tempfile::tempdir().unwrap();
    let log = RunLog::new(d.path()).with_rotation(400).with_retention(8);
    let at = fixed_time();
    for i in 0..30 {
        log.append("a", started(&format!("r{i}")), at).unwrap();
        if log.segments().len() == 9 {
            break;
        }
    }
    assert_eq!(log.segments().len(), 9, "8 rotated and the live one");
    assert!(verify(&log).unwrap().breaks.is_empty());
    // Retention itself: more rotations delete the oldest, and say so.
    let mut i = 100;
    while verify(&log).unwrap().starts_after.is_none() {
        log.append("a", started(&format!("r{i}")), at).unwrap();
        i += 1;
    }
    let v = verify(&log).unwrap();
    assert!(v.breaks.is_empty(), "{v:?}");
    // By hand: the four oldest go.
    let segments = log.segments();
    for old in &segments[segments.len() - 4..] {
        std::fs::remove_file(old).unwrap();
    }
    let v = verify(&log).unwrap();
    assert!(
        v.breaks.iter().any(|b| b.contains("removed by hand")),
        "{v:?}"
    );
}

/// The readers' two-pass parse gives exactly what the derived form gives, for every event, and
/// refuses what it refuses.
#[test]
fn the_fast_parse_agrees_with_the_derived_one() {
    let d = tempfile::tempdir().unwrap();
    let log = RunLog::new(d.path()).with_rotation(400);
    let at = fixed_time();
    let finished = Finished {
        run: "r1".into(),
        outcome: Outcome::Failed,
        exit_code: Some(3),
        signal: None,
        duration_ms: 12,
        error: Some(ErrorInfo {
            class: "exit_status".into(),
            detail: "exited with 3".into(),
        }),
        stdout_tail: "out \"quoted\" \u{1b}[31m\n".into(),
        stderr_tail: String::new(),
        dropped: Dropped::default(),
        facts: BTreeMap::from([("n".to_owned(), 4)]),
        headline: Some("n".into()),
        http: None,
        leftover_processes: 0,
        clock: clock::now(),
        trigger: None,
        started_at: None,
        attempt: None,
        first_run: None,
        replaced_by: None,
        slot: None,
    };
    for event in [
        started("r1"),
        Event::Finished(finished),
        skipped(SkipReason::SlotDone),
        Event::Paused(Paused {
            by: By::Auto,
            reason: "why".into(),
        }),
        Event::Resumed(Resumed { by: By::Hand }),
        Event::StopAll(StopAll {
            reason: "r".into(),
            stopped: 2,
        }),
        Event::ResumeAll(ResumeAll {}),
        Event::Snoozed(Snoozed {
            by: By::Hand,
            until: "2026-12-04T10:00:00.000Z".into(),
            reason: Some("moving the NAS".into()),
        }),
        Event::Unsnoozed(Unsnoozed { by: By::Hand }),
    ] {
        log.append("a", event, at).unwrap();
    }
    // A rotation for a seam, and a cut for a break.
    for i in 0..3 {
        log.append("a", started(&format!("x{i}")), at).unwrap();
    }
    let l = lines(&log.path());
    std::fs::write(log.path(), l[..1].join("\n") + "\n").unwrap();
    RunLog::new(d.path()).append("a", started("y"), at).unwrap();
    let mut kinds = std::collections::BTreeSet::new();
    for seg in log.segments() {
        for line in lines(&seg) {
            let fast = Record::parse(line.as_bytes()).unwrap();
            let derived: Record = serde_json::from_str(&line).unwrap();
            assert_eq!(fast, derived, "{line}");
            // Keys in another order (sorted: an event's fields before `event`) read the same.
            let sorted = serde_json::from_str::<serde_json::Value>(&line)
                .unwrap()
                .to_string();
            assert_eq!(
                Record::parse(sorted.as_bytes()).unwrap(),
                derived,
                "{sorted}"
            );
            kinds.insert(serde_json::to_value(&fast).unwrap()["event"].to_string());
        }
    }
    assert!(kinds.len() >= 9, "{kinds:?}");
    for bad in [
        &b"{\"v\":1,\"event\":\"started\",\"name\":\"a\",\"at\":\"t\",\"prev\":\"p\"}"[..],
        b"{\"v\":1,\"event\":\"nope\",\"name\":\"a\",\"at\":\"t\",\"prev\":\"p\"}",
        b"not json",
    ] {
        assert!(Record::parse(bad).is_err());
        assert!(serde_json::from_slice::<Record>(bad).is_err());
    }
}

/// Regression (the firing's `started` synced by its keeper): an unsynced first append
/// created the head file and left it empty, which `verify` reads as a broken chain.
#[test]
fn an_unsynced_first_append_leaves_no_empty_head_and_its_sync_records_one() {
    let d = tempfile::tempdir().unwrap();
    let log = RunLog::new(d.path());
    log.append_unsynced("a", started("r1"), Utc::now()).unwrap();
    assert!(!head::path(&log.dir).exists(), "a head before the sync");
    // What another process would do with the shared handle: only the data, no head.
    log.sync_data_only().unwrap();
    assert!(!head::path(&log.dir).exists());
    let v = verify(&log).unwrap();
    assert!(v.breaks.is_empty(), "{v:?}");
    log.sync().unwrap();
    assert_eq!(head::read(&log.dir).unwrap().lines, 1);
    assert!(verify(&log).unwrap().breaks.is_empty());
}

/// Something that is not a head file at the head's place is left for `verify` to report: a new
/// head is only ever put where nothing is.
#[test]
fn a_head_is_never_written_over_something_planted_there() {
    let d = tempfile::tempdir().unwrap();
    let log = RunLog::new(d.path());
    std::fs::create_dir_all(d.path().join("state")).unwrap();
    let victim = d.path().join("victim");
    std::fs::write(&victim, "mine").unwrap();
    std::os::unix::fs::symlink(&victim, head::path(&log.dir)).unwrap();
    log.append("a", started("r1"), Utc::now()).unwrap();
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "mine");
    assert!(
        std::fs::symlink_metadata(head::path(&log.dir))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(head::read_checked(&log.dir).is_err());
}

/// One firing as the runner writes it: `started` unsynced (its keeper syncs the data only, never
/// the head), then `finished` unsynced, then the sync that records the head.
fn firing(log: &RunLog, run: &str, at: DateTime<Utc>) {
    log.append_unsynced("a", started(run), at).unwrap();
    log.sync_data_only().unwrap();
    log.append_unsynced("a", skipped(SkipReason::Paused), at)
        .unwrap();
    log.sync().unwrap();
}

/// Regression: a firing whose own `started` was the line that crossed the rotation size left the
/// head behind that line (its keeper syncs data only), and the rotating append of its `finished`
/// compared that lagging head with the new segment and wrote a `break`: `log verify` failed for
/// good after one ordinary run.
#[test]
fn a_firing_whose_started_crosses_the_rotation_size_leaves_the_chain_whole() {
    let d = tempfile::tempdir().unwrap();
    let log = RunLog::new(d.path()).with_rotation(2000);
    let at = fixed_time();
    while std::fs::metadata(log.path()).map_or(0, |m| m.len()) < 1800 {
        log.append("b", skipped(SkipReason::SlotDone), at).unwrap();
    }
    firing(&log, "r1", at);
    assert_eq!(log.segments().len(), 2, "one rotation");
    let v = verify(&log).unwrap();
    assert!(v.breaks.is_empty(), "{v:?}");
    // The next firing, a fresh handle as the next process has, neither.
    firing(&RunLog::new(d.path()).with_rotation(2000), "r2", at);
    let v = verify(&log).unwrap();
    assert!(v.breaks.is_empty(), "{v:?}");
    assert_eq!(v.head.as_deref(), Some("matches the log"), "{v:?}");
}

/// Regression: a rotation while another run was under way (its `started` written, its head not
/// yet) wrote a `break`, for the same reason.
#[test]
fn a_rotation_while_another_run_is_under_way_leaves_the_chain_whole() {
    let d = tempfile::tempdir().unwrap();
    let at = fixed_time();
    let long = RunLog::new(d.path()).with_rotation(1500);
    let other = RunLog::new(d.path()).with_rotation(1500);
    long.append("long", skipped(SkipReason::SlotDone), at)
        .unwrap();
    long.append_unsynced("long", started("long-1"), at).unwrap();
    long.sync_data_only().unwrap();
    for i in 0..8 {
        firing(&other, &format!("o{i}"), at);
    }
    assert!(long.segments().len() >= 2, "rotated meanwhile");
    long.append_unsynced("long", skipped(SkipReason::Paused), at)
        .unwrap();
    long.sync().unwrap();
    let v = verify(&long).unwrap();
    assert!(v.breaks.is_empty(), "{v:?}");
}

/// Many rotations with runs overlapping each of them, from several handles in the interleavings a
/// data root sees (a started written before another run's whole firing, a rotation falling between
/// a firing's two lines, a head write lost): the chain stays whole, at every step.
#[test]
fn many_rotations_with_overlapping_runs_leave_the_chain_whole() {
    let d = tempfile::tempdir().unwrap();
    let at = fixed_time();
    let handles: Vec<RunLog> = (0..3)
        .map(|_| RunLog::new(d.path()).with_rotation(700).with_retention(4))
        .collect();
    // A fixed pattern, so every run sees the same interleavings.
    for step in 0..150u32 {
        let h = &handles[(step % 3) as usize];
        let other = &handles[((step + 1) % 3) as usize];
        match step % 5 {
            0 => {
                h.append_unsynced("a", started(&format!("s{step}")), at)
                    .unwrap();
                h.sync_data_only().unwrap();
                firing(other, &format!("o{step}"), at);
                h.append_unsynced("a", skipped(SkipReason::Paused), at)
                    .unwrap();
                h.sync().unwrap();
            }
            1 => firing(h, &format!("f{step}"), at),
            2 => {
                // A head write lost (a crash between the line and its head, or a full disk).
                let before = std::fs::read(head::path(&h.dir)).ok();
                firing(h, &format!("l{step}"), at);
                if let Some(b) = before {
                    std::fs::write(head::path(&h.dir), b).unwrap();
                }
            }
            3 => h
                .append("a", skipped(SkipReason::AlreadyRunning), at)
                .unwrap(),
            _ => {
                h.append_unsynced("a", started(&format!("u{step}")), at)
                    .unwrap();
                other
                    .append_unsynced("b", started(&format!("v{step}")), at)
                    .unwrap();
                h.sync().unwrap();
                other.sync().unwrap();
            }
        }
        let v = verify(&handles[0]).unwrap();
        assert!(v.breaks.is_empty(), "step {step}: {v:?}");
    }
    assert!(handles[0].segments().len() >= 4, "it rotated");
    assert!(
        !lines(&handles[0].path())
            .iter()
            .any(|l| l.contains("\"event\":\"break\"")),
        "no break was written"
    );
}

/// A head that lags across a seam is accepted as one that lags within a segment, not blindly:
/// when the lines it knew are gone from the segment before the seam, the next append writes the
/// cut into the chain and `verify` reports it.
#[test]
fn a_cut_across_a_seam_is_still_reported() {
    let d = tempfile::tempdir().unwrap();
    let at = fixed_time();
    let log = RunLog::new(d.path()).with_rotation(1200);
    for i in 0..4 {
        log.append("a", started(&format!("r{i}")), at).unwrap();
    }
    // The head as it was before the rotation, kept as a lost head write would leave it.
    let before = std::fs::read(head::path(&log.dir)).unwrap();
    while log.segments().len() < 2 {
        log.append("a", started("x"), at).unwrap();
    }
    std::fs::write(head::path(&log.dir), &before).unwrap();
    let v = verify(&log).unwrap();
    assert!(v.breaks.is_empty(), "a lagging head is fine: {v:?}");
    assert!(v.head.as_deref().unwrap_or("").starts_with("lags"), "{v:?}");
    // Now the lines that head knew are cut from the segment before the seam.
    let rotated = log.segments()[1].clone();
    let l = lines(&rotated);
    std::fs::write(&rotated, l[..1].join("\n") + "\n").unwrap();
    let v = verify(&log).unwrap();
    assert!(!v.breaks.is_empty(), "{v:?}");
    RunLog::new(d.path())
        .with_rotation(1200)
        .append("a", started("next"), at)
        .unwrap();
    assert!(
        lines(&log.path())
            .iter()
            .any(|l| l.contains("\"event\":\"break\"")),
        "the cut is written into the chain"
    );
    let v = verify(&log).unwrap();
    assert!(
        v.breaks.iter().any(|b| b.contains("was cut before")),
        "{v:?}"
    );
}

/// Regression: after a copy of the data root an older version wrote a `break` whose head and log
/// agreed ("the head recorded 5 line(s) … the log held 5 line(s)"), and `log verify` failed for
/// good. Such a break is a note now: nothing is missing. A real one still breaks the chain.
#[test]
fn a_break_where_head_and_log_agreed_is_a_note_not_a_cut() {
    let d = tempfile::tempdir().unwrap();
    let log = RunLog::new(d.path());
    for i in 0..3 {
        log.append("a", started(&format!("r{i}")), Utc::now())
            .unwrap();
    }
    let l = lines(&log.path());
    let last = crate::definition::hex_sha256(l[2].as_bytes());
    let bytes = std::fs::metadata(log.path()).unwrap().len();
    let extent = crate::runlog::Extent {
        lines: 3,
        bytes,
        hash: last,
    };
    let brk = Event::Break(crate::runlog::Break {
        expected: extent.clone(),
        found: extent,
    });
    log.append("a", brk, Utc::now()).unwrap();
    let v = verify(&log).unwrap();
    assert!(v.breaks.is_empty(), "{v:?}");
    assert_eq!(v.notes.len(), 1, "{v:?}");
    assert!(v.notes[0].contains("nothing is missing"), "{v:?}");
}
