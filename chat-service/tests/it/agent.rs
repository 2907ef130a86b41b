//! Agent completions: chat-service keeps the conversation and agent-service answers, over
//! real gRPC on both backends with a scripted tool-calling upstream.

use std::time::Duration;

use docchat_common::Caller;
use docchat_common::config::Service;
use docchat_common::testing::{Backend, ScriptedCall, ScriptedHttp, ScriptedTurn, user};
use docchat_proto::admin::v1::LlmSpendRequest;
use docchat_proto::admin::v1::admin_service_client::AdminServiceClient;
use docchat_proto::chat::v1 as pb;
use docchat_proto::chat::v1::completion_event::Event;
use docchat_test_stack::{Stack, deltas, rest};
use serde_json::{Value, json};
use tonic::Code;

/// admin-, agent- and chat-service with the test stack's tool models (`scripted` calls
/// tools, priced 1000 per million tokens; `plain` does not).
async fn agent_stack(backend: &Backend, upstream: &ScriptedHttp) -> Stack {
    Stack::builder(backend)
        .agent()
        .chat_replicas(1)
        .tool_models(&upstream.base_url)
        .start()
        .await
}

async fn ask(
    s: &Stack,
    who: &Caller,
    request: pb::CompletionRequest,
) -> Result<(String, tonic::Streaming<pb::CompletionEvent>), tonic::Status> {
    let mut events = s
        .chat_client(s.chat())
        .complete(s.req(Service::Chat, who, request))
        .await?
        .into_inner();
    match events.message().await?.and_then(|e| e.event) {
        Some(Event::QuestionId(id)) => Ok((id, events)),
        other => panic!("the question id comes first, not {other:?}"),
    }
}

/// The reply's metadata entries of these types.
async fn meta(s: &Stack, who: &Caller, message_id: &str, kinds: &[&str]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for kind in kinds {
        let entries = s
            .chat_client(s.chat())
            .get_message_meta(s.req(
                Service::Chat,
                who,
                pb::MessageMetaRequest {
                    message_id: message_id.into(),
                    info_type: (*kind).into(),
                },
            ))
            .await
            .unwrap()
            .into_inner()
            .entries;
        out.extend(entries.into_iter().map(|e| (e.message_type, e.content)));
    }
    out
}

async fn spend(s: &Stack, who: &Caller) -> f64 {
    AdminServiceClient::new(s.admin().channel())
        .get_llm_spend(s.req(Service::Admin, who, LlmSpendRequest::default()))
        .await
        .unwrap()
        .into_inner()
        .cost_total
}

fn alice() -> Caller {
    user("alice", false)
}

fn agent_request(session: &str, args: Value) -> pb::CompletionRequest {
    pb::CompletionRequest {
        session_id: session.into(),
        message: "Write the plan down".into(),
        use_agent: true,
        rag_type: "agent_only".into(),
        agent_args_json: args.to_string(),
        ..Default::default()
    }
}

fn entry<'a>(meta: &'a [(String, String)], kind: &str) -> &'a str {
    meta.iter()
        .find(|(k, _)| k == kind)
        .map(|(_, v)| v.as_str())
        .unwrap_or_else(|| panic!("no {kind} in {meta:?}"))
}

docchat_common::backend_tests! {
    async fn an_agent_completion_streams_the_agents_answer_and_stores_it_with_its_trace(backend) {
        let upstream = ScriptedHttp::chat_turns(vec![
            ScriptedTurn::calls(vec![ScriptedCall::new(
                "c1",
                "write_file",
                json!({"path": "plan.md", "content": "1. test"}),
            )]),
            ScriptedTurn::text("Saved the plan."),
        ])
        .await;
        let s = agent_stack(&backend, &upstream).await;
        let alice = alice();
        let session = s.session(s.chat(), &alice).await;
        let (question, mut events) = ask(
            &s,
            &alice,
            agent_request(&session, json!({"agent_tools": ["write_file"]})))
            .await
            .unwrap();
        let (text, last) = rest(&mut events).await;
        assert_eq!(text, "Saved the plan.", "{}", backend.name);
        let Some(Event::Done(done)) = last else {
            panic!("{}: the reply ends with done, not {last:?}", backend.name);
        };
        assert_eq!(done.body, "Saved the plan.", "{}", backend.name);

        let messages = s.messages(s.chat(), &alice, &session).await;
        let reply = messages
            .iter()
            .find(|m| m.reply_to.as_deref() == Some(question.as_str()))
            .expect("the reply is stored");
        assert_eq!(reply.id, done.message_id, "{}", backend.name);
        assert_eq!(reply.content, "Saved the plan.", "{}", backend.name);
        assert_eq!(reply.error, None, "{}", backend.name);

        let meta = meta(
                &s,
                &alice,
                &done.message_id,
                &["agent_chat_history", "agent_chat_history_md", "agent_analysis", "agent_files", "usage_stats"],
            )
            .await;
        let history: Value = serde_json::from_str(entry(&meta, "agent_chat_history")).unwrap();
        assert!(history.to_string().contains("write_file"), "{}: {history}", backend.name);
        assert!(entry(&meta, "agent_chat_history_md").contains("write_file"), "{}", backend.name);
        assert!(entry(&meta, "agent_analysis").contains("2 model call(s), 1 tool call(s)"), "{}", backend.name);
        assert_eq!(entry(&meta, "agent_files"), "[]", "{}", backend.name);
        let stats: Value = serde_json::from_str(entry(&meta, "usage_stats")).unwrap();
        assert_eq!(stats["llm"], "scripted", "{}", backend.name);
        assert_eq!(stats["calls"].as_array().map(Vec::len), Some(2), "{}: {stats}", backend.name);
        assert_eq!(stats["total_tokens"], 30, "{}: {stats}", backend.name);
        // The history the model saw carries the tool's result.
        let bodies = upstream.bodies();
        assert_eq!(bodies.len(), 2, "{}", backend.name);
        assert!(bodies[1]["messages"].to_string().contains("plan.md"), "{}", backend.name);

        // Booked once, by agent-service: 2 calls × 15 tokens at 1000 per million.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while spend(&s, &alice).await < 0.03 - 1e-9 {
            assert!(tokio::time::Instant::now() < deadline, "{}: usage never booked", backend.name);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        let spent = spend(&s, &alice).await;
        assert!((spent - 0.03).abs() < 1e-9, "{}: booked {spent}, not 0.03 (twice?)", backend.name);
        s.stop().await;
    }

    async fn agent_completions_that_cannot_run_are_refused_and_store_nothing(backend) {
        let upstream = ScriptedHttp::chat_turns(vec![ScriptedTurn::text("never")]).await;
        let s = agent_stack(&backend, &upstream).await;
        let alice = alice();
        let session = s.session(s.chat(), &alice).await;
        let mut plain = agent_request(&session, json!({}));
        plain.llm = "plain".into();
        let mut agentic = agent_request(&session, json!({}));
        agentic.rag_type = "agentic_rag".into();
        agentic.use_agent = false;
        for (request, why) in [
            (plain, "cannot be used by the agent"),
            (agent_request(&session, json!({"agent_max_turns": -1})), "agent_max_turns"),
            (agent_request(&session, json!({"agent_tools": ["nope"]})), "unknown agent tool"),
            (agentic, "needs a chat session with a collection"),
        ] {
            let err = ask(&s, &alice, request).await.map(|_| ()).unwrap_err();
            assert_eq!(err.code(), Code::InvalidArgument, "{}: {}", backend.name, err.message());
            assert!(err.message().contains(why), "{}: {}", backend.name, err.message());
        }
        let bob = user("bob", false);
        let err = ask(&s, &bob, agent_request(&session, json!({}))).await.map(|_| ()).unwrap_err();
        assert_eq!(err.code(), Code::NotFound, "{}: another user's session", backend.name);
        assert!(s.messages(s.chat(), &alice, &session).await.is_empty(), "{}", backend.name);
        assert!(upstream.seen().is_empty(), "{}", backend.name);
        s.stop().await;
    }

    async fn stop_reaches_an_agent_reply_and_keeps_what_it_said(backend) {
        let words: Vec<String> = (0..200).map(|i| format!("w{i}")).collect();
        let upstream = ScriptedHttp::chat_turns(vec![
            ScriptedTurn::text(&words.join(" ")).delay(Duration::from_millis(20)),
        ])
        .await;
        let s = agent_stack(&backend, &upstream).await;
        let alice = alice();
        let session = s.session(s.chat(), &alice).await;
        let (question, mut events) = ask(&s, &alice, agent_request(&session, json!({}))).await.unwrap();
        let mut said = deltas(&mut events, 3).await;
        s.chat_client(s.chat())
            .control_message(s.req(
                Service::Chat,
                &alice,
                pb::ControlRequest {
                    question_id: question.clone(),
                    action: "stop".into(),
                },
            ))
            .await
            .unwrap();
        let (tail, last) = rest(&mut events).await;
        said.push_str(&tail);
        let Some(Event::Done(done)) = last else {
            panic!("{}: a stopped reply ends with done, not {last:?}", backend.name);
        };
        assert!(!said.contains("w199"), "{}: the run went on after stop", backend.name);
        let reply = s
            .messages(s.chat(), &alice, &session)
            .await
            .into_iter()
            .find(|m| m.id == done.message_id)
            .expect("the partial reply is stored");
        assert_eq!(reply.content, said, "{}", backend.name);
        assert!(reply.content.starts_with("w0 w1"), "{}: {}", backend.name, reply.content);
        s.stop().await;
    }
}
