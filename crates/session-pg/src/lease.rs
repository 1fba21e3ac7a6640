//! Session leases: a session-level advisory lock, held by a connection of the lease's own.
//!
//! `acquire` opens a connection (on its own thread, outside the pool) and takes
//! `pg_try_advisory_lock(hashtextextended(session_id, 0))` on it. The lock belongs to that
//! server session: the guard keeps the connection open, `release` (or dropping the guard)
//! unlocks and closes it, and when the holder dies — process killed, host gone — the server
//! ends the session and releases the lock with it: at once when the socket closes, within the
//! TCP keepalive time (about a minute) when the host vanished. No clock, no time to live, no
//! renewal traffic; `renew` only checks that the lock is still held (a server restart or a
//! cut connection loses it, and `renew` says so with `LeaseLost`).
//!
//! Who holds a lease is recorded in `session_leases` (name, host, pid, the holder's server
//! process id) by the holder right after taking the lock; a busy `acquire` reads that row and
//! trusts it only when its server process id is the lock owner's in `pg_locks`.
//!
//! Two session ids whose 64-bit hashes collide share a lock: the second is told the lease is
//! busy, with no holder named (the row is another session's). With 64-bit hashes this takes
//! billions of concurrently leased sessions to become likely.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use session_schema::Timestamp;
use session_storage::{HolderInfo, LeaseGuard, StorageError, Target};

use crate::backend::PgBackend;
use crate::error::RowExt;
use crate::error::{PgError, query, storage};
use crate::pool::ConnThread;

const KEY: &str = "hashtextextended($1, 0)";

/// A held lease: the connection that holds the lock.
pub(crate) struct PgLease {
    conn: Mutex<Option<ConnThread>>,
    session_id: String,
    holder: HolderInfo,
}

impl std::fmt::Debug for PgLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgLease")
            .field("session_id", &self.session_id)
            .field("holder", &self.holder)
            .finish_non_exhaustive()
    }
}

/// What a busy acquire found out about the holder.
struct Busy {
    holder: Option<HolderInfo>,
    since: Option<Timestamp>,
}

pub(crate) fn acquire(
    backend: &PgBackend,
    session_id: &str,
    holder: &HolderInfo,
) -> Result<PgLease, StorageError> {
    let target = || Target::session(session_id);
    let conn = backend
        .pool
        .dedicated()
        .map_err(|e| storage("lease", target(), e))?;
    let (id, h) = (session_id.to_owned(), holder.clone());
    let got = conn
        .call(move |s| {
            let c = s.client()?;
            // A holder that lets go between our try and our look at who holds it: try again.
            let mut attempts = 0;
            loop {
                attempts += 1;
                let got: bool = c
                    .query_one(&format!("SELECT pg_try_advisory_lock({KEY})"), &[&id])
                    .map_err(query("take the lease lock"))?
                    .col(0)?;
                if got {
                    break;
                }
                match busy_holder(c, &id)? {
                    Some(b) => return Ok(Err(b)),
                    None if attempts < 5 => continue,
                    None => {
                        return Ok(Err(Busy {
                            holder: None,
                            since: None,
                        }));
                    }
                }
            }
            let pid = i64::from(h.pid);
            c.execute(
                "INSERT INTO session_leases (session_id, holder_name, holder_host, holder_pid, backend_pid, since) \
                 VALUES ($1, $2, $3, $4, pg_backend_pid(), now()) \
                 ON CONFLICT (session_id) DO UPDATE SET holder_name = $2, holder_host = $3, \
                 holder_pid = $4, backend_pid = pg_backend_pid(), since = now()",
                &[&id, &h.name, &h.host, &pid],
            )
            .map_err(query("record the lease holder"))?;
            Ok(Ok(()))
        })
        .map_err(|e| storage("lease", target(), e))?;
    match got {
        Ok(()) => Ok(PgLease {
            conn: Mutex::new(Some(conn)),
            session_id: session_id.to_owned(),
            holder: holder.clone(),
        }),
        Err(b) => Err(StorageError::LeaseBusy {
            session_id: session_id.to_owned(),
            holder: b.holder,
            since: b.since,
        }),
    }
}

/// The recorded holder of a busy lease, when the record is the lock owner's. The owner writes
/// its record right after taking the lock, so a missing or stale one is read again briefly.
/// `None` when nobody holds the lock any more (it was released meanwhile).
fn busy_holder(c: &mut postgres::Client, id: &str) -> Result<Option<Busy>, PgError> {
    let deadline = Instant::now() + Duration::from_millis(500);
    loop {
        let row = c
            .query_opt(
                &format!(
                    "SELECT l.holder_name, l.holder_host, l.holder_pid, \
                     to_char(l.since AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') \
                     FROM session_leases l WHERE l.session_id = $1 AND l.backend_pid IN ( \
                       SELECT k.pid FROM pg_locks k WHERE k.locktype = 'advisory' AND k.granted \
                       AND k.objsubid = 1 \
                       AND k.classid::bigint = ({KEY} >> 32) & 4294967295 \
                       AND k.objid::bigint = {KEY} & 4294967295)"
                ),
                &[&id],
            )
            .map_err(query("read the lease holder"))?;
        if let Some(r) = row {
            let pid: i64 = r.col(2)?;
            return Ok(Some(Busy {
                holder: Some(HolderInfo {
                    name: r.col(0)?,
                    host: r.col(1)?,
                    pid: u32::try_from(pid).unwrap_or(0),
                }),
                since: r.col::<Option<String>>(3)?.map(Timestamp::from_raw),
            }));
        }
        let held: bool = c
            .query_one(
                &format!(
                    "SELECT EXISTS (SELECT 1 FROM pg_locks k WHERE k.locktype = 'advisory' \
                     AND k.granted AND k.objsubid = 1 \
                     AND k.classid::bigint = ({KEY} >> 32) & 4294967295 \
                     AND k.objid::bigint = {KEY} & 4294967295)"
                ),
                &[&id],
            )
            .map_err(query("look for the lease holder"))?
            .col(0)?;
        if !held {
            return Ok(None);
        }
        if Instant::now() >= deadline {
            return Ok(Some(Busy {
                holder: None,
                since: None,
            }));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

impl PgLease {
    fn take(&self) -> Option<ConnThread> {
        self.conn
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    /// Unlocks and forgets the holder record; the connection closes when `conn` is dropped.
    fn end(&self, conn: ConnThread) -> Result<(), PgError> {
        let id = self.session_id.clone();
        conn.call(move |s| {
            if !s.is_connected() {
                // The server session is gone, and the lock with it.
                return Ok(());
            }
            let c = s.client()?;
            c.execute(
                "DELETE FROM session_leases WHERE session_id = $1 AND backend_pid = pg_backend_pid()",
                &[&id],
            )
            .map_err(query("forget the lease holder"))?;
            c.execute(&format!("SELECT pg_advisory_unlock({KEY})"), &[&id])
                .map_err(query("release the lease lock"))?;
            Ok(())
        })
    }
}

impl LeaseGuard for PgLease {
    fn session_id(&self) -> &str {
        &self.session_id
    }

    fn holder(&self) -> &HolderInfo {
        &self.holder
    }

    fn renew(&self) -> Result<(), StorageError> {
        let lost = || StorageError::LeaseLost {
            session_id: self.session_id.clone(),
        };
        let guard = self.conn.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(conn) = guard.as_ref() else {
            return Err(lost());
        };
        let id = self.session_id.clone();
        let held = conn.call(move |s| {
            if !s.is_connected() {
                return Ok(false);
            }
            let held: bool = s
                .client()?
                .query_one(
                    &format!(
                        "SELECT EXISTS (SELECT 1 FROM pg_locks k WHERE k.locktype = 'advisory' \
                         AND k.granted AND k.pid = pg_backend_pid() AND k.objsubid = 1 \
                         AND k.classid::bigint = ({KEY} >> 32) & 4294967295 \
                         AND k.objid::bigint = {KEY} & 4294967295)"
                    ),
                    &[&id],
                )
                .map_err(query("check the lease lock"))?
                .col(0)?;
            Ok(held)
        });
        match held {
            Ok(true) => Ok(()),
            Ok(false) => Err(lost()),
            Err(e) if e.is_connection_lost() => Err(lost()),
            Err(e) => Err(storage(
                "renew the lease of",
                Target::session(&self.session_id),
                e,
            )),
        }
    }

    fn release(self: Box<Self>) -> Result<(), StorageError> {
        match self.take() {
            Some(conn) => self
                .end(conn)
                .map_err(|e| storage("release the lease of", Target::session(&self.session_id), e)),
            None => Ok(()),
        }
    }
}

impl Drop for PgLease {
    fn drop(&mut self) {
        if let Some(conn) = self.take() {
            // Best effort: closing the connection releases the lock anyway.
            let _ = self.end(conn);
        }
    }
}
