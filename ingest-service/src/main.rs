//! ingest-service binary: `serve` (default), `migrate`, `healthcheck`.

#[tokio::main]
async fn main() -> std::process::ExitCode {
    docchat_common::grpc::service_main(
        docchat_common::config::Service::Ingest,
        docchat_ingest_service::serve,
        docchat_ingest_service::migrate,
    )
    .await
}
