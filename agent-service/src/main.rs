//! agent-service binary: `serve` (default), `migrate`, `healthcheck`.

#[tokio::main]
async fn main() -> std::process::ExitCode {
    docchat_common::grpc::service_main(
        docchat_common::config::Service::Agent,
        docchat_agent_service::serve,
        docchat_agent_service::migrate,
    )
    .await
}
