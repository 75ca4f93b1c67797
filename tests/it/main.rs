//! The integration tests: one binary, a small harness, one module per concern.

mod harness;
mod schema;

mod definitions;
mod runner;
mod systemd;
mod units;
