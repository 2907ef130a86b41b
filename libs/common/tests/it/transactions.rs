//! A transaction whose caller went away while `BEGIN` was on the wire leaves nothing open
//! on the pooled connection (`db::begin`; transact-rs/sqlx#4393).

use std::task::Poll;

use sea_orm::{ConnectOptions, ConnectionTrait, Database, Statement};

docchat_common::backend_tests! {
    async fn a_begin_cut_short_leaves_no_transaction_open(backend) {
        let dir = tempfile::tempdir().unwrap();
        let url = backend.database_url(dir.path(), "begin");
        // `connect` creates the database; then a pool of one connection, so that the one a
        // cancelled BEGIN used is the one the next write gets.
        let other = docchat_common::db::connect(&url).await.unwrap();
        let mut options = ConnectOptions::new(url);
        options.max_connections(1).min_connections(1).sqlx_logging(false);
        let db = Database::connect(options).await.unwrap();
        db.execute_unprepared("CREATE TABLE writes (n INTEGER NOT NULL)")
            .await
            .unwrap();
        const WRITES: i64 = 200;
        let mut cut_short = 0;
        for n in 0..WRITES {
            {
                // Polled 0 to 39 times, then dropped: some drops land while BEGIN is on the
                // wire, where sqlx alone would leave the server inside a transaction.
                let mut start = std::pin::pin!(docchat_common::db::begin(&db));
                let mut done = false;
                for _ in 0..n % 40 {
                    if let Poll::Ready(txn) = futures::poll!(start.as_mut()) {
                        txn.unwrap();
                        done = true;
                        break;
                    }
                    tokio::task::yield_now().await;
                }
                cut_short += i32::from(!done && n % 40 > 0);
            }
            db.execute_unprepared(&format!("INSERT INTO writes (n) VALUES ({n})"))
                .await
                .unwrap();
        }
        assert!(cut_short > 0, "no BEGIN was cut short: the test did not test");
        // Every autocommit write is visible from another connection: none went into a
        // transaction left open (and lost when something later rolled it back).
        let count = other
            .query_one(Statement::from_string(
                other.get_database_backend(),
                "SELECT COUNT(*) FROM writes",
            ))
            .await
            .unwrap()
            .unwrap()
            .try_get_by_index::<i64>(0)
            .unwrap();
        assert_eq!(count, WRITES, "{cut_short} BEGINs cut short");
    }
}
