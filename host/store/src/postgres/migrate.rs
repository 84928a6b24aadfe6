//! The schema of the PostgreSQL state store, as numbered steps: each applied once, in one
//! transaction under an advisory lock (replicas starting together wait for each other),
//! its number recorded in `skillhost_schema`. A database at a higher number than this
//! host knows is refused: an older replica never writes rows a newer schema reads
//! differently.

use super::PgFail;

/// The advisory lock key the migrations hold ("skillhos" in ASCII).
const LOCK: i64 = 0x736b_696c_6c68_6f73;

/// Every step, in order; the schema version is the number of steps applied.
const STEPS: &[&str] = &[
    // 1: trust (the rows of trust.db at its schema 3), the audit log and the usage
    // statistics, each audit and statistics row naming its replica.
    "CREATE TABLE skills (
         name              TEXT PRIMARY KEY,
         state             TEXT NOT NULL,
         seen_hash         TEXT,
         seen_digest       TEXT,
         approved_hash     TEXT,
         approved_digest   TEXT,
         approved_requests TEXT,
         approved_by       TEXT,
         approved_via      TEXT,
         approved_at       BIGINT,
         rejected          BOOLEAN NOT NULL DEFAULT FALSE,
         updated_at        BIGINT NOT NULL
     );
     CREATE TABLE approvals (
         name              TEXT NOT NULL,
         content_hash      TEXT NOT NULL,
         capability_digest TEXT NOT NULL,
         requests          TEXT,
         approved_by       TEXT NOT NULL,
         approved_via      TEXT,
         approved_at       BIGINT NOT NULL,
         PRIMARY KEY (name, content_hash, capability_digest)
     );
     CREATE TABLE egress (
         id          BIGSERIAL PRIMARY KEY,
         replica     TEXT NOT NULL,
         time_ms     BIGINT NOT NULL,
         skill       TEXT NOT NULL,
         tool        TEXT NOT NULL,
         method      TEXT NOT NULL,
         url         TEXT NOT NULL,
         ip          TEXT,
         outcome     TEXT NOT NULL,
         status      INTEGER,
         reason      TEXT,
         bytes_out   BIGINT NOT NULL,
         bytes_in    BIGINT NOT NULL,
         duration_us BIGINT NOT NULL
     );
     CREATE INDEX egress_skill_time ON egress (skill, time_ms);
     CREATE TABLE runs (
         id          BIGSERIAL PRIMARY KEY,
         replica     TEXT NOT NULL,
         time_ms     BIGINT NOT NULL,
         skill       TEXT NOT NULL,
         command     TEXT NOT NULL,
         outcome     TEXT NOT NULL,
         code        INTEGER,
         reason      TEXT,
         bytes_in    BIGINT NOT NULL,
         bytes_out   BIGINT NOT NULL,
         duration_us BIGINT NOT NULL
     );
     CREATE INDEX runs_skill_time ON runs (skill, time_ms);
     CREATE TABLE calls (
         id      BIGSERIAL PRIMARY KEY,
         replica TEXT NOT NULL,
         skill   TEXT NOT NULL,
         tool    TEXT NOT NULL,
         outcome SMALLINT NOT NULL,
         ms      DOUBLE PRECISION NOT NULL,
         at      BIGINT NOT NULL
     );
     CREATE INDEX calls_skill ON calls (skill, id);
     CREATE TABLE misses (
         id      BIGSERIAL PRIMARY KEY,
         replica TEXT NOT NULL,
         query   TEXT NOT NULL,
         at      BIGINT NOT NULL
     );",
    // 2: calls claimed by a key, run at most once across the replicas, and the replicas'
    // heartbeats that tell a claim's host is gone.
    "CREATE TABLE call_claims (
         key        TEXT PRIMARY KEY,
         replica    TEXT NOT NULL,
         started_ms BIGINT NOT NULL,
         answer     TEXT
     );
     CREATE INDEX call_claims_started ON call_claims (started_ms);
     CREATE TABLE replicas (
         name    TEXT PRIMARY KEY,
         seen_ms BIGINT NOT NULL
     );",
    // 3: skills' run policies, package locks and approved files, shared.
    "CREATE TABLE policies (
         identity   TEXT NOT NULL,
         kind       TEXT NOT NULL,
         text       TEXT NOT NULL,
         updated_at BIGINT NOT NULL,
         PRIMARY KEY (identity, kind)
     );",
    // 4: the files runs left, readable from every replica until collected.
    "CREATE TABLE run_files (
         seq     BIGSERIAL,
         run     TEXT NOT NULL,
         path    TEXT NOT NULL,
         bytes   BYTEA NOT NULL,
         size    BIGINT NOT NULL,
         kept_ms BIGINT NOT NULL,
         PRIMARY KEY (run, path)
     );",
    // 5: the callers of the HTTP front (their tokens' SHA-256), and the org policy's
    // decisions, each naming its replica.
    "CREATE TABLE callers (
         name       TEXT PRIMARY KEY,
         token      TEXT NOT NULL UNIQUE,
         groups     TEXT NOT NULL,
         created_ms BIGINT NOT NULL,
         expires_ms BIGINT
     );
     CREATE TABLE decisions (
         id       BIGSERIAL PRIMARY KEY,
         replica  TEXT NOT NULL,
         time_ms  BIGINT NOT NULL,
         caller   TEXT NOT NULL,
         action   TEXT NOT NULL,
         resource TEXT NOT NULL,
         allowed  BOOLEAN NOT NULL,
         policies TEXT NOT NULL
     );
     CREATE INDEX decisions_caller_time ON decisions (caller, time_ms);",
];

/// Bring the schema up to date.
pub(super) async fn migrate(mut client: deadpool_postgres::Object) -> Result<(), PgFail> {
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&LOCK]).await?;
    tx.batch_execute("CREATE TABLE IF NOT EXISTS skillhost_schema (version INTEGER NOT NULL)").await?;
    let version: i32 = match tx.query_opt("SELECT version FROM skillhost_schema", &[]).await? {
        Some(row) => row.get(0),
        None => {
            tx.execute("INSERT INTO skillhost_schema (version) VALUES (0)", &[]).await?;
            0
        }
    };
    let known = STEPS.len() as i32;
    if version > known {
        return Err(PgFail::Schema(format!(
            "schema version {version} is newer than this skillhost's ({known}): upgrade this host to the version the other replicas run"
        )));
    }
    for step in &STEPS[version as usize..] {
        tx.batch_execute(step).await?;
    }
    tx.execute("UPDATE skillhost_schema SET version = $1", &[&known]).await?;
    tx.commit().await?;
    Ok(())
}
