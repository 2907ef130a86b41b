//! What a task's config names must be the owner's to read when the task is created or
//! changed (issue 37): `task_config.collection_id` (ingest-service's GetCollection as the
//! caller) and `task_config.llm_args.memory_block_id` (chat-service's GetMemoryBlock as
//! the caller). Another user's or an unknown id is a 404 at once, not a failed execution
//! later. Only what the sent config or patch names is checked; a config that is not JSON
//! is left to the task's own validation (400).

use docchat_common::Caller;
use docchat_common::error::{ApiError, ApiResult, ErrorCode};
use docchat_proto::chat::v1 as chat;
use docchat_proto::ingest::v1 as ingest;
use serde_json::Value;

use super::Engine;

/// The collection and memory block ids a config (or patch) names.
fn named(json: &str) -> (Option<String>, Option<String>) {
    let Ok(Value::Object(config)) = serde_json::from_str::<Value>(json) else {
        return (None, None);
    };
    let id = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    (
        // Not a UUID: the task's own validation answers 400.
        id(config.get("collection_id")).filter(|c| uuid::Uuid::parse_str(c).is_ok()),
        id(config
            .get("llm_args")
            .and_then(|a| a.get("memory_block_id"))),
    )
}

impl Engine {
    /// The task owner's identity as admin-service knows it now (an administrator's change
    /// of another user's task is checked as the owner's).
    pub async fn owner_of(
        &self,
        task: &crate::entities::scheduled_tasks::Model,
    ) -> ApiResult<Caller> {
        super::run::owner(&self.0, task).await
    }

    /// 404 when `json` names a collection or memory block `caller` cannot read.
    pub async fn check_references(&self, caller: &Caller, json: Option<&str>) -> ApiResult<()> {
        let Some(json) = json else { return Ok(()) };
        let (collection, block) = named(json);
        let not_found = |what: &str, id: &str, s: tonic::Status| {
            let e = ApiError::from(s);
            if e.code == ErrorCode::NotFound {
                ApiError::not_found(format!("{what} {id} not found"))
            } else {
                e
            }
        };
        if let Some(id) = collection {
            self.0
                .clients
                .ingest(caller)
                .get_collection(ingest::CollectionRef { id: id.clone() })
                .await
                .map_err(|s| not_found("task_config.collection_id: collection", &id, s))?;
        }
        if let Some(id) = block {
            self.0
                .clients
                .memory_blocks(caller)
                .get_memory_block(chat::MemoryBlockRef { id: id.clone() })
                .await
                .map_err(|s| {
                    not_found("task_config.llm_args.memory_block_id: memory block", &id, s)
                })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_named_ids_are_read_from_config_and_patch() {
        assert_eq!(
            named(
                r#"{"message":"m","collection_id":" 0b4cbd4c-6a5d-4c57-9d5e-1f4e3c8a9b10 ","llm_args":{"memory_block_id":"b1"}}"#
            ),
            (
                Some("0b4cbd4c-6a5d-4c57-9d5e-1f4e3c8a9b10".into()),
                Some("b1".into())
            )
        );
        assert_eq!(named(r#"{"collection_id":"nope"}"#), (None, None));
        assert_eq!(
            named(r#"{"collection_id":null,"llm_args":{}}"#),
            (None, None)
        );
        assert_eq!(named("not json"), (None, None));
    }
}
