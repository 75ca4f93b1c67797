//! The integration tests: one binary, a small harness, one module per concern. They drive the
//! Linux runner (its /proc, setsid, GNU timeout, a systemd user manager): on macOS only the unit
//! tests run (docs/macos.md says what is compiled and run there).
#![cfg(target_os = "linux")]

mod fixtures;
mod harness;
mod schema;

mod a_real_timer;
mod alerts;
mod approval;
pub(crate) mod calendar;
mod cron;
mod dashboard;
mod definitions;
mod dist;
mod email;
mod exits;
mod faults;
mod health;
mod healthchecks;
mod http;
mod keys;
mod kubernetes;
mod metrics;
mod moving_in;
mod policies;
mod prereqs;
mod repo;
mod runlog;
mod runner;
mod sandbox;
mod secrets;
mod signals;
mod systemd;
mod time;
mod triggers;
mod units;
mod webdriver;
mod windows;
mod wine;
