//! A completion request, validated into a [`Job`]: its options, the model through the
//! [`ModelGate`](crate::gate::ModelGate), and the question stored in the caller's session.

use docchat_common::Caller;
use docchat_common::error::{ApiError, ApiResult, ErrorCode};
use docchat_proto::agent::v1::RagKind;
use docchat_proto::chat::v1 as pb;

use super::agent::AgentPlan;
use super::store::{Question, Stored, store_question};
use super::{Completer, Job};
use crate::fairness::Priority;

/// SPEC.md's default of llm_args.max_new_tokens.
pub const DEFAULT_MAX_NEW_TOKENS: u32 = 1536;
/// Longest question accepted, in characters.
const MAX_QUESTION_CHARS: usize = 200_000;
/// Longest pre_prompt_query or prompt_query accepted, in characters.
const MAX_PROMPT_PART_CHARS: usize = 20_000;

/// A prompt part that says something (absent, empty and blank say nothing).
fn given(text: Option<String>) -> Option<String> {
    text.filter(|t| !t.trim().is_empty())
}

/// How the answer uses the session's collection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RagMode {
    LlmOnly,
    Rag,
    /// An LLM-only draft answer becomes the retrieval query.
    Hyde1,
    /// As Hyde1, then a second draft written from the first retrieval is the query.
    Hyde2,
    /// The retrieved chunks with their neighbours, in document order; summarized
    /// recursively when they do not fit the context.
    RagPlus,
    /// Every chunk of the collection, summarized recursively to fit.
    AllData,
    /// agent-service answers (see [`super::agent`]), using the collection as the kind says.
    Agent(RagKind),
}

impl RagMode {
    /// SPEC.md's rag_type rules: RAG types need a collection; agentic_rag, fast_agentic_rag
    /// and rlm_rag run the agent by themselves (and need a collection too); use_agent runs
    /// it for every other type, with the collection's search among its tools; agent_only
    /// without use_agent falls back to rag (or to llm_only where there is no collection,
    /// as `auto` does).
    pub fn choose(rag_type: &str, use_agent: bool, has_collection: bool) -> ApiResult<RagMode> {
        let auto = if has_collection {
            RagMode::Rag
        } else {
            RagMode::LlmOnly
        };
        let needs_collection = |mode: RagMode| {
            if has_collection {
                Ok(mode)
            } else {
                Err(ApiError::bad_request(format!(
                    "rag_type {rag_type} needs a chat session with a collection; this session has none (use llm_only)"
                )))
            }
        };
        let mode = match rag_type {
            "" | "auto" | "agent_only" => Ok(auto),
            "llm_only" => Ok(RagMode::LlmOnly),
            "rag" => needs_collection(RagMode::Rag),
            "hyde1" => needs_collection(RagMode::Hyde1),
            "hyde2" => needs_collection(RagMode::Hyde2),
            "rag+" => needs_collection(RagMode::RagPlus),
            "all_data" => needs_collection(RagMode::AllData),
            "agentic_rag" => return needs_collection(RagMode::Agent(RagKind::Agentic)),
            "fast_agentic_rag" => return needs_collection(RagMode::Agent(RagKind::Fast)),
            "rlm_rag" => return needs_collection(RagMode::Agent(RagKind::Rlm)),
            other => Err(ApiError::bad_request(format!(
                "unknown rag_type {other}: use auto, llm_only, agent_only, rag, agentic_rag, rlm_rag, fast_agentic_rag, hyde1, hyde2, rag+ or all_data"
            ))),
        };
        match mode {
            // The agent runs instead, with the collection (if any) among what it may search.
            Ok(_) if use_agent => Ok(RagMode::Agent(RagKind::None)),
            other => other,
        }
    }

    /// Whether this mode runs the agent.
    /// The rag_type this mode answers.
    pub fn name(self) -> &'static str {
        match self {
            RagMode::LlmOnly => "llm_only",
            RagMode::Rag => "rag",
            RagMode::Hyde1 => "hyde1",
            RagMode::Hyde2 => "hyde2",
            RagMode::RagPlus => "rag+",
            RagMode::AllData => "all_data",
            RagMode::Agent(_) => "agent",
        }
    }

    pub fn is_agent(self) -> bool {
        matches!(self, RagMode::Agent(_))
    }
}

impl Completer {
    /// Validates `r`, then stores its question (see [`store_question`]).
    pub(super) async fn prepare(
        &self,
        caller: &Caller,
        mut r: pb::CompletionRequest,
        priority: Option<Priority>,
    ) -> ApiResult<Job> {
        let message = r.message.trim();
        if message.is_empty() {
            return Err(ApiError::bad_request("message must not be empty"));
        }
        if message.chars().count() > MAX_QUESTION_CHARS {
            return Err(ApiError::bad_request(format!(
                "message is longer than {MAX_QUESTION_CHARS} characters"
            )));
        }
        let history = match r.include_chat_history.as_str() {
            "" | "on" | "true" | "auto" => true,
            "off" | "false" => false,
            other => {
                return Err(ApiError::bad_request(format!(
                    "include_chat_history must be on, off, true, false or auto, not {other}"
                )));
            }
        };
        let temperature = r.temperature.unwrap_or(0.0);
        if !(0.0..=2.0).contains(&temperature) {
            return Err(ApiError::bad_request(
                "llm_args.temperature must be between 0 and 2",
            ));
        }
        let max_new_tokens = r.max_new_tokens.unwrap_or(DEFAULT_MAX_NEW_TOKENS);
        if max_new_tokens == 0 {
            return Err(ApiError::bad_request(
                "llm_args.max_new_tokens must be at least 1",
            ));
        }
        let agentic = r.use_agent || AGENTIC_TYPES.contains(&r.rag_type.as_str());
        let documents = super::scope::Scope::new(
            std::mem::take(&mut r.include_tags),
            std::mem::take(&mut r.exclude_tags),
            std::mem::take(&mut r.document_ids),
        )?;
        if agentic && !documents.is_all() {
            return Err(ApiError::bad_request(
                "tags and document ids choose what RAG reads; agent runs search the whole collection",
            ));
        }
        for (name, text) in [
            ("pre_prompt_query", &r.pre_prompt_query),
            ("prompt_query", &r.prompt_query),
        ] {
            if text
                .as_ref()
                .is_some_and(|t| t.chars().count() > MAX_PROMPT_PART_CHARS)
            {
                return Err(ApiError::bad_request(format!(
                    "{name} is longer than {MAX_PROMPT_PART_CHARS} characters"
                )));
            }
        }
        let scope = if agentic { "agent" } else { "llm" };
        let memory = super::memory::resolve(
            &self.db,
            caller,
            r.memory_block_id.as_deref(),
            r.memory_block_name.as_deref(),
            scope,
        )
        .await?;
        // What needs no session is looked up first; its errors wait for the session's, so
        // a request answers as it did when the session was read first.
        let admitted = self
            .gate
            .clear(caller, &r.llm, |name| {
                ApiError::bad_request(format!(
                    "model {name} not found; GET /api/v1/models lists the models"
                ))
            })
            .await;
        let agent = self.agent_plan(caller, &r).await?;
        let cap = admitted
            .as_ref()
            .ok()
            .and_then(|a| a.settings.limit("chat_max_concurrent_per_user"));
        let asked = Question {
            session_id: &r.session_id,
            content: message,
            history,
            concurrency_cap: cap,
            lease: self.lease,
        };
        let (stored, (mode, admitted)) = store_question(&self.db, caller, asked, |session| {
            let mode = RagMode::choose(&r.rag_type, r.use_agent, session.collection_id.is_some())?;
            if mode.is_agent() != agent.is_some() {
                // The session's collection changed since the run was checked.
                return Err(ApiError::new(
                    ErrorCode::Conflict,
                    "the chat session changed while the question was asked; ask again",
                ));
            }
            Ok((mode, admitted?))
        })
        .await?;
        let Stored {
            session,
            question,
            history,
        } = stored;
        let entry = admitted.entry;
        let max_new_tokens =
            max_new_tokens.min(entry.context_length.try_into().unwrap_or(u32::MAX));
        Ok(Job {
            priority,
            caller: caller.clone(),
            session,
            question,
            model_name: agent
                .as_ref()
                .map_or_else(|| entry.name.clone(), |(_, model)| model.clone()),
            model: admitted.model,
            context_length: entry.context_length,
            prices: (entry.input_price, entry.output_price),
            mode,
            history,
            temperature: temperature as f32,
            max_new_tokens,
            agent: agent.map(|(plan, _)| plan),
            memory,
            scope: documents,
            system_prompt: r
                .system_prompt
                .as_deref()
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned),
            rerank: r.rerank.unwrap_or(true),
            pre_prompt_query: given(r.pre_prompt_query),
            prompt_query: given(r.prompt_query),
        })
    }

    /// For a request the agent answers: the session read, the run checked by agent-service
    /// (400s before anything is stored), and the model it will call. None otherwise.
    async fn agent_plan(
        &self,
        caller: &Caller,
        r: &pb::CompletionRequest,
    ) -> ApiResult<Option<(AgentPlan, String)>> {
        if !r.use_agent && !AGENTIC_TYPES.contains(&r.rag_type.as_str()) {
            return Ok(None);
        }
        let session = crate::sessions::get(&self.db, caller, &r.session_id).await?;
        let has_collection = session.collection_id.is_some();
        let RagMode::Agent(kind) = RagMode::choose(&r.rag_type, r.use_agent, has_collection)?
        else {
            return Ok(None);
        };
        let accepted = self
            .check_agent(caller, &r.llm, kind, has_collection, &r.agent_args_json)
            .await?;
        let plan = AgentPlan {
            kind,
            args_json: r.agent_args_json.clone(),
        };
        Ok(Some((plan, accepted.model)))
    }
}

/// The rag types that run the agent without use_agent.
const AGENTIC_TYPES: [&str; 3] = ["agentic_rag", "fast_agentic_rag", "rlm_rag"];

#[cfg(test)]
mod tests {
    use docchat_common::error::ErrorCode;

    use super::*;

    #[test]
    fn rag_types_follow_the_spec() {
        assert_eq!(RagMode::choose("", false, true).unwrap(), RagMode::Rag);
        assert_eq!(
            RagMode::choose("auto", false, false).unwrap(),
            RagMode::LlmOnly
        );
        assert_eq!(
            RagMode::choose("agent_only", false, true).unwrap(),
            RagMode::Rag
        );
        assert_eq!(
            RagMode::choose("hyde2", false, true).unwrap(),
            RagMode::Hyde2
        );
        assert_eq!(
            RagMode::choose("llm_only", false, true).unwrap(),
            RagMode::LlmOnly
        );
        assert_eq!(
            RagMode::choose("rag+", false, true).unwrap(),
            RagMode::RagPlus
        );
        assert_eq!(
            RagMode::choose("all_data", false, true).unwrap(),
            RagMode::AllData
        );
        for (rag_type, agent, collection, kind) in [
            ("agentic_rag", false, true, RagKind::Agentic),
            ("fast_agentic_rag", false, true, RagKind::Fast),
            ("rlm_rag", true, true, RagKind::Rlm),
            ("agent_only", true, false, RagKind::None),
            ("", true, false, RagKind::None),
            ("rag", true, true, RagKind::None),
        ] {
            assert_eq!(
                RagMode::choose(rag_type, agent, collection).unwrap(),
                RagMode::Agent(kind),
                "{rag_type}"
            );
        }
        for (rag_type, agent, collection) in [
            ("rag", false, false),
            ("rag+", false, false),
            ("all_data", false, false),
            ("hyde1", false, false),
            ("agentic_rag", false, false),
            ("fast_agentic_rag", true, false),
            ("rlm_rag", false, false),
            ("rag", true, false),
            ("nonsense", false, true),
            ("nonsense", true, true),
        ] {
            let e = RagMode::choose(rag_type, agent, collection).unwrap_err();
            assert_eq!(e.code, ErrorCode::BadRequest, "{rag_type}");
        }
    }
}
