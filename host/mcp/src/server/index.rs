//! The search index a session searches with: set when it is ready (a server answers
//! before its index has loaded), waited for by `tool_search` within a bound.

use super::*;

/// The search index in place, and whether a better one is on its way.
#[derive(Clone)]
pub(super) struct IndexSlot {
    /// `None`: none was given ([`SkillhostMcp::without_index`]): searches rank with the
    /// stand-in ([`SkillhostMcp::index_or_stand_in`]).
    pub(super) index: Option<Arc<SearchIndex>>,
    /// Whether [`SkillhostMcp::index_loading`]'s index is still opening.
    pub(super) loading: bool,
    /// Why the index that was opening did not come.
    pub(super) failed: Option<String>,
}

/// A search index on its way ([`SkillhostMcp::index_loading`]): hand it over with
/// [`ready`](Self::ready), or say it will not come with [`failed`](Self::failed) (dropping
/// it says so too).
pub struct IndexLoading {
    slot: tokio::sync::watch::Sender<IndexSlot>,
    settled: bool,
}

impl IndexLoading {
    /// The index opened: sessions that have not searched yet rank with it.
    pub fn ready(mut self, index: Arc<SearchIndex>) {
        self.settled = true;
        self.slot.send_modify(|slot| {
            slot.index = Some(index);
            slot.loading = false;
            slot.failed = None;
        });
    }

    /// The index did not open (`why`): sessions keep the one in place.
    pub fn failed(mut self, why: &str) {
        self.settled = true;
        let why = why.to_owned();
        self.slot.send_modify(|slot| {
            slot.loading = false;
            slot.failed = Some(why);
        });
    }
}

impl Drop for IndexLoading {
    fn drop(&mut self) {
        if !self.settled {
            self.slot.send_modify(|slot| {
                slot.loading = false;
                slot.failed = Some("opening it was abandoned".to_owned());
            });
        }
    }
}

impl SkillhostMcp {
    /// Rank searches with `index` from now on, in every session that has not searched
    /// yet: a session keeps the ranker of its first full-text search, so that the same
    /// query keeps its order within it.
    pub fn set_index(&self, index: Arc<SearchIndex>) {
        self.shared.index.send_modify(|slot| slot.index = Some(index));
    }

    /// Say that a better search index (hybrid, on disk, with the embedding model) is
    /// opening while the one in place (BM25 in memory) answers: a session's first
    /// full-text search waits for it up to [`McpConfig::first_search_wait`], then keeps
    /// whichever index it got for the rest of the session, and its answers say which
    /// ranker answered and why.
    pub fn index_loading(&self) -> IndexLoading {
        self.shared.index.send_modify(|slot| {
            slot.loading = true;
            slot.failed = None;
        });
        IndexLoading { slot: self.shared.index.clone(), settled: false }
    }

    /// The index a `tool` search with `args` ranks with: the session's for a full-text
    /// one ([`session_index`](Self::session_index)); a regex or exact one ranks without it.
    pub(super) async fn search_index(&self, tool: &'static str, args: &JsonObject) -> Result<builtin::SessionIndex, builtin::BuiltinError> {
        let index = if builtin::is_full_text(args) {
            self.session_index().await
        } else {
            let given = self.shared.index.borrow().index.clone();
            self.index_or_stand_in(given).map(|index| builtin::SessionIndex::pin(index, None, None))
        };
        index.map_err(|source| builtin::BuiltinError::Index { tool, source })
    }

    /// `given`, or else the stand-in: BM25 in memory, made at the first search that needs
    /// it (most sessions of a `serve` never do: the index on disk opens first), filled by
    /// the sync every search starts with.
    fn index_or_stand_in(&self, given: Option<Arc<SearchIndex>>) -> Result<Arc<SearchIndex>, skillhost_index::IndexError> {
        if let Some(index) = given {
            return Ok(index);
        }
        let mut stand_in = self.shared.stand_in.lock();
        if let Some(index) = stand_in.as_ref() {
            return Ok(index.clone());
        }
        let index = Arc::new(SearchIndex::new()?);
        *stand_in = Some(index.clone());
        Ok(index)
    }

    /// The index this session's full-text searches rank with: fixed at its first search,
    /// after waiting (bounded) for an index still opening and the skills still loading.
    pub(super) async fn session_index(&self) -> Result<builtin::SessionIndex, skillhost_index::IndexError> {
        self.session
            .ranker
            .get_or_try_init(|| async {
                let mut slot = self.shared.index.subscribe();
                let wait = self.shared.config.first_search_wait;
                // The skills found at start are searched for too. Still loading after the
                // wait: the slot says so below.
                let settled = async {
                    let _ = slot.wait_for(|s| !s.loading).await;
                    self.shared.registry.ready().await;
                };
                let _ = tokio::time::timeout(wait, settled).await;
                let slot = slot.borrow().clone();
                let index = self.index_or_stand_in(slot.index)?;
                Ok(builtin::SessionIndex::pin(index, slot.loading.then_some(wait), slot.failed))
            })
            .await
            .cloned()
    }
}
