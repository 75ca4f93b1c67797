//! Text that came from outside (a log line, a server's answer, a command's output) shown on one
//! line of a terminal: every control character becomes a visible escape, so nothing from outside
//! can drive the terminal or print a line of its own; and check UUIDs, which are secrets, blanked.

use std::borrow::Cow;

/// Output as text a terminal shows but never obeys: control characters other than newline and tab
/// (ESC, BEL, CSI, OSC, …) become `\u{1b}`-style escapes.
pub fn escape_controls(text: &str) -> Cow<'_, str> {
    escape_where(text, |c| c.is_control() && c != '\n' && c != '\t')
}

/// One field on one line of text (a run id, a name, an error class, a server's word): every
/// control character escaped, newlines and tabs too, so a forged value can neither drive the
/// terminal nor print a line of its own.
pub fn field(text: &str) -> Cow<'_, str> {
    escape_where(text, char::is_control)
}

fn escape_where(text: &str, escaped: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !text.chars().any(&escaped) {
        return Cow::Borrowed(text);
    }
    text.chars()
        .map(|c| {
            if escaped(c) {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect::<String>()
        .into()
}

/// `text` with every UUID in it (8-4-4-4-12 hex digits, anywhere, in any case) replaced by
/// `[uuid]`.
pub fn blank_uuids(text: &str) -> Cow<'_, str> {
    const SHAPE: [usize; 5] = [8, 4, 4, 4, 12];
    let bytes = text.as_bytes();
    let at = |i: usize| -> bool {
        let mut p = i;
        for (k, n) in SHAPE.iter().enumerate() {
            if k > 0 {
                if bytes.get(p) != Some(&b'-') {
                    return false;
                }
                p += 1;
            }
            if bytes.len() < p + n || !bytes[p..p + n].iter().all(u8::is_ascii_hexdigit) {
                return false;
            }
            p += n;
        }
        true
    };
    if !(0..bytes.len()).any(at) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        if at(i) {
            out.push_str("[uuid]");
            i += 36;
        } else {
            let c = text[i..].chars().next().expect("within the text");
            out.push(c);
            i += c.len_utf8();
        }
    }
    out.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_escaped_and_uuids_blanked() {
        assert_eq!(field("a\u{1b}[31mb\nc"), "a\\u{1b}[31mb\\u{a}c");
        assert_eq!(escape_controls("a\nb\u{7}"), "a\nb\\u{7}");
        assert_eq!(field("plain"), "plain");
        assert_eq!(
            blank_uuids("Cannot POST /ping/d1665499-E827-441f-bf13-8f15e8f4c0b9/start é"),
            "Cannot POST /ping/[uuid]/start é"
        );
        assert_eq!(
            blank_uuids("d1665499-e827-441f-bf13-8f15e8f4c0b"),
            "d1665499-e827-441f-bf13-8f15e8f4c0b"
        );
    }
}
