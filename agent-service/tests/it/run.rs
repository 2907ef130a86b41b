//! AgentService.Run over real gRPC, on both backends: a scripted tool-calling upstream, the
//! built-in file tools in a real workspace, admin-service for settings, cost caps and the
//! usage ledger.

use std::path::Path;
use std::time::Duration;

use docchat_common::Caller;
use docchat_common::config::Service;
use docchat_common::testing::{Backend, ScriptedCall, ScriptedHttp, ScriptedTurn, Spawned, user};
use docchat_proto::admin::v1::admin_service_client::AdminServiceClient;
use docchat_proto::admin::v1::{LlmSpendRequest, SetGlobalSettingRequest};
use docchat_proto::agent::v1 as pb;
use docchat_proto::agent::v1::agent_service_client::AgentServiceClient;
use docchat_proto::agent::v1::run_event::Event;
use docchat_test_stack::Stack;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Code;

/// agent-service (a replica of its own) and admin-service on one backend, with the test
/// stack's tool models served by `upstream` (`scripted` calls tools, `plain` does not).
pub(crate) struct Agents {
    stack: Stack,
    agent: Spawned,
}

impl Agents {
    pub(crate) async fn start(backend: &Backend, upstream: &ScriptedHttp) -> Agents {
        let stack = Stack::builder(backend)
            .tool_models(&upstream.base_url)
            .start()
            .await;
        let agent = stack.replica(Service::Agent, |_| {}).await;
        Agents { stack, agent }
    }

    /// As [`start`](Self::start), with ingest-service (where the runs' files are stored
    /// and the collections' documents come from) and chat-service (sessions).
    pub(crate) async fn with_ingest(backend: &Backend, upstream: &ScriptedHttp) -> Agents {
        Agents::with_ingest_and(backend, upstream, |_| {}).await
    }

    /// [`with_ingest`](Self::with_ingest) with the agent replica's configuration tweaked.
    pub(crate) async fn with_ingest_and(
        backend: &Backend,
        upstream: &ScriptedHttp,
        tweak: impl FnOnce(&mut docchat_common::Config),
    ) -> Agents {
        let stack = Stack::builder(backend)
            .tool_models(&upstream.base_url)
            .ingest()
            .chat_replicas(1)
            .start()
            .await;
        let agent = stack.replica(Service::Agent, tweak).await;
        Agents { stack, agent }
    }

    pub(crate) fn stack(&self) -> &Stack {
        &self.stack
    }

    /// Another agent-service replica on the same database and bus, with a disk of its own.
    pub(crate) async fn replica_with_own_disk(&self, dir: &Path) -> Spawned {
        let dir = dir.to_path_buf();
        self.stack
            .replica(Service::Agent, move |c| {
                // The same database (SQLite's file is under the data directory).
                if c.database_url.is_none() {
                    c.database_url = Some(c.database_url_for(Service::Agent, false));
                }
                c.data_dir = dir;
            })
            .await
    }

    /// Starts a run on `replica` (default: the harness's own).
    pub(crate) async fn run_on(
        &self,
        replica: &Spawned,
        who: &Caller,
        start: pb::RunStart,
    ) -> (mpsc::Sender<pb::RunInput>, tonic::Streaming<pb::RunEvent>) {
        let (tx, rx) = mpsc::channel(8);
        tx.send(pb::RunInput {
            input: Some(pb::run_input::Input::Start(start)),
        })
        .await
        .unwrap();
        let events = AgentServiceClient::new(replica.channel())
            .run(self.req(who, Service::Agent, ReceiverStream::new(rx)))
            .await
            .unwrap()
            .into_inner();
        (tx, events)
    }

    pub(crate) fn agent(&self) -> &Spawned {
        &self.agent
    }

    pub(crate) fn req<T>(&self, who: &Caller, service: Service, msg: T) -> tonic::Request<T> {
        self.stack.req(service, who, msg)
    }

    fn workspaces(&self) -> std::path::PathBuf {
        self.stack.data_dir().join("agent").join("workspaces")
    }

    pub(crate) fn workspace(&self, session: &str) -> std::path::PathBuf {
        self.workspaces().join(session)
    }

    /// Starts a run; the sender takes control words, the stream gives the events.
    pub(crate) async fn run(
        &self,
        who: &Caller,
        start: pb::RunStart,
    ) -> Result<(mpsc::Sender<pb::RunInput>, tonic::Streaming<pb::RunEvent>), tonic::Status> {
        let (tx, rx) = mpsc::channel(8);
        tx.send(pb::RunInput {
            input: Some(pb::run_input::Input::Start(start)),
        })
        .await
        .unwrap();
        let mut client = AgentServiceClient::new(self.agent.channel());
        let events = client
            .run(self.req(who, Service::Agent, ReceiverStream::new(rx)))
            .await?
            .into_inner();
        Ok((tx, events))
    }

    pub(crate) async fn stop(self) {
        self.agent.stop().await.unwrap();
        self.stack.stop().await;
    }
}

pub(crate) fn start(session: &str, question: &str, args: Value) -> pb::RunStart {
    pb::RunStart {
        session_id: session.into(),
        question_id: format!("q-{session}"),
        question: question.into(),
        model: "scripted".into(),
        rag_kind: pb::RagKind::None as i32,
        agent_args_json: args.to_string(),
        ..Default::default()
    }
}

/// Every event until RunFinished (which must come within 30 s).
pub(crate) async fn events_until_finished(
    events: &mut tonic::Streaming<pb::RunEvent>,
) -> (Vec<Event>, pb::RunFinished) {
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let next = tokio::time::timeout_at(deadline, events.next())
            .await
            .expect("the run did not finish within 30 s");
        match next {
            Some(Ok(pb::RunEvent {
                event: Some(Event::Finished(f)),
            })) => return (seen, f),
            Some(Ok(pb::RunEvent { event: Some(e) })) => seen.push(e),
            Some(Ok(_)) => {}
            Some(Err(e)) => panic!("the run failed: {e}"),
            None => panic!("the event stream ended without RunFinished"),
        }
    }
}

pub(crate) fn tool_messages(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .map(|m| {
            m.iter()
                .filter(|m| m["role"] == "tool")
                .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

docchat_common::backend_tests! {
    async fn a_run_calls_tools_in_its_workspace_then_answers(backend) {
        let upstream = ScriptedHttp::chat_turns(vec![
            ScriptedTurn::calls(vec![ScriptedCall::new(
                "c1",
                "write_file",
                json!({"path": "notes/plan.md", "content": "step one"}),
            )])
            .split(7),
            ScriptedTurn::calls(vec![ScriptedCall::new(
                "c2",
                "read_file",
                json!({"path": "notes/plan.md"}),
            )]),
            ScriptedTurn::text("The plan has one step."),
        ])
        .await;
        let stack = Agents::start(&backend, &upstream).await;
        let alice = user("alice", false);
        let (_tx, mut events) = stack
            .run(
                &alice,
                start("s-tools", "Plan it", json!({"agent_tools": ["write_file", "read_file"]})),
            )
            .await
            .unwrap();
        let (seen, finished) = events_until_finished(&mut events).await;

        let Some(Event::Accepted(accepted)) = seen.first() else {
            panic!("{}: the first event must be Accepted, got {seen:?}", backend.name);
        };
        assert_eq!(accepted.tools, ["write_file", "read_file"], "{}", backend.name);
        assert_eq!(accepted.model, "scripted", "{}", backend.name);
        let finished_tools: Vec<(&str, bool)> = seen
            .iter()
            .filter_map(|e| match e {
                Event::ToolFinished(t) => Some((t.name.as_str(), t.ok)),
                _ => None,
            })
            .collect();
        assert_eq!(
            finished_tools,
            [("write_file", true), ("read_file", true)],
            "{}",
            backend.name
        );
        let text: String = seen
            .iter()
            .filter_map(|e| match e {
                Event::Delta(d) => Some(d.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(text, "The plan has one step.", "{}", backend.name);
        assert_eq!(finished.text, text, "{}", backend.name);
        assert!(!finished.failed, "{}: {}", backend.name, finished.stop_reason);
        assert_eq!(finished.stop_reason, "", "{}", backend.name);
        assert_eq!(finished.turns, 3, "{}", backend.name);
        assert_eq!(finished.calls.len(), 3, "{}: every model call is reported", backend.name);
        assert!(finished.calls.iter().all(|c| c.cost > 0.0), "{}", backend.name);
        assert!(finished.history_md.contains("write_file"), "{}", backend.name);

        // The file is in the session's workspace, and the model saw the tools' results.
        assert_eq!(read(&stack.workspace("s-tools").join("notes/plan.md")), "step one");
        let bodies = upstream.bodies();
        assert_eq!(bodies.len(), 3, "{}", backend.name);
        assert_eq!(bodies[0]["tools"].as_array().map(Vec::len), Some(2), "{}", backend.name);
        let last = tool_messages(&bodies[2]);
        assert_eq!(last.len(), 2, "{}: {last:?}", backend.name);
        assert!(last[1].contains("step one"), "{}: read_file's result: {last:?}", backend.name);
        stack.stop().await;
    }

    async fn bad_tool_calls_become_errors_the_model_reads(backend) {
        let upstream = ScriptedHttp::chat_turns(vec![
            ScriptedTurn::calls(vec![
                ScriptedCall::raw("c1", "write_file", "{\"path\": \"a.txt\""),
                ScriptedCall::new("c2", "write_file", json!({"path": "../escape.txt", "content": "x"})),
                ScriptedCall::new("c3", "write_file", json!({"path": "b.txt"})),
                ScriptedCall::new("c4", "no_such_tool", json!({})),
            ]),
            ScriptedTurn::text("Sorry."),
        ])
        .await;
        let stack = Agents::start(&backend, &upstream).await;
        let alice = user("alice", false);
        let (_tx, mut events) = stack
            .run(&alice, start("s-bad", "Write", json!({"agent_tools": ["write_file"]})))
            .await
            .unwrap();
        let (seen, finished) = events_until_finished(&mut events).await;
        let results: Vec<bool> = seen
            .iter()
            .filter_map(|e| match e {
                Event::ToolFinished(t) => Some(t.ok),
                _ => None,
            })
            .collect();
        assert_eq!(results, [false, false, false, false], "{}: {seen:?}", backend.name);
        assert_eq!(finished.text, "Sorry.", "{}", backend.name);
        assert!(!finished.failed, "{}", backend.name);
        let shown = tool_messages(&upstream.bodies()[1]);
        assert_eq!(shown.len(), 4, "{}: one result per call: {shown:?}", backend.name);
        assert!(shown.iter().all(|m| !m.is_empty()), "{}: {shown:?}", backend.name);
        assert!(
            !stack.workspaces().join("escape.txt").exists(),
            "{}: a path out of the workspace was written",
            backend.name
        );
        assert!(!stack.workspace("s-bad").join("b.txt").exists(), "{}", backend.name);
        stack.stop().await;
    }

    async fn the_turn_budget_ends_a_run_that_keeps_calling_tools(backend) {
        let upstream = ScriptedHttp::chat_turns(vec![ScriptedTurn::calls(vec![
            ScriptedCall::new("c", "list_files", json!({})),
        ])])
        .await;
        let stack = Agents::start(&backend, &upstream).await;
        let alice = user("alice", false);
        let (_tx, mut events) = stack
            .run(
                &alice,
                start("s-turns", "Loop", json!({"agent_tools": ["list_files"], "agent_max_turns": 2})),
            )
            .await
            .unwrap();
        let (_, finished) = events_until_finished(&mut events).await;
        assert_eq!(finished.turns, 2, "{}", backend.name);
        assert!(
            finished.stop_reason.contains("agent_max_turns = 2"),
            "{}: {}",
            backend.name,
            finished.stop_reason
        );
        assert!(!finished.failed, "{}", backend.name);
        assert_eq!(upstream.seen().len(), 2, "{}", backend.name);
        stack.stop().await;
    }

    async fn the_time_budget_ends_a_run_as_an_error_that_keeps_its_text(backend) {
        // Twenty words, 150 ms apart: three seconds against a budget of one.
        let words: Vec<String> = (1..=20).map(|i| format!("w{i}")).collect();
        let upstream = ScriptedHttp::chat_turns(vec![ScriptedTurn::text(&words.join(" "))
            .delay(Duration::from_millis(150))])
        .await;
        let stack = Agents::start(&backend, &upstream).await;
        let alice = user("alice", false);
        let (_tx, mut events) = stack
            .run(&alice, start("s-late", "Count", json!({"agent_total_timeout": 1})))
            .await
            .unwrap();
        let (_, finished) = events_until_finished(&mut events).await;
        assert!(
            finished.stop_reason.starts_with("the time budget ran out"),
            "{}: {}",
            backend.name,
            finished.stop_reason
        );
        // An error the reply carries (504), not an empty success.
        assert!(finished.failed, "{}", backend.name);
        assert_eq!(finished.status, 504, "{}", backend.name);
        assert!(finished.text.starts_with("w1"), "{}: {:?}", backend.name, finished.text);
        assert!(!finished.text.contains("w20"), "{}: {:?}", backend.name, finished.text);
        stack.stop().await;
    }

    async fn stop_ends_a_streaming_run_and_keeps_its_text(backend) {
        let upstream = ScriptedHttp::chat_turns(vec![ScriptedTurn::text(
            "one two three four five six seven eight nine ten eleven twelve",
        )
        .delay(Duration::from_millis(150))])
        .await;
        let stack = Agents::start(&backend, &upstream).await;
        let alice = user("alice", false);
        let (tx, mut events) = stack
            .run(&alice, start("s-stop", "Count", json!({})))
            .await
            .unwrap();
        // Wait for the first words, then stop.
        let mut text = String::new();
        while text.split_whitespace().count() < 2 {
            match tokio::time::timeout(Duration::from_secs(10), events.next()).await {
                Ok(Some(Ok(pb::RunEvent { event: Some(Event::Delta(d)) }))) => text.push_str(&d),
                Ok(Some(Ok(_))) => {}
                other => panic!("{}: no delta: {other:?}", backend.name),
            }
        }
        tx.send(pb::RunInput {
            input: Some(pb::run_input::Input::Control("stop".into())),
        })
        .await
        .unwrap();
        let (_, finished) = events_until_finished(&mut events).await;
        assert_eq!(finished.stop_reason, "stopped by the user", "{}", backend.name);
        assert!(!finished.failed, "{}", backend.name);
        assert!(finished.text.starts_with(&text), "{}: {:?}", backend.name, finished.text);
        assert!(
            !finished.text.contains("twelve"),
            "{}: the run went on after stop: {:?}",
            backend.name,
            finished.text
        );
        stack.stop().await;
    }

    async fn a_shutdown_stops_running_runs_which_say_how_they_ended(backend) {
        let upstream = ScriptedHttp::chat_turns(vec![ScriptedTurn::text(
            &(0..400).map(|i| format!("w{i}")).collect::<Vec<_>>().join(" "),
        )
        .delay(Duration::from_millis(50))])
        .await;
        let stack = Agents::start(&backend, &upstream).await;
        let alice = user("alice", false);
        // The caller keeps the run's input open, as chat-service does.
        let (_tx, mut events) = stack
            .run(&alice, start("s-shutdown", "Count", json!({})))
            .await
            .unwrap();
        loop {
            match tokio::time::timeout(Duration::from_secs(10), events.next()).await {
                Ok(Some(Ok(pb::RunEvent { event: Some(Event::Delta(_)) }))) => break,
                Ok(Some(Ok(_))) => {}
                other => panic!("{}: no delta: {other:?}", backend.name),
            }
        }
        let Agents { agent, stack, .. } = stack;
        let (stopped, (_, finished)) =
            tokio::join!(agent.stop(), events_until_finished(&mut events));
        stopped.expect("agent-service stops while a run streams");
        assert!(finished.stop_reason.contains("stopped"), "{}: {}", backend.name, finished.stop_reason);
        assert!(!finished.text.contains("w399"), "{}", backend.name);
        stack.stop().await;
    }

    async fn runs_are_refused_before_the_first_event_when_they_cannot_run(backend) {
        let upstream = ScriptedHttp::chat_turns(vec![ScriptedTurn::text("never")]).await;
        let stack = Agents::start(&backend, &upstream).await;
        let alice = user("alice", false);
        let cases = [
            ("plain", json!({}), "cannot be used by the agent"),
            ("missing", json!({}), "not found"),
            ("scripted", json!({"agent_tools": ["no_such_tool"]}), "unknown agent tool"),
            ("scripted", json!({"agent_max_turns": 0}), "agent_max_turns"),
            ("scripted", json!({"agent_type": "wizard"}), "agent_type"),
        ];
        for (model, args, why) in cases {
            let mut s = start("s-refused", "Q", args.clone());
            s.model = model.into();
            let err = stack.run(&alice, s).await.unwrap_err();
            assert_eq!(err.code(), Code::InvalidArgument, "{}: {model} {args}", backend.name);
            assert!(err.message().contains(why), "{}: {model} {args}: {}", backend.name, err.message());
            let mut client = AgentServiceClient::new(stack.agent.channel());
            let check = client
                .check_run(stack.req(
                    &alice,
                    Service::Agent,
                    pb::RunCheck {
                        model: model.into(),
                        agent_args_json: args.to_string(),
                        ..Default::default()
                    },
                ))
                .await
                .unwrap_err();
            assert_eq!(check.code(), Code::InvalidArgument, "{}: CheckRun {model} {args}", backend.name);
        }
        let mut bad_session = start("../up", "Q", json!({}));
        bad_session.session_id = "../up".into();
        let err = stack.run(&alice, bad_session).await.unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{}", backend.name);
        assert!(upstream.seen().is_empty(), "{}: a refused run called the model", backend.name);
        stack.stop().await;
    }

    async fn model_calls_are_booked_and_a_spent_cap_refuses_the_next_run(backend) {
        let upstream = ScriptedHttp::chat_turns(vec![ScriptedTurn::text("Paid answer.").usage(100, 50)]).await;
        let stack = Agents::start(&backend, &upstream).await;
        let root = user("root", true);
        let alice = user("alice", false);
        let mut admin = AdminServiceClient::new(stack.stack.admin().channel());
        // 150 tokens at 1000 per million: 0.15 per call.
        admin
            .set_global_setting(stack.req(
                &root,
                Service::Admin,
                SetGlobalSettingRequest {
                    key_name: "max_llm_cost_per_user".into(),
                    string_value: "0.1".into(),
                    can_overwrite: Some(true),
                    is_public: Some(false),
                },
            ))
            .await
            .unwrap();
        let (_tx, mut events) = stack
            .run(&alice, start("s-paid", "Q", json!({})))
            .await
            .unwrap();
        let (_, first) = events_until_finished(&mut events).await;
        assert_eq!(first.text, "Paid answer.", "{}: {}", backend.name, first.stop_reason);
        assert!((first.calls[0].cost - 0.15).abs() < 1e-9, "{}: {:?}", backend.name, first.calls);

        // The call reaches the ledger through agent-service's outbox and the bus.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let spend = admin
                .get_llm_spend(stack.req(&alice, Service::Admin, LlmSpendRequest::default()))
                .await
                .unwrap()
                .into_inner();
            if spend.cost_total > 0.0 {
                assert!((spend.cost_total - 0.15).abs() < 1e-9, "{}: {spend:?}", backend.name);
                break;
            }
            assert!(tokio::time::Instant::now() < deadline, "{}: usage never booked", backend.name);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let (_tx, mut events) = stack
            .run(&alice, start("s-paid", "Again", json!({})))
            .await
            .unwrap();
        let (_, second) = events_until_finished(&mut events).await;
        assert!(second.failed, "{}: {second:?}", backend.name);
        assert!(second.stop_reason.contains("max_llm_cost_per_user"), "{}: {}", backend.name, second.stop_reason);
        assert_eq!(second.turns, 0, "{}", backend.name);
        assert_eq!(upstream.seen().len(), 1, "{}: the capped run called the model", backend.name);
        stack.stop().await;
    }
}
