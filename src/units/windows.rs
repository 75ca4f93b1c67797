//! Windows Task Scheduler tasks (docs/windows.md): one task per automation, as the XML `schtasks
//! /Create /XML` takes (task schema 1.2), at the path `\local\<namespace>\<name>`.
//!
//! Triggers: a time of day on some days is a `CalendarTrigger` (`ScheduleByDay`, `ScheduleByWeek`
//! for weekdays, `ScheduleByMonth` for days of the month and months, `ScheduleByMonthDayOfWeek`
//! for weekdays in some months). Times of one day that step evenly (a wall-clock grid, `*/15` in
//! cron) are one trigger with a `Repetition` over the day, anchored again each day, so a DST day
//! does not shift the grid; other times are a trigger each, at most [`MAX_TRIGGERS`] in all (what
//! cannot be said in that many is refused, naming the field to simplify). `at_login` is a
//! `LogonTrigger`; an interval of awake time, which Task Scheduler cannot count, a `TimeTrigger`
//! repeating every N minutes of the wall clock (the header says so). The task fires on catch-up
//! (`StartWhenAvailable`, as `Persistent=true`), on battery (both battery settings false: their
//! defaults silently skip a laptop's jobs), in the user's session (`InteractiveToken`), one at a
//! time by `overlap` (`MultipleInstancesPolicy`), and is ended by Task Scheduler only past the
//! runner's own deadline (`ExecutionTimeLimit` = the unit backstop). The jitter is the runner's,
//! as on systemd and launchd: the same slot always waits the same delay, which `list` shows ahead;
//! Task Scheduler's `RandomDelay` is random per firing.

use std::fmt::Write as _;

use quick_xml::Writer;
use quick_xml::events::{BytesDecl, BytesEnd, BytesStart, BytesText, Event};

use super::{MachinePaths, UnitFile, header_text, notes, program_arguments, stop_timeout};
use crate::definition::{Definition, Overlap};
use crate::names::{Label, Namespace};
use crate::schedule::{self, Schedule, Weekday};

/// The most triggers one task may hold.
pub const MAX_TRIGGERS: usize = 48;

/// The namespace of the task schema.
const TASK_NS: &str = "http://schemas.microsoft.com/windows/2004/02/mit/task";

/// A date before any firing, from which every calendar trigger counts (a fixed one: the file
/// is the same on every render).
const START_DATE: &str = "2026-01-01";

/// On which days a calendar trigger fires.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Days {
    /// Every day.
    Every,
    /// On these weekdays, every week.
    Weekdays(Vec<Weekday>),
    /// On these days of these months (1..=31, 1..=12).
    MonthDays { days: Vec<u32>, months: Vec<u32> },
    /// On these weekdays of these months.
    MonthWeekdays {
        weekdays: Vec<Weekday>,
        months: Vec<u32>,
    },
}

/// One trigger of a task.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// At `start` (minutes after midnight) on `days`, and then every `every` minutes while
    /// `span` seconds last (`None`: once).
    Calendar {
        start: u32,
        repeat: Option<(u32, u32)>,
        days: Days,
    },
    /// Every `minutes` minutes of elapsed time from its start boundary (an interval of awake
    /// time, which Task Scheduler cannot count).
    Every { minutes: u32 },
    /// When the user logs on.
    Logon,
}

/// Why a schedule cannot be said in triggers, or its triggers.
pub fn triggers(schedule: &Schedule) -> Result<Vec<Trigger>, String> {
    let mut out = match schedule {
        Schedule::AtLogin => Vec::new(),
        Schedule::EveryMinutes { every_minutes, .. } if !schedule::is_grid(*every_minutes) => {
            vec![Trigger::Every {
                minutes: *every_minutes,
            }]
        }
        Schedule::EveryMinutes {
            every_minutes,
            offset_minutes,
            ..
        } => {
            let times: Vec<u32> = (*offset_minutes..1440)
                .step_by(*every_minutes as usize)
                .collect();
            at_times(&times, &Days::Every)
        }
        Schedule::DailyAt {
            daily_at,
            weekdays,
            days_of_month,
            ..
        } => {
            let days = if !weekdays.is_empty() {
                let mut w = weekdays.clone();
                w.sort();
                Days::Weekdays(w)
            } else if !days_of_month.is_empty() {
                Days::MonthDays {
                    days: days_of_month.iter().map(|d| u32::from(*d)).collect(),
                    months: (1..=12).collect(),
                }
            } else {
                Days::Every
            };
            let times: Vec<u32> = daily_at.iter().map(|t| t.minutes()).collect();
            // A list of times is a trigger each: they need not step evenly.
            times
                .iter()
                .map(|t| Trigger::Calendar {
                    start: *t,
                    repeat: None,
                    days: days.clone(),
                })
                .collect()
        }
        Schedule::Cron { cron, .. } => cron_triggers(cron),
    };
    if schedule.at_login() {
        out.push(Trigger::Logon);
    }
    if out.len() > MAX_TRIGGERS {
        let what = match schedule {
            Schedule::Cron { cron, .. } => format!(
                "cron = {:?}: simplify its minute or hour field (minutes that step evenly within an hour, such as */15, are one trigger for that hour)",
                cron.text()
            ),
            _ => "fewer times of day".to_owned(),
        };
        return Err(format!(
            "it takes {} Task Scheduler triggers, more than the {MAX_TRIGGERS} a task holds; {what}",
            out.len()
        ));
    }
    Ok(out)
}

/// The triggers of a cron expression: its times of day on each of its day rules (two when a day
/// matches by day-of-month *or* day-of-week).
fn cron_triggers(cron: &schedule::Cron) -> Vec<Trigger> {
    let times: Vec<u32> = cron.times().map(|(h, m)| h * 60 + m).collect();
    day_rules(cron)
        .iter()
        .flat_map(|days| at_times(&times, days))
        .collect()
}

/// A cron expression's days as calendar trigger rules: one, or two when a day matches by
/// day-of-month *or* day-of-week.
fn day_rules(cron: &schedule::Cron) -> Vec<Days> {
    let (months, days, weekdays) = cron.day_lists();
    let every_month = months.len() == 12;
    let by_weekday = |w: Vec<Weekday>| {
        if every_month {
            Days::Weekdays(w)
        } else {
            Days::MonthWeekdays {
                weekdays: w,
                months: months.clone(),
            }
        }
    };
    match (days, weekdays) {
        (None, None) if every_month => vec![Days::Every],
        (None, None) => vec![Days::MonthDays {
            days: (1..=31).collect(),
            months: months.clone(),
        }],
        (Some(d), None) => vec![Days::MonthDays {
            days: d,
            months: months.clone(),
        }],
        (None, Some(w)) => vec![by_weekday(w)],
        (Some(d), Some(w)) => vec![
            Days::MonthDays {
                days: d,
                months: months.clone(),
            },
            by_weekday(w),
        ],
    }
}

/// Triggers firing at `times` (minutes after midnight, sorted) on `days`: per hour, one trigger
/// repeating within the hour when its minutes step evenly (a grid, `*/10`), else one per time. A
/// repetition counts elapsed time and only its start is on the wall clock, so a chain never
/// crosses an hour: a DST change, always on an hour or half hour boundary of the day before it,
/// cannot shift it.
fn at_times(times: &[u32], days: &Days) -> Vec<Trigger> {
    let mut out = Vec::new();
    for hour in 0..24 {
        let in_hour: Vec<u32> = times.iter().copied().filter(|t| t / 60 == hour).collect();
        let even = in_hour.len() > 1 && {
            let step = in_hour[1] - in_hour[0];
            in_hour.windows(2).all(|w| w[1] - w[0] == step)
        };
        if even {
            let (first, last) = (in_hour[0], in_hour[in_hour.len() - 1]);
            out.push(Trigger::Calendar {
                start: first,
                // The span ends half a minute after the last time: the last repetition is
                // inside it and the next (a minute later at the least) outside, whether its end
                // counts or not.
                repeat: Some((in_hour[1] - in_hour[0], (last - first) * 60 + 30)),
                days: days.clone(),
            });
        } else {
            out.extend(in_hour.iter().map(|t| Trigger::Calendar {
                start: *t,
                repeat: None,
                days: days.clone(),
            }));
        }
    }
    out
}

/// `def`'s task, or why Task Scheduler cannot run it as its definition says.
pub fn task(
    def: &Definition,
    namespace: &Namespace,
    label: &Label,
    paths: &MachinePaths,
) -> Result<UnitFile, String> {
    if let Some(t) = &def.trigger {
        return Err(format!(
            "{}: it is also started {}, which Task Scheduler does not do (it watches no paths, and a chain needs the runner to start a task): leave [trigger] out for Windows",
            def.name,
            t.words()
        ));
    }
    let Some(schedule) = &def.schedule else {
        return Err(format!("{} has no [schedule]: there is no task", def.name));
    };
    let triggers = triggers(schedule).map_err(|e| format!("{}: {e}", def.name))?;
    // A day matching both of a cron's day rules (a Sunday the 1st for `0 2 1 * sun`) has two
    // triggers at one instant: the second meets the first running. `replace` would stop it.
    if let Schedule::Cron { cron, .. } = schedule
        && day_rules(cron).len() > 1
        && def.policy.overlap == Overlap::Replace
    {
        return Err(format!(
            "{}: cron = {:?} matches days by day-of-month or day-of-week, which Task Scheduler says as two triggers that both fire on a day matching both; with overlap = \"replace\" the second would stop the first: use \"skip\" or \"queue\" for Windows",
            def.name,
            cron.text()
        ));
    }
    let mut x = Xml::new();
    x.decl();
    x.comment(&header_text(def));
    for note in notes(def) {
        x.comment(&note);
    }
    x.open_with("Task", &[("version", "1.2"), ("xmlns", TASK_NS)]);
    x.open("RegistrationInfo");
    x.leaf("Description", &description(def, schedule));
    x.leaf("URI", &task_path(namespace, &def.name));
    x.close("RegistrationInfo");
    x.open("Triggers");
    for t in &triggers {
        trigger(&mut x, t);
    }
    x.close("Triggers");
    x.open("Principals");
    x.open_with("Principal", &[("id", "Author")]);
    x.leaf("LogonType", "InteractiveToken");
    x.leaf("RunLevel", "LeastPrivilege");
    x.close("Principal");
    x.close("Principals");
    settings(&mut x, def);
    x.open_with("Actions", &[("Context", "Author")]);
    x.open("Exec");
    let argv = program_arguments(def, namespace, paths);
    x.leaf("Command", &argv[0]);
    let args: Vec<String> = argv[1..].iter().map(|a| windows_arg(a)).collect();
    x.leaf("Arguments", &args.join(" "));
    x.leaf("WorkingDirectory", &paths.root);
    x.close("Exec");
    x.close("Actions");
    x.close("Task");
    Ok(UnitFile {
        name: format!("{label}.xml"),
        bytes: x.finish(),
    })
}

/// The task's path in Task Scheduler's library: `\local\<namespace>\<name>`.
pub fn task_path(namespace: &Namespace, name: &crate::names::Name) -> String {
    format!("\\local\\{namespace}\\{name}")
}

fn description(def: &Definition, schedule: &Schedule) -> String {
    let what = def
        .description
        .as_deref()
        .map_or_else(String::new, |d| format!(" - {d}"));
    format!("automations: {}{what} ({})", def.name, schedule.words())
}

/// One trigger's element.
fn trigger(x: &mut Xml, t: &Trigger) {
    match t {
        Trigger::Logon => {
            x.open("LogonTrigger");
            x.leaf("Enabled", "true");
            x.close("LogonTrigger");
        }
        // The schema's order: Enabled, StartBoundary, Repetition, then the kind's own.
        Trigger::Every { minutes } => {
            x.open("TimeTrigger");
            x.leaf("Enabled", "true");
            x.leaf("StartBoundary", &format!("{START_DATE}T00:00:00"));
            x.open("Repetition");
            x.leaf("Interval", &duration(*minutes * 60));
            x.leaf("StopAtDurationEnd", "false");
            x.close("Repetition");
            x.close("TimeTrigger");
        }
        Trigger::Calendar {
            start,
            repeat,
            days,
        } => {
            x.open("CalendarTrigger");
            x.leaf("Enabled", "true");
            x.leaf(
                "StartBoundary",
                &format!("{START_DATE}T{:02}:{:02}:00", start / 60, start % 60),
            );
            if let Some((every, span)) = repeat {
                x.open("Repetition");
                x.leaf("Interval", &duration(*every * 60));
                x.leaf("Duration", &duration(*span));
                x.leaf("StopAtDurationEnd", "false");
                x.close("Repetition");
            }
            schedule_by(x, days);
            x.close("CalendarTrigger");
        }
    }
}

/// The `ScheduleBy…` element of a calendar trigger.
fn schedule_by(x: &mut Xml, days: &Days) {
    let weekdays = |x: &mut Xml, w: &[Weekday]| {
        x.open("DaysOfWeek");
        for d in w {
            x.empty(day_name(*d));
        }
        x.close("DaysOfWeek");
    };
    let months = |x: &mut Xml, m: &[u32]| {
        x.open("Months");
        for m in m {
            x.empty(month_name(*m));
        }
        x.close("Months");
    };
    match days {
        Days::Every => {
            x.open("ScheduleByDay");
            x.leaf("DaysInterval", "1");
            x.close("ScheduleByDay");
        }
        Days::Weekdays(w) => {
            x.open("ScheduleByWeek");
            weekdays(x, w);
            x.leaf("WeeksInterval", "1");
            x.close("ScheduleByWeek");
        }
        Days::MonthDays { days, months: m } => {
            x.open("ScheduleByMonth");
            x.open("DaysOfMonth");
            for d in days {
                x.leaf("Day", &d.to_string());
            }
            x.close("DaysOfMonth");
            months(x, m);
            x.close("ScheduleByMonth");
        }
        Days::MonthWeekdays {
            weekdays: w,
            months: m,
        } => {
            x.open("ScheduleByMonthDayOfWeek");
            x.open("Weeks");
            for week in ["1", "2", "3", "4", "Last"] {
                x.leaf("Week", week);
            }
            x.close("Weeks");
            weekdays(x, w);
            months(x, m);
            x.close("ScheduleByMonthDayOfWeek");
        }
    }
}

/// A month (1–12) as the schema names it: its English name, as chrono has it.
fn month_name(m: u32) -> &'static str {
    u8::try_from(m)
        .ok()
        .and_then(|m| chrono::Month::try_from(m).ok())
        .expect("a valid definition's month is 1 to 12")
        .name()
}

fn day_name(d: Weekday) -> &'static str {
    match d {
        Weekday::Mon => "Monday",
        Weekday::Tue => "Tuesday",
        Weekday::Wed => "Wednesday",
        Weekday::Thu => "Thursday",
        Weekday::Fri => "Friday",
        Weekday::Sat => "Saturday",
        Weekday::Sun => "Sunday",
    }
}

/// The task's settings: one instance by `overlap`, on battery, catch-up, the deadline.
fn settings(x: &mut Xml, def: &Definition) {
    x.open("Settings");
    x.leaf(
        "MultipleInstancesPolicy",
        match def.policy.overlap {
            Overlap::Skip => "IgnoreNew",
            Overlap::Queue => "Queue",
            Overlap::Replace => "StopExisting",
        },
    );
    x.leaf("DisallowStartIfOnBatteries", "false");
    x.leaf("StopIfGoingOnBatteries", "false");
    x.leaf("AllowHardTerminate", "true");
    x.leaf("StartWhenAvailable", "true");
    x.leaf("RunOnlyIfNetworkAvailable", "false");
    x.leaf("AllowStartOnDemand", "true");
    x.leaf("Enabled", "true");
    x.leaf("Hidden", "false");
    x.leaf("RunOnlyIfIdle", "false");
    x.leaf("WakeToRun", "false");
    x.leaf("ExecutionTimeLimit", &format!("PT{}S", stop_timeout(def)));
    x.close("Settings");
}

/// `seconds` as an XML duration: `PT15M`, `PT2H`, `PT23H45M30S`, `P1D`.
fn duration(seconds: u32) -> String {
    let (d, h, m, s) = (
        seconds / 86_400,
        seconds % 86_400 / 3600,
        seconds % 3600 / 60,
        seconds % 60,
    );
    let mut out = String::from("P");
    if d > 0 {
        let _ = write!(out, "{d}D");
    }
    if h + m + s > 0 {
        out.push('T');
        for (n, unit) in [(h, 'H'), (m, 'M'), (s, 'S')] {
            if n > 0 {
                let _ = write!(out, "{n}{unit}");
            }
        }
    }
    out
}

/// `a` as one argument of a Windows command line (as `CommandLineToArgvW` reads it): as it is
/// when it has no space, tab or quote, else in quotes, with backslashes before a quote doubled.
pub fn windows_arg(a: &str) -> String {
    if !a.is_empty() && !a.contains([' ', '\t', '"']) {
        return a.to_owned();
    }
    let mut out = String::from("\"");
    let mut slashes = 0;
    for c in a.chars() {
        match c {
            '\\' => slashes += 1,
            '"' => {
                out.extend(std::iter::repeat_n('\\', slashes * 2 + 1));
                out.push('"');
                slashes = 0;
                continue;
            }
            _ => {}
        }
        if c != '\\' {
            out.extend(std::iter::repeat_n('\\', slashes));
            slashes = 0;
            out.push(c);
        }
    }
    out.extend(std::iter::repeat_n('\\', slashes * 2));
    out.push('"');
    out
}

/// A small writer over quick-xml: elements opened and closed by name, leaves with text, two
/// spaces of indent.
struct Xml {
    w: Writer<Vec<u8>>,
}

impl Xml {
    fn new() -> Self {
        Self {
            w: Writer::new_with_indent(Vec::new(), b' ', 2),
        }
    }

    fn event(&mut self, e: Event<'_>) {
        self.w
            .write_event(e)
            .expect("writing XML to memory cannot fail");
    }

    fn decl(&mut self) {
        self.event(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)));
    }

    /// An XML comment; `--` cannot appear inside one.
    fn comment(&mut self, text: &str) {
        let text = format!(" {} ", super::comment_safe(text));
        self.event(Event::Comment(BytesText::from_escaped(text)));
    }

    fn open(&mut self, name: &str) {
        self.event(Event::Start(BytesStart::new(name)));
    }

    fn open_with(&mut self, name: &str, attrs: &[(&str, &str)]) {
        let mut e = BytesStart::new(name);
        for a in attrs {
            e.push_attribute(*a);
        }
        self.event(Event::Start(e));
    }

    fn close(&mut self, name: &str) {
        self.event(Event::End(BytesEnd::new(name)));
    }

    fn empty(&mut self, name: &str) {
        self.event(Event::Empty(BytesStart::new(name)));
    }

    fn leaf(&mut self, name: &str, text: &str) {
        self.open(name);
        self.event(Event::Text(BytesText::new(text)));
        self.close(name);
    }

    fn finish(self) -> Vec<u8> {
        let mut out = self.w.into_inner();
        out.push(b'\n');
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_arguments() {
        assert_eq!(duration(15 * 60), "PT15M");
        assert_eq!(duration(7200), "PT2H");
        assert_eq!(duration(1425 * 60 + 30), "PT23H45M30S");
        assert_eq!(duration(86_400), "P1D");
        assert_eq!(windows_arg("run"), "run");
        assert_eq!(
            windows_arg("C:\\Program Files\\a"),
            "\"C:\\Program Files\\a\""
        );
        assert_eq!(windows_arg("a\"b"), "\"a\\\"b\"");
        assert_eq!(windows_arg("dir\\ with\\"), "\"dir\\ with\\\\\"");
        assert_eq!(windows_arg(""), "\"\"");
    }

    #[test]
    fn even_times_are_one_repeating_trigger() {
        let t = at_times(&[5, 20, 35, 50], &Days::Every);
        assert_eq!(
            t,
            [Trigger::Calendar {
                start: 5,
                repeat: Some((15, 45 * 60 + 30)),
                days: Days::Every
            }]
        );
        // A chain never crosses an hour: 01:00 and 02:30 are two triggers, as are uneven times.
        assert_eq!(at_times(&[60, 150], &Days::Every).len(), 2);
        assert_eq!(at_times(&[60, 70, 100], &Days::Every).len(), 3);
        let grid: Vec<u32> = (0..1440).step_by(15).collect();
        assert_eq!(at_times(&grid, &Days::Every).len(), 24);
    }
}
