//! The job history over real gRPC and a real bus: events in, pages and stats out.

use chrono::{Duration, Utc};
use docchat_common::bus::{envelope, topics};
use docchat_common::testing::user;
use docchat_common::time::to_proto;
use docchat_proto::admin::v1 as pb;
use docchat_proto::events::v1::JobChanged;
use tonic::Code;

use crate::{Admin, start};

fn job(id: &str, status: &str, owner: &str, created: chrono::DateTime<Utc>) -> JobChanged {
    JobChanged {
        job_id: id.into(),
        kind: "ingest_upload".into(),
        status: status.into(),
        progress: if status == "completed" { 1.0 } else { 0.0 },
        errors: vec![],
        user_id: owner.into(),
        username: format!("name-{owner}"),
        collection_id: format!("c-{owner}"),
        collection_name: "docs".into(),
        created_at: Some(to_proto(created)),
        started_at: (status != "queued").then(|| to_proto(created + Duration::seconds(1))),
        finished_at: matches!(status, "completed" | "failed")
            .then(|| to_proto(created + Duration::seconds(3))),
        canceled_by: None,
        cancel_reason: None,
        name: String::new(),
    }
}

async fn publish(admin: &Admin, j: &JobChanged, at: chrono::DateTime<Utc>) {
    let mut e = envelope(&topics::job(&j.status), &j.user_id, j);
    e.time = Some(to_proto(at));
    admin.bus.publish(&e).await.unwrap();
}

async fn list(
    admin: &Admin,
    r: pb::ListJobHistoryRequest,
) -> Result<pb::JobHistoryPage, tonic::Status> {
    let mut c = admin.client.clone();
    c.list_job_history(admin.req(&user("root", true), r))
        .await
        .map(|r| r.into_inner())
}

/// Waits until the row of `id` shows `status` (events are handled asynchronously).
async fn wait_for(admin: &Admin, id: &str, status: &str) -> pb::JobHistoryEntry {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let page = list(
            admin,
            pb::ListJobHistoryRequest {
                limit: 200,
                ..Default::default()
            },
        )
        .await
        .unwrap();
        if let Some(j) = page
            .jobs
            .into_iter()
            .find(|j| j.id == id && j.status == status)
        {
            return j;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{id} never became {status}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

docchat_common::backend_tests! {
    async fn job_history_moves_forward_only_and_pages_newest_first(backend) {
        let dir = tempfile::tempdir().unwrap();
        let admin = start(backend.config(dir.path())).await;
        let t0 = Utc::now() - Duration::minutes(30);

        // A job completes; then a late `running` and a repeated `queued` arrive.
        publish(&admin, &job("j-a", "queued", "alice", t0), t0).await;
        let mut done = job("j-a", "completed", "alice", t0);
        done.errors = vec![format!("bad page {}\n  at frame 1\n  at frame 2", "é".repeat(400))];
        publish(&admin, &done, t0 + Duration::seconds(3)).await;
        publish(&admin, &job("j-a", "running", "alice", t0), t0 + Duration::seconds(1)).await;
        publish(&admin, &job("j-a", "queued", "alice", t0), t0 + Duration::seconds(9)).await;
        // Six more jobs, one a minute apart, by bob; the marker is handled after the late ones.
        for i in 1..=6 {
            let status = if i % 2 == 0 { "failed" } else { "running" };
            let created = t0 + Duration::minutes(i);
            publish(&admin, &job(&format!("j-{i}"), status, "bob", created), created).await;
        }
        wait_for(&admin, "j-6", "failed").await;
        let a = wait_for(&admin, "j-a", "completed").await;
        assert_eq!(a.progress, 1.0, "{}", backend.name);
        assert_eq!(a.passed, 1.0);
        assert_eq!(a.errors.len(), 1);
        assert!(!a.errors[0].contains('\n') && a.errors[0].len() <= 300, "{:?}", a.errors);
        assert!(a.errors[0].starts_with("bad page é"));
        assert!((a.duration_seconds - 2.0).abs() < 1e-6, "{}", a.duration_seconds);

        // Pages of three, newest first, with the cursor of the last row; none after the last.
        let mut seen = vec![];
        let mut cursor = (None, String::new());
        let mut pages = 0;
        loop {
            let page = list(&admin, pb::ListJobHistoryRequest {
                limit: 3,
                cursor_created_at: cursor.0,
                cursor_id: cursor.1.clone(),
                ..Default::default()
            })
            .await
            .unwrap();
            pages += 1;
            seen.extend(page.jobs.iter().map(|j| j.id.clone()));
            if page.next_cursor_created_at.is_none() {
                assert!(page.next_cursor_id.is_empty());
                break;
            }
            cursor = (page.next_cursor_created_at, page.next_cursor_id);
        }
        assert_eq!(seen, ["j-6", "j-5", "j-4", "j-3", "j-2", "j-1", "j-a"], "{}", backend.name);
        assert_eq!(pages, 3);

        // Filters.
        let failed = list(&admin, pb::ListJobHistoryRequest {
            statuses: vec!["failed".into(), "completed".into()],
            user_id: "bob".into(),
            ..Default::default()
        })
        .await
        .unwrap();
        let ids: Vec<_> = failed.jobs.iter().map(|j| j.id.as_str()).collect();
        assert_eq!(ids, ["j-6", "j-4", "j-2"]);
        let by_collection = list(&admin, pb::ListJobHistoryRequest {
            collection_id: "c-alice".into(),
            kind: "ingest_upload".into(),
            ..Default::default()
        })
        .await
        .unwrap();
        assert_eq!(by_collection.jobs.len(), 1);
        let recent = list(&admin, pb::ListJobHistoryRequest {
            created_after: Some(to_proto(t0 + Duration::seconds(150))),
            ..Default::default()
        })
        .await
        .unwrap();
        assert_eq!(recent.jobs.len(), 4, "j-3..j-6");
        let bad = list(&admin, pb::ListJobHistoryRequest {
            statuses: vec!["done".into()],
            ..Default::default()
        })
        .await
        .unwrap_err();
        assert_eq!(bad.code(), Code::InvalidArgument);

        // Stats over the window.
        let mut c = admin.client.clone();
        let stats = c
            .get_job_history_stats(admin.req(&user("root", true), pb::JobHistoryStatsRequest::default()))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(stats.total, 7);
        assert_eq!(stats.by_status["failed"], 3);
        assert_eq!(stats.by_status["running"], 3);
        assert_eq!(stats.by_status["completed"], 1);
        assert_eq!(stats.by_status["queued"], 0);

        // Without the admin-center permission: 403 (PermissionDenied), for both.
        let denied = c
            .list_job_history(admin.req(&user("alice", false), Default::default()))
            .await
            .unwrap_err();
        assert_eq!(denied.code(), Code::PermissionDenied);
        let denied = c
            .get_job_history_stats(admin.req(&user("alice", false), Default::default()))
            .await
            .unwrap_err();
        assert_eq!(denied.code(), Code::PermissionDenied);

        // Older than the retention: never kept.
        let ancient = Utc::now() - Duration::days(400);
        publish(&admin, &job("j-old", "completed", "bob", ancient), ancient).await;
        let marker = Utc::now();
        publish(&admin, &job("j-marker", "queued", "bob", marker), marker).await;
        wait_for(&admin, "j-marker", "queued").await;
        let all = list(&admin, pb::ListJobHistoryRequest {
            created_after: Some(to_proto(Utc::now() - Duration::days(1000))),
            limit: 200,
            ..Default::default()
        })
        .await
        .unwrap();
        assert!(all.jobs.iter().all(|j| j.id != "j-old"));
        admin.svc.shutdown.cancel();
    }
}
