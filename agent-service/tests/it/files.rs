//! A run's files become documents of the session's owner (ingest-service), any replica
//! restores a session's workspace from them, and the collection's documents are readable
//! but not writable by the run's code. Both backends, real gRPC, a scripted upstream.

use docchat_common::Caller;
use docchat_common::config::Service;
use docchat_common::testing::{ScriptedCall, ScriptedHttp, ScriptedTurn, user};
use docchat_proto::agent::v1 as pb;
use docchat_proto::agent::v1::agent_service_client::AgentServiceClient;
use docchat_proto::agent::v1::run_event::Event;
use docchat_proto::ingest::v1 as ingest;
use serde_json::json;
use tokio_stream::StreamExt;
use tonic::Code;

use crate::run::{Agents, events_until_finished, start, tool_messages};

/// The session's documents as ingest lists them: (id, name, size).
async fn session_documents(
    agents: &Agents,
    who: &Caller,
    session: &str,
) -> Vec<(String, String, i64)> {
    let mut docs: Vec<(String, String, i64)> = agents
        .stack()
        .ingest_client()
        .list_documents(agents.req(
            who,
            Service::Ingest,
            ingest::ListDocumentsRequest {
                chat_session_id: Some(session.into()),
                ..Default::default()
            },
        ))
        .await
        .unwrap()
        .into_inner()
        .documents
        .into_iter()
        .map(|d| (d.id, d.name, d.size))
        .collect();
    docs.sort();
    docs
}

/// The session's files as agent-service lists them for `who`.
async fn session_files(
    agents: &Agents,
    who: &Caller,
    session: &str,
) -> Result<Vec<pb::SessionFile>, tonic::Status> {
    AgentServiceClient::new(agents.agent().channel())
        .list_session_files(agents.req(
            who,
            Service::Agent,
            pb::SessionRef {
                session_id: session.into(),
            },
        ))
        .await
        .map(|r| r.into_inner().files)
}

/// A document's bytes, as its owner reads them.
async fn document_bytes(agents: &Agents, who: &Caller, id: &str) -> Vec<u8> {
    let mut stream = agents
        .stack()
        .ingest_client()
        .read_document_bytes(agents.req(
            who,
            Service::Ingest,
            ingest::ReadDocumentBytesRequest {
                id: id.into(),
                owned_only: true,
            },
        ))
        .await
        .unwrap()
        .into_inner();
    let mut bytes = Vec::new();
    while let Some(piece) = stream.next().await {
        if let Some(ingest::document_bytes::Part::Data(d)) = piece.unwrap().part {
            bytes.extend(d);
        }
    }
    bytes
}

fn files_of(f: &[pb::AgentFile]) -> Vec<(&str, &str)> {
    f.iter()
        .map(|f| (f.name.as_str(), f.document_id.as_str()))
        .collect()
}

fn run_start(session: &str, question: &str, n: u32) -> pb::RunStart {
    pb::RunStart {
        question_id: format!("q{n}-{session}"),
        ..start(
            session,
            question,
            json!({"agent_tools": ["write_file", "read_file"]}),
        )
    }
}

docchat_common::backend_tests! {
    /// Files past the workspace's disk quota are not stored (in path order), and the reply
    /// says which; write_file refuses a file that would pass it.
    async fn files_past_the_workspace_quota_are_not_stored(backend) {
        let upstream = ScriptedHttp::chat_turns(vec![
            ScriptedTurn::calls(vec![ScriptedCall::new(
                "c1",
                "write_file",
                json!({"path": "c.txt", "content": "x".repeat(400 * 1024)}),
            )]),
            ScriptedTurn::text("Written."),
        ])
        .await;
        let agents = Agents::with_ingest_and(&backend, &upstream, |c| c.workspace_quota_mb = 1).await;
        let alice = user("alice", false);
        let session = docchat_common::ids::new_id();
        // Files the run did not write, as a killed run's would be: past the quota together.
        let dir = agents.workspace(&session);
        std::fs::create_dir_all(&dir).unwrap();
        for name in ["a.txt", "b.txt"] {
            std::fs::write(dir.join(name), vec![b'x'; 700 * 1024]).unwrap();
        }
        let (_tx, mut events) = agents.run_on(agents.agent(), &alice, run_start(&session, "Write", 1)).await;
        let (_, finished) = events_until_finished(&mut events).await;
        assert!(!finished.failed, "{}: {}", backend.name, finished.stop_reason);
        let stored: Vec<&str> = finished.files.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(stored, ["a.txt"], "{}: {:?}", backend.name, finished.text);
        assert!(
            finished.text.contains("b.txt: not stored (the workspace is past its disk quota of 1 MiB)"),
            "{}: {:?}",
            backend.name,
            finished.text
        );
        let told = tool_messages(&upstream.bodies()[1]).join("\n");
        assert!(
            told.contains("c.txt was not written: it would pass the workspace's disk quota of 1 MiB"),
            "{}: {told}",
            backend.name
        );
        assert!(!dir.join("c.txt").exists(), "{}", backend.name);
        agents.stop().await;
    }

    /// One user's workspaces together hold at most DOCCHAT_USER_DISK_QUOTA_MB: a file that
    /// fits its own workspace but not the user's total is refused, and another user's is
    /// not counted.
    async fn a_users_workspaces_together_keep_to_the_users_disk_quota(backend) {
        let write = |id: &str| {
            vec![
                ScriptedTurn::calls(vec![ScriptedCall::new(
                    id,
                    "write_file",
                    json!({"path": "data.txt", "content": "x".repeat(700 * 1024)}),
                )]),
                ScriptedTurn::text("Done."),
            ]
        };
        let upstream = ScriptedHttp::chat_turns([write("c1"), write("c2"), write("c3")].concat()).await;
        let agents = Agents::with_ingest_and(&backend, &upstream, |c| c.user_disk_quota_mb = 1).await;
        let (alice, bob) = (user("alice", false), user("bob", false));
        let first = docchat_common::ids::new_id();
        let second = docchat_common::ids::new_id();
        let others = docchat_common::ids::new_id();
        for (n, (who, session)) in [(&alice, &first), (&alice, &second), (&bob, &others)].into_iter().enumerate() {
            let (_tx, mut events) = agents
                .run_on(agents.agent(), who, run_start(session, "Write", n as u32))
                .await;
            let (_, finished) = events_until_finished(&mut events).await;
            assert!(!finished.failed, "{}: {}", backend.name, finished.stop_reason);
        }
        let bodies = upstream.bodies();
        let told: Vec<String> = [1, 3, 5].iter().map(|&i| tool_messages(&bodies[i]).join("\n")).collect();
        assert!(told[0].starts_with("wrote 716800 bytes"), "{}: {}", backend.name, told[0]);
        assert!(
            told[1].contains("data.txt was not written: it would pass your disk quota of 1 MiB for all your sessions' workspaces together"),
            "{}: {}",
            backend.name,
            told[1]
        );
        assert!(told[2].starts_with("wrote 716800 bytes"), "another user's: {}: {}", backend.name, told[2]);
        assert!(agents.workspace(&first).join("data.txt").exists());
        assert!(!agents.workspace(&second).join("data.txt").exists());
        agents.stop().await;
    }
}

docchat_common::backend_tests! {
    async fn a_runs_files_become_documents_that_any_replica_restores(backend) {
        let upstream = ScriptedHttp::chat_turns(vec![
            // Run 1 (replica A): writes the report.
            ScriptedTurn::calls(vec![ScriptedCall::new(
                "c1",
                "write_file",
                json!({"path": "out/report.md", "content": "# Findings\nforty-two"}),
            )]),
            ScriptedTurn::text("Written."),
            // Run 2 (replica B, an empty disk): reads it, then rewrites it.
            ScriptedTurn::calls(vec![ScriptedCall::new(
                "c2",
                "read_file",
                json!({"path": "out/report.md"}),
            )]),
            ScriptedTurn::calls(vec![ScriptedCall::new(
                "c3",
                "write_file",
                json!({"path": "out/report.md", "content": "# Findings\nforty-three"}),
            )]),
            ScriptedTurn::text("Rewritten."),
            // Run 3 (replica A again, whose copy is stale): reads it.
            ScriptedTurn::calls(vec![ScriptedCall::new(
                "c4",
                "read_file",
                json!({"path": "out/report.md"}),
            )]),
            ScriptedTurn::text("Read."),
        ])
        .await;
        let agents = Agents::with_ingest(&backend, &upstream).await;
        let other_disk = tempfile::tempdir().unwrap();
        let replica_b = agents.replica_with_own_disk(other_disk.path()).await;
        let alice = user("alice", false);
        let bob = user("bob", false);
        let session = docchat_common::ids::new_id();

        // Run 1: the file is announced as it is stored and is the turn's file.
        let (_tx, mut events) = agents.run_on(agents.agent(), &alice, run_start(&session, "Write it", 1)).await;
        let (seen, finished) = events_until_finished(&mut events).await;
        assert!(!finished.failed, "{}: {}", backend.name, finished.stop_reason);
        let announced: Vec<&pb::AgentFile> = seen
            .iter()
            .filter_map(|e| match e { Event::File(f) => Some(f), _ => None })
            .collect();
        assert_eq!(announced.len(), 1, "{}: {seen:?}", backend.name);
        let doc_id = announced[0].document_id.clone();
        assert_eq!(files_of(&finished.files), [("out/report.md", doc_id.as_str())], "{}", backend.name);
        assert!(finished.files_old.is_empty(), "{}", backend.name);
        assert!(
            finished.text == format!("[out/report.md](/file?id={doc_id}&name=report.md)\n\nWritten."),
            "{}: the file is linked as it is stored: {:?}",
            backend.name,
            finished.text
        );
        assert_eq!(
            session_documents(&agents, &alice, &session).await,
            [(doc_id.clone(), "out/report.md".to_owned(), 20)],
            "{}: the file is alice's document of the session",
            backend.name
        );
        assert_eq!(document_bytes(&agents, &alice, &doc_id).await, b"# Findings\nforty-two");
        assert!(session_documents(&agents, &bob, &session).await.is_empty(), "{}", backend.name);

        // Replica B's disk never saw the file, yet its directory stats (of the session and of
        // the file's folder) count it: a stored file is the session's on every replica.
        let stats_on_b = |directory: Option<&str>| {
            let request = agents.req(
                &alice,
                Service::Agent,
                pb::DirectoryStatsRequest {
                    session_id: session.clone(),
                    detail_level: 1,
                    directory: directory.map(str::to_owned),
                },
            );
            let mut client = AgentServiceClient::new(replica_b.channel());
            async move { client.session_directory_stats(request).await.unwrap().into_inner().directories.remove(0) }
        };
        let whole = stats_on_b(None).await;
        assert_eq!((whole.file_count, whole.directory_count, whole.size_bytes), (1, 1, 20), "{}: {whole:?}", backend.name);
        assert_eq!(whole.top_level_contents, ["out"]);
        assert_eq!(whole.files.iter().map(|f| f.path.as_str()).collect::<Vec<_>>(), ["out/report.md"]);
        let folder = stats_on_b(Some("out")).await;
        assert_eq!((folder.file_count, folder.size_bytes), (1, 20), "{}: {folder:?}", backend.name);
        assert_eq!(folder.top_level_contents, ["report.md"]);
        // And so do its global stats (the manifests of a page of sessions, read at once).
        let mut client = AgentServiceClient::new(replica_b.channel());
        let global = client
            .global_directory_stats(agents.req(&alice, Service::Agent, pb::GlobalDirectoryStatsRequest::default()))
            .await
            .unwrap()
            .into_inner();
        let listed: Vec<_> = global
            .sessions
            .iter()
            .map(|s| (s.session_id.as_str(), s.stats[0].file_count, s.stats[0].size_bytes))
            .collect();
        assert_eq!(listed, [(session.as_str(), 1, 20)], "{}: {global:?}", backend.name);

        // Run 2 on replica B: its disk never saw the file, the run reads it all the same,
        // and the rewritten file keeps its document.
        let (_tx, mut events) = agents.run_on(&replica_b, &alice, run_start(&session, "Rewrite it", 2)).await;
        let (_, finished) = events_until_finished(&mut events).await;
        assert!(!finished.failed, "{}: {}", backend.name, finished.stop_reason);
        let read_back = tool_messages(&upstream.bodies()[3]);
        assert!(read_back[0].contains("forty-two"), "{}: restored on B: {read_back:?}", backend.name);
        assert_eq!(files_of(&finished.files), [("out/report.md", doc_id.as_str())], "{}", backend.name);
        assert!(finished.files_old.is_empty(), "{}", backend.name);
        assert_eq!(document_bytes(&agents, &alice, &doc_id).await, b"# Findings\nforty-three");
        assert_eq!(session_documents(&agents, &alice, &session).await.len(), 1, "{}", backend.name);

        // Run 3 on replica A: its stale copy is brought up to date; the file is an earlier
        // turn's now.
        let (_tx, mut events) = agents.run_on(agents.agent(), &alice, run_start(&session, "Read it", 3)).await;
        let (_, finished) = events_until_finished(&mut events).await;
        let read_back = tool_messages(&upstream.bodies()[6]);
        assert!(read_back[0].contains("forty-three"), "{}: A's copy refreshed: {read_back:?}", backend.name);
        assert!(finished.files.is_empty(), "{}", backend.name);
        assert_eq!(files_of(&finished.files_old), [("out/report.md", doc_id.as_str())], "{}", backend.name);

        // The session's files are named by their documents; bob sees none of them.
        let mut client = AgentServiceClient::new(agents.agent().channel());
        let listed = session_files(&agents, &alice, &session).await.unwrap();
        assert_eq!(listed.len(), 1, "{}: {listed:?}", backend.name);
        assert_eq!((listed[0].id.as_str(), listed[0].filename.as_str()), (doc_id.as_str(), "out/report.md"));
        let err = session_files(&agents, &bob, &session).await.unwrap_err();
        assert_eq!(err.code(), Code::NotFound, "{}", backend.name);

        // Deleting the session's files deletes their documents, and a later run on B does
        // not bring them back.
        client
            .delete_session_files(agents.req(&alice, Service::Agent, pb::SessionRef { session_id: session.clone() }))
            .await
            .unwrap();
        assert!(session_documents(&agents, &alice, &session).await.is_empty(), "{}", backend.name);
        let listed = session_files(&agents, &alice, &session).await.unwrap();
        assert!(listed.is_empty(), "{}: {listed:?}", backend.name);
        replica_b.stop().await.unwrap();
        agents.stop().await;
    }

    async fn code_reads_the_collections_documents_but_cannot_change_them(backend) {
        let code = "import os\n\
            text = open('/documents/ledger.md.txt').read()\n\
            print('TEXT', text)\n\
            print('ORIGINAL', open('/documents/ledger.md').read().strip())\n\
            try:\n    open('/documents/ledger.md', 'a').write('forged')\n    print('WROTE')\n\
            except OSError as e:\n    print('REFUSED', e.errno)\n\
            try:\n    open('/documents/new.txt', 'w').write('x')\n    print('CREATED')\n\
            except OSError as e:\n    print('REFUSED', e.errno)\n";
        let upstream = ScriptedHttp::chat_turns(vec![
            ScriptedTurn::calls(vec![ScriptedCall::new("c1", "python", json!({"code": code}))]),
            ScriptedTurn::text("The ledger balances."),
        ])
        .await;
        let agents = Agents::with_ingest(&backend, &upstream).await;
        let alice = user("alice", false);
        let mut client = AgentServiceClient::new(agents.agent().channel());
        let tools = client
            .list_tools(agents.req(&alice, Service::Agent, docchat_proto::common::v1::Empty {}))
            .await
            .unwrap()
            .into_inner()
            .tools;
        if !tools.iter().any(|t| t.name == "python" && t.enabled) {
            docchat_common::testing::unavailable("the agent's python tool: no sandbox on this host (scripts/sandbox-runtime.sh installs bubblewrap)");
            agents.stop().await;
            return;
        }
        let stack = agents.stack();
        let collection = stack.collection(&alice, "books").await;
        let upload = stack
            .upload(&alice, "ledger.md", b"# Ledger\n\nThe ledger balances at 1234 crowns.\n")
            .await
            .unwrap();
        let job = stack.ingest(&alice, &upload.id, &collection.id).await.unwrap();
        let job = stack.finished(&alice, &job.id).await;
        assert_eq!(job.status, "completed", "{}: {job:?}", backend.name);

        let session = docchat_common::ids::new_id();
        let (_tx, mut events) = agents
            .run_on(
                agents.agent(),
                &alice,
                pb::RunStart {
                    collection_id: collection.id.clone(),
                    rag_kind: pb::RagKind::Rlm as i32,
                    ..start(&session, "Does the ledger balance?", json!({"agent_tools": ["python"]}))
                },
            )
            .await;
        let (_, finished) = events_until_finished(&mut events).await;
        assert!(!finished.failed, "{}: {}", backend.name, finished.stop_reason);
        let bodies = upstream.bodies();
        let system = bodies[0]["messages"][0]["content"].as_str().unwrap_or_default().to_owned();
        assert!(system.contains("/documents"), "{}: the prompt says where: {system}", backend.name);
        let out = tool_messages(&bodies[1]).join("\n");
        assert!(out.contains("--- page 1 ---"), "{}: the text has page markers: {out}", backend.name);
        assert!(out.contains("1234 crowns"), "{}: {out}", backend.name);
        assert!(out.contains("ORIGINAL # Ledger"), "{}: {out}", backend.name);
        assert!(!out.contains("WROTE") && !out.contains("CREATED"), "{}: the documents are read-only: {out}", backend.name);
        assert_eq!(out.matches("REFUSED").count(), 2, "{}: {out}", backend.name);
        // Nothing of the collection became a file of the session.
        assert!(finished.files.is_empty(), "{}: {:?}", backend.name, finished.files);
        // The run was counted: one python call, one sandbox start and one whole run, ok.
        use docchat_common::metrics::sample;
        assert_eq!(sample("docchat_agent_tool_calls_total", &[("tool", "python"), ("outcome", "ok")]), 1.0, "{}", backend.name);
        assert_eq!(sample("docchat_sandbox_start_seconds", &[]), 1.0, "{}", backend.name);
        assert_eq!(sample("docchat_sandbox_run_seconds", &[("outcome", "ok")]), 1.0, "{}", backend.name);
        assert_eq!(sample("docchat_sandbox_run_seconds", &[]), 1.0, "{}: no other run", backend.name);
        assert_eq!(sample("docchat_agent_runs_total", &[("outcome", "ok")]), 1.0, "{}", backend.name);
        agents.stop().await;
    }

    async fn deleting_the_chat_session_removes_its_workspace_on_every_replica(backend) {
        let upstream = ScriptedHttp::chat_turns(vec![
            ScriptedTurn::calls(vec![ScriptedCall::new("c1", "write_file", json!({"path": "a.txt", "content": "one"}))]),
            ScriptedTurn::text("A."),
            ScriptedTurn::calls(vec![ScriptedCall::new("c2", "write_file", json!({"path": "b.txt", "content": "two"}))]),
            ScriptedTurn::text("B."),
        ])
        .await;
        let agents = Agents::with_ingest(&backend, &upstream).await;
        let other_disk = tempfile::tempdir().unwrap();
        let replica_b = agents.replica_with_own_disk(other_disk.path()).await;
        let alice = user("alice", false);
        let stack = agents.stack();
        let session = stack.session(stack.chat(), &alice).await;
        for (replica, n) in [(agents.agent(), 1), (&replica_b, 2)] {
            let (_tx, mut events) = agents.run_on(replica, &alice, run_start(&session, "Write", n)).await;
            let (_, finished) = events_until_finished(&mut events).await;
            assert!(!finished.failed, "{}: {}", backend.name, finished.stop_reason);
        }
        let on_b = other_disk.path().join("agent/workspaces").join(&session);
        assert!(agents.workspace(&session).join("a.txt").is_file(), "{}", backend.name);
        assert!(on_b.join("a.txt").is_file() && on_b.join("b.txt").is_file(), "{}", backend.name);

        stack
            .chat_client(stack.chat())
            .delete_session(stack.req(Service::Chat, &alice, docchat_proto::chat::v1::SessionRef { id: session.clone() }))
            .await
            .unwrap();
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
        while agents.workspace(&session).exists() || on_b.exists() {
            assert!(tokio::time::Instant::now() < deadline, "{}: the workspaces are still there", backend.name);
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        // The records went too; the documents stay (their session is gone, not them).
        loop {
            let listed = session_files(&agents, &alice, &session).await.unwrap();
            if listed.is_empty() {
                break;
            }
            assert!(tokio::time::Instant::now() < deadline, "{}: {listed:?}", backend.name);
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        assert_eq!(session_documents(&agents, &alice, &session).await.len(), 2, "{}", backend.name);
        replica_b.stop().await.unwrap();
        agents.stop().await;
    }

    async fn a_deletion_of_a_sessions_files_holds_the_session_on_every_replica(backend) {
        let upstream = ScriptedHttp::chat_turns(vec![]).await;
        let agents = Agents::start(&backend, &upstream).await;
        let db = agents.stack().database(Service::Agent).await;
        use docchat_agent_service::workspaces::{begin_deletion, end_deletion};
        begin_deletion(&db, "s1").await.unwrap();
        let again = begin_deletion(&db, "s1").await.unwrap_err();
        assert_eq!(tonic::Status::from(again).code(), Code::AlreadyExists, "{}", backend.name);
        begin_deletion(&db, "s2").await.expect("other sessions are free");
        end_deletion(&db, "s1").await.unwrap();
        begin_deletion(&db, "s1").await.expect("the deletion ended");
        agents.stop().await;
    }
}
