//! The migration to tags per user keeps every tag and link of a database written under one
//! namespace for all users: a document that carried another user's tag carries a tag of
//! its owner with that name instead.

use docchat_ingest_service::entities::{document_tags, documents, tags};
use docchat_ingest_service::migrations::Migrator;
use sea_orm::{ActiveModelTrait, EntityTrait, QueryOrder, Set};
use sea_orm_migration::MigratorTrait;

/// Migrations before tags per user: the outbox, collections, documents, tags.
const BEFORE: u32 = 4;

fn document(id: &str, owner: &str) -> documents::ActiveModel {
    let at = chrono::Utc::now();
    documents::ActiveModel {
        id: Set(id.into()),
        owner_id: Set(owner.into()),
        owner_username: Set(owner.into()),
        collection_id: Set(format!("c-{owner}")),
        name: Set(format!("{id}.txt")),
        kind: Set("text".into()),
        size: Set(1),
        page_count: Set(1),
        status: Set("completed".into()),
        upload_id: Set(None),
        chat_session_id: Set(None),
        summary: Set(None),
        questions: Set(None),
        segments: Set(None),
        created_at: Set(at),
        updated_at: Set(at),
        // Later migrations' columns are not there yet.
        ..Default::default()
    }
}

fn tag(id: &str, name: &str, by: &str) -> tags::ActiveModel {
    tags::ActiveModel {
        id: Set(id.into()),
        name: Set(name.into()),
        description: Set(Some(format!("{name} of {by}"))),
        format: Set(Some("text".into())),
        created_by: Set(by.into()),
        created_at: Set(chrono::Utc::now()),
    }
}

fn link(document_id: &str, tag_id: &str) -> document_tags::ActiveModel {
    document_tags::ActiveModel {
        document_id: Set(document_id.into()),
        tag_id: Set(tag_id.into()),
    }
}

docchat_common::backend_tests! {
    /// Alice's tag x on Bob's document becomes Bob's own x there; Alice keeps hers; a
    /// link to a document that is gone is dropped; names are then unique per user.
    async fn tags_of_one_namespace_move_to_their_owners(backend) {
        let dir = tempfile::tempdir().unwrap();
        let db = docchat_common::db::connect(&backend.database_url(dir.path(), "ingest"))
            .await
            .unwrap();
        Migrator::up(&db, Some(BEFORE)).await.unwrap();
        // Without reading the rows back: later migrations' columns are not there yet.
        for d in [document("a1", "alice"), document("b1", "bob")] {
            documents::Entity::insert(d).exec_without_returning(&db).await.unwrap();
        }
        tag("t1", "x", "alice").insert(&db).await.unwrap();
        tag("t2", "y", "bob").insert(&db).await.unwrap();
        for (d, t) in [("a1", "t1"), ("b1", "t1"), ("b1", "t2"), ("gone", "t2")] {
            link(d, t).insert(&db).await.unwrap();
        }

        Migrator::up(&db, None).await.unwrap();
        let all = tags::Entity::find()
            .order_by_asc(tags::Column::CreatedBy)
            .order_by_asc(tags::Column::Name)
            .all(&db)
            .await
            .unwrap();
        let owned: Vec<(&str, &str, Option<&str>)> = all
            .iter()
            .map(|t| (t.created_by.as_str(), t.name.as_str(), t.description.as_deref()))
            .collect();
        assert_eq!(
            owned,
            [
                ("alice", "x", Some("x of alice")),
                ("bob", "x", Some("x of alice")),
                ("bob", "y", Some("y of bob")),
            ],
            "{}",
            backend.name
        );
        let bobs_x = &all[1];
        let mut links: Vec<(String, String)> = document_tags::Entity::find()
            .all(&db)
            .await
            .unwrap()
            .into_iter()
            .map(|l| (l.document_id, l.tag_id))
            .collect();
        links.sort();
        assert_eq!(
            links,
            [
                ("a1".to_owned(), "t1".to_owned()),
                ("b1".to_owned(), bobs_x.id.clone()),
                ("b1".to_owned(), "t2".to_owned()),
            ]
        );

        // Unique per user, no longer across users; links still cascade with their tag.
        assert!(tag("t3", "x", "alice").insert(&db).await.is_err());
        tag("t4", "x", "carol").insert(&db).await.unwrap();
        tags::Entity::delete_by_id("t2").exec(&db).await.unwrap();
        assert_eq!(document_tags::Entity::find().all(&db).await.unwrap().len(), 2);
        db.close().await.unwrap();
    }
}
