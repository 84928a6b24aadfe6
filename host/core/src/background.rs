//! Work nobody waits for yet (a compile ahead of its first call, the search index opening
//! beside a server's first answers), run on a thread of its own at a lower scheduling
//! priority, so that it takes the cores only when what someone waits for leaves them idle.

use std::future::Future;

/// The nice value of background work (0 is normal, 19 the lowest priority).
pub const BACKGROUND_NICE: i32 = 10;

/// Why background work gave no result.
#[derive(Debug, thiserror::Error)]
pub enum BackgroundError {
    /// No thread could be started for it.
    #[error("cannot start the {name} thread: {source}")]
    Spawn {
        /// The thread's name.
        name: String,
        /// Why not.
        source: std::io::Error,
    },
    /// Its thread panicked.
    #[error("the {name} thread panicked")]
    Panicked {
        /// The thread's name.
        name: String,
    },
}

/// Run `work` on a thread of its own named `name`, at [`BACKGROUND_NICE`] (Linux applies
/// a nice value to the calling thread alone; where it cannot be lowered the work runs at
/// normal priority). The result comes back like a blocking task's: an error if no thread
/// started or `work` panicked.
pub fn in_the_background<T, F>(name: &str, work: F) -> impl Future<Output = Result<T, BackgroundError>> + use<T, F>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let (done, result) = tokio::sync::oneshot::channel();
    let spawned = std::thread::Builder::new().name(name.to_owned()).spawn(move || {
        // Refused (a seccomp filter, say): the work runs at normal priority.
        let _ = rustix::process::setpriority_process(None, BACKGROUND_NICE);
        let _ = done.send(work());
    });
    let name = name.to_owned();
    async move {
        if let Err(source) = spawned {
            return Err(BackgroundError::Spawn { name, source });
        }
        result.await.map_err(|_| BackgroundError::Panicked { name })
    }
}
