//! Ceilings on what a caller may store, and on what one list answer may carry (issue 37).
//!
//! Every stored text or JSON field has a maximum, checked by the service that owns the row
//! (so a gRPC caller is held to it as much as the REST one) before anything is written:
//!
//! | field kind | maximum | over it |
//! |---|---|---|
//! | a name, a model name | [`NAME_CHARS`] characters | 400 |
//! | free text: a description, a prompt, an amendment | [`TEXT_BYTES`] bytes of UTF-8 | 413 |
//! | a JSON settings field: an extractor's schema and guardrails_settings, a task's task_config | [`JSON_BYTES`] bytes of its JSON text | 413 |
//! | a memory block's content | the runtime setting [`MEMORY_BLOCK_CONTENT_SETTING`] (default [`MEMORY_BLOCK_CONTENT_BYTES`]), whatever the block's own max_content_length | 413 |
//!
//! Rows stored before these ceilings can still be larger, so a list never builds its
//! answer from a row count alone: [`page_by_size`] reads the sizes of the page's rows first
//! and fetches only those that fit [`list_page_bytes`] (at least one, so paging always
//! moves on). A page cut short that way holds fewer rows than its limit asked for; the next
//! one starts at offset + the rows returned. Reading a bounded number of bytes per call
//! also bounds how long one caller's list holds a pooled database connection.

use sea_orm::sea_query::{Alias, Expr, Func, SimpleExpr};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DbErr, EntityTrait, ModelTrait, QueryFilter, QuerySelect, Select,
    Value,
};

use crate::config::Config;
use crate::error::{ApiError, ApiResult, ErrorCode};

/// Characters of a name (collection, tag, extractor, memory block, task) or a model name.
pub const NAME_CHARS: usize = 255;
/// Bytes (UTF-8) of a free-text field: descriptions, prompts, a memory block's
/// system_prompt_amendment.
pub const TEXT_BYTES: usize = 256 * 1024;
/// Bytes of a JSON settings field, measured on its JSON text as sent.
pub const JSON_BYTES: usize = 256 * 1024;
/// The runtime setting holding the operator's ceiling on a memory block's content, in bytes
/// of UTF-8. A block's max_content_length (characters; 0 "unlimited") only narrows it.
pub const MEMORY_BLOCK_CONTENT_SETTING: &str = "memory_block_max_content_bytes";
/// The default of [`MEMORY_BLOCK_CONTENT_SETTING`]: 1 MiB.
pub const MEMORY_BLOCK_CONTENT_BYTES: i64 = 1 << 20;
/// The bytes of stored fields one list page carries at most (see [`list_page_bytes`]).
pub const LIST_PAGE_BYTES: u64 = 8 << 20;
/// What a row adds to an answer besides its sized fields (ids, times, flags, framing).
pub const ROW_OVERHEAD_BYTES: u64 = 512;

/// 400 unless `value` has at most [`NAME_CHARS`] characters.
pub fn check_name(field: &str, value: &str) -> ApiResult<()> {
    let n = value.chars().count();
    if n > NAME_CHARS {
        return Err(ApiError::bad_request(format!(
            "{field} is {n} characters, over its maximum of {NAME_CHARS}"
        )));
    }
    Ok(())
}

/// 413 unless `value` has at most `max` bytes.
pub fn check_bytes(field: &str, value: &str, max: usize) -> ApiResult<()> {
    if value.len() > max {
        return Err(ApiError::new(
            ErrorCode::PayloadTooLarge,
            format!(
                "{field} is {} bytes, over its maximum of {max} bytes",
                value.len()
            ),
        ));
    }
    Ok(())
}

/// 413 unless the free text `value` has at most [`TEXT_BYTES`] bytes.
pub fn check_text(field: &str, value: &str) -> ApiResult<()> {
    check_bytes(field, value, TEXT_BYTES)
}

/// 413 unless the JSON text `value` has at most [`JSON_BYTES`] bytes.
pub fn check_json(field: &str, value: &str) -> ApiResult<()> {
    check_bytes(field, value, JSON_BYTES)
}

/// The byte budget of one list page: [`LIST_PAGE_BYTES`], or half the gRPC message limit
/// where an operator set the body limit so low that the message limit is smaller.
pub fn list_page_bytes(config: &Config) -> u64 {
    let half = u64::try_from(crate::grpc::max_message_bytes(config) / 2).unwrap_or(u64::MAX);
    LIST_PAGE_BYTES.min(half)
}

/// How many of the leading rows of sizes `sizes` fit `budget` bytes together: at least one
/// (when there is one), so a row larger than the budget is still served, alone.
pub fn fit(sizes: impl IntoIterator<Item = u64>, budget: u64) -> usize {
    let mut used: u64 = 0;
    let mut n = 0;
    for size in sizes {
        used = used.saturating_add(size);
        if n > 0 && used > budget {
            break;
        }
        n += 1;
    }
    n
}

/// One list page read by [`page_by_size`].
#[derive(Debug)]
pub struct SizedPage<M> {
    /// The rows, in the page's order.
    pub rows: Vec<M>,
    /// Whether rows of the page were left out for the budget; the next page starts at
    /// offset + `rows.len()`.
    pub cut: bool,
}

/// The bytes of `columns` (NULL as 0) in one row, as a BIGINT on SQLite and PostgreSQL.
/// `OCTET_LENGTH` reads the stored length without loading a large value on either.
fn row_bytes<E: EntityTrait>(columns: &[E::Column]) -> SimpleExpr {
    let mut sum = Expr::value(0i64);
    for c in columns {
        let len = Func::coalesce([
            Func::cust(Alias::new("OCTET_LENGTH"))
                .arg(Expr::col((E::default(), *c)))
                .into(),
            Expr::value(0i64),
        ]);
        sum = sum.add(len);
    }
    sum.cast_as(Alias::new("BIGINT"))
}

/// Reads the page `page` selects (its filters, order, offset and limit applied), stopping
/// at the rows whose `sized` columns together pass `budget` bytes (each row also counts
/// [`ROW_OVERHEAD_BYTES`]). First only ids and sizes are read, then the rows that fit, so
/// neither the answer nor the database read grows with rows stored before the ceilings.
/// `id` is the table's text primary key.
pub async fn page_by_size<E, C>(
    db: &C,
    page: Select<E>,
    id: E::Column,
    sized: &[E::Column],
    budget: u64,
) -> Result<SizedPage<E::Model>, DbErr>
where
    E: EntityTrait,
    C: ConnectionTrait,
{
    let sizes: Vec<(String, i64)> = page
        .select_only()
        .column(id)
        .column_as(row_bytes::<E>(sized), "row_bytes")
        .into_tuple()
        .all(db)
        .await?;
    let keep = fit(
        sizes
            .iter()
            .map(|(_, n)| u64::try_from(*n).unwrap_or(0) + ROW_OVERHEAD_BYTES),
        budget,
    );
    let cut = keep < sizes.len();
    let ids: Vec<String> = sizes.into_iter().take(keep).map(|(id, _)| id).collect();
    if ids.is_empty() {
        return Ok(SizedPage {
            rows: Vec::new(),
            cut,
        });
    }
    let mut found: Vec<(usize, E::Model)> = E::find()
        .filter(id.is_in(ids.iter().cloned()))
        .all(db)
        .await?
        .into_iter()
        .filter_map(|row| {
            let key = match row.get(id) {
                Value::String(Some(s)) => *s,
                _ => return None,
            };
            ids.iter().position(|i| *i == key).map(|at| (at, row))
        })
        .collect();
    // A row deleted between the two reads is simply missing from the page.
    found.sort_by_key(|(at, _)| *at);
    Ok(SizedPage {
        rows: found.into_iter().map(|(_, row)| row).collect(),
        cut,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_keeps_at_least_one_row_and_stops_at_the_budget() {
        assert_eq!(fit([], 10), 0);
        assert_eq!(fit([50], 10), 1, "a row over the budget is served alone");
        assert_eq!(fit([50, 1], 10), 1);
        assert_eq!(fit([4, 4, 2, 1], 10), 3);
        assert_eq!(fit([4, 4, 3], 10), 2);
        assert_eq!(fit([u64::MAX, u64::MAX], 10), 1);
    }

    #[test]
    fn ceilings_answer_400_or_413() {
        assert!(check_name("name", &"é".repeat(NAME_CHARS)).is_ok());
        let e = check_name("name", &"é".repeat(NAME_CHARS + 1)).unwrap_err();
        assert_eq!(e.code.http_status(), 400);
        assert!(check_json("guardrails_settings", &"x".repeat(JSON_BYTES)).is_ok());
        let e = check_json("guardrails_settings", &"x".repeat(JSON_BYTES + 1)).unwrap_err();
        assert_eq!(e.code.http_status(), 413);
        assert!(e.message.contains("guardrails_settings"), "{}", e.message);
        // Bytes, not characters: 2-byte characters reach the ceiling at half the count.
        assert!(check_text("prompt", &"é".repeat(TEXT_BYTES / 2)).is_ok());
        assert!(check_text("prompt", &"é".repeat(TEXT_BYTES / 2 + 1)).is_err());
    }

    #[test]
    fn the_page_budget_stays_under_the_message_limit() {
        let config = Config::default();
        assert_eq!(list_page_bytes(&config), LIST_PAGE_BYTES);
        let small = Config {
            max_body_bytes: 1000,
            ..Config::default()
        };
        let budget = usize::try_from(list_page_bytes(&small)).unwrap();
        assert!(budget < crate::grpc::max_message_bytes(&small));
    }
}
