//! scheduler-service binary: `serve` (default), `migrate`, `healthcheck`.

#[tokio::main]
async fn main() -> std::process::ExitCode {
    docchat_common::grpc::service_main(
        docchat_common::config::Service::Scheduler,
        docchat_scheduler_service::serve,
        docchat_scheduler_service::migrate,
    )
    .await
}
