//! Name lookups for the HTTP client: the C library's `getaddrinfo` (as every other program here
//! resolves), on a blocking thread, with a failure of its own type so a failed lookup is classed
//! `none/dns` rather than a failed connection.

use std::net::{SocketAddr, ToSocketAddrs};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// The system's resolver.
#[derive(Clone, Copy, Debug, Default)]
pub struct System;

/// A name that did not resolve, and why (the C library's words).
#[derive(Debug, thiserror::Error)]
#[error("the name {name} did not resolve: {why}")]
pub struct LookupFailed {
    name: String,
    why: String,
}

impl Resolve for System {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let found = tokio::task::spawn_blocking(move || {
                // The port is the connector's to set; any number does for the lookup.
                (host.as_str(), 0)
                    .to_socket_addrs()
                    .map(|a| a.collect::<Vec<SocketAddr>>())
                    .map_err(|e| LookupFailed {
                        name: host.clone(),
                        why: e.to_string(),
                    })
            })
            .await;
            match found {
                Ok(Ok(addrs)) => Ok(Box::new(addrs.into_iter()) as Addrs),
                Ok(Err(failed)) => Err(failed.into()),
                Err(join) => Err(join.into()),
            }
        })
    }
}
