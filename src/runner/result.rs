//! The result file a command writes to report facts (docs/running.md), and `automations result`.
//!
//! Format: `{"facts": {"name": count, …}, "headline": "name"}`; at most 64 KiB, at most 32 facts,
//! names `^[a-z][a-z0-9_]{0,39}$`, values integers 0..=2^53, the headline one of the facts.
//! Refusals name the rule broken, never the offending text (it may hold a secret).

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::fsutil;
use crate::names::FactName;

/// Largest result file read.
pub const MAX_RESULT_BYTES: usize = 64 * 1024;
/// Most facts one run may report.
pub const MAX_FACTS: usize = 32;
/// Largest fact value (the largest integer every JSON reader keeps exact).
pub const MAX_VALUE: u64 = 1 << 53;

/// Valid facts and headline.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Facts {
    pub facts: BTreeMap<String, u64>,
    pub headline: Option<String>,
}

/// Why a result was refused: the rule, as a fragment.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ResultError(pub String);

fn refuse(rule: impl Into<String>) -> ResultError {
    ResultError(rule.into())
}

/// Reads and validates the result file at `path`; no file means no facts.
pub fn read(path: &Path) -> Result<Facts, ResultError> {
    use std::io::Read;
    // The command controls this path: never follow a link, never block on a FIFO, never read
    // more than the cap (a link to /dev/zero must not exhaust memory).
    let file = match crate::platform::no_follow_nonblocking(std::fs::OpenOptions::new().read(true))
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Facts::default()),
        Err(e) => return Err(refuse(format!("cannot read the result file: {e}"))),
    };
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return Err(refuse("the result file is not a regular file"));
    }
    let mut bytes = Vec::new();
    file.take(MAX_RESULT_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| refuse(format!("cannot read the result file: {e}")))?;
    parse(&bytes)
}

/// Validates result file bytes.
pub fn parse(bytes: &[u8]) -> Result<Facts, ResultError> {
    if bytes.len() > MAX_RESULT_BYTES {
        return Err(refuse(format!(
            "the result file is larger than {} KiB",
            MAX_RESULT_BYTES / 1024
        )));
    }
    let value: Value = serde_json::from_slice(bytes).map_err(|e| {
        refuse(format!(
            "the result file is not JSON (line {}, column {})",
            e.line(),
            e.column()
        ))
    })?;
    let Value::Object(top) = value else {
        return Err(refuse(
            "the result file must be a JSON object {\"facts\": {...}, \"headline\": \"name\"}",
        ));
    };
    let mut out = Facts::default();
    for (key, v) in &top {
        match key.as_str() {
            "facts" => {
                let Value::Object(facts) = v else {
                    return Err(refuse("\"facts\" must be an object of name: count"));
                };
                if facts.len() > MAX_FACTS {
                    return Err(refuse(format!(
                        "{} facts; at most {MAX_FACTS}",
                        facts.len()
                    )));
                }
                for (name, count) in facts {
                    FactName::new(name)
                        .map_err(|_| refuse("a fact name does not match ^[a-z][a-z0-9_]{0,39}$"))?;
                    let n = count
                        .as_u64()
                        .filter(|n| *n <= MAX_VALUE)
                        .ok_or_else(|| refuse("a fact value is not an integer in 0..=2^53"))?;
                    out.facts.insert(name.clone(), n);
                }
            }
            "headline" => match v {
                Value::String(h) => out.headline = Some(h.clone()),
                Value::Null => {}
                _ => return Err(refuse("\"headline\" must be a fact name")),
            },
            _ => {
                return Err(refuse(
                    "the result file has a key other than \"facts\" and \"headline\"",
                ));
            }
        }
    }
    if let Some(h) = &out.headline
        && !out.facts.contains_key(h)
    {
        return Err(refuse("\"headline\" must name one of the facts"));
    }
    Ok(out)
}

/// Parses `name=count` arguments of `automations result`.
pub fn parse_args(pairs: &[String], headline: Option<&str>) -> Result<Facts, ResultError> {
    let mut out = Facts::default();
    for pair in pairs {
        let (name, count) = pair
            .split_once('=')
            .ok_or_else(|| refuse(format!("{pair:?} is not name=count")))?;
        let name = FactName::new(name).map_err(|e| refuse(e.to_string()))?;
        let n: u64 = count
            .parse()
            .ok()
            .filter(|n| *n <= MAX_VALUE)
            .ok_or_else(|| refuse(format!("{name}: {count:?} is not an integer in 0..=2^53")))?;
        out.facts.insert(name.to_string(), n);
    }
    if let Some(h) = headline {
        out.headline = Some(
            FactName::new(h)
                .map_err(|e| refuse(e.to_string()))?
                .to_string(),
        );
    }
    Ok(out)
}

/// `new` merged into `old` (later facts win), checked: at most [`MAX_FACTS`], the headline one of
/// them. A refusal here is the caller's bad input.
pub fn merge(mut old: Facts, new: Facts) -> Result<Facts, ResultError> {
    old.facts.extend(new.facts);
    if new.headline.is_some() {
        old.headline = new.headline;
    }
    if old.facts.len() > MAX_FACTS {
        return Err(refuse(format!(
            "{} facts; at most {MAX_FACTS}",
            old.facts.len()
        )));
    }
    if let Some(h) = &old.headline
        && !old.facts.contains_key(h)
    {
        return Err(refuse(format!("--headline {h} is not one of the facts")));
    }
    Ok(old)
}

/// Writes `facts` to the result file at `path` atomically.
pub fn write(path: &Path, facts: &Facts) -> Result<(), ResultError> {
    let doc = serde_json::json!({"facts": facts.facts, "headline": facts.headline});
    fsutil::write_private(path, doc.to_string().as_bytes()).map_err(|e| {
        refuse(format!(
            "cannot write the result file {}: {e}",
            path.display()
        ))
    })
}

/// Merges `new` into the result file at `path` and writes it atomically.
pub fn write_merged(path: &Path, new: Facts) -> Result<Facts, ResultError> {
    let merged = merge(read(path)?, new)?;
    write(path, &merged)?;
    Ok(merged)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_results() {
        let f = parse(br#"{"facts": {"beats": 1, "a_2": 9007199254740992}, "headline": "beats"}"#)
            .unwrap();
        assert_eq!(f.facts["beats"], 1);
        assert_eq!(f.headline.as_deref(), Some("beats"));
        assert_eq!(parse(b"{}").unwrap(), Facts::default());
    }

    #[test]
    fn each_invalid_shape_names_its_rule() {
        let many: String = (0..33)
            .map(|i| format!("\"f{i}\": 1"))
            .collect::<Vec<_>>()
            .join(",");
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (b"not json".to_vec(), "not JSON"),
            (b"[1]".to_vec(), "must be a JSON object"),
            (br#"{"facts": []}"#.to_vec(), "must be an object"),
            (
                br#"{"facts": {"Bad": 1}}"#.to_vec(),
                "fact name does not match",
            ),
            (
                br#"{"facts": {"a": -1}}"#.to_vec(),
                "not an integer in 0..=2^53",
            ),
            (br#"{"facts": {"a": 1.5}}"#.to_vec(), "not an integer"),
            (
                br#"{"facts": {"a": 9007199254740993}}"#.to_vec(),
                "0..=2^53",
            ),
            (br#"{"facts": {"a": "1"}}"#.to_vec(), "not an integer"),
            (
                br#"{"facts": {"a": 1}, "headline": "b"}"#.to_vec(),
                "must name one of the facts",
            ),
            (
                br#"{"facts": {"a": 1}, "extra": 1}"#.to_vec(),
                "a key other than",
            ),
            (
                format!("{{\"facts\": {{{many}}}}}").into_bytes(),
                "33 facts; at most 32",
            ),
            (vec![b' '; MAX_RESULT_BYTES + 1], "larger than 64 KiB"),
        ];
        for (bytes, rule) in cases {
            let e = parse(&bytes).unwrap_err().0;
            assert!(e.contains(rule), "{e} lacks {rule}");
        }
    }

    #[test]
    fn links_fifos_and_huge_files_are_refused_without_blocking() {
        let d = tempfile::tempdir().unwrap();
        let link = d.path().join("link.json");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        assert!(read(&link).is_err());
        let fifo = d.path().join("fifo.json");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert_eq!(
            read(&fifo).unwrap_err().0,
            "the result file is not a regular file"
        );
        let big = d.path().join("big.json");
        std::fs::write(&big, vec![b' '; 10 * MAX_RESULT_BYTES]).unwrap();
        assert!(read(&big).unwrap_err().0.contains("larger than 64 KiB"));
    }

    #[test]
    fn refusal_never_echoes_the_offending_name() {
        let e = parse(br#"{"facts": {"SECRET-TOKEN-123": 1}}"#)
            .unwrap_err()
            .0;
        assert!(!e.contains("SECRET"), "{e}");
    }

    #[test]
    fn args_merge_into_the_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("result.json");
        write_merged(&p, parse_args(&["a=1".into(), "b=2".into()], None).unwrap()).unwrap();
        let f = write_merged(&p, parse_args(&["a=3".into()], Some("a")).unwrap()).unwrap();
        assert_eq!(f.facts, BTreeMap::from([("a".into(), 3), ("b".into(), 2)]));
        assert_eq!(read(&p).unwrap(), f);
        assert!(parse_args(&["a".into()], None).is_err());
        assert!(parse_args(&["a=-1".into()], None).is_err());
        assert!(write_merged(&p, parse_args(&[], Some("zz")).unwrap()).is_err());
    }
}
