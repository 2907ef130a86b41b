//! The statements of one transaction, sent together.
//!
//! On SQLite every statement is a round trip through the connection's worker thread; a
//! completion's two transactions were a dozen of them, the largest part of what docchat added
//! to a completion. A [`Batch`] joins its statements into one multi-statement call there
//! (sqlx binds the `?` parameters across them in order), so a transaction costs BEGIN, one
//! call and COMMIT. PostgreSQL takes one statement a call (extended protocol): there the batch
//! runs its statements one by one, as separate calls would.
//!
//! The rows of all statements come back together; a statement that returns rows tags them
//! with a `k` column ([`tag`]) so that [`tagged`] tells whose they are.

use sea_orm::sea_query::{Expr, SimpleExpr};
use sea_orm::{ConnectionTrait, DbBackend, DbErr, QueryResult, Statement, StatementBuilder};

/// The column naming which statement a row comes from.
pub const TAG: &str = "k";

pub struct Batch {
    backend: DbBackend,
    statements: Vec<Statement>,
}

impl Batch {
    pub fn new(backend: DbBackend) -> Batch {
        Batch {
            backend,
            statements: Vec::new(),
        }
    }

    pub fn backend(&self) -> DbBackend {
        self.backend
    }

    pub fn push(&mut self, statement: &impl StatementBuilder) {
        self.statements.push(statement.build(&self.backend));
    }

    pub fn push_statement(&mut self, statement: Statement) {
        self.statements.push(statement);
    }

    /// Runs the statements in order on `conn` (a transaction: a failed statement leaves the
    /// earlier ones to its rollback); answers the rows they returned.
    pub async fn run(self, conn: &impl ConnectionTrait) -> Result<Vec<QueryResult>, DbErr> {
        if self.backend != DbBackend::Sqlite {
            let mut rows = Vec::new();
            for statement in self.statements {
                rows.extend(conn.query_all(statement).await?);
            }
            return Ok(rows);
        }
        if self.statements.is_empty() {
            return Ok(Vec::new());
        }
        let mut sql = String::new();
        let mut values = Vec::new();
        for statement in self.statements {
            if !sql.is_empty() {
                sql.push_str(";\n");
            }
            sql.push_str(&statement.sql);
            values.extend(statement.values.map(|v| v.0).unwrap_or_default());
        }
        conn.query_all(Statement::from_sql_and_values(
            DbBackend::Sqlite,
            sql,
            values,
        ))
        .await
    }
}

/// The value of a select-list entry tagging a statement's rows with `name`:
/// `.expr_as(tag(name), TAG)`.
pub fn tag(name: &'static str) -> SimpleExpr {
    Expr::val(name).into()
}

/// The rows tagged `name`.
pub fn tagged<'a>(rows: &'a [QueryResult], name: &'a str) -> impl Iterator<Item = &'a QueryResult> {
    rows.iter()
        .filter(move |row| row.try_get::<String>("", TAG).is_ok_and(|k| k == name))
}
