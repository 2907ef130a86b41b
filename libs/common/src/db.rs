//! Database connections for SQLite (standalone) and PostgreSQL (distributed), and
//! migrations run at start.

use std::time::Duration;

use sea_orm::{
    ConnectOptions, ConnectionTrait, Database, DatabaseConnection, DatabaseTransaction, DbBackend,
    DbErr, Statement, TransactionTrait,
};
use sea_orm_migration::MigratorTrait;

/// `postgres://h/docchat` + `admin` → `postgres://h/docchat_admin` (query string kept).
pub fn with_database_suffix(url: &str, suffix: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let (server, db) = match base.rsplit_once('/') {
        Some((server, db)) if server.contains("//") && !server.ends_with('/') => (server, db),
        _ => (base.trim_end_matches('/'), "docchat"),
    };
    let db = if db.is_empty() { "docchat" } else { db };
    let mut out = format!("{server}/{db}_{suffix}");
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    out
}

fn split_database(url: &str) -> Option<(String, String, String)> {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, format!("?{q}")),
        None => (url, String::new()),
    };
    let (server, db) = base.rsplit_once('/')?;
    if !server.contains("//") || db.is_empty() {
        return None;
    }
    Some((server.to_owned(), db.to_owned(), query))
}

/// Creates the PostgreSQL database named in `url` when it does not exist yet.
async fn ensure_postgres_database(url: &str) -> anyhow::Result<()> {
    let Some((server, db, query)) = split_database(url) else {
        return Ok(());
    };
    if !db
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        anyhow::bail!("database name {db:?} must be alphanumeric, '_' or '-'");
    }
    let mut opts = ConnectOptions::new(format!("{server}/postgres{query}"));
    opts.max_connections(1).sqlx_logging(false);
    let admin = Database::connect(opts).await?;
    let exists = admin
        .query_one(Statement::from_sql_and_values(
            DbBackend::Postgres,
            "SELECT 1 FROM pg_database WHERE datname = $1",
            [db.clone().into()],
        ))
        .await?
        .is_some();
    if !exists {
        let create = admin
            .execute_unprepared(&format!("CREATE DATABASE \"{db}\""))
            .await;
        // Two replicas starting together: the loser sees "already exists" (42P04).
        if let Err(e) = create
            && !e.to_string().contains("already exists")
        {
            return Err(e.into());
        }
        tracing::info!(database = %db, "created database");
    }
    admin.close().await?;
    Ok(())
}

/// Connects to `url` (sqlite:// or postgres://), creating the database or file if needed.
///
/// A SQLite file gets one connection, so the process's statements and transactions take
/// turns: SQLite runs one writer at a time anyway, and with several connections a
/// transaction that reads before it writes fails at once with SQLITE_BUSY ("database is
/// locked") when another connection writes or has committed since its read — the busy
/// timeout does not cover that upgrade. One connection queues every write behind the one
/// in progress (for up to the pool's acquire timeout) instead. PostgreSQL gets a pool.
pub async fn connect(url: &str) -> anyhow::Result<DatabaseConnection> {
    let mut opts = ConnectOptions::new(url.to_owned());
    opts.sqlx_logging(false)
        .connect_timeout(Duration::from_secs(10))
        .acquire_timeout(Duration::from_secs(30));
    if url.starts_with("sqlite:") {
        if let Some(path) = url
            .strip_prefix("sqlite://")
            .map(|p| p.split('?').next().unwrap_or(p))
            && let Some(parent) = std::path::Path::new(path).parent()
            && !parent.as_os_str().is_empty()
        {
            std::fs::create_dir_all(parent)?;
        }
        // A local file has no connection to lose: skip the ping sqlx makes before every
        // acquire (a round trip through the connection's worker thread). Waiting writers
        // queue for the connection (acquire timeout); the busy timeout covers other
        // processes on the same file (a `migrate` run, a test reading beside the service).
        opts.max_connections(1)
            .test_before_acquire(false)
            .acquire_timeout(Duration::from_secs(120))
            .map_sqlx_sqlite_opts(|o| {
                o.journal_mode(sea_orm::sqlx::sqlite::SqliteJournalMode::Wal)
                    .synchronous(sea_orm::sqlx::sqlite::SqliteSynchronous::Normal)
                    .busy_timeout(Duration::from_secs(30))
                    .foreign_keys(true)
            });
    } else if url.starts_with("postgres") {
        ensure_postgres_database(url).await?;
        opts.max_connections(16);
    } else {
        anyhow::bail!("unsupported database URL (use sqlite:// or postgres://)");
    }
    Ok(Database::connect(opts).await?)
}

/// The same as [`connect`]: every SQLite connection is serialized now.
pub async fn connect_serialized(url: &str) -> anyhow::Result<DatabaseConnection> {
    connect(url).await
}

/// On PostgreSQL, holds the transaction-scoped advisory lock named `key` until `txn` ends,
/// so transactions that check and then write what `key` names run one after another (a
/// count and an insert become one step). On SQLite there is nothing to take: the first
/// write of a transaction excludes every other writer until it ends, so such a transaction
/// writes first and checks after.
pub async fn serialize_on<C: ConnectionTrait>(txn: &C, key: &str) -> Result<(), sea_orm::DbErr> {
    if txn.get_database_backend() == DbBackend::Postgres {
        txn.execute(Statement::from_sql_and_values(
            DbBackend::Postgres,
            "SELECT pg_advisory_xact_lock($1)",
            [lock_key(key).into()],
        ))
        .await?;
    }
    Ok(())
}

/// Starts a transaction that a cancelled caller cannot leave open.
///
/// sqlx 0.8 (and 0.9.0) counts a PostgreSQL transaction only once `BEGIN` has been answered:
/// a future dropped while `BEGIN` is on the wire (a client that went away, a timeout) leaves
/// the server inside a transaction that nothing rolls back, and the pool hands that
/// connection on. The next borrower's autocommit writes then stay uncommitted, invisible to
/// every other connection, and are lost at the next rollback on it (transact-rs/sqlx#4393,
/// fixed upstream in #4394, not in a release sea-orm 1.1 can use). Seen here: an upload's
/// row that another ingest-service replica could not find. So `BEGIN` runs on a task of its
/// own: a caller that is dropped drops only the handle, the task finishes the round trip,
/// and the transaction it returns is dropped with it, which rolls it back properly.
/// Every transaction starts here (clippy's `disallowed-methods` holds the rest to it).
pub async fn begin(db: &DatabaseConnection) -> Result<DatabaseTransaction, DbErr> {
    let db = db.clone();
    #[expect(
        clippy::disallowed_methods,
        reason = "one BEGIN round trip that must not be cut short; it needs no shutdown wait"
    )]
    let task = tokio::task::spawn(async move {
        #[expect(clippy::disallowed_methods, reason = "the one place that begins")]
        db.begin().await
    });
    task.await
        .map_err(|e| DbErr::Custom(format!("starting a transaction: {e}")))?
}

/// Applies pending migrations, one migrator at a time: on PostgreSQL an advisory lock keeps
/// replicas that start together apart, on SQLite a lock of this process.
pub async fn migrate<M: MigratorTrait>(
    db: &DatabaseConnection,
    lock_name: &str,
) -> anyhow::Result<()> {
    if db.get_database_backend() == DbBackend::Postgres {
        let key = lock_key(lock_name);
        // The lock is per session: hold it on one dedicated connection.
        let conn = begin(db).await?;
        conn.execute(Statement::from_string(
            DbBackend::Postgres,
            format!("SELECT pg_advisory_xact_lock({key})"),
        ))
        .await?;
        M::up(&conn, None).await?;
        conn.commit().await?;
    } else {
        // SQLite serves one process (standalone), so a process-wide lock serializes its
        // migrators; without it, two starting together both insert the same version.
        let _one_at_a_time = SQLITE_MIGRATIONS.lock().await;
        M::up(db, None).await?;
    }
    Ok(())
}

static SQLITE_MIGRATIONS: std::sync::LazyLock<tokio::sync::Mutex<()>> =
    std::sync::LazyLock::new(|| tokio::sync::Mutex::new(()));

fn lock_key(name: &str) -> i64 {
    // FNV-1a: stable across builds, unlike std's hasher.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    i64::from_ne_bytes(hash.to_ne_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suffixes_database_names() {
        assert_eq!(
            with_database_suffix("postgres://u@h:5432/docchat", "chat"),
            "postgres://u@h:5432/docchat_chat"
        );
        assert_eq!(
            with_database_suffix("postgres://u@h:5432/t1?sslmode=disable", "admin"),
            "postgres://u@h:5432/t1_admin?sslmode=disable"
        );
        assert_eq!(
            with_database_suffix("postgres://u@h:5432", "admin"),
            "postgres://u@h:5432/docchat_admin"
        );
    }

    #[tokio::test]
    async fn sqlite_file_is_created() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}/nested/x.db?mode=rwc", dir.path().display());
        let db = connect(&url).await.unwrap();
        db.execute_unprepared("CREATE TABLE t (id INTEGER)")
            .await
            .unwrap();
        assert!(dir.path().join("nested/x.db").exists());
    }
}
