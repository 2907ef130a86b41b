//! What a database error answers a caller: text the backend cannot store is the request's
//! fault (400), told by its SQLSTATE; anything else is an opaque 500.

use docchat_common::error::ApiError;
use sea_orm::{ConnectionTrait, DbBackend, Statement};

docchat_common::backend_tests! {
    async fn text_holding_nul_is_a_bad_request_where_the_backend_refuses_it(backend) {
        let dir = tempfile::tempdir().unwrap();
        let db = docchat_common::db::connect(&backend.database_url(dir.path(), "errors"))
            .await
            .unwrap();
        let kind = db.get_database_backend();
        db.execute_unprepared("CREATE TABLE notes (body TEXT NOT NULL)")
            .await
            .unwrap();
        let insert = |body: &str| {
            let sql = match kind {
                DbBackend::Postgres => "INSERT INTO notes (body) VALUES ($1)",
                _ => "INSERT INTO notes (body) VALUES (?)",
            };
            Statement::from_sql_and_values(kind, sql, [body.into()])
        };
        let nul = db.execute(insert("a\0b")).await;
        if kind == DbBackend::Postgres {
            // SQLSTATE 22021 in text, 22P05 in jsonb: both the caller's, not a fault.
            let err = ApiError::from(nul.unwrap_err());
            assert_eq!(
                (err.code.http_status(), err.message.as_str()),
                (400, "text may not contain the NUL character (\\u0000)")
            );
            let json = db
                .execute_unprepared(r#"SELECT '{"a": "\u0000"}'::jsonb"#)
                .await
                .unwrap_err();
            assert_eq!(ApiError::database("notes", json).code.http_status(), 400);
        } else {
            // SQLite stores it as it is.
            nul.unwrap();
        }
        // Another refusal stays an opaque 500.
        let missing = db
            .execute_unprepared("INSERT INTO no_such_table VALUES (1)")
            .await
            .unwrap_err();
        let err = ApiError::database("notes", missing);
        assert_eq!((err.code.http_status(), err.message.as_str()), (500, "internal error"));
        let count = db
            .query_one(Statement::from_string(kind, "SELECT COUNT(*) AS n FROM notes"))
            .await
            .unwrap()
            .unwrap()
            .try_get_by_index::<i64>(0)
            .unwrap();
        assert_eq!(count, i64::from(kind != DbBackend::Postgres));
    }
}
