//! Tags on documents. A tag belongs to the user who created it (`created_by`): names are
//! unique per user, and a user names, changes, deletes and applies only its own tags —
//! applied only to documents it owns. Another user's tag shows only where it is applied:
//! on a document the caller can read.

use std::collections::HashSet;

use docchat_common::Caller;
use docchat_common::error::{ApiError, ApiResult};
use docchat_common::limits;
use docchat_common::time::now;
use sea_orm::sea_query::OnConflict;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, Condition, DatabaseConnection, EntityTrait, QueryFilter,
    QueryOrder, QuerySelect, Set,
};

use crate::entities::{collections, document_tags, documents, tags};

fn check_name(name: &str) -> ApiResult<&str> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > limits::NAME_CHARS {
        return Err(ApiError::bad_request(format!(
            "tag names are 1 to {} characters",
            limits::NAME_CHARS
        )));
    }
    if name.contains(',') {
        return Err(ApiError::bad_request("tag names cannot contain commas"));
    }
    Ok(name)
}

/// The ceilings of docchat_common::limits on a tag's description and format (413).
fn check_text(description: Option<&String>, format: Option<&String>) -> ApiResult<()> {
    if let Some(d) = description {
        limits::check_text("description", d)?;
    }
    if let Some(f) = format {
        limits::check_text("format", f)?;
    }
    Ok(())
}

fn not_found(name: &str) -> ApiError {
    ApiError::not_found(format!("tag {name} not found"))
}

/// The caller's own tag named `name`.
async fn own(
    db: &impl sea_orm::ConnectionTrait,
    caller: &Caller,
    name: &str,
) -> ApiResult<Option<tags::Model>> {
    Ok(tags::Entity::find()
        .filter(tags::Column::CreatedBy.eq(caller.user_id.clone()))
        .filter(tags::Column::Name.eq(name))
        .one(db)
        .await?)
}

fn new_tag(
    caller: &Caller,
    name: &str,
    description: Option<String>,
    format: Option<String>,
) -> tags::Model {
    tags::Model {
        id: docchat_common::ids::new_id(),
        name: name.to_owned(),
        description,
        format,
        created_by: caller.user_id.clone(),
        created_at: now(),
    }
}

/// Inserts `tag` unless its creator has one of that name (then 0): one statement, so two
/// requests naming the same new tag at once cannot both insert it.
async fn insert_new(db: &impl sea_orm::ConnectionTrait, tag: &tags::Model) -> ApiResult<u64> {
    let active: tags::ActiveModel = tag.clone().into();
    Ok(tags::Entity::insert(active)
        .on_conflict(
            OnConflict::columns([tags::Column::CreatedBy, tags::Column::Name])
                .do_nothing()
                .to_owned(),
        )
        .exec_without_returning(db)
        .await?)
}

pub async fn create(
    db: &DatabaseConnection,
    caller: &Caller,
    name: &str,
    description: Option<String>,
    format: Option<String>,
) -> ApiResult<tags::Model> {
    check_text(description.as_ref(), format.as_ref())?;
    let tag = new_tag(caller, check_name(name)?, description, format);
    if insert_new(db, &tag).await? == 0 {
        return Err(ApiError::conflict(format!(
            "you already have a tag {}",
            tag.name
        )));
    }
    Ok(tag)
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

/// Ids of the tags applied to documents the caller can read.
async fn on_readable(db: &DatabaseConnection, caller: &Caller) -> ApiResult<HashSet<String>> {
    let docs = accessible_documents(db, caller).await?;
    Ok(document_tags::Entity::find()
        .filter(document_tags::Column::DocumentId.is_in(docs))
        .all(db)
        .await?
        .into_iter()
        .map(|l| l.tag_id)
        .collect())
}

/// Tags the caller can see: its own, and those applied to documents it can read.
/// SPEC.md: `linked_only` keeps tags applied to at least one document (of those the
/// caller can read), and so drops the caller's unlinked tags; `user_scope` keeps tags on
/// documents the caller can read plus the caller's own — which, since nobody sees other
/// users' tags anywhere else, is every tag the caller sees.
pub async fn list(
    db: &DatabaseConnection,
    caller: &Caller,
    linked_only: bool,
) -> ApiResult<Vec<tags::Model>> {
    let mut visible = Condition::any().add(tags::Column::Id.is_in(on_readable(db, caller).await?));
    if !linked_only {
        visible = visible.add(tags::Column::CreatedBy.eq(caller.user_id.clone()));
    }
    Ok(tags::Entity::find()
        .filter(visible)
        .order_by_asc(tags::Column::Name)
        .order_by_asc(tags::Column::CreatedAt)
        .all(db)
        .await?)
}

/// The caller's tag `name`, else a tag of that name on a document the caller can read.
pub async fn get(db: &DatabaseConnection, caller: &Caller, name: &str) -> ApiResult<tags::Model> {
    if let Some(tag) = own(db, caller, name).await? {
        return Ok(tag);
    }
    tags::Entity::find()
        .filter(tags::Column::Name.eq(name))
        .filter(tags::Column::Id.is_in(on_readable(db, caller).await?))
        .order_by_asc(tags::Column::CreatedAt)
        .one(db)
        .await?
        .ok_or_else(|| not_found(name))
}

async fn owned(db: &DatabaseConnection, caller: &Caller, name: &str) -> ApiResult<tags::Model> {
    own(db, caller, name).await?.ok_or_else(|| not_found(name))
}

pub async fn update(
    db: &DatabaseConnection,
    caller: &Caller,
    name: &str,
    description: Option<String>,
    format: Option<String>,
) -> ApiResult<tags::Model> {
    check_text(description.as_ref(), format.as_ref())?;
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

/// Deletes one of the caller's tags and its links (all on the caller's documents).
pub async fn delete(
    db: &DatabaseConnection,
    caller: &Caller,
    name: &str,
) -> ApiResult<tags::Model> {
    let tag = owned(db, caller, name).await?;
    let txn = docchat_common::db::begin(db).await?;
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

/// Applies one of the caller's tags (created on first use) to a document the caller owns.
pub async fn tag_document(
    db: &DatabaseConnection,
    caller: &Caller,
    document_id: &str,
    name: &str,
    description: Option<String>,
    format: Option<String>,
) -> ApiResult<tags::Model> {
    let name = check_name(name)?;
    check_text(description.as_ref(), format.as_ref())?;
    owned_document(db, caller, document_id).await?;
    let txn = docchat_common::db::begin(db).await?;
    let created = insert_new(
        &txn,
        &new_tag(caller, name, description.clone(), format.clone()),
    )
    .await?
        > 0;
    let mut tag = own(&txn, caller, name)
        .await?
        .ok_or_else(|| ApiError::internal("tagging a document", "the tag vanished"))?;
    // The caller's existing tag takes the description and format given with it.
    if !created && (description.is_some() || format.is_some()) {
        let mut active: tags::ActiveModel = tag.into();
        if let Some(d) = description {
            active.description = Set(Some(d));
        }
        if let Some(f) = format {
            active.format = Set(Some(f));
        }
        tag = active.update(&txn).await?;
    }
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
    .exec_without_returning(&txn)
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
    let tag = owned(db, caller, name).await?;
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

/// Readable documents carrying a tag of any of the names (on a document, a tag is its
/// owner's).
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
