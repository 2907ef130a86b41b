//! The tonic implementation of `docchat.chat.v1.ChatService`.

use std::sync::Arc;

use docchat_common::auth::caller;
use docchat_common::bus::EventBus;
use docchat_common::clients::Clients;
use docchat_common::error::ApiError;
use docchat_common::grpc::{Reply, ok};
use docchat_common::outbox::OutboxRelay;
use docchat_common::time::to_proto;
use docchat_proto::chat::v1 as pb;
use docchat_proto::chat::v1::chat_service_server::ChatService;
use docchat_proto::common::v1::{Empty, PageRequest};
use docchat_proto::ingest::v1::{CollectionRef, DocumentRef};
use sea_orm::DatabaseConnection;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use crate::attach::Attach;
use crate::background::Backgrounds;
use crate::compat::{ChunkStream, Compat};
use crate::completions::Completer;
use crate::control::{self, Action};
use crate::entities::{chat_sessions, message_references, messages};
use crate::sessions::{self, LinkedCollection};
use crate::{limits, replies};

pub struct ChatGrpc {
    pub db: DatabaseConnection,
    pub relay: OutboxRelay,
    /// ingest-service on behalf of a caller (collections linked to sessions).
    pub clients: Clients,
    pub completer: Completer,
    pub compat: Compat,
    pub attach: Attach,
    pub backgrounds: Backgrounds,
    pub bus: Arc<dyn EventBus>,
    /// The byte budget of one list page (`docchat_common::limits::list_page_bytes`).
    pub page_bytes: u64,
}

fn session_pb(s: chat_sessions::Model) -> pb::ChatSession {
    let chat_sessions::Model {
        id,
        owner_id: _,
        owner_username,
        name,
        collection_id,
        collection_name,
        latest_message_content,
        created_at,
        updated_at,
    } = s;
    pb::ChatSession {
        id,
        name,
        collection_id,
        collection_name,
        latest_message_content,
        updated_at: Some(to_proto(updated_at)),
        username: owner_username,
        created_at: Some(to_proto(created_at)),
    }
}

fn session_list(rows: Vec<chat_sessions::Model>) -> pb::ChatSessionList {
    pb::ChatSessionList {
        sessions: rows.into_iter().map(session_pb).collect(),
    }
}

fn message_pb(m: messages::Model) -> pb::Message {
    let messages::Model {
        id,
        session_id: _,
        owner_id: _,
        username,
        content,
        reply_to,
        votes,
        has_references,
        total_references,
        error,
        created_at,
        stream_marks: _,
    } = m;
    pb::Message {
        id,
        content,
        reply_to,
        has_references,
        votes,
        created_at: Some(to_proto(created_at)),
        total_references,
        username,
        error,
    }
}

fn reference_pb(r: message_references::Model) -> pb::Reference {
    let message_references::Model {
        id: _,
        message_id: _,
        rank: _,
        document_id,
        document_name,
        collection_id,
        chunk_id,
        pages,
        score,
        content,
        document_deleted,
    } = r;
    pb::Reference {
        document_id,
        document_name,
        chunk_id,
        pages: pages.split(',').filter_map(|p| p.parse().ok()).collect(),
        score,
        collection_id,
        content,
        were_references_deleted: document_deleted,
    }
}

impl ChatGrpc {
    /// The collection `id` as the caller reads it: ingest decides (NOT_FOUND when the
    /// caller may not read it).
    async fn readable_collection(
        &self,
        me: &docchat_common::Caller,
        id: String,
    ) -> Result<LinkedCollection, Status> {
        let found = self
            .clients
            .ingest(me)
            .get_collection(CollectionRef { id })
            .await?
            .into_inner();
        Ok(LinkedCollection {
            id: found.id,
            name: found.name,
        })
    }
}

#[tonic::async_trait]
impl ChatService for ChatGrpc {
    type CompleteStream = ReceiverStream<Result<pb::CompletionEvent, Status>>;
    type AttachStream = ReceiverStream<Result<pb::CompletionEvent, Status>>;
    type BackgroundFollowStream = ReceiverStream<Result<pb::BackgroundEvent, Status>>;

    async fn attach(&self, request: Request<pb::AttachRequest>) -> Reply<Self::AttachStream> {
        let me = caller(&request)?;
        let r = request.into_inner();
        let lines = self.attach.attach(&me, &r.question_id, r.after).await?;
        Ok(Response::new(ReceiverStream::new(lines)))
    }

    async fn running_question(
        &self,
        request: Request<pb::SessionRef>,
    ) -> Reply<pb::RunningQuestionReply> {
        let me = caller(&request)?;
        ok(crate::attach::running_in_session(&self.attach.db, &me, &request.get_ref().id).await)
    }

    async fn background_start(
        &self,
        request: Request<pb::BackgroundRequest>,
    ) -> Reply<pb::BackgroundResponse> {
        let me = caller(&request)?;
        ok(self.backgrounds.start(&me, request.into_inner()).await)
    }

    async fn background_get(
        &self,
        request: Request<pb::BackgroundRef>,
    ) -> Reply<pb::BackgroundResponse> {
        let me = caller(&request)?;
        ok(self.backgrounds.get(&me, &request.into_inner().id).await)
    }

    async fn background_follow(
        &self,
        request: Request<pb::BackgroundFollowRequest>,
    ) -> Reply<Self::BackgroundFollowStream> {
        let me = caller(&request)?;
        let r = request.into_inner();
        let events = self.backgrounds.follow(&me, &r.id, r.after).await?;
        Ok(Response::new(ReceiverStream::new(events)))
    }

    async fn background_cancel(
        &self,
        request: Request<pb::BackgroundRef>,
    ) -> Reply<pb::BackgroundResponse> {
        let me = caller(&request)?;
        ok(self.backgrounds.cancel(&me, &request.into_inner().id).await)
    }

    async fn complete(
        &self,
        request: Request<pb::CompletionRequest>,
    ) -> Reply<Self::CompleteStream> {
        let me = caller(&request)?;
        let events = self.completer.start(&me, request.into_inner()).await?;
        Ok(Response::new(ReceiverStream::new(events)))
    }

    async fn control_message(&self, request: Request<pb::ControlRequest>) -> Reply<Empty> {
        let me = caller(&request)?;
        let pb::ControlRequest {
            question_id,
            action,
        } = request.into_inner();
        let action = Action::parse(&action).ok_or_else(|| {
            ApiError::bad_request(format!(
                "unknown action {action}: use pause, resume, stop or finish"
            ))
        })?;
        replies::question(&self.db, &me, &question_id).await?;
        // Only a reply being generated (on any replica) can be controlled; on the caller's
        // question whose reply is done, stopped or interrupted the call is a no-op that still
        // answers 204 (SPEC: "Each control call answers 204"; stop pressed as the reply
        // finishes is the everyday race, and the official client raises on a 404).
        if !limits::is_generating(&self.db, &question_id).await? {
            return Ok(Response::new(Empty {}));
        }
        control::send(
            &self.completer.controls,
            self.bus.as_ref(),
            &me,
            &question_id,
            action,
        )
        .await?;
        Ok(Response::new(Empty {}))
    }

    async fn get_message_meta(
        &self,
        request: Request<pb::MessageMetaRequest>,
    ) -> Reply<pb::MessageMetaList> {
        let me = caller(&request)?;
        let r = request.into_inner();
        ok(replies::meta(&self.db, &me, &r.message_id, &r.info_type)
            .await
            .map(|rows| pb::MessageMetaList {
                entries: rows
                    .into_iter()
                    .map(|m| pb::MessageMeta {
                        message_type: m.info_type,
                        content: m.content,
                    })
                    .collect(),
            }))
    }

    async fn list_references(&self, request: Request<pb::MessageRef>) -> Reply<pb::ReferenceList> {
        let me = caller(&request)?;
        ok(replies::references(&self.db, &me, &request.get_ref().id)
            .await
            .map(|rows| pb::ReferenceList {
                references: rows.into_iter().map(reference_pb).collect(),
            }))
    }

    async fn suggest_questions(
        &self,
        request: Request<pb::SuggestQuestionsRequest>,
    ) -> Reply<pb::SuggestedQuestionList> {
        let me = caller(&request)?;
        let r = request.into_inner();
        ok(
            replies::suggest(&self.db, &self.completer.gate, &me, &r.session_id, r.limit)
                .await
                .map(|questions| pb::SuggestedQuestionList { questions }),
        )
    }

    async fn create_session(
        &self,
        request: Request<pb::CreateSessionRequest>,
    ) -> Reply<pb::ChatSession> {
        let me = caller(&request)?;
        let collection = match request.into_inner().collection_id {
            Some(id) => Some(self.readable_collection(&me, id).await?),
            None => None,
        };
        let session = sessions::create(&self.db, &me, collection).await?;
        self.relay.notify();
        Ok(Response::new(session_pb(session)))
    }

    async fn list_sessions(&self, request: Request<PageRequest>) -> Reply<pb::ChatSessionList> {
        let me = caller(&request)?;
        let PageRequest { offset, limit, .. } = *request.get_ref();
        ok(sessions::list(&self.db, &me, None, offset, limit)
            .await
            .map(session_list))
    }

    async fn count_sessions(
        &self,
        request: Request<pb::CountSessionsRequest>,
    ) -> Reply<pb::SessionCount> {
        let me = caller(&request)?;
        let pb::CountSessionsRequest { collection_id } = request.into_inner();
        if let Some(id) = &collection_id {
            self.readable_collection(&me, id.clone()).await?;
        }
        ok(sessions::count(&self.db, &me, collection_id.as_deref())
            .await
            .map(|count| pb::SessionCount { count }))
    }

    async fn list_collection_sessions(
        &self,
        request: Request<pb::CollectionSessionsRequest>,
    ) -> Reply<pb::ChatSessionList> {
        let me = caller(&request)?;
        let pb::CollectionSessionsRequest {
            collection_id,
            offset,
            limit,
        } = request.into_inner();
        let collection = self.readable_collection(&me, collection_id).await?;
        ok(
            sessions::list(&self.db, &me, Some(&collection.id), offset, limit)
                .await
                .map(session_list),
        )
    }

    async fn list_document_sessions(
        &self,
        request: Request<pb::DocumentSessionsRequest>,
    ) -> Reply<pb::ChatSessionList> {
        let me = caller(&request)?;
        let pb::DocumentSessionsRequest {
            document_id,
            offset,
            limit: _,
        } = request.into_inner();
        // Whether the caller may read the document: ingest decides (NOT_FOUND else).
        let document = self
            .clients
            .ingest(&me)
            .get_document(DocumentRef { id: document_id })
            .await?
            .into_inner();
        // At most one session made a document: a page past it is empty, any limit holds it.
        let session = match document.chat_session_id {
            Some(id) if offset == 0 => sessions::find(&self.db, &me, &id).await?,
            _ => None,
        };
        Ok(Response::new(session_list(session.into_iter().collect())))
    }

    async fn update_session(
        &self,
        request: Request<pb::UpdateSessionRequest>,
    ) -> Reply<pb::ChatSession> {
        let me = caller(&request)?;
        let pb::UpdateSessionRequest { id, name } = request.into_inner();
        ok(sessions::rename(&self.db, &me, &id, &name)
            .await
            .map(session_pb))
    }

    async fn set_session_collection(
        &self,
        request: Request<pb::SetSessionCollectionRequest>,
    ) -> Reply<pb::ChatSession> {
        let me = caller(&request)?;
        let pb::SetSessionCollectionRequest { id, collection_id } = request.into_inner();
        let collection = match collection_id {
            Some(c) if c.trim().is_empty() => {
                return Err(ApiError::bad_request("collection_id must not be empty").into());
            }
            Some(c) => {
                // Another user's session is a 404 before anything is asked of ingest.
                sessions::get(&self.db, &me, &id).await?;
                Some(self.readable_collection(&me, c).await?)
            }
            None => None,
        };
        let session = sessions::set_collection(&self.db, &me, &id, collection).await?;
        self.relay.notify();
        Ok(Response::new(session_pb(session)))
    }

    async fn delete_messages(&self, request: Request<pb::MessageIds>) -> Reply<Empty> {
        let me = caller(&request)?;
        let pb::MessageIds { ids } = request.into_inner();
        sessions::delete_messages(&self.db, &me, &ids).await?;
        Ok(Response::new(Empty {}))
    }

    async fn get_session(&self, request: Request<pb::SessionRef>) -> Reply<pb::ChatSession> {
        let me = caller(&request)?;
        ok(sessions::get(&self.db, &me, &request.get_ref().id)
            .await
            .map(session_pb))
    }

    async fn session_names(&self, request: Request<pb::SessionIds>) -> Reply<pb::SessionNameList> {
        let me = caller(&request)?;
        ok(sessions::names(&self.db, &me, &request.get_ref().ids)
            .await
            .map(|rows| pb::SessionNameList {
                sessions: rows
                    .into_iter()
                    .map(|(id, name)| pb::SessionName { id, name })
                    .collect(),
            }))
    }

    async fn delete_session(&self, request: Request<pb::SessionRef>) -> Reply<pb::ChatSession> {
        let me = caller(&request)?;
        let deleted = sessions::delete(&self.db, &me, &request.get_ref().id).await?;
        self.relay.notify();
        Ok(Response::new(session_pb(deleted)))
    }

    async fn list_messages(
        &self,
        request: Request<pb::ListMessagesRequest>,
    ) -> Reply<pb::MessageList> {
        let me = caller(&request)?;
        let pb::ListMessagesRequest {
            session_id,
            offset,
            limit,
        } = request.into_inner();
        ok(
            sessions::messages(&self.db, &me, &session_id, offset, limit, self.page_bytes)
                .await
                .map(|page| pb::MessageList {
                    messages: page.rows.into_iter().map(message_pb).collect(),
                    size_limited: page.cut,
                }),
        )
    }

    async fn list_models(&self, request: Request<Empty>) -> Reply<pb::ModelList> {
        caller(&request)?;
        let models = self.completer.gate.models();
        let registry = models.registry();
        let default = registry.default_chat_model().map(|m| m.name.clone());
        Ok(Response::new(pb::ModelList {
            models: registry
                .chat_models()
                .map(|m| pb::Model {
                    id: m.name.clone(),
                    display_name: m.display_name().to_owned(),
                    base_model: m.base_model().to_owned(),
                    context_length: m.context_length,
                    input_price: m.input_price,
                    output_price: m.output_price,
                    vision: m.vision,
                    is_default: default.as_deref() == Some(m.name.as_str()),
                    provider: m.provider.clone(),
                    reasoning: m.reasoning,
                })
                .collect(),
            loaded_at: models.loaded_at(),
        }))
    }

    async fn compat_complete(&self, request: Request<pb::CompatRequest>) -> Reply<pb::CompatReply> {
        let caller = caller(&request)?;
        ok(self.compat.complete(&caller, request.into_inner()).await)
    }

    type CompatStreamStream = ChunkStream;

    async fn compat_stream(
        &self,
        request: Request<pb::CompatRequest>,
    ) -> Reply<Self::CompatStreamStream> {
        let caller = caller(&request)?;
        ok(self.compat.stream(&caller, request.into_inner()).await)
    }
}
