//! The OpenAPI document (`/api-spec.yaml`): the routes' own `#[utoipa::path]` declarations,
//! registered with their handlers, plus what every route of a kind answers (a refused key, an
//! unreadable or oversized body) added here once instead of on each handler.

use utoipa::openapi::path::{Operation, ParameterIn};
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::openapi::{ContentBuilder, Ref, RefOr, ResponseBuilder};
use utoipa::{Modify, OpenApi};

#[derive(OpenApi)]
#[openapi(
    info(title = "docchat", description = "Document-Chat and Agent service: the REST interface of SPEC.md."),
    modifiers(&BearerAuth)
)]
pub struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        );
    }
}

/// Completes the document of the registered routes (run once they are all in it).
pub fn complete(openapi: &mut utoipa::openapi::OpenApi) {
    CommonResponses.modify(openapi);
}

/// Statuses every operation of a kind answers, in the error shape of its API: 401 with a
/// key requirement, 400 and 413 with a JSON body, 400 with typed query parameters.
struct CommonResponses;

impl CommonResponses {
    fn add(operation: &mut Operation, status: &str, description: &str, body: &str) {
        operation
            .responses
            .responses
            .entry(status.to_owned())
            .or_insert_with(|| {
                RefOr::T(
                    ResponseBuilder::new()
                        .description(description)
                        .content(
                            "application/json",
                            ContentBuilder::new()
                                .schema(Some(Ref::from_schema_name(body)))
                                .build(),
                        )
                        .build(),
                )
            });
    }

    fn operation(path: &str, operation: &mut Operation) {
        let body = if path.starts_with("/compat_api/") {
            "CompatErrorBody"
        } else {
            "ErrorBody"
        };
        if operation.security.as_ref().is_some_and(|s| !s.is_empty()) {
            Self::add(
                operation,
                "401",
                "missing, malformed or unknown API key",
                body,
            );
        }
        let json_body = operation
            .request_body
            .as_ref()
            .is_some_and(|b| b.content.contains_key("application/json"));
        if json_body {
            Self::add(
                operation,
                "400",
                "the body is not valid JSON of this request's shape",
                body,
            );
            Self::add(
                operation,
                "413",
                "the body is larger than the server accepts",
                body,
            );
        }
        let typed_query = operation
            .parameters
            .iter()
            .flatten()
            .any(|p| matches!(p.parameter_in, ParameterIn::Query));
        if typed_query {
            Self::add(
                operation,
                "400",
                "a query parameter is not of its type or range",
                body,
            );
        }
    }
}

impl Modify for CommonResponses {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        for (path, item) in openapi.paths.paths.iter_mut() {
            for operation in [
                &mut item.get,
                &mut item.put,
                &mut item.post,
                &mut item.delete,
                &mut item.patch,
            ]
            .into_iter()
            .flatten()
            {
                Self::operation(path, operation);
            }
        }
    }
}
