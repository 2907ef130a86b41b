//! Layered configuration: defaults (the standalone values), an optional TOML file named by
//! `DOCCHAT_CONFIG_FILE`, then `DOCCHAT_*` environment variables. Validated once, then shared
//! immutably as `Arc<Config>`.

use std::path::PathBuf;

use figment::Figment;
use figment::providers::{Env, Format, Toml};
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

/// The services of docchat; each owns its database and its gRPC audience.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Service {
    Admin,
    Ingest,
    Chat,
    Agent,
    Scheduler,
}

impl Service {
    pub const ALL: [Service; 5] = [
        Service::Admin,
        Service::Ingest,
        Service::Chat,
        Service::Agent,
        Service::Scheduler,
    ];

    /// Short name: JWT audience, database name suffix, log field.
    pub fn name(self) -> &'static str {
        match self {
            Service::Admin => "admin",
            Service::Ingest => "ingest",
            Service::Chat => "chat",
            Service::Agent => "agent",
            Service::Scheduler => "scheduler",
        }
    }
}

/// The default of `rag_min_similarity`, chosen on bench/quality's dev part (see
/// ARCHITECTURE.md §5b "Not in the documents").
pub const RAG_MIN_SIMILARITY: f64 = 0.25;

/// Everything a docchat process reads at start.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct Config {
    /// Where the gateway serves REST (`DOCCHAT_HTTP_ADDR`).
    pub http_addr: String,
    /// Unauthenticated probe listener for orchestrators and Prometheus (`/livez`, `/readyz`,
    /// `/metrics`): the gateway's and, when set for one, a service binary's. Standalone
    /// mode serves every service's metrics on the gateway's.
    pub probe_addr: Option<String>,
    /// Where a service binary binds gRPC.
    pub grpc_addr: String,
    /// SQLite files, blobs and agent workspaces in standalone mode.
    pub data_dir: PathBuf,
    /// Local model files.
    pub models_dir: PathBuf,
    /// TOML list of upstream models.
    pub models_file: Option<PathBuf>,
    /// An OpenAI-compatible upstream whose models (its `GET /models`) are offered without a
    /// models file: `DOCCHAT_OPENAI_BASE_URL`, else `OPENAI_BASE_URL`; unset with a key set,
    /// OpenAI's own API.
    pub openai_base_url: Option<String>,
    /// Its key (`DOCCHAT_OPENAI_API_KEY`, else `OPENAI_API_KEY`).
    pub openai_api_key: Option<SecretString>,
    /// An Ollama server (`DOCCHAT_OLLAMA_BASE_URL`, else `OLLAMA_BASE_URL`; its root, e.g.
    /// `http://127.0.0.1:11434`, or its `/v1`), whose models are offered the same way.
    pub ollama_base_url: Option<String>,
    /// A reranker upstream without a models file (`DOCCHAT_RERANK_URL`): its root, asked
    /// `POST {url}/rerank` (or `/v1/rerank`); a models-file `kind = "rerank"` entry wins.
    pub rerank_url: Option<String>,
    /// The model id sent to `rerank_url` (`DOCCHAT_RERANK_MODEL`; default `rerank`).
    pub rerank_model: Option<String>,
    /// Its key (`DOCCHAT_RERANK_API_KEY`), sent as a bearer token.
    pub rerank_api_key: Option<SecretString>,
    /// Fusion's best candidates the reranker reads (`DOCCHAT_RERANK_CANDIDATES`).
    pub rerank_candidates: u32,
    /// The most time the reranker may take for one search, in milliseconds
    /// (`DOCCHAT_RERANK_TIMEOUT_MS`); past it fusion's order stands.
    pub rerank_timeout_ms: u64,
    /// The model `auto` routes to, by name (else the models file's default, else the first
    /// model listed).
    pub default_model: Option<String>,
    /// How often chat-service lists the upstreams' models again (and retries one that did
    /// not answer).
    pub upstream_refresh_seconds: u64,
    /// The context length of an upstream model whose listing does not state one.
    pub upstream_context_length: u64,
    /// API key of the `admin` user created on first start.
    pub bootstrap_admin_key: Option<SecretString>,
    /// Database of this process's service; unset means SQLite under `data_dir`. In
    /// standalone mode a PostgreSQL URL is a server: each service gets `<db>_<service>`.
    pub database_url: Option<String>,
    /// RabbitMQ; unset means the in-process bus.
    pub amqp_url: Option<String>,
    /// Prefix of every exchange and queue on the broker (lets deployments share one).
    pub bus_namespace: String,
    /// Queues unused this long are deleted by the broker; for throwaway namespaces.
    pub bus_queue_expiry_seconds: Option<u64>,
    /// Shared secret for the gateway→service JWT. Required when services run apart.
    pub internal_jwt_secret: Option<SecretString>,
    pub admin_url: String,
    pub ingest_url: String,
    pub chat_url: String,
    pub agent_url: String,
    pub scheduler_url: String,
    /// How long the gateway trusts a resolved API key.
    pub auth_cache_ttl_ms: u64,
    /// Lifetime of an internal JWT.
    pub internal_jwt_ttl_seconds: u64,
    /// `text` or `json` logs.
    pub log_format: String,
    /// Which spans go out over OTLP (`EnvFilter` directives), apart from `RUST_LOG`'s logs.
    pub trace_filter: String,
    /// Grace period for draining on shutdown.
    pub shutdown_grace_seconds: u64,
    /// The gateway's lame-duck time: after SIGTERM it reports not ready on /readyz but keeps
    /// accepting and serving for this long before it closes its listener and drains, so a
    /// request routed to it as the stop begins (a load balancer that has not yet seen the
    /// readiness change, a connection in the accept queue) is served rather than reset.
    pub shutdown_delay_seconds: u64,
    /// Upper bound of any HTTP request body (SPEC: 140 MB).
    pub max_body_bytes: usize,
    /// Ingestion workers per ingest-service replica.
    pub ingest_workers: usize,
    /// How long a worker's claim on a job lasts without renewal.
    pub job_lease_seconds: u64,
    /// An ingestion attempt's budget: a job still running after this long is stopped and
    /// reported as `timeout`.
    pub job_timeout_seconds: u64,
    /// Threads of the in-process embedder (0: all cores).
    pub embed_threads: usize,
    /// Threads of each local GGUF chat model (0: all cores).
    pub llm_threads: usize,
    /// Deployment-time crawl fairness (SPEC.md): priority routing of ingestion.
    pub crawl_fairness_enabled: bool,
    pub crawl_fresh_user_window_minutes: i64,
    pub crawl_heavy_user_jobs_threshold: u64,
    /// Deployment-time chat fairness (SPEC.md): a per-user rate limit and priority queues in
    /// front of each chat-service replica's model calls.
    pub chat_fairness_enabled: bool,
    /// Chat requests per user per minute while fairness is on; more answer 429.
    pub chat_rate_limit_per_minute: u32,
    /// A user without requests in this window is high priority.
    pub chat_fresh_user_window_minutes: u64,
    /// Requests within the fresh window after which a user is low priority.
    pub chat_heavy_user_threshold: u32,
    /// Every this many hand-overs, the lowest non-empty priority queue is served first.
    pub chat_fairness_starvation_interval: u32,
    /// Generations a chat-service replica runs at once while fairness is on; more queue.
    pub chat_fairness_slots: usize,
    /// How long a reply being generated stays claimed without its replica renewing it
    /// (renewed every third of it). A replica that dies leaves its replies to be recovered
    /// (stored as interrupted, with what was generated) once this runs out.
    pub chat_completion_lease_seconds: u64,
    /// How long the compatible API's background responses are kept after they end (then
    /// `GET /compat_api/v1/responses/{id}` is a 404). Replies of the main API are kept with
    /// their lines for good (re-attaching replays them at any time).
    pub chat_stream_retention_seconds: u64,
    /// The longest a reply stays paused: then it is stopped (its text kept, and an error
    /// saying why), so a forgotten pause does not hold a fairness slot and an upstream
    /// connection for ever.
    pub chat_max_pause_seconds: u64,
    /// A RAG question whose closest passage is less similar to it than this (the dense,
    /// cosine similarity of the best candidate; all-MiniLM-L6-v2's scale) is answered "not in
    /// the documents" instead of by the model; 0 turns that off (`DOCCHAT_RAG_MIN_SIMILARITY`).
    pub rag_min_similarity: f64,
    /// MiB of disk one agent workspace may hold (agent-service's sandbox and stored files).
    pub workspace_quota_mb: u64,
    /// MiB of disk all of one user's agent workspaces may hold together.
    pub user_disk_quota_mb: u64,
    /// agent-service's code sandbox backend: `auto`, `bubblewrap`, `landlock` or `none`
    /// (`DOCCHAT_SANDBOX`; an unknown name leaves code tools unavailable, said at start).
    pub sandbox: String,
    /// Code runs at once on one agent-service replica (1..=1024).
    pub sandbox_slots: u32,
    /// Code runs of one user at once; unset: a quarter of the slots, at least one.
    pub sandbox_user_slots: Option<u32>,
    /// The longest one code run may hold a slot, whatever its own timeout says.
    pub sandbox_max_run_seconds: u64,
    /// The first slot uid when agent-service runs as root (at least 1000).
    pub sandbox_uid_base: u32,
    /// The Landlock helper `docchat-sandbox-exec`; unset: next to the running binary.
    pub sandbox_helper: Option<PathBuf>,
    /// Text recognition of scanned PDF pages and images in ingest-service: `auto` (where
    /// Tesseract, pdftoppm and the sandbox are there) or `off` (`DOCCHAT_OCR`).
    pub ocr: String,
    /// The languages recognized when an upload names none (`eng`, `eng+deu`; installed
    /// with Debian's tesseract-ocr-<lang>).
    pub ocr_language: String,
    /// The longest one page's rendering or recognition may run; past it the page is
    /// recorded as unread and skipped.
    pub ocr_page_seconds: u64,
    /// Pages recognized at once on one ingest-service replica (each run uses one core).
    pub ocr_slots: u32,
    /// Hosts the agent may reach although they resolve to private addresses (fetch_url,
    /// remote MCP servers, browser actions): a comma-separated list, or a TOML array.
    #[serde(deserialize_with = "list")]
    pub agent_egress_allow: Vec<String>,
    /// Whether the agent's fetch_url tool is offered (`DOCCHAT_AGENT_FETCH=off` turns it off).
    #[serde(deserialize_with = "switch")]
    pub agent_fetch: bool,
    /// The secret custom agents' stored keys are sealed with (at least 16 characters);
    /// unset: the internal JWT secret, or a file under the data dir in standalone mode.
    pub agent_keys_secret: Option<SecretString>,
    /// This replica's name (`HOSTNAME`, a pod's name on Kubernetes), in lease owners.
    pub hostname: Option<String>,
    /// How often ingest-service looks for collection descriptions to (re)generate.
    pub description_interval_seconds: u64,
    /// Where chunk vectors are searched: `auto` (pgvector when the database is PostgreSQL
    /// with the `vector` extension available, else in-process), `memory` or `pgvector`
    /// (refuse to start without it).
    pub vector_backend: String,
    /// pgvector HNSW search breadth (`hnsw.ef_search`); raised to the candidate count.
    pub pgvector_ef_search: u32,
    /// Deployment-time MCP settings (SPEC.md), per gateway replica: MCP requests per user
    /// per minute (more answer 429),
    pub mcp_rate_limit: u32,
    /// the largest MCP request body in MB (larger answer 413),
    pub mcp_max_body_size_mb: u64,
    /// and the MCP inspections one user may have running at once (more answer 429).
    pub mcp_max_concurrent_jobs: u32,
    /// docchat's own MCP server (`/mcp`) also offers tools that change data (`upload_text`).
    pub mcp_write_tools: bool,
    /// How often each scheduler-service replica looks for due tasks and lapsed leases.
    pub scheduler_tick_ms: u64,
    /// How long a running task execution stays claimed without its replica renewing it
    /// (renewed every third of it); then another replica's reaper fails it.
    pub scheduler_lease_seconds: u64,
    /// Where task run notifications are sent: `smtp://[user:pass@]host[:port]` (plain, or
    /// STARTTLS when `?tls=required`/`?tls=opportunistic` says so) or `smtps://…` (TLS from
    /// the start). Unset: no notifications.
    pub smtp_url: Option<SecretString>,
    /// The From address of notifications.
    pub smtp_from: String,
    /// Where ingest-service keeps uploaded bytes: unset, the directory `<data_dir>/blobs`
    /// (standalone, one replica); `s3://<bucket>[/<prefix>]`, an S3-compatible object store
    /// that every replica shares. The bucket is created on first start when it is missing.
    pub blob_url: Option<String>,
    /// The object store's endpoint (`http://minio:9000`; plain http is allowed when named
    /// here). Unset: `AWS_ENDPOINT_URL`, else Amazon S3 itself.
    pub s3_endpoint: Option<String>,
    /// Unset: `AWS_REGION` / `AWS_DEFAULT_REGION`, else `us-east-1`.
    pub s3_region: Option<String>,
    /// Static credentials; unset: `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY`, else the
    /// environment's (web identity, container or instance credentials).
    pub s3_access_key_id: Option<String>,
    pub s3_secret_access_key: Option<SecretString>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            http_addr: "127.0.0.1:8080".into(),
            probe_addr: None,
            grpc_addr: "127.0.0.1:50051".into(),
            data_dir: PathBuf::from("./data"),
            models_dir: PathBuf::from("./models"),
            models_file: None,
            openai_base_url: None,
            openai_api_key: None,
            ollama_base_url: None,
            default_model: None,
            rerank_url: None,
            rerank_model: None,
            rerank_api_key: None,
            rerank_candidates: 40,
            rerank_timeout_ms: 2000,
            upstream_refresh_seconds: 60,
            upstream_context_length: 8192,
            bootstrap_admin_key: None,
            database_url: None,
            amqp_url: None,
            bus_namespace: String::new(),
            bus_queue_expiry_seconds: None,
            internal_jwt_secret: None,
            admin_url: "http://127.0.0.1:50051".into(),
            ingest_url: "http://127.0.0.1:50052".into(),
            chat_url: "http://127.0.0.1:50053".into(),
            agent_url: "http://127.0.0.1:50054".into(),
            scheduler_url: "http://127.0.0.1:50055".into(),
            auth_cache_ttl_ms: 3000,
            internal_jwt_ttl_seconds: 120,
            log_format: "text".into(),
            trace_filter: "info".into(),
            shutdown_grace_seconds: 20,
            shutdown_delay_seconds: 0,
            max_body_bytes: 140 * 1000 * 1000,
            ingest_workers: 2,
            job_lease_seconds: 30,
            job_timeout_seconds: 3600,
            embed_threads: 0,
            llm_threads: 0,
            crawl_fairness_enabled: true,
            crawl_fresh_user_window_minutes: 60,
            crawl_heavy_user_jobs_threshold: 50,
            chat_fairness_enabled: false,
            chat_rate_limit_per_minute: 60,
            chat_fresh_user_window_minutes: 60,
            chat_heavy_user_threshold: 100,
            chat_fairness_starvation_interval: 30,
            chat_fairness_slots: 32,
            chat_completion_lease_seconds: 60,
            chat_stream_retention_seconds: 600,
            chat_max_pause_seconds: 600,
            rag_min_similarity: RAG_MIN_SIMILARITY,
            workspace_quota_mb: 1024,
            user_disk_quota_mb: 4096,
            sandbox: "auto".into(),
            sandbox_slots: 16,
            sandbox_user_slots: None,
            sandbox_max_run_seconds: 900,
            sandbox_uid_base: 64200,
            sandbox_helper: None,
            ocr: "auto".into(),
            ocr_language: "eng".into(),
            ocr_page_seconds: 120,
            ocr_slots: 2,
            agent_egress_allow: Vec::new(),
            agent_fetch: true,
            agent_keys_secret: None,
            hostname: None,
            description_interval_seconds: 30,
            vector_backend: "auto".into(),
            pgvector_ef_search: 100,
            mcp_rate_limit: 60,
            mcp_max_body_size_mb: 140,
            mcp_max_concurrent_jobs: 4,
            mcp_write_tools: false,
            scheduler_tick_ms: 1000,
            scheduler_lease_seconds: 30,
            smtp_url: None,
            smtp_from: "docchat@localhost".into(),
            blob_url: None,
            s3_endpoint: None,
            s3_region: None,
            s3_access_key_id: None,
            s3_secret_access_key: None,
        }
    }
}

impl Config {
    /// Loads defaults, then `DOCCHAT_CONFIG_FILE` (TOML) if set, then `DOCCHAT_*` variables.
    #[expect(
        clippy::disallowed_methods,
        reason = "the configuration is where the environment is read"
    )]
    pub fn load() -> anyhow::Result<Config> {
        let mut figment = Figment::new();
        if let Ok(file) = std::env::var("DOCCHAT_CONFIG_FILE") {
            figment = figment.merge(Toml::file_exact(file));
        }
        // The conventions users know from Open WebUI and LiteLLM, under docchat's own names
        // where both are set.
        let config: Config = figment
            .merge(Env::raw().only(&[
                "openai_base_url",
                "openai_api_key",
                "ollama_base_url",
                "hostname",
            ]))
            .merge(Env::prefixed("DOCCHAT_").ignore(&["config_file"]))
            .extract()?;
        config.validate()?;
        Ok(config)
    }

    /// A configuration for tests: everything under `data_dir`, a fixed JWT secret.
    pub fn for_test(data_dir: impl Into<PathBuf>) -> Config {
        Config {
            data_dir: data_dir.into(),
            internal_jwt_secret: Some(SecretString::from(
                "test-secret-of-enough-length-0123456789",
            )),
            ..Config::default()
        }
    }

    /// Bytes one agent workspace may hold (`workspace_quota_mb`).
    pub fn workspace_quota_bytes(&self) -> u64 {
        self.workspace_quota_mb.max(1).saturating_mul(1 << 20)
    }

    /// Bytes all of one user's agent workspaces may hold together (`user_disk_quota_mb`).
    pub fn user_disk_quota_bytes(&self) -> u64 {
        self.user_disk_quota_mb.max(1).saturating_mul(1 << 20)
    }

    pub fn validate(&self) -> anyhow::Result<()> {
        if let Some(secret) = &self.internal_jwt_secret
            && secret.expose_secret().len() < 16
        {
            anyhow::bail!("DOCCHAT_INTERNAL_JWT_SECRET must be at least 16 characters");
        }
        if !matches!(self.log_format.as_str(), "text" | "json") {
            anyhow::bail!("DOCCHAT_LOG_FORMAT must be text or json");
        }
        if let Err(e) = tracing_subscriber::EnvFilter::try_new(&self.trace_filter) {
            anyhow::bail!("DOCCHAT_TRACE_FILTER: {e}");
        }
        if !matches!(self.ocr.as_str(), "auto" | "off") {
            anyhow::bail!("DOCCHAT_OCR must be auto or off");
        }
        if !(5..=3600).contains(&self.ocr_page_seconds) || !(1..=64).contains(&self.ocr_slots) {
            anyhow::bail!(
                "DOCCHAT_OCR_PAGE_SECONDS must be between 5 and 3600 and DOCCHAT_OCR_SLOTS between 1 and 64"
            );
        }
        if !matches!(self.vector_backend.as_str(), "auto" | "memory" | "pgvector") {
            anyhow::bail!("DOCCHAT_VECTOR_BACKEND must be auto, memory or pgvector");
        }
        if !(1..=10_000).contains(&self.pgvector_ef_search) {
            anyhow::bail!("DOCCHAT_PGVECTOR_EF_SEARCH must be between 1 and 10000");
        }
        if self.chat_rate_limit_per_minute == 0 || self.chat_fairness_slots == 0 {
            anyhow::bail!(
                "DOCCHAT_CHAT_RATE_LIMIT_PER_MINUTE and DOCCHAT_CHAT_FAIRNESS_SLOTS must be at least 1"
            );
        }
        if !(1..=604_800).contains(&self.job_timeout_seconds) {
            anyhow::bail!("DOCCHAT_JOB_TIMEOUT_SECONDS must be between 1 and 604800");
        }
        if self.workspace_quota_mb == 0 || self.user_disk_quota_mb == 0 {
            anyhow::bail!(
                "DOCCHAT_WORKSPACE_QUOTA_MB and DOCCHAT_USER_DISK_QUOTA_MB must be at least 1"
            );
        }
        if let Some(secret) = &self.agent_keys_secret
            && (1..16).contains(&secret.expose_secret().trim().len())
        {
            anyhow::bail!("DOCCHAT_AGENT_KEYS_SECRET must be at least 16 characters");
        }
        if !(0.0..=1.0).contains(&self.rag_min_similarity) {
            anyhow::bail!("DOCCHAT_RAG_MIN_SIMILARITY must be between 0 and 1");
        }
        if !(1..=86_400).contains(&self.chat_max_pause_seconds) {
            anyhow::bail!("DOCCHAT_CHAT_MAX_PAUSE_SECONDS must be between 1 and 86400");
        }
        if !(1..=86_400).contains(&self.chat_completion_lease_seconds) {
            anyhow::bail!("DOCCHAT_CHAT_COMPLETION_LEASE_SECONDS must be between 1 and 86400");
        }
        if !(1..=30 * 86_400).contains(&self.chat_stream_retention_seconds) {
            anyhow::bail!(
                "DOCCHAT_CHAT_STREAM_RETENTION_SECONDS must be between 1 and 2592000 (30 days)"
            );
        }
        if self.mcp_rate_limit == 0
            || self.mcp_max_body_size_mb == 0
            || self.mcp_max_concurrent_jobs == 0
        {
            anyhow::bail!(
                "DOCCHAT_MCP_RATE_LIMIT, DOCCHAT_MCP_MAX_BODY_SIZE_MB and DOCCHAT_MCP_MAX_CONCURRENT_JOBS must be at least 1"
            );
        }
        if !(1..=1000).contains(&self.rerank_candidates)
            || !(1..=600_000).contains(&self.rerank_timeout_ms)
        {
            anyhow::bail!(
                "DOCCHAT_RERANK_CANDIDATES must be between 1 and 1000 and DOCCHAT_RERANK_TIMEOUT_MS between 1 and 600000"
            );
        }
        for (var, url) in [
            ("OPENAI_BASE_URL", &self.openai_base_url),
            ("OLLAMA_BASE_URL", &self.ollama_base_url),
            ("DOCCHAT_RERANK_URL", &self.rerank_url),
        ] {
            if let Some(url) = url.as_deref().map(str::trim).filter(|u| !u.is_empty())
                && !(url.starts_with("http://") || url.starts_with("https://"))
            {
                anyhow::bail!("{var} must be an http(s) URL, got {url:?}");
            }
        }
        if !(1..=86_400).contains(&self.upstream_refresh_seconds)
            || self.upstream_context_length == 0
        {
            anyhow::bail!(
                "DOCCHAT_UPSTREAM_REFRESH_SECONDS must be between 1 and 86400 and DOCCHAT_UPSTREAM_CONTEXT_LENGTH at least 1"
            );
        }
        if !(10..=60_000).contains(&self.scheduler_tick_ms) {
            anyhow::bail!("DOCCHAT_SCHEDULER_TICK_MS must be between 10 and 60000");
        }
        if !(1..=86_400).contains(&self.scheduler_lease_seconds) {
            anyhow::bail!("DOCCHAT_SCHEDULER_LEASE_SECONDS must be between 1 and 86400");
        }
        if let Some(url) = &self.smtp_url {
            let url = url.expose_secret();
            if !(url.starts_with("smtp://") || url.starts_with("smtps://")) {
                anyhow::bail!("DOCCHAT_SMTP_URL must be an smtp:// or smtps:// URL");
            }
        }
        if let Some(url) = &self.blob_url
            && crate::config::s3_location(url).is_none()
        {
            anyhow::bail!("DOCCHAT_BLOB_URL must be s3://<bucket>[/<prefix>], got {url:?}");
        }
        if let Some(endpoint) = &self.s3_endpoint
            && !(endpoint.starts_with("http://") || endpoint.starts_with("https://"))
        {
            anyhow::bail!(
                "DOCCHAT_S3_ENDPOINT must be an http:// or https:// URL, got {endpoint:?}"
            );
        }
        if self.chat_fairness_starvation_interval == 0 {
            anyhow::bail!("DOCCHAT_CHAT_FAIRNESS_STARVATION_INTERVAL must be at least 1");
        }
        for (name, url) in [
            ("DOCCHAT_ADMIN_URL", &self.admin_url),
            ("DOCCHAT_INGEST_URL", &self.ingest_url),
            ("DOCCHAT_CHAT_URL", &self.chat_url),
            ("DOCCHAT_AGENT_URL", &self.agent_url),
            ("DOCCHAT_SCHEDULER_URL", &self.scheduler_url),
        ] {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                anyhow::bail!("{name} must be an http:// or https:// URL, got {url:?}");
            }
        }
        Ok(())
    }

    /// gRPC URL of a service.
    pub fn service_url(&self, service: Service) -> &str {
        match service {
            Service::Admin => &self.admin_url,
            Service::Ingest => &self.ingest_url,
            Service::Chat => &self.chat_url,
            Service::Agent => &self.agent_url,
            Service::Scheduler => &self.scheduler_url,
        }
    }

    pub fn set_service_url(&mut self, service: Service, url: String) {
        match service {
            Service::Admin => self.admin_url = url,
            Service::Ingest => self.ingest_url = url,
            Service::Chat => self.chat_url = url,
            Service::Agent => self.agent_url = url,
            Service::Scheduler => self.scheduler_url = url,
        }
    }

    /// The database URL a service uses. `shared_server` is set in standalone mode, where one
    /// `DOCCHAT_DATABASE_URL` names a server and each service gets its own database on it.
    pub fn database_url_for(&self, service: Service, shared_server: bool) -> String {
        match &self.database_url {
            Some(url) if url.starts_with("postgres") && shared_server => {
                crate::db::with_database_suffix(url, service.name())
            }
            Some(url) => url.clone(),
            None => {
                let path = self.data_dir.join(format!("{}.db", service.name()));
                format!("sqlite://{}?mode=rwc", path.display())
            }
        }
    }
}

/// `s3://bucket/some/prefix` → `("bucket", "some/prefix")`; `None` unless it is an s3 URL
/// with a valid bucket name (3–63 lower-case letters, digits, `-` and `.`).
pub fn s3_location(url: &str) -> Option<(&str, &str)> {
    let rest = url.strip_prefix("s3://")?;
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    let valid = (3..=63).contains(&bucket.len())
        && bucket
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && bucket.starts_with(|c: char| c.is_ascii_alphanumeric());
    valid.then(|| (bucket, prefix.trim_matches('/')))
}

/// A list from a comma-separated string (an environment variable) or a sequence (TOML).
fn list<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Text(String),
        Items(Vec<String>),
    }
    let items = match Raw::deserialize(d)? {
        Raw::Text(text) => text.split(',').map(str::to_owned).collect(),
        Raw::Items(items) => items,
    };
    Ok(items
        .iter()
        .map(|h| h.trim().to_ascii_lowercase())
        .filter(|h| !h.is_empty())
        .collect())
}

/// A switch: a boolean, 1/0, or on/off, true/false, yes/no in any case.
fn switch<'de, D: serde::Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Flag(bool),
        Number(i64),
        Text(String),
    }
    match Raw::deserialize(d)? {
        Raw::Flag(b) => Ok(b),
        Raw::Number(n) => Ok(n != 0),
        Raw::Text(t) => match t.trim().to_ascii_lowercase().as_str() {
            "on" | "true" | "yes" | "1" => Ok(true),
            "off" | "false" | "no" | "0" => Ok(false),
            other => Err(serde::de::Error::custom(format!(
                "{other:?} is not on or off"
            ))),
        },
    }
}

#[cfg(test)]
#[allow(clippy::result_large_err)] // figment's Jail closure signature
mod tests {
    use super::*;

    #[test]
    fn defaults_are_standalone_values() {
        let c = Config::default();
        assert_eq!(c.http_addr, "127.0.0.1:8080");
        assert_eq!(c.data_dir, PathBuf::from("./data"));
        assert!(c.amqp_url.is_none());
        assert_eq!(
            c.database_url_for(Service::Chat, true),
            "sqlite://./data/chat.db?mode=rwc"
        );
    }

    #[test]
    fn env_and_file_layers() {
        figment::Jail::expect_with(|jail| {
            jail.create_file(
                "docchat.toml",
                "http_addr = \"0.0.0.0:9000\"\nlog_format = \"json\"",
            )?;
            jail.set_env("DOCCHAT_CONFIG_FILE", "docchat.toml");
            jail.set_env("DOCCHAT_LOG_FORMAT", "text");
            jail.set_env("DOCCHAT_DATABASE_URL", "postgres://u@h:5432/docchat");
            let c = Config::load().map_err(|e| e.to_string())?;
            assert_eq!(c.http_addr, "0.0.0.0:9000");
            assert_eq!(c.log_format, "text", "environment wins over the file");
            assert_eq!(
                c.database_url_for(Service::Admin, true),
                "postgres://u@h:5432/docchat_admin"
            );
            assert_eq!(
                c.database_url_for(Service::Admin, false),
                "postgres://u@h:5432/docchat"
            );
            Ok(())
        });
    }

    #[test]
    fn rejects_bad_values() {
        figment::Jail::expect_with(|jail| {
            jail.set_env("DOCCHAT_ADMIN_URL", "admin:50051");
            assert!(Config::load().is_err());
            Ok(())
        });
        figment::Jail::expect_with(|jail| {
            jail.set_env("DOCCHAT_BLOB_URL", "/var/blobs");
            assert!(Config::load().is_err(), "a blob URL must be s3://");
            jail.set_env("DOCCHAT_BLOB_URL", "s3://docchat/blobs");
            jail.set_env("DOCCHAT_S3_ENDPOINT", "minio:9000");
            assert!(Config::load().is_err(), "an endpoint needs its scheme");
            jail.set_env("DOCCHAT_S3_ENDPOINT", "http://minio:9000");
            let c = Config::load().map_err(|e| e.to_string())?;
            assert_eq!(c.blob_url.as_deref(), Some("s3://docchat/blobs"));
            Ok(())
        });
    }

    #[test]
    fn agent_settings_from_the_environment() {
        figment::Jail::expect_with(|jail| {
            let c = Config::load().map_err(|e| e.to_string())?;
            assert!(c.agent_fetch && c.agent_egress_allow.is_empty());
            assert_eq!((c.sandbox.as_str(), c.sandbox_slots), ("auto", 16));
            jail.set_env("DOCCHAT_AGENT_FETCH", "Off");
            jail.set_env("DOCCHAT_AGENT_EGRESS_ALLOW", "127.0.0.1, Models.internal,,");
            jail.set_env("DOCCHAT_SANDBOX", "landlock");
            jail.set_env("DOCCHAT_SANDBOX_SLOTS", "4");
            jail.set_env("HOSTNAME", "agent-7c9f");
            let c = Config::load().map_err(|e| e.to_string())?;
            assert!(!c.agent_fetch);
            assert_eq!(c.agent_egress_allow, ["127.0.0.1", "models.internal"]);
            assert_eq!((c.sandbox.as_str(), c.sandbox_slots), ("landlock", 4));
            assert_eq!(c.hostname.as_deref(), Some("agent-7c9f"));
            jail.set_env("DOCCHAT_AGENT_FETCH", "0");
            assert!(!Config::load().map_err(|e| e.to_string())?.agent_fetch);
            jail.set_env("DOCCHAT_AGENT_FETCH", "maybe");
            assert!(Config::load().is_err(), "a switch is on or off");
            jail.set_env("DOCCHAT_AGENT_FETCH", "on");
            jail.set_env("DOCCHAT_AGENT_KEYS_SECRET", "short");
            assert!(
                Config::load().is_err(),
                "a keys secret of under 16 characters"
            );
            Ok(())
        });
    }

    #[test]
    fn s3_locations() {
        assert_eq!(s3_location("s3://docchat"), Some(("docchat", "")));
        assert_eq!(s3_location("s3://docchat/a/b/"), Some(("docchat", "a/b")));
        assert_eq!(s3_location("s3://Docchat"), None, "upper case");
        assert_eq!(s3_location("s3://ab"), None, "too short");
        assert_eq!(s3_location("s3:///x"), None, "no bucket");
        assert_eq!(s3_location("file:///tmp"), None);
    }
}
