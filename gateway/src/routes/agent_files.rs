//! The files an agent wrote in a chat session's workspace and their directory stats
//! (SPEC.md "Agent files and directories"). The session must be the caller's chat session
//! (chat-service); agent-service answers over its workspace on disk.

use actix_web::{HttpResponse, delete, get, web};
use docchat_proto::agent::v1 as pb;
use docchat_proto::chat::v1 as chat;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_actix_web::service_config::ServiceConfig;

use super::{PageQuery, page};

use crate::auth::Api;
use crate::error::{ErrorBody, HttpResult};

/// Registers this module's routes.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(list_agent_server_files)
        .service(delete_agent_server_files)
        .service(delete_agent_server_directories)
        .service(list_agent_server_directory_stats)
        .service(get_agent_server_directory_stats)
        .service(list_all_agent_server_directory_stats);
}

/// A file an agent wrote in the session's workspace.
#[derive(Debug, Serialize, ToSchema)]
pub struct AgentServerFile {
    /// Stable per session and path.
    pub id: String,
    /// `agent_server_file`.
    pub object: String,
    pub bytes: i64,
    /// Unix seconds.
    pub created_at: i64,
    /// The path relative to the workspace.
    pub filename: String,
    /// `agent_output`.
    pub purpose: String,
}

/// An entry directly inside a directory (detail_level 1).
#[derive(Debug, Serialize, ToSchema)]
pub struct AgentServerDirectoryFileStats {
    pub name: String,
    pub path: String,
    pub size_bytes: i64,
    pub size_human_readable: String,
    pub created_timestamp: f64,
    pub modified_timestamp: f64,
    pub created_date: String,
    pub modified_date: String,
    pub is_directory: bool,
    pub owner: String,
    pub permissions: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

/// Stats of an agent server directory.
#[derive(Debug, Serialize, ToSchema)]
pub struct AgentServerDirectoryStats {
    pub id: String,
    /// `agent_server_directory`.
    pub object: String,
    pub size_bytes: i64,
    pub size_human_readable: String,
    pub file_count: i64,
    pub directory_count: i64,
    pub created_timestamp: f64,
    pub modified_timestamp: f64,
    pub created_date: String,
    pub modified_date: String,
    pub is_empty: bool,
    pub top_level_contents: Vec<String>,
    pub owner: String,
    pub permissions: String,
    /// Only with detail_level 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub files: Option<Vec<AgentServerDirectoryFileStats>>,
}

/// A session's directory stats in the caller's overview.
#[derive(Debug, Serialize, ToSchema)]
pub struct AgentServerDirectoryStatsPerSession {
    pub agent_chat_session_id: String,
    pub chat_preview: String,
    pub stats: Vec<AgentServerDirectoryStats>,
}

#[derive(Debug, Deserialize, IntoParams)]
pub struct DetailQuery {
    /// 1 adds per-file metadata.
    pub detail_level: Option<u32>,
}

/// `1.5 KB` style.
fn human(bytes: i64) -> String {
    const UNITS: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
    let mut v = bytes.max(0) as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

fn date(ts: f64) -> String {
    chrono::DateTime::from_timestamp(ts as i64, 0)
        .map(|d| d.format("%Y-%m-%d %H:%M:%S").to_string())
        .unwrap_or_default()
}

/// `drwxr-xr-x` from st_mode bits.
fn permissions(mode: u32) -> String {
    let kind = match mode & 0o170000 {
        0o040000 => 'd',
        0o120000 => 'l',
        _ => '-',
    };
    let mut s = String::from(kind);
    for shift in [6, 3, 0] {
        let bits = (mode >> shift) & 7;
        s.push(if bits & 4 != 0 { 'r' } else { '-' });
        s.push(if bits & 2 != 0 { 'w' } else { '-' });
        s.push(if bits & 1 != 0 { 'x' } else { '-' });
    }
    s
}

impl From<pb::FileStats> for AgentServerDirectoryFileStats {
    fn from(f: pb::FileStats) -> Self {
        AgentServerDirectoryFileStats {
            size_human_readable: human(f.size_bytes),
            created_date: date(f.created_timestamp),
            modified_date: date(f.modified_timestamp),
            permissions: permissions(f.mode),
            name: f.name,
            path: f.path,
            size_bytes: f.size_bytes,
            created_timestamp: f.created_timestamp,
            modified_timestamp: f.modified_timestamp,
            is_directory: f.is_directory,
            owner: f.owner,
            sha256: f.sha256,
        }
    }
}

impl From<pb::DirectoryStats> for AgentServerDirectoryStats {
    fn from(d: pb::DirectoryStats) -> Self {
        AgentServerDirectoryStats {
            object: "agent_server_directory".into(),
            size_human_readable: human(d.size_bytes),
            created_date: date(d.created_timestamp),
            modified_date: date(d.modified_timestamp),
            is_empty: d.file_count == 0 && d.directory_count == 0,
            permissions: permissions(d.mode),
            files: d
                .detailed
                .then(|| d.files.into_iter().map(Into::into).collect()),
            id: d.id,
            size_bytes: d.size_bytes,
            file_count: d.file_count,
            directory_count: d.directory_count,
            created_timestamp: d.created_timestamp,
            modified_timestamp: d.modified_timestamp,
            top_level_contents: d.top_level_contents,
            owner: d.owner,
        }
    }
}

/// The session, checked to be the caller's chat session (404 otherwise).
async fn session(api: &Api, id: String) -> HttpResult<String> {
    api.chat()
        .get_session(chat::SessionRef { id: id.clone() })
        .await?;
    Ok(id)
}

#[utoipa::path(tag = "Agents", params(("session_id" = String, Path)),
    responses((status = 200, body = Vec<AgentServerFile>), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/chats/{session_id}/agent_server_files")]
pub async fn list_agent_server_files(
    api: Api,
    path: web::Path<String>,
) -> HttpResult<web::Json<Vec<AgentServerFile>>> {
    let session_id = session(&api, path.into_inner()).await?;
    let files = api
        .agent()
        .list_session_files(pb::SessionRef { session_id })
        .await?
        .into_inner()
        .files;
    Ok(web::Json(
        files
            .into_iter()
            .map(|f| AgentServerFile {
                id: f.id,
                object: "agent_server_file".into(),
                bytes: f.bytes,
                created_at: f.created_at,
                filename: f.filename,
                purpose: "agent_output".into(),
            })
            .collect(),
    ))
}

#[derive(Debug, Deserialize, IntoParams)]
pub struct DirTypesQuery {
    /// Kinds of agent directories (the reference client's; a session's directories are all
    /// its workspace, so every kind names it).
    pub dir_types: Option<String>,
}

/// The deprecated DELETE of the reference client: the files of every session named (comma
/// separated), as DELETE …/agent_server_files does for one. Every session is checked
/// first, so one that is not the caller's (404) deletes nothing.
#[utoipa::path(tag = "Agents", params(("session_ids" = String, Path, description = "comma-separated session ids"), DirTypesQuery),
    responses((status = 204, description = "deleted"), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, description = "a deletion is in progress", body = ErrorBody)),
    security(("bearer" = [])))]
#[delete("/chats/{session_ids}/agent_server_directories")]
pub async fn delete_agent_server_directories(
    api: Api,
    path: web::Path<String>,
    _query: web::Query<DirTypesQuery>,
) -> HttpResult<HttpResponse> {
    let mut sessions = Vec::new();
    for id in path.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        sessions.push(session(&api, id.to_owned()).await?);
    }
    for session_id in sessions {
        api.agent()
            .delete_session_files(pb::SessionRef { session_id })
            .await?;
    }
    Ok(HttpResponse::NoContent().finish())
}

#[utoipa::path(tag = "Agents", params(("session_id" = String, Path)),
    responses((status = 204, description = "deleted"), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, description = "a deletion is in progress", body = ErrorBody)),
    security(("bearer" = [])))]
#[delete("/chats/{session_id}/agent_server_files")]
pub async fn delete_agent_server_files(
    api: Api,
    path: web::Path<String>,
) -> HttpResult<HttpResponse> {
    let session_id = session(&api, path.into_inner()).await?;
    api.agent()
        .delete_session_files(pb::SessionRef { session_id })
        .await?;
    Ok(HttpResponse::NoContent().finish())
}

async fn directory_stats(
    api: &Api,
    session_id: String,
    detail_level: u32,
    directory: Option<String>,
) -> HttpResult<Vec<AgentServerDirectoryStats>> {
    let session_id = session(api, session_id).await?;
    let dirs = api
        .agent()
        .session_directory_stats(pb::DirectoryStatsRequest {
            session_id,
            detail_level,
            directory,
        })
        .await?
        .into_inner()
        .directories;
    Ok(dirs.into_iter().map(Into::into).collect())
}

#[utoipa::path(tag = "Agents", params(("session_id" = String, Path), DetailQuery),
    responses((status = 200, body = Vec<AgentServerDirectoryStats>), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/chats/{session_id}/agent_server_directories/stats")]
pub async fn list_agent_server_directory_stats(
    api: Api,
    path: web::Path<String>,
    query: web::Query<DetailQuery>,
) -> HttpResult<web::Json<Vec<AgentServerDirectoryStats>>> {
    let detail = query.detail_level.unwrap_or(0);
    Ok(web::Json(
        directory_stats(&api, path.into_inner(), detail, None).await?,
    ))
}

#[utoipa::path(tag = "Agents", params(("session_id" = String, Path), ("dir_name" = String, Path), DetailQuery),
    responses((status = 200, body = AgentServerDirectoryStats), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/chats/{session_id}/agent_server_directories/{dir_name}/stats")]
pub async fn get_agent_server_directory_stats(
    api: Api,
    path: web::Path<(String, String)>,
    query: web::Query<DetailQuery>,
) -> HttpResult<web::Json<AgentServerDirectoryStats>> {
    let (session_id, dir) = path.into_inner();
    let detail = query.detail_level.unwrap_or(0);
    let mut dirs = directory_stats(&api, session_id, detail, Some(dir)).await?;
    let one = dirs
        .pop()
        .ok_or_else(|| docchat_common::error::ApiError::not_found("directory not found"))?;
    Ok(web::Json(one))
}

#[utoipa::path(tag = "Agents", params(PageQuery),
    responses((status = 200, body = Vec<AgentServerDirectoryStatsPerSession>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
#[get("/agents/directory_stats")]
pub async fn list_all_agent_server_directory_stats(
    api: Api,
    query: web::Query<PageQuery>,
) -> HttpResult<web::Json<Vec<AgentServerDirectoryStatsPerSession>>> {
    // Out-of-range values are a 400 here; a limit of 0 is the service's default (100).
    let (offset, limit) = page(query.offset, query.limit)?;
    let sessions = api
        .agent()
        .global_directory_stats(pb::GlobalDirectoryStatsRequest {
            offset,
            limit,
            filter_text: String::new(),
        })
        .await?
        .into_inner()
        .sessions;
    Ok(web::Json(
        sessions
            .into_iter()
            .map(|s| AgentServerDirectoryStatsPerSession {
                agent_chat_session_id: s.session_id,
                chat_preview: s.chat_preview,
                stats: s.stats.into_iter().map(Into::into).collect(),
            })
            .collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permissions_and_sizes_read_as_ls_does() {
        assert_eq!(permissions(0o40755), "drwxr-xr-x");
        assert_eq!(permissions(0o100644), "-rw-r--r--");
        assert_eq!(human(12), "12 B");
        assert_eq!(human(1536), "1.5 KB");
    }
}
