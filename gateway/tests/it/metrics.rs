//! Prometheus metrics on the probe listener: one ingestion, one RAG completion and one agent
//! run move the families they pass through (HTTP by route template, gRPC on both sides,
//! the bus and outbox, ingestion's stages, retrieval, the model upstream, tokens and cost,
//! the agent's runs and tool calls); closed label sets show at zero before any traffic;
//! labels never carry a raw path; `promtool check metrics` accepts the page.

use std::collections::BTreeMap;
use std::time::Duration;

use docchat_common::testing::{ScriptedCall, ScriptedTurn};
use reqwest::Method;
use serde_json::json;

use crate::agent::agent_upstream;
use crate::completions::{collection_with, session, stream};
use crate::harness::Stack;

/// One sample: its name, labels and value.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// The samples of an exposition page (the text format's sample lines; label values here
/// hold no escaped quotes).
fn samples(page: &str) -> Vec<Sample> {
    page.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|line| {
            let (series, value) = line.rsplit_once(' ').expect("a sample line");
            let (name, labels) = match series.split_once('{') {
                Some((name, rest)) => {
                    let inner = rest.strip_suffix('}').expect("closed labels");
                    let labels = inner
                        .split("\",")
                        .filter(|p| !p.is_empty())
                        .map(|pair| {
                            let (k, v) = pair.split_once("=\"").expect("label=\"value\"");
                            (k.to_owned(), v.trim_end_matches('"').to_owned())
                        })
                        .collect();
                    (name.to_owned(), labels)
                }
                None => (series.to_owned(), BTreeMap::new()),
            };
            Sample {
                name,
                labels,
                value: value.parse().expect("a number"),
            }
        })
        .collect()
}

/// The sum of `name`'s samples whose labels include `labels`.
fn sum(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
    samples
        .iter()
        .filter(|s| s.name == name)
        .filter(|s| {
            labels
                .iter()
                .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|s| s.value)
        .sum()
}

fn has(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> bool {
    samples.iter().any(|s| {
        s.name == name
            && labels
                .iter()
                .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
    })
}

fn free_addr() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

async fn scrape(probe: &str) -> String {
    let response = reqwest::get(format!("http://{probe}/metrics"))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
    response.text().await.unwrap()
}

/// `promtool check metrics` on `page` (Debian's prometheus package; scripts/promtool.sh
/// installs it): in CI its absence fails the test.
fn promtool_accepts(page: &str) {
    use std::io::Write;
    let child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            docchat_common::testing::unavailable(&format!("promtool ({e})"));
            return;
        }
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(page.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

docchat_common::backend_tests! {
    async fn an_ingestion_a_rag_completion_and_an_agent_run_move_their_families(backend) {
        let upstream = agent_upstream(vec![
            ScriptedTurn::calls(vec![ScriptedCall::new(
                "c1",
                "search_documents",
                json!({"query": "Where is the Eiffel Tower?"}),
            )]),
            ScriptedTurn::text("It is in Paris."),
        ])
        .await;
        let probe = free_addr();
        let app = Stack::builder(&backend)
            .everything()
            .tool_models(&upstream.base_url)
            .configure(|c| c.probe_addr = Some(probe.clone()))
            .start()
            .await;

        // Before any traffic: the closed label sets are there, at zero.
        let before = samples(&scrape(&probe).await);
        for (name, labels) in [
            ("docchat_chat_completions_total", vec![("rag_type", "agent"), ("outcome", "ok")]),
            ("docchat_agent_runs_total", vec![("outcome", "failed")]),
            ("docchat_agent_tool_calls_total", vec![("tool", "python"), ("outcome", "ok")]),
            ("docchat_ingest_jobs_total", vec![("outcome", "done")]),
            ("docchat_scheduler_executions_total", vec![("trigger", "manual"), ("outcome", "failed")]),
            ("docchat_limit_refusals_total", vec![("limit", "llm_cost_cap")]),
            ("docchat_sandbox_slots", vec![("state", "in_use")]),
        ] {
            assert!(has(&before, name, &labels), "{name}{labels:?} missing before traffic");
        }
        assert_eq!(sum(&before, "docchat_ingest_jobs_total", &[("outcome", "done")]), 0.0);

        let (_, alice) = app.user("alice").await;
        let text = b"The Eiffel Tower stands in Paris, on the Champ de Mars.".to_vec();
        let size = text.len() as f64;
        let cid = collection_with(&app, &alice, "paris.txt", text).await;
        let chat = session(&app, &alice, Some(&cid)).await;
        let path = format!("/api/v1/chats/{chat}/completions");
        let (s, answer) = app
            .call(Method::POST, &path, &alice, Some(json!({"message": "Where is the Eiffel Tower?", "stream": false, "rag_config": {"rag_type": "rag"}})))
            .await;
        assert_eq!(s, 200, "{answer}");
        let mut lines = stream(
            &app,
            &alice,
            &chat,
            json!({"message": "Where is the Eiffel Tower?", "stream": true,
                   "llm_args": {"agent_tools": ["search_documents"], "agent_max_turns": 4},
                   "rag_config": {"rag_type": "agentic_rag"}}),
        )
        .await;
        let (body, last) = lines.rest(Duration::from_secs(30)).await;
        assert_eq!(body, "It is in Paris.", "{last}");
        // A path no route has, holding an id: counted, but not under its raw path.
        let stray = "/api/v1/nowhere/0f8fad5b-d9cb-469f-a165-70867728950e";
        let (s, _) = app.call(Method::GET, stray, &alice, None).await;
        assert_eq!(s, 404);

        // Usage and outbox counts arrive within the relay's second.
        let mut page = String::new();
        for _ in 0..50 {
            page = scrape(&probe).await;
            let now = samples(&page);
            if sum(&now, "docchat_outbox_relayed_total", &[("service", "chat")]) > 0.0
                && sum(&now, "docchat_llm_tokens_total", &[("model", "scripted")]) > 0.0
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let after = samples(&page);
        let at_least = |name: &str, labels: &[(&str, &str)], min: f64| {
            let got = sum(&after, name, labels);
            assert!(got >= min, "{name}{labels:?} = {got}, want at least {min} ({})", backend.name);
        };
        at_least("docchat_http_requests_total", &[("route", "/api/v1/chats/{session_id}/completions"), ("method", "POST"), ("status", "200")], 2.0);
        at_least("docchat_http_request_duration_seconds_count", &[("method", "POST")], 2.0);
        at_least("grpc_server_handled_total", &[("grpc_service", "docchat.chat.v1.ChatService"), ("grpc_method", "Complete"), ("grpc_code", "OK")], 2.0);
        at_least("grpc_client_handled_total", &[("grpc_service", "docchat.ingest.v1.IngestService"), ("grpc_method", "Search"), ("grpc_code", "OK")], 1.0);
        at_least("grpc_server_handling_seconds_count", &[("grpc_service", "docchat.agent.v1.AgentService")], 1.0);
        at_least("docchat_chat_completions_total", &[("rag_type", "rag"), ("outcome", "ok")], 1.0);
        at_least("docchat_chat_completions_total", &[("rag_type", "agent"), ("outcome", "ok")], 1.0);
        at_least("docchat_chat_time_to_first_token_seconds_count", &[("model", "scripted")], 1.0);
        at_least("docchat_chat_generation_seconds_count", &[("model", "scripted")], 2.0);
        at_least("docchat_model_requests_total", &[("model", "scripted"), ("kind", "chat"), ("outcome", "ok")], 3.0);
        at_least("docchat_model_request_duration_seconds_count", &[("model", "scripted"), ("kind", "chat")], 3.0);
        at_least("docchat_llm_tokens_total", &[("model", "scripted"), ("direction", "completion")], 1.0);
        at_least("docchat_llm_cost_total", &[("model", "scripted")], f64::MIN_POSITIVE);
        at_least("docchat_ingest_jobs_total", &[("outcome", "done")], 1.0);
        at_least("docchat_ingest_pages_total", &[], 1.0);
        at_least("docchat_ingest_bytes_total", &[], size);
        for stage in ["read", "parse", "chunk", "embed", "index"] {
            at_least("docchat_ingest_stage_seconds_count", &[("stage", stage)], 1.0);
        }
        at_least("docchat_embed_texts_total", &[], 1.0);
        at_least("docchat_retrieval_stage_seconds_count", &[("stage", "total")], 2.0);
        at_least("docchat_agent_runs_total", &[("outcome", "ok")], 1.0);
        at_least("docchat_agent_tool_calls_total", &[("tool", "search_documents"), ("outcome", "ok")], 1.0);
        at_least("docchat_bus_published_total", &[], 1.0);
        at_least("docchat_bus_delivered_total", &[("outcome", "ok")], 1.0);
        at_least("docchat_outbox_relayed_total", &[("service", "chat")], 1.0);
        assert!(has(&after, "docchat_outbox_backlog_events", &[("service", "ingest")]), "the relay reports its backlog");
        assert!(has(&after, "process_resident_memory_bytes", &[]), "the process collector");
        assert_eq!(sum(&after, "docchat_http_requests_in_flight", &[]), 0.0);

        // Bounded labels: the stray path is `unmatched` or a template, never itself.
        assert!(!page.contains("0f8fad5b"), "a raw path reached a label");
        at_least("docchat_http_requests_total", &[("status", "404")], 1.0);

        promtool_accepts(&page);
        app.stop().await;
    }
}
