//! Bytes between a workspace and ingest-service, streamed in pieces (never whole in
//! memory): PutAgentFile from a file, ReadDocumentBytes into one (written beside it and
//! renamed into place, so a reader never sees half a file).

use std::path::Path;
use std::sync::{Arc, Mutex};

use docchat_common::Caller;
use docchat_common::clients::Clients;
use docchat_proto::ingest::v1 as pb;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_stream::StreamExt;

/// Bytes per message.
const PIECE: usize = 64 * 1024;

/// Stores `file` as the session's document for `path` (replacing `document_id`'s bytes
/// when given). A read error mid-file abandons the call (ingest sees it cancelled and
/// stores nothing), never a truncated file.
pub async fn put(
    clients: &Clients,
    caller: &Caller,
    meta: pb::AgentFileMeta,
    file: &Path,
) -> Result<pb::Document, tonic::Status> {
    let f = tokio::fs::File::open(file)
        .await
        .map_err(|e| tonic::Status::failed_precondition(format!("cannot read the file: {e}")))?;
    let failed: Arc<Mutex<Option<std::io::Error>>> = Arc::default();
    let broke = Arc::new(tokio::sync::Notify::new());
    let pieces = futures::stream::unfold(
        (Some(meta), f, failed.clone(), broke.clone()),
        |(meta, mut f, failed, broke)| async move {
            if let Some(meta) = meta {
                let first = pb::AgentFileChunk {
                    part: Some(pb::agent_file_chunk::Part::Meta(meta)),
                };
                return Some((first, (None, f, failed, broke)));
            }
            let mut buf = vec![0u8; PIECE];
            match f.read(&mut buf).await {
                Ok(0) => None,
                Ok(n) => {
                    buf.truncate(n);
                    let piece = pb::AgentFileChunk {
                        part: Some(pb::agent_file_chunk::Part::Data(buf)),
                    };
                    Some((piece, (None, f, failed, broke)))
                }
                Err(e) => {
                    *failed.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                    broke.notify_one();
                    // Never end cleanly: the call is dropped instead.
                    std::future::pending().await
                }
            }
        },
    );
    let mut ingest = clients.ingest(caller);
    tokio::select! {
        answer = ingest.put_agent_file(pieces) => Ok(answer?.into_inner()),
        () = broke.notified() => {
            let e = failed.lock().unwrap_or_else(|p| p.into_inner()).take();
            Err(tonic::Status::failed_precondition(format!(
                "cannot read the file: {}",
                e.map_or_else(|| "read failed".to_owned(), |e| e.to_string())
            )))
        }
    }
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
        docchat_common::ids::new_name()
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
