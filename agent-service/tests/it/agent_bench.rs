//! Agent overhead per step and concurrent runs, over the scripted upstream (run alone:
//! `cargo nextest run -p docchat-agent-service --run-ignored only -E 'test(agent_step_overhead)'`).
//! Each model call answers with a list_files call until the run has made `TURNS` of them,
//! then with text. The per-step overhead is a step's time minus a bare model call's (the same
//! request straight to the scripted upstream); list_files' own run (a directory read of an
//! empty workspace) is left in, so the figure is an upper bound.

use std::sync::Arc;
use std::time::Instant;

use docchat_common::testing::{
    Backend, ScriptedCall, ScriptedHttp, ScriptedTurn, SeenRequest, user,
};
use serde_json::{Value, json};

use crate::run::{Agents, events_until_finished, start};

const TURNS: usize = 40;
const CONCURRENT: usize = 32;

/// Calls list_files until the conversation holds `TURNS` tool results, then answers.
async fn looping_upstream() -> ScriptedHttp {
    ScriptedHttp::start_streaming(Arc::new(|r: &SeenRequest| {
        let body: Value = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
        let done = body["messages"]
            .as_array()
            .map(|m| m.iter().filter(|m| m["role"] == "tool").count())
            .unwrap_or(0);
        if done < TURNS {
            ScriptedTurn::calls(vec![ScriptedCall::new(
                &format!("c{done}"),
                "list_files",
                json!({}),
            )])
            .streamed()
        } else {
            ScriptedTurn::text("Done.").streamed()
        }
    }))
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement; run on its own"]
#[allow(clippy::print_stderr, reason = "prints its figures")]
async fn agent_step_overhead() {
    let upstream = looping_upstream().await;
    let agents = Agents::with_ingest(&Backend::sqlite(), &upstream).await;
    let alice = user("alice", false);
    let args = json!({"agent_tools": ["list_files"], "agent_max_turns": TURNS + 5});

    // A bare model call: the same streamed answer, fetched straight from the upstream.
    let http = reqwest::Client::new();
    let body = json!({"model": "scripted", "stream": true, "messages": [{"role": "user", "content": "x"}]});
    let t = Instant::now();
    for _ in 0..50 {
        http.post(format!("{}/v1/chat/completions", upstream.base_url))
            .json(&body)
            .send()
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
    }
    let bare = t.elapsed() / 50;

    let mut per_step = Vec::new();
    for round in 0..3 {
        let session = docchat_common::ids::new_id();
        let _ = round;
        let t = Instant::now();
        let (_tx, mut events) = agents
            .run(&alice, start(&session, "Loop", args.clone()))
            .await
            .unwrap();
        let (_, finished) = events_until_finished(&mut events).await;
        let took = t.elapsed();
        assert_eq!(finished.text, "Done.", "{}", finished.stop_reason);
        assert_eq!(finished.turns as usize, TURNS + 1);
        per_step.push(took / (TURNS as u32 + 1));
    }
    per_step.sort();
    let median = per_step[1];
    eprintln!(
        "agent step (model call + tool call + bookkeeping), median of 3 runs of {} steps: {:.2} ms; bare model call {:.2} ms; overhead {:.2} ms per step",
        TURNS + 1,
        median.as_secs_f64() * 1e3,
        bare.as_secs_f64() * 1e3,
        median.saturating_sub(bare).as_secs_f64() * 1e3
    );

    let t = Instant::now();
    let runs = (0..CONCURRENT).map(|_| {
        let agents = &agents;
        let alice = alice.clone();
        let args = args.clone();
        async move {
            let (_tx, mut events) = agents
                .run(&alice, start(&docchat_common::ids::new_id(), "Loop", args))
                .await
                .unwrap();
            events_until_finished(&mut events).await.1
        }
    });
    let results = futures::future::join_all(runs).await;
    let failed = results
        .iter()
        .filter(|f| f.failed || f.text != "Done.")
        .count();
    eprintln!(
        "{CONCURRENT} concurrent runs of {} steps on one replica: {:.2} s, {failed} failed",
        TURNS + 1,
        t.elapsed().as_secs_f64()
    );
    assert_eq!(failed, 0);
    agents.stop().await;
}
