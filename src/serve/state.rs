//! `--state-file`: the in-process logs saved at a stop (and periodically)
//! and restored at a start.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::*;

impl Service {
    /// Restores the logs saved in `path` (`--state-file`) into the
    /// in-process store, for the keys the configuration still limits
    /// (each under its limits now): a restart is no free burst. A missing
    /// file is a first start. A file that cannot be read is reported and
    /// the service starts empty: refusing to start would leave Envoy,
    /// which fails open by default, admitting everything. Returns what to
    /// report.
    pub(crate) fn restore(&mut self, path: &std::path::Path) -> String {
        let shown = path.display();
        let Some(limiter) = self.store.local_mut() else {
            return format!("--state-file {shown}: kept in Redis, nothing to restore");
        };
        let text = match std::fs::read(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return format!("no saved state at {shown} (a first start)");
            }
            Err(e) => return format!("--state-file {shown}: {e}; starting empty"),
        };
        let mut snapshot: crate::snapshot::KeyedSnapshot<String> =
            match serde_json::from_slice(&text) {
                Ok(snapshot) => snapshot,
                Err(e) => {
                    return format!(
                        "--state-file {shown}: not a saved state ({e}); starting empty"
                    );
                }
            };
        let config = self.config.load();
        let before = snapshot.keys.len();
        snapshot
            .keys
            .retain(|k| quota_of(&config, &k.key).is_some());
        match limiter.restore(&snapshot) {
            Ok(restored) => format!(
                "restored {} of {} from {shown} ({} no longer limited, {} expired, {} over the budget)",
                counted(restored.admissions, "admission"),
                counted(restored.keys, "key"),
                counted(before - snapshot.keys.len(), "key"),
                counted(restored.expired, "admission"),
                counted(restored.refused_keys, "key"),
            ),
            Err(e) => format!("--state-file {shown}: {e}; starting empty"),
        }
    }

    /// Saves the in-process logs to `path` (`--state-file`): written
    /// beside it, then renamed over it, so a crash mid-write leaves the
    /// last state whole. Returns what to report.
    pub(crate) fn save(&self, path: &std::path::Path) -> Result<String, String> {
        let Some(limiter) = self.store.local() else {
            return Ok(String::new());
        };
        // One save at a time: a periodic one and the last share the file
        // written beside the state.
        let _saving = self
            .saving
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let shown = path.display();
        let snapshot = limiter.snapshot();
        let text =
            serde_json::to_vec(&snapshot).map_err(|e| format!("--state-file {shown}: {e}"))?;
        let partial = partial(path);
        std::fs::write(&partial, &text)
            .and_then(|()| std::fs::rename(&partial, path))
            .map_err(|e| format!("--state-file {shown}: {e}"))?;
        let admissions: usize = snapshot.keys.iter().map(|k| k.admissions.len()).sum();
        Ok(format!(
            "saved {} of {} to {shown}",
            counted(admissions, "admission"),
            counted(snapshot.keys.len(), "key"),
        ))
    }
}

/// `n` and `what`, plural unless one: `1 key`, `2 keys`.
fn counted(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// Saves the state to `path` every `every` (`--state-interval`), off the
/// runtime's workers; a failure is reported each time.
pub(super) async fn save_every(service: Arc<Service>, path: PathBuf, every: Duration) {
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let (service, path) = (Arc::clone(&service), path.clone());
        match tokio::task::spawn_blocking(move || service.save(&path)).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => eprintln!("slidelog serve: {e}"),
            Err(e) => eprintln!("slidelog serve: saving the state: {e}"),
        }
    }
}

/// Where `--state-file`'s state is written before it is renamed over
/// `path` (and where a start tries whether it can be).
pub(super) fn partial(path: &std::path::Path) -> PathBuf {
    let mut partial = path.as_os_str().to_owned();
    partial.push(".partial");
    PathBuf::from(partial)
}
