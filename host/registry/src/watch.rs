//! Hot reload: a notify watcher on every layer directory (recursive) sends the names
//! touched by each event to a channel; one task waits until the file system has been
//! quiet for the debounce interval, then rescans those names. A rescan validates the new
//! version before it replaces the old, so a half-written file only records an error.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::Duration;

use notify::event::{AccessKind, AccessMode};
use notify::{Event, EventKind, RecursiveMode, Watcher};
use skillhost_core::SkillName;
use tokio::sync::mpsc;

use crate::config::Layer;
use crate::error::RegistryError;
use crate::registry::Registry;
use crate::snapshot;

/// What an event touched: one skill, or (for an event on a layer itself, or a lost
/// event) everything.
#[derive(Debug)]
enum Touched {
    Skill(SkillName),
    Everything,
}

/// Start watching the registry's layers; the returned watcher must be kept alive. The
/// reload task ends when the watcher is dropped.
pub(crate) fn start(registry: &Arc<Registry>) -> Result<notify::RecommendedWatcher, RegistryError> {
    let (tx, rx) = mpsc::unbounded_channel();
    let layers = registry.layers.clone();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<Event>| match event {
        Ok(event) if relevant(&event.kind) => {
            for path in &event.paths {
                if let Some(touched) = touched(&layers, path) {
                    let _ = tx.send(touched);
                }
            }
        }
        Ok(_) => {}
        Err(error) => {
            tracing::warn!(%error, "file watcher error; rescanning every skill");
            let _ = tx.send(Touched::Everything);
        }
    })
    .map_err(|e| RegistryError::Watch { path: registry.config.user.clone(), message: e.to_string() })?;
    for (_, dir) in &registry.layers {
        if dir.is_dir() {
            watcher.watch(dir, RecursiveMode::Recursive).map_err(|e| RegistryError::Watch { path: dir.clone(), message: e.to_string() })?;
        }
    }
    tokio::spawn(run(Arc::downgrade(registry), rx, registry.config.debounce));
    Ok(watcher)
}

/// Opens and reads (ours included, when hashing) change nothing.
fn relevant(kind: &EventKind) -> bool {
    match kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        _ => true,
    }
}

/// The skill a path in a layer belongs to: the first component below the layer.
fn touched(layers: &[(Layer, PathBuf)], path: &Path) -> Option<Touched> {
    for (_, dir) in layers {
        let Ok(relative) = path.strip_prefix(dir) else { continue };
        return match relative.components().next() {
            None => Some(Touched::Everything),
            Some(Component::Normal(first)) => snapshot::entry_name(Path::new(first)).map(Touched::Skill),
            Some(_) => None,
        };
    }
    None
}

/// Collect touched names until the file system is quiet for `debounce` (at most 20
/// intervals, so a stream of writes cannot postpone reloads forever), then rescan them.
async fn run(registry: Weak<Registry>, mut rx: mpsc::UnboundedReceiver<Touched>, debounce: Duration) {
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        let deadline = tokio::time::Instant::now() + debounce * 20;
        while tokio::time::Instant::now() < deadline {
            match tokio::time::timeout(debounce, rx.recv()).await {
                Ok(Some(touched)) => batch.push(touched),
                Ok(None) | Err(_) => break,
            }
        }
        let Some(registry) = registry.upgrade() else { return };
        let result = if batch.iter().any(|t| matches!(t, Touched::Everything)) {
            registry.rescan_all().await
        } else {
            let names: BTreeSet<SkillName> = batch
                .into_iter()
                .filter_map(|t| match t {
                    Touched::Skill(name) => Some(name),
                    Touched::Everything => None,
                })
                .collect();
            registry.rescan(&names).await
        };
        if let Err(error) = result {
            tracing::error!(%error, "reload failed");
        }
    }
}
