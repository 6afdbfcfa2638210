//! Reloading: a new configuration applied with every key's history kept,
//! on a change to its files and on SIGHUP.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::*;

impl Service {
    /// Applies a new configuration: every live key whose limits changed
    /// keeps its history under the new ones.
    ///
    /// ```
    /// use slidelog::serve::{Config, Service};
    ///
    /// let service = Service::builder(Config::default()).build()?;
    /// service.reload(Config::from_yaml("domain: edge\ndescriptors: []\n")?);
    /// # Ok::<(), String>(())
    /// ```
    pub fn reload(&self, config: Config) {
        self.config.store(Arc::new(config));
        // Every key is judged by its quota in the new configuration,
        // keeping its log: in process every live key moves to it now (a key
        // no longer limited, to the smallest state, soon evicted); in Redis
        // each call sends its key's policies, and the script moves a key's
        // ring to them the first time it meets them.
        self.store.requota();
    }
}

/// Re-reads the configuration when `path` changes (a file watcher) and on
/// SIGHUP.
pub(super) fn watch(
    path: &std::path::Path,
    merge_domains: bool,
    service: Arc<Service>,
) -> Result<(), String> {
    // `true`: asked by SIGHUP, whose outcome is always told.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<bool>();
    let on_change = tx.clone();
    let root = path.to_path_buf();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        // Only a change to a file the configuration is read from: a log
        // written into its directory is none of its business.
        let relevant = event.is_ok_and(|e| {
            !e.kind.is_access() && e.paths.iter().any(|p| config::is_config_change(&root, p))
        });
        if relevant {
            let _ = on_change.send(false);
        }
    })
    .map_err(|e| format!("watching {}: {e}", path.display()))?;
    use notify::Watcher;
    // Watch the directory (editors replace files by renaming over them).
    let watched = if path.is_dir() {
        path.to_path_buf()
    } else {
        path.parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("."), PathBuf::from)
    };
    let depth = if path.is_dir() {
        notify::RecursiveMode::Recursive
    } else {
        notify::RecursiveMode::NonRecursive
    };
    watcher
        .watch(&watched, depth)
        .map_err(|e| format!("watching {}: {e}", watched.display()))?;
    #[cfg(unix)]
    {
        let on_hup = tx;
        tokio::spawn(async move {
            if let Ok(mut hup) =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
            {
                while hup.recv().await.is_some() {
                    let _ = on_hup.send(true);
                }
            }
        });
    }
    let path = path.to_path_buf();
    tokio::spawn(async move {
        let _watcher = watcher; // lives as long as the loop
        let mut last = None::<String>;
        while let Some(mut asked) = rx.recv().await {
            // Let a burst of events (write, rename) settle.
            tokio::time::sleep(Duration::from_millis(100)).await;
            while let Ok(hup) = rx.try_recv() {
                asked |= hup;
            }
            match Config::load(&path, merge_domains) {
                Ok(config) => {
                    let domains = config.domains.len();
                    // Moving every live key is a walk over the store: off
                    // the threads that answer calls.
                    let moving = Arc::clone(&service);
                    let _ = tokio::task::spawn_blocking(move || moving.reload(config)).await;
                    last = None;
                    metrics::counter!("ratelimit_service_config_load_success").increment(1);
                    eprintln!(
                        "slidelog serve: reloaded {} ({domains} domain{}); history kept",
                        path.display(),
                        if domains == 1 { "" } else { "s" }
                    );
                }
                Err(e) => {
                    metrics::counter!("ratelimit_service_config_load_error").increment(1);
                    // A file saved twice with the same fault is told once; a
                    // SIGHUP always hears back.
                    if asked || last.as_deref() != Some(e.as_str()) {
                        eprintln!(
                            "slidelog serve: reload refused, the previous configuration stays: {e}"
                        );
                    }
                    last = Some(e);
                }
            }
        }
    });
    Ok(())
}
