//! The group commit: statements of a turn's write path (appends, a new
//! session's index row, letting a lease go) that wait together are one
//! transaction, as the file store's journal makes the syncs that wait
//! together one `fdatasync`. One task per process takes every statement
//! queued while the last group committed and runs them pipelined in one
//! transaction, in (agent, session) order: the lease heartbeat locks its
//! rows in the same order, so the two never wait on each other in a
//! cycle. A statement's own outcome is its row (or none: an append whose
//! lease check refused it is not an error); when the group's transaction
//! fails (a unique key taken, a deadlock with another host), each
//! statement runs again alone, so one bad statement fails only its own
//! caller.

use std::sync::{Arc, OnceLock};

use deadpool_postgres::Pool;
use tokio::sync::{mpsc, oneshot};
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use crate::error::{Error, Result};

/// How many statements one group commit takes at most.
const GROUP_MAX: usize = 64;
/// How many statements may wait for the group commit (then callers wait
/// for room: a bound, not a failure).
const GROUP_QUEUE: usize = 1024;

/// The parameters of one grouped statement.
pub(crate) trait Params: Send + Sync {
    fn params(&self) -> Vec<&(dyn ToSql + Sync)>;
}

/// A statement waiting for the group commit.
struct Grouped {
    sql: &'static str,
    /// `(agent, session)`: the order the group runs in.
    key: (String, String),
    params: Arc<dyn Params>,
    reply: oneshot::Sender<Result<Option<Row>>>,
}

/// The queue of the process's group commit (its task starts on first
/// use and ends once the last `Database` clone is dropped).
#[derive(Default)]
pub(crate) struct Group {
    queue: OnceLock<mpsc::Sender<Grouped>>,
}

impl Group {
    /// Runs `sql` with `params` in the next group commit: its row, if it
    /// returned one, once the group committed.
    pub(crate) async fn run(
        &self,
        pool: &Pool,
        target: &str,
        sql: &'static str,
        key: (String, String),
        params: Arc<dyn Params>,
    ) -> Result<Option<Row>> {
        let stopped = || Error::Stopped {
            what: "the group commit",
        };
        let queue = self.queue.get_or_init(|| {
            let (tx, rx) = mpsc::channel(GROUP_QUEUE);
            tokio::spawn(commit_groups(pool.clone(), target.to_owned(), rx));
            tx
        });
        let (reply, answer) = oneshot::channel();
        queue
            .send(Grouped {
                sql,
                key,
                params,
                reply,
            })
            .await
            .map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

async fn commit_groups(pool: Pool, target: String, mut queue: mpsc::Receiver<Grouped>) {
    while let Some(first) = queue.recv().await {
        let mut group = vec![first];
        while group.len() < GROUP_MAX {
            match queue.try_recv() {
                Ok(next) => group.push(next),
                Err(_) => break,
            }
        }
        if group.len() > 1 {
            // Stable: two statements of one session keep their order.
            group.sort_by(|a, b| a.key.cmp(&b.key));
            match together(&pool, &target, &group).await {
                Ok(rows) => {
                    for (job, row) in group.into_iter().zip(rows) {
                        let _ = job.reply.send(Ok(row));
                    }
                    continue;
                }
                Err(e) => {
                    tracing::debug!(error = %e, statements = group.len(), "a group commit failed: each statement runs alone");
                }
            }
        }
        for job in group {
            let row = alone(&pool, &target, &job).await;
            let _ = job.reply.send(row);
        }
    }
}

async fn client(pool: &Pool, target: &str) -> Result<deadpool_postgres::Object> {
    pool.get().await.map_err(|e| Error::Connect {
        target: target.to_owned(),
        message: e.to_string(),
    })
}

/// One statement, committed by itself.
async fn alone(pool: &Pool, target: &str, job: &Grouped) -> Result<Option<Row>> {
    let client = client(pool, target).await?;
    let statement = client
        .prepare_cached(job.sql)
        .await
        .map_err(Error::query("prepare a statement"))?;
    client
        .query_opt(&statement, &job.params.params())
        .await
        .map_err(Error::query("run a statement"))
}

/// `group` in one transaction, its statements pipelined.
async fn together(pool: &Pool, target: &str, group: &[Grouped]) -> Result<Vec<Option<Row>>> {
    let mut client = client(pool, target).await?;
    let tx = client
        .transaction()
        .await
        .map_err(Error::query("begin a group commit"))?;
    let mut statements = Vec::with_capacity(group.len());
    for job in group {
        statements.push(
            tx.prepare_cached(job.sql)
                .await
                .map_err(Error::query("prepare a statement"))?,
        );
    }
    let params: Vec<_> = group.iter().map(|job| job.params.params()).collect();
    let rows = futures_util::future::try_join_all(
        statements
            .iter()
            .zip(&params)
            .map(|(statement, p)| tx.query_opt(statement, p)),
    )
    .await
    .map_err(Error::query("run a group of statements"))?;
    tx.commit()
        .await
        .map_err(Error::query("commit a group of statements"))?;
    Ok(rows)
}
