//! Test support: the backends a suite runs against. The embedded one (SQLite, in-process
//! bus) always; the real one (PostgreSQL, RabbitMQ) when `DOCCHAT_TEST_DATABASE_URL` and
//! `DOCCHAT_TEST_AMQP_URL` are set, as `scripts/test.sh` does.

use std::path::Path;

use crate::config::Config;

/// Where a test's state lives.
#[derive(Debug, Clone)]
pub struct Backend {
    pub name: &'static str,
    /// A PostgreSQL server URL (any database); `None` means SQLite.
    pub postgres: Option<String>,
    /// RabbitMQ; `None` means the in-process bus.
    pub amqp: Option<String>,
}

/// The embedded backend, then the real one when configured.
#[allow(clippy::print_stderr)]
pub fn backends() -> Vec<Backend> {
    let mut out = vec![Backend {
        name: "sqlite+memory",
        postgres: None,
        amqp: None,
    }];
    match (
        std::env::var("DOCCHAT_TEST_DATABASE_URL"),
        std::env::var("DOCCHAT_TEST_AMQP_URL"),
    ) {
        (Ok(pg), Ok(amqp)) => out.push(Backend {
            name: "postgres+rabbitmq",
            postgres: Some(pg),
            amqp: Some(amqp),
        }),
        _ => eprintln!(
            "DOCCHAT_TEST_DATABASE_URL / DOCCHAT_TEST_AMQP_URL unset: real backends skipped (scripts/test.sh sets them)"
        ),
    }
    out
}

/// A fresh name for databases and bus namespaces.
pub fn unique(prefix: &str) -> String {
    let id = uuid::Uuid::new_v4().simple().to_string();
    format!("{prefix}{}", &id[..12])
}

/// `postgres://h/any` → `postgres://h/<database>`.
pub fn postgres_database(server: &str, database: &str) -> String {
    let base = server.split('?').next().unwrap_or(server);
    let root = match base.rsplit_once('/') {
        Some((root, _)) if root.contains("//") && !root.ends_with('/') => root,
        _ => base,
    };
    format!("{root}/{database}")
}

impl Backend {
    /// A database URL for one store, fresh for this test.
    pub fn database_url(&self, data_dir: &Path, name: &str) -> String {
        match &self.postgres {
            Some(server) => postgres_database(server, &unique("dctest_")),
            None => format!("sqlite://{}/{name}.db?mode=rwc", data_dir.display()),
        }
    }

    /// A standalone configuration isolated from every other test: its own data dir,
    /// databases and bus namespace.
    pub fn config(&self, data_dir: &Path) -> Config {
        let mut config = Config::for_test(data_dir);
        if let Some(server) = &self.postgres {
            config.database_url = Some(postgres_database(server, &unique("dctest_")));
        }
        if let Some(amqp) = &self.amqp {
            config.amqp_url = Some(amqp.clone());
            config.bus_namespace = format!("{}.", unique("t"));
            config.bus_queue_expiry_seconds = Some(300);
        }
        config
    }
}
