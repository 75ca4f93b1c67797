fn main() -> std::process::ExitCode {
    automations::run(std::env::args_os())
}
