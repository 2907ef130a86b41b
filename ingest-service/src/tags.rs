//! Tags on documents. Tag names are unique across the deployment; a tag is changed or
//! deleted only by whoever created it, and applied only to documents the caller owns.

use std::collections::HashSet;

use docchat_common::Caller;
use docchat_common::error::{ApiError, ApiResult};
use docchat_common::time::now;
use sea_orm::sea_query::OnConflict;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, Condition, DatabaseConnection, EntityTrait, QueryFilter,
    QueryOrder, QuerySelect, Set, TransactionTrait,
};

use crate::entities::{collections, document_tags, documents, tags};

fn check_name(name: &str) -> ApiResult<&str> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > 255 {
        return Err(ApiError::bad_request("tag names are 1 to 255 characters"));
    }
    if name.contains(',') {
        return Err(ApiError::bad_request("tag names cannot contain commas"));
    }
    Ok(name)
}

fn not_found(name: &str) -> ApiError {
    ApiError::not_found(format!("tag {name} not found"))
}

pub async fn by_name(
    db: &impl sea_orm::ConnectionTrait,
    name: &str,
) -> ApiResult<Option<tags::Model>> {
    Ok(tags::Entity::find()
        .filter(tags::Column::Name.eq(name))
        .one(db)
        .await?)
}

pub async fn create(
    db: &DatabaseConnection,
    caller: &Caller,
    name: &str,
    description: Option<String>,
    format: Option<String>,
) -> ApiResult<tags::Model> {
    let name = check_name(name)?;
    if by_name(db, name).await?.is_some() {
        return Err(ApiError::conflict(format!("tag {name} already exists")));
    }
    Ok(tags::ActiveModel {
        id: Set(uuid::Uuid::new_v4().to_string()),
        name: Set(name.to_owned()),
        description: Set(description),
        format: Set(format),
        created_by: Set(caller.user_id.clone()),
        created_at: Set(now()),
    }
    .insert(db)
    .await?)
}

/// Ids of documents the caller can access: its own and those of public collections.
async fn accessible_documents(db: &DatabaseConnection, caller: &Caller) -> ApiResult<Vec<String>> {
    let public: Vec<String> = collections::Entity::find()
        .select_only()
        .column(collections::Column::Id)
        .filter(collections::Column::IsPublic.eq(true))
        .into_tuple()
        .all(db)
        .await?;
    Ok(documents::Entity::find()
        .select_only()
        .column(documents::Column::Id)
        .filter(
            Condition::any()
                .add(documents::Column::OwnerId.eq(caller.user_id.clone()))
                .add(documents::Column::CollectionId.is_in(public)),
        )
        .into_tuple()
        .all(db)
        .await?)
}

/// SPEC.md: `linked_only` keeps tags applied to at least one document; `user_scope` keeps
/// tags on documents the caller can access plus the caller's own tags, and with
/// `linked_only` drops the caller's own unlinked tags.
pub async fn list(
    db: &DatabaseConnection,
    caller: &Caller,
    linked_only: bool,
    user_scope: bool,
) -> ApiResult<Vec<tags::Model>> {
    let all = tags::Entity::find()
        .order_by_asc(tags::Column::Name)
        .all(db)
        .await?;
    if !linked_only && !user_scope {
        return Ok(all);
    }
    let linked: HashSet<String> = if user_scope {
        let docs = accessible_documents(db, caller).await?;
        document_tags::Entity::find()
            .filter(document_tags::Column::DocumentId.is_in(docs))
            .all(db)
            .await?
            .into_iter()
            .map(|l| l.tag_id)
            .collect()
    } else {
        document_tags::Entity::find()
            .all(db)
            .await?
            .into_iter()
            .map(|l| l.tag_id)
            .collect()
    };
    Ok(all
        .into_iter()
        .filter(|t| {
            linked.contains(&t.id) || (user_scope && !linked_only && t.created_by == caller.user_id)
        })
        .collect())
}

pub async fn get(db: &DatabaseConnection, name: &str) -> ApiResult<tags::Model> {
    by_name(db, name).await?.ok_or_else(|| not_found(name))
}

async fn owned(db: &DatabaseConnection, caller: &Caller, name: &str) -> ApiResult<tags::Model> {
    match by_name(db, name).await? {
        Some(t) if t.created_by == caller.user_id || caller.is_admin => Ok(t),
        _ => Err(not_found(name)),
    }
}

pub async fn update(
    db: &DatabaseConnection,
    caller: &Caller,
    name: &str,
    description: Option<String>,
    format: Option<String>,
) -> ApiResult<tags::Model> {
    let tag = owned(db, caller, name).await?;
    let mut active: tags::ActiveModel = tag.into();
    if let Some(d) = description {
        active.description = Set(Some(d));
    }
    if let Some(f) = format {
        active.format = Set(Some(f));
    }
    Ok(active.update(db).await?)
}

pub async fn delete(
    db: &DatabaseConnection,
    caller: &Caller,
    name: &str,
) -> ApiResult<tags::Model> {
    let tag = owned(db, caller, name).await?;
    let txn = db.begin().await?;
    document_tags::Entity::delete_many()
        .filter(document_tags::Column::TagId.eq(tag.id.clone()))
        .exec(&txn)
        .await?;
    tags::Entity::delete_by_id(tag.id.clone())
        .exec(&txn)
        .await?;
    txn.commit().await?;
    Ok(tag)
}

async fn owned_document(
    db: &DatabaseConnection,
    caller: &Caller,
    document_id: &str,
) -> ApiResult<documents::Model> {
    documents::Entity::find_by_id(document_id.to_owned())
        .filter(documents::Column::OwnerId.eq(caller.user_id.clone()))
        .one(db)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("document {document_id} not found")))
}

/// Applies a tag (created on first use) to a document the caller owns.
pub async fn tag_document(
    db: &DatabaseConnection,
    caller: &Caller,
    document_id: &str,
    name: &str,
) -> ApiResult<tags::Model> {
    let name = check_name(name)?;
    owned_document(db, caller, document_id).await?;
    let txn = db.begin().await?;
    let tag = match by_name(&txn, name).await? {
        Some(t) => t,
        None => {
            tags::ActiveModel {
                id: Set(uuid::Uuid::new_v4().to_string()),
                name: Set(name.to_owned()),
                description: Set(None),
                format: Set(None),
                created_by: Set(caller.user_id.clone()),
                created_at: Set(now()),
            }
            .insert(&txn)
            .await?
        }
    };
    document_tags::Entity::insert(document_tags::ActiveModel {
        document_id: Set(document_id.to_owned()),
        tag_id: Set(tag.id.clone()),
    })
    .on_conflict(
        OnConflict::columns([
            document_tags::Column::DocumentId,
            document_tags::Column::TagId,
        ])
        .do_nothing()
        .to_owned(),
    )
    .do_nothing()
    .exec(&txn)
    .await?;
    txn.commit().await?;
    Ok(tag)
}

pub async fn untag_document(
    db: &DatabaseConnection,
    caller: &Caller,
    document_id: &str,
    name: &str,
) -> ApiResult<tags::Model> {
    owned_document(db, caller, document_id).await?;
    let tag = get(db, name).await?;
    let removed = document_tags::Entity::delete_many()
        .filter(document_tags::Column::DocumentId.eq(document_id))
        .filter(document_tags::Column::TagId.eq(tag.id.clone()))
        .exec(db)
        .await?;
    if removed.rows_affected == 0 {
        return Err(ApiError::not_found(format!(
            "document {document_id} has no tag {name}"
        )));
    }
    Ok(tag)
}

/// Readable documents carrying any of the tags.
pub async fn documents_for_tags(
    db: &DatabaseConnection,
    caller: &Caller,
    names: &[String],
    collection_id: Option<&str>,
) -> ApiResult<Vec<documents::Model>> {
    let tag_ids: Vec<String> = tags::Entity::find()
        .filter(tags::Column::Name.is_in(names.iter().cloned()))
        .all(db)
        .await?
        .into_iter()
        .map(|t| t.id)
        .collect();
    let doc_ids: HashSet<String> = document_tags::Entity::find()
        .filter(document_tags::Column::TagId.is_in(tag_ids))
        .all(db)
        .await?
        .into_iter()
        .map(|l| l.document_id)
        .collect();
    let accessible: HashSet<String> = accessible_documents(db, caller)
        .await?
        .into_iter()
        .collect();
    let wanted: Vec<String> = doc_ids.intersection(&accessible).cloned().collect();
    let mut q = documents::Entity::find().filter(documents::Column::Id.is_in(wanted));
    if let Some(cid) = collection_id {
        q = q.filter(documents::Column::CollectionId.eq(cid));
    }
    Ok(q.order_by_asc(documents::Column::Name).all(db).await?)
}

/// Removes a deleted document's tag links.
pub async fn forget_document<C: sea_orm::ConnectionTrait>(
    conn: &C,
    document_id: &str,
) -> ApiResult<()> {
    document_tags::Entity::delete_many()
        .filter(document_tags::Column::DocumentId.eq(document_id))
        .exec(conn)
        .await?;
    Ok(())
}
