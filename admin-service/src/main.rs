//! admin-service binary: `serve` (default), `migrate`, `healthcheck`.

#[tokio::main]
async fn main() -> std::process::ExitCode {
    docchat_common::grpc::service_main(
        docchat_common::config::Service::Admin,
        docchat_admin_service::serve,
        docchat_admin_service::migrate,
    )
    .await
}
