//! A run of a custom agent (llm_args agent_type = one of the caller's custom agents' names):
//! instead of the model loop, the agent's folder runs in the sandbox
//! ([`crate::custom_agents::run`]); its stdout is the answer, streamed line by line as
//! deltas while it runs; then the workspace's files are stored and the run finishes as any other.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use docchat_common::error::ErrorCode;
use docchat_proto::agent::v1 as pb;
use tokio::sync::mpsc;

use super::control::Control;
use super::history::History;
use super::{End, Engine, RunRequest, STOPPED_BY_USER, State};
use crate::custom_agents::run::CustomRun;

impl Engine {
    pub(super) async fn run_custom(
        &self,
        req: &RunRequest,
        custom: &CustomRun,
        control: &Control,
        events: &mpsc::Sender<pb::RunEvent>,
    ) -> pb::RunFinished {
        let mut st = State {
            req,
            control,
            events,
            deadline: tokio::time::Instant::now() + req.args.total_timeout,
            started: Instant::now(),
            text: String::new(),
            ttft: None,
            calls: Arc::new(Mutex::new(Vec::new())),
            references: Vec::new(),
            history: History::default(),
            files: Vec::new(),
            restored: false,
            unstored: Vec::new(),
            catalog: self.catalog.clone(),
            offered: Vec::new(),
        };
        self.restore(&mut st).await;
        let (tx, mut answer) = mpsc::channel::<String>(64);
        let run = custom.runner.run(
            &custom.agent,
            &req.start,
            &req.workspace,
            self.deps.code.as_ref(),
            crate::custom_agents::run::RunLimits {
                wall_clock: req.args.total_timeout,
                memory_bytes: req.args.max_memory,
                disk: req.disk.clone(),
            },
            control.stop_token(),
            tx,
        );
        tokio::pin!(run);
        let out = loop {
            tokio::select! {
                out = &mut run => break out,
                Some(piece) = answer.recv() => st.delta(&piece).await,
            }
        };
        while let Ok(piece) = answer.try_recv() {
            st.delta(&piece).await;
        }
        for n in &out.notes {
            st.history.note(1, n);
        }
        let end = if control.stopped() {
            End::ok(STOPPED_BY_USER)
        } else if out.failed {
            End::failed(
                format!("the custom agent {} failed", custom.agent.agent_name),
                ErrorCode::Internal,
            )
        } else {
            End::ok("")
        };
        self.store_files(&mut st, 1).await;
        st.tell_unstored().await;
        let files_old = self.earlier_files(&mut st, 1).await;
        if !end.reason.is_empty() {
            st.history.note(1, &end.reason);
        }
        pb::RunFinished {
            text: st.text.clone(),
            stop_reason: end.reason,
            failed: end.failed.is_some(),
            status: end.failed.map_or(0, |c| u32::from(c.http_status())),
            files: std::mem::take(&mut st.files),
            files_old,
            history_json: st.history.json(),
            history_md: st.history.markdown(),
            analysis: format!(
                "custom agent {} ran in the sandbox",
                custom.agent.agent_name
            ),
            prompt_raw: String::new(),
            calls: Vec::new(),
            references: Vec::new(),
            turns: 1,
            time_to_first_token: st.ttft.unwrap_or(0.0),
        }
    }
}
