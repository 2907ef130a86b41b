//! Tool preferences per user (table tool_preferences): the tools `agent_tools: auto` uses.

use docchat_common::error::{ApiError, ApiResult};
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement, Value};

pub(crate) fn stmt(db: &impl ConnectionTrait, sql: &str, values: Vec<Value>) -> Statement {
    let backend = db.get_database_backend();
    let sql = if backend == DbBackend::Postgres {
        // `?` placeholders numbered for PostgreSQL.
        let mut out = String::new();
        let mut n = 0;
        for ch in sql.chars() {
            if ch == '?' {
                n += 1;
                out.push_str(&format!("${n}"));
            } else {
                out.push(ch);
            }
        }
        out
    } else {
        sql.to_owned()
    };
    Statement::from_sql_and_values(backend, sql, values)
}

fn db_error(e: sea_orm::DbErr) -> ApiError {
    ApiError::database("tool preferences", e)
}

/// The user's preference; `None` when they have none.
pub async fn get(db: &DatabaseConnection, user_id: &str) -> ApiResult<Option<Vec<String>>> {
    let row = db
        .query_one(stmt(
            db,
            "SELECT tools FROM tool_preferences WHERE user_id = ?",
            vec![user_id.into()],
        ))
        .await
        .map_err(db_error)?;
    let Some(row) = row else { return Ok(None) };
    let text: String = row.try_get("", "tools").map_err(db_error)?;
    Ok(Some(serde_json::from_str(&text).unwrap_or_default()))
}

pub async fn set(db: &DatabaseConnection, user_id: &str, tools: &[String]) -> ApiResult<()> {
    let text = serde_json::to_string(tools).unwrap_or_else(|_| "[]".into());
    db.execute(stmt(
        db,
        "INSERT INTO tool_preferences (user_id, tools, updated_at) VALUES (?, ?, ?) \
         ON CONFLICT (user_id) DO UPDATE SET tools = excluded.tools, updated_at = excluded.updated_at",
        vec![user_id.into(), text.into(), chrono::Utc::now().into()],
    ))
    .await
    .map_err(db_error)?;
    Ok(())
}

pub async fn delete(db: &DatabaseConnection, user_id: &str) -> ApiResult<()> {
    db.execute(stmt(
        db,
        "DELETE FROM tool_preferences WHERE user_id = ?",
        vec![user_id.into()],
    ))
    .await
    .map_err(db_error)?;
    Ok(())
}
