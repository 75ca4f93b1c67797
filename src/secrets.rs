//! What a secret is for ([`Scope`]), and asking the key store which are stored: `secret list`
//! and what `uninstall` says it leaves behind ask the same way.

use crate::keys::{KeyError, KeyStore};
use crate::names::{Label, Name, Namespace};

/// What a secret is for: an automation's AnyType key, a notification driver's credential or a
/// Healthchecks key. Spelled `NAME`, `notify.DRIVER` or `healthchecks.ping|api` (automation names
/// hold no dot, so the three never meet).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    Automation(Name),
    Notify(crate::names::Driver),
    Healthchecks(crate::healthchecks::KeyKind),
}

impl Scope {
    /// Its label in the key store of `namespace`.
    pub fn label(&self, namespace: &Namespace) -> Label {
        match self {
            Self::Automation(name) => Label::new(namespace, name),
            Self::Notify(driver) => Label::notify(namespace, *driver),
            Self::Healthchecks(kind) => kind.label(namespace),
        }
    }

    /// The scopes that are not an automation's, in the order `secret list` shows them.
    pub fn fixed() -> Vec<Self> {
        use crate::healthchecks::KeyKind;
        let mut all: Vec<Self> = crate::names::Driver::ALL.map(Self::Notify).into();
        all.extend([
            Self::Healthchecks(KeyKind::Ping),
            Self::Healthchecks(KeyKind::Api),
        ]);
        all
    }
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Automation(n) => write!(f, "{n}"),
            Self::Notify(d) => write!(f, "notify.{d}"),
            Self::Healthchecks(k) => write!(f, "healthchecks.{}", k.word()),
        }
    }
}

impl std::str::FromStr for Scope {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        use crate::healthchecks::KeyKind;
        let wrong = || {
            format!(
                "{s:?} is no scope: an automation's name (its AnyType key), notify.<{}> or healthchecks.<ping|api>",
                crate::names::Driver::ALL.map(|d| d.as_str()).join("|")
            )
        };
        match s.split_once('.') {
            Some(("notify", d)) => crate::names::Driver::parse(d)
                .map(Self::Notify)
                .ok_or_else(wrong),
            Some(("healthchecks", "ping")) => Ok(Self::Healthchecks(KeyKind::Ping)),
            Some(("healthchecks", "api")) => Ok(Self::Healthchecks(KeyKind::Api)),
            Some(_) => Err(wrong()),
            None => Name::new(s)
                .map(Self::Automation)
                .map_err(|e| format!("{}; {e}", wrong())),
        }
    }
}

/// Whether each of `scopes` is stored in `store`, in their order. A store that cannot answer at
/// all (locked, unreachable, waiting on a prompt) is asked once, not once per scope.
pub fn ask(
    store: &dyn KeyStore,
    namespace: &Namespace,
    scopes: Vec<Scope>,
) -> Vec<(Scope, Label, Result<bool, KeyError>)> {
    let mut gave_up: Option<KeyError> = None;
    scopes
        .into_iter()
        .map(|scope| {
            let label = scope.label(namespace);
            let answer = match &gave_up {
                Some(e) => Err(e.clone()),
                None => store.get(&label).map(|s| s.is_some()),
            };
            if let Err(e @ (KeyError::Timeout | KeyError::Locked | KeyError::Unavailable(_))) =
                &answer
            {
                gave_up = Some(e.clone());
            }
            (scope, label, answer)
        })
        .collect()
}
