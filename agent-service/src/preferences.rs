//! Tool preferences per user (table tool_preferences): the tools `agent_tools: auto` uses.

use docchat_common::error::{ApiError, ApiResult};
use sea_orm::sea_query::OnConflict;
use sea_orm::{DatabaseConnection, EntityTrait, Set};

use crate::entities::JsonText;
use crate::entities::tool_preferences::{self, Column};

fn db_error(e: sea_orm::DbErr) -> ApiError {
    ApiError::database("tool preferences", e)
}

/// The user's preference; `None` when they have none.
pub async fn get(db: &DatabaseConnection, user_id: &str) -> ApiResult<Option<Vec<String>>> {
    Ok(tool_preferences::Entity::find_by_id(user_id)
        .one(db)
        .await
        .map_err(db_error)?
        .map(|row| row.tools.0))
}

pub async fn set(db: &DatabaseConnection, user_id: &str, tools: &[String]) -> ApiResult<()> {
    tool_preferences::Entity::insert(tool_preferences::ActiveModel {
        user_id: Set(user_id.to_owned()),
        tools: Set(JsonText(tools.to_vec())),
        updated_at: Set(chrono::Utc::now()),
    })
    .on_conflict(
        OnConflict::column(Column::UserId)
            .update_columns([Column::Tools, Column::UpdatedAt])
            .to_owned(),
    )
    .exec_without_returning(db)
    .await
    .map_err(db_error)?;
    Ok(())
}

pub async fn delete(db: &DatabaseConnection, user_id: &str) -> ApiResult<()> {
    tool_preferences::Entity::delete_by_id(user_id)
        .exec(db)
        .await
        .map_err(db_error)?;
    Ok(())
}
