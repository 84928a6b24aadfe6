//! `skillhost index rebuild` and `skillhost index status`: the host's search index in
//! `DATA_DIR/index`, and the sync with a progress bar that `search` shares.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Subcommand;
use serde_json::json;
use skillhost::index::{SearchIndex, SyncProgress, SyncStats};
use skillhost::{Host, Registry};

use crate::app::App;

/// `skillhost index ...`
#[derive(Subcommand)]
pub enum IndexCommand {
    /// Drop the index and index every skill again, embedding every document
    #[command(after_help = "The index normally keeps itself up to date: at each start only skills whose
content, trust state or origin changed are indexed again, and a model change re-embeds
everything. Rebuild after a crash you distrust, or to retry embeddings that failed.

Examples:
  skillhost index rebuild
  skillhost index rebuild --json")]
    Rebuild {
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Show what the index holds: documents, skills, ranker, model, directory, size
    #[command(after_help = "The ranker is `hybrid` when the embedding model is installed (`skillhost setup
model`, or SKILLHOST_MODEL_DIR), else `bm25`. The index is synced with the skills first.

Examples:
  skillhost index status
  skillhost index status --json | jq .documents")]
    Status {
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
}

/// A progress bar over documents indexed, shown only once there is work (and only on
/// a terminal: indicatif hides it otherwise).
fn progress(message: &'static str) -> (indicatif::ProgressBar, impl FnMut(SyncProgress)) {
    let bar = indicatif::ProgressBar::hidden();
    let shown = bar.clone();
    let mut started = false;
    let update = move |p: SyncProgress| {
        if !started {
            started = true;
            shown.set_draw_target(indicatif::ProgressDrawTarget::stderr());
            shown.set_style(
                indicatif::ProgressStyle::with_template("{spinner} {msg} [{bar:30}] {pos}/{len} documents [{elapsed}]")
                    .expect("valid template")
                    .progress_chars("=> "),
            );
            shown.set_message(message);
            shown.set_length(p.total as u64);
        }
        shown.set_position(p.done as u64);
    };
    (bar, update)
}

/// The host's index, synced with `registry` (a progress bar when there is much to embed).
pub fn synced(host: &Host, registry: &Registry) -> Result<Arc<SearchIndex>> {
    let index = host.search_index().context("cannot open the search index")?;
    let (bar, mut update) = progress("indexing skills");
    let stats = index.sync_with(registry, &mut update).context("cannot index the skills")?;
    bar.finish_and_clear();
    tracing::debug!(?stats, "search index synced");
    Ok(index)
}

/// Run an index command over the registry's skills.
pub async fn run(app: &App, command: IndexCommand) -> Result<ExitCode> {
    let host = app.host()?;
    let registry = app.registry(&host).await?;
    let (host, registry) = (&host, &*registry);
    match command {
        IndexCommand::Rebuild { json } => {
            let index = host.search_index().context("cannot open the search index")?;
            let (bar, mut update) = progress("rebuilding the search index");
            let started = std::time::Instant::now();
            let stats = index.rebuild(registry, &mut update).context("cannot rebuild the search index")?;
            bar.finish_and_clear();
            report_rebuild(&index, stats, started.elapsed(), json)?;
        }
        IndexCommand::Status { json } => {
            let index = synced(host, registry)?;
            report_status(&index, json)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn report_rebuild(index: &SearchIndex, stats: SyncStats, took: std::time::Duration, json: bool) -> Result<()> {
    let status = index.status();
    if json {
        let value = json!({
            "skills": stats.indexed,
            "documents": status.documents,
            "embedded": stats.embedded,
            "ranker": status.ranker,
            "seconds": took.as_secs_f64(),
        });
        outln!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        outln!(
            "rebuilt the search index: {} skills, {} documents, {} embedded, ranker {} ({:.1?})",
            stats.indexed,
            status.documents,
            stats.embedded,
            status.ranker,
            took
        );
    }
    Ok(())
}

fn report_status(index: &SearchIndex, json: bool) -> Result<()> {
    let status = index.status();
    let dir = status.storage.dir().map(|d| d.display().to_string());
    if json {
        let value = json!({
            "documents": status.documents,
            "skills": status.skills,
            "embedded": status.embedded,
            "ranker": status.ranker,
            "model": status.model,
            "storage": status.storage.kind(),
            "dir": dir,
            "disk_bytes": status.disk_bytes,
            "vector_bytes": status.vector_bytes,
        });
        outln!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(());
    }
    outln!("documents: {} ({} skills, {} embedded)", status.documents, status.skills, status.embedded);
    outln!("ranker:    {}", status.ranker);
    outln!("model:     {}", status.model.as_deref().unwrap_or("none (`skillhost setup model` installs it)"));
    let storage = match status.storage.kind() {
        "disk" => format!("{} ({})", dir.unwrap_or_default(), size(status.disk_bytes.unwrap_or(0))),
        "copy" => format!("in-memory copy of {} (another skillhost process writes it)", dir.unwrap_or_default()),
        _ => "in memory (the index directory was unusable; see the warning above)".to_owned(),
    };
    outln!("storage:   {storage}");
    Ok(())
}

fn size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / f64::from(1 << 20)),
        b if b >= 1 << 10 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{b} B"),
    }
}
