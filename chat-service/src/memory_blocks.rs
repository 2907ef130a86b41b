//! Memory blocks: persistent text a user keeps and injects into chats, shared with users,
//! with identity-provider groups or with everyone.
//!
//! Access is decided here from the caller's identity alone (user id and groups): the owner
//! reads and edits; a user or group share grants read, or read and edit; a public block is
//! readable by every logged-in user and editable when its public permissions say so. A block
//! the caller cannot read is NOT_FOUND; one it reads but may not change is PERMISSION_DENIED
//! on a write, as are the owner-only calls (delete, share, unshare, privacy) of a non-owner.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use docchat_common::Caller;
use docchat_common::error::{ApiError, ApiResult, ErrorCode};
use docchat_common::limits;
use docchat_common::time::now;
use sea_orm::sea_query::{Alias, BinOper, Expr, Func, LikeExpr, OnConflict};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, Condition, DatabaseConnection, EntityTrait, PaginatorTrait,
    QueryFilter, QueryOrder, QuerySelect, Set, SqlErr, Unchanged,
};

use crate::entities::{memory_block_defaults, memory_block_shares, memory_blocks};

pub const DEFAULT_LIMIT: u64 = 100;
pub const MAX_LIMIT: u64 = 1000;
/// Characters of content when the creator gives no limit (0 = unlimited: up to the
/// operator's ceiling in bytes, `limits::MEMORY_BLOCK_CONTENT_SETTING`, like every block).
pub const DEFAULT_MAX_CONTENT_LENGTH: i64 = 10_000;
pub const INJECTION_MODES: [&str; 4] = [
    "system_prompt",
    "user_instruction",
    "agent_file",
    "agent_tool",
];
pub const ACCESS_MODES: [&str; 3] = ["read", "write", "read_write"];
pub const SCOPES: [&str; 2] = ["llm", "agent"];
const USER: &str = "user";
const GROUP: &str = "group";

/// The fields of a create or an update; `None` keeps the stored value (or the default).
#[derive(Debug, Default)]
pub struct Fields {
    pub name: Option<String>,
    pub content: Option<String>,
    pub system_prompt_amendment: Option<String>,
    pub injection_mode: Option<String>,
    pub access_mode: Option<String>,
    pub max_content_length: Option<i64>,
}

/// A block as one caller sees it, with its share counts.
#[derive(Debug)]
pub struct View {
    pub block: memory_blocks::Model,
    pub is_owner: bool,
    pub user_count: i64,
    pub group_count: i64,
}

/// What the caller may do with a block it can see.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Access {
    Read,
    Edit,
    Own,
}

fn not_found(id: &str) -> ApiError {
    ApiError::not_found(format!("memory block {id} not found"))
}

fn check_one_of(field: &str, value: &str, allowed: &[&str]) -> ApiResult<()> {
    if allowed.contains(&value) {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!(
            "{field} must be one of {}",
            allowed.join(", ")
        )))
    }
}

/// The ceilings of docchat_common::limits on the fields a create or update sends: name
/// (400), amendment and content (413; `content_ceiling` bytes, the operator's runtime
/// setting, whatever the block's max_content_length). Only what is sent is checked, so a
/// block stored before the ceilings can still be renamed.
fn check_sizes(f: &Fields, content_ceiling: usize) -> ApiResult<()> {
    if let Some(name) = &f.name {
        limits::check_name("name", name)?;
    }
    if let Some(amendment) = &f.system_prompt_amendment {
        limits::check_text("system_prompt_amendment", amendment)?;
    }
    if let Some(content) = &f.content {
        check_ceiling(content.len(), content_ceiling)?;
    }
    Ok(())
}

fn check_ceiling(bytes: usize, ceiling: usize) -> ApiResult<()> {
    if bytes > ceiling {
        return Err(ApiError::new(
            ErrorCode::PayloadTooLarge,
            format!(
                "content is {bytes} bytes, over the memory block ceiling of {ceiling} bytes \
                 ({}; max_content_length 0 means up to it)",
                limits::MEMORY_BLOCK_CONTENT_SETTING
            ),
        ));
    }
    Ok(())
}

fn check_content(content: &str, max: i64) -> ApiResult<()> {
    let len = content.chars().count();
    if max > 0 && len as u64 > max.unsigned_abs() {
        return Err(ApiError::bad_request(format!(
            "content is {len} characters, over the block's max_content_length {max}"
        )));
    }
    Ok(())
}

/// Validates the merged state of a block before it is stored.
fn validate(b: &memory_blocks::Model) -> ApiResult<()> {
    if b.name.trim().is_empty() {
        return Err(ApiError::bad_request("name must not be empty"));
    }
    check_one_of("injection_mode", &b.injection_mode, &INJECTION_MODES)?;
    check_one_of("access_mode", &b.access_mode, &ACCESS_MODES)?;
    if b.max_content_length < 0 {
        return Err(ApiError::bad_request(
            "max_content_length must be 0 (unlimited) or more",
        ));
    }
    check_content(&b.content, b.max_content_length)
}

/// A unique-index violation on (owner, name) is the caller's duplicate name.
fn name_taken(err: sea_orm::DbErr, name: &str) -> ApiError {
    if matches!(err.sql_err(), Some(SqlErr::UniqueConstraintViolation(_))) {
        ApiError::conflict(format!("memory block {name} already exists"))
    } else {
        err.into()
    }
}

fn apply(b: &mut memory_blocks::Model, f: Fields) {
    let Fields {
        name,
        content,
        system_prompt_amendment,
        injection_mode,
        access_mode,
        max_content_length,
    } = f;
    if let Some(v) = name {
        b.name = v;
    }
    if let Some(v) = content {
        b.content = v;
    }
    if let Some(v) = system_prompt_amendment {
        b.system_prompt_amendment = v;
    }
    if let Some(v) = injection_mode {
        b.injection_mode = v;
    }
    if let Some(v) = access_mode {
        b.access_mode = v;
    }
    if let Some(v) = max_content_length {
        b.max_content_length = v;
    }
}

/// Creates a block; `content_ceiling` is the operator's ceiling on content bytes.
pub async fn create(
    db: &DatabaseConnection,
    caller: &Caller,
    fields: Fields,
    content_ceiling: usize,
) -> ApiResult<View> {
    check_sizes(&fields, content_ceiling)?;
    let at = now();
    let mut block = memory_blocks::Model {
        id: docchat_common::ids::new_id(),
        owner_id: caller.user_id.clone(),
        owner_username: caller.username.clone(),
        name: String::new(),
        content: String::new(),
        system_prompt_amendment: String::new(),
        injection_mode: "system_prompt".into(),
        access_mode: "read_write".into(),
        max_content_length: DEFAULT_MAX_CONTENT_LENGTH,
        is_auto: false,
        is_public: false,
        public_edit: false,
        created_at: at,
        updated_at: at,
    };
    apply(&mut block, fields);
    validate(&block)?;
    let name = block.name.clone();
    let active: memory_blocks::ActiveModel = block.into();
    let block = memory_blocks::Entity::insert(active)
        .exec_with_returning(db)
        .await
        .map_err(|e| name_taken(e, &name))?;
    Ok(View {
        block,
        is_owner: true,
        user_count: 0,
        group_count: 0,
    })
}

/// The ids of the blocks shared with the caller or one of its groups, with edit rights.
async fn shared_with(
    db: &DatabaseConnection,
    caller: &Caller,
    block_id: Option<&str>,
) -> ApiResult<HashMap<String, bool>> {
    let mut who = Condition::any().add(
        Condition::all()
            .add(memory_block_shares::Column::Kind.eq(USER))
            .add(memory_block_shares::Column::Principal.eq(caller.user_id.as_str())),
    );
    if !caller.groups.is_empty() {
        who = who.add(
            Condition::all()
                .add(memory_block_shares::Column::Kind.eq(GROUP))
                .add(memory_block_shares::Column::Principal.is_in(caller.groups.iter().cloned())),
        );
    }
    let mut query = memory_block_shares::Entity::find().filter(who);
    if let Some(id) = block_id {
        query = query.filter(memory_block_shares::Column::BlockId.eq(id));
    }
    let mut out = HashMap::new();
    for share in query.all(db).await? {
        *out.entry(share.block_id).or_insert(false) |= share.can_edit;
    }
    Ok(out)
}

fn access_of(
    caller: &Caller,
    b: &memory_blocks::Model,
    shared: &HashMap<String, bool>,
) -> Option<Access> {
    if b.owner_id == caller.user_id {
        return Some(Access::Own);
    }
    let share = shared.get(&b.id).copied();
    if share == Some(true) || (b.is_public && b.public_edit) {
        Some(Access::Edit)
    } else if share.is_some() || b.is_public {
        Some(Access::Read)
    } else {
        None
    }
}

/// The block and the caller's access to it; NOT_FOUND when it cannot read it.
pub async fn find(
    db: &DatabaseConnection,
    caller: &Caller,
    id: &str,
) -> ApiResult<(memory_blocks::Model, Access)> {
    let block = memory_blocks::Entity::find_by_id(id.to_owned())
        .one(db)
        .await?
        .ok_or_else(|| not_found(id))?;
    let shared = shared_with(db, caller, Some(id)).await?;
    let access = access_of(caller, &block, &shared).ok_or_else(|| not_found(id))?;
    Ok((block, access))
}

/// As [`find`], refused unless the caller has at least `need`.
async fn find_for(
    db: &DatabaseConnection,
    caller: &Caller,
    id: &str,
    need: Access,
) -> ApiResult<memory_blocks::Model> {
    let (block, access) = find(db, caller, id).await?;
    if access < need {
        return Err(ApiError::forbidden(match need {
            Access::Own => "only the owner of the memory block may do this",
            _ => "no edit permission on this memory block",
        }));
    }
    Ok(block)
}

/// Every block with its share counts, for the caller.
async fn views(
    db: &DatabaseConnection,
    caller: &Caller,
    blocks: Vec<memory_blocks::Model>,
) -> ApiResult<Vec<View>> {
    let ids: Vec<String> = blocks.iter().map(|b| b.id.clone()).collect();
    let shares = memory_block_shares::Entity::find()
        .filter(memory_block_shares::Column::BlockId.is_in(ids))
        .all(db)
        .await?;
    let mut counts: HashMap<String, (i64, i64)> = HashMap::new();
    for s in shares {
        let c = counts.entry(s.block_id).or_default();
        if s.kind == GROUP {
            c.1 += 1;
        } else {
            c.0 += 1;
        }
    }
    Ok(blocks
        .into_iter()
        .map(|block| {
            let (user_count, group_count) = counts.get(&block.id).copied().unwrap_or_default();
            View {
                is_owner: block.owner_id == caller.user_id,
                block,
                user_count,
                group_count,
            }
        })
        .collect())
}

pub async fn get(db: &DatabaseConnection, caller: &Caller, id: &str) -> ApiResult<View> {
    let (block, _) = find(db, caller, id).await?;
    let mut views = views(db, caller, vec![block]).await?;
    views.pop().ok_or_else(|| not_found(id))
}

pub struct ListQuery {
    pub offset: u64,
    pub limit: u64,
    pub name_filter: String,
    pub updated_after: Option<DateTime<Utc>>,
}

/// One page of [`list`].
pub struct Page {
    pub items: Vec<View>,
    /// Every block the filters match.
    pub total: u64,
    /// The page stopped before its limit at `page_bytes`; more follow at offset + items.
    pub size_limited: bool,
}

/// The caller's own blocks, those shared with it or one of its groups, and the public ones;
/// most recently updated first. A page holds at most `page_bytes` of names, contents and
/// amendments (at least one block), whatever its limit.
pub async fn list(
    db: &DatabaseConnection,
    caller: &Caller,
    q: ListQuery,
    page_bytes: u64,
) -> ApiResult<Page> {
    let shared: Vec<String> = shared_with(db, caller, None).await?.into_keys().collect();
    let mut query = memory_blocks::Entity::find().filter(
        Condition::any()
            .add(memory_blocks::Column::OwnerId.eq(caller.user_id.as_str()))
            .add(memory_blocks::Column::IsPublic.eq(true))
            .add(memory_blocks::Column::Id.is_in(shared)),
    );
    if !q.name_filter.is_empty() {
        // Case-insensitive on both backends (the client documents it so); LIKE's own
        // wildcards in the filter match themselves.
        let pattern = q
            .name_filter
            .to_lowercase()
            .replace('\\', "\\\\")
            .replace('%', "\\%")
            .replace('_', "\\_");
        query = query.filter(
            Expr::expr(Func::lower(Expr::col(memory_blocks::Column::Name)))
                .like(LikeExpr::new(format!("%{pattern}%")).escape('\\')),
        );
    }
    if let Some(after) = q.updated_after {
        query = query.filter(memory_blocks::Column::UpdatedAt.gte(after));
    }
    let total = query.clone().count(db).await?;
    let limit = if q.limit == 0 {
        DEFAULT_LIMIT
    } else {
        q.limit.min(MAX_LIMIT)
    };
    let page = query
        .order_by_desc(memory_blocks::Column::UpdatedAt)
        .order_by_asc(memory_blocks::Column::Id)
        .offset(q.offset)
        .limit(limit);
    use memory_blocks::Column as C;
    let sized = [
        C::Name,
        C::Content,
        C::SystemPromptAmendment,
        C::OwnerUsername,
    ];
    let page = limits::page_by_size(db, page, C::Id, &sized, page_bytes).await?;
    Ok(Page {
        items: views(db, caller, page.rows).await?,
        total,
        size_limited: page.cut,
    })
}

/// Changes only the fields given; needs edit access. Only those columns (and updated_at)
/// are written, so two writers changing different fields both land, and two changing the
/// content leave one whole version (the last write wins).
pub async fn update(
    db: &DatabaseConnection,
    caller: &Caller,
    id: &str,
    fields: Fields,
    content_ceiling: usize,
) -> ApiResult<()> {
    check_sizes(&fields, content_ceiling)?;
    let mut block = find_for(db, caller, id, Access::Edit).await?;
    let mut active = memory_blocks::ActiveModel {
        id: Unchanged(block.id.clone()),
        ..Default::default()
    };
    if let Some(v) = &fields.name {
        active.name = Set(v.clone());
    }
    if let Some(v) = &fields.content {
        active.content = Set(v.clone());
    }
    if let Some(v) = &fields.system_prompt_amendment {
        active.system_prompt_amendment = Set(v.clone());
    }
    if let Some(v) = &fields.injection_mode {
        active.injection_mode = Set(v.clone());
    }
    if let Some(v) = &fields.access_mode {
        active.access_mode = Set(v.clone());
    }
    if let Some(v) = fields.max_content_length {
        active.max_content_length = Set(v);
    }
    apply(&mut block, fields);
    validate(&block)?;
    active.updated_at = Set(now());
    let name = block.name.clone();
    active.update(db).await.map_err(|e| name_taken(e, &name))?;
    Ok(())
}

/// Appends `text` to the content in one statement (concurrent appends all land), unless
/// the result would pass max_content_length (400) or the operator's `content_ceiling` in
/// bytes (413); then nothing changes. Needs edit access.
pub async fn append(
    db: &DatabaseConnection,
    caller: &Caller,
    id: &str,
    text: &str,
    content_ceiling: usize,
) -> ApiResult<()> {
    check_ceiling(text.len(), content_ceiling)?;
    let block = find_for(db, caller, id, Access::Edit).await?;
    use memory_blocks::Column as C;
    // `content || text`, spelled with sea-query's operators so each backend gets its own
    // placeholders; LENGTH counts characters on both, OCTET_LENGTH bytes.
    let joined = || Expr::col(C::Content).binary(BinOper::Custom("||"), text);
    let fits = Condition::any().add(C::MaxContentLength.eq(0)).add(
        Expr::expr(Func::cust(Alias::new("LENGTH")).arg(joined()))
            .lte(Expr::col(C::MaxContentLength)),
    );
    let under_ceiling = Expr::expr(Func::cust(Alias::new("OCTET_LENGTH")).arg(joined()))
        .lte(i64::try_from(content_ceiling).unwrap_or(i64::MAX));
    let done = memory_blocks::Entity::update_many()
        .col_expr(C::Content, joined())
        .col_expr(C::UpdatedAt, Expr::value(now()))
        .filter(C::Id.eq(id))
        .filter(fits)
        .filter(under_ceiling)
        .exec(db)
        .await?;
    if done.rows_affected == 0 {
        // Gone since the check, or over a limit with the text appended.
        let (now_block, _) = find(db, caller, id).await?;
        check_ceiling(now_block.content.len() + text.len(), content_ceiling)?;
        let len = now_block.content.chars().count() + text.chars().count();
        return Err(ApiError::bad_request(format!(
            "content would be {len} characters, over the block's max_content_length {}",
            block.max_content_length
        )));
    }
    Ok(())
}

/// Owner only: the block, its shares and the defaults naming it.
pub async fn delete(db: &DatabaseConnection, caller: &Caller, id: &str) -> ApiResult<()> {
    find_for(db, caller, id, Access::Own).await?;
    let txn = docchat_common::db::begin(db).await?;
    memory_block_shares::Entity::delete_many()
        .filter(memory_block_shares::Column::BlockId.eq(id))
        .exec(&txn)
        .await?;
    memory_block_defaults::Entity::delete_many()
        .filter(memory_block_defaults::Column::BlockId.eq(id))
        .exec(&txn)
        .await?;
    memory_blocks::Entity::delete_by_id(id.to_owned())
        .exec(&txn)
        .await?;
    txn.commit().await?;
    Ok(())
}

/// One grant, as the share calls name it.
pub struct Share {
    pub group: bool,
    pub principal: String,
    pub username: String,
    pub can_edit: bool,
}

fn kind(group: bool) -> &'static str {
    if group { GROUP } else { USER }
}

/// Grants or replaces a share; owner only.
pub async fn share(db: &DatabaseConnection, caller: &Caller, id: &str, s: Share) -> ApiResult<()> {
    // Sharing with a group takes its own permission (taking a share back does not: an owner
    // who lost it can still withdraw what they shared).
    if s.group {
        caller.require_permission(docchat_common::auth::permissions::SHARE_WITH_GROUPS)?;
    }
    find_for(db, caller, id, Access::Own).await?;
    if s.principal.is_empty() {
        return Err(ApiError::bad_request("a share needs a user or a group"));
    }
    if !s.group && s.principal == caller.user_id {
        return Err(ApiError::bad_request(
            "a memory block is not shared with its owner: the owner has every right already",
        ));
    }
    let row = memory_block_shares::ActiveModel {
        block_id: Set(id.to_owned()),
        kind: Set(kind(s.group).to_owned()),
        principal: Set(s.principal),
        username: Set(s.username),
        can_edit: Set(s.can_edit),
    };
    memory_block_shares::Entity::insert(row)
        .on_conflict(
            OnConflict::columns([
                memory_block_shares::Column::BlockId,
                memory_block_shares::Column::Kind,
                memory_block_shares::Column::Principal,
            ])
            .update_columns([
                memory_block_shares::Column::Username,
                memory_block_shares::Column::CanEdit,
            ])
            .to_owned(),
        )
        .exec(db)
        .await?;
    Ok(())
}

/// Removes a share (none is fine); owner only.
pub async fn unshare(
    db: &DatabaseConnection,
    caller: &Caller,
    id: &str,
    group: bool,
    principal: &str,
) -> ApiResult<()> {
    find_for(db, caller, id, Access::Own).await?;
    memory_block_shares::Entity::delete_many()
        .filter(memory_block_shares::Column::BlockId.eq(id))
        .filter(memory_block_shares::Column::Kind.eq(kind(group)))
        .filter(memory_block_shares::Column::Principal.eq(principal))
        .exec(db)
        .await?;
    Ok(())
}

/// The direct grants of one kind; any caller that can read the block.
pub async fn shares(
    db: &DatabaseConnection,
    caller: &Caller,
    id: &str,
    group: bool,
) -> ApiResult<Vec<memory_block_shares::Model>> {
    find(db, caller, id).await?;
    Ok(memory_block_shares::Entity::find()
        .filter(memory_block_shares::Column::BlockId.eq(id))
        .filter(memory_block_shares::Column::Kind.eq(kind(group)))
        .order_by_asc(memory_block_shares::Column::Username)
        .order_by_asc(memory_block_shares::Column::Principal)
        .all(db)
        .await?)
}

/// Owner only. Making a block private keeps its user and group shares.
pub async fn set_privacy(
    db: &DatabaseConnection,
    caller: &Caller,
    id: &str,
    is_public: bool,
    public_edit: bool,
) -> ApiResult<()> {
    let block = find_for(db, caller, id, Access::Own).await?;
    let mut active: memory_blocks::ActiveModel = block.into();
    active.is_public = Set(is_public);
    active.public_edit = Set(is_public && public_edit);
    active.update(db).await?;
    Ok(())
}

/// (is_public, public_edit); a block the caller cannot read (or none) is private.
pub async fn public_permissions(
    db: &DatabaseConnection,
    caller: &Caller,
    id: &str,
) -> ApiResult<(bool, bool)> {
    match find(db, caller, id).await {
        Ok((b, _)) => Ok((b.is_public, b.is_public && b.public_edit)),
        Err(e) if e.code == docchat_common::error::ErrorCode::NotFound => Ok((false, false)),
        Err(e) => Err(e),
    }
}

/// The caller's default block of `scope`, if it is set and still readable.
pub async fn default_block(
    db: &DatabaseConnection,
    caller: &Caller,
    scope: &str,
) -> ApiResult<Option<View>> {
    let Some(row) =
        memory_block_defaults::Entity::find_by_id((caller.user_id.clone(), scope.to_owned()))
            .one(db)
            .await?
    else {
        return Ok(None);
    };
    match get(db, caller, &row.block_id).await {
        Ok(view) => Ok(Some(view)),
        Err(e) if e.code == docchat_common::error::ErrorCode::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Sets (a block the caller can read) or clears (`None`) the default of `scope`.
pub async fn set_default(
    db: &DatabaseConnection,
    caller: &Caller,
    scope: &str,
    block_id: Option<&str>,
) -> ApiResult<Option<View>> {
    check_one_of("scope", scope, &SCOPES)?;
    let key = (caller.user_id.clone(), scope.to_owned());
    let Some(block_id) = block_id.filter(|id| !id.is_empty()) else {
        memory_block_defaults::Entity::delete_by_id(key)
            .exec(db)
            .await?;
        return Ok(None);
    };
    let view = get(db, caller, block_id).await?;
    let row = memory_block_defaults::ActiveModel {
        user_id: Set(key.0),
        scope: Set(key.1),
        block_id: Set(block_id.to_owned()),
    };
    memory_block_defaults::Entity::insert(row)
        .on_conflict(
            OnConflict::columns([
                memory_block_defaults::Column::UserId,
                memory_block_defaults::Column::Scope,
            ])
            .update_column(memory_block_defaults::Column::BlockId)
            .to_owned(),
        )
        .exec(db)
        .await?;
    Ok(Some(view))
}

/// The block named `name` the caller can read: its own first, else one shared with it or
/// public (the oldest). NOT_FOUND when there is none.
pub async fn find_by_name(
    db: &DatabaseConnection,
    caller: &Caller,
    name: &str,
) -> ApiResult<memory_blocks::Model> {
    let candidates = memory_blocks::Entity::find()
        .filter(memory_blocks::Column::Name.eq(name))
        .order_by_asc(memory_blocks::Column::CreatedAt)
        .all(db)
        .await?;
    let shared = shared_with(db, caller, None).await?;
    let mut readable: Vec<(Access, memory_blocks::Model)> = candidates
        .into_iter()
        .filter_map(|b| access_of(caller, &b, &shared).map(|a| (a, b)))
        .collect();
    // Own blocks first; otherwise the oldest readable one (the sort is stable).
    readable.sort_by_key(|(a, _)| *a != Access::Own);
    readable
        .into_iter()
        .next()
        .map(|(_, b)| b)
        .ok_or_else(|| ApiError::not_found(format!("memory block {name} not found")))
}
