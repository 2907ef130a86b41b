//! `docchat-sandbox-exec`: the Landlock + seccomp sandbox helper agent-service runs per code
//! run where bubblewrap cannot work (see `docchat_sandbox::exec`).

fn main() -> std::process::ExitCode {
    docchat_sandbox::exec::main()
}
