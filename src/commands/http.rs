//! `automations http get|head|post URL`: parsing and printing around `http`.

use std::io::Write;

use crate::cli::{HttpArgs, HttpMethod};
use crate::http::{self, Problem, Request};
use crate::{CmdResult, Exit, Fail};

pub fn http_cmd(a: &HttpArgs) -> CmdResult {
    let method = match a.method {
        HttpMethod::Get => reqwest::Method::GET,
        HttpMethod::Head => reqwest::Method::HEAD,
        HttpMethod::Post => reqwest::Method::POST,
    };
    let req = Request::parse(
        &http::Args {
            method,
            url: &a.url,
            headers: &a.headers,
            header_env: &a.header_env,
            header_files: &a.header_file,
            data: a.data.as_deref(),
            max_time: a.max_time,
            max_bytes: a.max_bytes,
            fail: a.fail,
        },
        &|var| std::env::var(var).ok(),
        &mut std::io::stdin(),
    )
    .map_err(|e| Fail::new(Exit::BadInput, e))?;
    let host = http::host(&req.url);
    // The body goes to --output, else to stdout. A regular (or new) file is written as a sibling
    // `.part` file renamed into place only when the call succeeds, so a failed call never leaves
    // half a file; anything else there (/dev/null, a FIFO) is written to directly, never replaced.
    let regular_target = a
        .output
        .as_ref()
        .is_some_and(|p| std::fs::metadata(p).map_or(true, |m| m.is_file()));
    let part = a.output.as_ref().filter(|_| regular_target).map(|p| {
        let mut name = p.as_os_str().to_owned();
        name.push(format!(".part.{}", std::process::id()));
        std::path::PathBuf::from(name)
    });
    let open_err = |p: &std::path::Path, e| {
        Fail::new(
            Exit::Failure,
            anyhow::anyhow!("--output {}: {e}", p.display()),
        )
    };
    let mut part_file = match (&part, &a.output) {
        (Some(p), _) => Some(std::fs::File::create(p).map_err(|e| open_err(p, e))?),
        (None, Some(p)) => Some(
            std::fs::OpenOptions::new()
                .write(true)
                .open(p)
                .map_err(|e| open_err(p, e))?,
        ),
        (None, None) => None,
    };
    let mut stdout = std::io::stdout().lock();
    let out: &mut dyn Write = match &mut part_file {
        Some(f) => f,
        None => &mut stdout,
    };
    let o = http::call(&req, out);
    let _ = out.flush();
    if let Some(log) = std::env::var_os(http::ENV_LOG).filter(|p| !p.is_empty()) {
        let line = http::Call {
            host: host.clone(),
            status: o.status,
            ms: o.elapsed.as_millis() as u64,
            class: o.class,
        };
        if let Err(e) = http::log::append(std::path::Path::new(&log), &line) {
            errln!("automations http: cannot write the HTTP log: {e}");
        }
    }
    if a.json {
        errln!("{}", http::meta(&o));
    }
    let failed_status = a.fail && o.status.is_some_and(|s| s >= 400);
    let exit = match &o.problem {
        Some(Problem::NoAnswer(why)) => {
            errln!(
                "automations http: no answer from {host}: {} ({why})",
                o.class.as_str()
            );
            Exit::NoAnswer
        }
        Some(Problem::TooLarge(cap)) => {
            errln!(
                "automations http: the answer from {host} is larger than --max-bytes {cap}; stopped reading"
            );
            Exit::TooLarge
        }
        Some(Problem::BrokeOff(why)) => {
            errln!(
                "automations http: the answer from {host} broke off after {} bytes ({why})",
                o.bytes
            );
            Exit::BrokeOff
        }
        Some(Problem::NotFollowed(why)) => {
            errln!(
                "automations http: {host} answered {} and the redirect was not followed: {why}",
                o.status.unwrap_or(0)
            );
            if failed_status {
                Exit::HttpError
            } else {
                Exit::Success
            }
        }
        None if failed_status => {
            errln!(
                "automations http: {host} answered {}",
                o.status.unwrap_or(0)
            );
            Exit::HttpError
        }
        None => Exit::Success,
    };
    if let (Some(path), Some(part)) = (&a.output, &part) {
        if exit == Exit::Success {
            std::fs::rename(part, path).map_err(|e| {
                Fail::new(
                    Exit::Failure,
                    anyhow::anyhow!("--output {}: {e}", path.display()),
                )
            })?;
        } else {
            let _ = std::fs::remove_file(part);
        }
    }
    Ok(exit)
}
