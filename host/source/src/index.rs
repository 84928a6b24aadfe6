//! Reading an Agent Skills well-known index (`/.well-known/agent-skills/index.json`,
//! discovery schema 0.2.0) and fetching a skill it lists ([`read`], [`fetch`], [`resolve`]).
//! The format itself (its JSON, its limits, the checks of its entries, [`parse`] and
//! [`publish`]) is [`skillhost_package::wellknown`], re-exported here, so the MCP front
//! serves an index without linking this crate's fetchers.
//!
//! An entry's `url` is resolved against the index's own URL, and fetched only when it is on
//! the index's own scheme, host and port (or a host `[sources] allow_hosts` names) and
//! within its reach ([`crate::http`]: a remote index never sends a fetch to a
//! loopback or private address). A `skill-md` entry is one
//! `SKILL.md`, the whole skill; an `archive` is a `.tar.gz` or `.zip` of the skill's folder,
//! unpacked under [`archive`](crate::archive)'s rules. The artifact's sha256 is checked
//! against the entry's `digest` before anything is unpacked. An index is refused whole when
//! it is larger than [`MAX_INDEX_BYTES`] or [`parse`] refuses it.

use std::collections::BTreeMap;

pub use skillhost_package::wellknown::{
    EntryKind, INDEX_FIX, Index, IndexEntry, IndexError, MAX_ENTRIES, MAX_INDEX_BYTES, Published, PublishedSkill, SCHEMA, SKILL_MD,
    WELL_KNOWN, parse, publish, sha256,
};

use crate::address::IndexAddr;
use crate::error::SourceError;
use crate::http::{self, Cap, Fetcher, Named};
use crate::{Artifact, Caps, FetchOptions, Fetched, Provenance, SignatureStatus};

/// Where an index is read from: a file of the reader's, or a site, through one fetcher.
enum Site {
    Local,
    Remote(Box<Fetcher>),
}

impl Site {
    async fn open(addr: &IndexAddr, options: &FetchOptions) -> Result<Self, SourceError> {
        match addr.index.scheme() {
            "file" => Ok(Site::Local),
            _ => Ok(Site::Remote(Box::new(Fetcher::new(&addr.index, &options.caps).await?))),
        }
    }

    /// The index, read (at most [`MAX_INDEX_BYTES`], and the download cap) and checked.
    async fn read(&self, addr: &IndexAddr, options: &FetchOptions) -> Result<Index, SourceError> {
        let cap = options.caps.download.min(MAX_INDEX_BYTES);
        let what = format!("the index {}", addr.index);
        let bytes = match self {
            Site::Local => {
                http::get(&addr.index, &what, &FetchOptions { caps: Caps { download: cap, ..options.caps.clone() }, ..options.clone() })
                    .await?
            }
            Site::Remote(fetcher) => fetcher.get(&addr.index, Named::Source, &what, Cap { bytes: cap, fix: Some(INDEX_FIX) }, None).await?,
        };
        Ok(parse(&addr.index, &bytes)?)
    }

    /// The artifact of `entry`: from a remote index, only where the index may send a fetch
    /// (its own host, or one the config allows; never a loopback or private address); from
    /// a local index, anywhere its entry says (the file is the reader's own word).
    async fn artifact(&self, entry: &IndexEntry, what: &str, options: &FetchOptions) -> Result<Vec<u8>, SourceError> {
        match self {
            Site::Local => http::get(&entry.url, what, options).await,
            Site::Remote(fetcher) => {
                let by = Named::Remote(format!("the index's entry for skill {}", entry.name));
                fetcher.get(&entry.url, by, what, Cap::of(options.caps.download), Some(&*options.progress)).await
            }
        }
    }
}

/// The index at `addr.index`, read (at most [`MAX_INDEX_BYTES`], and the download cap) and
/// checked.
pub async fn read(addr: &IndexAddr, options: &FetchOptions) -> Result<Index, SourceError> {
    Site::open(addr, options).await?.read(addr, options).await
}

/// The skill `addr.skill` of the index: its artifact downloaded (capped, from where the
/// index may send a fetch), its sha256 checked against the index's digest, then unpacked
/// in memory.
pub async fn fetch(addr: &IndexAddr, options: &FetchOptions) -> Result<Fetched, SourceError> {
    let site = Site::open(addr, options).await?;
    let index = site.read(addr, options).await?;
    let entry = index.entry(addr.skill.as_deref())?;
    let what = format!("skill {} of {}", entry.name, index.url);
    let bytes = site.artifact(entry, &what, options).await?;
    let actual = sha256(&bytes);
    if actual != entry.digest {
        return Err(SourceError::Digest { what, expected: entry.digest.clone(), actual });
    }
    let files = match entry.kind {
        EntryKind::Archive => crate::archive::unpack(&bytes, &what, &options.caps)?,
        EntryKind::SkillMd => {
            if bytes.len() as u64 > options.caps.unpacked {
                return Err(SourceError::TooLarge { what: format!("the {SKILL_MD} of {what}"), limit: options.caps.unpacked, fix: None });
            }
            BTreeMap::from([(SKILL_MD.to_owned(), bytes)])
        }
    };
    Ok(Fetched {
        artifact: Artifact::Folder(files),
        provenance: Provenance {
            source: addr.to_string(),
            pinned: addr.to_string(),
            digest: entry.digest.clone(),
            signature: SignatureStatus::NotChecked,
        },
    })
}

/// The digest the index lists now for `addr.skill`.
pub async fn resolve(addr: &IndexAddr, options: &FetchOptions) -> Result<String, SourceError> {
    let index = read(addr, options).await?;
    Ok(index.entry(addr.skill.as_deref())?.digest.clone())
}
