//! What every channel is (docs/health.md): a way to deliver a message within a time, and the
//! lengths a message is cut to.

use std::time::Duration;

use super::Message;

/// A way to deliver a message.
pub trait Notifier {
    /// Its name in reports and state: `pushover`, `ntfy`, `webhook`, `email`.
    fn name(&self) -> crate::names::Driver;
    /// Delivers `m` within `time`; the service's answer (status and what it said, never a
    /// credential), or why not.
    fn send(&self, m: &Message, time: Duration) -> Result<String, String>;
}

/// The longest title and text, in characters: Pushover's limits, which ntfy's messages keep too
/// (and an email's subject the title's).
pub const TITLE_MAX: usize = 250;
pub const MESSAGE_MAX: usize = 1024;

/// Cuts `s` to at most `n` characters.
pub fn cut(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}
