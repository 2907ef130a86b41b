//! Conversions between the admin protos and the service's rows and domain types, so
//! `grpc.rs` only unpacks, authorizes, calls and packs.

use docchat_common::error::{ApiError, ApiResult};
use docchat_common::time::{now, opt_to_proto, to_proto};
use docchat_proto::admin::v1 as pb;
use docchat_proto::common::v1::PageRequest;

use crate::entities::{api_keys, roles, settings as settings_entity};
use crate::identity::{Identity, UserView};
use crate::job_history;
use crate::settings;
use crate::usage::Spend;

pub(crate) fn user_pb(v: UserView) -> pb::User {
    pb::User {
        id: v.user.id,
        username: v.user.username,
        email: v.user.email,
        roles: v.roles,
        groups: v.groups,
        created_at: Some(to_proto(v.user.created_at)),
    }
}

pub(crate) fn identity_pb(i: Identity) -> pb::Identity {
    pb::Identity {
        user_id: i.user.id,
        username: i.user.username,
        email: i.user.email,
        roles: i.roles,
        groups: i.groups,
        permissions: i.permissions,
        is_admin: i.is_admin,
        api_key_id: i.api_key_id,
        key_expires_at_ms: i.key_expires_at.map(|e| e.timestamp_millis()),
    }
}

pub(crate) fn key_pb(k: api_keys::Model, username: String) -> pb::ApiKey {
    let api_keys::Model {
        id,
        user_id,
        name,
        key_hash: _,
        hint,
        created_at,
        expires_at,
        last_used_at,
        total_calls,
        is_active,
        inactivity_days,
    } = k;
    let works = crate::identity::key_works_at(
        is_active,
        expires_at,
        inactivity_days,
        last_used_at.unwrap_or(created_at),
        docchat_common::time::now(),
    );
    pb::ApiKey {
        id,
        user_id,
        username,
        name,
        hint,
        created_at: Some(to_proto(created_at)),
        expires_at: opt_to_proto(expires_at),
        last_used_at: opt_to_proto(last_used_at),
        total_calls,
        is_active: works,
        inactivity_days: inactivity_days.unwrap_or(0),
    }
}

pub(crate) fn role_pb(r: roles::Model) -> pb::Role {
    let roles::Model {
        id,
        name,
        description,
        priority,
        created_at: _,
    } = r;
    pb::Role {
        id,
        name,
        description,
        priority,
    }
}

pub(crate) fn global_pb(items: Vec<settings::GlobalItem>) -> pb::GlobalSettingList {
    pb::GlobalSettingList {
        settings: items
            .into_iter()
            .map(|i| pb::GlobalSetting {
                key_name: i.definition.name.to_owned(),
                string_value: i.value,
                value_type: i.definition.value_type().to_owned(),
                can_overwrite: i.can_overwrite,
                is_public: i.is_public,
                description: i.definition.description.to_owned(),
            })
            .collect(),
    }
}

pub(crate) fn scoped_pb(items: Vec<settings_entity::Model>) -> pb::ScopedSettingList {
    pb::ScopedSettingList {
        settings: items
            .into_iter()
            .map(|s| pb::ScopedSetting {
                value_type: docchat_common::settings::definition(&s.key_name)
                    .map(|d| d.value_type())
                    .unwrap_or("string")
                    .to_owned(),
                key_name: s.key_name,
                string_value: s.string_value,
                updated_at: Some(to_proto(s.updated_at)),
            })
            .collect(),
    }
}

pub(crate) fn job_pb(j: crate::entities::job_history::Model) -> pb::JobHistoryEntry {
    let duration_seconds = job_history::duration_seconds(&j, now());
    let errors = job_history::errors_of(&j);
    let (passed, failed) = match j.status.as_str() {
        "completed" => (1.0, 0.0),
        "failed" | "timeout" | "stale" => (0.0, 1.0),
        _ => (0.0, 0.0),
    };
    pb::JobHistoryEntry {
        id: j.id,
        name: j.name,
        kind: j.kind,
        username: j.username,
        user_id: j.user_id,
        status: j.status,
        passed,
        failed,
        progress: j.progress,
        errors,
        collection_id: j.collection_id,
        collection_name: j.collection_name,
        canceled_by: j.canceled_by,
        cancel_reason: j.cancel_reason,
        created_at: Some(to_proto(j.created_at)),
        updated_at: Some(to_proto(j.updated_at)),
        started_at: opt_to_proto(j.started_at),
        finished_at: opt_to_proto(j.finished_at),
        deleted_at: opt_to_proto(j.deleted_at),
        duration_seconds,
    }
}

const DEFAULT_LIMIT: u64 = 100;
const MAX_LIMIT: u64 = 1000;

pub(crate) fn page(p: &PageRequest) -> (u64, u64) {
    let limit = if p.limit == 0 {
        DEFAULT_LIMIT
    } else {
        p.limit.min(MAX_LIMIT)
    };
    (p.offset, limit)
}

fn non_empty(s: String) -> Option<String> {
    (!s.is_empty()).then_some(s)
}

pub(crate) fn job_query(r: pb::ListJobHistoryRequest) -> ApiResult<job_history::Query> {
    let cursor = match (r.cursor_created_at, non_empty(r.cursor_id)) {
        (Some(at), Some(id)) => Some((docchat_common::time::from_proto(&at), id)),
        (None, None) => None,
        _ => {
            return Err(ApiError::bad_request(
                "cursor_created_at and cursor_id go together",
            ));
        }
    };
    for s in &r.statuses {
        if !job_history::STATUSES.contains(&s.as_str()) {
            return Err(ApiError::bad_request(format!("unknown job status {s:?}")));
        }
    }
    Ok(job_history::Query {
        cursor,
        limit: u64::from(r.limit),
        statuses: r.statuses,
        kind: non_empty(r.kind),
        user_id: non_empty(r.user_id),
        collection_id: non_empty(r.collection_id),
        created_after: r
            .created_after
            .as_ref()
            .map(docchat_common::time::from_proto),
        hide_deleted: false,
    })
}

/// A permission as the RPCs list it: its name is also its id.
pub(crate) fn permission_pb(&(name, description): &(&str, &str)) -> pb::Permission {
    pb::Permission {
        id: name.to_owned(),
        name: name.to_owned(),
        description: description.to_owned(),
    }
}

/// A user's spend as the RPC reports it; `guest` says whether the user holds the guest role.
pub(crate) fn spend_pb(spend: Spend, guest: bool) -> pb::LlmSpend {
    pb::LlmSpend {
        guest,
        cost_last_24h: spend.last_24h,
        cost_total: spend.total,
        window_reset_at: opt_to_proto(spend.window_reset_at),
        prompt_tokens_total: spend.prompt_tokens,
        completion_tokens_total: spend.completion_tokens,
    }
}
