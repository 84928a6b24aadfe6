//! `skillhost doctor`: what this machine gives skills, and what to do about what it lacks.
//! The sandbox's isolation layers come from the sandbox runtime's own detection (the same
//! the host warns about at start); this module adds what bubblewrap's version means for
//! the mounts (CVE-2026-87766), whether server skills start with every layer the host
//! expects (or without those its config accepted), the managed venv, whether node's
//! fetch reaches the network from a networked sandbox, the embedding
//! model and the guest toolchains, where the state lives (and whether a shared store
//! answers), in team mode whether every locked skill is served as locked, and prints.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use serde::Serialize;
use skillhost::Host;

use crate::app::App;
use crate::toolchain::{self, Toolchain};

/// One line of the report.
#[derive(Serialize)]
struct Check {
    name: String,
    available: bool,
    detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    fix: Option<String>,
}

/// The options of `doctor`.
#[derive(clap::Args)]
#[command(after_help = "Lists every isolation layer of the sandbox (bwrap and its version, user
namespaces, the drop from root to an unprivileged uid, a cgroup per server with its
controllers, the seccomp filter), the managed Python venv, node's fetch in networked
sandboxes, the embedding model and the guest toolchains; for each one that is missing, what to do. A missing layer is not an
error: the host warns once at start and runs with what it has.

Examples:
  skillhost doctor
  skillhost doctor --json | jq '.[] | select(.available | not)'")]
pub struct DoctorArgs {
    /// Print JSON for scripts.
    #[arg(long)]
    json: bool,
}

/// Print the report; exit code 0 (a missing layer is reported, not an error).
pub async fn run(app: &App, args: DoctorArgs) -> Result<ExitCode> {
    let host = app.host()?;
    let data_dir = &app.data_dir;
    let mut checks = sandbox_checks(&host, &app.venv_dir());
    checks.push(state_check(&host));
    if let Some(lock) = app.config()?.team.lock.clone() {
        checks.push(lock_check(app, &host, &lock).await?);
    }
    let model = crate::model::model_dir(data_dir);
    let installed = model.join(".skillhost-model").is_file();
    checks.push(Check {
        name: "embedding model".into(),
        available: installed,
        detail: model.display().to_string(),
        fix: (!installed).then(|| "run `skillhost setup model`; until then search ranks with BM25 alone".into()),
    });
    let root = toolchain::root(data_dir);
    // node-fetch is the sandbox's: its check is the runtime's own (`sandbox_checks`).
    for chain in Toolchain::ALL.into_iter().filter(|c| *c != Toolchain::NodeFetch) {
        let found = chain.installed(&root);
        checks.push(Check {
            name: format!("toolchain {}", chain.tool()),
            available: found.is_some(),
            detail: found.map_or_else(|| format!("not installed in {}", root.display()), |p| p.display().to_string()),
            fix: found_fix(chain, &root),
        });
    }
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&checks)?);
    } else {
        for check in &checks {
            let mark = if check.available { "ok  " } else { "MISSING" };
            outln!("{mark:8} {:18} {}", check.name, check.detail);
            if let Some(fix) = check.fix.as_deref().filter(|_| !check.available) {
                outln!("{:27}-> {fix}", "");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Where trust, audit and statistics live, and whether that store answers.
fn state_check(host: &Host) -> Check {
    let state = host.state();
    let replica = if state.replica.is_empty() { String::new() } else { format!(", replica `{}`", state.replica) };
    match state.trust.ping() {
        Ok(took) => Check {
            name: "state".into(),
            available: true,
            detail: format!("{}{replica}, answered in {:.1} ms", state.shown, took.as_secs_f64() * 1000.0),
            fix: None,
        },
        Err(error) => Check {
            name: "state".into(),
            available: false,
            detail: format!("{}{replica}: {error}", state.shown),
            fix: Some("check [state] url (or --state) and that the database answers".into()),
        },
    }
}

/// Team mode: whether every skill the lock pins is installed with the pinned bytes.
async fn lock_check(app: &App, host: &Host, lock: &Path) -> Result<Check> {
    let registry = app.registry_on_demand(host).await?;
    let pinned = app.config()?.pins()?.map(|p| p.hashes.len()).unwrap_or(0);
    registry.ready().await;
    let refused = registry.not_as_locked();
    Ok(Check {
        name: "team lock".into(),
        available: refused.is_empty(),
        detail: if refused.is_empty() {
            format!("every skill {} pins ({pinned}) is served as locked", lock.display())
        } else {
            refused.join("; ")
        },
        fix: (!refused.is_empty())
            .then(|| format!("run `skillhost sync --lock {}`; `serve` refuses these skills and is not ready", lock.display())),
    })
}

/// The sandbox's isolation layers, whether server skills start, and the managed venv.
fn sandbox_checks(host: &Host, venv: &Path) -> Vec<Check> {
    let mut checks = Vec::new();
    match host.sandbox() {
        Ok(runtime) => {
            for layer in runtime.isolation() {
                checks.push(Check {
                    name: layer.name.clone(),
                    available: layer.available,
                    detail: layer.detail.clone(),
                    fix: layer.fix.clone(),
                });
                if layer.name == "bwrap" && layer.available {
                    checks.push(Check {
                        name: "bwrap mounts".into(),
                        available: true,
                        detail: skillhost_jail::isolation::mount_advisory(&layer.detail),
                        fix: None,
                    });
                }
            }
            checks.push(match runtime.sandbox_without() {
                Ok(without) if without.is_empty() => Check {
                    name: "server sandboxes".into(),
                    available: true,
                    detail: "every isolation layer this host expects is in place".into(),
                    fix: None,
                },
                Ok(without) => Check {
                    name: "server sandboxes".into(),
                    available: true,
                    detail: format!("start without: {} (shown with each server skill and its approval)", without.join(", ")),
                    fix: None,
                },
                Err(reason) => Check {
                    name: "server sandboxes".into(),
                    available: false,
                    detail: "server skills do not start: an isolation layer this host expects is missing".into(),
                    fix: Some(reason.message("a sandbox")),
                },
            });
            checks.push(match runtime.venv() {
                Some(venv) => Check { name: "python venv".into(), available: true, detail: venv.dir.display().to_string(), fix: None },
                None => Check {
                    name: "python venv".into(),
                    available: false,
                    detail: format!("none at {}", venv.display()),
                    fix: Some("run `skillhost setup python` (Python server skills need it)".into()),
                },
            });
            checks.push(match runtime.node_fetch() {
                Ok(dir) => Check {
                    name: "node fetch".into(),
                    available: true,
                    detail: format!("node's fetch in a networked sandbox goes through the proxy ({})", dir.display()),
                    fix: None,
                },
                Err(reason) => Check {
                    name: "node fetch".into(),
                    available: false,
                    detail: format!("node's fetch in a networked sandbox reaches nothing (below node 22.21): {reason}"),
                    fix: Some("run `skillhost setup` (Node scripts and servers with network need it)".into()),
                },
            });
        }
        Err(reason) => checks.push(Check {
            name: "bwrap".into(),
            available: false,
            detail: reason.to_string(),
            fix: Some("install bubblewrap and util-linux; server skills cannot run without them".into()),
        }),
    }
    checks
}

fn found_fix(chain: Toolchain, root: &Path) -> Option<String> {
    chain.installed(root).is_none().then(|| {
        format!(
            "run `skillhost setup toolchains` (`skillhost build` of a {} skill needs it)",
            if chain == Toolchain::Python { "Python" } else { "JavaScript" }
        )
    })
}
