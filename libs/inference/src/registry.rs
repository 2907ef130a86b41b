//! The model registry: upstream models from the models file (TOML, `[[models]]`), with
//! display names, base models, context lengths and prices, and `auto` routing to the
//! default model.

use std::path::{Path, PathBuf};

use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ModelKind {
    #[default]
    Chat,
    Embedding,
    /// An OpenAI-compatible `/v1/audio/transcriptions` upstream (audio and video ingestion).
    Transcription,
    /// A `rerank` upstream (TEI, vLLM, Infinity, Jina, Cohere): retrieval's second stage.
    Rerank,
}

/// An upstream's API key given directly (an upstream named in the environment, see
/// [`Catalog`](crate::Catalog)), rather than through `api_key_env`.
#[derive(Debug, Clone)]
pub struct ApiKey(pub SecretString);

impl PartialEq for ApiKey {
    fn eq(&self, other: &Self) -> bool {
        self.0.expose_secret() == other.0.expose_secret()
    }
}

/// One `[[models]]` entry.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelEntry {
    /// The id callers use as `llm`.
    pub name: String,
    #[serde(default)]
    pub display_name: Option<String>,
    #[serde(default = "default_provider")]
    pub provider: String,
    /// OpenAI-compatible `/v1` root.
    pub base_url: String,
    /// Model id sent upstream; defaults to `name`.
    #[serde(default)]
    pub upstream_model: Option<String>,
    /// Environment variable holding the upstream API key.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// The key itself, for upstreams listed from the environment; never in the models file.
    #[serde(skip)]
    pub api_key: Option<ApiKey>,
    #[serde(default)]
    pub base_model: Option<String>,
    #[serde(default = "default_context_length")]
    pub context_length: u64,
    /// Price per million input tokens.
    #[serde(default)]
    pub input_price: f64,
    /// Price per million output tokens.
    #[serde(default)]
    pub output_price: f64,
    #[serde(default)]
    pub vision: bool,
    /// The model reasons before it answers (a "thinking" model): what the client's
    /// reasoning-model lists name.
    #[serde(default)]
    pub reasoning: bool,
    /// The upstream calls tools (OpenAI function calling): the agent may use it.
    #[serde(default)]
    pub tools: bool,
    /// The target of `auto`.
    #[serde(default)]
    pub default: bool,
    #[serde(default)]
    pub kind: ModelKind,
    /// Embedding upstreams: the vector size, when known in advance (else learned from the
    /// first answer).
    #[serde(default)]
    pub dimensions: Option<usize>,
    /// Rerank upstreams: the most documents one call may carry (more go in several calls).
    #[serde(default)]
    pub max_documents: Option<usize>,
    /// Local models (provider `local`): the GGUF file. Found in the models dir by
    /// [`Registry::with_models`], never read from the models file.
    #[serde(skip)]
    pub local_path: Option<PathBuf>,
}

fn default_provider() -> String {
    "openai".to_owned()
}

fn default_context_length() -> u64 {
    8192
}

impl ModelEntry {
    /// The upstream's API key: the entry's own ([`ModelEntry::api_key`]), else the
    /// environment variable it names (`api_key_env`, which must then be set; `Err` names
    /// it), else none. The models file names variables so that keys stay out of it; this
    /// is the one place they are read.
    #[expect(
        clippy::disallowed_methods,
        reason = "the models file names the variable holding an upstream's key"
    )]
    pub fn upstream_key(&self) -> Result<Option<SecretString>, String> {
        match (&self.api_key, &self.api_key_env) {
            (Some(key), _) => Ok(Some(key.0.clone())),
            (None, Some(var)) => match std::env::var(var) {
                Ok(key) if !key.trim().is_empty() => Ok(Some(SecretString::from(key))),
                _ => Err(var.clone()),
            },
            (None, None) => Ok(None),
        }
    }

    pub fn display_name(&self) -> &str {
        self.display_name.as_deref().unwrap_or(&self.name)
    }

    pub fn upstream_model(&self) -> &str {
        self.upstream_model.as_deref().unwrap_or(&self.name)
    }

    pub fn base_model(&self) -> &str {
        self.base_model
            .as_deref()
            .unwrap_or_else(|| self.upstream_model())
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelsFile {
    #[serde(default)]
    models: Vec<ModelEntry>,
}

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("cannot read models file {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("invalid models file {path}: {message}")]
    Invalid { path: String, message: String },
}

/// Every model docchat can route to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Registry {
    models: Vec<ModelEntry>,
}

impl Registry {
    /// Reads the models file when one is configured.
    pub fn load(models_file: Option<&Path>) -> Result<Registry, RegistryError> {
        let Some(path) = models_file else {
            return Ok(Registry::default());
        };
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| RegistryError::Read {
            path: shown.clone(),
            source,
        })?;
        Registry::parse(&text).map_err(|message| RegistryError::Invalid {
            path: shown,
            message,
        })
    }

    /// Parses models-file text and checks it.
    pub fn parse(text: &str) -> Result<Registry, String> {
        let file: ModelsFile = toml::from_str(text).map_err(|e| e.to_string())?;
        let mut seen = std::collections::HashSet::new();
        for m in &file.models {
            if m.name.trim().is_empty() {
                return Err("a model has an empty name".into());
            }
            if m.name == "auto" {
                return Err("\"auto\" is reserved and cannot name a model".into());
            }
            if !seen.insert(m.name.clone()) {
                return Err(format!("model {} is listed twice", m.name));
            }
            if m.provider != "openai" {
                return Err(format!(
                    "model {}: unknown provider {:?}",
                    m.name, m.provider
                ));
            }
            if !(m.base_url.starts_with("http://") || m.base_url.starts_with("https://")) {
                return Err(format!("model {}: base_url must be http(s)", m.name));
            }
            if m.input_price < 0.0 || m.output_price < 0.0 {
                return Err(format!("model {}: prices must not be negative", m.name));
            }
        }
        let defaults = file
            .models
            .iter()
            .filter(|m| m.default && m.kind == ModelKind::Chat)
            .count();
        if defaults > 1 {
            return Err("more than one chat model is marked default".into());
        }
        Ok(Registry {
            models: file.models,
        })
    }

    /// Adds entries found elsewhere (an upstream's listing, the local GGUF chat models of
    /// [`find_local_models`](crate::chat::local::find_local_models)) after the
    /// entries so far; a name already taken keeps the earlier entry (the models file wins).
    pub fn with_models(mut self, found: impl IntoIterator<Item = ModelEntry>) -> Registry {
        for entry in found {
            if self.models.iter().any(|m| m.name == entry.name) {
                tracing::debug!(name = %entry.name, "a model of a name already taken is ignored");
                continue;
            }
            self.models.push(entry);
        }
        self
    }

    /// Makes the chat model `name` (a model name, display name or base model) the target of
    /// `auto` (`DOCCHAT_DEFAULT_MODEL`); a name that matches none leaves the registry as it
    /// is, with a warning.
    pub fn with_default(mut self, name: &str) -> Registry {
        let Some(chosen) = self.resolve(name).map(|m| m.name.clone()) else {
            tracing::warn!(
                model = name,
                "DOCCHAT_DEFAULT_MODEL names no model; auto keeps its default"
            );
            return self;
        };
        for m in self.models.iter_mut().filter(|m| m.kind == ModelKind::Chat) {
            m.default = m.name == chosen;
        }
        self
    }

    /// Chat models, in file order.
    pub fn chat_models(&self) -> impl Iterator<Item = &ModelEntry> {
        self.models.iter().filter(|m| m.kind == ModelKind::Chat)
    }

    /// Embedding upstreams, in file order.
    pub fn embedding_models(&self) -> impl Iterator<Item = &ModelEntry> {
        self.models
            .iter()
            .filter(|m| m.kind == ModelKind::Embedding)
    }

    /// The transcription upstream, if one is configured (the first).
    pub fn transcription_model(&self) -> Option<&ModelEntry> {
        self.models
            .iter()
            .find(|m| m.kind == ModelKind::Transcription)
    }

    /// The reranker retrieval uses, if one is configured: the one marked default, else the
    /// first.
    pub fn rerank_model(&self) -> Option<&ModelEntry> {
        let mut rerankers = self.models.iter().filter(|m| m.kind == ModelKind::Rerank);
        let first = rerankers.next()?;
        Some(
            std::iter::once(first)
                .chain(rerankers)
                .find(|m| m.default)
                .unwrap_or(first),
        )
    }

    /// The model `auto` routes to: the one marked default, else the first.
    pub fn default_chat_model(&self) -> Option<&ModelEntry> {
        self.chat_models()
            .find(|m| m.default)
            .or_else(|| self.chat_models().next())
    }

    /// Resolves `llm` to a chat model: `auto` (or empty) is the default; then a model name,
    /// then a display name, then a base model when exactly one model has it.
    pub fn resolve(&self, llm: &str) -> Option<&ModelEntry> {
        if llm.is_empty() || llm == "auto" {
            return self.default_chat_model();
        }
        if let Some(m) = self.chat_models().find(|m| m.name == llm) {
            return Some(m);
        }
        if let Some(m) = self.chat_models().find(|m| m.display_name() == llm) {
            return Some(m);
        }
        let mut by_base = self.chat_models().filter(|m| m.base_model() == llm);
        match (by_base.next(), by_base.next()) {
            (Some(only), None) => Some(only),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
[[models]]
name = "gpt-small"
display_name = "Small GPT"
base_url = "http://127.0.0.1:9999/v1"
upstream_model = "small-2026"
context_length = 32768
input_price = 0.5
output_price = 1.5

[[models]]
name = "big"
base_url = "https://api.example.com/v1"
api_key_env = "EXAMPLE_KEY"
base_model = "llama-3-70b"
default = true

[[models]]
name = "embed"
kind = "embedding"
base_url = "http://127.0.0.1:9999/v1"
"#;

    #[test]
    fn parses_entries_and_routes_auto() {
        let r = Registry::parse(FILE).unwrap();
        assert_eq!(r.chat_models().count(), 2);
        assert_eq!(r.embedding_models().count(), 1);
        assert_eq!(r.resolve("auto").unwrap().name, "big");
        let small = r.resolve("gpt-small").unwrap();
        assert_eq!(small.display_name(), "Small GPT");
        assert_eq!(small.upstream_model(), "small-2026");
        assert_eq!(small.base_model(), "small-2026");
        assert_eq!(small.context_length, 32768);
        assert_eq!(r.resolve("big").unwrap().base_model(), "llama-3-70b");
        assert!(
            r.resolve("embed").is_none(),
            "embedders are not chat models"
        );
        assert!(r.resolve("nope").is_none());
    }

    #[test]
    fn rejects_bad_files() {
        assert!(Registry::parse("[[models]]\nname = \"a\"\nbase_url = \"ftp://x\"").is_err());
        assert!(Registry::parse("[[models]]\nname = \"auto\"\nbase_url = \"http://x\"").is_err());
        assert!(
            Registry::parse("[[models]]\nname = \"a\"\nbase_url = \"http://x\"\n[[models]]\nname = \"a\"\nbase_url = \"http://x\"")
                .is_err()
        );
        assert!(
            Registry::parse("[[models]]\nname = \"a\"\nbase_url = \"http://x\"\ncolour = 1")
                .is_err()
        );
    }

    #[test]
    fn empty_registry() {
        let r = Registry::load(None).unwrap();
        assert!(r.resolve("auto").is_none());
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("models.toml");
        assert!(Registry::load(Some(&missing)).is_err());
    }
}
