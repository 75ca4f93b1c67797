//! Reading one line of the log into a [`Record`], fast: the writer puts `v` and `event` first, so
//! one pass reads them and hands the rest to the event's own fields.

use serde::Deserialize;

use super::event::{Event, Record};

impl Record {
    /// Parses one line as readers do. The writer puts `v` and `event` first, so one pass reads
    /// them, then hands the rest of the line to the event's own fields, keeping `name`, `at` and
    /// `prev` as they go by (the derived form, flattened and tagged, buffers every value of the
    /// line first, which made reading a thousand automations' runs several times slower). A line
    /// in another order (edited by hand) is read in two passes instead; a line of an unknown event
    /// by the derived form, which says what is wrong.
    pub fn parse(line: &[u8]) -> Result<Record, serde_json::Error> {
        use serde::Deserializer as _;
        let mut de = serde_json::Deserializer::from_slice(line);
        match de.deserialize_map(fast::RecordVisitor) {
            Ok(r) => de.end().map(|()| r),
            Err(_) => Self::parse_two_passes(line),
        }
    }

    fn parse_two_passes(line: &[u8]) -> Result<Record, serde_json::Error> {
        #[derive(Deserialize)]
        struct Common<'a> {
            v: u32,
            #[serde(borrow)]
            event: std::borrow::Cow<'a, str>,
            name: String,
            at: String,
            prev: String,
        }
        let c: Common = serde_json::from_slice(line)?;
        let mut de = serde_json::Deserializer::from_slice(line);
        let event = match fast::event_of(&c.event, &mut de) {
            Some(e) => e?,
            None => return serde_json::from_slice(line),
        };
        Ok(Record {
            v: c.v,
            event,
            name: c.name,
            at: c.at,
            prev: c.prev,
        })
    }
}

/// [`Record::parse`]'s one pass.
mod fast {
    use std::borrow::Cow;

    use serde::Deserialize;
    use serde::de::{self, DeserializeSeed, MapAccess, Visitor};

    use super::{Event, Record};

    /// The event of `tag`, read from `de`; `None` for a tag no event has.
    pub fn event_of<'de, D: de::Deserializer<'de>>(
        tag: &str,
        de: D,
    ) -> Option<Result<Event, D::Error>> {
        Some(match tag {
            "started" => Deserialize::deserialize(de).map(Event::Started),
            "finished" => Deserialize::deserialize(de).map(Event::Finished),
            "skipped" => Deserialize::deserialize(de).map(Event::Skipped),
            "paused" => Deserialize::deserialize(de).map(Event::Paused),
            "resumed" => Deserialize::deserialize(de).map(Event::Resumed),
            "ack" => Deserialize::deserialize(de).map(Event::Ack),
            "snoozed" => Deserialize::deserialize(de).map(Event::Snoozed),
            "unsnoozed" => Deserialize::deserialize(de).map(Event::Unsnoozed),
            "stop_all" => Deserialize::deserialize(de).map(Event::StopAll),
            "resume_all" => Deserialize::deserialize(de).map(Event::ResumeAll),
            "rotated" => Deserialize::deserialize(de).map(Event::Rotated),
            "break" => Deserialize::deserialize(de).map(Event::Break),
            _ => return None,
        })
    }

    #[derive(Default)]
    struct Common {
        v: Option<u32>,
        name: Option<String>,
        at: Option<String>,
        prev: Option<String>,
    }

    impl Common {
        /// Takes `key`'s value when it is one of the common fields; whether it was.
        fn take<'de, A: MapAccess<'de>>(
            &mut self,
            key: &str,
            map: &mut A,
        ) -> Result<bool, A::Error> {
            match key {
                "v" => self.v = Some(map.next_value()?),
                "name" => self.name = Some(map.next_value()?),
                "at" => self.at = Some(map.next_value()?),
                "prev" => self.prev = Some(map.next_value()?),
                _ => return Ok(false),
            }
            Ok(true)
        }
    }

    pub struct RecordVisitor;

    impl<'de> Visitor<'de> for RecordVisitor {
        type Value = Record;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a run log line")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Record, A::Error> {
            let mut common = Common::default();
            let tag = loop {
                let Some(key) = map.next_key::<Cow<'de, str>>()? else {
                    return Err(de::Error::missing_field("event"));
                };
                if key == "event" {
                    break map.next_value::<Cow<'de, str>>()?;
                }
                if !common.take(&key, &mut map)? {
                    return Err(de::Error::custom("an event's field before `event`"));
                }
            };
            let rest = de::value::MapAccessDeserializer::new(Rest {
                map: &mut map,
                common: &mut common,
            });
            let event = event_of(&tag, rest)
                .unwrap_or_else(|| Err(de::Error::unknown_variant(&tag, &[])))?;
            let missing = |f| de::Error::missing_field(f);
            Ok(Record {
                v: common.v.ok_or_else(|| missing("v"))?,
                event,
                name: common.name.ok_or_else(|| missing("name"))?,
                at: common.at.ok_or_else(|| missing("at"))?,
                prev: common.prev.ok_or_else(|| missing("prev"))?,
            })
        }
    }

    /// The rest of a line's map as the event's fields, with the common ones taken out.
    struct Rest<'m, A> {
        map: &'m mut A,
        common: &'m mut Common,
    }

    impl<'de, A: MapAccess<'de>> MapAccess<'de> for Rest<'_, A> {
        type Error = A::Error;

        fn next_key_seed<K: DeserializeSeed<'de>>(
            &mut self,
            seed: K,
        ) -> Result<Option<K::Value>, A::Error> {
            loop {
                let Some(key) = self.map.next_key::<Cow<'de, str>>()? else {
                    return Ok(None);
                };
                if !self.common.take(&key, self.map)? {
                    let key = de::value::StrDeserializer::<A::Error>::new(&key);
                    return seed.deserialize(key).map(Some);
                }
            }
        }

        fn next_value_seed<V: DeserializeSeed<'de>>(
            &mut self,
            seed: V,
        ) -> Result<V::Value, A::Error> {
            self.map.next_value_seed(seed)
        }
    }
}
