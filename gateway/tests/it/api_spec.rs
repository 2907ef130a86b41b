//! `/api-spec.yaml` describes exactly what is served: every operation it lists is routed,
//! and every endpoint of SPEC.md (plus the client's `/rpc/meta`) that the server answers is
//! in it, with its statuses.

use std::collections::BTreeSet;

use docchat_common::testing::Backend;
use reqwest::Method;
use serde_json::Value;

use crate::harness::{ADMIN_KEY, Stack, read};

/// Every endpoint table row of SPEC.md, and the routes the h2oGPTe client needs beyond it.
const SPEC_ROUTES: &[(&str, &str)] = &[
    ("GET", "/rpc/health/readiness"),
    ("GET", "/rpc/health/liveness"),
    ("GET", "/api/v1/models"),
    ("POST", "/api/v1/collections"),
    ("GET", "/api/v1/collections"),
    ("GET", "/api/v1/collections/{id}"),
    ("DELETE", "/api/v1/collections/{id}"),
    ("PUT", "/api/v1/uploads"),
    ("POST", "/api/v1/uploads/{upload_id}/ingest"),
    ("GET", "/api/v1/documents"),
    ("GET", "/api/v1/documents/count"),
    ("GET", "/api/v1/documents/{document_id}/audio_timestamps"),
    ("POST", "/api/v1/chats"),
    ("GET", "/api/v1/chats"),
    ("GET", "/api/v1/chats/{id}"),
    ("DELETE", "/api/v1/chats/{id}"),
    ("GET", "/api/v1/chats/{id}/messages"),
    ("GET", "/api/v1/chats/count"),
    ("PATCH", "/api/v1/chats/{id}"),
    ("PUT", "/api/v1/chats/{id}/collection"),
    ("DELETE", "/api/v1/chats/{id}/collection"),
    ("GET", "/api/v1/collections/{id}/chats"),
    ("GET", "/api/v1/collections/{id}/chats/count"),
    ("GET", "/api/v1/documents/{document_id}/chats"),
    ("DELETE", "/api/v1/messages/{message_ids}"),
    ("GET", "/api/v1/chats/{id}/questions"),
    ("POST", "/api/v1/messages/{question_id}/pause"),
    ("POST", "/api/v1/messages/{question_id}/resume"),
    ("POST", "/api/v1/messages/{question_id}/stop"),
    ("POST", "/api/v1/messages/{question_id}/finish"),
    ("GET", "/api/v1/messages/{message_id}/meta"),
    ("GET", "/api/v1/messages/{message_id}/references"),
    ("GET", "/api/v1/chats/{session_id}/agent_server_files"),
    ("DELETE", "/api/v1/chats/{session_id}/agent_server_files"),
    (
        "DELETE",
        "/api/v1/chats/{session_ids}/agent_server_directories",
    ),
    (
        "GET",
        "/api/v1/chats/{session_id}/agent_server_directories/stats",
    ),
    (
        "GET",
        "/api/v1/chats/{session_id}/agent_server_directories/{dir_name}/stats",
    ),
    ("GET", "/api/v1/agents/directory_stats"),
    ("GET", "/file?id=x&name=y"),
    ("GET", "/api/v1/agents/tools"),
    ("GET", "/api/v1/agents/tool_preference"),
    ("GET", "/api/v1/agents/custom_tools"),
    ("GET", "/api/v1/agents/custom_tools/{tool_id}"),
    ("PUT", "/api/v1/agents/custom_tools/{tool_id}"),
    ("DELETE", "/api/v1/agents/custom_tools/{tool_ids}"),
    ("GET", "/api/v1/agents/custom_tools/{tool_id}/download"),
    ("GET", "/api/v1/agents/custom_agents"),
    ("GET", "/api/v1/agents/custom_agents/{agent_id}"),
    ("PUT", "/api/v1/agents/custom_agents/{agent_id}"),
    ("DELETE", "/api/v1/agents/custom_agents/{agent_ids}"),
    ("GET", "/api/v1/agents"),
    ("GET", "/api/v1/agents/custom_agents/{agent_id}/suggestions"),
    ("GET", "/api/v1/agents/custom_agent_tool_associations"),
    ("POST", "/api/v1/agents/custom_agent_tool_associations"),
    (
        "DELETE",
        "/api/v1/agents/custom_agent_tool_associations/{association_ids}",
    ),
    ("GET", "/api/v1/agents/custom_agent_key_associations"),
    ("POST", "/api/v1/agents/custom_agent_key_associations"),
    (
        "DELETE",
        "/api/v1/agents/custom_agent_key_associations/{association_ids}",
    ),
    ("POST", "/api/v1/memory_blocks"),
    ("GET", "/api/v1/memory_blocks"),
    ("GET", "/api/v1/memory_blocks/{id}"),
    ("PUT", "/api/v1/memory_blocks/{id}"),
    ("DELETE", "/api/v1/memory_blocks/{id}"),
    ("PUT", "/api/v1/memory_blocks/{id}/permissions/{username}"),
    (
        "DELETE",
        "/api/v1/memory_blocks/{id}/permissions/{username}",
    ),
    ("GET", "/api/v1/memory_blocks/{id}/permissions"),
    (
        "PUT",
        "/api/v1/memory_blocks/{id}/group_permissions/{group_id}",
    ),
    (
        "DELETE",
        "/api/v1/memory_blocks/{id}/group_permissions/{group_id}",
    ),
    ("GET", "/api/v1/memory_blocks/{id}/group_permissions"),
    ("PUT", "/api/v1/memory_blocks/{id}/privacy"),
    ("GET", "/api/v1/memory_blocks/{id}/public_permissions"),
    ("GET", "/api/v1/users/current/default_memory_blocks"),
    ("PUT", "/api/v1/users/current/default_memory_blocks"),
    ("GET", "/api/v1/scheduled_tasks"),
    ("GET", "/api/v1/scheduled_tasks/{id}"),
    ("PUT", "/api/v1/scheduled_tasks/{id}"),
    ("DELETE", "/api/v1/scheduled_tasks/{id}"),
    ("POST", "/api/v1/scheduled_tasks/batch_delete"),
    ("POST", "/api/v1/scheduled_tasks/{id}/trigger"),
    ("GET", "/api/v1/scheduled_tasks/{task_id}/executions"),
    ("GET", "/api/v1/scheduled_tasks/executions"),
    ("GET", "/api/v1/scheduled_tasks/summary"),
    ("GET", "/api/v1/admin/jobs"),
    ("GET", "/api/v1/admin/jobs/stats"),
    ("POST", "/compat_api/v1/chat/completions"),
    ("POST", "/compat_api/v1/responses"),
    ("GET", "/compat_api/v1/models"),
    ("GET", "/rpc/meta"),
    ("PUT", "/rpc/fs"),
    ("GET", "/rpc/fs"),
    ("DELETE", "/rpc/fs"),
];

/// A concrete path for a template: ids become the nil UUID (a 404 of the resource, never
/// of the route).
fn concrete(template: &str) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let end = rest[start..]
            .find('}')
            .map_or(rest.len(), |e| start + e + 1);
        out.push_str(match &rest[start..end] {
            "{action}" => "stop",
            _ => "00000000-0000-0000-0000-000000000000",
        });
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// Whether the answer is the fallback for a path or method nothing is routed to.
fn unrouted(status: u16, body: &Value) -> bool {
    status == 404
        && (body["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("no route for"))
            || body["error"]["code"] == "unknown_url")
}

/// Whether a documented path template stands for a SPEC.md one (parameter names differ,
/// and a documented `{action}` covers SPEC.md's `pause`, `stop` …).
fn covers(documented: &str, spec: &str) -> bool {
    let param = |s: &str| s.starts_with('{');
    let (d, s): (Vec<_>, Vec<_>) = (documented.split('/').collect(), spec.split('/').collect());
    d.len() == s.len()
        && d.iter()
            .zip(&s)
            .all(|(d, s)| d == s || (param(d) && (param(s) || !s.is_empty())))
}

async fn answers(app: &Stack, method: &str, template: &str) -> bool {
    let method = Method::from_bytes(method.as_bytes()).unwrap();
    let response = app
        .http(method.clone(), &concrete(template), Some(ADMIN_KEY))
        .send()
        .await
        .unwrap();
    let (status, body) = read(response).await;
    assert!(status < 500, "{method} {template}: {status} {body}");
    !unrouted(status, &body)
}

#[tokio::test]
async fn the_api_spec_lists_every_routed_endpoint_and_only_those() {
    let app = Stack::docchat(&Backend::sqlite()).await;
    let text = app
        .http(Method::GET, "/api-spec.yaml", None)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let doc: Value = serde_yaml::from_str(&text).unwrap();
    let mut documented = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            let method = method.to_uppercase();
            let responses = operation["responses"].as_object().unwrap();
            // A route behind a key says so, and says what a refused key gets.
            assert!(
                operation["security"].is_array() && responses.contains_key("401"),
                "{method} {path} documents no key requirement or 401"
            );
            documented.insert((method, path.clone()));
        }
    }
    for (method, path) in &documented {
        assert!(
            answers(&app, method, path).await,
            "{method} {path} is documented but not routed"
        );
    }
    let mut undocumented = Vec::new();
    for (method, route) in SPEC_ROUTES {
        let path = route.split('?').next().unwrap();
        if answers(&app, method, route).await
            && !documented
                .iter()
                .any(|(m, d)| m == method && covers(d, path))
        {
            undocumented.push(format!("{method} {path}"));
        }
    }
    assert!(
        undocumented.is_empty(),
        "routed but missing from /api-spec.yaml: {undocumented:?}"
    );
    // The compat API, /file and /rpc/meta are among them (they once were not).
    for (method, path) in [
        ("POST", "/compat_api/v1/chat/completions"),
        ("POST", "/compat_api/v1/responses"),
        ("GET", "/compat_api/v1/models"),
        ("GET", "/file"),
        ("GET", "/rpc/meta"),
    ] {
        assert!(
            documented.contains(&(method.to_owned(), path.to_owned())),
            "{method} {path} is not documented"
        );
    }
    app.stop().await;
}

/// Two gateway types of one schema name overwrite each other in the published document (a
/// `{count}` route was documented as `{deleted_count}` that way): every `ToSchema` type has a
/// name of its own, or says which with `#[schema(as = ...)]`.
#[test]
fn every_schema_name_is_one_type() {
    fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    let mut seen: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        for (i, line) in lines.iter().enumerate() {
            if !(line.starts_with("#[derive(") && line.contains("ToSchema")) {
                continue;
            }
            let rest = &lines[i + 1..];
            let Some(decl) = rest
                .iter()
                .position(|l| l.starts_with("pub struct ") || l.starts_with("pub enum "))
            else {
                continue;
            };
            if rest[..decl].iter().any(|l| l.contains("schema(as")) {
                continue;
            }
            let name = rest[decl]
                .split_whitespace()
                .nth(2)
                .unwrap()
                .split(['<', '{', '(', ';'])
                .next()
                .unwrap()
                .to_owned();
            seen.entry(name).or_default().push(f.display().to_string());
        }
    }
    let twice: Vec<_> = seen.into_iter().filter(|(_, fs)| fs.len() > 1).collect();
    assert!(
        twice.is_empty(),
        "schema names used by several types: {twice:?}"
    );
}
