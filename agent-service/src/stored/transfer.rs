//! Bytes between a workspace and ingest-service, streamed in pieces (never whole in
//! memory): PutAgentFile from a file, ReadDocumentBytes into one (written beside it and
//! renamed into place, so a reader never sees half a file).

use std::path::Path;

use docchat_common::Caller;
use docchat_common::clients::Clients;
use docchat_proto::ingest::v1 as pb;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;

/// Bytes per message.
const PIECE: usize = 64 * 1024;

/// Stores `file` as the session's document for `path` (replacing `document_id`'s bytes
/// when given).
pub async fn put(
    clients: &Clients,
    caller: &Caller,
    meta: pb::AgentFileMeta,
    file: &Path,
) -> Result<pb::Document, tonic::Status> {
    let mut f = tokio::fs::File::open(file)
        .await
        .map_err(|e| tonic::Status::failed_precondition(format!("cannot read the file: {e}")))?;
    let (tx, rx) = tokio::sync::mpsc::channel::<pb::AgentFileChunk>(4);
    let reader = tokio::spawn(async move {
        let first = pb::AgentFileChunk {
            part: Some(pb::agent_file_chunk::Part::Meta(meta)),
        };
        if tx.send(first).await.is_err() {
            return Ok(());
        }
        let mut buf = vec![0u8; PIECE];
        loop {
            let n = f.read(&mut buf).await?;
            if n == 0 {
                return Ok::<(), std::io::Error>(());
            }
            let piece = pb::AgentFileChunk {
                part: Some(pb::agent_file_chunk::Part::Data(buf[..n].to_vec())),
            };
            if tx.send(piece).await.is_err() {
                return Ok(());
            }
        }
    });
    let answer = clients
        .ingest(caller)
        .put_agent_file(ReceiverStream::new(rx))
        .await;
    match reader.await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            return Err(tonic::Status::failed_precondition(format!(
                "cannot read the file: {e}"
            )));
        }
        Err(e) => return Err(tonic::Status::internal(e.to_string())),
    }
    Ok(answer?.into_inner())
}

/// Writes document `id`'s bytes to `dest` (created or replaced); answers the document.
pub async fn read(
    clients: &Clients,
    caller: &Caller,
    id: &str,
    dest: &Path,
) -> Result<pb::Document, tonic::Status> {
    let mut stream = clients
        .ingest(caller)
        .read_document_bytes(pb::ReadDocumentBytesRequest {
            id: id.to_owned(),
            owned_only: false,
        })
        .await?
        .into_inner();
    let document = match stream.next().await {
        Some(Ok(pb::DocumentBytes {
            part: Some(pb::document_bytes::Part::Document(d)),
        })) => d,
        Some(Err(s)) => return Err(s),
        _ => {
            return Err(tonic::Status::internal(
                "the document's bytes came without it",
            ));
        }
    };
    let io =
        |e: std::io::Error| tonic::Status::internal(format!("writing {}: {e}", dest.display()));
    if let Some(dir) = dest.parent() {
        tokio::fs::create_dir_all(dir).await.map_err(io)?;
    }
    let tmp = dest.with_file_name(format!(
        ".{}.part-{}",
        dest.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default(),
        uuid::Uuid::new_v4().simple()
    ));
    let written = async {
        let mut f = tokio::fs::File::create(&tmp).await.map_err(io)?;
        while let Some(piece) = stream.next().await {
            if let Some(pb::document_bytes::Part::Data(bytes)) = piece?.part {
                f.write_all(&bytes).await.map_err(io)?;
            }
        }
        f.flush().await.map_err(io)?;
        drop(f);
        tokio::fs::rename(&tmp, dest).await.map_err(io)
    }
    .await;
    if written.is_err() {
        let _ = tokio::fs::remove_file(&tmp).await;
    }
    written.map(|()| document)
}
