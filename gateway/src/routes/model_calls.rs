//! The h2oGPTe client's direct model calls, without a chat session:
//! `POST /models/{model}/answer_question`, `/summarize_content` and `/extract_data`.
//!
//! Each is a completion through chat-service's compatible-API path (`CompatComplete`): the
//! model named (`auto`, an id, a display name), the caller's cost caps and rate limits, the
//! usage booked as `model.answer`, `model.summarize` or `model.extract`. The prompt is built
//! here, as the client documents it: the context texts between the pre- and post-prompt, then
//! the question; `chat_conversation` as earlier turns; `system_prompt` as the system message
//! (empty, `auto` or absent: none). `extract_data` asks once per text (at most
//! [`MAX_EXTRACT_TEXTS`]), and answers one extraction per text, in order.

use actix_web::{post, web};
use docchat_proto::chat::v1 as pb;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use utoipa_actix_web::service_config::ServiceConfig;

use crate::auth::Api;
use crate::error::{ErrorBody, HttpResult, bad_request};

/// The most texts one `extract_data` call reads (one model call each).
pub const MAX_EXTRACT_TEXTS: usize = 100;
/// The most context texts a call carries.
pub const MAX_TEXTS: usize = 1000;
/// The most characters of a question (as SPEC.md's chat message).
pub const MAX_QUESTION_CHARS: usize = 200_000;

const DEFAULT_PRE_QUERY: &str = "Use the information below to answer the question after it.";
const DEFAULT_PRE_SUMMARY: &str = "Summarize the text below.";
const DEFAULT_PRE_EXTRACT: &str = "Extract the requested information from the text below.";

/// What the three calls share (the client's QuestionRequest, SummarizeRequest and
/// ExtractionRequest).
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct ModelCall {
    #[serde(default)]
    pub text_context_list: Option<Vec<String>>,
    /// The system message; empty, `auto` or absent: none.
    #[serde(default)]
    pub system_prompt: Option<String>,
    /// `temperature` (0 to 2) and `max_new_tokens` are read.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub llm_args: Option<Value>,
    /// answer_question: the question.
    #[serde(default)]
    pub question: Option<String>,
    /// answer_question: before the context texts.
    #[serde(default)]
    pub pre_prompt_query: Option<String>,
    /// answer_question: after the context texts, before the question.
    #[serde(default)]
    pub prompt_query: Option<String>,
    /// answer_question: earlier (human, bot) turns.
    #[serde(default)]
    pub chat_conversation: Option<Vec<Vec<String>>>,
    /// summarize_content: before the texts.
    #[serde(default)]
    pub pre_prompt_summary: Option<String>,
    /// summarize_content: after the texts.
    #[serde(default)]
    pub prompt_summary: Option<String>,
    /// extract_data: before each text.
    #[serde(default)]
    pub pre_prompt_extract: Option<String>,
    /// extract_data: after each text.
    #[serde(default)]
    pub prompt_extract: Option<String>,
}

/// The client's ModelAnswer.
#[derive(Debug, Serialize, ToSchema)]
pub struct ModelAnswer {
    pub content: String,
    /// Empty: the call succeeded (a failure is an error status instead).
    pub error: String,
    /// The model that answered.
    pub llm: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// The client's ModelExtractionAnswer: one extraction per text.
#[derive(Debug, Serialize, ToSchema)]
pub struct ModelExtractionAnswer {
    pub content: Vec<String>,
    pub error: String,
    pub llm: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// Registers this module's routes.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(answer_question)
        .service(summarize_content)
        .service(extract_data);
}

fn message(role: &str, text: String) -> pb::CompatMessage {
    pb::CompatMessage {
        role: role.to_owned(),
        text,
        image_urls: Vec::new(),
    }
}

/// `pre`, the texts, `post`, each part on its own paragraph; empty parts left out.
fn framed(pre: &str, texts: &[String], post: &str) -> String {
    std::iter::once(pre)
        .chain(texts.iter().map(String::as_str))
        .chain(std::iter::once(post))
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n")
}

impl ModelCall {
    fn texts(&self) -> HttpResult<&[String]> {
        let texts = self.text_context_list.as_deref().unwrap_or_default();
        if texts.len() > MAX_TEXTS {
            return Err(bad_request(format!(
                "text_context_list holds at most {MAX_TEXTS} texts, not {}",
                texts.len()
            )));
        }
        Ok(texts)
    }

    /// The system message, when one is asked for.
    fn system(&self) -> Option<pb::CompatMessage> {
        match self.system_prompt.as_deref().map(str::trim) {
            None | Some("" | "auto") => None,
            Some(prompt) => Some(message("system", prompt.to_owned())),
        }
    }

    /// `temperature` and `max_new_tokens` of `llm_args` (other keys are the client's and
    /// h2oGPTe's own; they are ignored).
    fn sampling(&self) -> HttpResult<(Option<f64>, Option<u32>)> {
        let args = self.llm_args.as_ref().and_then(Value::as_object);
        let temperature = match args.and_then(|a| a.get("temperature")) {
            None | Some(Value::Null) => None,
            Some(t) => Some(
                t.as_f64()
                    .ok_or_else(|| bad_request("llm_args.temperature must be a number"))?,
            ),
        };
        let max_tokens =
            match args.and_then(|a| a.get("max_new_tokens")) {
                None | Some(Value::Null) => None,
                Some(n) => Some(n.as_u64().and_then(|n| u32::try_from(n).ok()).ok_or_else(
                    || bad_request("llm_args.max_new_tokens must be a positive integer"),
                )?),
            };
        Ok((temperature, max_tokens))
    }
}

async fn complete(
    api: &Api,
    model: &str,
    call: &ModelCall,
    purpose: &str,
    messages: Vec<pb::CompatMessage>,
) -> HttpResult<pb::CompatReply> {
    let (temperature, max_tokens) = call.sampling()?;
    let request = pb::CompatRequest {
        model: model.to_owned(),
        messages: call.system().into_iter().chain(messages).collect(),
        temperature,
        max_tokens,
        purpose: purpose.to_owned(),
    };
    Ok(api.chat().compat_complete(request).await?.into_inner())
}

fn answer(reply: pb::CompatReply) -> ModelAnswer {
    ModelAnswer {
        content: reply.text,
        error: String::new(),
        llm: reply.model,
        input_tokens: reply.prompt_tokens,
        output_tokens: reply.completion_tokens,
    }
}

/// Answers a question from the given texts (no collection, no chat session).
#[utoipa::path(tag = "Models", params(("model_name" = String, Path, description = "`auto`, a model id or display name")),
    request_body = ModelCall,
    responses((status = 200, body = ModelAnswer), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, description = "a cost cap is reached", body = ErrorBody), (status = 404, description = "unknown model", body = ErrorBody),
        (status = 429, body = ErrorBody), (status = 503, body = ErrorBody)),
    security(("bearer" = [])))]
#[post("/models/{model_name}/answer_question")]
pub async fn answer_question(
    api: Api,
    path: web::Path<String>,
    body: web::Json<ModelCall>,
) -> HttpResult<web::Json<ModelAnswer>> {
    let call = body.into_inner();
    let question = call.question.as_deref().unwrap_or_default().trim();
    if question.is_empty() {
        return Err(bad_request("question must not be empty"));
    }
    if question.chars().count() > MAX_QUESTION_CHARS {
        return Err(bad_request(format!(
            "question must be at most {MAX_QUESTION_CHARS} characters"
        )));
    }
    let mut messages = Vec::new();
    for turn in call.chat_conversation.as_deref().unwrap_or_default() {
        let [human, bot] = turn.as_slice() else {
            return Err(bad_request(
                "chat_conversation holds [human, bot] pairs of two texts",
            ));
        };
        messages.push(message("user", human.clone()));
        messages.push(message("assistant", bot.clone()));
    }
    let texts = call.texts()?;
    let prompt = if texts.is_empty() {
        question.to_owned()
    } else {
        let pre = call
            .pre_prompt_query
            .as_deref()
            .unwrap_or(DEFAULT_PRE_QUERY);
        let post = call.prompt_query.as_deref().unwrap_or_default();
        framed(pre, texts, &format!("{post}{question}"))
    };
    messages.push(message("user", prompt));
    let reply = complete(&api, &path.into_inner(), &call, "model.answer", messages).await?;
    Ok(web::Json(answer(reply)))
}

/// Summarizes the given texts in one answer.
#[utoipa::path(tag = "Models", params(("model_name" = String, Path, description = "`auto`, a model id or display name")),
    request_body = ModelCall,
    responses((status = 200, body = ModelAnswer), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, description = "a cost cap is reached", body = ErrorBody), (status = 404, description = "unknown model", body = ErrorBody),
        (status = 429, body = ErrorBody), (status = 503, body = ErrorBody)),
    security(("bearer" = [])))]
#[post("/models/{model_name}/summarize_content")]
pub async fn summarize_content(
    api: Api,
    path: web::Path<String>,
    body: web::Json<ModelCall>,
) -> HttpResult<web::Json<ModelAnswer>> {
    let call = body.into_inner();
    let texts = call.texts()?;
    if texts.iter().all(|t| t.trim().is_empty()) {
        return Err(bad_request("text_context_list holds nothing to summarize"));
    }
    let pre = call
        .pre_prompt_summary
        .as_deref()
        .unwrap_or(DEFAULT_PRE_SUMMARY);
    let post = call.prompt_summary.as_deref().unwrap_or_default();
    let messages = vec![message("user", framed(pre, texts, post))];
    let reply = complete(&api, &path.into_inner(), &call, "model.summarize", messages).await?;
    Ok(web::Json(answer(reply)))
}

/// Extracts from each given text what the prompts ask: one answer per text, in order.
#[utoipa::path(tag = "Models", params(("model_name" = String, Path, description = "`auto`, a model id or display name")),
    request_body = ModelCall,
    responses((status = 200, body = ModelExtractionAnswer), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, description = "a cost cap is reached", body = ErrorBody), (status = 404, description = "unknown model", body = ErrorBody),
        (status = 429, body = ErrorBody), (status = 503, body = ErrorBody)),
    security(("bearer" = [])))]
#[post("/models/{model_name}/extract_data")]
pub async fn extract_data(
    api: Api,
    path: web::Path<String>,
    body: web::Json<ModelCall>,
) -> HttpResult<web::Json<ModelExtractionAnswer>> {
    let call = body.into_inner();
    let texts = call.texts()?;
    if texts.is_empty() {
        return Err(bad_request(
            "text_context_list holds no text to extract from",
        ));
    }
    if texts.len() > MAX_EXTRACT_TEXTS {
        return Err(bad_request(format!(
            "extract_data reads at most {MAX_EXTRACT_TEXTS} texts a call, not {}",
            texts.len()
        )));
    }
    let model = path.into_inner();
    let pre = call
        .pre_prompt_extract
        .as_deref()
        .unwrap_or(DEFAULT_PRE_EXTRACT);
    let post = call.prompt_extract.as_deref().unwrap_or_default();
    let mut out = ModelExtractionAnswer {
        content: Vec::with_capacity(texts.len()),
        error: String::new(),
        llm: String::new(),
        input_tokens: 0,
        output_tokens: 0,
    };
    for text in texts {
        let messages = vec![message(
            "user",
            framed(pre, std::slice::from_ref(text), post),
        )];
        let reply = complete(&api, &model, &call, "model.extract", messages).await?;
        out.input_tokens += reply.prompt_tokens;
        out.output_tokens += reply.completion_tokens;
        out.llm = reply.model;
        out.content.push(reply.text);
    }
    Ok(web::Json(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts_frame_the_texts_and_leave_out_empty_parts() {
        let texts = ["one".to_owned(), " two ".to_owned()];
        assert_eq!(framed("pre", &texts, "post"), "pre\n\none\n\ntwo\n\npost");
        assert_eq!(framed("", &texts, ""), "one\n\ntwo");
        let call = ModelCall {
            system_prompt: Some("auto".into()),
            ..ModelCall::default()
        };
        assert!(call.system().is_none());
        let call = ModelCall {
            system_prompt: Some("Be brief.".into()),
            llm_args: Some(
                serde_json::json!({"temperature": 0.5, "max_new_tokens": 64, "other": 1}),
            ),
            ..ModelCall::default()
        };
        assert_eq!(call.system().map(|m| m.text).as_deref(), Some("Be brief."));
        assert_eq!(call.sampling().unwrap(), (Some(0.5), Some(64)));
        let bad = ModelCall {
            llm_args: Some(serde_json::json!({"max_new_tokens": -1})),
            ..ModelCall::default()
        };
        assert!(bad.sampling().is_err());
    }
}
