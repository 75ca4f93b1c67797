//! The zone a schedule's wall clock is read in (docs/units.md, "Time zones"): the machine's own,
//! or the IANA zone its `time_zone` names. [`ClockZone`] is a `chrono` time zone, so every slot
//! search works the same in either; `M` is the machine's zone (`chrono::Local` in the program, a
//! fixed zone in tests).

use std::fmt;

use chrono::{FixedOffset, MappedLocalTime, NaiveDate, NaiveDateTime, Offset, TimeZone};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An IANA zone a schedule names: a name of the IANA database (the list built into the program),
/// whose rules this machine's zone database has (`/usr/share/zoneinfo`, where systemd reads them
/// too). Only the name is kept here; the rules are read from the system once, when first asked
/// ([`Zone`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ZoneName(chrono_tz::Tz);

impl ZoneName {
    /// The zone called `name` (`America/New_York`), or why not.
    pub fn parse(name: &str) -> Result<Self, String> {
        // Said back in errors: a long value is cut.
        let shown: String = name.chars().take(60).collect();
        if name.trim() != name || name.is_empty() || name.len() > 60 {
            return Err(format!("{shown:?} is not an IANA zone name"));
        }
        let zone = name.parse::<chrono_tz::Tz>().map(ZoneName).map_err(|_| {
            format!(
                "{shown:?} is not a zone of the IANA database (write it as Region/City, like \"America/New_York\" or \"Europe/Berlin\"; \"UTC\" for UTC)"
            )
        })?;
        zone.rules()?;
        Ok(zone)
    }

    /// Its IANA name.
    pub fn name(self) -> &'static str {
        self.0.name()
    }

    /// Its rules, from this machine's zone database (read once per zone and process).
    pub fn rules(self) -> Result<Zone, String> {
        static LOADED: std::sync::OnceLock<
            std::sync::Mutex<std::collections::HashMap<&'static str, Zone>>,
        > = std::sync::OnceLock::new();
        let loaded = LOADED.get_or_init(Default::default);
        let mut loaded = loaded
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(z) = loaded.get(self.name()) {
            return Ok(z.clone());
        }
        let rules = tz::TimeZone::from_posix_tz(&format!(":{}", self.name())).map_err(|e| {
            format!(
                "this machine's zone database (/usr/share/zoneinfo) has no {} ({e}): install the tzdata package",
                self.name()
            )
        })?;
        let zone = Zone {
            name: self,
            rules: std::sync::Arc::new(rules),
        };
        loaded.insert(self.name(), zone.clone());
        Ok(zone)
    }

    /// Its clock: a chrono time zone for this zone's wall clock.
    pub fn clock(self) -> ClockZone<chrono::Utc> {
        ClockZone::of(Some(self), &chrono::Utc)
    }
}

/// A zone's rules, as this machine's zone database has them.
#[derive(Clone)]
pub struct Zone {
    name: ZoneName,
    rules: std::sync::Arc<tz::TimeZone>,
}

impl Zone {
    /// Its offset from UTC at Unix time `t`.
    fn offset_at(&self, t: i64) -> FixedOffset {
        let seconds = self
            .rules
            .find_local_time_type(t)
            .map_or(0, tz::LocalTimeType::ut_offset);
        FixedOffset::east_opt(seconds).unwrap_or(FixedOffset::east_opt(0).expect("zero"))
    }

    /// Where local wall-clock time `local` is: none (a gap), one, or two instants (a fold), as
    /// offsets. Offsets change at most every few weeks, so the ones in effect a day either side
    /// are all it can have.
    fn offsets_of_local(&self, local: &NaiveDateTime) -> MappedLocalTime<FixedOffset> {
        let as_utc = local.and_utc().timestamp();
        let mut candidates = [
            self.offset_at(as_utc - 86_400),
            self.offset_at(as_utc + 86_400),
        ];
        candidates.sort_by_key(|o| std::cmp::Reverse(o.local_minus_utc()));
        let fits = |o: &FixedOffset| self.offset_at(as_utc - i64::from(o.local_minus_utc())) == *o;
        match candidates {
            [a, b] if a == b => {
                if fits(&a) {
                    MappedLocalTime::Single(a)
                } else {
                    MappedLocalTime::None
                }
            }
            // The larger offset is the earlier instant.
            [a, b] => match (fits(&a), fits(&b)) {
                (true, true) => MappedLocalTime::Ambiguous(a, b),
                (true, false) => MappedLocalTime::Single(a),
                (false, true) => MappedLocalTime::Single(b),
                (false, false) => MappedLocalTime::None,
            },
        }
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
    Named(Zone),
}

impl<M: TimeZone> ClockZone<M> {
    /// The zone a schedule with `time_zone` reads its wall clock in, on a machine in `machine`.
    pub fn of(time_zone: Option<ZoneName>, machine: &M) -> Self {
        // A name is checked against this machine's database when it is read (a definition, a
        // record): one whose rules went missing since reads as UTC, and is said.
        match time_zone.map(ZoneName::rules) {
            Some(Ok(z)) => ClockZone::Named(z),
            Some(Err(e)) => {
                errln!("automations: {e}; reading it as UTC");
                ClockZone::Named(Zone {
                    name: time_zone.expect("a zone"),
                    rules: std::sync::Arc::new(tz::TimeZone::utc()),
                })
            }
            None => ClockZone::Machine(machine.clone()),
        }
    }
}

impl<M> fmt::Debug for ClockZone<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClockZone::Machine(_) => f.write_str("the machine's zone"),
            ClockZone::Named(z) => f.write_str(z.name.name()),
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
            ClockZone::Named(z) => z.offsets_of_local(local),
        }
        .map(|fixed| self.offset(fixed))
    }

    fn offset_from_utc_date(&self, utc: &NaiveDate) -> Self::Offset {
        self.offset_from_utc_datetime(&utc.and_hms_opt(0, 0, 0).expect("midnight"))
    }

    fn offset_from_utc_datetime(&self, utc: &NaiveDateTime) -> Self::Offset {
        let fixed = match self {
            ClockZone::Machine(m) => m.offset_from_utc_datetime(utc).fix(),
            ClockZone::Named(z) => z.offset_at(utc.and_utc().timestamp()),
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
