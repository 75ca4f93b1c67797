//! `automations http get|head|post URL`: parsing and printing around `http`.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::fail::{CmdResult, Fail};
use crate::cli::{HttpArgs, HttpMethod};
use crate::exit::Exit;
use crate::http::{self, Outcome, Problem, Request};

pub fn http_cmd(a: &HttpArgs) -> CmdResult {
    let req = request(a)?;
    let host = http::host(&req.url);
    let mut output = Output::open(a.output.as_deref())?;
    let o = {
        let mut stdout = std::io::stdout().lock();
        let out: &mut dyn Write = match &mut output.file {
            Some(f) => f,
            None => &mut stdout,
        };
        let o = http::call(&req, out);
        let _ = out.flush();
        o
    };
    record(&host, &o);
    if a.json {
        errln!("{}", http::meta(&o, req.secret_url));
    }
    let exit = exit_of(&o, &host, a.fail);
    output.finish(exit == Exit::Success)?;
    Ok(exit)
}

/// The request the command line asks for (exit 2 when it cannot be one).
fn request(a: &HttpArgs) -> Result<Request, Fail> {
    let method = match a.method {
        HttpMethod::Get => reqwest::Method::GET,
        HttpMethod::Head => reqwest::Method::HEAD,
        HttpMethod::Post => reqwest::Method::POST,
    };
    let url = match (&a.url, &a.url_env, &a.url_file) {
        (Some(u), _, _) => http::UrlFrom::Arg(u),
        (_, Some(var), _) => http::UrlFrom::Env(var),
        (_, _, Some(file)) => http::UrlFrom::File(file),
        // clap requires one of them.
        (None, None, None) => http::UrlFrom::Arg(""),
    };
    Request::parse(
        &http::Args {
            method,
            url,
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
    .map_err(|e| Fail::new(Exit::BadInput, e))
}

/// Where the body goes: `--output`, else stdout. A regular (or new) file is written as a sibling
/// `.part` file renamed into place only when the call succeeds, so a failed call never leaves half
/// a file; anything else there (/dev/null, a FIFO) is written to directly, never replaced.
struct Output<'a> {
    file: Option<std::fs::File>,
    /// The final path and the `.part` file written meanwhile.
    part: Option<(&'a Path, PathBuf)>,
}

impl<'a> Output<'a> {
    fn open(path: Option<&'a Path>) -> Result<Self, Fail> {
        let Some(path) = path else {
            return Ok(Self {
                file: None,
                part: None,
            });
        };
        let err = |p: &Path, e| {
            Fail::new(
                Exit::Failure,
                anyhow::anyhow!("--output {}: {e}", p.display()),
            )
        };
        if !std::fs::metadata(path).map_or(true, |m| m.is_file()) {
            let file = std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .map_err(|e| err(path, e))?;
            return Ok(Self {
                file: Some(file),
                part: None,
            });
        }
        let mut name = path.as_os_str().to_owned();
        name.push(format!(".part.{}", std::process::id()));
        let part = PathBuf::from(name);
        let file = std::fs::File::create(&part).map_err(|e| err(&part, e))?;
        Ok(Self {
            file: Some(file),
            part: Some((path, part)),
        })
    }

    /// Renames the `.part` file into place when the call succeeded, else removes it.
    fn finish(self, success: bool) -> Result<(), Fail> {
        let Some((path, part)) = self.part else {
            return Ok(());
        };
        if success {
            std::fs::rename(&part, path).map_err(|e| {
                Fail::new(
                    Exit::Failure,
                    anyhow::anyhow!("--output {}: {e}", path.display()),
                )
            })
        } else {
            let _ = std::fs::remove_file(part);
            Ok(())
        }
    }
}

/// Appends the call to the run's HTTP log, when there is one.
fn record(host: &str, o: &Outcome) {
    let Some(log) = std::env::var_os(http::ENV_LOG).filter(|p| !p.is_empty()) else {
        return;
    };
    let line = http::Call {
        host: host.to_owned(),
        status: o.status,
        ms: o.elapsed.as_millis() as u64,
        class: o.class,
    };
    if let Err(e) = http::log::append(Path::new(&log), &line) {
        errln!("automations http: cannot write the HTTP log: {e}");
    }
}

/// The exit code of a call, saying on stderr what went wrong.
fn exit_of(o: &Outcome, host: &str, fail: bool) -> Exit {
    let failed_status = fail && o.status.is_some_and(|s| s >= 400);
    let status = o.status.unwrap_or(0);
    match &o.problem {
        Some(Problem::NoAnswer(why)) => {
            let class = o.class.as_str();
            errln!("automations http: no answer from {host}: {class} ({why})");
            Exit::NoAnswer
        }
        Some(Problem::TooLarge(cap)) => {
            errln!(
                "automations http: the answer from {host} is larger than --max-bytes {cap}; stopped reading"
            );
            Exit::TooLarge
        }
        Some(Problem::BrokeOff(why)) => {
            let n = o.bytes;
            errln!("automations http: the answer from {host} broke off after {n} bytes ({why})");
            Exit::BrokeOff
        }
        Some(Problem::NotFollowed(why)) => {
            errln!(
                "automations http: {host} answered {status} and the redirect was not followed: {why}"
            );
            if failed_status {
                Exit::HttpError
            } else {
                Exit::Success
            }
        }
        None if failed_status => {
            errln!("automations http: {host} answered {status}");
            Exit::HttpError
        }
        None => Exit::Success,
    }
}
