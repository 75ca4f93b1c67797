//! The zone a schedule's wall clock is read in (docs/units.md, "Time zones"): the machine's own,
//! or the IANA zone its `time_zone` names. [`ClockZone`] is a `chrono` time zone, so every slot
//! search works the same in either; `M` is the machine's zone (`chrono::Local` in the program, a
//! fixed zone in tests).

use std::fmt;

use chrono::{FixedOffset, MappedLocalTime, NaiveDate, NaiveDateTime, Offset, TimeZone};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An IANA zone a schedule names, checked against the zone database built into the program.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ZoneName(pub chrono_tz::Tz);

impl ZoneName {
    /// The zone called `name` (`America/New_York`), or why not.
    pub fn parse(name: &str) -> Result<Self, String> {
        // Said back in errors: a long value is cut.
        let shown: String = name.chars().take(60).collect();
        let name_in = name;
        let name = shown.as_str();
        if name_in.trim() != name_in || name_in.is_empty() || name_in.len() > 60 {
            return Err(format!("{name:?} is not an IANA zone name"));
        }
        name_in.parse::<chrono_tz::Tz>().map(ZoneName).map_err(|_| {
            format!(
                "{name:?} is not a zone of the IANA database (write it as Region/City, like \"America/New_York\" or \"Europe/Berlin\"; \"UTC\" for UTC)"
            )
        })
    }

    /// Its IANA name.
    pub fn name(self) -> &'static str {
        self.0.name()
    }
}

impl fmt::Display for ZoneName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for ZoneName {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for ZoneName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        ZoneName::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// What a firing missed while the machine slept or was off is owed (`catch_up` of `[schedule]`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CatchUp {
    /// One firing for the latest missed slot (what launchd and systemd's `Persistent=` do).
    #[default]
    Latest,
    /// Each missed slot once, oldest first, within [`CATCH_UP_DAYS`] and [`CATCH_UP_SLOTS`].
    All,
    /// None: the missed slots are recorded as skipped (`missed_slot`), the next slot runs.
    None,
}

impl CatchUp {
    pub const ALL: [CatchUp; 3] = [CatchUp::Latest, CatchUp::All, CatchUp::None];

    pub fn as_str(self) -> &'static str {
        match self {
            CatchUp::Latest => "latest",
            CatchUp::All => "all",
            CatchUp::None => "none",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// Whether it is the default (left out of records and JSON).
    pub fn is_latest(&self) -> bool {
        *self == CatchUp::Latest
    }
}

/// How far back a firing looks for the slots it missed (`catch_up = "all"` and `"none"`).
pub const CATCH_UP_DAYS: i64 = 7;
/// The most missed slots one firing runs (`all`) or records (`none`): the newest ones.
pub const CATCH_UP_SLOTS: usize = 24;
/// How late a firing may start after its slot and still be on time: later, its slot was missed
/// (the machine slept or was off) and this firing is the manager's catch-up.
pub const ON_TIME_SECONDS: i64 = 120;

/// A schedule's zone: the machine's (`M`), or a named one.
#[derive(Clone)]
pub enum ClockZone<M> {
    Machine(M),
    Named(chrono_tz::Tz),
}

impl<M: TimeZone> ClockZone<M> {
    /// The zone a schedule with `time_zone` reads its wall clock in, on a machine in `machine`.
    pub fn of(time_zone: Option<ZoneName>, machine: &M) -> Self {
        match time_zone {
            Some(z) => ClockZone::Named(z.0),
            None => ClockZone::Machine(machine.clone()),
        }
    }
}

impl<M> fmt::Debug for ClockZone<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClockZone::Machine(_) => f.write_str("the machine's zone"),
            ClockZone::Named(tz) => f.write_str(tz.name()),
        }
    }
}

/// An offset of a [`ClockZone`]: its fixed offset at one instant, and the zone it came from.
#[derive(Clone)]
pub struct ClockOffset<M> {
    zone: ClockZone<M>,
    fixed: FixedOffset,
}

impl<M> fmt::Debug for ClockOffset<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({:?})", self.fixed, self.zone)
    }
}

impl<M: Clone> Offset for ClockOffset<M> {
    fn fix(&self) -> FixedOffset {
        self.fixed
    }
}

impl<M> fmt::Display for ClockOffset<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.fixed, f)
    }
}

impl<M: TimeZone> ClockZone<M> {
    /// Its offset `fixed`, as one of its own.
    fn offset(&self, fixed: FixedOffset) -> ClockOffset<M> {
        ClockOffset {
            zone: self.clone(),
            fixed,
        }
    }
}

impl<M: TimeZone> TimeZone for ClockZone<M> {
    type Offset = ClockOffset<M>;

    fn from_offset(offset: &Self::Offset) -> Self {
        offset.zone.clone()
    }

    fn offset_from_local_date(&self, local: &NaiveDate) -> MappedLocalTime<Self::Offset> {
        self.offset_from_local_datetime(&local.and_hms_opt(0, 0, 0).expect("midnight"))
    }

    fn offset_from_local_datetime(&self, local: &NaiveDateTime) -> MappedLocalTime<Self::Offset> {
        match self {
            ClockZone::Machine(m) => m.offset_from_local_datetime(local).map(|o| o.fix()),
            ClockZone::Named(tz) => tz.offset_from_local_datetime(local).map(|o| o.fix()),
        }
        .map(|fixed| self.offset(fixed))
    }

    fn offset_from_utc_date(&self, utc: &NaiveDate) -> Self::Offset {
        self.offset_from_utc_datetime(&utc.and_hms_opt(0, 0, 0).expect("midnight"))
    }

    fn offset_from_utc_datetime(&self, utc: &NaiveDateTime) -> Self::Offset {
        let fixed = match self {
            ClockZone::Machine(m) => m.offset_from_utc_datetime(utc).fix(),
            ClockZone::Named(tz) => tz.offset_from_utc_datetime(utc).fix(),
        };
        self.offset(fixed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;

    #[test]
    fn a_named_zone_reads_its_own_wall_clock_on_any_machine() {
        let ny = ZoneName::parse("America/New_York").unwrap();
        let on_berlin = ClockZone::of(Some(ny), &chrono_tz::Europe::Berlin);
        let nine = NaiveDate::from_ymd_opt(2026, 7, 1)
            .unwrap()
            .and_hms_opt(9, 0, 0)
            .unwrap();
        let t = on_berlin.from_local_datetime(&nine).single().unwrap();
        assert_eq!(
            t.with_timezone(&Utc).to_rfc3339(),
            "2026-07-01T13:00:00+00:00"
        );
        // Without a zone, the machine's: 09:00 in Berlin's summer is 07:00 UTC.
        let machine = ClockZone::of(None, &chrono_tz::Europe::Berlin);
        let t = machine.from_local_datetime(&nine).single().unwrap();
        assert_eq!(
            t.with_timezone(&Utc).to_rfc3339(),
            "2026-07-01T07:00:00+00:00"
        );
        // The DST gap of the named zone, not the machine's: 02:30 on 8 March in New York.
        let gap = NaiveDate::from_ymd_opt(2026, 3, 8)
            .unwrap()
            .and_hms_opt(2, 30, 0)
            .unwrap();
        assert!(on_berlin.from_local_datetime(&gap).single().is_none());
        assert!(machine.from_local_datetime(&gap).single().is_some());
    }

    #[test]
    fn zone_names_are_checked_against_the_database() {
        assert_eq!(
            ZoneName::parse("Asia/Kolkata").unwrap().name(),
            "Asia/Kolkata"
        );
        assert_eq!(ZoneName::parse("UTC").unwrap().name(), "UTC");
        for bad in ["", "New York", "America/Gotham", " UTC", "+05:00"] {
            let e = ZoneName::parse(bad).unwrap_err();
            assert!(e.contains("zone"), "{bad:?}: {e}");
        }
        let json = serde_json::to_string(&ZoneName::parse("Europe/Berlin").unwrap()).unwrap();
        assert_eq!(json, "\"Europe/Berlin\"");
        assert!(serde_json::from_str::<ZoneName>("\"Mars/Base\"").is_err());
    }
}
