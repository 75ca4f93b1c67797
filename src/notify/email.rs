//! The email channel: one plain-text mail per message, over SMTP with STARTTLS or TLS from the
//! first byte (lettre, with the rustls and native roots reqwest uses), logged in when the server
//! wants it (docs/health.md). The password reaches only the server: inside TLS, or over this
//! machine's loopback to a local relay (`tls = "none"`, which nothing else may use).

use std::sync::mpsc;
use std::time::{Duration, Instant};

use lettre::message::header::{ContentType, Header, HeaderName, HeaderValue};
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Tls, TlsParameters};
use lettre::transport::smtp::extension::ClientId;
use lettre::{SmtpTransport, Transport};

use super::Message;
use super::channel::{Notifier, TITLE_MAX, cut};
use super::settings::{EmailSettings, MailSecurity};
use crate::keys::Secret;

/// The most of a server's answer that is said.
const SAID_MAX: usize = 200;

/// An SMTP server and the mail it is given.
pub struct Email {
    pub settings: EmailSettings,
    /// The login's password, when `settings.user` is set.
    pub password: Option<Secret>,
    /// This machine's name, for the EHLO greeting.
    pub host: String,
    pub namespace: String,
    /// How the connection is secured, with the roots the server's certificate is checked against
    /// (read once, not for every message).
    tls: Tls,
}

impl Email {
    /// The channel of `settings`; the system's roots (or `SSL_CERT_FILE`'s) are read here.
    pub fn new(
        settings: EmailSettings,
        password: Option<Secret>,
        host: String,
        namespace: String,
    ) -> Result<Self, String> {
        let tls = || {
            TlsParameters::new_rustls(settings.server.clone())
                .map_err(|e| format!("cannot set up TLS: {e}"))
        };
        let tls = match settings.security {
            MailSecurity::StartTls => Tls::Required(tls()?),
            MailSecurity::Implicit => Tls::Wrapper(tls()?),
            MailSecurity::None => Tls::None,
        };
        Ok(Self {
            settings,
            password,
            host,
            namespace,
            tls,
        })
    }

    /// Where it sends, for people: `smtp.example.org:587` (nothing in it is secret).
    pub fn server(settings: &EmailSettings) -> String {
        if settings.server.contains(':') {
            format!("[{}]:{}", settings.server, settings.port)
        } else {
            format!("{}:{}", settings.server, settings.port)
        }
    }

    /// The mail for `m`: the message's title as its subject, its text, then what it is about in
    /// names and ids (what a webhook's document holds), marked as sent by a machine.
    pub fn mail(&self, m: &Message) -> Result<lettre::Message, String> {
        let from = address(&self.settings.from)?;
        // The Message-ID's right side: the sender's domain, a name the world can place (this
        // machine's may be none).
        let id = format!(
            "<{}.{}.automations@{}>",
            chrono::Utc::now().timestamp_millis(),
            std::process::id(),
            from.email.domain()
        );
        let mut builder = lettre::Message::builder()
            .from(from)
            .subject(cut(&m.title, TITLE_MAX))
            .message_id(Some(id))
            .header(ContentType::TEXT_PLAIN)
            .header(AutoSubmitted);
        for to in &self.settings.to {
            builder = builder.to(address(to)?);
        }
        builder
            .body(self.text(m))
            .map_err(|e| format!("cannot make the mail: {e}"))
    }

    /// The mail's text.
    pub fn text(&self, m: &Message) -> String {
        let mut text = format!("{}\n", m.body);
        if let Some(a) = &m.about {
            text.push_str(&format!(
                "\n-- \nautomation: {} (namespace {})\nverdict: {}",
                a.automation, self.namespace, a.verdict
            ));
            if !a.reasons.is_empty() {
                text.push_str(&format!(" ({})", a.reasons.join(", ")));
            }
            text.push_str(&format!("\nhost: {}\n", a.host));
            if let Some(run) = &a.run {
                text.push_str(&format!("last run: {run}\n"));
            }
            if let Some(next) = &a.next {
                text.push_str(&format!("look with: {next}\n"));
            }
        }
        text
    }

    /// The connection: secured as `notify.toml` says, every read and write within `time`.
    fn transport(&self, time: Duration) -> SmtpTransport {
        let s = &self.settings;
        // EHLO with this machine's name when it is a dotted host name, else with the address
        // literal RFC 5321 asks for then: a server that checks the greeting refuses a bare word.
        let dotted = self.host.contains('.')
            && self
                .host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
        let hello = if dotted {
            ClientId::Domain(self.host.clone())
        } else {
            ClientId::Ipv4(std::net::Ipv4Addr::LOCALHOST)
        };
        let mut b = SmtpTransport::builder_dangerous(&s.server)
            .port(s.port)
            .tls(self.tls.clone())
            .timeout(Some(time))
            .hello_name(hello);
        if let (Some(user), Some(password)) = (&s.user, &self.password) {
            b = b.credentials(Credentials::new(user.clone(), password.expose().to_owned()));
        }
        b.build()
    }
}

impl Notifier for Email {
    fn name(&self) -> crate::names::Driver {
        crate::names::Driver::Email
    }

    /// Sends within `time` as a whole: a server that answers each step slowly (or a name that
    /// resolves to many addresses) cannot hold the look longer. The unfinished conversation is
    /// left to end with the process, and the message waits for the next look.
    fn send(&self, m: &Message, time: Duration) -> Result<String, String> {
        let start = Instant::now();
        let mail = self.mail(m)?;
        let transport = self.transport(time);
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(transport.send(&mail));
        });
        match rx.recv_timeout(time.saturating_sub(start.elapsed())) {
            Ok(Ok(r)) => Ok(format!(
                "{} {}",
                r.code(),
                cut(r.first_line().unwrap_or_default(), SAID_MAX)
            )
            .trim_end()
            .to_owned()),
            Ok(Err(e)) => Err(failed(&e)),
            Err(mpsc::RecvTimeoutError::Timeout) => Err("no answer (timeout)".into()),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                Err("the delivery ended without a result (a fault in the mail client)".into())
            }
        }
    }
}

/// Why a mail was not taken: the server's refusal in its words; what this side would not do, in
/// ours; or why there was no answer.
fn failed(e: &lettre::transport::smtp::Error) -> String {
    let said = cut(&e.to_string(), SAID_MAX);
    let timed_out = || {
        std::error::Error::source(e)
            .and_then(|s| s.downcast_ref::<std::io::Error>())
            .is_some_and(|io| {
                matches!(
                    io.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                )
            })
    };
    if e.is_permanent() || e.is_transient() {
        format!("refused: {said}")
    } else if e.is_timeout() || timed_out() {
        "no answer (timeout)".into()
    } else if e.is_client() && said.contains("STARTTLS") {
        "not sent: the server does not offer STARTTLS, and nothing goes to it in the clear".into()
    } else if e.is_client() && said.contains("authentication mechanism") {
        "not sent: the server offers no login this tool speaks (PLAIN or LOGIN)".into()
    } else {
        format!("no answer ({said})")
    }
}

fn address(s: &str) -> Result<lettre::message::Mailbox, String> {
    s.parse().map_err(|_| format!("{s:?} is not an address"))
}

/// `Auto-Submitted: auto-generated` (RFC 3834): a vacation responder does not answer it.
#[derive(Clone)]
struct AutoSubmitted;

impl Header for AutoSubmitted {
    fn name() -> HeaderName {
        HeaderName::new_from_ascii_str("Auto-Submitted")
    }

    fn parse(_: &str) -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        Ok(Self)
    }

    fn display(&self) -> HeaderValue {
        HeaderValue::new(Self::name(), "auto-generated".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notify::About;

    fn email(to: &[&str]) -> Email {
        let settings = EmailSettings {
            server: "smtp.example.org".into(),
            port: 587,
            security: MailSecurity::StartTls,
            from: "automations <a@example.org>".into(),
            to: to.iter().map(|t| (*t).to_owned()).collect(),
            user: None,
        };
        Email::new(settings, None, "studio".into(), "automations".into()).unwrap()
    }

    #[test]
    fn a_mail_holds_the_message_and_what_it_is_about_in_names_and_ids() {
        let m = Message {
            title: "automations: backup is degraded".into(),
            body: "backup on studio is degraded: failing repeatedly (3 in a row).".into(),
            about: Some(About {
                kind: "degraded".into(),
                automation: "backup".into(),
                verdict: "degraded".into(),
                reasons: vec!["success_rate".into(), "failing_streak".into()],
                host: "studio".into(),
                run: Some("20261203T101500.123Z-4f2a9c".into()),
                next: Some("automations show backup".into()),
            }),
        };
        let e = email(&["ops@example.org", "Oncall <oncall@example.org>"]);
        assert_eq!(
            e.text(&m),
            "backup on studio is degraded: failing repeatedly (3 in a row).\n\n-- \nautomation: backup (namespace automations)\nverdict: degraded (success_rate, failing_streak)\nhost: studio\nlast run: 20261203T101500.123Z-4f2a9c\nlook with: automations show backup\n"
        );
        let mail = String::from_utf8(e.mail(&m).unwrap().formatted()).unwrap();
        for want in [
            "Subject: automations: backup is degraded\r\n",
            "To: ops@example.org, Oncall <oncall@example.org>\r\n",
            "Auto-Submitted: auto-generated\r\n",
            ".automations@example.org>\r\n",
        ] {
            assert!(mail.contains(want), "{want:?} in {mail}");
        }
        // A test message is about nothing: its text alone.
        let test = Message {
            title: "automations: a test".into(),
            body: "A test.".into(),
            about: None,
        };
        assert_eq!(e.text(&test), "A test.\n");
    }
}
