//! `--sync batch` off the serving loop: a thread that syncs the files
//! written (`fdatasync`, in the order given: the records before the
//! journal) at most every [`SYNC_EVERY`] once something was written, so
//! that the loop that acknowledges never waits for the disk.
//!
//! What a power cut can take is what was written since the last sync
//! began: [`SYNC_EVERY`] and the time one sync takes. A sync that fails
//! is reported by the next [`Background::check`], and the caller stops
//! acknowledging there.

use std::fs::File;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant as Wall};

use super::SYNC_EVERY;

/// The files and the thread's state, shared with it.
#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    /// A sync failed (its error is in `state`): read without the lock on
    /// every turn of the serving loop.
    failed: AtomicBool,
    /// Written since the last sync began (`state.written`, read without
    /// the lock: most writes find it set already).
    written: AtomicBool,
}

#[derive(Debug)]
struct State {
    /// Synced in this order.
    files: Vec<(Arc<File>, PathBuf)>,
    /// Written since the last sync began.
    written: bool,
    /// A sync is under way.
    syncing: bool,
    /// Syncs completed.
    done: u64,
    /// The first sync that failed, and why.
    error: Option<String>,
    stop: bool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Syncs its files on a thread of its own (see the module's docs).
#[derive(Debug)]
pub struct Background {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Background {
    /// Starts the thread that syncs `files`, in that order.
    ///
    /// # Errors
    ///
    /// No thread could be started.
    pub fn start(files: Vec<(File, PathBuf)>) -> Result<Background, String> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                files: files.into_iter().map(|(f, p)| (Arc::new(f), p)).collect(),
                written: false,
                syncing: false,
                done: 0,
                error: None,
                stop: false,
            }),
            wake: Condvar::new(),
            failed: AtomicBool::new(false),
            written: AtomicBool::new(false),
        });
        let thread = std::thread::Builder::new()
            .name("iomsg-sync".into())
            .spawn({
                let shared = Arc::clone(&shared);
                move || run(&shared)
            })
            .map_err(|e| format!("cannot start the sync thread: {e}"))?;
        Ok(Background {
            shared,
            thread: Some(thread),
        })
    }

    /// Something was written: it is synced within [`SYNC_EVERY`] (and the
    /// time a sync takes).
    pub fn written(&self) {
        if self.shared.written.load(Ordering::Acquire) {
            return;
        }
        let mut st = self.shared.lock();
        if !st.written {
            st.written = true;
            self.shared.written.store(true, Ordering::Release);
            self.shared.wake.notify_all();
        }
    }

    /// Replaces file `i` (a journal compacted into a new file); `i` past
    /// the last names the last.
    pub fn replace(&self, i: usize, file: File) {
        let mut st = self.shared.lock();
        let last = st.files.len().saturating_sub(1);
        if let Some(slot) = st.files.get_mut(i.min(last)) {
            slot.0 = Arc::new(file);
        }
    }

    /// The first sync that failed, if one did.
    ///
    /// # Errors
    ///
    /// Its error, naming the file.
    pub fn check(&self) -> Result<(), String> {
        if !self.shared.failed.load(Ordering::Acquire) {
            return Ok(());
        }
        match &self.shared.lock().error {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// Waits until everything written before the call is synced.
    ///
    /// # Errors
    ///
    /// A sync failed; the error names the file.
    pub fn sync_now(&self) -> Result<(), String> {
        let mut st = self.shared.lock();
        // A sync under way may have begun before the last write.
        let target = st.done + 1 + u64::from(st.syncing);
        st.written = true;
        self.shared.written.store(true, Ordering::Release);
        self.shared.wake.notify_all();
        while st.done < target && st.error.is_none() {
            st = self.shared.wake.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        drop(st);
        self.check()
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.shared.lock().stop = true;
        self.shared.wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The thread: waits for a write, for [`SYNC_EVERY`] since the last sync
/// began, then syncs every file in order.
fn run(shared: &Shared) {
    let mut last = Wall::now() - SYNC_EVERY;
    loop {
        let mut st = shared.lock();
        while !st.written && !st.stop {
            st = shared.wake.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        if !st.written {
            return;
        }
        let wait = SYNC_EVERY.saturating_sub(last.elapsed());
        if !wait.is_zero() && !st.stop {
            drop(st);
            std::thread::sleep(wait.min(Duration::from_millis(100)));
            continue;
        }
        st.written = false;
        shared.written.store(false, Ordering::Release);
        st.syncing = true;
        let files = st.files.clone();
        drop(st);
        last = Wall::now();
        let mut failed = None;
        for (f, path) in &files {
            if let Err(e) = f.sync_data() {
                failed = Some(format!("cannot sync {}: {e}", path.display()));
                break;
            }
        }
        let mut st = shared.lock();
        st.syncing = false;
        st.done += 1;
        if st.error.is_none() && failed.is_some() {
            st.error = failed;
            shared.failed.store(true, Ordering::Release);
        }
        shared.wake.notify_all();
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_write_is_synced_soon_and_sync_now_waits_for_it() {
        let path = std::env::temp_dir().join(format!("iomsg-bg-{}", std::process::id()));
        let f = File::create(&path).unwrap();
        let bg = Background::start(vec![(f.try_clone().unwrap(), path.clone())]).unwrap();
        let started = Wall::now();
        for _ in 0..100 {
            bg.written();
        }
        bg.sync_now().unwrap();
        assert!(bg.shared.lock().done >= 1);
        assert!(started.elapsed() < Duration::from_secs(5));
        bg.check().unwrap();
        drop(bg);
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn a_failed_sync_is_reported_by_check() {
        // fdatasync of a pipe fails (EINVAL).
        let (r, _w) = nix::unistd::pipe().unwrap();
        let f = File::from(r);
        let bg = Background::start(vec![(f, PathBuf::from("the-pipe"))]).unwrap();
        let e = bg.sync_now().unwrap_err();
        assert!(e.contains("cannot sync the-pipe"), "{e}");
        assert!(bg.check().is_err());
    }
}
