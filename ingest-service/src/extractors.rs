//! Extractors: named definitions (LLM, JSON schema, prompts, vision, guardrails) that pull
//! structured data out of documents. This module owns their storage and the update rules
//! of SPEC.md; running them arrives with the completions work.

use docchat_common::Caller;
use docchat_common::auth::permissions;
use docchat_common::error::{ApiError, ApiResult};
use docchat_common::limits;
use docchat_common::time::now;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, Condition, DatabaseConnection, EntityTrait, QueryFilter,
    QueryOrder, QuerySelect, Set,
};
use serde::{Deserialize, Serialize};

use crate::entities::extractors;

pub const DEFAULT_SCHEMA: &str = r#"{"type": "object", "properties": {"summary": {"type": "string", "description": "What the document is about"}}, "required": ["summary"]}"#;
pub const DEFAULT_PROMPT: &str = "Extract the information the JSON schema describes from the document. Answer only with JSON that validates against the schema; use null for values the document does not state.";
const VISION_MODES: [&str; 3] = ["on", "off", "auto"];

/// The stored definition of an extractor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spec {
    pub name: String,
    pub description: String,
    pub llm: String,
    pub schema: String,
    pub prompt: String,
    pub pre_prompt_summary: Option<String>,
    pub system_prompt: Option<String>,
    pub keep_intermediate_results: bool,
    pub max_num_chunks: Option<i64>,
    pub vision: String,
    pub vision_llm: Option<String>,
    pub image_batch_image_prompt: Option<String>,
    pub image_batch_final_prompt: Option<String>,
    pub guardrails_settings: Option<serde_json::Value>,
}

/// Fields of a create or update; `None` means "not given".
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Fields {
    pub name: Option<String>,
    pub description: Option<String>,
    pub llm: Option<String>,
    pub schema: Option<String>,
    pub prompt: Option<String>,
    pub pre_prompt_summary: Option<String>,
    pub system_prompt: Option<String>,
    pub keep_intermediate_results: Option<bool>,
    pub max_num_chunks: Option<i64>,
    pub vision: Option<String>,
    pub vision_llm: Option<String>,
    pub image_batch_image_prompt: Option<String>,
    pub image_batch_final_prompt: Option<String>,
    pub guardrails_settings: Option<serde_json::Value>,
}

impl Fields {
    fn is_empty(&self) -> bool {
        *self == Fields::default()
    }
}

fn check_schema(schema: &str) -> ApiResult<()> {
    match serde_json::from_str::<serde_json::Value>(schema) {
        Ok(serde_json::Value::Object(_)) => Ok(()),
        _ => Err(ApiError::bad_request(
            "schema must be a JSON object (a JSON Schema) serialized as a string",
        )),
    }
}

/// The ceilings of docchat_common::limits on the fields sent: model names as names (400),
/// prompts and the description as free text, the schema as a JSON settings field (413).
/// guardrails_settings is measured on its JSON text where it arrives (grpc.rs), before it
/// is parsed.
fn check_sizes(f: &Fields) -> ApiResult<()> {
    for (field, value) in [("llm", &f.llm), ("vision_llm", &f.vision_llm)] {
        if let Some(v) = value {
            limits::check_name(field, v)?;
        }
    }
    for (field, value) in [
        ("description", &f.description),
        ("prompt", &f.prompt),
        ("pre_prompt_summary", &f.pre_prompt_summary),
        ("system_prompt", &f.system_prompt),
        ("image_batch_image_prompt", &f.image_batch_image_prompt),
        ("image_batch_final_prompt", &f.image_batch_final_prompt),
    ] {
        if let Some(v) = value {
            limits::check_text(field, v)?;
        }
    }
    if let Some(schema) = &f.schema {
        limits::check_json("schema", schema)?;
    }
    Ok(())
}

/// Applies `f` to `spec` with SPEC.md's rules: empty llm / vision_llm → 400, empty schema
/// or prompt → the defaults, vision on/off/auto, max_num_chunks ≥ 1, guardrails replaced
/// whole; and the size ceilings (`check_sizes`).
pub fn apply(spec: &mut Spec, f: Fields) -> ApiResult<()> {
    check_sizes(&f)?;
    if let Some(name) = f.name {
        let name = name.trim().to_owned();
        if name.is_empty() || name.chars().count() > limits::NAME_CHARS {
            return Err(ApiError::bad_request(format!(
                "name must be 1 to {} characters",
                limits::NAME_CHARS
            )));
        }
        spec.name = name;
    }
    if let Some(d) = f.description {
        spec.description = d;
    }
    if let Some(llm) = f.llm {
        if llm.trim().is_empty() {
            return Err(ApiError::bad_request("llm must not be empty"));
        }
        spec.llm = llm;
    }
    if let Some(schema) = f.schema {
        if schema.trim().is_empty() {
            spec.schema = DEFAULT_SCHEMA.to_owned();
        } else {
            check_schema(&schema)?;
            spec.schema = schema;
        }
    }
    if let Some(prompt) = f.prompt {
        spec.prompt = if prompt.trim().is_empty() {
            DEFAULT_PROMPT.to_owned()
        } else {
            prompt
        };
    }
    if let Some(v) = f.pre_prompt_summary {
        spec.pre_prompt_summary = Some(v);
    }
    if let Some(v) = f.system_prompt {
        spec.system_prompt = Some(v);
    }
    if let Some(v) = f.keep_intermediate_results {
        spec.keep_intermediate_results = v;
    }
    if let Some(n) = f.max_num_chunks {
        if n < 1 {
            return Err(ApiError::bad_request("max_num_chunks must be at least 1"));
        }
        spec.max_num_chunks = Some(n);
    }
    if let Some(vision) = f.vision {
        if !VISION_MODES.contains(&vision.as_str()) {
            return Err(ApiError::bad_request("vision must be on, off or auto"));
        }
        spec.vision = vision;
    }
    if let Some(v) = f.vision_llm {
        if v.trim().is_empty() {
            return Err(ApiError::bad_request("vision_llm must not be empty"));
        }
        spec.vision_llm = Some(v);
    }
    if let Some(v) = f.image_batch_image_prompt {
        spec.image_batch_image_prompt = Some(v);
    }
    if let Some(v) = f.image_batch_final_prompt {
        spec.image_batch_final_prompt = Some(v);
    }
    if let Some(g) = f.guardrails_settings {
        if !g.is_object() {
            return Err(ApiError::bad_request(
                "guardrails_settings must be an object",
            ));
        }
        spec.guardrails_settings = Some(g);
    }
    Ok(())
}

pub fn spec_of(row: &extractors::Model) -> ApiResult<Spec> {
    serde_json::from_str(&row.spec).map_err(|e| ApiError::internal("reading an extractor", e))
}

fn encode(spec: &Spec) -> ApiResult<String> {
    serde_json::to_string(spec).map_err(|e| ApiError::internal("storing an extractor", e))
}

pub async fn create(
    db: &DatabaseConnection,
    caller: &Caller,
    f: Fields,
) -> ApiResult<extractors::Model> {
    if f.name.as_deref().is_none_or(|n| n.trim().is_empty()) {
        return Err(ApiError::bad_request("name is required"));
    }
    if f.llm.is_none() {
        return Err(ApiError::bad_request("llm is required"));
    }
    let mut spec = Spec {
        name: String::new(),
        description: String::new(),
        llm: String::new(),
        schema: DEFAULT_SCHEMA.to_owned(),
        prompt: DEFAULT_PROMPT.to_owned(),
        pre_prompt_summary: None,
        system_prompt: None,
        keep_intermediate_results: false,
        max_num_chunks: None,
        vision: "auto".to_owned(),
        vision_llm: None,
        image_batch_image_prompt: None,
        image_batch_final_prompt: None,
        guardrails_settings: None,
    };
    apply(&mut spec, f)?;
    let at = now();
    Ok(extractors::ActiveModel {
        id: Set(docchat_common::ids::new_id()),
        owner_id: Set(caller.user_id.clone()),
        name: Set(spec.name.clone()),
        is_public: Set(false),
        spec: Set(encode(&spec)?),
        created_at: Set(at),
        updated_at: Set(at),
    }
    .insert(db)
    .await?)
}

fn visible(caller: &Caller) -> Condition {
    Condition::any()
        .add(extractors::Column::OwnerId.eq(caller.user_id.clone()))
        .add(extractors::Column::IsPublic.eq(true))
}

fn not_found(id: &str) -> ApiError {
    ApiError::not_found(format!("extractor {id} not found"))
}

/// The extractors the caller sees, newest first. A page holds at most `page_bytes` of
/// stored definitions (at least one extractor), whatever its limit.
pub async fn list(
    db: &DatabaseConnection,
    caller: &Caller,
    offset: u64,
    limit: u64,
    name_filter: &str,
    page_bytes: u64,
) -> ApiResult<limits::SizedPage<extractors::Model>> {
    let mut q = extractors::Entity::find().filter(visible(caller));
    if !name_filter.is_empty() {
        q = q.filter(extractors::Column::Name.contains(name_filter));
    }
    let limit = if limit == 0 { 100 } else { limit.min(1000) };
    let page = q
        .order_by_desc(extractors::Column::CreatedAt)
        .order_by_asc(extractors::Column::Id)
        .offset(offset)
        .limit(limit);
    use extractors::Column as C;
    Ok(limits::page_by_size(db, page, C::Id, &[C::Name, C::Spec], page_bytes).await?)
}

pub async fn get(
    db: &DatabaseConnection,
    caller: &Caller,
    id: &str,
) -> ApiResult<extractors::Model> {
    extractors::Entity::find_by_id(id.to_owned())
        .filter(visible(caller))
        .one(db)
        .await?
        .ok_or_else(|| not_found(id))
}

/// PATCH: needs EditExtractors (401), at least one field (400), an extractor the caller
/// owns (404). Nothing is stored unless every field is valid.
pub async fn update(
    db: &DatabaseConnection,
    caller: &Caller,
    id: &str,
    f: Fields,
) -> ApiResult<extractors::Model> {
    caller.require_permission(permissions::EDIT_EXTRACTORS)?;
    if f.is_empty() {
        return Err(ApiError::bad_request(
            "the update body needs at least one field",
        ));
    }
    let row = extractors::Entity::find_by_id(id.to_owned())
        .filter(extractors::Column::OwnerId.eq(caller.user_id.clone()))
        .one(db)
        .await?
        .ok_or_else(|| not_found(id))?;
    let mut spec = spec_of(&row)?;
    // `apply` may have changed some fields before failing on a later one; `spec` is a copy
    // and is stored only when every field was valid.
    apply(&mut spec, f)?;
    let mut active: extractors::ActiveModel = row.into();
    active.name = Set(spec.name.clone());
    active.spec = Set(encode(&spec)?);
    active.updated_at = Set(now());
    Ok(active.update(db).await?)
}

pub async fn delete(db: &DatabaseConnection, caller: &Caller, id: &str) -> ApiResult<()> {
    let deleted = extractors::Entity::delete_many()
        .filter(extractors::Column::Id.eq(id))
        .filter(extractors::Column::OwnerId.eq(caller.user_id.clone()))
        .exec(db)
        .await?;
    if deleted.rows_affected == 0 {
        return Err(not_found(id));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> Spec {
        Spec {
            name: "n".into(),
            description: String::new(),
            llm: "m".into(),
            schema: "{}".into(),
            prompt: "p".into(),
            pre_prompt_summary: None,
            system_prompt: None,
            keep_intermediate_results: false,
            max_num_chunks: None,
            vision: "auto".into(),
            vision_llm: None,
            image_batch_image_prompt: None,
            image_batch_final_prompt: None,
            guardrails_settings: Some(serde_json::json!({"a": 1, "b": 2})),
        }
    }

    #[test]
    fn update_rules() {
        let mut s = spec();
        assert!(
            apply(
                &mut s,
                Fields {
                    llm: Some(String::new()),
                    ..Fields::default()
                }
            )
            .is_err()
        );
        assert!(
            apply(
                &mut s,
                Fields {
                    vision_llm: Some(" ".into()),
                    ..Fields::default()
                }
            )
            .is_err()
        );
        assert!(
            apply(
                &mut s,
                Fields {
                    vision: Some("sometimes".into()),
                    ..Fields::default()
                }
            )
            .is_err()
        );
        assert!(
            apply(
                &mut s,
                Fields {
                    max_num_chunks: Some(0),
                    ..Fields::default()
                }
            )
            .is_err()
        );
        assert!(
            apply(
                &mut s,
                Fields {
                    schema: Some("[1]".into()),
                    ..Fields::default()
                }
            )
            .is_err()
        );
        apply(
            &mut s,
            Fields {
                schema: Some(String::new()),
                prompt: Some(String::new()),
                ..Fields::default()
            },
        )
        .unwrap();
        assert_eq!(s.schema, DEFAULT_SCHEMA);
        assert_eq!(s.prompt, DEFAULT_PROMPT);
        apply(
            &mut s,
            Fields {
                guardrails_settings: Some(serde_json::json!({"c": 3})),
                ..Fields::default()
            },
        )
        .unwrap();
        assert_eq!(
            s.guardrails_settings,
            Some(serde_json::json!({"c": 3})),
            "replaced whole"
        );
        apply(
            &mut s,
            Fields {
                vision: Some("off".into()),
                max_num_chunks: Some(1),
                ..Fields::default()
            },
        )
        .unwrap();
        assert_eq!((s.vision.as_str(), s.max_num_chunks), ("off", Some(1)));
    }
}
