//! `skillhost policy NAME [FLAGS]`: what a SKILL.md skill's scripts may have beyond
//! nothing, written by a person, kept in the host's data dir (never in the skill's
//! folder) and bound to the skill's approval: a changed policy needs `approve` again.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use skillhost::{run::RunPolicy, skill::fmt_duration};

use crate::app::{self, App};
use crate::exit;

/// The options of `policy`.
#[derive(clap::Args)]
#[command(after_help = "Without flags it shows the policy. Flags add to it (--reset starts from nothing).
The policy lives in DATA_DIR/policies, never in the skill's folder; a changed policy
changes what the skill asks for, so it waits for `skillhost approve` again.

Examples:
  skillhost policy csv-report
  skillhost policy csv-report --allow https://api.example.com --timeout 2m
  skillhost policy csv-report --allow http://127.0.0.1:8080
  skillhost policy csv-report --secret token=Authorization@http://127.0.0.1:8080
  skillhost policy csv-report --path ./report=reports --data rw
  skillhost policy csv-report --reset")]
pub struct PolicyArgs {
    /// The skill.
    skill: String,
    #[command(flatten)]
    flags: PolicyFlags,
    /// Print the policy file's text instead of a summary.
    #[arg(long)]
    json: bool,
}

/// What a policy may grant, as flags (`policy`, and `approve` before it asks).
#[derive(clap::Args)]
pub struct PolicyFlags {
    /// Let its scripts reach this origin through the egress proxy (`https://api.example.com`,
    /// `http://127.0.0.1:8080`). Repeatable.
    #[arg(long = "allow", value_name = "URL")]
    allow: Vec<String>,
    /// Let this exact host name resolve to a private address (an origin also given to --allow).
    #[arg(long = "private", value_name = "URL")]
    private: Vec<String>,
    /// Have the proxy add a secret to its plain-HTTP requests for an origin (the script never
    /// sees it): `NAME=HEADER@URL`, or `NAME=HEADER:FORMAT@URL` with `{}` for the value
    /// (`api-token=Authorization:Bearer {}@http://127.0.0.1:8080`). The origin must be allowed.
    #[arg(long = "secret", value_name = "NAME=HEADER[:FORMAT]@URL")]
    secrets: Vec<String>,
    /// Its data dir at /data: `ro` or `rw`.
    #[arg(long, value_name = "ro|rw")]
    data: Option<String>,
    /// A host directory its scripts see at /host/NAME: `DIR`, `DIR:rw`, `DIR=NAME` or
    /// `DIR:rw=NAME` (read-only unless `:rw`). Opened without following links. Repeatable.
    #[arg(long = "path", value_name = "DIR[:rw][=NAME]")]
    paths: Vec<String>,
    /// A package added to what its scripts declare: a requirement (`NAME`, `NAME==1.2`,
    /// `NAME>=1,<2`), resolved to exact versions with their hashes by `approve`, which
    /// shows them so. Repeatable.
    #[arg(long = "package", value_name = "REQUIREMENT")]
    packages: Vec<String>,
    /// Time limit of each run (e.g. 90s, 5m).
    #[arg(long, value_name = "DURATION", value_parser = app::parse_duration)]
    timeout: Option<Duration>,
    /// Memory limit of each run's whole process tree (e.g. 1GiB).
    #[arg(long, value_name = "SIZE")]
    memory: Option<String>,
    /// Cap on each of stdout and stderr of a run (e.g. 4MiB).
    #[arg(long, value_name = "SIZE")]
    output: Option<String>,
    /// Size of each run's workspace (e.g. 256MiB).
    #[arg(long, value_name = "SIZE")]
    workspace: Option<String>,
    /// Let runs start ANY command an agent sends with these grants (inline code such as
    /// `python -c` or `sh -c`, any program in the jail), not only one of its approved
    /// scripts. Shown in its approval request; approve it again after.
    #[arg(long, conflicts_with = "scripts_only")]
    any_command: bool,
    /// Let runs start only its approved scripts again (the default).
    #[arg(long)]
    scripts_only: bool,
    /// Start from nothing instead of the current policy.
    #[arg(long)]
    reset: bool,
}

impl PolicyFlags {
    /// Whether any flag changes the policy.
    pub fn changes(&self) -> bool {
        self.reset
            || !(self.allow.is_empty()
                && self.private.is_empty()
                && self.secrets.is_empty()
                && self.paths.is_empty()
                && self.packages.is_empty())
            || self.data.is_some()
            || self.timeout.is_some()
            || self.memory.is_some()
            || self.output.is_some()
            || self.workspace.is_some()
            || self.any_command
            || self.scripts_only
    }

    /// Write `skill`'s policy changed by these flags (it then waits for approval again):
    /// the policy now.
    pub async fn write(&self, registry: &skillhost::Registry, skill: &str) -> Result<RunPolicy> {
        let entry = registry.entry(skill)?;
        let current = RunPolicy::read(&registry.policy_path(&entry.identity)).map_err(|e| exit::usage(e.to_string()))?;
        let base = if self.reset { RunPolicy::none() } else { current };
        let updated = apply(&base, self)?;
        registry.set_policy(skill, &updated).await?;
        Ok(updated)
    }
}

/// Show or change the policy.
pub async fn run(app: &App, args: PolicyArgs) -> Result<ExitCode> {
    let host = app.host()?;
    let registry = app.registry_for(&host, &args.skill, true).await?;
    let entry = registry.entry(&args.skill)?;
    let current = registry.policy_path(&entry.identity);
    let changes = args.flags.changes();
    let policy = match changes {
        true => args.flags.write(&registry, &args.skill).await?,
        false => RunPolicy::read(&current).map_err(|e| exit::usage(e.to_string()))?,
    };
    if args.json {
        let value = serde_json::json!({ "skill": args.skill, "file": current, "policy": policy.to_toml(), "grants": policy.requests(), "digest": policy.digest() });
        outln!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(ExitCode::SUCCESS);
    }
    outln!("Policy of `{}` ({}):", args.skill, current.display());
    for line in policy.requests() {
        outln!("  {line}");
    }
    if let Some(timeout) = policy.limits.timeout {
        outln!("  limit timeout of each run: {}", fmt_duration(timeout));
    }
    if changes {
        outln!("Changed: review and approve it with `skillhost show {0}` and `skillhost approve {0}`.", args.skill);
    }
    Ok(ExitCode::SUCCESS)
}

/// `base` with the flags applied, checked by the policy's own parser.
fn apply(base: &RunPolicy, args: &PolicyFlags) -> Result<RunPolicy> {
    let mut table: toml::Table = toml::from_str(&base.to_toml())?;
    let push = |table: &mut toml::Table, path: &[&str], value: toml::Value| {
        let mut at = table;
        for key in &path[..path.len() - 1] {
            at = at.entry(*key).or_insert_with(|| toml::Value::Table(Default::default())).as_table_mut().expect("a table");
        }
        let list = at.entry(path[path.len() - 1]).or_insert_with(|| toml::Value::Array(Vec::new()));
        if let Some(list) = list.as_array_mut()
            && !list.contains(&value)
        {
            list.push(value);
        }
    };
    for url in &args.allow {
        push(&mut table, &["network", "allow"], url.clone().into());
    }
    for url in &args.private {
        push(&mut table, &["network", "private"], url.clone().into());
    }
    for spec in &args.secrets {
        let bad = || exit::usage(format!("--secret {spec:?}: write NAME=HEADER@URL or NAME=HEADER:FORMAT@URL"));
        let (name, rest) = spec.split_once('=').ok_or_else(bad)?;
        let (header, url) = rest.rsplit_once('@').ok_or_else(bad)?;
        let (header, format) = header.split_once(':').unwrap_or((header, "{}"));
        let mut secret = toml::Table::new();
        secret.insert("name".into(), name.into());
        secret.insert("header".into(), header.into());
        secret.insert("format".into(), format.into());
        secret.insert("hosts".into(), toml::Value::Array(vec![url.into()]));
        push(&mut table, &["secrets"], toml::Value::Table(secret));
    }
    if let Some(data) = &args.data {
        table.insert("data".into(), mode(data)?.into());
    }
    for spec in &args.paths {
        let (dir, name) = match spec.split_once('=') {
            Some((dir, name)) => (dir, Some(name)),
            None => (spec.as_str(), None),
        };
        let (dir, rw) = match dir.strip_suffix(":rw") {
            Some(dir) => (dir, true),
            None => (dir.strip_suffix(":ro").unwrap_or(dir), false),
        };
        let dir = std::path::absolute(dir)?;
        let mut path = toml::Table::new();
        path.insert("host".into(), dir.to_string_lossy().into_owned().into());
        if let Some(name) = name {
            path.insert("as".into(), name.into());
        }
        path.insert("mode".into(), if rw { "rw" } else { "ro" }.into());
        push(&mut table, &["paths"], toml::Value::Table(path));
    }
    for package in &args.packages {
        push(&mut table, &["packages"], package.clone().into());
    }
    if let Some(timeout) = args.timeout {
        set(&mut table, "limits", "timeout", fmt_duration(timeout));
    }
    for (key, value) in [("memory", &args.memory), ("output", &args.output)] {
        if let Some(value) = value {
            set(&mut table, "limits", key, value.clone());
        }
    }
    if let Some(size) = &args.workspace {
        table.insert("workspace".into(), size.clone().into());
    }
    if args.any_command {
        table.insert("any_command".into(), true.into());
    } else if args.scripts_only {
        table.remove("any_command");
    }
    let text = toml::to_string(&table)?;
    RunPolicy::parse(&text, std::path::Path::new("(skillhost policy flags)")).map_err(|e| exit::usage(e.to_string()))
}

fn set(table: &mut toml::Table, section: &str, key: &str, value: String) {
    if let Some(section) = table.entry(section).or_insert_with(|| toml::Value::Table(Default::default())).as_table_mut() {
        section.insert(key.into(), value.into());
    }
}

fn mode(text: &str) -> Result<&'static str> {
    match text {
        "ro" | "read-only" => Ok("ro"),
        "rw" | "read-write" => Ok("rw"),
        other => Err(exit::usage(format!("--data {other:?}: write `ro` or `rw`"))),
    }
}
