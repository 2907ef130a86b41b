//! Agent runs hold leases while they run: a run that ends gives its lease back with its end
//! event; a run whose replica died (its lease lapsed) is reaped as a `stale` job by any
//! replica, once, and a renewed lease is not reaped.

use std::sync::Arc;
use std::time::Duration;

use docchat_agent_service::jobs::RunJobs;
use docchat_agent_service::run_leases::{LAPSED, Leases};
use docchat_common::Caller;
use docchat_common::bus::memory::InProcessBus;
use docchat_common::outbox::{OutboxRelay, entity as outbox};
use docchat_proto::agent::v1 as pb;
use docchat_proto::events::v1::{Envelope, JobChanged};
use prost::Message;
use sea_orm::{ConnectionTrait, DatabaseConnection, EntityTrait, QueryOrder, Statement};

fn caller(name: &str) -> Caller {
    Caller {
        user_id: format!("{name}-id"),
        username: name.into(),
        email: String::new(),
        roles: Vec::new(),
        groups: Vec::new(),
        permissions: Vec::new(),
        is_admin: false,
        is_service: false,
    }
}

/// The job events in the outbox, oldest first: (routing key, job).
async fn events(db: &DatabaseConnection) -> Vec<(String, JobChanged)> {
    outbox::Entity::find()
        .order_by_asc(outbox::Column::Seq)
        .all(db)
        .await
        .unwrap()
        .into_iter()
        .map(|row| {
            let envelope = Envelope::decode(row.envelope.as_slice()).unwrap();
            (
                row.routing_key,
                JobChanged::decode(envelope.payload.as_slice()).unwrap(),
            )
        })
        .collect()
}

async fn leases(db: &DatabaseConnection) -> Vec<String> {
    db.query_all(Statement::from_string(
        db.get_database_backend(),
        "SELECT job_id FROM run_leases ORDER BY job_id",
    ))
    .await
    .unwrap()
    .iter()
    .map(|r| r.try_get::<String>("", "job_id").unwrap())
    .collect()
}

async fn lapse(db: &DatabaseConnection, job_id: &str) {
    let backend = db.get_database_backend();
    let sql = match backend {
        sea_orm::DbBackend::Postgres => "UPDATE run_leases SET lease_until = $1 WHERE job_id = $2",
        _ => "UPDATE run_leases SET lease_until = ? WHERE job_id = ?",
    };
    let past = chrono::Utc::now() - chrono::Duration::minutes(5);
    db.execute(Statement::from_sql_and_values(
        backend,
        sql,
        vec![past.into(), job_id.into()],
    ))
    .await
    .unwrap();
}

docchat_common::backend_tests! {
    async fn a_run_whose_replica_died_ends_stale_once(backend) {
        let dir = tempfile::tempdir().unwrap();
        let db = docchat_common::db::connect(&backend.database_url(dir.path(), "agent")).await.unwrap();
        docchat_common::db::migrate::<docchat_agent_service::migrations::Migrator>(&db, "agent").await.unwrap();
        // No relay runs: the events stay in the outbox for the test to read.
        let relay = OutboxRelay::new(docchat_common::config::Service::Agent, db.clone(), Arc::new(InProcessBus::new()));
        let dead = RunJobs { db: db.clone(), relay: relay.clone(), leases: Leases::new("dead", Duration::from_secs(30)) };
        let alive = RunJobs { db: db.clone(), relay: relay.clone(), leases: Leases::new("alive", Duration::from_secs(30)) };

        let ended = alive.started(&caller("alice"), "c1").await;
        alive.finished(ended.clone(), &pb::RunFinished::default()).await;
        let lost = dead.started(&caller("alice"), "c1").await;
        let running = alive.started(&caller("bob"), "").await;
        assert_eq!(leases(&db).await.len(), 2, "{}: the ended run gave its lease back", backend.name);

        // Nothing lapsed yet: nothing is reaped.
        assert_eq!(alive.leases.reap(&db, &relay).await.unwrap(), 0, "{}", backend.name);
        // The dead replica's run lapses; bob's stays renewed.
        lapse(&db, &lost.job_id).await;
        assert_eq!(alive.leases.reap(&db, &relay).await.unwrap(), 1, "{}", backend.name);
        assert_eq!(alive.leases.reap(&db, &relay).await.unwrap(), 0, "{}: reaped once", backend.name);
        assert_eq!(leases(&db).await, vec![running.job_id.clone()]);

        let all = events(&db).await;
        let stale: Vec<&JobChanged> = all.iter().filter(|(_, j)| j.job_id == lost.job_id && j.status == "stale").map(|(_, j)| j).collect();
        assert_eq!(stale.len(), 1, "{}: {all:?}", backend.name);
        let job = stale[0];
        assert_eq!((job.kind.as_str(), job.user_id.as_str(), job.username.as_str(), job.collection_id.as_str()), ("agent_run", "alice-id", "alice", "c1"));
        assert_eq!(job.errors, vec![LAPSED.to_owned()]);
        assert!(job.finished_at.is_some());
        assert!(all.iter().any(|(key, j)| key == "job.stale" && j.job_id == lost.job_id));
        assert!(all.iter().any(|(_, j)| j.job_id == ended.job_id && j.status == "completed"));
        assert!(!all.iter().any(|(_, j)| j.job_id == running.job_id && j.status != "running"), "{}: bob's run is untouched", backend.name);
    }
}
