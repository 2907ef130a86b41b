//! What the h2oGPTe client keeps with a collection: its settings (the client's
//! `CollectionSettings`), its chat settings (`ChatSettings`) and its metadata, and a
//! document's metadata. Each is a JSON object, checked here against the client's model
//! (field types, enums; unknown fields are dropped) and stored as the JSON of what was kept,
//! at most [`MAX_JSON_BYTES`] as sent.
//!
//! Of the collection settings, `gen_doc_summaries`, `gen_doc_questions`, `ocr_model` and
//! `tesseract_lang` act: they are the defaults of an ingestion into the collection that does
//! not give them ([`Asked::or`]). Every other field (chunk sizes, `ingest_mode`, link
//! following, `guardrails_settings`, ...) and the chat settings are kept for the client only:
//! docchat has no matching behaviour. Key order inside objects is not kept.

use docchat_common::error::{ApiError, ApiResult};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// The most bytes of one settings or metadata object, as its JSON text is sent (413 past
/// it).
pub const MAX_JSON_BYTES: usize = 64 * 1024;

/// The client's `CollectionSettings`; every field optional.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CollectionSettings {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens_per_chunk: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunk_overlap_tokens: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gen_doc_summaries: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gen_doc_questions: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audio_input_language: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ocr_model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tesseract_lang: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_tables_as_one_chunk: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunk_by_page: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handwriting_check: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingest_mode: Option<IngestMode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub follow_links: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_depth: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_documents: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_dir: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy_document: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guardrails_settings: Option<GuardrailsSettings>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiry_timezone: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IngestMode {
    Standard,
    Lite,
    AgentOnly,
}

/// The client's `GuardrailsSettings` (kept, not applied).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GuardrailsSettings {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exception_message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub show_violated_responses: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guardrails_on_transcriptions: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vision_guardrails_enabled: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guardrails_vision_llm: Option<String>,
    /// `[column_pattern, redaction_label]` pairs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub column_redaction_config: Option<Vec<[String; 2]>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disallowed_regex_patterns: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub presidio_labels_to_flag: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pii_labels_to_flag: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pii_detection_parse_action: Option<PiiAction>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pii_detection_llm_input_action: Option<PiiAction>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pii_detection_llm_output_action: Option<PiiAction>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_guard_labels_to_flag: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guardrails_labels_to_flag: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guardrails_llm: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guardrails_safe_category: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guardrails_entities: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub column_redaction_custom_entities_to_flag: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub column_redaction_custom_entities: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_pii_entities_to_flag: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_pii_entities: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PiiAction {
    Allow,
    Redact,
    Fail,
}

/// The client's `ChatSettings` (kept for the client: chat does not read them).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatSettings {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm_args: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub self_reflection_config: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rag_config: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_chat_history: Option<ChatHistory>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<TagsFilter>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChatHistory {
    On,
    Off,
    Auto,
}

/// Tags as a list (any of them), or as `{include, exclude}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum TagsFilter {
    List(Vec<String>),
    Filter(TagFilter),
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TagFilter {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclude: Option<Vec<String>>,
}

/// `json` as a `T`: a JSON object of at most [`MAX_JSON_BYTES`] (413 past it) whose fields
/// have the model's types and values (400 naming `field` otherwise).
fn checked<T: DeserializeOwned>(field: &str, json: &str) -> ApiResult<T> {
    docchat_common::limits::check_bytes(field, json, MAX_JSON_BYTES)?;
    let value: Value = serde_json::from_str(json)
        .map_err(|e| ApiError::bad_request(format!("{field} is not valid JSON: {e}")))?;
    if !value.is_object() {
        return Err(ApiError::bad_request(format!(
            "{field} must be a JSON object"
        )));
    }
    serde_json::from_value(value).map_err(|e| ApiError::bad_request(format!("{field}: {e}")))
}

/// Collection settings as sent (see [`checked`]).
pub fn collection_settings(json: &str) -> ApiResult<CollectionSettings> {
    checked("collection_settings", json)
}

/// Chat settings as sent (see [`checked`]).
pub fn chat_settings(json: &str) -> ApiResult<ChatSettings> {
    checked("chat_settings", json)
}

/// Chat settings as they are stored: checked, then written back in their checked form.
pub fn stored_chat_settings(json: &str) -> ApiResult<String> {
    chat_settings(json).map(|c| stored(&c))
}

/// Metadata as sent: any JSON object (see [`checked`]).
pub fn metadata(json: &str) -> ApiResult<Map<String, Value>> {
    checked("metadata", json)
}

/// The stored form of a checked object.
pub fn stored<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "{}".to_owned())
}

/// The collection settings stored in a column (none when absent or unreadable).
pub fn read_collection_settings(column: Option<&str>) -> Option<CollectionSettings> {
    column.and_then(|json| serde_json::from_str(json).ok())
}

/// What an ingestion asked for: absent (or empty) values take the collection's settings.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Asked {
    pub gen_doc_summaries: Option<bool>,
    pub gen_doc_questions: Option<bool>,
    /// Empty: not given.
    pub ocr_model: String,
    /// Empty: not given.
    pub ocr_language: String,
}

/// An ingestion's options once the collection's settings filled what it did not give.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Effective {
    pub gen_doc_summaries: bool,
    pub gen_doc_questions: bool,
    pub ocr_model: String,
    pub ocr_language: String,
}

impl Asked {
    /// What was asked, else the collection's setting, else docchat's default (no summary,
    /// no questions, `auto` recognition in the configured language).
    pub fn or(self, settings: Option<&CollectionSettings>) -> Effective {
        let given = |s: String| (!s.trim().is_empty()).then_some(s);
        let setting = |f: fn(&CollectionSettings) -> Option<&String>| {
            settings
                .and_then(f)
                .filter(|s| !s.trim().is_empty())
                .cloned()
        };
        Effective {
            gen_doc_summaries: self
                .gen_doc_summaries
                .or_else(|| settings.and_then(|s| s.gen_doc_summaries))
                .unwrap_or(false),
            gen_doc_questions: self
                .gen_doc_questions
                .or_else(|| settings.and_then(|s| s.gen_doc_questions))
                .unwrap_or(false),
            ocr_model: given(self.ocr_model)
                .or_else(|| setting(|s| s.ocr_model.as_ref()))
                .unwrap_or_default(),
            ocr_language: given(self.ocr_language)
                .or_else(|| setting(|s| s.tesseract_lang.as_ref()))
                .unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_follow_the_clients_model() {
        let s = collection_settings(
            r#"{"gen_doc_summaries":true,"ocr_model":"off","ingest_mode":"agent_only","unknown":1,
                "max_depth":null,"guardrails_settings":{"pii_detection_parse_action":"redact",
                "column_redaction_config":[["a","b"]]}}"#,
        )
        .unwrap();
        assert_eq!(s.gen_doc_summaries, Some(true));
        assert_eq!(s.ingest_mode, Some(IngestMode::AgentOnly));
        assert_eq!(
            stored(&s),
            r#"{"gen_doc_summaries":true,"ocr_model":"off","ingest_mode":"agent_only","guardrails_settings":{"column_redaction_config":[["a","b"]],"pii_detection_parse_action":"redact"}}"#
        );
        for bad in [
            r#"{"ingest_mode":"fast"}"#,
            r#"{"gen_doc_summaries":"yes"}"#,
            r#"{"max_tokens_per_chunk":1.5}"#,
            r#"{"max_tokens_per_chunk":true}"#,
            r#"{"guardrails_settings":{"pii_detection_llm_input_action":"drop"}}"#,
            r#"{"guardrails_settings":{"column_redaction_config":[["a"]]}}"#,
            r#"[]"#,
            r#""x""#,
            "nope",
        ] {
            let e = collection_settings(bad).unwrap_err();
            assert_eq!(e.code.http_status(), 400, "{bad}: {}", e.message);
        }
        let big = format!(r#"{{"root_dir":"{}"}}"#, "x".repeat(MAX_JSON_BYTES));
        assert_eq!(
            collection_settings(&big).unwrap_err().code.http_status(),
            413
        );
    }

    #[test]
    fn chat_settings_follow_the_clients_model() {
        for good in [
            r#"{}"#,
            r#"{"include_chat_history":"auto","tags":["a","b"],"llm_args":{"temperature":0}}"#,
            r#"{"tags":{"include":["a"],"exclude":["b"]}}"#,
        ] {
            chat_settings(good).unwrap();
        }
        for bad in [
            r#"{"include_chat_history":"sometimes"}"#,
            r#"{"tags":"a"}"#,
            r#"{"llm_args":[1]}"#,
            r#"{"llm":5}"#,
        ] {
            assert_eq!(
                chat_settings(bad).unwrap_err().code.http_status(),
                400,
                "{bad}"
            );
        }
    }

    #[test]
    fn an_ingestion_takes_what_it_does_not_give_from_the_collection() {
        let settings = CollectionSettings {
            gen_doc_summaries: Some(true),
            gen_doc_questions: Some(true),
            ocr_model: Some("off".into()),
            tesseract_lang: Some("deu".into()),
            ..Default::default()
        };
        let none = Asked::default();
        assert_eq!(
            none.clone().or(Some(&settings)),
            Effective {
                gen_doc_summaries: true,
                gen_doc_questions: true,
                ocr_model: "off".into(),
                ocr_language: "deu".into(),
            }
        );
        assert_eq!(none.or(None), Effective::default());
        let asked = Asked {
            gen_doc_summaries: Some(false),
            gen_doc_questions: None,
            ocr_model: "tesseract".into(),
            ocr_language: " ".into(),
        };
        assert_eq!(
            asked.or(Some(&settings)),
            Effective {
                gen_doc_summaries: false,
                gen_doc_questions: true,
                ocr_model: "tesseract".into(),
                ocr_language: "deu".into(),
            }
        );
    }
}
