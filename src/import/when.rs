//! When an imported job fires, from what its scheduler said as cron fields: a `daily_at` list
//! when every firing is a time of day on the same days (what people read best, and what may
//! stand beside a run at login), else one `cron` expression when the entries are one (a product of
//! each field's values), else nothing.

use std::collections::BTreeSet;

use super::{quote, quote_all};
use crate::schedule::Cron;

/// The five fields of a cron expression, as text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CronFields {
    pub minute: String,
    pub hour: String,
    pub day: String,
    pub month: String,
    pub weekday: String,
}

impl CronFields {
    pub fn text(&self) -> String {
        format!(
            "{} {} {} {} {}",
            self.minute, self.hour, self.day, self.month, self.weekday
        )
    }

    fn fields(&self) -> [&str; 5] {
        [
            &self.minute,
            &self.hour,
            &self.day,
            &self.month,
            &self.weekday,
        ]
    }
}

/// The `[schedule]` keys that fire where every one of `list` fires, or `None` when no one
/// schedule says them all.
pub fn schedule_keys(list: &[CronFields]) -> Option<Vec<(String, String)>> {
    if let Some(keys) = daily(list) {
        return Some(keys);
    }
    let one = match list {
        [one] => one.clone(),
        many => product(many)?,
    };
    let text = one.text();
    Cron::parse(&text).ok()?;
    Some(vec![("cron".into(), quote(&text))])
}

/// Every entry a time (or times) of day on the same days: `daily_at` with `weekdays` or
/// `days_of_month`.
fn daily(list: &[CronFields]) -> Option<Vec<(String, String)>> {
    let first = list.first()?;
    let mut times = Vec::new();
    for c in list {
        if (c.day.as_str(), c.month.as_str(), c.weekday.as_str())
            != (
                first.day.as_str(),
                first.month.as_str(),
                first.weekday.as_str(),
            )
            || c.month != "*"
        {
            return None;
        }
        for h in numbers(&c.hour)? {
            for m in numbers(&c.minute)? {
                times.push(format!("{h:02}:{m:02}"));
            }
        }
    }
    times.sort();
    times.dedup();
    if times.len() > 24 {
        return None;
    }
    let mut keys = vec![(
        "daily_at".to_owned(),
        if times.len() == 1 {
            quote(&times[0])
        } else {
            quote_all(&times)
        },
    )];
    match (first.day.as_str(), first.weekday.as_str()) {
        ("*", "*") => {}
        ("*", w) => keys.push(("weekdays".into(), quote_all(&weekday_names(w)?))),
        (d, "*") => {
            let days: Vec<String> = numbers(d)?.iter().map(u32::to_string).collect();
            keys.push(("days_of_month".into(), format!("[{}]", days.join(", "))));
        }
        _ => return None,
    }
    Some(keys)
}

/// Entries of single values (or `*`) that are every combination of each field's values: one
/// cron expression listing them.
fn product(list: &[CronFields]) -> Option<CronFields> {
    let mut sets: [BTreeSet<u32>; 5] = Default::default();
    let mut wild = [false; 5];
    let mut tuples: BTreeSet<[Option<u32>; 5]> = BTreeSet::new();
    for c in list {
        let mut tuple = [None; 5];
        for (i, f) in c.fields().iter().enumerate() {
            if *f == "*" {
                wild[i] = true;
            } else {
                let n: u32 = f.parse().ok()?;
                // Sunday is 0 or 7.
                let n = if i == 4 { n % 7 } else { n };
                sets[i].insert(n);
                tuple[i] = Some(n);
            }
        }
        tuples.insert(tuple);
    }
    // A field is wild in every entry or in none.
    for i in 0..5 {
        if wild[i] && !sets[i].is_empty() {
            return None;
        }
    }
    let combos: usize = sets.iter().map(|s| s.len().max(1)).product();
    if combos != tuples.len() {
        return None;
    }
    let field = |i: usize| {
        if wild[i] {
            "*".to_owned()
        } else {
            sets[i]
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(",")
        }
    };
    Some(CronFields {
        minute: field(0),
        hour: field(1),
        day: field(2),
        month: field(3),
        weekday: field(4),
    })
}

/// The numbers a cron field of single values and lists names (`None` for ranges, steps, `*`).
fn numbers(field: &str) -> Option<Vec<u32>> {
    field.split(',').map(|n| n.parse().ok()).collect()
}

/// Day names, Monday first, for a cron weekday field of numbers and ranges.
fn weekday_names(field: &str) -> Option<Vec<String>> {
    const NAMES: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];
    let mut days = BTreeSet::new();
    for part in field.split(',') {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a.parse::<u32>().ok()?, b.parse::<u32>().ok()?),
            None => {
                let n = part.parse::<u32>().ok()?;
                (n, n)
            }
        };
        for d in a..=b {
            days.insert(d % 7);
        }
    }
    let mut out: Vec<String> = days
        .iter()
        .filter(|d| **d != 0)
        .map(|d| NAMES[*d as usize].to_owned())
        .collect();
    if days.contains(&0) {
        out.push("sun".into());
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(m: &str, h: &str, d: &str, mo: &str, w: &str) -> CronFields {
        CronFields {
            minute: m.into(),
            hour: h.into(),
            day: d.into(),
            month: mo.into(),
            weekday: w.into(),
        }
    }

    #[test]
    fn daily_times_products_and_what_is_neither() {
        assert_eq!(
            schedule_keys(&[f("0", "9", "*", "*", "*"), f("30", "17", "*", "*", "*")]),
            Some(vec![("daily_at".into(), "[\"09:00\", \"17:30\"]".into())])
        );
        assert_eq!(
            schedule_keys(&[f("0", "9", "*", "*", "1-5")]),
            Some(vec![
                ("daily_at".into(), "\"09:00\"".into()),
                (
                    "weekdays".into(),
                    "[\"mon\", \"tue\", \"wed\", \"thu\", \"fri\"]".into()
                )
            ])
        );
        // Mondays and Wednesdays at 9, each its own entry: one cron expression... or daily_at.
        let keys = schedule_keys(&[f("0", "9", "*", "*", "1"), f("0", "9", "*", "*", "3")]);
        assert_eq!(keys, Some(vec![("cron".into(), "\"0 9 * * 1,3\"".into())]));
        // 9:00 on Mondays and 10:00 on Tuesdays is no one schedule.
        assert_eq!(
            schedule_keys(&[f("0", "9", "*", "*", "1"), f("0", "10", "*", "*", "2")]),
            None
        );
        // Every 15 minutes stays cron.
        assert_eq!(
            schedule_keys(&[f("*/15", "*", "*", "*", "*")]),
            Some(vec![("cron".into(), "\"*/15 * * * *\"".into())])
        );
    }
}
