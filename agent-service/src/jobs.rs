//! Agent runs in the job history: each run is a job of kind `agent_run`, announced through
//! agent-service's outbox as `job.running` when it starts and with how it ended: completed,
//! failed (its one-line reason), canceled (stopped by the user, who is `canceled_by`) or
//! timeout (past agent_total_timeout). A run has no queue: it starts when asked. Each event
//! is written with the run's lease (run_leases.rs): taken when it starts, given back when it
//! ends, so a run whose replica died ends `stale` instead of running for ever.

use docchat_common::Caller;
use docchat_common::bus::{envelope, topics};
use docchat_common::error::error_line;
use docchat_common::jobs::KIND_AGENT_RUN;
use docchat_common::outbox::{self, OutboxRelay};
use docchat_common::time::{now, to_proto};
use docchat_proto::agent::v1 as pb;
use docchat_proto::events::v1::JobChanged;
use sea_orm::{DatabaseConnection, DbErr};

use crate::run::{STOPPED_BY_USER, TIME_BUDGET_RAN_OUT};
use crate::run_leases::Leases;

/// Where a run's job events go.
#[derive(Clone)]
pub struct RunJobs {
    pub db: DatabaseConnection,
    pub relay: OutboxRelay,
    pub leases: std::sync::Arc<Leases>,
}

impl RunJobs {
    /// A run of `caller` (in `collection_id`, or none) started: its job, announced running.
    pub async fn started(&self, caller: &Caller, collection_id: &str) -> JobChanged {
        let at = Some(to_proto(now()));
        let job = JobChanged {
            job_id: docchat_common::ids::new_id(),
            kind: KIND_AGENT_RUN.to_owned(),
            status: "running".to_owned(),
            progress: 0.0,
            errors: Vec::new(),
            user_id: caller.user_id.clone(),
            username: caller.username.clone(),
            collection_id: collection_id.to_owned(),
            collection_name: String::new(),
            created_at: at,
            started_at: at,
            finished_at: None,
            canceled_by: None,
            cancel_reason: None,
            name: String::new(),
        };
        self.announce(&job, true).await;
        job
    }

    /// The run ended as `finished` says.
    pub async fn finished(&self, mut job: JobChanged, finished: &pb::RunFinished) {
        ended(&mut job, finished);
        self.announce(&job, false).await;
    }

    /// The history is a record, not the run's truth: a failure to write it is logged and
    /// does not fail the run.
    async fn announce(&self, job: &JobChanged, starts: bool) {
        match self.write(job, starts).await {
            Ok(()) => self.relay.notify(),
            Err(e) => {
                tracing::warn!(job_id = %job.job_id, error = %e, "agent run job event not written")
            }
        }
    }

    /// The event with the lease taken (`starts`) or given back, in one transaction.
    async fn write(&self, job: &JobChanged, starts: bool) -> Result<(), DbErr> {
        let txn = docchat_common::db::begin(&self.db).await?;
        if starts {
            self.leases.take(&txn, job).await?;
        } else {
            self.leases.give_back(&txn, &job.job_id).await?;
        }
        let event = envelope(&topics::job(&job.status), &job.user_id, job);
        outbox::enqueue(&txn, &event).await?;
        txn.commit().await
    }
}

/// The job's end from the run's: status, progress, finish time, error or cancel.
fn ended(job: &mut JobChanged, finished: &pb::RunFinished) {
    let reason = finished.stop_reason.as_str();
    job.progress = 1.0;
    job.finished_at = Some(to_proto(now()));
    job.status = if reason.starts_with(TIME_BUDGET_RAN_OUT) {
        job.errors.push(error_line(reason));
        "timeout"
    } else if finished.failed {
        job.errors.push(error_line(reason));
        "failed"
    } else if reason == STOPPED_BY_USER {
        job.canceled_by = Some(job.username.clone());
        job.cancel_reason = Some(reason.to_owned());
        "canceled"
    } else {
        "completed"
    }
    .to_owned();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn end(failed: bool, reason: &str) -> JobChanged {
        let mut job = JobChanged {
            username: "alice".into(),
            status: "running".into(),
            ..Default::default()
        };
        let finished = pb::RunFinished {
            failed,
            stop_reason: reason.into(),
            ..Default::default()
        };
        ended(&mut job, &finished);
        job
    }

    #[test]
    fn a_run_ends_as_its_job() {
        assert_eq!(end(false, "").status, "completed");
        let failed = end(true, "the model failed: boom\ntrace");
        assert_eq!((failed.status.as_str(), failed.errors.len()), ("failed", 1));
        assert_eq!(failed.errors[0], "the model failed: boom");
        let stopped = end(false, STOPPED_BY_USER);
        assert_eq!(stopped.status, "canceled");
        assert_eq!(stopped.canceled_by.as_deref(), Some("alice"));
        let late = end(true, "the time budget ran out (agent_total_timeout = 5 s)");
        assert_eq!(late.status, "timeout");
    }
}
