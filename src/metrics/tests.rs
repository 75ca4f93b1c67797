use super::*;

fn machine() -> Machine {
    Machine {
        namespace: "automations".into(),
        host: "box".into(),
        version: "0.1.0",
        stop_all: false,
    }
}

fn row(name: &str) -> Row {
    Row {
        name: name.into(),
        last_run: Some(1_700_000_100.5),
        last_success: Some(1_700_000_100.5),
        last_duration: Some(2.25),
        next_run: None,
        stale_after: Some(7200.0),
        tally: Tally {
            outcomes: [3, 1, 0, 0],
            skipped: 2,
            since_ms: 1_700_000_000_000,
        },
        verdict: State::Healthy,
        paused: false,
        snoozed_until: None,
        installed: None,
        ping_failures: 0,
    }
}

/// The document of `rows` in `format`.
fn doc(rows: &[Row], m: &Machine, format: Format) -> String {
    let all: Vec<Samples> = rows.iter().map(|r| Samples::of(r, m, format)).collect();
    render(&all, m, format)
}

#[test]
fn the_format_is_what_the_scraper_accepts() {
    let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
    assert_eq!(Format::accepted(prometheus), Format::OpenMetrics);
    assert_eq!(Format::accepted(""), Format::Text);
    assert_eq!(Format::accepted("*/*"), Format::Text);
    assert_eq!(Format::accepted("text/plain"), Format::Text);
    assert_eq!(
        Format::accepted("application/openmetrics-text;q=0"),
        Format::Text
    );
    assert_eq!(
        Format::accepted("application/openmetrics-text;q=0.3, text/plain;q=0.9"),
        Format::Text
    );
}

#[test]
fn label_values_are_escaped() {
    assert_eq!(escape(r#"a\b"c"#), r#"a\\b\"c"#);
    assert_eq!(escape("a\nb"), r"a\nb");
    let mut m = machine();
    m.host = "we\"ird\\host\n".into();
    let text = doc(&[], &m, Format::Text);
    assert!(
        text.contains(
            r#"automations_info{host="we\"ird\\host\n",namespace="automations",version="0.1.0"} 1"#
        ),
        "{text}"
    );
}

#[test]
fn the_text_format_gives_created_its_own_family_and_openmetrics_ends_with_eof() {
    let text = doc(&[row("backup")], &machine(), Format::Text);
    assert!(
        text.contains("# TYPE automations_runs_total counter\n"),
        "{text}"
    );
    assert!(text.contains(
        "automations_runs_total{automation=\"backup\",namespace=\"automations\",outcome=\"ok\"} 3\n"
    ));
    assert!(text.contains("# TYPE automations_runs_created gauge\n"));
    assert!(text.contains("automations_runs_created{automation=\"backup\",namespace=\"automations\",outcome=\"skipped\"} 1700000000\n"));
    assert!(text.contains("# TYPE automations_info gauge\n"));
    assert!(!text.contains("# EOF"));
    // Absent values are absent series, not zeros.
    assert!(!text.contains("automations_next_run_timestamp_seconds{"));

    let om = doc(&[row("backup")], &machine(), Format::OpenMetrics);
    assert!(om.contains("# TYPE automations_runs counter\n"), "{om}");
    assert!(om.contains("automations_runs_created{automation=\"backup\",namespace=\"automations\",outcome=\"failed\"} 1700000000\n"));
    assert!(!om.contains("# TYPE automations_runs_created"));
    assert!(om.contains("# TYPE automations info\n"));
    assert!(om.ends_with("# EOF\n"));
}

#[test]
fn the_verdict_is_one_on_the_current_state_only() {
    let mut r = row("sync");
    r.verdict = State::Degraded;
    let text = doc(&[r], &machine(), Format::Text);
    let verdicts: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("automations_verdict{"))
        .collect();
    assert_eq!(
        verdicts,
        [
            "automations_verdict{automation=\"sync\",namespace=\"automations\",verdict=\"healthy\"} 0",
            "automations_verdict{automation=\"sync\",namespace=\"automations\",verdict=\"degraded\"} 1",
            "automations_verdict{automation=\"sync\",namespace=\"automations\",verdict=\"unknown\"} 0",
        ]
    );
}

#[test]
fn a_merge_renews_one_automation_and_keeps_the_others() {
    let m = machine();
    let old = doc(
        &[row("alpha"), row("beta"), row("beta-2")],
        &m,
        Format::Text,
    );
    let mut beta = row("beta");
    beta.tally.outcomes[0] = 4;
    beta.verdict = State::Degraded;
    let mut later = m.clone();
    later.stop_all = true;
    let merged = merge(
        &old,
        Patch::Samples(&Samples::of(&beta, &later, Format::Text)),
        &later,
    )
    .unwrap();
    // The same as writing all three now, with the others' samples as they were.
    let whole = doc(&[row("alpha"), beta, row("beta-2")], &later, Format::Text);
    assert_eq!(merged, whole);
    // Lines of another namespace or of nobody are dropped.
    let foreign = format!(
        "{old}automations_paused{{automation=\"x\",namespace=\"other\"}} 1\nnode_load1 3\n"
    );
    assert_eq!(
        merge(
            &foreign,
            Patch::Samples(&Samples::of(&row("beta"), &m, Format::Text)),
            &m
        ),
        Some(old)
    );
}

#[test]
fn a_snooze_or_the_kill_switch_changes_its_own_sample_alone() {
    let m = machine();
    let old = doc(&[row("alpha"), row("beta")], &m, Format::Text);
    let mut snoozed = row("beta");
    snoozed.snoozed_until = Some(1_800_000_000.0);
    let merged = merge(
        &old,
        Patch::SnoozedUntil {
            name: "beta",
            until: Some(1_800_000_000.0),
        },
        &m,
    )
    .unwrap();
    assert_eq!(merged, doc(&[row("alpha"), snoozed], &m, Format::Text));
    // And back: the snooze's sample gone, the document as before.
    let back = merge(
        &merged,
        Patch::SnoozedUntil {
            name: "beta",
            until: None,
        },
        &m,
    );
    assert_eq!(back.as_deref(), Some(old.as_str()));
    // An automation the document has no samples of needs its whole samples.
    let none = Patch::SnoozedUntil {
        name: "gamma",
        until: Some(1.0),
    };
    assert_eq!(merge(&old, none, &m), None);
    // The kill switch: the data root's own sample, every automation's kept.
    let mut stopped = m.clone();
    stopped.stop_all = true;
    assert_eq!(
        merge(&old, Patch::DataRoot, &stopped),
        Some(doc(&[row("alpha"), row("beta")], &stopped, Format::Text))
    );
}
