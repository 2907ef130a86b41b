//! Conversions between the ingest protos and the service's rows and domain types, so
//! `grpc.rs` only unpacks, authorizes, calls and packs.

use docchat_common::error::ApiResult;
use docchat_common::time::{opt_to_proto, to_proto};
use docchat_proto::events::v1::LlmUsage;
use docchat_proto::ingest::v1 as pb;

use crate::collections::CollectionView;
use crate::documents::{ListFilter, Segment};
use crate::entities::collections as entity;
use crate::entities::{documents as doc_entity, jobs as job_entity};
use crate::jobs::errors_of;

pub(crate) fn collection_pb(view: CollectionView) -> pb::Collection {
    let entity::Model {
        id,
        owner_id: _,
        owner_username,
        name,
        description,
        embedding_model,
        is_public,
        status,
        document_count,
        document_size,
        created_at,
        updated_at,
        description_auto_generated,
        description_generated_at,
        description_dirty_at,
        description_generation_started_at,
        index_version: _,
        // Read apart: GetCollectionSettings.
        collection_settings: _,
        chat_settings: _,
        metadata: _,
    } = view.collection;
    pb::Collection {
        id,
        name,
        description,
        embedding_model,
        document_count,
        document_size,
        created_at: Some(to_proto(created_at)),
        updated_at: Some(to_proto(updated_at)),
        user_count: view.user_count,
        is_public,
        username: owner_username,
        sessions_count: view.sessions_count,
        status,
        description_auto_generated,
        description_generated_at: opt_to_proto(description_generated_at),
        description_dirty_at: opt_to_proto(description_dirty_at),
        description_generation_started_at: opt_to_proto(description_generation_started_at),
    }
}

pub(crate) fn document_pb(d: doc_entity::Model) -> pb::Document {
    let doc_entity::Model {
        id,
        owner_id: _,
        owner_username,
        collection_id,
        name,
        kind,
        size,
        page_count,
        status,
        upload_id: _,
        chat_session_id,
        summary,
        questions: _,
        segments: _,
        page_sources: _,
        message,
        // GetDocument adds it (document_with_metadata).
        metadata: _,
        uri,
        created_at,
        updated_at,
    } = d;
    pb::Document {
        id,
        name,
        username: owner_username,
        r#type: kind,
        size,
        page_count,
        status,
        created_at: Some(to_proto(created_at)),
        updated_at: Some(to_proto(updated_at)),
        collection_id,
        // The session's name and visibility are chat-service's to tell: the gateway adds
        // them for its caller.
        chat_session_visible: false,
        chat_session_name: None,
        chat_session_id,
        summary,
        message,
        page_sources: Default::default(),
        uri,
        metadata_json: None,
    }
}

/// A document as GetDocument answers it: with how its pages were read and its metadata.
pub(crate) fn document_in_full_pb(d: doc_entity::Model) -> pb::Document {
    let page_sources = page_sources(&d);
    let metadata_json = Some(d.metadata.clone().unwrap_or_else(|| "{}".to_owned()));
    pb::Document {
        page_sources,
        metadata_json,
        ..document_pb(d)
    }
}

/// How each page of a document was read (its `page_sources` column: page number → `text`,
/// `tesseract` or `failed`); empty when no page needed recognition.
pub(crate) fn page_sources(d: &doc_entity::Model) -> std::collections::HashMap<String, String> {
    d.page_sources
        .as_deref()
        .and_then(|json| serde_json::from_str(json).ok())
        .unwrap_or_default()
}

pub(crate) fn job_pb(job: job_entity::Model) -> pb::Job {
    let errors = errors_of(&job);
    let job_entity::Model {
        id,
        kind,
        owner_id,
        owner_username,
        status,
        queue,
        progress,
        errors: _,
        collection_id,
        collection_name,
        upload_id: _,
        document_id,
        params: _,
        attempts: _,
        lease_until: _,
        created_at,
        updated_at,
        started_at,
        finished_at,
        canceled_by,
        cancel_reason,
    } = job;
    pb::Job {
        id,
        kind,
        status,
        progress,
        errors,
        collection_id,
        collection_name,
        document_id,
        user_id: owner_id,
        username: owner_username,
        queue,
        created_at: Some(to_proto(created_at)),
        updated_at: Some(to_proto(updated_at)),
        started_at: opt_to_proto(started_at),
        finished_at: opt_to_proto(finished_at),
        canceled_by,
        cancel_reason,
    }
}

/// A hit as the RPCs send it, citing `pages`.
pub(crate) fn hit_pb(h: crate::search::Hit, pages: Vec<u32>) -> pb::SearchHit {
    pb::SearchHit {
        chunk_id: h.chunk.id,
        document_id: h.chunk.document_id,
        document_name: h.document_name,
        collection_id: h.chunk.collection_id,
        pages,
        text: h.chunk.text,
        score: h.score,
        chunk_index: u32::try_from(h.chunk.chunk_index).unwrap_or(0),
        start_time: h.chunk.start_time,
        end_time: h.chunk.end_time,
    }
}

pub(crate) fn tag_pb(t: crate::entities::tags::Model) -> pb::Tag {
    pb::Tag {
        id: t.id,
        name: t.name,
        description: t.description,
        format: t.format,
    }
}

pub(crate) fn fields_in(f: Option<pb::ExtractorFields>) -> ApiResult<crate::extractors::Fields> {
    let pb::ExtractorFields {
        name,
        description,
        llm,
        schema,
        prompt,
        pre_prompt_summary,
        system_prompt,
        keep_intermediate_results,
        max_num_chunks,
        vision,
        vision_llm,
        image_batch_image_prompt,
        image_batch_final_prompt,
        guardrails_settings_json,
    } = f.unwrap_or_default();
    if let Some(json) = &guardrails_settings_json {
        docchat_common::limits::check_json("guardrails_settings", json)?;
    }
    let guardrails_settings = match guardrails_settings_json {
        Some(json) => Some(serde_json::from_str(&json).map_err(|_| {
            docchat_common::ApiError::bad_request("guardrails_settings must be a JSON object")
        })?),
        None => None,
    };
    Ok(crate::extractors::Fields {
        name,
        description,
        llm,
        schema,
        prompt,
        pre_prompt_summary,
        system_prompt,
        keep_intermediate_results,
        max_num_chunks,
        vision,
        vision_llm,
        image_batch_image_prompt,
        image_batch_final_prompt,
        guardrails_settings,
    })
}

pub(crate) fn extractor_pb(row: crate::entities::extractors::Model) -> ApiResult<pb::Extractor> {
    let spec = crate::extractors::spec_of(&row)?;
    let crate::extractors::Spec {
        name,
        description,
        llm,
        schema,
        prompt,
        pre_prompt_summary,
        system_prompt,
        keep_intermediate_results,
        max_num_chunks,
        vision,
        vision_llm,
        image_batch_image_prompt,
        image_batch_final_prompt,
        guardrails_settings,
    } = spec;
    Ok(pb::Extractor {
        id: row.id,
        fields: Some(pb::ExtractorFields {
            name: Some(name),
            description: Some(description),
            llm: Some(llm),
            schema: Some(schema),
            prompt: Some(prompt),
            pre_prompt_summary,
            system_prompt,
            keep_intermediate_results: Some(keep_intermediate_results),
            max_num_chunks,
            vision: Some(vision),
            vision_llm,
            image_batch_image_prompt,
            image_batch_final_prompt,
            guardrails_settings_json: guardrails_settings.map(|g| g.to_string()),
        }),
        is_public: row.is_public,
        created_at: Some(to_proto(row.created_at)),
    })
}

pub(crate) fn list_filter(r: &pb::ListDocumentsRequest) -> ListFilter {
    ListFilter {
        chat_session_id: r.chat_session_id.clone(),
        collection_id: r.collection_id.clone().filter(|c| !c.is_empty()),
    }
}

/// A transcript segment as the RPCs send it.
pub(crate) fn audio_segment_pb(s: Segment) -> pb::AudioSegment {
    pb::AudioSegment {
        start: s.start,
        end: s.end,
        speaker: s.speaker,
        original_speaker: s.original_speaker,
        text: s.text,
        r#type: None,
    }
}

/// A queue's pending jobs.
pub(crate) fn queue_length_pb((name, length): (&str, u64)) -> pb::QueueLength {
    pb::QueueLength {
        name: name.to_owned(),
        length,
    }
}

/// The reranker's call of a search, as its reply reports it.
pub(crate) fn rerank_pb(u: LlmUsage) -> pb::RerankUsage {
    pb::RerankUsage {
        model: u.model,
        tokens: u.prompt_tokens,
        cost: u.cost,
    }
}
