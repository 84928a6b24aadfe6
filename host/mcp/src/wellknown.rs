//! The Agent Skills well-known index of this host (`serve --http --publish-skills`):
//! `GET /.well-known/agent-skills/index.json` lists the approved instruction-only skills
//! (SKILL.md with its references and assets, nothing that runs), each as a `.tar.gz`
//! archive (or its one `SKILL.md`) with its sha256, served from the bytes the registry
//! hashed, so another skillhost can `install http://HOST:PORT/ --skill NAME`. It is built
//! from the registry at each request: a skill approved, changed or removed shows at once.
//! No bearer token is asked for these reads (what is published is meant to be fetched);
//! nothing else is reachable without one.

use std::collections::BTreeMap;

use skillhost_package::wellknown::{self, IndexError, Published, PublishedSkill, WELL_KNOWN};
use skillhost_registry::{INSTRUCTIONS_RUNTIME, Registry, TrustState};

use crate::knowledge::served_files;

/// The answer to a `GET` of `path` under [`WELL_KNOWN`]: status, content type, body.
pub fn respond(registry: &Registry, path: &str) -> (u16, &'static str, Vec<u8>) {
    let Some(file) = path.strip_prefix(WELL_KNOWN) else {
        return (404, "text/plain", b"not found\n".to_vec());
    };
    let published = match publish(registry) {
        Ok(published) => published,
        Err(e) => {
            tracing::warn!("the well-known skills index cannot be made: {e}");
            return (500, "text/plain", format!("the skills index cannot be made: {e}\n").into_bytes());
        }
    };
    if file == "index.json" {
        return (200, "application/json", published.index_json);
    }
    match published.artifacts.get(file) {
        Some(bytes) if file.ends_with(".tar.gz") => (200, "application/gzip", bytes.clone()),
        Some(bytes) => (200, "text/markdown; charset=utf-8", bytes.clone()),
        None => (404, "text/plain", b"no such skill artifact; see index.json\n".to_vec()),
    }
}

/// The index and artifacts of the approved instruction-only skills, in name order.
fn publish(registry: &Registry) -> Result<Published, IndexError> {
    let mut skills = Vec::new();
    for entry in registry.catalog() {
        let Some(loaded) = entry.loaded.as_ref() else { continue };
        if entry.state != TrustState::Approved || loaded.runtime != INSTRUCTIONS_RUNTIME {
            continue;
        }
        let Ok(served) = served_files(&entry) else { continue };
        if !served.withheld.is_empty() {
            // Part of a skill is not a skill: leave it out rather than publish it cut.
            tracing::info!(skill = %entry.name, "not published in the well-known index: some of its files are over the resource limits");
            continue;
        }
        let files: BTreeMap<String, Vec<u8>> = served.files.iter().map(|(path, bytes)| ((*path).to_owned(), bytes.to_vec())).collect();
        skills.push(PublishedSkill { name: entry.name.clone(), description: loaded.description.clone(), files });
    }
    skills.sort_by(|a, b| a.name.cmp(&b.name));
    wellknown::publish(&skills)
}
