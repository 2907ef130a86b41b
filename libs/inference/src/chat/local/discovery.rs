//! Model discovery: the instruction-tuned GGUF files under the models dir, as registry entries.

use std::path::{Path, PathBuf};

use super::decoder;
use super::gguf::Gguf;
use super::prompt::ChatFormat;
use super::tokenizer::Tokenizer;
use super::{LocalError, model_config};
use crate::registry::{ModelEntry, ModelKind};

/// Chat-model entries for the GGUF files in `models_dir` and its subdirectories (one level
/// down, as `scripts/fetch-models.sh` lays them out), smallest file first: provider `local`, prices 0, the context
/// of the file capped at `context_cap`. Files of unsupported architectures, unreadable files
/// and a missing directory are skipped (and logged).
pub fn find_local_models(models_dir: &Path, context_cap: usize) -> Vec<ModelEntry> {
    let mut files = Vec::new();
    let mut dirs = vec![models_dir.to_owned()];
    if let Ok(rd) = std::fs::read_dir(models_dir) {
        let mut subdirs: Vec<PathBuf> = rd
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect();
        subdirs.sort();
        dirs.extend(subdirs);
    }
    for dir in dirs {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut found: Vec<PathBuf> = rd
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "gguf"))
            .collect();
        found.sort();
        files.extend(found);
    }
    // The smallest (fastest) first: `auto` goes to it unless DOCCHAT_DEFAULT_MODEL names
    // another (`scripts/run.sh --llm=…` sets it for the model it fetched).
    files.sort_by_key(|p| std::fs::metadata(p).map_or(u64::MAX, |m| m.len()));
    let mut entries: Vec<ModelEntry> = Vec::new();
    for path in files {
        match entry_for(&path, context_cap) {
            Ok(entry) if entries.iter().any(|e| e.name == entry.name) => {
                tracing::warn!(path = %path.display(), name = %entry.name, "a second local model of the same name is ignored");
            }
            Ok(entry) => entries.push(entry),
            Err(e) => tracing::info!(path = %path.display(), error = %e, "local model skipped"),
        }
    }
    entries
}

fn entry_for(path: &Path, context_cap: usize) -> Result<ModelEntry, LocalError> {
    let g = Gguf::open(path)?;
    let cfg = model_config(&g)?;
    // Base checkpoints carry no chat template: they continue text and cannot hold a chat.
    let template = g.string("tokenizer.chat_template").ok_or_else(|| {
        g.bad("no chat template: a base (not instruction-tuned) model is not offered for chat")
    })?;
    let tokenizer = Tokenizer::from_gguf(&g)?;
    if ChatFormat::detect(&tokenizer, Some(template)).is_none() {
        return Err(LocalError::NoChatFormat);
    }
    let (name, display_name, base_model) = model_names(&g, path, cfg.family);
    Ok(ModelEntry {
        display_name,
        provider: "local".into(),
        base_url: format!("file://{}", path.display()),
        upstream_model: None,
        api_key_env: None,
        api_key: None,
        base_model: Some(base_model),
        context_length: cfg.trained_context.min(context_cap.max(1)) as u64,
        input_price: 0.0,
        output_price: 0.0,
        vision: false,
        reasoning: false,
        tools: false,
        default: false,
        kind: ModelKind::Chat,
        dimensions: None,
        max_documents: None,
        local_path: Some(path.to_owned()),
        name,
    })
}

/// The registry name, display name and base model of a file: the name from the metadata's
/// base name and size (`smollm2-135m`), with the tuning that the metadata's fine-tune
/// (Qwen's `Instruct-AWQ`) or else the file name states (`-instruct`, `-it`, `-chat`).
/// The name as spelled with capitals is the display name and, under the metadata's
/// organization (else the family's: `google`, `Qwen`), the base model: the file name's
/// spelling when its start spells the name (`SmolLM2-135M-Instruct.Q4_1.gguf` →
/// `HuggingFaceTB/SmolLM2-135M-Instruct`), else the metadata's (base name `Qwen2.5-Coder`,
/// size `0.5B`, fine-tune `Instruct-AWQ` → `Qwen/Qwen2.5-Coder-0.5B-Instruct`); without
/// capitals in either, the file name's own spelling, with the metadata's `general.name` as
/// the display name.
fn model_names(g: &Gguf, path: &Path, family: decoder::Family) -> (String, Option<String>, String) {
    let arch = match family {
        decoder::Family::Gemma3 => "gemma-3",
        decoder::Family::Llama => "llama",
        decoder::Family::Qwen2 => "qwen2",
    };
    let base = g
        .string("general.basename")
        .unwrap_or(arch)
        .replace(' ', "-");
    let size = g.string("general.size_label").unwrap_or("");
    // The name as the metadata spells it.
    let mut meta = base.clone();
    if !size.is_empty() {
        meta = format!("{meta}-{size}");
    }
    let file = path.file_name().and_then(|f| f.to_str()).unwrap_or("");
    let stem = file.strip_suffix(".gguf").unwrap_or(file);
    let tuning = |text: &str| -> Option<String> {
        text.split(['-', '_', ' ', '.'])
            .find(|w| matches!(w.to_lowercase().as_str(), "instruct" | "it" | "chat"))
            .map(str::to_owned)
    };
    if let Some(t) = g
        .string("general.finetune")
        .and_then(tuning)
        .or_else(|| tuning(stem))
        && !meta
            .to_lowercase()
            .ends_with(&format!("-{}", t.to_lowercase()))
    {
        meta = format!("{meta}-{t}");
    }
    let name = meta.to_lowercase();
    let org = g.string("general.organization").or(match family {
        decoder::Family::Gemma3 => Some("google"),
        decoder::Family::Qwen2 => Some("Qwen"),
        decoder::Family::Llama => None,
    });
    // The file's spelling: its start, up to a separator (the quantization follows).
    let from_file = stem
        .get(..name.len())
        .filter(|s| s.eq_ignore_ascii_case(&name))
        .filter(|_| {
            stem[name.len()..].is_empty() || stem[name.len()..].starts_with(['.', '-', '_'])
        });
    let capitals = |s: &str| s.chars().any(char::is_uppercase);
    let spelled = match from_file {
        Some(f) if capitals(f) => Some(f),
        _ if capitals(&base) => Some(meta.as_str()),
        _ => from_file,
    };
    let repo = spelled.unwrap_or(&name);
    let base_model = match org {
        Some(org) => format!("{org}/{repo}"),
        None => repo.to_owned(),
    };
    let display = match spelled {
        Some(s) if capitals(s) => Some(s),
        _ => g.string("general.name").or(spelled),
    };
    (name, display.map(str::to_owned), base_model)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A GGUF file `file` in `dir` with string metadata only (no tensors).
    fn metadata_only(dir: &Path, file: &str, kv: &[(&str, &str)]) -> (Gguf, PathBuf) {
        let string = |b: &mut Vec<u8>, s: &str| {
            b.extend((s.len() as u64).to_le_bytes());
            b.extend(s.as_bytes());
        };
        let mut b = b"GGUF".to_vec();
        b.extend(3u32.to_le_bytes());
        b.extend(0u64.to_le_bytes());
        b.extend((kv.len() as u64).to_le_bytes());
        for (k, v) in kv {
            string(&mut b, k);
            b.extend(8u32.to_le_bytes());
            string(&mut b, v);
        }
        let path = dir.join(file);
        std::fs::write(&path, b).unwrap();
        (Gguf::open(&path).unwrap(), path)
    }

    #[test]
    fn local_models_are_named_from_their_metadata_and_file_name() {
        use decoder::Family;
        let dir = tempfile::tempdir().unwrap();
        let names = |file: &str, family: Family, kv: &[(&str, &str)]| {
            let (g, path) = metadata_only(dir.path(), file, kv);
            let (name, display, base) = model_names(&g, &path, family);
            (name, display.unwrap_or_default(), base)
        };
        let owned = |n: &str, d: &str, b: &str| (n.to_owned(), d.to_owned(), b.to_owned());
        // SmolLM2: the tuning and the spelling from the file name, the organization stated.
        let smollm2 = [
            ("general.basename", "smollm2"),
            ("general.size_label", "135M"),
            ("general.organization", "HuggingFaceTB"),
            ("general.finetune", "8k-lc100k-mix1-ep2"),
            ("general.name", "Smollm2 135M 8k Lc100K Mix1 Ep2"),
        ];
        assert_eq!(
            names("SmolLM2-135M-Instruct.Q4_1.gguf", Family::Llama, &smollm2),
            owned(
                "smollm2-135m-instruct",
                "SmolLM2-135M-Instruct",
                "HuggingFaceTB/SmolLM2-135M-Instruct"
            )
        );
        // Qwen: the tuning from the fine-tune, the spelling from the metadata (the file name
        // is all lower case), Qwen's organization; the same under any file name.
        let qwen = [
            ("general.basename", "Qwen2.5-Coder"),
            ("general.size_label", "0.5B"),
            ("general.finetune", "Instruct-AWQ"),
            ("general.name", "Qwen2.5 Coder 0.5B Instruct AWQ"),
        ];
        let want = owned(
            "qwen2.5-coder-0.5b-instruct",
            "Qwen2.5-Coder-0.5B-Instruct",
            "Qwen/Qwen2.5-Coder-0.5B-Instruct",
        );
        for file in ["qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", "model.gguf"] {
            assert_eq!(names(file, Family::Qwen2, &qwen), want, "{file}");
        }
        // All lower case in both: the file's spelling, the metadata's display name.
        let gemma = [
            ("general.basename", "gemma-3"),
            ("general.size_label", "270M"),
            ("general.name", "Gemma 3 270m"),
        ];
        assert_eq!(
            names("gemma-3-270m-it-q4_k_m.gguf", Family::Gemma3, &gemma),
            owned("gemma-3-270m-it", "Gemma 3 270m", "google/gemma-3-270m-it")
        );
        assert_eq!(
            names("gemma-3-270m-q4_k_m.gguf", Family::Gemma3, &gemma),
            owned("gemma-3-270m", "Gemma 3 270m", "google/gemma-3-270m")
        );
    }

    #[test]
    fn missing_models_dir_means_no_local_models() {
        let dir = tempfile::tempdir().unwrap();
        assert!(find_local_models(&dir.path().join("nope"), 8192).is_empty());
        std::fs::write(dir.path().join("junk.gguf"), b"not a model").unwrap();
        assert!(find_local_models(dir.path(), 8192).is_empty());
    }
}
