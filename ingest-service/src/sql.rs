//! Hand-written SQL helpers shared by the search and vector modules (a leaf: it imports no
//! other module of the crate).

use sea_orm::DbBackend;

/// `n` bind placeholders for `backend`, comma-separated: `$start`, `$start+1`, … on
/// PostgreSQL, `?` elsewhere.
pub(crate) fn placeholders(backend: DbBackend, start: usize, n: usize) -> String {
    (0..n)
        .map(|i| match backend {
            DbBackend::Postgres => format!("${}", start + i),
            _ => "?".to_owned(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}
