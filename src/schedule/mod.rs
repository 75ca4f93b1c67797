//! Schedules (docs/definitions.md, docs/units.md "Schedules and sleep"): the types a definition's `[schedule]` becomes,
//! and every question about when one fires, answered once for everyone — which `every_minutes`
//! become a wall-clock grid, what that grid is for launchd and systemd, where a local time lands on
//! a DST day, which slots fell between two instants ([`slots_between`]), the latest slot before
//! now (the runner's slot guard, docs/running.md) and the next firing (`install`, `list`, the dashboard).
//!
//! Pure functions: the caller passes "now" in the machine's zone (`chrono::Local` in the program,
//! a real zone in tests); a schedule with a `time_zone` is read in that zone instead
//! ([`zone::ClockZone`]). Nothing here reads a clock, a file or the environment.

pub mod cron;
pub mod zone;

use std::fmt;

pub use cron::Cron;
pub use zone::{CatchUp, ClockZone, ZoneName};

use chrono::{
    DateTime, Datelike, Duration, LocalResult, NaiveDate, NaiveTime, TimeZone, Timelike, Utc,
};
use serde::{Deserialize, Serialize};

/// A day of the week, as written in `weekdays`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Weekday {
    Mon,
    Tue,
    Wed,
    Thu,
    Fri,
    Sat,
    Sun,
}

impl Weekday {
    /// All days, Monday first.
    pub const ALL: [Weekday; 7] = [
        Weekday::Mon,
        Weekday::Tue,
        Weekday::Wed,
        Weekday::Thu,
        Weekday::Fri,
        Weekday::Sat,
        Weekday::Sun,
    ];

    /// The three-letter word used in definitions.
    pub fn as_str(self) -> &'static str {
        ["mon", "tue", "wed", "thu", "fri", "sat", "sun"][self as usize]
    }

    /// The day a definition names (`mon` … `sun`).
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|d| d.as_str() == s)
    }

    /// The day as systemd's calendar expressions write it (`Mon` … `Sun`).
    pub fn systemd(self) -> &'static str {
        ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"][self as usize]
    }

    /// Days since Monday (0..=6).
    pub fn index_from_monday(self) -> u32 {
        self as u32
    }

    /// Days since Sunday (0..=6), as cron's day-of-week field counts.
    pub fn days_from_sunday(self) -> u32 {
        (self as u32 + 1) % 7
    }
}

/// A local wall-clock time of day, `HH:MM`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct TimeOfDay {
    /// 0..=23.
    pub hour: u8,
    /// 0..=59.
    pub minute: u8,
}

impl TimeOfDay {
    /// Parses exactly `HH:MM` (two digits each, 24 h).
    pub fn parse(s: &str) -> Option<Self> {
        let b = s.as_bytes();
        if b.len() != 5 || b[2] != b':' || ![0, 1, 3, 4].iter().all(|&i| b[i].is_ascii_digit()) {
            return None;
        }
        let hour = (b[0] - b'0') * 10 + (b[1] - b'0');
        let minute = (b[3] - b'0') * 10 + (b[4] - b'0');
        (hour < 24 && minute < 60).then_some(Self { hour, minute })
    }
}

impl TimeOfDay {
    /// Minutes since midnight.
    pub fn minutes(self) -> u32 {
        u32::from(self.hour) * 60 + u32::from(self.minute)
    }
}

impl fmt::Display for TimeOfDay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:02}:{:02}", self.hour, self.minute)
    }
}

impl Serialize for TimeOfDay {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for TimeOfDay {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        TimeOfDay::parse(&s)
            .ok_or_else(|| serde::de::Error::custom(format!("{s:?} is not a time HH:MM")))
    }
}

/// When the OS fires an automation. (Read back from install records, which keep the schedule
/// that was installed; records written before lists and offsets existed read the same.)
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Schedule {
    /// Every N minutes (1..=1440): on the wall clock when N is a grid (`schedule::is_grid`),
    /// shifted by `offset_minutes` (0..N), else N minutes of awake time.
    EveryMinutes {
        every_minutes: u32,
        #[serde(default, skip_serializing_if = "is_zero")]
        offset_minutes: u32,
        /// The zone its wall clock is read in (`time_zone`); `None` = the machine's.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        time_zone: Option<ZoneName>,
        /// What a firing owes the slots missed while the machine slept or was off.
        #[serde(default, skip_serializing_if = "CatchUp::is_latest")]
        catch_up: CatchUp,
        /// It also runs once when the user's service manager starts (`at_login = true`).
        #[serde(default, skip_serializing_if = "is_false")]
        at_login: bool,
    },
    /// At local times of day (sorted, unique, 1..=24), optionally only on some weekdays or some
    /// days of the month (empty = every day; never both).
    DailyAt {
        #[serde(deserialize_with = "one_or_many", serialize_with = "one_or_list")]
        daily_at: Vec<TimeOfDay>,
        #[serde(default)]
        weekdays: Vec<Weekday>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        days_of_month: Vec<u8>,
        /// The zone its wall clock is read in (`time_zone`); `None` = the machine's.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        time_zone: Option<ZoneName>,
        /// What a firing owes the slots missed while the machine slept or was off.
        #[serde(default, skip_serializing_if = "CatchUp::is_latest")]
        catch_up: CatchUp,
        /// It also runs once when the user's service manager starts (`at_login = true`).
        #[serde(default, skip_serializing_if = "is_false")]
        at_login: bool,
    },
    /// A five-field cron expression (docs/cron.md).
    Cron {
        cron: Cron,
        /// The zone its wall clock is read in (`time_zone`); `None` = the machine's.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        time_zone: Option<ZoneName>,
        /// What a firing owes the slots missed while the machine slept or was off.
        #[serde(default, skip_serializing_if = "CatchUp::is_latest")]
        catch_up: CatchUp,
        /// It also runs once when the user's service manager starts (`at_login = true`).
        #[serde(default, skip_serializing_if = "is_false")]
        at_login: bool,
    },
    /// Only once each time the user's service manager starts: at login (or at boot, with
    /// lingering), and when it is installed.
    AtLogin,
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// `daily_at` as written: one time as a string (the shape records and `list --json` had before
/// lists existed), several as a list.
fn one_or_list<S: serde::Serializer>(times: &[TimeOfDay], s: S) -> Result<S::Ok, S::Error> {
    match times {
        [one] => one.serialize(s),
        many => many.serialize(s),
    }
}

/// `daily_at` as one time (records written before lists existed) or a list.
fn one_or_many<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<TimeOfDay>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(TimeOfDay),
        Many(Vec<TimeOfDay>),
    }
    Ok(match OneOrMany::deserialize(d)? {
        OneOrMany::One(t) => vec![t],
        OneOrMany::Many(v) => v,
    })
}

impl Schedule {
    /// An interval on the wall clock or of awake time, without an offset.
    pub fn every(every_minutes: u32) -> Self {
        Schedule::EveryMinutes {
            every_minutes,
            offset_minutes: 0,
            time_zone: None,
            catch_up: CatchUp::Latest,
            at_login: false,
        }
    }

    /// The zone its wall clock is read in, when it names one (`None`: the machine's).
    pub fn zone(&self) -> Option<ZoneName> {
        match self {
            Schedule::EveryMinutes { time_zone, .. }
            | Schedule::DailyAt { time_zone, .. }
            | Schedule::Cron { time_zone, .. } => *time_zone,
            Schedule::AtLogin => None,
        }
    }

    /// What a firing owes the slots missed while the machine slept or was off.
    pub fn catch_up(&self) -> CatchUp {
        match self {
            Schedule::EveryMinutes { catch_up, .. }
            | Schedule::DailyAt { catch_up, .. }
            | Schedule::Cron { catch_up, .. } => *catch_up,
            Schedule::AtLogin => CatchUp::Latest,
        }
    }

    /// The zone its wall clock is read in on a machine in `machine`.
    pub fn clock<M: TimeZone>(&self, machine: &M) -> ClockZone<M> {
        ClockZone::of(self.zone(), machine)
    }

    /// Whether it runs when the user's service manager starts (login, or boot with lingering).
    pub fn at_login(&self) -> bool {
        match self {
            Schedule::EveryMinutes { at_login, .. }
            | Schedule::DailyAt { at_login, .. }
            | Schedule::Cron { at_login, .. } => *at_login,
            Schedule::AtLogin => true,
        }
    }

    /// Whether health counts its missed slots (and the skips that answered them): `daily_at`, and
    /// a `cron` that fires at most hourly. A finer pattern is judged like `every_minutes`, by the
    /// age of its last success: a night asleep would otherwise count as dozens of missed slots.
    pub fn counts_missed_slots(&self) -> bool {
        match self {
            Schedule::DailyAt { .. } => true,
            Schedule::Cron { cron, .. } => cron.shortest_gap_seconds() >= 3600,
            _ => false,
        }
    }

    /// Whether it has slots on the clock at all: `daily_at`, `cron`, or an `every_minutes` grid
    /// (what `time_zone`, `catch_up` and backfill mean something for).
    pub fn slotted_or_grid(&self) -> bool {
        match self {
            Schedule::EveryMinutes { every_minutes, .. } => is_grid(*every_minutes),
            s => s.slotted(),
        }
    }

    /// Whether it fires on calendar slots that each run once (`daily_at`, `cron`): the slot guard
    /// skips a firing whose slot already ran, health counts missed slots.
    pub fn slotted(&self) -> bool {
        matches!(self, Schedule::DailyAt { .. } | Schedule::Cron { .. })
    }

    /// The shortest time between two of its firings, in seconds (what `jitter_seconds` must stay
    /// under): the interval, or the smallest gap between two times of day (across midnight too).
    pub fn shortest_gap_seconds(&self) -> u32 {
        match self {
            Schedule::EveryMinutes { every_minutes, .. } => every_minutes * 60,
            Schedule::AtLogin => 86_400,
            Schedule::Cron { cron, .. } => cron.shortest_gap_seconds(),
            Schedule::DailyAt { daily_at, .. } => {
                let mins: Vec<u32> = daily_at.iter().map(|t| t.minutes()).collect();
                let wrap = mins.first().map_or(1440, |first| first + 1440);
                mins.iter()
                    .zip(mins.iter().skip(1).copied().chain([wrap]))
                    .map(|(a, b)| (b - a) * 60)
                    .min()
                    .unwrap_or(86_400)
            }
        }
    }

    /// The schedule in words: "every 5 minutes", "every 15 minutes from :05", "daily at 08:00 and
    /// 18:00 on weekdays", "on the 1st and 15th at 03:00", "at login", "every hour, and at login".
    pub fn words(&self) -> String {
        let clock = match self.zone() {
            Some(z) => format!("{} ({z})", self.clock_words()),
            None => self.clock_words(),
        };
        match self {
            Schedule::AtLogin => "at login".into(),
            s if s.at_login() => format!("{clock}, and at login"),
            _ => clock,
        }
    }

    /// The words of its clock part (or awake-time interval).
    fn clock_words(&self) -> String {
        match self {
            Schedule::AtLogin => String::new(),
            Schedule::Cron { cron, .. } => cron.words(),
            Schedule::EveryMinutes {
                every_minutes,
                offset_minutes,
                ..
            } => interval_words(*every_minutes, *offset_minutes),
            Schedule::DailyAt {
                daily_at,
                weekdays,
                days_of_month,
                ..
            } => {
                let times = and_list(daily_at.iter().map(ToString::to_string));
                if !days_of_month.is_empty() {
                    let days = and_list(days_of_month.iter().map(|d| ordinal(*d)));
                    return format!("on the {days} at {times}");
                }
                let mut days = weekdays.clone();
                days.sort();
                let on = match days.len() {
                    0 | 7 => String::new(),
                    _ => format!(" on {}", weekday_words(&days)),
                };
                format!("daily at {times}{on}")
            }
        }
    }
}

/// Some days of the week (sorted, Monday first) in words: "weekdays", "weekends", "mon, wed".
fn weekday_words(days: &[Weekday]) -> String {
    match days {
        [
            Weekday::Mon,
            Weekday::Tue,
            Weekday::Wed,
            Weekday::Thu,
            Weekday::Fri,
        ] => "weekdays".into(),
        [Weekday::Sat, Weekday::Sun] => "weekends".into(),
        d => d.iter().map(|d| d.as_str()).collect::<Vec<_>>().join(", "),
    }
}

fn interval_words(every: u32, offset: u32) -> String {
    let base = match every {
        1 => "every minute".to_owned(),
        60 => "every hour".to_owned(),
        m if m % 60 == 0 => format!("every {} hours", m / 60),
        m => format!("every {m} minutes"),
    };
    if !is_grid(every) {
        return format!("{base} ({AWAKE_NOTE})");
    }
    match (every, offset) {
        (_, 0) => base,
        (60, o) => format!("every hour at :{o:02}"),
        (e, o) if e < 60 => format!("{base} from :{o:02}"),
        (_, o) => format!("{base} from {:02}:{:02}", o / 60, o % 60),
    }
}

/// "a", "a and b", "a, b and c".
fn and_list(items: impl Iterator<Item = String>) -> String {
    let items: Vec<String> = items.collect();
    match items.as_slice() {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// 1st, 2nd, 3rd, 4th … 21st, 22nd, 23rd … 31st.
fn ordinal(n: u8) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// Whether `every_minutes` is a wall-clock grid: it divides the hour (1, 2, 3, 4, 5, 6, 10, 12, 15,
/// 20, 30, 60) or is a whole number of hours that divides the day. A grid fires at fixed clock
/// times, so slots missed while the machine slept coalesce into one run on wake; any other
/// interval counts awake time and does not fire on wake.
pub fn is_grid(every_minutes: u32) -> bool {
    every_minutes > 0
        && (60 % every_minutes == 0
            || (every_minutes.is_multiple_of(60) && 1440 % every_minutes == 0))
}

/// The words every place uses for an interval that counts awake time.
pub const AWAKE_NOTE: &str = "counts awake time; does not fire on wake";

/// The points of a grid shifted by `offset` minutes within one day, as (hour, minute); `None` for
/// the hour means every hour.
pub fn grid_points(every_minutes: u32, offset: u32) -> Vec<(Option<u8>, u8)> {
    if every_minutes <= 60 {
        (offset..60)
            .step_by(every_minutes as usize)
            .map(|m| (None, m as u8))
            .collect()
    } else {
        (offset..1440)
            .step_by(every_minutes as usize)
            .map(|m| (Some((m / 60) as u8), (m % 60) as u8))
            .collect()
    }
}

/// The systemd `OnCalendar=` expressions a schedule fires on, one per line of a timer (systemd fires
/// at their union); empty when it fires on no calendar (an interval of awake time, at login only).
/// The timer renders exactly these, and a Healthchecks check is given exactly these.
pub fn on_calendar(schedule: &Schedule) -> Vec<String> {
    match schedule {
        Schedule::EveryMinutes {
            every_minutes,
            offset_minutes,
            ..
        } if is_grid(*every_minutes) => vec![grid_calendar(*every_minutes, *offset_minutes)],
        Schedule::EveryMinutes { .. } | Schedule::AtLogin => Vec::new(),
        Schedule::Cron { cron, .. } => cron.on_calendar(),
        Schedule::DailyAt {
            daily_at,
            weekdays,
            days_of_month,
            ..
        } => {
            let mut days: Vec<_> = weekdays.clone();
            days.sort();
            let prefix = if days.is_empty() {
                String::new()
            } else {
                let names: Vec<&str> = days.iter().map(|d| d.systemd()).collect();
                format!("{} ", names.join(","))
            };
            let dom = if days_of_month.is_empty() {
                "*".to_owned()
            } else {
                let d: Vec<String> = days_of_month.iter().map(|d| format!("{d:02}")).collect();
                d.join(",")
            };
            daily_at
                .iter()
                .map(|at| format!("{prefix}*-*-{dom} {at}:00"))
                .collect()
        }
    }
}

/// The systemd `OnCalendar=` expression of a grid shifted by `offset` minutes.
pub fn grid_calendar(every_minutes: u32, offset: u32) -> String {
    let (h, m) = (offset / 60, offset % 60);
    match every_minutes {
        1 => "*-*-* *:*:00".into(),
        e if e < 60 => format!("*-*-* *:{m:02}/{e}:00"),
        60 => format!("*-*-* *:{m:02}:00"),
        1440 => format!("*-*-* {h:02}:{m:02}:00"),
        e => format!("*-*-* {h:02}/{}:{m:02}:00", e / 60),
    }
}

/// Where local wall-clock time `at` on `day` falls. In a DST gap (the time does not exist) it moves
/// to the first valid minute after; in a fold (it exists twice) it is the earlier instant.
pub fn resolve_local<Tz: TimeZone>(
    tz: &Tz,
    day: NaiveDate,
    at: TimeOfDay,
) -> Option<DateTime<Utc>> {
    resolve_naive(
        tz,
        day.and_hms_opt(u32::from(at.hour), u32::from(at.minute), 0)?,
    )
}

/// [`resolve_local`] of any wall-clock time.
pub fn resolve_naive<Tz: TimeZone>(tz: &Tz, naive: chrono::NaiveDateTime) -> Option<DateTime<Utc>> {
    match tz.from_local_datetime(&naive) {
        LocalResult::Single(t) => Some(t.with_timezone(&Utc)),
        LocalResult::Ambiguous(a, _) => Some(a.with_timezone(&Utc)),
        LocalResult::None => (1..=180).find_map(|m| {
            tz.from_local_datetime(&(naive + Duration::minutes(m)))
                .earliest()
                .map(|t| t.with_timezone(&Utc))
        }),
    }
}

/// Whether `day` is one of `weekdays` and of `days_of_month` (an empty list allows every day).
pub fn allowed(day: NaiveDate, weekdays: &[Weekday], days_of_month: &[u8]) -> bool {
    (weekdays.is_empty()
        || weekdays.contains(&Weekday::ALL[day.weekday().num_days_from_monday() as usize]))
        && (days_of_month.is_empty() || days_of_month.contains(&(day.day() as u8)))
}

/// How long a scheduled firing of `name` for `slot` waits before it runs, within
/// `0..=jitter_seconds`: a hash of the name and the slot, so firings of many automations spread
/// over the window, the same slot always waits the same (a catch-up after sleep too), and anyone
/// can compute it ahead (`list`, a test). An interval of awake time has no slot: its wait depends
/// on the name alone.
pub fn jitter_delay(name: &str, slot: Option<DateTime<Utc>>, jitter_seconds: u32) -> Duration {
    use sha2::{Digest, Sha256};
    if jitter_seconds == 0 {
        return Duration::zero();
    }
    let mut h = Sha256::new();
    h.update(name.as_bytes());
    h.update([0]);
    if let Some(slot) = slot {
        h.update(slot.timestamp().to_be_bytes());
    }
    let digest = h.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    let span = u64::from(jitter_seconds) * 1000 + 1;
    Duration::milliseconds((u64::from_be_bytes(first) % span) as i64)
}

/// A slot as `AUTOMATION_SLOT`, `started` and `skipped` give it: RFC 3339 to the second, with
/// the offset of the schedule's zone (`zone`, else the machine's, `machine`).
pub fn slot_stamp<M: TimeZone>(slot: DateTime<Utc>, zone: Option<ZoneName>, machine: &M) -> String
where
    M::Offset: fmt::Display,
{
    match zone {
        Some(z) => slot
            .with_timezone(&z.clock())
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, false),
        None => slot
            .with_timezone(machine)
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, false),
    }
}

/// `", jitter 42 s"`: what a next firing's words add for its delay.
pub fn jitter_words(delay: Duration) -> String {
    format!(", jitter {:.0} s", delay.num_milliseconds() as f64 / 1000.0)
}

/// The next run of `name` after `now`: its next firing, later by that slot's jitter delay, and the
/// delay (none without `jitter_seconds`, or for an interval of awake time, whose starts are all
/// delayed alike).
pub fn next_run<Tz: TimeZone>(
    schedule: &Schedule,
    name: &str,
    jitter_seconds: u32,
    now: &DateTime<Tz>,
    last_start: Option<DateTime<Utc>>,
) -> Option<(Next, Option<Duration>)> {
    let next = next_firing(schedule, now, last_start)?;
    let delay = match next {
        Next::At(slot) if jitter_seconds > 0 => {
            Some(jitter_delay(name, Some(slot), jitter_seconds))
        }
        _ => None,
    };
    Some((next.delayed(delay.unwrap_or_default()), delay))
}

/// The next time a schedule fires after `now`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// A wall-clock time (grid or daily).
    At(DateTime<Utc>),
    /// An interval of awake time: `after` the last start when there was one (sleep pushes it out).
    Awake {
        every_minutes: u32,
        after: Option<DateTime<Utc>>,
    },
}

impl Next {
    /// The same firing `delay` later (its jitter: a wall-clock time moves; an interval of awake
    /// time counts from the last start, which was delayed as much).
    pub fn delayed(self, delay: Duration) -> Self {
        match self {
            Next::At(t) => Next::At(t + delay),
            awake => awake,
        }
    }

    /// The instant to show, if there is one: the wall-clock time, or last start + interval.
    pub fn instant(&self) -> Option<DateTime<Utc>> {
        match *self {
            Next::At(t) => Some(t),
            Next::Awake {
                every_minutes,
                after,
            } => after.map(|t| t + Duration::minutes(i64::from(every_minutes))),
        }
    }

    /// [`Next::words`], and for a schedule in a `time_zone` the same instant on its own clock:
    /// `2026-12-07 15:00 (in 5 h), 09:00 America/New_York`.
    pub fn words_in<Tz: TimeZone>(&self, now: &DateTime<Tz>, zone: Option<ZoneName>) -> String
    where
        Tz::Offset: std::fmt::Display,
    {
        let words = self.words(now);
        match (zone, self) {
            (Some(z), Next::At(t)) => {
                let there = t.with_timezone(&z.clock());
                let here = t.with_timezone(&now.timezone());
                let shape = if there.date_naive() == here.date_naive() {
                    "%H:%M"
                } else {
                    "%Y-%m-%d %H:%M"
                };
                format!("{words}, {} {z}", there.format(shape))
            }
            _ => words,
        }
    }

    /// For people: `2026-11-30 17:05 (in 3 min)` in the zone of `now`, or the awake-time wording.
    pub fn words<Tz: TimeZone>(&self, now: &DateTime<Tz>) -> String
    where
        Tz::Offset: std::fmt::Display,
    {
        let at = |t: DateTime<Utc>| {
            let local = t.with_timezone(&now.timezone());
            let mins = (t - now.with_timezone(&Utc)).num_minutes();
            let when = if mins < 1 {
                "in under a minute".to_owned()
            } else if mins < 120 {
                format!("in {mins} min")
            } else if mins < 48 * 60 {
                format!("in {} h", mins / 60)
            } else {
                format!("in {} days", mins / (24 * 60))
            };
            let shape = if local.second() == 0 && local.nanosecond() == 0 {
                "%Y-%m-%d %H:%M"
            } else {
                "%Y-%m-%d %H:%M:%S"
            };
            format!("{} ({when})", local.format(shape))
        };
        match *self {
            Next::At(t) => at(t),
            Next::Awake {
                every_minutes,
                after: Some(last),
            } => {
                let t = last + Duration::minutes(i64::from(every_minutes));
                if t > now.with_timezone(&Utc) {
                    format!("{}, awake time", at(t))
                } else {
                    format!("due ({every_minutes} min of awake time after the last run)")
                }
            }
            Next::Awake {
                every_minutes,
                after: None,
            } => format!("{every_minutes} min of awake time after loading"),
        }
    }
}

/// How far slot searches look back or ahead, in days: beyond a week of weekdays, or beyond the
/// longest gap between two days of the month (the 31st: August to October).
/// How far a search for the nearest slot (back or ahead) may look: it stops at the first, so for a
/// cron a fixed bound is cheaper than sizing a window (as `search_days` does, for `longest_gap`).
fn horizon_days(schedule: &Schedule) -> i64 {
    match schedule {
        Schedule::Cron { .. } => cron::HORIZON_DAYS,
        s => search_days(s),
    }
}

fn search_days(schedule: &Schedule) -> i64 {
    match schedule {
        Schedule::Cron { cron, .. } => cron.search_days(),
        Schedule::DailyAt { days_of_month, .. } if !days_of_month.is_empty() => 63,
        _ => 8,
    }
}

/// The slots of a calendar schedule on local `day`, oldest first, in UTC; empty for an interval
/// that counts awake time (it has no slots on the clock). A grid point in a DST gap does not exist
/// and is not fired, one in a fold is the earlier instant; a time of day in a gap moves to the
/// first valid minute after it ([`resolve_local`]), and two times that land on the same instant
/// are one slot.
pub fn day_slots<Tz: TimeZone>(schedule: &Schedule, tz: &Tz, day: NaiveDate) -> Vec<DateTime<Utc>> {
    zoned_day_slots(schedule, &schedule.clock(tz), day)
}

/// [`day_slots`] with the schedule's own zone already applied: `day` is a date of `tz`.
fn zoned_day_slots<Tz: TimeZone>(
    schedule: &Schedule,
    tz: &Tz,
    day: NaiveDate,
) -> Vec<DateTime<Utc>> {
    match schedule {
        Schedule::EveryMinutes {
            every_minutes,
            offset_minutes,
            ..
        } if is_grid(*every_minutes) => (*offset_minutes..1440)
            .step_by(*every_minutes as usize)
            .filter_map(|m: u32| {
                let at = day.and_time(NaiveTime::from_hms_opt(m / 60, m % 60, 0)?);
                tz.from_local_datetime(&at).earliest()
            })
            .map(|t| t.with_timezone(&Utc))
            .collect(),
        Schedule::EveryMinutes { .. } | Schedule::AtLogin => Vec::new(),
        Schedule::Cron { cron, .. } => cron_day_slots(cron, tz, day),
        Schedule::DailyAt {
            daily_at,
            weekdays,
            days_of_month,
            ..
        } => {
            if !allowed(day, weekdays, days_of_month) {
                return Vec::new();
            }
            let mut slots: Vec<DateTime<Utc>> = daily_at
                .iter()
                .filter_map(|at| resolve_local(tz, day, *at))
                .collect();
            slots.sort();
            slots.dedup();
            slots
        }
    }
}

/// The slots of a cron expression on local `day`: a time of day (fixed minute and hour) as for
/// `daily_at` ([`resolve_local`]); any other pattern by real minutes, so a minute in a DST gap
/// does not happen and one in a fold happens twice (as Debian's cron runs it).
fn cron_day_slots<Tz: TimeZone>(cron: &Cron, tz: &Tz, day: NaiveDate) -> Vec<DateTime<Utc>> {
    if !cron.matches_day(day) {
        return Vec::new();
    }
    let mut slots: Vec<DateTime<Utc>> = Vec::new();
    for (hour, minute) in cron.times() {
        if cron.fixed_time() {
            let at = TimeOfDay {
                hour: hour as u8,
                minute: minute as u8,
            };
            slots.extend(resolve_local(tz, day, at));
            continue;
        }
        let Some(naive) = day.and_hms_opt(hour, minute, 0) else {
            continue;
        };
        match tz.from_local_datetime(&naive) {
            LocalResult::Single(t) => slots.push(t.with_timezone(&Utc)),
            LocalResult::Ambiguous(a, b) => {
                slots.extend([a.with_timezone(&Utc), b.with_timezone(&Utc)]);
            }
            LocalResult::None => {}
        }
    }
    slots.sort();
    slots.dedup();
    slots
}

/// Every slot of `schedule` in `(from, to]`, oldest first: the one answer to "which slots were due
/// between A and B" that the slot guard, the next firing, health's missed slots and the
/// dashboard's strip all use. `tz` is the zone the schedule's wall clock is in.
pub fn slots_between<Tz: TimeZone>(
    schedule: &Schedule,
    tz: &Tz,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Vec<DateTime<Utc>> {
    if to <= from {
        return Vec::new();
    }
    let tz = &schedule.clock(tz);
    let first = from.with_timezone(tz).date_naive() - Duration::days(1);
    let last = to.with_timezone(tz).date_naive() + Duration::days(1);
    first
        .iter_days()
        .take_while(|d| *d <= last)
        .flat_map(|day| zoned_day_slots(schedule, tz, day))
        .filter(|t| *t > from && *t <= to)
        .collect()
}

/// The longest time between two consecutive slots of a calendar schedule in the `search_days`
/// before `now` (a monthly job's month, a weekday job's weekend, a twice-daily job's night);
/// `None` for an interval of awake time.
pub fn longest_gap<Tz: TimeZone>(
    schedule: &Schedule,
    tz: &Tz,
    now: DateTime<Utc>,
) -> Option<Duration> {
    let from = now - Duration::days(search_days(schedule) + 1);
    let slots = slots_between(schedule, tz, from, now + Duration::days(1));
    slots.windows(2).map(|w| w[1] - w[0]).max()
}

/// The slots in `(from, to]` that no firing followed: none of `firings` (times the schedule fired,
/// skips included) lies at or after the slot and before the next slot, or before `now` for the
/// latest one, and no run stood for it (`answered`: the slots runs recorded, whenever they ran — a
/// catch-up on wake, a backfill). A run by hand is no firing; callers pass only scheduled ones.
pub fn missed_slots<Tz: TimeZone>(
    schedule: &Schedule,
    tz: &Tz,
    (from, to): (DateTime<Utc>, DateTime<Utc>),
    now: DateTime<Utc>,
    (firings, answered): (&[DateTime<Utc>], &[DateTime<Utc>]),
) -> Vec<DateTime<Utc>> {
    let slots = slots_between(schedule, tz, from, now.max(to));
    slots
        .iter()
        .enumerate()
        .filter(|&(_, slot)| *slot <= to && !answered.contains(slot))
        .filter(|&(i, slot)| {
            let until = slots.get(i + 1).copied().unwrap_or(now);
            !firings.iter().any(|f| f >= slot && *f < until)
        })
        .map(|(_, slot)| *slot)
        .collect()
}

/// The most recent slot at or before `now`, if one lies within the search window.
pub fn latest_slot<Tz: TimeZone>(schedule: &Schedule, now: &DateTime<Tz>) -> Option<DateTime<Utc>> {
    let tz = schedule.clock(&now.timezone());
    let now = now.with_timezone(&tz);
    let now_utc = now.with_timezone(&Utc);
    // Tomorrow first: a slot of tomorrow's local date can still be before now in UTC terms only
    // when today's date was misjudged, never otherwise; the cost is one day's slots.
    (-1..=horizon_days(schedule)).find_map(|back| {
        let day = now.date_naive() - Duration::days(back);
        zoned_day_slots(schedule, &tz, day)
            .into_iter()
            .filter(|t| *t <= now_utc)
            .max()
    })
}

/// True when the slot is already done: a run started at or after it, or the unit was installed
/// after it (an install is not a missed slot).
pub fn slot_done(
    slot: DateTime<Utc>,
    last_start: Option<DateTime<Utc>>,
    installed_at: Option<DateTime<Utc>>,
) -> bool {
    last_start.is_some_and(|t| t >= slot) || installed_at.is_some_and(|t| t > slot)
}

/// The next firing of `schedule` strictly after `now`; `last_start` places interval timers.
pub fn next_firing<Tz: TimeZone>(
    schedule: &Schedule,
    now: &DateTime<Tz>,
    last_start: Option<DateTime<Utc>>,
) -> Option<Next> {
    if let Schedule::AtLogin = schedule {
        return None;
    }
    if let Schedule::EveryMinutes { every_minutes, .. } = schedule
        && !is_grid(*every_minutes)
    {
        return Some(Next::Awake {
            every_minutes: *every_minutes,
            after: last_start,
        });
    }
    let tz = schedule.clock(&now.timezone());
    let now = now.with_timezone(&tz);
    let now_utc = now.with_timezone(&Utc);
    (0..=horizon_days(schedule)).find_map(|ahead| {
        let day = now.date_naive() + Duration::days(ahead);
        zoned_day_slots(schedule, &tz, day)
            .into_iter()
            .find(|t| *t > now_utc)
            .map(Next::At)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: `list` said "(in 694 h)" for a date a month away.
    #[test]
    fn next_words_count_days_once_hours_grow_large() {
        let now = Utc.with_ymd_and_hms(2026, 12, 1, 10, 0, 0).unwrap();
        let words = |mins: i64| Next::At(now + Duration::minutes(mins)).words(&now);
        assert!(words(3).ends_with("(in 3 min)"), "{}", words(3));
        assert!(words(5 * 60).ends_with("(in 5 h)"), "{}", words(5 * 60));
        assert!(words(47 * 60).ends_with("(in 47 h)"), "{}", words(47 * 60));
        assert!(
            words(694 * 60).ends_with("(in 28 days)"),
            "{}",
            words(694 * 60)
        );
    }
    use chrono::FixedOffset;
    use chrono_tz::Europe::Berlin;

    fn t(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn which_intervals_are_grids() {
        let grids: Vec<u32> = (1..=1440).filter(|m| is_grid(*m)).collect();
        assert_eq!(
            grids,
            [
                1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30, 60, 120, 180, 240, 360, 480, 720, 1440
            ]
        );
        assert_eq!(
            grid_points(15, 0),
            [(None, 0), (None, 15), (None, 30), (None, 45)]
        );
        assert_eq!(grid_points(360, 0).len(), 4);
        assert_eq!(grid_points(1, 0).len(), 60);
        assert_eq!(grid_calendar(5, 0), "*-*-* *:00/5:00");
        assert_eq!(grid_calendar(1, 0), "*-*-* *:*:00");
        assert_eq!(grid_calendar(60, 0), "*-*-* *:00:00");
        assert_eq!(grid_calendar(120, 0), "*-*-* 00/2:00:00");
        assert_eq!(grid_calendar(1440, 0), "*-*-* 00:00:00");
    }

    #[test]
    fn next_firing_of_grids_daily_and_awake_intervals() {
        let now = t("2026-11-30T16:07:30Z").with_timezone(&Berlin); // 17:07:30 CET
        let every = Schedule::every;
        assert_eq!(
            next_firing(&every(5), &now, None),
            Some(Next::At(t("2026-11-30T16:10:00Z")))
        );
        assert_eq!(
            next_firing(&every(60), &now, None),
            Some(Next::At(t("2026-11-30T17:00:00Z")))
        );
        assert_eq!(
            next_firing(&every(360), &now, None),
            Some(Next::At(t("2026-11-30T17:00:00Z"))) // 18:00 local
        );
        assert_eq!(
            next_firing(&every(1440), &now, None),
            Some(Next::At(t("2026-11-30T23:00:00Z"))) // midnight local
        );
        let last = t("2026-11-30T16:00:00Z");
        let n = next_firing(&every(7), &now, Some(last)).unwrap();
        assert_eq!(n.instant(), Some(t("2026-11-30T16:07:00Z")));
        assert!(n.words(&now).starts_with("due"), "{}", n.words(&now));
        let daily = daily(at(8, 30), &[Weekday::Mon]);
        // 2026-11-30 is a Monday, past 08:30: next Monday.
        assert_eq!(
            next_firing(&daily, &now, None),
            Some(Next::At(t("2026-12-07T07:30:00Z")))
        );
        assert_eq!(
            Next::At(t("2026-11-30T16:10:00Z")).words(&now),
            "2026-11-30 17:10 (in 2 min)"
        );
    }

    #[test]
    fn next_firing_across_dst_in_a_real_zone() {
        let daily = daily(at(2, 30), &[]);
        // Spring forward, 2026-03-29: 02:30 does not exist; the slot is 03:00 CEST (01:00Z).
        let before = t("2026-03-28T23:00:00Z").with_timezone(&Berlin);
        assert_eq!(
            next_firing(&daily, &before, None),
            Some(Next::At(t("2026-03-29T01:00:00Z")))
        );
        // Fall back, 2026-10-25: 02:30 happens twice; the slot is the first (00:30Z).
        let before = t("2026-10-24T22:00:00Z").with_timezone(&Berlin);
        assert_eq!(
            next_firing(&daily, &before, None),
            Some(Next::At(t("2026-10-25T00:30:00Z")))
        );
        // An hourly grid across the spring gap: 01:00 CET, then 03:00 CEST (02:00 is skipped).
        let hourly = Schedule::every(60);
        let at_0130 = t("2026-03-29T00:30:00Z").with_timezone(&Berlin);
        assert_eq!(
            next_firing(&hourly, &at_0130, None),
            Some(Next::At(t("2026-03-29T01:00:00Z")))
        );
    }

    fn at(h: u8, m: u8) -> TimeOfDay {
        TimeOfDay { hour: h, minute: m }
    }

    fn daily(daily_at: TimeOfDay, weekdays: &[Weekday]) -> Schedule {
        Schedule::DailyAt {
            daily_at: vec![daily_at],
            weekdays: weekdays.to_vec(),
            days_of_month: vec![],
            time_zone: None,
            catch_up: CatchUp::Latest,
            at_login: false,
        }
    }

    fn utc(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn latest_slot_today_or_yesterday() {
        let tz = FixedOffset::east_opt(3600).unwrap();
        // 2026-11-29 is a Sunday.
        let now = tz.with_ymd_and_hms(2026, 11, 29, 9, 0, 0).unwrap();
        assert_eq!(
            latest_slot(&daily(at(8, 30), &[]), &now),
            Some(utc("2026-11-29T07:30:00Z"))
        );
        assert_eq!(
            latest_slot(&daily(at(9, 0), &[]), &now),
            Some(utc("2026-11-29T08:00:00Z"))
        );
        assert_eq!(
            latest_slot(&daily(at(9, 1), &[]), &now),
            Some(utc("2026-11-28T08:01:00Z"))
        );
        // Weekdays only: the latest is Friday's.
        let weekdays = [
            Weekday::Mon,
            Weekday::Tue,
            Weekday::Wed,
            Weekday::Thu,
            Weekday::Fri,
        ];
        assert_eq!(
            latest_slot(&daily(at(8, 30), &weekdays), &now),
            Some(utc("2026-11-27T07:30:00Z"))
        );
    }

    /// Fires at each of `firings` (UTC) in Berlin, running only what the guard lets through, the
    /// way the runner decides (a start at or after the latest slot means done); returns the runs.
    fn simulate(firings: &[&str], earlier_starts: &[&str]) -> Vec<DateTime<Utc>> {
        let mut starts: Vec<DateTime<Utc>> = earlier_starts.iter().map(|s| utc(s)).collect();
        let mut runs = Vec::new();
        for f in firings {
            let now = utc(f).with_timezone(&chrono_tz::Europe::Berlin);
            let Some(slot) = latest_slot(&daily(at(2, 30), &[]), &now) else {
                continue;
            };
            let last_start = starts.iter().copied().max();
            if !slot_done(slot, last_start, None) {
                starts.push(utc(f));
                runs.push(utc(f));
            }
        }
        runs
    }

    #[test]
    fn a_0230_job_runs_exactly_once_on_the_spring_forward_day_in_berlin() {
        // 2026-03-29: clocks jump 02:00 CET -> 03:00 CEST; 02:30 does not exist, the slot is 03:00.
        // Firings: just before the jump, at the jump (systemd's Persistent/launchd's wake), again
        // a minute later (RunAtLoad after a login), in the afternoon, and just before midnight.
        let runs = simulate(
            &[
                "2026-03-29T00:59:00Z",
                "2026-03-29T01:00:00Z",
                "2026-03-29T01:01:00Z",
                "2026-03-29T13:00:00Z",
                "2026-03-29T21:59:00Z",
            ],
            &["2026-03-28T01:30:00Z"],
        );
        assert_eq!(runs, [utc("2026-03-29T01:00:00Z")]);
    }

    #[test]
    fn a_0230_job_runs_exactly_once_on_the_fall_back_day_in_berlin() {
        // 2026-10-25: clocks go back 03:00 CEST -> 02:00 CET; 02:30 happens twice (00:30Z and
        // 01:30Z), and a calendar timer may fire at both.
        let runs = simulate(
            &[
                "2026-10-25T00:30:00Z",
                "2026-10-25T01:30:00Z",
                "2026-10-25T05:00:00Z",
                "2026-10-25T22:59:00Z",
            ],
            &["2026-10-24T00:30:00Z"],
        );
        assert_eq!(runs, [utc("2026-10-25T00:30:00Z")]);
        // Asleep across both 02:30s, woken at 09:00 CET: one catch-up run, then nothing.
        let runs = simulate(
            &["2026-10-25T08:00:00Z", "2026-10-25T08:00:01Z"],
            &["2026-10-24T00:30:00Z"],
        );
        assert_eq!(runs, [utc("2026-10-25T08:00:00Z")]);
    }

    #[test]
    fn jitter_is_the_same_for_a_slot_within_bounds_and_spread() {
        let slot = utc("2026-12-01T08:30:00Z");
        assert_eq!(jitter_delay("backup", Some(slot), 0), Duration::zero());
        let d = jitter_delay("backup", Some(slot), 600);
        assert_eq!(d, jitter_delay("backup", Some(slot), 600));
        assert!(d >= Duration::zero() && d <= Duration::seconds(600), "{d}");
        // Another slot, another name: (almost always) another delay; over many, they spread.
        let delays: Vec<i64> = (0..200)
            .map(|i| jitter_delay(&format!("job{i}"), Some(slot), 600).num_milliseconds())
            .collect();
        assert!(delays.iter().all(|d| (0..=600_000).contains(d)));
        let low = delays.iter().filter(|d| **d < 300_000).count();
        assert!((60..=140).contains(&low), "{low} of 200 in the first half");
        let slots: std::collections::BTreeSet<i64> = (0..50)
            .map(|i| jitter_delay("backup", Some(slot + Duration::days(i)), 600).num_milliseconds())
            .collect();
        assert!(
            slots.len() > 40,
            "{} distinct delays over 50 slots",
            slots.len()
        );
        // Without a slot (awake time) the name alone decides.
        assert_eq!(
            jitter_delay("backup", None, 600),
            jitter_delay("backup", None, 600)
        );
    }

    /// Fires `schedule` every minute after `from` until `to` (UTC) in `zone`, as systemd's
    /// Persistent= and launchd's catch-ups may, running what the guard lets through (a run at
    /// `from` is the last before); returns the runs.
    fn every_minute_through<Tz: TimeZone>(
        schedule: &Schedule,
        zone: &Tz,
        from: &str,
        to: &str,
    ) -> Vec<DateTime<Utc>> {
        let (mut t, to) = (utc(from) + Duration::minutes(1), utc(to));
        let mut runs: Vec<DateTime<Utc>> = vec![utc(from)];
        while t <= to {
            if let Some(slot) = latest_slot(schedule, &t.with_timezone(zone))
                && !slot_done(slot, runs.last().copied(), None)
            {
                runs.push(t);
            }
            t += Duration::minutes(1);
        }
        runs.split_off(1)
    }

    fn times(at: &[TimeOfDay], days_of_month: &[u8]) -> Schedule {
        Schedule::DailyAt {
            daily_at: at.to_vec(),
            weekdays: vec![],
            days_of_month: days_of_month.to_vec(),
            time_zone: None,
            catch_up: CatchUp::Latest,
            at_login: false,
        }
    }

    /// Every daily kind on Berlin's and New York's DST days, fired every minute: one run per slot,
    /// a time in the gap at the first minute after it, a time in the fold once.
    #[test]
    fn each_slot_runs_once_on_dst_days_in_berlin_and_new_york() {
        use chrono_tz::America::New_York;
        // Berlin, spring (2026-03-29, 02:00 -> 03:00 CEST) and autumn (2026-10-25, 03:00 -> 02:00).
        let list = times(&[at(1, 30), at(2, 30), at(12, 0)], &[]);
        assert_eq!(
            every_minute_through(
                &list,
                &Berlin,
                "2026-03-28T23:00:00Z",
                "2026-03-29T21:59:00Z"
            ),
            [
                utc("2026-03-29T00:30:00Z"), // 01:30 CET
                utc("2026-03-29T01:00:00Z"), // 02:30 is in the gap: 03:00 CEST
                utc("2026-03-29T10:00:00Z"), // 12:00 CEST
            ]
        );
        assert_eq!(
            every_minute_through(
                &list,
                &Berlin,
                "2026-10-24T22:00:00Z",
                "2026-10-25T22:59:00Z"
            ),
            [
                utc("2026-10-24T23:30:00Z"), // 01:30 CEST
                utc("2026-10-25T00:30:00Z"), // the first 02:30 (CEST), not the second
                utc("2026-10-25T11:00:00Z"), // 12:00 CET
            ]
        );
        let monthly = times(&[at(2, 30)], &[1, 29]);
        assert_eq!(
            every_minute_through(
                &monthly,
                &Berlin,
                "2026-03-28T23:00:00Z",
                "2026-04-01T21:00:00Z"
            ),
            [utc("2026-03-29T01:00:00Z"), utc("2026-04-01T00:30:00Z")]
        );
        // New York, spring (2026-03-08, 02:00 -> 03:00 EDT) and autumn (2026-11-01, 02:00 -> 01:00).
        let list = times(&[at(1, 30), at(2, 30)], &[]);
        assert_eq!(
            every_minute_through(
                &list,
                &New_York,
                "2026-03-08T05:00:00Z",
                "2026-03-09T03:59:00Z"
            ),
            [utc("2026-03-08T06:30:00Z"), utc("2026-03-08T07:00:00Z")]
        );
        assert_eq!(
            every_minute_through(
                &list,
                &New_York,
                "2026-11-01T04:00:00Z",
                "2026-11-02T04:59:00Z"
            ),
            // 01:30 EDT once (the 01:30 EST an hour later is the same slot), 02:30 EST.
            [utc("2026-11-01T05:30:00Z"), utc("2026-11-01T07:30:00Z")]
        );
        let monthly = times(&[at(1, 30)], &[1, 8]);
        assert_eq!(
            every_minute_through(
                &monthly,
                &New_York,
                "2026-10-31T04:00:00Z",
                "2026-11-02T04:59:00Z"
            ),
            [utc("2026-11-01T05:30:00Z")]
        );
        // Asleep over both of a day's slots (last run the evening before), woken at 20:00 CET:
        // the latest slot, 18:00, runs once; 08:00 is not run on its own.
        let twice = times(&[at(8, 0), at(18, 0)], &[]);
        let woken = utc("2026-10-25T19:00:00Z");
        let slot = latest_slot(&twice, &woken.with_timezone(&Berlin)).unwrap();
        assert_eq!(slot, utc("2026-10-25T17:00:00Z"));
        assert!(!slot_done(slot, Some(utc("2026-10-24T16:00:00Z")), None));
        let after = latest_slot(&twice, &utc("2026-10-25T19:01:00Z").with_timezone(&Berlin));
        assert!(slot_done(after.unwrap(), Some(woken), None));
    }

    #[test]
    fn done_rules() {
        let slot = utc("2026-11-29T07:30:00Z");
        assert!(!slot_done(slot, None, None));
        assert!(!slot_done(slot, Some(utc("2026-11-29T07:29:59Z")), None));
        assert!(slot_done(slot, Some(slot), None));
        assert!(slot_done(slot, None, Some(utc("2026-11-29T08:00:00Z"))));
        assert!(!slot_done(slot, None, Some(utc("2026-11-28T08:00:00Z"))));
    }
}
