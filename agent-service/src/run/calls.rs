//! Running one turn's tool calls: each validated (known tool, JSON arguments matching its
//! schema), run with the per-call timeout and the run's cancellation, at most
//! TOOL_CONCURRENCY at once; results in call order. A failure is the tool's result.

use std::time::{Duration, Instant};

use docchat_inference::{ChatMessage, ToolCall};
use docchat_proto::agent::v1 as pb;
use futures::StreamExt;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::asker::RunAsker;
use super::{End, Engine, STOPPED_BY_USER, State, TOOL_CONCURRENCY, schema};
use crate::tools::{Catalog, ToolCtx, ToolOutput, clip};

/// What a tool_finished summary keeps.
const SUMMARY: usize = 2000;

pub(super) async fn run_all(
    engine: &Engine,
    st: &mut State<'_>,
    turn: u32,
    calls: Vec<ToolCall>,
) -> Result<Vec<ChatMessage>, End> {
    let req = st.req;
    // Cancelled on stop (child of the stop token) or when the run's time is up.
    let cancel = st.control.stop_token().child_token();
    let asker = RunAsker {
        model: req.model.clone(),
        entry: req.entry.clone(),
        budget: engine.budget.clone(),
        caller: req.caller.clone(),
        question_id: req.start.question_id.clone(),
        calls: st.calls.clone(),
        max_tokens: (req.start.max_new_tokens > 0).then_some(req.start.max_new_tokens),
    };
    let ctx = ToolCtx {
        asker: Some(std::sync::Arc::new(asker)),
        ..tool_ctx(engine, req, cancel.clone())
    };
    for c in &calls {
        st.emit(pb::run_event::Event::ToolStarted(pb::ToolCallStarted {
            call_id: c.id.clone(),
            name: c.name.clone(),
            arguments_json: c.arguments.clone(),
        }))
        .await;
    }
    let (catalog, offered) = (&st.catalog, &st.offered);
    let work = futures::stream::iter(calls.iter().cloned())
        .map(|call| {
            let ctx = ctx.clone();
            async move {
                let started = Instant::now();
                let span = tracing::info_span!(
                    "tool",
                    otel.name = %format_args!("execute_tool {}", call.name),
                    gen_ai.operation.name = "execute_tool",
                    gen_ai.tool.name = %call.name,
                    gen_ai.tool.call.id = %call.id,
                    error = tracing::field::Empty,
                );
                let result = one(catalog, offered, &ctx, &call)
                    .instrument(span.clone())
                    .await;
                if let Err(e) = &result {
                    span.record("error", e.as_str());
                }
                (call, result, started.elapsed())
            }
        })
        .buffered(TOOL_CONCURRENCY)
        .collect::<Vec<_>>();
    let stop = st.control.stop_token().clone();
    let results = tokio::select! {
        r = work => r,
        () = stop.cancelled() => {
            cancel.cancel();
            return Err(End::ok(STOPPED_BY_USER));
        }
        () = tokio::time::sleep_until(st.deadline) => {
            cancel.cancel();
            return Err(End::ok(super::timeout_reason(&req.args)));
        }
    };
    let mut messages = Vec::with_capacity(results.len());
    for (call, result, elapsed) in results {
        let (ok, text) = match result {
            Ok(out) => {
                st.references.extend(out.references);
                (true, out.text)
            }
            Err(e) => (false, format!("error: {e}")),
        };
        crate::metrics::tool_call(&call.name, ok, elapsed);
        st.history
            .tool(turn, &call.id, &call.name, ok, &text, elapsed.as_millis());
        st.emit(pb::run_event::Event::ToolFinished(pb::ToolCallFinished {
            call_id: call.id.clone(),
            name: call.name.clone(),
            ok,
            summary: clip(&text, SUMMARY),
        }))
        .await;
        messages.push(ChatMessage::tool(call.id, text));
    }
    if st.control.stopped() {
        return Err(End::ok(STOPPED_BY_USER));
    }
    Ok(messages)
}

/// What the run's tool calls get (without the asker, which books model calls).
pub(super) fn tool_ctx(
    engine: &Engine,
    req: &super::RunRequest,
    cancel: CancellationToken,
) -> ToolCtx {
    ToolCtx {
        caller: req.caller.clone(),
        workspace: req.workspace.clone(),
        collection_id: req.start.collection_id.clone(),
        cancel,
        timeout: req.args.turn_timeout,
        max_memory: req.args.max_memory,
        disk: req.disk.clone(),
        deps: engine.deps.clone(),
        asker: None,
    }
}

async fn one(
    catalog: &Catalog,
    offered: &[String],
    ctx: &ToolCtx,
    call: &ToolCall,
) -> Result<ToolOutput, String> {
    let tool = catalog
        .get(&call.name)
        .filter(|_| offered.contains(&call.name))
        .ok_or_else(|| {
            format!(
                "there is no tool {:?}; the tools are: {}",
                call.name,
                offered.join(", ")
            )
        })?;
    let text = if call.arguments.trim().is_empty() {
        "{}"
    } else {
        call.arguments.as_str()
    };
    let args: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("the arguments are not valid JSON ({e}); send a JSON object matching the tool's parameters"))?;
    schema::validate(&tool.parameters(), &args)?;
    let cancel: CancellationToken = ctx.cancel.child_token();
    let ctx = ToolCtx {
        cancel: cancel.clone(),
        ..ctx.clone()
    };
    let timeout: Duration = ctx.timeout;
    tokio::select! {
        r = tool.call(&ctx, args) => r,
        () = tokio::time::sleep(timeout) => {
            cancel.cancel();
            Err(format!("timed out after {} s (agent_timeout)", timeout.as_secs()))
        }
    }
}
