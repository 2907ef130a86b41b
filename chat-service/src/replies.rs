//! Reading what replies carry: metadata entries, references, and suggested follow-up
//! questions made from the conversation.

use docchat_common::Caller;
use docchat_common::error::{ApiError, ApiResult};
use docchat_inference::ChatMessage;
use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder, QuerySelect};

use crate::entities::{message_meta, message_references, messages};
use crate::gate::{ModelGate, model_error};

/// info_type values with stored entries (and agent_* ones); a reply without one answers
/// empty (retrieval_trace: replies that searched the collection).
const META_TYPES: [&str; 3] = ["usage_stats", "prompt_raw", "retrieval_trace"];
/// Most suggestions one call returns.
const MAX_SUGGESTIONS: u32 = 20;

/// The caller's message `id`; a question stands for its reply.
async fn reply_of(
    db: &DatabaseConnection,
    caller: &Caller,
    id: &str,
) -> ApiResult<Option<messages::Model>> {
    let message = messages::Entity::find_by_id(id.to_owned())
        .filter(messages::Column::OwnerId.eq(caller.user_id.clone()))
        .one(db)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("message {id} not found")))?;
    if message.reply_to.is_some() {
        return Ok(Some(message));
    }
    Ok(messages::Entity::find()
        .filter(messages::Column::ReplyTo.eq(id))
        .order_by_desc(messages::Column::Id)
        .one(db)
        .await?)
}

/// A question of the caller (control calls take the question's id).
pub async fn question(
    db: &DatabaseConnection,
    caller: &Caller,
    id: &str,
) -> ApiResult<messages::Model> {
    messages::Entity::find_by_id(id.to_owned())
        .filter(messages::Column::OwnerId.eq(caller.user_id.clone()))
        .filter(messages::Column::ReplyTo.is_null())
        .one(db)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("question {id} not found")))
}

pub async fn meta(
    db: &DatabaseConnection,
    caller: &Caller,
    id: &str,
    info_type: &str,
) -> ApiResult<Vec<message_meta::Model>> {
    if info_type.is_empty() {
        return Err(ApiError::bad_request("info_type is required"));
    }
    let known = META_TYPES.contains(&info_type) || info_type.starts_with("agent_");
    if !known {
        return Err(ApiError::bad_request(format!(
            "unknown info_type {info_type}: use usage_stats, prompt_raw, retrieval_trace or an agent_* type"
        )));
    }
    let Some(reply) = reply_of(db, caller, id).await? else {
        return Ok(Vec::new());
    };
    Ok(message_meta::Entity::find()
        .filter(message_meta::Column::MessageId.eq(reply.id))
        .filter(message_meta::Column::InfoType.eq(info_type))
        .order_by_asc(message_meta::Column::Id)
        .all(db)
        .await?)
}

pub async fn references(
    db: &DatabaseConnection,
    caller: &Caller,
    id: &str,
) -> ApiResult<Vec<message_references::Model>> {
    let Some(reply) = reply_of(db, caller, id).await? else {
        return Ok(Vec::new());
    };
    Ok(message_references::Entity::find()
        .filter(message_references::Column::MessageId.eq(reply.id))
        .order_by_asc(message_references::Column::Rank)
        .all(db)
        .await?)
}

/// Follow-up questions the user could ask next, from the last turns of the session, by the
/// default model through the [`ModelGate`].
pub async fn suggest(
    db: &DatabaseConnection,
    gate: &ModelGate,
    caller: &Caller,
    session_id: &str,
    limit: u32,
) -> ApiResult<Vec<String>> {
    crate::sessions::get(db, caller, session_id).await?;
    let limit = if limit == 0 {
        5
    } else {
        limit.min(MAX_SUGGESTIONS)
    };
    let mut recent = messages::Entity::find()
        .filter(messages::Column::SessionId.eq(session_id))
        .order_by_desc(messages::Column::Id)
        .limit(6)
        .all(db)
        .await?;
    if recent.is_empty() {
        return Ok(Vec::new());
    }
    recent.reverse();
    let (priority, admitted) = gate
        .admit(caller, "", |name| {
            ApiError::bad_request(format!("model {name} not found"))
        })
        .await?;
    let conversation: String = recent
        .iter()
        .map(|m| {
            let who = if m.reply_to.is_some() {
                "Assistant"
            } else {
                "User"
            };
            let text: String = m.content.chars().take(2000).collect();
            format!("{who}: {text}\n")
        })
        .collect();
    let prompt = vec![
        ChatMessage::system(format!(
            "Suggest {limit} short follow-up questions the user could ask next about this conversation. Answer with one question per line and nothing else."
        )),
        ChatMessage::user(conversation),
    ];
    let _slot = gate.slot(priority).await;
    let done = admitted
        .model
        .complete(&prompt, 300, 0.0)
        .await
        .map_err(model_error)?;
    gate.book(
        &caller.user_id,
        &admitted.entry,
        "questions",
        done.prompt_tokens,
        done.completion_tokens,
    );
    Ok(parse_questions(&done.text, limit as usize))
}

/// One question a line, without list markers or numbering.
fn parse_questions(text: &str, limit: usize) -> Vec<String> {
    text.lines()
        .map(|l| {
            l.trim()
                .trim_start_matches(|c: char| {
                    c.is_ascii_digit() || matches!(c, '.' | ')' | '-' | '*' | '•')
                })
                .trim()
                .to_owned()
        })
        .filter(|l| l.chars().count() > 3)
        .take(limit)
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn questions_lose_their_markers() {
        let got = super::parse_questions(
            "1. What is Paris?\n- Why?\n\n* How far is Lyon?\n2) Next one?",
            3,
        );
        assert_eq!(got, ["What is Paris?", "Why?", "How far is Lyon?"]);
    }
}
