//! The tonic implementation of `docchat.admin.v1.AdminService`: unpack, authorize, call the
//! domain, pack (the proto conversions are in `conversions.rs`).

use docchat_common::auth::{Caller, caller, permissions};
use docchat_common::budget::GUEST_ROLE;
use docchat_common::error::ApiError;
use docchat_common::grpc::{Reply, ok};
use docchat_common::time::{now, opt_to_proto};
use docchat_proto::admin::v1 as pb;
use docchat_proto::admin::v1::admin_service_server::AdminService;
use docchat_proto::common::v1::{Empty, PageRequest};
use sea_orm::DatabaseConnection;
use tonic::{Request, Response, Status};

use crate::conversions::{
    global_pb, identity_pb, job_pb, job_query, key_pb, page, permission_pb, role_pb, scoped_pb,
    spend_pb, user_pb,
};
use crate::identity;
use crate::job_history;
use crate::settings;
use crate::usage;

pub struct AdminGrpc {
    pub db: DatabaseConnection,
}

fn admin(request: &Request<impl Sized>) -> Result<Caller, Status> {
    let caller = caller(request)?;
    caller.require_admin()?;
    Ok(caller)
}

/// The job history needs the admin-center permission; SPEC.md answers 403 without it.
fn admin_center(request: &Request<impl Sized>) -> Result<Caller, Status> {
    let caller = caller(request)?;
    if !caller.has_permission(permissions::ADMIN_CENTER) {
        return Err(ApiError::forbidden(format!(
            "missing required permission {}",
            permissions::ADMIN_CENTER
        ))
        .into());
    }
    Ok(caller)
}

impl AdminGrpc {
    async fn delete_overrides(
        &self,
        scope: &str,
        request: Request<pb::DeleteSettingsRequest>,
    ) -> Reply<pb::ScopedSettingList> {
        admin(&request)?;
        let pb::DeleteSettingsRequest {
            scope_id,
            key_names,
        } = request.into_inner();
        settings::delete(&self.db, scope, &scope_id, &key_names).await?;
        ok(settings::list_scoped(&self.db, scope, &scope_id)
            .await
            .map(scoped_pb))
    }

    async fn set_override(
        &self,
        scope: &str,
        request: Request<pb::SetScopedSettingRequest>,
    ) -> Reply<pb::ScopedSettingList> {
        admin(&request)?;
        let pb::SetScopedSettingRequest {
            scope_id,
            key_name,
            string_value,
        } = request.into_inner();
        ok(
            settings::set_override(&self.db, scope, &scope_id, &key_name, &string_value)
                .await
                .map(scoped_pb),
        )
    }
}

#[tonic::async_trait]
impl AdminService for AdminGrpc {
    async fn authenticate(&self, request: Request<pb::AuthenticateRequest>) -> Reply<pb::Identity> {
        caller(&request)?.require_service()?;
        let secret = request.into_inner().api_key;
        let identity = identity::authenticate(&self.db, &secret)
            .await?
            .ok_or_else(|| ApiError::unauthenticated("invalid or expired API key"))?;
        Ok(Response::new(identity_pb(identity)))
    }

    async fn get_identity(&self, request: Request<pb::GetIdentityRequest>) -> Reply<pb::Identity> {
        caller(&request)?.require_service()?;
        let user = identity::find_user(&self.db, &request.get_ref().user_id).await?;
        let identity = identity::identity_of(&self.db, user, String::new()).await?;
        Ok(Response::new(identity_pb(identity)))
    }

    async fn create_user(&self, request: Request<pb::CreateUserRequest>) -> Reply<pb::User> {
        admin(&request)?;
        let pb::CreateUserRequest {
            username,
            email,
            roles,
            groups,
        } = request.into_inner();
        ok(
            identity::create_user(&self.db, &username, &email, &roles, &groups)
                .await
                .map(user_pb),
        )
    }

    async fn list_users(&self, request: Request<PageRequest>) -> Reply<pb::UserList> {
        admin(&request)?;
        let (offset, limit) = page(request.get_ref());
        ok(identity::list_users(&self.db, offset, limit)
            .await
            .map(|users| pb::UserList {
                users: users.into_iter().map(user_pb).collect(),
            }))
    }

    async fn get_current_user(&self, request: Request<Empty>) -> Reply<pb::User> {
        let me = caller(&request)?;
        let user = identity::find_user(&self.db, &me.user_id).await?;
        ok(identity::user_view(&self.db, user).await.map(user_pb))
    }

    async fn create_api_key(
        &self,
        request: Request<pb::CreateApiKeyRequest>,
    ) -> Reply<pb::CreateApiKeyResponse> {
        admin(&request)?;
        let pb::CreateApiKeyRequest {
            user_id,
            name,
            expires_in,
        } = request.into_inner();
        let (secret, key, user) =
            identity::create_key(&self.db, &user_id, &name, &expires_in).await?;
        Ok(Response::new(pb::CreateApiKeyResponse {
            secret_key: secret,
            api_key: Some(key_pb(key, user.username)),
        }))
    }

    async fn list_api_keys(&self, request: Request<PageRequest>) -> Reply<pb::ApiKeyList> {
        admin(&request)?;
        let (offset, limit) = page(request.get_ref());
        ok(identity::list_keys(&self.db, offset, limit)
            .await
            .map(|keys| pb::ApiKeyList {
                api_keys: keys.into_iter().map(|(k, u)| key_pb(k, u)).collect(),
            }))
    }

    async fn delete_api_key(&self, request: Request<pb::DeleteApiKeyRequest>) -> Reply<Empty> {
        let me = admin(&request)?;
        ok(
            identity::delete_key(&self.db, &me, &request.get_ref().key_id)
                .await
                .map(|()| Empty {}),
        )
    }

    async fn update_api_key(&self, request: Request<pb::UpdateApiKeyRequest>) -> Reply<Empty> {
        use pb::update_api_key_request::Change;
        let me = admin(&request)?;
        let pb::UpdateApiKeyRequest { key_id, change } = request.into_inner();
        let change = match change {
            Some(Change::Deactivate(true)) => identity::KeyChange::Deactivate,
            Some(Change::ExpiresIn(text)) => {
                identity::KeyChange::ExpiresIn((!text.trim().is_empty()).then_some(text))
            }
            Some(Change::InactivityDays(days)) => {
                identity::KeyChange::InactivityDays((days != 0).then_some(days))
            }
            Some(Change::Deactivate(false)) | None => {
                return Err(ApiError::bad_request("no change to the key given").into());
            }
        };
        ok(identity::update_key(&self.db, &me, &key_id, change)
            .await
            .map(|()| Empty {}))
    }

    async fn create_role(&self, request: Request<pb::CreateRoleRequest>) -> Reply<pb::Role> {
        admin(&request)?;
        let pb::CreateRoleRequest { name, description } = request.into_inner();
        ok(identity::create_role(&self.db, &name, &description)
            .await
            .map(role_pb))
    }

    async fn list_roles(&self, request: Request<Empty>) -> Reply<pb::RoleList> {
        caller(&request)?;
        ok(identity::list_roles(&self.db)
            .await
            .map(|roles| pb::RoleList {
                roles: roles.into_iter().map(role_pb).collect(),
            }))
    }

    async fn set_role_priority(
        &self,
        request: Request<pb::SetRolePriorityRequest>,
    ) -> Reply<pb::Role> {
        admin(&request)?;
        let pb::SetRolePriorityRequest { role_id, priority } = request.into_inner();
        ok(identity::set_role_priority(&self.db, &role_id, priority)
            .await
            .map(role_pb))
    }

    async fn assign_permission_to_role(
        &self,
        request: Request<pb::RolePermissionRequest>,
    ) -> Reply<Empty> {
        admin(&request)?;
        let pb::RolePermissionRequest {
            role_id,
            permission_name,
        } = request.into_inner();
        ok(
            identity::assign_permission(&self.db, &role_id, &permission_name)
                .await
                .map(|()| Empty {}),
        )
    }

    async fn remove_permission_from_role(
        &self,
        request: Request<pb::RolePermissionRequest>,
    ) -> Reply<Empty> {
        admin(&request)?;
        let pb::RolePermissionRequest {
            role_id,
            permission_name,
        } = request.into_inner();
        ok(
            identity::remove_permission(&self.db, &role_id, &permission_name)
                .await
                .map(|()| Empty {}),
        )
    }

    async fn assign_roles_to_user(&self, request: Request<pb::UserRolesRequest>) -> Reply<Empty> {
        admin(&request)?;
        let pb::UserRolesRequest {
            user_id,
            role_names,
        } = request.into_inner();
        ok(
            identity::set_user_roles(&self.db, &user_id, &role_names, true)
                .await
                .map(|()| Empty {}),
        )
    }

    async fn remove_roles_from_user(&self, request: Request<pb::UserRolesRequest>) -> Reply<Empty> {
        admin(&request)?;
        let pb::UserRolesRequest {
            user_id,
            role_names,
        } = request.into_inner();
        ok(
            identity::set_user_roles(&self.db, &user_id, &role_names, false)
                .await
                .map(|()| Empty {}),
        )
    }

    async fn get_current_user_permissions(
        &self,
        request: Request<Empty>,
    ) -> Reply<pb::PermissionList> {
        let me = caller(&request)?;
        Ok(Response::new(pb::PermissionList {
            permissions: permissions::ALL
                .iter()
                .filter(|(name, _)| me.has_permission(name))
                .map(permission_pb)
                .collect(),
        }))
    }

    async fn list_global_settings(&self, request: Request<Empty>) -> Reply<pb::GlobalSettingList> {
        let me = caller(&request)?;
        let items = settings::list_global(&self.db).await?;
        // Non-administrators see only the values marked public.
        let items = items
            .into_iter()
            .filter(|i| me.is_admin || i.is_public)
            .collect();
        Ok(Response::new(global_pb(items)))
    }

    async fn set_global_setting(
        &self,
        request: Request<pb::SetGlobalSettingRequest>,
    ) -> Reply<pb::GlobalSettingList> {
        admin(&request)?;
        let pb::SetGlobalSettingRequest {
            key_name,
            string_value,
            can_overwrite,
            is_public,
        } = request.into_inner();
        ok(
            settings::set_global(&self.db, &key_name, &string_value, can_overwrite, is_public)
                .await
                .map(global_pb),
        )
    }

    async fn set_role_setting(
        &self,
        request: Request<pb::SetScopedSettingRequest>,
    ) -> Reply<pb::ScopedSettingList> {
        self.set_override(settings::ROLE, request).await
    }

    async fn set_user_setting(
        &self,
        request: Request<pb::SetScopedSettingRequest>,
    ) -> Reply<pb::ScopedSettingList> {
        self.set_override(settings::USER, request).await
    }

    async fn list_user_settings(
        &self,
        request: Request<pb::ListUserSettingsRequest>,
    ) -> Reply<pb::ScopedSettingList> {
        let me = caller(&request)?;
        let user_id = match request.into_inner().user_id {
            id if id.is_empty() || id == me.user_id => me.user_id.clone(),
            id => {
                me.require_admin()?;
                id
            }
        };
        ok(settings::list_scoped(&self.db, settings::USER, &user_id)
            .await
            .map(scoped_pb))
    }

    async fn list_role_settings(
        &self,
        request: Request<pb::ListRoleSettingsRequest>,
    ) -> Reply<pb::ScopedSettingList> {
        admin(&request)?;
        ok(settings::list_role(&self.db, &request.get_ref().role_id)
            .await
            .map(scoped_pb))
    }

    async fn delete_global_settings(
        &self,
        request: Request<pb::DeleteSettingsRequest>,
    ) -> Reply<pb::GlobalSettingList> {
        admin(&request)?;
        let keys = request.into_inner().key_names;
        settings::delete(&self.db, settings::GLOBAL, "", &keys).await?;
        ok(settings::list_global(&self.db).await.map(global_pb))
    }

    async fn delete_role_settings(
        &self,
        request: Request<pb::DeleteSettingsRequest>,
    ) -> Reply<pb::ScopedSettingList> {
        self.delete_overrides(settings::ROLE, request).await
    }

    async fn delete_user_settings(
        &self,
        request: Request<pb::DeleteSettingsRequest>,
    ) -> Reply<pb::ScopedSettingList> {
        self.delete_overrides(settings::USER, request).await
    }

    async fn find_user(&self, request: Request<pb::FindUserRequest>) -> Reply<pb::User> {
        caller(&request)?;
        let user = identity::find_by_username(&self.db, &request.get_ref().username).await?;
        ok(identity::user_view(&self.db, user).await.map(user_pb))
    }

    async fn get_llm_spend(&self, request: Request<pb::LlmSpendRequest>) -> Reply<pb::LlmSpend> {
        let me = caller(&request)?;
        let user_id = match request.into_inner().user_id {
            id if id.is_empty() || id == me.user_id => me.user_id.clone(),
            id => {
                if !(me.is_admin || me.is_service) {
                    return Err(ApiError::forbidden("cannot read another user's spend").into());
                }
                id
            }
        };
        let spend = usage::spend(&self.db, &user_id, now()).await?;
        let guest = identity::user_roles_by_priority(&self.db, &user_id)
            .await?
            .iter()
            .any(|r| r.name.eq_ignore_ascii_case(GUEST_ROLE));
        Ok(Response::new(spend_pb(spend, guest)))
    }

    async fn resolve_settings(
        &self,
        request: Request<pb::ResolveSettingsRequest>,
    ) -> Reply<pb::ResolvedSettings> {
        let me = caller(&request)?;
        let user_id = match request.into_inner().user_id {
            id if id.is_empty() || id == me.user_id => me.user_id.clone(),
            id => {
                if !(me.is_admin || me.is_service) {
                    return Err(
                        ApiError::forbidden("cannot resolve another user's settings").into(),
                    );
                }
                id
            }
        };
        let values = settings::resolve(&self.db, &user_id).await?;
        let ttl = values
            .get("config_cache_ttl_seconds")
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(60);
        Ok(Response::new(pb::ResolvedSettings {
            values,
            cache_ttl_seconds: ttl,
        }))
    }

    async fn list_job_history(
        &self,
        request: Request<pb::ListJobHistoryRequest>,
    ) -> Reply<pb::JobHistoryPage> {
        admin_center(&request)?;
        let page = job_history::list(&self.db, &job_query(request.into_inner())?).await?;
        let (next_at, next_id) = page.next.unzip();
        Ok(Response::new(pb::JobHistoryPage {
            jobs: page.jobs.into_iter().map(job_pb).collect(),
            next_cursor_created_at: opt_to_proto(next_at),
            next_cursor_id: next_id.unwrap_or_default(),
        }))
    }

    async fn get_job_history_stats(
        &self,
        request: Request<pb::JobHistoryStatsRequest>,
    ) -> Reply<pb::JobHistoryStats> {
        admin_center(&request)?;
        let since = request
            .into_inner()
            .created_after
            .as_ref()
            .map(docchat_common::time::from_proto);
        let by_status = job_history::stats(&self.db, since).await?;
        Ok(Response::new(pb::JobHistoryStats {
            total: by_status.values().sum(),
            by_status: by_status.into_iter().collect(),
        }))
    }

    async fn list_own_jobs(&self, request: Request<Empty>) -> Reply<pb::JobHistoryPage> {
        let me = caller(&request)?;
        let query = job_history::Query {
            user_id: Some(me.user_id),
            limit: job_history::MAX_LIMIT,
            created_after: Some(now() - job_history::RETENTION),
            hide_deleted: true,
            ..Default::default()
        };
        let page = job_history::list(&self.db, &query).await?;
        Ok(Response::new(pb::JobHistoryPage {
            jobs: page.jobs.into_iter().map(job_pb).collect(),
            ..Default::default()
        }))
    }

    async fn get_own_job(
        &self,
        request: Request<pb::GetOwnJobRequest>,
    ) -> Reply<pb::JobHistoryEntry> {
        let me = caller(&request)?;
        let job = job_history::own(&self.db, &me.user_id, &request.into_inner().job_id).await?;
        Ok(Response::new(job_pb(job)))
    }

    async fn record_own_job(
        &self,
        request: Request<pb::RecordOwnJobRequest>,
    ) -> Reply<pb::JobHistoryEntry> {
        let me = caller(&request)?;
        let pb::RecordOwnJobRequest {
            kind,
            status,
            errors,
            started_at,
            collection_id,
        } = request.into_inner();
        let finished = opt_to_proto(Some(now()));
        let job = docchat_proto::events::v1::JobChanged {
            job_id: docchat_common::ids::new_id(),
            kind,
            status,
            progress: 1.0,
            errors,
            user_id: me.user_id.clone(),
            username: me.username.clone(),
            collection_id,
            collection_name: String::new(),
            created_at: started_at.or(finished),
            started_at: started_at.or(finished),
            finished_at: finished,
            canceled_by: None,
            cancel_reason: None,
            name: String::new(),
        };
        ok(job_history::record_finished(&self.db, job)
            .await
            .map(job_pb))
    }

    async fn delete_own_job(&self, request: Request<pb::GetOwnJobRequest>) -> Reply<Empty> {
        let me = caller(&request)?;
        job_history::delete_own(&self.db, &me.user_id, &request.into_inner().job_id).await?;
        Ok(Response::new(Empty {}))
    }
}
