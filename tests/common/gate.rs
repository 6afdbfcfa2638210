//! A key that stops its thread whenever the thread hashes it: the test
//! steps a keyed limiter's insert or reconfiguration through each point
//! at which it hashes the key, and acts in between.

use std::cell::RefCell;
use std::hash::{Hash, Hasher};
use std::sync::mpsc::{Receiver, Sender, channel};

use slidelog::KeySize;

/// A `u64` key; hashing [`Gated::STOP`] or [`Gated::STOP_TOO`] on a gated
/// thread ([`gate`]) stops that thread until the test resumes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Gated(pub u64);

impl Gated {
    /// A key whose hash stops a gated thread.
    pub const STOP: Gated = Gated(u64::MAX);
    /// Another.
    pub const STOP_TOO: Gated = Gated(u64::MAX - 1);
}

impl KeySize for Gated {}

impl Hash for Gated {
    fn hash<H: Hasher>(&self, state: &mut H) {
        if *self == Gated::STOP || *self == Gated::STOP_TOO {
            GATE.with(|gate| {
                if let Some((stopped, resume)) = &*gate.borrow() {
                    // A test that gave up (a failed assertion) dropped its
                    // ends: go on.
                    if stopped.send(()).is_ok() {
                        let _ = resume.recv();
                    }
                }
            });
        }
        self.0.hash(state);
    }
}

thread_local! {
    static GATE: RefCell<Option<(Sender<()>, Receiver<()>)>> = const { RefCell::new(None) };
}

/// The test's ends of a gated thread: a message on `stopped` for each stop
/// (disconnected once the thread is done), and `resume` to let it go on.
pub struct Stops {
    pub stopped: Receiver<()>,
    pub resume: Sender<()>,
}

impl Stops {
    /// Waits for the next stop: `false` once the thread finished.
    pub fn next(&self) -> bool {
        self.stopped.recv().is_ok()
    }

    /// Lets the stopped thread go on.
    pub fn go(&self) {
        self.resume.send(()).unwrap();
    }
}

/// Runs `f` on a new thread that stops at each hash of [`Gated::STOP`].
pub fn gate<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> (Stops, std::thread::JoinHandle<T>) {
    let (stopped_tx, stopped) = channel();
    let (resume, resume_rx) = channel();
    let handle = std::thread::spawn(move || {
        GATE.with(|gate| *gate.borrow_mut() = Some((stopped_tx, resume_rx)));
        let out = f();
        GATE.with(|gate| *gate.borrow_mut() = None);
        out
    });
    (Stops { stopped, resume }, handle)
}
