//! What the engine's tests share: a stack (admin, ingest, chat on a scripted model), scheduler
//! replicas on it, task rows written straight into the scheduler's store (the CRUD RPCs are
//! another piece) and polling.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use docchat_common::Caller;
use docchat_common::config::{Config, Service};
use docchat_common::grpc::{Background, ServiceContext};
use docchat_common::outbox::OutboxRelay;
use docchat_common::testing::{Backend, Spawned, bind, user};
use docchat_proto::admin::v1::CreateUserRequest;
use docchat_proto::admin::v1::admin_service_client::AdminServiceClient;
use docchat_scheduler_service::engine::Engine;
use docchat_scheduler_service::entities::{
    scheduled_tasks as tasks, task_executions as executions,
};
use docchat_test_stack::Stack;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder,
};

/// A stack whose chat-service answers with the model at `upstream`.
pub async fn stack(backend: &Backend, upstream: &str) -> Stack {
    Stack::builder(backend)
        .ingest()
        .chat_replicas(1)
        .scripted_model(upstream)
        .start()
        .await
}

/// The context of one more scheduler replica: fast ticks, a 2 s lease, then `tweak`.
pub fn scheduler_context(
    stack: &Stack,
    url: &str,
    tweak: impl FnOnce(&mut Config),
) -> ServiceContext {
    let mut config = stack.config.clone();
    config.scheduler_url = url.to_owned();
    config.scheduler_tick_ms = 100;
    config.scheduler_lease_seconds = 2;
    tweak(&mut config);
    let bus = if config.amqp_url.is_some() {
        docchat_common::bus::from_config(&config)
    } else {
        stack.ctx.bus.clone()
    };
    ServiceContext {
        config: Arc::new(config),
        bus,
        keys: stack.keys.clone(),
        standalone: true,
    }
}

/// An engine on `db` in this process (not started: no claims, no leases) with its outbox
/// relay running, for tests that drive it directly (trigger, cancel, delete).
pub fn engine_on(stack: &Stack, db: &DatabaseConnection) -> (Engine, Background) {
    let ctx = scheduler_context(stack, &stack.config.scheduler_url, |_| {});
    let background = Background::new();
    let relay = OutboxRelay::new(Service::Scheduler, db.clone(), ctx.bus.clone());
    background
        .tracker
        .spawn(relay.clone().run(background.token.clone()));
    let engine = Engine::new(&ctx, db.clone(), relay, &background).unwrap();
    (engine, background)
}

/// Starts a scheduler replica on the stack.
pub async fn scheduler(stack: &Stack, tweak: impl FnOnce(&mut Config)) -> Spawned {
    let (listener, url) = bind().await;
    let ctx = scheduler_context(stack, &url, tweak);
    Spawned::start(ctx, listener, url, docchat_scheduler_service::serve)
        .await
        .unwrap_or_else(|e| {
            panic!(
                "scheduler-service did not start on {}: {e:#}",
                stack.backend
            )
        })
}

/// The scheduler's store (migrated: a replica has started, or `migrate` ran).
pub async fn store(stack: &Stack) -> DatabaseConnection {
    let db = stack.database(Service::Scheduler).await;
    docchat_common::db::migrate::<docchat_scheduler_service::migrations::Migrator>(
        &db,
        "scheduler",
    )
    .await
    .unwrap();
    db
}

/// A user admin-service knows (GetIdentity finds them), as a caller.
pub async fn owner(stack: &Stack, name: &str) -> Caller {
    let root = user("root", true);
    let created = AdminServiceClient::new(stack.admin().channel())
        .create_user(stack.req(
            Service::Admin,
            &root,
            CreateUserRequest {
                username: name.into(),
                email: format!("{name}@example.com"),
                roles: Vec::new(),
                groups: Vec::new(),
            },
        ))
        .await
        .unwrap()
        .into_inner();
    Caller {
        user_id: created.id,
        username: created.username,
        email: created.email,
        roles: created.roles,
        groups: created.groups,
        permissions: Vec::new(),
        is_admin: false,
        is_service: false,
    }
}

/// `t` to whole microseconds.
pub fn micros(t: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp_micros(t.timestamp_micros()).unwrap()
}

/// A task of `owner` due at `due`, as the CRUD piece would store it; change fields with `tweak`.
pub async fn task(
    db: &DatabaseConnection,
    owner: &Caller,
    name: &str,
    schedule: (&str, &str),
    config: serde_json::Value,
    due: DateTime<Utc>,
    tweak: impl FnOnce(&mut tasks::Model),
) -> tasks::Model {
    // Both databases keep microseconds: the row as stored.
    let now = micros(Utc::now());
    let due = micros(due);
    let mut t = tasks::Model {
        id: docchat_common::ids::new_id(),
        user_id: owner.user_id.clone(),
        username: owner.username.clone(),
        name: name.into(),
        description: String::new(),
        schedule_type: schedule.0.into(),
        schedule_expression: schedule.1.into(),
        task_type: "chat_completion".into(),
        collection_id: config
            .get("collection_id")
            .and_then(|c| c.as_str())
            .unwrap_or("")
            .to_owned(),
        task_config: config.to_string(),
        status: "active".into(),
        execution_status: "idle".into(),
        last_execution_at: None,
        next_execution_at: Some(due),
        execution_count: 0,
        max_executions: None,
        expires_at: None,
        notification_email: String::new(),
        created_at: now,
        updated_at: now,
    };
    tweak(&mut t);
    tasks::ActiveModel::from(t.clone())
        .insert(db)
        .await
        .unwrap();
    t
}

pub async fn task_row(db: &DatabaseConnection, id: &str) -> tasks::Model {
    tasks::Entity::find_by_id(id.to_owned())
        .one(db)
        .await
        .unwrap()
        .expect("the task exists")
}

/// A task's executions, oldest due time first.
pub async fn executions_of(db: &DatabaseConnection, task_id: &str) -> Vec<executions::Model> {
    executions::Entity::find()
        .filter(executions::Column::TaskId.eq(task_id))
        .order_by_asc(executions::Column::ScheduledFor)
        .all(db)
        .await
        .unwrap()
}

/// Polls `check` until it gives a value, failing after `secs` seconds with `what`.
pub async fn until<T, F, Fut>(secs: u64, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not within {secs} s: {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The task's executions once `n` of them ended (none running).
pub async fn ended(db: &DatabaseConnection, task_id: &str, n: usize) -> Vec<executions::Model> {
    until(
        60,
        &format!("{n} executions of {task_id} ended"),
        || async {
            let all = executions_of(db, task_id).await;
            (all.len() >= n && all.iter().all(|e| e.status != "running")).then_some(all)
        },
    )
    .await
}

/// Makes a task due now (a test that need not wait for its next time).
pub async fn bring_forward(db: &DatabaseConnection, task_id: &str) {
    tasks::Entity::update_many()
        .col_expr(
            tasks::Column::NextExecutionAt,
            sea_orm::sea_query::Expr::value(Some(Utc::now())),
        )
        .filter(tasks::Column::Id.eq(task_id))
        .exec(db)
        .await
        .unwrap();
}

/// Waits until this process's replicas have counted `n` executions with `labels` (the
/// counter moves just after the row that `ended` reads), and no more.
pub async fn counted(labels: &[(&str, &str)], n: f64) {
    let name = "docchat_scheduler_executions_total";
    until(
        5,
        &format!("{n} executions counted as {labels:?}"),
        || async { (docchat_common::metrics::sample(name, labels) >= n).then_some(()) },
    )
    .await;
    assert_eq!(
        docchat_common::metrics::sample(name, labels),
        n,
        "{labels:?}"
    );
}
