//! Sentence embedders: the [`Embedder`] trait, the local [`MiniLmEmbedder`], the
//! [`OpenAiEmbedder`] for OpenAI-compatible upstreams, and [`Embedders`], every embedder
//! docchat can use by name.

#[cfg(target_arch = "x86_64")]
mod amx;
#[cfg(target_arch = "x86_64")]
mod avx2;
mod bert;
#[cfg(target_arch = "x86_64")]
mod int8;
pub(crate) mod kernels;
#[cfg(target_arch = "x86_64")]
mod levels;
mod minilm;
mod openai;

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use bert::Precision;
pub use minilm::{MINILM_NAME, MiniLmEmbedder};
pub use openai::OpenAiEmbedder;

use crate::registry::Registry;

/// Failures of loading or running an embedder.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid model file {path}: {message}")]
    InvalidModel { path: PathBuf, message: String },
    #[error("tokenizer failed: {0}")]
    Tokenizer(String),
    #[error("embedding model {model}: environment variable {var} (its API key) is not set")]
    MissingApiKey { model: String, var: String },
    #[error("embedding upstream {model} answered {status}: {message}")]
    Upstream {
        model: String,
        status: u16,
        message: String,
    },
    #[error("embedding upstream {model} is unreachable: {message}")]
    Transport { model: String, message: String },
    #[error("embedding upstream {model} sent an invalid answer: {message}")]
    InvalidResponse { model: String, message: String },
    #[error("embedder {0} is configured twice")]
    DuplicateName(String),
    #[error("the caller stopped waiting")]
    Cancelled,
    #[error("embedder failure: {0}")]
    Internal(String),
}

/// L2-normalized sentence embeddings.
#[async_trait::async_trait]
pub trait Embedder: Send + Sync {
    /// The name callers select the embedder by, e.g. `all-MiniLM-L6-v2`.
    fn name(&self) -> &str;

    /// Length of every vector (384 for MiniLM).
    fn dimension(&self) -> usize;

    /// The longest input the model reads, in its tokens, including the special tokens it
    /// adds itself (MiniLM: 256, sentence-transformers' `max_seq_length`, of which `[CLS]`
    /// and `[SEP]` take two). Longer inputs are truncated.
    fn max_tokens(&self) -> usize;

    /// The most [`count_tokens`](Embedder::count_tokens) a text may have to be embedded
    /// whole: `max_tokens` less the special tokens (MiniLM: 254). What a chunker should
    /// size chunks by.
    fn max_input_tokens(&self) -> usize {
        self.max_tokens()
    }

    /// Tokens of `text` in the embedder's tokenizer, without special tokens. Runs on the
    /// calling thread (tens of microseconds for a chunk-sized text).
    fn count_tokens(&self, text: &str) -> usize;

    /// The languages the model was trained for (ISO 639-1), when known; none when not (an
    /// upstream's model is whatever the upstream serves).
    fn languages(&self) -> &'static [&'static str] {
        &[]
    }

    /// One unit-length vector per text, in order.
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError>;
}

/// Scales `v` to unit length, as `torch.nn.functional.normalize` does (a zero vector stays
/// zero: the norm is clamped to at least 1e-12).
pub fn l2_normalize(v: &mut [f32]) {
    let norm = v
        .iter()
        .map(|&x| f64::from(x) * f64::from(x))
        .sum::<f64>()
        .sqrt();
    let inv = (1.0 / norm.max(1e-12)) as f32;
    for x in v.iter_mut() {
        *x *= inv;
    }
}

/// Every embedder docchat can use, by name: the local MiniLM when its files are in the
/// models dir, and each `kind = "embedding"` upstream of the models file.
#[derive(Clone, Default)]
pub struct Embedders {
    embedders: Vec<Arc<dyn Embedder>>,
    default: Option<usize>,
}

impl std::fmt::Debug for Embedders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedders")
            .field("names", &self.names())
            .field("default", &self.default_name())
            .finish()
    }
}

impl Embedders {
    /// Loads the local MiniLM when `<models_dir>/all-MiniLM-L6-v2/model.safetensors`
    /// exists (its pool gets `threads` threads: the caller's `DOCCHAT_EMBED_THREADS`, None
    /// for one per available CPU) and builds every embedding upstream of the registry (their
    /// API keys are read from the environment now). The default is MiniLM when present,
    /// else the first upstream.
    pub fn load(
        registry: &Registry,
        models_dir: &Path,
        threads: Option<usize>,
    ) -> Result<Embedders, EmbedError> {
        let mut list: Vec<Arc<dyn Embedder>> = Vec::new();
        let minilm_dir = MiniLmEmbedder::default_dir(models_dir);
        if minilm_dir.join("model.safetensors").is_file() {
            list.push(Arc::new(MiniLmEmbedder::load(&minilm_dir, threads)?));
        } else {
            tracing::info!(
                dir = %minilm_dir.display(),
                "no local embedder (run scripts/fetch-models.sh to fetch all-MiniLM-L6-v2)"
            );
        }
        for entry in registry.embedding_models() {
            list.push(Arc::new(OpenAiEmbedder::from_entry(entry)?));
        }
        Embedders::from_list(list)
    }

    /// Gathers the given embedders; the first is the default. Names must be unique.
    pub fn from_list(embedders: Vec<Arc<dyn Embedder>>) -> Result<Embedders, EmbedError> {
        let mut seen = std::collections::HashSet::new();
        for e in &embedders {
            if !seen.insert(e.name().to_owned()) {
                return Err(EmbedError::DuplicateName(e.name().to_owned()));
            }
        }
        let default = (!embedders.is_empty()).then_some(0);
        Ok(Embedders { embedders, default })
    }

    /// The embedder called `name`.
    pub fn get(&self, name: &str) -> Option<Arc<dyn Embedder>> {
        self.embedders.iter().find(|e| e.name() == name).cloned()
    }

    /// The name of the embedder used when none is chosen.
    pub fn default_name(&self) -> Option<&str> {
        self.default
            .and_then(|i| self.embedders.get(i))
            .map(|e| e.name())
    }

    /// The embedder used when none is chosen.
    pub fn default_embedder(&self) -> Option<Arc<dyn Embedder>> {
        self.default.and_then(|i| self.embedders.get(i)).cloned()
    }

    /// Every embedder, the default first.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn Embedder>> {
        self.embedders.iter()
    }

    /// Every embedder's name, the default first.
    pub fn names(&self) -> Vec<&str> {
        self.embedders.iter().map(|e| e.name()).collect()
    }

    pub fn is_empty(&self) -> bool {
        self.embedders.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cosine(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    #[test]
    fn normalize_gives_unit_length_and_keeps_direction() {
        let mut v = vec![3.0, 4.0];
        l2_normalize(&mut v);
        assert_eq!(v, vec![0.6, 0.8]);
        let mut big = vec![1e20, -1e20, 1e20];
        l2_normalize(&mut big);
        let norm: f32 = big.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-6);
        let mut zero = vec![0.0; 4];
        l2_normalize(&mut zero);
        assert_eq!(zero, vec![0.0; 4]);
    }

    #[test]
    fn mean_pooling_then_normalizing_matches_hand_computation() {
        // Two tokens of a 3-dimensional model: mean (2, 2, 1), norm 3.
        let k = kernels::Kernels::detect();
        let mut pooled = k.mean_rows(&[1.0, 3.0, 0.0, 3.0, 1.0, 2.0], 3);
        assert_eq!(pooled, vec![2.0, 2.0, 1.0]);
        l2_normalize(&mut pooled);
        let want = [2.0 / 3.0, 2.0 / 3.0, 1.0 / 3.0];
        for (a, b) in pooled.iter().zip(want) {
            assert!((a - b).abs() < 1e-7);
        }
        assert!((cosine(&pooled, &pooled) - 1.0).abs() < 1e-6);
    }

    struct Fixed(&'static str);

    #[async_trait::async_trait]
    impl Embedder for Fixed {
        fn name(&self) -> &str {
            self.0
        }
        fn dimension(&self) -> usize {
            2
        }
        fn max_tokens(&self) -> usize {
            10
        }
        fn count_tokens(&self, text: &str) -> usize {
            text.split_whitespace().count()
        }
        async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
            Ok(texts.iter().map(|_| vec![1.0, 0.0]).collect())
        }
    }

    #[test]
    fn embedders_by_name_with_the_first_as_default() {
        let e = Embedders::from_list(vec![Arc::new(Fixed("a")), Arc::new(Fixed("b"))]).unwrap();
        assert_eq!(e.names(), vec!["a", "b"]);
        assert_eq!(e.default_name(), Some("a"));
        assert_eq!(e.get("b").unwrap().name(), "b");
        assert_eq!(e.get("b").unwrap().max_input_tokens(), 10);
        assert!(e.get("c").is_none());
        assert!(matches!(
            Embedders::from_list(vec![Arc::new(Fixed("a")), Arc::new(Fixed("a"))]),
            Err(EmbedError::DuplicateName(n)) if n == "a"
        ));
        let none = Embedders::default();
        assert!(none.is_empty() && none.default_name().is_none());
    }

    #[test]
    fn without_local_model_the_first_upstream_is_the_default() {
        let registry = Registry::parse(
            r#"
[[models]]
name = "chat"
base_url = "http://127.0.0.1:1/v1"

[[models]]
name = "embed-a"
kind = "embedding"
base_url = "http://127.0.0.1:1/v1"
dimensions = 1024

[[models]]
name = "embed-b"
kind = "embedding"
base_url = "http://127.0.0.1:1/v1/"
"#,
        )
        .unwrap();
        let empty_models = tempfile::tempdir().unwrap();
        let e = Embedders::load(&registry, empty_models.path(), Some(1)).unwrap();
        assert_eq!(e.names(), vec!["embed-a", "embed-b"]);
        assert_eq!(e.default_name(), Some("embed-a"));
        assert_eq!(e.get("embed-a").unwrap().dimension(), 1024);
        assert_eq!(e.get("embed-b").unwrap().dimension(), 0);
        assert_eq!(e.get("embed-b").unwrap().max_tokens(), 8192);
        assert!(e.get("chat").is_none());
    }

    #[test]
    fn a_missing_api_key_variable_is_an_error() {
        let registry = Registry::parse(
            r#"
[[models]]
name = "embed"
kind = "embedding"
base_url = "http://127.0.0.1:1/v1"
api_key_env = "DOCCHAT_TEST_SURELY_UNSET_EMBED_KEY_5f2c"
"#,
        )
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            Embedders::load(&registry, dir.path(), Some(1)),
            Err(EmbedError::MissingApiKey { var, .. }) if var == "DOCCHAT_TEST_SURELY_UNSET_EMBED_KEY_5f2c"
        ));
    }
}
