//! Test support for other crates' tests (feature `testing`).

use std::path::PathBuf;

/// The helper program `docchat-sandbox-exec` of this build, for a test's
/// [`crate::Settings::helper`]: it sits in the target directory beside the test binary's
/// `deps/`. Cargo builds it with the workspace (`cargo nextest run --workspace`, what
/// scripts/test.sh runs); a test run of one other crate must build it first.
#[allow(
    clippy::panic,
    reason = "test support: a missing helper fails the test that needs it"
)]
pub fn helper() -> PathBuf {
    let profile = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.to_path_buf()));
    let Some(helper) = profile
        .map(|p| p.join(crate::helper::PROGRAM))
        .filter(|h| h.exists())
    else {
        panic!(
            "{} is not beside this test's target directory: build it with `cargo build -p docchat-sandbox --bin {}`",
            crate::helper::PROGRAM,
            crate::helper::PROGRAM
        );
    };
    helper
}
