//! `timeline [--hours N] [--json]`: what fires in the hours ahead (docs/dashboard.md).

use super::fail::CmdResult;
use super::{data_root, load_all};
use crate::exit::Exit;
use crate::fsutil::Use;
use crate::settings::Settings;
use crate::timeline::{self, Ahead, Row};

pub(super) fn timeline(settings: &Settings, hours: u32, json: bool) -> CmdResult {
    data_root(settings, Use::Read)?;
    let loaded = load_all(settings)?;
    let installed = crate::install::installed(settings, &loaded.definitions)?;
    let paused = crate::state::State::new(&settings.data_root)
        .paused_names()
        .unwrap_or_default();
    let names: Vec<&str> = loaded.definitions.iter().map(|d| d.name.as_str()).collect();
    let last = crate::history::last_runs(
        &crate::runlog::RunLog::new(&settings.data_root),
        &settings.data_root,
        &names,
    )?;
    let now = chrono::Utc::now();
    let rows: Vec<Row> = loaded
        .definitions
        .iter()
        .map(|d| {
            let subject = timeline::Subject::of(
                d,
                installed.get(&d.name),
                paused.contains(&d.name),
                last.get(d.name.as_str())
                    .and_then(|r| crate::runlog::parse_stamp(&r.at)),
            );
            Row {
                name: d.name.to_string(),
                ahead: timeline::ahead(&subject, &chrono::Local, now, hours),
                schedule_words: crate::views::schedule_words(d),
            }
        })
        .collect();
    if json {
        let doc = serde_json::json!({
            "version": 1,
            "from": crate::runlog::stamp(now),
            "to": crate::runlog::stamp(now + chrono::Duration::hours(i64::from(hours))),
            "hours": hours,
            "automations": rows.iter().map(|r| {
                let mut a = serde_json::to_value(&r.ahead).unwrap_or_default();
                a["name"] = r.name.clone().into();
                a["schedule_words"] = r.schedule_words.clone().into();
                a
            }).collect::<Vec<_>>(),
            "busiest": timeline::busiest(rows.iter().map(|r| &r.ahead), 10),
        });
        outln!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        let zone =
            crate::healthchecks::machine_zone().unwrap_or_else(|| "this machine's time".into());
        out!(
            "{}",
            timeline::table(&rows, (&chrono::Local, &zone), now, hours)
        );
        let unscheduled = rows
            .iter()
            .filter(|r| matches!(r.ahead, Ahead::NotInstalled))
            .count();
        if unscheduled > 0 {
            outln!(
                "{unscheduled} scheduled automation(s) not installed here fire nothing: make automations-install NAME=…"
            );
        }
    }
    Ok(Exit::Success)
}
