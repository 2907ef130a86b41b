//! What agent-service does when a chat session is deleted (`chat.session.deleted`): the
//! session's workspace goes with it (SPEC.md's session-delete cascade; the documents its runs
//! stored stay, as documents whose session is no longer visible). Two subscriptions: one per
//! service (durable, the shared records: manifest and ownership) and one per replica
//! (broadcast, the replica's own copy on disk). A replica that was down meanwhile clears
//! workspaces without a record when it starts ([`sweep_orphans`]).

use std::path::{Path, PathBuf};

use docchat_common::bus::EventHandler;
use docchat_common::bus::topics;
use docchat_proto::events::v1::{ChatSessionDeleted, Envelope};
use prost::Message;
use sea_orm::DatabaseConnection;

use crate::{stored, workspaces};

pub const SESSION_EVENTS_GROUP: &str = "agent.sessions";
pub const SESSION_DISK_GROUP: &str = "agent.sessions.disk";

fn deleted(event: &Envelope) -> anyhow::Result<Option<String>> {
    if event.r#type != topics::CHAT_SESSION_DELETED {
        return Ok(None);
    }
    let e = ChatSessionDeleted::decode(event.payload.as_slice())?;
    Ok(Some(e.session_id))
}

/// Forgets a deleted session's records. Idempotent.
pub struct SessionRecords {
    pub db: DatabaseConnection,
}

#[async_trait::async_trait]
impl EventHandler for SessionRecords {
    async fn handle(&self, event: &Envelope) -> anyhow::Result<()> {
        if let Some(session) = deleted(event)? {
            stored::manifest::clear(&self.db, &session)
                .await
                .map_err(|e| anyhow::anyhow!(e.message))?;
            workspaces::forget(&self.db, &session)
                .await
                .map_err(|e| anyhow::anyhow!(e.message))?;
        }
        Ok(())
    }
}

/// Removes a deleted session's workspace from this replica's disk. Idempotent.
pub struct SessionDisk {
    pub workspaces: PathBuf,
}

#[async_trait::async_trait]
impl EventHandler for SessionDisk {
    async fn handle(&self, event: &Envelope) -> anyhow::Result<()> {
        if let Some(session) = deleted(event)? {
            remove_workspace(&self.workspaces, &session).await;
        }
        Ok(())
    }
}

/// Removes `root/<session>` (links inside are removed, never followed).
async fn remove_workspace(root: &Path, session: &str) {
    let Ok(dir) = workspaces::session_dir(root, session) else {
        return;
    };
    match tokio::fs::remove_dir_all(dir).await {
        Ok(()) => tracing::debug!(session, "removed the workspace of a deleted session"),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            tracing::warn!(session, error = %e, "cannot remove a deleted session's workspace")
        }
    }
}

/// Removes the workspaces on this disk whose session has no record (deleted while this
/// replica was down). Answers how many.
pub async fn sweep_orphans(db: &DatabaseConnection, root: &Path) -> anyhow::Result<usize> {
    let Ok(mut dir) = tokio::fs::read_dir(root).await else {
        return Ok(0);
    };
    let mut removed = 0;
    while let Some(entry) = dir.next_entry().await? {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !entry.file_type().await?.is_dir() {
            continue;
        }
        if !workspaces::recorded(db, &name)
            .await
            .map_err(|e| anyhow::anyhow!(e.message))?
        {
            remove_workspace(root, &name).await;
            removed += 1;
        }
    }
    Ok(removed)
}
