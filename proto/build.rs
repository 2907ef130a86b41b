//! Compiles every `.proto` under `docchat/` with the vendored protoc, so no system install is needed.

use std::path::{Path, PathBuf};

fn protos(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            protos(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "proto") {
            out.push(path);
        }
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut files = Vec::new();
    protos(Path::new("docchat"), &mut files)?;
    files.sort();
    // Every file and every directory (a new .proto changes its directory), named one by
    // one: a directory alone was not always seen to change when a file was added.
    println!("cargo:rerun-if-changed=docchat");
    for file in &files {
        println!("cargo:rerun-if-changed={}", file.display());
        if let Some(dir) = file.parent() {
            println!("cargo:rerun-if-changed={}", dir.display());
        }
    }

    let mut config = tonic_prost_build::Config::new();
    config.protoc_executable(protoc_bin_vendored::protoc_bin_path()?);
    let include = protoc_bin_vendored::include_path()?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_with_config(config, &files, &[PathBuf::from("."), include])?;
    Ok(())
}
