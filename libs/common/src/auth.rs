//! Caller identity between services: the gateway resolves an API key, then mints a
//! short-lived JWT for the target service (`aud`); every service verifies it in an
//! interceptor and reads the [`Caller`] from the request extensions.

use std::time::{SystemTime, UNIX_EPOCH};

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};
use tonic::metadata::MetadataValue;
use tonic::{Request, Status};

use crate::config::Service;
use crate::error::ApiError;

/// Permission names of SPEC.md and ARCHITECTURE.md §9.
pub mod permissions {
    pub const CONFIGURE_AGENTS: &str = "ConfigureAgents";
    pub const MANAGE_CUSTOM_AGENT: &str = "ManageCustomAgent";
    pub const DELETE_CUSTOM_AGENT: &str = "DeleteCustomAgent";
    pub const EDIT_EXTRACTORS: &str = "EditExtractors";
    pub const SHARE_WITH_GROUPS: &str = "ShareWithGroups";
    pub const ADMIN_CENTER: &str = "svc/display/admin_center";

    /// Every gated permission, with a description.
    pub const ALL: [(&str, &str); 6] = [
        (
            CONFIGURE_AGENTS,
            "create custom tools, inspect MCP tools, agent suggestions",
        ),
        (
            MANAGE_CUSTOM_AGENT,
            "add and update custom agents and their associations",
        ),
        (DELETE_CUSTOM_AGENT, "delete custom agents"),
        (EDIT_EXTRACTORS, "update extractors"),
        (
            SHARE_WITH_GROUPS,
            "share resources with identity-provider groups",
        ),
        (ADMIN_CENTER, "show the admin center (job history)"),
    ];
}

/// Who is calling: resolved from an API key by admin-service, carried in the internal JWT.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Caller {
    pub user_id: String,
    pub username: String,
    pub email: String,
    pub roles: Vec<String>,
    pub groups: Vec<String>,
    pub permissions: Vec<String>,
    pub is_admin: bool,
    /// A docchat component acting for itself (the gateway resolving keys), not for a user.
    #[serde(default)]
    pub is_service: bool,
}

/// A user as admin-service resolved them (an API key, or `GetIdentity` for work run as them).
impl From<docchat_proto::admin::v1::Identity> for Caller {
    fn from(identity: docchat_proto::admin::v1::Identity) -> Caller {
        Caller {
            user_id: identity.user_id,
            username: identity.username,
            email: identity.email,
            roles: identity.roles,
            groups: identity.groups,
            permissions: identity.permissions,
            is_admin: identity.is_admin,
            is_service: false,
        }
    }
}

impl Caller {
    /// The identity a component uses for its own calls (for example key resolution).
    pub fn service(name: &str) -> Caller {
        Caller {
            user_id: String::new(),
            username: format!("service:{name}"),
            email: String::new(),
            roles: Vec::new(),
            groups: Vec::new(),
            permissions: Vec::new(),
            is_admin: false,
            is_service: true,
        }
    }

    /// Administrators hold every permission.
    pub fn has_permission(&self, permission: &str) -> bool {
        self.is_admin || self.permissions.iter().any(|p| p == permission)
    }

    /// SPEC.md: a missing permission answers 401 unless stated otherwise.
    pub fn require_permission(&self, permission: &str) -> Result<(), ApiError> {
        if self.has_permission(permission) {
            Ok(())
        } else {
            Err(ApiError::unauthenticated(format!(
                "missing required permission {permission}"
            )))
        }
    }

    /// Administrator-only endpoints (configuration, identity management) answer 403.
    pub fn require_admin(&self) -> Result<(), ApiError> {
        if self.is_admin {
            Ok(())
        } else {
            Err(ApiError::forbidden("administrator privileges required"))
        }
    }

    /// Internal RPCs that only docchat components may call.
    pub fn require_service(&self) -> Result<(), ApiError> {
        if self.is_service {
            Ok(())
        } else {
            Err(ApiError::forbidden("internal call"))
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Claims {
    sub: String,
    aud: String,
    iat: u64,
    exp: u64,
    #[serde(flatten)]
    caller: Caller,
}

/// Signs and verifies internal JWTs (HS256, shared secret).
pub struct JwtKeys {
    encoding: EncodingKey,
    decoding: DecodingKey,
    ttl_seconds: u64,
}

impl std::fmt::Debug for JwtKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtKeys").finish_non_exhaustive()
    }
}

const LEEWAY_SECONDS: u64 = 5;

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl JwtKeys {
    pub fn new(secret: &SecretString, ttl_seconds: u64) -> JwtKeys {
        let bytes = secret.expose_secret().as_bytes();
        JwtKeys {
            encoding: EncodingKey::from_secret(bytes),
            decoding: DecodingKey::from_secret(bytes),
            ttl_seconds,
        }
    }

    /// Keys from the config; fails when the secret is missing.
    pub fn from_config(config: &crate::Config) -> anyhow::Result<JwtKeys> {
        let secret = config.internal_jwt_secret.as_ref().ok_or_else(|| {
            anyhow::anyhow!("DOCCHAT_INTERNAL_JWT_SECRET is required when services run apart")
        })?;
        Ok(JwtKeys::new(secret, config.internal_jwt_ttl_seconds))
    }

    /// Lifetime of minted tokens.
    pub fn ttl_seconds(&self) -> u64 {
        self.ttl_seconds
    }

    /// Mints a token that only `audience` accepts.
    pub fn mint(&self, caller: &Caller, audience: Service) -> Result<String, ApiError> {
        let iat = unix_now();
        let claims = Claims {
            sub: caller.user_id.clone(),
            aud: audience.name().to_owned(),
            iat,
            exp: iat + self.ttl_seconds,
            caller: caller.clone(),
        };
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &self.encoding)
            .map_err(|e| ApiError::internal("minting internal token", e))
    }

    /// Verifies signature, expiry and audience.
    pub fn verify(&self, token: &str, audience: Service) -> Result<Caller, ApiError> {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_audience(&[audience.name()]);
        validation.leeway = LEEWAY_SECONDS;
        validation.set_required_spec_claims(&["exp", "aud", "sub"]);
        jsonwebtoken::decode::<Claims>(token, &self.decoding, &validation)
            .map(|data| data.claims.caller)
            .map_err(|e| ApiError::unauthenticated(format!("invalid internal token: {e}")))
    }
}

/// Server side: a tonic interceptor that admits only requests with a valid token for this
/// service and stores the [`Caller`] in the request extensions. Health is served outside it.
#[derive(Clone)]
pub struct AuthInterceptor {
    keys: std::sync::Arc<JwtKeys>,
    audience: Service,
}

impl AuthInterceptor {
    pub fn new(keys: std::sync::Arc<JwtKeys>, audience: Service) -> Self {
        AuthInterceptor { keys, audience }
    }
}

impl tonic::service::Interceptor for AuthInterceptor {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        let token = request
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .ok_or_else(|| Status::from(ApiError::unauthenticated("missing internal token")))?;
        let caller = self
            .keys
            .verify(token, self.audience)
            .map_err(Status::from)?;
        request.extensions_mut().insert(caller);
        Ok(request)
    }
}

/// The caller of a request that passed [`AuthInterceptor`].
pub fn caller<T>(request: &Request<T>) -> Result<Caller, Status> {
    request
        .extensions()
        .get::<Caller>()
        .cloned()
        .ok_or_else(|| Status::from(ApiError::unauthenticated("no caller")))
}

/// Client side: a request to `audience` on behalf of `caller`, with a fresh token and the
/// current trace context.
pub fn authorized<T>(
    keys: &JwtKeys,
    caller: &Caller,
    audience: Service,
    message: T,
) -> Result<Request<T>, ApiError> {
    let token = keys.mint(caller, audience)?;
    let mut request = Request::new(message);
    let value = MetadataValue::try_from(format!("Bearer {token}"))
        .map_err(|e| ApiError::internal("building authorization metadata", e))?;
    request.metadata_mut().insert("authorization", value);
    crate::telemetry::inject_grpc(request.metadata_mut());
    Ok(request)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::service::Interceptor;

    fn keys() -> JwtKeys {
        JwtKeys::new(&SecretString::from("0123456789abcdef0123456789abcdef"), 60)
    }

    fn alice() -> Caller {
        Caller {
            user_id: "u1".into(),
            username: "alice".into(),
            email: "alice@example.com".into(),
            roles: vec!["user".into()],
            groups: vec!["g1".into()],
            permissions: vec![permissions::EDIT_EXTRACTORS.into()],
            is_admin: false,
            is_service: false,
        }
    }

    #[test]
    fn token_round_trip_and_audience_checked() {
        let keys = keys();
        let token = keys.mint(&alice(), Service::Chat).unwrap();
        assert_eq!(keys.verify(&token, Service::Chat).unwrap(), alice());
        let err = keys.verify(&token, Service::Admin).unwrap_err();
        assert_eq!(err.code.http_status(), 401);
    }

    #[test]
    fn other_secret_rejected() {
        let token = keys().mint(&alice(), Service::Chat).unwrap();
        let other = JwtKeys::new(&SecretString::from("another-secret-0123456789"), 60);
        assert!(other.verify(&token, Service::Chat).is_err());
    }

    #[test]
    fn expired_token_rejected() {
        let keys = keys();
        let claims = Claims {
            sub: "u1".into(),
            aud: "chat".into(),
            iat: 1,
            exp: 2,
            caller: alice(),
        };
        let token =
            jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &keys.encoding).unwrap();
        assert!(keys.verify(&token, Service::Chat).is_err());
    }

    #[test]
    fn permission_helpers_use_spec_statuses() {
        let a = alice();
        assert!(a.require_permission(permissions::EDIT_EXTRACTORS).is_ok());
        let missing = a
            .require_permission(permissions::CONFIGURE_AGENTS)
            .unwrap_err();
        assert_eq!(missing.code.http_status(), 401);
        assert_eq!(a.require_admin().unwrap_err().code.http_status(), 403);
        let admin = Caller {
            is_admin: true,
            ..alice()
        };
        assert!(admin.require_permission(permissions::ADMIN_CENTER).is_ok());
        assert!(admin.require_service().is_err());
    }

    #[test]
    fn interceptor_admits_only_valid_tokens() {
        let keys = std::sync::Arc::new(keys());
        let mut interceptor = AuthInterceptor::new(keys.clone(), Service::Ingest);
        let ok = authorized(&keys, &alice(), Service::Ingest, ()).unwrap();
        let passed = interceptor.call(ok).unwrap();
        assert_eq!(caller(&passed).unwrap(), alice());

        assert!(interceptor.call(Request::new(())).is_err());
        let wrong_aud = authorized(&keys, &alice(), Service::Chat, ()).unwrap();
        assert_eq!(
            interceptor.call(wrong_aud).unwrap_err().code(),
            tonic::Code::Unauthenticated
        );
    }
}
