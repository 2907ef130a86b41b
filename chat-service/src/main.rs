//! chat-service binary: `serve` (default), `migrate`, `healthcheck`.

#[tokio::main]
async fn main() -> std::process::ExitCode {
    docchat_common::grpc::service_main(
        docchat_common::config::Service::Chat,
        docchat_chat_service::serve,
        docchat_chat_service::migrate,
    )
    .await
}
