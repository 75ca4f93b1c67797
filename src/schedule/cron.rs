//! The `cron` schedule kind (docs/cron.md): the five-field language as Vixie cron and cronie read
//! it — lists, ranges, steps, month and weekday names, `0` and `7` for Sunday, the `@` shortcuts —
//! parsed strictly into sets, and everything the rest of the program asks of it: whether a day
//! matches, the times of a matching day, the systemd `OnCalendar=` lines, the launchd calendar
//! entries, a numeric five-field form (Kubernetes, Healthchecks) and words for people.
//!
//! Two rules come from cron itself. When day-of-month and day-of-week are both restricted (neither
//! field starts with `*`), a day matches when **either** does; otherwise both must. And, as Debian's
//! cron does, an expression whose minute and hour fields both name fixed values (neither starts
//! with `*`) is a time of day: a time in a DST gap runs at the first minute after it, a time in a
//! fold once, at the first pass; any other expression is a pattern of real minutes: a minute in a
//! gap does not happen, one in a fold happens twice. `@reboot` is not a `Cron`: the definition
//! reads it as `at_login`.

use std::fmt;
use std::sync::OnceLock;

use chrono::{Datelike, NaiveDate};

/// One field's name, range and names.
struct FieldSpec {
    name: &'static str,
    min: u32,
    max: u32,
    names: &'static [&'static str],
}

const MINUTE: FieldSpec = FieldSpec {
    name: "minute",
    min: 0,
    max: 59,
    names: &[],
};
const HOUR: FieldSpec = FieldSpec {
    name: "hour",
    min: 0,
    max: 23,
    names: &[],
};
const DAY: FieldSpec = FieldSpec {
    name: "day-of-month",
    min: 1,
    max: 31,
    names: &[],
};
const MONTH: FieldSpec = FieldSpec {
    name: "month",
    min: 1,
    max: 12,
    names: &[
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ],
};
/// 0 and 7 are Sunday.
const WEEKDAY: FieldSpec = FieldSpec {
    name: "day-of-week",
    min: 0,
    max: 7,
    names: &["sun", "mon", "tue", "wed", "thu", "fri", "sat"],
};

/// The shortcuts and what they stand for (`@reboot` is the definition's `at_login`).
pub const SHORTCUTS: [(&str, &str); 7] = [
    ("@yearly", "0 0 1 1 *"),
    ("@annually", "0 0 1 1 *"),
    ("@monthly", "0 0 1 * *"),
    ("@weekly", "0 0 * * 0"),
    ("@daily", "0 0 * * *"),
    ("@midnight", "0 0 * * *"),
    ("@hourly", "0 * * * *"),
];

/// The farthest a matching day can be from any day, in days: the 29th of February, across a
/// century year without one (2096 to 2104). How far `latest_slot` and `next_firing` may look;
/// they stop at the first matching day, so the bound costs nothing when there is one.
pub const HORIZON_DAYS: i64 = 366 * 8 + 1;

/// The most calendar entries a launchd job is given for one expression.
pub const MAX_LAUNCHD_ENTRIES: usize = 1000;

/// A valid five-field cron expression.
#[derive(Clone)]
pub struct Cron {
    /// As written (trimmed), what the definition and `list --json` show.
    text: String,
    /// The five fields (a shortcut's expansion), as written.
    fields: [String; 5],
    minutes: u64,
    hours: u32,
    /// Bits 1..=31.
    days: u32,
    /// Bits 1..=12.
    months: u16,
    /// Bits 0..=6, Sunday 0.
    weekdays: u8,
    /// Day-of-month and day-of-week both restricted: a day matches when either does.
    day_or: bool,
    /// The slot search window (see `search_days`), once asked.
    search: OnceLock<i64>,
    /// The shortest gap between two firings, once asked (health asks it several times).
    gap: OnceLock<u32>,
}

impl PartialEq for Cron {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl Eq for Cron {}

impl fmt::Debug for Cron {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Cron({:?})", self.text)
    }
}

impl fmt::Display for Cron {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl serde::Serialize for Cron {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> serde::Deserialize<'de> for Cron {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Cron::parse(&s).map_err(serde::de::Error::custom)
    }
}

fn bits(set: u64, min: u32, max: u32) -> impl Iterator<Item = u32> {
    (min..=max).filter(move |v| set >> v & 1 == 1)
}

fn full(min: u32, max: u32) -> u64 {
    (min..=max).fold(0, |acc, v| acc | 1 << v)
}

impl Cron {
    /// Parses an expression, or says what is wrong with it and what to write instead.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text.is_empty() {
            return Err("is empty; write five fields, e.g. \"30 2 * * 1-5\"".into());
        }
        let expanded = if let Some(word) = text.strip_prefix('@') {
            let lower = format!("@{}", word.to_ascii_lowercase());
            match SHORTCUTS.iter().find(|(s, _)| *s == lower) {
                Some((_, five)) => *five,
                None if lower == "@reboot" => {
                    return Err("@reboot is at_login = true".into());
                }
                None => {
                    return Err(format!(
                        "{:?} is not a shortcut cron knows; use @hourly, @daily, @midnight, @weekly, @monthly, @yearly, @annually or @reboot",
                        crate::names::truncate(text, 20)
                    ));
                }
            }
        } else {
            text
        };
        let parts: Vec<&str> = expanded.split_whitespace().collect();
        let Ok(parts) = <[&str; 5]>::try_from(parts.as_slice()) else {
            let n = parts.len();
            let extra = if n > 5 {
                "; a seconds or a year field belongs to another dialect (Quartz, Spring), not cron"
            } else {
                ""
            };
            return Err(format!(
                "has {n} field{}; cron has five: minute hour day-of-month month day-of-week{extra}",
                if n == 1 { "" } else { "s" }
            ));
        };
        let [mi, ho, da, mo, wd] = parts;
        let minutes = field(&MINUTE, mi)?;
        let hours = field(&HOUR, ho)? as u32;
        let days = field(&DAY, da)? as u32;
        let months = field(&MONTH, mo)? as u16;
        let raw_weekdays = field(&WEEKDAY, wd)?;
        // 7 is Sunday, as 0 is.
        let weekdays = ((raw_weekdays | raw_weekdays >> 7) & 0x7f) as u8;
        let (dom_star, dow_star) = (da.starts_with('*'), wd.starts_with('*'));
        let mut day_or = !dom_star && !dow_star;
        let (mut days, mut weekdays) = (days, weekdays);
        // "Either" with a field that allows every day is every day (`0 0 1 * 0-7`): said so, the
        // renderers need not know the rule.
        if day_or && (u64::from(days) == full(1, 31) || weekdays == 0x7f) {
            (days, weekdays, day_or) = (full(1, 31) as u32, 0x7f, false);
        }
        let cron = Self {
            text: text.to_owned(),
            fields: parts.map(str::to_owned),
            minutes,
            hours,
            days,
            months,
            weekdays,
            day_or,
            search: OnceLock::new(),
            gap: OnceLock::new(),
        };
        cron.check_launchd(da, wd)?;
        cron.check_fires()?;
        Ok(cron)
    }

    /// The expression as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Its days as lists: the months (1..=12); the days of the month (1..=31) and the weekdays it
    /// restricts to, `None` for a field that allows every one. When both restrict, a day matches
    /// by either (a field starting with `*` that still restricts cannot be parsed).
    pub fn day_lists(&self) -> (Vec<u32>, Option<Vec<u32>>, Option<Vec<super::Weekday>>) {
        let months = bits(u64::from(self.months), 1, 12).collect();
        let days = self
            .dom_restricted()
            .then(|| bits(u64::from(self.days), 1, 31).collect());
        let weekdays = self.dow_restricted().then(|| {
            super::Weekday::ALL
                .into_iter()
                .filter(|d| self.weekdays >> d.days_from_sunday() & 1 == 1)
                .collect()
        });
        (months, days, weekdays)
    }

    fn dom_restricted(&self) -> bool {
        u64::from(self.days) != full(1, 31)
    }

    fn dow_restricted(&self) -> bool {
        self.weekdays != 0x7f
    }

    /// launchd runs an entry with both Day and Weekday when *either* matches; the cron rule where
    /// both must (one field starts with `*` but still restricts) cannot be said there.
    fn check_launchd(&self, da: &str, wd: &str) -> Result<(), String> {
        if !self.day_or && self.dom_restricted() && self.dow_restricted() {
            return Err(format!(
                "day-of-month {da:?} and day-of-week {wd:?} are both restricted while one starts with `*`, so cron runs only on days that match both; launchd (macOS) cannot say that: restrict one of them and check the other in the script"
            ));
        }
        let entries = self.launchd_count();
        if entries > MAX_LAUNCHD_ENTRIES {
            // The restricted field with the most values.
            let fields = [
                ("minute", self.minutes.count_ones(), 60),
                ("hour", self.hours.count_ones(), 24),
                ("day-of-month", self.days.count_ones(), 31),
                ("month", self.months.count_ones(), 12),
                ("day-of-week", self.weekdays.count_ones(), 7),
            ];
            let widest = fields
                .iter()
                .filter(|(_, count, all)| count < all)
                .max_by_key(|(_, count, _)| *count)
                .map_or("minute", |(name, _, _)| name);
            return Err(format!(
                "makes {entries} launchd calendar entries on macOS (each listed value of one field times those of the others); at most {MAX_LAUNCHD_ENTRIES}: simplify the {widest} field (fewer values, or * for all)"
            ));
        }
        Ok(())
    }

    /// Refuses an expression no date ever matches (`0 0 30 2 *`).
    fn check_fires(&self) -> Result<(), String> {
        if self.day_or || self.days.trailing_zeros() < 29 {
            return Ok(());
        }
        let start = NaiveDate::from_ymd_opt(2024, 1, 1).expect("a valid date");
        if start.iter_days().take(366 * 8).any(|d| self.matches_day(d)) {
            return Ok(());
        }
        Err("never fires: no month it names has those days (February has 28 or 29, April, June, September and November 30)".into())
    }

    /// Whether cron runs it on `day` (the month, then day-of-month and day-of-week by cron's rule).
    pub fn matches_day(&self, day: NaiveDate) -> bool {
        if self.months >> day.month() & 1 == 0 {
            return false;
        }
        let dom = self.days >> day.day() & 1 == 1;
        let dow = self.weekdays >> day.weekday().num_days_from_sunday() & 1 == 1;
        if self.day_or { dom || dow } else { dom && dow }
    }

    /// The (hour, minute) pairs of a matching day, in order.
    pub fn times(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        bits(u64::from(self.hours), 0, 23)
            .flat_map(move |h| bits(self.minutes, 0, 59).map(move |m| (h, m)))
    }

    /// Whether it is a time of day (neither the minute nor the hour field starts with `*`): DST
    /// as for `daily_at`.
    pub fn fixed_time(&self) -> bool {
        !self.fields[0].starts_with('*') && !self.fields[1].starts_with('*')
    }

    /// How many days back or ahead a slot search looks: twice the longest gap between matching
    /// days and one more, at least 8 (a week), so a window that long holds the longest gap with
    /// slots on both sides (a weekend; a year for `@yearly`; four for the 29th of February).
    pub fn search_days(&self) -> i64 {
        *self.search.get_or_init(|| {
            if self.months == 0x1ffe && !self.dom_restricted() && !self.dow_restricted() {
                return 8;
            }
            let start = NaiveDate::from_ymd_opt(2024, 1, 1).expect("a valid date");
            let (mut longest, mut last) = (0i64, None::<NaiveDate>);
            for d in start.iter_days().take(366 * 9) {
                if self.matches_day(d) {
                    if let Some(l) = last {
                        longest = longest.max((d - l).num_days());
                    }
                    last = Some(d);
                }
            }
            (longest.max(1) * 2 + 1).max(8)
        })
    }

    /// The shortest time between two firings, in seconds (what `jitter_seconds` must stay under).
    pub fn shortest_gap_seconds(&self) -> u32 {
        *self.gap.get_or_init(|| {
            let mins: Vec<u32> = self.times().map(|(h, m)| h * 60 + m).collect();
            let within = mins.windows(2).map(|w| w[1] - w[0]).min();
            let (first, last) = (mins[0], mins[mins.len() - 1]);
            // Across midnight: to the next day's first time, or a day later when days are apart.
            let every_day =
                (self.months == 0x1ffe && !self.dom_restricted() && !self.dow_restricted())
                    || self.two_days_in_a_row();
            let across = first + 1440 - last + if every_day { 0 } else { 1440 };
            within.map_or(across, |w| w.min(across)) * 60
        })
    }

    /// Whether two consecutive days ever both match (a year and a leap day looked at).
    fn two_days_in_a_row(&self) -> bool {
        let start = NaiveDate::from_ymd_opt(2024, 1, 1).expect("a valid date");
        let mut previous = false;
        start.iter_days().take(367).any(|d| {
            let now = self.matches_day(d);
            let pair = previous && now;
            previous = now;
            pair
        })
    }

    /// The systemd `OnCalendar=` lines (systemd fires at their union): one, or two when a day
    /// matches by day-of-month *or* day-of-week.
    pub fn on_calendar(&self) -> Vec<String> {
        let month = systemd_field(u64::from(self.months), 1, 12);
        let hour = systemd_field(u64::from(self.hours), 0, 23);
        let minute = systemd_field(self.minutes, 0, 59);
        let dom = systemd_field(u64::from(self.days), 1, 31);
        let dow = self.systemd_weekdays();
        let line = |dow: &str, dom: &str| format!("{dow}*-{month}-{dom} {hour}:{minute}:00");
        if self.day_or {
            vec![line("", &dom), line(&dow, "*")]
        } else {
            vec![line(&dow, &dom)]
        }
    }

    /// `Mon,Wed ` (with its space), or nothing when every day of the week is allowed.
    fn systemd_weekdays(&self) -> String {
        if !self.dow_restricted() {
            return String::new();
        }
        // Monday first, as systemd writes them.
        let names: Vec<&str> = super::Weekday::ALL
            .iter()
            .filter(|d| self.weekdays >> d.days_from_sunday() & 1 == 1)
            .map(|d| d.systemd())
            .collect();
        format!("{} ", names.join(","))
    }

    /// How many launchd calendar entries it takes: the product of the restricted fields' sizes,
    /// the two day fields added (they are apart).
    fn launchd_count(&self) -> usize {
        let size = |set: u64, min, max| {
            if set == full(min, max) {
                1
            } else {
                set.count_ones() as usize
            }
        };
        let days = match (self.dom_restricted(), self.dow_restricted()) {
            (false, false) => 1,
            (d, w) => {
                usize::from(d) * self.days.count_ones() as usize
                    + usize::from(w) * self.weekdays.count_ones() as usize
            }
        };
        size(self.minutes, 0, 59)
            * size(u64::from(self.hours), 0, 23)
            * size(u64::from(self.months), 1, 12)
            * days
    }

    /// The launchd `StartCalendarInterval` entries: every listed value of each restricted field
    /// (a field that allows everything is left out); day-of-month and day-of-week entries apart,
    /// since launchd runs an entry naming both on either.
    pub fn launchd_entries(&self) -> Vec<LaunchdEntry> {
        let restricted = |set: u64, min, max| -> Vec<Option<u32>> {
            if set == full(min, max) {
                vec![None]
            } else {
                bits(set, min, max).map(Some).collect()
            }
        };
        let minutes = restricted(self.minutes, 0, 59);
        let hours = restricted(u64::from(self.hours), 0, 23);
        let months = restricted(u64::from(self.months), 1, 12);
        let mut days: Vec<(Option<u32>, Option<u32>)> = Vec::new();
        if self.dom_restricted() {
            days.extend(bits(u64::from(self.days), 1, 31).map(|d| (Some(d), None)));
        }
        if self.dow_restricted() {
            days.extend(bits(u64::from(self.weekdays), 0, 6).map(|w| (None, Some(w))));
        }
        if days.is_empty() {
            days.push((None, None));
        }
        let mut out = Vec::new();
        for &month in &months {
            for &(day, weekday) in &days {
                for &hour in &hours {
                    for &minute in &minutes {
                        out.push(LaunchdEntry {
                            minute,
                            hour,
                            day,
                            weekday,
                            month,
                        });
                    }
                }
            }
        }
        out
    }

    /// The five fields in numbers only (names, `7` and shortcuts written out), each field that
    /// starts with `*` as written so cron's day rule reads the same: what a CronJob's
    /// `spec.schedule` and a Healthchecks cron check are given.
    pub fn numeric(&self) -> String {
        let sets = [
            self.minutes,
            u64::from(self.hours),
            u64::from(self.days),
            u64::from(self.months),
            u64::from(self.weekdays),
        ];
        let ranges = [(0, 59), (0, 23), (1, 31), (1, 12), (0, 6)];
        let fields: Vec<String> = self
            .fields
            .iter()
            .zip(sets.iter().zip(ranges))
            .map(|(written, (set, (min, max)))| {
                if written.starts_with('*') && !written.chars().any(|c| c.is_ascii_alphabetic()) {
                    written.clone()
                } else {
                    compress(*set, min, max, "-", |v| v.to_string())
                }
            })
            .collect();
        fields.join(" ")
    }

    /// The expression in words: "every 10 minutes", "at 02:30 on weekdays", "at 09:00 on the 1st
    /// and 15th".
    pub fn words(&self) -> String {
        let time = self.time_words();
        let days = self.day_words();
        let months = if self.months == 0x1ffe {
            String::new()
        } else {
            let names: Vec<String> = bits(u64::from(self.months), 1, 12)
                .map(|m| MONTH.names[m as usize - 1].to_owned())
                .collect();
            format!(" in {}", super::and_list(names.into_iter()))
        };
        format!("{time}{days}{months}")
    }

    fn time_words(&self) -> String {
        let minutes: Vec<u32> = bits(self.minutes, 0, 59).collect();
        let hours: Vec<u32> = bits(u64::from(self.hours), 0, 23).collect();
        let all_hours = hours.len() == 24;
        if all_hours {
            if minutes.len() == 60 {
                return "every minute".into();
            }
            if let Some((start, step)) = progression(&minutes, 59)
                && 60 % step == 0
            {
                return if start == 0 {
                    format!("every {step} minutes")
                } else {
                    format!("every {step} minutes from :{start:02}")
                };
            }
            return match minutes.as_slice() {
                [0] => "every hour".into(),
                [m] => format!("every hour at :{m:02}"),
                ms => format!(
                    "every hour at {}",
                    super::and_list(ms.iter().map(|m| format!(":{m:02}")))
                ),
            };
        }
        if hours.len() * minutes.len() <= 4 {
            let times = self.times().map(|(h, m)| format!("{h:02}:{m:02}"));
            return format!("at {}", super::and_list(times));
        }
        if let ([m], Some((start, step))) = (minutes.as_slice(), progression(&hours, 23))
            && 24 % step == 0
        {
            let from = if start == 0 && *m == 0 {
                String::new()
            } else {
                format!(" from {start:02}:{m:02}")
            };
            return format!("every {step} hours{from}");
        }
        let list = |set: u64, min, max| compress(set, min, max, "-", |v| v.to_string());
        format!(
            "at minute {} of hour {}",
            list(self.minutes, 0, 59),
            list(u64::from(self.hours), 0, 23)
        )
    }

    fn day_words(&self) -> String {
        let dom = || {
            let days: Vec<u32> = bits(u64::from(self.days), 1, 31).collect();
            if days.len() <= 6 {
                format!(
                    "the {}",
                    super::and_list(days.iter().map(|d| super::ordinal(*d as u8)))
                )
            } else {
                format!(
                    "days {}",
                    compress(u64::from(self.days), 1, 31, "-", |v| v.to_string())
                )
            }
        };
        let dow = || {
            let days: Vec<super::Weekday> = super::Weekday::ALL
                .into_iter()
                .filter(|d| self.weekdays >> d.days_from_sunday() & 1 == 1)
                .collect();
            super::weekday_words(&days)
        };
        match (self.dom_restricted(), self.dow_restricted()) {
            (false, false) => String::new(),
            (true, false) => format!(" on {}", dom()),
            (false, true) => format!(" on {}", dow()),
            // Both restricted and neither starts with `*` (the other case is refused): either.
            (true, true) => format!(" on {} or on {}", dom(), dow()),
        }
    }
}

/// One launchd calendar entry; `None` is a key left out (any value).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchdEntry {
    /// `Minute`.
    pub minute: Option<u32>,
    /// `Hour`.
    pub hour: Option<u32>,
    /// `Day` (of the month).
    pub day: Option<u32>,
    /// `Weekday`, Sunday 0.
    pub weekday: Option<u32>,
    /// `Month`.
    pub month: Option<u32>,
}

/// `(start, step)` when `values` are `start, start+step, …` up to the last that fits under `max`,
/// with at least two values.
fn progression(values: &[u32], max: u32) -> Option<(u32, u32)> {
    let [a, b, ..] = values else {
        return None;
    };
    let step = b - a;
    let expected: Vec<u32> = (*a..=max).step_by(step as usize).collect();
    (step > 1 && values == expected.as_slice()).then_some((*a, step))
}

/// A set as a systemd calendar component: `*`, `00/10`, or a list of values and `a..b` runs.
fn systemd_field(set: u64, min: u32, max: u32) -> String {
    if set == full(min, max) {
        return "*".into();
    }
    let values: Vec<u32> = bits(set, min, max).collect();
    if let Some((start, step)) = progression(&values, max)
        && values.len() > 2
    {
        return format!("{start:02}/{step}");
    }
    compress(set, min, max, "..", |v| format!("{v:02}"))
}

/// A set as a list with runs of three or more written `a{dash}b`.
fn compress(set: u64, min: u32, max: u32, dash: &str, show: impl Fn(u32) -> String) -> String {
    if set == full(min, max) {
        return "*".into();
    }
    let values: Vec<u32> = bits(set, min, max).collect();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < values.len() {
        let mut j = i;
        while j + 1 < values.len() && values[j + 1] == values[j] + 1 {
            j += 1;
        }
        if j - i >= 2 {
            parts.push(format!("{}{dash}{}", show(values[i]), show(values[j])));
        } else {
            parts.extend(values[i..=j].iter().map(|v| show(*v)));
        }
        i = j + 1;
    }
    parts.join(",")
}

/// One field: a comma list of `*`, `N`, `A-B`, each with an optional `/STEP`, as a bit set.
fn field(spec: &FieldSpec, text: &str) -> Result<u64, String> {
    let at = |msg: String| format!("{} field {text:?}: {msg}", spec.name);
    if let Some(foreign) = foreign(spec, text) {
        return Err(at(foreign));
    }
    let mut set = 0u64;
    for item in text.split(',') {
        if item.is_empty() {
            return Err(at(
                "has an empty item in its list; write values between the commas".into(),
            ));
        }
        set |= item_set(spec, item).map_err(at)?;
    }
    Ok(set)
}

/// What another dialect's syntax is, and what to write instead.
fn foreign(spec: &FieldSpec, text: &str) -> Option<String> {
    if text.contains('?') {
        return Some("`?` is Quartz's \"no specific value\", not cron's; write *".into());
    }
    if text.contains('#') {
        return Some("`#` (the nth weekday, as in mon#2) is not cron's; run it on the days it can fall on (8-14 for the second) and check the weekday in the script".into());
    }
    let last_or_weekday = text.split(',').any(|item| {
        let upper = item.to_ascii_uppercase();
        let body = upper.trim_start_matches(|c: char| c.is_ascii_digit());
        matches!(body, "L" | "W" | "LW") || upper.starts_with("L-")
    });
    if last_or_weekday {
        let instead = if spec.name == "day-of-month" {
            "run it on 28-31 and check in the script that tomorrow is the 1st"
        } else {
            "list the days themselves"
        };
        return Some(format!(
            "`L` and `W` (last, nearest weekday) are Quartz's, not cron's; {instead}"
        ));
    }
    None
}

fn item_set(spec: &FieldSpec, item: &str) -> Result<u64, String> {
    let (range, step) = match item.split_once('/') {
        Some((r, s)) => {
            let step: u32 = s
                .parse()
                .map_err(|_| format!("step {s:?} is not a number"))?;
            if step == 0 {
                return Err("a step of 0 never advances; use 1 or more".into());
            }
            (r, Some(step))
        }
        None => (item, None),
    };
    let (lo, hi) = if range == "*" {
        (spec.min, spec.max)
    } else if let Some((a, b)) = range.split_once('-') {
        let (lo, hi) = (value(spec, a)?, value(spec, b)?);
        if hi < lo {
            return Err(format!(
                "{range} runs backwards; cron has no wrap-around: write {b}-{a}, or two ranges"
            ));
        }
        (lo, hi)
    } else {
        let v = value(spec, range)?;
        if let Some(step) = step {
            return Err(format!(
                "{range}/{step}: a step needs a range; write {range}-{}/{step} (or */{step})",
                spec.max
            ));
        }
        (v, v)
    };
    let step = step.unwrap_or(1) as usize;
    Ok((lo..=hi).step_by(step).fold(0u64, |acc, v| acc | 1 << v))
}

fn value(spec: &FieldSpec, s: &str) -> Result<u32, String> {
    if s.is_empty() {
        return Err("a range needs a value on both sides of -".into());
    }
    if let Some(i) = spec.names.iter().position(|n| n.eq_ignore_ascii_case(s)) {
        return Ok(i as u32 + if spec.name == "month" { 1 } else { 0 });
    }
    match s.parse::<u32>() {
        Ok(v) if (spec.min..=spec.max).contains(&v) => Ok(v),
        Ok(v) => Err(format!(
            "{v} is out of range; a {} is {}-{}",
            spec.name, spec.min, spec.max
        )),
        Err(_) if !spec.names.is_empty() => Err(format!(
            "{:?} is not a number or a name ({})",
            crate::names::truncate(s, 12),
            spec.names.join(", ")
        )),
        Err(_) => Err(format!(
            "{:?} is not a number",
            crate::names::truncate(s, 12)
        )),
    }
}

#[cfg(test)]
mod tests;
