//! The PostgreSQL stores against a real server ([`Cluster`]): the trust rules give what
//! they give on SQLite, a human's change reaches another host's store as a notification,
//! a disable made elsewhere is never overwritten by a load, and the audit and statistics
//! of two replicas are one table each.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use skillhost_core::{AuditSink, EgressOutcome, EgressRecord, RiskTier};

use super::cluster::Cluster;
use super::*;
use crate::audit::{AuditLog, AuditQuery};
use crate::stats::{Outcome, Stats};
use crate::trust::{ApprovalChannel, Observation, SqliteTrustStore, TrustChange, TrustState, TrustStore};

fn seen<'a>(name: &'a str, hash: &'a str, tier: RiskTier) -> Observation<'a> {
    Observation { name, content_hash: hash, capability_digest: "d1", tier }
}

/// The rules of the module docs of `trust.rs`, step by step, on `store`.
fn trust_rules(store: &dyn TrustStore) -> Vec<TrustState> {
    let mut states = Vec::new();
    let v1 = seen("tool", "h1", RiskTier::Confirm);
    let v2 = seen("tool", "h2", RiskTier::Confirm);
    states.push(store.observe(&v1, &[]).unwrap()); // new: pending_review
    store.write_approval(&v1, &["reads files".to_owned()], ApprovalChannel::Cli).unwrap();
    states.push(store.observe(&v1, &[]).unwrap()); // approved
    states.push(store.observe(&v2, &[]).unwrap()); // changed: needs_reapproval
    states.push(store.observe(&v1, &[]).unwrap()); // rolled back: approved again
    store.disable("tool").unwrap();
    states.push(store.observe(&v1, &[]).unwrap()); // disabled stays
    store.enable("tool").unwrap();
    states.push(store.observe(&v1, &[]).unwrap()); // approved again
    store.reject("tool").unwrap();
    states.push(store.observe(&v1, &[]).unwrap()); // rejected: pending_review
    let auto = seen("auto", "h1", RiskTier::Auto);
    states.push(store.observe(&auto, &[]).unwrap()); // auto: approved
    let record = store.get("tool").unwrap().unwrap();
    assert!(record.rejected && record.approved_hash.is_none(), "{record:?}");
    states
}

#[test]
fn the_trust_rules_are_the_same_on_postgres_as_on_sqlite() {
    let cluster = Cluster::start().unwrap();
    let pg = Pg::connect(&cluster.url(), "a").unwrap();
    let on_postgres = trust_rules(&PgTrustStore::open(pg));
    let dir = tempfile::tempdir().unwrap();
    let on_sqlite = trust_rules(&SqliteTrustStore::open(dir.path()).unwrap());
    use TrustState::*;
    assert_eq!(on_sqlite, [PendingReview, Approved, NeedsReapproval, Approved, Disabled, Approved, PendingReview, Approved]);
    assert_eq!(on_postgres, on_sqlite);
}

#[test]
fn a_humans_approval_on_one_host_reaches_the_others_and_a_load_never_undoes_a_disable() {
    let cluster = Cluster::start().unwrap();
    // Two hosts: replicas a and b, each with its own connection pool and listener.
    let a = PgTrustStore::open(Pg::connect(&cluster.url(), "a").unwrap());
    let b = PgTrustStore::open(Pg::connect(&cluster.url(), "b").unwrap());
    let mut heard = b.changes().expect("a PostgreSQL store tells of changes");
    let v1 = seen("tool", "h1", RiskTier::Confirm);
    assert_eq!(b.observe(&v1, &[]).unwrap(), TrustState::PendingReview);
    // The listener connects in the background: wait until it hears (a disable it then undoes).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        a.enable("tool").unwrap();
        if heard.try_recv().is_ok() || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    while heard.try_recv().is_ok() {}

    let mut latencies = Vec::new();
    for (change, expect) in [("approve", TrustState::Approved), ("reject", TrustState::PendingReview), ("disable", TrustState::Disabled)] {
        let started = Instant::now();
        match change {
            "approve" => a.write_approval(&v1, &[], ApprovalChannel::Cli).unwrap(),
            "reject" => a.reject("tool").unwrap(),
            _ => a.disable("tool").unwrap(),
        }
        let got = loop {
            match heard.try_recv() {
                Ok(change) => break change,
                Err(tokio::sync::broadcast::error::TryRecvError::Empty) if started.elapsed() < Duration::from_secs(5) => {
                    std::thread::sleep(Duration::from_millis(1))
                }
                Err(e) => panic!("{change} on host a was not heard on host b: {e:?}"),
            }
        };
        latencies.push(started.elapsed());
        assert_eq!(got, TrustChange::Skill("tool".to_owned()), "{change}");
        assert_eq!(b.observe(&v1, &[]).unwrap(), expect, "host b reads the state host a wrote after {change}");
    }
    eprintln!("a change on one host heard on the other after {latencies:?}");

    // A load on host b computes `approved` from an approval; a disable made on host a
    // meanwhile stays: the row keeps `disabled`, and the load is told so.
    a.enable("tool").unwrap();
    a.write_approval(&v1, &[], ApprovalChannel::Cli).unwrap();
    a.disable("tool").unwrap();
    assert_eq!(b.record_seen(&v1, TrustState::Approved).unwrap(), TrustState::Disabled);
    assert!(!b.restore_approval(&v1).unwrap(), "an earlier approval is not restored over a disable");
    assert_eq!(a.get("tool").unwrap().unwrap().state, TrustState::Disabled);

    // Automatic approvals and loads tell nobody (replicas would echo each other).
    while heard.try_recv().is_ok() {}
    a.observe(&seen("auto", "h1", RiskTier::Auto), &[]).unwrap();
    a.observe(&v1, &[]).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(heard.try_recv().is_err(), "a load or an automatic approval notified the other hosts");
}

#[test]
fn the_audit_and_statistics_of_two_replicas_are_one_table_naming_each() {
    let cluster = Cluster::start().unwrap();
    let (pa, pb) = (Pg::connect(&cluster.url(), "a").unwrap(), Pg::connect(&cluster.url(), "b").unwrap());
    let (audit_a, audit_b) = (PgAuditLog::open(pa.clone()).unwrap(), PgAuditLog::open(pb.clone()).unwrap());
    let (stats_a, stats_b) = (PgStats::open(pa.clone()).unwrap(), PgStats::open(pb.clone()).unwrap());
    for (audit, skill) in [(&audit_a, "one"), (&audit_b, "two")] {
        audit.record(EgressRecord {
            time: SystemTime::now(),
            skill: skill.to_owned(),
            tool: "fetch".to_owned(),
            method: "GET".to_owned(),
            url: "https://example.org/".to_owned(),
            ip: None,
            outcome: EgressOutcome::Status(200),
            bytes_out: 10,
            bytes_in: 20,
            duration: Duration::from_millis(3),
        });
        audit.flush();
    }
    for _ in 0..3 {
        stats_a.record_call("one", "fetch", Outcome::Ok, Duration::from_millis(2));
        stats_b.record_call("one", "fetch", Outcome::Failed, Duration::from_millis(4));
    }
    // Each replica writes its own rows in the background; a reader flushes only its own.
    stats_a.flush();
    let rows = audit_a.query(&AuditQuery::default()).unwrap();
    assert_eq!(rows.iter().map(|r| r.skill.as_str()).collect::<Vec<_>>(), ["one", "two"], "host a reads host b's rows");
    let tools = stats_b.tools().unwrap();
    assert_eq!((tools[0].calls, tools[0].failures), (6, 3), "{tools:?}");
    let replicas = pa
        .block(|client| async move {
            let rows = client.query("SELECT replica, count(*) FROM calls GROUP BY replica ORDER BY replica", &[]).await?;
            let egress = client.query("SELECT replica FROM egress ORDER BY id", &[]).await?;
            Ok((
                rows.iter().map(|r| (r.get::<_, String>(0), r.get::<_, i64>(1))).collect::<Vec<_>>(),
                egress.iter().map(|r| r.get::<_, String>(0)).collect::<Vec<_>>(),
            ))
        })
        .unwrap();
    assert_eq!(replicas.0, [("a".to_owned(), 3), ("b".to_owned(), 3)]);
    assert_eq!(replicas.1, ["a", "b"]);
    drop((audit_a, audit_b, stats_a, stats_b, pb));
    let _: Arc<Pg> = pa;
}

#[test]
fn a_database_that_does_not_answer_fails_with_what_to_check() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let error = Pg::connect(&format!("postgres://skillhost:hunter2@127.0.0.1:{port}/postgres"), "a").err().expect("nothing listens there");
    let text = error.to_string();
    assert!(text.contains("[state] url") && !text.contains("hunter2"), "{text}");
}

#[test]
fn a_password_is_never_shown() {
    assert_eq!(shown("postgres://sh:s3cret@db:5432/skillhost"), "postgres://sh:***@db:5432/skillhost");
    assert_eq!(shown("postgresql://sh@db/skillhost"), "postgres://sh@db:5432/skillhost");
    assert_eq!(shown("host=/run/pg user=sh password=s3cret"), "postgres://sh:***@/run/pg/");
    // A password with a `/`, and one given as a parameter, are hidden too.
    for url in ["postgres://u:ab/cd@db/x", "postgres://u@db/x?password=s3cret", "postgres://u:p%40ss@db/x"] {
        let shown = shown(url);
        assert!(
            !shown.contains("cd") && !shown.contains("s3cret") && !shown.contains("p%40ss") && !shown.contains("p@ss"),
            "{url} → {shown}"
        );
    }
    assert!(shown("postgres://u:pw@[bad").starts_with("(a PostgreSQL connection string that does not parse"));
}

#[test]
fn a_claimed_call_runs_once_across_replicas_and_one_whose_host_died_is_interrupted() {
    use crate::claims::{CallClaims, Claim};
    let cluster = Cluster::start().unwrap();
    let a = PgClaims::open(Pg::connect(&cluster.url(), "a").unwrap());
    let b = PgClaims::open(Pg::connect(&cluster.url(), "b").unwrap());
    assert_eq!(a.claim("k1").unwrap(), Claim::New);
    assert_eq!(b.claim("k1").unwrap(), Claim::Running { replica: "a".to_owned() }, "a runs it and is alive");
    b.finish("k1", "not b's to finish").unwrap();
    a.finish("k1", "{\"answer\":1}").unwrap();
    assert_eq!(b.claim("k1").unwrap(), Claim::Done("{\"answer\":1}".to_owned()), "b answers with a's answer, running nothing");
    assert_eq!(a.claim("k2").unwrap(), Claim::New);
    // Host a stops (its heartbeat with it) while k2 runs.
    drop(a);
    std::thread::sleep(claims::GONE + Duration::from_secs(1));
    assert_eq!(b.claim("k2").unwrap(), Claim::Interrupted { replica: "a".to_owned() });
    assert_eq!(b.claim("k3").unwrap(), Claim::New);
}

#[test]
fn callers_follow_the_same_rules_on_postgres_and_a_caller_removed_on_one_host_is_gone_on_the_other() {
    use crate::callers::CallerStore;
    let cluster = Cluster::start().unwrap();
    crate::callers::tests::the_caller_rules(&PgCallers::open(Pg::connect(&cluster.url(), "a").unwrap()));
    let (a, b) = (PgCallers::open(Pg::connect(&cluster.url(), "a").unwrap()), PgCallers::open(Pg::connect(&cluster.url(), "b").unwrap()));
    assert_eq!(b.find("bb").unwrap().map(|r| r.name), Some("bob".to_owned()));
    assert!(a.remove("bob").unwrap());
    assert_eq!(b.find("bb").unwrap(), None, "removed on a, refused on b at its next lookup");
}

#[test]
fn the_decisions_are_kept_on_postgres_and_read_by_caller() {
    crate::audit::tests::decisions_are_kept_and_read_by_caller(
        &PgAuditLog::open(Pg::connect(&Cluster::start().unwrap().url(), "a").unwrap()).unwrap(),
    );
}

#[test]
fn a_runs_files_kept_by_one_host_are_read_on_another_until_collected() {
    use crate::run_files::{RunFile, RunFileStore};
    let cluster = Cluster::start().unwrap();
    let a = PgRunFiles::with_budget(Pg::connect(&cluster.url(), "a").unwrap(), 3, 1000);
    let b = PgRunFiles::open(Pg::connect(&cluster.url(), "b").unwrap());
    let files = |bytes: &[u8]| [("out/report.pdf".to_owned(), bytes.to_vec()), ("b.bin".to_owned(), vec![0, 1, 2])].into();
    a.keep("r1", &files(b"%PDF-1.7")).unwrap();
    assert_eq!(b.read("r1", "out/report.pdf").unwrap(), RunFile::Bytes(b"%PDF-1.7".to_vec()));
    assert_eq!(b.read("r1", "b.bin").unwrap(), RunFile::Bytes(vec![0, 1, 2]));
    assert_eq!(b.read("r1", "other").unwrap(), RunFile::NoFile);
    assert_eq!(b.read("r0", "b.bin").unwrap(), RunFile::NotKept);
    // Past 3 runs, the oldest goes; past 1000 bytes, the older ones, never the newest.
    for run in ["r2", "r3", "r4"] {
        a.keep(run, &files(b"x")).unwrap();
    }
    assert_eq!(b.read("r1", "b.bin").unwrap(), RunFile::NotKept, "the fourth run collects the first");
    assert!(matches!(b.read("r2", "b.bin").unwrap(), RunFile::Bytes(_)));
    a.keep("r5", &files(&[7; 900])).unwrap();
    a.keep("r6", &files(&[8; 2000])).unwrap();
    for gone in ["r2", "r3", "r4", "r5"] {
        assert_eq!(b.read(gone, "b.bin").unwrap(), RunFile::NotKept, "{gone} is past the byte budget");
    }
    assert_eq!(b.read("r6", "out/report.pdf").unwrap(), RunFile::Bytes(vec![8; 2000]), "a run alone over the budget stays");
}

#[test]
fn a_run_policy_written_on_one_host_is_read_on_the_others_and_told_to_them() {
    use crate::policies::{Kept, PolicyStore};
    let cluster = Cluster::start().unwrap();
    let (pa, pb) = (Pg::connect(&cluster.url(), "a").unwrap(), Pg::connect(&cluster.url(), "b").unwrap());
    let b_trust = PgTrustStore::open(pb.clone());
    let mut heard = b_trust.changes().unwrap();
    let (a, b) = (PgPolicies::open(pa), PgPolicies::open(pb));
    assert_eq!(b.read("tool", Kept::Policy).unwrap(), None);
    // The listener connects in the background: write until it hears.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        a.write("tool", Kept::Policy, "[network]\nallow = []\n").unwrap();
        if heard.try_recv().is_ok() || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    a.write("tool", Kept::Lock, "version = 1\n").unwrap();
    let started = Instant::now();
    while heard.try_recv() != Ok(TrustChange::Skill("tool".to_owned())) {
        assert!(started.elapsed() < Duration::from_secs(5), "a lock written on host a was not told to host b");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(b.read("tool", Kept::Policy).unwrap().as_deref(), Some("[network]\nallow = []\n"));
    assert_eq!(b.read("tool", Kept::Lock).unwrap().as_deref(), Some("version = 1\n"));
    assert!(b.place("tool", Kept::Policy).display().to_string().ends_with("#policies/tool.toml"));
}

#[test]
fn a_listener_whose_connection_dropped_reconnects_and_asks_for_everything_again() {
    let cluster = Cluster::start().unwrap();
    let a = PgTrustStore::open(Pg::connect(&cluster.url(), "a").unwrap());
    let pb = Pg::connect(&cluster.url(), "b").unwrap();
    let b = PgTrustStore::open(pb.clone());
    let mut heard = b.changes().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while heard.try_recv().is_err() {
        assert!(Instant::now() < deadline, "the listener never heard");
        a.enable("tool").unwrap();
        std::thread::sleep(Duration::from_millis(50));
    }
    // The server ends every listening connection (a restart, a failover, a proxy's idle cut).
    pb.block(|client| async move {
        client.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'LISTEN%'", &[]).await?;
        Ok(())
    })
    .unwrap();
    while heard.try_recv().is_ok() {}
    let started = Instant::now();
    loop {
        match heard.try_recv() {
            Ok(TrustChange::All) => break,
            Ok(other) => panic!("{other:?}"),
            Err(_) if started.elapsed() < Duration::from_secs(10) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => panic!("the listener did not come back: {e:?}"),
        }
    }
    eprintln!("the listener was back, asking for every state again, after {:?}", started.elapsed());
    a.disable("tool").unwrap();
    let started = Instant::now();
    while heard.try_recv() != Ok(TrustChange::Skill("tool".to_owned())) {
        assert!(started.elapsed() < Duration::from_secs(5), "changes after the reconnection are heard");
        std::thread::sleep(Duration::from_millis(1));
    }
}
