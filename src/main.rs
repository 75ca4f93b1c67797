// The release artifact's allocator, for the whole process (`make dist`); cargo's plain build
// keeps the C library's own.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    automations::run(std::env::args_os())
}
