//! The live model catalog: the models file, the local GGUF chat models, and the models of
//! the OpenAI-compatible upstreams named in the environment without a models file
//! (`OPENAI_BASE_URL` / `OPENAI_API_KEY`, `OLLAMA_BASE_URL`, or their `DOCCHAT_` forms; the
//! conventions of Open WebUI and LiteLLM). Ollama, vLLM, llama.cpp's server, LM Studio and
//! OpenAI itself all list their models at `GET {base}/models`.
//!
//! The registry is built in this order, and [`Registry::resolve`] and `auto` read it so:
//! the models file's entries (they win over any other entry of the same name), then each
//! upstream's models under the upstream's own ids (prefixed `openai/` or `ollama/` only
//! where both upstreams list the same id), then the local models. `auto` is
//! `DOCCHAT_DEFAULT_MODEL` when it names a model, else the file's `default = true`, else the
//! first model listed. An upstream that does not answer is logged, reported by
//! [`Catalog::unreachable`] (chat-service's readiness shows it as degraded) and tried again
//! at every [`Catalog::refresh`]; its models already listed stay until it answers again.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use docchat_common::config::Config;
use secrecy::{ExposeSecret, SecretString};
use serde_json::Value;

use crate::registry::{ApiKey, ModelEntry, ModelKind, Registry, RegistryError};

/// How long one listing may take.
const LIST_TIMEOUT: Duration = Duration::from_secs(5);

/// OpenAI's own API, when only a key is given.
const OPENAI_API: &str = "https://api.openai.com/v1";

/// Ids that name no chat model (embedders, speech, images, moderation, rerankers): an
/// upstream lists them beside its chat models, and they are not offered for chat.
const NOT_CHAT: [&str; 11] = [
    "embed",
    "whisper",
    "tts",
    "dall-e",
    "moderation",
    "rerank",
    "transcribe",
    "gpt-image",
    "realtime",
    "babbage",
    "davinci",
];

/// One OpenAI-compatible upstream whose models are listed.
#[derive(Debug, Clone)]
pub struct Upstream {
    /// `openai` or `ollama`: the prefix of its ids where two upstreams list the same one.
    pub name: &'static str,
    /// Its `/v1` root.
    pub base_url: String,
    pub api_key: Option<SecretString>,
}

impl Upstream {
    /// The upstreams `config` names: OpenAI-compatible (a base URL, a key, or both; a key
    /// alone means OpenAI's API) and Ollama (its root or its `/v1`).
    pub fn from_config(config: &Config) -> Vec<Upstream> {
        fn given(v: &Option<String>) -> Option<&str> {
            v.as_deref().map(str::trim).filter(|v| !v.is_empty())
        }
        let key = config
            .openai_api_key
            .as_ref()
            .filter(|k| !k.expose_secret().trim().is_empty())
            .cloned();
        let mut ups = Vec::new();
        match (given(&config.openai_base_url), key) {
            (Some(url), key) => ups.push(Upstream {
                name: "openai",
                base_url: url.trim_end_matches('/').to_owned(),
                api_key: key,
            }),
            (None, Some(key)) => ups.push(Upstream {
                name: "openai",
                base_url: OPENAI_API.to_owned(),
                api_key: Some(key),
            }),
            (None, None) => {}
        }
        if let Some(url) = given(&config.ollama_base_url) {
            let root = url.trim_end_matches('/');
            let base_url = if root.ends_with("/v1") {
                root.to_owned()
            } else {
                format!("{root}/v1")
            };
            ups.push(Upstream {
                name: "ollama",
                base_url,
                api_key: None,
            });
        }
        ups
    }

    /// The chat models this upstream lists: `(id, context length if stated)`.
    async fn list(&self, http: &reqwest::Client) -> Result<Vec<(String, Option<u64>)>, String> {
        let mut request = http.get(format!("{}/models", self.base_url));
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key.expose_secret());
        }
        let response = request.send().await.map_err(|e| e.to_string())?;
        let status = response.status();
        if !status.is_success() {
            return Err(format!("GET /models answered {status}"));
        }
        let body: Value = response.json().await.map_err(|e| e.to_string())?;
        let items = body
            .get("data")
            .or_else(|| body.get("models"))
            .and_then(Value::as_array)
            .ok_or("GET /models answered no data list")?;
        Ok(items
            .iter()
            .filter_map(|item| {
                let id = item.get("id").or_else(|| item.get("model"))?.as_str()?;
                let lower = id.to_lowercase();
                if id.trim().is_empty() || NOT_CHAT.iter().any(|w| lower.contains(w)) {
                    return None;
                }
                Some((id.to_owned(), stated_context(item)))
            })
            .collect())
    }
}

/// The context length a listing item states: OpenRouter's `context_length`, vLLM's
/// `max_model_len`, LM Studio's `max_context_length`, llama.cpp's `meta.n_ctx_train`.
fn stated_context(item: &Value) -> Option<u64> {
    ["context_length", "max_model_len", "max_context_length"]
        .iter()
        .find_map(|k| item.get(*k).and_then(Value::as_u64))
        .or_else(|| item.pointer("/meta/n_ctx_train").and_then(Value::as_u64))
        .filter(|&n| n > 0)
}

/// What the catalog is built from, and its current registry.
pub struct Catalog {
    file: Registry,
    local: Vec<ModelEntry>,
    upstreams: Vec<Upstream>,
    default_model: Option<String>,
    context_length: u64,
    http: reqwest::Client,
    state: RwLock<State>,
}

struct State {
    registry: Arc<Registry>,
    /// Each upstream's last listing (kept while it does not answer).
    listed: Vec<Vec<(String, Option<u64>)>>,
    /// The upstreams that did not answer their last listing, with why.
    unreachable: Vec<String>,
}

impl Catalog {
    /// The models file of `config` and `local` models, and the upstreams `config` names,
    /// listed once (an upstream that does not answer is a warning, not an error).
    pub async fn load(config: &Config, local: Vec<ModelEntry>) -> Result<Catalog, RegistryError> {
        let file = Registry::load(config.models_file.as_deref())?;
        let catalog = Catalog::new(
            file,
            local,
            Upstream::from_config(config),
            config.default_model.clone(),
            config.upstream_context_length,
        );
        catalog.refresh().await;
        Ok(catalog)
    }

    /// A catalog of `file`, `upstreams` (not listed until [`refresh`](Self::refresh)) and
    /// `local` models.
    pub fn new(
        file: Registry,
        local: Vec<ModelEntry>,
        upstreams: Vec<Upstream>,
        default_model: Option<String>,
        context_length: u64,
    ) -> Catalog {
        let http = reqwest::Client::builder()
            .connect_timeout(LIST_TIMEOUT)
            .timeout(LIST_TIMEOUT)
            .build()
            .unwrap_or_default();
        let listed = vec![Vec::new(); upstreams.len()];
        let catalog = Catalog {
            file,
            local,
            upstreams,
            default_model,
            context_length,
            http,
            state: RwLock::new(State {
                registry: Arc::new(Registry::default()),
                listed,
                unreachable: Vec::new(),
            }),
        };
        let registry = catalog.build(&catalog.state().listed);
        catalog.state_mut().registry = Arc::new(registry);
        catalog
    }

    /// The registry as of the last listing.
    pub fn registry(&self) -> Arc<Registry> {
        self.state().registry.clone()
    }

    /// The upstreams that did not answer their last listing, each with why.
    pub fn unreachable(&self) -> Vec<String> {
        self.state().unreachable.clone()
    }

    /// Whether any upstream is configured (else [`refresh`](Self::refresh) does nothing).
    pub fn has_upstreams(&self) -> bool {
        !self.upstreams.is_empty()
    }

    /// Lists every upstream's models again; true when the registry changed.
    pub async fn refresh(&self) -> bool {
        if self.upstreams.is_empty() {
            return false;
        }
        let answers =
            futures::future::join_all(self.upstreams.iter().map(|u| u.list(&self.http))).await;
        let mut listed = self.state().listed.clone();
        let mut unreachable = Vec::new();
        for ((up, answer), slot) in self.upstreams.iter().zip(answers).zip(listed.iter_mut()) {
            match answer {
                Ok(models) => *slot = models,
                Err(why) => {
                    tracing::warn!(upstream = up.name, base_url = %up.base_url, error = %why, "model upstream did not list its models; retried at the next refresh");
                    unreachable.push(format!("{} ({}): {why}", up.name, up.base_url));
                }
            }
        }
        let registry = self.build(&listed);
        let mut state = self.state_mut();
        let changed = *state.registry != registry;
        if changed {
            tracing::info!(models = ?registry.chat_models().map(|m| m.name.as_str()).collect::<Vec<_>>(), "chat models");
            state.registry = Arc::new(registry);
        }
        state.listed = listed;
        state.unreachable = unreachable;
        changed
    }

    /// The registry of the file, the upstreams' `listed` models and the local ones.
    fn build(&self, listed: &[Vec<(String, Option<u64>)>]) -> Registry {
        let shared = |id: &str| {
            listed
                .iter()
                .filter(|l| l.iter().any(|(i, _)| i == id))
                .count()
                > 1
        };
        let mut found = Vec::new();
        for (up, models) in self.upstreams.iter().zip(listed) {
            for (id, context) in models {
                let name = if shared(id) {
                    format!("{}/{id}", up.name)
                } else {
                    id.clone()
                };
                // A name the models file (or an earlier upstream) took keeps that entry
                // (`with_models`); `auto` is no model's name.
                if name == "auto" {
                    continue;
                }
                found.push(ModelEntry {
                    name,
                    display_name: Some(id.clone()),
                    provider: "openai".into(),
                    base_url: up.base_url.clone(),
                    upstream_model: Some(id.clone()),
                    api_key_env: None,
                    api_key: up.api_key.clone().map(ApiKey),
                    base_model: Some(id.clone()),
                    context_length: context.unwrap_or(self.context_length),
                    input_price: 0.0,
                    output_price: 0.0,
                    vision: false,
                    reasoning: false,
                    // OpenAI-compatible servers take `tools`; one whose model cannot use
                    // them answers the agent's call with an error it reports.
                    tools: true,
                    default: false,
                    kind: ModelKind::Chat,
                    dimensions: None,
                    max_documents: None,
                    local_path: None,
                });
            }
        }
        let registry = self
            .file
            .clone()
            .with_models(found)
            .with_models(self.local.iter().cloned());
        match &self.default_model {
            Some(name) => registry.with_default(name),
            None => registry,
        }
    }

    fn state(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|p| p.into_inner())
    }

    fn state_mut(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(f: impl FnOnce(&mut Config)) -> Config {
        let mut c = Config::default();
        f(&mut c);
        c
    }

    #[test]
    fn upstreams_from_the_environment_conventions() {
        assert!(Upstream::from_config(&Config::default()).is_empty());
        let ups = Upstream::from_config(&config(|c| {
            c.openai_api_key = Some(SecretString::from("sk-x"));
        }));
        assert_eq!(
            (ups[0].name, ups[0].base_url.as_str()),
            ("openai", OPENAI_API)
        );
        let ups = Upstream::from_config(&config(|c| {
            c.openai_base_url = Some("http://127.0.0.1:8000/v1/".into());
            c.ollama_base_url = Some("http://127.0.0.1:11434".into());
        }));
        let got: Vec<_> = ups
            .iter()
            .map(|u| (u.name, u.base_url.as_str(), u.api_key.is_some()))
            .collect();
        assert_eq!(
            got,
            [
                ("openai", "http://127.0.0.1:8000/v1", false),
                ("ollama", "http://127.0.0.1:11434/v1", false)
            ]
        );
        let ups = Upstream::from_config(&config(|c| {
            c.ollama_base_url = Some("http://h:11434/v1".into());
            c.openai_api_key = Some(SecretString::from("  "));
        }));
        assert_eq!(ups.len(), 1);
        assert_eq!(ups[0].base_url, "http://h:11434/v1");
    }

    #[test]
    fn listings_state_their_context_their_way() {
        let item = |v: Value| stated_context(&v);
        assert_eq!(
            item(serde_json::json!({"id": "a", "max_model_len": 32768})),
            Some(32768)
        );
        assert_eq!(
            item(serde_json::json!({"id": "a", "context_length": 128000})),
            Some(128000)
        );
        assert_eq!(
            item(serde_json::json!({"id": "a", "meta": {"n_ctx_train": 4096}})),
            Some(4096)
        );
        assert_eq!(item(serde_json::json!({"id": "a", "owned_by": "x"})), None);
    }
}
